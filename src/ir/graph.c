/* graph.c - the graph IR: graphs, variables, nodes, node construction (attribute
 * normalization, NEP 50 promotion, type inference), state and updates, toposort,
 * replace, clone, verify.
 *
 * Invariants: see ir.h. Node construction is the single place where an op's record is
 * consulted to build IR; all algorithms over graphs here are iterative.
 */
#include "op.h"

#include <stdio.h>

/* ---- small vectors ---- */

bool tg_vec_push(tg_ctx *ctx, tg_vec *v, void *item) {
    if (v->n == v->cap) {
        int ncap = v->cap ? v->cap * 2 : 16;
        void **p =
            tg_mem_realloc(ctx, v->items, (size_t)v->cap * sizeof *p, (size_t)ncap * sizeof *p);
        if (!p) return false;
        v->items = p;
        v->cap = ncap;
    }
    v->items[v->n++] = item;
    return true;
}

void tg_vec_fini(tg_ctx *ctx, tg_vec *v) {
    tg_mem_free(ctx, v->items, (size_t)v->cap * sizeof *v->items);
    v->items = NULL;
    v->n = v->cap = 0;
}

/* ---- errors ---- */

tg_status tg_ir_failv(tg_graph *g, tg_status st, const char *fmt, va_list ap) {
    char msg[TG_ERRMSG_MAX];
    int off = 0;
    if (g->line > 0)
        off =
            snprintf(msg, sizeof msg, "%s:%d:%d: ", g->file ? g->file : "<input>", g->line, g->col);
    vsnprintf(msg + off, sizeof msg - (size_t)off, fmt, ap);
    if (g->status == TG_OK) {
        g->status = st;
        char *kept = tg_arena_strdup(&g->arena, msg);
        g->error = kept ? kept : "out of memory while reporting an error";
    }
    tg_set_error(g->status, "%s", g->error);
    return g->status;
}

void *tg_ir_fail(tg_graph *g, tg_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tg_ir_failv(g, st, fmt, ap);
    va_end(ap);
    return NULL;
}

