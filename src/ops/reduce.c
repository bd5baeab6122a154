/* reduce.c - reductions over axes: sum prod mean max min argmax argmin any all.
 *
 * One record per op. Attributes: `axis` (sum..all: none = every axis, or a list of axes,
 * negative counting from the end, duplicates rejected; argmax/argmin: one int or none =
 * the flattened array) and `keepdims` (reduced axes stay as static 1s).
 * Dtypes follow NumPy: sum/prod of bool and integers accumulate in i64 (NumPy gives u64
 * for u8; tgraph has no u64, so u8 sums are i64 too), floats keep their dtype; mean of
 * bool/integers is f64, of floats keeps the dtype; max/min keep the dtype and propagate
 * NaN; argmax/argmin give i64 (first occurrence, NaN counts as the extreme); any/all
 * give bool. max/min/argmax/argmin over an empty axis are errors, statically when the
 * extent is known to be 0, else when the inference runs on concrete types.
 * Each record also states its computation as data (`reduce`, ops.h: combine, identity,
 * finalisation, NaN rule, whether an empty axis is an error), which inference, the fast
 * kernels of the backends and the rewrites read; the reference kernels below are the
 * oracle those must match. A new reduction is its record (with that data) and its tests.
 * Invariants: the reference kernels loop over output elements and, for each, over the
 * reduced elements in C order, reading inputs through their strides (any sign, 0-size);
 * floats accumulate in double (rounded once at the store), integers in uint64 (wrapping).
 */
#include "ops.h"

#include <math.h>
#include <stdio.h>

/* ---- attributes ---- */

static const tg_attr_spec reduce_attrs[] = {
    {"axis", TG_AS_AXES, 0, 1, {.kind = TG_ATTR_NONE}},
    {"keepdims", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
};

/* argmax/argmin take one int axis or none (the flattened array), as NumPy. The kernels
 * also accept a list of one axis (normalized attributes made by hand or by rewrites). */
static const tg_attr_spec arg_attrs[] = {
    {"axis", TG_AS_INT, 0, 1, {.kind = TG_ATTR_NONE}},
    {"keepdims", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
};

#define NATTRS 2 /* both schemas: axis, keepdims */

/* ---- inference ---- */

typedef enum { OUT_SUM, OUT_MEAN, OUT_SAME, OUT_I64, OUT_BOOL } out_rule;

static tg_dtype reduce_dtype(out_rule rule, tg_dtype in) {
    switch (rule) {
    case OUT_SUM:
        return tg_dtype_is_float(in) ? in : TG_DT_I64;
    case OUT_MEAN:
        return tg_dtype_is_float(in) ? in : TG_DT_F64;
    case OUT_SAME:
        return in;
    case OUT_I64:
        return TG_DT_I64;
    case OUT_BOOL:
        return TG_DT_BOOL;
    }
    return in;
}

/* Shared inference. Reductions without an identity (the record's reduce.nonempty: max,
 * min, arg*) reject a reduced axis of extent 0. */
static tg_status reduce_infer_common(tg_infer *ic, out_rule rule) {
    const tg_type *x = &ic->in[0];
    tg_type *o = &ic->out[0];
    tg_axes ax;
    char err[160];
    const char *name = ic->op->name;
    if (!tg_reduce_axes(ic->attrs, NATTRS, x->ndim, &ax, err, sizeof err))
        return tg_infer_fail(ic, TG_EINVAL, "%s", err);
    if (rule == OUT_I64 && ic->attrs[0].kind == TG_ATTR_INTS && ic->attrs[0].n != 1)
        return tg_infer_fail(ic, TG_EINVAL, "takes one axis or none, got a list of %d",
                             ic->attrs[0].n);
    if (ic->op->reduce.nonempty) {
        for (int i = 0; i < x->ndim; i++) {
            if (!ax.red[i] || x->shape[i] != 0) continue;
            char ts[TG_TYPE_STR_MAX];
            if (rule == OUT_I64)
                return tg_infer_fail(ic, TG_ESHAPE,
                                     "attempt to get %s of an empty sequence (axis %d of %s)", name,
                                     i, tg_type_str(x, ts, sizeof ts));
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "zero-size array to reduction operation %s which has no "
                                 "identity (axis %d of %s)",
                                 name, i, tg_type_str(x, ts, sizeof ts));
        }
    }
    memset(o, 0, sizeof *o);
    o->dtype = (uint8_t)reduce_dtype(rule, (tg_dtype)x->dtype);
    int nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (ax.red[i]) {
            if (ax.keep) o->shape[nd++] = 1; /* a static 1: broadcastable */
            continue;
        }
        if (x->nobcast & (1u << i)) o->nobcast |= 1u << nd;
        o->shape[nd++] = x->shape[i];
    }
    o->ndim = (uint8_t)nd;
    return TG_OK;
}

