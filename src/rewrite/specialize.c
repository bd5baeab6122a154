/* specialize.c - the specialize phase: cheaper special forms of ops: those of loops (scan
 * and map, docs/scan.md) and of a solve beside a factorization:
 *
 *   scan_to_map   a scan without carried state (n_states=0, no stop condition, no saved
 *                 state) is a map, whose iterations run in parallel over the pool;
 *   scan_merge_saved  a scan whose twin (the gradient's) also returns stacks of its
 *                 states gives its uses the twin's results: one forward loop;
 *   loop_hoist    work of the step that depends only on the constants (and literals) is
 *                 computed once before the loop: the step gets its results as new
 *                 constants;
 *   loop_dead_outputs  a per-step output nobody reads is not computed nor stacked;
 *   map_elemwise  a map whose step is elementwise over its rows and constants is that
 *                 step applied to the whole sequences (then fused by the fuse phase);
 *   solve_factored  solve(A, B) beside cholesky(A) solves with the factor where A is
 *                 symmetric (src/ops/lapack.c).
 *
 * Each rule has a golden test in tests/golden/specialize/. The rules build the new step
 * graphs with the IR's node builder; a step they replace stays alive as long as a node
 * names it.
 */
#include "rewrite.h"

#include <stdio.h>

/* ---- scan_to_map ---- */

static tg_var *rw_scan_to_map(tg_rw *rw, tg_node *n) {
    tg_loop l;
    tg_loop_get(tg_op_table[n->op], n->attrs, n->nin, &l);
    if (l.nstate != 0 || l.until || l.save || l.tapped) return NULL;
    tg_attr a[4];
    int na = 0;
    a[na++] = TG_A_FUNC("body", (tg_graph *)l.body); /* the new node retains it */
    a[na++] = TG_A_INT("n_sequences", l.nseq);
    if (l.nsteps_given) a[na++] = TG_A_INT("n_steps", l.nsteps);
    a[na++] = TG_A_BOOL("dynamic_steps", l.dyn);
    tg_var *out[TG_MAX_OUTS];
    int nout = TG_MAX_OUTS;
    tg_graph *g = tg_rw_graph(rw);
    if (tg_apply_multi(g, "map", n->in, n->nin, a, na, out, &nout) != TG_OK) return NULL;
    for (int q = 0; q < n->nout; q++)
        if (!tg_rw_same_type(out[q], n->out[q]) || tg_rw_replace(rw, n->out[q], out[q]) != TG_OK)
            return NULL;
    return NULL;
}

/* ---- scan_merge_saved ----
 * The gradient of a scan runs a twin of it that also returns stacks of states (`save=`);
 * the scan itself then computes the same values a second time. Its uses take the twin's
 * results instead: same step, inputs and attributes but `save`, the twin saving at least
 * the states it saves. */

/* Whether every state n saves, m saves too (increasing lists). */
static bool saves_within(const tg_aval *n, const tg_aval *m) {
    if (n->kind != TG_ATTR_INTS) return true;
    if (m->kind != TG_ATTR_INTS) return false;
    for (int k = 0, q = 0; k < n->n; k++) {
        while (q < m->n && m->ints[q] < n->ints[k]) q++;
        if (q == m->n || m->ints[q] != n->ints[k]) return false;
    }
    return true;
}

