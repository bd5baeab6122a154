/* interp.c - the reference interpreter: runs a graph node by node with each op record's
 * reference kernel. It defines tgraph's semantics; every other backend is compared
 * against it. src/driver/compile.c compiles functions and hands TG_MODE_REFERENCE graphs here.
 *
 * Per call: every value gets a run-time type (concrete extents, `nobcast` on extents of 1
 * that were '?'), each node's outputs are inferred again from those types (so the same
 * inference code checks shapes at run time), allocated contiguous, and computed. A value
 * is released after its last use. Outputs handed to the caller are fresh tensors that
 * share memory with nothing the caller gave.
 */
#include "interp.h"

#include <stdio.h>

struct tg_interp {
    tg_graph *g;           /* the graph run (borrowed) */
    tg_node **order;       /* topological order of the nodes the outputs need */
    int norder;            /* its length */
    int *uses;             /* per var id: number of node inputs + outputs reading it */
    int nvars;             /* g->vars.n at compile time */
    const tg_subexec *sub; /* runs the bodies of `call` nodes (borrowed); NULL: none */
};

void tg_interp_set_sub(tg_interp *ip, const tg_subexec *sub) { ip->sub = sub; }

tg_status tg_interp_new(tg_graph *g, tg_interp **out) {
    *out = NULL;
    tg_interp *f = tg_mem_calloc(g->ctx, sizeof *f);
    if (!f) return TG_ENOMEM;
    f->g = g;
    f->nvars = g->vars.n;
    f->order = tg_ir_toposort(g, &f->norder);
    f->uses = tg_mem_calloc(g->ctx, sizeof *f->uses * (size_t)(f->nvars + 1));
    if (!f->order || !f->uses) {
        tg_interp_free(f);
        return TG_ENOMEM;
    }
    for (int i = 0; i < f->norder; i++)
        for (int k = 0; k < f->order[i]->nin; k++) f->uses[f->order[i]->in[k]->id]++;
    for (int i = 0; i < g->outputs.n; i++) f->uses[((tg_var *)g->outputs.items[i])->id]++;
    *out = f;
    return TG_OK;
}

void tg_interp_free(tg_interp *f) {
    if (!f) return;
    tg_ctx *ctx = f->g->ctx;
    if (f->order) tg_mem_free(ctx, f->order, sizeof *f->order * (size_t)(f->g->nodes.n + 1));
    if (f->uses) tg_mem_free(ctx, f->uses, sizeof *f->uses * (size_t)(f->nvars + 1));
    tg_mem_free(ctx, f, sizeof *f);
}

/* Run-time type of a tensor that fills a variable of static type st. */
void tg_interp_runtime_type(const tg_type *st, const tg_tensor *t, tg_type *rt) {
    *rt = (tg_type){.dtype = (uint8_t)t->dtype, .ndim = (uint8_t)t->ndim};
    for (int i = 0; i < t->ndim; i++) {
        rt->shape[i] = t->shape[i];
        if (t->shape[i] == 1 && st->shape[i] != 1) rt->nobcast |= 1u << i;
    }
}

/* Message prefix naming a node: "3:14: add" or "node 5 (add)". */
static void node_where(const tg_graph *g, const tg_node *n, char *buf, size_t len) {
    const char *name = tg_op_table[n->op]->name;
    if (n->line > 0)
        snprintf(buf, len, "%s:%d:%d: %s", g->file ? g->file : "<input>", n->line, n->col, name);
    else
        snprintf(buf, len, "node %d (%s)", n->id, name);
}

typedef struct run_state {
    tg_interp *f;
    tg_tensor **val; /* per var id */
    tg_type *rt;     /* per var id: run-time type */
    int *left;       /* per var id: remaining uses */
} run_state;

static void release(run_state *rs, tg_var *v) {
    if (--rs->left[v->id] == 0 && v->kind == TG_VAR_NODE) {
        tg_tensor_free(rs->val[v->id]);
        rs->val[v->id] = NULL;
    }
}

/* Evaluates node n on values vin (run-time types tin) with its reference kernel: infers
 * the run-time output types into tout and leaves new tensors in vout (the caller frees
 * them; views may share memory with vin). Shared by the interpreter and constant folding. */
static tg_status eval_node(tg_ctx *ctx, const tg_graph *g, const tg_node *n, const tg_type *tin,
                           tg_tensor *const *vin, const tg_subexec *sub, tg_type *tout,
                           tg_tensor **vout) {
    char where[256], msg[512];
    for (int o = 0; o < n->nout; o++) vout[o] = NULL;
    tg_status st = tg_node_infer(n, tin, NULL, tout, msg, sizeof msg);
    if (st == TG_OK) st = tg_kern_run(ctx, n, vin, tout, vout, sub, NULL, msg, sizeof msg);
    if (st != TG_OK) {
        node_where(g, n, where, sizeof where);
        return tg_set_error(st, "%s: %s", where, msg);
    }
    for (int o = 0; o < n->nout; o++) {
        const tg_type *s = &n->out[o]->type;
        TG_ASSERT(vout[o] != NULL);
        tg_interp_runtime_type(s, vout[o], &tout[o]);
        TG_ASSERT(tout[o].dtype == s->dtype && tout[o].ndim == s->ndim);
        for (int d = 0; d < s->ndim; d++)
            TG_ASSERT(s->shape[d] < 0 || s->shape[d] == tout[o].shape[d]);
    }
    return TG_OK;
}

