/* sort.c - sorting, selection and order statistics: sort argsort topk searchsorted
 * quantile median.
 *
 * One record per op, with NumPy's semantics:
 *  - sort(x, axis=-1), argsort(x, axis=-1)   np.sort, np.argsort(kind="stable"); axis one
 *                                            int or none (x flattened, a 1-D result)
 *  - v, i = topk(x, k=, axis=-1)             the k largest along axis, largest first: the
 *                                            values, then their indices (i64)
 *  - searchsorted(a, v, side="left")         np.searchsorted: for each element of v, where
 *                                            it goes in the sorted 1-D a (i64, v's shape)
 *  - quantile(x, q=, axis=none, keepdims=false), median(x, axis=none, keepdims=false)
 *                                            np.quantile (method "linear"), np.median
 * Order: ascending, stable (equal elements keep their order: argsort's indices increase
 * within a tie), NaN after every number (NaNs tie with each other), -0.0 tied with 0.0; for
 * topk the same order read from the largest: a NaN counts as the largest, and ties give
 * the lowest index first. searchsorted compares in that order too (a NaN goes after the
 * numbers of a), a and v promoted together (NEP 50).
 * quantile: q is a number or a list of numbers in [0, 1]; a list puts its axis first in
 * the result (NumPy's). `axis` is none (every axis), an int or a list, as for the
 * reductions (tg_reduce_axes), keepdims as NumPy. With n the number of reduced elements,
 * the value is NumPy's linear interpolation between the order statistics lo = floor(i)
 * and hi = min(lo + 1, n - 1) at i = q (n - 1), weight t = i - lo, written as NumPy's
 * _lerp: a + (b - a) t, or b - (b - a)(1 - t) where t >= 0.5. median is the middle
 * order statistic, or the mean of the middle two ((a + b) / 2, as np.median). A slice
 * holding a NaN gives NaN. Dtypes: floats keep theirs, bool and integers give f64; the
 * arithmetic is done in double (NumPy 1.24 returns f64 for f32 input because q is an f64
 * array; tgraph keeps f32, as np.median does). An empty slice is an error for quantile
 * (NumPy's IndexError) and NaN for median (np.median's mean of nothing).
 * Errors: an axis out of range, k < 0 or k larger than the axis (statically where the
 * extent is known, else at run time), q outside [0, 1], a not 1-D, side not "left" or
 * "right", a 0-d x for sort/argsort/topk with an int axis.
 * Gradients: argsort and searchsorted have integer results (none). sort scatters the
 * cotangent back through argsort(x) (the scatter of take_along), topk through its
 * indices (the cotangent of the indices is ignored): a tie gives each element the
 * cotangent of the place it was sorted to. quantile and median send g (1 - t) to the
 * element of rank lo in its slice and g t to the one of rank hi, ranks being the inverse
 * of the stable argsort (argsort of argsort), so ties follow the same rule; the function
 * is piecewise linear and this is its gradient where no two elements of a slice tie.
 * Invariants: kernels read through any strides (any sign, 0-size, flattened views that
 * do not collapse), never allocate (sorting is an in-place heapsort of the output with
 * the index as tie-break; order statistics are found by radix selection, 8 bits a pass),
 * and never write an input.
 */
#include "ops.h"

#include <math.h>
#include <stdio.h>

/* ---- the order of elements ---- */

/* -1, 0 or 1: a before, tied with, after b in ascending order (NaN after every number). */
static int elem_cmp(const char *a, const char *b, tg_dtype dt) {
    if (dt == TG_DT_F32 || dt == TG_DT_F64) {
        double x = tg_load_f64(a, dt), y = tg_load_f64(b, dt);
        if (x < y) return -1;
        if (x > y) return 1;
        if (x == y) return 0;
        return isnan(x) ? !isnan(y) : -1;
    }
    int64_t x = tg_load_i64(a, dt), y = tg_load_i64(b, dt);
    return (x > y) - (x < y);
}

static bool elem_isnan(const char *p, tg_dtype dt) {
    return (dt == TG_DT_F32 || dt == TG_DT_F64) && isnan(tg_load_f64(p, dt));
}

