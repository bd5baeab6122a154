/* index_apply.c - x[...] with basic and advanced items mixed (tg_index_apply,
 * tg_index_update): the items are normalized against x ('...' expanded, negative axes
 * resolved, masks turned into the coordinates of their true values) and the expression
 * is built from the ops of index.c and index_arrays.c and basic slicing, with NumPy's
 * rules for where the advanced axes go.
 *
 * Invariants: an expression that has an op of its own (a basic slice, one integer array
 * with ':' elsewhere, one leading mask) is built as that op, so `x[...]` and the op
 * cannot disagree; an update goes through the same plan as the read, so it writes
 * exactly the places x[...] selects; user errors are reported through the graph's first
 * error, never an abort.
 */
#include "ops.h"

/* ---- x[...] with basic and advanced items mixed (tg_index_apply, tg_index_update) ---- */

/* An indexing expression resolved against x: the basic part per axis, the index arrays
 * with their axes (masks as the coordinates of their true values), and the simple forms
 * that have an op of their own. */
typedef struct idx_plan {
    int ndim;                  /* x's rank */
    int nsl;                   /* entries of sl: x's rank, or the items without arrays */
    tg_slice sl[TG_MAX_DIMS];  /* per axis of x: the basic item (full for advanced axes) */
    bool full;                 /* every basic item is ':' */
    int k;                     /* index arrays */
    tg_var *arr[TG_MAX_DIMS];  /* the arrays (integers, masks' coordinates) */
    int64_t axes[TG_MAX_DIMS]; /* their axes */
    int take_axis;             /* one integer array and ':' elsewhere: its axis; else -1 */
    tg_var *lead_mask;         /* one mask at the front and ':' elsewhere: it; else NULL */
} idx_plan;

static const tg_slice full_slice = {.omit = TG_SLICE_OMIT_ALL};

static bool is_full(const tg_slice *s) { return !s->is_index && s->omit == TG_SLICE_OMIT_ALL; }

/* The coordinates along axis d of the true values of mask m, which indexes x's axes
 * p..p+m.ndim: mask_select of the grid of those axes' positions, so that mask_select
 * checks at run time, as at build time, that the mask's shape is theirs. */
static tg_var *mask_coords(tg_graph *g, tg_var *x, tg_var *m, int p, int d) {
    int md = m->type.ndim;
    tg_var *xd[TG_MAX_DIMS];
    if (!tg_grad_dims(g, x, xd)) return NULL;
    tg_var *grid = tg_apply(g, "arange", &xd[p + d], 1, NULL, 0);
    int64_t others[TG_MAX_DIMS];
    int no = 0;
    for (int e = 0; e < md; e++)
        if (e != d) others[no++] = e;
    tg_attr ea = TG_A_INTS("axis", others, no);
    if (no > 0) grid = tg_apply(g, "expand_dims", &grid, 1, &ea, 1);
    bool known = true;
    int64_t sh[TG_MAX_DIMS];
    for (int e = 0; e < md; e++) known = known && (sh[e] = x->type.shape[p + e]) >= 0;
    if (md > 1 && known) { /* a 1-D mask's grid is the arange itself */
        tg_attr a = TG_A_INTS("shape", sh, md);
        grid = tg_apply(g, "broadcast_to", &grid, 1, &a, 1);
    } else if (md > 1) {
        tg_var *ins[TG_MAX_DIMS + 1];
        ins[0] = grid;
        for (int e = 0; e < md; e++) ins[1 + e] = xd[p + e];
        grid = tg_apply(g, "alloc", ins, md + 1, NULL, 0);
    }
    return tg_apply(g, "mask_select", (tg_var *[]){grid, m}, 2, NULL, 0);
}

