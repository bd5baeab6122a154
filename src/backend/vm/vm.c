/* vm.c - the VM: compiling a graph into a flat program, the memory plan per input-shape
 * signature, running calls, and the per-node profile (see vm.h for the contract).
 *
 * Storage of each value in a plan (cls):
 *  - LEAF: an input (the caller's tensor) or a constant (the graph's tensor), borrowed.
 *  - PLANNED: a block of the plan's memory, reused by later values once every reader and
 *    every view of it has run; the block's tensor lives in the plan (never freed per call).
 *  - EXTERNAL: an output of the graph computed by a planned node: it is written straight
 *    into the caller's tensor (tg_fn_call_into) or into a new tensor handed to the caller.
 *  - KMADE: made by its kernel (views, self-allocating ops): freed after its last use.
 *  - DYNAMIC: its type is only known at run time (it depends on the values of a
 *    self-allocating op): its node runs as the interpreter runs it (inference at run time,
 *    reference kernel, a new tensor), freed after its last use.
 * Invariants: a planned block is never handed out twice at overlapping times (a value's
 * lifetime ends at the last use of it or of any view of it, and a graph output's at the
 * end of the call); owned[v] marks exactly the tensors this call must free.
 */
#include "vm.h"
#include "../../ops/fused.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define VM_MAX_PLANS  8                 /* plans kept per function (least recently used goes) */
#define VM_HUGE       ((size_t)2 << 20) /* blocks this large are 2 MiB aligned, huge pages */
#define VM_POOL_ELEMS 16384             /* a plan with a value this large starts the pool */

enum { CLS_NONE, CLS_LEAF, CLS_PLANNED, CLS_EXTERNAL, CLS_KMADE, CLS_DYNAMIC };

typedef struct vm_ins {
    tg_node *node;       /* the node */
    const tg_op_def *op; /* its record */
    vm_ins_info info;    /* kernel class and its data */
    bool reuse;          /* elementwise, one output: it may overwrite an input that dies
                            here (each element is read before the same element is written) */
    double seconds;      /* profile: time spent */
    long calls;          /* profile: runs */
    uint64_t bytes;      /* profile: bytes read and written, summed over runs */
    uint64_t copies;     /* profile: operands copied by the kernel (BLAS layouts) */
} vm_ins;

typedef struct vm_block {
    void *raw;       /* from the ctx allocator */
    size_t raw_size; /* its size */
    size_t size;     /* usable bytes (planned: the largest value assigned) */
    tg_buffer *buf;  /* header for tensors over it (the plan holds one reference) */
    size_t guard;    /* checked builds: offset of the VM_GUARD sentinel bytes after it */
} vm_block;

typedef struct vm_plan {
    int64_t *key; /* the input shapes, concatenated */
    int nkey;
    tg_type *rt;      /* per var: run-time type (when known) */
    uint8_t *known;   /* per var: rt is known at plan time */
    uint8_t *cls;     /* per var: storage class */
    int *blk;         /* per var: block of a PLANNED value */
    tg_tensor *tens;  /* per var: the tensor of a PLANNED value */
    uint8_t *dyn;     /* per instruction: run with run-time inference */
    vm_block *blocks; /* the memory */
    int nblocks;
    vm_block ws;         /* scratch: ws_bytes for the instruction running alone, and one
                            slice of ws_stride bytes per worker in concurrent runs */
    size_t ws_bytes;     /* its usable size (per instruction) */
    size_t ws_stride;    /* ws_bytes rounded up to 64 */
    int *seg_hi;         /* per instruction: end of its concurrent run, or 0 (NULL: none) */
    int *npred;          /* per instruction of a concurrent run: its predecessors there */
    unsigned long stamp; /* last use (LRU) */
} vm_plan;

struct tg_vm {
    tg_ctx *ctx;
    tg_graph *g;     /* borrowed */
    tg_node **order; /* topological order of the needed nodes */
    int norder;
    vm_ins *ins; /* one per node of order */
    int nvars;
    int *last;         /* per var: last instruction reading it; norder for outputs */
    int *ext;          /* per var: last use of it or of a view of it */
    int *nouts;        /* per var: times it appears among the outputs */
    int *rel, *rel_at; /* vars whose last use is instruction i: rel[rel_at[i]..rel_at[i+1]) */
    tg_type *const_rt; /* per var: run-time type of constants */
    tg_pool *pool;     /* used by kernels; NULL for one thread */
    bool own_pool;
    int nthreads;
    tg_vk_isa isa;
    bool profile;
    pthread_mutex_t mu; /* one call at a time */
    tg_vm_hook_fn hook; /* debug mode: called after every instruction */
    void *hook_ud;
    vm_plan *plans[VM_MAX_PLANS];
    int nplans;
    unsigned long stamp;
    /* per-call state (under mu) */
    tg_tensor **val;        /* per var */
    uint8_t *owned;         /* per var: this call frees val[v] */
    tg_type *drt;           /* per var: run-time type of DYNAMIC values */
    struct vm_sched *sched; /* concurrent runs of independent nodes (NULL until needed) */
    tg_tensor **args;       /* maxargs: inputs then outputs of one instruction */
    tg_type *argt;          /* their run-time types */
    int maxargs;
};

/* ---- helpers ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Run-time type of a tensor filling a variable of static type st (as the interpreter). */
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

/* "3:14: add" or "node 5 (add)". */
static void node_where(const tg_graph *g, const tg_node *n, char *buf, size_t len) {
    const char *name = tg_op_table[n->op]->name;
    if (n->line > 0)
        snprintf(buf, len, "%s:%d:%d: %s", g->file ? g->file : "<input>", n->line, n->col, name);
    else
        snprintf(buf, len, "node %d (%s)", n->id, name);
}

static tg_status node_fail(const tg_vm *vm, const tg_node *n, tg_status st, const char *msg) {
    char where[256];
    node_where(vm->g, n, where, sizeof where);
    return tg_set_error(st, "%s: %s", where, msg);
}

/* ---- compiling ---- */

