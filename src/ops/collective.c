/* collective.c - the collectives of pmap (docs/pmap.md, "Collectives"): values exchanged
 * between the ranks of the enclosing pmap whose axis `axis_name` names, as JAX's:
 *
 *   psum(x, axis_name="i")   pmean   pmax   pmin          the same type as x
 *   all_gather(x, axis_name="i", axis=0, tiled=false)     x of every rank, stacked (tiled:
 *                                                         concatenated) along `axis`
 *   psum_scatter(x, axis_name="i", scatter_dimension=0, tiled=false)
 *                                                         the sum, of which rank r keeps
 *                                                         block r along scatter_dimension
 *   ppermute(x, axis_name="i", perm=[[0, 1], [1, 0]])     rank dst gets src's x; ranks that
 *                                                         are no destination get zeros
 *
 * Typing. all_gather and psum_scatter need the number of ranks N: the enclosing pmap pushes
 * it while it types its body (tg_infer.axes), and a compiled body typed again at run time
 * reads it from its rank's SPMD frame (tg_infer_axis_size); a body typed outside any pmap
 * gets '?' for the extents it decides (compiling it as an entry point is an error:
 * tg_pmap_check_axes). ppermute's perm is checked against N wherever it is known.
 *
 * Execution. A kernel finds the frame of its axis (tg_spmd_find, through `outer` for an
 * enclosing pmap's axis), asks the frame's communicators (tg_comm_set, src/parallel/comm.h)
 * for the one of its position and talks through it (src/parallel/comm.c). Every rank runs
 * the same compiled body, so every rank calls the same collectives in the same order: the
 * one of the body's program, which every backend runs in order (the VM never runs an op
 * with effects in a concurrent run: vm.c, branch_ok). Results are bit-identical run to run
 * and on every rank: each element is reduced over the ranks in rank order, in the dtype.
 * A rank that fails aborts the communicators (src/driver/ranks.c), and a collective
 * waiting for it returns "collective aborted: ...".
 *
 * Invariants:
 *  - Effects TG_EFFECT_STATE | TG_EFFECT_AXIS: never folded, never merged (two equal
 *    psums are two exchanges), valid only inside a pmap of their axis.
 *  - The communicator gets contiguous buffers: an input that is not is copied first (into
 *    the output where the collective may work in place, else into a scratch tensor).
 *  - A communicator fails only when another rank's failure aborted it (the types rule
 *    out what it does not support).
 *  - psum, pmean, pmax and pmin make a value invariant over the axis; all_gather,
 *    psum_scatter and ppermute a varying one (JAX's rules: all_gather's result is equal on
 *    every rank but typed varying, so that its transpose is psum_scatter).
 */
#include "ops.h"

#include "../parallel/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { A_AXIS };
enum { A_GATHER_AXIS = 1, A_GATHER_TILED };
enum { A_SCATTER_DIM = 1, A_SCATTER_TILED };
enum { A_PERM = 1 };
enum { A_WAIT_MEAN = 1 };

static const tg_attr_spec reduce_attrs[] = {[A_AXIS] = {"axis_name", TG_AS_STR, 1, 0, {0}}};
static const tg_attr_spec wait_attrs[] = {
    [A_AXIS] = {"axis_name", TG_AS_STR, 1, 0, {0}},
    [A_WAIT_MEAN] = {"mean", TG_AS_PAIRS, 0, 0, {.kind = TG_ATTR_INTS, .n = 0}},
};
static const tg_attr_spec gather_attrs[] = {
    [A_AXIS] = {"axis_name", TG_AS_STR, 1, 0, {0}},
    [A_GATHER_AXIS] = {"axis", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 0}},
    [A_GATHER_TILED] = {"tiled", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
};
static const tg_attr_spec scatter_attrs[] = {
    [A_AXIS] = {"axis_name", TG_AS_STR, 1, 0, {0}},
    [A_SCATTER_DIM] = {"scatter_dimension", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 0}},
    [A_SCATTER_TILED] = {"tiled", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
};
static const tg_attr_spec permute_attrs[] = {
    [A_AXIS] = {"axis_name", TG_AS_STR, 1, 0, {0}},
    [A_PERM] = {"perm", TG_AS_PAIRS, 1, 0, {0}},
};

/* ---- typing ---- */

/* The checks every collective makes; *n: the number of ranks (-1 unknown). */
static tg_status common_infer(tg_infer *ic, int64_t *n) {
    const char *axis = ic->attrs[A_AXIS].s;
    *n = -1;
    if (!axis || !*axis) return tg_infer_fail(ic, TG_EINVAL, "axis_name must not be empty");
    *n = tg_infer_axis_size(ic, axis);
    ic->out[0] = ic->in[0]; /* a weak literal's sum stays weak, as the literal was */
    return TG_OK;
}

