/* vjp_util.c - helpers the ops' vector-Jacobian products share: summing a cotangent back
 * to the shape of a broadcast value, zeros of a value's type, products of extents, and the
 * scatter-add that takes a gathered cotangent back to its places along an axis
 * (take_along's, and the sorts' and cumulative extremes'). They live with the ops that use
 * them (src/grad walks the graph and calls the records; it provides nothing the records
 * need).
 *
 * Invariant: both build ordinary graph through the public builders, so their errors are
 * the graph's (sticky), and '?' extents are taken from shape() at run time.
 */
#include "ops.h"

tg_var *tg_grad_unbroadcast(tg_graph *g, tg_var *grad, const tg_type *to) {
    if (!grad) return NULL;
    int lead = grad->type.ndim - to->ndim;
    if (lead < 0)
        return tg_ir_fail(g, TG_EINTERNAL, "unbroadcast: gradient of rank %d for rank %d",
                          grad->type.ndim, to->ndim);
    int64_t axes[TG_MAX_DIMS], lead_axes[TG_MAX_DIMS];
    int na = 0;
    for (int i = 0; i < lead; i++) lead_axes[i] = axes[na++] = i;
    for (int i = 0; i < to->ndim; i++)
        if (to->shape[i] == 1 && grad->type.shape[lead + i] != 1) axes[na++] = lead + i;
    if (na == 0) return grad;
    tg_var *s = tg_reduce(g, "sum", grad, axes, na, true);
    if (lead == 0 || !s) return s;
    tg_attr a = TG_A_INTS("axis", lead_axes, lead);
    return tg_apply(g, "squeeze", &s, 1, &a, 1);
}

tg_var *tg_grad_zeros_like(tg_graph *g, tg_var *v) {
    if (!v || g->status != TG_OK) return NULL;
    tg_tensor *z = tg_tensor_new(g->ctx, (tg_dtype)v->type.dtype, 0, NULL);
    tg_var *ins[TG_MAX_DIMS + 1];
    ins[0] = tg_ir_const(g, z, 0);
    tg_var *shape = NULL;
    for (int i = 0; i < v->type.ndim && ins[0]; i++) {
        if (v->type.shape[i] >= 0) {
            ins[i + 1] = tg_literal_int(g, v->type.shape[i]);
            continue;
        }
        if (!shape) shape = tg_apply(g, "shape", &v, 1, NULL, 0);
        tg_slice at = {.start = i, .is_index = true};
        ins[i + 1] = tg_slice_apply(g, shape, &at, 1);
    }
    return ins[0] ? tg_apply(g, "alloc", ins, v->type.ndim + 1, NULL, 0) : NULL;
}

/* The value of a constant 0-d integer variable. */
static bool const_i64(const tg_var *v, int64_t *out) {
    if (!v || v->kind != TG_VAR_CONST || !v->value || v->value->ndim != 0) return false;
    *out = tg_load_i64(tg_tensor_data(v->value), v->value->dtype);
    return true;
}

tg_var *tg_grad_mul_extents(tg_graph *g, tg_var *a, tg_var *b) {
    int64_t x, y;
    if (const_i64(a, &x) && const_i64(b, &y) && (x == 0 || y <= INT64_MAX / x))
        return tg_literal_int(g, x * y);
    if (const_i64(a, &x) && x == 1) return b;
    if (const_i64(b, &y) && y == 1) return a;
    return tg_mul(g, a, b);
}

/* The flat C-order position in x of every gathered element, sum over d of idx_d *
 * stride_d with idx_axis the (normalized) index and idx_d = arange(extent) along the other
 * axes (0 where x was broadcast), then one inc_take into zeros of x with axis none.
 * Extents and strides come from shape(x) where they are '?'. */
tg_var *tg_grad_put_along(tg_graph *g, tg_var *x, tg_var *ind, int axis, tg_var *cot) {
    tg_var *flat;
    tg_attr none = TG_A_NONE("axis");
    if (!x || !ind || !cot || g->status != TG_OK) return NULL;
    int nd = x->type.ndim;
    if (axis < 0) {
        flat = ind;
    } else {
        tg_var *xd[TG_MAX_DIMS], *stride[TG_MAX_DIMS];
        if (!tg_grad_dims(g, x, xd)) return NULL;
        stride[nd - 1] = tg_literal_int(g, 1);
        for (int d = nd - 2; d >= 0; d--)
            stride[d] = tg_grad_mul_extents(g, stride[d + 1], xd[d + 1]);
        tg_var *i64 = ind->type.dtype == TG_DT_I64 ? ind : tg_cast(g, ind, TG_DT_I64);
        tg_var *norm =
            tg_where(g, tg_lt(g, i64, tg_literal_int(g, 0)), tg_add(g, i64, xd[axis]), i64);
        flat = tg_grad_mul_extents(g, norm, stride[axis]);
        for (int d = 0; d < nd; d++) {
            if (d == axis || x->type.shape[d] == 1) continue;
            int64_t others[TG_MAX_DIMS];
            int no = 0;
            for (int e = 0; e < nd; e++)
                if (e != d) others[no++] = e;
            tg_var *iota = tg_apply(g, "arange", &xd[d], 1, NULL, 0);
            tg_attr a = TG_A_INTS("axis", others, no);
            if (no > 0) iota = tg_apply(g, "expand_dims", &iota, 1, &a, 1);
            flat = tg_add(g, flat, tg_grad_mul_extents(g, iota, stride[d]));
        }
    }
    tg_var *ins[3] = {tg_grad_zeros_like(g, x), flat, cot};
    return tg_apply(g, "inc_take", ins, 3, &none, 1);
}

void tg_grad_cot_name(const tg_graph *fn, int j, char *name, size_t cap) {
    bool taken = true;
    for (int u = 0; taken; u++) {
        snprintf(name, cap, "ct%d%.*s", j, u, "________________");
        taken = false;
        for (int i = 0; i < fn->inputs.n; i++)
            taken = taken || strcmp(((const tg_var *)fn->inputs.items[i])->name, name) == 0;
    }
}