static void choose_kernel(tg_vm *vm, vm_ins *ins) {
    tg_node *n = ins->node;
    const tg_op_def *op = ins->op;
    vm_ins_info *in = &ins->info;
    in->kind = VM_REF;
    in->isa = vm->isa;
    if (op->views || op->self_alloc) return;
    if (op->kind == TG_KIND_ELEMWISE && n->nout == 1 && n->nin <= TG_VK_MAXIN) {
        tg_dtype idt[TG_VK_MAXIN];
        for (int k = 0; k < n->nin; k++) idt[k] = (tg_dtype)n->in[k]->type.dtype;
        in->vk =
            tg_vk_select(op, n->nin, idt, (tg_dtype)n->out[0]->type.dtype, vm->isa, &in->vargs);
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
    if (n->op == TG_OP_FUSED) {
        in->fused = tg_vm_fused_prep(vm->ctx, n, vm->isa);
        if (in->fused) in->kind = VM_FUSED;
    }
}

/* Whether instruction ins computes its one output element by element from the same
 * elements of its inputs (a vector kernel, or a fused node without reductions), so that
 * the output may take the buffer of an input of its exact type that dies there. */
static bool reuse_ok(tg_vm *vm, const vm_ins *ins) {
    const tg_node *n = ins->node;
    if (n->nout != 1 || ins->op->destroys) return false;
    if (ins->info.kind == VM_EW) return true;
    if (ins->info.kind != VM_FUSED) return false;
    tg_fused_prog *fp = NULL;
    char msg[64];
    if (tg_fused_node_prog(vm->ctx, n, &fp, msg, sizeof msg) != TG_OK) return false;
    bool ok = fp->nout == 1 && fp->out[0].reduce < 0;
    tg_fused_free(fp);
    return ok;
}

static void plan_free(tg_vm *vm, vm_plan *p);
static void sched_free(tg_vm *vm);

void tg_vm_free(tg_vm *vm) {
    if (!vm) return;
    tg_ctx *ctx = vm->ctx;
    size_t nv = (size_t)vm->nvars + 1, no = (size_t)vm->norder + 1;
    for (int i = 0; i < vm->nplans; i++) plan_free(vm, vm->plans[i]);
    for (int i = 0; vm->ins && i < vm->norder; i++)
        if (vm->ins[i].info.fused) tg_vm_fused_free(vm->ins[i].info.fused);
    sched_free(vm);
    if (vm->own_pool) tg_pool_free(vm->pool);
    if (vm->order) tg_mem_free(ctx, vm->order, sizeof *vm->order * (size_t)(vm->g->nodes.n + 1));
    tg_mem_free(ctx, vm->ins, vm->ins ? sizeof *vm->ins * no : 0);
    tg_mem_free(ctx, vm->last, vm->last ? sizeof *vm->last * nv : 0);
    tg_mem_free(ctx, vm->ext, vm->ext ? sizeof *vm->ext * nv : 0);
    tg_mem_free(ctx, vm->nouts, vm->nouts ? sizeof *vm->nouts * nv : 0);
    tg_mem_free(ctx, vm->rel, vm->rel ? sizeof *vm->rel * nv : 0);
    tg_mem_free(ctx, vm->rel_at, vm->rel_at ? sizeof *vm->rel_at * (no + 1) : 0);
    tg_mem_free(ctx, vm->const_rt, vm->const_rt ? sizeof *vm->const_rt * nv : 0);
    tg_mem_free(ctx, vm->val, vm->val ? sizeof *vm->val * nv : 0);
    tg_mem_free(ctx, vm->owned, vm->owned ? sizeof *vm->owned * nv : 0);
    tg_mem_free(ctx, vm->drt, vm->drt ? sizeof *vm->drt * nv : 0);
    tg_mem_free(ctx, vm->args, vm->args ? sizeof *vm->args * (size_t)vm->maxargs : 0);
    tg_mem_free(ctx, vm->argt, vm->argt ? sizeof *vm->argt * (size_t)vm->maxargs : 0);
    pthread_mutex_destroy(&vm->mu);
    tg_mem_free(ctx, vm, sizeof *vm);
}

tg_status tg_vm_new(tg_graph *g, const tg_compile_opts *opts, tg_vm **out) {
    static const tg_compile_opts none = {0};
    if (!opts) opts = &none;
    *out = NULL;
    tg_ctx *ctx = g->ctx;
    tg_vm *vm = tg_mem_calloc(ctx, sizeof *vm);
    if (!vm) return TG_ENOMEM;
    pthread_mutex_init(&vm->mu, NULL);
    vm->ctx = ctx;
    vm->g = g;
    vm->nvars = g->vars.n;
    vm->isa = tg_vk_isa_best();
    vm->profile = opts->profile;
    size_t nv = (size_t)vm->nvars + 1;
    vm->order = tg_ir_toposort(g, &vm->norder);
    size_t no = (size_t)vm->norder + 1;
    vm->ins = tg_mem_calloc(ctx, sizeof *vm->ins * no);
    vm->last = tg_mem_alloc(ctx, sizeof *vm->last * nv);
    vm->ext = tg_mem_alloc(ctx, sizeof *vm->ext * nv);
    vm->nouts = tg_mem_calloc(ctx, sizeof *vm->nouts * nv);
    vm->rel = tg_mem_alloc(ctx, sizeof *vm->rel * nv);
    vm->rel_at = tg_mem_calloc(ctx, sizeof *vm->rel_at * (no + 1));
    vm->const_rt = tg_mem_calloc(ctx, sizeof *vm->const_rt * nv);
    vm->val = tg_mem_calloc(ctx, sizeof *vm->val * nv);
    vm->owned = tg_mem_calloc(ctx, sizeof *vm->owned * nv);
    vm->drt = tg_mem_calloc(ctx, sizeof *vm->drt * nv);
    if (!vm->order || !vm->ins || !vm->last || !vm->ext || !vm->nouts || !vm->rel || !vm->rel_at ||
        !vm->const_rt || !vm->val || !vm->owned || !vm->drt) {
        tg_vm_free(vm);
        return TG_ENOMEM;
    }
    /* last uses */
    for (int v = 0; v < vm->nvars; v++) vm->last[v] = -1;
    int maxargs = 1;
    for (int i = 0; i < vm->norder; i++) {
        tg_node *n = vm->order[i];
        for (int k = 0; k < n->nin; k++) vm->last[n->in[k]->id] = i;
        if (n->nin + n->nout > maxargs) maxargs = n->nin + n->nout;
    }
    for (int i = 0; i < g->outputs.n; i++) {
        tg_var *v = g->outputs.items[i];
        vm->last[v->id] = vm->norder;
        vm->nouts[v->id]++;
    }
    /* release lists: vars whose own last use is instruction i; node outputs nobody reads
     * go right after their producer */
    for (int i = 0; i < vm->norder; i++) {
        tg_node *n = vm->order[i];
        for (int o = 0; o < n->nout; o++)
            if (vm->last[n->out[o]->id] < 0) vm->last[n->out[o]->id] = i;
    }
    for (int v = 0; v < vm->nvars; v++)
        if (vm->last[v] >= 0 && vm->last[v] < vm->norder) vm->rel_at[vm->last[v] + 1]++;
    for (int i = 0; i < vm->norder; i++) vm->rel_at[i + 1] += vm->rel_at[i];
    {
        int *fill = tg_mem_calloc(ctx, sizeof *fill * no);
        if (!fill) {
            tg_vm_free(vm);
            return TG_ENOMEM;
        }
        for (int v = 0; v < vm->nvars; v++) {
            int at = vm->last[v];
            if (at >= 0 && at < vm->norder) vm->rel[vm->rel_at[at] + fill[at]++] = v;
        }
        tg_mem_free(ctx, fill, sizeof *fill * no);
    }
    /* a view keeps what it views alive: extend last uses backwards through view ops */
    memcpy(vm->ext, vm->last, sizeof *vm->ext * (size_t)vm->nvars);
    for (int i = vm->norder - 1; i >= 0; i--) {
        tg_node *n = vm->order[i];
        uint32_t views = tg_op_table[n->op]->views;
        for (int o = 0; o < n->nout && views; o++)
            for (int k = 0; k < n->nin; k++)
                if ((views >> k & 1u) && vm->ext[n->out[o]->id] > vm->ext[n->in[k]->id])
                    vm->ext[n->in[k]->id] = vm->ext[n->out[o]->id];
    }
    /* constants */
    for (int v = 0; v < vm->nvars; v++) {
        tg_var *var = g->vars.items[v];
        if (var->kind == TG_VAR_CONST) tensor_rt(&var->type, var->value, &vm->const_rt[v]);
    }
    /* instructions */
    bool blas = false;
    for (int i = 0; i < vm->norder; i++) {
        vm_ins *ins = &vm->ins[i];
        ins->node = vm->order[i];
        ins->op = tg_op_table[ins->node->op];
        choose_kernel(vm, ins);
        ins->reuse = reuse_ok(vm, ins);
        blas = blas || ins->info.kind == VM_BLAS;
    }
    if (blas) tg_vm_blas_single_thread();
    vm->maxargs = maxargs;
    vm->args = tg_mem_calloc(ctx, sizeof *vm->args * (size_t)maxargs);
    vm->argt = tg_mem_calloc(ctx, sizeof *vm->argt * (size_t)maxargs);
    if (!vm->args || !vm->argt) {
        tg_vm_free(vm);
        return TG_ENOMEM;
    }
    /* the pool: a shared one, or our own, started by the first plan with work enough to
     * split (functions on small data never start threads) */
    vm->pool = opts->pool;
    if (opts->pool)
        vm->nthreads = tg_pool_size(opts->pool);
    else
        vm->nthreads = opts->nthreads > 0 ? opts->nthreads : tg_pool_default_threads();
    *out = vm;
    return TG_OK;
}

/* ---- plans ---- */

static void block_release(tg_ctx *ctx, vm_block *b) {
    if (b->buf) {
        TG_ASSERT(atomic_load(&b->buf->refs) == 1);
        tg_buffer_unref(b->buf); /* frees the header */
    }
    if (b->raw) tg_mem_free(ctx, b->raw, b->raw_size);
    memset(b, 0, sizeof *b);
}

/* Sentinels (checked builds: NDEBUG unset, or -DTG_VM_GUARDS): VM_GUARD bytes of a known
 * pattern follow the bytes of every block that its largest value uses, and guard_check,
 * run after each instruction, names the node that changed one (docs/hardening.md). */
#if !defined(NDEBUG) || defined(TG_VM_GUARDS)
#define VM_GUARD 64
#else
#define VM_GUARD 0
#endif

#if VM_GUARD
static unsigned char guard_byte(size_t k) { return (unsigned char)(0xA5u ^ (k * 29u)); }

static void guard_set(vm_block *b) {
    unsigned char *g = (unsigned char *)b->buf->data + b->guard;
    for (size_t k = 0; k < VM_GUARD; k++) g[k] = guard_byte(k);
}

/* After instruction i: TG_EINTERNAL naming its node and output types when it wrote past
 * the end of a block (its own or another's); the guard is then restored. */
static tg_status guard_check(const tg_vm *vm, vm_plan *p, int i) {
    for (int b = -1; b < p->nblocks; b++) {
        vm_block *blk = b < 0 ? &p->ws : &p->blocks[b];
        if (!blk->buf) continue;
        const unsigned char *g = (const unsigned char *)blk->buf->data + blk->guard;
        size_t k = 0;
        while (k < VM_GUARD && g[k] == guard_byte(k)) k++;
        if (k == VM_GUARD) continue;
        const tg_node *n = vm->ins[i].node;
        char where[256], types[256] = "", ty[64];
        node_where(vm->g, n, where, sizeof where);
        for (int o = 0; o < n->nout; o++) {
            const tg_type *rt = p->known[n->out[o]->id] ? &p->rt[n->out[o]->id] : &n->out[o]->type;
            size_t len = strlen(types);
            snprintf(types + len, sizeof types - len, "%s%s", o ? ", " : "",
                     tg_type_str(rt, ty, sizeof ty));
        }
        guard_set(blk);
        return tg_set_error(TG_EINTERNAL,
                            "%s: wrote past the end of a buffer: byte %zu after the %zu bytes "
                            "of %s %d was changed (node %d, outputs %s)",
                            where, k, blk->guard, b < 0 ? "the workspace" : "block", b, n->id,
                            types);
    }
    return TG_OK;
}
#else
static void guard_set(vm_block *b) { (void)b; }
static tg_status guard_check(const tg_vm *vm, vm_plan *p, int i) {
    (void)vm, (void)p, (void)i;
    return TG_OK;
}
#endif

/* Allocates b->size usable bytes: 64-byte aligned, or 2 MiB aligned with huge pages
 * asked for when large. */
static tg_status block_alloc(tg_ctx *ctx, vm_block *b) {
    size_t align = b->size >= VM_HUGE ? VM_HUGE : 64, size = b->size ? b->size : 64;
    b->guard = b->size;
    size = (size + align - 1) / align * align;
    if (size < b->size || size > SIZE_MAX - align - VM_GUARD)
        return tg_set_error(TG_ENOMEM, "out of memory: a buffer of %zu bytes", b->size);
    b->raw_size = size + align - 1 + VM_GUARD;
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
    if (VM_GUARD) guard_set(b);
#ifdef MADV_HUGEPAGE
    if (align == VM_HUGE) (void)madvise((void *)p, size, MADV_HUGEPAGE);
#endif
    return TG_OK;
}

static void plan_free(tg_vm *vm, vm_plan *p) {
    if (!p) return;
    tg_ctx *ctx = vm->ctx;
    size_t nv = (size_t)vm->nvars + 1, no = (size_t)vm->norder + 1;
    for (int b = 0; p->blocks && b < p->nblocks; b++) block_release(ctx, &p->blocks[b]);
    block_release(ctx, &p->ws);
    tg_mem_free(ctx, p->blocks, p->blocks ? sizeof *p->blocks * nv : 0);
    tg_mem_free(ctx, p->key, p->key ? sizeof *p->key * (size_t)(p->nkey + 1) : 0);
    tg_mem_free(ctx, p->rt, p->rt ? sizeof *p->rt * nv : 0);
    tg_mem_free(ctx, p->known, p->known ? nv : 0);
    tg_mem_free(ctx, p->cls, p->cls ? nv : 0);
    tg_mem_free(ctx, p->blk, p->blk ? sizeof *p->blk * nv : 0);
    tg_mem_free(ctx, p->tens, p->tens ? sizeof *p->tens * nv : 0);
    tg_mem_free(ctx, p->dyn, p->dyn ? no : 0);
    tg_mem_free(ctx, p->seg_hi, p->seg_hi ? sizeof *p->seg_hi * no : 0);
    tg_mem_free(ctx, p->npred, p->npred ? sizeof *p->npred * no : 0);
    tg_mem_free(ctx, p, sizeof *p);
}

static int key_len(const tg_vm *vm) {
    int n = 0;
    for (int i = 0; i < vm->g->inputs.n; i++) n += ((tg_var *)vm->g->inputs.items[i])->type.ndim;
    return n;
}

static void key_fill(const tg_vm *vm, tg_tensor *const *in, int64_t *key) {
    int k = 0;
    for (int i = 0; i < vm->g->inputs.n; i++)
        for (int d = 0; d < in[i]->ndim; d++) key[k++] = in[i]->shape[d];
}

/* Workspace an instruction needs for these run-time types. */
static size_t ins_ws(tg_vm *vm, const vm_ins *ins, const tg_type *in, const tg_type *out) {
    switch (ins->info.kind) {
    case VM_REDUCE:
        return tg_vm_reduce_ws(ins->node, in, out, vm->nthreads);
    case VM_BLAS:
        return tg_vm_blas_ws(ins->node, in, out, vm->nthreads);
    case VM_FUSED:
        return tg_vm_fused_ws(ins->info.fused, in, out, vm->nthreads);
    default:
        return 0;
    }
}

/* Picks a free block for a value of `need` bytes: the closest in size within a factor
 * of two (growing it if smaller), else a new one. */
static int block_pick(vm_plan *p, bool *busy, size_t need) {
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

/* The planned input that node n (instruction i) may overwrite with its output 0: one it
 * declares it destroys (or any input, for an elementwise instruction: vm_ins.reuse), of
 * the output's run-time type, dying at i, that no other input of n is or views (through a
 * chain of view ops) and no other instruction reads. -1 when there is none. */
static int inplace_source(const tg_vm *vm, const vm_plan *p, const tg_node *n, int i) {
    uint32_t d = tg_op_table[n->op]->destroys;
    if (vm->ins[i].reuse) d = n->nin >= 32 ? UINT32_MAX : (1u << n->nin) - 1u;
    for (int k = 0; k < n->nin && d; k++) {
        if (!(d >> k & 1u)) continue;
        int u = n->in[k]->id, v = n->out[0]->id;
        const tg_type *ru = &p->rt[u], *rv = &p->rt[v];
        if (p->cls[u] != CLS_PLANNED || vm->ext[u] != i || ru->dtype != rv->dtype ||
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
            const tg_node *m = vm->order[j];
            if (m == n->in[k]->node) break;
            for (int q = 0; q < m->nin && !alias; q++) alias = m->in[q]->id == u;
            alias = alias || seen == 4096;
        }
        if (!alias) return u;
    }
    return -1;
}

/* ---- concurrent runs of independent nodes (plan side) ----
 *
 * A plan cuts the program into maximal runs of consecutive instructions that may run
 * concurrently: VM kernels (vector, reduction, BLAS, fused; they never allocate) of
 * planned or external values that destroy nothing, each moving fewer than
 * VM_BRANCH_NODE_MAX bytes (a larger node runs alone and splits its work over the pool).
 * A run becomes concurrent when it holds two instructions that do not depend on each
 * other and moves at least VM_BRANCH_MIN bytes in all; the other instructions run in
 * program order, as before. Inside a concurrent run, each instruction waits for its
 * predecessors in the run (dependency counts, vm_seg below), and no value dies before the
 * run ends: blocks freed by its instructions are reused only after it, so concurrent
 * instructions never share memory. Results do not change: every kernel gives the same
 * numbers on one thread as on many. */

#define VM_BRANCH_NODE_MAX ((size_t)8 << 20)   /* bytes moved by a node that runs alone */
#define VM_BRANCH_MIN      ((size_t)512 << 10) /* bytes moved by a run worth running concurrently */

typedef struct vm_sched {
    int nw;              /* workers: the threads of the pool */
    int *prod;           /* per var: the instruction making it, or -1 */
    int *succ, *succ_at; /* per instruction: distinct readers, succ[succ_at[i]..succ_at[i+1]) */
    atomic_int *cnt;     /* per instruction: predecessors not yet finished */
    atomic_int *q;       /* ready queue of a run: instructions, -1 until pushed */
    tg_tensor **args;    /* per worker: maxargs argument slots */
    tg_type *argt;       /* per worker: their types */
    long runs;           /* concurrent runs executed (all calls) */
    long nodes;          /* instructions executed in them */
    long overlapped;     /* of those, started while another instruction of the run ran */
} vm_sched;

static void sched_free(tg_vm *vm) {
    vm_sched *sc = vm->sched;
    if (!sc) return;
    tg_ctx *ctx = vm->ctx;
    size_t nv = (size_t)vm->nvars + 1, no = (size_t)vm->norder + 1;
    size_t na = (size_t)vm->maxargs * (size_t)sc->nw;
    tg_mem_free(ctx, sc->prod, sc->prod ? sizeof *sc->prod * nv : 0);
    tg_mem_free(ctx, sc->succ,
                sc->succ ? sizeof *sc->succ * (size_t)(sc->succ_at[vm->norder] + 1) : 0);
    tg_mem_free(ctx, sc->succ_at, sc->succ_at ? sizeof *sc->succ_at * (no + 1) : 0);
    tg_mem_free(ctx, sc->cnt, sc->cnt ? sizeof *sc->cnt * no : 0);
    tg_mem_free(ctx, sc->q, sc->q ? sizeof *sc->q * no : 0);
    tg_mem_free(ctx, sc->args, sc->args ? sizeof *sc->args * na : 0);
    tg_mem_free(ctx, sc->argt, sc->argt ? sizeof *sc->argt * na : 0);
    tg_mem_free(ctx, sc, sizeof *sc);
    vm->sched = NULL;
}

/* The distinct instructions that make the inputs of instruction j, into pr (returns how
 * many; at most the node's inputs). */
static int preds_of(const tg_vm *vm, const vm_sched *sc, int j, int *pr) {
    const tg_node *n = vm->order[j];
    int np = 0;
    for (int k = 0; k < n->nin; k++) {
        int i = sc->prod[n->in[k]->id];
        bool dup = i < 0;
        for (int q = 0; q < np && !dup; q++) dup = pr[q] == i;
        if (!dup) pr[np++] = i;
    }
    return np;
}

/* The scheduler's graph, made once per VM (for nw workers). */
static tg_status sched_get(tg_vm *vm, int nw) {
    if (vm->sched) return TG_OK;
    tg_ctx *ctx = vm->ctx;
    size_t nv = (size_t)vm->nvars + 1, no = (size_t)vm->norder + 1;
    size_t na = (size_t)vm->maxargs * (size_t)nw;
    vm_sched *sc = tg_mem_calloc(ctx, sizeof *sc);
    int *pr = tg_mem_alloc(ctx, sizeof *pr * (size_t)(vm->maxargs + 1));
    if (!sc || !pr) {
        tg_mem_free(ctx, sc, sc ? sizeof *sc : 0);
        tg_mem_free(ctx, pr, pr ? sizeof *pr * (size_t)(vm->maxargs + 1) : 0);
        return TG_ENOMEM;
    }
    vm->sched = sc;
    sc->nw = nw;
    sc->prod = tg_mem_alloc(ctx, sizeof *sc->prod * nv);
    sc->succ_at = tg_mem_calloc(ctx, sizeof *sc->succ_at * (no + 1));
    sc->cnt = tg_mem_calloc(ctx, sizeof *sc->cnt * no);
    sc->q = tg_mem_calloc(ctx, sizeof *sc->q * no);
    sc->args = tg_mem_calloc(ctx, sizeof *sc->args * na);
    sc->argt = tg_mem_calloc(ctx, sizeof *sc->argt * na);
    bool ok = sc->prod && sc->succ_at && sc->cnt && sc->q && sc->args && sc->argt;
    for (int v = 0; ok && v < vm->nvars; v++) sc->prod[v] = -1;
    for (int i = 0; ok && i < vm->norder; i++)
        for (int o = 0; o < vm->order[i]->nout; o++) sc->prod[vm->order[i]->out[o]->id] = i;
    /* successor lists (counting, then filling) */
    for (int j = 0; ok && j < vm->norder; j++) {
        int np = preds_of(vm, sc, j, pr);
        for (int q = 0; q < np; q++) sc->succ_at[pr[q] + 1]++;
    }
    for (int i = 0; ok && i < vm->norder; i++) sc->succ_at[i + 1] += sc->succ_at[i];
    if (ok) sc->succ = tg_mem_alloc(ctx, sizeof *sc->succ * (size_t)(sc->succ_at[vm->norder] + 1));
    ok = ok && sc->succ;
    int *fill = ok ? tg_mem_calloc(ctx, sizeof *fill * no) : NULL;
    ok = ok && fill;
    for (int j = 0; ok && j < vm->norder; j++) {
        int np = preds_of(vm, sc, j, pr);
        for (int q = 0; q < np; q++) sc->succ[sc->succ_at[pr[q]] + fill[pr[q]]++] = j;
    }
    tg_mem_free(ctx, fill, fill ? sizeof *fill * no : 0);
    tg_mem_free(ctx, pr, sizeof *pr * (size_t)(vm->maxargs + 1));
    if (!ok) {
        sched_free(vm);
        return TG_ENOMEM;
    }
    return TG_OK;
}

/* Whether instruction i of plan p may run concurrently with others, and the bytes it
 * moves (*bytes). */
static bool branch_ok(const tg_vm *vm, const vm_plan *p, int i, size_t *bytes) {
    const vm_ins *ins = &vm->ins[i];
    const tg_node *n = ins->node;
    *bytes = 0;
    if (p->dyn[i] || ins->info.kind == VM_REF || ins->op->destroys) return false;
    if (ins->info.kind == VM_BLAS && n->nin <= 8 && n->nout == 1) {
        /* a product that splits over the pool runs alone with it */
        tg_type tin[8];
        for (int k = 0; k < n->nin; k++) tin[k] = p->rt[n->in[k]->id];
        int nw = vm->pool ? tg_pool_size(vm->pool) : vm->nthreads;
        if (tg_vm_blas_splits(n, tin, &p->rt[n->out[0]->id], nw)) return false;
    }
    for (int o = 0; o < n->nout; o++) {
        int c = p->cls[n->out[o]->id];
        if (c != CLS_PLANNED && c != CLS_EXTERNAL) return false;
    }
    for (int k = 0; k < n->nin + n->nout; k++) {
        const tg_var *v = k < n->nin ? n->in[k] : n->out[k - n->nin];
        size_t b = type_bytes(&p->rt[v->id]);
        if (b >= VM_BRANCH_NODE_MAX) return false;
        *bytes += b;
    }
    return true;
}

/* Cuts plan p into concurrent runs (p->seg_hi, p->npred; both stay NULL when there is
 * none). Needs the run-time types and classes. */
static tg_status plan_branches(tg_vm *vm, vm_plan *p) {
    const char *env = getenv("TGRAPH_BRANCHES");
    int nw = vm->pool ? tg_pool_size(vm->pool) : vm->nthreads;
    if (nw < 2 || vm->hook || (env && strcmp(env, "0") == 0)) return TG_OK;
    tg_ctx *ctx = vm->ctx;
    size_t no = (size_t)vm->norder + 1;
    tg_status st = TG_OK;
    int *pr = NULL;
    for (int lo = 0; lo < vm->norder;) {
        size_t b, total = 0;
        if (!branch_ok(vm, p, lo, &b)) {
            lo++;
            continue;
        }
        int hi = lo;
        bool wide = false; /* two instructions of the run are independent */
        for (; hi < vm->norder && branch_ok(vm, p, hi, &b); hi++) {
            total += b;
            if (hi == lo || wide) continue;
            const tg_node *n = vm->order[hi], *m = vm->order[hi - 1];
            bool reads = false; /* hi reads an output of hi - 1 (else nothing between them
                                   can link them: they are adjacent in a topological order) */
            for (int k = 0; k < n->nin && !reads; k++)
                for (int o = 0; o < m->nout; o++) reads = reads || n->in[k] == m->out[o];
            wide = !reads;
        }
        if (!wide || total < VM_BRANCH_MIN) {
            lo = hi;
            continue;
        }
        if (!p->seg_hi) {
            if ((st = sched_get(vm, nw)) != TG_OK) goto done;
            p->seg_hi = tg_mem_calloc(ctx, sizeof *p->seg_hi * no);
            p->npred = tg_mem_calloc(ctx, sizeof *p->npred * no);
            pr = tg_mem_alloc(ctx, sizeof *pr * (size_t)(vm->maxargs + 1));
            if (!p->seg_hi || !p->npred || !pr) {
                st = TG_ENOMEM;
                goto done;
            }
        }
        for (int j = lo; j < hi; j++) {
            int np = preds_of(vm, vm->sched, j, pr);
            p->seg_hi[j] = hi;
            p->npred[j] = 0;
            for (int q = 0; q < np; q++) p->npred[j] += pr[q] >= lo;
        }
        lo = hi;
    }
done:
    if (pr) tg_mem_free(ctx, pr, sizeof *pr * (size_t)(vm->maxargs + 1));
    return st; /* on failure plan_free releases seg_hi and npred */
}

/* Plan-time values: small integer arithmetic on shapes (the `shape(x)[0]` that a gradient
 * of a function with a `?` extent feeds to `alloc`) is evaluated while the plan is made, so
 * that inference knows the extents it gives and the nodes after it keep fast kernels and
 * planned buffers. The values are functions of the input shapes (the plan's key) and of
 * constants only; the nodes still run at call time. */
#define VM_PV_MAX 64 /* largest value (elements) evaluated at plan time */

static bool pv_small(const tg_type *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || t->shape[d] > VM_PV_MAX) return false;
        n *= t->shape[d];
        if (n > VM_PV_MAX) return false;
    }
    return true;
}

