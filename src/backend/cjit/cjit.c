/* cjit.c - the C JIT backend object: compiling (emit, build or load from the cache), the
 * memory plan per input-shape signature, the runtime call-backs of tg_rt.h, and calls.
 *
 * The generated function of a graph runs its instructions in order (the topological
 * order of tg_ir_toposort, the one the source was emitted for). Instructions with an
 * emitter run generated loops through rt->ew, the others call back into rt->kernel, which
 * runs the same kernel class the VM would choose (vector elementwise, reduction, BLAS,
 * fused block evaluator) or the op's reference kernel, with the same memory plan rules as
 * the VM (src/backend/vm/vm.c): values are released after their last use (views extend
 * it) and their blocks reused; graph outputs are written straight into the caller's
 * tensors or into new ones; buffers stay allocated between calls.
 *
 * A signature whose plan cannot be made statically (values whose shapes depend on the
 * values of a self-allocating op) runs on the VM, which runs such nodes at run time.
 *
 * Invariants: calls of one function are serialized (a mutex), as the VM's; results equal
 * the VM's up to the rounding of libm's float functions (expf, ...) and summation order.
 */
#include "cjit.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>

#define CJ_MAX_PLANS  8
#define CJ_HUGE       ((size_t)2 << 20)
#define CJ_POOL_ELEMS 16384
#define SPLIT_WORK    32768
#define SPLIT_ALIGN   64

enum { CLS_NONE, CLS_LEAF, CLS_PLANNED, CLS_EXTERNAL, CLS_KMADE };

typedef struct cj_block {
    void *raw;
    size_t raw_size;
    size_t size;
    tg_buffer *buf;
} cj_block;

typedef struct cj_plan {
    int64_t *key;
    int nkey;
    bool dynamic;    /* some shape is only known at run time: the call runs on the VM */
    tg_type *rt;     /* per var */
    uint8_t *cls;    /* per var */
    int *blk;        /* per var */
    tg_tensor *tens; /* per var: PLANNED tensors */
    cj_block *blocks;
    int nblocks;
    cj_block ws;
    size_t ws_bytes;
    unsigned long stamp;
} cj_plan;

struct tg_cj {
    tg_ctx *ctx;
    tg_graph *g;
    tg_compile_opts opts;
    tg_node **order;
    int norder;
    uint8_t *how;      /* per instruction: TG_CJ_EW or TG_CJ_KERNEL */
    vm_ins_info *info; /* per instruction: the library kernel class */
    int nvars;
    int *last, *ext, *nouts, *rel, *rel_at;
    tg_type *const_rt;
    tg_pool *pool;
    bool own_pool;
    int nthreads;
    tg_vk_isa isa;
    pthread_mutex_t mu;
    cj_plan *plans[CJ_MAX_PLANS];
    int nplans;
    unsigned long stamp;
    tg_cj_lib lib;
    int (*main)(tg_rt *rt);
    tg_vm *vm; /* for dynamic signatures, made when first needed */
    tg_cj_after_fn after;
    void *after_ud;
    /* per call */
    cj_plan *cur;
    tg_status st;
    tg_tensor **val;
    uint8_t *owned;
    tg_rt_val *rv;
    tg_tensor **args;
    tg_type *argt;
    int maxargs;
    tg_rt rt;
};

/* ---- helpers (as the VM's) ---- */

static void runtime_type(const tg_type *st, int ndim, const int64_t *shape, uint8_t dtype,
                         tg_type *rt) {
    *rt = (tg_type){.dtype = dtype, .ndim = (uint8_t)ndim};
    for (int i = 0; i < ndim; i++) {
        rt->shape[i] = shape[i];
        if (shape[i] == 1 && st->shape[i] != 1) rt->nobcast |= 1u << i;
    }
}

static void tensor_rt(const tg_type *st, const tg_tensor *t, tg_type *rt) {
    runtime_type(st, t->ndim, t->shape, (uint8_t)t->dtype, rt);
}

static size_t type_bytes(const tg_type *t) {
    int64_t n = 0;
    if (!tg_shape_size(t->ndim, t->shape, &n)) return SIZE_MAX;
    return (size_t)n * tg_dtype_size((tg_dtype)t->dtype);
}

static tg_status node_fail(const tg_cj *cj, const tg_node *n, tg_status st, const char *msg) {
    const char *name = tg_op_table[n->op]->name;
    if (n->line > 0)
        return tg_set_error(st, "%s:%d:%d: %s: %s", cj->g->file ? cj->g->file : "<input>", n->line,
                            n->col, name, msg);
    return tg_set_error(st, "node %d (%s): %s", n->id, name, msg);
}

/* The library kernel class of a node, as the VM chooses it. */
static void choose_kernel(tg_cj *cj, int i) {
    tg_node *n = cj->order[i];
    const tg_op_def *op = tg_op_table[n->op];
    vm_ins_info *in = &cj->info[i];
    in->kind = VM_REF;
    in->isa = cj->isa;
    if (op->views || op->self_alloc) return;
    if (op->kind == TG_KIND_ELEMWISE && n->nout == 1 && n->nin <= TG_VK_MAXIN) {
        tg_dtype idt[TG_VK_MAXIN];
        for (int k = 0; k < n->nin; k++) idt[k] = (tg_dtype)n->in[k]->type.dtype;
        in->vk =
            tg_vk_select(op, n->nin, idt, (tg_dtype)n->out[0]->type.dtype, cj->isa, &in->vargs);
        if (in->vk) {
            in->kind = VM_EW;
            in->cost = tg_vk_cost(op);
        }
        return;
    }
    if (tg_vm_reduce_ok(n)) {
        in->kind = VM_REDUCE;
        return;
    }
    if (tg_vm_blas_ok(n)) {
        in->kind = VM_BLAS;
        return;
    }
    if (n->op == TG_OP_FUSED) { /* also for emitted ones: their run-time fallback */
        in->fused = tg_vm_fused_prep(cj->ctx, n, cj->isa);
        if (in->fused) in->kind = VM_FUSED;
    }
}

/* ---- plans ---- */

static void block_release(tg_ctx *ctx, cj_block *b) {
    if (b->buf) tg_buffer_unref(b->buf);
    if (b->raw) tg_mem_free(ctx, b->raw, b->raw_size);
    memset(b, 0, sizeof *b);
}

