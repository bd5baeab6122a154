/* inline.c - the inline phase, first in the pipeline: every call is replaced by its
 * callee's body, so that every later rewrite sees through calls (merge, folding and
 * fusion across the call boundary; gradients' backward functions merge with the forward
 * body they recompute).
 *
 * Invariants:
 *  - One linear sweep: the live calls are visited in topological order, and calls that
 *    a copied body brings in are appended to the same list, so calls nested any depth
 *    are inlined in the one pass. Replacements are recorded in a map (var id -> value)
 *    and applied to every node input and graph output once at the end, following
 *    chains (an argument that was itself a call's output); no per-call scan of the graph.
 *  - A copied body is typed again on the call's arguments, exactly as the call's own
 *    inference types it (ops/call.c), so the values have the call's output types; a call
 *    whose copy would not (a defect to report, not to hide) is kept as a call, which the
 *    backends run as a sub-graph.
 *  - Devices: a copied node keeps its own annotation; one without takes the call's
 *    (`y = f(x, device="cpu:1")` puts f's body on cpu:1 but where f says otherwise).
 *  - opts->no_inline (--no-inline) keeps every call.
 */
#include "rewrite.h"

typedef struct inl {
    tg_graph *g;
    tg_var **map; /* by var id: the value replacing it, NULL when kept */
    int cap;
} inl;

static bool map_room(inl *s) {
    int need = s->g->vars.n + 1;
    if (need <= s->cap) return true;
    int ncap = s->cap;
    while (ncap < need) ncap = ncap ? ncap * 2 : 256;
    tg_var **m =
        tg_mem_realloc(s->g->ctx, s->map, sizeof *m * (size_t)s->cap, sizeof *m * (size_t)ncap);
    if (!m) return false;
    memset(m + s->cap, 0, sizeof *m * (size_t)(ncap - s->cap));
    s->map = m;
    s->cap = ncap;
    return true;
}

static tg_var *resolve(const inl *s, tg_var *v) {
    while (v->id < s->cap && s->map[v->id]) v = s->map[v->id];
    return v;
}

static tg_status collect(tg_graph *g, tg_vec *calls) {
    int n = 0;
    tg_node **order = tg_ir_toposort(g, &n);
    if (!order) return tg_rw_error_status();
    bool ok = true;
    for (int i = 0; ok && i < n; i++)
        if (order[i]->op == TG_OP_CALL) ok = tg_vec_push(g->ctx, calls, order[i]);
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return ok ? TG_OK : tg_set_error(TG_ENOMEM, "inline: out of memory");
}

/* Inlines call node n; the calls its body brings are pushed to calls. */
static tg_status inline_call(inl *s, tg_node *n, tg_vec *calls) {
    tg_graph *g = s->g;
    tg_graph *fn = n->attrs[0].fn;
    tg_var *args[TG_MAX_OUTS + 1] = {0}, *outs[TG_MAX_OUTS];
    tg_var **av = n->nin <= TG_MAX_OUTS ? args : tg_mem_alloc(g->ctx, sizeof *av * (size_t)n->nin);
    if (!av) return tg_set_error(TG_ENOMEM, "inline: out of memory");
    for (int k = 0; k < n->nin; k++) av[k] = resolve(s, n->in[k]);
    int first = g->nodes.n;
    const char *device = g->device;
    g->device = n->device; /* the body's nodes without an annotation take the call's */
    tg_status st = tg_ir_copy_body(g, fn, av, outs);
    g->device = device;
    if (av != args) tg_mem_free(g->ctx, av, sizeof *av * (size_t)n->nin);
    if (st != TG_OK) return tg_set_error(st, "inline: %s", g->error);
    bool same = true;
    for (int k = 0; k < n->nout && same; k++) same = tg_rw_same_type(outs[k], n->out[k]);
    if (!same) return TG_OK; /* kept as a call (see the invariants) */
    if (!map_room(s)) return tg_set_error(TG_ENOMEM, "inline: out of memory");
    for (int k = 0; k < n->nout; k++) {
        if (outs[k] == n->out[k]) continue;
        s->map[n->out[k]->id] = outs[k];
        /* a value the body made takes the caller's name for it (`a = sq(x)` prints `a`) */
        if (n->out[k]->name && outs[k]->kind == TG_VAR_NODE && outs[k]->node->id >= first)
            outs[k]->name = n->out[k]->name;
    }
    for (int i = first; i < g->nodes.n; i++) {
        tg_node *m = g->nodes.items[i];
        if (m->op == TG_OP_CALL && !tg_vec_push(g->ctx, calls, m))
            return tg_set_error(TG_ENOMEM, "inline: out of memory");
    }
    return TG_OK;
}

tg_status tg_inline(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    (void)report;
    if (opts && opts->no_inline) return TG_OK;
    tg_vec calls = {0};
    inl s = {.g = g};
    tg_status st = collect(g, &calls);
    for (int i = 0; st == TG_OK && i < calls.n; i++) st = inline_call(&s, calls.items[i], &calls);
    if (st == TG_OK && s.cap > 0) { /* one sweep applies every replacement */
        for (int i = 0; i < g->nodes.n; i++) {
            tg_node *n = g->nodes.items[i];
            for (int k = 0; k < n->nin; k++) n->in[k] = resolve(&s, n->in[k]);
        }
        for (int i = 0; i < g->outputs.n; i++)
            g->outputs.items[i] = resolve(&s, g->outputs.items[i]);
    }
    tg_vec_fini(g->ctx, &calls);
    tg_mem_free(g->ctx, s.map, sizeof *s.map * (size_t)s.cap);
    return st;
}