/* Evaluates node n (inputs of run-time types tin, outputs tout) into pv[] if it can:
 * `shape` and `size` from the types alone, other ops when every input is a small value
 * known here. Anything that fails leaves the outputs unknown (they are then computed at
 * run time, as before). */
static void pv_eval(tg_vm *vm, const tg_node *n, const tg_op_def *op, const tg_type *tin,
                    const tg_type *tout, tg_tensor **pv, uint8_t *pv_own) {
    tg_tensor *out[TG_MAX_OUTS] = {0};
    for (int o = 0; o < n->nout; o++)
        if (!pv_small(&tout[o])) return;
    if (op == &tg_op_shape || op == &tg_op_size) {
        tg_tensor *t = tg_tensor_new(vm->ctx, (tg_dtype)tout[0].dtype, tout[0].ndim, tout[0].shape);
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
    if (n->nin == 0 || op->destroys) return;
    tg_tensor **vin = vm->args; /* the caller's scratch: pv of the inputs */
    for (int k = 0; k < n->nin; k++)
        if (!(vin[k] = pv[n->in[k]->id])) return;
    bool self = op->views || op->self_alloc;
    for (int o = 0; o < n->nout && !self; o++)
        if (!(out[o] =
                  tg_tensor_new(vm->ctx, (tg_dtype)tout[o].dtype, tout[o].ndim, tout[o].shape)))
            goto fail;
    tg_kern k = {.ctx = vm->ctx,
                 .node = n,
                 .attrs = n->attrs,
                 .in = vin,
                 .nin = n->nin,
                 .out = out,
                 .nout = n->nout,
                 .out_type = tout};
    if (op->ref(&k) != TG_OK) goto fail;
    for (int o = 0; o < n->nout; o++) {
        if (!out[o]) goto fail;
        pv[n->out[o]->id] = out[o];
        pv_own[n->out[o]->id] = 1;
    }
    return;
fail:
    for (int o = 0; o < n->nout; o++) tg_tensor_free(out[o]);
}

/* Makes the plan for the shapes of `in` (already checked against the inputs' types). */
static tg_status plan_make(tg_vm *vm, tg_tensor *const *in, vm_plan **out) {
    tg_ctx *ctx = vm->ctx;
    tg_graph *g = vm->g;
    size_t nv = (size_t)vm->nvars + 1, no = (size_t)vm->norder + 1;
    tg_status st = TG_OK;
    bool *busy = NULL;
    int *die = NULL, *next = NULL; /* per instruction: planned vars dying there (lists) */
    tg_tensor **pv = NULL;         /* per var: its value when known at plan time */
    uint8_t *pv_own = NULL;        /* per var: pv[v] is ours to free */
    vm_plan *p = tg_mem_calloc(ctx, sizeof *p);
    if (!p) return TG_ENOMEM;
    p->nkey = key_len(vm);
    p->key = tg_mem_alloc(ctx, sizeof *p->key * (size_t)(p->nkey + 1));
    p->rt = tg_mem_calloc(ctx, sizeof *p->rt * nv);
    p->known = tg_mem_calloc(ctx, nv);
    p->cls = tg_mem_calloc(ctx, nv);
    p->blk = tg_mem_alloc(ctx, sizeof *p->blk * nv);
    p->tens = tg_mem_calloc(ctx, sizeof *p->tens * nv);
    p->dyn = tg_mem_calloc(ctx, no);
    p->blocks = tg_mem_calloc(ctx, sizeof *p->blocks * nv);
    busy = tg_mem_calloc(ctx, nv);
    die = tg_mem_alloc(ctx, sizeof *die * no);
    next = tg_mem_alloc(ctx, sizeof *next * nv);
    pv = tg_mem_calloc(ctx, sizeof *pv * nv);
    pv_own = tg_mem_calloc(ctx, nv);
    if (!p->key || !p->rt || !p->known || !p->cls || !p->blk || !p->tens || !p->dyn || !p->blocks ||
        !busy || !die || !next || !pv || !pv_own) {
        st = TG_ENOMEM;
        goto done;
    }
    key_fill(vm, in, p->key);
    for (int v = 0; v < vm->nvars; v++) p->blk[v] = -1;
    for (int i = 0; i < g->inputs.n; i++) {
        tg_var *v = g->inputs.items[i];
        tensor_rt(&v->type, in[i], &p->rt[v->id]);
        p->known[v->id] = 1;
        p->cls[v->id] = CLS_LEAF;
    }
    for (int v = 0; v < vm->nvars; v++) {
        tg_var *var = g->vars.items[v];
        if (var->kind != TG_VAR_CONST) continue;
        p->rt[v] = vm->const_rt[v];
        p->known[v] = 1;
        p->cls[v] = CLS_LEAF;
        pv[v] = var->value;
    }
    /* types, classes and workspace */
    tg_type *tin = vm->argt;
    const tg_tensor **vals = (const tg_tensor **)vm->args;
    for (int i = 0; i < vm->norder; i++) {
        vm_ins *ins = &vm->ins[i];
        tg_node *n = ins->node;
        bool ok = true;
        for (int k = 0; k < n->nin; k++) {
            ok = ok && p->known[n->in[k]->id];
            tin[k] = p->rt[n->in[k]->id];
            vals[k] = pv[n->in[k]->id];
        }
        if (!ok) {
            p->dyn[i] = 1;
            for (int o = 0; o < n->nout; o++) p->cls[n->out[o]->id] = CLS_DYNAMIC;
            continue;
        }
        tg_type tout[TG_MAX_OUTS];
        tg_infer ic = {.op = ins->op,
                       .in = tin,
                       .nin = n->nin,
                       .attrs = n->attrs,
                       .out = tout,
                       .nout = ins->op->nout,
                       .values = vals,
                       .runtime = true};
        if (ins->op->infer(&ic) != TG_OK) {
            st = node_fail(vm, n, ic.status ? ic.status : TG_ESHAPE, ic.msg);
            goto done;
        }
        TG_ASSERT(ic.nout == n->nout);
        bool self = ins->op->views || ins->op->self_alloc;
        for (int o = 0; o < n->nout; o++) {
            tg_var *v = n->out[o];
            bool all = true;
            for (int d = 0; d < tout[o].ndim; d++) { /* an extent the static type knows */
                if (tout[o].shape[d] < 0 && d < v->type.ndim) tout[o].shape[d] = v->type.shape[d];
                all = all && tout[o].shape[d] >= 0;
            }
            if (!all && !self) {
                st = node_fail(vm, n, TG_EINTERNAL, "run-time inference left an extent unknown");
                goto done;
            }
            if (all) {
                runtime_type(&v->type, tout[o].ndim, tout[o].shape, tout[o].dtype, &p->rt[v->id]);
                p->known[v->id] = 1;
            }
            if (self || !all)
                p->cls[v->id] = CLS_KMADE;
            else if (vm->nouts[v->id] == 1)
                p->cls[v->id] = CLS_EXTERNAL;
            else
                p->cls[v->id] = CLS_PLANNED;
        }
        size_t ws = ins_ws(vm, ins, tin, tout);
        if (ws > p->ws_bytes) p->ws_bytes = ws;
        bool all_known = true;
        for (int o = 0; o < n->nout; o++) all_known = all_known && p->known[n->out[o]->id];
        if (all_known) pv_eval(vm, n, ins->op, tin, tout, pv, pv_own);
    }
    if ((st = plan_branches(vm, p)) != TG_OK) goto done;
    /* blocks: assign in program order, release after the last use (views included), or
     * after the concurrent run holding it */
    for (int i = 0; i < vm->norder; i++) die[i] = -1;
    for (int i = 0; i < vm->norder; i++) {
        tg_node *n = vm->order[i];
        for (int o = 0; o < n->nout; o++) {
            int v = n->out[o]->id;
            if (p->cls[v] != CLS_PLANNED) continue;
            size_t need = type_bytes(&p->rt[v]);
            if (need == SIZE_MAX) {
                st = node_fail(vm, n, TG_ELIMIT, "output too large");
                goto done;
            }
            int u = o == 0 ? inplace_source(vm, p, n, i) : -1;
            if (u >= 0) { /* the output takes over the block of the input it destroys */
                p->blk[v] = p->blk[u];
                for (int *w = &die[i]; *w >= 0; w = &next[*w])
                    if (*w == u) {
                        *w = next[u];
                        break;
                    }
            } else {
                p->blk[v] = block_pick(p, busy, need < 64 ? 64 : need);
            }
            int at = vm->ext[v] > i ? vm->ext[v] : i;
            if (at < vm->norder && p->seg_hi && p->seg_hi[at] > 0) at = p->seg_hi[at] - 1;
            if (at < vm->norder) { /* graph outputs live to the end */
                next[v] = die[at];
                die[at] = v;
            }
        }
        for (int v = die[i]; v >= 0; v = next[v]) busy[p->blk[v]] = false;
    }
    for (int b = 0; b < p->nblocks; b++)
        if ((st = block_alloc(ctx, &p->blocks[b])) != TG_OK) goto done;
    p->ws_stride = (p->ws_bytes + 63) / 64 * 64;
    if (p->ws_bytes) {
        p->ws.size = p->seg_hi ? p->ws_stride * (size_t)vm->sched->nw : p->ws_bytes;
        if ((st = block_alloc(ctx, &p->ws)) != TG_OK) goto done;
    }
    if (!vm->pool && vm->nthreads > 1) {
        bool big = p->seg_hi != NULL; /* a concurrent run, or a value large enough for a
                                         kernel to split it */
        for (int v = 0; v < vm->nvars && !big; v++) {
            size_t es = tg_dtype_size((tg_dtype)p->rt[v].dtype);
            big = p->known[v] && type_bytes(&p->rt[v]) / es >= VM_POOL_ELEMS;
        }
        if (big) {
            vm->pool = tg_pool_new(ctx, vm->nthreads);
            vm->own_pool = vm->pool != NULL;
            if (!vm->pool) vm->nthreads = 1; /* no threads to be had: run on this one */
        }
    }
    for (int v = 0; v < vm->nvars; v++) {
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
    if (pv && pv_own)
        for (int v = 0; v < vm->nvars; v++)
            if (pv_own[v]) tg_tensor_free(pv[v]);
    if (pv) tg_mem_free(ctx, pv, sizeof *pv * nv);
    if (pv_own) tg_mem_free(ctx, pv_own, nv);
    if (busy) tg_mem_free(ctx, busy, nv);
    if (die) tg_mem_free(ctx, die, sizeof *die * no);
    if (next) tg_mem_free(ctx, next, sizeof *next * nv);
    if (st != TG_OK) {
        plan_free(vm, p);
        return st;
    }
    *out = p;
    return TG_OK;
}

/* The plan for these inputs: cached, or made (evicting the least recently used). */
static tg_status plan_get(tg_vm *vm, tg_tensor *const *in, vm_plan **out) {
    int nk = key_len(vm);
    int64_t kbuf[64];
    int64_t *key = nk <= 64 ? kbuf : NULL;
    if (!key) {
        key = tg_mem_alloc(vm->ctx, sizeof *key * (size_t)nk);
        if (!key) return TG_ENOMEM;
    }
    key_fill(vm, in, key);
    vm_plan *hit = NULL;
    for (int i = 0; i < vm->nplans && !hit; i++)
        if (memcmp(vm->plans[i]->key, key, sizeof *key * (size_t)nk) == 0) hit = vm->plans[i];
    if (key != kbuf) tg_mem_free(vm->ctx, key, sizeof *key * (size_t)nk);
    if (!hit) {
        tg_status st = plan_make(vm, in, &hit);
        if (st != TG_OK) return st;
        if (vm->nplans == VM_MAX_PLANS) {
            int lru = 0;
            for (int i = 1; i < vm->nplans; i++)
                if (vm->plans[i]->stamp < vm->plans[lru]->stamp) lru = i;
            plan_free(vm, vm->plans[lru]);
            vm->plans[lru] = vm->plans[--vm->nplans];
        }
        vm->plans[vm->nplans++] = hit;
    }
    hit->stamp = ++vm->stamp;
    *out = hit;
    return TG_OK;
}

/* ---- running ---- */

/* Where an instruction runs: its argument slots, the pool it may split its work over and
 * its workspace (alone: the whole pool and workspace; in a concurrent run: one thread and
 * that worker's slice). */
typedef struct vm_lane {
    tg_tensor **args; /* maxargs slots */
    tg_type *argt;
    tg_pool *pool; /* NULL: one thread */
    int nthreads;
    void *ws;
} vm_lane;

/* Runs instruction i of a static plan. */
static tg_status run_static(tg_vm *vm, vm_plan *p, int i, const vm_lane *ln) {
    vm_ins *ins = &vm->ins[i];
    tg_node *n = ins->node;
    const tg_op_def *op = ins->op;
    tg_tensor **vin = ln->args, **vout = ln->args + n->nin;
    tg_type *tin = ln->argt, *tout = ln->argt + n->nin;
    for (int k = 0; k < n->nin; k++) {
        vin[k] = vm->val[n->in[k]->id];
        tin[k] = p->rt[n->in[k]->id];
        TG_ASSERT(vin[k] != NULL);
    }
    for (int o = 0; o < n->nout; o++) {
        int v = n->out[o]->id;
        vout[o] = p->cls[v] == CLS_KMADE ? NULL : vm->val[v];
        tout[o] = p->rt[v];
    }
    vm_exec e; /* set field by field: zeroing the message buffer costs more than a kernel */
    e.pool = ln->pool;
    e.nthreads = ln->nthreads;
    e.node = n;
    e.in = vin;
    e.out = vout;
    e.in_type = tin;
    e.out_type = tout;
    e.ws = ln->ws;
    e.ws_bytes = p->ws_bytes;
    e.info = &ins->info;
    e.msg[0] = '\0';
    e.copies = 0;
    tg_status st = TG_EUNSUPPORTED;
    switch (ins->info.kind) {
    case VM_EW:
        st = tg_vm_exec_ew(&e);
        break;
    case VM_REDUCE:
        st = tg_vm_exec_reduce(&e);
        break;
    case VM_BLAS:
        st = tg_vm_exec_blas(&e);
        ins->copies += e.copies;
        break;
    case VM_FUSED:
        st = tg_vm_exec_fused(&e);
        break;
    case VM_REF:
        break;
    }
    if (st == TG_OK) return TG_OK;
    if (st != TG_EUNSUPPORTED) return node_fail(vm, n, st, e.msg[0] ? e.msg : tg_status_str(st));
    /* the reference kernel: zeroed outputs, as the interpreter gives them */
    bool self = op->views || op->self_alloc;
    for (int o = 0; o < n->nout && !self && !op->destroys; o++) { /* keep what is destroyed */
        tg_tensor *t = vout[o];
        memset(tg_tensor_data(t), 0, (size_t)tg_tensor_size(t) * tg_dtype_size(t->dtype));
    }
    tg_kern k = {.ctx = vm->ctx,
                 .node = n,
                 .attrs = n->attrs,
                 .in = vin,
                 .nin = n->nin,
                 .out = vout,
                 .nout = n->nout,
                 .out_type = tout};
    if (op->ref(&k) != TG_OK) {
        for (int o = 0; o < n->nout && self; o++) tg_tensor_free(vout[o]);
        return node_fail(vm, n, k.status ? k.status : TG_EINVAL, k.msg);
    }
    for (int o = 0; o < n->nout && self; o++) {
        int v = n->out[o]->id;
        tg_tensor *t = vout[o];
        const tg_type *s = &n->out[o]->type;
        TG_ASSERT(t != NULL && t->dtype == s->dtype && t->ndim == s->ndim);
        for (int d = 0; d < t->ndim; d++) {
            TG_ASSERT(s->shape[d] < 0 || s->shape[d] == t->shape[d]);
            TG_ASSERT(!p->known[v] || t->shape[d] == tout[o].shape[d]);
        }
        if (!p->known[v]) tensor_rt(&n->out[o]->type, t, &vm->drt[v]);
        vm->val[v] = t;
        vm->owned[v] = 1;
    }
    return TG_OK;
}

/* ---- concurrent runs of independent nodes (run side) ----
 *
 * Every thread of the pool takes instructions from a ready queue until the run's last
 * one was taken: the queue is an array of one slot per instruction of the run, filled in
 * the order instructions become ready (slot `tail`), taken in the same order (slot
 * `head`; a taker waits for its slot to be filled). An instruction is pushed when its
 * last predecessor in the run finished (its count reaches 0), so every slot is filled
 * once, and a thread waiting on an empty slot never holds work others wait for. Writes
 * of an instruction reach its readers through that chain of acquire/release operations.
 * Each instruction runs on one thread (its kernels do not split); after a failure the
 * remaining ones are skipped. */

static uint64_t ins_bytes(const tg_vm *vm, const vm_plan *p, const tg_node *n);

typedef struct vm_seg {
    tg_vm *vm;
    vm_plan *p;
    int lo, hi;            /* the run: instructions [lo, hi) */
    atomic_int head;       /* next queue slot to take */
    atomic_int tail;       /* next queue slot to fill */
    atomic_int running;    /* instructions running now */
    atomic_int overlapped; /* instructions that started while another one ran */
    atomic_int failed;     /* an instruction failed */
    pthread_mutex_t mu;    /* guards the three below */
    tg_status st;          /* the first failure (lowest instruction) */
    int fail_at;
    char msg[TG_ERRMSG_MAX];
} vm_seg;

static void seg_push(vm_seg *S, int j) {
    int t = atomic_fetch_add_explicit(&S->tail, 1, memory_order_relaxed);
    atomic_store_explicit(&S->vm->sched->q[S->lo + t], j, memory_order_release);
}

static void seg_task(void *arg, int ith, int nth) {
    (void)nth;
    vm_seg *S = arg;
    tg_vm *vm = S->vm;
    vm_plan *p = S->p;
    vm_sched *sc = vm->sched;
    TG_ASSERT(ith < sc->nw);
    size_t a0 = (size_t)ith * (size_t)vm->maxargs;
    vm_lane ln = {sc->args + a0, sc->argt + a0, NULL, 1,
                  p->ws.buf ? (char *)p->ws.buf->data + (size_t)ith * p->ws_stride : NULL};
    int n = S->hi - S->lo;
    for (;;) {
        int k = atomic_fetch_add_explicit(&S->head, 1, memory_order_relaxed);
        if (k >= n) break;
        int i;
        for (unsigned spin = 1;
             (i = atomic_load_explicit(&sc->q[S->lo + k], memory_order_acquire)) < 0; spin++) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            if ((spin & 255) == 0) sched_yield(); /* a predecessor may wait for this core */
        }
        if (!atomic_load_explicit(&S->failed, memory_order_relaxed)) {
            if (atomic_fetch_add(&S->running, 1) > 0) atomic_fetch_add(&S->overlapped, 1);
            double t0 = vm->profile ? now_s() : 0.0;
            tg_status st = run_static(vm, p, i, &ln);
            atomic_fetch_sub(&S->running, 1);
            if (vm->profile) {
                vm_ins *ins = &vm->ins[i];
                ins->seconds += now_s() - t0;
                ins->calls++;
                if (st == TG_OK) ins->bytes += ins_bytes(vm, p, ins->node);
            }
            if (st != TG_OK) {
                pthread_mutex_lock(&S->mu);
                if (S->st == TG_OK || i < S->fail_at) {
                    S->st = st;
                    S->fail_at = i;
                    snprintf(S->msg, sizeof S->msg, "%s", tg_last_error());
                }
                pthread_mutex_unlock(&S->mu);
                atomic_store(&S->failed, 1);
            }
        }
        for (int r = sc->succ_at[i]; r < sc->succ_at[i + 1]; r++) {
            int j = sc->succ[r];
            if (j < S->hi && atomic_fetch_sub_explicit(&sc->cnt[j], 1, memory_order_acq_rel) == 1)
                seg_push(S, j);
        }
    }
}

/* Runs instructions [lo, hi), a concurrent run of plan p, over the pool. */
static tg_status run_branches(tg_vm *vm, vm_plan *p, int lo, int hi) {
    vm_sched *sc = vm->sched;
    vm_seg S;
    S.vm = vm;
    S.p = p;
    S.lo = lo;
    S.hi = hi;
    atomic_init(&S.head, 0);
    atomic_init(&S.tail, 0);
    atomic_init(&S.running, 0);
    atomic_init(&S.overlapped, 0);
    atomic_init(&S.failed, 0);
    pthread_mutex_init(&S.mu, NULL);
    S.st = TG_OK;
    S.fail_at = hi;
    S.msg[0] = '\0';
    for (int i = lo; i < hi; i++) {
        atomic_store_explicit(&sc->cnt[i], p->npred[i], memory_order_relaxed);
        atomic_store_explicit(&sc->q[i], -1, memory_order_relaxed);
    }
    for (int i = lo; i < hi; i++)
        if (p->npred[i] == 0) seg_push(&S, i);
    tg_pool_run(vm->pool, seg_task, &S); /* publishes the above; returns after all ran */
    pthread_mutex_destroy(&S.mu);
    sc->runs++;
    sc->nodes += hi - lo;
    sc->overlapped += atomic_load(&S.overlapped);
    return S.st == TG_OK ? TG_OK : tg_set_error(S.st, "%s", S.msg);
}

/* Runs instruction i as the interpreter would: inference on the run-time types, new
 * outputs, the reference kernel. */
static tg_status run_dynamic(tg_vm *vm, vm_plan *p, int i) {
    vm_ins *ins = &vm->ins[i];
    tg_node *n = ins->node;
    const tg_op_def *op = ins->op;
    tg_tensor **vin = vm->args, **vout = vm->args + n->nin;
    tg_type *tin = vm->argt, tout[TG_MAX_OUTS];
    for (int k = 0; k < n->nin; k++) {
        int v = n->in[k]->id;
        vin[k] = vm->val[v];
        tin[k] = p->known[v] ? p->rt[v] : vm->drt[v];
        TG_ASSERT(vin[k] != NULL);
    }
    tg_infer ic = {.op = op,
                   .in = tin,
                   .nin = n->nin,
                   .attrs = n->attrs,
                   .out = tout,
                   .nout = op->nout,
                   .runtime = true};
    if (op->infer(&ic) != TG_OK) return node_fail(vm, n, ic.status ? ic.status : TG_ESHAPE, ic.msg);
    bool self = op->views || op->self_alloc;
    for (int o = 0; o < n->nout; o++) {
        vout[o] = NULL;
        if (self) continue;
        vout[o] = tg_tensor_empty(vm->ctx, (tg_dtype)tout[o].dtype, tout[o].ndim, tout[o].shape);
        if (!vout[o]) {
            for (int q = 0; q < o; q++) tg_tensor_free(vout[q]);
            return TG_ENOMEM;
        }
    }
    tg_kern k = {.ctx = vm->ctx,
                 .node = n,
                 .attrs = n->attrs,
                 .in = vin,
                 .nin = n->nin,
                 .out = vout,
                 .nout = n->nout,
                 .out_type = tout};
    if (op->ref(&k) != TG_OK) {
        for (int o = 0; o < n->nout; o++) tg_tensor_free(vout[o]);
        return node_fail(vm, n, k.status ? k.status : TG_EINVAL, k.msg);
    }
    for (int o = 0; o < n->nout; o++) {
        int v = n->out[o]->id;
        TG_ASSERT(vout[o] != NULL);
        tensor_rt(&n->out[o]->type, vout[o], &vm->drt[v]);
        vm->val[v] = vout[o];
        vm->owned[v] = 1;
    }
    return TG_OK;
}

static bool same_shape(const tg_tensor *t, const tg_type *rt) {
    if (t->dtype != rt->dtype || t->ndim != rt->ndim) return false;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] != rt->shape[d]) return false;
    return true;
}

