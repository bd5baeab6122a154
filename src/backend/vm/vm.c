/* vm.c - the VM: running a graph's program with the shared memory plan (src/backend/plan.c:
 * order, storage classes, blocks, plan-time values, in-place outputs), concurrent runs of
 * independent instructions, running calls, and the per-node profile (see vm.h for the
 * contract).
 *
 * What the VM adds to the plan: every vector or fused instruction without reductions may
 * overwrite an input that dies there (plan.reuse); concurrent runs (plan_branches, the
 * plan's runs hook: values used in a run die at its end, one workspace slice per worker);
 * DYNAMIC instructions run as the interpreter runs them (inference at run time, reference
 * kernel, a new tensor), freed after their last use.
 * Invariants: owned[v] marks exactly the tensors this call must free; a value is released
 * after its last use (rel lists), or after the concurrent run holding it.
 */
#include "vm.h"
#include "../plan.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct vm_ins {
    tg_node *node;       /* the node */
    const tg_op_def *op; /* its record */
    vm_ins_info *info;   /* kernel class and its data (the program's, pg.info) */
    double seconds;      /* profile: time spent */
    long calls;          /* profile: runs */
    uint64_t bytes;      /* profile: bytes read and written, summed over runs */
    uint64_t copies;     /* profile: operands copied by the kernel (BLAS layouts) */
} vm_ins;

struct tg_vm {
    tg_ctx *ctx;
    tg_graph *g;     /* borrowed */
    tg_plan_prog pg; /* the program, its plans, the pool */
    vm_ins *ins;     /* one per instruction of pg.order */
    bool profile;
    pthread_mutex_t mu; /* one call at a time */
    tg_vm_hook_fn hook; /* debug mode: called after every instruction */
    void *hook_ud;
    /* per-call state (under mu) */
    tg_tensor **val;        /* per var */
    uint8_t *owned;         /* per var: this call frees val[v] */
    tg_type *drt;           /* per var: run-time type of DYNAMIC values */
    struct vm_sched *sched; /* concurrent runs of independent nodes (NULL until needed) */
};

/* ---- helpers ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tg_status node_fail(const tg_vm *vm, const tg_node *n, tg_status st, const char *msg) {
    return tg_plan_node_fail(vm->g, n, st, msg);
}

/* After instruction i (checked builds): TG_EINTERNAL naming its node and output types when
 * it wrote past the end of a block (its own or another's); the guard is then restored. */
static tg_status guard_check(const tg_vm *vm, tg_plan *p, int i) {
    size_t k = 0;
    int b = tg_plan_guard_find(p, &k);
    if (b < -1) return TG_OK;
    const tg_plan_block *blk = b < 0 ? &p->ws : &p->blocks[b];
    const tg_node *n = vm->ins[i].node;
    char where[256], types[256] = "", ty[64];
    tg_plan_node_where(vm->g, n, where, sizeof where);
    for (int o = 0; o < n->nout; o++) {
        const tg_type *rt = p->known[n->out[o]->id] ? &p->rt[n->out[o]->id] : &n->out[o]->type;
        size_t len = strlen(types);
        snprintf(types + len, sizeof types - len, "%s%s", o ? ", " : "",
                 tg_type_str(rt, ty, sizeof ty));
    }
    return tg_set_error(TG_EINTERNAL,
                        "%s: wrote past the end of a buffer: byte %zu after the %zu bytes "
                        "of %s %d was changed (node %d, outputs %s)",
                        where, k, blk->guard, b < 0 ? "the workspace" : "block", b, n->id, types);
}

/* ---- compiling ---- */

static void sched_free(tg_vm *vm);
static tg_status plan_branches(void *ud, tg_plan *p);

