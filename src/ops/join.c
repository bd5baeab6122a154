/* join.c - joining, splitting and constructors: concatenate stack split zeros ones full
 * alloc arange eye tril triu shape size.
 *
 * One record per op, NumPy semantics (np.concatenate, np.stack, np.split, np.zeros,
 * np.ones, np.full, np.arange, np.eye, np.tril, np.triu; alloc is PyTensor's Alloc).
 * - concatenate/stack promote their inputs together (NEP 50) and check the extents that
 *   must agree statically where both are known; inference runs again on concrete types at
 *   run time, so a '?' that disagrees is caught there with the same message.
 * - split has one output per piece (nout decided by inference); pieces are copies.
 * - alloc's output extents come from 0-d integer inputs: a constant input gives a static
 *   extent, any other a '?'; the kernel allocates its output (self_alloc).
 * - arange computes its length and values as NumPy 1.24 does: length ceil((stop-start)/
 *   step) (exactly for integers), element 0 is start, element 1 is start+step, and the
 *   rest start + i*delta with delta = element 1 - element 0, in the output dtype's own
 *   arithmetic (float32 in float, integers wrapping).
 * - arange also takes its bounds as 0-d integer inputs, arange(stop) or arange(start,
 *   stop) (the gradients of take_along and concatenate need lengths known only at run
 *   time); a constant input gives a static length, any other a '?', and the kernel
 *   allocates its output (self_alloc).
 * - Gradients: concatenate/stack give each input its block of the cotangent, split joins
 *   its pieces' cotangents (zeros for unused pieces), full/alloc sum the cotangent onto
 *   the value, tril/triu mask it; the other constructors and shape/size have none.
 * Invariants: reference kernels read inputs through their strides (any sign, 0-size) and
 * never make a view that reaches outside a buffer (0-size pieces are skipped).
 */
#include "ops.h"

#include <math.h>
#include <stdio.h>

/* ---- helpers ---- */

enum { CAT_BOOL, CAT_INT, CAT_FLOAT };

static int dt_cat(tg_dtype dt) {
    if (dt == TG_DT_BOOL) return CAT_BOOL;
    return tg_dtype_is_float(dt) ? CAT_FLOAT : CAT_INT;
}

/* NEP 50 promotion of any number of types, folded two at a time over the strong ones and
 * then once with the highest weak category (tg_promote_types on all of them at once). */
static tg_dtype promote_all(const tg_type *in, int n) {
    tg_type strong = {0}, weak = {0};
    bool have_strong = false, have_weak = false;
    for (int i = 0; i < n; i++) {
        if (in[i].weak) {
            if (!have_weak || dt_cat((tg_dtype)in[i].dtype) > dt_cat((tg_dtype)weak.dtype))
                weak = in[i];
            have_weak = true;
        } else if (!have_strong) {
            strong = in[i];
            have_strong = true;
        } else {
            const tg_type *p[2] = {&strong, &in[i]};
            strong.dtype = (uint8_t)tg_promote_types(p, 2);
        }
    }
    const tg_type *p[2];
    int m = 0;
    if (have_strong) p[m++] = &strong;
    if (have_weak) p[m++] = &weak;
    return tg_promote_types(p, m);
}

static tg_status promote_join(tg_infer *ic, tg_dtype *want) {
    if (ic->nin < 1) return tg_infer_fail(ic, TG_EINVAL, "needs at least one input");
    tg_dtype dt = promote_all(ic->in, ic->nin);
    for (int i = 0; i < ic->nin; i++) want[i] = dt;
    return TG_OK;
}

static void type_init(tg_type *o, tg_dtype dt, int ndim) {
    memset(o, 0, sizeof *o);
    o->dtype = (uint8_t)dt;
    o->ndim = (uint8_t)ndim;
}

