/* index.c - gathers and scatters (advanced indexing): take take_along set_subtensor
 * inc_subtensor set_take inc_take mask_select index set_index inc_index, and x[...] with
 * NumPy's rules for any mix of items (tg_index_apply, tg_index_update).
 *
 * One record per op, with NumPy's semantics:
 *  - take(x, indices, axis=none)         np.take(x, indices, axis), mode='raise'
 *  - take_along(x, indices, axis)        np.take_along_axis (axis none: x flattened)
 *  - set_subtensor / inc_subtensor(x, y, starts=, stops=, steps=, index=)
 *                                        x[slice] = y / x[slice] += y, on a copy of x; the
 *                                        slice attributes are exactly those of `slice`
 *  - set_take / inc_take(x, indices, y, axis=0)
 *                                        x[..., indices, ...] = y / np.add.at, on a copy
 *  - mask_select(x, mask)                x[mask] (output extent depends on the values)
 *  - index(x, i0, i1, ..., axes=)        x[..., i0, ..., i1, ...]: several index arrays
 *                                        broadcast together, NumPy's placement of their axes
 *  - set_index / inc_index(x, y, i0, ..., axes=)
 *                                        x[...] = y / np.add.at, on a copy
 * Indices are any integer dtype (bool is refused: use mask_select), any rank; negative
 * ones count from the end; an out-of-range index is a run-time error naming the value,
 * the axis and its extent, like NumPy's IndexError (checked for every index, even when
 * the result is empty).
 * Assignment: y broadcasts one way onto the selected shape (leading extents of 1 of y may
 * be dropped, as NumPy allows). `set_*` casts y to x's dtype (NumPy's unsafe setitem
 * casting; a weak literal adopts x's dtype). `inc_*` follows NumPy's in-place add: the sum
 * is computed in the promoted dtype and cast back with 'same_kind' casting, so y must not
 * be of a higher kind than x (bool < u8 < signed int < float); strong y keeps its dtype
 * and the kernel adds in double (floats) or wrapping int64, then stores in x's dtype,
 * which is exactly NumPy's result. Repeated indices: inc accumulates every occurrence
 * (np.add.at); set writes in C order of the selection, so the last occurrence wins.
 * set_subtensor/inc_subtensor reuse the slice record (shape.c) for both the selected
 * type and the selected view, so they cannot disagree with `x[...]`.
 * Files: this one holds the helpers the gathers and scatters share (index.h) and the ops
 * that select along one axis or a slice (take, take_along, set/inc_subtensor,
 * set/inc_take); index_arrays.c holds mask_select and the ops of several index arrays
 * (index, set_index, inc_index); index_apply.c resolves x[...] into them.
 * Invariants: kernels are plain loops over the selection in C order that read and write
 * through strides (any sign, 0-size arrays); outputs are fresh (the interpreter's, or
 * made by mask_select itself: `.self_alloc`); no input is ever written.
 */
#include "index.h"

#include <stdio.h>

/* ---- helpers ---- */

void tg_ix_type_init(tg_type *o, tg_dtype dt, int ndim) {
    memset(o, 0, sizeof *o);
    o->dtype = (uint8_t)dt;
    o->ndim = (uint8_t)ndim;
}

/* "[3,?]": the shape part of a type's text. */
static const char *shape_str(const tg_type *t, char *buf, size_t cap) {
    char tmp[TG_TYPE_STR_MAX];
    tg_type_str(t, tmp, sizeof tmp);
    const char *br = strchr(tmp, '[');
    snprintf(buf, cap, "%s", br ? br : tmp);
    return buf;
}

/* Indices must be integers (signed or u8): bool and floats are refused. */
tg_status tg_ix_check_indices(tg_infer *ic, const tg_type *ind) {
    char ts[TG_TYPE_STR_MAX];
    tg_dtype dt = (tg_dtype)ind->dtype;
    if (dt == TG_DT_BOOL)
        return tg_infer_fail(ic, TG_ETYPE,
                             "indices must be integers, got %s (use mask_select "
                             "for a boolean mask)",
                             tg_type_str(ind, ts, sizeof ts));
    if (!tg_dtype_is_int(dt))
        return tg_infer_fail(ic, TG_ETYPE, "indices must be integers, got %s",
                             tg_type_str(ind, ts, sizeof ts));
    return TG_OK;
}

/* The `axis` attribute: none gives -1 (flattened input). */
static bool axis_read(const tg_aval *a, int ndim, int *out) {
    if (a->kind == TG_ATTR_NONE) {
        *out = -1;
        return true;
    }
    return tg_axis_norm(a->i, ndim, out);
}

static tg_status axis_fail(tg_infer *ic, const tg_aval *a, const tg_type *x) {
    char ts[TG_TYPE_STR_MAX];
    return tg_infer_fail(ic, TG_EINVAL,
                         "axis %lld is out of bounds for an array of dimension "
                         "%d (%s)",
                         (long long)a->i, x->ndim, tg_type_str(x, ts, sizeof ts));
}

/* A negative index counts from the end; false when v is outside [-n, n). */
bool tg_ix_norm(int64_t v, int64_t n, int64_t *out) {
    if (v < -n || v >= n) return false;
    *out = v < 0 ? v + n : v;
    return true;
}

