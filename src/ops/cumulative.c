/* cumulative.c - cumulative ops along one axis: cumsum cumprod cummax cummin diff.
 *
 * One record per op, with NumPy's semantics:
 *  - cumsum(x, axis=none), cumprod(x, axis=none)   np.cumsum, np.cumprod
 *  - cummax(x, axis=none), cummin(x, axis=none)    np.maximum.accumulate, np.minimum.accumulate
 *  - diff(x, n=1, axis=-1)                         np.diff
 * `axis` of the first four is one int (negative counting from the end) or none: x
 * flattened in C order, giving a 1-D result (np.cumsum's default; NumPy's accumulate takes
 * no none and defaults to axis 0, tgraph gives the four one default).
 * Dtypes (NumPy's): cumsum and cumprod of bool and integers give i64 (u8 too: NumPy's u64,
 * which tgraph lacks) and wrap around; floats keep their dtype and accumulate in double,
 * each element rounded once at its store (NumPy rounds every partial result to the dtype:
 * f32 results can differ in the last bits). cummax and cummin keep the dtype and follow
 * np.maximum/np.minimum: the running value stays where it is >= (<=) the new element, so
 * ties keep the earlier element (-0.0 against 0.0 too), and a NaN, once met, stays. diff
 * keeps the dtype (bool: not_equal, as NumPy) and wraps integers; n = 0 gives x, n >= the
 * extent an empty axis; the n-th difference is computed directly as sum over m of
 * (-1)^(n-m) C(n,m) x[i+m] (in double for floats: NumPy's repeated differences round each
 * step; modulo 2^64 for integers, so wrapping gives NumPy's result exactly).
 * Gradients (float inputs; bool and integer results have none):
 *  - cumsum: the cotangent's reversed cumulative sum (reverse, cumsum, reverse);
 *  - cumprod: exact where x has zeros, never dividing by one. d y_j / d x_i is the product
 *    of x_0..x_j without x_i. Before the first zero of a line that is y_j / x_i (x_i is not
 *    0 there): the reversed cumulative sum of g * y, divided by x. At the first zero z it
 *    is the product of the others: the reversed cumulative sum of g * cumprod(x with x_z
 *    replaced by 1), the exclusive product before z carried on past it. After z every
 *    product holds x_z = 0: the cotangent is 0. Second derivatives are exact away from
 *    zeros only (the terms through x_z of the elements after z are left out);
 *  - cummax, cummin: each g_j goes to the element holding the running extreme at j: the
 *    first occurrence of it (ties keep the earlier element, as the values do; after a NaN,
 *    the first NaN). An element starts a new extreme where y changes (y_j != y_{j-1}, a
 *    NaN y_{j-1} never changing); the holder of j is the last such start up to j, a
 *    cummax of the starts' positions, and g is added there (the scatter of take_along);
 *  - diff: its transpose: (-1)^n diff(g padded with n zeros before and min(extent, n)
 *    after, n), which is again a diff, so higher derivatives follow.
 * Invariants: kernels read and write through strides (any sign, 0-size, flattened views
 * that do not collapse), never allocate, and never write an input.
 */
#include "ops.h"

#include <math.h>
#include <stdio.h>

/* ---- attributes ---- */

static const tg_attr_spec cum_attrs[] = {
    {"axis", TG_AS_INT, 0, 1, {.kind = TG_ATTR_NONE}},
};

enum { DIFF_N, DIFF_AXIS };
static const tg_attr_spec diff_attrs[] = {
    [DIFF_N] = {"n", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 1}},
    [DIFF_AXIS] = {"axis", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = -1}},
};

/* ---- cumsum, cumprod, cummax, cummin ---- */

typedef enum { CUM_SUM, CUM_PROD, CUM_MAX, CUM_MIN } cum_kind;

static tg_status cum_infer(tg_infer *ic, cum_kind kind) {
    tg_dtype dt = (tg_dtype)ic->in[0].dtype;
    if ((kind == CUM_SUM || kind == CUM_PROD) && !tg_dtype_is_float(dt)) dt = TG_DT_I64;
    return tg_infer_along(ic, dt);
}

