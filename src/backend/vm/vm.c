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
 *
 * Calls run on replicas (plan.h): the VM's replica (vm_rep) adds the run-time types of
 * DYNAMIC values, the state of concurrent runs (dependency counts, the ready queue, each
 * worker's argument slots) and the profile counts of the call, which are added to the
 * VM's totals (under mu) when the call ends. The program, its plans and the scheduler's
 * graph (vm_sched) are only read by calls. With a hook (debug mode), each call hands it the
 * state its caller gave for that call (tg_vm_call_hooked: src/backend/cjit/debug.c).
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
} vm_ins;

/* Profile counts of one instruction. */
typedef struct vm_prof {
    double seconds;               /* time spent */
    long calls;                   /* runs */
    uint64_t bytes;               /* bytes read and written, summed over runs */
    uint64_t copies;              /* operands copied by the kernel (BLAS layouts) */
    uint64_t loop[TG_LOOP_MEM_N]; /* a loop (scan, map): bytes it held, summed over runs */
    /* a pmap: the buckets its ranks waited for (tg_kern_note), summed over runs */
    uint64_t waits, wait_bytes, flight_ns, waited_ns;
} vm_prof;

struct tg_vm {
    tg_ctx *ctx;
    tg_graph *g;     /* borrowed */
    tg_plan_prog pg; /* the program, its plans, the pool, the replicas */
    vm_ins *ins;     /* one per instruction of pg.order */
    bool profile;
    tg_vm_hook_fn hook; /* debug mode: called after every instruction */
    void *hook_ud;
    struct vm_sched *sched; /* concurrent runs of independent nodes (NULL until a plan has
                               one; made under pg.mu) */
    pthread_mutex_t mu;     /* guards the totals below */
    vm_prof *prof;          /* profile: per instruction, over every call so far */
    long branch_runs;       /* concurrent runs executed (all calls) */
    long branch_nodes;      /* instructions executed in them */
    long branch_overlapped; /* of those, started while another instruction of the run ran */
};