static bool plan_make(tg_graph *g, tg_var *x, const tg_index *idx, int n, idx_plan *pl) {
    char xs[TG_TYPE_STR_MAX], ms[TG_TYPE_STR_MAX];
    if (g->status != TG_OK) return false;
    if (!x) return tg_ir_fail(g, TG_EINVAL, "index: x is NULL"), false;
    if (n < 0 || n > TG_MAX_DIMS || (n > 0 && !idx))
        return tg_ir_fail(g, TG_EINVAL, "index: invalid index list (%d entries)", n), false;
    memset(pl, 0, sizeof *pl);
    pl->ndim = x->type.ndim;
    pl->full = true;
    pl->take_axis = -1;
    int narr = 0, nadv = 0, ax = 0;
    for (int i = 0; i < n; i++) narr += idx[i].array != NULL;
    pl->nsl = pl->ndim;
    if (narr == 0) { /* basic indexing: the slice op's own checks and messages */
        for (int i = 0; i < n; i++) pl->sl[i] = idx[i].slice;
        pl->nsl = n;
        return true;
    }
    for (int i = 0; i < n; i++) {
        tg_var *a = idx[i].array;
        int span = a && a->type.dtype == TG_DT_BOOL ? a->type.ndim : 1;
        if (a && a->type.dtype == TG_DT_BOOL && span == 0)
            return tg_ir_fail(g, TG_EUNSUPPORTED,
                              "index: a 0-d boolean index (x[true]) is supported only alone "
                              "(mask_select)"),
                   false;
        if (ax + span > pl->ndim)
            return tg_ir_fail(g, TG_EINDEX,
                              "too many indices for array: array is %d-dimensional, but %d "
                              "were indexed (%s)",
                              pl->ndim, ax + span, tg_type_str(&x->type, xs, sizeof xs)),
                   false;
        if (!a) {
            pl->sl[ax] = idx[i].slice;
            if (!idx[i].slice.is_index || narr == 0) {
                pl->full = pl->full && is_full(&idx[i].slice);
                ax++;
                continue;
            }
            /* an integer beside index arrays is one of them (NumPy's rule) */
            pl->sl[ax] = full_slice;
            pl->arr[pl->k] = tg_literal_int(g, idx[i].slice.start);
            pl->axes[pl->k++] = ax++;
            nadv++;
            continue;
        }
        nadv++;
        if (span == 1 && a->type.dtype != TG_DT_BOOL) {
            pl->sl[ax] = full_slice;
            pl->arr[pl->k] = a;
            pl->axes[pl->k++] = ax++;
            continue;
        }
        for (int d = 0; d < span; d++) {
            int64_t xe = x->type.shape[ax + d], me = a->type.shape[d];
            if (xe >= 0 && me >= 0 && xe != me)
                return tg_ir_fail(g, TG_EINDEX,
                                  "boolean index did not match indexed array along dimension "
                                  "%d; dimension is %lld but corresponding boolean dimension "
                                  "is %lld (x %s, mask %s)",
                                  ax + d, (long long)xe, (long long)me,
                                  tg_type_str(&x->type, xs, sizeof xs),
                                  tg_type_str(&a->type, ms, sizeof ms)),
                       false;
        }
        if (narr == 1 && i == 0) pl->lead_mask = a;
        for (int d = 0; d < span; d++) {
            pl->sl[ax + d] = full_slice;
            pl->axes[pl->k] = ax + d;
            pl->arr[pl->k++] = NULL; /* made below, once the rest is known to be valid */
        }
        ax += span;
    }
    for (; ax < pl->ndim; ax++) pl->sl[ax] = full_slice;
    if (nadv == 1 && pl->full && pl->k == 1 && narr == 1 && !pl->lead_mask)
        for (int i = 0; i < n; i++)
            if (idx[i].array) pl->take_axis = (int)pl->axes[0];
    if (!(pl->full && nadv == 1)) pl->lead_mask = NULL;
    /* the masks' coordinates */
    for (int i = 0, j = 0; i < n && g->status == TG_OK; i++) {
        tg_var *a = idx[i].array;
        if (!a && !(idx[i].slice.is_index && narr > 0)) continue;
        if (!a || a->type.dtype != TG_DT_BOOL) {
            j++;
            continue;
        }
        for (int d = 0; d < a->type.ndim; d++, j++)
            pl->arr[j] = mask_coords(g, x, a, (int)pl->axes[j] - d, d);
    }
    return g->status == TG_OK;
}

/* The slice op's attributes for the basic part of a plan (buffers in v, none). */
static void plan_slice_attrs(const idx_plan *pl, int64_t (*v)[TG_MAX_DIMS],
                             bool (*none)[TG_MAX_DIMS], tg_attr *a) {
    for (int i = 0; i < pl->nsl; i++) {
        const tg_slice *s = &pl->sl[i];
        v[0][i] = s->start, v[1][i] = s->stop, v[2][i] = s->step, v[3][i] = s->is_index;
        none[0][i] = (s->omit & TG_SLICE_NO_START) != 0;
        none[1][i] = (s->omit & TG_SLICE_NO_STOP) != 0 || s->is_index;
        none[2][i] = (s->omit & TG_SLICE_NO_STEP) != 0 || s->is_index;
    }
    static const char *const names[4] = {"starts", "stops", "steps", "index"};
    for (int q = 0; q < 4; q++) {
        a[q] = TG_A_INTS(names[q], v[q], pl->nsl);
        a[q].none = q < 3 ? none[q] : NULL;
    }
}