static tg_status infer_cumsum(tg_infer *ic) { return cum_infer(ic, CUM_SUM); }
static tg_status infer_cumprod(tg_infer *ic) { return cum_infer(ic, CUM_PROD); }
static tg_status infer_cummax(tg_infer *ic) { return cum_infer(ic, CUM_MAX); }
static tg_status infer_cummin(tg_infer *ic) { return cum_infer(ic, CUM_MIN); }

/* One line: y_j from x_0..x_j. Floats in double, integers in wrapping uint64 (sum,
 * product) or int64 (extremes); the first element is taken as it is (-0.0 stays). */
static void cum_line(const tg_line *lx, const tg_line *ly, cum_kind kind, tg_dtype xdt,
                     tg_dtype ydt) {
    if (tg_dtype_is_float(xdt)) {
        double a = 0.0;
        for (int64_t j = 0; j < lx->n; j++) {
            double v = tg_load_f64(tg_line_at(lx, j), xdt);
            if (j == 0)
                a = v;
            else if (kind == CUM_SUM)
                a += v;
            else if (kind == CUM_PROD)
                a *= v;
            else if (kind == CUM_MAX ? !(a >= v || isnan(a)) : !(a <= v || isnan(a)))
                a = v;
            tg_store_f64(tg_line_at(ly, j), ydt, a);
        }
        return;
    }
    uint64_t u = 0;
    int64_t m = 0;
    for (int64_t j = 0; j < lx->n; j++) {
        int64_t v = tg_load_i64(tg_line_at(lx, j), xdt);
        if (j == 0) {
            u = (uint64_t)v;
            m = v;
        } else if (kind == CUM_SUM) {
            u += (uint64_t)v;
        } else if (kind == CUM_PROD) {
            u *= (uint64_t)v;
        } else if (kind == CUM_MAX ? v > m : v < m) {
            m = v;
        }
        bool arith = kind == CUM_SUM || kind == CUM_PROD;
        tg_store_i64(tg_line_at(ly, j), ydt, arith ? tg_ops_wrap_i64(u) : m);
    }
}

static void cum_each(const tg_line *lx, const tg_line *ly, void *ctx) {
    cum_line(lx, ly, *(const cum_kind *)ctx, lx->t->dtype, ly->t->dtype);
}

static tg_status cum_ref(tg_kern *k, cum_kind kind) { return tg_lines_map(k, cum_each, &kind); }

static tg_status ref_cumsum(tg_kern *k) { return cum_ref(k, CUM_SUM); }
static tg_status ref_cumprod(tg_kern *k) { return cum_ref(k, CUM_PROD); }
static tg_status ref_cummax(tg_kern *k) { return cum_ref(k, CUM_MAX); }
static tg_status ref_cummin(tg_kern *k) { return cum_ref(k, CUM_MIN); }

/* ---- gradients of the cumulative ops ---- */

/* v reversed along axis (a view: x[..., ::-1]). */
static tg_var *reverse(tg_graph *g, tg_var *v, int axis) {
    tg_slice s[TG_MAX_DIMS];
    for (int d = 0; d < axis; d++) s[d] = (tg_slice){.omit = TG_SLICE_OMIT_ALL};
    s[axis] = (tg_slice){.step = -1, .omit = TG_SLICE_NO_START | TG_SLICE_NO_STOP};
    return tg_slice_apply(g, v, s, axis + 1);
}

static tg_var *cum_along(tg_graph *g, const char *op, tg_var *v, int axis) {
    tg_attr a = TG_A_INT("axis", axis);
    return tg_apply(g, op, &v, 1, &a, 1);
}

/* sum of v_j over j >= i along axis */
static tg_var *rev_cumsum(tg_graph *g, tg_var *v, int axis) {
    return reverse(g, cum_along(g, "cumsum", reverse(g, v, axis), axis), axis);
}

typedef tg_var *(*line_vjp)(tg_graph *g, tg_var *x, tg_var *y, tg_var *gy, int axis);