/* "[2,-1]" into buf (always terminated). */
static const char *ints_str(const int64_t *v, int n, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i <= n && used + 1 < cap; i++) {
        int w = i == n ? snprintf(buf + used, cap - used, "%s", n ? "]" : "[]")
                       : snprintf(buf + used, cap - used, "%s%lld", i ? "," : "[", (long long)v[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

/* Checks the extents of a constructor's `shape` attribute and fills out's shape. */
static tg_status shape_attr(tg_infer *ic, const tg_aval *a, tg_type *out) {
    char buf[256];
    if (a->n > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "shape has %d dimensions, more than %d", a->n,
                             TG_MAX_DIMS);
    for (int i = 0; i < a->n; i++)
        if (a->ints[i] < 0)
            return tg_infer_fail(ic, TG_EINVAL, "negative dimensions are not allowed (shape %s)",
                                 ints_str(a->ints, a->n, buf, sizeof buf));
    int64_t size;
    if (!tg_shape_size(a->n, a->ints, &size))
        return tg_infer_fail(ic, TG_ELIMIT, "array is too big (shape %s)",
                             ints_str(a->ints, a->n, buf, sizeof buf));
    out->ndim = (uint8_t)a->n;
    for (int i = 0; i < a->n; i++) out->shape[i] = a->ints[i];
    return TG_OK;
}

/* Checks that a value of type v broadcasts to the shape of o (one-directional, right
 * aligned, NumPy's rule with the '?' rule of DESIGN.md). Where o has a '?' and v a
 * static extent other than a broadcasting 1, o takes that extent when fill_unknown. */
static tg_status check_bcast_to(tg_infer *ic, const tg_type *v, tg_type *o, bool fill_unknown) {
    char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
    if (v->ndim > o->ndim)
        return tg_infer_fail(ic, TG_ESHAPE, "cannot broadcast a value of type %s to %s",
                             tg_type_str(v, a, sizeof a), tg_type_str(o, b, sizeof b));
    int lead = o->ndim - v->ndim;
    for (int i = 0; i < v->ndim; i++) {
        int64_t e = v->shape[i], *t = &o->shape[lead + i];
        bool nob = e == 1 && ((v->nobcast >> i) & 1u);
        if (e == 1 && !nob) continue;
        if (e < 0) continue; /* checked again on concrete types */
        if (*t < 0) {
            if (fill_unknown) *t = e;
            continue;
        }
        if (e == *t) continue;
        if (nob)
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "cannot broadcast a value of type %s to %s: axis %d has extent "
                                 "1 where the type says '?', which does not broadcast (declare "
                                 "the dimension as 1 to broadcast)",
                                 tg_type_str(v, a, sizeof a), tg_type_str(o, b, sizeof b), i);
        return tg_infer_fail(ic, TG_ESHAPE, "cannot broadcast a value of type %s to %s",
                             tg_type_str(v, a, sizeof a), tg_type_str(o, b, sizeof b));
    }
    return TG_OK;
}

/* The failure of tg_tensor_view: out of memory, or (a bug) a view outside the buffer. */
static tg_status view_failed(tg_kern *k) {
    const char *m = tg_last_error();
    return tg_kern_fail(k, strstr(m, "out of memory") ? TG_ENOMEM : TG_EINTERNAL,
                        "cannot make a view: %s", m);
}

/* Copies src into the block of dst that starts at `start` along `axis` and has src's
 * shape there (dst and src have the same rank). */
static tg_status copy_block(tg_kern *k, tg_tensor *dst, int axis, int64_t start,
                            const tg_tensor *src) {
    if (tg_tensor_size(src) == 0) return TG_OK;
    int64_t off = dst->offset + start * dst->strides[axis];
    tg_tensor *v = tg_tensor_view(dst, dst->ndim, src->shape, dst->strides, off);
    if (!v) return view_failed(k);
    tg_tensor_copy_into(v, src);
    tg_tensor_free(v);
    return TG_OK;
}

/* Writes src broadcast (one-directional, already checked) into dst. */
static tg_status copy_bcast(tg_kern *k, tg_tensor *dst, const tg_tensor *src) {
    if (tg_tensor_size(dst) == 0) return TG_OK;
    int64_t strides[TG_MAX_DIMS];
    int lead = dst->ndim - src->ndim;
    for (int i = 0; i < dst->ndim; i++) {
        int a = i - lead;
        strides[i] = a < 0 || src->shape[a] == 1 ? 0 : src->strides[a];
    }
    tg_tensor *v = tg_tensor_view(src, dst->ndim, dst->shape, strides, src->offset);
    if (!v) return view_failed(k);
    tg_tensor_copy_into(dst, v);
    tg_tensor_free(v);
    return TG_OK;
}

/* Stores v (converted to t's dtype) into every element of t. */
static void fill_all(tg_tensor *t, double v) {
    if (tg_tensor_size(t) == 0) return;
    int64_t idx[TG_MAX_DIMS] = {0};
    do {
        tg_store_f64(tg_tensor_at(t, idx), t->dtype, v);
    } while (tg_index_next(t->ndim, t->shape, idx));
}

static tg_status axis_fail(tg_infer *ic, int64_t axis, int ndim) {
    return tg_infer_fail(ic, TG_EINVAL, "axis %lld is out of bounds for an array of dimension %d",
                         (long long)axis, ndim);
}

/* ---- gradient helpers ---- */

/* v's extent along axis as a 0-d i64 value (a literal when static). */
static tg_var *extent_var(tg_graph *g, tg_var *v, int axis) {
    if (v->type.shape[axis] >= 0) return tg_literal_int(g, v->type.shape[axis]);
    tg_var *shape = tg_apply(g, "shape", &v, 1, NULL, 0);
    tg_slice at = {.start = axis, .is_index = true};
    return tg_slice_apply(g, shape, &at, 1);
}

/* v[:, ..., start:stop] along `axis` (v[:, ..., start:] when open_stop). */
static tg_var *slice_axis(tg_graph *g, tg_var *v, int axis, int64_t start, int64_t stop,
                          bool open_stop) {
    tg_slice s[TG_MAX_DIMS];
    for (int i = 0; i < axis; i++) s[i] = (tg_slice){.omit = TG_SLICE_OMIT_ALL};
    s[axis] = (tg_slice){.start = start,
                         .stop = stop,
                         .omit = TG_SLICE_NO_STEP | (open_stop ? TG_SLICE_NO_STOP : 0)};
    return tg_slice_apply(g, v, s, axis + 1);
}

/* ---- concatenate ---- */

static const tg_attr_spec axis0_attrs[] = {
    {"axis", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 0}},
};

/* Merges the extents of input i into o on every axis but `skip` (-1: none), remembering in
 * src which input fixed each extent. Fails naming both inputs and their types. */
static tg_status merge_extents(tg_infer *ic, int i, int skip, tg_type *o, int *src) {
    const tg_type *t = &ic->in[i];
    char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
    for (int d = 0; d < o->ndim; d++) {
        if (d == skip) continue;
        int64_t e = t->shape[d];
        if (e < 0) continue;
        if (o->shape[d] < 0) {
            o->shape[d] = e;
            src[d] = i;
        } else if (o->shape[d] != e) {
            return tg_infer_fail(
                ic, TG_ESHAPE, "input %d (%s) does not match input %d (%s) on axis %d", i,
                tg_type_str(t, a, sizeof a), src[d], tg_type_str(&ic->in[src[d]], b, sizeof b), d);
        }
        if (e == 1 && ((t->nobcast >> d) & 1u)) o->nobcast |= 1u << d;
    }
    return TG_OK;
}

/* Checks that every input has a rank and dtype equal to input 0's. */
static tg_status same_rank(tg_infer *ic) {
    const tg_type *x0 = &ic->in[0];
    char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
    for (int i = 1; i < ic->nin; i++) {
        const tg_type *t = &ic->in[i];
        if (t->ndim != x0->ndim)
            return tg_infer_fail(
                ic, TG_ESHAPE, "input %d (%s) has rank %d, input 0 (%s) has rank %d", i,
                tg_type_str(t, a, sizeof a), t->ndim, tg_type_str(x0, b, sizeof b), x0->ndim);
        if (t->dtype != x0->dtype)
            return tg_infer_fail(ic, TG_ETYPE, "input %d (%s) and input 0 (%s) differ in dtype", i,
                                 tg_type_str(t, a, sizeof a), tg_type_str(x0, b, sizeof b));
    }
    return TG_OK;
}

static tg_status infer_concatenate(tg_infer *ic) {
    if (ic->nin < 1) return tg_infer_fail(ic, TG_EINVAL, "needs at least one input");
    const tg_type *x0 = &ic->in[0];
    char a[TG_TYPE_STR_MAX];
    if (x0->ndim == 0)
        return tg_infer_fail(ic, TG_ESHAPE,
                             "zero-dimensional arrays cannot be concatenated (input 0 is %s)",
                             tg_type_str(x0, a, sizeof a));
    int ax;
    if (!tg_axis_norm(ic->attrs[0].i, x0->ndim, &ax))
        return axis_fail(ic, ic->attrs[0].i, x0->ndim);
    if (same_rank(ic) != TG_OK) return ic->status;
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)x0->dtype, x0->ndim);
    int src[TG_MAX_DIMS] = {0};
    for (int d = 0; d < o->ndim; d++) o->shape[d] = -1;
    int64_t total = 0;
    bool unknown = false;
    for (int i = 0; i < ic->nin; i++) {
        if (merge_extents(ic, i, ax, o, src) != TG_OK) return ic->status;
        int64_t e = ic->in[i].shape[ax];
        if (e < 0) {
            unknown = true;
        } else if (total > INT64_MAX - e) {
            return tg_infer_fail(ic, TG_ELIMIT, "the concatenated extent is too large");
        } else {
            total += e;
        }
    }
    o->shape[ax] = unknown ? -1 : total;
    o->nobcast &= ~(1u << ax);
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_concatenate(tg_kern *k) {
    tg_tensor *y = k->out[0];
    int ax;
    if (!tg_axis_norm(k->attrs[0].i, y->ndim, &ax))
        return tg_kern_fail(k, TG_EINTERNAL, "axis out of range");
    int64_t pos = 0;
    for (int i = 0; i < k->nin; i++) {
        if (copy_block(k, y, ax, pos, k->in[i]) != TG_OK) return k->status;
        pos += k->in[i]->shape[ax];
    }
    return TG_OK;
}

