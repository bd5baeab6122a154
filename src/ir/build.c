/* build.c - the public builders: tg_apply / tg_apply_multi by op name and the typed
 * shortcuts of tgraph.h. Each is a thin wrapper over tg_ir_node_make, which owns
 * promotion and inference; nothing op-specific lives here beyond attribute packing. */
#include "op.h"

/* A composite (op.h): its arity and attributes checked as an op's, then its graph built. */
static tg_status composite_apply(tg_graph *g, const tg_composite_def *c, tg_var *const *in, int nin,
                                 const tg_attr *attrs, int nattrs, tg_var **out, int *nout) {
    if (nin < c->min_in || (c->max_in >= 0 && nin > c->max_in)) {
        if (c->min_in == c->max_in)
            return tg_ir_fail(g, TG_EINVAL, "%s: expects %d input%s, got %d", c->name, c->min_in,
                              c->min_in == 1 ? "" : "s", nin),
                   g->status;
        return tg_ir_fail(g, TG_EINVAL, "%s: expects at least %d inputs, got %d", c->name,
                          c->min_in, nin),
               g->status;
    }
    if (nattrs < 0 || (nattrs > 0 && !attrs))
        return tg_ir_fail(g, TG_EINVAL, "%s: invalid attribute list", c->name), g->status;
    tg_aval *vals = tg_ir_attrs_normalize(g, c->name, c->attrs, c->nattrs, NULL, attrs, nattrs);
    if (!vals) return g->status;
    tg_var *res[TG_MAX_OUTS];
    int nres = 0;
    if (c->build(g, in, nin, vals, res, &nres) != TG_OK) return g->status;
    if (g->status != TG_OK) return g->status;
    if (nout) {
        if (*nout < 0)
            return tg_ir_fail(g, TG_EINVAL, "%s: negative output room %d", c->name, *nout),
                   g->status;
        if (out && nres > *nout)
            return tg_ir_fail(g, TG_EINVAL, "%s: produces %d outputs, room for %d", c->name, nres,
                              *nout),
                   g->status;
        for (int i = 0; out && i < nres; i++) out[i] = res[i];
        *nout = nres;
    }
    return TG_OK;
}

tg_status tg_apply_multi(tg_graph *g, const char *op, tg_var *const *in, int nin,
                         const tg_attr *attrs, int nattrs, tg_var **out, int *nout) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_apply: graph is NULL");
    if (g->status != TG_OK) return g->status;
    int opi = op ? tg_op_lookup(op) : -1;
    const tg_composite_def *comp = opi < 0 && op ? tg_composite_lookup(op) : NULL;
    if (opi < 0 && !comp)
        return tg_ir_fail(g, TG_ENAME, "unknown op '%s'", op ? op : "(null)"), g->status;
    if (nin < 0 || (nin > 0 && !in))
        return tg_ir_fail(g, TG_EINVAL, "%s: %s", op,
                          nin < 0 ? "negative input count" : "the input list is NULL"),
               g->status;
    for (int i = 0; i < nin; i++)
        if (!in[i]) return tg_ir_fail(g, TG_EINVAL, "%s: input %d is NULL", op, i), g->status;
    if (comp) return composite_apply(g, comp, in, nin, attrs, nattrs, out, nout);
    tg_node *n = tg_ir_node_make(g, opi, in, nin, attrs, nattrs);
    if (!n) return g->status;
    if (nout) {
        int cap = *nout;
        if (cap < 0)
            return tg_ir_fail(g, TG_EINVAL, "%s: negative output room %d", op, cap), g->status;
        if (out && n->nout > cap)
            return tg_ir_fail(g, TG_EINVAL, "%s: produces %d outputs, room for %d", op, n->nout,
                              cap),
                   g->status;
        for (int i = 0; out && i < n->nout; i++) out[i] = n->out[i];
        *nout = n->nout;
    }
    return TG_OK;
}

tg_status tg_call(tg_graph *g, tg_graph *callee, tg_var *const *args, int nargs, tg_var **outs,
                  int *nouts) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_call: graph is NULL");
    if (g->status != TG_OK) return g->status;
    if (!callee) return tg_ir_fail(g, TG_EINVAL, "tg_call: callee is NULL"), g->status;
    tg_attr a = TG_A_FUNC("fn", callee);
    return tg_apply_multi(g, "call", args, nargs, &a, 1, outs, nouts);
}

tg_var *tg_apply(tg_graph *g, const char *op, tg_var *const *in, int nin, const tg_attr *attrs,
                 int nattrs) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_apply: graph is NULL"), NULL;
    if (g->status != TG_OK) return NULL; /* an earlier builder failed; its error is kept */
    tg_var *out[TG_MAX_OUTS];
    int nout = TG_MAX_OUTS;
    if (tg_apply_multi(g, op, in, nin, attrs, nattrs, out, &nout) != TG_OK) return NULL;
    if (nout < 1) return tg_ir_fail(g, TG_EINVAL, "%s: has no output", op);
    return out[0];
}

