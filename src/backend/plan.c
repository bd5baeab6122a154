/* plan.c - the schedule and the memory plan, shared by the VM and the C JIT (plan.h holds
 * the storage classes and the invariants), and the replicas calls run on.
 *
 * The program: the needed nodes in topological order (split collectives moved apart by
 * tg_ir_schedule, so that their exchange overlaps the nodes between), the last use of every value
 * (views extend the life of what they view), and the kernel of every instruction, which the backend
 * chooses (tg_plan_kernels: the plan asks it only for workspace sizes, in-place reuse, and whether
 * a kernel of its own writes a planned block). A plan, per signature of input shapes: run-time
 * types from each op's inference (with small shape arithmetic evaluated at plan time, so that the
 * nodes after it keep planned buffers), storage classes, and blocks assigned in program order and
 * reused after the last use, in place where an output may overwrite an input dying there. A
 * replica's memory for a plan: the blocks of the sizes the plan gives, the workspace and the
 * planned tensors over them, made on the replica's first call of the plan and kept while the plan
 * is cached; large blocks are 2 MiB aligned and asked for huge pages.
 *
 * Concurrency: the plans (plans, nplans), the pool's start and the lists of replicas are
 * guarded by the program's lock, taken only for a look-up or the making of a plan (which
 * allocates no block) and for a replica's take and give. A replica finds its memory for a
 * plan without it, by key, as long as the program keeps the plan (evicted unset); a plan
 * the program drops is freed by the last replica letting go of its memory for it.
 */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define PLAN_HUGE       ((size_t)2 << 20) /* blocks this large are 2 MiB aligned, huge pages */
#define PLAN_POOL_ELEMS 16384             /* a plan with a value this large starts the pool */
#define PLAN_PV_MAX     64                /* largest value (elements) evaluated at plan time */

/* ---- helpers ---- */

void tg_plan_runtime_type(const tg_type *st, int ndim, const int64_t *shape, uint8_t dtype,
                          tg_type *rt) {
    *rt = (tg_type){.dtype = dtype, .ndim = (uint8_t)ndim};
    for (int i = 0; i < ndim; i++) {
        rt->shape[i] = shape[i];
        if (shape[i] == 1 && st->shape[i] != 1) rt->nobcast |= 1u << i;
    }
}

void tg_plan_tensor_rt(const tg_type *st, const tg_tensor *t, tg_type *rt) {
    tg_plan_runtime_type(st, t->ndim, t->shape, (uint8_t)t->dtype, rt);
}

size_t tg_plan_type_bytes(const tg_type *t) {
    int64_t n = 0;
    if (!tg_shape_size(t->ndim, t->shape, &n)) return SIZE_MAX;
    return (size_t)n * tg_dtype_size((tg_dtype)t->dtype);
}

void tg_plan_node_where(const tg_graph *g, const tg_node *n, char *buf, size_t len) {
    const char *name = tg_op_table[n->op]->name;
    if (n->line > 0)
        snprintf(buf, len, "%s:%d:%d: %s", g->file ? g->file : "<input>", n->line, n->col, name);
    else
        snprintf(buf, len, "node %d (%s)", n->id, name);
}

tg_status tg_plan_node_fail(const tg_graph *g, const tg_node *n, tg_status st, const char *msg) {
    char where[256];
    tg_plan_node_where(g, n, where, sizeof where);
    return tg_set_error(st, "%s: %s", where, msg);
}

tg_status tg_plan_node_tensor(const tg_graph *g, const tg_node *n, tg_ctx *ctx, const tg_type *rt,
                              tg_tensor **out) {
    char ty[TG_TYPE_STR_MAX], msg[TG_ERRMSG_MAX]; /* the type is printed on failure only */
    if (tg_plan_type_bytes(rt) == SIZE_MAX) {
        tg_type_str(rt, ty, sizeof ty);
        snprintf(msg, sizeof msg, "output %s is too large", ty);
        return tg_plan_node_fail(g, n, TG_ELIMIT, msg);
    }
    *out = tg_tensor_empty(ctx, (tg_dtype)rt->dtype, rt->ndim, rt->shape);
    if (*out) return TG_OK;
    tg_type_str(rt, ty, sizeof ty);
    snprintf(msg, sizeof msg, "output %s: %s", ty, tg_last_error());
    return tg_plan_node_fail(g, n, TG_ENOMEM, msg);
}

/* ---- the program ---- */

bool tg_plan_reuse_ok(const tg_plan_prog *pg, int i) {
    const tg_node *n = pg->order[i];
    if (n->nout != 1 || tg_op_table[n->op]->destroys) return false;
    return pg->kern->reuse_ok(pg, i);
}

static void rep_free(tg_plan_prog *pg, tg_plan_rep *r);

void tg_plan_prog_fini(tg_plan_prog *pg) {
    tg_ctx *ctx = pg->ctx;
    size_t nv = (size_t)pg->nvars + 1, no = (size_t)pg->norder + 1;
    for (tg_plan_rep *r = pg->reps, *next; r; r = next) { /* first: they hold plans */
        next = r->next_all;
        rep_free(pg, r);
    }
    for (int i = 0; i < pg->nplans; i++) tg_plan_unref(pg, pg->plans[i]);
    if (pg->kern) pg->kern->release(pg);
    if (pg->own_pool) tg_pool_free(atomic_load(&pg->pool));
    if (pg->order) tg_mem_free(ctx, pg->order, sizeof *pg->order * (size_t)(pg->g->nodes.n + 1));
    tg_mem_free(ctx, pg->reuse, pg->reuse ? no : 0);
    tg_mem_free(ctx, pg->last, pg->last ? sizeof *pg->last * nv : 0);
    tg_mem_free(ctx, pg->ext, pg->ext ? sizeof *pg->ext * nv : 0);
    tg_mem_free(ctx, pg->nouts, pg->nouts ? sizeof *pg->nouts * nv : 0);
    tg_mem_free(ctx, pg->rel, pg->rel ? sizeof *pg->rel * nv : 0);
    tg_mem_free(ctx, pg->rel_at, pg->rel_at ? sizeof *pg->rel_at * (no + 1) : 0);
    tg_mem_free(ctx, pg->const_rt, pg->const_rt ? sizeof *pg->const_rt * nv : 0);
    tg_mem_free(ctx, pg->args, pg->args ? sizeof *pg->args * (size_t)pg->maxargs : 0);
    tg_mem_free(ctx, pg->argt, pg->argt ? sizeof *pg->argt * (size_t)pg->maxargs : 0);
    tg_mem_free(ctx, pg->axes, pg->axes ? sizeof *pg->axes * (size_t)pg->naxes : 0);
    pthread_mutex_destroy(&pg->mu);
    memset(pg, 0, sizeof *pg);
}

