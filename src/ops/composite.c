/* composite.c - ops that are short compositions of other ops (ir/op.h, "composite ops"),
 * and the table of composites by name:
 *  - relu(x)                  where(le(x, 0), 0, x): NaN stays NaN, the gradient at 0 is 0
 *                             (JAX's convention)
 *  - square(x)                mul(x, x) (bool: cast to i8 first, as np.square gives i8)
 *  - log_sigmoid(x)           neg(softplus(neg(x))), stable for every x
 *  - logit(x)                 sub(log(x), log1p(neg(x))), scipy.special.logit
 *  - swapaxes(x, axis1=, axis2=)            a transpose (np.swapaxes)
 *  - moveaxis(x, source=, destination=)     a transpose (np.moveaxis)
 *  - einsum(x, ..., subscripts=)            einsum.c
 * Non-float inputs of log_sigmoid and logit are cast to the float dtype NumPy's ufuncs
 * give them first (bool, i8, u8, i16 -> f32, since tgraph has no f16; i32, i64 -> f64).
 * Invariant: a composite only applies ops (tg_apply); the graph holds no node of its own,
 * so its gradient is the gradient of what it made.
 */
#include "ops.h"

#include <stdio.h>

/* The float dtype NumPy's float ufuncs compute a dtype in (no f16: f32 instead). */
static tg_var *to_float(tg_graph *g, tg_var *x) {
    tg_dtype dt = (tg_dtype)x->type.dtype;
    if (tg_dtype_is_float(dt)) return x;
    return tg_cast(g, x, dt == TG_DT_I32 || dt == TG_DT_I64 ? TG_DT_F64 : TG_DT_F32);
}

static tg_status one(tg_graph *g, tg_var *v, tg_var **out, int *nout) {
    out[0] = v;
    *nout = 1;
    return v ? TG_OK : g->status;
}

static tg_status build_relu(tg_graph *g, tg_var *const *in, int nin, const tg_aval *attrs,
                            tg_var **out, int *nout) {
    (void)nin, (void)attrs;
    tg_var *x = in[0];
    return one(g, tg_where(g, tg_le(g, x, tg_literal_int(g, 0)), tg_literal_int(g, 0), x), out,
               nout);
}

static tg_status build_square(tg_graph *g, tg_var *const *in, int nin, const tg_aval *attrs,
                              tg_var **out, int *nout) {
    (void)nin, (void)attrs;
    tg_var *x = in[0]->type.dtype == TG_DT_BOOL ? tg_cast(g, in[0], TG_DT_I8) : in[0];
    return one(g, tg_mul(g, x, x), out, nout);
}

static tg_status build_log_sigmoid(tg_graph *g, tg_var *const *in, int nin, const tg_aval *attrs,
                                   tg_var **out, int *nout) {
    (void)nin, (void)attrs;
    return one(g, tg_neg(g, tg_softplus(g, tg_neg(g, to_float(g, in[0])))), out, nout);
}

static tg_status build_logit(tg_graph *g, tg_var *const *in, int nin, const tg_aval *attrs,
                             tg_var **out, int *nout) {
    (void)nin, (void)attrs;
    tg_var *x = to_float(g, in[0]);
    return one(g, tg_sub(g, tg_log(g, x), tg_log1p(g, tg_neg(g, x))), out, nout);
}

/* An axis of x given to a composite (negative from the end); fails naming it. */
static bool axis_of(tg_graph *g, const char *op, const char *what, int64_t a, const tg_var *x,
                    int *out) {
    if (tg_axis_norm(a, x->type.ndim, out)) return true;
    char ts[TG_TYPE_STR_MAX];
    tg_ir_fail(g, TG_EINVAL, "%s: %s %lld is out of bounds for an array of dimension %d (%s)", op,
               what, (long long)a, x->type.ndim, tg_type_str(&x->type, ts, sizeof ts));
    return false;
}

