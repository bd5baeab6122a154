/* ops_util.c - helpers shared by the op families: error reporting for inference and
 * kernels, NEP 50 dtype promotion, NumPy broadcasting with tgraph's '?' rules, axis
 * normalization, the reduced axes of reductions (tg_reduce_axes), and the generic elementwise
 * promote/infer/reference kernel that the records of elemwise.c are driven by (through op->ew).
 *
 * Promotion (NEP 50, NumPy 2 / JAX rules) over tgraph's dtypes. Categories are ordered
 * bool < integer < float. Strong dtypes promote as NumPy's result_type:
 *  - bool with X is X; two signed ints give the wider; u8 with i8 gives i16, u8 with a
 *    wider signed int gives that int (NumPy's answers; tgraph has no u16/u32/u64, so no
 *    other unsigned case exists);
 *  - an int with f32: i8, u8, i16 give f32, i32 and i64 give f64 (NumPy's answers);
 *    anything with f64 is f64; f32 with f64 is f64.
 * Weak literals (type->weak) have a category only: when it is <= the strong result's
 * category they adopt the strong dtype (mul(x_i8, 2) -> i8, mul(x_f32, 0.5) -> f32); a
 * weak float meeting only ints/bool gives f64, a weak int meeting only bool gives i64
 * (NumPy's default dtypes). Without strong operands: bool, i64 or f64 by category.
 *
 * Broadcasting right-aligns shapes. Per axis: a static 1 that is not `nobcast` adopts
 * the other extents; '?' with '?' is '?'; '?' with a static n (other than a broadcasting
 * 1) is n; '?' with a broadcasting 1 is '?'; two different known extents are an error,
 * and an extent 1 marked nobcast (a '?' that was 1 at run time) does not broadcast: its
 * error asks the user to declare the dimension as 1. The result is nobcast on an axis
 * whose extent is 1 and came from a nobcast extent.
 *
 * The reference kernel tg_ew_ref is the oracle for every backend: it walks every output
 * element in C order and reads each input through its own strides (0 on broadcast axes;
 * negative strides and 0-size shapes are fine). It computes in the output's dtype (for
 * comparisons: the promoted input dtype): floats in double, rounded on the store;
 * integers and bool in int64, wrapped to the output width on the store.
 * Flags: an op takes a category (bool, int, float) only if its TG_EW_* flag says so,
 * else promotion fails naming the dtypes; TG_EW_BOOLI8 takes bool as i8; TG_EW_TOFLOAT
 * turns a bool/int result into f32 (bool, i8, u8, i16: NumPy gives f16 for the first
 * three, tgraph has no f16) or f64 (i32, i64), or always f64 with TG_EW_TOF64.
 * The inferred output is weak when every input is weak (literal arithmetic stays weak).
 */
#include "ops.h"

#include <stdio.h>

/* ---- errors ---- */

tg_status tg_kern_run(tg_ctx *ctx, const tg_node *n, tg_tensor *const *vin, const tg_type *tout,
                      tg_tensor **vout, const tg_subexec *sub, tg_pool *pool, char *msg,
                      size_t cap) {
    const tg_op_def *op = tg_op_table[n->op];
    bool self = op->views || op->self_alloc;
    for (int o = 0; o < n->nout; o++) vout[o] = NULL;
    for (int o = 0; o < n->nout && !self; o++) {
        char ty[TG_TYPE_STR_MAX];
        int64_t size;
        bool fits = tg_shape_size(tout[o].ndim, tout[o].shape, &size);
        if (fits &&
            (vout[o] = tg_tensor_new(ctx, (tg_dtype)tout[o].dtype, tout[o].ndim, tout[o].shape)))
            continue;
        tg_type_str(&tout[o], ty, sizeof ty);
        if (fits)
            snprintf(msg, cap, "output %s: %s", ty, tg_last_error());
        else
            snprintf(msg, cap, "output %s is too large", ty);
        for (int q = 0; q < o; q++) { /* none left to the caller, which frees what it holds */
            tg_tensor_free(vout[q]);
            vout[q] = NULL;
        }
        return fits ? TG_ENOMEM : TG_ELIMIT;
    }
    tg_status st = tg_kern_call(ctx, n, vin, tout, vout, sub, pool, NULL, msg, cap);
    if (st == TG_OK) return TG_OK;
    for (int o = 0; o < n->nout; o++) {
        tg_tensor_free(vout[o]);
        vout[o] = NULL;
    }
    return st;
}