static tg_status oob_fail(tg_kern *k, int64_t v, int axis, int64_t n) {
    return tg_kern_fail(k, TG_EINDEX, "index %lld is out of bounds for axis %d with size %lld",
                        (long long)v, axis, (long long)n);
}

/* Checks every index against the extent n (axis < 0: flattened, reported as axis 0),
 * in C order, before anything is gathered: also those that select nothing because the
 * result is empty (np.take raises for them, and NumPy is deprecating the silence of its
 * fancy indexing there). */
tg_status tg_ix_check_all(tg_kern *k, const tg_tensor *ind, int axis, int64_t n) {
    int64_t idx[TG_MAX_DIMS] = {0}, v;
    if (tg_tensor_size(ind) == 0) return TG_OK;
    do {
        int64_t raw = tg_load_i64(tg_tensor_at(ind, idx), ind->dtype);
        if (!tg_ix_norm(raw, n, &v)) return oob_fail(k, raw, axis < 0 ? 0 : axis, n);
    } while (tg_index_next(ind->ndim, ind->shape, idx));
    return TG_OK;
}

/* Multi-index of the flat C-order position f of a shape with no zero extent. */
static void unflatten(int ndim, const int64_t *shape, int64_t f, int64_t *idx) {
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = f % shape[d];
        f /= shape[d];
    }
}

/* Element of y broadcast onto a target of rank tnd at multi-index t: y's axes align from
 * the right, extents of 1 (and extra leading axes, which are 1) read index 0. */
const char *tg_ix_bcast_at(const tg_tensor *y, int tnd, const int64_t *t) {
    int64_t off = y->offset;
    int lead = tnd - y->ndim;
    for (int a = 0; a < y->ndim; a++)
        if (a + lead >= 0 && y->shape[a] != 1) off += t[a + lead] * y->strides[a];
    return (const char *)y->buf->data + off * (int64_t)tg_dtype_size(y->dtype);
}

/* Writes (inc: adds) the element at src (dtype sdt) into dst (dtype ddt). Sums are
 * computed in double for float destinations (NumPy's promoted float add, rounded once
 * at the store) and in wrapping int64 otherwise (bool: logical or). */
void tg_ix_elem_put(char *dst, tg_dtype ddt, const char *src, tg_dtype sdt, bool inc) {
    if (!inc) {
        if (sdt == ddt)
            memcpy(dst, src, tg_dtype_size(ddt));
        else if (tg_dtype_is_float(sdt))
            tg_store_f64(dst, ddt, tg_load_f64(src, sdt));
        else
            tg_store_i64(dst, ddt, tg_load_i64(src, sdt));
    } else if (tg_dtype_is_float(ddt)) {
        tg_store_f64(dst, ddt, tg_load_f64(dst, ddt) + tg_load_f64(src, sdt));
    } else {
        uint64_t s = (uint64_t)tg_load_i64(dst, ddt) + (uint64_t)tg_load_i64(src, sdt);
        /* the bits of s as int64 without an implementation-defined cast; the store wraps */
        tg_store_i64(dst, ddt, s <= INT64_MAX ? (int64_t)s : -(int64_t)~s - 1);
    }
}

/* ---- assignment rules shared by set_* and inc_* ---- */

/* Kind order of NumPy's 'same_kind' casting among tgraph's dtypes. */
static int kind_rank(const tg_type *t) {
    tg_dtype dt = (tg_dtype)t->dtype;
    if (dt == TG_DT_BOOL) return 0;
    if (tg_dtype_is_float(dt)) return 3;
    if (t->weak || dt == TG_DT_U8) return 1; /* a weak int literal fits u8 too */
    return 2;
}

/* y (input yi) is cast to x's dtype for set; for inc only weak literals adopt it, and a
 * y of a higher kind than x is an error (NumPy refuses `x_int += 0.5`). */
static tg_status promote_assign(tg_infer *ic, tg_dtype *want, int yi, bool inc) {
    const tg_type *x = &ic->in[0], *y = &ic->in[yi];
    want[0] = (tg_dtype)x->dtype;
    if (!inc || y->weak) want[yi] = (tg_dtype)x->dtype;
    if (inc && kind_rank(y) > kind_rank(x))
        return tg_infer_fail(ic, TG_ETYPE,
                             "cannot add %s%s into %s without a cast (NumPy's "
                             "same_kind rule)",
                             tg_dtype_name((tg_dtype)y->dtype), y->weak ? " literal" : "",
                             tg_dtype_name((tg_dtype)x->dtype));
    return TG_OK;
}

tg_status tg_ix_promote_set_yi1(tg_infer *ic, tg_dtype *want) {
    return promote_assign(ic, want, 1, false);
}
tg_status tg_ix_promote_inc_yi1(tg_infer *ic, tg_dtype *want) {
    return promote_assign(ic, want, 1, true);
}
static tg_status promote_set_yi2(tg_infer *ic, tg_dtype *want) {
    return promote_assign(ic, want, 2, false);
}
static tg_status promote_inc_yi2(tg_infer *ic, tg_dtype *want) {
    return promote_assign(ic, want, 2, true);
}