static tg_status block_alloc(tg_ctx *ctx, cj_block *b) {
    size_t align = b->size >= CJ_HUGE ? CJ_HUGE : 64, size = b->size ? b->size : 64;
    size = (size + align - 1) / align * align;
    if (size < b->size || size > SIZE_MAX - align)
        return tg_set_error(TG_ENOMEM, "out of memory: a buffer of %zu bytes", b->size);
    b->raw_size = size + align - 1;
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
    b->size = size;
#ifdef MADV_HUGEPAGE
    if (align == CJ_HUGE) (void)madvise((void *)p, size, MADV_HUGEPAGE);
#endif
    return TG_OK;
}

static void plan_free(tg_cj *cj, cj_plan *p) {
    if (!p) return;
    tg_ctx *ctx = cj->ctx;
    size_t nv = (size_t)cj->nvars + 1;
    for (int b = 0; p->blocks && b < p->nblocks; b++) block_release(ctx, &p->blocks[b]);
    block_release(ctx, &p->ws);
    tg_mem_free(ctx, p->blocks, p->blocks ? sizeof *p->blocks * nv : 0);
    tg_mem_free(ctx, p->key, p->key ? sizeof *p->key * (size_t)(p->nkey + 1) : 0);
    tg_mem_free(ctx, p->rt, p->rt ? sizeof *p->rt * nv : 0);
    tg_mem_free(ctx, p->cls, p->cls ? nv : 0);
    tg_mem_free(ctx, p->blk, p->blk ? sizeof *p->blk * nv : 0);
    tg_mem_free(ctx, p->tens, p->tens ? sizeof *p->tens * nv : 0);
    tg_mem_free(ctx, p, sizeof *p);
}

static int key_len(const tg_cj *cj) {
    int n = 0;
    for (int i = 0; i < cj->g->inputs.n; i++) n += ((tg_var *)cj->g->inputs.items[i])->type.ndim;
    return n;
}

static void key_fill(const tg_cj *cj, tg_tensor *const *in, int64_t *key) {
    int k = 0;
    for (int i = 0; i < cj->g->inputs.n; i++)
        for (int d = 0; d < in[i]->ndim; d++) key[k++] = in[i]->shape[d];
}

static size_t ins_ws(tg_cj *cj, int i, const tg_type *in, const tg_type *out) {
    const tg_node *n = cj->order[i];
    switch (cj->info[i].kind) {
    case VM_REDUCE:
        return tg_vm_reduce_ws(n, in, out, cj->nthreads);
    case VM_BLAS:
        return tg_vm_blas_ws(n, in, out, cj->nthreads);
    case VM_FUSED:
        return tg_vm_fused_ws(cj->info[i].fused, in, out, cj->nthreads);
    default:
        return 0;
    }
}

static int block_pick(cj_plan *p, bool *busy, size_t need) {
    int best = -1;
    size_t bestd = SIZE_MAX;
    for (int b = 0; b < p->nblocks; b++) {
        if (busy[b]) continue;
        size_t s = p->blocks[b].size;
        if (s / 2 > need || need / 2 > s) continue;
        size_t d = s > need ? s - need : need - s;
        if (d < bestd) {
            best = b;
            bestd = d;
        }
    }
    if (best < 0) {
        best = p->nblocks++;
        p->blocks[best].size = 0;
    }
    if (p->blocks[best].size < need) p->blocks[best].size = need;
    busy[best] = true;
    return best;
}