/* What one call of the VM writes (a replica, plan.h). */
typedef struct vm_rep {
    tg_plan_rep base; /* first: the values, the plans' memory */
    tg_vm *vm;
    tg_type *drt;  /* per var: run-time type of DYNAMIC values */
    vm_prof *prof; /* profile: this call's counts (zeroed when added to the VM's) */
    /* concurrent runs (made for the replica's first one) */
    atomic_int *cnt;              /* per instruction: predecessors not yet finished */
    atomic_int *q;                /* ready queue of a run: instructions, -1 until pushed */
    tg_tensor **args;             /* per worker: maxargs argument slots */
    tg_type *argt;                /* per worker: their types */
    int nw;                       /* workers those were made for */
    long runs, nodes, overlapped; /* this call's concurrent runs (added to the VM's) */
    void *hook_ud;                /* what this call hands the hook */
} vm_rep;

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
static tg_status guard_check(const tg_vm *vm, tg_plan_mem *m, int i) {
    size_t k = 0;
    int b = tg_plan_guard_find(m, &k);
    if (b < -1) return TG_OK;
    const tg_plan *p = m->plan;
    const tg_plan_block *blk = b < 0 ? &m->ws : &m->blocks[b];
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
static tg_status rep_init(void *ud, tg_plan_rep *r);
static void rep_fini(void *ud, tg_plan_rep *r);

void tg_vm_free(tg_vm *vm) {
    if (!vm) return;
    tg_ctx *ctx = vm->ctx;
    size_t no = (size_t)vm->pg.norder + 1;
    sched_free(vm);
    tg_plan_prog_fini(&vm->pg);
    tg_mem_free(ctx, vm->ins, vm->ins ? sizeof *vm->ins * no : 0);
    tg_mem_free(ctx, vm->prof, vm->prof ? sizeof *vm->prof * no : 0);
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
    size_t no = (size_t)vm->pg.norder + 1;
    if (st == TG_OK) {
        vm->ins = tg_mem_calloc(ctx, sizeof *vm->ins * no);
        vm->prof = vm->profile ? tg_mem_calloc(ctx, sizeof *vm->prof * no) : NULL;
        if (!vm->ins || (vm->profile && !vm->prof)) st = TG_ENOMEM;
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
    vm->pg.rep_size = sizeof(vm_rep);
    vm->pg.rep_init = rep_init;
    vm->pg.rep_fini = rep_fini;
    vm->pg.rep_ud = vm;
    *out = vm;
    return TG_OK;
}

/* ---- concurrent runs of independent nodes (plan side) ----
 *
 * A plan cuts the program into maximal runs of consecutive instructions that may run
 * concurrently: VM kernels (vector, reduction, BLAS, fused; they never allocate) of
 * planned or external values that destroy nothing and have no effects (so collectives run
 * in program order on every rank of a pmap), each too small for its kernel to split
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

/* The scheduler's graph: what every replica's concurrent runs read. */
typedef struct vm_sched {
    int nw;              /* workers: the threads of the pool */
    int *prod;           /* per var: the instruction making it, or -1 */
    int *succ, *succ_at; /* per instruction: distinct readers, succ[succ_at[i]..succ_at[i+1]) */
} vm_sched;

static void sched_free(tg_vm *vm) {
    vm_sched *sc = vm->sched;
    if (!sc) return;
    tg_ctx *ctx = vm->ctx;
    size_t nv = (size_t)vm->pg.nvars + 1, no = (size_t)vm->pg.norder + 1;
    tg_mem_free(ctx, sc->prod, sc->prod ? sizeof *sc->prod * nv : 0);
    tg_mem_free(ctx, sc->succ,
                sc->succ ? sizeof *sc->succ * (size_t)(sc->succ_at[vm->pg.norder] + 1) : 0);
    tg_mem_free(ctx, sc->succ_at, sc->succ_at ? sizeof *sc->succ_at * (no + 1) : 0);
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

/* The scheduler's graph, made once per VM (for nw workers; under pg.mu). */
static tg_status sched_get(tg_vm *vm, int nw) {
    if (vm->sched) return TG_OK;
    tg_ctx *ctx = vm->ctx;
    size_t nv = (size_t)vm->pg.nvars + 1, no = (size_t)vm->pg.norder + 1;
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
    bool ok = sc->prod && sc->succ_at;
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

/* Whether instruction i of plan p may run concurrently with others (on nw workers), and the
 * bytes it moves (*bytes). */
static bool branch_ok(const tg_vm *vm, const tg_plan *p, int i, int nw, size_t *bytes) {
    const vm_ins *ins = &vm->ins[i];
    const tg_node *n = ins->node;
    *bytes = 0;
    /* an op with effects (a collective) runs alone, in program order: the ranks of a pmap,
       each running this program, must make their exchanges in one order */
    if (p->dyn[i] || ins->info->kind == VM_REF || ins->op->destroys || ins->op->effects)
        return false;
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

/* The plan's runs hook (tg_plan_prog.runs; ud is the VM; under pg.mu): cuts plan p into
 * concurrent runs (p->seg_hi, p->npred; both stay NULL when there is none) and asks for one
 * workspace slice per worker. Needs the run-time types and classes; runs before blocks are
 * assigned. */
static tg_status plan_branches(void *ud, tg_plan *p) {
    tg_vm *vm = ud;
    const char *env = getenv("TGRAPH_BRANCHES");
    tg_pool *pool = atomic_load(&vm->pg.pool);
    int nw = pool ? tg_pool_size(pool) : vm->pg.nthreads;
    if (nw < 2 || vm->hook || (env && strcmp(env, "0") == 0)) return TG_OK;
    tg_ctx *ctx = vm->ctx;
    size_t no = (size_t)vm->pg.norder + 1;
    tg_status st = TG_OK;
    int *pr = NULL;
    for (int lo = 0; lo < vm->pg.norder;) {
        size_t b, total = 0;
        if (!branch_ok(vm, p, lo, nw, &b)) {
            lo++;
            continue;
        }
        int hi = lo;
        bool wide = false; /* two instructions of the run are independent */
        for (; hi < vm->pg.norder && branch_ok(vm, p, hi, nw, &b); hi++) {
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
                         uint64_t *copies, tg_kern_note *note) {
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
    st = tg_kern_call(ctx, n, vin, tout, vout, ln->sub, ln->pool, note, msg, sizeof msg);
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

/* Runs instruction i of a static plan on replica R. */
static tg_status run_static(vm_rep *R, int i, const vm_lane *ln) {
    tg_vm *vm = R->vm;
    const tg_plan *p = R->base.mem->plan;
    vm_ins *ins = &vm->ins[i];
    tg_node *n = ins->node;
    uint64_t none = 0; /* copies are counted for the profile only */
    uint64_t *copies = R->prof ? &R->prof[i].copies : &none;
    tg_kern_note note = {0}; /* a pmap's buckets, for the profile only */
    bool noted = R->prof && ins->op == &tg_op_pmap;
    tg_status st = tg_vm_run_node(vm->ctx, vm->g, p, R->base.val, n, ins->info, ln, copies,
                                  noted ? &note : NULL);
    if (noted) {
        vm_prof *pr = &R->prof[i];
        pr->waits += (uint64_t)atomic_load(&note.waits);
        pr->wait_bytes += atomic_load(&note.bytes);
        pr->flight_ns += atomic_load(&note.flight_ns);
        pr->waited_ns += atomic_load(&note.waited_ns);
    }
    if (st != TG_OK || !tg_plan_kmade(p, n)) return st;
    for (int o = 0; o < n->nout; o++) { /* made by the kernel: ours to free */
        int v = n->out[o]->id;
        tg_tensor *t = ln->args[n->nin + o];
        if (!p->known[v]) tg_plan_tensor_rt(&n->out[o]->type, t, &R->drt[v]);
        R->base.val[v] = t;
        R->base.owned[v] = 1;
    }
    return TG_OK;
}

static uint64_t ins_bytes(const vm_rep *R, const tg_plan *p, const tg_node *n) {
    uint64_t b = 0;
    for (int k = 0; k < n->nin; k++) {
        int v = n->in[k]->id;
        b += tg_plan_type_bytes(p->known[v] ? &p->rt[v] : &R->drt[v]);
    }
    for (int o = 0; o < n->nout; o++) {
        int v = n->out[o]->id;
        b += tg_plan_type_bytes(p->known[v] ? &p->rt[v] : &R->drt[v]);
    }
    return b;
}

/* The memory a loop held in its run (tg_loop_memory), added to pr. */
static void loop_bytes(const vm_rep *R, const tg_plan *p, const tg_node *n, vm_prof *pr) {
    const tg_type *out[TG_MAX_OUTS];
    uint64_t mem[TG_LOOP_MEM_N];
    for (int o = 0; o < n->nout && o < TG_MAX_OUTS; o++) {
        int v = n->out[o]->id;
        out[o] = p->known[v] ? &p->rt[v] : &R->drt[v];
    }
    tg_loop_memory(n, out, mem);
    for (int k = 0; k < TG_LOOP_MEM_N; k++) pr->loop[k] += mem[k];
}

/* Profile: instruction i ran from t0 (seconds) with status st. */
static void prof_add(vm_rep *R, int i, double t0, tg_status st) {
    vm_prof *pr = &R->prof[i];
    const tg_node *n = R->vm->ins[i].node;
    pr->seconds += now_s() - t0;
    pr->calls++;
    if (st == TG_OK) pr->bytes += ins_bytes(R, R->base.mem->plan, n);
    if (st == TG_OK && (R->vm->ins[i].op == &tg_op_scan || R->vm->ins[i].op == &tg_op_map))
        loop_bytes(R, R->base.mem->plan, n, pr);
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
 * remaining ones are skipped. The counts, the queue and the workers' argument slots are
 * the replica's; when the pool is busy with another call's kernel, the whole run goes on
 * the calling thread (tg_pool_run), in an order the queue keeps valid. */

typedef struct vm_seg {
    vm_rep *R;
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
    atomic_store_explicit(&S->R->q[S->lo + t], j, memory_order_release);
}

static void seg_task(void *arg, int ith, int nth) {
    (void)nth;
    vm_seg *S = arg;
    vm_rep *R = S->R;
    tg_vm *vm = R->vm;
    const tg_plan_mem *m = R->base.mem;
    const vm_sched *sc = vm->sched;
    TG_ASSERT(ith < sc->nw);
    size_t a0 = (size_t)ith * (size_t)vm->pg.maxargs;
    vm_lane ln = {R->args + a0,
                  R->argt + a0,
                  NULL,
                  1,
                  m->ws.buf ? (char *)m->ws.buf->data + (size_t)ith * m->plan->ws_stride : NULL,
                  vm->pg.sub};
    int n = S->hi - S->lo;
    for (;;) {
        int k = atomic_fetch_add_explicit(&S->head, 1, memory_order_relaxed);
        if (k >= n) break;
        int i;
        for (unsigned spin = 1;
             (i = atomic_load_explicit(&R->q[S->lo + k], memory_order_acquire)) < 0; spin++) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            if ((spin & 255) == 0) sched_yield(); /* a predecessor may wait for this core */
        }
        if (!atomic_load_explicit(&S->failed, memory_order_relaxed)) {
            if (atomic_fetch_add(&S->running, 1) > 0) atomic_fetch_add(&S->overlapped, 1);
            double t0 = R->prof ? now_s() : 0.0;
            tg_status st = run_static(R, i, &ln);
            atomic_fetch_sub(&S->running, 1);
            if (R->prof) prof_add(R, i, t0, st); /* each instruction runs on one thread */
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
            if (j < S->hi && atomic_fetch_sub_explicit(&R->cnt[j], 1, memory_order_acq_rel) == 1)
                seg_push(S, j);
        }
    }
}

static void seg_free(vm_rep *R) {
    tg_vm *vm = R->vm;
    tg_ctx *ctx = vm->ctx;
    size_t no = (size_t)vm->pg.norder + 1, na = (size_t)vm->pg.maxargs * (size_t)R->nw;
    tg_mem_free(ctx, R->cnt, R->cnt ? sizeof *R->cnt * no : 0);
    tg_mem_free(ctx, R->q, R->q ? sizeof *R->q * no : 0);
    tg_mem_free(ctx, R->args, R->args ? sizeof *R->args * na : 0);
    tg_mem_free(ctx, R->argt, R->argt ? sizeof *R->argt * na : 0);
    R->cnt = R->q = NULL;
    R->args = NULL;
    R->argt = NULL;
}

/* The replica's state of concurrent runs, for the scheduler's workers (on its first run). */
static tg_status seg_state(vm_rep *R) {
    if (R->q) return TG_OK;
    tg_vm *vm = R->vm;
    tg_ctx *ctx = vm->ctx;
    R->nw = vm->sched->nw;
    size_t no = (size_t)vm->pg.norder + 1, na = (size_t)vm->pg.maxargs * (size_t)R->nw;
    R->cnt = tg_mem_calloc(ctx, sizeof *R->cnt * no);
    R->q = tg_mem_calloc(ctx, sizeof *R->q * no);
    R->args = tg_mem_calloc(ctx, sizeof *R->args * na);
    R->argt = tg_mem_calloc(ctx, sizeof *R->argt * na);
    if (R->cnt && R->q && R->args && R->argt) return TG_OK;
    seg_free(R);
    return TG_ENOMEM;
}

/* Runs instructions [lo, hi), a concurrent run of the replica's plan, over the pool. */
static tg_status run_branches(vm_rep *R, int lo, int hi) {
    const tg_plan *p = R->base.mem->plan;
    tg_status st = seg_state(R);
    if (st != TG_OK) return st;
    vm_seg S;
    S.R = R;
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
        atomic_store_explicit(&R->cnt[i], p->npred[i], memory_order_relaxed);
        atomic_store_explicit(&R->q[i], -1, memory_order_relaxed);
    }
    for (int i = lo; i < hi; i++)
        if (p->npred[i] == 0) seg_push(&S, i);
    tg_pool_run(R->base.pool, seg_task, &S); /* publishes the above; returns after all ran */
    pthread_mutex_destroy(&S.mu);
    R->runs++;
    R->nodes += hi - lo;
    R->overlapped += atomic_load(&S.overlapped);
    return S.st == TG_OK ? TG_OK : tg_set_error(S.st, "%s", S.msg);
}

/* Runs instruction i as the interpreter would: inference on the run-time types, new
 * outputs, the reference kernel. */
static tg_status run_dynamic(vm_rep *R, int i) {
    tg_vm *vm = R->vm;
    const tg_plan *p = R->base.mem->plan;
    tg_node *n = vm->ins[i].node;
    tg_tensor **val = R->base.val;
    tg_tensor **vin = R->base.args, **vout = R->base.args + n->nin;
    tg_type *tin = R->base.argt, tout[TG_MAX_OUTS];
    for (int k = 0; k < n->nin; k++) {
        int v = n->in[k]->id;
        vin[k] = val[v];
        tin[k] = p->known[v] ? p->rt[v] : R->drt[v];
        TG_ASSERT(vin[k] != NULL);
    }
    char msg[512];
    tg_status st = tg_node_infer(n, tin, NULL, tout, msg, sizeof msg);
    if (st != TG_OK) return node_fail(vm, n, st, msg);
    st = tg_kern_run(vm->ctx, n, vin, tout, vout, vm->pg.sub, R->base.pool, msg, sizeof msg);
    if (st != TG_OK) return node_fail(vm, n, st, msg);
    for (int o = 0; o < n->nout; o++) {
        int v = n->out[o]->id;
        TG_ASSERT(vout[o] != NULL);
        tg_plan_tensor_rt(&n->out[o]->type, vout[o], &R->drt[v]);
        val[v] = vout[o];
        R->base.owned[v] = 1;
    }
    return TG_OK;
}

static tg_status call_rep(vm_rep *R, tg_tensor *const *in, tg_tensor **out, int nout, bool into) {
    tg_vm *vm = R->vm;
    tg_plan_rep *r = &R->base;
    tg_status st = tg_plan_get(&vm->pg, r, in);
    if (st != TG_OK) return st;
    tg_plan_mem *m = r->mem;
    const tg_plan *p = m->plan;
    st = tg_plan_bind(&vm->pg, r, in, out, nout, into);
    if (st != TG_OK) goto done;
    /* the program: in order, but concurrent runs (plan_branches) over the pool; values
     * are released after the last use, or after the concurrent run holding it */
    vm_lane alone = {r->args,   r->argt, r->pool, r->nthreads, m->ws.buf ? m->ws.buf->data : NULL,
                     vm->pg.sub};
    for (int i = 0, hi; i < vm->pg.norder && st == TG_OK; i = hi) {
        hi = i + 1;
        if (p->seg_hi && p->seg_hi[i] > i && !vm->hook) {
            hi = p->seg_hi[i];
            st = run_branches(R, i, hi);
            for (int j = i; j < hi && st == TG_OK && TG_PLAN_GUARD; j++) st = guard_check(vm, m, j);
        } else {
            double t0 = R->prof ? now_s() : 0.0;
            st = p->dyn[i] ? run_dynamic(R, i) : run_static(R, i, &alone);
            if (st == TG_OK && vm->hook) st = vm->hook(R->hook_ud, vm->ins[i].node, r->val);
            if (st == TG_OK && TG_PLAN_GUARD) st = guard_check(vm, m, i);
            if (R->prof) prof_add(R, i, t0, st);
        }
        for (int k = vm->pg.rel_at[i]; k < vm->pg.rel_at[hi] && st == TG_OK; k++) {
            int v = vm->pg.rel[k];
            if (r->owned[v]) {
                tg_tensor_free(r->val[v]);
                r->owned[v] = 0;
            }
            r->val[v] = NULL;
        }
    }
    if (st == TG_OK) st = tg_plan_results(&vm->pg, r, in, out, nout, into);
done:
    tg_plan_unbind(&vm->pg, r);
    return st;
}

/* Adds the call's counts (profile, concurrent runs) to the VM's totals. */
static void counts_merge(vm_rep *R) {
    tg_vm *vm = R->vm;
    if (!R->prof && !R->runs) return;
    pthread_mutex_lock(&vm->mu);
    for (int i = 0; R->prof && i < vm->pg.norder; i++) {
        vm_prof *a = &vm->prof[i], *b = &R->prof[i];
        a->seconds += b->seconds;
        a->calls += b->calls;
        a->bytes += b->bytes;
        a->copies += b->copies;
        for (int k = 0; k < TG_LOOP_MEM_N; k++) a->loop[k] += b->loop[k];
        a->waits += b->waits;
        a->wait_bytes += b->wait_bytes;
        a->flight_ns += b->flight_ns;
        a->waited_ns += b->waited_ns;
        *b = (vm_prof){0};
    }
    vm->branch_runs += R->runs;
    vm->branch_nodes += R->nodes;
    vm->branch_overlapped += R->overlapped;
    pthread_mutex_unlock(&vm->mu);
    R->runs = R->nodes = R->overlapped = 0;
}

tg_status tg_vm_call(tg_vm *vm, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                     bool into) {
    return tg_vm_call_hooked(vm, vm->hook_ud, in, nin, out, nout, into);
}

tg_status tg_vm_call_hooked(tg_vm *vm, void *ud, tg_tensor *const *in, int nin, tg_tensor **out,
                            int nout, bool into) {
    (void)nin;
    tg_plan_outs o;
    if (tg_plan_outs_begin(vm->ctx, &o, out, nout, into) != TG_OK) return TG_ENOMEM;
    tg_plan_rep *r = NULL;
    tg_status st = tg_plan_rep_take(&vm->pg, &r);
    if (st == TG_OK) {
        ((vm_rep *)r)->hook_ud = ud;
        st = call_rep((vm_rep *)r, in, out, nout, into);
        counts_merge((vm_rep *)r);
        tg_plan_rep_give(&vm->pg, r);
    }
    return tg_plan_outs_end(vm->ctx, &o, out, st);
}

/* ---- replicas ---- */

static tg_status rep_init(void *ud, tg_plan_rep *r) {
    tg_vm *vm = ud;
    vm_rep *R = (vm_rep *)r;
    size_t nv = (size_t)vm->pg.nvars + 1, no = (size_t)vm->pg.norder + 1;
    R->vm = vm;
    R->drt = tg_mem_calloc(vm->ctx, sizeof *R->drt * nv);
    R->prof = vm->profile ? tg_mem_calloc(vm->ctx, sizeof *R->prof * no) : NULL;
    return R->drt && (R->prof || !vm->profile) ? TG_OK : TG_ENOMEM;
}

/* Frees what rep_init and seg_state made. */
static void rep_fini(void *ud, tg_plan_rep *r) {
    tg_vm *vm = ud;
    vm_rep *R = (vm_rep *)r;
    tg_ctx *ctx = vm->ctx;
    size_t nv = (size_t)vm->pg.nvars + 1, no = (size_t)vm->pg.norder + 1;
    R->vm = vm; /* also after a failed rep_init */
    seg_free(R);
    tg_mem_free(ctx, R->drt, R->drt ? sizeof *R->drt * nv : 0);
    tg_mem_free(ctx, R->prof, R->prof ? sizeof *R->prof * no : 0);
}

void tg_vm_set_hook(tg_vm *vm, tg_vm_hook_fn fn, void *ud) {
    vm->hook = fn;
    vm->hook_ud = ud;
}

void tg_vm_get_stats(tg_vm *vm, tg_vm_stats *s) {
    memset(s, 0, sizeof *s);
    tg_plan *p = NULL;
    s->nplans = tg_plan_recent(&vm->pg, &p);
    s->nreplicas = tg_plan_rep_count(&vm->pg);
    pthread_mutex_lock(&vm->pg.mu);
    s->nthreads = vm->pg.nthreads;
    pthread_mutex_unlock(&vm->pg.mu);
    s->isa = tg_vk_table_get(vm_isa(vm))->name;
    for (int i = 0; i < vm->pg.norder; i++) s->kinds[vm->ins[i].info->kind]++;
    pthread_mutex_lock(&vm->mu);
    s->branch_runs = vm->branch_runs;
    s->branch_nodes = vm->branch_nodes;
    s->branch_overlapped = vm->branch_overlapped;
    pthread_mutex_unlock(&vm->mu);
    if (p) {
        s->nblocks = p->nblocks;
        for (int b = 0; b < p->nblocks; b++) s->bytes += p->bsize[b];
        for (int v = 0; v < vm->pg.nvars; v++) s->nplanned += p->cls[v] == TG_PLAN_PLANNED;
        for (int i = 0; i < vm->pg.norder; i++) {
            const tg_node *n = vm->pg.order[i];
            s->ndynamic += p->dyn[i];
            s->nallocating += !tg_op_table[n->op]->views && tg_plan_kmade(p, n);
        }
        tg_plan_unref(&vm->pg, p);
    }
}

/* ---- profile ---- */

void tg_vm_profile_reset(tg_vm *vm) {
    pthread_mutex_lock(&vm->mu);
    for (int i = 0; vm->prof && i < vm->pg.norder; i++) vm->prof[i] = (vm_prof){0};
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
    pthread_mutex_lock(&vm->pg.mu);
    int nth = vm->pg.nthreads;
    pthread_mutex_unlock(&vm->pg.mu);
    pthread_mutex_lock(&vm->mu);
    int n = vm->pg.norder;
    int *idx = tg_mem_alloc(vm->ctx, sizeof *idx * (size_t)(n + 1));
    if (!idx) {
        pthread_mutex_unlock(&vm->mu);
        return TG_ENOMEM;
    }
    const vm_prof *pr = vm->prof;
    double total = 0;
    for (int i = 0; i < n; i++) {
        idx[i] = i;
        total += pr[i].seconds;
    }
    for (int i = 1; i < n; i++) { /* insertion sort, most expensive first */
        int x = idx[i], j = i;
        while (j > 0 && pr[idx[j - 1]].seconds < pr[x].seconds) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = x;
    }
    fprintf(f, "%-6s %-14s %-7s %-22s %8s %12s %12s %7s %12s\n", "node", "op", "kernel", "type",
            "calls", "total ms", "per call us", "share", "bytes/call");
    for (int r = 0; r < n; r++) {
        const vm_ins *ins = &vm->ins[idx[r]];
        const vm_prof *q = &pr[idx[r]];
        char ty[TG_TYPE_STR_MAX], name[64];
        tg_type_str(&ins->node->out[0]->type, ty, sizeof ty);
        snprintf(name, sizeof name, "%s", ins->op->name);
        double per = q->calls ? q->seconds / (double)q->calls : 0.0;
        fprintf(f, "%-6d %-14s %-7s %-22s %8ld %12.3f %12.3f %6.1f%% %12.0f\n", ins->node->id, name,
                kind_name(ins), ty, q->calls, q->seconds * 1e3, per * 1e6,
                total > 0 ? 100.0 * q->seconds / total : 0.0,
                q->calls ? (double)q->bytes / (double)q->calls : 0.0);
    }
    for (int r = 0; r < n; r++) { /* BLAS operands with no unit stride were copied */
        const vm_ins *ins = &vm->ins[idx[r]];
        if (pr[idx[r]].copies)
            fprintf(f,
                    "node %d (%s): %llu operand copies (a matrix with no unit stride, or a "
                    "negative one)\n",
                    ins->node->id, ins->op->name, (unsigned long long)pr[idx[r]].copies);
    }
    for (int i = 0; i < n; i++) { /* what the loops held, in program order */
        const vm_ins *ins = &vm->ins[i];
        const vm_prof *q = &pr[i];
        if ((ins->op != &tg_op_scan && ins->op != &tg_op_map) || !q->calls) continue;
        double c = (double)q->calls;
        fprintf(f,
                "node %d (%s) memory per call: %.0f B stacked outputs, %.0f B states saved for "
                "the gradient, %.0f B state buffers\n",
                ins->node->id, ins->op->name, (double)q->loop[TG_LOOP_MEM_STACKS] / c,
                (double)q->loop[TG_LOOP_MEM_SAVED] / c, (double)q->loop[TG_LOOP_MEM_STATES] / c);
    }
    for (int i = 0; i < n; i++) { /* the buckets of the pmaps (docs/mpi.md) */
        const vm_ins *ins = &vm->ins[i];
        const vm_prof *q = &pr[i];
        if (!q->waits || !q->calls) continue;
        double c = (double)q->calls, fl = (double)q->flight_ns * 1e-6 / c,
               w = (double)q->waited_ns * 1e-6 / c;
        fprintf(f,
                "node %d (pmap) buckets per call, summed over this process's ranks: %.1f "
                "waits, %.0f B; in flight %.3f ms, waited %.3f ms, overlapped %.3f ms (%.0f%%)\n",
                ins->node->id, (double)q->waits / c, (double)q->wait_bytes / c, fl, w,
                fl > w ? fl - w : 0.0, fl > 0 ? 100.0 * (fl > w ? fl - w : 0.0) / fl : 0.0);
    }
    fprintf(f, "total: %.3f ms in %d nodes, %d thread%s, %s kernels%s\n", total * 1e3, n, nth,
            nth == 1 ? "" : "s", tg_vk_table_get(vm_isa(vm))->name,
            tg_vk_have_sleef() ? " with SLEEF" : "");
    if (vm->branch_runs) /* times of concurrent nodes overlap: shares add up to more than
                            the wall time */
        fprintf(f, "concurrent runs: %ld, of %ld nodes, %ld started while another ran\n",
                vm->branch_runs, vm->branch_nodes, vm->branch_overlapped);
    tg_mem_free(vm->ctx, idx, sizeof *idx * (size_t)(n + 1));
    pthread_mutex_unlock(&vm->mu);
    return TG_OK;
}
