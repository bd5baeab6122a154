/* vm.h - private header of src/backend/vm: the fast executor. tg_graph_compile (interp.c)
 * hands TG_MODE_VM graphs, already rewritten, to tg_vm_new; tg_fn_call forwards to
 * tg_vm_call.
 *
 * The VM compiles a graph into a flat program: one instruction per node in topological
 * order, each with a kernel class chosen once from the static types (fast elementwise,
 * reduction, BLAS, fused, or the op's reference kernel). For every new signature of input
 * shapes it makes a memory plan (src/backend/plan.c, shared with the C JIT; vm.c adds the
 * concurrent runs): run-time types from each op's inference, exactly
 * as the interpreter computes them; each value's buffer is released after its last use
 * (views extend the life of what they view) and reused by later values of compatible
 * size; buffers stay allocated between calls; large ones are 2 MiB aligned and asked to
 * be backed by huge pages. Kernels split large work over a persistent thread pool (the
 * function's own, started by the first plan holding a value of 16K elements or more, or
 * one shared through the compile options).
 *
 * Invariants:
 *  - Results equal the interpreter's on the same graph: bit for bit except where
 *    vkernels.h documents SLEEF's error bounds, and for float sums and dot products,
 *    whose summation order differs (each element's order is fixed: results do not depend
 *    on the thread count).
 *  - Calls of one VM run concurrently, each on a replica of its own (values, buffers,
 *    workspace: src/backend/plan.h); the program and its plans are shared and read-only.
 *    A VM with a hook (debug mode) runs its calls concurrently too, each handing the hook
 *    the state of its own call (tg_vm_call_hooked).
 *  - No kernel allocates; the plan does, before the run. Reference kernels get zeroed
 *    outputs, as the interpreter gives them.
 */
#ifndef TG_VM_H
#define TG_VM_H

#include "../../ops/ops.h"
#include "../../parallel/parallel.h"
#include "../plan.h"

#include <stdio.h>

typedef struct tg_vm tg_vm;

/* Compiles g (borrowed: it must outlive the VM). opts may be NULL. */
tg_status tg_vm_new(tg_graph *g, const tg_compile_opts *opts, tg_vm **out);
/* The executor that runs the bodies of g's `call` nodes (borrowed; it outlives the VM). */
void tg_vm_set_sub(tg_vm *vm, const tg_subexec *sub);
void tg_vm_free(tg_vm *vm); /* NULL is a no-op */
/* A call (see tg_fn_call and tg_fn_call_into in tgraph.h). With `into`, a non-NULL out[i]
 * on entry receives output i (dtype and shape must match); otherwise out[i] receives a
 * new tensor. Inputs are checked by the caller (interp.c). */
tg_status tg_vm_call(tg_vm *vm, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                     bool into);
/* Debug mode (src/backend/cjit/debug.c): fn runs after every instruction, on the thread that
 * called, with its node and the live values by variable id; a status other than TG_OK
 * stops the call with it. ud: what tg_vm_call hands fn. A VM with a hook runs no
 * instructions concurrently. */
typedef tg_status (*tg_vm_hook_fn)(void *ud, const tg_node *n, tg_tensor *const *val);
void tg_vm_set_hook(tg_vm *vm, tg_vm_hook_fn fn, void *ud);
/* tg_vm_call whose hook gets `ud` instead of the one set: the state of this call, so that
 * checked calls run at the same time, each with its own. */
tg_status tg_vm_call_hooked(tg_vm *vm, void *ud, tg_tensor *const *in, int nin, tg_tensor **out,
                            int nout, bool into);
/* The per-node profile (when compiled with profiling): time, calls, share, bytes. */
tg_status tg_vm_profile_print(tg_vm *vm, FILE *f);
void tg_vm_profile_reset(tg_vm *vm);

/* What the cached plans hold (tests, diagnostics): plans, blocks in the most recently used
 * plan and their bytes, and the number of values that plan keeps in blocks. */