static tg_status build_swapaxes(tg_graph *g, tg_var *const *in, int nin, const tg_aval *attrs,
                                tg_var **out, int *nout) {
    (void)nin;
    tg_var *x = in[0];
    int a, b;
    if (!axis_of(g, "swapaxes", "axis1", attrs[0].i, x, &a) ||
        !axis_of(g, "swapaxes", "axis2", attrs[1].i, x, &b))
        return g->status;
    int64_t perm[TG_MAX_DIMS];
    for (int d = 0; d < x->type.ndim; d++) perm[d] = d;
    perm[a] = b;
    perm[b] = a;
    return one(g, tg_transpose(g, x, perm), out, nout);
}

/* np.moveaxis: the source axes go to the destination places, in the order given; the
 * other axes keep their order in the places left. */
static tg_status build_moveaxis(tg_graph *g, tg_var *const *in, int nin, const tg_aval *attrs,
                                tg_var **out, int *nout) {
    (void)nin;
    tg_var *x = in[0];
    const tg_aval *src = &attrs[0], *dst = &attrs[1];
    int nd = x->type.ndim;
    if (src->n != dst->n)
        return tg_ir_fail(g, TG_EINVAL,
                          "moveaxis: source and destination must have the same number of "
                          "elements (%d and %d)",
                          src->n, dst->n),
               g->status;
    int64_t perm[TG_MAX_DIMS];
    bool src_used[TG_MAX_DIMS] = {false}, dst_used[TG_MAX_DIMS] = {false};
    for (int d = 0; d < nd; d++) perm[d] = -1;
    for (int k = 0; k < src->n; k++) {
        int s, t;
        if (!axis_of(g, "moveaxis", "source", src->ints[k], x, &s) ||
            !axis_of(g, "moveaxis", "destination", dst->ints[k], x, &t))
            return g->status;
        if (src_used[s] || dst_used[t])
            return tg_ir_fail(g, TG_EINVAL, "moveaxis: repeated axis in `%s` argument",
                              src_used[s] ? "source" : "destination"),
                   g->status;
        src_used[s] = dst_used[t] = true;
        perm[t] = s;
    }
    for (int d = 0, s = 0; d < nd; d++) {
        if (perm[d] >= 0) continue;
        while (src_used[s]) s++;
        perm[d] = s++;
    }
    return one(g, tg_transpose(g, x, perm), out, nout);
}

static const tg_attr_spec swapaxes_attrs[] = {
    {"axis1", TG_AS_INT, 1, 0, {.kind = TG_ATTR_NONE}},
    {"axis2", TG_AS_INT, 1, 0, {.kind = TG_ATTR_NONE}},
};

static const tg_attr_spec moveaxis_attrs[] = {
    {"source", TG_AS_INTS, 1, 0, {.kind = TG_ATTR_NONE}},
    {"destination", TG_AS_INTS, 1, 0, {.kind = TG_ATTR_NONE}},
};

static const tg_attr_spec einsum_attrs[] = {
    {"subscripts", TG_AS_STR, 1, 0, {.kind = TG_ATTR_NONE}},
};

static const tg_composite_def composites[] = {
    {"relu", 1, 1, NULL, 0, build_relu},
    {"square", 1, 1, NULL, 0, build_square},
    {"log_sigmoid", 1, 1, NULL, 0, build_log_sigmoid},
    {"logit", 1, 1, NULL, 0, build_logit},
    {"swapaxes", 1, 1, swapaxes_attrs, (int)TG_COUNTOF(swapaxes_attrs), build_swapaxes},
    {"moveaxis", 1, 1, moveaxis_attrs, (int)TG_COUNTOF(moveaxis_attrs), build_moveaxis},
    {"einsum", 1, -1, einsum_attrs, (int)TG_COUNTOF(einsum_attrs), tg_einsum_build},
};

const tg_composite_def *tg_composite_lookup(const char *name) {
    for (size_t i = 0; i < TG_COUNTOF(composites); i++)
        if (strcmp(composites[i].name, name) == 0) return &composites[i];
    return NULL;
}