tg_status tg_kern_call(tg_ctx *ctx, const tg_node *n, tg_tensor *const *vin, const tg_type *tout,
                       tg_tensor **vout, const tg_subexec *sub, tg_pool *pool, tg_kern_note *note,
                       char *msg, size_t cap) {
    tg_kern k = {.ctx = ctx,
                 .node = n,
                 .attrs = n->attrs,
                 .in = vin,
                 .nin = n->nin,
                 .out = vout,
                 .nout = n->nout,
                 .out_type = tout,
                 .sub = sub,
                 .pool = pool,
                 .note = note};
    if (tg_op_table[n->op]->ref(&k) == TG_OK) return TG_OK;
    snprintf(msg, cap, "%s", k.msg);
    return k.status ? k.status : TG_EINVAL;
}

tg_status tg_node_eval(tg_ctx *ctx, const tg_graph *g, const tg_node *n, tg_tensor *const *in,
                       const tg_subexec *sub, tg_tensor **out) {
    size_t insz = sizeof(tg_type) * (size_t)(n->nin + 1);
    tg_type *tin = tg_mem_alloc(ctx, insz);
    tg_type *tout = tg_mem_alloc(ctx, sizeof *tout * TG_MAX_OUTS);
    char msg[512];
    tg_status st = tin && tout ? TG_OK : tg_set_error(TG_ENOMEM, "out of memory");
    for (int o = 0; o < n->nout; o++) out[o] = NULL;
    for (int k = 0; k < n->nin && st == TG_OK; k++)
        tg_type_of_tensor(&n->in[k]->type, in[k], &tin[k]);
    if (st == TG_OK && (st = tg_node_infer(n, tin, NULL, tout, msg, sizeof msg)) == TG_OK)
        st = tg_kern_run(ctx, n, in, tout, out, sub, NULL, msg, sizeof msg);
    if (st != TG_OK && tin && tout) {
        const char *name = tg_op_table[n->op]->name;
        if (n->line > 0)
            tg_set_error(st, "%s:%d:%d: %s: %s", g->file ? g->file : "<input>", n->line, n->col,
                         name, msg);
        else
            tg_set_error(st, "node %d (%s): %s", n->id, name, msg);
    }
    for (int o = 0; o < n->nout && st == TG_OK; o++) { /* what the record promises */
        const tg_type *s = &n->out[o]->type;
        tg_type rt;
        TG_ASSERT(out[o] != NULL);
        tg_type_of_tensor(s, out[o], &rt);
        TG_ASSERT(rt.dtype == s->dtype && rt.ndim == s->ndim);
        for (int d = 0; d < s->ndim; d++) TG_ASSERT(s->shape[d] < 0 || s->shape[d] == rt.shape[d]);
    }
    if (tin) tg_mem_free(ctx, tin, insz);
    if (tout) tg_mem_free(ctx, tout, sizeof *tout * TG_MAX_OUTS);
    return st;
}

tg_status tg_node_infer(const tg_node *n, const tg_type *tin, const tg_tensor *const *values,
                        tg_type *tout, char *msg, size_t cap) {
    const tg_op_def *op = tg_op_table[n->op];
    tg_infer ic = {.op = op,
                   .in = tin,
                   .nin = n->nin,
                   .attrs = n->attrs,
                   .out = tout,
                   .nout = op->nout,
                   .values = values,
                   .runtime = true};
    if (op->infer(&ic) == TG_OK) {
        TG_ASSERT(ic.nout == n->nout);
        return TG_OK;
    }
    snprintf(msg, cap, "%s", ic.msg);
    return ic.status ? ic.status : TG_ESHAPE;
}

