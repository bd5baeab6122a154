/* bucket.c - the bucket phase: the psums of a pmap body grouped into buckets reduced by one
 * split all-reduce each, as PyTorch's DistributedDataParallel buckets gradients
 * (docs/mpi.md, "Bucketed gradients"). A backward pass with respect to replicated weights
 * makes one psum per weight; here
 *
 *   g1 = psum(a, axis_name="i")          b = psum_start(a, c, axis_name="i")
 *   g2 = psum(c, axis_name="i")    ->    r = psum_wait(b, axis_name="i")
 *                                        g1 = reshape(r[0:n1], shape=...)   g2 = r[n1:n1+n2]
 *
 * psum_start packs its inputs into one buffer and starts its all-reduce; psum_wait is that
 * buffer reduced; the slices and reshapes are views. The program order then runs each
 * start as soon as its last gradient exists and each wait just before its first user
 * (tg_ir_schedule), so the exchange overlaps the rest of the backward pass.
 *
 * pmean. A pmean (gradients computed per rank, then averaged) is its psum divided by the
 * number of ranks: it joins the buckets of the psums of its axis and dtype, and the wait's
 * `mean` lists the ranges of the buffer that are pmeans, which the wait divides once
 * reduced, with pmean's own division (src/ops/collective.c), so the bits are pmean's:
 *
 *   g1 = pmean(a, axis_name="i")         b = psum_start(a, c, axis_name="i")
 *   g2 = psum(c, axis_name="i")    ->    r = psum_wait(b, axis_name="i", mean=[[0, n1]])
 *
 * Buckets. The psums and pmeans of one axis and dtype with static shapes (the candidates)
 * are taken in the order a backward pass completes them: by the number of nodes their
 * input needs, fewest first (the last layer's gradient before the first layer's), ties in
 * the program's order. A bucket closes once it holds TGRAPH_BUCKET_BYTES (default 25 MiB,
 * as DistributedDataParallel's bucket_cap_mb; 0: no bucketing), or before a candidate
 * whose input needs one of its own (which cannot wait for it). An axis and dtype with one
 * candidate is left alone: nothing to merge, and a blocking collective costs no hand-off
 * to the queue's thread.
 *
 * Invariants:
 *  - Each element is reduced over the same ranks in the same order as by its psum or
 *    pmean: the engine between threads reduces in rank order whatever the buffer (comm.h),
 *    and a pmean's part is divided as pmean divides, so results are bit-identical; across
 *    processes MPI's algorithm may depend on the size (docs/mpi.md).
 *  - No cycle: a bucket's inputs never need its own result (checked), and a psum needing
 *    another's result comes after it in the order, so in a later bucket. Buckets of
 *    different axes or dtypes that need each other (a cycle through several groups) are
 *    checked before the graph changes: then nothing is bucketed.
 *  - The program order of collectives stays the same on every rank: it depends only on the
 *    graph.
 */
#include "rewrite.h"

#include <errno.h>
#include <stdlib.h>

#define DEFAULT_BYTES ((size_t)25 << 20)

tg_status tg_bucket_bytes(size_t *out) {
    const char *e = getenv("TGRAPH_BUCKET_BYTES");
    *out = DEFAULT_BYTES;
    if (!e) return TG_OK;
    char *end = NULL;
    errno = 0;
    unsigned long long v = *e >= '0' && *e <= '9' ? strtoull(e, &end, 10) : 0;
    int shift = 0;
    if (end && end != e && *end) {
        shift = *end == 'K' || *end == 'k'   ? 10
                : *end == 'M' || *end == 'm' ? 20
                : *end == 'G' || *end == 'g' ? 30
                                             : -1;
        end++;
        if (shift > 0 && (*end == 'i' || *end == 'I')) end++;
        if (shift > 0 && (*end == 'B' || *end == 'b')) end++;
    }
    if (!end || end == e || *end || shift < 0 || errno == ERANGE || v > (SIZE_MAX >> shift))
        return tg_set_error(TG_EINVAL,
                            "TGRAPH_BUCKET_BYTES='%s': expected a number of bytes, optionally "
                            "with K, M or G (KiB, MiB, GiB), e.g. 25M; 0 turns bucketing off",
                            e);
    *out = (size_t)v << shift;
    return TG_OK;
}

typedef struct cand {
    tg_node *n;
    int pos;  /* in the program's order */
    int need; /* nodes its input needs */
    size_t bytes;
} cand;

typedef struct walk {
    const tg_graph *g;
    int *mark, *stack;
} walk;

/* Marks with `stamp` every node v needs (v's producer and its ancestors); their count. */
static int cone(walk *w, const tg_var *v, int stamp) {
    if (v->kind != TG_VAR_NODE) return 0;
    int sp = 0, size = 0;
    w->stack[sp++] = v->node->id;
    w->mark[v->node->id] = stamp;
    while (sp > 0) {
        const tg_node *m = w->g->nodes.items[w->stack[--sp]];
        size++;
        for (int k = 0; k < m->nin; k++) {
            const tg_var *u = m->in[k];
            if (u->kind == TG_VAR_NODE && w->mark[u->node->id] != stamp) {
                w->mark[u->node->id] = stamp;
                w->stack[sp++] = u->node->id;
            }
        }
    }
    return size;
}

