/* jacobian.c - dense Jacobians and Hessians built on tg_vjp (JAX's jacrev and hessian,
 * PyTensor's jacobian and hessian). tg_jacobian pulls back one one-hot cotangent per
 * element of y (row k of eye(n), reshaped to y's shape) and stacks the n results, one
 * level of `stack` per axis of y, so the result has shape y.shape + x.shape whatever x's
 * extents ('?' included) and no reshape of the result is needed. tg_hessian is the
 * jacobian of each gradient with respect to its own variable.
 *
 * Devices: the one-hot cotangents are made on y's device, the stacking of wrt[i]'s rows
 * (and zeros for it) on wrt[i]'s; for a value without an annotation, in the device scope
 * of the call (g->device); tg_vjp places the backward passes (grad.c).
 *
 * Invariants: the result is ordinary graph made of existing ops, so it can be
 * differentiated again; y has a static shape with at most TG_JACOBIAN_MAX elements, so the
 * graph grows by at most that many backward passes; errors go through the graph's sticky
 * status (the first one wins) and every out[i] is NULL after a failure.
 */
#include "grad.h"

#include <stdio.h>

/* The argument checks tg_jacobian and tg_hessian share; fn names the function and what
 * its first value ("y", "cost"). */
static tg_status check_args(tg_graph *g, const char *fn, const char *what, tg_var *y,
                            tg_var *const *wrt, int nwrt, tg_disconnected disconnected,
                            tg_var **out) {
    if (!g) return tg_set_error(TG_EINVAL, "%s: graph is NULL", fn);
    if (g->status != TG_OK) return g->status;
    if (!tg_grad_owns(g, y))
        return tg_grad_fail(g, TG_EINVAL, "%s: %s is missing or belongs to another graph", fn,
                            what);
    if (nwrt < 0 || (nwrt > 0 && (!wrt || !out)))
        return tg_grad_fail(g, TG_EINVAL, "%s: %s", fn,
                            nwrt < 0 ? "negative count"
                            : !wrt   ? "wrt is NULL"
                                     : "out is NULL");
    if ((unsigned)disconnected > TG_DISCONNECTED_ZERO)
        return tg_grad_fail(g, TG_EINVAL, "%s: invalid disconnected mode %d", fn,
                            (int)disconnected);
    for (int i = 0; i < nwrt; i++)
        if (!tg_grad_owns(g, wrt[i]))
            return tg_grad_fail(g, TG_EINVAL, "%s: wrt[%d] is missing or belongs to another graph",
                                fn, i);
    return TG_OK;
}

/* Makes g's builders stamp the device where v is made, or `scope` when v has none. */
static void device_for(tg_graph *g, const tg_var *v, const char *scope) {
    const char *d = tg_ir_var_device(v);
    g->device = d ? d : scope;
}

/* Number of elements of a static type; -1 when an extent is '?'. At most limit + 1 (the
 * product stops growing past the limit, so it cannot overflow). */
static int64_t static_size(const tg_type *t, int64_t limit) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0) return -1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) return 0;
        n = n > limit ? n : n * t->shape[d];
    }
    return n > limit ? limit + 1 : n;
}

/* Zeros of shape y.shape + x.shape in x's dtype (for a y without elements). */
static tg_var *zeros_outer(tg_graph *g, tg_var *y, tg_var *x) {
    tg_var *ins[1 + TG_MAX_DIMS];
    tg_tensor *z = tg_tensor_new(g->ctx, (tg_dtype)x->type.dtype, 0, NULL);
    ins[0] = tg_ir_const(g, z, 0);
    if (!ins[0] || !tg_grad_dims(g, y, ins + 1) || !tg_grad_dims(g, x, ins + 1 + y->type.ndim))
        return NULL;
    return tg_apply(g, "alloc", ins, 1 + y->type.ndim + x->type.ndim, NULL, 0);
}

/* Stacks rows[0..n) (in C order of y's elements) into one value of shape y.shape +
 * row.shape: each axis of y, from the last, stacks groups of its extent. rows is
 * overwritten. */
static tg_var *stack_rows(tg_graph *g, const tg_type *yt, tg_var **rows, int64_t n) {
    tg_attr axis0 = TG_A_INT("axis", 0);
    for (int d = yt->ndim - 1; d >= 0; d--) {
        int64_t e = yt->shape[d], m = n / e;
        for (int64_t j = 0; j < m; j++) /* reads rows[j*e..), writes rows[j]: j <= j*e */
            rows[j] = tg_apply(g, "stack", rows + j * e, (int)e, &axis0, 1);
        n = m;
    }
    return rows[0];
}