tg_status tg_interp_eval(tg_ctx *ctx, const tg_graph *g, const tg_node *n, tg_tensor *const *in,
                         const tg_subexec *sub, tg_tensor **out) {
    size_t insz = sizeof(tg_type) * (size_t)(n->nin + 1);
    tg_type *tin = tg_mem_alloc(ctx, insz);
    tg_type *tout = tg_mem_alloc(ctx, sizeof *tout * TG_MAX_OUTS);
    tg_status st = tin && tout ? TG_OK : TG_ENOMEM;
    for (int k = 0; k < n->nin && st == TG_OK; k++)
        tg_interp_runtime_type(&n->in[k]->type, in[k], &tin[k]);
    if (st == TG_OK) st = eval_node(ctx, g, n, tin, in, sub, tout, out);
    if (st != TG_OK)
        for (int o = 0; o < n->nout; o++) {
            tg_tensor_free(out[o]);
            out[o] = NULL;
        }
    if (tin) tg_mem_free(ctx, tin, insz);
    if (tout) tg_mem_free(ctx, tout, sizeof *tout * TG_MAX_OUTS);
    return st;
}

static tg_status run_node(run_state *rs, tg_node *n) {
    tg_graph *g = rs->f->g;
    tg_status st = TG_OK;
    size_t insz = sizeof(tg_type) * (size_t)(n->nin + 1);
    size_t tvsz = sizeof(tg_tensor *) * (size_t)(n->nin + 1);
    tg_type *tin = tg_mem_alloc(g->ctx, insz);
    tg_tensor **vin = tg_mem_alloc(g->ctx, tvsz);
    tg_type tout[TG_MAX_OUTS];
    tg_tensor *vout[TG_MAX_OUTS] = {0};
    if (!tin || !vin) {
        st = TG_ENOMEM;
        goto done;
    }
    for (int k = 0; k < n->nin; k++) {
        tin[k] = rs->rt[n->in[k]->id];
        vin[k] = rs->val[n->in[k]->id];
        TG_ASSERT(vin[k] != NULL);
    }
    st = eval_node(g->ctx, g, n, tin, vin, rs->f->sub, tout, vout);
    if (st != TG_OK) goto done;
    for (int o = 0; o < n->nout; o++) {
        tg_var *v = n->out[o];
        rs->val[v->id] = vout[o];
        rs->rt[v->id] = tout[o];
        vout[o] = NULL;
        if (rs->left[v->id] == 0) {
            tg_tensor_free(rs->val[v->id]);
            rs->val[v->id] = NULL;
        }
    }
    for (int i = 0; i < n->nin; i++) release(rs, n->in[i]);
done:
    for (int o = 0; o < n->nout; o++) tg_tensor_free(vout[o]);
    if (tin) tg_mem_free(g->ctx, tin, insz);
    if (vin) tg_mem_free(g->ctx, vin, tvsz);
    return st;
}

/* Output i given by the caller (tg_fn_call_into): checks it against the result t and
 * copies t into it. */
static tg_status copy_out(const tg_graph *g, int i, const tg_tensor *t, tg_tensor *dst) {
    tg_var *v = g->outputs.items[i];
    bool ok = dst->dtype == t->dtype && dst->ndim == t->ndim;
    for (int d = 0; ok && d < t->ndim; d++) ok = dst->shape[d] == t->shape[d];
    if (!ok) {
        char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
        tg_type ta = {.dtype = (uint8_t)dst->dtype, .ndim = (uint8_t)dst->ndim};
        tg_type tb = {.dtype = (uint8_t)t->dtype, .ndim = (uint8_t)t->ndim};
        for (int d = 0; d < dst->ndim; d++) ta.shape[d] = dst->shape[d];
        for (int d = 0; d < t->ndim; d++) tb.shape[d] = t->shape[d];
        return tg_set_error(dst->dtype != t->dtype ? TG_ETYPE : TG_ESHAPE,
                            "output %d%s%s%s: the tensor given is %s, the result is %s", i,
                            v->name ? " ('" : "", v->name ? v->name : "", v->name ? "')" : "",
                            tg_type_str(&ta, a, sizeof a), tg_type_str(&tb, b, sizeof b));
    }
    tg_tensor_copy_into(dst, t);
    return TG_OK;
}

static bool shares_input(tg_tensor *const *in, int nin, const tg_tensor *t) {
    for (int k = 0; k < nin; k++)
        if (in[k]->buf == t->buf) return true;
    return false;
}