/* Keeps the allocator's reason when it is the memory cap (docs/hardening.md). */
static void *fail_oom(tg_graph *g) {
    const char *m = tg_last_error();
    char why[TG_ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", m && strstr(m, "memory limit") ? m : "out of memory");
    return tg_ir_fail(g, TG_ENOMEM, "%s", why);
}

/* ---- graphs ---- */

tg_graph *tg_graph_new(tg_ctx *ctx, const char *name) {
    if (!ctx) ctx = tg_ctx_default();
    tg_graph *g = tg_mem_calloc(ctx, sizeof *g);
    if (!g) return NULL;
    g->ctx = ctx;
    g->refs = 1;
    tg_arena_init(&g->arena, ctx);
    g->error = "";
    g->name = tg_arena_strdup(&g->arena, name ? name : "main");
    if (!g->name) {
        tg_graph_free(g);
        return NULL;
    }
    return g;
}

void tg_graph_retain(tg_graph *g) { g->refs++; }

/* Frees g's memory; pushes each callee whose last reference g held onto *drop (through
 * drop_next, so that freeing never allocates). */
static void graph_destroy(tg_graph *g, tg_graph **drop) {
    tg_ctx *ctx = g->ctx;
    for (int i = 0; i < g->callees.n; i++) {
        tg_graph *c = g->callees.items[i];
        if (--c->refs > 0) continue;
        c->drop_next = *drop;
        *drop = c;
    }
    for (int i = 0; i < g->vars.n; i++) {
        tg_var *v = g->vars.items[i];
        if (v->kind == TG_VAR_CONST) tg_tensor_free(v->value);
    }
    for (int i = 0; i < g->data.n; i++) tg_opdata_release(g->data.items[i]);
    tg_vec_fini(ctx, &g->nodes);
    tg_vec_fini(ctx, &g->vars);
    tg_vec_fini(ctx, &g->inputs);
    tg_vec_fini(ctx, &g->outputs);
    tg_vec_fini(ctx, &g->out_names);
    tg_vec_fini(ctx, &g->updates);
    tg_vec_fini(ctx, &g->callees);
    tg_vec_fini(ctx, &g->data);
    tg_vec_fini(ctx, &g->devnames);
    tg_arena_fini(&g->arena);
    tg_mem_free(ctx, g, sizeof *g);
}

/* Iterative: a chain of callees is released with a worklist, not by recursion. */
void tg_graph_free(tg_graph *g) {
    if (!g || --g->refs > 0) return;
    tg_graph *drop = NULL;
    graph_destroy(g, &drop);
    while (drop) {
        tg_graph *c = drop;
        drop = c->drop_next;
        graph_destroy(c, &drop);
    }
}

/* The graphs reachable from `from` through calls, each with the depth of the calls below
 * it, found by an iterative depth-first walk. When `target` is among them, *path (room
 * for TG_CALL_MAX_DEPTH + 2) receives the chain from `from` to the graph that calls
 * target, and *npath its length; the walk stops there. Returns the depth of `from`, or
 * -1 for out of memory. Walks deeper than TG_CALL_MAX_DEPTH stop and report that depth. */
typedef struct call_walk {
    const tg_graph **seen; /* visited graphs (room for cap) */
    int *depth;            /* their depths, -1 while on the stack (room for dcap: the two
                              grow one after the other, and either may be refused) */
    int n, cap, dcap;
} call_walk;

static int walk_find(const call_walk *w, const tg_graph *g) {
    for (int i = 0; i < w->n; i++)
        if (w->seen[i] == g) return i;
    return -1;
}

static bool walk_add(tg_ctx *ctx, call_walk *w, const tg_graph *g) {
    if (w->n == w->cap) {
        int ncap = w->cap ? w->cap * 2 : 16;
        const tg_graph **s =
            tg_mem_realloc(ctx, w->seen, sizeof *s * (size_t)w->cap, sizeof *s * (size_t)ncap);
        if (!s) return false;
        w->seen = s;
        w->cap = ncap;
    }
    if (w->n == w->dcap) {
        int *d =
            tg_mem_realloc(ctx, w->depth, sizeof *d * (size_t)w->dcap, sizeof *d * (size_t)w->cap);
        if (!d) return false;
        w->depth = d;
        w->dcap = w->cap;
    }
    w->seen[w->n] = g;
    w->depth[w->n++] = -1;
    return true;
}

static int call_walk_run(tg_ctx *ctx, const tg_graph *from, const tg_graph *target,
                         const tg_graph **path, int *npath) {
    struct frame {
        const tg_graph *g;
        int next, best;
    } stack[TG_CALL_MAX_DEPTH + 2];
    call_walk w = {0};
    int sp = 0, result = 0;
    *npath = 0;
    if (!walk_add(ctx, &w, from)) goto oom;
    stack[sp++] = (struct frame){from, 0, 0};
    while (sp > 0) {
        struct frame *f = &stack[sp - 1];
        if (f->next < f->g->callees.n) {
            const tg_graph *c = f->g->callees.items[f->next++];
            if (c == target) {
                for (int i = 0; i < sp; i++) path[i] = stack[i].g;
                *npath = sp;
                result = sp;
                break;
            }
            int k = walk_find(&w, c);
            if (k >= 0) { /* done before (a DAG: never on the stack) */
                if (w.depth[k] + 1 > f->best) f->best = w.depth[k] + 1;
                continue;
            }
            if (sp == TG_CALL_MAX_DEPTH + 1) { /* already too deep: stop here */
                result = sp;
                break;
            }
            if (!walk_add(ctx, &w, c)) goto oom;
            stack[sp++] = (struct frame){c, 0, 0};
        } else {
            w.depth[walk_find(&w, f->g)] = f->best;
            int d = f->best;
            sp--;
            if (sp > 0 && d + 1 > stack[sp - 1].best) stack[sp - 1].best = d + 1;
            if (sp == 0) result = d;
        }
    }
    tg_mem_free(ctx, w.seen, sizeof *w.seen * (size_t)w.cap);
    tg_mem_free(ctx, w.depth, sizeof *w.depth * (size_t)w.dcap);
    return result;
oom:
    tg_mem_free(ctx, w.seen, sizeof *w.seen * (size_t)w.cap);
    tg_mem_free(ctx, w.depth, sizeof *w.depth * (size_t)w.dcap);
    return -1;
}

int tg_graph_call_depth(const tg_graph *g) {
    const tg_graph *path[TG_CALL_MAX_DEPTH + 2];
    int np;
    return call_walk_run(g->ctx, g, NULL, path, &np);
}

/* Checks that g may hold a reference on callee fn: same context, outputs set, no cycle,
 * not too deep; records fn among g's callees (one reference per graph, not per node).
 * Returns false with g's error set. */
static bool callee_add(tg_graph *g, tg_graph *fn, const char *opname) {
    for (int i = 0; i < g->callees.n; i++)
        if (g->callees.items[i] == fn) return true;
    if (fn->ctx != g->ctx)
        return tg_ir_fail(g, TG_EINVAL, "%s: function '%s' belongs to another context", opname,
                          fn->name) != NULL;
    if (fn->status != TG_OK)
        return tg_ir_fail(g, TG_EINVAL, "%s: function '%s' has an error: %s", opname, fn->name,
                          fn->error) != NULL;
    const tg_graph *path[TG_CALL_MAX_DEPTH + 2];
    int np = 0;
    int depth = fn == g ? 0 : call_walk_run(g->ctx, fn, g, path, &np);
    if (depth < 0) return fail_oom(g) != NULL;
    if (fn == g || np > 0) { /* g -> fn -> ... -> g */
        char chain[TG_ERRMSG_MAX];
        int off = snprintf(chain, sizeof chain, "%s", g->name);
        for (int i = 0; i < np && off < (int)sizeof chain; i++)
            off += snprintf(chain + off, sizeof chain - (size_t)off, " -> %s", path[i]->name);
        if (off < (int)sizeof chain)
            snprintf(chain + off, sizeof chain - (size_t)off, " -> %s", g->name);
        return tg_ir_fail(g, TG_EINVAL, "call cycle: %s", chain) != NULL;
    }
    if (depth + 1 > TG_CALL_MAX_DEPTH)
        return tg_ir_fail(g, TG_ELIMIT, "%s: calls nest deeper than %d (through '%s')", opname,
                          TG_CALL_MAX_DEPTH, fn->name) != NULL;
    if (!tg_vec_push(g->ctx, &g->callees, fn)) return fail_oom(g) != NULL;
    tg_graph_retain(fn);
    return true;
}

/* The accessors below take NULL handles: they set tg_last_error naming themselves and
 * return NULL, -1, TG_DT_COUNT or TG_EINVAL (include/tgraph.h). */
static bool null_arg(const void *p, const char *fn, const char *what) {
    if (!p) tg_set_error(TG_EINVAL, "%s: %s is NULL", fn, what);
    return !p;
}

const char *tg_graph_name(const tg_graph *g) {
    return null_arg(g, "tg_graph_name", "graph") ? NULL : g->name;
}
tg_status tg_graph_status(const tg_graph *g) {
    return null_arg(g, "tg_graph_status", "graph") ? TG_EINVAL : g->status;
}
const char *tg_graph_error(const tg_graph *g) {
    return null_arg(g, "tg_graph_error", "graph") ? tg_last_error() : g->error;
}
int tg_graph_input_count(const tg_graph *g) {
    return null_arg(g, "tg_graph_input_count", "graph") ? -1 : g->inputs.n;
}
int tg_graph_output_count(const tg_graph *g) {
    return null_arg(g, "tg_graph_output_count", "graph") ? -1 : g->nret;
}
int tg_graph_node_count(const tg_graph *g) {
    return null_arg(g, "tg_graph_node_count", "graph") ? -1 : g->nodes.n;
}

static bool bad_index(const tg_graph *g, int i, int n, const char *fn) {
    if (null_arg(g, fn, "graph")) return true;
    if (i >= 0 && i < n) return false;
    tg_set_error(TG_EINDEX, "%s: index %d is outside 0..%d of graph '%s'", fn, i, n - 1, g->name);
    return true;
}
tg_var *tg_graph_input(const tg_graph *g, int i) {
    return bad_index(g, i, g ? g->inputs.n : 0, "tg_graph_input") ? NULL : g->inputs.items[i];
}
tg_var *tg_graph_output(const tg_graph *g, int i) {
    return bad_index(g, i, g ? g->nret : 0, "tg_graph_output") ? NULL : g->outputs.items[i];
}
const char *tg_graph_output_name(const tg_graph *g, int i) {
    if (bad_index(g, i, g ? g->nret : 0, "tg_graph_output_name")) return NULL;
    return i < g->out_names.n ? g->out_names.items[i] : NULL;
}

const char *tg_var_name(const tg_var *v) {
    return null_arg(v, "tg_var_name", "variable") ? NULL : v->name;
}
tg_dtype tg_var_dtype(const tg_var *v) {
    return null_arg(v, "tg_var_dtype", "variable") ? TG_DT_COUNT : (tg_dtype)v->type.dtype;
}
int tg_var_ndim(const tg_var *v) {
    return null_arg(v, "tg_var_ndim", "variable") ? -1 : v->type.ndim;
}
int64_t tg_var_dim(const tg_var *v, int axis) {
    if (null_arg(v, "tg_var_dim", "variable")) return -1;
    return axis >= 0 && axis < v->type.ndim ? v->type.shape[axis] : -1;
}

/* A variable belongs to g when it sits at its id in g->vars. */
static bool owns_var(const tg_graph *g, const tg_var *v) {
    return v && v->id >= 0 && v->id < g->vars.n && g->vars.items[v->id] == v;
}

static tg_var *var_new(tg_graph *g, tg_var_kind kind, const tg_type *t) {
    tg_var *v = tg_arena_alloc(&g->arena, sizeof *v);
    if (!v || !tg_vec_push(g->ctx, &g->vars, v)) return fail_oom(g);
    v->type = *t;
    v->kind = kind;
    v->id = g->vars.n - 1;
    v->graph = g;
    return v;
}

/* Whether g is called by a node of another graph (its FUNC attribute holds a reference):
 * then its signature (inputs, returned values, state) is fixed, as callers were typed on
 * it. The refusal sets the error and leaves g as it was, still valid. */
static bool signature_fixed(const tg_graph *g, const char *what) {
    if (g->refs <= 1) return false;
    tg_set_error(TG_EINVAL,
                 "%s: function '%s' is called by other functions, which were typed on its "
                 "signature: it can no longer change",
                 what, g->name);
    return true;
}

tg_status tg_graph_set_outputs(tg_graph *g, tg_var *const *outs, int n) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_graph_set_outputs: graph is NULL");
    if (g->status != TG_OK) return g->status;
    if (signature_fixed(g, "tg_graph_set_outputs")) return TG_EINVAL;
    if (n < 0 || (n > 0 && !outs))
        return tg_ir_fail(g, TG_EINVAL, "tg_graph_set_outputs: %s",
                          n < 0 ? "negative count" : "outputs is NULL"),
               g->status;
    for (int i = 0; i < n; i++)
        if (!owns_var(g, outs[i]))
            return tg_ir_fail(g, TG_EINVAL, "output %d is not a variable of graph '%s'", i,
                              g->name),
                   g->status;
    /* the returned values, then the update values kept from before; each returned value
       goes by its variable's name until tg_graph_set_output_name says otherwise */
    tg_vec nv = {0}, names = {0};
    bool ok = true;
    for (int i = 0; ok && i < n; i++)
        ok =
            tg_vec_push(g->ctx, &nv, outs[i]) && tg_vec_push(g->ctx, &names, (void *)outs[i]->name);
    for (int i = g->nret; ok && i < g->outputs.n; i++)
        ok = tg_vec_push(g->ctx, &nv, g->outputs.items[i]);
    if (!ok) {
        tg_vec_fini(g->ctx, &nv);
        tg_vec_fini(g->ctx, &names);
        return fail_oom(g), g->status;
    }
    tg_vec_fini(g->ctx, &g->outputs);
    tg_vec_fini(g->ctx, &g->out_names);
    g->outputs = nv;
    g->out_names = names;
    g->nret = n;
    return TG_OK;
}

const char *tg_ir_device_intern(tg_graph *g, const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < g->devnames.n; i++)
        if (strcmp(g->devnames.items[i], name) == 0) return g->devnames.items[i];
    char *c = tg_arena_strdup(&g->arena, name);
    if (!c || !tg_vec_push(g->ctx, &g->devnames, c)) return fail_oom(g);
    return c;
}

/* Whether p is one of g's interned device names (or NULL). */
static bool device_owned(const tg_graph *g, const char *p) {
    for (int i = 0; p && i < g->devnames.n; i++)
        if (g->devnames.items[i] == p) return true;
    return !p;
}