void tg_vm_free(tg_vm *vm) {
    if (!vm) return;
    tg_ctx *ctx = vm->ctx;
    size_t nv = (size_t)vm->pg.nvars + 1, no = (size_t)vm->pg.norder + 1;
    sched_free(vm);
    tg_plan_prog_fini(&vm->pg);
    tg_mem_free(ctx, vm->ins, vm->ins ? sizeof *vm->ins * no : 0);
    tg_mem_free(ctx, vm->val, vm->val ? sizeof *vm->val * nv : 0);
    tg_mem_free(ctx, vm->owned, vm->owned ? sizeof *vm->owned * nv : 0);
    tg_mem_free(ctx, vm->drt, vm->drt ? sizeof *vm->drt * nv : 0);
    pthread_mutex_destroy(&vm->mu);
    tg_mem_free(ctx, vm, sizeof *vm);
}

/* The instruction set the VM's kernels were chosen for (the same for every instruction). */
static tg_vk_isa vm_isa(const tg_vm *vm) {
    return vm->pg.norder > 0 ? tg_vm_info(&vm->pg, 0)->isa : tg_vk_isa_best();
}

void tg_vm_set_sub(tg_vm *vm, const tg_subexec *sub) { vm->pg.sub = sub; }

tg_status tg_vm_new(tg_graph *g, const tg_compile_opts *opts, tg_vm **out) {
    *out = NULL;
    tg_ctx *ctx = g->ctx;
    tg_vm *vm = tg_mem_calloc(ctx, sizeof *vm);
    if (!vm) return TG_ENOMEM;
    pthread_mutex_init(&vm->mu, NULL);
    vm->ctx = ctx;
    vm->g = g;
    vm->profile = opts && opts->profile;
    tg_status st = tg_plan_prog_init(&vm->pg, g, opts, &tg_vm_kernels);
    size_t nv = (size_t)vm->pg.nvars + 1, no = (size_t)vm->pg.norder + 1;
    if (st == TG_OK) {
        vm->ins = tg_mem_calloc(ctx, sizeof *vm->ins * no);
        vm->val = tg_mem_calloc(ctx, sizeof *vm->val * nv);
        vm->owned = tg_mem_calloc(ctx, sizeof *vm->owned * nv);
        vm->drt = tg_mem_calloc(ctx, sizeof *vm->drt * nv);
        if (!vm->ins || !vm->val || !vm->owned || !vm->drt) st = TG_ENOMEM;
    }
    if (st != TG_OK) {
        tg_vm_free(vm);
        return st;
    }
    for (int i = 0; i < vm->pg.norder; i++) {
        vm_ins *ins = &vm->ins[i];
        ins->node = vm->pg.order[i];
        ins->op = tg_op_table[ins->node->op];
        ins->info = tg_vm_info(&vm->pg, i);
        vm->pg.reuse[i] = tg_plan_reuse_ok(&vm->pg, i);
    }
    vm->pg.runs = plan_branches;
    vm->pg.runs_ud = vm;
    *out = vm;
    return TG_OK;
}

/* ---- concurrent runs of independent nodes (plan side) ----
 *
 * A plan cuts the program into maximal runs of consecutive instructions that may run
 * concurrently: VM kernels (vector, reduction, BLAS, fused; they never allocate) of
 * planned or external values that destroy nothing, each too small for its kernel to split
 * its work over the pool (tg_vm_*_splits; a node that splits runs alone with the pool)
 * and moving fewer than VM_BRANCH_NODE_MAX bytes.
 * A run becomes concurrent when it holds two instructions that do not depend on each
 * other and moves at least VM_BRANCH_MIN bytes in all; the other instructions run in
 * program order, as before. Inside a concurrent run, each instruction waits for its
 * predecessors in the run (dependency counts, vm_seg below), and no value dies before the
 * run ends: blocks freed by its instructions are reused only after it, so concurrent
 * instructions never share memory. Results do not change: every kernel gives the same
 * numbers on one thread as on many. */

