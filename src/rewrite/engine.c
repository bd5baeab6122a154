/* engine.c - the rewrite engine: rules indexed by root op, a worklist run to a fixed point,
 * use lists, on-the-fly dead-node removal, common-subexpression and constant tables, and
 * per-rule statistics.
 *
 * Invariants:
 *  - flags[id] & LIVE: the node is reachable from the outputs. vi[v].uses counts the input
 *    slots of live nodes plus the graph output slots holding v; a node whose outputs all
 *    have no use dies at once (its inputs lose a use, iteratively). A dead node is never
 *    edited again, so it keeps type-checking; a rule that returns a dead value revives it.
 *  - Use lists are lazy: an entry (node, k) of v is valid while the node is live and
 *    node->in[k] == v; stale entries are dropped when the list is walked.
 *  - Node and variable ids index every per-node and per-variable array; arrays grow as rules
 *    create nodes (which g->nodes and g->vars list in creation order).
 *  - Everything is iterative: the worklist, the kill and revive cascades, the cycle check.
 *  - Linear work: nothing rescans the graph after a rewrite. A node table slot holding a
 *    dead node is free (the next insertion on its probe path takes it), so keys that a
 *    cascade makes again and again do not pile up. rw->steps counts the loops' steps.
 *  - Devices (docs/devices.md, "Annotations"): while a rule runs on node n, g->device is
 *    n's, so every node the rule builds carries n's annotation; equal nodes merge only on
 *    the same device.
 */
#include "rewrite.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

enum { LIVE = 1, QUEUED = 2, VISIT = 4 };

typedef struct use {
    tg_node *node; /* user */
    int k;         /* input slot */
    int next;      /* next entry of the same variable, -1 at the end */
} use;

typedef struct varinfo {
    int uses;      /* live uses: inputs of live nodes and graph output slots */
    int outuses;   /* graph output slots */
    int head;      /* first use entry, -1 */
    uint64_t hash; /* of a constant's value, 0 = not computed */
} varinfo;

typedef struct slot {
    uint64_t h; /* hash of the entry when it was inserted */
    void *p;    /* tg_node* (node table) or tg_var* (constant table); NULL: empty */
} slot;

typedef struct table {
    slot *s;
    size_t cap, n; /* cap is a power of two */
} table;

struct tg_rw {
    tg_graph *g;
    tg_ctx *ctx;
    const char *pass;
    const tg_rule *rules;
    int nrules;
    int *ridx;     /* CSR: rules tried on op o are rlist[ridx[o] .. ridx[o + 1]) */
    int *rlist;    /* rule rows, table order */
    long *applied; /* per rule row, this run */
    int *stat;     /* per rule row: index in report->rules, or -1 */
    tg_rw_report *report;
    uint8_t *flags; /* per node id */
    int capn;
    varinfo *vi; /* per var id */
    int capv;
    use *pool;
    int npool, cappool;
    tg_node **work; /* the worklist (a stack) */
    int nwork, capwork;
    tg_node **stack; /* scratch for the kill / revive / cycle walks */
    int nstack, capstack;
    int nseen; /* nodes of g->nodes already registered */
    table nodes, consts;
    tg_type *tin; /* scratch for re-inference */
    int captin;
    tg_type *tout;   /* TG_MAX_OUTS */
    int cur;         /* rule row running, -1 outside rules */
    int mark;        /* g->nodes.n when the current rule started */
    bool redirected; /* the current rule moved at least one use */
    long total, limit, visits;
    long steps;   /* steps of the engine's own loops (tg_pass_stats.work) */
    tg_status st; /* first error */
};

/* ---- small helpers ---- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tg_status fail(tg_rw *rw, tg_status st, const char *fmt, ...) TG_PRINTF(3, 4);
static tg_status fail(tg_rw *rw, tg_status st, const char *fmt, ...) {
    if (rw->st != TG_OK) return rw->st;
    va_list ap;
    va_start(ap, fmt);
    tg_set_errorv(st, fmt, ap);
    va_end(ap);
    rw->st = st;
    return st;
}

static tg_status oom(tg_rw *rw) { /* keeps the memory cap's message (docs/hardening.md) */
    const char *m = tg_last_error();
    if (m && strstr(m, "memory limit"))
        return fail(rw, TG_ENOMEM, "%s: %s", rw->pass ? rw->pass : "rewrite", m);
    return fail(rw, TG_ENOMEM, "rewrite: out of memory");
}

tg_status tg_rw_error_status(void) {
    const char *m = tg_last_error();
    return m && strstr(m, "out of memory") ? TG_ENOMEM : TG_EINTERNAL;
}

static const char *rule_name(const tg_rw *rw) {
    return rw->cur >= 0 ? rw->rules[rw->cur].name : "(engine)";
}