static tg_var *rw_scan_merge_saved(tg_rw *rw, tg_node *n) {
    tg_graph *g = tg_rw_graph(rw);
    const tg_op_def *op = tg_op_table[n->op];
    int isave = op->nattrs - 1; /* `save`, the last attribute of scan */
    tg_loop l;
    tg_loop_get(op, n->attrs, n->nin, &l);
    for (int i = 0; i < g->nodes.n; i++) {
        tg_node *m = g->nodes.items[i];
        if (m == n || m->op != n->op || m->nin != n->nin || m->nout <= n->nout ||
            !tg_ir_same_device(m->device, n->device))
            continue;
        bool used = false; /* a live twin: a node reads it, or the function returns it */
        for (int q = 0; q < m->nout && !used; q++)
            used = tg_rw_use_count(rw, m->out[q]) > 0 || tg_rw_is_output(rw, m->out[q]);
        bool same = used;
        for (int k = 0; same && k < n->nin; k++) same = m->in[k] == n->in[k];
        for (int j = 0; same && j < op->nattrs; j++)
            same = j == isave ? saves_within(&n->attrs[j], &m->attrs[j])
                              : tg_rw_aval_same(&n->attrs[j], &m->attrs[j]);
        if (!same) continue;
        /* the last states and per-step outputs, then n's saved stacks among m's */
        int nfix = l.nstate + l.ny;
        for (int q = 0; q < n->nout; q++) {
            int mq = q;
            if (q >= nfix) {
                const tg_aval *ms = &m->attrs[isave];
                int64_t j = n->attrs[isave].ints[q - nfix];
                for (mq = 0; ms->ints[mq] != j; mq++) {
                }
                mq += nfix;
            }
            if (!tg_rw_same_type(m->out[mq], n->out[q]) ||
                tg_rw_replace(rw, n->out[q], m->out[mq]) != TG_OK)
                return NULL;
        }
        return NULL;
    }
    return NULL;
}

/* ---- loop_hoist ---- */

#define HOIST_MAX 64 /* most values one application hoists */

/* A constant of dst equal to the constant v of the step. */
static tg_var *const_copy(tg_graph *dst, const tg_var *v) {
    tg_tensor *val = tg_tensor_dup(v->value);
    tg_var *c = val ? tg_ir_const(dst, val, v->lit) : NULL;
    if (c) c->type = v->type;
    return c;
}

/* Copies into dst the nodes order[i] with pick[i], inputs through map (body var id ->
 * dst var; constants of the body are copied when first met). false on failure. */
static bool copy_nodes(tg_graph *dst, tg_node *const *order, int norder, const bool *pick,
                       tg_var **map) {
    tg_var *tmp[256];
    for (int i = 0; i < norder; i++) {
        const tg_node *m = order[i];
        if (!pick[i]) continue;
        if (m->nin > (int)TG_COUNTOF(tmp)) return false;
        for (int k = 0; k < m->nin; k++) {
            const tg_var *v = m->in[k];
            if (!map[v->id] && v->kind == TG_VAR_CONST) map[v->id] = const_copy(dst, v);
            if (!(tmp[k] = map[v->id])) return false;
        }
        tg_node *c = tg_ir_node_make_norm(dst, m->op, tmp, m->nin, m->attrs);
        if (!c || c->nout != m->nout) return false;
        for (int k = 0; k < m->nout; k++) map[m->out[k]->id] = c->out[k];
    }
    return true;
}

/* Whether node m of a step may be computed once outside the loop: a pure op without an
 * inner graph, whose inputs are all invariant, one of them not a literal (nodes of
 * literals alone are constant folding's). */
static bool hoistable(const tg_node *m, const bool *inv) {
    const tg_op_def *op = tg_op_table[m->op];
    if (op->effects || (op->nattrs > 0 && op->attrs[0].type == TG_AS_FUNC)) return false;
    bool any = false;
    for (int k = 0; k < m->nin; k++) {
        if (!inv[m->in[k]->id]) return false;
        any = any || m->in[k]->kind != TG_VAR_CONST;
    }
    return any;
}

typedef struct hoist {
    tg_node **order;
    int norder;
    bool *inv, *pick, *front;
    tg_var **map;
    int nvars;
} hoist;

static void hoist_free(tg_ctx *ctx, const tg_graph *body, hoist *h) {
    size_t nv = (size_t)h->nvars + 1, nn = (size_t)body->nodes.n + 1;
    if (h->order) tg_mem_free(body->ctx, h->order, sizeof *h->order * nn);
    if (h->inv) tg_mem_free(ctx, h->inv, nv);
    if (h->front) tg_mem_free(ctx, h->front, nv);
    if (h->pick) tg_mem_free(ctx, h->pick, nn);
    if (h->map) tg_mem_free(ctx, h->map, sizeof *h->map * nv);
}