bool tg_ir_device_valid(const char *name) {
    if (!name || (strncmp(name, "cpu", 3) != 0 && strncmp(name, "sim", 3) != 0)) return false;
    const char *d = name + 3;
    if (*d == '\0') return true;
    if (*d++ != ':' || *d < '0' || *d > '9' || (d[0] == '0' && d[1] != '\0')) return false;
    size_t n = strspn(d, "0123456789");
    return n <= 9 && d[n] == '\0';
}

/* The interned copy of `device` for g, or NULL for NULL; false (error set, g unchanged
 * unless memory ran out) for a malformed name. */
static bool device_arg(tg_graph *g, const char *fn, const char *device, const char **out) {
    *out = NULL;
    if (!device) return true;
    if (!tg_ir_device_valid(device)) {
        tg_set_error(TG_EINVAL, "%s: malformed device name \"%s\": expected %s", fn, device,
                     TG_DEVICE_FORMS);
        return false;
    }
    *out = tg_ir_device_intern(g, device);
    return *out != NULL;
}

tg_status tg_var_set_device(tg_var *v, const char *device) {
    if (!v) return tg_set_error(TG_EINVAL, "tg_var_set_device: variable is NULL");
    tg_graph *g = v->graph;
    if (g->status != TG_OK) return g->status;
    if (v->kind == TG_VAR_CONST)
        return tg_set_error(TG_EINVAL,
                            "tg_var_set_device: %s%s%s is a constant, which has no device "
                            "(annotate the nodes that read it)",
                            v->name ? "'" : "", v->name ? v->name : "the variable",
                            v->name ? "'" : "");
    const char *d;
    if (!device_arg(g, "tg_var_set_device", device, &d))
        return g->status != TG_OK ? g->status : TG_EINVAL;
    if (v->kind == TG_VAR_NODE)
        v->node->device = d;
    else
        v->device = d;
    return TG_OK;
}

const char *tg_var_device(const tg_var *v) {
    return null_arg(v, "tg_var_device", "variable") ? NULL : tg_ir_var_device(v);
}

tg_status tg_graph_set_device(tg_graph *g, const char *device) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_graph_set_device: graph is NULL");
    if (g->status != TG_OK) return g->status;
    const char *d;
    if (!device_arg(g, "tg_graph_set_device", device, &d))
        return g->status != TG_OK ? g->status : TG_EINVAL;
    g->device = d;
    return TG_OK;
}

tg_status tg_graph_set_mapped(tg_graph *g, const char *axis_name, const bool *mapped, int n) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_graph_set_mapped: graph is NULL");
    if (g->status != TG_OK) return g->status;
    if (!axis_name) {
        g->spmd_axis = NULL;
        g->spmd_mapped = NULL;
        g->spmd_n = 0;
        return TG_OK;
    }
    if (!*axis_name || n < 0 || (n > 0 && !mapped))
        return tg_ir_fail(g, TG_EINVAL, "tg_graph_set_mapped: %s",
                          !*axis_name ? "the axis name is empty"
                          : n < 0     ? "negative count"
                                      : "mapped is NULL"),
               g->status;
    const char *axis = tg_arena_strdup(&g->arena, axis_name);
    uint8_t *m = tg_arena_alloc(&g->arena, (size_t)n + 1);
    if (!axis || !m) return fail_oom(g), g->status;
    for (int i = 0; i < n; i++) m[i] = mapped[i] ? 1 : 0;
    g->spmd_axis = axis;
    g->spmd_mapped = m;
    g->spmd_n = n;
    return TG_OK;
}

const char *tg_graph_device(const tg_graph *g) {
    return null_arg(g, "tg_graph_device", "graph") ? NULL : g->device;
}

tg_status tg_ir_output_name_set(tg_graph *g, int i, const char *name, size_t len) {
    if (g->status != TG_OK) return g->status;
    if (i < 0 || i >= g->nret || i >= g->out_names.n)
        return tg_ir_fail(g, TG_EINDEX,
                          "tg_graph_set_output_name: index %d is outside 0..%d of graph '%s'", i,
                          g->nret - 1, g->name),
               g->status;
    char *s = NULL;
    if (name) {
        if (!(s = tg_arena_alloc(&g->arena, len + 1))) return fail_oom(g), g->status;
        memcpy(s, name, len);
        s[len] = '\0';
    }
    g->out_names.items[i] = s;
    return TG_OK;
}

tg_status tg_graph_set_output_name(tg_graph *g, int i, const char *name) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_graph_set_output_name: graph is NULL");
    return tg_ir_output_name_set(g, i, name, name ? strlen(name) : 0);
}

/* ---- leaves: inputs, constants, literals ---- */

static tg_var *input_new(tg_graph *g, const char *name, tg_dtype dt, int ndim, const int64_t *shape,
                         bool state) {
    const char *fn = state ? "tg_state" : "tg_input";
    if (!g) return tg_set_error(TG_EINVAL, "%s: graph is NULL", fn), NULL;
    if (g->status != TG_OK) return NULL;
    if (!name || !*name) return tg_ir_fail(g, TG_EINVAL, "%s: input needs a name", fn);
    if (signature_fixed(g, fn)) return NULL;
    if ((unsigned)dt >= TG_DT_COUNT)
        return tg_ir_fail(g, TG_EINVAL, "%s: input '%s': invalid dtype %d", fn, name, (int)dt);
    if (ndim < 0 || ndim > TG_MAX_DIMS)
        return tg_ir_fail(g, ndim < 0 ? TG_EINVAL : TG_ELIMIT,
                          "%s: input '%s': rank %d is outside 0..%d", fn, name, ndim, TG_MAX_DIMS);
    if (ndim > 0 && !shape)
        return tg_ir_fail(g, TG_EINVAL, "%s: input '%s': shape is NULL for rank %d", fn, name,
                          ndim);
    for (int i = 0; i < g->inputs.n; i++)
        if (strcmp(((tg_var *)g->inputs.items[i])->name, name) == 0)
            return tg_ir_fail(g, TG_EINVAL, "input '%s' is declared twice", name);
    tg_type t = {.dtype = (uint8_t)dt, .ndim = (uint8_t)ndim};
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < TG_DIM_UNKNOWN)
            return tg_ir_fail(g, TG_EINVAL, "input '%s': invalid extent %lld", name,
                              (long long)shape[i]);
        t.shape[i] = shape[i];
    }
    tg_var *v = var_new(g, TG_VAR_INPUT, &t);
    if (!v) return NULL;
    v->name = tg_arena_strdup(&g->arena, name);
    if (!v->name || !tg_vec_push(g->ctx, &g->inputs, v)) return fail_oom(g);
    v->state = state;
    return v;
}

tg_var *tg_input(tg_graph *g, const char *name, tg_dtype dt, int ndim, const int64_t *shape) {
    return input_new(g, name, dt, ndim, shape, false);
}

/* ---- state and updates (docs/state.md) ---- */

tg_var *tg_state(tg_graph *g, const char *name, tg_dtype dt, int ndim, const int64_t *shape) {
    return input_new(g, name, dt, ndim, shape, true);
}

bool tg_var_is_state(const tg_var *v) { return v && v->kind == TG_VAR_INPUT && v->state; }

/* A value of type v may become the state of type s: same dtype and rank, and no two
 * static extents differ (the run-time shape must equal the state's). */
static bool update_fits(const tg_type *s, const tg_type *v) {
    if (s->dtype != v->dtype || s->ndim != v->ndim) return false;
    for (int d = 0; d < s->ndim; d++)
        if (s->shape[d] >= 0 && v->shape[d] >= 0 && s->shape[d] != v->shape[d]) return false;
    return true;
}

tg_status tg_update(tg_graph *g, tg_var *state, tg_var *value) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_update: graph is NULL");
    if (g->status != TG_OK) return g->status;
    if (!state || !value)
        return tg_ir_fail(g, TG_EINVAL, "tg_update: state or value is NULL"), g->status;
    if (!owns_var(g, state) || !owns_var(g, value))
        return tg_ir_fail(g, TG_EINVAL, "tg_update: variable of another graph"), g->status;
    if (signature_fixed(g, "tg_update")) return TG_EINVAL;
    const char *nm = state->name ? state->name : "?";
    if (!tg_var_is_state(state))
        return tg_ir_fail(g, TG_EINVAL,
                          "'%s' is not a state: only parameters declared `mut` can be updated",
                          state->kind == TG_VAR_INPUT ? nm : "a computed value"),
               g->status;
    for (int j = 0; j < g->updates.n; j++)
        if (g->updates.items[j] == state)
            return tg_ir_fail(g, TG_EINVAL, "state '%s' is updated twice", nm), g->status;
    /* a weak literal takes the state's dtype, as it would in an operation */
    if (value->type.weak && value->type.dtype != state->type.dtype &&
        value->type.ndim == state->type.ndim) {
        value = tg_cast(g, value, (tg_dtype)state->type.dtype);
        if (!value) return g->status;
    }
    if (!update_fits(&state->type, &value->type)) {
        char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
        return tg_ir_fail(g, state->type.dtype != value->type.dtype ? TG_ETYPE : TG_ESHAPE,
                          "update of '%s': the new value is %s, the state is %s", nm,
                          tg_type_str(&value->type, b, sizeof b),
                          tg_type_str(&state->type, a, sizeof a)),
               g->status;
    }
    if (!tg_vec_push(g->ctx, &g->updates, state)) return fail_oom(g), g->status;
    if (!tg_vec_push(g->ctx, &g->outputs, value)) {
        g->updates.n--;
        return fail_oom(g), g->status;
    }
    state->upd_line = g->line;
    state->upd_col = g->col;
    return TG_OK;
}