static int by_need(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->need != y->need) return x->need < y->need ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static bool candidate(const tg_node *n) {
    if ((n->op != TG_OP_PSUM && n->op != TG_OP_PMEAN) || n->nin < 1)
        return false; /* nodes without inputs have no in[] */
    const tg_type *t = &n->in[0]->type;
    return tg_type_known(t) && !t->weak && t->dtype != TG_DT_BOOL;
}

static bool same_group(const tg_node *a, const tg_node *b) {
    return strcmp(a->attrs[0].s, b->attrs[0].s) == 0 &&
           a->in[0]->type.dtype == b->in[0]->type.dtype;
}

/* Most collectives in one bucket (psum_start's inputs: a node's input count is an int). */
#define MAX_PER_BUCKET 4096

/* The number of elements of t (static). */
static int64_t elements(const tg_type *t) {
    int64_t e = 1;
    for (int d = 0; d < t->ndim; d++) e *= t->shape[d];
    return e;
}

/* Replaces the psums and pmeans c[0..k) by one start, one wait and a view of the result
 * each; mean (room for 2k ints) receives the wait's ranges of pmeans, adjacent ones
 * joined. */
static tg_status split(tg_graph *g, const cand *c, int k, tg_var **in, int64_t *mean) {
    int nmean = 0;
    int64_t at = 0;
    for (int i = 0; i < k; i++) {
        in[i] = c[i].n->in[0];
        int64_t e = elements(&c[i].n->out[0]->type);
        if (c[i].n->op != TG_OP_PMEAN || e == 0) { /* an empty pmean has nothing to divide */
        } else if (nmean > 0 && mean[nmean - 1] == at)
            mean[nmean - 1] = at + e;
        else {
            mean[nmean++] = at;
            mean[nmean++] = at + e;
        }
        at += e;
    }
    tg_attr axis = TG_A_STR("axis_name", c[0].n->attrs[0].s);
    tg_attr wa[2] = {axis, TG_A_INTS("mean", mean, nmean)};
    int line = g->line, col = g->col;
    g->line = c[0].n->line; /* the new nodes point at the first collective of the bucket */
    g->col = c[0].n->col;
    tg_var *b = tg_apply(g, "psum_start", in, k, &axis, 1);
    tg_var *r = tg_apply(g, "psum_wait", &b, 1, wa, nmean > 0 ? 2 : 1);
    tg_status st = TG_OK;
    at = 0;
    for (int i = 0; i < k && r && st == TG_OK; i++) {
        const tg_type *t = &c[i].n->out[0]->type;
        int64_t e = elements(t);
        tg_slice s = {.start = at, .stop = at + e, .step = 1};
        tg_var *v = tg_slice_apply(g, r, &s, 1);
        if (v && t->ndim != 1) v = tg_reshape(g, v, t->ndim, t->shape);
        if (!v) break;
        st = tg_ir_replace(g, c[i].n->out[0], v);
        at += e;
    }
    g->line = line;
    g->col = col;
    return st != TG_OK ? st : g->status;
}

/* Whether the planned buckets (plan[first[b]..first[b+1]) for b < nb) need each other in a
 * cycle: a psum of one bucket whose input needs a psum of a second, which in turn needs
 * one of the first (possibly through other buckets, of other axes or dtypes). Their starts
 * would each wait for the other's wait. *stamp is the walk's next mark. */
static bool bucket_cycle(walk *w, const cand *plan, const int *first, int nb, int *stamp,
                         tg_ctx *ctx, bool *failed) {
    size_t n = (size_t)nb;
    bool *need = tg_mem_calloc(ctx, sizeof *need * n * n);
    int *state = tg_mem_calloc(ctx, sizeof *state * n), *path = tg_mem_alloc(ctx, sizeof *path * n);
    bool cycle = false;
    *failed = !need || !state || !path;
    for (int x = 0; !*failed && x < nb; x++, (*stamp)++) {
        for (int i = first[x]; i < first[x + 1]; i++) cone(w, plan[i].n->in[0], *stamp);
        for (int y = 0; y < nb; y++)
            for (int i = first[y]; y != x && i < first[y + 1]; i++)
                need[(size_t)x * n + (size_t)y] |= w->mark[plan[i].n->id] == *stamp;
    }
    /* depth-first search (0 new, 1 on the path, 2 done), iterative */
    for (int s0 = 0; !*failed && !cycle && s0 < nb; s0++) {
        if (state[s0]) continue;
        int sp = 0;
        path[sp++] = s0;
        state[s0] = 1;
        while (sp > 0 && !cycle) {
            int x = path[sp - 1], y = 0;
            for (; y < nb; y++) {
                if (!need[(size_t)x * n + (size_t)y]) continue;
                if (state[y] == 1) cycle = true;
                if (state[y] == 0) break;
            }
            if (cycle) break;
            if (y < nb) {
                state[y] = 1;
                path[sp++] = y;
            } else {
                state[x] = 2;
                sp--;
            }
        }
    }
    if (need) tg_mem_free(ctx, need, sizeof *need * n * n);
    if (state) tg_mem_free(ctx, state, sizeof *state * n);
    if (path) tg_mem_free(ctx, path, sizeof *path * n);
    return cycle;
}