/* Each input gets its block of the cotangent: a static slice where the block's bounds can
 * be written with static numbers (from the front, or from the back), otherwise a take of
 * arange(start, stop) whose bounds come from shape() at run time. */
static tg_status vjp_concatenate(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *gy = gout[0];
    int ax;
    if (!tg_axis_norm(n->attrs[0].i, n->out[0]->type.ndim, &ax))
        return tg_ir_fail(g, TG_EINTERNAL, "concatenate gradient: bad axis"), g->status;
    int64_t pre = 0; /* static extent before input i, when pre_known */
    bool pre_known = true;
    tg_var *pre_v = NULL; /* that offset as a value, once it is not static */
    for (int i = 0; i < n->nin && g->status == TG_OK; i++) {
        tg_var *x = n->in[i];
        int64_t len = x->type.shape[ax], post = 0;
        bool post_known = true;
        for (int j = i + 1; j < n->nin; j++) {
            int64_t e = n->in[j]->type.shape[ax];
            if (e < 0)
                post_known = false;
            else
                post += e;
        }
        if (tg_ops_float_in(n, i)) {
            int64_t stop_back = -post; /* with post == 0: to the end */
            if (len == 0)
                gin[i] = slice_axis(g, gy, ax, 0, 0, false);
            else if (pre_known && post_known)
                gin[i] = slice_axis(g, gy, ax, pre, stop_back, post == 0);
            else if (len > 0 && post_known)
                gin[i] = slice_axis(g, gy, ax, -(len + post), stop_back, post == 0);
            else if (pre_known && len > 0)
                gin[i] = slice_axis(g, gy, ax, pre, pre + len, false);
            else {
                tg_var *start = pre_known ? tg_literal_int(g, pre) : pre_v;
                tg_var *b[2] = {start, tg_add(g, start, extent_var(g, x, ax))};
                tg_var *idx = tg_apply(g, "arange", b, 2, NULL, 0);
                tg_attr a = TG_A_INT("axis", ax);
                gin[i] = tg_apply(g, "take", (tg_var *[]){gy, idx}, 2, &a, 1);
            }
        }
        /* the offset of the next input */
        if (pre_known && len >= 0) {
            pre += len;
        } else {
            tg_var *base = pre_known ? tg_literal_int(g, pre) : pre_v;
            pre_v = tg_add(g, base, extent_var(g, x, ax));
            pre_known = false;
        }
    }
    return g->status;
}

const tg_op_def tg_op_concatenate = {
    .name = "concatenate",
    .min_in = 1,
    .max_in = -1,
    .nout = 1,
    .kind = TG_KIND_SHAPE,
    .attrs = axis0_attrs,
    .nattrs = (int)TG_COUNTOF(axis0_attrs),
    .promote = promote_join,
    .infer = infer_concatenate,
    .ref = ref_concatenate,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_concatenate,
};

/* ---- stack ---- */

static tg_status infer_stack(tg_infer *ic) {
    if (ic->nin < 1) return tg_infer_fail(ic, TG_EINVAL, "needs at least one input");
    const tg_type *x0 = &ic->in[0];
    if (x0->ndim + 1 > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "stacking gives rank %d, more than %d", x0->ndim + 1,
                             TG_MAX_DIMS);
    int ax;
    if (!tg_axis_norm(ic->attrs[0].i, x0->ndim + 1, &ax))
        return axis_fail(ic, ic->attrs[0].i, x0->ndim + 1);
    if (same_rank(ic) != TG_OK) return ic->status;
    tg_type m;
    type_init(&m, (tg_dtype)x0->dtype, x0->ndim);
    int src[TG_MAX_DIMS] = {0};
    for (int d = 0; d < m.ndim; d++) m.shape[d] = -1;
    for (int i = 0; i < ic->nin; i++)
        if (merge_extents(ic, i, -1, &m, src) != TG_OK) return ic->status;
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)x0->dtype, x0->ndim + 1);
    for (int d = 0, s = 0; d < o->ndim; d++) {
        if (d == ax) {
            o->shape[d] = ic->nin;
            continue;
        }
        o->shape[d] = m.shape[s];
        if ((m.nobcast >> s) & 1u) o->nobcast |= 1u << d;
        s++;
    }
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_stack(tg_kern *k) {
    tg_tensor *y = k->out[0];
    int ax;
    if (!tg_axis_norm(k->attrs[0].i, y->ndim, &ax))
        return tg_kern_fail(k, TG_EINTERNAL, "axis out of range");
    int64_t strides[TG_MAX_DIMS];
    for (int d = 0, s = 0; d < y->ndim; d++)
        if (d != ax) strides[s++] = y->strides[d];
    for (int i = 0; i < k->nin; i++) {
        const tg_tensor *x = k->in[i];
        if (tg_tensor_size(x) == 0) continue;
        tg_tensor *v =
            tg_tensor_view(y, x->ndim, x->shape, strides, y->offset + (int64_t)i * y->strides[ax]);
        if (!v) return view_failed(k);
        tg_tensor_copy_into(v, x);
        tg_tensor_free(v);
    }
    return TG_OK;
}

/* Input i gets g[:, ..., i] (the index along the stacking axis). */
static tg_status vjp_stack(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    int ax;
    if (!tg_axis_norm(n->attrs[0].i, n->out[0]->type.ndim, &ax))
        return tg_ir_fail(g, TG_EINTERNAL, "stack gradient: bad axis"), g->status;
    tg_slice s[TG_MAX_DIMS];
    for (int d = 0; d < ax; d++) s[d] = (tg_slice){.omit = TG_SLICE_OMIT_ALL};
    for (int i = 0; i < n->nin; i++) {
        if (!tg_ops_float_in(n, i)) continue;
        s[ax] = (tg_slice){.start = i, .is_index = true};
        gin[i] = tg_slice_apply(g, gout[0], s, ax + 1);
    }
    return g->status;
}