#define VM_BRANCH_NODE_MAX ((size_t)8 << 20)   /* bytes moved by a node that runs alone */
#define VM_BRANCH_MIN      ((size_t)128 << 10) /* bytes moved by a run worth running concurrently */

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
    size_t nv = (size_t)vm->pg.nvars + 1, no = (size_t)vm->pg.norder + 1;
    size_t na = (size_t)vm->pg.maxargs * (size_t)sc->nw;
    tg_mem_free(ctx, sc->prod, sc->prod ? sizeof *sc->prod * nv : 0);
    tg_mem_free(ctx, sc->succ,
                sc->succ ? sizeof *sc->succ * (size_t)(sc->succ_at[vm->pg.norder] + 1) : 0);
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
    const tg_node *n = vm->pg.order[j];
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
    size_t nv = (size_t)vm->pg.nvars + 1, no = (size_t)vm->pg.norder + 1;
    size_t na = (size_t)vm->pg.maxargs * (size_t)nw;
    vm_sched *sc = tg_mem_calloc(ctx, sizeof *sc);
    int *pr = tg_mem_alloc(ctx, sizeof *pr * (size_t)(vm->pg.maxargs + 1));
    if (!sc || !pr) {
        tg_mem_free(ctx, sc, sc ? sizeof *sc : 0);
        tg_mem_free(ctx, pr, pr ? sizeof *pr * (size_t)(vm->pg.maxargs + 1) : 0);
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
    for (int v = 0; ok && v < vm->pg.nvars; v++) sc->prod[v] = -1;
    for (int i = 0; ok && i < vm->pg.norder; i++)
        for (int o = 0; o < vm->pg.order[i]->nout; o++) sc->prod[vm->pg.order[i]->out[o]->id] = i;
    /* successor lists (counting, then filling) */
    for (int j = 0; ok && j < vm->pg.norder; j++) {
        int np = preds_of(vm, sc, j, pr);
        for (int q = 0; q < np; q++) sc->succ_at[pr[q] + 1]++;
    }
    for (int i = 0; ok && i < vm->pg.norder; i++) sc->succ_at[i + 1] += sc->succ_at[i];
    if (ok)
        sc->succ = tg_mem_alloc(ctx, sizeof *sc->succ * (size_t)(sc->succ_at[vm->pg.norder] + 1));
    ok = ok && sc->succ;
    int *fill = ok ? tg_mem_calloc(ctx, sizeof *fill * no) : NULL;
    ok = ok && fill;
    for (int j = 0; ok && j < vm->pg.norder; j++) {
        int np = preds_of(vm, sc, j, pr);
        for (int q = 0; q < np; q++) sc->succ[sc->succ_at[pr[q]] + fill[pr[q]]++] = j;
    }
    tg_mem_free(ctx, fill, fill ? sizeof *fill * no : 0);
    tg_mem_free(ctx, pr, sizeof *pr * (size_t)(vm->pg.maxargs + 1));
    if (!ok) {
        sched_free(vm);
        return TG_ENOMEM;
    }
    return TG_OK;
}

/* Whether instruction i of plan p may run concurrently with others, and the bytes it
 * moves (*bytes). */