bool tg_infer_const_int(const tg_infer *ic, int k, int64_t *out) {
    const tg_tensor *t = ic->values ? ic->values[k] : NULL;
    if (!t && ic->vars && ic->vars[k] && ic->vars[k]->kind == TG_VAR_CONST) t = ic->vars[k]->value;
    if (!t || t->ndim != 0 || !tg_dtype_is_int(t->dtype)) return false;
    *out = tg_load_i64(tg_tensor_data(t), t->dtype);
    return true;
}

tg_status tg_infer_fail(tg_infer *ic, tg_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ic->msg, sizeof ic->msg, fmt, ap);
    va_end(ap);
    ic->status = st;
    return st;
}

tg_status tg_kern_fail(tg_kern *k, tg_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->msg, sizeof k->msg, fmt, ap);
    va_end(ap);
    k->status = st;
    return st;
}

/* ---- promotion ---- */

enum { CAT_BOOL, CAT_INT, CAT_FLOAT };

static int dt_cat(tg_dtype dt) {
    if (dt == TG_DT_BOOL) return CAT_BOOL;
    return tg_dtype_is_float(dt) ? CAT_FLOAT : CAT_INT;
}

/* Bits of a signed integer dtype (u8 is handled apart). */
static int int_bits(tg_dtype dt) { return (int)tg_dtype_size(dt) * 8; }

/* NumPy's promotion of two strong dtypes. */
static tg_dtype promote2(tg_dtype a, tg_dtype b) {
    if (a == b) return a;
    if (a == TG_DT_BOOL) return b;
    if (b == TG_DT_BOOL) return a;
    int ca = dt_cat(a), cb = dt_cat(b);
    if (ca == CAT_FLOAT && cb == CAT_FLOAT) return TG_DT_F64;
    if (ca == CAT_FLOAT || cb == CAT_FLOAT) {
        tg_dtype f = ca == CAT_FLOAT ? a : b, i = ca == CAT_FLOAT ? b : a;
        if (f == TG_DT_F64) return TG_DT_F64;
        return i == TG_DT_I8 || i == TG_DT_U8 || i == TG_DT_I16 ? TG_DT_F32 : TG_DT_F64;
    }
    if (a == TG_DT_U8 || b == TG_DT_U8) {
        tg_dtype s = a == TG_DT_U8 ? b : a; /* the signed one */
        return s == TG_DT_I8 ? TG_DT_I16 : s;
    }
    return int_bits(a) >= int_bits(b) ? a : b;
}

tg_dtype tg_promote_types(const tg_type *const *t, int n) {
    bool have_strong = false;
    tg_dtype strong = TG_DT_BOOL;
    int weak_cat = -1;
    for (int i = 0; i < n; i++) {
        tg_dtype dt = (tg_dtype)t[i]->dtype;
        if (t[i]->weak) {
            int c = dt_cat(dt);
            if (c > weak_cat) weak_cat = c;
        } else {
            strong = have_strong ? promote2(strong, dt) : dt;
            have_strong = true;
        }
    }
    if (!have_strong) {
        if (weak_cat == CAT_FLOAT) return TG_DT_F64;
        return weak_cat == CAT_INT ? TG_DT_I64 : TG_DT_BOOL;
    }
    if (weak_cat <= dt_cat(strong)) return strong;
    return weak_cat == CAT_FLOAT ? TG_DT_F64 : TG_DT_I64;
}

/* ---- broadcasting ---- */