/* y must broadcast onto the selected type tgt (one way: the selection's shape is kept). */
tg_status tg_ix_assign_check(tg_infer *ic, const tg_type *tgt, const tg_type *y, bool inc) {
    char ys[TG_TYPE_STR_MAX], ss[TG_TYPE_STR_MAX];
    if (inc && kind_rank(y) > kind_rank(tgt))
        return tg_infer_fail(ic, TG_ETYPE,
                             "cannot add %s into %s without a cast (NumPy's "
                             "same_kind rule)",
                             tg_dtype_name((tg_dtype)y->dtype),
                             tg_dtype_name((tg_dtype)tgt->dtype));
    int lead = tgt->ndim - y->ndim;
    for (int a = 0; a < y->ndim; a++) {
        int64_t e = y->shape[a];
        bool nob = e == 1 && ((y->nobcast >> a) & 1u);
        int64_t t = a + lead >= 0 ? tgt->shape[a + lead] : 1;
        if (e == t || (e == 1 && !nob) || (e == 1 && a + lead < 0)) continue;
        if (e == -1 || t == -1) continue; /* checked again on concrete types */
        if (nob)
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "cannot broadcast y %s into the selected shape %s: axis %d "
                                 "has extent 1 where the type says '?', which does not "
                                 "broadcast (declare the dimension as 1 to broadcast)",
                                 tg_type_str(y, ys, sizeof ys), shape_str(tgt, ss, sizeof ss), a);
        return tg_infer_fail(ic, TG_ESHAPE, "cannot broadcast y %s into the selected shape %s",
                             tg_type_str(y, ys, sizeof ys), shape_str(tgt, ss, sizeof ss));
    }
    return TG_OK;
}

/* ---- gathers along one axis: the selection of take, set_take and inc_take ---- */

/* Type of x.take(ind, axis): x.shape[:axis] + ind.shape + x.shape[axis+1:], or
 * ind.shape when axis is none; *axis_out is -1 then. */
static tg_status gather_type(tg_infer *ic, const tg_type *x, const tg_type *ind,
                             const tg_aval *axis_attr, tg_type *o, int *axis_out) {
    int axis;
    if (tg_ix_check_indices(ic, ind) != TG_OK) return ic->status;
    if (!axis_read(axis_attr, x->ndim, &axis)) return axis_fail(ic, axis_attr, x);
    int nd = axis < 0 ? ind->ndim : x->ndim - 1 + ind->ndim;
    if (nd > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "the result would have %d dimensions (at most %d)", nd,
                             TG_MAX_DIMS);
    tg_ix_type_init(o, (tg_dtype)x->dtype, nd);
    int j = 0;
    for (int d = 0; d < axis; d++, j++) {
        o->shape[j] = x->shape[d];
        if ((x->nobcast >> d) & 1u) o->nobcast |= 1u << j;
    }
    for (int d = 0; d < ind->ndim; d++, j++) {
        o->shape[j] = ind->shape[d];
        if ((ind->nobcast >> d) & 1u) o->nobcast |= 1u << j;
    }
    for (int d = axis + 1; axis >= 0 && d < x->ndim; d++, j++) {
        o->shape[j] = x->shape[d];
        if ((x->nobcast >> d) & 1u) o->nobcast |= 1u << j;
    }
    *axis_out = axis;
    return TG_OK;
}

/* Position in x of the selection's element t (see gather_type). false with the offending
 * index in *bad, its axis in *bad_axis and the extent in *ext when out of range. */
static bool gather_pos(const tg_tensor *x, const tg_tensor *ind, int axis, const int64_t *t,
                       int64_t *xi, int64_t *bad, int *bad_axis, int64_t *ext) {
    int64_t v = tg_load_i64(tg_tensor_at(ind, axis < 0 ? t : t + axis), ind->dtype);
    if (axis < 0) {
        int64_t n = tg_tensor_size(x);
        if (!tg_ix_norm(v, n, &v)) {
            *bad = v, *bad_axis = 0, *ext = n;
            return false;
        }
        unflatten(x->ndim, x->shape, v, xi);
        return true;
    }
    if (!tg_ix_norm(v, x->shape[axis], &v)) {
        *bad = v, *bad_axis = axis, *ext = x->shape[axis];
        return false;
    }
    for (int d = 0; d < axis; d++) xi[d] = t[d];
    xi[axis] = v;
    for (int d = axis + 1; d < x->ndim; d++) xi[d] = t[d - 1 + ind->ndim];
    return true;
}

/* ---- gradient helpers ----
 * Gathers scatter the cotangent back with inc_take (repeated indices accumulate);
 * assignments send the cotangent of the assigned places to y, summed over the axes along
 * which y was broadcast, and the rest to x. Indices and masks get no gradient. */

static tg_attr axis_attr(const tg_aval *a) {
    return a->kind == TG_ATTR_NONE ? TG_A_NONE("axis") : TG_A_INT("axis", a->i);
}

/* A strong 0-d constant of dtype dt holding v. */
tg_var *tg_ix_scalar_const(tg_graph *g, tg_dtype dt, double v) {
    tg_tensor *t = tg_tensor_new(g->ctx, dt, 0, NULL);
    if (t) tg_store_f64(tg_tensor_data(t), dt, v);
    return tg_ir_const(g, t, 0);
}

/* v (of the selected shape) summed onto y's type: extra leading axes of y (extents of 1)
 * are added first, axes y was broadcast along are summed, and the dtype is y's. */