static tg_status infer_sum(tg_infer *ic) { return reduce_infer_common(ic, OUT_SUM); }
static tg_status infer_mean(tg_infer *ic) { return reduce_infer_common(ic, OUT_MEAN); }
static tg_status infer_same(tg_infer *ic) { return reduce_infer_common(ic, OUT_SAME); }
static tg_status infer_arg(tg_infer *ic) { return reduce_infer_common(ic, OUT_I64); }
static tg_status infer_bool(tg_infer *ic) { return reduce_infer_common(ic, OUT_BOOL); }

/* ---- reference kernels ---- */

/* Accumulator for one output element. */
typedef struct racc {
    double f;     /* float sum/product/extreme */
    uint64_t u;   /* integer sum/product (wraps) */
    int64_t best; /* integer extreme */
    int64_t arg;  /* position of the extreme among the reduced elements */
    int64_t n;    /* reduced elements seen so far (set by the driver) */
    bool flag;    /* any/all value; NaN seen for max/min/arg* */
} racc;

typedef struct reducer {
    const tg_op_def *op; /* its record: the name, and whether an empty axis is an error */
    void (*init)(racc *a);
    void (*step)(racc *a, const void *p, tg_dtype dt); /* one input element */
    void (*done)(const racc *a, void *out, tg_dtype odt);
} reducer;

static bool truthy(const void *p, tg_dtype dt) {
    return tg_dtype_is_float(dt) ? tg_load_f64(p, dt) != 0.0 : tg_load_i64(p, dt) != 0;
}

static void init_zero(racc *a) { memset(a, 0, sizeof *a); }
static void init_one(racc *a) {
    memset(a, 0, sizeof *a);
    a->f = 1.0;
    a->u = 1;
}
static void init_true(racc *a) {
    memset(a, 0, sizeof *a);
    a->flag = true;
}

static void step_sum(racc *a, const void *p, tg_dtype dt) {
    if (tg_dtype_is_float(dt))
        a->f += tg_load_f64(p, dt);
    else
        a->u += (uint64_t)tg_load_i64(p, dt);
}
static void step_prod(racc *a, const void *p, tg_dtype dt) {
    if (tg_dtype_is_float(dt))
        a->f *= tg_load_f64(p, dt);
    else
        a->u *= (uint64_t)tg_load_i64(p, dt);
}
static void done_num(const racc *a, void *out, tg_dtype odt) {
    if (tg_dtype_is_float(odt))
        tg_store_f64(out, odt, a->f);
    else
        tg_store_i64(out, odt, tg_ops_wrap_i64(a->u));
}

static void step_mean(racc *a, const void *p, tg_dtype dt) { a->f += tg_load_f64(p, dt); }
static void done_mean(const racc *a, void *out, tg_dtype odt) {
    /* NumPy gives NaN (with a warning) for the mean of nothing */
    tg_store_f64(out, odt, a->n > 0 ? a->f / (double)a->n : NAN);
}

/* max/min/argmax/argmin: `sgn` +1 looks for the largest, -1 the smallest. The first NaN
 * wins and stays; ties keep the first occurrence. */