tg_var *tg_ir_const(tg_graph *g, tg_tensor *value, char lit) {
    if (!value) return fail_oom(g);
    tg_type t = {.dtype = (uint8_t)value->dtype, .ndim = (uint8_t)value->ndim, .weak = lit != 0};
    memcpy(t.shape, value->shape, sizeof t.shape[0] * (size_t)value->ndim);
    tg_var *v = var_new(g, TG_VAR_CONST, &t);
    if (!v) {
        tg_tensor_free(value);
        return NULL;
    }
    v->value = value;
    v->lit = lit;
    return v;
}

tg_var *tg_constant(tg_graph *g, const tg_tensor *value) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_constant: graph is NULL"), NULL;
    if (g->status != TG_OK) return NULL;
    if (!value) return tg_ir_fail(g, TG_EINVAL, "tg_constant: value is NULL");
    tg_tensor *copy = tg_tensor_dup(value);
    return copy ? tg_ir_const(g, copy, 0) : fail_oom(g);
}

static tg_var *literal(tg_graph *g, tg_dtype dt, const void *data, char lit) {
    static const char *const fn[] = {"tg_literal_bool", "tg_literal_int", "tg_literal_float"};
    if (!g)
        return tg_set_error(TG_EINVAL, "%s: graph is NULL", fn[(lit == 'i') + 2 * (lit == 'f')]),
               NULL;
    if (g->status != TG_OK) return NULL;
    return tg_ir_const(g, tg_tensor_from_data(g->ctx, dt, 0, NULL, data), lit);
}

tg_var *tg_literal_int(tg_graph *g, int64_t v) { return literal(g, TG_DT_I64, &v, 'i'); }
tg_var *tg_literal_float(tg_graph *g, double v) { return literal(g, TG_DT_F64, &v, 'f'); }
tg_var *tg_literal_bool(tg_graph *g, bool v) { return literal(g, TG_DT_BOOL, &v, 'b'); }

/* ---- attributes ---- */

static const char *attr_kind_name(tg_attr_kind k) {
    static const char *const names[] = {
        "none",     "an int",         "a float",          "a bool",
        "a string", "a list of ints", "a list of floats", "a function"};
    return (unsigned)k < TG_COUNTOF(names) ? names[k] : "an unknown kind";
}

static const char *attr_type_want(tg_attr_type t) {
    static const char *const names[] = {[TG_AS_INT] = "an int",
                                        [TG_AS_FLOAT] = "a number",
                                        [TG_AS_BOOL] = "true or false",
                                        [TG_AS_STR] = "a string",
                                        [TG_AS_INTS] = "an int or a list of ints",
                                        [TG_AS_AXES] = "an int, a list of ints or none",
                                        [TG_AS_DTYPE] = "a dtype string",
                                        [TG_AS_SCALAR] = "a number",
                                        [TG_AS_FUNC] = "a function (@name)",
                                        [TG_AS_PAIRS] = "a list of pairs [[a, b], ...] (in C, "
                                                        "a list of ints of even length)",
                                        [TG_AS_FLOATS] = "a number or a list of numbers",
                                        [TG_AS_DATA] = "data the library makes"};
    return names[t];
}

/* The `none` entries of an int list: kept (as a mask, their values zeroed) where the spec
 * takes them (TG_NULL_ITEMS), refused elsewhere. No mask is stored when no entry is none. */
static bool ints_none(tg_graph *g, const tg_attr_spec *s, const tg_attr *a, tg_aval *v, bool *oom) {
    int k = 0;
    while (a->none && k < a->n && !a->none[k]) k++;
    if (!a->none || k == a->n) return true;
    if (!(s->nullable & TG_NULL_ITEMS)) return false;
    bool *mask = tg_arena_memdup(&g->arena, a->none, sizeof *a->none * (size_t)a->n);
    if (!mask) {
        *oom = true;
        return true;
    }
    for (int j = 0; j < a->n; j++)
        if (mask[j]) ((int64_t *)v->ints)[j] = 0;
    v->none = mask;
    return true;
}

/* Converts one user attribute to the schema's form; false if the kind does not fit. */
static bool attr_convert(tg_graph *g, const tg_attr_spec *s, const tg_attr *a, tg_aval *out,
                         bool *oom) {
    tg_aval v = {.kind = a->kind, .i = a->i, .f = a->f, .s = a->s, .n = a->n};
    if (a->kind == TG_ATTR_NONE) {
        if (!(s->nullable & TG_NULL_WHOLE)) return false;
        *out = (tg_aval){.kind = TG_ATTR_NONE};
        return true;
    }
    switch ((tg_attr_type)s->type) {
    case TG_AS_INT:
        if (a->kind != TG_ATTR_INT && a->kind != TG_ATTR_BOOL) return false;
        v.kind = TG_ATTR_INT;
        break;
    case TG_AS_FLOAT:
        if (a->kind == TG_ATTR_INT)
            v.f = (double)a->i;
        else if (a->kind != TG_ATTR_FLOAT)
            return false;
        v.kind = TG_ATTR_FLOAT;
        break;
    case TG_AS_BOOL:
        if (a->kind != TG_ATTR_BOOL) return false;
        break;
    case TG_AS_STR:
        if (a->kind != TG_ATTR_STR) return false;
        break;
    case TG_AS_FUNC:
        if (a->kind != TG_ATTR_FUNC) return false;
        v.s = NULL;
        v.fn = a->func;
        break;
    case TG_AS_DATA: /* refused before (tg_ir_attrs_normalize) */
        return false;
    case TG_AS_SCALAR:
        if (a->kind != TG_ATTR_INT && a->kind != TG_ATTR_FLOAT && a->kind != TG_ATTR_BOOL)
            return false;
        break;
    case TG_AS_FLOATS:
        if (a->kind == TG_ATTR_INT) {
            v.kind = TG_ATTR_FLOAT;
            v.f = (double)a->i;
        } else if (a->kind == TG_ATTR_INTS) {
            if (a->none) return false;
            double *f = a->n ? tg_arena_alloc(&g->arena, sizeof *f * (size_t)a->n) : NULL;
            if (a->n && !f) *oom = true;
            for (int k = 0; f && k < a->n; k++) f[k] = (double)a->ints[k];
            v.kind = TG_ATTR_FLOATS;
            v.floats = f;
        } else if (a->kind != TG_ATTR_FLOAT && a->kind != TG_ATTR_FLOATS) {
            return false;
        }
        break;
    case TG_AS_PAIRS:
        if (a->kind != TG_ATTR_INTS || a->n % 2 != 0 || a->none) return false;
        if (a->n < 0 || (a->n > 0 && !a->ints)) return false;
        v.ints = a->n ? tg_arena_memdup(&g->arena, a->ints, sizeof *a->ints * (size_t)a->n) : NULL;
        if (a->n && !v.ints) *oom = true;
        break;
    case TG_AS_INTS:
    case TG_AS_AXES:
        if (a->kind == TG_ATTR_INT) {
            v.kind = TG_ATTR_INTS;
            v.n = 1;
            v.ints = tg_arena_memdup(&g->arena, &a->i, sizeof a->i);
            if (!v.ints) *oom = true;
        } else if (a->kind == TG_ATTR_INTS) {
            if (a->n < 0 || (a->n > 0 && !a->ints)) return false;
            v.ints =
                a->n ? tg_arena_memdup(&g->arena, a->ints, sizeof *a->ints * (size_t)a->n) : NULL;
            if (a->n && !v.ints) *oom = true;
            if (!*oom && !ints_none(g, s, a, &v, oom)) return false;
        } else {
            return false;
        }
        break;
    case TG_AS_DTYPE: {
        tg_dtype dt;
        if (a->kind != TG_ATTR_STR || !a->s) return false;
        if (!tg_dtype_parse(a->s, &dt)) {
            tg_ir_fail(g, TG_ETYPE, "unknown dtype \"%s\"", a->s);
            return true;
        }
        v = (tg_aval){.kind = TG_ATTR_INT, .i = dt};
        break;
    }
    }
    if (v.kind == TG_ATTR_STR && v.s) {
        v.s = tg_arena_strdup(&g->arena, v.s);
        if (!v.s) *oom = true;
    }
    if (a->kind == TG_ATTR_FLOATS && a->n > 0) {
        v.floats = tg_arena_memdup(&g->arena, a->floats, sizeof *a->floats * (size_t)a->n);
        if (!v.floats) *oom = true;
    }
    *out = v;
    return true;
}