tg_var *tg_ix_onto(tg_graph *g, tg_var *v, const tg_var *y) {
    if (!v) return NULL;
    int extra = y->type.ndim - v->type.ndim;
    if (extra > 0) {
        int64_t axes[TG_MAX_DIMS];
        for (int i = 0; i < extra; i++) axes[i] = i;
        tg_attr a = TG_A_INTS("axis", axes, extra);
        v = tg_apply(g, "expand_dims", &v, 1, &a, 1);
    }
    v = tg_grad_unbroadcast(g, v, &y->type);
    if (v && v->type.dtype != y->type.dtype) v = tg_cast(g, v, (tg_dtype)y->type.dtype);
    return v;
}

/* 0, 1, ... size(ind) - 1 in ind's shape (i64). */
tg_var *tg_ix_positions_like(tg_graph *g, tg_var *ind) {
    int64_t size = 1;
    bool known = tg_type_known(&ind->type);
    for (int i = 0; known && i < ind->type.ndim; i++)
        if (__builtin_mul_overflow(size, ind->type.shape[i], &size))
            return tg_ir_fail(g, TG_ELIMIT, "gradient: the indices are too large");
    tg_var *n = known ? tg_literal_int(g, size) : tg_apply(g, "size", &ind, 1, NULL, 0);
    return tg_grad_reshape_like(g, tg_apply(g, "arange", &n, 1, NULL, 0), ind);
}

/* x gets the cotangent with the assigned places zeroed (set) or all of it (inc); y gets
 * the cotangent gathered at the selection, summed onto its type. For set with repeated
 * places only the element written last (in C order of the selection) reaches the result,
 * so only it gets a gradient: every element of the selection writes its position into an
 * i64 copy of x (-1 elsewhere), and an element wins when reading that copy back at its
 * place gives its own position. */
tg_status tg_ix_vjp_assign(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                           bool inc, const tg_ix_places *pl) {
    tg_var *x = n->in[0], *y = n->in[pl->yi], *gy = gout[0];
    tg_var *zero = tg_literal_float(g, 0.0);
    if (tg_ops_float_in(n, 0)) gin[0] = inc ? gy : pl->scatter(g, n, gy, zero);
    if (!tg_ops_float_in(n, pl->yi)) return g->status;
    tg_var *sel = pl->gather(g, n, gy);
    if (!inc) {
        tg_var *ids = pl->positions(g, n, sel);
        if (!ids) return g->status;
        tg_var *xd[TG_MAX_DIMS + 1];
        xd[0] = tg_ix_scalar_const(g, TG_DT_I64, -1.0);
        if (!tg_grad_dims(g, x, xd + 1)) return g->status;
        tg_var *owner = tg_apply(g, "alloc", xd, x->type.ndim + 1, NULL, 0);
        owner = pl->scatter(g, n, owner, ids);
        tg_var *won = tg_eq(g, pl->gather(g, n, owner), ids);
        sel = tg_where(g, won, sel, zero);
    }
    gin[pl->yi] = tg_ix_onto(g, sel, y);
    return g->status;
}

/* ---- take ---- */

static const tg_attr_spec take_attrs[] = {
    {"axis", TG_AS_INT, 0, 1, {.kind = TG_ATTR_NONE}},
};

static tg_status infer_take(tg_infer *ic) {
    int axis;
    return gather_type(ic, &ic->in[0], &ic->in[1], &ic->attrs[0], &ic->out[0], &axis);
}

static tg_status ref_take(tg_kern *k) {
    const tg_tensor *x = k->in[0], *ind = k->in[1];
    tg_tensor *out = k->out[0];
    int axis;
    if (!axis_read(&k->attrs[0], x->ndim, &axis))
        return tg_kern_fail(k, TG_EINVAL, "axis is out of bounds");
    if (tg_ix_check_all(k, ind, axis, axis < 0 ? tg_tensor_size(x) : x->shape[axis]) != TG_OK)
        return k->status;
    if (tg_tensor_size(out) == 0) return TG_OK;
    size_t esz = tg_dtype_size(x->dtype);
    int64_t t[TG_MAX_DIMS] = {0}, xi[TG_MAX_DIMS], bad, ext;
    int bad_axis;
    do {
        if (!gather_pos(x, ind, axis, t, xi, &bad, &bad_axis, &ext))
            return oob_fail(k, bad, bad_axis, ext);
        memcpy(tg_tensor_at(out, t), tg_tensor_at(x, xi), esz);
    } while (tg_index_next(out->ndim, out->shape, t));
    return TG_OK;
}

/* x gets the cotangent added at the gathered places: inc_take into zeros (np.add.at). */
static tg_status vjp_take(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    if (!tg_ops_float_in(n, 0)) return g->status;
    tg_attr a = axis_attr(&n->attrs[0]);
    tg_var *ins[3] = {tg_grad_zeros_like(g, n->in[0]), n->in[1], gout[0]};
    gin[0] = tg_apply(g, "inc_take", ins, 3, &a, 1);
    return g->status;
}

/* Over a batch, with the indices the same for every element (a batched index would gather a
 * different selection per element: take_along does that): the axis shifts past the batch
 * axis; axis=none gathers from each element flattened. */
static tg_status batch_take(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                            tg_var **out, bool *ob) {
    (void)ob;
    if (batched[1])
        return tg_batch_refuse(b, n, "its indices vary over the batch (use take_along)");
    tg_var *x[2] = {batched[0] ? in[0] : tg_batch_spread(b, in[0]), in[1]};
    tg_aval a = n->attrs[0];
    if (a.kind == TG_ATTR_NONE) {
        x[0] = tg_batch_flatten(b, x[0]);
        a = (tg_aval){.kind = TG_ATTR_INT, .i = 1};
    } else {
        a.i += a.i >= 0;
    }
    if (b->g->status == TG_OK) tg_batch_make(b, n, x, &a, out);
    return b->g->status;
}