const tg_op_def tg_op_stack = {
    .name = "stack",
    .min_in = 1,
    .max_in = -1,
    .nout = 1,
    .kind = TG_KIND_SHAPE,
    .attrs = axis0_attrs,
    .nattrs = (int)TG_COUNTOF(axis0_attrs),
    .promote = promote_join,
    .infer = infer_stack,
    .ref = ref_stack,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_stack,
};

/* ---- split ---- */

enum { SPLIT_SECTIONS, SPLIT_INDICES, SPLIT_AXIS };
static const tg_attr_spec split_attrs[] = {
    [SPLIT_SECTIONS] = {"sections", TG_AS_INT, 0, 1, {.kind = TG_ATTR_NONE}},
    [SPLIT_INDICES] = {"indices", TG_AS_INTS, 0, 1, {.kind = TG_ATTR_NONE}},
    [SPLIT_AXIS] = {"axis", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 0}},
};

/* The pieces of an axis of extent `ext` (-1: unknown; then a piece's start and length
 * are -1 unless they are known anyway). */
typedef struct split_plan {
    int n;                      /* number of pieces */
    int64_t start[TG_MAX_OUTS]; /* first index of each piece */
    int64_t len[TG_MAX_OUTS];   /* its extent */
} split_plan;

/* Python's clamping of a slice bound into [0, ext] (ext known). */
static int64_t clamp_bound(int64_t v, int64_t ext) {
    if (v < 0) {
        v += ext;
        return v < 0 ? 0 : v;
    }
    return v > ext ? ext : v;
}

static tg_status plan_split(tg_infer *ic, const tg_aval *attrs, int64_t ext, split_plan *p) {
    const tg_aval *sec = &attrs[SPLIT_SECTIONS], *ind = &attrs[SPLIT_INDICES];
    if ((sec->kind == TG_ATTR_NONE) == (ind->kind == TG_ATTR_NONE))
        return tg_infer_fail(ic, TG_EINVAL, "give exactly one of 'sections' and 'indices'");
    if (sec->kind != TG_ATTR_NONE) {
        int64_t s = sec->i;
        if (s <= 0)
            return tg_infer_fail(
                ic, TG_EINVAL, "number of sections must be larger than 0, got %lld", (long long)s);
        if (s > TG_MAX_OUTS)
            return tg_infer_fail(ic, TG_ELIMIT,
                                 "%lld sections are more than the %d outputs a node may have",
                                 (long long)s, TG_MAX_OUTS);
        if (ext >= 0 && ext % s != 0)
            return tg_infer_fail(ic, TG_ESHAPE, "%lld is not divisible into %lld sections",
                                 (long long)ext, (long long)s);
        p->n = (int)s;
        for (int i = 0; i < p->n; i++) {
            p->len[i] = ext < 0 ? -1 : ext / s;
            p->start[i] = ext < 0 ? -1 : i * (ext / s);
        }
        return TG_OK;
    }
    if (ind->n + 1 > TG_MAX_OUTS)
        return tg_infer_fail(ic, TG_ELIMIT,
                             "%d indices give more than the %d outputs a node may have", ind->n,
                             TG_MAX_OUTS);
    p->n = ind->n + 1;
    for (int i = 0; i < p->n; i++) {
        bool open_end = i == ind->n; /* the last piece runs to the end */
        int64_t st = i == 0 ? 0 : ind->ints[i - 1];
        int64_t en = open_end ? 0 : ind->ints[i];
        if (ext >= 0) {
            int64_t a = clamp_bound(st, ext), b = open_end ? ext : clamp_bound(en, ext);
            p->start[i] = a;
            p->len[i] = b > a ? b - a : 0;
        } else {
            /* non-negative bounds keep their order under clamping */
            bool empty = !open_end && st >= 0 && en >= 0 && en <= st;
            p->start[i] = -1;
            p->len[i] = empty ? 0 : -1;
        }
    }
    return TG_OK;
}

static tg_status infer_split(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    char a[TG_TYPE_STR_MAX];
    if (x->ndim == 0)
        return tg_infer_fail(ic, TG_ESHAPE, "cannot split a 0-d array (%s)",
                             tg_type_str(x, a, sizeof a));
    int ax;
    int64_t axis = ic->attrs[SPLIT_AXIS].i;
    if (!tg_axis_norm(axis, x->ndim, &ax)) return axis_fail(ic, axis, x->ndim);
    split_plan p;
    if (plan_split(ic, ic->attrs, x->shape[ax], &p) != TG_OK) return ic->status;
    for (int i = 0; i < p.n; i++) {
        ic->out[i] = *x;
        ic->out[i].weak = 0;
        ic->out[i].shape[ax] = p.len[i];
        ic->out[i].nobcast &= ~(1u << ax);
    }
    ic->nout = p.n;
    return TG_OK;
}

static tg_status ref_split(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    int ax;
    if (!tg_axis_norm(k->attrs[SPLIT_AXIS].i, x->ndim, &ax))
        return tg_kern_fail(k, TG_EINTERNAL, "axis out of range");
    split_plan p;
    tg_infer ic = {.op = &tg_op_split};
    if (plan_split(&ic, k->attrs, x->shape[ax], &p) != TG_OK)
        return tg_kern_fail(k, ic.status, "%s", ic.msg);
    if (p.n != k->nout) return tg_kern_fail(k, TG_EINTERNAL, "split into %d, not %d", p.n, k->nout);
    for (int i = 0; i < p.n; i++) {
        tg_tensor *y = k->out[i];
        if (tg_tensor_size(y) == 0) continue;
        tg_tensor *v = tg_tensor_view(x, x->ndim, y->shape, x->strides,
                                      x->offset + p.start[i] * x->strides[ax]);
        if (!v) return view_failed(k);
        tg_tensor_copy_into(y, v);
        tg_tensor_free(v);
    }
    return TG_OK;
}

/* The pieces' cotangents joined again; a piece nobody used (NULL) contributes zeros. */
static tg_status vjp_split(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *parts[TG_MAX_OUTS];
    if (!tg_ops_float_in(n, 0)) return g->status;
    for (int k = 0; k < n->nout; k++)
        parts[k] = gout[k] ? gout[k] : tg_grad_zeros_like(g, n->out[k]);
    tg_attr a = TG_A_INT("axis", n->attrs[SPLIT_AXIS].i);
    gin[0] = tg_apply(g, "concatenate", parts, n->nout, &a, 1);
    return g->status;
}

const tg_op_def tg_op_split = {
    .name = "split",
    .min_in = 1,
    .max_in = 1,
    .nout = -1,
    .kind = TG_KIND_SHAPE,
    .attrs = split_attrs,
    .nattrs = (int)TG_COUNTOF(split_attrs),
    .infer = infer_split,
    .ref = ref_split,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_split,
};

/* ---- zeros, ones ---- */