/* At run time the number of ranks must be known: the SPMD frame of the axis gives it. */
static tg_status need_size(tg_infer *ic, int64_t n) {
    if (n >= 0 || !ic->runtime) return TG_OK;
    return tg_infer_fail(ic, TG_EINVAL, "no enclosing pmap has the axis '%s'", ic->attrs[A_AXIS].s);
}

static tg_status no_bool_sum(tg_infer *ic) {
    if (ic->in[0].dtype != TG_DT_BOOL) return TG_OK;
    return tg_infer_fail(ic, TG_ETYPE,
                         "a sum of bool is not defined (pmax is a logical or, pmin an and)");
}

static tg_status psum_infer(tg_infer *ic) {
    int64_t n;
    if (common_infer(ic, &n) != TG_OK) return ic->status;
    return no_bool_sum(ic);
}

static tg_status pmean_infer(tg_infer *ic) {
    int64_t n;
    if (common_infer(ic, &n) != TG_OK) return ic->status;
    if (!tg_dtype_is_float((tg_dtype)ic->in[0].dtype))
        return tg_infer_fail(ic, TG_ETYPE, "the mean of %s over ranks: expected a float (cast it)",
                             tg_dtype_name((tg_dtype)ic->in[0].dtype));
    return TG_OK;
}

static tg_status extreme_infer(tg_infer *ic) {
    int64_t n;
    return common_infer(ic, &n);
}

/* x of every rank along a new axis `axis` of extent n (an axis of the result: -1 is the
 * last), or with tiled=true x's axis `axis` n times as long. */
static tg_status gather_infer(tg_infer *ic) {
    int64_t n;
    if (common_infer(ic, &n) != TG_OK || need_size(ic, n) != TG_OK) return ic->status;
    const tg_type *x = &ic->in[0];
    int64_t a = ic->attrs[A_GATHER_AXIS].i;
    bool tiled = ic->attrs[A_GATHER_TILED].i != 0;
    int r = x->ndim + (tiled ? 0 : 1), ax;
    char ty[TG_TYPE_STR_MAX];
    if (r > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "gathering %s would give more than %d axes",
                             tg_type_str(x, ty, sizeof ty), TG_MAX_DIMS);
    if (r == 0)
        return tg_infer_fail(ic, TG_EINVAL,
                             "tiled=true concatenates along an axis of x, and %s has none",
                             tg_type_str(x, ty, sizeof ty));
    if (!tg_axis_norm(a, r, &ax))
        return tg_infer_fail(ic, TG_EINVAL, "axis %lld is out of range for the %d axes of %s %s",
                             (long long)a, r, tiled ? "the concatenation of" : "the stack of",
                             tg_type_str(x, ty, sizeof ty));
    tg_type *y = &ic->out[0];
    y->nobcast = 0;
    if (tiled) {
        int64_t e = x->shape[ax];
        y->shape[ax] = e >= 0 && n >= 0 ? e * n : -1;
        return TG_OK;
    }
    y->ndim = (uint8_t)r;
    for (int d = r - 1; d > ax; d--) y->shape[d] = x->shape[d - 1];
    y->shape[ax] = n;
    for (int d = 0; d < r; d++) {
        int from = d < ax ? d : d - 1;
        if (d != ax && (x->nobcast & (1u << from))) y->nobcast |= 1u << d;
    }
    return TG_OK;
}

/* The sum over ranks, of which each rank keeps its block along scatter_dimension: the
 * dimension removed (its extent must be n) or, tiled, divided by n. */
static tg_status scatter_infer(tg_infer *ic) {
    int64_t n;
    if (common_infer(ic, &n) != TG_OK || no_bool_sum(ic) != TG_OK || need_size(ic, n) != TG_OK)
        return ic->status;
    const tg_type *x = &ic->in[0];
    bool tiled = ic->attrs[A_SCATTER_TILED].i != 0;
    int64_t a = ic->attrs[A_SCATTER_DIM].i;
    int d;
    char ty[TG_TYPE_STR_MAX];
    if (x->ndim == 0)
        return tg_infer_fail(ic, TG_EINVAL, "%s has no dimension to scatter",
                             tg_type_str(x, ty, sizeof ty));
    if (!tg_axis_norm(a, x->ndim, &d))
        return tg_infer_fail(ic, TG_EINVAL, "scatter_dimension %lld is out of range for %s",
                             (long long)a, tg_type_str(x, ty, sizeof ty));
    int64_t e = x->shape[d];
    if (e >= 0 && n > 0 && (tiled ? e % n != 0 : e != n))
        return tg_infer_fail(ic, TG_ESHAPE,
                             "scatter_dimension %lld of %s has extent %lld, but the axis '%s' "
                             "has %lld ranks: %s",
                             (long long)a, tg_type_str(x, ty, sizeof ty), (long long)e,
                             ic->attrs[A_AXIS].s, (long long)n,
                             tiled ? "with tiled=true the ranks must divide it"
                                   : "with tiled=false it must equal them");
    tg_type *y = &ic->out[0];
    y->nobcast = 0;
    if (tiled) {
        for (int k = 0; k < x->ndim; k++)
            if (k != d && (x->nobcast & (1u << k))) y->nobcast |= 1u << k;
        y->shape[d] = e >= 0 && n > 0 ? e / n : -1;
        return TG_OK;
    }
    y->ndim = (uint8_t)(x->ndim - 1);
    for (int k = 0, o = 0; k < x->ndim; k++) {
        if (k == d) continue;
        y->shape[o] = x->shape[k];
        if (x->nobcast & (1u << k)) y->nobcast |= 1u << o;
        o++;
    }
    return TG_OK;
}