bool tg_broadcast_types(tg_infer *ic, const tg_type *const *t, int n, tg_type *out) {
    int nd = 0;
    for (int i = 0; i < n; i++)
        if (t[i]->ndim > nd) nd = t[i]->ndim;
    memset(out, 0, sizeof *out);
    out->ndim = (uint8_t)nd;
    out->dtype = n > 0 ? t[0]->dtype : TG_DT_BOOL;
    for (int j = 0; j < nd; j++) {
        bool fixed = false, unknown = false, fixed_nob = false;
        int64_t ext = 1;
        int src = -1;
        for (int i = 0; i < n; i++) {
            int a = j - (nd - t[i]->ndim); /* the input's axis, right-aligned */
            if (a < 0) continue;
            int64_t e = t[i]->shape[a];
            bool nob = e == 1 && ((t[i]->nobcast >> a) & 1u);
            if (e == 1 && !nob) continue; /* broadcasts against anything */
            if (e < 0) {
                unknown = true;
                continue;
            }
            if (fixed && e != ext) {
                char s1[TG_TYPE_STR_MAX], s2[TG_TYPE_STR_MAX];
                tg_type_str(t[src], s1, sizeof s1);
                tg_type_str(t[i], s2, sizeof s2);
                if (fixed_nob || nob)
                    tg_infer_fail(ic, TG_ESHAPE,
                                  "cannot broadcast %s with %s: axis %d has extent 1 where the "
                                  "type says '?', which does not broadcast (declare the "
                                  "dimension as 1 to broadcast)",
                                  s1, s2, j);
                else
                    tg_infer_fail(ic, TG_ESHAPE, "cannot broadcast %s with %s", s1, s2);
                return false;
            }
            if (!fixed) src = i;
            fixed = true;
            ext = e;
            fixed_nob = fixed_nob || nob;
        }
        out->shape[j] = fixed ? ext : unknown ? -1 : 1;
        if (fixed && ext == 1 && fixed_nob) out->nobcast |= 1u << j;
    }
    return true;
}

bool tg_axis_norm(int64_t axis, int ndim, int *out) {
    if (axis < -(int64_t)ndim || axis >= (int64_t)ndim) return false;
    *out = (int)(axis < 0 ? axis + ndim : axis);
    return true;
}

bool tg_reduce_axes(const tg_aval *attrs, int nattrs, int ndim, tg_axes *ax, char *err, size_t n) {
    const tg_aval *axis = &attrs[0];
    memset(ax, 0, sizeof *ax);
    ax->keep = nattrs > 1 && attrs[1].i != 0;
    if (err && n) err[0] = '\0';
    const int64_t *list = &axis->i;
    int nax = 1;
    if (axis->kind == TG_ATTR_NONE) {
        for (int d = 0; d < ndim; d++) ax->red[d] = true;
        ax->mask = ndim > 0 ? (uint32_t)((1ull << ndim) - 1) : 0;
        ax->nred = ndim;
        return true;
    }
    if (axis->kind == TG_ATTR_INTS) {
        list = axis->ints;
        nax = axis->n;
    } else if (axis->kind != TG_ATTR_INT && axis->kind != TG_ATTR_BOOL) {
        if (err) snprintf(err, n, "'axis' is not an int, a list of ints or none");
        return false;
    }
    for (int j = 0; j < nax; j++) {
        int a;
        if (!tg_axis_norm(list[j], ndim, &a)) {
            if (err)
                snprintf(err, n, "axis %lld is out of bounds for an array of dimension %d",
                         (long long)list[j], ndim);
            return false;
        }
        if (ax->red[a]) {
            if (err) snprintf(err, n, "duplicate value in 'axis' (%lld)", (long long)list[j]);
            return false;
        }
        ax->red[a] = true;
        ax->mask |= 1u << a;
        ax->nred++;
    }
    return true;
}

/* ---- lines ---- */

