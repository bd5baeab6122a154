/* index_arrays.c - boolean masks and several index arrays at once: mask_select (x[mask])
 * and index / set_index / inc_index (x[..., i0, ..., i1, ...] and its assignments), with
 * NumPy's semantics as index.c's header states them (index.h holds what they share).
 *
 * Invariants: the arrays broadcast together, and their axes take NumPy's place (in place
 * when adjacent, first otherwise); every index is checked before anything is gathered;
 * mask_select allocates its own output (its extent is known only at run time), every
 * other output is fresh from the interpreter; no input is ever written.
 */
#include "index.h"

#include <stdio.h>

/* ---- mask_select ---- */

/* x[mask]: mask's shape equals x's leading mask.ndim extents; the result is
 * [number of true values] + x.shape[mask.ndim:], the count known only at run time. */
static tg_status infer_mask_select(tg_infer *ic) {
    const tg_type *x = &ic->in[0], *m = &ic->in[1];
    char xs[TG_TYPE_STR_MAX], ms[TG_TYPE_STR_MAX];
    if (m->dtype != TG_DT_BOOL)
        return tg_infer_fail(ic, TG_ETYPE, "mask must be bool, got %s",
                             tg_type_str(m, ms, sizeof ms));
    if (m->ndim > x->ndim)
        return tg_infer_fail(ic, TG_EINDEX,
                             "too many indices for %s: the mask %s has %d "
                             "dimensions",
                             tg_type_str(x, xs, sizeof xs), tg_type_str(m, ms, sizeof ms), m->ndim);
    for (int d = 0; d < m->ndim; d++) {
        int64_t xe = x->shape[d], me = m->shape[d];
        if (xe >= 0 && me >= 0 && xe != me)
            return tg_infer_fail(ic, TG_EINDEX,
                                 "boolean index did not match indexed array along dimension "
                                 "%d; dimension is %lld but corresponding boolean dimension "
                                 "is %lld (x %s, mask %s)",
                                 d, (long long)xe, (long long)me, tg_type_str(x, xs, sizeof xs),
                                 tg_type_str(m, ms, sizeof ms));
    }
    int nd = x->ndim - m->ndim + 1;
    if (nd > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "the result would have %d dimensions (at most %d)", nd,
                             TG_MAX_DIMS);
    tg_type *o = &ic->out[0];
    tg_ix_type_init(o, (tg_dtype)x->dtype, nd);
    o->shape[0] = -1;
    for (int d = m->ndim, j = 1; d < x->ndim; d++, j++) {
        o->shape[j] = x->shape[d];
        if ((x->nobcast >> d) & 1u) o->nobcast |= 1u << j;
    }
    return TG_OK;
}

static tg_status ref_mask_select(tg_kern *k) {
    const tg_tensor *x = k->in[0], *m = k->in[1];
    int md = m->ndim;
    if (md > x->ndim) return tg_kern_fail(k, TG_EINDEX, "mask has more dimensions than x");
    for (int d = 0; d < md; d++)
        if (m->shape[d] != x->shape[d])
            return tg_kern_fail(k, TG_EINDEX,
                                "boolean index did not match indexed array along dimension "
                                "%d; dimension is %lld but corresponding boolean dimension "
                                "is %lld",
                                d, (long long)x->shape[d], (long long)m->shape[d]);
    int64_t count = 0, idx[TG_MAX_DIMS] = {0};
    if (tg_tensor_size(m) > 0) {
        do {
            count += tg_load_i64(tg_tensor_at(m, idx), TG_DT_BOOL) != 0;
        } while (tg_index_next(md, m->shape, idx));
    }
    int nd = x->ndim - md + 1;
    int64_t shape[TG_MAX_DIMS];
    if (nd > TG_MAX_DIMS) return tg_kern_fail(k, TG_ELIMIT, "result has too many dimensions");
    shape[0] = count;
    for (int d = md; d < x->ndim; d++) shape[d - md + 1] = x->shape[d];
    tg_tensor *out = tg_tensor_new(k->ctx, x->dtype, nd, shape);
    if (!out) return tg_kern_fail(k, TG_ENOMEM, "cannot allocate the result: %s", tg_last_error());
    k->out[0] = out;
    if (tg_tensor_size(out) == 0) return TG_OK;
    /* out is contiguous: the selected elements of x, in C order, fill it front to back */
    size_t esz = tg_dtype_size(x->dtype);
    char *p = tg_tensor_data(out);
    memset(idx, 0, sizeof idx);
    do {
        if (tg_load_i64(tg_tensor_at(m, idx), TG_DT_BOOL) != 0) {
            memcpy(p, tg_tensor_at(x, idx), esz);
            p += esz;
        }
    } while (tg_index_next(x->ndim, x->shape, idx));
    return TG_OK;
}