tg_status tg_bucket(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    (void)opts;
    size_t cap;
    tg_status st = tg_bucket_bytes(&cap);
    if (st != TG_OK || cap == 0) return st;
    int norder = 0, nc = 0, nplan = 0;
    tg_node **order = tg_ir_toposort(g, &norder);
    if (!order) return tg_rw_error_status();
    for (int i = 0; i < norder; i++) nc += candidate(order[i]);
    size_t nn = (size_t)g->nodes.n + 1, m1 = (size_t)nc + 1;
    cand *c = tg_mem_alloc(g->ctx, sizeof *c * m1);
    bool *taken = tg_mem_calloc(g->ctx, sizeof *taken * m1);
    walk w = {.g = g,
              .mark = tg_mem_alloc(g->ctx, sizeof *w.mark * nn),
              .stack = tg_mem_alloc(g->ctx, sizeof *w.stack * nn)};
    cand *plan = tg_mem_alloc(g->ctx, sizeof *plan * m1); /* the buckets, end to end */
    int *first = tg_mem_alloc(g->ctx, sizeof *first * (m1 + 1)), nb = 0; /* their starts */
    tg_var **in = tg_mem_alloc(g->ctx, sizeof *in * m1);
    int64_t *mean = tg_mem_alloc(g->ctx, sizeof *mean * 2 * m1); /* a wait's pmean ranges */
    st = c && taken && w.mark && w.stack && plan && first && in && mean ? TG_OK : TG_ENOMEM;
    int stamp = 0;
    if (st == TG_OK) {
        for (size_t i = 0; i < nn; i++) w.mark[i] = -1;
        for (int i = 0, j = 0; i < norder; i++) {
            if (!candidate(order[i])) continue;
            const tg_type *t = &order[i]->in[0]->type;
            size_t e = tg_dtype_size((tg_dtype)t->dtype);
            for (int d = 0; d < t->ndim; d++) e *= (size_t)t->shape[d];
            c[j++] = (cand){
                .n = order[i], .pos = i, .need = cone(&w, order[i]->in[0], stamp++), .bytes = e};
        }
    }
    /* the buckets of one axis and dtype at a time, in the order of their first psum; all
       planned before the graph changes (the walks read the psums as they are) */
    for (int a = 0; st == TG_OK && a < nc; a++) {
        if (taken[a]) continue;
        int ng = 0;
        cand *grp = plan + nplan;
        for (int i = a; i < nc; i++)
            if (!taken[i] && same_group(c[a].n, c[i].n)) {
                taken[i] = true;
                grp[ng++] = c[i];
            }
        if (ng < 2) continue;
        qsort(grp, (size_t)ng, sizeof *grp, by_need);
        for (int lo = 0, hi; lo < ng; lo = hi) {
            size_t bytes = grp[lo].bytes;
            for (hi = lo + 1; hi < ng && bytes < cap && hi - lo < MAX_PER_BUCKET; hi++) {
                cone(&w, grp[hi].n->in[0], stamp);
                bool needs = false;
                for (int m = lo; m < hi && !needs; m++) needs = w.mark[grp[m].n->id] == stamp;
                stamp++;
                if (needs) break;
                bytes += grp[hi].bytes;
            }
            first[nb++] = nplan + lo;
        }
        nplan += ng;
    }
    if (st == TG_OK) first[nb] = nplan;
    bool failed = false;
    if (st == TG_OK && nb > 1 && bucket_cycle(&w, plan, first, nb, &stamp, g->ctx, &failed))
        nb = 0; /* buckets of different axes or dtypes that need each other: none at all */
    if (failed) st = tg_set_error(TG_ENOMEM, "out of memory: the bucket pass");
    for (int b = 0; st == TG_OK && b < nb; b++)
        st = split(g, plan + first[b], first[b + 1] - first[b], in, mean);
    if (report && report->npasses > 0 && st == TG_OK)
        report->passes[report->npasses - 1].applied += nb;
    tg_mem_free(g->ctx, order, sizeof *order * nn);
    tg_mem_free(g->ctx, c, sizeof *c * m1);
    tg_mem_free(g->ctx, taken, sizeof *taken * m1);
    tg_mem_free(g->ctx, w.mark, sizeof *w.mark * nn);
    tg_mem_free(g->ctx, w.stack, sizeof *w.stack * nn);
    tg_mem_free(g->ctx, plan, sizeof *plan * m1);
    tg_mem_free(g->ctx, first, sizeof *first * (m1 + 1));
    tg_mem_free(g->ctx, in, sizeof *in * m1);
    tg_mem_free(g->ctx, mean, sizeof *mean * 2 * m1);
    return st;
}