void tg_line_get(const tg_tensor *t, int axis, const int64_t *o, tg_line *l) {
    int64_t esz = (int64_t)tg_dtype_size(t->dtype), off = t->offset;
    *l = (tg_line){.t = t};
    if (axis >= 0) {
        for (int d = 0; d < t->ndim; d++)
            if (d != axis) off += o[d] * t->strides[d];
        l->n = t->shape[axis];
        l->step = t->strides[axis] * esz;
        l->p = (char *)t->buf->data + off * esz;
        return;
    }
    /* flattened: one stride when each axis steps over the whole of the axes after it
     * (axes of extent 1 aside) */
    int64_t inner = 0, stride = 0, ext = 0; /* the innermost stride; the last axis walked */
    l->n = tg_tensor_size(t);
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 1) continue;
        if (ext != 0 && t->strides[d] != stride * ext) {
            l->gather = true;
            return;
        }
        if (ext == 0) inner = t->strides[d];
        stride = t->strides[d];
        ext = t->shape[d];
    }
    l->step = inner * esz;
    l->p = (char *)t->buf->data + off * esz;
}

char *tg_line_gather_at(const tg_line *l, int64_t j) {
    const tg_tensor *t = l->t;
    int64_t off = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (j % t->shape[d]) * t->strides[d];
        j /= t->shape[d];
    }
    return (char *)t->buf->data + off * (int64_t)tg_dtype_size(t->dtype);
}

int64_t tg_lines_outer(const tg_tensor *t, int axis, int64_t *outer, int *nd) {
    int64_t count = 1;
    *nd = axis < 0 ? 0 : t->ndim;
    for (int d = 0; d < *nd; d++) {
        outer[d] = d == axis ? 1 : t->shape[d];
        count *= outer[d];
    }
    return count;
}

tg_status tg_lines_map(tg_kern *k, void (*fn)(const tg_line *lx, const tg_line *ly, void *ctx),
                       void *ctx) {
    const tg_tensor *x = k->in[0];
    int axis, nd;
    int64_t outer[TG_MAX_DIMS], o[TG_MAX_DIMS] = {0};
    if (!tg_axis_attr(&k->attrs[0], x->ndim, &axis))
        return tg_kern_fail(k, TG_EINVAL, "axis is out of bounds");
    if (tg_tensor_size(x) == 0) return TG_OK;
    tg_lines_outer(x, axis, outer, &nd);
    do {
        tg_line lx, ly;
        tg_line_get(x, axis, o, &lx);
        tg_line_get(k->out[0], axis, o, &ly);
        fn(&lx, &ly, ctx);
    } while (tg_index_next(nd, outer, o));
    return TG_OK;
}

bool tg_type_flat(const tg_type *x, tg_dtype dt, tg_type *o) {
    int64_t n = 1;
    bool unknown = false;
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] < 0)
            unknown = true;
        else if (__builtin_mul_overflow(n, x->shape[d], &n))
            return false;
    }
    memset(o, 0, sizeof *o);
    o->dtype = (uint8_t)dt;
    o->ndim = 1;
    o->shape[0] = unknown && n != 0 ? -1 : n;
    if (o->shape[0] == 1 && x->nobcast) o->nobcast = 1u;
    return true;
}

bool tg_axis_attr(const tg_aval *a, int ndim, int *out) {
    if (a->kind == TG_ATTR_NONE) {
        *out = -1;
        return true;
    }
    return tg_axis_norm(a->i, ndim, out);
}

tg_status tg_axis_fail(tg_infer *ic, int64_t axis, const tg_type *x) {
    char ts[TG_TYPE_STR_MAX];
    return tg_infer_fail(ic, TG_EINVAL,
                         "axis %lld is out of bounds for an array of dimension %d (%s)",
                         (long long)axis, x->ndim, tg_type_str(x, ts, sizeof ts));
}

