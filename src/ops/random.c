/* random.c - counter-based random numbers with explicit keys: key key_split fold_in
 * uniform normal bernoulli categorical permutation (docs/random.md).
 *
 * The generator is Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC 2011): a keyed bijection of a 64-bit counter. A key is an i64[]
 * scalar holding 64 key bits (high word first); every random value is a pure function of
 * the key and of the value's position, so results do not depend on the backend, the run,
 * the thread count or the order elements are computed in.
 *
 * Invariants:
 *  - Samplers read the block of counter j (64 bits: bits(K, j)) for element j; 32-bit
 *    consumers take word j%2 of block j/2. Samplers never use a counter with the top bit
 *    set; key_split uses exactly those (counter 2^63 + i for child i), and fold_in first
 *    derives a subkey at the last counter (which no split reaches), so the three never
 *    share a block.
 *  - No op here has a gradient with respect to a key (they are integers); uniform and
 *    normal have no float input, so gradients flow around them (reparameterisation:
 *    add(mu, mul(sigma, normal(k, shape=[...]))) differentiates in mu and sigma).
 *  - Kernels do not allocate: permutation shuffles in its output (Fisher-Yates).
 */
#include "ops.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

/* ---- Threefry-2x32-20 ---- */

static inline uint32_t rotl32(uint32_t x, unsigned r) { return (x << r) | (x >> (32u - r)); }

/* One round: mix, rotate by r, xor. Four rounds, then a key injection (s = 1..5). */
#define TF_ROUND(r)  (x0 += x1, x1 = rotl32(x1, (r)), x1 ^= x0)
#define TF_INJECT(s) (x0 += ks[(s) % 3], x1 += ks[((s) + 1) % 3] + (uint32_t)(s))

void tg_threefry2x32(const uint32_t key[2], const uint32_t ctr[2], uint32_t out[2]) {
    const uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
    uint32_t x0 = ctr[0] + ks[0], x1 = ctr[1] + ks[1];
    TF_ROUND(13), TF_ROUND(15), TF_ROUND(26), TF_ROUND(6), TF_INJECT(1);
    TF_ROUND(17), TF_ROUND(29), TF_ROUND(16), TF_ROUND(24), TF_INJECT(2);
    TF_ROUND(13), TF_ROUND(15), TF_ROUND(26), TF_ROUND(6), TF_INJECT(3);
    TF_ROUND(17), TF_ROUND(29), TF_ROUND(16), TF_ROUND(24), TF_INJECT(4);
    TF_ROUND(13), TF_ROUND(15), TF_ROUND(26), TF_ROUND(6), TF_INJECT(5);
    out[0] = x0;
    out[1] = x1;
}

/* The block of 64-bit counter c under 64-bit key k (high words first). */
static uint64_t block(uint64_t k, uint64_t c) {
    const uint32_t key[2] = {(uint32_t)(k >> 32), (uint32_t)k};
    const uint32_t ctr[2] = {(uint32_t)(c >> 32), (uint32_t)c};
    uint32_t o[2];
    tg_threefry2x32(key, ctr, o);
    return (uint64_t)o[0] << 32 | o[1];
}

static uint64_t key_of(const tg_tensor *t) {
    return (uint64_t)tg_load_i64(tg_tensor_data(t), t->dtype);
}

static void key_store(tg_tensor *t, int64_t i, uint64_t k) {
    ((int64_t *)tg_tensor_data(t))[i] = tg_ops_wrap_i64(k);
}

#define SPLIT_BASE ((uint64_t)1 << 63) /* key_split's counters: 2^63 + i */
#define FOLD_CTR   UINT64_MAX          /* fold_in's subkey counter */

/* [0, 1) with 53 random bits; (0, 1) when `open` (half a step shifted). */
static double unit53(uint64_t b, bool open) {
    return ((double)(b >> 11) + (open ? 0.5 : 0.0)) * 0x1p-53;
}