/* The positions of the true mask elements (mask_select of arange(size(mask)) in the
 * mask's shape), then the cotangent's rows added there into zeros of x seen as
 * [size(mask)] + x.shape[mask.ndim:], reshaped back to x's shape. */
static tg_status vjp_mask_select(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0], *m = n->in[1];
    int md = m->type.ndim, nd = x->type.ndim;
    tg_attr a0 = TG_A_INT("axis", 0);
    if (!tg_ops_float_in(n, 0)) return g->status;
    tg_var *pos =
        tg_apply(g, "mask_select", (tg_var *[]){tg_ix_positions_like(g, m), m}, 2, NULL, 0);
    if (md == 1) {
        tg_var *ins[3] = {tg_grad_zeros_like(g, x), pos, gout[0]};
        gin[0] = tg_apply(g, "inc_take", ins, 3, &a0, 1);
        return g->status;
    }
    tg_var *xd[TG_MAX_DIMS], *ins[TG_MAX_DIMS + 2];
    if (!tg_grad_dims(g, x, xd)) return g->status;
    tg_var *rows = tg_literal_int(g, 1);
    for (int d = 0; d < md; d++) rows = tg_grad_mul_extents(g, rows, xd[d]);
    ins[0] = tg_ix_scalar_const(g, (tg_dtype)x->type.dtype, 0.0);
    ins[1] = rows;
    for (int d = md; d < nd; d++) ins[d - md + 2] = xd[d];
    tg_var *z = tg_apply(g, "alloc", ins, nd - md + 2, NULL, 0);
    tg_var *s2 = tg_apply(g, "inc_take", (tg_var *[]){z, pos, gout[0]}, 3, &a0, 1);
    gin[0] = tg_grad_reshape_like(g, s2, x);
    return g->status;
}

const tg_op_def tg_op_mask_select = {
    .name = "mask_select",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = NULL,
    .nattrs = 0,
    .infer = infer_mask_select,
    .ref = ref_mask_select,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_mask_select,
    .self_alloc = 1,
};

/* ---- index, set_index, inc_index: several index arrays at once ----
 * x indexed on the axes `axes` (increasing) by index arrays that broadcast together to a
 * shape B, every other axis taken whole: NumPy's x[..., i0, ..., i1, ...] after its basic
 * items were applied (tg_index_apply). Where the axes are adjacent B replaces them in
 * place; otherwise B comes first and x's other axes follow in order (NumPy's rule for
 * advanced indices separated by a slice). */

static const tg_attr_spec index_attrs[] = {
    {"axes", TG_AS_INTS, 1, 0, {.kind = TG_ATTR_NONE}},
};

/* The layout of a selection: which input holds index array 0, the indexed axes, where B
 * sits in the selection, and x's other axes. */
typedef struct adv_sel {
    int first;             /* input of index array 0 (1 for index, 2 for set/inc) */
    int k;                 /* index arrays */
    int axes[TG_MAX_DIMS]; /* the axis of x each indexes */
    int nb;                /* rank of B */
    int bpos;              /* the selection's axis where B starts */
    int nd;                /* rank of the selection */
    int nrest;             /* x's other axes */
    int rest[TG_MAX_DIMS]; /* in order */
} adv_sel;

/* Reads the axes attribute for k index arrays of an x of rank ndim. false with the reason in
 * why (WHY_MAX bytes) when it is refused. */