static const tg_attr_spec fill_attrs[] = {
    {"shape", TG_AS_INTS, 1, 0, {.kind = TG_ATTR_NONE}},
    {"dtype", TG_AS_DTYPE, 0, 0, {.kind = TG_ATTR_INT, .i = TG_DT_F64}},
};

static tg_status infer_fill(tg_infer *ic) {
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)ic->attrs[1].i, 0);
    if (shape_attr(ic, &ic->attrs[0], o) != TG_OK) return ic->status;
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_zeros(tg_kern *k) {
    fill_all(k->out[0], 0.0);
    return TG_OK;
}

static tg_status ref_ones(tg_kern *k) {
    fill_all(k->out[0], 1.0);
    return TG_OK;
}

const tg_op_def tg_op_zeros = {
    .name = "zeros",
    .min_in = 0,
    .max_in = 0,
    .nout = 1,
    .kind = TG_KIND_CONSTRUCT,
    .attrs = fill_attrs,
    .nattrs = (int)TG_COUNTOF(fill_attrs),
    .infer = infer_fill,
    .ref = ref_zeros,
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_ones = {
    .name = "ones",
    .min_in = 0,
    .max_in = 0,
    .nout = 1,
    .kind = TG_KIND_CONSTRUCT,
    .attrs = fill_attrs,
    .nattrs = (int)TG_COUNTOF(fill_attrs),
    .infer = infer_fill,
    .ref = ref_ones,
    .grad = TG_GRAD_NONE,
};

/* ---- full ---- */

static const tg_attr_spec full_attrs[] = {
    {"shape", TG_AS_INTS, 1, 0, {.kind = TG_ATTR_NONE}},
    {"dtype", TG_AS_DTYPE, 0, 1, {.kind = TG_ATTR_NONE}},
};

/* With a dtype, a weak literal becomes that dtype first (so an integer literal out of its
 * range is an error, NEP 50); a float literal meeting an integer dtype stays as it is and
 * the kernel truncates it, as np.full does. Typed values are converted by the kernel. */
static tg_status promote_full(tg_infer *ic, tg_dtype *want) {
    if (ic->attrs[1].kind == TG_ATTR_NONE || !ic->in[0].weak) return TG_OK;
    tg_dtype dt = (tg_dtype)ic->attrs[1].i;
    if (dt_cat((tg_dtype)ic->in[0].dtype) == CAT_FLOAT && !tg_dtype_is_float(dt)) return TG_OK;
    want[0] = dt;
    return TG_OK;
}

static tg_status infer_full(tg_infer *ic) {
    const tg_type *v = &ic->in[0];
    tg_type *o = &ic->out[0];
    tg_dtype dt = ic->attrs[1].kind == TG_ATTR_NONE ? (tg_dtype)v->dtype : (tg_dtype)ic->attrs[1].i;
    type_init(o, dt, 0);
    if (shape_attr(ic, &ic->attrs[0], o) != TG_OK) return ic->status;
    if (check_bcast_to(ic, v, o, false) != TG_OK) return ic->status;
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_full(tg_kern *k) { return copy_bcast(k, k->out[0], k->in[0]); }

/* full and alloc: the value gets the cotangent summed over the axes it was broadcast
 * along, in its own dtype; the dimension inputs of alloc get nothing (integers). */
static tg_status vjp_fill_value(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *v = n->in[0];
    if (!tg_ops_float_in(n, 0) || !tg_dtype_is_float((tg_dtype)gout[0]->type.dtype))
        return g->status;
    tg_var *gv = tg_grad_unbroadcast(g, gout[0], &v->type);
    if (gv && gv->type.dtype != v->type.dtype) gv = tg_cast(g, gv, (tg_dtype)v->type.dtype);
    gin[0] = gv;
    return g->status;
}

const tg_op_def tg_op_full = {
    .name = "full",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_CONSTRUCT,
    .attrs = full_attrs,
    .nattrs = (int)TG_COUNTOF(full_attrs),
    .promote = promote_full,
    .infer = infer_full,
    .ref = ref_full,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_fill_value,
};

/* ---- alloc ---- */

static tg_status infer_alloc(tg_infer *ic) {
    const tg_type *v = &ic->in[0];
    tg_type *o = &ic->out[0];
    char a[TG_TYPE_STR_MAX];
    int nd = ic->nin - 1;
    if (nd > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "%d dimensions are more than %d", nd, TG_MAX_DIMS);
    type_init(o, (tg_dtype)v->dtype, nd);
    for (int d = 0; d < nd; d++) {
        const tg_type *t = &ic->in[d + 1];
        if (t->ndim != 0 || !tg_dtype_is_int((tg_dtype)t->dtype))
            return tg_infer_fail(ic, TG_ETYPE, "dimension %d must be a 0-d integer, got %s", d,
                                 tg_type_str(t, a, sizeof a));
        o->shape[d] = -1;
        int64_t e;
        if (tg_infer_const_int(ic, d + 1, &e)) {
            if (e < 0)
                return tg_infer_fail(ic, TG_EINVAL,
                                     "negative dimensions are not allowed (dimension %d is %lld)",
                                     d, (long long)e);
            o->shape[d] = e;
        }
    }
    if (check_bcast_to(ic, v, o, true) != TG_OK) return ic->status;
    int64_t size;
    if (tg_type_known(o) && !tg_shape_size(o->ndim, o->shape, &size))
        return tg_infer_fail(ic, TG_ELIMIT, "array is too big (%s)", tg_type_str(o, a, sizeof a));
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_alloc(tg_kern *k) {
    const tg_tensor *v = k->in[0];
    const tg_type *vs = &k->node->in[0]->type; /* static type: a '?' that is 1 never broadcasts */
    int nd = k->nin - 1;
    int64_t shape[TG_MAX_DIMS], size;
    char buf[256];
    if (nd > TG_MAX_DIMS) return tg_kern_fail(k, TG_ELIMIT, "too many dimensions");
    for (int d = 0; d < nd; d++) {
        const tg_tensor *t = k->in[d + 1];
        shape[d] = tg_load_i64(tg_tensor_data(t), t->dtype);
        if (shape[d] < 0)
            return tg_kern_fail(k, TG_EINVAL,
                                "negative dimensions are not allowed (dimension %d is %lld)", d,
                                (long long)shape[d]);
    }
    if (!tg_shape_size(nd, shape, &size))
        return tg_kern_fail(k, TG_ELIMIT, "array is too big (shape %s)",
                            ints_str(shape, nd, buf, sizeof buf));
    if (v->ndim > nd)
        return tg_kern_fail(k, TG_ESHAPE, "cannot broadcast a value of rank %d to shape %s",
                            v->ndim, ints_str(shape, nd, buf, sizeof buf));
    int lead = nd - v->ndim;
    for (int i = 0; i < v->ndim; i++) {
        int64_t e = v->shape[i], t = shape[lead + i];
        if (e == t) continue;
        if (e == 1 && vs->shape[i] == 1) continue;
        return tg_kern_fail(k, TG_ESHAPE,
                            "cannot broadcast a value with extent %lld on axis %d to shape %s%s",
                            (long long)e, i, ints_str(shape, nd, buf, sizeof buf),
                            e == 1 ? " (its type says '?', which does not broadcast: declare the "
                                     "dimension as 1 to broadcast)"
                                   : "");
    }
    tg_tensor *y = tg_tensor_new(k->ctx, (tg_dtype)k->node->out[0]->type.dtype, nd, shape);
    if (!y) return tg_kern_fail(k, TG_ENOMEM, "%s", tg_last_error());
    k->out[0] = y;
    return copy_bcast(k, y, v);
}

/* Over a batch (vectorize): the value's core rank padded to the extents', the batch extent in
 * front of them; the extents themselves must not vary over the batch. */
static tg_status batch_alloc(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                             tg_var **out, bool *ob) {
    (void)ob;
    tg_var *ins[TG_MAX_DIMS + 2];
    for (int k = 1; k < n->nin; k++)
        if (batched[k]) return tg_batch_refuse(b, n, "its extents vary over the batch");
    if (n->nin + 1 > TG_MAX_DIMS + 1) return tg_batch_refuse(b, n, "too many dimensions");
    ins[0] = tg_batch_pad(b, in[0], n->nin - 1);
    ins[1] = tg_batch_extent(b);
    for (int k = 1; k < n->nin; k++) ins[k + 1] = in[k];
    if (b->g->status == TG_OK) out[0] = tg_apply(b->g, "alloc", ins, n->nin + 1, NULL, 0);
    return b->g->status;
}

const tg_op_def tg_op_alloc = {
    .name = "alloc",
    .min_in = 1,
    .max_in = -1,
    .nout = 1,
    .kind = TG_KIND_CONSTRUCT,
    .infer = infer_alloc,
    .ref = ref_alloc,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_fill_value,
    .self_alloc = 1,
    .batch = batch_alloc,
};

/* ---- arange ---- */

enum { AR_START, AR_STOP, AR_STEP, AR_DTYPE };
static const tg_attr_spec arange_attrs[] = {
    [AR_START] = {"start", TG_AS_SCALAR, 0, 0, {.kind = TG_ATTR_INT, .i = 0}},
    [AR_STOP] = {"stop", TG_AS_SCALAR, 0, 1, {.kind = TG_ATTR_NONE}},
    [AR_STEP] = {"step", TG_AS_SCALAR, 0, 0, {.kind = TG_ATTR_INT, .i = 1}},
    [AR_DTYPE] = {"dtype", TG_AS_DTYPE, 0, 1, {.kind = TG_ATTR_NONE}},
};

static bool sc_is_int(const tg_aval *a) {
    return a->kind == TG_ATTR_INT || a->kind == TG_ATTR_BOOL;
}

static double sc_f64(const tg_aval *a) { return sc_is_int(a) ? (double)a->i : a->f; }

#define ARANGE_MAX (INT64_MAX / 8) /* longest result tg_shape_size accepts */

/* The dtype and length of arange, as NumPy 1.24 computes them. */
static tg_status arange_plan(tg_infer *ic, const tg_aval *at, tg_dtype *dt, int64_t *len) {
    const tg_aval *a0 = &at[AR_START], *a1 = &at[AR_STOP], *as = &at[AR_STEP];
    bool ints = sc_is_int(a0) && sc_is_int(a1) && sc_is_int(as);
    *dt = at[AR_DTYPE].kind != TG_ATTR_NONE ? (tg_dtype)at[AR_DTYPE].i
          : ints                            ? TG_DT_I64
                                            : TG_DT_F64;
    if (ints ? as->i == 0 : sc_f64(as) == 0.0)
        return tg_infer_fail(ic, TG_EINVAL, "step must not be zero");
    int64_t diff;
    if (ints && !__builtin_sub_overflow(a1->i, a0->i, &diff)) {
        /* exact ceil(diff / step); positive only when the signs agree */
        if (diff == 0 || (diff > 0) != (as->i > 0)) {
            *len = 0;
        } else {
            uint64_t ud = diff > 0 ? (uint64_t)diff : 0 - (uint64_t)diff;
            uint64_t us = as->i > 0 ? (uint64_t)as->i : 0 - (uint64_t)as->i;
            uint64_t q = ud / us + (ud % us != 0);
            if (q > (uint64_t)ARANGE_MAX)
                return tg_infer_fail(ic, TG_ELIMIT, "maximum allowed size exceeded");
            *len = (int64_t)q;
        }
    } else {
        double delta = sc_f64(a1) - sc_f64(a0), q = delta / sc_f64(as);
        if (q == 0.0 && delta != 0.0) { /* underflow, or a step of +-inf */
            *len = signbit(q) ? 0 : 1;
        } else {
            double c = ceil(q);
            if (isnan(c)) return tg_infer_fail(ic, TG_EINVAL, "cannot compute length");
            if (c > (double)ARANGE_MAX)
                return tg_infer_fail(ic, TG_ELIMIT, "maximum allowed size exceeded");
            *len = c > 0 ? (int64_t)c : 0;
        }
    }
    if (*dt == TG_DT_BOOL && *len > 2)
        return tg_infer_fail(ic, TG_ETYPE,
                             "a bool result has at most 2 elements, this one would have %lld",
                             (long long)*len);
    return TG_OK;
}

/* The attributes with the bounds given as inputs substituted: one input is `stop`, two
 * are `start` and `stop` (np.arange(stop), np.arange(start, stop)); they must be 0-d
 * integers, and the attributes they replace must be left out. vals[i] are the inputs'
 * values; known[i] false marks a value not known (a dummy 0 is used). */
static tg_status arange_bind(tg_infer *ic, const tg_aval *attrs, int nin, const tg_type *tin,
                             const int64_t *vals, tg_aval *at) {
    char a[TG_TYPE_STR_MAX];
    for (int i = 0; i < 4; i++) at[i] = attrs[i];
    if (nin == 0) {
        if (attrs[AR_STOP].kind == TG_ATTR_NONE)
            return tg_infer_fail(ic, TG_EINVAL,
                                 "missing attribute 'stop' (or the bounds as 0-d inputs)");
        return TG_OK;
    }
    if (nin > 2) return tg_infer_fail(ic, TG_EINVAL, "takes at most 2 inputs, got %d", nin);
    for (int i = 0; i < nin; i++)
        if (tin[i].ndim != 0 || !tg_dtype_is_int((tg_dtype)tin[i].dtype))
            return tg_infer_fail(ic, TG_ETYPE, "bound %d must be a 0-d integer, got %s", i,
                                 tg_type_str(&tin[i], a, sizeof a));
    bool start_set = !(attrs[AR_START].kind == TG_ATTR_INT && attrs[AR_START].i == 0);
    if (attrs[AR_STOP].kind != TG_ATTR_NONE || (nin == 2 && start_set))
        return tg_infer_fail(ic, TG_EINVAL,
                             "a bound given as an input cannot also be an attribute");
    at[AR_STOP] = (tg_aval){.kind = TG_ATTR_INT, .i = vals[nin - 1]};
    if (nin == 2) at[AR_START] = (tg_aval){.kind = TG_ATTR_INT, .i = vals[0]};
    return TG_OK;
}

static tg_status infer_arange(tg_infer *ic) {
    tg_dtype dt = TG_DT_F64;
    int64_t len = 0, vals[2] = {0, 0};
    tg_aval at[4];
    bool known = true;
    for (int i = 0; i < ic->nin && i < 2; i++) {
        if (!tg_infer_const_int(ic, i, &vals[i])) known = false;
    }
    if (arange_bind(ic, ic->attrs, ic->nin, ic->in, vals, at) != TG_OK) return ic->status;
    if (arange_plan(ic, at, &dt, &len) != TG_OK) return ic->status;
    type_init(&ic->out[0], dt, 1);
    ic->out[0].shape[0] = known ? len : -1;
    ic->nout = 1;
    return TG_OK;
}

/* Stores a scalar attribute into *p as dtype dt (ints wrap, floats truncate/round). */
static void store_scalar(void *p, tg_dtype dt, const tg_aval *a) {
    if (sc_is_int(a))
        tg_store_i64(p, dt, a->i);
    else
        tg_store_f64(p, dt, a->f);
}

/* Allocates its output (self_alloc): its length may depend on the inputs' values. */
static tg_status ref_arange(tg_kern *k) {
    tg_aval at[4];
    tg_type tin[2];
    int64_t vals[2] = {0, 0}, n = 0, i = 0;
    tg_dtype dt = TG_DT_F64;
    tg_infer ic = {.op = &tg_op_arange};
    for (int j = 0; j < k->nin && j < 2; j++) {
        tin[j] = (tg_type){.dtype = (uint8_t)k->in[j]->dtype, .ndim = (uint8_t)k->in[j]->ndim};
        if (k->in[j]->ndim == 0) vals[j] = tg_load_i64(tg_tensor_data(k->in[j]), k->in[j]->dtype);
    }
    if (arange_bind(&ic, k->attrs, k->nin, tin, vals, at) != TG_OK ||
        arange_plan(&ic, at, &dt, &n) != TG_OK)
        return tg_kern_fail(k, ic.status ? ic.status : TG_EINVAL, "%s", ic.msg);
    tg_tensor_free(k->out[0]); /* NULL from the interpreter (self_alloc) */
    k->out[0] = NULL;
    tg_tensor *y = tg_tensor_new(k->ctx, dt, 1, &n);
    if (!y) return tg_kern_fail(k, TG_ENOMEM, "cannot allocate the result: %s", tg_last_error());
    k->out[0] = y;
    const tg_aval *a0 = &at[AR_START], *as = &at[AR_STEP];
    if (n == 0) return TG_OK;
    store_scalar(tg_tensor_at(y, &i), dt, a0);
    if (n == 1) return TG_OK;
    /* element 1 is start + step, added as Python adds the arguments */
    i = 1;
    int64_t isum;
    if (sc_is_int(a0) && sc_is_int(as) && !__builtin_add_overflow(a0->i, as->i, &isum))
        tg_store_i64(tg_tensor_at(y, &i), dt, isum);
    else
        tg_store_f64(tg_tensor_at(y, &i), dt, sc_f64(a0) + sc_f64(as));
    int64_t zero = 0, one = 1;
    const void *p0 = tg_tensor_at(y, &zero), *p1 = tg_tensor_at(y, &one);
    if (dt == TG_DT_F32) {
        float s = (float)tg_load_f64(p0, dt), d = (float)tg_load_f64(p1, dt) - s;
        for (i = 2; i < n; i++) tg_store_f64(tg_tensor_at(y, &i), dt, (double)(s + (float)i * d));
    } else if (dt == TG_DT_F64) {
        double s = tg_load_f64(p0, dt), d = tg_load_f64(p1, dt) - s;
        for (i = 2; i < n; i++) tg_store_f64(tg_tensor_at(y, &i), dt, s + (double)i * d);
    } else {
        /* delta = element 1 - element 0 in the dtype (wrapping), then start + i*delta in
         * 64 bits, wrapped to the dtype on the store */
        int64_t s = tg_load_i64(p0, dt);
        char tmp[8];
        tg_store_i64(tmp, dt, tg_ops_wrap_i64((uint64_t)tg_load_i64(p1, dt) - (uint64_t)s));
        uint64_t d = (uint64_t)tg_load_i64(tmp, dt);
        for (i = 2; i < n; i++)
            tg_store_i64(tg_tensor_at(y, &i), dt, tg_ops_wrap_i64((uint64_t)s + (uint64_t)i * d));
    }
    return TG_OK;
}

const tg_op_def tg_op_arange = {
    .name = "arange",
    .min_in = 0,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_CONSTRUCT,
    .attrs = arange_attrs,
    .nattrs = (int)TG_COUNTOF(arange_attrs),
    .infer = infer_arange,
    .ref = ref_arange,
    .self_alloc = 1,
    .grad = TG_GRAD_NONE,
};

/* ---- eye ---- */

enum { EYE_N, EYE_M, EYE_K, EYE_DTYPE };
static const tg_attr_spec eye_attrs[] = {
    [EYE_N] = {"n", TG_AS_INT, 1, 0, {.kind = TG_ATTR_NONE}},
    [EYE_M] = {"m", TG_AS_INT, 0, 1, {.kind = TG_ATTR_NONE}},
    [EYE_K] = {"k", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 0}},
    [EYE_DTYPE] = {"dtype", TG_AS_DTYPE, 0, 0, {.kind = TG_ATTR_INT, .i = TG_DT_F64}},
};

static tg_status infer_eye(tg_infer *ic) {
    int64_t n = ic->attrs[EYE_N].i;
    int64_t m = ic->attrs[EYE_M].kind == TG_ATTR_NONE ? n : ic->attrs[EYE_M].i;
    if (n < 0 || m < 0)
        return tg_infer_fail(ic, TG_EINVAL, "negative dimensions are not allowed (n=%lld, m=%lld)",
                             (long long)n, (long long)m);
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)ic->attrs[EYE_DTYPE].i, 2);
    o->shape[0] = n;
    o->shape[1] = m;
    int64_t size;
    if (!tg_shape_size(2, o->shape, &size))
        return tg_infer_fail(ic, TG_ELIMIT, "array is too big (%lld x %lld)", (long long)n,
                             (long long)m);
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_eye(tg_kern *k) {
    tg_tensor *y = k->out[0];
    int64_t kd = k->attrs[EYE_K].i;
    size_t esz = tg_dtype_size(y->dtype);
    if (tg_tensor_size(y) == 0) return TG_OK;
    char one[16]; /* a 1 of y's dtype; the output comes zeroed (tg_kern) */
    tg_store_i64(one, y->dtype, 1);
    for (int64_t i = 0; i < y->shape[0]; i++) {
        if (kd > 0 && i > INT64_MAX - kd) break;
        int64_t idx[2] = {i, i + kd};
        if (idx[1] >= 0 && idx[1] < y->shape[1]) memcpy(tg_tensor_at(y, idx), one, esz);
    }
    return TG_OK;
}

const tg_op_def tg_op_eye = {
    .name = "eye",
    .min_in = 0,
    .max_in = 0,
    .nout = 1,
    .kind = TG_KIND_CONSTRUCT,
    .attrs = eye_attrs,
    .nattrs = (int)TG_COUNTOF(eye_attrs),
    .infer = infer_eye,
    .ref = ref_eye,
    .grad = TG_GRAD_NONE,
};

/* ---- tril, triu ---- */

static const tg_attr_spec tri_attrs[] = {
    {"k", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 0}},
};