/* Last uses, and the release lists: vars whose own last use is instruction i; node
 * outputs nobody reads go right after their producer. */
static tg_status last_uses(tg_plan_prog *pg) {
    tg_graph *g = pg->g;
    size_t no = (size_t)pg->norder + 1;
    for (int v = 0; v < pg->nvars; v++) pg->last[v] = -1;
    for (int i = 0; i < pg->norder; i++) {
        tg_node *n = pg->order[i];
        for (int k = 0; k < n->nin; k++) pg->last[n->in[k]->id] = i;
    }
    for (int i = 0; i < g->outputs.n; i++) {
        tg_var *v = g->outputs.items[i];
        pg->last[v->id] = pg->norder;
        pg->nouts[v->id]++;
    }
    for (int i = 0; i < pg->norder; i++) {
        tg_node *n = pg->order[i];
        for (int o = 0; o < n->nout; o++)
            if (pg->last[n->out[o]->id] < 0) pg->last[n->out[o]->id] = i;
    }
    for (int v = 0; v < pg->nvars; v++)
        if (pg->last[v] >= 0 && pg->last[v] < pg->norder) pg->rel_at[pg->last[v] + 1]++;
    for (int i = 0; i < pg->norder; i++) pg->rel_at[i + 1] += pg->rel_at[i];
    int *fill = tg_mem_calloc(pg->ctx, sizeof *fill * no);
    if (!fill) return TG_ENOMEM;
    for (int v = 0; v < pg->nvars; v++) {
        int at = pg->last[v];
        if (at >= 0 && at < pg->norder) pg->rel[pg->rel_at[at] + fill[at]++] = v;
    }
    tg_mem_free(pg->ctx, fill, sizeof *fill * no);
    /* a view keeps what it views alive: extend last uses backwards through view ops */
    memcpy(pg->ext, pg->last, sizeof *pg->ext * (size_t)pg->nvars);
    for (int i = pg->norder - 1; i >= 0; i--) {
        tg_node *n = pg->order[i];
        uint32_t views = tg_op_table[n->op]->views;
        for (int o = 0; o < n->nout && views; o++)
            for (int k = 0; k < n->nin; k++)
                if ((views >> k & 1u) && pg->ext[n->out[o]->id] > pg->ext[n->in[k]->id])
                    pg->ext[n->in[k]->id] = pg->ext[n->out[o]->id];
    }
    return TG_OK;
}

tg_status tg_plan_prog_init(tg_plan_prog *pg, tg_graph *g, const tg_compile_opts *opts,
                            const tg_plan_kernels *kern) {
    static const tg_compile_opts none = {0};
    if (!opts) opts = &none;
    tg_ctx *ctx = g->ctx;
    memset(pg, 0, sizeof *pg);
    pthread_mutex_init(&pg->mu, NULL); /* first: tg_plan_prog_fini destroys it */
    atomic_init(&pg->spare, NULL);
    atomic_init(&pg->pool, NULL);
    atomic_init(&pg->clock, 0);
    pg->ctx = ctx;
    pg->g = g;
    pg->nvars = g->vars.n;
    size_t nv = (size_t)pg->nvars + 1;
    pg->order = tg_ir_toposort(g, &pg->norder);
    size_t no = (size_t)pg->norder + 1;
    pg->reuse = tg_mem_calloc(ctx, no);
    pg->last = tg_mem_alloc(ctx, sizeof *pg->last * nv);
    pg->ext = tg_mem_alloc(ctx, sizeof *pg->ext * nv);
    pg->nouts = tg_mem_calloc(ctx, sizeof *pg->nouts * nv);
    pg->rel = tg_mem_alloc(ctx, sizeof *pg->rel * nv);
    pg->rel_at = tg_mem_calloc(ctx, sizeof *pg->rel_at * (no + 1));
    pg->const_rt = tg_mem_calloc(ctx, sizeof *pg->const_rt * nv);
    if (!pg->order || !pg->reuse || !pg->last || !pg->ext || !pg->nouts || !pg->rel ||
        !pg->rel_at || !pg->const_rt || tg_ir_schedule(g, pg->order, pg->norder) != TG_OK ||
        last_uses(pg) != TG_OK)
        return TG_ENOMEM;
    pg->maxargs = 1;
    for (int i = 0; i < pg->norder; i++) {
        tg_node *n = pg->order[i];
        if (n->nin + n->nout > pg->maxargs) pg->maxargs = n->nin + n->nout;
    }
    pg->args = tg_mem_calloc(ctx, sizeof *pg->args * (size_t)pg->maxargs);
    pg->argt = tg_mem_calloc(ctx, sizeof *pg->argt * (size_t)pg->maxargs);
    if (!pg->args || !pg->argt) return TG_ENOMEM;
    int na = tg_pmap_free_axes(g, NULL, 0);
    if (na < 0) return TG_ENOMEM;
    if (na > 0) {
        if (!(pg->axes = tg_mem_alloc(ctx, sizeof *pg->axes * (size_t)na))) return TG_ENOMEM;
        pg->naxes = na;
        if (tg_pmap_free_axes(g, pg->axes, na) != na) return TG_ENOMEM;
    }
    for (int v = 0; v < pg->nvars; v++) {
        tg_var *var = g->vars.items[v];
        if (var->kind == TG_VAR_CONST) tg_plan_tensor_rt(&var->type, var->value, &pg->const_rt[v]);
    }
    pg->kern = kern;
    tg_status st = kern->choose(pg);
    if (st != TG_OK) return st;
    /* the pool: a shared one, or our own, started by the first plan with work enough to
     * split (functions on small data never start threads) */
    atomic_store(&pg->pool, opts->pool);
    if (opts->pool)
        pg->nthreads = tg_pool_size(opts->pool);
    else
        pg->nthreads = opts->nthreads > 0 ? opts->nthreads : tg_pool_default_threads();
    return TG_OK;
}

/* ---- blocks ---- */

static void block_release(tg_ctx *ctx, tg_plan_block *b) {
    if (b->buf) {
        TG_ASSERT(atomic_load(&b->buf->refs) == 1);
        tg_buffer_unref(b->buf); /* frees the header */
    }
    if (b->raw) tg_mem_free(ctx, b->raw, b->raw_size);
    memset(b, 0, sizeof *b);
}

#if TG_PLAN_GUARD
static unsigned char guard_byte(size_t k) { return (unsigned char)(0xA5u ^ (k * 29u)); }

static void guard_set(tg_plan_block *b) {
    unsigned char *g = (unsigned char *)b->buf->data + b->guard;
    for (size_t k = 0; k < TG_PLAN_GUARD; k++) g[k] = guard_byte(k);
}