tg_status tg_infer_along(tg_infer *ic, tg_dtype dt) {
    const tg_type *x = &ic->in[0];
    tg_type *o = &ic->out[0];
    int axis;
    if (!tg_axis_attr(&ic->attrs[0], x->ndim, &axis)) return tg_axis_fail(ic, ic->attrs[0].i, x);
    if (axis < 0) {
        if (!tg_type_flat(x, dt, o))
            return tg_infer_fail(ic, TG_ELIMIT, "x has more elements than an int64 counts");
        return TG_OK;
    }
    *o = *x;
    o->dtype = (uint8_t)dt;
    o->weak = 0;
    return TG_OK;
}

/* ---- the generic elementwise op ---- */

/* The dtype an elementwise op computes in, from its flags and its input types. Writes
 * a message naming the dtypes and returns false when the op does not take them. */
static bool ew_compute_dtype(const tg_op_def *op, const tg_type *const *t, int n, tg_dtype *out,
                             char *msg, size_t msgn) {
    unsigned fl = op->ew.flags;
    tg_dtype dt = tg_promote_types(t, n);
    int c = dt_cat(dt);
    bool ok = c == CAT_FLOAT ? (fl & TG_EW_FLOAT) != 0
              : c == CAT_INT ? (fl & TG_EW_INT) != 0
                             : (fl & (TG_EW_BOOL | TG_EW_BOOLI8)) != 0;
    if (!ok) {
        size_t used =
            (size_t)snprintf(msg, msgn, "not supported for %s ", n == 1 ? "dtype" : "dtypes");
        for (int i = 0; i < n && used < msgn; i++) {
            const char *sep = i == 0 ? "" : i == n - 1 ? " and " : ", ";
            int w = snprintf(msg + used, msgn - used, "%s%s%s", sep,
                             tg_dtype_name((tg_dtype)t[i]->dtype), t[i]->weak ? " literal" : "");
            used += w > 0 ? (size_t)w : 0;
        }
        return false;
    }
    if (dt == TG_DT_BOOL && (fl & TG_EW_BOOLI8) && !(fl & TG_EW_BOOL)) dt = TG_DT_I8;
    if ((fl & TG_EW_TOFLOAT) && c != CAT_FLOAT) {
        /* NumPy gives f16 for bool/i8/u8; tgraph has no f16, so f32. */
        if (fl & TG_EW_TOF64)
            dt = TG_DT_F64;
        else
            dt = dt == TG_DT_I32 || dt == TG_DT_I64 ? TG_DT_F64 : TG_DT_F32;
    }
    *out = dt;
    return true;
}

/* Pointers to the input types of an inference context. */
static void type_ptrs(const tg_infer *ic, const tg_type **p) {
    for (int i = 0; i < ic->nin; i++) p[i] = &ic->in[i];
}

tg_status tg_ew_promote(tg_infer *ic, tg_dtype *want) {
    const tg_type *p[TG_MAX_OUTS];
    if (ic->nin > TG_MAX_OUTS) return tg_infer_fail(ic, TG_EINVAL, "too many inputs");
    type_ptrs(ic, p);
    tg_dtype dt;
    char msg[sizeof ic->msg];
    if (!ew_compute_dtype(ic->op, p, ic->nin, &dt, msg, sizeof msg))
        return tg_infer_fail(ic, TG_ETYPE, "%s", msg);
    for (int i = 0; i < ic->nin; i++) want[i] = dt;
    return TG_OK;
}

tg_status tg_ew_infer(tg_infer *ic) {
    const tg_type *p[TG_MAX_OUTS];
    if (ic->nin > TG_MAX_OUTS) return tg_infer_fail(ic, TG_EINVAL, "too many inputs");
    type_ptrs(ic, p);
    tg_dtype dt;
    char msg[sizeof ic->msg];
    if (!ew_compute_dtype(ic->op, p, ic->nin, &dt, msg, sizeof msg))
        return tg_infer_fail(ic, TG_ETYPE, "%s", msg);
    if (!tg_broadcast_types(ic, p, ic->nin, &ic->out[0])) return ic->status;
    bool all_weak = ic->nin > 0;
    for (int i = 0; i < ic->nin; i++) all_weak = all_weak && ic->in[i].weak;
    ic->out[0].dtype = (uint8_t)((ic->op->ew.flags & TG_EW_CMP) ? TG_DT_BOOL : dt);
    ic->out[0].weak = all_weak;
    ic->nout = 1;
    return TG_OK;
}