/* perm: pairs [src, dst] of ranks in [0, n) (when n is known), no source and no
 * destination twice. */
static tg_status check_perm(tg_infer *ic, const tg_aval *perm, int64_t n) {
    int np = perm->n / 2;
    if (np > TG_COMM_MAX_RANKS)
        return tg_infer_fail(ic, TG_ELIMIT, "perm has %d pairs; a pmap has at most %d ranks", np,
                             TG_COMM_MAX_RANKS);
    for (int p = 0; p < np; p++) {
        for (int k = 0; k < 2; k++) {
            int64_t v = perm->ints[2 * p + k];
            if (v < 0 || (n >= 0 && v >= n)) {
                char nranks[96] = "";
                if (n >= 0)
                    snprintf(nranks, sizeof nranks, " of the axis '%s' (%lld ranks)",
                             ic->attrs[A_AXIS].s, (long long)n);
                return tg_infer_fail(
                    ic, TG_EINVAL, "perm: the %s %lld of pair %d ([%lld, %lld]) is not a rank%s",
                    k ? "destination" : "source", (long long)v, p, (long long)perm->ints[2 * p],
                    (long long)perm->ints[2 * p + 1], nranks);
            }
        }
        for (int q = 0; q < p; q++)
            for (int k = 0; k < 2; k++)
                if (perm->ints[2 * q + k] == perm->ints[2 * p + k])
                    return tg_infer_fail(ic, TG_EINVAL,
                                         "perm: %s %lld appears twice (pairs %d and %d); perm "
                                         "must be a permutation: each rank sends at most once "
                                         "and receives at most once",
                                         k ? "destination" : "source",
                                         (long long)perm->ints[2 * p + k], q, p);
    }
    return TG_OK;
}

static tg_status permute_infer(tg_infer *ic) {
    int64_t n;
    if (common_infer(ic, &n) != TG_OK) return ic->status;
    return check_perm(ic, &ic->attrs[A_PERM], n);
}

/* psum_start(x1, ..., xk): the inputs (one dtype, summable) flattened end to end, the
 * buffer its all-reduce runs in; psum_wait(b): that buffer once reduced. */
static tg_status start_infer(tg_infer *ic) {
    int64_t n, total = 0;
    if (common_infer(ic, &n) != TG_OK || no_bool_sum(ic) != TG_OK) return ic->status;
    for (int i = 0; i < ic->nin; i++) {
        const tg_type *x = &ic->in[i];
        if (x->dtype != ic->in[0].dtype)
            return tg_infer_fail(ic, TG_ETYPE, "input %d is %s, input 1 %s: a bucket has one dtype",
                                 i + 1, tg_dtype_name((tg_dtype)x->dtype),
                                 tg_dtype_name((tg_dtype)ic->in[0].dtype));
        int64_t e = 1;
        for (int d = 0; d < x->ndim; d++) e = x->shape[d] < 0 || e < 0 ? -1 : e * x->shape[d];
        total = e < 0 || total < 0 ? -1 : total + e;
    }
    tg_type *y = &ic->out[0];
    y->ndim = 1;
    y->shape[0] = total;
    y->nobcast = 0;
    return TG_OK;
}

/* mean: [start, stop) ranges of the buffer, increasing and apart, within it where its
 * extent is known; a float buffer where there is one. */
static tg_status wait_infer(tg_infer *ic) {
    int64_t n;
    if (common_infer(ic, &n) != TG_OK || no_bool_sum(ic) != TG_OK) return ic->status;
    const tg_type *x = &ic->in[0];
    if (x->ndim != 1) return tg_infer_fail(ic, TG_ETYPE, "expected the 1-d buffer of a psum_start");
    const tg_aval *mean = &ic->attrs[A_WAIT_MEAN];
    if (mean->n > 0 && !tg_dtype_is_float((tg_dtype)x->dtype))
        return tg_infer_fail(ic, TG_ETYPE, "mean: the mean of %s over ranks: expected a float",
                             tg_dtype_name((tg_dtype)x->dtype));
    int64_t end = 0, len = x->shape[0];
    for (int k = 0; k + 1 < mean->n; k += 2) {
        int64_t a = mean->ints[k], b = mean->ints[k + 1];
        if (a < end || b <= a)
            return tg_infer_fail(ic, TG_EINVAL,
                                 "mean: pair %d is [%lld, %lld]: expected increasing, disjoint "
                                 "[start, stop] ranges, start < stop",
                                 k / 2, (long long)a, (long long)b);
        if (len >= 0 && b > len)
            return tg_infer_fail(ic, TG_EINVAL,
                                 "mean: pair %d, [%lld, %lld], ends beyond the buffer of %lld "
                                 "elements",
                                 k / 2, (long long)a, (long long)b, (long long)len);
        end = b;
    }
    return TG_OK;
}

