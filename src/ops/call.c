/* call.c - `call`: a call of another function of the module (in .tg, `y = f(x)`).
 *
 * The callee is the node's FUNC attribute `fn`, a graph held by reference (ir.h). A call
 * is typed by inferring the callee's body again on the argument types, so a callee with
 * '?' extents called on static arguments gives static results, exactly the types its
 * body gets when the call is inlined (rewrite/inline.c, first in the pipeline). Kept as a
 * node (--no-inline), it runs its body through the backend's sub-graph executor
 * (tg_kern.sub), which compile time does not have: a call is never constant-folded
 * (TG_EFFECT_NOFOLD), though two equal calls merge. Its gradient is a call of a backward
 * function built for the call site.
 *
 * Invariants:
 *  - Arguments: one per input of the callee (which has no state); dtypes equal the
 *    parameters' (weak literals adopt them); ranks equal; a static extent of a parameter
 *    must equal the argument's, a '?' accepts any.
 *  - Inference recursion follows the nesting of calls, which node construction keeps
 *    within TG_CALL_MAX_DEPTH (graph.c); ic->depth checks it again.
 */
#include "ops.h"

#include <stdio.h>

enum { A_FN };
static const tg_attr_spec call_attrs[] = {{"fn", TG_AS_FUNC, 1, 0, {0}}};

static tg_status arity(tg_infer *ic, const tg_graph *fn) {
    char at[300];
    tg_fn_place(fn, at, sizeof at);
    if (fn->updates.n > 0 || fn->inputs.n != ic->nin) {
        int nstate = 0;
        for (int i = 0; i < fn->inputs.n; i++) nstate += tg_var_is_state(fn->inputs.items[i]);
        if (nstate > 0)
            return tg_infer_fail(ic, TG_EINVAL,
                                 "%s%s has state (`mut` parameters): it cannot be called", fn->name,
                                 at);
        if (fn->inputs.n != ic->nin)
            return tg_infer_fail(ic, TG_EINVAL, "%s%s takes %d argument%s, got %d", fn->name, at,
                                 fn->inputs.n, fn->inputs.n == 1 ? "" : "s", ic->nin);
    }
    return TG_OK;
}

/* Arguments take the parameters' dtypes: weak literals adopt them; a typed argument of
 * another dtype is an error naming both places (no silent cast). */
static tg_status call_promote(tg_infer *ic, tg_dtype *want) {
    const tg_graph *fn = ic->attrs[A_FN].fn;
    if (arity(ic, fn) != TG_OK) return ic->status;
    for (int i = 0; i < ic->nin; i++) {
        const tg_var *p = fn->inputs.items[i];
        tg_dtype pd = (tg_dtype)p->type.dtype;
        if (ic->in[i].dtype != pd && !ic->in[i].weak) {
            char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX], at[300];
            tg_fn_place(fn, at, sizeof at);
            return tg_infer_fail(ic, TG_ETYPE,
                                 "%s: argument %d is %s, but parameter '%s' of %s%s is %s",
                                 fn->name, i + 1, tg_type_str(&ic->in[i], a, sizeof a), p->name,
                                 fn->name, at, tg_type_str(&p->type, b, sizeof b));
        }
        want[i] = pd;
    }
    return TG_OK;
}