/* The items with `...` written out as whole axes and each new axis (`none`) turned into a
 * whole axis of x' = expand_dims(x, *nnew axes at newax): what plan_make takes. NumPy's
 * rules: new axes sit where they are written, `...` takes the axes the others leave. */
static int index_normalize(tg_graph *g, const tg_var *x, const tg_index *idx, int n, tg_index *out,
                           int64_t *newax, int *nnew) {
    if (g->status != TG_OK) return -1;
    if (!x) return tg_ir_fail(g, TG_EINVAL, "index: x is NULL"), -1;
    if (n < 0 || n > TG_MAX_DIMS || (n > 0 && !idx))
        return tg_ir_fail(g, TG_EINVAL, "index: invalid index list (%d entries)", n), -1;
    int used = 0, nell = 0;
    *nnew = 0;
    for (int i = 0; i < n; i++) {
        unsigned special = idx[i].array ? 0 : idx[i].slice.omit & ~TG_SLICE_OMIT_ALL;
        if (special && special != TG_INDEX_NEWAXIS && special != TG_INDEX_ELLIPSIS)
            return tg_ir_fail(g, TG_EINVAL, "index: item %d has unknown flags %#x", i, special), -1;
        nell += special == TG_INDEX_ELLIPSIS;
        if (special) continue;
        tg_var *a = idx[i].array;
        used += a && a->type.dtype == TG_DT_BOOL ? a->type.ndim : 1;
    }
    if (nell > 1)
        return tg_ir_fail(g, TG_EINDEX, "an index can only have a single ellipsis ('...')"), -1;
    int fill = x->type.ndim - used > 0 ? x->type.ndim - used : 0, m = 0, axis = 0;
    if (nell == 1 && fill == 0) { /* NumPy: a '...' of no axes still separates arrays */
        bool arrays = false, before = false, after = false, seen = false;
        for (int i = 0; i < n; i++) arrays = arrays || idx[i].array;
        for (int i = 0; arrays && i < n; i++) {
            bool adv = idx[i].array ||
                       (!(idx[i].slice.omit & ~TG_SLICE_OMIT_ALL) && idx[i].slice.is_index);
            if (!idx[i].array && (idx[i].slice.omit & ~TG_SLICE_OMIT_ALL) == TG_INDEX_ELLIPSIS)
                seen = true;
            else if (adv)
                *(seen ? &after : &before) = true;
        }
        if (before && after)
            return tg_ir_fail(g, TG_EUNSUPPORTED,
                              "index: a '...' that stands for no axes between index arrays "
                              "(NumPy moves their axes to the front there) is not supported: "
                              "leave it out, or write ':' items"),
                   -1;
    }
    for (int i = 0; i < n; i++) {
        unsigned special = idx[i].array ? 0 : idx[i].slice.omit & ~TG_SLICE_OMIT_ALL;
        int k = special == TG_INDEX_ELLIPSIS ? fill : 1;
        if (m + k > TG_MAX_DIMS)
            return tg_ir_fail(g, TG_ELIMIT,
                              "index: more than %d items once '...' and new axes "
                              "are written out",
                              TG_MAX_DIMS),
                   -1;
        if (special == TG_INDEX_NEWAXIS) newax[(*nnew)++] = axis;
        for (int j = 0; j < k; j++) out[m++] = special ? (tg_index){.slice = full_slice} : idx[i];
        axis += special == TG_INDEX_ELLIPSIS                             ? fill
                : idx[i].array && idx[i].array->type.dtype == TG_DT_BOOL ? idx[i].array->type.ndim
                                                                         : 1;
    }
    if (x->type.ndim + *nnew > TG_MAX_DIMS)
        return tg_ir_fail(g, TG_ELIMIT,
                          "index: %d new axes on a %d-dimensional array make more "
                          "than %d",
                          *nnew, x->type.ndim, TG_MAX_DIMS),
               -1;
    return m;
}