int tg_plan_guard_find(tg_plan_mem *m, size_t *byte) {
    for (int b = -1; b < m->plan->nblocks; b++) {
        tg_plan_block *blk = b < 0 ? &m->ws : &m->blocks[b];
        if (!blk->buf) continue;
        const unsigned char *g = (const unsigned char *)blk->buf->data + blk->guard;
        size_t k = 0;
        while (k < TG_PLAN_GUARD && g[k] == guard_byte(k)) k++;
        if (k == TG_PLAN_GUARD) continue;
        guard_set(blk);
        *byte = k;
        return b;
    }
    return -2;
}
#else
static void guard_set(tg_plan_block *b) { (void)b; }
int tg_plan_guard_find(tg_plan_mem *m, size_t *byte) {
    (void)m, (void)byte;
    return -2;
}
#endif

/* Allocates b->size usable bytes: 64-byte aligned, or 2 MiB aligned with huge pages
 * asked for when large; the guard bytes follow them. */
static tg_status block_alloc(tg_ctx *ctx, tg_plan_block *b) {
    size_t align = b->size >= PLAN_HUGE ? PLAN_HUGE : 64, size = b->size ? b->size : 64;
    b->guard = b->size;
    size = (size + align - 1) / align * align;
    if (size < b->size || size > SIZE_MAX - align - TG_PLAN_GUARD)
        return tg_set_error(TG_ENOMEM, "out of memory: a buffer of %zu bytes", b->size);
    b->raw_size = size + align - 1 + TG_PLAN_GUARD;
    b->raw = tg_mem_alloc(ctx, b->raw_size);
    b->buf = tg_mem_alloc(ctx, sizeof *b->buf);
    if (!b->raw || !b->buf) {
        if (b->buf) tg_mem_free(ctx, b->buf, sizeof *b->buf);
        b->buf = NULL;
        return TG_ENOMEM;
    }
    uintptr_t p = ((uintptr_t)b->raw + align - 1) / align * align;
    atomic_init(&b->buf->refs, 1);
    b->buf->ctx = ctx;
    b->buf->data = (void *)p;
    b->buf->nbytes = size;
    b->buf->alloc_size = sizeof *b->buf;
    b->buf->device = NULL; /* host memory */
    b->buf->release = NULL;
    b->size = size;
    if (TG_PLAN_GUARD) guard_set(b);
#ifdef MADV_HUGEPAGE
    if (align == PLAN_HUGE) (void)madvise((void *)p, size, MADV_HUGEPAGE);
#endif
    return TG_OK;
}

/* Picks a free block for a value of `need` bytes: the closest in size within a factor
 * of two (growing it if smaller), else a new one. */
static int block_pick(tg_plan *p, bool *busy, size_t need) {
    int best = -1;
    size_t bestd = SIZE_MAX;
    for (int b = 0; b < p->nblocks; b++) {
        if (busy[b]) continue;
        size_t s = p->bsize[b];
        if (s / 2 > need || need / 2 > s) continue;
        size_t d = s > need ? s - need : need - s;
        if (d < bestd) {
            best = b;
            bestd = d;
        }
    }
    if (best < 0) {
        best = p->nblocks++;
        p->bsize[best] = 0;
    }
    if (p->bsize[best] < need) p->bsize[best] = need;
    busy[best] = true;
    return best;
}

static void plan_free(tg_plan_prog *pg, tg_plan *p) {
    if (!p) return;
    tg_ctx *ctx = pg->ctx;
    size_t nv = (size_t)pg->nvars + 1, no = (size_t)pg->norder + 1;
    tg_mem_free(ctx, p->bsize, p->bsize ? sizeof *p->bsize * nv : 0);
    tg_mem_free(ctx, p->key, p->key ? sizeof *p->key * (size_t)(p->nkey + 1) : 0);
    tg_mem_free(ctx, p->rt, p->rt ? sizeof *p->rt * nv : 0);
    tg_mem_free(ctx, p->known, p->known ? nv : 0);
    tg_mem_free(ctx, p->cls, p->cls ? nv : 0);
    tg_mem_free(ctx, p->blk, p->blk ? sizeof *p->blk * nv : 0);
    tg_mem_free(ctx, p->dyn, p->dyn ? no : 0);
    tg_mem_free(ctx, p->seg_hi, p->seg_hi ? sizeof *p->seg_hi * no : 0);
    tg_mem_free(ctx, p->npred, p->npred ? sizeof *p->npred * no : 0);
    tg_mem_free(ctx, p, sizeof *p);
}

void tg_plan_unref(tg_plan_prog *pg, tg_plan *p) {
    if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) plan_free(pg, p);
}

/* A plan's key: the input shapes, then the number of ranks of each pmap axis the graph
 * reads, from the SPMD frames of the calling thread (one compiled body may be mapped over
 * axes of different sizes). */
static int key_len(const tg_plan_prog *pg) {
    int n = pg->naxes;
    for (int i = 0; i < pg->g->inputs.n; i++) n += ((tg_var *)pg->g->inputs.items[i])->type.ndim;
    return n;
}

static void key_fill(const tg_plan_prog *pg, tg_tensor *const *in, int64_t *key) {
    int k = 0;
    for (int i = 0; i < pg->g->inputs.n; i++)
        for (int d = 0; d < in[i]->ndim; d++) key[k++] = in[i]->shape[d];
    for (int a = 0; a < pg->naxes; a++) {
        const tg_spmd *s = tg_spmd_find(pg->axes[a]);
        key[k++] = s ? s->size : -1;
    }
}

/* Workspace instruction i needs for these run-time types. */
static size_t ins_ws(const tg_plan_prog *pg, int i, const tg_type *in, const tg_type *out) {
    return pg->kern->ws(pg, i, in, out);
}

/* The planned input that node n (instruction i) may overwrite with its output 0: one it
 * declares it destroys (or any input, where pg->reuse[i]), of the output's run-time type,
 * dying at i, that no other input of n is or views (through a chain of view ops) and no
 * other instruction reads. -1 when there is none. */