static tg_status out_mismatch(const tg_vm *vm, int i, const tg_tensor *t, const tg_type *want) {
    char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
    tg_type got;
    tg_var *v = vm->g->outputs.items[i];
    tensor_rt(&v->type, t, &got);
    got.nobcast = 0;
    return tg_set_error(t->dtype != want->dtype ? TG_ETYPE : TG_ESHAPE,
                        "output %d%s%s%s: the tensor given is %s, the result is %s", i,
                        v->name ? " ('" : "", v->name ? v->name : "", v->name ? "')" : "",
                        tg_type_str(&got, a, sizeof a), tg_type_str(want, b, sizeof b));
}

static bool shares_input_memory(const tg_vm *vm, tg_tensor *const *in, const tg_tensor *t) {
    for (int i = 0; i < vm->g->inputs.n; i++)
        if (in[i]->buf == t->buf) return true;
    return false;
}

static uint64_t ins_bytes(const tg_vm *vm, const vm_plan *p, const tg_node *n) {
    uint64_t b = 0;
    for (int k = 0; k < n->nin; k++) {
        int v = n->in[k]->id;
        b += type_bytes(p->known[v] ? &p->rt[v] : &vm->drt[v]);
    }
    for (int o = 0; o < n->nout; o++) {
        int v = n->out[o]->id;
        b += type_bytes(p->known[v] ? &p->rt[v] : &vm->drt[v]);
    }
    return b;
}