/* ---- kernels ---- */

/* A collective that did not happen. When another rank's failure aborted it, the rank this
 * thread runs is noted interrupted, so that its pmap reports the failure that caused it
 * (src/driver/ranks.c). */
static tg_status comm_fail(tg_kern *k, tg_status st, bool aborted) {
    const tg_spmd *cur = tg_spmd_current();
    if (aborted && cur && cur->shared) tg_comm_set_note_interrupted(cur->shared, cur->rank);
    return tg_kern_fail(k, st, "%s", tg_last_error());
}

/* The communicator this thread's rank meets the other ranks of `axis_name` through, and
 * its rank and their number. Ranks of pmaps nested between are the position (comm.h). A
 * blocking collective (`blocking`) first waits for the all-reduces the rank started on it
 * (psum_start): its own thread and the queue's must not be inside the communicator at
 * once, and the order of the ranks' collectives is the program's either way. */
static tg_status comm_of_as(tg_kern *k, bool blocking, tg_comm **c, int *rank, int *n) {
    const char *axis = k->attrs[A_AXIS].s;
    const tg_spmd *s = tg_spmd_find(axis);
    if (!s) return tg_kern_fail(k, TG_EINVAL, "no enclosing pmap has the axis '%s'", axis);
    int key[TG_COMM_SET_MAX_KEY], nkey = 0;
    for (const tg_spmd *f = tg_spmd_current(); f != s; f = f->outer) {
        if (nkey == TG_COMM_SET_MAX_KEY)
            return tg_kern_fail(k, TG_ELIMIT,
                                "more than %d pmaps nested inside the pmap of the axis '%s'",
                                TG_COMM_SET_MAX_KEY, axis);
        key[nkey++] = f->rank;
    }
    if (!s->shared)
        return tg_kern_fail(k, TG_EINTERNAL, "the ranks of the axis '%s' have no communicator",
                            axis);
    tg_status st = tg_comm_set_get(s->shared, key, nkey, c);
    if (st != TG_OK) return comm_fail(k, st, tg_comm_set_aborted(s->shared));
    *rank = s->rank;
    *n = s->size;
    if (blocking) tg_comm_drain(*c, s->rank, false);
    return TG_OK;
}

static tg_status comm_of(tg_kern *k, tg_comm **c, int *rank, int *n) {
    return comm_of_as(k, true, c, rank, n);
}

/* x itself when contiguous, else a contiguous copy the caller frees (*copy); NULL when out
 * of memory (failed in k). */
static const tg_tensor *contiguous(tg_kern *k, const tg_tensor *x, tg_tensor **copy) {
    *copy = NULL;
    if (tg_tensor_is_contiguous(x)) return x;
    *copy = tg_tensor_empty(k->ctx, x->dtype, x->ndim, x->shape);
    if (!*copy) {
        tg_kern_fail(k, TG_ENOMEM, "out of memory: a contiguous copy of the input");
        return NULL;
    }
    tg_tensor_copy_into(*copy, x);
    return *copy;
}

/* Elements of the first `d` axes of t, and of the axes from d on. */
static void split_at(const tg_tensor *t, int d, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int k = 0; k < t->ndim; k++) *(k < d ? outer : inner) *= t->shape[k];
}

/* The [n, p, q] view of a contiguous [p, n, q] tensor t: block r of the ranks first. */
static tg_tensor *ranks_first(const tg_tensor *t, int64_t n, int64_t p, int64_t q) {
    return tg_tensor_view(t, 3, (int64_t[]){n, p, q}, (int64_t[]){q, n * q, 1}, t->offset);
}

/* pmean's mean from the sum: elements [lo, hi) of the float data divided by the number of
 * ranks n, in the dtype (a division, not a product with 1/n, which differs in the last bit
 * for n = 3). pmean and the pmean parts of a bucket (psum_wait's mean) both call it, so
 * that they give the same bits. */
static void divide(void *data, tg_dtype dt, int64_t lo, int64_t hi, int n) {
    if (dt == TG_DT_F32) {
        float *v = data;
        for (int64_t i = lo; i < hi; i++) v[i] /= (float)n;
    } else {
        double *v = data;
        for (int64_t i = lo; i < hi; i++) v[i] /= (double)n;
    }
}