tg_aval *tg_ir_attrs_normalize(tg_graph *g, const char *name, const tg_attr_spec *spec, int nspec,
                               const tg_opdata_vt *data, const tg_attr *attrs, int nattrs) {
    tg_aval *vals = tg_arena_alloc(&g->arena, sizeof *vals * (size_t)(nspec + 1));
    bool *seen = tg_arena_alloc(&g->arena, (size_t)nspec + 1);
    if (!vals || !seen) return fail_oom(g);
    for (int k = 0; k < nattrs; k++) {
        const tg_attr *a = &attrs[k];
        int j = 0;
        while (j < nspec && strcmp(spec[j].name, a->name ? a->name : "") != 0) j++;
        if (j == nspec) {
            char known[256] = "";
            for (int m = 0; m < nspec; m++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", m ? ", " : "",
                         spec[m].name);
            return tg_ir_fail(g, TG_EINVAL, "%s: unknown attribute '%s' (%s%s)", name,
                              a->name ? a->name : "", nspec ? "expected one of " : "it has none",
                              known);
        }
        if (seen[j])
            return tg_ir_fail(g, TG_EINVAL, "%s: attribute '%s' given twice", name, a->name);
        seen[j] = true;
        const tg_attr_spec *sp = &spec[j];
        if (sp->type == TG_AS_DATA)
            return tg_ir_fail(g, TG_EINVAL,
                              "%s: attribute '%s' holds %s (%s); tg_apply cannot give it", name,
                              a->name, data->what, data->origin);
        bool oom = false;
        bool no_str = (a->kind == TG_ATTR_STR && !a->s) || (a->kind == TG_ATTR_FUNC && !a->func);
        bool no_list = (a->kind == TG_ATTR_INTS && a->n > 0 && !a->ints) ||
                       (a->kind == TG_ATTR_FLOATS && a->n > 0 && !a->floats);
        if (no_str || no_list ||
            ((a->kind == TG_ATTR_INTS || a->kind == TG_ATTR_FLOATS) && a->n < 0))
            return tg_ir_fail(
                g, TG_EINVAL, "%s: attribute '%s': %s", name, a->name,
                no_str ? (a->kind == TG_ATTR_FUNC ? "the function is NULL" : "the string is NULL")
                : no_list ? "the list is NULL"
                          : "the list has a negative length");
        if (!attr_convert(g, &spec[j], a, &vals[j], &oom)) {
            bool nones = false;
            for (int m = 0; a->kind == TG_ATTR_INTS && a->none && m < a->n; m++)
                nones = nones || a->none[m];
            return tg_ir_fail(g, TG_EINVAL, "%s: attribute '%s' expects %s, got %s", name, a->name,
                              attr_type_want((tg_attr_type)spec[j].type),
                              nones ? "a list holding none" : attr_kind_name(a->kind));
        }
        if (oom) return fail_oom(g);
        if (g->status != TG_OK) return NULL;
    }
    for (int j = 0; j < nspec; j++) {
        if (seen[j]) continue;
        if (spec[j].required)
            return tg_ir_fail(g, TG_EINVAL, "%s: missing attribute '%s'", name, spec[j].name);
        vals[j] = spec[j].def;
    }
    return vals;
}

/* Deep copy of normalized attributes into g's arena (clone, rewrites). */
static tg_aval *attrs_copy(tg_graph *g, const tg_op_def *op, const tg_aval *src) {
    tg_aval *vals = tg_arena_alloc(&g->arena, sizeof *vals * (size_t)(op->nattrs + 1));
    if (!vals) return fail_oom(g);
    for (int j = 0; j < op->nattrs; j++) {
        vals[j] = src[j];
        if (src[j].s && !(vals[j].s = tg_arena_strdup(&g->arena, src[j].s))) return fail_oom(g);
        if (src[j].n > 0 && src[j].ints &&
            !(vals[j].ints =
                  tg_arena_memdup(&g->arena, src[j].ints, sizeof *src[j].ints * (size_t)src[j].n)))
            return fail_oom(g);
        if (src[j].n > 0 && src[j].none &&
            !(vals[j].none =
                  tg_arena_memdup(&g->arena, src[j].none, sizeof *src[j].none * (size_t)src[j].n)))
            return fail_oom(g);
        if (src[j].n > 0 && src[j].floats &&
            !(vals[j].floats = tg_arena_memdup(&g->arena, src[j].floats,
                                               sizeof *src[j].floats * (size_t)src[j].n)))
            return fail_oom(g);
    }
    return vals;
}

/* ---- node construction ---- */

/* Converts a weak literal to dtype dt (NEP 50: an integer literal must fit). */
static tg_var *literal_convert(tg_graph *g, const tg_op_def *op, tg_var *v, tg_dtype dt) {
    const tg_tensor *val = v->value;
    if (tg_dtype_is_int(dt) && v->lit == 'i') {
        int64_t x = tg_load_i64(tg_tensor_data(val), val->dtype);
        static const int64_t lo_of[TG_DT_COUNT] = {[TG_DT_I8] = INT8_MIN,
                                                   [TG_DT_I16] = INT16_MIN,
                                                   [TG_DT_I32] = INT32_MIN,
                                                   [TG_DT_I64] = INT64_MIN};
        static const int64_t hi_of[TG_DT_COUNT] = {[TG_DT_I8] = INT8_MAX,
                                                   [TG_DT_I16] = INT16_MAX,
                                                   [TG_DT_I32] = INT32_MAX,
                                                   [TG_DT_I64] = INT64_MAX,
                                                   [TG_DT_U8] = UINT8_MAX};
        int64_t lo = lo_of[dt], hi = hi_of[dt];
        if (x < lo || x > hi)
            return tg_ir_fail(g, TG_ETYPE, "%s: integer literal %lld is out of range for %s",
                              op->name, (long long)x, tg_dtype_name(dt));
    } else if (!tg_dtype_is_float(dt) && v->lit == 'f') {
        return tg_ir_fail(g, TG_ETYPE, "%s: float literal cannot become %s", op->name,
                          tg_dtype_name(dt));
    }
    tg_tensor *t = tg_tensor_empty(g->ctx, dt, 0, NULL);
    if (!t) return fail_oom(g);
    tg_tensor_copy_into(t, val);
    tg_var *nv = tg_ir_const(g, t, v->lit);
    if (nv) nv->type.weak = 0;
    return nv;
}

static tg_node *node_build(tg_graph *g, int opi, tg_var *const *in_user, int nin,
                           const tg_aval *attrs);

/* Takes a reference on the data of attribute j, kept in g->data until g is freed. The data
 * is of op's table (op->data): anything else is a bug of tgraph. */
static bool data_add(tg_graph *g, const tg_op_def *op, int j, const tg_aval *a) {
    if (a->kind != TG_ATTR_DATA || !a->data || a->data->vt != op->data) {
        tg_ir_fail(g, TG_EINTERNAL, "%s: attribute '%s' does not hold %s", op->name,
                   op->attrs[j].name, op->data->what);
        return false;
    }
    if (!tg_vec_push(g->ctx, &g->data, (void *)a->data)) return fail_oom(g) != NULL;
    tg_opdata_retain(a->data);
    return true;
}

tg_node *tg_ir_node_make(tg_graph *g, int op, tg_var *const *in, int nin, const tg_attr *attrs,
                         int nattrs) {
    if (!g || g->status != TG_OK) return NULL;
    TG_ASSERT(op >= 0 && op < tg_op_count);
    const tg_op_def *def = tg_op_table[op];
    if (nattrs < 0 || (nattrs > 0 && !attrs))
        return tg_ir_fail(g, TG_EINVAL, "%s: invalid attribute list", def->name);
    tg_aval *vals =
        tg_ir_attrs_normalize(g, def->name, def->attrs, def->nattrs, def->data, attrs, nattrs);
    return vals ? node_build(g, op, in, nin, vals) : NULL;
}