static tg_status plan_make(tg_cj *cj, tg_tensor *const *in, cj_plan **out) {
    tg_ctx *ctx = cj->ctx;
    tg_graph *g = cj->g;
    size_t nv = (size_t)cj->nvars + 1, no = (size_t)cj->norder + 1;
    tg_status st = TG_OK;
    bool *busy = NULL;
    uint8_t *known = NULL;
    int *die = NULL, *next = NULL;
    cj_plan *p = tg_mem_calloc(ctx, sizeof *p);
    if (!p) return TG_ENOMEM;
    p->nkey = key_len(cj);
    p->key = tg_mem_alloc(ctx, sizeof *p->key * (size_t)(p->nkey + 1));
    p->rt = tg_mem_calloc(ctx, sizeof *p->rt * nv);
    p->cls = tg_mem_calloc(ctx, nv);
    p->blk = tg_mem_alloc(ctx, sizeof *p->blk * nv);
    p->tens = tg_mem_calloc(ctx, sizeof *p->tens * nv);
    p->blocks = tg_mem_calloc(ctx, sizeof *p->blocks * nv);
    busy = tg_mem_calloc(ctx, nv);
    known = tg_mem_calloc(ctx, nv);
    die = tg_mem_alloc(ctx, sizeof *die * no);
    next = tg_mem_alloc(ctx, sizeof *next * nv);
    if (!p->key || !p->rt || !p->cls || !p->blk || !p->tens || !p->blocks || !busy || !known ||
        !die || !next) {
        st = TG_ENOMEM;
        goto done;
    }
    key_fill(cj, in, p->key);
    for (int v = 0; v < cj->nvars; v++) p->blk[v] = -1;
    for (int i = 0; i < g->inputs.n; i++) {
        tg_var *v = g->inputs.items[i];
        tensor_rt(&v->type, in[i], &p->rt[v->id]);
        known[v->id] = 1;
        p->cls[v->id] = CLS_LEAF;
    }
    for (int v = 0; v < cj->nvars; v++) {
        tg_var *var = g->vars.items[v];
        if (var->kind != TG_VAR_CONST) continue;
        p->rt[v] = cj->const_rt[v];
        known[v] = 1;
        p->cls[v] = CLS_LEAF;
    }
    tg_type *tin = cj->argt;
    for (int i = 0; i < cj->norder && !p->dynamic; i++) {
        tg_node *n = cj->order[i];
        const tg_op_def *op = tg_op_table[n->op];
        bool ok = true;
        for (int k = 0; k < n->nin; k++) {
            ok = ok && known[n->in[k]->id];
            tin[k] = p->rt[n->in[k]->id];
        }
        if (!ok) {
            p->dynamic = true;
            break;
        }
        tg_type tout[TG_MAX_OUTS];
        tg_infer ic = {.op = op,
                       .in = tin,
                       .nin = n->nin,
                       .attrs = n->attrs,
                       .out = tout,
                       .nout = op->nout,
                       .runtime = true};
        if (op->infer(&ic) != TG_OK) {
            st = node_fail(cj, n, ic.status ? ic.status : TG_ESHAPE, ic.msg);
            goto done;
        }
        TG_ASSERT(ic.nout == n->nout);
        bool self = op->views || op->self_alloc;
        for (int o = 0; o < n->nout; o++) {
            tg_var *v = n->out[o];
            bool all = true;
            for (int d = 0; d < tout[o].ndim; d++) all = all && tout[o].shape[d] >= 0;
            if (!all) {
                p->dynamic = true;
                break;
            }
            runtime_type(&v->type, tout[o].ndim, tout[o].shape, tout[o].dtype, &p->rt[v->id]);
            known[v->id] = 1;
            if (self)
                p->cls[v->id] = CLS_KMADE;
            else if (cj->nouts[v->id] == 1)
                p->cls[v->id] = CLS_EXTERNAL;
            else
                p->cls[v->id] = CLS_PLANNED;
        }
        size_t ws = ins_ws(cj, i, tin, tout);
        if (ws > p->ws_bytes) p->ws_bytes = ws;
    }
    if (p->dynamic) goto done;
    for (int i = 0; i < cj->norder; i++) die[i] = -1;
    for (int i = 0; i < cj->norder; i++) {
        tg_node *n = cj->order[i];
        for (int o = 0; o < n->nout; o++) {
            int v = n->out[o]->id;
            if (p->cls[v] != CLS_PLANNED) continue;
            size_t need = type_bytes(&p->rt[v]);
            if (need == SIZE_MAX) {
                st = node_fail(cj, n, TG_ELIMIT, "output too large");
                goto done;
            }
            p->blk[v] = block_pick(p, busy, need < 64 ? 64 : need);
            int at = cj->ext[v] > i ? cj->ext[v] : i;
            if (at < cj->norder) {
                next[v] = die[at];
                die[at] = v;
            }
        }
        for (int v = die[i]; v >= 0; v = next[v]) busy[p->blk[v]] = false;
    }
    for (int b = 0; b < p->nblocks; b++)
        if ((st = block_alloc(ctx, &p->blocks[b])) != TG_OK) goto done;
    if (p->ws_bytes) {
        p->ws.size = p->ws_bytes;
        if ((st = block_alloc(ctx, &p->ws)) != TG_OK) goto done;
    }
    if (!cj->pool && cj->nthreads > 1) {
        bool big = false;
        for (int v = 0; v < cj->nvars && !big; v++) {
            size_t es = tg_dtype_size((tg_dtype)p->rt[v].dtype);
            big = known[v] && es && type_bytes(&p->rt[v]) / es >= CJ_POOL_ELEMS;
        }
        if (big) {
            cj->pool = tg_pool_new(ctx, cj->nthreads);
            cj->own_pool = cj->pool != NULL;
            if (!cj->pool) cj->nthreads = 1;
        }
    }
    for (int v = 0; v < cj->nvars; v++) {
        if (p->cls[v] != CLS_PLANNED) continue;
        tg_tensor *t = &p->tens[v];
        const tg_type *rt = &p->rt[v];
        t->dtype = (tg_dtype)rt->dtype;
        t->ndim = rt->ndim;
        for (int d = 0; d < rt->ndim; d++) t->shape[d] = rt->shape[d];
        tg_contiguous_strides(t->ndim, t->shape, t->strides);
        t->offset = 0;
        t->buf = p->blocks[p->blk[v]].buf;
    }
done:
    if (busy) tg_mem_free(ctx, busy, nv);
    if (known) tg_mem_free(ctx, known, nv);
    if (die) tg_mem_free(ctx, die, sizeof *die * no);
    if (next) tg_mem_free(ctx, next, sizeof *next * nv);
    if (st != TG_OK) {
        plan_free(cj, p);
        return st;
    }
    *out = p;
    return TG_OK;
}

static tg_status plan_get(tg_cj *cj, tg_tensor *const *in, cj_plan **out) {
    int nk = key_len(cj);
    int64_t kbuf[64];
    int64_t *key = nk <= 64 ? kbuf : tg_mem_alloc(cj->ctx, sizeof *key * (size_t)nk);
    if (!key) return TG_ENOMEM;
    key_fill(cj, in, key);
    cj_plan *hit = NULL;
    for (int i = 0; i < cj->nplans && !hit; i++)
        if (memcmp(cj->plans[i]->key, key, sizeof *key * (size_t)nk) == 0) hit = cj->plans[i];
    if (key != kbuf) tg_mem_free(cj->ctx, key, sizeof *key * (size_t)nk);
    if (!hit) {
        tg_status st = plan_make(cj, in, &hit);
        if (st != TG_OK) return st;
        if (cj->nplans == CJ_MAX_PLANS) {
            int lru = 0;
            for (int i = 1; i < cj->nplans; i++)
                if (cj->plans[i]->stamp < cj->plans[lru]->stamp) lru = i;
            plan_free(cj, cj->plans[lru]);
            cj->plans[lru] = cj->plans[--cj->nplans];
        }
        cj->plans[cj->nplans++] = hit;
    }
    hit->stamp = ++cj->stamp;
    *out = hit;
    return TG_OK;
}

/* ---- values ---- */

static void set_val(tg_cj *cj, int v, tg_tensor *t) {
    cj->val[v] = t;
    tg_rt_val *r = &cj->rv[v];
    if (!t) {
        r->data = NULL;
        return;
    }
    r->data = tg_tensor_data(t);
    r->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        r->shape[d] = t->shape[d];
        r->stride[d] = t->strides[d];
    }
}

/* ---- call-backs ---- */