/* ---- shared checks ---- */

static tg_status need_key(tg_infer *ic, int i) {
    const tg_type *t = &ic->in[i];
    if (t->dtype == TG_DT_I64 && t->ndim == 0) return TG_OK;
    char buf[TG_TYPE_STR_MAX];
    return tg_infer_fail(ic, TG_ETYPE,
                         "input %d must be a key (i64[], made by key, key_split or fold_in), "
                         "got %s",
                         i, tg_type_str(t, buf, sizeof buf));
}

/* Integer (or bool) inputs become i64; weak integer literals too. */
static tg_status promote_keys(tg_infer *ic, tg_dtype *want) {
    for (int i = 0; i < ic->nin; i++) {
        tg_dtype dt = (tg_dtype)ic->in[i].dtype;
        if (tg_dtype_is_int(dt) || dt == TG_DT_BOOL) want[i] = TG_DT_I64;
    }
    return TG_OK;
}

/* The `shape` attribute (static extents >= 0) into o. */
static tg_status shape_from_attr(tg_infer *ic, const tg_aval *a, tg_type *o) {
    if (a->n > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "shape has %d dimensions, more than %d", a->n,
                             TG_MAX_DIMS);
    o->ndim = (uint8_t)a->n;
    for (int d = 0; d < a->n; d++) {
        if (a->ints[d] < 0)
            return tg_infer_fail(ic, TG_EINVAL, "shape: extent %lld is negative",
                                 (long long)a->ints[d]);
        o->shape[d] = a->ints[d];
    }
    return TG_OK;
}

static void type_set(tg_type *o, tg_dtype dt) {
    memset(o, 0, sizeof *o);
    o->dtype = (uint8_t)dt;
}