/* Grows *p (elem bytes each) from *cap to at least need entries; new bytes are zero. */
static bool grow(tg_ctx *ctx, void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int ncap = *cap ? *cap : 64;
    while (ncap < need) {
        if (ncap > INT32_MAX / 2) return false;
        ncap *= 2;
    }
    void *np = tg_mem_realloc(ctx, *p, (size_t)*cap * elem, (size_t)ncap * elem);
    if (!np) return false;
    memset((char *)np + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *p = np;
    *cap = ncap;
    return true;
}

static bool grow_nodes(tg_rw *rw, int need) {
    return grow(rw->ctx, (void **)&rw->flags, &rw->capn, need, sizeof *rw->flags);
}

static bool grow_vars(tg_rw *rw, int need) {
    int old = rw->capv;
    if (!grow(rw->ctx, (void **)&rw->vi, &rw->capv, need, sizeof *rw->vi)) return false;
    for (int i = old; i < rw->capv; i++) rw->vi[i].head = -1;
    return true;
}

static bool is_live(const tg_rw *rw, const tg_node *n) { return rw->flags[n->id] & LIVE; }

static bool add_use(tg_rw *rw, tg_var *v, tg_node *n, int k) {
    if (rw->npool == rw->cappool &&
        !grow(rw->ctx, (void **)&rw->pool, &rw->cappool, rw->npool + 1, sizeof *rw->pool))
        return false;
    rw->steps++;
    rw->pool[rw->npool] = (use){n, k, rw->vi[v->id].head};
    rw->vi[v->id].head = rw->npool++;
    rw->vi[v->id].uses++;
    return true;
}

static bool spush(tg_rw *rw, tg_node *n) {
    if (rw->nstack == rw->capstack &&
        !grow(rw->ctx, (void **)&rw->stack, &rw->capstack, rw->nstack + 1, sizeof *rw->stack))
        return false;
    rw->stack[rw->nstack++] = n;
    return true;
}

static void wpush(tg_rw *rw, tg_node *n) {
    if (!is_live(rw, n) || (rw->flags[n->id] & QUEUED)) return;
    if (rw->nwork == rw->capwork &&
        !grow(rw->ctx, (void **)&rw->work, &rw->capwork, rw->nwork + 1, sizeof *rw->work)) {
        oom(rw);
        return;
    }
    rw->work[rw->nwork++] = n;
    rw->flags[n->id] |= QUEUED;
}

static bool unused(tg_rw *rw, const tg_node *n) {
    rw->steps += n->nout;
    for (int i = 0; i < n->nout; i++)
        if (rw->vi[n->out[i]->id].uses > 0) return false;
    return true;
}

/* Kills n if it is live and none of its outputs is used, then whatever that frees. */
static void maybe_kill(tg_rw *rw, tg_node *n) {
    if (!is_live(rw, n) || !unused(rw, n)) return;
    rw->nstack = 0;
    rw->flags[n->id] &= (uint8_t)~LIVE;
    if (!spush(rw, n)) {
        oom(rw);
        return;
    }
    while (rw->nstack > 0) {
        tg_node *m = rw->stack[--rw->nstack];
        rw->steps += 1 + m->nin;
        for (int k = 0; k < m->nin; k++) {
            tg_var *v = m->in[k];
            if (--rw->vi[v->id].uses > 0 || v->kind != TG_VAR_NODE) continue;
            tg_node *p = v->node;
            if (!is_live(rw, p) || !unused(rw, p)) continue;
            rw->flags[p->id] &= (uint8_t)~LIVE;
            if (!spush(rw, p)) {
                oom(rw);
                return;
            }
        }
    }
}

/* Makes n live again with everything it needs (a rule returned or built on a dead value). */
static void revive(tg_rw *rw, tg_node *n) {
    if (is_live(rw, n)) return;
    rw->nstack = 0;
    rw->flags[n->id] |= LIVE;
    if (!spush(rw, n)) {
        oom(rw);
        return;
    }
    while (rw->nstack > 0) {
        tg_node *m = rw->stack[--rw->nstack];
        rw->steps++;
        for (int k = 0; k < m->nin; k++) {
            tg_var *v = m->in[k];
            if (!add_use(rw, v, m, k)) {
                oom(rw);
                return;
            }
            if (v->kind == TG_VAR_NODE && !is_live(rw, v->node)) {
                rw->flags[v->node->id] |= LIVE;
                if (!spush(rw, v->node)) {
                    oom(rw);
                    return;
                }
            }
        }
        wpush(rw, m);
    }
}

/* Registers the nodes and variables created since the last call (by a rule). */
static void register_new(tg_rw *rw) {
    tg_graph *g = rw->g;
    if (rw->st != TG_OK) return;
    if (!grow_nodes(rw, g->nodes.n + 1) || !grow_vars(rw, g->vars.n + 1)) {
        oom(rw);
        return;
    }
    for (; rw->nseen < g->nodes.n; rw->nseen++) {
        tg_node *n = g->nodes.items[rw->nseen];
        rw->flags[n->id] = LIVE;
        for (int k = 0; k < n->nin; k++) {
            tg_var *v = n->in[k];
            if (v->kind == TG_VAR_NODE && !is_live(rw, v->node)) revive(rw, v->node);
            if (!add_use(rw, v, n, k)) {
                oom(rw);
                return;
            }
        }
    }
}

/* Re-infers u with its current inputs: true when it gives exactly u's output types. */
static bool infer_same(tg_rw *rw, tg_node *u) {
    const tg_op_def *op = tg_op_table[u->op];
    rw->steps++;
    if (u->nin > rw->captin) {
        int cap = rw->captin;
        if (!grow(rw->ctx, (void **)&rw->tin, &cap, u->nin, sizeof *rw->tin)) {
            oom(rw); /* the caller keeps the old use; tg_rw_replace returns the status */
            return false;
        }
        rw->captin = cap;
    }
    for (int k = 0; k < u->nin; k++) rw->tin[k] = u->in[k]->type;
    tg_infer ic = {.op = op,
                   .in = rw->tin,
                   .nin = u->nin,
                   .vars = u->in,
                   .attrs = u->attrs,
                   .out = rw->tout,
                   .nout = op->nout};
    if (op->infer(&ic) != TG_OK || ic.nout != u->nout) return false;
    for (int i = 0; i < u->nout; i++)
        if (!tg_type_equal(&rw->tout[i], &u->out[i]->type) ||
            rw->tout[i].weak != u->out[i]->type.weak)
            return false;
    return true;
}

/* True when `from` (built by the running rule) depends on `target`. Only the nodes the
 * rule built are walked: older nodes cannot depend on the node being rewritten unless
 * the rule returned one of its users, which the contract forbids (and verify catches). */
static bool depends_new(tg_rw *rw, tg_var *from, tg_var *target) {
    if (from == target) return true;
    if (from->kind != TG_VAR_NODE || from->node->id < rw->mark) return false;
    bool found = false;
    int base = rw->nstack;
    if (!spush(rw, from->node)) return oom(rw), false;
    rw->flags[from->node->id] |= VISIT;
    int top = rw->nstack;
    for (int i = base; i < top && !found; i++) {
        tg_node *m = rw->stack[i];
        rw->steps++;
        for (int k = 0; k < m->nin && !found; k++) {
            tg_var *v = m->in[k];
            if (v == target) found = true;
            if (v->kind != TG_VAR_NODE || v->node->id < rw->mark ||
                (rw->flags[v->node->id] & VISIT))
                continue;
            rw->flags[v->node->id] |= VISIT;
            if (!spush(rw, v->node)) {
                oom(rw);
                break;
            }
            top = rw->nstack;
        }
    }
    for (int i = base; i < rw->nstack; i++) rw->flags[rw->stack[i]->id] &= (uint8_t)~VISIT;
    rw->nstack = base;
    return found;
}

static bool owns(const tg_graph *g, const tg_var *v) {
    return v && v->id >= 0 && v->id < g->vars.n && g->vars.items[v->id] == v;
}

tg_status tg_rw_replace(tg_rw *rw, tg_var *old, tg_var *by) {
    tg_graph *g = rw->g;
    char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
    if (rw->st != TG_OK) return rw->st;
    if (old == by) return TG_OK;
    if (!owns(g, old) || !owns(g, by))
        return fail(rw, TG_EINTERNAL,
                    "rewrite rule '%s' (pass %s): replacement with a "
                    "variable of another graph",
                    rule_name(rw), rw->pass);
    if (!tg_rw_same_type(old, by))
        return fail(rw, TG_EINTERNAL,
                    "rewrite rule '%s' (pass %s): refused to replace a %s%s by a %s%s (a "
                    "rewrite must keep the type)",
                    rule_name(rw), rw->pass, old->type.weak ? "weak " : "",
                    tg_type_str(&old->type, a, sizeof a), by->type.weak ? "weak " : "",
                    tg_type_str(&by->type, b, sizeof b));
    register_new(rw);
    if (rw->st != TG_OK) return rw->st;
    if (by->kind == TG_VAR_NODE && !is_live(rw, by->node)) revive(rw, by->node);
    if (depends_new(rw, by, old))
        return fail(rw, TG_EINTERNAL,
                    "rewrite rule '%s' (pass %s): the replacement depends "
                    "on the value it replaces",
                    rule_name(rw), rw->pass);
    /* only a constant (appearing or disappearing) can change what a user infers */
    bool check = by->kind == TG_VAR_CONST || old->kind == TG_VAR_CONST;
    int e = rw->vi[old->id].head, kept = -1;
    rw->vi[old->id].head = -1;
    while (e >= 0) {
        use *en = &rw->pool[e];
        int next = en->next;
        rw->steps++;
        tg_node *u = en->node;
        if (is_live(rw, u) && u->in[en->k] == old) {
            u->in[en->k] = by;
            if (check && !infer_same(rw, u)) {
                u->in[en->k] = old;
                en->next = kept;
                kept = e;
            } else {
                en->next = rw->vi[by->id].head;
                rw->vi[by->id].head = e;
                rw->vi[old->id].uses--;
                rw->vi[by->id].uses++;
                rw->redirected = true;
                wpush(rw, u);
            }
        }
        e = next;
    }
    rw->vi[old->id].head = kept;
    if (rw->vi[old->id].outuses > 0) {
        rw->steps += g->outputs.n;
        for (int i = 0; i < g->outputs.n; i++) {
            if (g->outputs.items[i] != old) continue;
            g->outputs.items[i] = by;
            rw->vi[old->id].outuses--;
            rw->vi[by->id].outuses++;
            rw->vi[old->id].uses--;
            rw->vi[by->id].uses++;
            rw->redirected = true;
        }
    }
    /* a value the user named keeps its name where the replacement has none */
    if (old->name && !by->name && by->kind == TG_VAR_NODE && rw->vi[old->id].uses == 0)
        by->name = old->name;
    if (old->kind == TG_VAR_NODE) maybe_kill(rw, old->node);
    return rw->st;
}

tg_graph *tg_rw_graph(tg_rw *rw) { return rw->g; }

int tg_rw_use_count(tg_rw *rw, const tg_var *v) {
    return v->id >= 0 && v->id < rw->capv ? rw->vi[v->id].uses : 0;
}

bool tg_rw_is_output(tg_rw *rw, const tg_var *v) {
    return v->id >= 0 && v->id < rw->capv && rw->vi[v->id].outuses > 0;
}

/* ---- hashing: nodes and constants ---- */

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t dbl_bits(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static uint64_t hash_node(const tg_node *n) {
    const tg_op_def *op = tg_op_table[n->op];
    uint64_t h =
        mix(mix(mix(0x84222325cbf29ce4ull, (uint64_t)n->op), (uint64_t)n->nin), (uint64_t)n->nout);
    if (n->device) h = mix_bytes(h, n->device, strlen(n->device)); /* by name, not address */
    for (int k = 0; k < n->nin; k++) h = mix(h, (uint64_t)n->in[k]->id);
    for (int j = 0; j < op->nattrs; j++) {
        const tg_aval *a = &n->attrs[j];
        h = mix(h, (uint64_t)a->kind);
        if (a->kind == TG_ATTR_DATA) { /* op data hashes by its content (its table's hash) */
            h = mix(h, tg_opdata_hash(a->data));
            continue;
        }
        switch (a->kind) {
        case TG_ATTR_INT:
        case TG_ATTR_BOOL:
            h = mix(h, (uint64_t)a->i);
            break;
        case TG_ATTR_FLOAT:
            h = mix(h, dbl_bits(a->f));
            break;
        case TG_ATTR_STR:
            if (a->s) h = mix_bytes(h, a->s, strlen(a->s));
            break;
        case TG_ATTR_FUNC: /* the same function is the same graph */
            h = mix(h, (uint64_t)(uintptr_t)a->fn);
            break;
        case TG_ATTR_INTS:
            for (int k = 0; k < a->n; k++)
                h = mix(h, tg_aval_none_at(a, k) ? 0x6e6f6e65u : (uint64_t)a->ints[k]);
            break;
        case TG_ATTR_FLOATS:
            for (int k = 0; k < a->n; k++) h = mix(h, dbl_bits(a->floats[k]));
            break;
        case TG_ATTR_NONE:
            break;
        }
    }
    return h ? h : 1;
}

static bool aval_same(const tg_aval *a, const tg_aval *b) {
    if (a->kind != b->kind) return false;
    if (a->kind == TG_ATTR_DATA) return tg_opdata_equal(a->data, b->data); /* by content */
    switch (a->kind) {
    case TG_ATTR_NONE:
        return true;
    case TG_ATTR_INT:
    case TG_ATTR_BOOL:
        return a->i == b->i;
    case TG_ATTR_FLOAT:
        return dbl_bits(a->f) == dbl_bits(b->f);
    case TG_ATTR_STR:
        return a->s && b->s ? strcmp(a->s, b->s) == 0 : a->s == b->s;
    case TG_ATTR_FUNC:
        return a->fn == b->fn;
    case TG_ATTR_INTS:
        return a->n == b->n && tg_aval_same_nones(a, b, a->n) &&
               (a->n == 0 || memcmp(a->ints, b->ints, sizeof *a->ints * (size_t)a->n) == 0);
    case TG_ATTR_FLOATS:
        if (a->n != b->n) return false;
        for (int k = 0; k < a->n; k++)
            if (dbl_bits(a->floats[k]) != dbl_bits(b->floats[k])) return false;
        return true;
    }
    return false;
}

bool tg_rw_aval_same(const tg_aval *a, const tg_aval *b) { return aval_same(a, b); }

/* Equal nodes: same op, inputs, attributes and types, and the same device (two equal
 * computations on two devices stay two: merging them would move one's work). */
static bool node_same(const tg_node *a, const tg_node *b) {
    if (a->op != b->op || a->nin != b->nin || a->nout != b->nout) return false;
    if (!tg_ir_same_device(a->device, b->device)) return false;
    for (int k = 0; k < a->nin; k++)
        if (a->in[k] != b->in[k]) return false;
    const tg_op_def *op = tg_op_table[a->op];
    for (int j = 0; j < op->nattrs; j++)
        if (!aval_same(&a->attrs[j], &b->attrs[j])) return false;
    for (int i = 0; i < a->nout; i++)
        if (!tg_rw_same_type(a->out[i], b->out[i])) return false;
    return true;
}

/* Element bytes of a tensor in C order, fed to fn (contiguous: one call). */
static uint64_t hash_tensor(uint64_t h, const tg_tensor *t) {
    size_t es = tg_dtype_size(t->dtype);
    int64_t n = tg_tensor_size(t);
    if (n == 0) return h;
    if (tg_tensor_is_contiguous(t)) return mix_bytes(h, tg_tensor_data(t), (size_t)n * es);
    int64_t idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        h = mix_bytes(h, tg_tensor_at(t, idx), es);
        tg_index_next(t->ndim, t->shape, idx);
    }
    return h;
}

static bool tensor_same_bytes(const tg_tensor *a, const tg_tensor *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    size_t es = tg_dtype_size(a->dtype);
    int64_t n = tg_tensor_size(a);
    if (tg_tensor_is_contiguous(a) && tg_tensor_is_contiguous(b))
        return n == 0 || memcmp(tg_tensor_data(a), tg_tensor_data(b), (size_t)n * es) == 0;
    int64_t idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(tg_tensor_at(a, idx), tg_tensor_at(b, idx), es) != 0) return false;
        tg_index_next(a->ndim, a->shape, idx);
    }
    return true;
}