static tg_status infer_tri(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    char a[TG_TYPE_STR_MAX];
    if (x->ndim < 2)
        return tg_infer_fail(ic, TG_ESHAPE, "input must be at least 2-d, got %s",
                             tg_type_str(x, a, sizeof a));
    ic->out[0] = *x;
    ic->out[0].weak = 0;
    ic->nout = 1;
    return TG_OK;
}

/* Keeps x[..., i, j] where j - i <= k (lower) or j - i >= k (upper), zero elsewhere: row
 * by row, each row's kept columns one range (copied, with memcpy where both rows are
 * contiguous) and the rest zeroed (an element at a time over 500 x 500 took 5 ms). */
static tg_status tri_ref(tg_kern *k, bool lower) {
    const tg_tensor *x = k->in[0];
    tg_tensor *y = k->out[0];
    int64_t kd = k->attrs[0].i;
    size_t esz = tg_dtype_size(x->dtype);
    if (tg_tensor_size(x) == 0) return TG_OK;
    int nd = x->ndim;
    int64_t n = x->shape[nd - 1], xs = x->strides[nd - 1], ys = y->strides[nd - 1];
    int64_t idx[TG_MAX_DIMS] = {0};
    do {
        int64_t i = idx[nd - 2];
        /* the kept columns [lo, hi): j <= i + kd (lower) or j >= i + kd (upper) */
        int64_t lo = 0, hi = n;
        if (lower)
            hi = kd < -i ? 0 : kd >= n - i ? n : i + kd + 1;
        else
            lo = kd <= -i ? 0 : kd >= n - i ? n : i + kd;
        idx[nd - 1] = 0;
        const char *px = tg_tensor_at(x, idx);
        char *py = tg_tensor_at(y, idx);
        if (xs == 1 && ys == 1) {
            memset(py, 0, (size_t)lo * esz);
            if (hi > lo) memcpy(py + lo * esz, px + lo * esz, (size_t)(hi - lo) * esz);
            if (n > hi) memset(py + hi * esz, 0, (size_t)(n - hi) * esz);
        } else {
            for (int64_t j = 0; j < n; j++) {
                char *d = py + j * ys * (int64_t)esz;
                if (j >= lo && j < hi)
                    memcpy(d, px + j * xs * (int64_t)esz, esz);
                else
                    memset(d, 0, esz);
            }
        }
    } while (tg_index_next(nd - 1, x->shape, idx));
    return TG_OK;
}