static void step_extreme(racc *a, const void *p, tg_dtype dt, int sgn) {
    if (a->flag) return; /* a NaN was seen */
    if (tg_dtype_is_float(dt)) {
        double v = tg_load_f64(p, dt);
        if (isnan(v)) {
            a->flag = true;
            a->f = v;
            a->arg = a->n;
        } else if (a->n == 0 || (sgn > 0 ? v > a->f : v < a->f)) {
            a->f = v;
            a->arg = a->n;
        }
    } else {
        int64_t v = tg_load_i64(p, dt);
        if (a->n == 0 || (sgn > 0 ? v > a->best : v < a->best)) {
            a->best = v;
            a->arg = a->n;
        }
    }
}
static void step_max(racc *a, const void *p, tg_dtype dt) { step_extreme(a, p, dt, 1); }
static void step_min(racc *a, const void *p, tg_dtype dt) { step_extreme(a, p, dt, -1); }
static void done_extreme(const racc *a, void *out, tg_dtype odt) {
    if (tg_dtype_is_float(odt))
        tg_store_f64(out, odt, a->f);
    else
        tg_store_i64(out, odt, a->best);
}
static void done_arg(const racc *a, void *out, tg_dtype odt) { tg_store_i64(out, odt, a->arg); }

static void step_any(racc *a, const void *p, tg_dtype dt) {
    if (!a->flag && truthy(p, dt)) a->flag = true;
}
static void step_all(racc *a, const void *p, tg_dtype dt) {
    if (a->flag && !truthy(p, dt)) a->flag = false;
}
static void done_flag(const racc *a, void *out, tg_dtype odt) {
    tg_store_i64(out, odt, a->flag ? 1 : 0);
}

/* The driver: for each output element (C order over the kept axes), reduce the elements
 * of the reduced axes in C order. */
static tg_status reduce_ref(tg_kern *k, const reducer *r) {
    const tg_tensor *x = k->in[0];
    tg_tensor *y = k->out[0];
    tg_axes ax;
    char err[160];
    if (!tg_reduce_axes(k->attrs, NATTRS, x->ndim, &ax, err, sizeof err))
        return tg_kern_fail(k, TG_EINVAL, "%s", err);
    const bool *red = ax.red;
    bool keep = ax.keep;
    int keep_ax[TG_MAX_DIMS], red_ax[TG_MAX_DIMS], out_ax[TG_MAX_DIMS];
    int64_t keep_shape[TG_MAX_DIMS], red_shape[TG_MAX_DIMS];
    int nkeep = 0, nred = 0, nyd = 0;
    int64_t nout = 1, nelem = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (red[i]) {
            red_shape[nred] = x->shape[i];
            red_ax[nred++] = i;
            nelem *= x->shape[i];
            if (keep) nyd++;
        } else {
            keep_shape[nkeep] = x->shape[i];
            out_ax[nkeep] = nyd++; /* where this kept axis sits in the output */
            keep_ax[nkeep++] = i;
            nout *= x->shape[i];
        }
    }
    if (nyd != y->ndim || tg_tensor_size(y) != nout)
        return tg_kern_fail(k, TG_EINTERNAL, "output of rank %d does not match the reduction",
                            y->ndim);
    if (r->op->reduce.nonempty && nelem == 0 && nout > 0)
        return tg_kern_fail(k, TG_ESHAPE,
                            "zero-size array to reduction operation %s which "
                            "has no identity",
                            r->op->name);
    int64_t ko[TG_MAX_DIMS] = {0}, ri[TG_MAX_DIMS], idx[TG_MAX_DIMS], yidx[TG_MAX_DIMS];
    for (int64_t o = 0; o < nout; o++) {
        racc a;
        r->init(&a);
        for (int t = 0; t < nred; t++) ri[t] = 0;
        for (int t = 0; t < nkeep; t++) idx[keep_ax[t]] = ko[t];
        for (int64_t j = 0; j < nelem; j++) {
            for (int t = 0; t < nred; t++) idx[red_ax[t]] = ri[t];
            a.n = j;
            r->step(&a, tg_tensor_at(x, idx), x->dtype);
            tg_index_next(nred, red_shape, ri);
        }
        a.n = nelem;
        for (int t = 0; t < y->ndim; t++) yidx[t] = 0;
        for (int t = 0; t < nkeep; t++) yidx[out_ax[t]] = ko[t];
        r->done(&a, tg_tensor_at(y, yidx), y->dtype);
        tg_index_next(nkeep, keep_shape, ko);
    }
    return TG_OK;
}