/* The pullbacks of the n one-hot cotangents of y; rows[i * n + k] is wrt[i]'s for element
 * k of y. */
static tg_status pull_rows(tg_graph *g, tg_var *y, int64_t n, tg_var *const *wrt, int nwrt,
                           tg_disconnected disconnected, tg_var **rows, tg_var **tmp) {
    tg_dtype dt = (tg_dtype)y->type.dtype;
    tg_attr ea[2] = {TG_A_INT("n", n), TG_A_STR("dtype", tg_dtype_name(dt))};
    const char *scope = g->device;
    device_for(g, y, scope);
    tg_var *eye = tg_apply(g, "eye", NULL, 0, ea, 2);
    g->device = scope;
    for (int64_t k = 0; k < n; k++) {
        tg_slice at = {.start = k, .is_index = true};
        device_for(g, y, scope);
        tg_var *cot = tg_slice_apply(g, eye, &at, 1);
        if (y->type.ndim != 1) cot = tg_reshape(g, cot, y->type.ndim, y->type.shape);
        g->device = scope;
        if (!cot) return g->status;
        tg_status st = tg_vjp(g, &y, &cot, 1, wrt, nwrt, disconnected, tmp);
        if (st != TG_OK) return st;
        for (int i = 0; i < nwrt; i++) rows[(int64_t)i * n + k] = tmp[i];
    }
    return g->status;
}

static tg_status jacobian(tg_graph *g, tg_var *y, tg_var *const *wrt, int nwrt,
                          tg_disconnected disconnected, tg_var **out) {
    tg_status st = check_args(g, "tg_jacobian", "y", y, wrt, nwrt, disconnected, out);
    if (st != TG_OK) return st;
    char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX], lab[128], ylab[128];
    tg_grad_label(y, ylab, sizeof ylab);
    if (!tg_dtype_is_float((tg_dtype)y->type.dtype))
        return tg_grad_fail(g, TG_ETYPE, "jacobian: %s must be a float, got %s", ylab,
                            tg_type_str(&y->type, a, sizeof a));
    int64_t n = static_size(&y->type, TG_JACOBIAN_MAX);
    if (n < 0)
        return tg_grad_fail(g, TG_ESHAPE,
                            "jacobian: %s must have a static shape, got %s (one vjp per element)",
                            ylab, tg_type_str(&y->type, a, sizeof a));
    if (n > TG_JACOBIAN_MAX)
        return tg_grad_fail(g, TG_ELIMIT,
                            "jacobian: %s is %s, more than %d elements (one vjp per element; the "
                            "limit is TG_JACOBIAN_MAX)",
                            ylab, tg_type_str(&y->type, a, sizeof a), TG_JACOBIAN_MAX);
    for (int i = 0; i < nwrt; i++)
        if (y->type.ndim + wrt[i]->type.ndim > TG_MAX_DIMS)
            return tg_grad_fail(g, TG_ELIMIT,
                                "jacobian: %s is %s and %s is %s: the jacobian would have rank %d, "
                                "more than %d",
                                ylab, tg_type_str(&y->type, a, sizeof a),
                                tg_grad_label(wrt[i], lab, sizeof lab),
                                tg_type_str(&wrt[i]->type, b, sizeof b),
                                y->type.ndim + wrt[i]->type.ndim, TG_MAX_DIMS);
    if (nwrt == 0) return TG_OK;
    const char *scope = g->device;
    if (n == 0) { /* nothing to pull back: one vjp of zeros checks the dependence */
        device_for(g, y, scope);
        tg_var *cot = tg_grad_zeros_like(g, y);
        g->device = scope;
        st = cot ? tg_vjp(g, &y, &cot, 1, wrt, nwrt, disconnected, out) : g->status;
        for (int i = 0; i < nwrt && st == TG_OK; i++) {
            device_for(g, wrt[i], scope);
            out[i] = zeros_outer(g, y, wrt[i]);
            g->device = scope;
            if (!out[i]) st = g->status;
        }
    } else {
        size_t rsz = sizeof(tg_var *) * (size_t)(n * nwrt), tsz = sizeof(tg_var *) * (size_t)nwrt;
        tg_var **rows = tg_mem_calloc(g->ctx, rsz), **tmp = tg_mem_calloc(g->ctx, tsz);
        st = rows && tmp ? pull_rows(g, y, n, wrt, nwrt, disconnected, rows, tmp)
                         : tg_grad_fail(g, TG_ENOMEM, "jacobian: out of memory");
        for (int i = 0; i < nwrt && st == TG_OK; i++) {
            device_for(g, wrt[i], scope);
            out[i] = stack_rows(g, &y->type, rows + (int64_t)i * n, n);
            g->device = scope;
            if (!out[i]) st = g->status;
        }
        if (rows) tg_mem_free(g->ctx, rows, rsz);
        if (tmp) tg_mem_free(g->ctx, tmp, tsz);
    }
    return st;
}