const tg_op_def tg_op_take = {
    .name = "take",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = take_attrs,
    .nattrs = (int)TG_COUNTOF(take_attrs),
    .infer = infer_take,
    .ref = ref_take,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_take,
    .batch = batch_take,
};

/* ---- take_along ---- */

static const tg_attr_spec take_along_attrs[] = {
    {"axis", TG_AS_INT, 1, 1, {.kind = TG_ATTR_NONE}},
};

/* Along `axis` the result has the indices' extent; elsewhere indices and x broadcast
 * against each other (NumPy builds the other index arrays from x's extents). */
static tg_status infer_take_along(tg_infer *ic) {
    const tg_type *x = &ic->in[0], *ind = &ic->in[1];
    const tg_aval *aa = &ic->attrs[0];
    char xs[TG_TYPE_STR_MAX], is[TG_TYPE_STR_MAX];
    int axis;
    if (tg_ix_check_indices(ic, ind) != TG_OK) return ic->status;
    if (!axis_read(aa, x->ndim, &axis)) return axis_fail(ic, aa, x);
    tg_type *o = &ic->out[0];
    if (axis < 0) {
        if (ind->ndim != 1)
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "when axis is none, indices must have a single "
                                 "dimension, got %s",
                                 tg_type_str(ind, is, sizeof is));
        tg_ix_type_init(o, (tg_dtype)x->dtype, 1);
        o->shape[0] = ind->shape[0];
        o->nobcast = ind->nobcast & 1u;
        return TG_OK;
    }
    if (ind->ndim != x->ndim)
        return tg_infer_fail(ic, TG_ESHAPE,
                             "indices %s and x %s must have the same number of "
                             "dimensions",
                             tg_type_str(ind, is, sizeof is), tg_type_str(x, xs, sizeof xs));
    tg_type tx = *x, ti = *ind;
    tx.shape[axis] = ti.shape[axis] = 1; /* the axis itself does not broadcast */
    tx.nobcast &= ~(1u << axis);
    ti.nobcast &= ~(1u << axis);
    const tg_type *p[2] = {&tx, &ti};
    if (!tg_broadcast_types(ic, p, 2, o)) {
        char why[sizeof ic->msg];
        snprintf(why, sizeof why, "%s", ic->msg);
        return tg_infer_fail(ic, TG_ESHAPE,
                             "indices %s do not broadcast against x %s outside "
                             "axis %d (%.300s)",
                             tg_type_str(ind, is, sizeof is), tg_type_str(x, xs, sizeof xs), axis,
                             why);
    }
    o->dtype = x->dtype;
    o->weak = 0;
    o->shape[axis] = ind->shape[axis];
    o->nobcast = (o->nobcast & ~(1u << axis)) | (ind->nobcast & (1u << axis));
    return TG_OK;
}

static tg_status ref_take_along(tg_kern *k) {
    const tg_tensor *x = k->in[0], *ind = k->in[1];
    tg_tensor *out = k->out[0];
    int axis;
    if (!axis_read(&k->attrs[0], x->ndim, &axis))
        return tg_kern_fail(k, TG_EINVAL, "axis is out of bounds");
    if (axis >= 0 && ind->ndim != x->ndim)
        return tg_kern_fail(k, TG_ESHAPE, "indices and x have different ranks");
    if (tg_ix_check_all(k, ind, axis, axis < 0 ? tg_tensor_size(x) : x->shape[axis]) != TG_OK)
        return k->status;
    if (tg_tensor_size(out) == 0) return TG_OK;
    size_t esz = tg_dtype_size(x->dtype);
    int64_t o[TG_MAX_DIMS] = {0}, ii[TG_MAX_DIMS], xi[TG_MAX_DIMS];
    do {
        for (int d = 0; d < ind->ndim; d++) ii[d] = ind->shape[d] == 1 ? 0 : o[d];
        int64_t v = tg_load_i64(tg_tensor_at(ind, ii), ind->dtype);
        if (axis < 0) {
            int64_t n = tg_tensor_size(x);
            if (!tg_ix_norm(v, n, &v)) return oob_fail(k, v, 0, n);
            unflatten(x->ndim, x->shape, v, xi);
        } else {
            if (!tg_ix_norm(v, x->shape[axis], &v)) return oob_fail(k, v, axis, x->shape[axis]);
            for (int d = 0; d < x->ndim; d++) xi[d] = x->shape[d] == 1 ? 0 : o[d];
            xi[axis] = v;
        }
        memcpy(tg_tensor_at(out, o), tg_tensor_at(x, xi), esz);
    } while (tg_index_next(out->ndim, out->shape, o));
    return TG_OK;
}

/* The scatter-add of take_along (tg_grad_put_along, vjp_util.c). */
static tg_status vjp_take_along(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    int ax;
    if (!tg_ops_float_in(n, 0)) return g->status;
    if (!axis_read(&n->attrs[0], n->in[0]->type.ndim, &ax))
        return tg_ir_fail(g, TG_EINTERNAL, "take_along gradient: bad axis"), g->status;
    gin[0] = tg_grad_put_along(g, n->in[0], n->in[1], ax, gout[0]);
    return g->status;
}