static const reducer r_sum = {&tg_op_sum, init_zero, step_sum, done_num};
static const reducer r_prod = {&tg_op_prod, init_one, step_prod, done_num};
static const reducer r_mean = {&tg_op_mean, init_zero, step_mean, done_mean};
static const reducer r_max = {&tg_op_max, init_zero, step_max, done_extreme};
static const reducer r_min = {&tg_op_min, init_zero, step_min, done_extreme};
static const reducer r_argmax = {&tg_op_argmax, init_zero, step_max, done_arg};
static const reducer r_argmin = {&tg_op_argmin, init_zero, step_min, done_arg};
static const reducer r_any = {&tg_op_any, init_zero, step_any, done_flag};
static const reducer r_all = {&tg_op_all, init_true, step_all, done_flag};

static tg_status ref_sum(tg_kern *k) { return reduce_ref(k, &r_sum); }
static tg_status ref_prod(tg_kern *k) { return reduce_ref(k, &r_prod); }
static tg_status ref_mean(tg_kern *k) { return reduce_ref(k, &r_mean); }
static tg_status ref_max(tg_kern *k) { return reduce_ref(k, &r_max); }
static tg_status ref_min(tg_kern *k) { return reduce_ref(k, &r_min); }
static tg_status ref_argmax(tg_kern *k) { return reduce_ref(k, &r_argmax); }
static tg_status ref_argmin(tg_kern *k) { return reduce_ref(k, &r_argmin); }
static tg_status ref_any(tg_kern *k) { return reduce_ref(k, &r_any); }
static tg_status ref_all(tg_kern *k) { return reduce_ref(k, &r_all); }

/* ---- gradients ----
 * Every VJP first brings the cotangent to the keepdims form (expand_dims at the reduced
 * axes when keepdims was false), then spreads it over the reduced axes:
 *  - sum: broadcast back (broadcast_to, or alloc with shape(x) where x has '?' extents);
 *  - mean: the same divided by the number of reduced elements (static, or the product of
 *    shape(x)'s reduced extents at run time);
 *  - prod: exact where x has zeros (never g * prod / x). With nz the number of zeros in
 *    the reduced slice and p the product of its non-zero elements: nz == 0 gives
 *    g * p / x; nz == 1 gives g * p to the zero element and 0 to the others; nz >= 2
 *    gives 0 everywhere. The graph is written so that second derivatives are exact at
 *    zeros too (see vjp_prod); third and higher ones are not where a slice has three or
 *    more zeros. Dividing p / x can lose the last bits, and overflow or underflow where
 *    the product of all but one element would not; inf or NaN in x give NaN.
 *  - max/min: the cotangent is split evenly among the elements equal to the result (a
 *    tie of k elements gives each g / k, as JAX does), 0 to the others; a slice holding
 *    a NaN has a NaN result, which no element equals: its elements get 0 (like
 *    maximum/minimum, where neither input gets anything when the result is NaN).
 * argmax, argmin, any and all have integer or bool results: no gradient (TG_GRAD_NONE).
 */

/* The node's axis attribute as a builder attribute. */
static tg_attr axis_attr(const tg_aval *a) {
    if (a->kind == TG_ATTR_NONE) return TG_A_NONE("axis");
    if (a->kind == TG_ATTR_INTS) return TG_A_INTS("axis", a->ints, a->n);
    return TG_A_INT("axis", a->i);
}

/* The same reduction with keepdims=true (reductions of the gradient graphs). */
static tg_var *reduce_keep(tg_graph *g, const char *op, tg_var *v, const tg_node *n) {
    tg_attr a[2] = {axis_attr(&n->attrs[0]), TG_A_BOOL("keepdims", true)};
    return tg_apply(g, op, &v, 1, a, 2);
}

/* v (of the reduction's output type) in the keepdims form; red[] gets the reduced axes. */
static tg_var *keepdims_form(tg_graph *g, const tg_node *n, tg_var *v, bool *red) {
    const tg_type *x = &n->in[0]->type;
    tg_axes ax;
    char err[160];
    if (!tg_reduce_axes(n->attrs, NATTRS, x->ndim, &ax, err, sizeof err))
        return tg_ir_fail(g, TG_EINTERNAL, "%s gradient: %s", tg_op_table[n->op]->name, err);
    memcpy(red, ax.red, sizeof ax.red);
    if (ax.keep || !v) return v;
    int64_t axes[TG_MAX_DIMS];
    int na = 0;
    for (int i = 0; i < x->ndim; i++)
        if (red[i]) axes[na++] = i;
    if (na == 0) return v;
    tg_attr a = TG_A_INTS("axis", axes, na);
    return tg_apply(g, "expand_dims", &v, 1, &a, 1);
}