static uint64_t hash_const(tg_rw *rw, const tg_var *c) {
    if (rw->vi[c->id].hash) return rw->vi[c->id].hash;
    uint64_t h = mix(mix(mix(0x6c62272e07bb0142ull, c->type.dtype), c->type.weak),
                     (uint64_t)(unsigned char)c->lit);
    h = mix(h, c->type.ndim);
    for (int i = 0; i < c->type.ndim; i++) h = mix(h, (uint64_t)c->type.shape[i]);
    h = hash_tensor(h, c->value);
    h = h ? h : 1;
    rw->vi[c->id].hash = h;
    return h;
}

static bool const_same(const tg_var *a, const tg_var *b) {
    return a->kind == TG_VAR_CONST && b->kind == TG_VAR_CONST && tg_rw_same_type(a, b) &&
           a->lit == b->lit && a->value && b->value && tensor_same_bytes(a->value, b->value);
}

static bool table_insert(tg_rw *rw, table *t, uint64_t h, void *p) {
    if ((t->n + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 256;
        slot *ns = tg_mem_calloc(rw->ctx, ncap * sizeof *ns);
        if (!ns) return false;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->s[i].p) continue;
            size_t j = t->s[i].h & (ncap - 1);
            while (ns[j].p) j = (j + 1) & (ncap - 1), rw->steps++;
            ns[j] = t->s[i];
        }
        tg_mem_free(rw->ctx, t->s, t->cap * sizeof *t->s);
        t->s = ns;
        t->cap = ncap;
    }
    size_t j = h & (t->cap - 1);
    while (t->s[j].p) j = (j + 1) & (t->cap - 1), rw->steps++;
    t->s[j] = (slot){h, p};
    t->n++;
    return true;
}