static bool branch_ok(const tg_vm *vm, const tg_plan *p, int i, size_t *bytes) {
    const vm_ins *ins = &vm->ins[i];
    const tg_node *n = ins->node;
    *bytes = 0;
    if (p->dyn[i] || ins->info->kind == VM_REF || ins->op->destroys) return false;
    for (int o = 0; o < n->nout; o++) {
        int c = p->cls[n->out[o]->id];
        if (c != TG_PLAN_PLANNED && c != TG_PLAN_EXTERNAL) return false;
    }
    int64_t most = 0, in0 = 0; /* elements of the largest operand (an elementwise node's
                                  output), of the first input (a reduction's) */
    for (int k = 0; k < n->nin + n->nout; k++) {
        const tg_var *v = k < n->nin ? n->in[k] : n->out[k - n->nin];
        const tg_type *t = &p->rt[v->id];
        size_t b = tg_plan_type_bytes(t);
        int64_t ne = 0;
        if (b >= VM_BRANCH_NODE_MAX || !tg_shape_size(t->ndim, t->shape, &ne)) return false;
        most = ne > most ? ne : most;
        if (k == 0) in0 = ne;
        *bytes += b;
    }
    /* a node whose kernel splits its work over the pool runs alone with it: on one thread
       of a concurrent run it would take longer than the whole run's other work (the Adam
       update of a 784 x 256 layer, 5.6 MB, took 235 us there instead of 112 us alone) */
    int nw = vm->pg.pool ? tg_pool_size(vm->pg.pool) : vm->pg.nthreads;
    switch (ins->info->kind) {
    case VM_BLAS: {
        if (n->nin > 8 || n->nout != 1) return false;
        tg_type tin[8];
        for (int k = 0; k < n->nin; k++) tin[k] = p->rt[n->in[k]->id];
        return !tg_vm_blas_splits(n, tin, &p->rt[n->out[0]->id], nw);
    }
    case VM_EW:
        return !tg_vm_ew_splits(most, ins->info->cost, nw);
    case VM_REDUCE:
        return !tg_vm_reduce_splits(in0, nw);
    case VM_FUSED: {
        tg_type tin[TG_MAX_OUTS];
        if (n->nin > TG_MAX_OUTS) return false;
        for (int k = 0; k < n->nin; k++) tin[k] = p->rt[n->in[k]->id];
        return !tg_vm_fused_splits(ins->info->fused, tin, nw);
    }
    default:
        return true;
    }
}

/* The plan's runs hook (tg_plan_prog.runs; ud is the VM): cuts plan p into concurrent runs
 * (p->seg_hi, p->npred; both stay NULL when there is none) and asks for one workspace slice
 * per worker. Needs the run-time types and classes; runs before blocks are assigned. */