static tg_status vjp_sum(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    bool red[TG_MAX_DIMS];
    if (!tg_ops_float_in(n, 0)) return g->status;
    gin[0] = tg_grad_broadcast_like(g, keepdims_form(g, n, gout[0], red), n->in[0]);
    return g->status;
}

static tg_status vjp_mean(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0], *cnt = NULL, *dims[TG_MAX_DIMS];
    bool red[TG_MAX_DIMS];
    if (!tg_ops_float_in(n, 0)) return g->status;
    tg_var *gk = keepdims_form(g, n, gout[0], red);
    double known = 1.0; /* the static part of the count (a double: no overflow) */
    for (int i = 0; i < x->type.ndim; i++)
        if (red[i] && x->type.shape[i] >= 0) known *= (double)x->type.shape[i];
    for (int i = 0; i < x->type.ndim && gk; i++) {
        if (!red[i] || x->type.shape[i] >= 0) continue;
        if (!cnt && !tg_grad_dims(g, x, dims)) return g->status;
        cnt = cnt ? tg_mul(g, cnt, dims[i]) : dims[i];
    }
    tg_var *div = tg_literal_float(g, known);
    if (cnt) {
        div = tg_cast(g, cnt, (tg_dtype)x->type.dtype);
        if (known != 1.0) div = tg_mul(g, div, tg_literal_float(g, known));
    }
    gin[0] = tg_grad_broadcast_like(g, tg_div(g, gk, div), x);
    return g->status;
}

/* d prod / dx_i = product of the other elements of its slice, written so that its value
 * and its own derivatives are exact where x has zeros: p = product of the non-zero
 * elements and z = sum of the zero elements (0, but its derivative is 1 at each zero). */
static tg_status vjp_prod(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0], *zero = tg_literal_float(g, 0.0);
    bool red[TG_MAX_DIMS];
    if (!tg_ops_float_in(n, 0)) return g->status;
    tg_var *gk = keepdims_form(g, n, gout[0], red);
    tg_var *isz = tg_eq(g, x, zero);
    tg_var *nz = reduce_keep(g, "sum", isz, n);
    tg_var *nz0 = tg_eq(g, nz, tg_literal_int(g, 0)), *nz1 = tg_eq(g, nz, tg_literal_int(g, 1));
    tg_var *nz2 = tg_eq(g, nz, tg_literal_int(g, 2));
    tg_var *xnz = tg_where(g, isz, tg_literal_float(g, 1.0), x);
    tg_var *gp = tg_mul(g, gk, reduce_keep(g, "prod", xnz, n)); /* g * p */
    tg_var *zs = reduce_keep(g, "sum", tg_where(g, isz, x, zero), n);
    /* non-zero x_i: p / x_i without zeros, z * p / x_i with one (0, but the right slope
     * towards the zero), 0 with more */
    tg_var *nonzero = tg_where(g, nz0, tg_div(g, gp, xnz),
                               tg_where(g, nz1, tg_div(g, tg_mul(g, gp, zs), xnz), zero));
    /* a zero x_i: p when it is the only zero, (z - x_i) * p (0, the slope towards the
     * other zero) with two, 0 with more */
    tg_var *atzero = tg_where(g, nz1, gp, tg_where(g, nz2, tg_mul(g, gp, tg_sub(g, zs, x)), zero));
    gin[0] = tg_where(g, isz, atzero, nonzero);
    return g->status;
}