/* Runs instruction i with the library's kernel. */
static tg_status run_kernel(tg_cj *cj, int i) {
    cj_plan *p = cj->cur;
    tg_node *n = cj->order[i];
    const tg_op_def *op = tg_op_table[n->op];
    tg_tensor **vin = cj->args, **vout = cj->args + n->nin;
    tg_type *tin = cj->argt, *tout = cj->argt + n->nin;
    for (int k = 0; k < n->nin; k++) {
        vin[k] = cj->val[n->in[k]->id];
        tin[k] = p->rt[n->in[k]->id];
        TG_ASSERT(vin[k] != NULL);
    }
    for (int o = 0; o < n->nout; o++) {
        int v = n->out[o]->id;
        vout[o] = p->cls[v] == CLS_KMADE ? NULL : cj->val[v];
        tout[o] = p->rt[v];
    }
    vm_exec e;
    e.pool = cj->pool;
    e.nthreads = cj->pool ? tg_pool_size(cj->pool) : 1;
    e.node = n;
    e.in = vin;
    e.out = vout;
    e.in_type = tin;
    e.out_type = tout;
    e.ws = p->ws.buf ? p->ws.buf->data : NULL;
    e.ws_bytes = p->ws_bytes;
    e.info = &cj->info[i];
    e.msg[0] = '\0';
    tg_status st = TG_EUNSUPPORTED;
    switch (cj->info[i].kind) {
    case VM_EW:
        st = tg_vm_exec_ew(&e);
        break;
    case VM_REDUCE:
        st = tg_vm_exec_reduce(&e);
        break;
    case VM_BLAS:
        st = tg_vm_exec_blas(&e);
        break;
    case VM_FUSED:
        st = tg_vm_exec_fused(&e);
        break;
    case VM_REF:
        break;
    }
    if (st == TG_OK) return TG_OK;
    if (st != TG_EUNSUPPORTED) return node_fail(cj, n, st, e.msg[0] ? e.msg : tg_status_str(st));
    bool self = op->views || op->self_alloc;
    for (int o = 0; o < n->nout && !self; o++) {
        tg_tensor *t = vout[o];
        memset(tg_tensor_data(t), 0, (size_t)tg_tensor_size(t) * tg_dtype_size(t->dtype));
    }
    tg_kern k = {.ctx = cj->ctx,
                 .node = n,
                 .attrs = n->attrs,
                 .in = vin,
                 .nin = n->nin,
                 .out = vout,
                 .nout = n->nout,
                 .out_type = tout};
    if (op->ref(&k) != TG_OK) {
        for (int o = 0; o < n->nout && self; o++) tg_tensor_free(vout[o]);
        return node_fail(cj, n, k.status ? k.status : TG_EINVAL, k.msg);
    }
    for (int o = 0; o < n->nout && self; o++) {
        int v = n->out[o]->id;
        tg_tensor *t = vout[o];
        TG_ASSERT(t != NULL && t->dtype == tout[o].dtype && t->ndim == tout[o].ndim);
        set_val(cj, v, t);
        cj->owned[v] = 1;
    }
    return TG_OK;
}

/* A view made by generated code: its tensor is the plan's slot for it (no allocation),
 * over the buffer of the value it views. */
static int cb_view(tg_rt *rt, int i) {
    tg_cj *cj = rt->host;
    tg_node *n = cj->order[i];
    int v = n->out[0]->id;
    const tg_tensor *src = cj->val[n->in[0]->id];
    const tg_rt_val *r = &cj->rv[v];
    tg_tensor *t = &cj->cur->tens[v];
    int64_t es = (int64_t)tg_dtype_size(src->dtype);
    t->dtype = src->dtype;
    t->ndim = r->ndim;
    for (int d = 0; d < r->ndim; d++) {
        t->shape[d] = r->shape[d];
        t->strides[d] = r->stride[d];
    }
    t->buf = src->buf;
    t->offset = src->offset + (r->data - (char *)tg_tensor_data(src)) / es;
    cj->val[v] = t;
    return 0;
}

static int cb_kernel(tg_rt *rt, int i) {
    tg_cj *cj = rt->host;
    cj->st = run_kernel(cj, i);
    return cj->st != TG_OK;
}

/* The elementwise loop driver: the broadcast iteration space of the node's outputs. */
typedef struct ew_job {
    tg_rt_loop loop;
    int na;    /* operands: outputs then inputs */
    int nd;    /* collapsed axes */
    int64_t n; /* elements */
    int64_t shape[TG_MAX_DIMS];
    int64_t str[64][TG_MAX_DIMS]; /* per operand and axis, in bytes */
    char *base[64];
} ew_job;

static void ew_range(const ew_job *J, int64_t lo, int64_t hi) {
    if (lo >= hi) return;
    int nd = J->nd;
    int64_t inner = J->shape[nd - 1], idx[TG_MAX_DIMS];
    int64_t row = lo / inner, col = lo % inner;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = row % J->shape[d];
        row /= J->shape[d];
    }
    idx[nd - 1] = col;
    char *ptr[64];
    int64_t s[64];
    for (int k = 0; k < J->na; k++) s[k] = J->str[k][nd - 1];
    while (lo < hi) {
        int64_t len = inner - idx[nd - 1] < hi - lo ? inner - idx[nd - 1] : hi - lo;
        for (int k = 0; k < J->na; k++) {
            int64_t off = 0;
            for (int d = 0; d < nd; d++) off += idx[d] * J->str[k][d];
            ptr[k] = J->base[k] + off;
        }
        J->loop(len, ptr, s);
        lo += len;
        idx[nd - 1] = 0;
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < J->shape[d]) break;
            idx[d] = 0;
        }
    }
}

static void ew_task(void *arg, int ith, int nth) {
    const ew_job *J = arg;
    int64_t lo, hi;
    tg_pool_share(J->n, ith, nth, SPLIT_ALIGN, &lo, &hi);
    ew_range(J, lo, hi);
}