/* ---- heapsort of a line in place ----
 * cmp(ctx, a, b) orders two elements of the line (each esz bytes); the line ends sorted
 * ascending in that order. */
typedef int (*cmp_fn)(const void *ctx, const char *a, const char *b);

static void swap_elems(char *a, char *b, size_t esz) {
    char t[8];
    memcpy(t, a, esz);
    memcpy(a, b, esz);
    memcpy(b, t, esz);
}

static void sift_down(const tg_line *l, size_t esz, cmp_fn cmp, const void *ctx, int64_t i,
                      int64_t n) {
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && cmp(ctx, tg_line_at(l, c + 1), tg_line_at(l, c)) > 0) c++;
        if (cmp(ctx, tg_line_at(l, c), tg_line_at(l, i)) <= 0) return;
        swap_elems(tg_line_at(l, c), tg_line_at(l, i), esz);
        i = c;
    }
}

static void heap_sort(const tg_line *l, int64_t n, size_t esz, cmp_fn cmp, const void *ctx) {
    for (int64_t i = n / 2 - 1; i >= 0; i--) sift_down(l, esz, cmp, ctx, i, n);
    for (int64_t m = n - 1; m > 0; m--) {
        swap_elems(tg_line_at(l, 0), tg_line_at(l, m), esz);
        sift_down(l, esz, cmp, ctx, 0, m);
    }
}

/* Values of one dtype, compared as they are. */
static int cmp_values(const void *ctx, const char *a, const char *b) {
    return elem_cmp(a, b, *(const tg_dtype *)ctx);
}

/* Indices (i64) into the line x, compared by the elements they point at, then by index:
 * a total order, so the unstable heapsort sorts stably. `worst_first` reverses the values
 * (topk keeps the k best with the worst on top of its heap). */
typedef struct by_index {
    const tg_line *x;
    tg_dtype dt;
    bool worst_first;
} by_index;

static int cmp_indices(const void *ctx, const char *a, const char *b) {
    const by_index *c = ctx;
    int64_t i, j;
    memcpy(&i, a, sizeof i);
    memcpy(&j, b, sizeof j);
    int r = elem_cmp(tg_line_at(c->x, i), tg_line_at(c->x, j), c->dt);
    if (r != 0) return c->worst_first ? -r : r;
    return (i > j) - (i < j);
}

/* ---- attributes and inference of sort, argsort, topk ---- */

static const tg_attr_spec sort_attrs[] = {
    {"axis", TG_AS_INT, 0, 1, {.kind = TG_ATTR_INT, .i = -1}},
};

enum { TOPK_K, TOPK_AXIS };
static const tg_attr_spec topk_attrs[] = {
    [TOPK_K] = {"k", TG_AS_INT, 1, 0, {.kind = TG_ATTR_NONE}},
    [TOPK_AXIS] = {"axis", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = -1}},
};

static tg_status infer_sort(tg_infer *ic) { return tg_infer_along(ic, (tg_dtype)ic->in[0].dtype); }
static tg_status infer_argsort(tg_infer *ic) { return tg_infer_along(ic, TG_DT_I64); }

static tg_status infer_topk(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    int64_t k = ic->attrs[TOPK_K].i;
    int axis;
    char ts[TG_TYPE_STR_MAX];
    if (!tg_axis_norm(ic->attrs[TOPK_AXIS].i, x->ndim, &axis))
        return tg_axis_fail(ic, ic->attrs[TOPK_AXIS].i, x);
    if (k < 0) return tg_infer_fail(ic, TG_EINVAL, "k must be at least 0, got %lld", (long long)k);
    if (x->shape[axis] >= 0 && k > x->shape[axis])
        return tg_infer_fail(
            ic, TG_ESHAPE, "k = %lld is larger than the extent %lld of axis %d (x is %s)",
            (long long)k, (long long)x->shape[axis], axis, tg_type_str(x, ts, sizeof ts));
    for (int o = 0; o < 2; o++) {
        tg_type *t = &ic->out[o];
        *t = *x;
        t->weak = 0;
        t->dtype = (uint8_t)(o == 0 ? x->dtype : TG_DT_I64);
        t->shape[axis] = k;
        t->nobcast &= ~(1u << axis);
    }
    return TG_OK;
}