#define WHY_MAX 160
static bool adv_axes(const tg_aval *a, int k, int ndim, adv_sel *s, char *why) {
    if (a->n != k) {
        snprintf(why, WHY_MAX, "axes has %d entries for %d index arrays", a->n, k);
        return false;
    }
    if (k > ndim) {
        snprintf(why, WHY_MAX, "too many indices for an array of dimension %d: %d", ndim, k);
        return false;
    }
    s->k = k;
    for (int j = 0; j < k; j++) {
        if (!tg_axis_norm(a->ints[j], ndim, &s->axes[j])) {
            snprintf(why, WHY_MAX, "axis %lld is out of bounds for an array of dimension %d",
                     (long long)a->ints[j], ndim);
            return false;
        }
        if (j > 0 && s->axes[j] <= s->axes[j - 1]) {
            snprintf(why, WHY_MAX, "axes must be increasing, got %lld after %lld",
                     (long long)a->ints[j], (long long)a->ints[j - 1]);
            return false;
        }
    }
    bool adjacent = true;
    for (int j = 1; j < k; j++) adjacent = adjacent && s->axes[j] == s->axes[j - 1] + 1;
    s->bpos = adjacent ? s->axes[0] : 0;
    s->nrest = 0;
    for (int d = 0, j = 0; d < ndim; d++) {
        if (j < k && s->axes[j] == d)
            j++;
        else
            s->rest[s->nrest++] = d;
    }
    return true;
}

/* The selection's axis that x's r-th other axis becomes. */
static int rest_at(const adv_sel *s, int r) { return r < s->bpos ? r : r + s->nb; }

/* The selection type: B (the index arrays' broadcast shape) placed among x's other axes. */
static tg_status adv_type(tg_infer *ic, const tg_type *x, int first, int k, tg_type *o,
                          adv_sel *s) {
    char why[sizeof ic->msg];
    s->first = first;
    for (int j = 0; j < k; j++)
        if (tg_ix_check_indices(ic, &ic->in[first + j]) != TG_OK) return ic->status;
    char bad[WHY_MAX];
    if (!adv_axes(&ic->attrs[0], k, x->ndim, s, bad))
        return tg_infer_fail(ic, TG_EINVAL, "%s", bad);
    const tg_type *p[TG_MAX_DIMS];
    tg_type b;
    for (int j = 0; j < k; j++) p[j] = &ic->in[first + j];
    if (!tg_broadcast_types(ic, p, k, &b)) {
        snprintf(why, sizeof why, "%s", ic->msg);
        return tg_infer_fail(ic, TG_EINDEX,
                             "shape mismatch: indexing arrays could not be broadcast "
                             "together (%.400s)",
                             why);
    }
    s->nb = b.ndim;
    s->nd = b.ndim + s->nrest;
    if (s->nd > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "the result would have %d dimensions (at most %d)",
                             s->nd, TG_MAX_DIMS);
    tg_ix_type_init(o, (tg_dtype)x->dtype, s->nd);
    for (int d = 0; d < b.ndim; d++) {
        o->shape[s->bpos + d] = b.shape[d];
        if ((b.nobcast >> d) & 1u) o->nobcast |= 1u << (s->bpos + d);
    }
    for (int r = 0; r < s->nrest; r++) {
        int a = rest_at(s, r);
        o->shape[a] = x->shape[s->rest[r]];
        if ((x->nobcast >> s->rest[r]) & 1u) o->nobcast |= 1u << a;
    }
    return TG_OK;
}

/* The selection's shape at run time, after checking every index against its axis. */
static tg_status adv_shape(tg_kern *k, const tg_tensor *x, int first, adv_sel *s, int64_t *shape) {
    char bad[WHY_MAX];
    if (!adv_axes(&k->attrs[0], k->nin - first, x->ndim, s, bad))
        return tg_kern_fail(k, TG_EINVAL, "%s", bad);
    s->first = first;
    int64_t b[TG_MAX_DIMS];
    int nb = 0;
    for (int j = 0; j < s->k; j++) nb = k->in[first + j]->ndim > nb ? k->in[first + j]->ndim : nb;
    for (int d = 0; d < nb; d++) b[d] = 1;
    for (int j = 0; j < s->k; j++) {
        const tg_tensor *ind = k->in[first + j];
        for (int d = 0; d < ind->ndim; d++) {
            int64_t e = ind->shape[d], *t = &b[nb - ind->ndim + d];
            if (e == *t || e == 1) continue;
            if (*t != 1)
                return tg_kern_fail(k, TG_EINDEX,
                                    "shape mismatch: indexing arrays could not be broadcast "
                                    "together (index array %d has extent %lld where another "
                                    "has %lld)",
                                    j, (long long)e, (long long)*t);
            *t = e;
        }
    }
    s->nb = nb;
    s->nd = nb + s->nrest;
    if (s->nd > TG_MAX_DIMS) return tg_kern_fail(k, TG_ELIMIT, "the result has too many axes");
    for (int d = 0; d < nb; d++) shape[s->bpos + d] = b[d];
    for (int r = 0; r < s->nrest; r++) shape[rest_at(s, r)] = x->shape[s->rest[r]];
    for (int j = 0; j < s->k; j++)
        if (tg_ix_check_all(k, k->in[first + j], s->axes[j], x->shape[s->axes[j]]) != TG_OK)
            return k->status;
    return TG_OK;
}