tg_node *tg_rw_find_equal(tg_rw *rw, tg_node *n) {
    if (rw->st != TG_OK) return NULL;
    uint64_t h = hash_node(n);
    table *t = &rw->nodes;
    bool present = false;
    size_t reuse = SIZE_MAX; /* the first slot of a dead node on the probe path */
    for (size_t j = t->cap ? h & (t->cap - 1) : 0; t->cap && t->s[j].p;
         j = (j + 1) & (t->cap - 1)) {
        tg_node *m = t->s[j].p;
        rw->steps++;
        if (!is_live(rw, m)) {
            if (reuse == SIZE_MAX) reuse = j;
            continue;
        }
        if (t->s[j].h != h) continue;
        if (m == n) {
            present = true;
            continue;
        }
        if (node_same(m, n)) return m;
    }
    if (present) return NULL;
    if (reuse != SIZE_MAX) /* a dead node is never found again: its slot is free */
        t->s[reuse] = (slot){h, n};
    else if (!table_insert(rw, t, h, n))
        oom(rw);
    return NULL;
}

tg_var *tg_rw_find_equal_const(tg_rw *rw, tg_var *c) {
    if (rw->st != TG_OK || c->kind != TG_VAR_CONST || !c->value) return c;
    if (!grow_vars(rw, rw->g->vars.n + 1)) {
        oom(rw);
        return c;
    }
    uint64_t h = hash_const(rw, c);
    table *t = &rw->consts;
    for (size_t j = t->cap ? h & (t->cap - 1) : 0; t->cap && t->s[j].p;
         j = (j + 1) & (t->cap - 1)) {
        tg_var *d = t->s[j].p;
        rw->steps++;
        if (t->s[j].h != h) continue;
        if (d == c) return c;
        if (const_same(d, c)) return d;
    }
    if (!table_insert(rw, t, h, c)) oom(rw);
    return c;
}