static tg_status ref_tril(tg_kern *k) { return tri_ref(k, true); }
static tg_status ref_triu(tg_kern *k) { return tri_ref(k, false); }

/* tril/triu are linear masks: the cotangent gets the same mask. */
static tg_status vjp_tri(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_attr a = TG_A_INT("k", n->attrs[0].i);
    if (tg_ops_float_in(n, 0)) gin[0] = tg_apply(g, tg_op_table[n->op]->name, &gout[0], 1, &a, 1);
    return g->status;
}

const tg_op_def tg_op_tril = {
    .name = "tril",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = tri_attrs,
    .nattrs = (int)TG_COUNTOF(tri_attrs),
    .infer = infer_tri,
    .ref = ref_tril,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_tri,
    .batch = tg_batch_leading,
};

const tg_op_def tg_op_triu = {
    .name = "triu",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = tri_attrs,
    .nattrs = (int)TG_COUNTOF(tri_attrs),
    .infer = infer_tri,
    .ref = ref_triu,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_tri,
    .batch = tg_batch_leading,
};

/* ---- shape, size ---- */

static tg_status infer_shape(tg_infer *ic) {
    type_init(&ic->out[0], TG_DT_I64, 1);
    ic->out[0].shape[0] = ic->in[0].ndim;
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_shape(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    tg_tensor *y = k->out[0];
    for (int64_t i = 0; i < x->ndim; i++) tg_store_i64(tg_tensor_at(y, &i), y->dtype, x->shape[i]);
    return TG_OK;
}

static tg_status infer_size(tg_infer *ic) {
    type_init(&ic->out[0], TG_DT_I64, 0);
    ic->nout = 1;
    return TG_OK;
}

static tg_status ref_size(tg_kern *k) {
    tg_store_i64(tg_tensor_data(k->out[0]), k->out[0]->dtype, tg_tensor_size(k->in[0]));
    return TG_OK;
}

/* Over a batch: the body's value's extents, the batched one's without the batch's. */
static tg_status batch_shape(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                             tg_var **out, bool *ob) {
    (void)n, (void)batched;
    tg_slice rest = {.start = 1, .omit = TG_SLICE_NO_STOP | TG_SLICE_NO_STEP};
    out[0] = tg_slice_apply(b->g, tg_apply(b->g, "shape", &in[0], 1, NULL, 0), &rest, 1);
    ob[0] = false;
    return b->g->status;
}

const tg_op_def tg_op_shape = {
    .name = "shape",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_SHAPE,
    .infer = infer_shape,
    .ref = ref_shape,
    .grad = TG_GRAD_NONE,
    .batch = batch_shape,
};

const tg_op_def tg_op_size = {
    .name = "size",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_SHAPE,
    .infer = infer_size,
    .ref = ref_size,
    .grad = TG_GRAD_NONE,
};