static int cb_ew(tg_rt *rt, int i, tg_rt_loop loop, int cost) {
    tg_cj *cj = rt->host;
    tg_node *n = cj->order[i];
    tg_tensor *o0 = cj->val[n->out[0]->id];
    int nd = o0->ndim;
    ew_job J;
    J.loop = loop;
    J.na = n->nout + n->nin;
    for (int o = 1; o < n->nout; o++) { /* outputs of one shape only */
        const tg_tensor *t = cj->val[n->out[o]->id];
        bool same = t->ndim == nd;
        for (int d = 0; same && d < nd; d++) same = t->shape[d] == o0->shape[d];
        if (!same) return cb_kernel(rt, i);
    }
    int64_t total = 1;
    for (int d = 0; d < nd; d++) total *= o0->shape[d];
    if (total == 0) return 0;
    J.n = total;
    tg_tensor *ops[64];
    for (int o = 0; o < n->nout; o++) ops[o] = cj->val[n->out[o]->id];
    for (int k = 0; k < n->nin; k++) ops[n->nout + k] = cj->val[n->in[k]->id];
    int64_t esz[64];
    for (int k = 0; k < J.na; k++) {
        esz[k] = (int64_t)tg_dtype_size(ops[k]->dtype);
        J.base[k] = tg_tensor_data(ops[k]);
    }
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (o0->shape[d] == 1) continue;
        J.shape[m] = o0->shape[d];
        for (int k = 0; k < J.na; k++) {
            const tg_tensor *t = ops[k];
            int a = d - (nd - t->ndim);
            J.str[k][m] = a >= 0 && t->shape[a] != 1 ? t->strides[a] * esz[k] : 0;
        }
        bool merge = m > 0;
        for (int k = 0; k < J.na && merge; k++) merge = J.str[k][m - 1] == J.str[k][m] * J.shape[m];
        if (merge) {
            J.shape[m - 1] *= J.shape[m];
            for (int k = 0; k < J.na; k++) J.str[k][m - 1] = J.str[k][m];
        } else {
            m++;
        }
    }
    if (m == 0) {
        J.shape[0] = 1;
        for (int k = 0; k < J.na; k++) J.str[k][0] = esz[k];
        m = 1;
    }
    J.nd = m;
    int64_t work = total * (cost > 0 ? cost : 1);
    int nth = cj->pool ? tg_pool_size(cj->pool) : 1;
    if (nth > 1 && work >= SPLIT_WORK) {
        int64_t want = work / (SPLIT_WORK / 2);
        tg_pool_run_n(cj->pool, want < nth ? (int)want : nth, ew_task, &J);
    } else {
        ew_range(&J, 0, total);
    }
    return 0;
}

/* The reduction driver: each output element reduces the rows of the reduced axes. */
typedef void (*red_loop)(int phase, int64_t n, char *const *p, const int64_t *s, double *acc);

typedef struct red_job {
    red_loop loop;
    int nin, nout;
    int nk, nr; /* kept and reduced axes (the last reduced one innermost) */
    int64_t kshape[TG_MAX_DIMS], rshape[TG_MAX_DIMS];
    int64_t kstr[32][TG_MAX_DIMS]; /* per input and kept axis, bytes */
    int64_t rstr[32][TG_MAX_DIMS]; /* per input and reduced axis, bytes */
    char *ibase[32];
    char *obase[32];
    int64_t osz[32];
    int64_t nkept, count;
} red_job;

static void red_range(const red_job *J, int64_t lo, int64_t hi) {
    double acc[32];
    char *ip[32], *op[32], *rp[32];
    int64_t s[32];
    int nr = J->nr;
    for (int k = 0; k < J->nin; k++) s[k] = J->rstr[k][nr - 1];
    int64_t inner = J->rshape[nr - 1], rows = J->count / (inner ? inner : 1);
    for (int64_t e = lo; e < hi; e++) {
        int64_t rem = e;
        for (int k = 0; k < J->nin; k++) ip[k] = J->ibase[k];
        for (int d = J->nk - 1; d >= 0; d--) {
            int64_t i = rem % J->kshape[d];
            rem /= J->kshape[d];
            for (int k = 0; k < J->nin; k++) ip[k] += i * J->kstr[k][d];
        }
        J->loop(0, 0, NULL, NULL, acc);
        for (int64_t r = 0; r < rows; r++) {
            int64_t q = r;
            for (int k = 0; k < J->nin; k++) rp[k] = ip[k];
            for (int d = nr - 2; d >= 0; d--) {
                int64_t i = q % J->rshape[d];
                q /= J->rshape[d];
                for (int k = 0; k < J->nin; k++) rp[k] += i * J->rstr[k][d];
            }
            J->loop(1, inner, rp, s, acc);
        }
        for (int o = 0; o < J->nout; o++) op[o] = J->obase[o] + e * J->osz[o];
        J->loop(2, J->count, op, NULL, acc);
    }
}

static void red_task(void *arg, int ith, int nth) {
    const red_job *J = arg;
    int64_t lo, hi;
    tg_pool_share(J->nkept, ith, nth, 1, &lo, &hi);
    red_range(J, lo, hi);
}

static int cb_red(tg_rt *rt, int i, red_loop loop, int cost, unsigned red) {
    tg_cj *cj = rt->host;
    tg_node *n = cj->order[i];
    if (n->nin > 32 || n->nout > 32) return cb_kernel(rt, i);
    int nd = 0;
    for (int k = 0; k < n->nin; k++)
        if (cj->val[n->in[k]->id]->ndim > nd) nd = cj->val[n->in[k]->id]->ndim;
    if (nd == 0 || (red >> nd) != 0 || !(red >> (nd - 1) & 1u)) return cb_kernel(rt, i);
    red_job J;
    J.loop = loop;
    J.nin = n->nin;
    J.nout = n->nout;
    J.nk = J.nr = 0;
    J.nkept = J.count = 1;
    for (int d = 0; d < nd; d++) {
        int64_t ext = 1;
        for (int k = 0; k < n->nin; k++) {
            const tg_tensor *t = cj->val[n->in[k]->id];
            int a = d - (nd - t->ndim);
            if (a >= 0 && t->shape[a] != 1) ext = t->shape[a];
        }
        bool r = red >> d & 1u;
        int slot = r ? J.nr++ : J.nk++;
        (r ? J.rshape : J.kshape)[slot] = ext;
        for (int k = 0; k < n->nin; k++) {
            const tg_tensor *t = cj->val[n->in[k]->id];
            int a = d - (nd - t->ndim);
            int64_t st =
                a >= 0 && t->shape[a] != 1 ? t->strides[a] * (int64_t)tg_dtype_size(t->dtype) : 0;
            (r ? J.rstr[k] : J.kstr[k])[slot] = st;
        }
        if (r)
            J.count *= ext;
        else
            J.nkept *= ext;
    }
    if (J.count == 0) return cb_kernel(rt, i); /* empty reductions: the kernel's rules */
    for (int k = 0; k < n->nin; k++) J.ibase[k] = tg_tensor_data(cj->val[n->in[k]->id]);
    for (int o = 0; o < n->nout; o++) {
        tg_tensor *t = cj->val[n->out[o]->id];
        if (tg_tensor_size(t) != J.nkept || !tg_tensor_is_contiguous(t)) return cb_kernel(rt, i);
        J.obase[o] = tg_tensor_data(t);
        J.osz[o] = (int64_t)tg_dtype_size(t->dtype);
    }
    if (J.nkept == 0) return 0;
    int64_t work = J.nkept * J.count * (cost > 0 ? cost : 1);
    int nth = cj->pool ? tg_pool_size(cj->pool) : 1;
    if (nth > 1 && J.nkept > 1 && work >= SPLIT_WORK) {
        int64_t want = work / (SPLIT_WORK / 2);
        if (want > J.nkept) want = J.nkept;
        tg_pool_run_n(cj->pool, want < nth ? (int)want : nth, red_task, &J);
    } else {
        red_range(&J, 0, J.nkept);
    }
    return 0;
}