const tg_op_def tg_op_take_along = {
    .name = "take_along",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = take_along_attrs,
    .nattrs = (int)TG_COUNTOF(take_along_attrs),
    .infer = infer_take_along,
    .ref = ref_take_along,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_take_along,
};

/* ---- set_subtensor, inc_subtensor ---- */

/* The slice op's schema, in its order (TG_SLICE_A_*), so that the attributes can be
 * handed to the slice record unchanged. */
static const tg_attr_spec subtensor_attrs[] = {
    [TG_SLICE_A_STARTS] = {"starts", TG_AS_INTS, 0, TG_NULL_ITEMS, {.kind = TG_ATTR_INTS}},
    [TG_SLICE_A_STOPS] = {"stops", TG_AS_INTS, 0, TG_NULL_ITEMS, {.kind = TG_ATTR_INTS}},
    [TG_SLICE_A_STEPS] = {"steps", TG_AS_INTS, 0, TG_NULL_ITEMS, {.kind = TG_ATTR_INTS}},
    [TG_SLICE_A_INDEX] = {"index", TG_AS_INTS, 0, 0, {.kind = TG_ATTR_INTS}},
};

/* Type of x[slice], from the slice record's own inference. */
static tg_status slice_type(tg_infer *ic, const tg_type *x, tg_type *o) {
    tg_type outs[TG_MAX_OUTS];
    tg_infer sc = {.op = &tg_op_slice,
                   .in = x,
                   .nin = 1,
                   .attrs = ic->attrs,
                   .out = outs,
                   .nout = tg_op_slice.nout,
                   .runtime = ic->runtime};
    if (tg_op_slice.infer(&sc) != TG_OK)
        return tg_infer_fail(ic, sc.status ? sc.status : TG_EINVAL, "%s", sc.msg);
    *o = outs[0];
    return TG_OK;
}

static tg_status infer_subtensor(tg_infer *ic, bool inc) {
    const tg_type *x = &ic->in[0], *y = &ic->in[1];
    tg_type sel;
    if (slice_type(ic, x, &sel) != TG_OK) return ic->status;
    if (tg_ix_assign_check(ic, &sel, y, inc) != TG_OK) return ic->status;
    ic->out[0] = *x;
    ic->out[0].weak = 0;
    return TG_OK;
}

static tg_status infer_set_subtensor(tg_infer *ic) { return infer_subtensor(ic, false); }
static tg_status infer_inc_subtensor(tg_infer *ic) { return infer_subtensor(ic, true); }

/* Checks at run time that y broadcasts onto the concrete selected shape. */
bool tg_ix_bcast_ok(const tg_tensor *y, int tnd, const int64_t *tshape) {
    int lead = tnd - y->ndim;
    for (int a = 0; a < y->ndim; a++) {
        int64_t t = a + lead >= 0 ? tshape[a + lead] : 1;
        if (y->shape[a] != t && y->shape[a] != 1) return false;
    }
    return true;
}

/* out = copy of x, then the view out[slice] is set from (or incremented by) y. */
static tg_status ref_subtensor(tg_kern *k, bool inc) {
    const tg_tensor *x = k->in[0], *y = k->in[1];
    tg_tensor *out = k->out[0];
    tg_tensor_copy_into(out, x);
    /* the slice record makes the view; its run-time inference gives the view's type */
    tg_type xt, outs[TG_MAX_OUTS];
    tg_ix_type_init(&xt, out->dtype, out->ndim);
    memcpy(xt.shape, out->shape, sizeof xt.shape[0] * (size_t)out->ndim);
    tg_infer sc = {.op = &tg_op_slice,
                   .in = &xt,
                   .nin = 1,
                   .attrs = k->attrs,
                   .out = outs,
                   .nout = tg_op_slice.nout,
                   .runtime = true};
    if (tg_op_slice.infer(&sc) != TG_OK)
        return tg_kern_fail(k, sc.status ? sc.status : TG_EINVAL, "%s", sc.msg);
    tg_tensor *view = NULL;
    tg_kern sk = {.ctx = k->ctx,
                  .node = k->node,
                  .attrs = k->attrs,
                  .in = &k->out[0],
                  .nin = 1,
                  .out = &view,
                  .nout = 1,
                  .out_type = outs};
    if (tg_op_slice.ref(&sk) != TG_OK)
        return tg_kern_fail(k, sk.status ? sk.status : TG_EINVAL, "%s", sk.msg);
    TG_ASSERT(view != NULL);
    tg_status st = TG_OK;
    if (!tg_ix_bcast_ok(y, view->ndim, view->shape)) {
        st = tg_kern_fail(k, TG_ESHAPE, "cannot broadcast y into the selected shape");
    } else if (tg_tensor_size(view) > 0) {
        int64_t t[TG_MAX_DIMS] = {0};
        do {
            tg_ix_elem_put(tg_tensor_at(view, t), view->dtype, tg_ix_bcast_at(y, view->ndim, t),
                           y->dtype, inc);
        } while (tg_index_next(view->ndim, view->shape, t));
    }
    tg_tensor_free(view);
    return st;
}

static tg_status ref_set_subtensor(tg_kern *k) { return ref_subtensor(k, false); }
static tg_status ref_inc_subtensor(tg_kern *k) { return ref_subtensor(k, true); }