/* ---- helpers for rules ---- */

bool tg_rw_is_constant(const tg_var *v) { return v && v->kind == TG_VAR_CONST && v->value; }

#define CANNOT_FAIL_BUDGET 64 /* nodes tg_rw_cannot_fail visits before it says false */

/* Whether the elementwise node n's inputs surely broadcast together: on every axis
 * (right-aligned) the extents are equal and static, or all but one are a static 1. A '?'
 * beside any other extent may not fit at run time. */
static bool ew_fits(const tg_node *n) {
    int nd = 0;
    for (int k = 0; k < n->nin; k++)
        if (n->in[k]->type.ndim > nd) nd = n->in[k]->type.ndim;
    for (int d = 1; d <= nd; d++) {
        int64_t e = 1; /* the extent every input other than a 1 must have */
        int others = 0;
        for (int k = 0; k < n->nin; k++) {
            const tg_type *t = &n->in[k]->type;
            if (t->ndim < d || t->shape[t->ndim - d] == 1) continue;
            int64_t x = t->shape[t->ndim - d];
            if (others++ == 0)
                e = x;
            else if (x < 0 || e < 0 || x != e)
                return false;
        }
    }
    return true;
}

/* Whether a tensor of type t can exist: its static extents (a '?' counted as 1, an
 * existing tensor's extent) stay within the library's size limit (tg_shape_size). */
static bool size_fits(const tg_type *t) {
    int64_t shape[TG_MAX_DIMS], n;
    for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d] < 0 ? 1 : t->shape[d];
    return tg_shape_size(t->ndim, shape, &n);
}

/* A node that cannot fail at run time given values that cannot. Its outputs' sizes fit,
 * and it is:
 *  - an elementwise op that checks nothing beyond its types (tg_ew_ref) whose inputs
 *    surely broadcast;
 *  - a transpose or expand_dims;
 *  - a plain reduction (tg_reduce_plain: sum, mean, prod, max, min) whose record has an
 *    identity, or, without one (max, min), over static extents, none 0;
 *  - dot or matmul of matrices and vectors whose contracted extents are static and equal;
 *  - a view between static types (broadcast_to, squeeze, reshape). */