/* CBLAS for generated code (row-major; BLAS runs single-threaded in tgraph). */
static void rt_gemm(int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                    const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                    int64_t ldc) {
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    if (f64)
        cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb,
                    beta, c, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, (float)alpha, a, (int)lda, b,
                    (int)ldb, (float)beta, c, (int)ldc);
}

static void rt_gemv(int f64, int ta, int64_t m, int64_t n, double alpha, const void *a, int64_t lda,
                    const void *x, int64_t incx, double beta, void *y, int64_t incy) {
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans;
    if (f64)
        cblas_dgemv(CblasRowMajor, TA, (int)m, (int)n, alpha, a, (int)lda, x, (int)incx, beta, y,
                    (int)incy);
    else
        cblas_sgemv(CblasRowMajor, TA, (int)m, (int)n, (float)alpha, a, (int)lda, x, (int)incx,
                    (float)beta, y, (int)incy);
}

static int cb_after(tg_rt *rt, int i) {
    tg_cj *cj = rt->host;
    cj->st = cj->after(cj->after_ud, cj->order[i], cj->val);
    return cj->st != TG_OK;
}

/* The program of a graph none of whose nodes has an emitter: the call-backs in order (what
 * the generated function would do, without compiling it). */
static int kernels_only(tg_rt *rt) {
    tg_cj *cj = rt->host;
    for (int i = 0; i < cj->norder; i++)
        if (cb_kernel(rt, i) || TG_RT_AFTER(rt, i)) return 1;
    return 0;
}

/* ---- compiling ---- */

void tg_cj_free(tg_cj *cj) {
    if (!cj) return;
    tg_ctx *ctx = cj->ctx;
    size_t nv = (size_t)cj->nvars + 1, no = (size_t)cj->norder + 1;
    for (int i = 0; i < cj->nplans; i++) plan_free(cj, cj->plans[i]);
    for (int i = 0; cj->info && i < cj->norder; i++)
        if (cj->info[i].fused) tg_vm_fused_free(cj->info[i].fused);
    tg_vm_free(cj->vm);
    if (cj->own_pool) tg_pool_free(cj->pool);
    tg_cj_lib_close(&cj->lib);
    if (cj->order) tg_mem_free(ctx, cj->order, sizeof *cj->order * (size_t)(cj->g->nodes.n + 1));
    tg_mem_free(ctx, cj->how, cj->how ? no : 0);
    tg_mem_free(ctx, cj->info, cj->info ? sizeof *cj->info * no : 0);
    tg_mem_free(ctx, cj->last, cj->last ? sizeof *cj->last * nv : 0);
    tg_mem_free(ctx, cj->ext, cj->ext ? sizeof *cj->ext * nv : 0);
    tg_mem_free(ctx, cj->nouts, cj->nouts ? sizeof *cj->nouts * nv : 0);
    tg_mem_free(ctx, cj->rel, cj->rel ? sizeof *cj->rel * nv : 0);
    tg_mem_free(ctx, cj->rel_at, cj->rel_at ? sizeof *cj->rel_at * (no + 1) : 0);
    tg_mem_free(ctx, cj->const_rt, cj->const_rt ? sizeof *cj->const_rt * nv : 0);
    tg_mem_free(ctx, cj->val, cj->val ? sizeof *cj->val * nv : 0);
    tg_mem_free(ctx, cj->owned, cj->owned ? nv : 0);
    tg_mem_free(ctx, cj->rv, cj->rv ? sizeof *cj->rv * nv : 0);
    tg_mem_free(ctx, cj->args, cj->args ? sizeof *cj->args * (size_t)cj->maxargs : 0);
    tg_mem_free(ctx, cj->argt, cj->argt ? sizeof *cj->argt * (size_t)cj->maxargs : 0);
    pthread_mutex_destroy(&cj->mu);
    tg_mem_free(ctx, cj, sizeof *cj);
}

