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
 * Invariants: kernels are plain loops over the selection in C order that read and write
 * through strides (any sign, 0-size arrays); outputs are fresh (the interpreter's, or
 * made by mask_select itself: `.self_alloc`); no input is ever written.
 */
#include "ops.h"

#include <stdio.h>

/* ---- helpers ---- */

static void type_init(tg_type *o, tg_dtype dt, int ndim) {
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
static tg_status check_indices(tg_infer *ic, const tg_type *ind) {
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
static bool index_norm(int64_t v, int64_t n, int64_t *out) {
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
static tg_status check_all_indices(tg_kern *k, const tg_tensor *ind, int axis, int64_t n) {
    int64_t idx[TG_MAX_DIMS] = {0}, v;
    if (tg_tensor_size(ind) == 0) return TG_OK;
    do {
        int64_t raw = tg_load_i64(tg_tensor_at(ind, idx), ind->dtype);
        if (!index_norm(raw, n, &v)) return oob_fail(k, raw, axis < 0 ? 0 : axis, n);
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
static const char *bcast_at(const tg_tensor *y, int tnd, const int64_t *t) {
    int64_t off = y->offset;
    int lead = tnd - y->ndim;
    for (int a = 0; a < y->ndim; a++)
        if (a + lead >= 0 && y->shape[a] != 1) off += t[a + lead] * y->strides[a];
    return (const char *)y->buf->data + off * (int64_t)tg_dtype_size(y->dtype);
}

/* Writes (inc: adds) the element at src (dtype sdt) into dst (dtype ddt). Sums are
 * computed in double for float destinations (NumPy's promoted float add, rounded once
 * at the store) and in wrapping int64 otherwise (bool: logical or). */
static void elem_put(char *dst, tg_dtype ddt, const char *src, tg_dtype sdt, bool inc) {
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

static tg_status promote_set_yi1(tg_infer *ic, tg_dtype *want) {
    return promote_assign(ic, want, 1, false);
}
static tg_status promote_inc_yi1(tg_infer *ic, tg_dtype *want) {
    return promote_assign(ic, want, 1, true);
}
static tg_status promote_set_yi2(tg_infer *ic, tg_dtype *want) {
    return promote_assign(ic, want, 2, false);
}
static tg_status promote_inc_yi2(tg_infer *ic, tg_dtype *want) {
    return promote_assign(ic, want, 2, true);
}

/* y must broadcast onto the selected type tgt (one way: the selection's shape is kept). */
static tg_status assign_check(tg_infer *ic, const tg_type *tgt, const tg_type *y, bool inc) {
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
    if (check_indices(ic, ind) != TG_OK) return ic->status;
    if (!axis_read(axis_attr, x->ndim, &axis)) return axis_fail(ic, axis_attr, x);
    int nd = axis < 0 ? ind->ndim : x->ndim - 1 + ind->ndim;
    if (nd > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "the result would have %d dimensions (at most %d)", nd,
                             TG_MAX_DIMS);
    type_init(o, (tg_dtype)x->dtype, nd);
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
        if (!index_norm(v, n, &v)) {
            *bad = v, *bad_axis = 0, *ext = n;
            return false;
        }
        unflatten(x->ndim, x->shape, v, xi);
        return true;
    }
    if (!index_norm(v, x->shape[axis], &v)) {
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
static tg_var *scalar_const(tg_graph *g, tg_dtype dt, double v) {
    tg_tensor *t = tg_tensor_new(g->ctx, dt, 0, NULL);
    if (t) tg_store_f64(tg_tensor_data(t), dt, v);
    return tg_ir_const(g, t, 0);
}

/* v (of the selected shape) summed onto y's type: extra leading axes of y (extents of 1)
 * are added first, axes y was broadcast along are summed, and the dtype is y's. */
static tg_var *onto(tg_graph *g, tg_var *v, const tg_var *y) {
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
static tg_var *positions_like(tg_graph *g, tg_var *ind) {
    int64_t size = 1;
    bool known = tg_type_known(&ind->type);
    for (int i = 0; known && i < ind->type.ndim; i++)
        if (__builtin_mul_overflow(size, ind->type.shape[i], &size))
            return tg_ir_fail(g, TG_ELIMIT, "gradient: the indices are too large");
    tg_var *n = known ? tg_literal_int(g, size) : tg_apply(g, "size", &ind, 1, NULL, 0);
    return tg_grad_reshape_like(g, tg_apply(g, "arange", &n, 1, NULL, 0), ind);
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
    if (check_all_indices(k, ind, axis, axis < 0 ? tg_tensor_size(x) : x->shape[axis]) != TG_OK)
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
    if (check_indices(ic, ind) != TG_OK) return ic->status;
    if (!axis_read(aa, x->ndim, &axis)) return axis_fail(ic, aa, x);
    tg_type *o = &ic->out[0];
    if (axis < 0) {
        if (ind->ndim != 1)
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "when axis is none, indices must have a single "
                                 "dimension, got %s",
                                 tg_type_str(ind, is, sizeof is));
        type_init(o, (tg_dtype)x->dtype, 1);
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
    if (check_all_indices(k, ind, axis, axis < 0 ? tg_tensor_size(x) : x->shape[axis]) != TG_OK)
        return k->status;
    if (tg_tensor_size(out) == 0) return TG_OK;
    size_t esz = tg_dtype_size(x->dtype);
    int64_t o[TG_MAX_DIMS] = {0}, ii[TG_MAX_DIMS], xi[TG_MAX_DIMS];
    do {
        for (int d = 0; d < ind->ndim; d++) ii[d] = ind->shape[d] == 1 ? 0 : o[d];
        int64_t v = tg_load_i64(tg_tensor_at(ind, ii), ind->dtype);
        if (axis < 0) {
            int64_t n = tg_tensor_size(x);
            if (!index_norm(v, n, &v)) return oob_fail(k, v, 0, n);
            unflatten(x->ndim, x->shape, v, xi);
        } else {
            if (!index_norm(v, x->shape[axis], &v)) return oob_fail(k, v, axis, x->shape[axis]);
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
    if (assign_check(ic, &sel, y, inc) != TG_OK) return ic->status;
    ic->out[0] = *x;
    ic->out[0].weak = 0;
    return TG_OK;
}

static tg_status infer_set_subtensor(tg_infer *ic) { return infer_subtensor(ic, false); }
static tg_status infer_inc_subtensor(tg_infer *ic) { return infer_subtensor(ic, true); }

/* Checks at run time that y broadcasts onto the concrete selected shape. */
static bool kern_bcast_ok(const tg_tensor *y, int tnd, const int64_t *tshape) {
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
    type_init(&xt, out->dtype, out->ndim);
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
    if (!kern_bcast_ok(y, view->ndim, view->shape)) {
        st = tg_kern_fail(k, TG_ESHAPE, "cannot broadcast y into the selected shape");
    } else if (tg_tensor_size(view) > 0) {
        int64_t t[TG_MAX_DIMS] = {0};
        do {
            elem_put(tg_tensor_at(view, t), view->dtype, bcast_at(y, view->ndim, t), y->dtype, inc);
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
    if (tg_ops_float_in(n, 1)) gin[1] = onto(g, tg_apply(g, "slice", &gy, 1, at, 4), n->in[1]);
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
    .promote = promote_set_yi1,
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
    .promote = promote_inc_yi1,
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
    if (assign_check(ic, &sel, y, inc) != TG_OK) return ic->status;
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
    if (!kern_bcast_ok(y, nd, shape))
        return tg_kern_fail(k, TG_ESHAPE, "cannot broadcast y into the selected shape");
    if (check_all_indices(k, ind, axis, axis < 0 ? tg_tensor_size(x) : x->shape[axis]) != TG_OK)
        return k->status;
    if (n == 0) return TG_OK;
    int64_t t[TG_MAX_DIMS] = {0}, xi[TG_MAX_DIMS], bad, ext;
    int bad_axis;
    do {
        if (!gather_pos(out, ind, axis, t, xi, &bad, &bad_axis, &ext))
            return oob_fail(k, bad, bad_axis, ext);
        elem_put(tg_tensor_at(out, xi), out->dtype, bcast_at(y, nd, t), y->dtype, inc);
    } while (tg_index_next(nd, shape, t));
    return TG_OK;
}

static tg_status ref_set_take(tg_kern *k) { return ref_take_assign(k, false); }
static tg_status ref_inc_take(tg_kern *k) { return ref_take_assign(k, true); }

/* x gets g with the assigned places zeroed (set) or all of g (inc); y gets take(g),
 * summed onto its type. For set with repeated indices only the occurrence that is
 * written last (in C order of the selection) reaches the result, so only it gets a
 * gradient: every selected element writes its position among the indices into an i64
 * copy of x (set_take of arange), and an element is a winner when reading that copy back
 * at its place gives its own position. */
static tg_status vjp_take_assign(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                                 bool inc) {
    tg_var *x = n->in[0], *ind = n->in[1], *y = n->in[2], *gy = gout[0];
    tg_attr a = axis_attr(&n->attrs[0]);
    tg_var *zero = tg_literal_float(g, 0.0);
    if (tg_ops_float_in(n, 0))
        gin[0] = inc ? gy : tg_apply(g, "set_take", (tg_var *[]){gy, ind, zero}, 3, &a, 1);
    if (!tg_ops_float_in(n, 2)) return g->status;
    tg_var *sel = tg_apply(g, "take", (tg_var *[]){gy, ind}, 2, &a, 1);
    if (!inc) {
        int ax;
        if (!axis_read(&n->attrs[0], x->type.ndim, &ax))
            return tg_ir_fail(g, TG_EINTERNAL, "set_take gradient: bad axis"), g->status;
        tg_var *ids = positions_like(g, ind);
        if (ax >= 0) { /* ids placed on the selection's index axes */
            int64_t axes[TG_MAX_DIMS];
            int na = 0, snd = x->type.ndim - 1 + ind->type.ndim;
            for (int d = 0; d < snd; d++)
                if (d < ax || d >= ax + ind->type.ndim) axes[na++] = d;
            tg_attr ea = TG_A_INTS("axis", axes, na);
            if (na > 0) ids = tg_apply(g, "expand_dims", &ids, 1, &ea, 1);
        }
        tg_var *xd[TG_MAX_DIMS + 1];
        xd[0] = scalar_const(g, TG_DT_I64, -1.0);
        if (!tg_grad_dims(g, x, xd + 1)) return g->status;
        tg_var *owner = tg_apply(g, "alloc", xd, x->type.ndim + 1, NULL, 0);
        owner = tg_apply(g, "set_take", (tg_var *[]){owner, ind, ids}, 3, &a, 1);
        tg_var *won = tg_eq(g, tg_apply(g, "take", (tg_var *[]){owner, ind}, 2, &a, 1), ids);
        sel = tg_where(g, won, sel, zero);
    }
    gin[2] = onto(g, sel, y);
    return g->status;
}

static tg_status vjp_set_take(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return vjp_take_assign(g, n, gout, gin, false);
}

static tg_status vjp_inc_take(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return vjp_take_assign(g, n, gout, gin, true);
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
    type_init(o, (tg_dtype)x->dtype, nd);
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
    tg_var *pos = tg_apply(g, "mask_select", (tg_var *[]){positions_like(g, m), m}, 2, NULL, 0);
    if (md == 1) {
        tg_var *ins[3] = {tg_grad_zeros_like(g, x), pos, gout[0]};
        gin[0] = tg_apply(g, "inc_take", ins, 3, &a0, 1);
        return g->status;
    }
    tg_var *xd[TG_MAX_DIMS], *ins[TG_MAX_DIMS + 2];
    if (!tg_grad_dims(g, x, xd)) return g->status;
    tg_var *rows = tg_literal_int(g, 1);
    for (int d = 0; d < md; d++) rows = tg_grad_mul_extents(g, rows, xd[d]);
    ins[0] = scalar_const(g, (tg_dtype)x->type.dtype, 0.0);
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
        if (check_indices(ic, &ic->in[first + j]) != TG_OK) return ic->status;
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
    type_init(o, (tg_dtype)x->dtype, s->nd);
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
        if (check_all_indices(k, k->in[first + j], s->axes[j], x->shape[s->axes[j]]) != TG_OK)
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
            index_norm(tg_load_i64(tg_tensor_at(ind, ii), ind->dtype), x->shape[s->axes[j]], &v);
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
    if (assign_check(ic, &sel, &ic->in[1], inc) != TG_OK) return ic->status;
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
    if (!kern_bcast_ok(y, s.nd, shape))
        return tg_kern_fail(k, TG_ESHAPE, "cannot broadcast y into the selected shape");
    if (!tg_shape_size(s.nd, shape, &n))
        return tg_kern_fail(k, TG_ELIMIT, "the selection is too large");
    if (n == 0) return TG_OK;
    do {
        adv_pos(&s, k->in, out, t, xi);
        elem_put(tg_tensor_at(out, xi), out->dtype, bcast_at(y, s.nd, t), y->dtype, inc);
    } while (tg_index_next(s.nd, shape, t));
    return TG_OK;
}

static tg_status ref_set_index(tg_kern *k) { return ref_index_assign(k, false); }
static tg_status ref_inc_index(tg_kern *k) { return ref_index_assign(k, true); }

/* x gets the cotangent with the assigned places zeroed (set) or all of it (inc); y gets
 * the cotangent gathered at the selection, summed onto its type. For set with repeated
 * places only the element written last reaches the result, so only it gets a gradient:
 * every element of the selection writes its position into an i64 copy of x, and an
 * element wins when reading that copy back at its place gives its own position. */
static tg_status vjp_index_assign(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                                  bool inc) {
    tg_var *x = n->in[0], *y = n->in[1], *gy = gout[0];
    tg_var *zero = tg_literal_float(g, 0.0);
    if (tg_ops_float_in(n, 0)) gin[0] = inc ? gy : update_again(g, "set_index", n, gy, zero, 2);
    if (!tg_ops_float_in(n, 1)) return g->status;
    tg_var *sel = index_again(g, n, gy, 2);
    if (!inc) {
        tg_var *ids = positions_like(g, sel);
        tg_var *xd[TG_MAX_DIMS + 1];
        xd[0] = scalar_const(g, TG_DT_I64, -1.0);
        if (!tg_grad_dims(g, x, xd + 1)) return g->status;
        tg_var *owner = tg_apply(g, "alloc", xd, x->type.ndim + 1, NULL, 0);
        owner = update_again(g, "set_index", n, owner, ids, 2);
        tg_var *won = tg_eq(g, index_again(g, n, owner, 2), ids);
        sel = tg_where(g, won, sel, zero);
    }
    gin[1] = onto(g, sel, y);
    return g->status;
}

static tg_status vjp_set_index(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return vjp_index_assign(g, n, gout, gin, false);
}

static tg_status vjp_inc_index(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return vjp_index_assign(g, n, gout, gin, true);
}

const tg_op_def tg_op_set_index = {
    .name = "set_index",
    .min_in = 3,
    .max_in = -1,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = index_attrs,
    .nattrs = (int)TG_COUNTOF(index_attrs),
    .promote = promote_set_yi1,
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
    .promote = promote_inc_yi1,
    .infer = infer_inc_index,
    .ref = ref_inc_index,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_inc_index,
};

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