tg_node *tg_ir_node_make_norm(tg_graph *g, int op, tg_var *const *in, int nin,
                              const tg_aval *attrs) {
    if (!g || g->status != TG_OK) return NULL;
    tg_aval *vals = attrs_copy(g, tg_op_table[op], attrs);
    return vals ? node_build(g, op, in, nin, vals) : NULL;
}

static tg_node *node_build(tg_graph *g, int opi, tg_var *const *in_user, int nin,
                           const tg_aval *attrs) {
    const tg_op_def *op = tg_op_table[opi];
    if (nin < op->min_in || (op->max_in >= 0 && nin > op->max_in)) {
        if (op->min_in == op->max_in)
            return tg_ir_fail(g, TG_EINVAL, "%s: expects %d input%s, got %d", op->name, op->min_in,
                              op->min_in == 1 ? "" : "s", nin);
        if (op->max_in < 0)
            return tg_ir_fail(g, TG_EINVAL, "%s: expects at least %d inputs, got %d", op->name,
                              op->min_in, nin);
        return tg_ir_fail(g, TG_EINVAL, "%s: expects %d to %d inputs, got %d", op->name, op->min_in,
                          op->max_in, nin);
    }
    for (int j = 0; j < op->nattrs; j++) {
        if (attrs[j].kind == TG_ATTR_FUNC && !callee_add(g, attrs[j].fn, op->name)) return NULL;
        if (op->attrs[j].type == TG_AS_DATA && !data_add(g, op, j, &attrs[j])) return NULL;
    }
    tg_var **in = tg_arena_alloc(&g->arena, sizeof *in * (size_t)(nin + 1));
    tg_type *tin = tg_mem_alloc(g->ctx, sizeof *tin * (size_t)(nin + 1));
    tg_type *tout = tg_mem_alloc(g->ctx, sizeof *tout * TG_MAX_OUTS);
    tg_dtype *want = tg_mem_alloc(g->ctx, sizeof *want * (size_t)(nin + 1));
    tg_node *n = NULL;
    if (!in || !tin || !tout || !want) {
        fail_oom(g);
        goto done;
    }
    for (int i = 0; i < nin; i++) {
        if (!in_user[i]) goto done; /* an earlier builder failed: sticky NULL */
        if (!owns_var(g, in_user[i])) {
            tg_ir_fail(g, TG_EINVAL, "%s: input %d belongs to another graph", op->name, i);
            goto done;
        }
        in[i] = in_user[i];
        tin[i] = in[i]->type;
    }
    tg_infer ic = {
        .op = op, .in = tin, .nin = nin, .vars = in, .attrs = attrs, .out = tout, .nout = op->nout};
    if (op->promote) {
        for (int i = 0; i < nin; i++) want[i] = (tg_dtype)tin[i].dtype;
        if (op->promote(&ic, want) != TG_OK) {
            tg_ir_fail(g, ic.status ? ic.status : TG_ETYPE, "%s: %s", op->name, ic.msg);
            goto done;
        }
        bool all_weak = true; /* then the result stays weak, and so do converted literals */
        for (int i = 0; i < nin; i++) all_weak = all_weak && tin[i].weak;
        for (int i = 0; i < nin; i++) {
            if (want[i] == (tg_dtype)in[i]->type.dtype) continue;
            if (in[i]->lit && in[i]->type.weak) {
                in[i] = literal_convert(g, op, in[i], want[i]);
                if (in[i]) in[i]->type.weak = all_weak;
            } else {
                /* the node keeps its attributes: they live in the arena */
                tg_aval *cast = tg_arena_alloc(&g->arena, sizeof *cast);
                if (cast) *cast = (tg_aval){.kind = TG_ATTR_INT, .i = want[i]};
                tg_node *c = cast ? node_build(g, tg_op_cast_id, &in[i], 1, cast) : fail_oom(g);
                in[i] = c ? c->out[0] : NULL;
            }
            if (!in[i]) goto done;
            tin[i] = in[i]->type;
        }
    }
    if (op->infer(&ic) != TG_OK) {
        tg_ir_fail(g, ic.status ? ic.status : TG_ESHAPE, "%s: %s", op->name, ic.msg);
        goto done;
    }
    int nout = ic.nout;
    TG_ASSERT(nout >= 0 && nout <= TG_MAX_OUTS);
    n = tg_arena_alloc(&g->arena, sizeof *n);
    tg_var **out = tg_arena_alloc(&g->arena, sizeof *out * (size_t)(nout + 1));
    if (!n || !out || !tg_vec_push(g->ctx, &g->nodes, n)) {
        n = fail_oom(g);
        goto done;
    }
    *n = (tg_node){.op = opi,
                   .id = g->nodes.n - 1,
                   .nin = nin,
                   .nout = nout,
                   .in = in,
                   .out = out,
                   .attrs = (tg_aval *)attrs,
                   .line = g->line,
                   .col = g->col,
                   .device = g->device};
    for (int i = 0; i < nout; i++) {
        tg_type t = tout[i]; /* weak when every input was weak (JAX's weak types) */
        t.nobcast = 0;
        out[i] = var_new(g, TG_VAR_NODE, &t);
        if (!out[i]) {
            n = NULL;
            goto done;
        }
        out[i]->node = n;
        out[i]->index = i;
    }
done:
    tg_mem_free(g->ctx, tin, sizeof *tin * (size_t)(nin + 1));
    tg_mem_free(g->ctx, tout, sizeof *tout * TG_MAX_OUTS);
    tg_mem_free(g->ctx, want, sizeof *want * (size_t)(nin + 1));
    return n;
}

/* ---- toposort, replace ---- */

static tg_node **toposort(const tg_graph *g, int *count, tg_status *st) {
    int nn = g->nodes.n;
    *st = TG_ENOMEM;
    uint8_t *state = tg_mem_calloc(g->ctx, (size_t)nn + 1);
    tg_node **order = tg_mem_alloc(g->ctx, sizeof *order * (size_t)(nn + 1));
    struct frame {
        tg_node *n;
        int next;
    } *stack = tg_mem_alloc(g->ctx, sizeof *stack * (size_t)(nn + 1));
    int len = 0;
    if (!state || !order || !stack) goto fail;
    for (int o = 0; o < g->outputs.n; o++) {
        tg_var *root = g->outputs.items[o];
        if (root->kind != TG_VAR_NODE || state[root->node->id]) continue;
        int sp = 0;
        stack[sp++] = (struct frame){root->node, 0};
        state[root->node->id] = 1;
        while (sp > 0) {
            struct frame *f = &stack[sp - 1];
            if (f->next < f->n->nin) {
                tg_var *v = f->n->in[f->next++];
                if (v->kind != TG_VAR_NODE) continue;
                uint8_t s = state[v->node->id];
                if (s == 1) {
                    *st = tg_set_error(TG_EINTERNAL, "graph '%s' has a cycle through node %d",
                                       g->name, v->node->id);
                    goto fail;
                }
                if (s == 0) {
                    state[v->node->id] = 1;
                    stack[sp++] = (struct frame){v->node, 0};
                }
            } else {
                state[f->n->id] = 2;
                order[len++] = f->n;
                sp--;
            }
        }
    }
    tg_mem_free(g->ctx, state, (size_t)nn + 1);
    tg_mem_free(g->ctx, stack, sizeof *stack * (size_t)(nn + 1));
    *count = len;
    *st = TG_OK;
    return order;
fail:
    tg_mem_free(g->ctx, state, (size_t)nn + 1);
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(nn + 1));
    tg_mem_free(g->ctx, stack, sizeof *stack * (size_t)(nn + 1));
    return NULL;
}

tg_node **tg_ir_toposort(const tg_graph *g, int *count) {
    tg_status st;
    return toposort(g, count, &st);
}