static tg_status vjp_extreme(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0];
    bool red[TG_MAX_DIMS];
    if (!tg_ops_float_in(n, 0)) return g->status;
    tg_var *gk = keepdims_form(g, n, gout[0], red);
    tg_var *hit = tg_eq(g, x, keepdims_form(g, n, n->out[0], red));
    /* at least 1: a NaN slice (no hit) must not put 0/0 into higher derivatives */
    tg_var *hits = tg_maximum(g, reduce_keep(g, "sum", hit, n), tg_literal_int(g, 1));
    tg_var *cnt = tg_cast(g, hits, (tg_dtype)x->type.dtype);
    tg_var *share = tg_div(g, gk, cnt);
    gin[0] = tg_grad_broadcast_like(g, tg_where(g, hit, share, tg_literal_float(g, 0.0)), x);
    return g->status;
}

/* ---- the records ---- */

const tg_op_def tg_op_sum = {
    .name = "sum",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_REDUCE,
    .attrs = reduce_attrs,
    .nattrs = (int)TG_COUNTOF(reduce_attrs),
    .infer = infer_sum,
    .ref = ref_sum,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_sum,
    .reduce = {.combine = TG_RED_SUM, .identity = 0.0},
};

const tg_op_def tg_op_prod = {
    .name = "prod",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_REDUCE,
    .attrs = reduce_attrs,
    .nattrs = (int)TG_COUNTOF(reduce_attrs),
    .infer = infer_sum,
    .ref = ref_prod,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_prod,
    .reduce = {.combine = TG_RED_PROD, .identity = 1.0},
};

const tg_op_def tg_op_mean = {
    .name = "mean",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_REDUCE,
    .attrs = reduce_attrs,
    .nattrs = (int)TG_COUNTOF(reduce_attrs),
    .infer = infer_mean,
    .ref = ref_mean,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_mean,
    .reduce = {.combine = TG_RED_SUM, .fin = TG_FIN_MEAN, .identity = 0.0},
};

const tg_op_def tg_op_max = {
    .name = "max",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_REDUCE,
    .attrs = reduce_attrs,
    .nattrs = (int)TG_COUNTOF(reduce_attrs),
    .infer = infer_same,
    .ref = ref_max,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_extreme,
    .reduce = {.combine = TG_RED_MAX, .nan_wins = 1, .nonempty = 1, .identity = -INFINITY},
};

const tg_op_def tg_op_min = {
    .name = "min",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_REDUCE,
    .attrs = reduce_attrs,
    .nattrs = (int)TG_COUNTOF(reduce_attrs),
    .infer = infer_same,
    .ref = ref_min,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_extreme,
    .reduce = {.combine = TG_RED_MIN, .nan_wins = 1, .nonempty = 1, .identity = INFINITY},
};

const tg_op_def tg_op_argmax = {
    .name = "argmax",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_REDUCE,
    .attrs = arg_attrs,
    .nattrs = (int)TG_COUNTOF(arg_attrs),
    .infer = infer_arg,
    .ref = ref_argmax,
    .grad = TG_GRAD_NONE,
    .reduce = {.combine = TG_RED_MAX,
               .fin = TG_FIN_ARG,
               .nan_wins = 1,
               .nonempty = 1,
               .identity = -INFINITY},
};

const tg_op_def tg_op_argmin = {
    .name = "argmin",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_REDUCE,
    .attrs = arg_attrs,
    .nattrs = (int)TG_COUNTOF(arg_attrs),
    .infer = infer_arg,
    .ref = ref_argmin,
    .grad = TG_GRAD_NONE,
    .reduce = {.combine = TG_RED_MIN,
               .fin = TG_FIN_ARG,
               .nan_wins = 1,
               .nonempty = 1,
               .identity = INFINITY},
};

const tg_op_def tg_op_any = {
    .name = "any",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_REDUCE,
    .attrs = reduce_attrs,
    .nattrs = (int)TG_COUNTOF(reduce_attrs),
    .infer = infer_bool,
    .ref = ref_any,
    .grad = TG_GRAD_NONE,
    .reduce = {.combine = TG_RED_OR, .identity = 0.0},
};

const tg_op_def tg_op_all = {
    .name = "all",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_REDUCE,
    .attrs = reduce_attrs,
    .nattrs = (int)TG_COUNTOF(reduce_attrs),
    .infer = infer_bool,
    .ref = ref_all,
    .grad = TG_GRAD_NONE,
    .reduce = {.combine = TG_RED_AND, .identity = 1.0},
};