static bool node_total(const tg_node *n) {
    for (int k = 0; k < n->nout; k++)
        if (!size_fits(&n->out[k]->type)) return false;
    const tg_op_def *op = tg_op_table[n->op];
    if (op->kind == TG_KIND_ELEMWISE) return op->ref == tg_ew_ref && ew_fits(n);
    const tg_type *a = &n->in[0]->type;
    if (tg_reduce_plain(op)) {
        for (int d = 0; d < a->ndim && op->reduce.nonempty; d++)
            if (a->shape[d] <= 0) return false;
        return true;
    }
    switch (n->op) {
    case TG_OP_TRANSPOSE:
    case TG_OP_EXPAND_DIMS:
        return true;
    case TG_OP_DOT:
    case TG_OP_MATMUL: {
        const tg_type *b = &n->in[1]->type;
        if (n->nin != 2 || a->ndim < 1 || a->ndim > 2 || b->ndim < 1 || b->ndim > 2) return false;
        int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim == 1 ? 0 : b->ndim - 2];
        return ka >= 0 && ka == kb;
    }
    case TG_OP_BROADCAST_TO:
    case TG_OP_SQUEEZE:
    case TG_OP_RESHAPE:
        for (int k = 0; k < n->nin; k++)
            if (!tg_type_known(&n->in[k]->type)) return false;
        return tg_type_known(&n->out[0]->type);
    default:
        return false;
    }
}

bool tg_rw_cannot_fail(const tg_var *v) {
    const tg_var *stack[CANNOT_FAIL_BUDGET];
    const tg_node *seen[CANNOT_FAIL_BUDGET]; /* nodes checked (shared ones once) */
    int sp = 0, nseen = 0;
    stack[sp++] = v;
    while (sp > 0) {
        const tg_var *u = stack[--sp];
        if (u->kind != TG_VAR_NODE) continue; /* an input or a constant */
        const tg_node *n = u->node;
        bool again = false;
        for (int i = 0; i < nseen && !again; i++) again = seen[i] == n;
        if (again) continue;
        if (nseen == CANNOT_FAIL_BUDGET || !node_total(n)) return false;
        seen[nseen++] = n;
        for (int k = 0; k < n->nin; k++) {
            if (n->in[k]->kind != TG_VAR_NODE) continue;
            if (sp == CANNOT_FAIL_BUDGET) return false;
            stack[sp++] = n->in[k];
        }
    }
    return true;
}

bool tg_rw_const_value(const tg_var *v, double *x) {
    if (!tg_rw_is_constant(v)) return false;
    const tg_tensor *t = v->value;
    int64_t n = tg_tensor_size(t);
    if (n == 0) return false;
    int64_t idx[TG_MAX_DIMS] = {0};
    if (tg_dtype_is_float(t->dtype)) {
        double first = tg_load_f64(tg_tensor_at(t, idx), t->dtype);
        for (int64_t i = 1; i < n; i++) {
            tg_index_next(t->ndim, t->shape, idx);
            double y = tg_load_f64(tg_tensor_at(t, idx), t->dtype);
            if (!(y == first) && dbl_bits(y) != dbl_bits(first)) return false;
        }
        *x = first;
        return true;
    }
    /* integers and bool compare exactly; values beyond 2^53 are not a double */
    int64_t first = tg_load_i64(tg_tensor_at(t, idx), t->dtype);
    const int64_t big = (int64_t)1 << 53;
    if (first > big || first < -big) return false;
    for (int64_t i = 1; i < n; i++) {
        tg_index_next(t->ndim, t->shape, idx);
        if (tg_load_i64(tg_tensor_at(t, idx), t->dtype) != first) return false;
    }
    *x = (double)first;
    return true;
}

bool tg_rw_is_const(const tg_var *v, double x) {
    double y;
    return tg_rw_const_value(v, &y) && y == x;
}

bool tg_rw_is_signed_zero(const tg_var *v, bool negative) {
    if (!tg_rw_is_constant(v)) return false;
    const tg_tensor *t = v->value;
    bool fl = tg_dtype_is_float(t->dtype);
    int64_t n = tg_tensor_size(t);
    if (n == 0) return false;
    int64_t idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        double y = tg_load_f64(tg_tensor_at(t, idx), t->dtype);
        if (y != 0.0 || (fl && (signbit(y) != 0) != negative)) return false;
        tg_index_next(t->ndim, t->shape, idx);
    }
    return true;
}

bool tg_rw_same_type(const tg_var *a, const tg_var *b) {
    return tg_type_equal(&a->type, &b->type) && a->type.weak == b->type.weak;
}

tg_var *tg_rw_const_fill(tg_rw *rw, const tg_type *t, double x) {
    tg_graph *g = rw->g;
    if (g->status != TG_OK) return NULL;
    if (!tg_type_known(t) || (t->weak && t->ndim != 0))
        return tg_ir_fail(g, TG_EINTERNAL, "rewrite: constant of a non-static or weak type");
    tg_tensor *v = tg_tensor_empty(g->ctx, (tg_dtype)t->dtype, t->ndim, t->shape);
    if (!v) return tg_ir_fail(g, TG_ENOMEM, "out of memory");
    int64_t n = tg_tensor_size(v);
    size_t es = tg_dtype_size(v->dtype);
    char *p = tg_tensor_data(v);
    for (int64_t i = 0; i < n; i++) tg_store_f64(p + (size_t)i * es, v->dtype, x);
    char lit = 0;
    if (t->weak)
        lit = tg_dtype_is_float((tg_dtype)t->dtype) ? 'f' : t->dtype == TG_DT_BOOL ? 'b' : 'i';
    tg_var *c = tg_ir_const(g, v, lit);
    if (c) c->type.weak = t->weak;
    return c;
}

/* ---- the run ---- */