/* The cotangent of x along one axis; with axis none, of x flattened (y and gy are flat
 * already), reshaped back to x's shape. */
static tg_status cum_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                         line_vjp fn) {
    tg_var *x = n->in[0];
    int axis;
    if (!tg_ops_float_in(n, 0)) return g->status;
    if (!tg_axis_attr(&n->attrs[0], x->type.ndim, &axis))
        return tg_ir_fail(g, TG_EINTERNAL, "%s gradient: bad axis", tg_op_table[n->op]->name),
               g->status;
    if (axis >= 0) {
        gin[0] = fn(g, x, n->out[0], gout[0], axis);
        return g->status;
    }
    int64_t flat = -1;
    tg_var *gf = fn(g, tg_reshape(g, x, 1, &flat), n->out[0], gout[0], 0);
    gin[0] = tg_grad_reshape_like(g, gf, x);
    return g->status;
}

static tg_var *cumsum_line_vjp(tg_graph *g, tg_var *x, tg_var *y, tg_var *gy, int axis) {
    (void)x, (void)y;
    return rev_cumsum(g, gy, axis);
}

static tg_var *cumprod_line_vjp(tg_graph *g, tg_var *x, tg_var *y, tg_var *gy, int axis) {
    tg_var *zero = tg_literal_float(g, 0.0), *one = tg_literal_float(g, 1.0);
    tg_var *isz = tg_eq(g, x, zero);
    tg_var *nz = cum_along(g, "cumsum", isz, axis); /* zeros of the line up to here */
    tg_var *first = tg_and(g, isz, tg_eq(g, nz, tg_literal_int(g, 1)));
    tg_var *before = tg_div(g, rev_cumsum(g, tg_mul(g, gy, y), axis), tg_where(g, isz, one, x));
    tg_var *y1 = cum_along(g, "cumprod", tg_where(g, first, one, x), axis);
    tg_var *at = rev_cumsum(g, tg_mul(g, gy, y1), axis);
    return tg_where(g, tg_eq(g, nz, tg_literal_int(g, 0)), before, tg_where(g, first, at, zero));
}

static tg_var *cumext_line_vjp(tg_graph *g, tg_var *x, tg_var *y, tg_var *gy, int axis) {
    tg_var *xd[TG_MAX_DIMS];
    if (!tg_grad_dims(g, x, xd)) return NULL; /* also when x is NULL (a failed reshape) */
    int nd = x->type.ndim;
    /* y shifted by one along axis: y_0, y_0, y_1, ..., y_{n-2} */
    tg_slice s[TG_MAX_DIMS];
    for (int d = 0; d < axis; d++) s[d] = (tg_slice){.omit = TG_SLICE_OMIT_ALL};
    s[axis] = (tg_slice){.stop = 1, .omit = TG_SLICE_NO_START | TG_SLICE_NO_STEP};
    tg_var *parts[2] = {tg_slice_apply(g, y, s, axis + 1), NULL};
    s[axis] = (tg_slice){.stop = -1, .omit = TG_SLICE_NO_START | TG_SLICE_NO_STEP};
    parts[1] = tg_slice_apply(g, y, s, axis + 1);
    tg_attr ca = TG_A_INT("axis", axis);
    tg_var *prev = tg_apply(g, "concatenate", parts, 2, &ca, 1);
    /* the positions along axis, as i64 placed on it */
    tg_var *pos = tg_apply(g, "arange", &xd[axis], 1, NULL, 0);
    int64_t others[TG_MAX_DIMS];
    int no = 0;
    for (int d = 0; d < nd; d++)
        if (d != axis) others[no++] = d;
    tg_attr ea = TG_A_INTS("axis", others, no);
    if (no > 0) pos = tg_apply(g, "expand_dims", &pos, 1, &ea, 1);
    tg_var *zero = tg_literal_int(g, 0);
    tg_var *same = tg_or(g, tg_eq(g, y, prev), tg_isnan(g, prev));
    tg_var *starts = tg_or(g, tg_eq(g, pos, zero), tg_not(g, same));
    tg_var *holder = cum_along(g, "cummax", tg_where(g, starts, pos, zero), axis);
    return tg_grad_put_along(g, x, holder, axis, gy);
}