static int64_t out_size(const tg_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* ---- key ---- */

static const tg_attr_spec key_attrs[] = {
    {"seed", TG_AS_INT, 0, 1, {.kind = TG_ATTR_NONE}},
};

static tg_status infer_key(tg_infer *ic) {
    bool attr = ic->attrs[0].kind != TG_ATTR_NONE;
    if (attr == (ic->nin == 1))
        return tg_infer_fail(ic, TG_EINVAL,
                             "takes the seed either as an input, key(s), or as an attribute, "
                             "key(seed=7)");
    if (ic->nin == 1 && (ic->in[0].dtype != TG_DT_I64 || ic->in[0].ndim != 0)) {
        char buf[TG_TYPE_STR_MAX];
        return tg_infer_fail(ic, TG_ETYPE, "the seed must be an integer scalar, got %s",
                             tg_type_str(&ic->in[0], buf, sizeof buf));
    }
    type_set(&ic->out[0], TG_DT_I64);
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_key(tg_kern *k) {
    uint64_t seed = k->nin == 1 ? key_of(k->in[0]) : (uint64_t)k->attrs[0].i;
    key_store(k->out[0], 0, seed);
    return TG_OK;
}

const tg_op_def tg_op_key = {
    .name = "key",
    .min_in = 0,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_CONSTRUCT,
    .attrs = key_attrs,
    .nattrs = (int)TG_COUNTOF(key_attrs),
    .promote = promote_keys,
    .infer = infer_key,
    .ref = ref_key,
    .grad = TG_GRAD_NONE,
};

/* ---- key_split ---- */

static const tg_attr_spec split_attrs[] = {
    {"n", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 2}},
};

static tg_status infer_key_split(tg_infer *ic) {
    if (need_key(ic, 0) != TG_OK) return ic->status;
    if (ic->attrs[0].i < 1)
        return tg_infer_fail(ic, TG_EINVAL, "n must be at least 1, got %lld",
                             (long long)ic->attrs[0].i);
    type_set(&ic->out[0], TG_DT_I64);
    ic->out[0].ndim = 1;
    ic->out[0].shape[0] = ic->attrs[0].i;
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_key_split(tg_kern *k) {
    uint64_t key = key_of(k->in[0]);
    for (int64_t i = 0; i < k->out[0]->shape[0]; i++)
        key_store(k->out[0], i, block(key, SPLIT_BASE + (uint64_t)i));
    return TG_OK;
}

const tg_op_def tg_op_key_split = {
    .name = "key_split",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = split_attrs,
    .nattrs = (int)TG_COUNTOF(split_attrs),
    .promote = promote_keys,
    .infer = infer_key_split,
    .ref = ref_key_split,
    .grad = TG_GRAD_NONE,
};

/* ---- fold_in ---- */

static tg_status infer_fold_in(tg_infer *ic) {
    if (need_key(ic, 0) != TG_OK) return ic->status;
    if (ic->in[1].dtype != TG_DT_I64 || ic->in[1].ndim != 0) {
        char buf[TG_TYPE_STR_MAX];
        return tg_infer_fail(ic, TG_ETYPE, "data must be an integer scalar, got %s",
                             tg_type_str(&ic->in[1], buf, sizeof buf));
    }
    type_set(&ic->out[0], TG_DT_I64);
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_fold_in(tg_kern *k) {
    uint64_t sub = block(key_of(k->in[0]), FOLD_CTR);
    key_store(k->out[0], 0, block(sub, key_of(k->in[1])));
    return TG_OK;
}

const tg_op_def tg_op_fold_in = {
    .name = "fold_in",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .promote = promote_keys,
    .infer = infer_fold_in,
    .ref = ref_fold_in,
    .grad = TG_GRAD_NONE,
};

/* ---- uniform, normal ---- */

static const tg_attr_spec uniform_attrs[] = {
    {"shape", TG_AS_INTS, 0, 0, {.kind = TG_ATTR_INTS, .n = 0}},
    {"dtype", TG_AS_DTYPE, 0, 0, {.kind = TG_ATTR_INT, .i = TG_DT_F32}},
    {"minval", TG_AS_FLOAT, 0, 0, {.kind = TG_ATTR_FLOAT, .f = 0.0}},
    {"maxval", TG_AS_FLOAT, 0, 0, {.kind = TG_ATTR_FLOAT, .f = 1.0}},
};

static const tg_attr_spec normal_attrs[] = {
    {"shape", TG_AS_INTS, 0, 0, {.kind = TG_ATTR_INTS, .n = 0}},
    {"dtype", TG_AS_DTYPE, 0, 0, {.kind = TG_ATTR_INT, .i = TG_DT_F32}},
};

/* uniform and normal: a float array of the `shape` attribute. */
static tg_status infer_sample(tg_infer *ic) {
    if (need_key(ic, 0) != TG_OK) return ic->status;
    tg_dtype dt = (tg_dtype)ic->attrs[1].i;
    if (!tg_dtype_is_float(dt))
        return tg_infer_fail(ic, TG_ETYPE, "dtype must be f32 or f64, got %s", tg_dtype_name(dt));
    type_set(&ic->out[0], dt);
    if (shape_from_attr(ic, &ic->attrs[0], &ic->out[0]) != TG_OK) return ic->status;
    if (ic->op->nattrs > 2) {
        double lo = ic->attrs[2].f, hi = ic->attrs[3].f;
        double big = dt == TG_DT_F32 ? FLT_MAX : DBL_MAX;
        if (!(lo < hi))
            return tg_infer_fail(ic, TG_EINVAL, "minval (%g) must be below maxval (%g)", lo, hi);
        if (!(fabs(lo) <= big && fabs(hi) <= big))
            return tg_infer_fail(ic, TG_EINVAL,
                                 "minval (%g) and maxval (%g) must be finite %s values", lo, hi,
                                 tg_dtype_name(dt));
    }
    ic->nout = 1;
    return TG_OK;
}

/* lo + (hi - lo) * u for u in [0, 1). When hi - lo overflows (a range wider than the
 * largest double, as in [-1e308, 1e308]), the same in halves: halving such large bounds is
 * exact, and 2 * (lo/2 + (hi/2 - lo/2) * u) stays below hi. Ordinary ranges take the first
 * form, so their values do not change. */
static double scale_unit(double lo, double hi, double u) {
    double span = hi - lo;
    if (isfinite(span)) return lo + span * u;
    return 2.0 * (0.5 * lo + (0.5 * hi - 0.5 * lo) * u);
}

static tg_status ref_uniform(tg_kern *k) {
    uint64_t key = key_of(k->in[0]);
    tg_tensor *o = k->out[0];
    int64_t n = out_size(o);
    double lo = k->attrs[2].f, hi = k->attrs[3].f;
    if (o->dtype == TG_DT_F32) {
        float *y = tg_tensor_data(o), top = nextafterf((float)hi, -INFINITY);
        for (int64_t j = 0; j < n; j += 2) { /* element j: word j%2 of block j/2 */
            uint64_t b = block(key, (uint64_t)j >> 1);
            for (int64_t e = j; e < j + 2 && e < n; e++) {
                uint32_t w = (uint32_t)(e & 1 ? b : b >> 32);
                double u = (double)(w >> 8) * 0x1p-24; /* [0, 1), 24 bits */
                float v = (float)scale_unit(lo, hi, u);
                y[e] = v < (float)lo ? (float)lo : v > top ? top : v;
            }
        }
    } else {
        double *y = tg_tensor_data(o), top = nextafter(hi, -INFINITY);
        for (int64_t j = 0; j < n; j++) {
            double v = scale_unit(lo, hi, unit53(block(key, (uint64_t)j), false));
            y[j] = v < lo ? lo : v > top ? top : v;
        }
    }
    return TG_OK;
}

#define TWO_PI 6.283185307179586476925286766559

/* Box-Muller, one value per element: f32 takes both words of block j, f64 blocks 2j and
 * 2j+1 (53 bits each); computed in double. */
static tg_status ref_normal(tg_kern *k) {
    uint64_t key = key_of(k->in[0]);
    tg_tensor *o = k->out[0];
    int64_t n = out_size(o);
    bool f32 = o->dtype == TG_DT_F32;
    for (int64_t j = 0; j < n; j++) {
        double u1, u2;
        if (f32) {
            uint64_t b = block(key, (uint64_t)j);
            u1 = ((double)(b >> 32) + 1.0) * 0x1p-32; /* (0, 1] */
            u2 = (double)(uint32_t)b * 0x1p-32;
        } else {
            u1 = 1.0 - unit53(block(key, 2 * (uint64_t)j), false); /* (0, 1] */
            u2 = unit53(block(key, 2 * (uint64_t)j + 1), false);
        }
        double z = sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2);
        if (f32)
            ((float *)tg_tensor_data(o))[j] = (float)z;
        else
            ((double *)tg_tensor_data(o))[j] = z;
    }
    return TG_OK;
}

const tg_op_def tg_op_uniform = {
    .name = "uniform",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_CONSTRUCT,
    .attrs = uniform_attrs,
    .nattrs = (int)TG_COUNTOF(uniform_attrs),
    .promote = promote_keys,
    .infer = infer_sample,
    .ref = ref_uniform,
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_normal = {
    .name = "normal",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_CONSTRUCT,
    .attrs = normal_attrs,
    .nattrs = (int)TG_COUNTOF(normal_attrs),
    .promote = promote_keys,
    .infer = infer_sample,
    .ref = ref_normal,
    .grad = TG_GRAD_NONE,
};

/* ---- bernoulli ---- */

static const tg_attr_spec bernoulli_attrs[] = {
    {"shape", TG_AS_INTS, 0, 1, {.kind = TG_ATTR_NONE}},
};

/* The key becomes i64, p a float (f64 unless it is a float already). */
static tg_status promote_bernoulli(tg_infer *ic, tg_dtype *want) {
    promote_keys(ic, want);
    if (!tg_dtype_is_float((tg_dtype)ic->in[1].dtype) || ic->in[1].weak) want[1] = TG_DT_F64;
    return TG_OK;
}

static tg_status infer_bernoulli(tg_infer *ic) {
    if (need_key(ic, 0) != TG_OK) return ic->status;
    const tg_type *p = &ic->in[1];
    tg_type *o = &ic->out[0];
    type_set(o, TG_DT_BOOL);
    if (ic->attrs[0].kind == TG_ATTR_NONE) {
        o->ndim = p->ndim;
        memcpy(o->shape, p->shape, sizeof o->shape[0] * p->ndim);
    } else {
        if (shape_from_attr(ic, &ic->attrs[0], o) != TG_OK) return ic->status;
        bool ok = p->ndim <= o->ndim;
        for (int d = 0; ok && d < p->ndim; d++) {
            int64_t pe = p->shape[d], oe = o->shape[d + o->ndim - p->ndim];
            ok = pe == oe || pe == 1 || (pe < 0 && !ic->runtime);
        }
        if (!ok) {
            char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
            return tg_infer_fail(ic, TG_ESHAPE, "p of type %s does not broadcast to %s",
                                 tg_type_str(p, a, sizeof a), tg_type_str(o, b, sizeof b));
        }
    }
    ic->nout = 1;
    return TG_OK;
}

/* Offset in elements from element [0,...] of t to the element that broadcasts to C-order
 * position `flat` of shape sh[0..nd). */
static int64_t bcast_offset(const tg_tensor *t, const int64_t *sh, int nd, int64_t flat) {
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t i = sh[d] ? flat % sh[d] : 0;
        flat = sh[d] ? flat / sh[d] : 0;
        int td = d - (nd - t->ndim);
        if (td >= 0 && t->shape[td] != 1) off += i * t->strides[td];
    }
    return off;
}

static tg_status ref_bernoulli(tg_kern *k) {
    uint64_t key = key_of(k->in[0]);
    const tg_tensor *p = k->in[1];
    tg_tensor *o = k->out[0];
    int64_t n = out_size(o);
    const char *pd = tg_tensor_data(p);
    size_t es = tg_dtype_size(p->dtype);
    bool *y = tg_tensor_data(o);
    for (int64_t j = 0; j < n; j++) {
        double pj = tg_load_f64(pd + (size_t)bcast_offset(p, o->shape, o->ndim, j) * es, p->dtype);
        y[j] = unit53(block(key, (uint64_t)j), false) < pj;
    }
    return TG_OK;
}

const tg_op_def tg_op_bernoulli = {
    .name = "bernoulli",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = bernoulli_attrs,
    .nattrs = (int)TG_COUNTOF(bernoulli_attrs),
    .promote = promote_bernoulli,
    .infer = infer_bernoulli,
    .ref = ref_bernoulli,
    .grad = TG_GRAD_NONE,
};

/* ---- categorical ---- */

static const tg_attr_spec categorical_attrs[] = {
    {"axis", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = -1}},
};

static tg_status promote_categorical(tg_infer *ic, tg_dtype *want) {
    promote_keys(ic, want);
    if (!tg_dtype_is_float((tg_dtype)ic->in[1].dtype)) want[1] = TG_DT_F64;
    return TG_OK;
}

static tg_status infer_categorical(tg_infer *ic) {
    if (need_key(ic, 0) != TG_OK) return ic->status;
    const tg_type *l = &ic->in[1];
    int ax;
    if (l->ndim == 0) return tg_infer_fail(ic, TG_ESHAPE, "logits must have at least one axis");
    if (!tg_axis_norm(ic->attrs[0].i, l->ndim, &ax))
        return tg_infer_fail(ic, TG_EINVAL, "axis %lld is out of range for %d dimensions",
                             (long long)ic->attrs[0].i, l->ndim);
    if (l->shape[ax] == 0) return tg_infer_fail(ic, TG_ESHAPE, "no category along axis %d", ax);
    tg_type *o = &ic->out[0];
    type_set(o, TG_DT_I64);
    for (int d = 0; d < l->ndim; d++)
        if (d != ax) o->shape[o->ndim++] = l->shape[d];
    ic->nout = 1;
    return TG_OK;
}

/* Gumbel-max: the category maximising logit + G, G = -log(-log(u)) drawn for each logit
 * (u in (0, 1) from the block of the logit's C-order position); the first on ties. */
static tg_status ref_categorical(tg_kern *k) {
    uint64_t key = key_of(k->in[0]);
    const tg_tensor *l = k->in[1];
    int ax;
    tg_axis_norm(k->attrs[0].i, l->ndim, &ax);
    int64_t outer = 1, inner = 1, c = l->shape[ax];
    for (int d = 0; d < ax; d++) outer *= l->shape[d];
    for (int d = ax + 1; d < l->ndim; d++) inner *= l->shape[d];
    int64_t *y = tg_tensor_data(k->out[0]);
    for (int64_t a = 0; a < outer; a++)
        for (int64_t b = 0; b < inner; b++) {
            int64_t best = 0;
            double bv = -INFINITY;
            for (int64_t i = 0; i < c; i++) {
                int64_t j = (a * c + i) * inner + b;
                double u = unit53(block(key, (uint64_t)j), true);
                double v = tg_tensor_get_f64(l, j) - log(-log(u));
                if (v > bv) {
                    bv = v;
                    best = i;
                }
            }
            y[a * inner + b] = best;
        }
    return TG_OK;
}

const tg_op_def tg_op_categorical = {
    .name = "categorical",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = categorical_attrs,
    .nattrs = (int)TG_COUNTOF(categorical_attrs),
    .promote = promote_categorical,
    .infer = infer_categorical,
    .ref = ref_categorical,
    .grad = TG_GRAD_NONE,
    .batch = tg_batch_none, /* a draw per example needs a key per example */
};

/* ---- permutation ---- */

static const tg_attr_spec permutation_attrs[] = {
    {"n", TG_AS_INT, 1, 0, {.kind = TG_ATTR_NONE}},
};

static tg_status infer_permutation(tg_infer *ic) {
    if (need_key(ic, 0) != TG_OK) return ic->status;
    if (ic->attrs[0].i < 0)
        return tg_infer_fail(ic, TG_EINVAL, "n must be at least 0, got %lld",
                             (long long)ic->attrs[0].i);
    type_set(&ic->out[0], TG_DT_I64);
    ic->out[0].ndim = 1;
    ic->out[0].shape[0] = ic->attrs[0].i;
    ic->nout = 1;
    return TG_OK;
}

/* High 64 bits of a * b. */
static uint64_t mulhi64(uint64_t a, uint64_t b) {
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* Fisher-Yates from the end: position i swaps with j = floor(bits(K, i) * (i + 1) / 2^64). */
static tg_status ref_permutation(tg_kern *k) {
    uint64_t key = key_of(k->in[0]);
    int64_t n = k->out[0]->shape[0], *y = tg_tensor_data(k->out[0]);
    for (int64_t i = 0; i < n; i++) y[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)mulhi64(block(key, (uint64_t)i), (uint64_t)i + 1);
        int64_t t = y[i];
        y[i] = y[j];
        y[j] = t;
    }
    return TG_OK;
}

const tg_op_def tg_op_permutation = {
    .name = "permutation",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_CONSTRUCT,
    .attrs = permutation_attrs,
    .nattrs = (int)TG_COUNTOF(permutation_attrs),
    .promote = promote_keys,
    .infer = infer_permutation,
    .ref = ref_permutation,
    .grad = TG_GRAD_NONE,
};