/* psum, pmean, pmax, pmin: an all-reduce, in place in the output when x is not contiguous. */
static tg_status reduce_ref(tg_kern *k, tg_comm_op op, bool mean) {
    tg_comm *c;
    int rank, n;
    if (comm_of(k, &c, &rank, &n) != TG_OK) return k->status;
    const tg_tensor *x = k->in[0];
    tg_tensor *y = k->out[0];
    const void *send = tg_tensor_data(x);
    if (!tg_tensor_is_contiguous(x)) {
        tg_tensor_copy_into(y, x);
        send = tg_tensor_data(y);
    }
    size_t count = (size_t)tg_tensor_size(y);
    tg_status st = tg_comm_all_reduce(c, rank, op, x->dtype, send, tg_tensor_data(y), count);
    if (st != TG_OK) return comm_fail(k, st, true);
    if (mean) divide(tg_tensor_data(y), y->dtype, 0, (int64_t)count, n);
    return TG_OK;
}

static tg_status psum_ref(tg_kern *k) { return reduce_ref(k, TG_COMM_SUM, false); }
static tg_status pmean_ref(tg_kern *k) { return reduce_ref(k, TG_COMM_SUM, true); }
static tg_status pmax_ref(tg_kern *k) { return reduce_ref(k, TG_COMM_MAX, false); }
static tg_status pmin_ref(tg_kern *k) { return reduce_ref(k, TG_COMM_MIN, false); }

/* x is [p, q] around the gathered axis, y [p, n, q]: the ranks' blocks straight into y when
 * p is 1, else into a [n, p, q] scratch copied into y's [p, n, q] order. */
static tg_status gather_ref(tg_kern *k) {
    tg_comm *c;
    int rank, n;
    if (comm_of(k, &c, &rank, &n) != TG_OK) return k->status;
    tg_tensor *copy, *y = k->out[0];
    const tg_tensor *x = contiguous(k, k->in[0], &copy);
    if (!x) return k->status;
    int ax;
    bool tiled = k->attrs[A_GATHER_TILED].i != 0;
    tg_axis_norm(k->attrs[A_GATHER_AXIS].i, x->ndim + (tiled ? 0 : 1), &ax);
    int64_t p, q;
    split_at(x, ax, &p, &q);
    size_t es = tg_dtype_size(x->dtype);
    tg_status st = TG_OK;
    if (p <= 1) {
        st =
            tg_comm_all_gather(c, rank, tg_tensor_data(x), tg_tensor_data(y), (size_t)(p * q) * es);
        if (st != TG_OK) st = comm_fail(k, st, true);
    } else {
        tg_tensor *blocks = tg_tensor_empty(k->ctx, x->dtype, 3, (int64_t[]){n, p, q});
        tg_tensor *order = blocks ? ranks_first(y, n, p, q) : NULL;
        if (!order) st = tg_kern_fail(k, TG_ENOMEM, "out of memory: the gathered blocks");
        if (st == TG_OK) {
            st = tg_comm_all_gather(c, rank, tg_tensor_data(x), tg_tensor_data(blocks),
                                    (size_t)(p * q) * es);
            if (st == TG_OK)
                tg_tensor_copy_into(order, blocks);
            else
                st = comm_fail(k, st, true);
        }
        tg_tensor_free(order);
        tg_tensor_free(blocks);
    }
    tg_tensor_free(copy);
    return st;
}

/* x is [p, n, q] around scatter_dimension, y [p, q]: the ranks' sums of block `rank`, from
 * x itself when p is 1, else from a [n, p, q] scratch copy. */
static tg_status scatter_ref(tg_kern *k) {
    tg_comm *c;
    int rank, n;
    if (comm_of(k, &c, &rank, &n) != TG_OK) return k->status;
    tg_tensor *copy, *y = k->out[0];
    const tg_tensor *x = contiguous(k, k->in[0], &copy);
    if (!x) return k->status;
    int d;
    tg_axis_norm(k->attrs[A_SCATTER_DIM].i, x->ndim, &d);
    bool tiled = k->attrs[A_SCATTER_TILED].i != 0;
    int64_t e = x->shape[d], p, q;
    if (tiled ? e % n != 0 : e != n) { /* run-time inference checked it against the frame */
        tg_tensor_free(copy);
        return tg_kern_fail(k, TG_ESHAPE, "scatter_dimension %d has extent %lld for %d ranks", d,
                            (long long)e, n);
    }
    split_at(x, d, &p, &q);
    q /= n;
    tg_tensor *blocks = NULL, *order = NULL;
    const void *send = tg_tensor_data(x);
    tg_status st = TG_OK;
    if (p > 1) {
        blocks = tg_tensor_empty(k->ctx, x->dtype, 3, (int64_t[]){n, p, q});
        order = blocks ? ranks_first(x, n, p, q) : NULL;
        if (!order)
            st = tg_kern_fail(k, TG_ENOMEM, "out of memory: the blocks to reduce");
        else
            tg_tensor_copy_into(blocks, order);
        if (blocks) send = tg_tensor_data(blocks);
    }
    if (st == TG_OK) {
        st = tg_comm_reduce_scatter(c, rank, TG_COMM_SUM, x->dtype, send, tg_tensor_data(y),
                                    (size_t)(p * q));
        if (st != TG_OK) st = comm_fail(k, st, true);
    }
    tg_tensor_free(order);
    tg_tensor_free(blocks);
    tg_tensor_free(copy);
    return st;
}