static int inplace_source(const tg_plan_prog *pg, const tg_plan *p, const tg_node *n, int i) {
    uint32_t d = tg_op_table[n->op]->destroys;
    if (pg->reuse[i]) d = n->nin >= 32 ? UINT32_MAX : (1u << n->nin) - 1u;
    for (int k = 0; k < n->nin && d; k++) {
        if (!(d >> k & 1u)) continue;
        int u = n->in[k]->id, v = n->out[0]->id;
        const tg_type *ru = &p->rt[u], *rv = &p->rt[v];
        if (p->cls[u] != TG_PLAN_PLANNED || pg->ext[u] != i || ru->dtype != rv->dtype ||
            ru->ndim != rv->ndim ||
            memcmp(ru->shape, rv->shape, sizeof ru->shape[0] * (size_t)ru->ndim) != 0)
            continue;
        bool alias = false;
        for (int j = 0; j < n->nin && !alias; j++) {
            const tg_var *w = j == k ? NULL : n->in[j];
            int depth = 0;
            for (; w && depth < 64 && !alias; depth++) { /* w, or what w views */
                const tg_node *m = w->kind == TG_VAR_NODE ? w->node : NULL;
                uint32_t vw = m ? tg_op_table[m->op]->views : 0;
                alias = w->id == u;
                w = vw ? m->in[__builtin_ctz(vw)] : NULL;
            }
            alias = alias || depth == 64; /* too long a chain to tell: assume it does */
        }
        /* and no earlier instruction reads it either (independent branches may run at the
         * same time): looked for back to its producer, within a bound */
        for (int j = i - 1, seen = 0; !alias && j >= 0; j--, seen++) {
            const tg_node *m = pg->order[j];
            if (m == n->in[k]->node) break;
            for (int q = 0; q < m->nin && !alias; q++) alias = m->in[q]->id == u;
            alias = alias || seen == 4096;
        }
        if (!alias) return u;
    }
    return -1;
}

/* ---- plan-time values ----
 * Small integer arithmetic on shapes (the `shape(x)[0]` that a gradient of a function
 * with a `?` extent feeds to `alloc`) is evaluated while the plan is made, so that
 * inference knows the extents it gives and the nodes after it keep fast kernels and
 * planned buffers. The values are functions of the input shapes (the plan's key) and of
 * constants only; the nodes still run at call time. An op with effects is never evaluated
 * here, as it is never constant-folded: a collective's value is the ranks' exchange, and
 * the rank making the plan would wait in it for ranks that wait for the plan. */

static bool pv_small(const tg_type *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || t->shape[d] > PLAN_PV_MAX) return false;
        n *= t->shape[d];
        if (n > PLAN_PV_MAX) return false;
    }
    return true;
}

/* Evaluates node n (inputs of run-time types tin, outputs tout) into pv[] if it can:
 * `shape` and `size` from the types alone, other ops when every input is a small value
 * known here. Anything that fails leaves the outputs unknown (they are then computed at
 * run time, as before). */
static void pv_eval(tg_plan_prog *pg, const tg_node *n, const tg_type *tin, const tg_type *tout,
                    tg_tensor **pv, uint8_t *pv_own) {
    const tg_op_def *op = tg_op_table[n->op];
    tg_tensor *out[TG_MAX_OUTS] = {0};
    for (int o = 0; o < n->nout; o++)
        if (!pv_small(&tout[o])) return;
    if (op == &tg_op_shape || op == &tg_op_size) {
        tg_tensor *t = tg_tensor_new(pg->ctx, (tg_dtype)tout[0].dtype, tout[0].ndim, tout[0].shape);
        if (!t) return;
        int64_t total = 1;
        for (int64_t d = 0; d < tin[0].ndim; d++) {
            total *= tin[0].shape[d];
            if (op == &tg_op_shape) tg_store_i64(tg_tensor_at(t, &d), t->dtype, tin[0].shape[d]);
        }
        if (op == &tg_op_size) tg_store_i64(tg_tensor_data(t), t->dtype, total);
        pv[n->out[0]->id] = t;
        pv_own[n->out[0]->id] = 1;
        return;
    }
    if (n->nin == 0 || op->destroys || !tg_op_foldable(op)) return;
    tg_tensor **vin = pg->args; /* scratch: pv of the inputs */
    for (int k = 0; k < n->nin; k++)
        if (!(vin[k] = pv[n->in[k]->id])) return;
    char msg[64];
    if (tg_kern_run(pg->ctx, n, vin, tout, out, NULL, NULL, msg, sizeof msg) != TG_OK) return;
    for (int o = 0; o < n->nout; o++) {
        pv[n->out[o]->id] = out[o];
        pv_own[n->out[o]->id] = 1;
    }
}

/* ---- making a plan ---- */

/* Per-plan scratch of plan_make. */
typedef struct plan_tmp {
    bool *busy;      /* per block: holds a live value */
    int *die, *next; /* per instruction: planned vars dying there (lists through next) */
    tg_tensor **pv;  /* per var: its value when known at plan time */
    uint8_t *pv_own; /* per var: pv[v] is ours to free */
} plan_tmp;

static void tmp_free(tg_plan_prog *pg, plan_tmp *t) {
    tg_ctx *ctx = pg->ctx;
    size_t nv = (size_t)pg->nvars + 1, no = (size_t)pg->norder + 1;
    if (t->pv && t->pv_own)
        for (int v = 0; v < pg->nvars; v++)
            if (t->pv_own[v]) tg_tensor_free(t->pv[v]);
    if (t->pv) tg_mem_free(ctx, t->pv, sizeof *t->pv * nv);
    if (t->pv_own) tg_mem_free(ctx, t->pv_own, nv);
    if (t->busy) tg_mem_free(ctx, t->busy, nv);
    if (t->die) tg_mem_free(ctx, t->die, sizeof *t->die * no);
    if (t->next) tg_mem_free(ctx, t->next, sizeof *t->next * nv);
}

/* The plan's arrays, the scratch, and the leaves (inputs of shapes `in`, constants). */
static tg_status plan_alloc(tg_plan_prog *pg, tg_tensor *const *in, tg_plan *p, plan_tmp *t) {
    tg_ctx *ctx = pg->ctx;
    tg_graph *g = pg->g;
    size_t nv = (size_t)pg->nvars + 1, no = (size_t)pg->norder + 1;
    p->nkey = key_len(pg);
    p->key = tg_mem_alloc(ctx, sizeof *p->key * (size_t)(p->nkey + 1));
    p->rt = tg_mem_calloc(ctx, sizeof *p->rt * nv);
    p->known = tg_mem_calloc(ctx, nv);
    p->cls = tg_mem_calloc(ctx, nv);
    p->blk = tg_mem_alloc(ctx, sizeof *p->blk * nv);
    p->dyn = tg_mem_calloc(ctx, no);
    p->bsize = tg_mem_calloc(ctx, sizeof *p->bsize * nv);
    t->busy = tg_mem_calloc(ctx, nv);
    t->die = tg_mem_alloc(ctx, sizeof *t->die * no);
    t->next = tg_mem_alloc(ctx, sizeof *t->next * nv);
    t->pv = tg_mem_calloc(ctx, sizeof *t->pv * nv);
    t->pv_own = tg_mem_calloc(ctx, nv);
    if (!p->key || !p->rt || !p->known || !p->cls || !p->blk || !p->dyn || !p->bsize || !t->busy ||
        !t->die || !t->next || !t->pv || !t->pv_own)
        return TG_ENOMEM;
    key_fill(pg, in, p->key);
    for (int v = 0; v < pg->nvars; v++) p->blk[v] = -1;
    for (int i = 0; i < g->inputs.n; i++) {
        tg_var *v = g->inputs.items[i];
        tg_plan_tensor_rt(&v->type, in[i], &p->rt[v->id]);
        p->known[v->id] = 1;
        p->cls[v->id] = TG_PLAN_LEAF;
    }
    for (int v = 0; v < pg->nvars; v++) {
        tg_var *var = g->vars.items[v];
        if (var->kind != TG_VAR_CONST) continue;
        p->rt[v] = pg->const_rt[v];
        p->known[v] = 1;
        p->cls[v] = TG_PLAN_LEAF;
        t->pv[v] = var->value;
    }
    return TG_OK;
}