static tg_status call_locked(tg_vm *vm, tg_tensor *const *in, tg_tensor **out, int nout,
                             bool into) {
    tg_graph *g = vm->g;
    vm_plan *p = NULL;
    tg_status st = plan_get(vm, in, &p);
    if (st != TG_OK) return st;
    /* values */
    for (int v = 0; v < vm->nvars; v++) {
        vm->owned[v] = 0;
        tg_var *var = g->vars.items[v];
        vm->val[v] = var->kind == TG_VAR_CONST  ? var->value
                     : p->cls[v] == CLS_PLANNED ? &p->tens[v]
                                                : NULL;
    }
    for (int i = 0; i < g->inputs.n; i++) vm->val[((tg_var *)g->inputs.items[i])->id] = in[i];
    /* a value returned several times is computed once: into a given tensor when there is
     * one (first round), else into a new one; the other outputs get copies at the end */
    for (int k = 0; k < 2 * nout; k++) {
        int i = k % nout;
        int v = ((tg_var *)g->outputs.items[i])->id;
        if (p->cls[v] != CLS_EXTERNAL || vm->val[v]) continue;
        const tg_type *rt = &p->rt[v];
        tg_tensor *t = into ? out[i] : NULL;
        if ((k < nout) != (t != NULL)) continue;
        if (t && !same_shape(t, rt)) {
            st = out_mismatch(vm, i, t, rt);
            goto done;
        }
        if (t && tg_tensor_is_contiguous(t) && !shares_input_memory(vm, in, t)) {
            vm->val[v] = t; /* borrowed: written in place */
            continue;
        }
        vm->val[v] = tg_tensor_empty(vm->ctx, (tg_dtype)rt->dtype, rt->ndim, rt->shape);
        if (!vm->val[v]) {
            st = TG_ENOMEM;
            goto done;
        }
        vm->owned[v] = 1;
    }
    /* the program: in order, but concurrent runs (plan_branches) over the pool; values
     * are released after the last use, or after the concurrent run holding it */
    vm_lane alone = {vm->args, vm->argt, vm->pool, vm->nthreads,
                     p->ws.buf ? p->ws.buf->data : NULL};
    for (int i = 0, hi; i < vm->norder && st == TG_OK; i = hi) {
        hi = i + 1;
        if (p->seg_hi && p->seg_hi[i] > i && !vm->hook) {
            hi = p->seg_hi[i];
            st = run_branches(vm, p, i, hi);
            for (int j = i; j < hi && st == TG_OK && VM_GUARD; j++) st = guard_check(vm, p, j);
        } else {
            double t0 = vm->profile ? now_s() : 0.0;
            st = p->dyn[i] ? run_dynamic(vm, p, i) : run_static(vm, p, i, &alone);
            if (st == TG_OK && vm->hook) st = vm->hook(vm->hook_ud, vm->ins[i].node, vm->val);
            if (st == TG_OK && VM_GUARD) st = guard_check(vm, p, i);
            if (vm->profile) {
                vm_ins *ins = &vm->ins[i];
                ins->seconds += now_s() - t0;
                ins->calls++;
                if (st == TG_OK) ins->bytes += ins_bytes(vm, p, ins->node);
            }
        }
        for (int r = vm->rel_at[i]; r < vm->rel_at[hi] && st == TG_OK; r++) {
            int v = vm->rel[r];
            if (vm->owned[v]) {
                tg_tensor_free(vm->val[v]);
                vm->owned[v] = 0;
            }
            vm->val[v] = NULL;
        }
    }
    if (st != TG_OK) goto done;
    /* results; when a given output shares memory with an input, the results still reading
     * an input's memory are copied aside before any given output is written */
    bool alias = false;
    for (int i = 0; into && i < nout; i++)
        alias = alias || (out[i] && vm->val[((tg_var *)g->outputs.items[i])->id] != out[i] &&
                          shares_input_memory(vm, in, out[i]));
    for (int i = 0; alias && i < nout; i++) {
        int v = ((tg_var *)g->outputs.items[i])->id;
        tg_tensor *t = vm->val[v];
        if (t == out[i] || !shares_input_memory(vm, in, t)) continue;
        tg_tensor *c = tg_tensor_dup(t);
        if (!c) {
            st = TG_ENOMEM;
            goto done;
        }
        if (vm->owned[v]) tg_tensor_free(t);
        vm->val[v] = c;
        vm->owned[v] = 1;
    }
    for (int i = 0; i < nout; i++) {
        tg_var *var = g->outputs.items[i];
        int v = var->id;
        tg_tensor *t = vm->val[v];
        TG_ASSERT(t != NULL);
        if (into && out[i]) {
            if (t == out[i]) continue;
            tg_type rt;
            tensor_rt(&var->type, t, &rt);
            if (!same_shape(out[i], &rt)) {
                st = out_mismatch(vm, i, out[i], &rt);
                goto done;
            }
            tg_tensor_copy_into(out[i], t);
            continue;
        }
        bool last = true; /* the last time this value is returned */
        for (int j = i + 1; j < nout; j++) last = last && g->outputs.items[j] != (void *)var;
        if (last && vm->owned[v] && atomic_load(&t->buf->refs) == 1 && tg_tensor_is_contiguous(t)) {
            out[i] = t;
            vm->owned[v] = 0;
            vm->val[v] = NULL;
        } else {
            out[i] = tg_tensor_dup(t);
            if (!out[i]) {
                st = TG_ENOMEM;
                goto done;
            }
        }
    }
done:
    for (int v = 0; v < vm->nvars; v++) {
        if (vm->owned[v]) tg_tensor_free(vm->val[v]);
        vm->owned[v] = 0;
        vm->val[v] = NULL;
    }
    return st;
}