typedef struct tg_vm_stats {
    int nplans;      /* plans cached */
    int nblocks;     /* blocks of the most recent plan */
    size_t bytes;    /* their usable bytes */
    int nplanned;    /* values living in those blocks */
    int ndynamic;    /* instructions of that plan whose types are only known at run time */
    int nallocating; /* instructions of that plan, views aside, whose kernel allocates its
                        outputs at every call (self-allocating ops without a planned buffer) */
    int nthreads;    /* threads of the pool */
    int nreplicas;   /* replicas made so far: the most calls that ran at once */
    const char *isa; /* kernel table used */
    int kinds[5];    /* instructions per kernel class (vm_kind) */
    /* concurrent runs of independent nodes, summed over calls (vm.c, plan_branches) */
    long branch_runs;       /* runs executed */
    long branch_nodes;      /* instructions executed in them */
    long branch_overlapped; /* of those, started while another one of their run ran */
} tg_vm_stats;
void tg_vm_get_stats(tg_vm *vm, tg_vm_stats *s);

/* ---- what the kernel files share (vm_ew.c, vm_reduce.c, vm_blas.c, vm_fused.c) ---- */

#include "vkernels.h"

/* Kernel classes, chosen per node at compile time. */
typedef enum {
    VM_REF,    /* the op's reference kernel (also views and self-allocating ops) */
    VM_EW,     /* elementwise: vkernels over contiguous/broadcast rows */
    VM_REDUCE, /* sum mean max min prod argmax argmin logsumexp of floats */
    VM_BLAS,   /* dot, matmul of f32/f64 through CBLAS */
    VM_FUSED,  /* a fused{...} node, evaluated block by block */
} vm_kind;

/* What a kernel gets at run time. Workspace is the plan's scratch memory, ws_bytes long
 * (what the kernel asked for through its *_ws function), 64-byte aligned. */
typedef struct vm_exec {
    tg_pool *pool;           /* may be NULL: one thread */
    int nthreads;            /* tg_pool_size(pool) */
    const tg_node *node;     /* the node */
    tg_tensor *const *in;    /* input values (any strides) */
    tg_tensor *const *out;   /* output values: contiguous, of the run-time output types */
    const tg_type *in_type;  /* run-time input types */
    const tg_type *out_type; /* run-time output types */
    void *ws;                /* workspace */
    size_t ws_bytes;         /* its size */
    const void *info;        /* the kernel's compile-time data (vm_ins_info) */
    char msg[256];           /* error message (without the node's name) */
    uint32_t copies;         /* operands the kernel had to copy first (the profile shows it) */
} vm_exec;

/* Compile-time data of one instruction, for its kernel class. */
typedef struct vm_ins_info {
    vm_kind kind;
    tg_vk_fn vk;      /* VM_EW: the kernel */
    tg_vk_args vargs; /* VM_EW: its dtypes */
    int cost;         /* VM_EW: per-element cost (thread split) */
    tg_vk_isa isa;    /* the instruction set used */
    void *fused;      /* VM_FUSED: compiled program (vm_fused.c), owned */
} vm_ins_info;

/* The VM's kernel choice (vm_kernels.c), which the C JIT shares: pg->kinfo holds one
 * vm_ins_info per instruction. */
extern const tg_plan_kernels tg_vm_kernels;
static inline vm_ins_info *tg_vm_info(const tg_plan_prog *pg, int i) {
    return (vm_ins_info *)pg->kinfo + i;
}

/* Where an instruction runs: its argument slots, the pool it may split its work over and
 * its workspace (VM alone, or the C JIT: the whole pool and workspace; in a concurrent
 * run: one thread and that worker's slice). */
typedef struct vm_lane {
    tg_tensor **args; /* slots for the inputs then the outputs of one instruction */
    tg_type *argt;    /* their run-time types */
    tg_pool *pool;    /* NULL: one thread */
    int nthreads;
    void *ws;              /* the workspace (the plan's ws_bytes) */
    const tg_subexec *sub; /* runs the bodies of `call` nodes; NULL: none */
} vm_lane;

/* Runs node n of static plan p (src/backend/plan.h) on the values val (by variable id)
 * with its kernel class info (used by the VM and the C JIT's call-backs): or with its
 * reference kernel when the class does not apply to the run-time layout (zeroed outputs,
 * as the interpreter gives them, but a destroyed input is kept). On return ln->args holds
 * the inputs then the outputs; outputs of views and self-allocating ops are new tensors
 * there, owned by the caller. *copies adds the operands the kernel copied; note (may be
 * NULL) gets the kernel's figures for the profile (tg_kern.note). Errors name the node. */