/* Run-time types and classes of instruction i's outputs (tout from inference). */
static tg_status out_classes(tg_plan_prog *pg, tg_plan *p, int i, tg_type *tout,
                             bool values_known) {
    tg_node *n = pg->order[i];
    const tg_op_def *op = tg_op_table[n->op];
    /* outputs the kernel makes: views, and self-allocating ops, except where the plan
     * knows the extents and a library kernel writes into a planned buffer (alloc: VM_EW) */
    bool fills = n->op == TG_OP_ALLOC && pg->kern->library(pg, i) && values_known;
    for (int o = 0; o < n->nout; o++) {
        tg_var *v = n->out[o];
        bool all = true;
        for (int d = 0; d < tout[o].ndim; d++) { /* an extent the static type knows */
            if (tout[o].shape[d] < 0 && d < v->type.ndim) tout[o].shape[d] = v->type.shape[d];
            all = all && tout[o].shape[d] >= 0;
        }
        bool self = op->views || (op->self_alloc && !(fills && all));
        if (!all && !self)
            return tg_plan_node_fail(pg->g, n, TG_EINTERNAL,
                                     "run-time inference left an extent unknown");
        /* the type as far as it is known: a kernel making its output reads the extents
           inference could give (scan's rows); known[] says when all of them are */
        tg_plan_runtime_type(&v->type, tout[o].ndim, tout[o].shape, tout[o].dtype, &p->rt[v->id]);
        if (all) p->known[v->id] = 1;
        p->dynamic = p->dynamic || !all;
        if (self || !all)
            p->cls[v->id] = TG_PLAN_KMADE;
        else if (pg->nouts[v->id] == 1)
            p->cls[v->id] = TG_PLAN_EXTERNAL;
        else
            p->cls[v->id] = TG_PLAN_PLANNED;
    }
    return TG_OK;
}

/* Run-time types, classes and workspace, in program order. */
static tg_status plan_types(tg_plan_prog *pg, tg_plan *p, plan_tmp *t) {
    tg_type *tin = pg->argt;
    const tg_tensor **vals = (const tg_tensor **)pg->args;
    for (int i = 0; i < pg->norder; i++) {
        tg_node *n = pg->order[i];
        bool ok = true;
        for (int k = 0; k < n->nin; k++) {
            ok = ok && p->known[n->in[k]->id];
            tin[k] = p->rt[n->in[k]->id];
            vals[k] = t->pv[n->in[k]->id];
        }
        if (!ok) {
            p->dyn[i] = 1;
            p->dynamic = true;
            for (int o = 0; o < n->nout; o++) p->cls[n->out[o]->id] = TG_PLAN_DYNAMIC;
            continue;
        }
        tg_type tout[TG_MAX_OUTS];
        char msg[512];
        tg_status ist = tg_node_infer(n, tin, vals, tout, msg, sizeof msg);
        if (ist != TG_OK) return tg_plan_node_fail(pg->g, n, ist, msg);
        /* alloc's extents (inputs 1...) all have plan-time values: the plan knows the
         * output's extents for sure (a static type's extent alone is a claim its kernel
         * checks) */
        bool values_known = true;
        for (int k = 1; k < n->nin; k++) values_known = values_known && vals[k];
        tg_status st = out_classes(pg, p, i, tout, values_known);
        if (st != TG_OK) return st;
        size_t ws = ins_ws(pg, i, tin, tout);
        if (ws > p->ws_bytes) p->ws_bytes = ws;
        bool all_known = true;
        for (int o = 0; o < n->nout; o++) all_known = all_known && p->known[n->out[o]->id];
        if (all_known) pv_eval(pg, n, tin, tout, t->pv, t->pv_own);
    }
    return TG_OK;
}

/* Blocks: assigned in program order, released after the last use (views included), or
 * after the backend's run holding it (seg_hi); an output takes over the block of an input
 * it may overwrite (inplace_source). */
static tg_status plan_blocks(tg_plan_prog *pg, tg_plan *p, plan_tmp *t) {
    int *die = t->die, *next = t->next;
    for (int i = 0; i < pg->norder; i++) die[i] = -1;
    for (int i = 0; i < pg->norder; i++) {
        tg_node *n = pg->order[i];
        for (int o = 0; o < n->nout; o++) {
            int v = n->out[o]->id;
            if (p->cls[v] != TG_PLAN_PLANNED) continue;
            size_t need = tg_plan_type_bytes(&p->rt[v]);
            if (need == SIZE_MAX) return tg_plan_node_fail(pg->g, n, TG_ELIMIT, "output too large");
            int u = o == 0 ? inplace_source(pg, p, n, i) : -1;
            if (u >= 0) { /* the output takes over the block of the input it overwrites */
                p->blk[v] = p->blk[u];
                for (int *w = &die[i]; *w >= 0; w = &next[*w])
                    if (*w == u) {
                        *w = next[u];
                        break;
                    }
            } else {
                p->blk[v] = block_pick(p, t->busy, need < 64 ? 64 : need);
            }
            int at = pg->ext[v] > i ? pg->ext[v] : i;
            if (at < pg->norder && p->seg_hi && p->seg_hi[at] > 0) at = p->seg_hi[at] - 1;
            if (at < pg->norder) { /* graph outputs live to the end */
                next[v] = die[at];
                die[at] = v;
            }
        }
        for (int v = die[i]; v >= 0; v = next[v]) t->busy[p->blk[v]] = false;
    }
    return TG_OK;
}

/* The workspace's layout, and the pool when a value is large enough for a kernel to split
 * it (or the backend made concurrent runs). Under pg->mu. */
static void plan_finish(tg_plan_prog *pg, tg_plan *p) {
    p->ws_stride = (p->ws_bytes + 63) / 64 * 64;
    if (atomic_load(&pg->pool) || pg->nthreads <= 1) return;
    bool big = p->seg_hi != NULL;
    for (int v = 0; v < pg->nvars && !big; v++) {
        size_t es = tg_dtype_size((tg_dtype)p->rt[v].dtype);
        big = p->known[v] && es && tg_plan_type_bytes(&p->rt[v]) / es >= PLAN_POOL_ELEMS;
    }
    if (!big) return;
    tg_pool *pool = tg_pool_new(pg->ctx, pg->nthreads);
    pg->own_pool = pool != NULL;
    if (!pool) pg->nthreads = 1; /* no threads to be had: run on this one */
    atomic_store_explicit(&pg->pool, pool, memory_order_release);
}