static tg_var *rw_loop_hoist(tg_rw *rw, tg_node *n) {
    tg_graph *g = tg_rw_graph(rw);
    tg_loop l;
    tg_loop_get(tg_op_table[n->op], n->attrs, n->nin, &l);
    const tg_graph *body = l.body;
    int c0 = l.nstate + l.nseq, p0 = l.nparam - l.nconst; /* the constants' inputs, params */
    if (l.nconst == 0) return NULL;
    hoist h = {.nvars = body->vars.n};
    size_t nv = (size_t)h.nvars + 1;
    h.order = tg_ir_toposort(body, &h.norder);
    h.inv = tg_mem_calloc(g->ctx, nv);
    h.front = tg_mem_calloc(g->ctx, nv);
    h.pick = tg_mem_calloc(g->ctx, (size_t)body->nodes.n + 1);
    h.map = tg_mem_calloc(g->ctx, sizeof *h.map * nv);
    if (!h.order || !h.inv || !h.front || !h.pick || !h.map) {
        hoist_free(g->ctx, body, &h);
        tg_ir_fail(g, TG_ENOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < body->vars.n; i++)
        if (((const tg_var *)body->vars.items[i])->kind == TG_VAR_CONST) h.inv[i] = true;
    for (int k = 0; k < l.nconst; k++) h.inv[((const tg_var *)body->inputs.items[p0 + k])->id] = 1;
    for (int i = 0; i < h.norder; i++)
        if ((h.pick[i] = hoistable(h.order[i], h.inv)))
            for (int k = 0; k < h.order[i]->nout; k++) h.inv[h.order[i]->out[k]->id] = true;
    /* the frontier: hoisted values read by the rest of the step, or returned */
    tg_var *front[HOIST_MAX];
    int nf = 0;
    bool fits = true;
    for (int i = 0; i <= h.norder; i++) {
        if (i < h.norder && h.pick[i]) continue;
        int nin = i < h.norder ? h.order[i]->nin : body->nret;
        for (int k = 0; k < nin; k++) {
            tg_var *v = i < h.norder ? h.order[i]->in[k] : body->outputs.items[k];
            if (v->kind != TG_VAR_NODE || !h.inv[v->id] || h.front[v->id]) continue;
            if (nf == HOIST_MAX)
                fits = false;
            else
                front[nf++] = v;
            h.front[v->id] = true;
        }
    }
    if (nf == 0 || !fits || l.nparam + nf > 250 || n->nin + nf > 250) {
        hoist_free(g->ctx, body, &h);
        return NULL;
    }
    /* before the loop: the hoisted nodes on the node's constants */
    for (int k = 0; k < l.nconst; k++)
        h.map[((const tg_var *)body->inputs.items[p0 + k])->id] = n->in[c0 + k];
    bool ok = copy_nodes(g, h.order, h.norder, h.pick, h.map);
    tg_var *in[256];
    int nin = 0;
    for (int i = 0; i < c0 + l.nconst; i++) in[nin++] = n->in[i];
    for (int f = 0; ok && f < nf; f++) ok = (in[nin++] = h.map[front[f]->id]) != NULL;
    if (l.dyn) in[nin++] = n->in[n->nin - 1];
    /* the new step: the old parameters, then one per hoisted value */
    char name[256];
    snprintf(name, sizeof name, "%s_hoisted", body->name);
    tg_graph *b = ok ? tg_graph_new(g->ctx, name) : NULL;
    if (b) {
        b->file = body->file;
        b->def_line = body->def_line;
        b->def_col = body->def_col;
        memset(h.map, 0, sizeof *h.map * nv);
        for (int i = 0; i < body->inputs.n; i++) {
            const tg_var *p = body->inputs.items[i];
            h.map[p->id] =
                tg_input(b, p->name, (tg_dtype)p->type.dtype, p->type.ndim, p->type.shape);
        }
        for (int f = 0; f < nf; f++) {
            char pn[64];
            snprintf(pn, sizeof pn, "hoisted%d", f);
            const tg_type *t = &front[f]->type;
            h.map[front[f]->id] = tg_input(b, pn, (tg_dtype)t->dtype, t->ndim, t->shape);
        }
        for (int i = 0; i < h.norder; i++) h.pick[i] = !h.pick[i];
        ok = b->status == TG_OK && copy_nodes(b, h.order, h.norder, h.pick, h.map);
        tg_var *outs[TG_MAX_OUTS];
        for (int j = 0; ok && j < body->nret; j++) {
            const tg_var *v = body->outputs.items[j];
            if (!h.map[v->id] && v->kind == TG_VAR_CONST) h.map[v->id] = const_copy(b, v);
            ok = (outs[j] = h.map[v->id]) != NULL;
        }
        ok = ok && tg_graph_set_outputs(b, outs, body->nret) == TG_OK;
    }
    hoist_free(g->ctx, body, &h);
    if (!ok || !b) {
        if (b && b->status != TG_OK) tg_ir_fail(g, b->status, "loop_hoist: %s", b->error);
        tg_graph_free(b);
        return NULL;
    }
    tg_aval attrs[16];
    const tg_op_def *op = tg_op_table[n->op];
    memcpy(attrs, n->attrs, sizeof *attrs * (size_t)op->nattrs);
    attrs[0].fn = b;
    tg_node *m = tg_ir_node_make_norm(g, n->op, in, nin, attrs);
    tg_graph_free(b); /* the node holds it */
    for (int q = 0; m && q < n->nout; q++)
        if (!tg_rw_same_type(m->out[q], n->out[q]) ||
            tg_rw_replace(rw, n->out[q], m->out[q]) != TG_OK)
            return NULL;
    return NULL;
}

/* ---- loop_dead_outputs ---- */

/* A per-step output nobody reads is dropped from the step: the loop then stacks nothing
 * for it (a scan whose only use is its last state keeps its states' two buffers alone). */
static tg_var *rw_loop_dead_outputs(tg_rw *rw, tg_node *n) {
    tg_loop l;
    tg_loop_get(tg_op_table[n->op], n->attrs, n->nin, &l);
    const tg_graph *body = l.body;
    bool dead[TG_MAX_OUTS] = {0}, any = false;
    for (int m = 0; m < l.ny; m++) any |= dead[m] = tg_rw_use_count(rw, n->out[l.nstate + m]) == 0;
    if (!any || (l.map && l.ny == 1)) return NULL; /* a map of nothing is left to DCE */
    tg_graph *g = tg_rw_graph(rw);
    char name[256];
    snprintf(name, sizeof name, "%s_used", body->name);
    tg_graph *b = tg_graph_new(g->ctx, name);
    if (!b) return NULL;
    b->file = body->file;
    b->def_line = body->def_line;
    b->def_col = body->def_col;
    tg_var *args[256], *outs[TG_MAX_OUTS], *keep[TG_MAX_OUTS];
    bool ok = body->inputs.n <= (int)TG_COUNTOF(args);
    for (int i = 0; ok && i < body->inputs.n; i++) {
        const tg_var *p = body->inputs.items[i];
        args[i] = tg_input(b, p->name, (tg_dtype)p->type.dtype, p->type.ndim, p->type.shape);
    }
    ok = ok && tg_ir_copy_body(b, body, args, outs) == TG_OK;
    int nk = 0, ks[TG_MAX_OUTS];
    for (int j = 0; ok && j < body->nret; j++) {
        bool drop = j >= l.nstate && j < l.nstate + l.ny && dead[j - l.nstate];
        if (!drop) keep[nk++] = outs[j];
    }
    ok = ok && tg_graph_set_outputs(b, keep, nk) == TG_OK;
    tg_aval attrs[16];
    const tg_op_def *op = tg_op_table[n->op];
    memcpy(attrs, n->attrs, sizeof *attrs * (size_t)op->nattrs);
    attrs[0].fn = b;
    tg_node *m = ok ? tg_ir_node_make_norm(g, n->op, n->in, n->nin, attrs) : NULL;
    tg_graph_free(b); /* the node holds it */
    if (!m) return NULL;
    int q = 0;
    for (int j = 0; j < n->nout; j++) { /* the outputs kept, in order */
        bool drop = j >= l.nstate && j < l.nstate + l.ny && dead[j - l.nstate];
        ks[j] = drop ? -1 : q++;
    }
    for (int j = 0; j < n->nout; j++)
        if (ks[j] >= 0 && (!tg_rw_same_type(m->out[ks[j]], n->out[j]) ||
                           tg_rw_replace(rw, n->out[j], m->out[ks[j]]) != TG_OK))
            return NULL;
    return NULL;
}

/* ---- solve_factored ----
 * solve(A, B) where the program also computes cholesky(A): an SPD system solved twice
 * over, once by the factorization the program asks for and once by LU. The solve takes the
 * factor instead (solve_factored, src/ops/lapack.c), which it uses for each block whose A
 * is exactly symmetric: there cholesky's success, which the program's run requires, makes
 * it A's factor. A cholesky nobody reads is not taken (it would be dead code made live). */
static tg_var *rw_solve_factored(tg_rw *rw, tg_node *n) {
    tg_graph *g = tg_rw_graph(rw);
    tg_var *a = n->in[0];
    for (int i = 0; i < g->nodes.n; i++) {
        tg_node *m = g->nodes.items[i];
        if (m->op != TG_OP_CHOLESKY || m->in[0] != a || !tg_ir_same_device(m->device, n->device) ||
            m->out[0]->type.dtype != n->out[0]->type.dtype ||
            (tg_rw_use_count(rw, m->out[0]) == 0 && !tg_rw_is_output(rw, m->out[0])))
            continue;
        tg_attr lower = TG_A_BOOL("lower", m->attrs[0].i != 0);
        tg_var *x =
            tg_apply(g, "solve_factored", (tg_var *[]){a, m->out[0], n->in[1]}, 3, &lower, 1);
        if (!x || !tg_rw_same_type(x, n->out[0])) return NULL;
        return x;
    }
    return NULL;
}

/* ---- map_elemwise ---- */

static tg_var *rw_map_elemwise(tg_rw *rw, tg_node *n) {
    tg_loop l;
    tg_loop_get(tg_op_table[n->op], n->attrs, n->nin, &l);
    const tg_graph *body = l.body;
    if (l.nsteps_given || l.dyn || l.nseq == 0 || n->nout != body->nret) return NULL;
    for (int i = 0; i < body->nodes.n; i++) {
        const tg_op_def *op = tg_op_table[((const tg_node *)body->nodes.items[i])->op];
        if (op->kind != TG_KIND_ELEMWISE || op->effects) return NULL;
    }
    /* the rows all of one rank r and the constants of rank <= r: broadcasting the whole
       sequences then aligns exactly as the rows did, with the steps' axis in front */
    int r = n->in[0]->type.ndim - 1;
    for (int i = 0; i < l.nseq; i++)
        if (n->in[i]->type.ndim - 1 != r) return NULL;
    for (int k = 0; k < l.nconst; k++)
        if (n->in[l.nseq + k]->type.ndim > r) return NULL;
    tg_graph *g = tg_rw_graph(rw);
    tg_var *outs[TG_MAX_OUTS];
    if (tg_ir_copy_body(g, body, n->in, outs) != TG_OK) return NULL;
    for (int q = 0; q < n->nout; q++) /* an output of the constants alone has no steps' axis */
        if (!tg_rw_same_type(outs[q], n->out[q])) return NULL;
    for (int q = 0; q < n->nout; q++)
        if (tg_rw_replace(rw, n->out[q], outs[q]) != TG_OK) return NULL;
    return NULL;
}

static const tg_rule specialize_rules[] = {
    {"scan_to_map", TG_OP_SCAN, rw_scan_to_map},
    {"scan_merge_saved", TG_OP_SCAN, rw_scan_merge_saved},
    {"loop_hoist", TG_OP_SCAN, rw_loop_hoist},
    {"loop_hoist", TG_OP_MAP, rw_loop_hoist},
    {"loop_dead_outputs", TG_OP_SCAN, rw_loop_dead_outputs},
    {"loop_dead_outputs", TG_OP_MAP, rw_loop_dead_outputs},
    {"map_elemwise", TG_OP_MAP, rw_map_elemwise},
    {"solve_factored", TG_OP_SOLVE, rw_solve_factored},
};

tg_status tg_specialize(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    (void)opts;
    return tg_rw_apply(g, "specialize", specialize_rules, TG_COUNTOF(specialize_rules), report);
}