#define TG_X_UNARY_DEF(nm)                                                                         \
    tg_var *tg_##nm(tg_graph *g, tg_var *x) { return tg_apply(g, #nm, &x, 1, NULL, 0); }
#define TG_X_BINARY_DEF(nm)                                                                        \
    tg_var *tg_##nm(tg_graph *g, tg_var *a, tg_var *b) {                                           \
        return tg_apply(g, #nm, (tg_var *[]){a, b}, 2, NULL, 0);                                   \
    }
TG_UNARY_BUILDERS(TG_X_UNARY_DEF)
TG_BINARY_BUILDERS(TG_X_BINARY_DEF)

tg_var *tg_where(tg_graph *g, tg_var *cond, tg_var *a, tg_var *b) {
    return tg_apply(g, "where", (tg_var *[]){cond, a, b}, 3, NULL, 0);
}

tg_var *tg_clip(tg_graph *g, tg_var *x, tg_var *lo, tg_var *hi) {
    return tg_apply(g, "clip", (tg_var *[]){x, lo, hi}, 3, NULL, 0);
}

tg_var *tg_cast(tg_graph *g, tg_var *x, tg_dtype dt) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_cast: graph is NULL"), NULL;
    if ((unsigned)dt >= TG_DT_COUNT)
        return g->status == TG_OK ? tg_ir_fail(g, TG_EINVAL, "cast: invalid dtype %d", (int)dt)
                                  : NULL;
    tg_attr a = TG_A_STR("dtype", tg_dtype_name(dt));
    return tg_apply(g, "cast", &x, 1, &a, 1);
}

tg_var *tg_reduce(tg_graph *g, const char *op, tg_var *x, const int64_t *axes, int naxes,
                  bool keepdims) {
    tg_attr a[2] = {naxes < 0 || !axes ? TG_A_NONE("axis") : TG_A_INTS("axis", axes, naxes),
                    TG_A_BOOL("keepdims", keepdims)};
    int opi = op ? tg_op_lookup(op) : -1;
    const tg_op_def *def = opi >= 0 ? tg_op_table[opi] : NULL;
    /* argmax/argmin take one axis as an int */
    if (def && def->nattrs > 0 && def->attrs[0].type == TG_AS_INT && naxes == 1 && axes)
        a[0] = TG_A_INT("axis", axes[0]);
    return tg_apply(g, op, &x, 1, a, 2);
}

tg_var *tg_reshape(tg_graph *g, tg_var *x, int ndim, const int64_t *shape) {
    tg_attr a = TG_A_INTS("shape", shape, ndim);
    return tg_apply(g, "reshape", &x, 1, &a, 1);
}

tg_var *tg_transpose(tg_graph *g, tg_var *x, const int64_t *axes) {
    if (!axes || !x) return tg_apply(g, "transpose", &x, 1, NULL, 0); /* x NULL: its error */
    tg_attr a = TG_A_INTS("axes", axes, x->type.ndim);
    return tg_apply(g, "transpose", &x, 1, &a, 1);
}

tg_var *tg_slice_apply(tg_graph *g, tg_var *x, const tg_slice *idx, int nidx) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_slice_apply: graph is NULL"), NULL;
    if (g->status != TG_OK) return NULL;
    if (!x) return tg_ir_fail(g, TG_EINVAL, "tg_slice_apply: x is NULL");
    if (nidx < 0 || nidx > TG_MAX_DIMS || (nidx > 0 && !idx))
        return tg_ir_fail(g, TG_EINVAL, "tg_slice_apply: invalid index list (%d entries%s)", nidx,
                          nidx > 0 && !idx ? ", NULL" : "");
    int64_t st[TG_MAX_DIMS], sp[TG_MAX_DIMS], step[TG_MAX_DIMS], ix[TG_MAX_DIMS];
    bool none[3][TG_MAX_DIMS]; /* omitted parts: `none` entries, apart from every value */
    for (int i = 0; i < nidx; i++)
        if (idx[i].omit & ~TG_SLICE_OMIT_ALL)
            return tg_ir_fail(g, TG_EINVAL,
                              "tg_slice_apply: item %d is a new axis or '...', which only "
                              "tg_index_apply takes",
                              i);
    for (int i = 0; i < nidx; i++) {
        st[i] = idx[i].start;
        sp[i] = idx[i].stop;
        step[i] = idx[i].step;
        ix[i] = idx[i].is_index;
        none[0][i] = (idx[i].omit & TG_SLICE_NO_START) != 0;
        none[1][i] = (idx[i].omit & TG_SLICE_NO_STOP) != 0 || idx[i].is_index;
        none[2][i] = (idx[i].omit & TG_SLICE_NO_STEP) != 0 || idx[i].is_index;
    }
    tg_attr a[4] = {TG_A_INTS("starts", st, nidx), TG_A_INTS("stops", sp, nidx),
                    TG_A_INTS("steps", step, nidx), TG_A_INTS("index", ix, nidx)};
    for (int q = 0; q < 3; q++) a[q].none = none[q];
    return tg_apply(g, "slice", &x, 1, a, 4);
}