/* ---- kernels of sort, argsort, topk ---- */

/* After sorting values, the runs of equal elements that are not all the same bits are
 * the zeros (-0.0 and 0.0) and the NaNs (their payloads): each gets its elements in the
 * order x has them, as a stable sort leaves them. */
static void stable_ties(const tg_line *lx, const tg_line *ly, tg_dtype dt) {
    int64_t n = ly->n, zero = n, nan = n;
    size_t esz = tg_dtype_size(dt);
    for (int64_t j = n - 1; j >= 0; j--) {
        double v = tg_load_f64(tg_line_at(ly, j), dt);
        if (isnan(v)) nan = j;
        if (v == 0.0) zero = j;
    }
    for (int64_t j = 0; j < n; j++) {
        const char *p = tg_line_at(lx, j);
        double v = tg_load_f64(p, dt);
        if (v == 0.0) memcpy(tg_line_at(ly, zero++), p, esz);
        if (isnan(v)) memcpy(tg_line_at(ly, nan++), p, esz);
    }
}

static void sort_each(const tg_line *lx, const tg_line *ly, void *ctx) {
    tg_dtype dt = lx->t->dtype;
    size_t esz = tg_dtype_size(dt);
    if (*(const bool *)ctx) { /* argsort */
        by_index c = {.x = lx, .dt = dt};
        for (int64_t j = 0; j < lx->n; j++) memcpy(tg_line_at(ly, j), &j, sizeof j);
        heap_sort(ly, ly->n, sizeof(int64_t), cmp_indices, &c);
        return;
    }
    for (int64_t j = 0; j < lx->n; j++) memcpy(tg_line_at(ly, j), tg_line_at(lx, j), esz);
    heap_sort(ly, ly->n, esz, cmp_values, &dt);
    if (tg_dtype_is_float(dt)) stable_ties(lx, ly, dt);
}

static tg_status sort_ref(tg_kern *k, bool indices) { return tg_lines_map(k, sort_each, &indices); }

static tg_status ref_sort(tg_kern *k) { return sort_ref(k, false); }
static tg_status ref_argsort(tg_kern *k) { return sort_ref(k, true); }

/* A heap of the k best seen so far, worst on top (held in the indices' line), then
 * sorted best first; the values are read through the indices. */
static tg_status ref_topk(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    tg_tensor *yv = k->out[0], *yi = k->out[1];
    int64_t kk = k->attrs[TOPK_K].i, outer[TG_MAX_DIMS], o[TG_MAX_DIMS] = {0};
    int axis, nd;
    if (x->ndim == 0 || !tg_axis_norm(k->attrs[TOPK_AXIS].i, x->ndim, &axis))
        return tg_kern_fail(k, TG_EINVAL, "axis is out of bounds");
    if (kk < 0 || kk > x->shape[axis])
        return tg_kern_fail(k, TG_ESHAPE, "k = %lld is larger than the extent %lld of axis %d",
                            (long long)kk, (long long)x->shape[axis], axis);
    if (kk == 0 || tg_lines_outer(x, axis, outer, &nd) == 0) return TG_OK;
    size_t esz = tg_dtype_size(x->dtype);
    do {
        tg_line lx, lv, li;
        tg_line_get(x, axis, o, &lx);
        tg_line_get(yv, axis, o, &lv);
        tg_line_get(yi, axis, o, &li);
        by_index c = {.x = &lx, .dt = x->dtype, .worst_first = true};
        for (int64_t j = 0; j < kk; j++) memcpy(tg_line_at(&li, j), &j, sizeof j);
        for (int64_t i = kk / 2 - 1; i >= 0; i--)
            sift_down(&li, sizeof(int64_t), cmp_indices, &c, i, kk);
        for (int64_t j = kk; j < lx.n; j++) {
            if (cmp_indices(&c, (const char *)&j, tg_line_at(&li, 0)) >= 0) continue;
            memcpy(tg_line_at(&li, 0), &j, sizeof j);
            sift_down(&li, sizeof(int64_t), cmp_indices, &c, 0, kk);
        }
        heap_sort(&li, kk, sizeof(int64_t), cmp_indices, &c);
        for (int64_t j = 0; j < kk; j++) {
            int64_t i;
            memcpy(&i, tg_line_at(&li, j), sizeof i);
            memcpy(tg_line_at(&lv, j), tg_line_at(&lx, i), esz);
        }
    } while (tg_index_next(nd, outer, o));
    return TG_OK;
}