/* True when `from` depends on `target` (iterative walk over producers). */
static tg_status depends_on(const tg_graph *g, tg_var *from, tg_var *target, bool *out) {
    *out = false;
    if (from == target) return (*out = true), TG_OK;
    int nn = g->nodes.n;
    uint8_t *seen = tg_mem_calloc(g->ctx, (size_t)nn + 1);
    tg_node **stack = tg_mem_alloc(g->ctx, sizeof *stack * (size_t)(nn + 1));
    if (!seen || !stack) {
        tg_mem_free(g->ctx, seen, (size_t)nn + 1);
        tg_mem_free(g->ctx, stack, sizeof *stack * (size_t)(nn + 1));
        return TG_ENOMEM;
    }
    int sp = 0;
    if (from->kind == TG_VAR_NODE) {
        stack[sp++] = from->node;
        seen[from->node->id] = 1;
    }
    while (sp > 0 && !*out) {
        tg_node *n = stack[--sp];
        for (int i = 0; i < n->nin; i++) {
            tg_var *v = n->in[i];
            if (v == target) *out = true;
            if (v->kind == TG_VAR_NODE && !seen[v->node->id]) {
                seen[v->node->id] = 1;
                stack[sp++] = v->node;
            }
        }
    }
    tg_mem_free(g->ctx, seen, (size_t)nn + 1);
    tg_mem_free(g->ctx, stack, sizeof *stack * (size_t)(nn + 1));
    return TG_OK;
}

tg_status tg_ir_replace(tg_graph *g, tg_var *old, tg_var *new) {
    if (!owns_var(g, old) || !owns_var(g, new))
        return tg_set_error(TG_EINVAL, "replace: variable of another graph");
    if (!tg_type_equal(&old->type, &new->type)) {
        char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
        return tg_set_error(TG_ETYPE, "replace: type %s differs from %s",
                            tg_type_str(&new->type, b, sizeof b),
                            tg_type_str(&old->type, a, sizeof a));
    }
    bool cyc;
    tg_status st = depends_on(g, new, old, &cyc);
    if (st != TG_OK) return st;
    if (cyc && new != old) return tg_set_error(TG_EINVAL, "replace: would create a cycle");
    for (int i = 0; i < g->nodes.n; i++) {
        tg_node *n = g->nodes.items[i];
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] == old) n->in[k] = new;
    }
    for (int i = 0; i < g->outputs.n; i++)
        if (g->outputs.items[i] == old) g->outputs.items[i] = new;
    return TG_OK;
}

/* ---- clone ---- */

tg_graph *tg_graph_clone(const tg_graph *g) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_graph_clone: graph is NULL"), NULL;
    if (g->status != TG_OK) {
        tg_set_error(g->status, "cannot clone a graph with an error: %s", g->error);
        return NULL;
    }
    tg_graph *c = tg_graph_new(g->ctx, g->name);
    int norder = 0;
    tg_node **order = c ? tg_ir_toposort(g, &norder) : NULL;
    tg_var **map = c ? tg_mem_calloc(g->ctx, sizeof *map * (size_t)(g->vars.n + 1)) : NULL;
    /* tmp holds one node's operands, then the outputs: a value may appear many times in
       either, so it is sized by the widest node and the output count, not by vars.n */
    int ntmp = g->outputs.n;
    for (int i = 0; i < g->nodes.n; i++) {
        const tg_node *n = g->nodes.items[i];
        if (n->nin > ntmp) ntmp = n->nin;
    }
    ntmp++;
    tg_var **tmp = c ? tg_mem_alloc(g->ctx, sizeof *tmp * (size_t)ntmp) : NULL;
    bool ok = c && order && map && tmp;
    if (c && !ok) { /* toposort reports a cycle; everything else here is memory */
        const char *m = tg_last_error();
        if (!order && m && strstr(m, "cycle"))
            tg_ir_fail(c, TG_EINTERNAL, "%s", m);
        else
            fail_oom(c);
    }
    if (c) {
        c->file = g->file;
        c->origin = g->origin ? g->origin : g;
        if (g->spmd_axis) { /* the pmap typing a gradient taken in the clone needs */
            c->spmd_axis = tg_arena_strdup(&c->arena, g->spmd_axis);
            c->spmd_mapped = tg_arena_memdup(&c->arena, g->spmd_mapped, (size_t)g->spmd_n + 1);
            c->spmd_n = g->spmd_n;
            if (!c->spmd_axis || !c->spmd_mapped) ok = fail_oom(c) != NULL;
        }
    }
    for (int i = 0; ok && i < g->inputs.n; i++) {
        tg_var *v = g->inputs.items[i];
        map[v->id] =
            input_new(c, v->name, (tg_dtype)v->type.dtype, v->type.ndim, v->type.shape, v->state);
        ok = map[v->id] != NULL;
        if (ok && v->device) ok = (map[v->id]->device = tg_ir_device_intern(c, v->device)) != NULL;
    }
    /* constants and node outputs, in dependency order */
    for (int i = 0; ok && i < norder; i++) {
        tg_node *n = order[i];
        for (int k = 0; ok && k < n->nin; k++) {
            tg_var *v = n->in[k];
            if (v->kind == TG_VAR_CONST && !map[v->id]) {
                tg_tensor *val = tg_tensor_dup(v->value);
                map[v->id] = val ? tg_ir_const(c, val, v->lit) : fail_oom(c);
                if (map[v->id]) map[v->id]->type = v->type;
            }
            tmp[k] = map[v->id];
            ok = tmp[k] != NULL;
        }
        if (!ok) break;
        c->line = n->line;
        c->col = n->col;
        c->device = tg_ir_device_intern(c, n->device);
        tg_node *m = tg_ir_node_make_norm(c, n->op, tmp, n->nin, n->attrs);
        ok = m && m->nout == n->nout;
        for (int k = 0; ok && k < n->nout; k++) {
            ok = tg_type_equal(&m->out[k]->type, &n->out[k]->type);
            map[n->out[k]->id] = m->out[k];
            if (n->out[k]->name && !(m->out[k]->name = tg_arena_strdup(&c->arena, n->out[k]->name)))
                ok = fail_oom(c) != NULL;
        }
    }
    for (int i = 0; ok && i < g->outputs.n; i++) {
        tg_var *v = g->outputs.items[i];
        if (v->kind == TG_VAR_CONST && !map[v->id]) {
            tg_tensor *val = tg_tensor_dup(v->value);
            map[v->id] = val ? tg_ir_const(c, val, v->lit) : fail_oom(c);
            if (map[v->id]) map[v->id]->type = v->type;
        }
        ok = (tmp[i] = map[v->id]) != NULL;
    }
    if (ok) ok = tg_graph_set_outputs(c, tmp, g->nret) == TG_OK;
    for (int i = 0; ok && i < g->nret && i < g->out_names.n; i++) { /* names stay positional */
        const char *nm = g->out_names.items[i];
        ok = tg_ir_output_name_set(c, i, nm, nm ? strlen(nm) : 0) == TG_OK;
    }
    for (int j = 0; ok && j < g->updates.n; j++) {
        const tg_var *s = g->updates.items[j];
        c->line = s->upd_line; /* the update keeps its position */
        c->col = s->upd_col;
        ok = tg_update(c, map[s->id], tmp[g->nret + j]) == TG_OK;
    }
    if (c) {
        c->line = c->col = 0;
        c->device = NULL;
    }
    if (order) tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    if (map) tg_mem_free(g->ctx, map, sizeof *map * (size_t)(g->vars.n + 1));
    if (tmp) tg_mem_free(g->ctx, tmp, sizeof *tmp * (size_t)ntmp);
    if (!ok) {
        if (c && c->status == TG_OK) tg_set_error(TG_EINTERNAL, "clone of '%s' failed", g->name);
        tg_graph_free(c);
        return NULL;
    }
    return c;
}

/* ---- copying a callee's body (inlining, backward functions) ---- */

/* A strong stand-in for a weak argument: a parameter is strong, so the body must see the
 * argument as a typed value (a weak literal would promote differently inside). */
static tg_var *strong_arg(tg_graph *g, tg_var *a) {
    if (!a->type.weak) return a;
    if (a->kind == TG_VAR_CONST) {
        tg_tensor *val = tg_tensor_dup(a->value);
        tg_var *v = val ? tg_ir_const(g, val, 0) : fail_oom(g);
        if (v) v->type.weak = 0;
        return v;
    }
    tg_aval *cast = tg_arena_alloc(&g->arena, sizeof *cast);
    if (!cast) return fail_oom(g);
    *cast = (tg_aval){.kind = TG_ATTR_INT, .i = a->type.dtype};
    tg_node *c = node_build(g, tg_op_cast_id, &a, 1, cast);
    if (c) c->out[0]->type.weak = 0;
    return c ? c->out[0] : NULL;
}