static tg_status permute_ref(tg_kern *k) {
    tg_comm *c;
    int rank, n;
    if (comm_of(k, &c, &rank, &n) != TG_OK) return k->status;
    const tg_aval *perm = &k->attrs[A_PERM];
    int np = perm->n / 2, src[TG_COMM_MAX_RANKS], dst[TG_COMM_MAX_RANKS];
    for (int p = 0; p < np; p++) { /* inference checked them against the frame's n */
        if (perm->ints[2 * p] >= n || perm->ints[2 * p + 1] >= n)
            return tg_kern_fail(k, TG_EINVAL, "perm: pair %d names a rank beyond the %d of '%s'", p,
                                n, k->attrs[A_AXIS].s);
        src[p] = (int)perm->ints[2 * p];
        dst[p] = (int)perm->ints[2 * p + 1];
    }
    tg_tensor *copy;
    const tg_tensor *x = contiguous(k, k->in[0], &copy);
    if (!x) return k->status;
    tg_tensor *y = k->out[0];
    size_t bytes = (size_t)tg_tensor_size(x) * tg_dtype_size(x->dtype);
    tg_status st =
        tg_comm_permute(c, rank, src, dst, np, tg_tensor_data(x), tg_tensor_data(y), bytes);
    if (st != TG_OK) st = comm_fail(k, st, true);
    tg_tensor_free(copy);
    return st;
}

/* The inputs packed end to end into the output (the bucket), whose all-reduce then starts
 * on the rank's queue (comm.h, "started collectives") and runs while the rank goes on. */
static tg_status start_ref(tg_kern *k) {
    tg_comm *c;
    int rank, n;
    if (comm_of_as(k, false, &c, &rank, &n) != TG_OK) return k->status;
    tg_tensor *y = k->out[0];
    int64_t at = y->offset;
    for (int i = 0; i < k->nin; i++) {
        const tg_tensor *x = k->in[i];
        int64_t strides[TG_MAX_DIMS], e = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            strides[d] = e;
            e *= x->shape[d];
        }
        tg_tensor *part = tg_tensor_view(y, x->ndim, x->shape, strides, at);
        if (!part) return tg_kern_fail(k, TG_ENOMEM, "out of memory: a view of the bucket");
        tg_tensor_copy_into(part, x);
        tg_tensor_free(part);
        at += e;
    }
    tg_status st = tg_comm_start_all_reduce(c, rank, TG_COMM_SUM, y->dtype, tg_tensor_data(y),
                                            (size_t)tg_tensor_size(y), y->buf);
    return st == TG_OK ? TG_OK : tg_kern_fail(k, st, "%s", tg_last_error());
}

/* TGRAPH_BUCKET_TRACE set (and not "0"): each wait prints its bucket's times to stderr,
 * how long the all-reduce was in flight and how much of that the rank spent waiting
 * (the rest overlapped its computation). */
static void trace(const tg_kern *k, int rank, const tg_tensor *x, const tg_comm_timing *t) {
    const char *e = getenv("TGRAPH_BUCKET_TRACE");
    if (!e || !*e || strcmp(e, "0") == 0) return;
    size_t bytes = (size_t)tg_tensor_size(x) * tg_dtype_size(x->dtype);
    fprintf(stderr,
            "bucket: axis '%s' rank %d (process %d): %zu bytes in flight %.3f ms (all-reduce "
            "%.3f ms), waited %.3f ms, overlapped %.3f ms\n",
            k->attrs[A_AXIS].s, rank, tg_world_rank(), bytes, t->flight * 1e3, t->run * 1e3,
            t->waited * 1e3, (t->flight > t->waited ? t->flight - t->waited : 0.0) * 1e3);
}

/* While profiling (the pmap's note, tg_spmd.note): the bucket's bytes and times added to
 * its pmap call's, which the profile prints per call (docs/mpi.md, "Bucketed gradients"). */
static void note(const tg_kern *k, const tg_tensor *x, const tg_comm_timing *t) {
    const tg_spmd *s = tg_spmd_find(k->attrs[A_AXIS].s);
    if (!s || !s->note) return;
    atomic_fetch_add(&s->note->waits, 1);
    atomic_fetch_add(&s->note->bytes,
                     (uint_least64_t)tg_tensor_size(x) * (uint_least64_t)tg_dtype_size(x->dtype));
    atomic_fetch_add(&s->note->flight_ns, (uint_least64_t)(t->flight * 1e9));
    atomic_fetch_add(&s->note->waited_ns, (uint_least64_t)(t->waited * 1e9));
}