/* When a given output tensor shares memory with an input, every result that reads an
 * input's memory is first copied into out[i]: the final result for a new output, what
 * copy_out then reads for a given one. */
static tg_status stage_aliased(const tg_graph *g, tg_tensor *const *in, int nin, tg_tensor **out,
                               tg_tensor *const *given, int nout, const run_state *rs) {
    bool alias = false;
    for (int i = 0; i < nout; i++) alias = alias || (given[i] && shares_input(in, nin, given[i]));
    for (int i = 0; alias && i < nout; i++) {
        tg_tensor *t = rs->val[((tg_var *)g->outputs.items[i])->id];
        if (!shares_input(in, nin, t)) continue;
        out[i] = tg_tensor_dup(t);
        if (!out[i]) return TG_ENOMEM;
    }
    return TG_OK;
}

tg_status tg_interp_call(tg_interp *f, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                         bool into) {
    tg_graph *g = f->g;
    /* outputs the caller gave (tg_fn_call_into) are remembered and left in place */
    tg_tensor *given_stack[16], **given = given_stack;
    if (into && nout > (int)TG_COUNTOF(given_stack)) {
        given = tg_mem_alloc(g->ctx, sizeof *given * (size_t)nout);
        if (!given) return TG_ENOMEM;
    }
    for (int i = 0; i < nout; i++) {
        if (into) given[i] = out[i];
        out[i] = NULL;
    }
    int nv = f->nvars;
    run_state rs = {.f = f};
    rs.val = tg_mem_calloc(g->ctx, sizeof *rs.val * (size_t)(nv + 1));
    rs.rt = tg_mem_alloc(g->ctx, sizeof *rs.rt * (size_t)(nv + 1));
    rs.left = tg_mem_alloc(g->ctx, sizeof *rs.left * (size_t)(nv + 1));
    tg_status st = TG_OK;
    if (!rs.val || !rs.rt || !rs.left) {
        st = TG_ENOMEM;
        goto done;
    }
    memcpy(rs.left, f->uses, sizeof *rs.left * (size_t)nv);
    /* leaves: inputs and constants are borrowed views (never freed by release) */
    for (int i = 0; i < nin && st == TG_OK; i++) {
        tg_var *v = g->inputs.items[i];
        rs.val[v->id] = in[i];
        tg_interp_runtime_type(&v->type, in[i], &rs.rt[v->id]);
    }
    for (int i = 0; i < nv; i++) {
        tg_var *v = g->vars.items[i];
        if (v->kind != TG_VAR_CONST) continue;
        rs.val[v->id] = v->value;
        tg_interp_runtime_type(&v->type, v->value, &rs.rt[v->id]);
    }
    for (int i = 0; i < f->norder && st == TG_OK; i++) st = run_node(&rs, f->order[i]);
    /* a given output that shares memory with an input is written last, after every
     * result still reading that input was copied or made safe */
    if (st == TG_OK && into) st = stage_aliased(g, in, nin, out, given, nout, &rs);
    /* outputs: fresh contiguous tensors the caller owns */
    for (int i = 0; i < nout && st == TG_OK; i++) {
        tg_var *v = g->outputs.items[i];
        tg_tensor *t = rs.val[v->id];
        TG_ASSERT(t != NULL);
        if (into && given[i]) {
            st = copy_out(g, i, out[i] ? out[i] : t, given[i]);
            tg_tensor_free(out[i]);
            out[i] = NULL;
            rs.left[v->id]--;
            continue;
        }
        if (out[i]) { /* staged above */
            rs.left[v->id]--;
            continue;
        }
        bool take = v->kind == TG_VAR_NODE && rs.left[v->id] == 1 &&
                    atomic_load(&t->buf->refs) == 1 && tg_tensor_is_contiguous(t);
        if (take) {
            out[i] = t;
            rs.val[v->id] = NULL;
        } else {
            out[i] = tg_tensor_dup(t);
            if (!out[i]) st = TG_ENOMEM;
        }
        rs.left[v->id]--;
    }
done:
    if (rs.val)
        for (int i = 0; i < nv; i++) {
            tg_var *v = g->vars.items[i];
            if (v->kind == TG_VAR_NODE) tg_tensor_free(rs.val[i]);
        }
    if (st != TG_OK)
        for (int i = 0; i < nout; i++) {
            tg_tensor_free(out[i]);
            out[i] = NULL;
        }
    for (int i = 0; into && i < nout; i++)
        if (given[i]) out[i] = given[i];
    if (given != given_stack) tg_mem_free(g->ctx, given, sizeof *given * (size_t)nout);
    if (rs.val) tg_mem_free(g->ctx, rs.val, sizeof *rs.val * (size_t)(nv + 1));
    if (rs.rt) tg_mem_free(g->ctx, rs.rt, sizeof *rs.rt * (size_t)(nv + 1));
    if (rs.left) tg_mem_free(g->ctx, rs.left, sizeof *rs.left * (size_t)(nv + 1));
    return st;
}
