/* interp.c - the reference interpreter: runs a graph as written, node by node, with each
 * op record's reference kernel. It defines tgraph's semantics; every other backend is
 * compared against it.
 *
 * Per call: every value gets a run-time type (concrete extents, `nobcast` on extents of 1
 * that were '?'), each node's outputs are inferred again from those types (so the same
 * inference code checks shapes at run time), allocated contiguous, and computed. A value
 * is released after its last use. Outputs handed to the caller are fresh tensors that
 * share memory with nothing the caller gave.
 */
#include "../../ops/ops.h"

#include <stdio.h>

struct tg_fn {
    tg_graph *g;        /* borrowed: must outlive the function */
    tg_mode mode;       /* TG_MODE_REFERENCE */
    tg_node **order;    /* topological order of the nodes the outputs need */
    int norder;         /* its length */
    int *uses;          /* per var id: number of node inputs + outputs reading it */
    int nvars;          /* g->vars.n at compile time */
};

tg_status tg_graph_compile(tg_graph *g, const tg_compile_opts *opts, tg_fn **out) {
    if (!g || !out) return tg_set_error(TG_EINVAL, "compile: graph or result pointer is NULL");
    *out = NULL;
    if (g->status != TG_OK) return tg_set_error(g->status, "%s", g->error);
    tg_mode mode = opts ? opts->mode : TG_MODE_REFERENCE;
    if (mode != TG_MODE_REFERENCE) {
        static const char *const names[] = {"reference", "vm", "c", "debug"};
        return tg_set_error(TG_EUNSUPPORTED, "mode '%s' is not available in this build",
                            (unsigned)mode < 4 ? names[mode] : "?");
    }
    if (g->outputs.n == 0)
        return tg_set_error(TG_EINVAL, "function '%s' has no outputs", g->name);
    tg_status st = tg_graph_verify(g);
    if (st != TG_OK) return st;
    tg_fn *f = tg_mem_calloc(g->ctx, sizeof *f);
    if (!f) return TG_ENOMEM;
    f->g = g;
    f->mode = mode;
    f->nvars = g->vars.n;
    f->order = tg_ir_toposort(g, &f->norder);
    f->uses = tg_mem_calloc(g->ctx, sizeof *f->uses * (size_t)(f->nvars + 1));
    if (!f->order || !f->uses) {
        tg_fn_free(f);
        return TG_ENOMEM;
    }
    for (int i = 0; i < f->norder; i++)
        for (int k = 0; k < f->order[i]->nin; k++) f->uses[f->order[i]->in[k]->id]++;
    for (int i = 0; i < g->outputs.n; i++) f->uses[((tg_var *)g->outputs.items[i])->id]++;
    *out = f;
    return TG_OK;
}

void tg_fn_free(tg_fn *f) {
    if (!f) return;
    tg_ctx *ctx = f->g->ctx;
    if (f->order) tg_mem_free(ctx, f->order, sizeof *f->order * (size_t)(f->g->nodes.n + 1));
    if (f->uses) tg_mem_free(ctx, f->uses, sizeof *f->uses * (size_t)(f->nvars + 1));
    tg_mem_free(ctx, f, sizeof *f);
}

/* Run-time type of a tensor that fills a variable of static type st. */
static void runtime_type(const tg_type *st, const tg_tensor *t, tg_type *rt) {
    *rt = (tg_type){.dtype = (uint8_t)t->dtype, .ndim = (uint8_t)t->ndim};
    for (int i = 0; i < t->ndim; i++) {
        rt->shape[i] = t->shape[i];
        if (t->shape[i] == 1 && st->shape[i] != 1) rt->nobcast |= 1u << i;
    }
}