/* The bucket once its all-reduce has finished: a view of it, nothing copied, its ranges
 * `mean` (the pmeans of the bucket) first divided by the number of ranks in place, as
 * pmean divides its sum (the buffer is the start's, read by this wait alone). */
static tg_status wait_ref(tg_kern *k) {
    tg_comm *c;
    int rank, n;
    if (comm_of_as(k, false, &c, &rank, &n) != TG_OK) return k->status;
    const tg_tensor *x = k->in[0];
    tg_comm_timing t;
    tg_status st = tg_comm_wait(c, rank, tg_tensor_data(x), &t);
    if (st != TG_OK)
        return comm_fail(k, st, st != TG_EINTERNAL); /* not started: a bug, not an abort */
    trace(k, rank, x, &t);
    note(k, x, &t);
    const tg_aval *mean = &k->attrs[A_WAIT_MEAN];
    for (int i = 0; i + 1 < mean->n; i += 2) /* within the buffer: checked when typed */
        divide(tg_tensor_data(x), x->dtype, mean->ints[i], mean->ints[i + 1], n);
    k->out[0] = tg_tensor_view(x, x->ndim, x->shape, x->strides, x->offset);
    if (!k->out[0]) return tg_kern_fail(k, TG_ENOMEM, "out of memory: a view of the bucket");
    return TG_OK;
}

/* ---- gradients ----
 * The transposes of docs/pmap.md, "Gradients": psum's is the broadcast of the cotangent
 * (the cotangent of an invariant value counts once: each rank gets it as it is), pmean's
 * the same divided by the axis size, all_gather's psum_scatter and psum_scatter's
 * all_gather, ppermute's the inverse permutation; pmax and pmin send the cotangent to the
 * ranks holding the extreme, split evenly between ties. Each takes its input as varying:
 * where the input is invariant, the gradient walk sums what it gets over the axis
 * (src/grad/grad.c), so that psum of an invariant x gets N times the cotangent and pmean,
 * pmax or pmin of one the cotangent itself. all_gather's and psum_scatter's transposes
 * are reshaped to x's shape: a body is typed outside its pmap when its gradient is built
 * (N is '?' there), and an extent of N would otherwise stay '?' in x's cotangent, which
 * pmap cannot stack (its extent would look decided by values). */

static tg_attr axis_attr(const tg_node *n) { return TG_A_STR("axis_name", n->attrs[A_AXIS].s); }

static tg_status psum_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    if (tg_ops_float_in(n, 0)) gin[0] = gout[0];
    return g->status;
}

static tg_status pmean_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    if (!tg_ops_float_in(n, 0)) return g->status;
    tg_attr a = axis_attr(n);
    tg_var *size = tg_apply(g, "axis_size", NULL, 0, &a, 1);
    gin[0] = tg_div(g, gout[0], tg_cast(g, size, (tg_dtype)n->in[0]->type.dtype));
    return g->status;
}

/* The ranks holding each element's extreme (x == result, or both NaN) share its cotangent:
 * each gets 1/count of it, where count, the holders, is a psum (at least 1). */
static tg_status extreme_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    if (!tg_ops_float_in(n, 0)) return g->status;
    tg_var *x = n->in[0], *r = n->out[0];
    tg_dtype dt = (tg_dtype)x->type.dtype;
    tg_var *hit = tg_or(g, tg_eq(g, x, r), tg_and(g, tg_isnan(g, x), tg_isnan(g, r)));
    tg_attr a = axis_attr(n);
    tg_var *f = tg_cast(g, hit, dt);
    tg_var *cnt = tg_maximum(g, tg_apply(g, "psum", &f, 1, &a, 1), tg_literal_float(g, 1.0));
    gin[0] = tg_where(g, hit, tg_div(g, gout[0], cnt), tg_literal_float(g, 0.0));
    return g->status;
}

static tg_status gather_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    if (!tg_ops_float_in(n, 0)) return g->status;
    tg_attr a[3] = {axis_attr(n), TG_A_INT("scatter_dimension", n->attrs[A_GATHER_AXIS].i),
                    TG_A_BOOL("tiled", n->attrs[A_GATHER_TILED].i != 0)};
    gin[0] = tg_grad_reshape_like(g, tg_apply(g, "psum_scatter", &gout[0], 1, a, 3), n->in[0]);
    return g->status;
}

static tg_status scatter_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    if (!tg_ops_float_in(n, 0)) return g->status;
    int d = 0; /* the dimension of x scattered: the axis of the gathered cotangent */
    tg_axis_norm(n->attrs[A_SCATTER_DIM].i, n->in[0]->type.ndim, &d);
    tg_attr a[3] = {axis_attr(n), TG_A_INT("axis", d),
                    TG_A_BOOL("tiled", n->attrs[A_SCATTER_TILED].i != 0)};
    gin[0] = tg_grad_reshape_like(g, tg_apply(g, "all_gather", &gout[0], 1, a, 3), n->in[0]);
    return g->status;
}