tg_status tg_vm_call(tg_vm *vm, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                     bool into) {
    (void)nin;
    bool stack[64], *given = stack; /* out[i] was given by the caller */
    if (nout > (int)TG_COUNTOF(stack)) {
        given = tg_mem_alloc(vm->ctx, sizeof *given * (size_t)nout);
        if (!given) return TG_ENOMEM;
    }
    for (int i = 0; i < nout; i++) {
        given[i] = into && out[i];
        if (!given[i]) out[i] = NULL;
    }
    pthread_mutex_lock(&vm->mu);
    tg_status st = call_locked(vm, in, out, nout, into);
    pthread_mutex_unlock(&vm->mu);
    if (st != TG_OK)
        for (int i = 0; i < nout; i++)
            if (!given[i]) {
                tg_tensor_free(out[i]);
                out[i] = NULL;
            }
    if (given != stack) tg_mem_free(vm->ctx, given, sizeof *given * (size_t)nout);
    return st;
}

void tg_vm_set_hook(tg_vm *vm, tg_vm_hook_fn fn, void *ud) {
    vm->hook = fn;
    vm->hook_ud = ud;
}

void tg_vm_get_stats(tg_vm *vm, tg_vm_stats *s) {
    pthread_mutex_lock(&vm->mu);
    memset(s, 0, sizeof *s);
    s->nplans = vm->nplans;
    s->nthreads = vm->nthreads;
    s->isa = tg_vk_table_get(vm->isa)->name;
    for (int i = 0; i < vm->norder; i++) s->kinds[vm->ins[i].info.kind]++;
    vm_plan *p = NULL;
    for (int i = 0; i < vm->nplans; i++)
        if (!p || vm->plans[i]->stamp > p->stamp) p = vm->plans[i];
    if (vm->sched) {
        s->branch_runs = vm->sched->runs;
        s->branch_nodes = vm->sched->nodes;
        s->branch_overlapped = vm->sched->overlapped;
    }
    if (p) {
        s->nblocks = p->nblocks;
        for (int b = 0; b < p->nblocks; b++) s->bytes += p->blocks[b].size;
        for (int v = 0; v < vm->nvars; v++) s->nplanned += p->cls[v] == CLS_PLANNED;
        for (int i = 0; i < vm->norder; i++) s->ndynamic += p->dyn[i];
    }
    pthread_mutex_unlock(&vm->mu);
}