/* x gets g with the slice zeroed (set) or all of g (inc); y gets g[slice] summed onto
 * its type. */
static tg_status vjp_subtensor(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                               bool inc) {
    static const char *const names[4] = {"starts", "stops", "steps", "index"};
    tg_attr at[4];
    for (int i = 0; i < 4; i++) {
        const tg_aval *a = &n->attrs[i];
        at[i] = TG_A_INTS(names[i], a->kind == TG_ATTR_INTS ? a->ints : NULL,
                          a->kind == TG_ATTR_INTS ? a->n : 0);
        at[i].none = a->kind == TG_ATTR_INTS ? a->none : NULL;
    }
    tg_var *gy = gout[0];
    if (tg_ops_float_in(n, 0))
        gin[0] = inc ? gy
                     : tg_apply(g, "set_subtensor", (tg_var *[]){gy, tg_literal_float(g, 0.0)}, 2,
                                at, 4);
    if (tg_ops_float_in(n, 1))
        gin[1] = tg_ix_onto(g, tg_apply(g, "slice", &gy, 1, at, 4), n->in[1]);
    return g->status;
}

static tg_status vjp_set_subtensor(tg_graph *g, const tg_node *n, tg_var *const *gout,
                                   tg_var **gin) {
    return vjp_subtensor(g, n, gout, gin, false);
}

static tg_status vjp_inc_subtensor(tg_graph *g, const tg_node *n, tg_var *const *gout,
                                   tg_var **gin) {
    return vjp_subtensor(g, n, gout, gin, true);
}

/* Over a batch: the target batched, a whole-axis entry for the batch axis in front of the
 * slice, and a batched update padded to the selection's core rank (an unbatched one
 * broadcasts as it is). */
static tg_status batch_subtensor(tg_batch *b, const tg_node *n, tg_var *const *in,
                                 const bool *batched, tg_var **out, bool *ob) {
    (void)ob;
    tg_aval attrs[4];
    tg_slice_front buf;
    const tg_aval *ix = &n->attrs[TG_SLICE_A_INDEX];
    if (n->attrs[TG_SLICE_A_STARTS].n + 1 > TG_MAX_DIMS)
        return tg_batch_refuse(b, n, "too many dimensions");
    int sel = n->in[0]->type.ndim;
    for (int i = 0; i < ix->n; i++) sel -= ix->ints[i] != 0;
    tg_var *x[2] = {batched[0] ? in[0] : tg_batch_spread(b, in[0]),
                    batched[1] ? tg_batch_pad(b, in[1], sel) : in[1]};
    tg_slice_batch_attrs(n->attrs, attrs, &buf);
    if (b->g->status == TG_OK) tg_batch_make(b, n, x, attrs, out);
    return b->g->status;
}

const tg_op_def tg_op_set_subtensor = {
    .name = "set_subtensor",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = subtensor_attrs,
    .nattrs = (int)TG_COUNTOF(subtensor_attrs),
    .promote = tg_ix_promote_set_yi1,
    .infer = infer_set_subtensor,
    .ref = ref_set_subtensor,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_set_subtensor,
    .batch = batch_subtensor,
};

const tg_op_def tg_op_inc_subtensor = {
    .name = "inc_subtensor",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = subtensor_attrs,
    .nattrs = (int)TG_COUNTOF(subtensor_attrs),
    .promote = tg_ix_promote_inc_yi1,
    .infer = infer_inc_subtensor,
    .ref = ref_inc_subtensor,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_inc_subtensor,
    .batch = batch_subtensor,
};

/* ---- set_take, inc_take ---- */

static const tg_attr_spec set_take_attrs[] = {
    {"axis", TG_AS_INT, 0, 1, {.kind = TG_ATTR_INT, .i = 0}},
};

static tg_status infer_take_assign(tg_infer *ic, bool inc) {
    const tg_type *x = &ic->in[0], *ind = &ic->in[1], *y = &ic->in[2];
    tg_type sel;
    int axis;
    if (gather_type(ic, x, ind, &ic->attrs[0], &sel, &axis) != TG_OK) return ic->status;
    if (tg_ix_assign_check(ic, &sel, y, inc) != TG_OK) return ic->status;
    ic->out[0] = *x;
    ic->out[0].weak = 0;
    return TG_OK;
}

static tg_status infer_set_take(tg_infer *ic) { return infer_take_assign(ic, false); }
static tg_status infer_inc_take(tg_infer *ic) { return infer_take_assign(ic, true); }

/* out = copy of x; then, over the selection x.take(indices, axis) in C order, each
 * selected element of out is set from (or incremented by) y's broadcast element. */