tg_status tg_cj_new(tg_graph *g, const tg_compile_opts *opts, tg_cj **out) {
    static const tg_compile_opts none = {0};
    if (!opts) opts = &none;
    *out = NULL;
    tg_ctx *ctx = g->ctx;
    tg_cj *cj = tg_mem_calloc(ctx, sizeof *cj);
    if (!cj) return TG_ENOMEM;
    pthread_mutex_init(&cj->mu, NULL);
    cj->ctx = ctx;
    cj->g = g;
    cj->opts = *opts;
    cj->nvars = g->vars.n;
    cj->isa = tg_vk_isa_best();
    size_t nv = (size_t)cj->nvars + 1;
    cj->order = tg_ir_toposort(g, &cj->norder);
    size_t no = (size_t)cj->norder + 1;
    cj->how = tg_mem_calloc(ctx, no);
    cj->info = tg_mem_calloc(ctx, sizeof *cj->info * no);
    cj->last = tg_mem_alloc(ctx, sizeof *cj->last * nv);
    cj->ext = tg_mem_alloc(ctx, sizeof *cj->ext * nv);
    cj->nouts = tg_mem_calloc(ctx, sizeof *cj->nouts * nv);
    cj->rel = tg_mem_alloc(ctx, sizeof *cj->rel * nv);
    cj->rel_at = tg_mem_calloc(ctx, sizeof *cj->rel_at * (no + 1));
    cj->const_rt = tg_mem_calloc(ctx, sizeof *cj->const_rt * nv);
    cj->val = tg_mem_calloc(ctx, sizeof *cj->val * nv);
    cj->owned = tg_mem_calloc(ctx, nv);
    cj->rv = tg_mem_calloc(ctx, sizeof *cj->rv * nv);
    if (!cj->order || !cj->how || !cj->info || !cj->last || !cj->ext || !cj->nouts || !cj->rel ||
        !cj->rel_at || !cj->const_rt || !cj->val || !cj->owned || !cj->rv) {
        tg_cj_free(cj);
        return TG_ENOMEM;
    }
    for (int v = 0; v < cj->nvars; v++) cj->last[v] = -1;
    int maxargs = 1;
    for (int i = 0; i < cj->norder; i++) {
        tg_node *n = cj->order[i];
        for (int k = 0; k < n->nin; k++) cj->last[n->in[k]->id] = i;
        if (n->nin + n->nout > maxargs) maxargs = n->nin + n->nout;
    }
    for (int i = 0; i < g->outputs.n; i++) {
        tg_var *v = g->outputs.items[i];
        cj->last[v->id] = cj->norder;
        cj->nouts[v->id]++;
    }
    for (int i = 0; i < cj->norder; i++) {
        tg_node *n = cj->order[i];
        for (int o = 0; o < n->nout; o++)
            if (cj->last[n->out[o]->id] < 0) cj->last[n->out[o]->id] = i;
    }
    for (int v = 0; v < cj->nvars; v++)
        if (cj->last[v] >= 0 && cj->last[v] < cj->norder) cj->rel_at[cj->last[v] + 1]++;
    for (int i = 0; i < cj->norder; i++) cj->rel_at[i + 1] += cj->rel_at[i];
    {
        int *fill = tg_mem_calloc(ctx, sizeof *fill * no);
        if (!fill) {
            tg_cj_free(cj);
            return TG_ENOMEM;
        }
        for (int v = 0; v < cj->nvars; v++) {
            int at = cj->last[v];
            if (at >= 0 && at < cj->norder) cj->rel[cj->rel_at[at] + fill[at]++] = v;
        }
        tg_mem_free(ctx, fill, sizeof *fill * no);
    }
    memcpy(cj->ext, cj->last, sizeof *cj->ext * (size_t)cj->nvars);
    for (int i = cj->norder - 1; i >= 0; i--) {
        tg_node *n = cj->order[i];
        uint32_t views = tg_op_table[n->op]->views;
        for (int o = 0; o < n->nout && views; o++)
            for (int k = 0; k < n->nin; k++)
                if ((views >> k & 1u) && cj->ext[n->out[o]->id] > cj->ext[n->in[k]->id])
                    cj->ext[n->in[k]->id] = cj->ext[n->out[o]->id];
    }
    for (int v = 0; v < cj->nvars; v++) {
        tg_var *var = g->vars.items[v];
        if (var->kind == TG_VAR_CONST) tensor_rt(&var->type, var->value, &cj->const_rt[v]);
    }
    cj->maxargs = maxargs;
    cj->args = tg_mem_calloc(ctx, sizeof *cj->args * (size_t)maxargs);
    cj->argt = tg_mem_calloc(ctx, sizeof *cj->argt * (size_t)maxargs);
    if (!cj->args || !cj->argt) {
        tg_cj_free(cj);
        return TG_ENOMEM;
    }
    /* the source, then the library */
    tg_cj_str src = {.ctx = ctx};
    tg_cj_emit_prelude(&src);
    tg_status st = tg_cj_emit_graph(&src, g, cj->order, cj->norder, 0, cj->how);
    int emitted = 0;
    for (int i = 0; i < cj->norder; i++) emitted += cj->how[i] != TG_CJ_KERNEL;
    if (st == TG_OK && emitted == 0) /* nothing to compile: every node is a call-back */
        cj->main = kernels_only;
    else if (st == TG_OK)
        st = tg_cj_build(ctx, src.p, src.n, &cj->lib);
    tg_cj_str_free(&src);
    if (st == TG_OK && !cj->main) {
        *(void **)&cj->main = dlsym(cj->lib.handle, "tg_cj_0");
        if (!cj->main)
            st = tg_set_error(TG_ECHECK, "%s lacks its function; the source is kept in %s",
                              cj->lib.path, cj->lib.source);
    }
    if (st != TG_OK) {
        tg_cj_free(cj);
        return st;
    }
    bool blas = false;
    for (int i = 0; i < cj->norder; i++) {
        choose_kernel(cj, i);
        blas = blas || cj->info[i].kind == VM_BLAS;
    }
    if (blas) tg_vm_blas_single_thread();
    cj->pool = opts->pool;
    if (opts->pool)
        cj->nthreads = tg_pool_size(opts->pool);
    else
        cj->nthreads = opts->nthreads > 0 ? opts->nthreads : tg_pool_default_threads();
    cj->rt.abi = TG_RT_ABI;
    cj->rt.host = cj;
    cj->rt.val = cj->rv;
    cj->rt.ew = cb_ew;
    cj->rt.kernel = cb_kernel;
    cj->rt.red = cb_red;
    cj->rt.view = cb_view;
    cj->rt.after = NULL;
    cj->rt.gemm = rt_gemm;
    cj->rt.gemv = rt_gemv;
    *out = cj;
    return TG_OK;
}

void tg_cj_set_after(tg_cj *cj, tg_cj_after_fn fn, void *ud) {
    cj->after = fn;
    cj->after_ud = ud;
    cj->rt.after = fn ? cb_after : NULL;
}

void tg_cj_counts(const tg_cj *cj, int *emitted, int *kernels) {
    int e = 0;
    for (int i = 0; i < cj->norder; i++) e += cj->how[i] != TG_CJ_KERNEL;
    *emitted = e;
    *kernels = cj->norder - e;
}

/* ---- calls ---- */

static bool same_shape(const tg_tensor *t, const tg_type *rt) {
    if (t->dtype != rt->dtype || t->ndim != rt->ndim) return false;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] != rt->shape[d]) return false;
    return true;
}

static tg_status out_mismatch(const tg_cj *cj, int i, const tg_tensor *t, const tg_type *want) {
    char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
    tg_type got;
    tg_var *v = cj->g->outputs.items[i];
    tensor_rt(&v->type, t, &got);
    got.nobcast = 0;
    return tg_set_error(t->dtype != want->dtype ? TG_ETYPE : TG_ESHAPE,
                        "output %d%s%s%s: the tensor given is %s, the result is %s", i,
                        v->name ? " ('" : "", v->name ? v->name : "", v->name ? "')" : "",
                        tg_type_str(&got, a, sizeof a), tg_type_str(want, b, sizeof b));
}