static bool build_index(tg_rw *rw) {
    int nops = TG_OP_COUNT;
    rw->ridx = tg_mem_calloc(rw->ctx, sizeof *rw->ridx * (size_t)(nops + 1));
    rw->rlist = tg_mem_calloc(rw->ctx, sizeof *rw->rlist * (size_t)(rw->nrules * nops + 1));
    rw->applied = tg_mem_calloc(rw->ctx, sizeof *rw->applied * (size_t)(rw->nrules + 1));
    rw->stat = tg_mem_calloc(rw->ctx, sizeof *rw->stat * (size_t)(rw->nrules + 1));
    if (!rw->ridx || !rw->rlist || !rw->applied || !rw->stat) return false;
    int n = 0;
    for (int o = 0; o < nops; o++) {
        rw->ridx[o] = n;
        for (int r = 0; r < rw->nrules; r++)
            if (rw->rules[r].op == o || rw->rules[r].op < 0) rw->rlist[n++] = r;
    }
    rw->ridx[nops] = n;
    return true;
}

/* The report row of rule r (name and pass), added when missing; -1 without a report. */
static int stat_row(tg_rw *rw, int r) {
    tg_rw_report *rep = rw->report;
    if (!rep) return -1;
    for (int i = 0; i < rep->nrules; i++)
        if (strcmp(rep->rules[i].name, rw->rules[r].name) == 0 &&
            strcmp(rep->rules[i].pass, rw->pass) == 0)
            return i;
    if (rep->nrules == rep->caprules &&
        !grow(rw->ctx, (void **)&rep->rules, &rep->caprules, rep->nrules + 1, sizeof *rep->rules))
        return -1;
    rep->rules[rep->nrules] = (tg_rule_stats){.name = rw->rules[r].name, .pass = rw->pass};
    return rep->nrules++;
}

static void rw_fini(tg_rw *rw) {
    tg_ctx *c = rw->ctx;
    int nops = TG_OP_COUNT;
    if (rw->ridx) tg_mem_free(c, rw->ridx, sizeof *rw->ridx * (size_t)(nops + 1));
    if (rw->rlist) tg_mem_free(c, rw->rlist, sizeof *rw->rlist * (size_t)(rw->nrules * nops + 1));
    if (rw->applied) tg_mem_free(c, rw->applied, sizeof *rw->applied * (size_t)(rw->nrules + 1));
    if (rw->stat) tg_mem_free(c, rw->stat, sizeof *rw->stat * (size_t)(rw->nrules + 1));
    tg_mem_free(c, rw->flags, (size_t)rw->capn * sizeof *rw->flags);
    tg_mem_free(c, rw->vi, (size_t)rw->capv * sizeof *rw->vi);
    tg_mem_free(c, rw->pool, (size_t)rw->cappool * sizeof *rw->pool);
    tg_mem_free(c, rw->work, (size_t)rw->capwork * sizeof *rw->work);
    tg_mem_free(c, rw->stack, (size_t)rw->capstack * sizeof *rw->stack);
    tg_mem_free(c, rw->nodes.s, rw->nodes.cap * sizeof *rw->nodes.s);
    tg_mem_free(c, rw->consts.s, rw->consts.cap * sizeof *rw->consts.s);
    tg_mem_free(c, rw->tin, (size_t)rw->captin * sizeof *rw->tin);
    if (rw->tout) tg_mem_free(c, rw->tout, sizeof *rw->tout * TG_MAX_OUTS);
}

/* Live nodes in topological order seed the worklist (popped inputs first). */
static tg_status seed(tg_rw *rw) {
    tg_graph *g = rw->g;
    int norder = 0;
    tg_node **order = tg_ir_toposort(g, &norder);
    if (!order) return fail(rw, tg_rw_error_status(), "%s", tg_last_error());
    bool ok = grow_nodes(rw, g->nodes.n + 1) && grow_vars(rw, g->vars.n + 1);
    for (int i = 0; ok && i < norder; i++) rw->flags[order[i]->id] = LIVE;
    for (int i = 0; ok && i < norder; i++)
        for (int k = 0; ok && k < order[i]->nin; k++)
            ok = add_use(rw, order[i]->in[k], order[i], k);
    for (int i = 0; ok && i < g->outputs.n; i++) {
        tg_var *v = g->outputs.items[i];
        rw->vi[v->id].outuses++;
        rw->vi[v->id].uses++;
    }
    for (int i = norder - 1; ok && i >= 0; i--) {
        wpush(rw, order[i]);
        ok = rw->st == TG_OK;
    }
    rw->nseen = g->nodes.n;
    rw->limit = 16L * norder + 1000;
    rw->steps += norder + g->outputs.n; /* the toposort, the output slots */
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return ok ? rw->st : oom(rw);
}