static tg_status ref_take_assign(tg_kern *k, bool inc) {
    const tg_tensor *x = k->in[0], *ind = k->in[1], *y = k->in[2];
    tg_tensor *out = k->out[0];
    int axis;
    if (!axis_read(&k->attrs[0], x->ndim, &axis))
        return tg_kern_fail(k, TG_EINVAL, "axis is out of bounds");
    tg_tensor_copy_into(out, x);
    /* the selection's shape: x.shape[:axis] + indices.shape + x.shape[axis+1:] */
    int nd = axis < 0 ? ind->ndim : x->ndim - 1 + ind->ndim, j = 0;
    int64_t shape[TG_MAX_DIMS], n;
    if (nd > TG_MAX_DIMS) return tg_kern_fail(k, TG_ELIMIT, "selection has too many dimensions");
    for (int d = 0; d < axis; d++) shape[j++] = x->shape[d];
    for (int e = 0; e < ind->ndim; e++) shape[j++] = ind->shape[e];
    for (int d = axis + 1; axis >= 0 && d < x->ndim; d++) shape[j++] = x->shape[d];
    if (!tg_shape_size(nd, shape, &n))
        return tg_kern_fail(k, TG_ELIMIT, "the selection is too large");
    if (!tg_ix_bcast_ok(y, nd, shape))
        return tg_kern_fail(k, TG_ESHAPE, "cannot broadcast y into the selected shape");
    if (tg_ix_check_all(k, ind, axis, axis < 0 ? tg_tensor_size(x) : x->shape[axis]) != TG_OK)
        return k->status;
    if (n == 0) return TG_OK;
    int64_t t[TG_MAX_DIMS] = {0}, xi[TG_MAX_DIMS], bad, ext;
    int bad_axis;
    do {
        if (!gather_pos(out, ind, axis, t, xi, &bad, &bad_axis, &ext))
            return oob_fail(k, bad, bad_axis, ext);
        tg_ix_elem_put(tg_tensor_at(out, xi), out->dtype, tg_ix_bcast_at(y, nd, t), y->dtype, inc);
    } while (tg_index_next(nd, shape, t));
    return TG_OK;
}

static tg_status ref_set_take(tg_kern *k) { return ref_take_assign(k, false); }
static tg_status ref_inc_take(tg_kern *k) { return ref_take_assign(k, true); }

/* The places of set_take/inc_take(x, ind, y, axis) for tg_ix_vjp_assign: x.take(ind, axis). */
static tg_var *take_gather(tg_graph *g, const tg_node *n, tg_var *x) {
    tg_attr a = axis_attr(&n->attrs[0]);
    return tg_apply(g, "take", (tg_var *[]){x, n->in[1]}, 2, &a, 1);
}

static tg_var *take_scatter(tg_graph *g, const tg_node *n, tg_var *x, tg_var *v) {
    tg_attr a = axis_attr(&n->attrs[0]);
    return tg_apply(g, "set_take", (tg_var *[]){x, n->in[1], v}, 3, &a, 1);
}

/* The position of each index among the indices (set_take of arange), placed on the
 * selection's index axes. */
static tg_var *take_positions(tg_graph *g, const tg_node *n, tg_var *sel) {
    (void)sel;
    tg_var *x = n->in[0], *ind = n->in[1];
    int ax;
    if (!axis_read(&n->attrs[0], x->type.ndim, &ax))
        return tg_ir_fail(g, TG_EINTERNAL, "set_take gradient: bad axis");
    tg_var *ids = tg_ix_positions_like(g, ind);
    if (ax >= 0) {
        int64_t axes[TG_MAX_DIMS];
        int na = 0, snd = x->type.ndim - 1 + ind->type.ndim;
        for (int d = 0; d < snd; d++)
            if (d < ax || d >= ax + ind->type.ndim) axes[na++] = d;
        tg_attr ea = TG_A_INTS("axis", axes, na);
        if (na > 0) ids = tg_apply(g, "expand_dims", &ids, 1, &ea, 1);
    }
    return ids;
}

static const tg_ix_places take_places = {2, take_gather, take_scatter, take_positions};

static tg_status vjp_set_take(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_ix_vjp_assign(g, n, gout, gin, false, &take_places);
}

static tg_status vjp_inc_take(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_ix_vjp_assign(g, n, gout, gin, true, &take_places);
}

/* Over a batch, with indices the same for every element: the target batched, the axis
 * shifted past the batch axis, a batched update padded to the selection's core rank. */
static tg_status batch_take_assign(tg_batch *b, const tg_node *n, tg_var *const *in,
                                   const bool *batched, tg_var **out, bool *ob) {
    (void)ob;
    if (batched[1]) return tg_batch_refuse(b, n, "its indices vary over the batch");
    tg_aval a = n->attrs[0];
    if (a.kind == TG_ATTR_NONE)
        return tg_batch_refuse(b, n, "axis=none with a target that varies over the batch");
    int sel = n->in[0]->type.ndim - 1 + n->in[1]->type.ndim;
    tg_var *x[3] = {batched[0] ? in[0] : tg_batch_spread(b, in[0]), in[1],
                    batched[2] ? tg_batch_pad(b, in[2], sel) : in[2]};
    a.i += a.i >= 0;
    if (b->g->status == TG_OK) tg_batch_make(b, n, x, &a, out);
    return b->g->status;
}

const tg_op_def tg_op_set_take = {
    .name = "set_take",
    .min_in = 3,
    .max_in = 3,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = set_take_attrs,
    .nattrs = (int)TG_COUNTOF(set_take_attrs),
    .promote = promote_set_yi2,
    .infer = infer_set_take,
    .ref = ref_set_take,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_set_take,
    .batch = batch_take_assign,
};

const tg_op_def tg_op_inc_take = {
    .name = "inc_take",
    .min_in = 3,
    .max_in = 3,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = set_take_attrs,
    .nattrs = (int)TG_COUNTOF(set_take_attrs),
    .promote = promote_inc_yi2,
    .infer = infer_inc_take,
    .ref = ref_inc_take,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_inc_take,
    .batch = batch_take_assign,
};