static bool shares_input_memory(const tg_cj *cj, tg_tensor *const *in, const tg_tensor *t) {
    for (int i = 0; i < cj->g->inputs.n; i++)
        if (in[i]->buf == t->buf) return true;
    return false;
}

static tg_status call_locked(tg_cj *cj, cj_plan *p, tg_tensor *const *in, tg_tensor **out, int nout,
                             bool into) {
    tg_graph *g = cj->g;
    tg_status st = TG_OK;
    for (int v = 0; v < cj->nvars; v++) {
        cj->owned[v] = 0;
        tg_var *var = g->vars.items[v];
        set_val(cj, v,
                var->kind == TG_VAR_CONST  ? var->value
                : p->cls[v] == CLS_PLANNED ? &p->tens[v]
                                           : NULL);
    }
    for (int i = 0; i < g->inputs.n; i++) set_val(cj, ((tg_var *)g->inputs.items[i])->id, in[i]);
    for (int v = 0; v < cj->nvars; v++) { /* views made by generated code: their extents */
        if (p->cls[v] != CLS_KMADE) continue;
        cj->rv[v].ndim = p->rt[v].ndim;
        for (int d = 0; d < p->rt[v].ndim; d++) cj->rv[v].shape[d] = p->rt[v].shape[d];
    }
    for (int i = 0; i < nout; i++) {
        int v = ((tg_var *)g->outputs.items[i])->id;
        if (p->cls[v] != CLS_EXTERNAL) continue;
        const tg_type *rt = &p->rt[v];
        tg_tensor *t = into ? out[i] : NULL;
        if (t && !same_shape(t, rt)) {
            st = out_mismatch(cj, i, t, rt);
            goto done;
        }
        if (t && tg_tensor_is_contiguous(t) && !shares_input_memory(cj, in, t)) {
            set_val(cj, v, t);
            continue;
        }
        tg_tensor *nt = tg_tensor_empty(cj->ctx, (tg_dtype)rt->dtype, rt->ndim, rt->shape);
        if (!nt) {
            st = TG_ENOMEM;
            goto done;
        }
        set_val(cj, v, nt);
        cj->owned[v] = 1;
    }
    /* the generated program; values are released at the end of the call (buffers of
     * planned values are the plan's, so nothing is freed early but views and kernel-made
     * values, freed after their last use below) */
    cj->cur = p;
    cj->st = TG_OK;
    cj->rt.nthreads = cj->pool ? tg_pool_size(cj->pool) : 1;
    if (cj->main(&cj->rt) != 0) {
        st = cj->st != TG_OK ? cj->st : tg_set_error(TG_EINTERNAL, "generated code failed");
        goto done;
    }
    bool alias = false;
    for (int i = 0; into && i < nout; i++)
        alias = alias || (out[i] && cj->val[((tg_var *)g->outputs.items[i])->id] != out[i] &&
                          shares_input_memory(cj, in, out[i]));
    for (int i = 0; alias && i < nout; i++) {
        int v = ((tg_var *)g->outputs.items[i])->id;
        tg_tensor *t = cj->val[v];
        if (t == out[i] || !shares_input_memory(cj, in, t)) continue;
        tg_tensor *c = tg_tensor_dup(t);
        if (!c) {
            st = TG_ENOMEM;
            goto done;
        }
        if (cj->owned[v]) tg_tensor_free(t);
        cj->val[v] = c;
        cj->owned[v] = 1;
    }
    for (int i = 0; i < nout; i++) {
        tg_var *var = g->outputs.items[i];
        int v = var->id;
        tg_tensor *t = cj->val[v];
        TG_ASSERT(t != NULL);
        if (into && out[i]) {
            if (t == out[i]) continue;
            tg_type rt;
            tensor_rt(&var->type, t, &rt);
            if (!same_shape(out[i], &rt)) {
                st = out_mismatch(cj, i, out[i], &rt);
                goto done;
            }
            tg_tensor_copy_into(out[i], t);
            continue;
        }
        bool last = true;
        for (int j = i + 1; j < nout; j++) last = last && g->outputs.items[j] != (void *)var;
        if (last && cj->owned[v] && atomic_load(&t->buf->refs) == 1 && tg_tensor_is_contiguous(t)) {
            out[i] = t;
            cj->owned[v] = 0;
            cj->val[v] = NULL;
        } else {
            out[i] = tg_tensor_dup(t);
            if (!out[i]) {
                st = TG_ENOMEM;
                goto done;
            }
        }
    }
done:
    for (int v = 0; v < cj->nvars; v++) {
        if (cj->owned[v]) tg_tensor_free(cj->val[v]);
        cj->owned[v] = 0;
        cj->val[v] = NULL;
    }
    return st;
}

/* The VM for signatures the plan cannot cover (made once, on first need, under cj->mu). */
static tg_status vm_fallback_make(tg_cj *cj) {
    if (cj->vm) return TG_OK;
    tg_status st = tg_vm_new(cj->g, &cj->opts, &cj->vm);
    if (st == TG_OK && cj->after) tg_vm_set_hook(cj->vm, cj->after, cj->after_ud);
    return st;
}

tg_status tg_cj_call(tg_cj *cj, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                     bool into) {
    bool stack[64], *given = stack;
    if (nout > (int)TG_COUNTOF(stack)) {
        given = tg_mem_alloc(cj->ctx, sizeof *given * (size_t)nout);
        if (!given) return TG_ENOMEM;
    }
    for (int i = 0; i < nout; i++) {
        given[i] = into && out[i];
        if (!given[i]) out[i] = NULL;
    }
    pthread_mutex_lock(&cj->mu);
    cj_plan *p = NULL;
    tg_status st = plan_get(cj, in, &p);
    bool dyn = st == TG_OK && p->dynamic;
    if (st == TG_OK && !dyn) st = call_locked(cj, p, in, out, nout, into);
    if (dyn) st = vm_fallback_make(cj);
    pthread_mutex_unlock(&cj->mu);
    if (dyn && st == TG_OK) st = tg_vm_call(cj->vm, in, nin, out, nout, into); /* own lock */
    if (st != TG_OK)
        for (int i = 0; i < nout; i++)
            if (!given[i]) {
                tg_tensor_free(out[i]);
                out[i] = NULL;
            }
    if (given != stack) tg_mem_free(cj->ctx, given, sizeof *given * (size_t)nout);
    return st;
}