tg_status tg_call_types(tg_infer *ic, const tg_graph *body, const tg_type *tin,
                        const tg_tensor *const *values, tg_type *out) {
    if (ic->depth >= TG_CALL_MAX_DEPTH)
        return tg_infer_fail(ic, TG_ELIMIT, "calls nest deeper than %d", TG_CALL_MAX_DEPTH);
    tg_ctx *ctx = body->ctx;
    int norder = 0, nv = body->vars.n + 1, ntmp = 1;
    for (int i = 0; i < body->nodes.n; i++) {
        const tg_node *n = body->nodes.items[i];
        if (n->nin + 1 > ntmp) ntmp = n->nin + 1;
    }
    tg_node **order = tg_ir_toposort(body, &norder);
    tg_type *vt = tg_mem_alloc(ctx, sizeof *vt * (size_t)nv);
    const tg_tensor **vval = tg_mem_calloc(ctx, sizeof *vval * (size_t)nv);
    tg_type *tin2 = tg_mem_alloc(ctx, sizeof *tin2 * (size_t)ntmp);
    const tg_tensor **val2 = tg_mem_alloc(ctx, sizeof *val2 * (size_t)ntmp);
    tg_type *tout = tg_mem_alloc(ctx, sizeof *tout * TG_MAX_OUTS);
    tg_infer *sub = tg_mem_alloc(ctx, sizeof *sub);
    tg_status st = TG_OK;
    if (!order || !vt || !vval || !tin2 || !val2 || !tout || !sub)
        st = tg_infer_fail(ic, TG_ENOMEM, "out of memory inferring the body of '%s'", body->name);
    for (int i = 0; st == TG_OK && i < body->vars.n; i++) {
        const tg_var *v = body->vars.items[i];
        vt[i] = v->type;
        if (v->kind == TG_VAR_CONST) vval[i] = v->value;
    }
    for (int i = 0; st == TG_OK && i < body->inputs.n; i++) {
        const tg_var *v = body->inputs.items[i];
        vt[v->id] = tin[i];
        vt[v->id].weak = 0; /* a parameter is typed, whatever the argument was */
        if (!ic->runtime) vt[v->id].nobcast = 0;
        vval[v->id] = values ? values[i] : NULL;
    }
    for (int i = 0; st == TG_OK && i < norder; i++) {
        const tg_node *n = order[i];
        const tg_op_def *op = tg_op_table[n->op];
        for (int k = 0; k < n->nin; k++) {
            tin2[k] = vt[n->in[k]->id];
            val2[k] = vval[n->in[k]->id];
        }
        *sub = (tg_infer){.op = op,
                          .in = tin2,
                          .nin = n->nin,
                          .vars = n->in,
                          .values = val2,
                          .attrs = n->attrs,
                          .out = tout,
                          .nout = op->nout,
                          .runtime = ic->runtime,
                          .depth = ic->depth + 1,
                          .axes = ic->axes};
        bool failed = op->infer(sub) != TG_OK;
        if (failed || sub->nout != n->nout) {
            char where[200];
            if (n->line > 0)
                snprintf(where, sizeof where, "%s:%d:%d", body->file ? body->file : "<input>",
                         n->line, n->col);
            else
                snprintf(where, sizeof where, "node %d", n->id);
            st = tg_infer_fail(ic, sub->status ? sub->status : TG_ESHAPE, "in %s, at %s: %s: %s",
                               body->name, where, op->name,
                               failed ? sub->msg : "a different number of outputs");
            break;
        }
        for (int k = 0; k < n->nout; k++) {
            tg_type t = tout[k];
            if (!ic->runtime) t.nobcast = 0;
            vt[n->out[k]->id] = t;
        }
    }
    for (int i = 0; st == TG_OK && i < body->nret; i++)
        out[i] = vt[((const tg_var *)body->outputs.items[i])->id];
    if (order) tg_mem_free(ctx, order, sizeof *order * (size_t)(body->nodes.n + 1));
    tg_mem_free(ctx, vt, sizeof *vt * (size_t)nv);
    tg_mem_free(ctx, vval, sizeof *vval * (size_t)nv);
    tg_mem_free(ctx, tin2, sizeof *tin2 * (size_t)ntmp);
    tg_mem_free(ctx, val2, sizeof *val2 * (size_t)ntmp);
    tg_mem_free(ctx, tout, sizeof *tout * TG_MAX_OUTS);
    tg_mem_free(ctx, sub, sizeof *sub);
    return st;
}

static tg_status call_infer(tg_infer *ic) {
    const tg_graph *fn = ic->attrs[A_FN].fn;
    if (arity(ic, fn) != TG_OK) return ic->status;
    if (fn->nret > TG_MAX_OUTS)
        return tg_infer_fail(ic, TG_ELIMIT, "%s returns %d values; a call takes at most %d",
                             fn->name, fn->nret, TG_MAX_OUTS);
    for (int i = 0; i < ic->nin; i++) {
        const tg_var *p = fn->inputs.items[i];
        const tg_type *a = &ic->in[i];
        bool fits = a->dtype == p->type.dtype && a->ndim == p->type.ndim;
        for (int d = 0; fits && d < a->ndim; d++)
            fits = p->type.shape[d] < 0 ||
                   (a->shape[d] >= 0 ? a->shape[d] == p->type.shape[d] : !ic->runtime);
        if (fits) continue;
        char ta[TG_TYPE_STR_MAX], tb[TG_TYPE_STR_MAX], at[300];
        tg_fn_place(fn, at, sizeof at);
        return tg_infer_fail(ic, a->dtype == p->type.dtype ? TG_ESHAPE : TG_ETYPE,
                             "%s: argument %d is %s, but parameter '%s' of %s%s is %s", fn->name,
                             i + 1, tg_type_str(a, ta, sizeof ta), p->name, fn->name, at,
                             tg_type_str(&p->type, tb, sizeof tb));
    }
    ic->nout = fn->nret;
    return tg_call_types(ic, fn, ic->in, ic->values, ic->out);
}

static tg_status call_ref(tg_kern *k) {
    const tg_graph *fn = k->attrs[A_FN].fn;
    if (!k->sub)
        return tg_kern_fail(k, TG_EUNSUPPORTED, "no sub-graph executor here to run '%s'", fn->name);
    tg_status st = k->sub->run(k->sub, fn, k->in, k->nin, k->out, k->nout, k->msg, sizeof k->msg);
    if (st != TG_OK) k->status = st;
    return st;
}