tg_status tg_vm_run_node(tg_ctx *ctx, const tg_graph *g, const tg_plan *p, tg_tensor *const *val,
                         const tg_node *n, const vm_ins_info *info, const vm_lane *ln,
                         uint64_t *copies, tg_kern_note *note);

/* Elementwise (vm_ew.c): runs fn over the broadcast of in[0..nin) into out (contiguous
 * or not), gathering strided rows into blocks, split over the pool when large. */
tg_status tg_vm_ew_run(tg_pool *pool, tg_vk_fn fn, const tg_vk_args *a, int cost, tg_tensor *out,
                       tg_tensor *const *in, int nin);
tg_status tg_vm_exec_ew(vm_exec *e);
/* Whether an elementwise kernel of this cost over n elements splits over nthreads. */
bool tg_vm_ew_splits(int64_t n, int cost, int nthreads);
/* Copies n elements of es bytes (1, 2, 4 or 8) at stride s (elements; 0: one value
 * repeated) from src into dst, contiguous. */
void tg_vm_gather(void *dst, const char *src, int64_t s, int64_t n, int64_t es);

/* Reductions (vm_reduce.c). tg_vm_reduce_ok: the class applies to this node (static
 * types); exec returns TG_EUNSUPPORTED when the run-time layout needs the reference. */
bool tg_vm_reduce_ok(const tg_node *n);
size_t tg_vm_reduce_ws(const tg_node *n, const tg_type *in, const tg_type *out, int nthreads);
tg_status tg_vm_exec_reduce(vm_exec *e);
/* Whether a reduction reading n elements splits over nthreads threads. */
bool tg_vm_reduce_splits(int64_t n, int nthreads);

/* dot / matmul through CBLAS (vm_blas.c). */
bool tg_vm_blas_ok(const tg_node *n);
size_t tg_vm_blas_ws(const tg_node *n, const tg_type *in, const tg_type *out, int nthreads);
/* Whether the product is large enough to be split over nthreads threads (run-time types):
 * such a node should run alone with the whole pool, not in a concurrent run. */
bool tg_vm_blas_splits(const tg_node *n, const tg_type *in, const tg_type *out, int nthreads);
tg_status tg_vm_exec_blas(vm_exec *e);
void tg_vm_blas_single_thread(void); /* asks the BLAS library for one thread */
/* C = alpha op(A) op(B) + beta C, row-major (CBLAS's gemm, lda/ldb/ldc in elements, extents
 * within int): libxsmm's generated kernel for small products when built with it, else
 * CBLAS. */
void tg_vm_gemm(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                int64_t ldc);

/* Fused nodes (vm_fused.c). prep compiles the node's program (NULL when the node must
 * run its reference kernel); ws gives the scratch size for run-time types. */
void *tg_vm_fused_prep(tg_ctx *ctx, const tg_node *n, tg_vk_isa isa);
void tg_vm_fused_free(void *prep);
size_t tg_vm_fused_ws(void *prep, const tg_type *in, const tg_type *out, int nthreads);
/* Whether the node splits its work over nthreads threads, for its inputs' run-time types
 * (their broadcast is the iteration space). */
bool tg_vm_fused_splits(const void *prep, const tg_type *in, int nthreads);
tg_status tg_vm_exec_fused(vm_exec *e);
/* Fused programs with core ops, block by block of their batch (vm_fcore.c): prep gives
 * NULL when the node must run its reference kernel. Called through the tg_vm_fused_*
 * functions, which hold the compiled program. */
typedef struct vm_fcore vm_fcore;
struct tg_fused_prog;
vm_fcore *tg_vm_fcore_prep(tg_ctx *ctx, const tg_node *n, const struct tg_fused_prog *whole,
                           tg_vk_isa isa);
void tg_vm_fcore_free(vm_fcore *c);
size_t tg_vm_fcore_ws(const vm_fcore *c, int nthreads);
/* Whether the blocks split over nthreads threads, for the inputs' run-time types. */
bool tg_vm_fcore_splits(const vm_fcore *c, const tg_type *in, int nthreads);
tg_status tg_vm_exec_fcore(const vm_fcore *c, vm_exec *e);

#endif