static tg_status plan_branches(void *ud, tg_plan *p) {
    tg_vm *vm = ud;
    const char *env = getenv("TGRAPH_BRANCHES");
    int nw = vm->pg.pool ? tg_pool_size(vm->pg.pool) : vm->pg.nthreads;
    if (nw < 2 || vm->hook || (env && strcmp(env, "0") == 0)) return TG_OK;
    tg_ctx *ctx = vm->ctx;
    size_t no = (size_t)vm->pg.norder + 1;
    tg_status st = TG_OK;
    int *pr = NULL;
    for (int lo = 0; lo < vm->pg.norder;) {
        size_t b, total = 0;
        if (!branch_ok(vm, p, lo, &b)) {
            lo++;
            continue;
        }
        int hi = lo;
        bool wide = false; /* two instructions of the run are independent */
        for (; hi < vm->pg.norder && branch_ok(vm, p, hi, &b); hi++) {
            total += b;
            if (hi == lo || wide) continue;
            const tg_node *n = vm->pg.order[hi], *m = vm->pg.order[hi - 1];
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
            pr = tg_mem_alloc(ctx, sizeof *pr * (size_t)(vm->pg.maxargs + 1));
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
    if (pr) tg_mem_free(ctx, pr, sizeof *pr * (size_t)(vm->pg.maxargs + 1));
    if (st == TG_OK && p->seg_hi) p->ws_slices = vm->sched->nw; /* a slice per worker */
    return st; /* on failure the plan's release frees seg_hi and npred */
}

/* ---- running ---- */

tg_status tg_vm_run_node(tg_ctx *ctx, const tg_graph *g, const tg_plan *p, tg_tensor *const *val,
                         const tg_node *n, const vm_ins_info *info, const vm_lane *ln,
                         uint64_t *copies) {
    const tg_op_def *op = tg_op_table[n->op];
    tg_tensor **vin = ln->args, **vout = ln->args + n->nin;
    tg_type *tin = ln->argt, *tout = ln->argt + n->nin;
    for (int k = 0; k < n->nin; k++) {
        vin[k] = val[n->in[k]->id];
        tin[k] = p->rt[n->in[k]->id];
        TG_ASSERT(vin[k] != NULL);
    }
    bool self = false; /* outputs made by the kernel (views, self-allocating ops) */
    for (int o = 0; o < n->nout; o++) {
        int v = n->out[o]->id;
        self = self || p->cls[v] == TG_PLAN_KMADE;
        vout[o] = p->cls[v] == TG_PLAN_KMADE ? NULL : val[v];
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
    e.info = info;
    e.msg[0] = '\0';
    e.copies = 0;
    tg_status st = TG_EUNSUPPORTED;
    switch (self ? VM_REF : info->kind) {
    case VM_EW:
        st = tg_vm_exec_ew(&e);
        break;
    case VM_REDUCE:
        st = tg_vm_exec_reduce(&e);
        break;
    case VM_BLAS:
        st = tg_vm_exec_blas(&e);
        *copies += e.copies;
        break;
    case VM_FUSED:
        st = tg_vm_exec_fused(&e);
        break;
    case VM_REF:
        break;
    }
    if (st == TG_OK) return TG_OK;
    if (st != TG_EUNSUPPORTED)
        return tg_plan_node_fail(g, n, st, e.msg[0] ? e.msg : tg_status_str(st));
    /* the reference kernel: zeroed outputs, as the interpreter gives them */
    for (int o = 0; o < n->nout && !self && !op->destroys; o++) { /* keep what is destroyed */
        tg_tensor *t = vout[o];
        memset(tg_tensor_data(t), 0, (size_t)tg_tensor_size(t) * tg_dtype_size(t->dtype));
    }
    char msg[512];
    st = tg_kern_call(ctx, n, vin, tout, vout, ln->sub, msg, sizeof msg);
    if (st != TG_OK) {
        for (int o = 0; o < n->nout && self; o++) tg_tensor_free(vout[o]);
        return tg_plan_node_fail(g, n, st, msg);
    }
    for (int o = 0; o < n->nout && self; o++) {
        const tg_tensor *t = vout[o];
        const tg_type *s = &n->out[o]->type;
        TG_ASSERT(t != NULL && t->dtype == s->dtype && t->ndim == s->ndim);
        for (int d = 0; d < t->ndim; d++) {
            TG_ASSERT(s->shape[d] < 0 || s->shape[d] == t->shape[d]);
            TG_ASSERT(!p->known[n->out[o]->id] || t->shape[d] == tout[o].shape[d]);
        }
    }
    return TG_OK;
}

/* Runs instruction i of a static plan. */
static tg_status run_static(tg_vm *vm, tg_plan *p, int i, const vm_lane *ln) {
    vm_ins *ins = &vm->ins[i];
    tg_node *n = ins->node;
    tg_status st = tg_vm_run_node(vm->ctx, vm->g, p, vm->val, n, ins->info, ln, &ins->copies);
    if (st != TG_OK || !tg_plan_kmade(p, n)) return st;
    for (int o = 0; o < n->nout; o++) { /* made by the kernel: ours to free */
        int v = n->out[o]->id;
        tg_tensor *t = ln->args[n->nin + o];
        if (!p->known[v]) tg_plan_tensor_rt(&n->out[o]->type, t, &vm->drt[v]);
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

static uint64_t ins_bytes(const tg_vm *vm, const tg_plan *p, const tg_node *n);

typedef struct vm_seg {
    tg_vm *vm;
    tg_plan *p;
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
    tg_plan *p = S->p;
    vm_sched *sc = vm->sched;
    TG_ASSERT(ith < sc->nw);
    size_t a0 = (size_t)ith * (size_t)vm->pg.maxargs;
    vm_lane ln = {sc->args + a0,
                  sc->argt + a0,
                  NULL,
                  1,
                  p->ws.buf ? (char *)p->ws.buf->data + (size_t)ith * p->ws_stride : NULL,
                  vm->pg.sub};
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
static tg_status run_branches(tg_vm *vm, tg_plan *p, int lo, int hi) {
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
    tg_pool_run(vm->pg.pool, seg_task, &S); /* publishes the above; returns after all ran */
    pthread_mutex_destroy(&S.mu);
    sc->runs++;
    sc->nodes += hi - lo;
    sc->overlapped += atomic_load(&S.overlapped);
    return S.st == TG_OK ? TG_OK : tg_set_error(S.st, "%s", S.msg);
}

/* Runs instruction i as the interpreter would: inference on the run-time types, new
 * outputs, the reference kernel. */
static tg_status run_dynamic(tg_vm *vm, tg_plan *p, int i) {
    vm_ins *ins = &vm->ins[i];
    tg_node *n = ins->node;
    tg_tensor **vin = vm->pg.args, **vout = vm->pg.args + n->nin;
    tg_type *tin = vm->pg.argt, tout[TG_MAX_OUTS];
    for (int k = 0; k < n->nin; k++) {
        int v = n->in[k]->id;
        vin[k] = vm->val[v];
        tin[k] = p->known[v] ? p->rt[v] : vm->drt[v];
        TG_ASSERT(vin[k] != NULL);
    }
    char msg[512];
    tg_status st = tg_node_infer(n, tin, NULL, tout, msg, sizeof msg);
    if (st != TG_OK) return node_fail(vm, n, st, msg);
    st = tg_kern_run(vm->ctx, n, vin, tout, vout, vm->pg.sub, msg, sizeof msg);
    if (st != TG_OK) return node_fail(vm, n, st, msg);
    for (int o = 0; o < n->nout; o++) {
        int v = n->out[o]->id;
        TG_ASSERT(vout[o] != NULL);
        tg_plan_tensor_rt(&n->out[o]->type, vout[o], &vm->drt[v]);
        vm->val[v] = vout[o];
        vm->owned[v] = 1;
    }
    return TG_OK;
}

static uint64_t ins_bytes(const tg_vm *vm, const tg_plan *p, const tg_node *n) {
    uint64_t b = 0;
    for (int k = 0; k < n->nin; k++) {
        int v = n->in[k]->id;
        b += tg_plan_type_bytes(p->known[v] ? &p->rt[v] : &vm->drt[v]);
    }
    for (int o = 0; o < n->nout; o++) {
        int v = n->out[o]->id;
        b += tg_plan_type_bytes(p->known[v] ? &p->rt[v] : &vm->drt[v]);
    }
    return b;
}

static tg_status call_locked(tg_vm *vm, tg_tensor *const *in, tg_tensor **out, int nout,
                             bool into) {
    tg_plan *p = NULL;
    tg_status st = tg_plan_get(&vm->pg, in, &p);
    if (st != TG_OK) return st;
    st = tg_plan_bind(&vm->pg, p, in, out, nout, into, vm->val, vm->owned);
    if (st != TG_OK) goto done;
    /* the program: in order, but concurrent runs (plan_branches) over the pool; values
     * are released after the last use, or after the concurrent run holding it */
    vm_lane alone = {
        vm->pg.args, vm->pg.argt, vm->pg.pool, vm->pg.nthreads, p->ws.buf ? p->ws.buf->data : NULL,
        vm->pg.sub};
    for (int i = 0, hi; i < vm->pg.norder && st == TG_OK; i = hi) {
        hi = i + 1;
        if (p->seg_hi && p->seg_hi[i] > i && !vm->hook) {
            hi = p->seg_hi[i];
            st = run_branches(vm, p, i, hi);
            for (int j = i; j < hi && st == TG_OK && TG_PLAN_GUARD; j++) st = guard_check(vm, p, j);
        } else {
            double t0 = vm->profile ? now_s() : 0.0;
            st = p->dyn[i] ? run_dynamic(vm, p, i) : run_static(vm, p, i, &alone);
            if (st == TG_OK && vm->hook) st = vm->hook(vm->hook_ud, vm->ins[i].node, vm->val);
            if (st == TG_OK && TG_PLAN_GUARD) st = guard_check(vm, p, i);
            if (vm->profile) {
                vm_ins *ins = &vm->ins[i];
                ins->seconds += now_s() - t0;
                ins->calls++;
                if (st == TG_OK) ins->bytes += ins_bytes(vm, p, ins->node);
            }
        }
        for (int r = vm->pg.rel_at[i]; r < vm->pg.rel_at[hi] && st == TG_OK; r++) {
            int v = vm->pg.rel[r];
            if (vm->owned[v]) {
                tg_tensor_free(vm->val[v]);
                vm->owned[v] = 0;
            }
            vm->val[v] = NULL;
        }
    }
    if (st == TG_OK) st = tg_plan_results(&vm->pg, in, out, nout, into, vm->val, vm->owned);
done:
    tg_plan_unbind(&vm->pg, vm->val, vm->owned);
    return st;
}

tg_status tg_vm_call(tg_vm *vm, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                     bool into) {
    (void)nin;
    tg_plan_outs o;
    if (tg_plan_outs_begin(vm->ctx, &o, out, nout, into) != TG_OK) return TG_ENOMEM;
    pthread_mutex_lock(&vm->mu);
    tg_status st = call_locked(vm, in, out, nout, into);
    pthread_mutex_unlock(&vm->mu);
    return tg_plan_outs_end(vm->ctx, &o, out, st);
}

void tg_vm_set_hook(tg_vm *vm, tg_vm_hook_fn fn, void *ud) {
    vm->hook = fn;
    vm->hook_ud = ud;
}

void tg_vm_get_stats(tg_vm *vm, tg_vm_stats *s) {
    pthread_mutex_lock(&vm->mu);
    memset(s, 0, sizeof *s);
    s->nplans = vm->pg.nplans;
    s->nthreads = vm->pg.nthreads;
    s->isa = tg_vk_table_get(vm_isa(vm))->name;
    for (int i = 0; i < vm->pg.norder; i++) s->kinds[vm->ins[i].info->kind]++;
    tg_plan *p = NULL;
    for (int i = 0; i < vm->pg.nplans; i++)
        if (!p || vm->pg.plans[i]->stamp > p->stamp) p = vm->pg.plans[i];
    if (vm->sched) {
        s->branch_runs = vm->sched->runs;
        s->branch_nodes = vm->sched->nodes;
        s->branch_overlapped = vm->sched->overlapped;
    }
    if (p) {
        s->nblocks = p->nblocks;
        for (int b = 0; b < p->nblocks; b++) s->bytes += p->blocks[b].size;
        for (int v = 0; v < vm->pg.nvars; v++) s->nplanned += p->cls[v] == TG_PLAN_PLANNED;
        for (int i = 0; i < vm->pg.norder; i++) {
            const tg_node *n = vm->pg.order[i];
            s->ndynamic += p->dyn[i];
            s->nallocating += !tg_op_table[n->op]->views && tg_plan_kmade(p, n);
        }
    }
    pthread_mutex_unlock(&vm->mu);
}

/* ---- profile ---- */

void tg_vm_profile_reset(tg_vm *vm) {
    pthread_mutex_lock(&vm->mu);
    for (int i = 0; i < vm->pg.norder; i++) {
        vm->ins[i].seconds = 0;
        vm->ins[i].calls = 0;
        vm->ins[i].bytes = 0;
    }
    pthread_mutex_unlock(&vm->mu);
}

static const char *kind_name(const vm_ins *ins) {
    switch (ins->info->kind) {
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
    int n = vm->pg.norder;
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
            vm->pg.nthreads, vm->pg.nthreads == 1 ? "" : "s", tg_vk_table_get(vm_isa(vm))->name,
            tg_vk_have_sleef() ? " with SLEEF" : "");
    if (vm->sched && vm->sched->runs) /* times of concurrent nodes overlap: shares add up
                                         to more than the wall time */
        fprintf(f, "concurrent runs: %ld, of %ld nodes, %ld started while another ran\n",
                vm->sched->runs, vm->sched->nodes, vm->sched->overlapped);
    tg_mem_free(vm->ctx, idx, sizeof *idx * (size_t)(n + 1));
    pthread_mutex_unlock(&vm->mu);
    return TG_OK;
}