/* Address of input `t` at the output multi-index idx (rank nd), broadcasting. */
static const char *bcast_at(const tg_tensor *t, int nd, const int64_t *idx) {
    int64_t off = t->offset;
    int lead = nd - t->ndim;
    for (int a = 0; a < t->ndim; a++)
        if (t->shape[a] != 1) off += idx[lead + a] * t->strides[a];
    return (const char *)t->buf->data + off * (int64_t)tg_dtype_size(t->dtype);
}

tg_status tg_ew_ref(tg_kern *k) {
    const tg_op_def *op = tg_op_table[k->node->op];
    const tg_type *ot = &k->out_type[0];
    tg_tensor *out = k->out[0];
    enum { MAXIN = 8 };
    if (k->nin > MAXIN) return tg_kern_fail(k, TG_EINTERNAL, "too many inputs");
    /* The compute dtype: the output's, except for comparisons (bool out). */
    tg_dtype dt = (tg_dtype)ot->dtype;
    if (op->ew.flags & TG_EW_CMP) {
        tg_type tt[MAXIN];
        const tg_type *p[MAXIN];
        for (int i = 0; i < k->nin; i++) {
            memset(&tt[i], 0, sizeof tt[i]);
            tt[i].dtype = (uint8_t)k->in[i]->dtype;
            p[i] = &tt[i];
        }
        char msg[sizeof k->msg];
        if (!ew_compute_dtype(op, p, k->nin, &dt, msg, sizeof msg))
            return tg_kern_fail(k, TG_ETYPE, "%s", msg);
    }
    bool fl = tg_dtype_is_float(dt);
    if (fl ? !op->ew.f : !op->ew.i)
        return tg_kern_fail(k, TG_ETYPE, "no kernel for dtype %s", tg_dtype_name(dt));
    int64_t n;
    if (!tg_shape_size(ot->ndim, ot->shape, &n))
        return tg_kern_fail(k, TG_ELIMIT, "output too large");
    if (n == 0) return TG_OK;
    int nd = ot->ndim;
    int64_t idx[TG_MAX_DIMS] = {0};
    do {
        char *po = tg_tensor_at(out, idx);
        if (fl) {
            double x[MAXIN];
            for (int i = 0; i < k->nin; i++)
                x[i] = tg_load_f64(bcast_at(k->in[i], nd, idx), k->in[i]->dtype);
            tg_store_f64(po, out->dtype, op->ew.f(x));
        } else {
            int64_t x[MAXIN];
            for (int i = 0; i < k->nin; i++)
                x[i] = tg_load_i64(bcast_at(k->in[i], nd, idx), k->in[i]->dtype);
            tg_store_i64(po, out->dtype, op->ew.i(x, dt));
        }
    } while (tg_index_next(nd, ot->shape, idx));
    return TG_OK;
}

void tg_fn_place(const tg_graph *fn, char *buf, size_t cap) {
    if (fn->def_line > 0)
        snprintf(buf, cap, " (%s:%d:%d)", fn->file ? fn->file : "<input>", fn->def_line,
                 fn->def_col);
    else
        buf[0] = '\0';
}

const char *tg_infer_in_name(const tg_infer *ic, int k, char *buf, size_t cap) {
    const tg_var *v = ic->vars ? ic->vars[k] : NULL;
    if (v && v->name)
        snprintf(buf, cap, " '%s'", v->name);
    else
        buf[0] = '\0';
    return buf;
}