/* ---- gradients of sort and topk ---- */

static tg_status vjp_sort(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0];
    int axis;
    if (!tg_ops_float_in(n, 0)) return g->status;
    if (!tg_axis_attr(&n->attrs[0], x->type.ndim, &axis))
        return tg_ir_fail(g, TG_EINTERNAL, "sort gradient: bad axis"), g->status;
    tg_attr a = n->attrs[0].kind == TG_ATTR_NONE ? TG_A_NONE("axis") : TG_A_INT("axis", axis);
    tg_var *perm = tg_apply(g, "argsort", &x, 1, &a, 1);
    gin[0] = tg_grad_put_along(g, x, perm, axis, gout[0]);
    return g->status;
}

static tg_status vjp_topk(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    int axis;
    if (!tg_ops_float_in(n, 0) || !gout[0]) return g->status;
    if (!tg_axis_norm(n->attrs[TOPK_AXIS].i, n->in[0]->type.ndim, &axis))
        return tg_ir_fail(g, TG_EINTERNAL, "topk gradient: bad axis"), g->status;
    gin[0] = tg_grad_put_along(g, n->in[0], n->out[1], axis, gout[0]);
    return g->status;
}

const tg_op_def tg_op_sort = {
    .name = "sort",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = sort_attrs,
    .nattrs = (int)TG_COUNTOF(sort_attrs),
    .infer = infer_sort,
    .ref = ref_sort,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_sort,
};