/* Tries the rules of n's op in order until one rewrites it. */
static void visit(tg_rw *rw, tg_node *n) {
    tg_graph *g = rw->g;
    int from = rw->ridx[n->op], to = rw->ridx[n->op + 1];
    for (int i = from; i < to && rw->st == TG_OK && is_live(rw, n); i++) {
        int r = rw->rlist[i];
        const tg_rule *rule = &rw->rules[r];
        int line = g->line, col = g->col;
        const char *device = g->device;
        rw->cur = r;
        rw->mark = g->nodes.n;
        rw->redirected = false;
        g->line = n->line; /* nodes the rule builds take the position of the one it rewrites */
        g->col = n->col;
        g->device = n->device; /* and its device */
        double t0 = rw->report ? now() : 0.0;
        rw->steps++;
        tg_var *v = rule->fn(rw, n);
        if (rw->report && rw->stat[r] >= 0) {
            tg_rule_stats *s = &rw->report->rules[rw->stat[r]];
            s->tried++;
            s->seconds += now() - t0;
        }
        g->line = line;
        g->col = col;
        g->device = device;
        if (g->status != TG_OK) {
            fail(rw, g->status == TG_ENOMEM ? TG_ENOMEM : TG_EINTERNAL,
                 "rewrite rule '%s' (pass %s) failed on node %d (%s): %s", rule->name, rw->pass,
                 n->id, tg_op_table[n->op]->name, g->error);
            break;
        }
        register_new(rw);
        rw->steps += 2L * (g->nodes.n - rw->mark);
        if (v && v != n->out[0] && rw->st == TG_OK) tg_rw_replace(rw, n->out[0], v);
        if (rw->st != TG_OK) break;
        /* nodes the rule built but nothing uses go at once; the others are visited next */
        for (int id = g->nodes.n - 1; id >= rw->mark; id--) maybe_kill(rw, g->nodes.items[id]);
        maybe_kill(rw, n);
        for (int id = g->nodes.n - 1; id >= rw->mark; id--) wpush(rw, g->nodes.items[id]);
        rw->cur = -1;
        if (!rw->redirected) continue;
        rw->applied[r]++;
        if (rw->report && rw->stat[r] >= 0) rw->report->rules[rw->stat[r]].applied++;
        if (++rw->total > rw->limit) {
            int worst = r;
            for (int q = 0; q < rw->nrules; q++)
                if (rw->applied[q] > rw->applied[worst]) worst = q;
            fail(rw, TG_ELIMIT,
                 "rewrite: pass '%s' reached no fixed point after %ld rewrites (rule '%s' "
                 "applied %ld times): rules that undo each other?",
                 rw->pass, rw->total, rw->rules[worst].name, rw->applied[worst]);
        }
        break;
    }
    rw->cur = -1;
}

tg_status tg_rw_apply(tg_graph *g, const char *pass, const tg_rule *rules, int nrules,
                      tg_rw_report *report) {
    if (!g) return tg_set_error(TG_EINVAL, "rewrite: graph is NULL");
    if (g->status != TG_OK) return tg_set_error(g->status, "%s", g->error);
    if (nrules <= 0) return TG_OK;
    tg_rw rw = {.g = g,
                .ctx = g->ctx,
                .pass = pass ? pass : "?",
                .rules = rules,
                .nrules = nrules,
                .report = report,
                .cur = -1};
    rw.tout = tg_mem_alloc(g->ctx, sizeof *rw.tout * TG_MAX_OUTS);
    if (!rw.tout || !build_index(&rw)) {
        oom(&rw);
        goto done;
    }
    for (int r = 0; r < nrules; r++) rw.stat[r] = stat_row(&rw, r);
    if (seed(&rw) != TG_OK) goto done;
    while (rw.nwork > 0 && rw.st == TG_OK) {
        tg_node *n = rw.work[--rw.nwork];
        rw.flags[n->id] &= (uint8_t)~QUEUED;
        if (!is_live(&rw, n)) continue;
        rw.visits++;
        rw.steps++;
        visit(&rw, n);
    }
    if (report) {
        for (int i = report->npasses - 1; i >= 0; i--) {
            if (strcmp(report->passes[i].name, rw.pass) != 0) continue;
            report->passes[i].visits += rw.visits;
            report->passes[i].work += rw.steps;
            report->passes[i].applied += rw.total;
            break;
        }
    }
done:;
    tg_status st = rw.st;
    rw_fini(&rw);
    return st;
}

/* ---- the report ---- */

void tg_rw_report_free(tg_ctx *ctx, tg_rw_report *r) {
    if (!r) return;
    tg_mem_free(ctx, r->rules, (size_t)r->caprules * sizeof *r->rules);
    r->rules = NULL;
    r->nrules = r->caprules = 0;
}

void tg_rw_report_print(const tg_rw_report *r, const char *func, FILE *f) {
    fprintf(f, "compile-time report for '%s': %d nodes in, %d out, %.3f ms\n", func ? func : "?",
            r->nodes_in, r->nodes_out, 1e3 * r->total_seconds);
    fprintf(f, "  %-14s %9s %9s %7s %7s %7s %8s %9s\n", "step", "ms", "rules ms", "before", "after",
            "visits", "rewrites", "work");
    if (r->copy_seconds > 0) fprintf(f, "  %-14s %9.3f\n", "(copy)", 1e3 * r->copy_seconds);
    for (int i = 0; i < r->npasses + r->placed; i++) {
        const tg_pass_stats *p = i < r->npasses ? &r->passes[i] : &r->place;
        double rules = 0;
        for (int k = 0; k < r->nrules; k++)
            if (strcmp(r->rules[k].pass, p->name) == 0) rules += r->rules[k].seconds;
        if (i == r->npasses) /* placement comes after the pipeline's final compaction */
            fprintf(f, "  %-14s %9.3f\n", "(compact)", 1e3 * r->compact_seconds);
        fprintf(f, "  %-14s %9.3f %9.3f %7d %7d %7ld %8ld %9ld\n", p->name, 1e3 * p->seconds,
                1e3 * rules, p->nodes_before, p->nodes_after, p->visits, p->applied, p->work);
    }
    if (!r->placed) fprintf(f, "  %-14s %9.3f\n", "(compact)", 1e3 * r->compact_seconds);
    if (r->nrules == 0) return;
    fprintf(f, "  %-22s %-14s %8s %8s %9s\n", "rule", "pass", "tried", "applied", "ms");
    for (int i = 0; i < r->nrules; i++) {
        const tg_rule_stats *s = &r->rules[i];
        fprintf(f, "  %-22s %-14s %8ld %8ld %9.3f\n", s->name, s->pass, s->tried, s->applied,
                1e3 * s->seconds);
    }
}