/* x with new axes of extent 1 at newax (the result's axes), or x itself. */
static tg_var *with_new_axes(tg_graph *g, tg_var *x, const int64_t *newax, int nnew) {
    if (nnew == 0) return x;
    tg_attr a = TG_A_INTS("axis", newax, nnew);
    return tg_apply(g, "expand_dims", &x, 1, &a, 1);
}

tg_var *tg_index_apply(tg_graph *g, tg_var *x, const tg_index *idx, int nidx) {
    idx_plan pl;
    tg_index items[TG_MAX_DIMS];
    int64_t newax[TG_MAX_DIMS];
    int nnew;
    if (!g) return tg_set_error(TG_EINVAL, "tg_index_apply: graph is NULL"), NULL;
    int n = index_normalize(g, x, idx, nidx, items, newax, &nnew);
    if (n < 0) return NULL;
    x = with_new_axes(g, x, newax, nnew);
    if (!plan_make(g, x, items, n, &pl)) return NULL;
    if (pl.k == 0) return tg_slice_apply(g, x, pl.sl, pl.nsl);
    if (pl.lead_mask) return tg_apply(g, "mask_select", (tg_var *[]){x, pl.lead_mask}, 2, NULL, 0);
    if (pl.take_axis >= 0) {
        tg_attr a = TG_A_INT("axis", pl.take_axis);
        return tg_apply(g, "take", (tg_var *[]){x, pl.arr[0]}, 2, &a, 1);
    }
    tg_var *xs = pl.full ? x : tg_slice_apply(g, x, pl.sl, pl.ndim);
    tg_var *ins[TG_MAX_DIMS + 1];
    ins[0] = xs;
    for (int j = 0; j < pl.k; j++) ins[1 + j] = pl.arr[j];
    tg_attr a = TG_A_INTS("axes", pl.axes, pl.k);
    return xs ? tg_apply(g, "index", ins, pl.k + 1, &a, 1) : NULL;
}

tg_var *tg_index_update(tg_graph *g, tg_var *x, const tg_index *idx, int nidx, tg_var *y,
                        bool inc) {
    idx_plan pl;
    int64_t v[4][TG_MAX_DIMS];
    bool none[3][TG_MAX_DIMS];
    tg_attr sa[4];
    tg_index items[TG_MAX_DIMS];
    int64_t newax[TG_MAX_DIMS];
    int nnew;
    if (!g) return tg_set_error(TG_EINVAL, "tg_index_update: graph is NULL"), NULL;
    if (g->status == TG_OK && !y) return tg_ir_fail(g, TG_EINVAL, "tg_index_update: y is NULL");
    int n = index_normalize(g, x, idx, nidx, items, newax, &nnew);
    if (n < 0) return NULL;
    if (nnew > 0) { /* x[none, ...] = y: the update of x with its new axes, which go again */
        tg_var *u = tg_index_update(g, with_new_axes(g, x, newax, nnew), items, n, y, inc);
        tg_attr a = TG_A_INTS("axis", newax, nnew);
        return u ? tg_apply(g, "squeeze", &u, 1, &a, 1) : NULL;
    }
    if (!plan_make(g, x, items, n, &pl)) return NULL;
    plan_slice_attrs(&pl, v, none, sa);
    if (pl.k == 0)
        return tg_apply(g, inc ? "inc_subtensor" : "set_subtensor", (tg_var *[]){x, y}, 2, sa, 4);
    if (pl.take_axis >= 0) {
        tg_attr a = TG_A_INT("axis", pl.take_axis);
        return tg_apply(g, inc ? "inc_take" : "set_take", (tg_var *[]){x, pl.arr[0], y}, 3, &a, 1);
    }
    /* x[basic][arrays] updated, then written back into x's basic selection */
    tg_var *xs = pl.full ? x : tg_apply(g, "slice", &x, 1, sa, 4);
    tg_var *ins[TG_MAX_DIMS + 2];
    ins[0] = xs;
    ins[1] = y;
    for (int j = 0; j < pl.k; j++) ins[2 + j] = pl.arr[j];
    tg_attr a = TG_A_INTS("axes", pl.axes, pl.k);
    tg_var *u = xs ? tg_apply(g, inc ? "inc_index" : "set_index", ins, pl.k + 2, &a, 1) : NULL;
    if (pl.full || !u) return u;
    return tg_apply(g, "set_subtensor", (tg_var *[]){x, u}, 2, sa, 4);
}