const tg_op_def tg_op_argsort = {
    .name = "argsort",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = sort_attrs,
    .nattrs = (int)TG_COUNTOF(sort_attrs),
    .infer = infer_argsort,
    .ref = ref_argsort,
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_topk = {
    .name = "topk",
    .min_in = 1,
    .max_in = 1,
    .nout = 2,
    .kind = TG_KIND_INDEX,
    .attrs = topk_attrs,
    .nattrs = (int)TG_COUNTOF(topk_attrs),
    .infer = infer_topk,
    .ref = ref_topk,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_topk,
};

/* ---- searchsorted ---- */

static const tg_attr_spec search_attrs[] = {
    {"side", TG_AS_STR, 0, 0, {.kind = TG_ATTR_STR, .s = "left"}},
};

/* a and v compare in one dtype: NEP 50 promotion of the two (a literal v adopts a's). */
static tg_status promote_search(tg_infer *ic, tg_dtype *want) {
    const tg_type *t[2] = {&ic->in[0], &ic->in[1]};
    want[0] = want[1] = tg_promote_types(t, 2);
    return TG_OK;
}

static tg_status infer_searchsorted(tg_infer *ic) {
    const tg_type *a = &ic->in[0], *v = &ic->in[1];
    const char *side = ic->attrs[0].s;
    char ts[TG_TYPE_STR_MAX];
    if (a->ndim != 1)
        return tg_infer_fail(ic, TG_ESHAPE, "a must be one-dimensional, got %s",
                             tg_type_str(a, ts, sizeof ts));
    if (strcmp(side, "left") != 0 && strcmp(side, "right") != 0)
        return tg_infer_fail(ic, TG_EINVAL, "side must be \"left\" or \"right\", got \"%s\"", side);
    tg_type *o = &ic->out[0];
    *o = *v;
    o->dtype = TG_DT_I64;
    o->weak = 0;
    return TG_OK;
}

/* Binary search in a for each element of v: left, the first i with !(a[i] < v); right,
 * the first i with a[i] > v. */
static tg_status ref_searchsorted(tg_kern *k) {
    const tg_tensor *a = k->in[0], *v = k->in[1];
    tg_tensor *y = k->out[0];
    bool right = strcmp(k->attrs[0].s, "right") == 0;
    if (a->ndim != 1 || a->dtype != v->dtype)
        return tg_kern_fail(k, TG_EINTERNAL, "a is not 1-D or has another dtype than v");
    if (tg_tensor_size(v) == 0) return TG_OK;
    tg_line la;
    tg_line_get(a, 0, NULL, &la);
    int64_t idx[TG_MAX_DIMS] = {0};
    do {
        const char *pv = tg_tensor_at(v, idx);
        int64_t lo = 0, hi = la.n;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            int c = elem_cmp(tg_line_at(&la, mid), pv, a->dtype);
            if (right ? c <= 0 : c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        memcpy(tg_tensor_at(y, idx), &lo, sizeof lo);
    } while (tg_index_next(v->ndim, v->shape, idx));
    return TG_OK;
}

const tg_op_def tg_op_searchsorted = {
    .name = "searchsorted",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = search_attrs,
    .nattrs = (int)TG_COUNTOF(search_attrs),
    .promote = promote_search,
    .infer = infer_searchsorted,
    .ref = ref_searchsorted,
    .grad = TG_GRAD_NONE,
};

/* ---- quantile, median ---- */

enum { QU_Q, QU_AXIS, QU_KEEPDIMS };
static const tg_attr_spec quantile_attrs[] = {
    [QU_Q] = {"q", TG_AS_FLOATS, 1, 0, {.kind = TG_ATTR_NONE}},
    [QU_AXIS] = {"axis", TG_AS_AXES, 0, 1, {.kind = TG_ATTR_NONE}},
    [QU_KEEPDIMS] = {"keepdims", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
};
static const tg_attr_spec median_attrs[] = {
    {"axis", TG_AS_AXES, 0, 1, {.kind = TG_ATTR_NONE}},
    {"keepdims", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
};

/* What quantile and median share: the q values (median: 0.5, no q axis) and where their
 * axis and keepdims attributes are. */
typedef struct order_stat {
    const double *q;     /* the quantiles */
    int nq;              /* how many */
    bool qaxis;          /* q is a list: its axis leads the result */
    bool median;         /* np.median's mean of the middle two, and NaN for an empty slice */
    const tg_aval *axes; /* axis, keepdims (tg_reduce_axes' layout) */
} order_stat;

static const double half = 0.5;

static order_stat order_stat_of(const tg_op_def *op, const tg_aval *attrs) {
    if (op == &tg_op_median) return (order_stat){&half, 1, false, true, attrs};
    const tg_aval *q = &attrs[QU_Q];
    if (q->kind == TG_ATTR_FLOATS)
        return (order_stat){q->floats, q->n, true, false, &attrs[QU_AXIS]};
    return (order_stat){&q->f, 1, false, false, &attrs[QU_AXIS]};
}

static tg_status infer_order_stat(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    order_stat s = order_stat_of(ic->op, ic->attrs);
    tg_axes ax;
    char err[160], ts[TG_TYPE_STR_MAX];
    for (int k = 0; k < s.nq; k++)
        if (!(s.q[k] >= 0.0 && s.q[k] <= 1.0))
            return tg_infer_fail(ic, TG_EINVAL, "quantiles must be in the range [0, 1], got q = %g",
                                 s.q[k]);
    if (!tg_reduce_axes(s.axes, 2, x->ndim, &ax, err, sizeof err))
        return tg_infer_fail(ic, TG_EINVAL, "%s", err);
    for (int d = 0; d < x->ndim && !s.median; d++)
        if (ax.red[d] && x->shape[d] == 0)
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "cannot take a quantile of an empty axis (axis %d of %s)", d,
                                 tg_type_str(x, ts, sizeof ts));
    tg_type *o = &ic->out[0];
    memset(o, 0, sizeof *o);
    o->dtype = (uint8_t)(tg_dtype_is_float((tg_dtype)x->dtype) ? x->dtype : TG_DT_F64);
    int nd = (s.qaxis ? 1 : 0) + (ax.keep ? x->ndim : x->ndim - ax.nred);
    if (nd > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "the result would have %d dimensions (at most %d)", nd,
                             TG_MAX_DIMS);
    o->ndim = (uint8_t)nd;
    nd = 0;
    if (s.qaxis) o->shape[nd++] = s.nq;
    for (int d = 0; d < x->ndim; d++) {
        if (ax.red[d] && !ax.keep) continue;
        if (ax.red[d]) {
            o->shape[nd++] = 1; /* a static 1: broadcastable */
            continue;
        }
        if (x->nobcast & (1u << d)) o->nobcast |= 1u << nd;
        o->shape[nd++] = x->shape[d];
    }
    return TG_OK;
}

/* An unsigned key of the element at p, in its low 8 * size(dt) bits, whose order is the
 * elements' numeric order (NaN aside; -0.0 before 0.0). */
static uint64_t order_key(const char *p, tg_dtype dt) {
    switch (dt) {
    case TG_DT_F64: {
        uint64_t u;
        memcpy(&u, p, sizeof u);
        return u >> 63 ? ~u : u | (1ull << 63);
    }
    case TG_DT_F32: {
        uint32_t u;
        memcpy(&u, p, sizeof u);
        return u >> 31 ? (uint32_t)~u : u | (1u << 31);
    }
    case TG_DT_BOOL:
    case TG_DT_U8:
        return (uint64_t)tg_load_i64(p, dt);
    default: { /* signed: the two's complement bits with the sign bit flipped */
        int bits = 8 * (int)tg_dtype_size(dt);
        uint64_t u = (uint64_t)tg_load_i64(p, dt) ^ (1ull << (bits - 1));
        return bits == 64 ? u : u & ((1ull << bits) - 1);
    }
    }
}

/* The value of the element with key `key`. */
static double key_value(uint64_t key, tg_dtype dt) {
    switch (dt) {
    case TG_DT_F64: {
        uint64_t u = key >> 63 ? key ^ (1ull << 63) : ~key;
        double v;
        memcpy(&v, &u, sizeof v);
        return v;
    }
    case TG_DT_F32: {
        uint32_t u = key >> 31 ? (uint32_t)key ^ (1u << 31) : ~(uint32_t)key;
        float v;
        memcpy(&v, &u, sizeof v);
        return v;
    }
    case TG_DT_BOOL:
    case TG_DT_U8:
        return (double)key;
    default: {
        int bits = 8 * (int)tg_dtype_size(dt);
        uint64_t u = key ^ (1ull << (bits - 1)); /* the bits of the value, sign-extended: */
        if (bits < 64 && (u >> (bits - 1)) & 1) u |= ~0ull << bits;
        return (double)tg_ops_wrap_i64(u);
    }
    }
}

/* The element of rank r (0: the smallest) of the line, by its key one byte at a time from
 * the top: each pass counts the candidates' next byte and keeps those holding rank r. */
static double select_rank(const tg_line *l, tg_dtype dt, int64_t r) {
    int bits = 8 * (int)tg_dtype_size(dt);
    uint64_t prefix = 0, mask = 0;
    for (int shift = bits - 8; shift >= 0; shift -= 8) {
        int64_t hist[256] = {0};
        for (int64_t j = 0; j < l->n; j++) {
            uint64_t key = order_key(tg_line_at(l, j), dt);
            if ((key & mask) == prefix) hist[(key >> shift) & 255]++;
        }
        int b = 0;
        while (r >= hist[b]) r -= hist[b++];
        prefix |= (uint64_t)b << shift;
        mask |= 255ull << shift;
    }
    return key_value(prefix, dt);
}

/* np.quantile's linear method on one slice (n > 0, no NaN). */
static double quantile_of(const tg_line *l, tg_dtype dt, double q) {
    int64_t n = l->n;
    double vi = (double)(n - 1) * q;
    int64_t lo = (int64_t)floor(vi), hi = lo + 1 < n ? lo + 1 : n - 1; /* lo <= n - 1: q <= 1 */
    double a = select_rank(l, dt, lo), b = hi == lo ? a : select_rank(l, dt, hi);
    double t = vi - floor(vi), d = b - a;
    return t >= 0.5 ? b - d * (1.0 - t) : a + d * t;
}

static double median_of(const tg_line *l, tg_dtype dt) {
    int64_t n = l->n;
    if (n == 0) return NAN;
    if (n % 2) return select_rank(l, dt, n / 2);
    return (select_rank(l, dt, n / 2 - 1) + select_rank(l, dt, n / 2)) / 2.0;
}

/* For each output element (C order over the kept axes), the reduced elements as a
 * tensor of the reduced axes (a view sharing x's buffer), flattened into a line. */
static tg_status order_stat_ref(tg_kern *k, const tg_op_def *op) {
    const tg_tensor *x = k->in[0];
    tg_tensor *y = k->out[0];
    order_stat s = order_stat_of(op, k->attrs);
    tg_axes ax;
    char err[160];
    if (!tg_reduce_axes(s.axes, 2, x->ndim, &ax, err, sizeof err))
        return tg_kern_fail(k, TG_EINVAL, "%s", err);
    tg_tensor sub = {.dtype = x->dtype, .buf = x->buf};
    int keep_ax[TG_MAX_DIMS], out_ax[TG_MAX_DIMS], nkeep = 0, nyd = s.qaxis ? 1 : 0;
    int64_t keep_shape[TG_MAX_DIMS], nout = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (ax.red[d]) {
            sub.shape[sub.ndim] = x->shape[d];
            sub.strides[sub.ndim++] = x->strides[d];
            nyd += ax.keep;
            continue;
        }
        keep_shape[nkeep] = x->shape[d];
        out_ax[nkeep] = nyd++;
        keep_ax[nkeep++] = d;
        nout *= x->shape[d];
    }
    if (nyd != y->ndim)
        return tg_kern_fail(k, TG_EINTERNAL, "output of rank %d does not match", y->ndim);
    if (nout == 0 || s.nq == 0) return TG_OK;
    if (!s.median && tg_tensor_size(&sub) == 0)
        return tg_kern_fail(k, TG_ESHAPE, "cannot take a quantile of an empty axis");
    int64_t ko[TG_MAX_DIMS] = {0}, yidx[TG_MAX_DIMS];
    do {
        sub.offset = x->offset;
        for (int t = 0; t < nkeep; t++) sub.offset += ko[t] * x->strides[keep_ax[t]];
        tg_line l;
        tg_line_get(&sub, -1, NULL, &l);
        bool nan = false;
        for (int64_t j = 0; j < l.n && !nan; j++) nan = elem_isnan(tg_line_at(&l, j), x->dtype);
        for (int t = 0; t < y->ndim; t++) yidx[t] = 0;
        for (int t = 0; t < nkeep; t++) yidx[out_ax[t]] = ko[t];
        for (int q = 0; q < s.nq; q++) {
            double v = nan        ? NAN
                       : s.median ? median_of(&l, x->dtype)
                                  : quantile_of(&l, x->dtype, s.q[q]);
            yidx[0] = s.qaxis ? q : yidx[0];
            tg_store_f64(tg_tensor_at(y, yidx), y->dtype, v);
        }
    } while (tg_index_next(nkeep, keep_shape, ko));
    return TG_OK;
}

static tg_status ref_quantile(tg_kern *k) { return order_stat_ref(k, &tg_op_quantile); }
static tg_status ref_median(tg_kern *k) { return order_stat_ref(k, &tg_op_median); }

/* The gradient (see the header): rank = argsort(argsort(x)) over each slice (the reduced
 * axes moved last and flattened, then put back), and for each q the cotangent times
 * 1 - t where rank == lo, times t where rank == hi. lo, hi and t come from the slice's
 * length n: computed here where n is static, in the graph from shape(x) where not. */
static tg_status vjp_order_stat(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0], *xd[TG_MAX_DIMS];
    int nd = x->type.ndim;
    order_stat s = order_stat_of(tg_op_table[n->op], n->attrs);
    tg_axes ax;
    char err[160];
    if (!tg_ops_float_in(n, 0) || !gout[0]) return g->status;
    if (!tg_reduce_axes(s.axes, 2, nd, &ax, err, sizeof err))
        return tg_ir_fail(g, TG_EINTERNAL, "%s gradient: %s", tg_op_table[n->op]->name, err),
               g->status;
    if (!tg_grad_dims(g, x, xd)) return g->status;
    /* the kept axes, then the reduced ones */
    int64_t perm[TG_MAX_DIMS], inv[TG_MAX_DIMS], red[TG_MAX_DIMS];
    int np = 0, nred = 0;
    bool moved = false;
    for (int d = 0; d < nd; d++)
        if (!ax.red[d]) perm[np++] = d;
    int nk = np;
    for (int d = 0; d < nd; d++)
        if (ax.red[d]) perm[np++] = red[nred++] = d;
    tg_var *cnt = tg_literal_int(g, 1), *td[TG_MAX_DIMS];
    for (int t = 0; t < nd; t++) {
        moved = moved || perm[t] != t;
        inv[perm[t]] = t;
        td[t] = xd[perm[t]];
        if (t >= nk) cnt = tg_grad_mul_extents(g, cnt, td[t]);
    }
    tg_var *xr = moved ? tg_transpose(g, x, perm) : x;
    tg_var *rd[TG_MAX_DIMS + 1];
    for (int t = 0; t < nk; t++) rd[t] = td[t];
    rd[nk] = cnt;
    if (nred != 1) xr = tg_grad_reshape(g, xr, nk + 1, rd);
    tg_attr last = TG_A_INT("axis", -1);
    tg_var *rank = tg_apply(g, "argsort", &xr, 1, &last, 1);
    rank = tg_apply(g, "argsort", &rank, 1, &last, 1);
    if (nred != 1) rank = tg_grad_reshape(g, rank, nd, td);
    if (moved) rank = tg_transpose(g, rank, inv);
    /* the cotangent in the keepdims form */
    tg_var *gy = gout[0];
    tg_dtype dt = (tg_dtype)x->type.dtype;
    int64_t size;
    bool known = false;
    if (cnt && cnt->kind == TG_VAR_CONST && cnt->value) {
        size = tg_load_i64(tg_tensor_data(cnt->value), cnt->value->dtype);
        known = true;
    }
    tg_var *zero = tg_literal_float(g, 0.0), *acc = NULL;
    for (int k = 0; k < s.nq && g->status == TG_OK; k++) {
        tg_var *gk = gy;
        if (s.qaxis) gk = tg_slice_apply(g, gy, &(tg_slice){.start = k, .is_index = true}, 1);
        if (!ax.keep && nred > 0) {
            tg_attr ea = TG_A_INTS("axis", red, nred);
            gk = tg_apply(g, "expand_dims", &gk, 1, &ea, 1);
        }
        tg_var *lo, *hi, *t;
        if (known) {
            double vi = (double)(size - 1) * s.q[k], f = floor(vi);
            int64_t l = (int64_t)f;
            lo = tg_literal_int(g, l);
            hi = tg_literal_int(g, l + 1 < size ? l + 1 : size - 1);
            t = tg_literal_float(g, vi - f);
        } else {
            tg_var *last_pos = tg_sub(g, cnt, tg_literal_int(g, 1));
            tg_var *vi = tg_mul(g, tg_cast(g, last_pos, TG_DT_F64), tg_literal_float(g, s.q[k]));
            tg_var *f = tg_floor(g, vi);
            lo = tg_cast(g, f, TG_DT_I64);
            hi = tg_minimum(g, tg_add(g, lo, tg_literal_int(g, 1)), last_pos);
            t = tg_cast(g, tg_sub(g, vi, f), dt);
        }
        tg_var *wlo = tg_mul(g, gk, tg_sub(g, tg_literal_float(g, 1.0), t));
        tg_var *c = tg_add(g, tg_where(g, tg_eq(g, rank, lo), wlo, zero),
                           tg_where(g, tg_eq(g, rank, hi), tg_mul(g, gk, t), zero));
        acc = acc ? tg_add(g, acc, c) : c;
    }
    gin[0] = acc ? acc : tg_grad_zeros_like(g, x);
    return g->status;
}

const tg_op_def tg_op_quantile = {
    .name = "quantile",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = quantile_attrs,
    .nattrs = (int)TG_COUNTOF(quantile_attrs),
    .infer = infer_order_stat,
    .ref = ref_quantile,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_order_stat,
};

const tg_op_def tg_op_median = {
    .name = "median",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = median_attrs,
    .nattrs = (int)TG_COUNTOF(median_attrs),
    .infer = infer_order_stat,
    .ref = ref_median,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_order_stat,
};