static tg_status permute_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    if (!tg_ops_float_in(n, 0)) return g->status;
    const tg_aval *perm = &n->attrs[A_PERM];
    int64_t inv[2 * TG_COMM_MAX_RANKS]; /* [dst, src]: what dst received goes back to src */
    int np = perm->n / 2;
    for (int p = 0; p < np; p++) {
        inv[2 * p] = perm->ints[2 * p + 1];
        inv[2 * p + 1] = perm->ints[2 * p];
    }
    tg_attr a[2] = {axis_attr(n), TG_A_INTS("perm", inv, 2 * np)};
    gin[0] = tg_apply(g, "ppermute", &gout[0], 1, a, 2);
    return g->status;
}

/* ---- records ---- */

/* A collective: one input, one output, an axis name among its attributes; never folded or
 * merged (TG_EFFECT_STATE), read the pmap axis (TG_EFFECT_AXIS); its result is invariant or
 * varying over that axis (spmd_kind). Over a batch (vectorize), the reductions and ppermute
 * work per element as they are (tg_batch_leading); all_gather shifts its axis (the rule
 * derived from its `axis`); psum_scatter has none. */
#define COLLECTIVE(op, attr_list, infer_fn, ref_fn, vjp_fn, spmd_kind, batch_fn)                   \
    const tg_op_def tg_op_##op = {.name = #op,                                                     \
                                  .min_in = 1,                                                     \
                                  .max_in = 1,                                                     \
                                  .nout = 1,                                                       \
                                  .kind = TG_KIND_OTHER,                                           \
                                  .attrs = attr_list,                                              \
                                  .nattrs = (int)TG_COUNTOF(attr_list),                            \
                                  .infer = infer_fn,                                               \
                                  .ref = ref_fn,                                                   \
                                  .grad = TG_GRAD_VJP,                                             \
                                  .vjp = vjp_fn,                                                   \
                                  .effects = TG_EFFECT_STATE | TG_EFFECT_AXIS,                     \
                                  .spmd = spmd_kind,                                               \
                                  .batch = batch_fn}

COLLECTIVE(psum, reduce_attrs, psum_infer, psum_ref, psum_vjp, TG_SPMD_INVARIANT, tg_batch_leading);
COLLECTIVE(pmean, reduce_attrs, pmean_infer, pmean_ref, pmean_vjp, TG_SPMD_INVARIANT,
           tg_batch_leading);
COLLECTIVE(pmax, reduce_attrs, extreme_infer, pmax_ref, extreme_vjp, TG_SPMD_INVARIANT,
           tg_batch_leading);
COLLECTIVE(pmin, reduce_attrs, extreme_infer, pmin_ref, extreme_vjp, TG_SPMD_INVARIANT,
           tg_batch_leading);
COLLECTIVE(all_gather, gather_attrs, gather_infer, gather_ref, gather_vjp, TG_SPMD_VARYING, NULL);
COLLECTIVE(psum_scatter, scatter_attrs, scatter_infer, scatter_ref, scatter_vjp, TG_SPMD_VARYING,
           NULL);
COLLECTIVE(ppermute, permute_attrs, permute_infer, permute_ref, permute_vjp, TG_SPMD_VARYING,
           tg_batch_leading);

/* The split psum of a bucket (src/rewrite/bucket.c makes them after the gradients, so they
 * have none): psum_start packs its inputs and starts the all-reduce, as early as the
 * program order allows; psum_wait waits for it, as late as its users allow (tg_ir_schedule),
 * and is the buffer itself (a view), its `mean` ranges (the pmeans of the bucket, if any)
 * divided by the number of ranks. The bucket is varying until its wait, which is
 * invariant as psum's result is. */
const tg_op_def tg_op_psum_start = {.name = "psum_start",
                                    .min_in = 1,
                                    .max_in = -1,
                                    .nout = 1,
                                    .kind = TG_KIND_OTHER,
                                    .attrs = reduce_attrs,
                                    .nattrs = (int)TG_COUNTOF(reduce_attrs),
                                    .infer = start_infer,
                                    .ref = start_ref,
                                    .grad = TG_GRAD_UNDEFINED,
                                    .effects = TG_EFFECT_STATE | TG_EFFECT_AXIS,
                                    .spmd = TG_SPMD_VARYING,
                                    .sched = TG_SCHED_EARLY};
const tg_op_def tg_op_psum_wait = {.name = "psum_wait",
                                   .min_in = 1,
                                   .max_in = 1,
                                   .nout = 1,
                                   .kind = TG_KIND_OTHER,
                                   .attrs = wait_attrs,
                                   .nattrs = (int)TG_COUNTOF(wait_attrs),
                                   .infer = wait_infer,
                                   .ref = wait_ref,
                                   .views = 1u << 0,
                                   .grad = TG_GRAD_UNDEFINED,
                                   .effects = TG_EFFECT_STATE | TG_EFFECT_AXIS,
                                   .spmd = TG_SPMD_INVARIANT,
                                   .sched = TG_SCHED_LATE};