/* Position in x of the selection's element t (indices already checked). */
static void adv_pos(const adv_sel *s, tg_tensor *const *in, const tg_tensor *x, const int64_t *t,
                    int64_t *xi) {
    const int64_t *b = t + s->bpos;
    for (int r = 0; r < s->nrest; r++) xi[s->rest[r]] = t[rest_at(s, r)];
    for (int j = 0; j < s->k; j++) {
        const tg_tensor *ind = in[s->first + j];
        int64_t ii[TG_MAX_DIMS], v;
        for (int d = 0; d < ind->ndim; d++)
            ii[d] = ind->shape[d] == 1 ? 0 : b[s->nb - ind->ndim + d];
        bool ok =
            tg_ix_norm(tg_load_i64(tg_tensor_at(ind, ii), ind->dtype), x->shape[s->axes[j]], &v);
        TG_ASSERT(ok); /* adv_shape checked every index */
        xi[s->axes[j]] = ok ? v : 0;
    }
}

static tg_status infer_index(tg_infer *ic) {
    adv_sel s;
    return adv_type(ic, &ic->in[0], 1, ic->nin - 1, &ic->out[0], &s);
}

static tg_status ref_index(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    tg_tensor *out = k->out[0];
    adv_sel s;
    int64_t shape[TG_MAX_DIMS], t[TG_MAX_DIMS] = {0}, xi[TG_MAX_DIMS];
    if (adv_shape(k, x, 1, &s, shape) != TG_OK) return k->status;
    if (tg_tensor_size(out) == 0) return TG_OK;
    size_t esz = tg_dtype_size(x->dtype);
    do {
        adv_pos(&s, k->in, x, t, xi);
        memcpy(tg_tensor_at(out, t), tg_tensor_at(x, xi), esz);
    } while (tg_index_next(out->ndim, out->shape, t));
    return TG_OK;
}

/* The inputs and attribute of an index node, with x replaced (x first, then the arrays). */
static tg_var *index_again(tg_graph *g, const tg_node *n, tg_var *x, int first) {
    tg_var *ins[TG_MAX_DIMS + 1];
    int k = n->nin - first;
    ins[0] = x;
    for (int j = 0; j < k; j++) ins[1 + j] = n->in[first + j];
    tg_attr a = TG_A_INTS("axes", n->attrs[0].ints, n->attrs[0].n);
    return tg_apply(g, "index", ins, k + 1, &a, 1);
}

/* An update node set_index/inc_index(x, y, arrays..., axes) like n's. */
static tg_var *update_again(tg_graph *g, const char *op, const tg_node *n, tg_var *x, tg_var *y,
                            int first) {
    tg_var *ins[TG_MAX_DIMS + 2];
    int k = n->nin - first;
    ins[0] = x;
    ins[1] = y;
    for (int j = 0; j < k; j++) ins[2 + j] = n->in[first + j];
    tg_attr a = TG_A_INTS("axes", n->attrs[0].ints, n->attrs[0].n);
    return tg_apply(g, op, ins, k + 2, &a, 1);
}

/* x gets the cotangent added at the gathered places (repeated indices accumulate). */
static tg_status vjp_index(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    if (!tg_ops_float_in(n, 0)) return g->status;
    gin[0] = update_again(g, "inc_index", n, tg_grad_zeros_like(g, n->in[0]), gout[0], 1);
    return g->status;
}