/* ---- profile ---- */

void tg_vm_profile_reset(tg_vm *vm) {
    pthread_mutex_lock(&vm->mu);
    for (int i = 0; i < vm->norder; i++) {
        vm->ins[i].seconds = 0;
        vm->ins[i].calls = 0;
        vm->ins[i].bytes = 0;
    }
    pthread_mutex_unlock(&vm->mu);
}

static const char *kind_name(const vm_ins *ins) {
    switch (ins->info.kind) {
    case VM_EW:
        return "vector";
    case VM_REDUCE:
        return "reduce";
    case VM_BLAS:
        return "blas";
    case VM_FUSED:
        return "fused";
    default:
        return "ref";
    }
}

tg_status tg_vm_profile_print(tg_vm *vm, FILE *f) {
    if (!vm->profile) return tg_set_error(TG_EINVAL, "the function was compiled without profiling");
    pthread_mutex_lock(&vm->mu);
    int n = vm->norder;
    int *idx = tg_mem_alloc(vm->ctx, sizeof *idx * (size_t)(n + 1));
    if (!idx) {
        pthread_mutex_unlock(&vm->mu);
        return TG_ENOMEM;
    }
    double total = 0;
    for (int i = 0; i < n; i++) {
        idx[i] = i;
        total += vm->ins[i].seconds;
    }
    for (int i = 1; i < n; i++) { /* insertion sort, most expensive first */
        int x = idx[i], j = i;
        while (j > 0 && vm->ins[idx[j - 1]].seconds < vm->ins[x].seconds) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = x;
    }
    fprintf(f, "%-6s %-14s %-7s %-22s %8s %12s %12s %7s %12s\n", "node", "op", "kernel", "type",
            "calls", "total ms", "per call us", "share", "bytes/call");
    for (int r = 0; r < n; r++) {
        const vm_ins *ins = &vm->ins[idx[r]];
        char ty[TG_TYPE_STR_MAX], name[64];
        tg_type_str(&ins->node->out[0]->type, ty, sizeof ty);
        snprintf(name, sizeof name, "%s", ins->op->name);
        double per = ins->calls ? ins->seconds / (double)ins->calls : 0.0;
        fprintf(f, "%-6d %-14s %-7s %-22s %8ld %12.3f %12.3f %6.1f%% %12.0f\n", ins->node->id, name,
                kind_name(ins), ty, ins->calls, ins->seconds * 1e3, per * 1e6,
                total > 0 ? 100.0 * ins->seconds / total : 0.0,
                ins->calls ? (double)ins->bytes / (double)ins->calls : 0.0);
    }
    for (int r = 0; r < n; r++) { /* BLAS operands with no unit stride were copied */
        const vm_ins *ins = &vm->ins[idx[r]];
        if (ins->copies)
            fprintf(f,
                    "node %d (%s): %llu operand copies (a matrix with no unit stride, or a "
                    "negative one)\n",
                    ins->node->id, ins->op->name, (unsigned long long)ins->copies);
    }
    fprintf(f, "total: %.3f ms in %d nodes, %d thread%s, %s kernels%s\n", total * 1e3, n,
            vm->nthreads, vm->nthreads == 1 ? "" : "s", tg_vk_table_get(vm->isa)->name,
            tg_vk_have_sleef() ? " with SLEEF" : "");
    if (vm->sched && vm->sched->runs) /* times of concurrent nodes overlap: shares add up
                                         to more than the wall time */
        fprintf(f, "concurrent runs: %ld, of %ld nodes, %ld started while another ran\n",
                vm->sched->runs, vm->sched->nodes, vm->sched->overlapped);
    tg_mem_free(vm->ctx, idx, sizeof *idx * (size_t)(n + 1));
    pthread_mutex_unlock(&vm->mu);
    return TG_OK;
}