/* Makes the plan for the shapes of `in` (under pg->mu). */
static tg_status plan_make(tg_plan_prog *pg, tg_tensor *const *in, tg_plan **out) {
    plan_tmp t = {0};
    tg_plan *p = tg_mem_calloc(pg->ctx, sizeof *p);
    if (!p) return TG_ENOMEM;
    atomic_init(&p->stamp, 0);
    atomic_init(&p->refs, 1);
    atomic_init(&p->evicted, false);
    tg_status st = plan_alloc(pg, in, p, &t);
    if (st == TG_OK) st = plan_types(pg, p, &t);
    if (st == TG_OK && pg->runs) st = pg->runs(pg->runs_ud, p);
    if (st == TG_OK) st = plan_blocks(pg, p, &t);
    if (st == TG_OK) plan_finish(pg, p);
    tmp_free(pg, &t);
    if (st != TG_OK) {
        plan_free(pg, p);
        return st;
    }
    *out = p;
    return TG_OK;
}

/* Marks p as the most recently used plan; nothing is written when it already is (calls of
 * one signature from several threads then only read the two lines). */
static void plan_touch(tg_plan_prog *pg, tg_plan *p) {
    unsigned long now = atomic_load_explicit(&pg->clock, memory_order_relaxed);
    if (now != 0 && atomic_load_explicit(&p->stamp, memory_order_relaxed) == now) return;
    now = atomic_fetch_add_explicit(&pg->clock, 1, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->stamp, now, memory_order_relaxed);
}

/* The program's plan for `key` (cached, or made), with a reference for the caller. */
static tg_status plan_find(tg_plan_prog *pg, tg_tensor *const *in, const int64_t *key, int nk,
                           tg_plan **out) {
    pthread_mutex_lock(&pg->mu);
    tg_plan *hit = NULL;
    for (int i = 0; i < pg->nplans && !hit; i++)
        if (memcmp(pg->plans[i]->key, key, sizeof *key * (size_t)nk) == 0) hit = pg->plans[i];
    tg_status st = TG_OK;
    bool made = false;
    if (!hit) made = (st = plan_make(pg, in, &hit)) == TG_OK;
    if (made && pg->nplans == TG_PLAN_MAX) { /* the least recently used goes */
        int lru = 0;
        for (int i = 1; i < pg->nplans; i++)
            if (atomic_load_explicit(&pg->plans[i]->stamp, memory_order_relaxed) <
                atomic_load_explicit(&pg->plans[lru]->stamp, memory_order_relaxed))
                lru = i;
        atomic_store_explicit(&pg->plans[lru]->evicted, true, memory_order_release);
        tg_plan_unref(pg, pg->plans[lru]);
        pg->plans[lru] = pg->plans[--pg->nplans];
    }
    if (made) pg->plans[pg->nplans++] = hit;
    if (st == TG_OK) {
        atomic_fetch_add_explicit(&hit->refs, 1, memory_order_relaxed);
        plan_touch(pg, hit);
    }
    pthread_mutex_unlock(&pg->mu);
    *out = hit;
    return st;
}

/* ---- a replica's memory for a plan ---- */

static void mem_free(tg_plan_prog *pg, tg_plan_mem *m) {
    tg_ctx *ctx = pg->ctx;
    size_t nv = (size_t)pg->nvars + 1;
    for (int b = 0; m->blocks && b < m->plan->nblocks; b++) block_release(ctx, &m->blocks[b]);
    block_release(ctx, &m->ws);
    tg_mem_free(ctx, m->blocks, m->blocks ? sizeof *m->blocks * (size_t)(m->plan->nblocks + 1) : 0);
    tg_mem_free(ctx, m->tens, m->tens ? sizeof *m->tens * nv : 0);
    tg_plan_unref(pg, m->plan);
    tg_mem_free(ctx, m, sizeof *m);
}

/* A block that could not be allocated: the error names the node whose output needed the
 * most of it (a block serves several values in turn). */