tg_status tg_ir_copy_body(tg_graph *g, const tg_graph *fn, tg_var *const *args, tg_var **outs) {
    if (g->status != TG_OK) return g->status;
    int norder = 0, ntmp = 1, line = g->line, col = g->col;
    const char *dev = g->device; /* the call's: nodes of the body without one take it */
    tg_node **order = tg_ir_toposort(fn, &norder);
    tg_var **map = tg_mem_calloc(g->ctx, sizeof *map * (size_t)(fn->vars.n + 1));
    for (int i = 0; i < fn->nodes.n; i++) {
        const tg_node *n = fn->nodes.items[i];
        if (n->nin + 1 > ntmp) ntmp = n->nin + 1;
    }
    tg_var **tmp = tg_mem_alloc(g->ctx, sizeof *tmp * (size_t)ntmp);
    bool ok = order && map && tmp;
    if (!ok) fail_oom(g);
    for (int i = 0; ok && i < fn->inputs.n; i++) {
        tg_var *v = fn->inputs.items[i];
        ok = (map[v->id] = strong_arg(g, args[i])) != NULL;
    }
    for (int i = 0; ok && i < norder; i++) {
        const tg_node *n = order[i];
        for (int k = 0; ok && k < n->nin; k++) {
            tg_var *v = n->in[k];
            if (v->kind == TG_VAR_CONST && !map[v->id]) {
                tg_tensor *val = tg_tensor_dup(v->value);
                map[v->id] = val ? tg_ir_const(g, val, v->lit) : fail_oom(g);
                if (map[v->id]) map[v->id]->type = v->type;
            }
            ok = (tmp[k] = map[v->id]) != NULL;
        }
        if (!ok) break;
        g->line = n->line;
        g->col = n->col;
        g->device = n->device ? tg_ir_device_intern(g, n->device) : dev;
        tg_node *m = tg_ir_node_make_norm(g, n->op, tmp, n->nin, n->attrs);
        ok = m && m->nout == n->nout;
        for (int k = 0; ok && k < n->nout; k++) map[n->out[k]->id] = m->out[k];
    }
    for (int i = 0; ok && i < fn->nret; i++) {
        tg_var *v = fn->outputs.items[i];
        if (v->kind == TG_VAR_CONST && !map[v->id]) {
            tg_tensor *val = tg_tensor_dup(v->value);
            map[v->id] = val ? tg_ir_const(g, val, v->lit) : fail_oom(g);
            if (map[v->id]) map[v->id]->type = v->type;
        }
        ok = (outs[i] = map[v->id]) != NULL;
    }
    g->line = line;
    g->col = col;
    g->device = dev;
    if (order) tg_mem_free(fn->ctx, order, sizeof *order * (size_t)(fn->nodes.n + 1));
    tg_mem_free(g->ctx, map, sizeof *map * (size_t)(fn->vars.n + 1));
    tg_mem_free(g->ctx, tmp, sizeof *tmp * (size_t)ntmp);
    if (!ok && g->status == TG_OK)
        tg_ir_fail(g, TG_EINTERNAL, "copying the body of '%s' failed", fn->name);
    return g->status;
}

/* ---- verification ---- */

static tg_status verify_node(const tg_graph *g, const tg_node *n, tg_type *tout) {
    if (n->op < 0 || n->op >= tg_op_count)
        return tg_set_error(TG_EINTERNAL, "verify: node %d has op %d", n->id, n->op);
    const tg_op_def *op = tg_op_table[n->op];
    if (n->nin < op->min_in || (op->max_in >= 0 && n->nin > op->max_in))
        return tg_set_error(TG_EINTERNAL, "verify: node %d (%s) has %d inputs", n->id, op->name,
                            n->nin);
    size_t tsz = sizeof(tg_type) * (size_t)(n->nin + 1);
    tg_type *tin = tg_mem_alloc(g->ctx, tsz);
    if (!tin) return TG_ENOMEM;
    tg_status st = TG_OK;
    for (int k = 0; k < n->nin && st == TG_OK; k++) {
        if (!owns_var(g, n->in[k]))
            st = tg_set_error(TG_EINTERNAL, "verify: node %d (%s) input %d is foreign", n->id,
                              op->name, k);
        else
            tin[k] = n->in[k]->type;
    }
    for (int k = 0; k < n->nout && st == TG_OK; k++)
        if (!owns_var(g, n->out[k]) || n->out[k]->node != n || n->out[k]->index != k)
            st = tg_set_error(TG_EINTERNAL, "verify: node %d (%s) output %d is not linked", n->id,
                              op->name, k);
    if (st == TG_OK && !device_owned(g, n->device))
        st = tg_set_error(TG_EINTERNAL,
                          "verify: node %d (%s) has a device name that is not the graph's "
                          "(tg_ir_device_intern)",
                          n->id, op->name);
    for (int j = 0; j < op->nattrs && st == TG_OK; j++) {
        const tg_attr_spec *sp = &op->attrs[j];
        const tg_aval *a = &n->attrs[j];
        if (sp->type != TG_AS_DATA && a->kind == TG_ATTR_DATA)
            st = tg_set_error(TG_EINTERNAL, "verify: node %d (%s) attribute '%s' holds op data",
                              n->id, op->name, sp->name);
        else if (sp->type == TG_AS_DATA &&
                 (a->kind != TG_ATTR_DATA || !a->data || a->data->vt != op->data ||
                  atomic_load(&a->data->refs) < 1))
            st = tg_set_error(TG_EINTERNAL, "verify: node %d (%s) attribute '%s' does not hold %s",
                              n->id, op->name, sp->name, op->data->what);
    }
    tg_infer ic = {.op = op,
                   .in = tin,
                   .nin = n->nin,
                   .vars = n->in,
                   .attrs = n->attrs,
                   .out = tout,
                   .nout = op->nout};
    if (st == TG_OK && (op->infer(&ic) != TG_OK || ic.nout != n->nout))
        st = ic.status == TG_ENOMEM /* inferring a body allocates (call, pmap) */
                 ? tg_set_error(TG_ENOMEM, "verify: node %d (%s): %s", n->id, op->name, ic.msg)
                 : tg_set_error(TG_EINTERNAL, "verify: node %d (%s) no longer type-checks: %s",
                                n->id, op->name, ic.msg);
    for (int k = 0; k < n->nout && st == TG_OK; k++) {
        if (tg_type_equal(&tout[k], &n->out[k]->type)) continue;
        char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
        st = tg_set_error(TG_EINTERNAL, "verify: node %d (%s) output %d is %s, infers %s", n->id,
                          op->name, k, tg_type_str(&n->out[k]->type, a, sizeof a),
                          tg_type_str(&tout[k], b, sizeof b));
    }
    tg_mem_free(g->ctx, tin, tsz);
    return st;
}

tg_status tg_graph_verify(const tg_graph *g) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_graph_verify: graph is NULL");
    if (g->status != TG_OK) return tg_set_error(g->status, "%s", g->error);
    tg_type *tout = tg_mem_alloc(g->ctx, sizeof *tout * TG_MAX_OUTS);
    if (!tout) return TG_ENOMEM;
    tg_status st = TG_OK;
    for (int i = 0; i < g->nodes.n && st == TG_OK; i++)
        st = verify_node(g, g->nodes.items[i], tout);
    tg_mem_free(g->ctx, tout, sizeof *tout * TG_MAX_OUTS);
    for (int i = 0; i < g->outputs.n && st == TG_OK; i++)
        if (!owns_var(g, g->outputs.items[i]))
            st = tg_set_error(TG_EINTERNAL, "verify: output %d is foreign", i);
    for (int i = 0; i < g->inputs.n && st == TG_OK; i++)
        if (!device_owned(g, ((const tg_var *)g->inputs.items[i])->device))
            st = tg_set_error(TG_EINTERNAL,
                              "verify: input %d has a device name that is not the "
                              "graph's (tg_ir_device_intern)",
                              i);
    if (st == TG_OK && g->outputs.n != g->nret + g->updates.n)
        st = tg_set_error(TG_EINTERNAL, "verify: %d outputs for %d returns and %d updates",
                          g->outputs.n, g->nret, g->updates.n);
    if (st == TG_OK && g->out_names.n != g->nret)
        st = tg_set_error(TG_EINTERNAL, "verify: %d output names for %d returns", g->out_names.n,
                          g->nret);
    for (int j = 0; j < g->updates.n && st == TG_OK; j++) {
        const tg_var *s = g->updates.items[j], *v = g->outputs.items[g->nret + j];
        if (!owns_var(g, s) || !tg_var_is_state(s) || !update_fits(&s->type, &v->type))
            st = tg_set_error(TG_EINTERNAL, "verify: update %d is not a state and its value", j);
    }
    if (st == TG_OK) {
        int cnt;
        tg_node **order = toposort(g, &cnt, &st);
        if (!order) return st;
        tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    }
    return st;
}