const tg_op_def tg_op_index = {
    .name = "index",
    .min_in = 2,
    .max_in = -1,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = index_attrs,
    .nattrs = (int)TG_COUNTOF(index_attrs),
    .infer = infer_index,
    .ref = ref_index,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_index,
};

static tg_status infer_index_assign(tg_infer *ic, bool inc) {
    adv_sel s;
    tg_type sel;
    if (adv_type(ic, &ic->in[0], 2, ic->nin - 2, &sel, &s) != TG_OK) return ic->status;
    if (tg_ix_assign_check(ic, &sel, &ic->in[1], inc) != TG_OK) return ic->status;
    ic->out[0] = ic->in[0];
    ic->out[0].weak = 0;
    return TG_OK;
}

static tg_status infer_set_index(tg_infer *ic) { return infer_index_assign(ic, false); }
static tg_status infer_inc_index(tg_infer *ic) { return infer_index_assign(ic, true); }

/* out = copy of x; then, over the selection in C order, each selected element of out is
 * set from (or incremented by) y's broadcast element: the last write wins for set, every
 * occurrence adds for inc. */
static tg_status ref_index_assign(tg_kern *k, bool inc) {
    const tg_tensor *x = k->in[0], *y = k->in[1];
    tg_tensor *out = k->out[0];
    adv_sel s;
    int64_t shape[TG_MAX_DIMS], t[TG_MAX_DIMS] = {0}, xi[TG_MAX_DIMS], n;
    tg_tensor_copy_into(out, x);
    if (adv_shape(k, x, 2, &s, shape) != TG_OK) return k->status;
    if (!tg_ix_bcast_ok(y, s.nd, shape))
        return tg_kern_fail(k, TG_ESHAPE, "cannot broadcast y into the selected shape");
    if (!tg_shape_size(s.nd, shape, &n))
        return tg_kern_fail(k, TG_ELIMIT, "the selection is too large");
    if (n == 0) return TG_OK;
    do {
        adv_pos(&s, k->in, out, t, xi);
        tg_ix_elem_put(tg_tensor_at(out, xi), out->dtype, tg_ix_bcast_at(y, s.nd, t), y->dtype,
                       inc);
    } while (tg_index_next(s.nd, shape, t));
    return TG_OK;
}

static tg_status ref_set_index(tg_kern *k) { return ref_index_assign(k, false); }
static tg_status ref_inc_index(tg_kern *k) { return ref_index_assign(k, true); }

/* The places of set_index/inc_index(x, y, arrays..., axes) for tg_ix_vjp_assign. */
static tg_var *index_gather(tg_graph *g, const tg_node *n, tg_var *x) {
    return index_again(g, n, x, 2);
}

static tg_var *index_scatter(tg_graph *g, const tg_node *n, tg_var *x, tg_var *v) {
    return update_again(g, "set_index", n, x, v, 2);
}

/* The position of each element of the selection, in its shape. */
static tg_var *index_positions(tg_graph *g, const tg_node *n, tg_var *sel) {
    (void)n;
    return tg_ix_positions_like(g, sel);
}

static const tg_ix_places index_places = {1, index_gather, index_scatter, index_positions};

static tg_status vjp_set_index(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_ix_vjp_assign(g, n, gout, gin, false, &index_places);
}

static tg_status vjp_inc_index(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_ix_vjp_assign(g, n, gout, gin, true, &index_places);
}

const tg_op_def tg_op_set_index = {
    .name = "set_index",
    .min_in = 3,
    .max_in = -1,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = index_attrs,
    .nattrs = (int)TG_COUNTOF(index_attrs),
    .promote = tg_ix_promote_set_yi1,
    .infer = infer_set_index,
    .ref = ref_set_index,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_set_index,
};

const tg_op_def tg_op_inc_index = {
    .name = "inc_index",
    .min_in = 3,
    .max_in = -1,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = index_attrs,
    .nattrs = (int)TG_COUNTOF(index_attrs),
    .promote = tg_ix_promote_inc_yi1,
    .infer = infer_inc_index,
    .ref = ref_inc_index,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_inc_index,
};