static tg_status block_fail(const tg_plan_prog *pg, const tg_plan *p, int b, tg_status st) {
    const tg_node *worst = NULL;
    size_t most = 0;
    for (int i = 0; i < pg->norder; i++) {
        const tg_node *n = pg->order[i];
        for (int o = 0; o < n->nout; o++) {
            int v = n->out[o]->id;
            size_t need = tg_plan_type_bytes(&p->rt[v]);
            if (p->cls[v] == TG_PLAN_PLANNED && p->blk[v] == b && (!worst || need > most)) {
                worst = n;
                most = need;
            }
        }
    }
    if (!worst) return st;
    char msg[TG_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", tg_last_error());
    return tg_plan_node_fail(pg->g, worst, st, msg);
}

/* Memory for plan p (whose reference it takes over, also on failure): the blocks, the
 * workspace, the planned tensors. */
static tg_status mem_new(tg_plan_prog *pg, tg_plan *p, tg_plan_mem **out) {
    tg_ctx *ctx = pg->ctx;
    tg_plan_mem *m = tg_mem_calloc(ctx, sizeof *m);
    if (!m) {
        tg_plan_unref(pg, p);
        return TG_ENOMEM;
    }
    m->plan = p;
    m->blocks = tg_mem_calloc(ctx, sizeof *m->blocks * (size_t)(p->nblocks + 1));
    m->tens = tg_mem_calloc(ctx, sizeof *m->tens * (size_t)(pg->nvars + 1));
    tg_status st = m->blocks && m->tens ? TG_OK : TG_ENOMEM;
    for (int b = 0; b < p->nblocks && st == TG_OK; b++) {
        m->blocks[b].size = p->bsize[b];
        if ((st = block_alloc(ctx, &m->blocks[b])) != TG_OK) st = block_fail(pg, p, b, st);
    }
    if (st == TG_OK && p->ws_bytes) {
        m->ws.size = p->ws_slices > 0 ? p->ws_stride * (size_t)p->ws_slices : p->ws_bytes;
        st = block_alloc(ctx, &m->ws);
    }
    if (st != TG_OK) {
        mem_free(pg, m);
        return st;
    }
    for (int v = 0; v < pg->nvars; v++) {
        if (p->cls[v] != TG_PLAN_PLANNED) continue;
        tg_tensor *t = &m->tens[v];
        const tg_type *rt = &p->rt[v];
        t->dtype = (tg_dtype)rt->dtype;
        t->ndim = rt->ndim;
        for (int d = 0; d < rt->ndim; d++) t->shape[d] = rt->shape[d];
        tg_contiguous_strides(t->ndim, t->shape, t->strides);
        t->offset = 0;
        t->buf = m->blocks[p->blk[v]].buf;
    }
    *out = m;
    return TG_OK;
}

/* Lets go of r's memory mems[i]. */
static void mem_drop(tg_plan_prog *pg, tg_plan_rep *r, int i) {
    mem_free(pg, r->mems[i]);
    r->mems[i] = r->mems[--r->nmems];
}

tg_status tg_plan_get(tg_plan_prog *pg, tg_plan_rep *r, tg_tensor *const *in) {
    int nk = key_len(pg);
    int64_t kbuf[64];
    int64_t *key = nk <= 64 ? kbuf : NULL;
    if (!key) {
        key = tg_mem_alloc(pg->ctx, sizeof *key * (size_t)nk);
        if (!key) return TG_ENOMEM;
    }
    key_fill(pg, in, key);
    /* r's memory for a plan the program still keeps: no lock */
    tg_plan_mem *m = NULL;
    for (int i = 0; i < r->nmems && !m; i++)
        if (memcmp(r->mems[i]->plan->key, key, sizeof *key * (size_t)nk) == 0 &&
            !atomic_load_explicit(&r->mems[i]->plan->evicted, memory_order_acquire))
            m = r->mems[i];
    tg_status st = TG_OK;
    if (m) {
        plan_touch(pg, m->plan);
    } else {
        tg_plan *p = NULL;
        st = plan_find(pg, in, key, nk, &p);
        for (int i = r->nmems - 1; st == TG_OK && i >= 0; i--) /* plans the program dropped */
            if (atomic_load_explicit(&r->mems[i]->plan->evicted, memory_order_acquire))
                mem_drop(pg, r, i);
        if (st == TG_OK && r->nmems == TG_PLAN_MAX) { /* full: the least recently used goes */
            int lru = 0;
            for (int i = 1; i < r->nmems; i++)
                if (r->mems[i]->used < r->mems[lru]->used) lru = i;
            mem_drop(pg, r, lru);
        }
        if (st == TG_OK) st = mem_new(pg, p, &m);
        if (st == TG_OK) r->mems[r->nmems++] = m;
    }
    if (key != kbuf) tg_mem_free(pg->ctx, key, sizeof *key * (size_t)nk);
    if (st != TG_OK) return st;
    m->used = ++r->clock;
    r->mem = m;
    r->pool = atomic_load_explicit(&pg->pool, memory_order_acquire);
    r->nthreads = r->pool ? tg_pool_size(r->pool) : 1;
    return TG_OK;
}

int tg_plan_recent(tg_plan_prog *pg, tg_plan **out) {
    pthread_mutex_lock(&pg->mu);
    tg_plan *p = NULL;
    for (int i = 0; i < pg->nplans; i++)
        if (!p || atomic_load(&pg->plans[i]->stamp) > atomic_load(&p->stamp)) p = pg->plans[i];
    if (p) atomic_fetch_add(&p->refs, 1);
    int n = pg->nplans;
    pthread_mutex_unlock(&pg->mu);
    *out = p;
    return n;
}

/* ---- replicas ---- */

static void rep_free(tg_plan_prog *pg, tg_plan_rep *r) {
    tg_ctx *ctx = pg->ctx;
    size_t nv = (size_t)pg->nvars + 1;
    if (pg->rep_fini) pg->rep_fini(pg->rep_ud, r);
    while (r->nmems > 0) mem_drop(pg, r, r->nmems - 1);
    tg_mem_free(ctx, r->val, r->val ? sizeof *r->val * nv : 0);
    tg_mem_free(ctx, r->owned, r->owned ? nv : 0);
    tg_mem_free(ctx, r->args, r->args ? sizeof *r->args * (size_t)pg->maxargs : 0);
    tg_mem_free(ctx, r->argt, r->argt ? sizeof *r->argt * (size_t)pg->maxargs : 0);
    tg_mem_free(ctx, r, pg->rep_size);
}

/* A new replica, in the list of all of them. */
static tg_status rep_new(tg_plan_prog *pg, tg_plan_rep **out) {
    tg_ctx *ctx = pg->ctx;
    size_t nv = (size_t)pg->nvars + 1;
    TG_ASSERT(pg->rep_size >= sizeof(tg_plan_rep));
    tg_plan_rep *r = tg_mem_calloc(ctx, pg->rep_size);
    if (!r) return TG_ENOMEM;
    r->val = tg_mem_calloc(ctx, sizeof *r->val * nv);
    r->owned = tg_mem_calloc(ctx, nv);
    r->args = tg_mem_calloc(ctx, sizeof *r->args * (size_t)pg->maxargs);
    r->argt = tg_mem_calloc(ctx, sizeof *r->argt * (size_t)pg->maxargs);
    tg_status st = r->val && r->owned && r->args && r->argt ? TG_OK : TG_ENOMEM;
    if (st == TG_OK && pg->rep_init) st = pg->rep_init(pg->rep_ud, r);
    if (st != TG_OK) {
        rep_free(pg, r);
        return st;
    }
    pthread_mutex_lock(&pg->mu);
    r->next_all = pg->reps;
    pg->reps = r;
    pg->nreps++;
    pthread_mutex_unlock(&pg->mu);
    *out = r;
    return TG_OK;
}

tg_status tg_plan_rep_take(tg_plan_prog *pg, tg_plan_rep **out) {
    tg_plan_rep *r = atomic_exchange_explicit(&pg->spare, NULL, memory_order_acquire);
    if (!r) {
        pthread_mutex_lock(&pg->mu);
        r = pg->free;
        if (r) pg->free = r->next_free;
        pthread_mutex_unlock(&pg->mu);
    }
    if (r) {
        *out = r;
        return TG_OK;
    }
    return rep_new(pg, out);
}

void tg_plan_rep_give(tg_plan_prog *pg, tg_plan_rep *r) {
    r->mem = NULL;
    tg_plan_rep *none = NULL;
    if (atomic_compare_exchange_strong_explicit(&pg->spare, &none, r, memory_order_release,
                                                memory_order_relaxed))
        return;
    pthread_mutex_lock(&pg->mu);
    r->next_free = pg->free;
    pg->free = r;
    pthread_mutex_unlock(&pg->mu);
}

int tg_plan_rep_count(tg_plan_prog *pg) {
    pthread_mutex_lock(&pg->mu);
    int n = pg->nreps;
    pthread_mutex_unlock(&pg->mu);
    return n;
}

/* ---- the values of a call ----
 * val[v] and owned[v] are the replica's (by variable id); owned marks exactly the tensors
 * the call must free (tg_plan_unbind). */

static bool same_shape(const tg_tensor *t, const tg_type *rt) {
    if (t->dtype != rt->dtype || t->ndim != rt->ndim) return false;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] != rt->shape[d]) return false;
    return true;
}

