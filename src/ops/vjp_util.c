/* vjp_util.c - helpers the ops' vector-Jacobian products share: summing a cotangent back
 * to the shape of a broadcast value, and zeros of a value's type. They live with the ops
 * that use them (src/grad walks the graph and calls the records; it provides nothing the
 * records need).
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