static tg_status vjp_cumsum(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return cum_vjp(g, n, gout, gin, cumsum_line_vjp);
}
static tg_status vjp_cumprod(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return cum_vjp(g, n, gout, gin, cumprod_line_vjp);
}
static tg_status vjp_cumext(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return cum_vjp(g, n, gout, gin, cumext_line_vjp);
}

/* A cumulative op along `axis`: one input, the result of cum_infer, its gradient vjp_fn. */
#define CUM_OP(op, vjp_fn)                                                                         \
    const tg_op_def tg_op_##op = {                                                                 \
        .name = #op,                                                                               \
        .min_in = 1,                                                                               \
        .max_in = 1,                                                                               \
        .nout = 1,                                                                                 \
        .kind = TG_KIND_OTHER,                                                                     \
        .attrs = cum_attrs,                                                                        \
        .nattrs = (int)TG_COUNTOF(cum_attrs),                                                      \
        .infer = infer_##op,                                                                       \
        .ref = ref_##op,                                                                           \
        .grad = TG_GRAD_VJP,                                                                       \
        .vjp = vjp_fn,                                                                             \
    }

CUM_OP(cumsum, vjp_cumsum);
CUM_OP(cumprod, vjp_cumprod);
CUM_OP(cummax, vjp_cumext);
CUM_OP(cummin, vjp_cumext);

/* ---- diff ---- */

static tg_status infer_diff(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    int64_t n = ic->attrs[DIFF_N].i;
    int axis;
    char ts[TG_TYPE_STR_MAX];
    if (x->ndim == 0)
        return tg_infer_fail(ic, TG_ESHAPE,
                             "diff requires input that is at least one dimensional (x is %s)",
                             tg_type_str(x, ts, sizeof ts));
    if (n < 0)
        return tg_infer_fail(ic, TG_EINVAL, "order must be non-negative but got %lld",
                             (long long)n);
    if (!tg_axis_attr(&ic->attrs[DIFF_AXIS], x->ndim, &axis))
        return tg_axis_fail(ic, ic->attrs[DIFF_AXIS].i, x);
    tg_type *o = &ic->out[0];
    *o = *x;
    o->weak = 0;
    int64_t e = x->shape[axis];
    if (e >= 0) o->shape[axis] = e > n ? e - n : 0;
    if (n > 0) o->nobcast &= ~(1u << axis); /* an extent 1 left stays 1 only when n = 0 */
    return TG_OK;
}

/* The inverse of an odd a modulo 2^64 (Newton's iteration: each step doubles the bits
 * that are right, from the 3 of a itself). */
static uint64_t inv_odd(uint64_t a) {
    uint64_t x = a;
    for (int i = 0; i < 5; i++) x *= 2 - a * x;
    return x;
}

/* One line: y_i = sum over m of (-1)^(n-m) C(n,m) x_{i+m}. Binomials are carried as
 * doubles for floats, as odd part and power of two modulo 2^64 for integers (exact), and
 * by parity for bool (Lucas: C(n,m) is odd when m's bits are among n's). */