static tg_status out_mismatch(const tg_plan_prog *pg, int i, const tg_tensor *t,
                              const tg_type *want) {
    char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
    tg_type got;
    tg_var *v = pg->g->outputs.items[i];
    tg_plan_tensor_rt(&v->type, t, &got);
    got.nobcast = 0;
    return tg_set_error(t->dtype != want->dtype ? TG_ETYPE : TG_ESHAPE,
                        "output %d%s%s%s: the tensor given is %s, the result is %s", i,
                        v->name ? " ('" : "", v->name ? v->name : "", v->name ? "')" : "",
                        tg_type_str(&got, a, sizeof a), tg_type_str(want, b, sizeof b));
}

static bool shares_input_memory(const tg_plan_prog *pg, tg_tensor *const *in, const tg_tensor *t) {
    for (int i = 0; i < pg->g->inputs.n; i++)
        if (in[i]->buf == t->buf) return true;
    return false;
}

tg_status tg_plan_bind(const tg_plan_prog *pg, tg_plan_rep *r, tg_tensor *const *in,
                       tg_tensor **out, int nout, bool into) {
    tg_graph *g = pg->g;
    const tg_plan *p = r->mem->plan;
    tg_tensor **val = r->val;
    uint8_t *owned = r->owned;
    for (int v = 0; v < pg->nvars; v++) {
        owned[v] = 0;
        tg_var *var = g->vars.items[v];
        val[v] = var->kind == TG_VAR_CONST      ? var->value
                 : p->cls[v] == TG_PLAN_PLANNED ? &r->mem->tens[v]
                                                : NULL;
    }
    for (int i = 0; i < g->inputs.n; i++) val[((tg_var *)g->inputs.items[i])->id] = in[i];
    /* a value returned several times is computed once: into a given tensor when there is
     * one (first round), else into a new one; the other outputs get copies at the end */
    for (int k = 0; k < 2 * nout; k++) {
        int i = k % nout;
        int v = ((tg_var *)g->outputs.items[i])->id;
        if (p->cls[v] != TG_PLAN_EXTERNAL || val[v]) continue;
        const tg_type *rt = &p->rt[v];
        tg_tensor *t = into ? out[i] : NULL;
        if ((k < nout) != (t != NULL)) continue;
        if (t && !same_shape(t, rt)) return out_mismatch(pg, i, t, rt);
        if (t && tg_tensor_is_contiguous(t) && !shares_input_memory(pg, in, t)) {
            val[v] = t; /* borrowed: written in place */
            continue;
        }
        tg_var *var = g->outputs.items[i];
        if (var->node) {
            tg_status st = tg_plan_node_tensor(g, var->node, pg->ctx, rt, &val[v]);
            if (st != TG_OK) return st;
        } else if (!(val[v] = tg_tensor_empty(pg->ctx, (tg_dtype)rt->dtype, rt->ndim, rt->shape))) {
            return TG_ENOMEM;
        }
        owned[v] = 1;
    }
    return TG_OK;
}

/* When a given output shares memory with an input, the results still reading an input's
 * memory are copied aside before any given output is written. */
static tg_status copy_aside(const tg_plan_prog *pg, tg_tensor *const *in, tg_tensor **out, int nout,
                            bool into, tg_tensor **val, uint8_t *owned) {
    tg_graph *g = pg->g;
    bool alias = false;
    for (int i = 0; into && i < nout; i++)
        alias = alias || (out[i] && val[((tg_var *)g->outputs.items[i])->id] != out[i] &&
                          shares_input_memory(pg, in, out[i]));
    for (int i = 0; alias && i < nout; i++) {
        int v = ((tg_var *)g->outputs.items[i])->id;
        tg_tensor *t = val[v];
        if (t == out[i] || !shares_input_memory(pg, in, t)) continue;
        tg_tensor *c = tg_tensor_dup(t);
        if (!c) return TG_ENOMEM;
        if (owned[v]) tg_tensor_free(t);
        val[v] = c;
        owned[v] = 1;
    }
    return TG_OK;
}

tg_status tg_plan_results(const tg_plan_prog *pg, tg_plan_rep *r, tg_tensor *const *in,
                          tg_tensor **out, int nout, bool into) {
    tg_graph *g = pg->g;
    tg_tensor **val = r->val;
    uint8_t *owned = r->owned;
    tg_status st = copy_aside(pg, in, out, nout, into, val, owned);
    for (int i = 0; i < nout && st == TG_OK; i++) {
        tg_var *var = g->outputs.items[i];
        int v = var->id;
        tg_tensor *t = val[v];
        TG_ASSERT(t != NULL);
        if (into && out[i]) {
            if (t == out[i]) continue;
            tg_type rt;
            tg_plan_tensor_rt(&var->type, t, &rt);
            if (!same_shape(out[i], &rt)) return out_mismatch(pg, i, out[i], &rt);
            tg_tensor_copy_into(out[i], t);
            continue;
        }
        bool last = true; /* the last time this value is returned */
        for (int j = i + 1; j < nout; j++) last = last && g->outputs.items[j] != (void *)var;
        if (last && owned[v] && atomic_load(&t->buf->refs) == 1 && tg_tensor_is_contiguous(t)) {
            out[i] = t;
            owned[v] = 0;
            val[v] = NULL;
        } else if (!(out[i] = tg_tensor_dup(t))) {
            st = TG_ENOMEM;
        }
    }
    return st;
}

void tg_plan_unbind(const tg_plan_prog *pg, tg_plan_rep *r) {
    for (int v = 0; v < pg->nvars; v++) {
        if (r->owned[v]) tg_tensor_free(r->val[v]);
        r->owned[v] = 0;
        r->val[v] = NULL;
    }
}

tg_status tg_plan_outs_begin(tg_ctx *ctx, tg_plan_outs *o, tg_tensor **out, int nout, bool into) {
    o->given = o->stack;
    o->nout = nout;
    if (nout > (int)TG_COUNTOF(o->stack)) {
        o->given = tg_mem_alloc(ctx, sizeof *o->given * (size_t)nout);
        if (!o->given) return TG_ENOMEM;
    }
    for (int i = 0; i < nout; i++) {
        o->given[i] = into && out[i];
        if (!o->given[i]) out[i] = NULL;
    }
    return TG_OK;
}

tg_status tg_plan_outs_end(tg_ctx *ctx, tg_plan_outs *o, tg_tensor **out, tg_status st) {
    if (st != TG_OK)
        for (int i = 0; i < o->nout; i++)
            if (!o->given[i]) {
                tg_tensor_free(out[i]);
                out[i] = NULL;
            }
    if (o->given != o->stack) tg_mem_free(ctx, o->given, sizeof *o->given * (size_t)o->nout);
    return st;
}