/* Checks a caller's input against the declared type. */
static tg_status check_input(const tg_var *v, const tg_tensor *t, int i) {
    char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
    if (!t) return tg_set_error(TG_EINVAL, "input %d ('%s') is NULL", i, v->name);
    tg_type rt;
    runtime_type(&v->type, t, &rt);
    bool ok = t->dtype == v->type.dtype && t->ndim == v->type.ndim;
    for (int k = 0; ok && k < t->ndim; k++)
        ok = v->type.shape[k] < 0 || v->type.shape[k] == t->shape[k];
    if (ok) return TG_OK;
    return tg_set_error(t->dtype != v->type.dtype ? TG_ETYPE : TG_ESHAPE,
                        "input '%s': expected %s, got %s", v->name,
                        tg_type_str(&v->type, a, sizeof a), tg_type_str(&rt, b, sizeof b));
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
    tg_fn *f;
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

static tg_status run_node(run_state *rs, tg_node *n) {
    tg_graph *g = rs->f->g;
    const tg_op_def *op = tg_op_table[n->op];
    char where[256];
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
    tg_infer ic = {.op = op, .in = tin, .nin = n->nin, .attrs = n->attrs, .out = tout,
                   .nout = op->nout, .runtime = true};
    if (op->infer(&ic) != TG_OK) {
        node_where(g, n, where, sizeof where);
        st = tg_set_error(ic.status ? ic.status : TG_ESHAPE, "%s: %s", where, ic.msg);
        goto done;
    }
    TG_ASSERT(ic.nout == n->nout);
    bool self = op->views || op->self_alloc;
    for (int k = 0; k < n->nout && !self; k++) {
        vout[k] = tg_tensor_new(g->ctx, (tg_dtype)tout[k].dtype, tout[k].ndim, tout[k].shape);
        if (!vout[k]) {
            st = TG_ENOMEM;
            goto done;
        }
    }
    tg_kern k = {.ctx = g->ctx, .node = n, .attrs = n->attrs, .in = vin, .nin = n->nin,
                 .out = vout, .nout = n->nout, .out_type = tout};
    if (op->ref(&k) != TG_OK) {
        node_where(g, n, where, sizeof where);
        st = tg_set_error(k.status ? k.status : TG_EINVAL, "%s: %s", where, k.msg);
        goto done;
    }
    for (int o = 0; o < n->nout; o++) {
        tg_var *v = n->out[o];
        const tg_type *s = &v->type;
        TG_ASSERT(vout[o] != NULL);
        runtime_type(s, vout[o], &tout[o]);
        TG_ASSERT(tout[o].dtype == s->dtype && tout[o].ndim == s->ndim);
        for (int d = 0; d < s->ndim; d++)
            TG_ASSERT(s->shape[d] < 0 || s->shape[d] == tout[o].shape[d]);
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

tg_status tg_fn_call(tg_fn *f, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
    if (!f) return tg_set_error(TG_EINVAL, "call: function is NULL");
    tg_graph *g = f->g;
    if (nin != g->inputs.n)
        return tg_set_error(TG_EINVAL, "function '%s' takes %d inputs, got %d", g->name,
                            g->inputs.n, nin);
    if (nout != g->outputs.n)
        return tg_set_error(TG_EINVAL, "function '%s' returns %d outputs, room for %d", g->name,
                            g->outputs.n, nout);
    if (nout > 0 && !out) return tg_set_error(TG_EINVAL, "call: output array is NULL");
    for (int i = 0; i < nin; i++) {
        tg_status st = check_input(g->inputs.items[i], in ? in[i] : NULL, i);
        if (st != TG_OK) return st;
    }
    for (int i = 0; i < nout; i++) out[i] = NULL;
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
        runtime_type(&v->type, in[i], &rs.rt[v->id]);
    }
    for (int i = 0; i < nv; i++) {
        tg_var *v = g->vars.items[i];
        if (v->kind != TG_VAR_CONST) continue;
        rs.val[v->id] = v->value;
        runtime_type(&v->type, v->value, &rs.rt[v->id]);
    }
    for (int i = 0; i < f->norder && st == TG_OK; i++) st = run_node(&rs, f->order[i]);
    /* outputs: fresh contiguous tensors the caller owns */
    for (int i = 0; i < nout && st == TG_OK; i++) {
        tg_var *v = g->outputs.items[i];
        tg_tensor *t = rs.val[v->id];
        TG_ASSERT(t != NULL);
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
    if (rs.val) tg_mem_free(g->ctx, rs.val, sizeof *rs.val * (size_t)(nv + 1));
    if (rs.rt) tg_mem_free(g->ctx, rs.rt, sizeof *rs.rt * (size_t)(nv + 1));
    if (rs.left) tg_mem_free(g->ctx, rs.left, sizeof *rs.left * (size_t)(nv + 1));
    return st;
}