static tg_status hessian(tg_graph *g, tg_var *cost, tg_var *const *wrt, int nwrt,
                         tg_disconnected disconnected, tg_var **out) {
    tg_status st = check_args(g, "tg_hessian", "cost", cost, wrt, nwrt, disconnected, out);
    if (st != TG_OK) return st;
    char a[TG_TYPE_STR_MAX], lab[128];
    if (cost->type.ndim != 0 || !tg_dtype_is_float((tg_dtype)cost->type.dtype))
        return tg_grad_fail(g, cost->type.ndim != 0 ? TG_ESHAPE : TG_ETYPE,
                            "hessian: the cost must be a 0-d float, got %s",
                            tg_type_str(&cost->type, a, sizeof a));
    for (int i = 0; i < nwrt; i++) {
        const tg_type *t = &wrt[i]->type;
        int64_t n = static_size(t, TG_JACOBIAN_MAX);
        tg_grad_label(wrt[i], lab, sizeof lab);
        tg_type_str(t, a, sizeof a);
        if (!tg_dtype_is_float((tg_dtype)t->dtype))
            return tg_grad_fail(g, TG_ETYPE, "hessian: %s is %s (hessians are defined for floats)",
                                lab, a);
        if (n < 0)
            return tg_grad_fail(g, TG_ESHAPE, "hessian: %s must have a static shape, got %s", lab,
                                a);
        if (n > TG_JACOBIAN_MAX)
            return tg_grad_fail(
                g, TG_ELIMIT,
                "hessian: %s is %s, more than %d elements (one vjp per element; the "
                "limit is TG_JACOBIAN_MAX)",
                lab, a, TG_JACOBIAN_MAX);
        if (2 * t->ndim > TG_MAX_DIMS)
            return tg_grad_fail(g, TG_ELIMIT,
                                "hessian: %s is %s: the hessian would have rank %d, more "
                                "than %d",
                                lab, a, 2 * t->ndim, TG_MAX_DIMS);
    }
    if (nwrt == 0) return TG_OK;
    size_t gsz = sizeof(tg_var *) * (size_t)nwrt;
    tg_var **grads = tg_mem_calloc(g->ctx, gsz);
    st = grads ? tg_grad(g, cost, wrt, nwrt, disconnected, grads)
               : tg_grad_fail(g, TG_ENOMEM, "hessian: out of memory");
    for (int i = 0; i < nwrt && st == TG_OK; i++) {
        const tg_type *t = &wrt[i]->type;
        tg_var *gi = grads[i];
        if (static_size(&gi->type, TG_JACOBIAN_MAX) < 0) { /* a cotangent may have '?' extents */
            const char *scope = g->device;
            device_for(g, wrt[i], scope);
            gi = tg_reshape(g, gi, t->ndim, t->shape);
            g->device = scope;
        }
        /* the gradient not depending on wrt[i] means a zero second derivative */
        st = gi ? tg_jacobian(g, gi, &wrt[i], 1, TG_DISCONNECTED_ZERO, &out[i]) : g->status;
    }
    if (grads) tg_mem_free(g->ctx, grads, gsz);
    return st;
}

/* out[0..nwrt) NULL after a failure, where out could be written. */
static tg_status clear_on_failure(tg_status st, int nwrt, tg_var **out) {
    if (st != TG_OK && out)
        for (int i = 0; i < nwrt; i++) out[i] = NULL;
    return st;
}

tg_status tg_jacobian(tg_graph *g, tg_var *y, tg_var *const *wrt, int nwrt,
                      tg_disconnected disconnected, tg_var **out) {
    return clear_on_failure(jacobian(g, y, wrt, nwrt, disconnected, out), nwrt, out);
}

tg_status tg_hessian(tg_graph *g, tg_var *cost, tg_var *const *wrt, int nwrt,
                     tg_disconnected disconnected, tg_var **out) {
    return clear_on_failure(hessian(g, cost, wrt, nwrt, disconnected, out), nwrt, out);
}