static void diff_line(const tg_line *lx, const tg_line *ly, int64_t n, tg_dtype dt) {
    int64_t m = lx->n > n ? lx->n - n : 0;
    for (int64_t i = 0; i < m; i++) {
        char *py = tg_line_at(ly, i);
        if (dt == TG_DT_BOOL) {
            bool acc = false;
            for (int64_t j = 0; j <= n; j++)
                if ((j & n) == j) acc ^= tg_load_i64(tg_line_at(lx, i + j), dt) != 0;
            tg_store_i64(py, dt, acc);
        } else if (tg_dtype_is_float(dt)) {
            double acc = 0.0, c = 1.0, sgn = n % 2 ? -1.0 : 1.0;
            for (int64_t j = 0; j <= n; j++) {
                double t = sgn * c * tg_load_f64(tg_line_at(lx, i + j), dt);
                acc = j == 0 ? t : acc + t; /* the first term as it is: n = 0 keeps -0.0 */
                c = c * (double)(n - j) / (double)(j + 1);
                sgn = -sgn;
            }
            tg_store_f64(py, dt, acc);
        } else {
            uint64_t acc = 0, odd = 1; /* C(n,j) = odd * 2^e */
            int e = 0;
            for (int64_t j = 0; j <= n; j++) {
                uint64_t c = e < 64 ? odd << e : 0;
                uint64_t t = c * (uint64_t)tg_load_i64(tg_line_at(lx, i + j), dt);
                acc = (n - j) % 2 ? acc - t : acc + t;
                if (j == n) break;
                uint64_t up = (uint64_t)(n - j), down = (uint64_t)(j + 1);
                int zu = __builtin_ctzll(up), zd = __builtin_ctzll(down);
                odd *= (up >> zu) * inv_odd(down >> zd);
                e += zu - zd;
            }
            tg_store_i64(py, dt, tg_ops_wrap_i64(acc));
        }
    }
}

static tg_status ref_diff(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    tg_tensor *y = k->out[0];
    int axis, nd;
    int64_t outer[TG_MAX_DIMS], o[TG_MAX_DIMS] = {0};
    if (x->ndim == 0 || !tg_axis_norm(k->attrs[DIFF_AXIS].i, x->ndim, &axis))
        return tg_kern_fail(k, TG_EINVAL, "axis is out of bounds");
    if (tg_lines_outer(x, axis, outer, &nd) == 0) return TG_OK;
    do {
        tg_line lx, ly;
        tg_line_get(x, axis, o, &lx);
        tg_line_get(y, axis, o, &ly);
        diff_line(&lx, &ly, k->attrs[DIFF_N].i, x->dtype);
    } while (tg_index_next(nd, outer, o));
    return TG_OK;
}

/* Zeros of v's type with extent ext (a 0-d i64) along axis. */
static tg_var *zeros_along(tg_graph *g, tg_var *v, int axis, tg_var *ext) {
    tg_var *ins[TG_MAX_DIMS + 1];
    if (!tg_grad_dims(g, v, ins + 1)) return NULL;
    ins[axis + 1] = ext;
    ins[0] = tg_ir_const(g, tg_tensor_new(g->ctx, (tg_dtype)v->type.dtype, 0, NULL), 0);
    return tg_apply(g, "alloc", ins, v->type.ndim + 1, NULL, 0);
}

static tg_status vjp_diff(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0], *gy = gout[0];
    int64_t order = n->attrs[DIFF_N].i;
    int axis;
    if (!tg_ops_float_in(n, 0)) return g->status;
    if (!tg_axis_norm(n->attrs[DIFF_AXIS].i, x->type.ndim, &axis))
        return tg_ir_fail(g, TG_EINTERNAL, "diff gradient: bad axis"), g->status;
    if (order == 0) {
        gin[0] = gy;
        return g->status;
    }
    tg_var *xd[TG_MAX_DIMS], *k = tg_literal_int(g, order);
    if (!tg_grad_dims(g, x, xd)) return g->status;
    int64_t e = x->type.shape[axis];
    tg_var *after = e >= 0 ? tg_literal_int(g, e < order ? e : order) : tg_minimum(g, xd[axis], k);
    tg_var *parts[3] = {zeros_along(g, gy, axis, k), gy, zeros_along(g, gy, axis, after)};
    tg_attr ca = TG_A_INT("axis", axis);
    tg_var *pad = tg_apply(g, "concatenate", parts, 3, &ca, 1);
    tg_attr da[2] = {TG_A_INT("n", order), TG_A_INT("axis", axis)};
    tg_var *d = tg_apply(g, "diff", &pad, 1, da, 2);
    gin[0] = order % 2 ? tg_neg(g, d) : d;
    return g->status;
}

const tg_op_def tg_op_diff = {
    .name = "diff",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = diff_attrs,
    .nattrs = (int)TG_COUNTOF(diff_attrs),
    .infer = infer_diff,
    .ref = ref_diff,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_diff,
};
