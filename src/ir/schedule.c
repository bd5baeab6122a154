/* schedule.c - the program order of split collectives (op.h, "scheduling"): tg_ir_schedule
 * moves the nodes of TG_SCHED_EARLY ops (psum_start) as early as their inputs allow and
 * those of TG_SCHED_LATE ops (psum_wait) as late as their users allow, so that the
 * computation between a start and its wait overlaps the exchange (docs/mpi.md, "Bucketed
 * gradients").
 *
 * A depth-first order from the outputs (tg_ir_toposort) computes each output's cone in
 * turn, and so places a start right before its wait, both where the first output needing
 * the bucket is computed. Instead:
 *  1. the starts, taken in the order their cones grow (the fewest ancestors first: the
 *     bucket a backward pass completes first), each emit what they still need, in the
 *     depth-first order, then themselves; so do the blocking collectives that need no
 *     wait (a pmax, a lone psum the bucket pass left), since a blocking collective first
 *     waits for every all-reduce the rank has in flight (src/ops/collective.c) and must
 *     not come after a start it does not need;
 *  2. the rest follows in the depth-first order, each wait held back until the first node
 *     reading it (or the end).
 * Invariants: the result is a topological order of the same nodes; it depends only on the
 * graph (never on addresses or timing), so every rank of a pmap runs its collectives in
 * the same order; without such nodes the order is left as it is.
 */
#include "op.h"

#include <string.h>

typedef struct sched {
    const tg_graph *g;
    tg_node **order, **out;
    int n, len;
    int *pos;          /* per node id: index in order, -1 for nodes not in it */
    uint8_t *done;     /* per node id: emitted */
    uint8_t *held;     /* per node id: a wait held back */
    int *mark, *stack; /* per node id: the cone stamp; a walk's stack */
} sched;

static int producer(const sched *s, const tg_var *v) {
    return v->kind == TG_VAR_NODE && s->pos[v->node->id] >= 0 ? v->node->id : -1;
}

/* Marks the cone of order[i] (itself and every ancestor in the order) with `stamp`; its
 * size. *late: whether a wait is among the ancestors. */
static int cone(sched *s, int i, int stamp, bool *late) {
    int sp = 0, size = 0;
    *late = false;
    s->stack[sp++] = s->order[i]->id;
    s->mark[s->order[i]->id] = stamp;
    while (sp > 0) {
        const tg_node *m = s->g->nodes.items[s->stack[--sp]];
        size++;
        if (m != s->order[i] && tg_op_table[m->op]->sched == TG_SCHED_LATE) *late = true;
        for (int k = 0; k < m->nin; k++) {
            int p = producer(s, m->in[k]);
            if (p >= 0 && s->mark[p] != stamp) {
                s->mark[p] = stamp;
                s->stack[sp++] = p;
            }
        }
    }
    return size;
}

static void emit(sched *s, tg_node *m) {
    s->done[m->id] = 1;
    s->out[s->len++] = m;
}

/* Emits the held waits m reads (and those they read), then m. */
static void emit_after_held(sched *s, tg_node *m) {
    for (int k = 0; k < m->nin; k++) {
        int p = producer(s, m->in[k]);
        if (p >= 0 && s->held[p]) {
            s->held[p] = 0;
            emit_after_held(s, s->g->nodes.items[p]);
        }
    }
    emit(s, m);
}

tg_status tg_ir_schedule(const tg_graph *g, tg_node **order, int n) {
    int nstart = 0;
    for (int i = 0; i < n; i++) nstart += tg_op_table[order[i]->op]->sched == TG_SCHED_EARLY;
    if (nstart == 0) return TG_OK; /* (a wait without its start is no program) */
    tg_ctx *ctx = g->ctx;
    size_t nn = (size_t)g->nodes.n + 1;
    sched s = {.g = g, .order = order, .n = n};
    s.out = tg_mem_alloc(ctx, sizeof *s.out * (size_t)(n + 1));
    s.pos = tg_mem_alloc(ctx, sizeof *s.pos * nn);
    s.mark = tg_mem_alloc(ctx, sizeof *s.mark * nn);
    s.stack = tg_mem_alloc(ctx, sizeof *s.stack * nn);
    s.done = tg_mem_calloc(ctx, nn);
    s.held = tg_mem_calloc(ctx, nn);
    int *starts = tg_mem_alloc(ctx, sizeof *starts * (size_t)(n + 1));
    int *size = tg_mem_alloc(ctx, sizeof *size * (size_t)(n + 1));
    tg_status st = TG_ENOMEM;
    if (!s.out || !s.pos || !s.mark || !s.stack || !s.done || !s.held || !starts || !size) goto out;
    for (size_t i = 0; i < nn; i++) s.pos[i] = s.mark[i] = -1;
    for (int i = 0; i < n; i++) s.pos[order[i]->id] = i;
    /* 1. the starts, smallest cone first (ties: the depth-first order), each after what it
       needs; with them the blocking collectives that need no wait (a pmax, a lone psum),
       which would otherwise wait for every bucket in flight */
    int ns = 0;
    for (int i = 0; i < n; i++) {
        const tg_op_def *op = tg_op_table[order[i]->op];
        bool early = op->sched == TG_SCHED_EARLY, late;
        bool talks = op->sched == TG_SCHED_ANY && (op->effects & TG_EFFECT_STATE) &&
                     (op->effects & TG_EFFECT_AXIS);
        if (!early && !talks) continue;
        int c = cone(&s, i, i, &late), j;
        if (talks && late) continue;
        j = ns++;
        for (; j > 0 && size[j - 1] > c; j--) {
            starts[j] = starts[j - 1];
            size[j] = size[j - 1];
        }
        starts[j] = i;
        size[j] = c;
    }
    for (int k = 0; k < ns; k++) {
        int stamp = n + k; /* distinct from the stamps above */
        bool late;
        cone(&s, starts[k], stamp, &late);
        for (int i = 0; i <= starts[k]; i++)
            if (s.mark[order[i]->id] == stamp && !s.done[order[i]->id]) emit(&s, order[i]);
    }
    /* 2. the rest, waits held back until first read */
    for (int i = 0; i < n; i++) {
        tg_node *m = order[i];
        if (s.done[m->id]) continue;
        if (tg_op_table[m->op]->sched == TG_SCHED_LATE)
            s.held[m->id] = 1;
        else
            emit_after_held(&s, m);
    }
    for (int i = 0; i < n; i++)
        if (s.held[order[i]->id]) {
            s.held[order[i]->id] = 0;
            emit_after_held(&s, order[i]);
        }
    TG_ASSERT(s.len == n);
    memcpy(order, s.out, sizeof *order * (size_t)n);
    st = TG_OK;
out:
    tg_mem_free(ctx, s.out, sizeof *s.out * (size_t)(n + 1));
    tg_mem_free(ctx, s.pos, sizeof *s.pos * nn);
    tg_mem_free(ctx, s.mark, sizeof *s.mark * nn);
    tg_mem_free(ctx, s.stack, sizeof *s.stack * nn);
    tg_mem_free(ctx, s.done, nn);
    tg_mem_free(ctx, s.held, nn);
    tg_mem_free(ctx, starts, sizeof *starts * (size_t)(n + 1));
    tg_mem_free(ctx, size, sizeof *size * (size_t)(n + 1));
    return st;
}