/* The backward function of one call site: its parameters are the call's arguments (typed
 * as at the call site, so that the cotangents it returns have exactly the arguments'
 * types) and the cotangents of the float outputs that receive one; its body is the
 * callee's body followed by its vector-Jacobian product. Returns the new graph (one
 * reference, the caller's) or NULL with g's error set. */
static tg_graph *backward_fn(tg_graph *g, const tg_node *n, tg_var *const *gout, int *flow) {
    const tg_graph *fn = n->attrs[A_FN].fn;
    char name[256];
    snprintf(name, sizeof name, "%s_vjp", fn->name);
    tg_graph *b = tg_graph_new(g->ctx, name);
    if (!b) return tg_ir_fail(g, TG_ENOMEM, "out of memory building the gradient of a call");
    b->file = fn->file;
    tg_var *args[TG_MAX_OUTS + 1], *outs[TG_MAX_OUTS], *cots[TG_MAX_OUTS], *res[TG_MAX_OUTS];
    tg_var *ys[TG_MAX_OUTS], *wrt[TG_MAX_OUTS];
    tg_var **params = n->nin <= TG_MAX_OUTS ? args : NULL;
    int ny = 0, nw = 0;
    if (!params) {
        tg_graph_free(b);
        return tg_ir_fail(g, TG_ELIMIT, "grad: a call with more than %d arguments", TG_MAX_OUTS);
    }
    for (int i = 0; i < n->nin; i++) {
        const tg_var *p = fn->inputs.items[i];
        const tg_type *t = &n->in[i]->type;
        params[i] = tg_input(b, p->name, (tg_dtype)t->dtype, t->ndim, t->shape);
    }
    if (b->status == TG_OK) tg_ir_copy_body(b, fn, params, outs);
    for (int j = 0; b->status == TG_OK && j < n->nout; j++) {
        if (!gout[j] || !tg_dtype_is_float((tg_dtype)n->out[j]->type.dtype)) continue;
        char cn[64];
        tg_grad_cot_name(fn, j, cn, sizeof cn);
        const tg_type *t = &gout[j]->type;
        cots[ny] = tg_input(b, cn, (tg_dtype)t->dtype, t->ndim, t->shape);
        ys[ny++] = outs[j];
    }
    for (int i = 0; i < n->nin; i++) {
        flow[i] = -1;
        if (!tg_ops_float_in(n, i)) continue;
        flow[i] = nw;
        wrt[nw++] = params[i];
    }
    if (b->status == TG_OK && ny > 0 && nw > 0)
        tg_vjp(b, ys, cots, ny, wrt, nw, TG_DISCONNECTED_ZERO, res);
    if (b->status == TG_OK && (ny == 0 || nw == 0))
        for (int i = 0; i < nw; i++) res[i] = tg_grad_zeros_like(b, wrt[i]);
    if (b->status == TG_OK) tg_graph_set_outputs(b, res, nw);
    if (b->status != TG_OK) {
        tg_ir_fail(g, b->status, "%s", b->error);
        tg_graph_free(b);
        return NULL;
    }
    return b;
}

static tg_status call_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    int flow[TG_MAX_OUTS + 1];
    tg_graph *b = backward_fn(g, n, gout, flow);
    if (!b) return g->status;
    tg_var *args[2 * TG_MAX_OUTS + 1], *res[TG_MAX_OUTS];
    int na = 0, nres = TG_MAX_OUTS;
    for (int i = 0; i < n->nin; i++) args[na++] = n->in[i];
    for (int j = 0; j < n->nout; j++)
        if (gout[j] && tg_dtype_is_float((tg_dtype)n->out[j]->type.dtype)) args[na++] = gout[j];
    tg_status st = tg_call(g, b, args, na, res, &nres);
    tg_graph_free(b); /* the call node keeps it */
    if (st != TG_OK) return g->status;
    for (int i = 0; i < n->nin; i++) gin[i] = flow[i] >= 0 ? res[flow[i]] : NULL;
    return TG_OK;
}

/* Over a batch (vectorize): the callee's body batched in place, as inlining would copy it. */
static tg_status call_batch(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                            tg_var **out, bool *ob) {
    return tg_batch_body(b, n->attrs[A_FN].fn, in, batched, out, ob);
}

const tg_op_def tg_op_call = {.name = "call",
                              .min_in = 0,
                              .max_in = -1,
                              .nout = -1,
                              .kind = TG_KIND_OTHER,
                              .attrs = call_attrs,
                              .nattrs = 1,
                              .promote = call_promote,
                              .infer = call_infer,
                              .ref = call_ref,
                              .grad = TG_GRAD_VJP,
                              .vjp = call_vjp,
                              .batch = call_batch,
                              .effects = TG_EFFECT_NOFOLD};
