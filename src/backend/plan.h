/* plan.h - private header of the schedule + memory plan stage (plan.c), shared by the VM
 * (src/backend/vm) and the C JIT (src/backend/cjit): the program (instructions in
 * topological order, last uses, kernel classes) and, per signature of input shapes, the
 * memory plan (run-time types, storage classes, blocks), cached (least recently used goes).
 *
 * Storage of each value in a plan (cls):
 *  - TG_PLAN_LEAF: an input (the caller's tensor) or a constant (the graph's), borrowed.
 *  - TG_PLAN_PLANNED: a block of the plan's memory, reused by later values once every
 *    reader and every view of it has run; the block's tensor lives in the plan.
 *  - TG_PLAN_EXTERNAL: an output of the graph computed by a planned node: written straight
 *    into the caller's tensor or into a new tensor handed to the caller.
 *  - TG_PLAN_KMADE: made by its kernel (views, self-allocating ops).
 *  - TG_PLAN_DYNAMIC: its type is only known at run time (it depends on the values of a
 *    self-allocating op); its instruction is marked dyn.
 * Invariants: a planned block is never handed out twice at overlapping times (a value's
 * lifetime ends at the last use of it or of any view of it, at the end of the backend's
 * run holding that use (seg_hi), and a graph output's at the end of the call); an output
 * shares the block of an input only when the input dies at that instruction and nothing
 * else reads or views it (destroy maps, and elementwise reuse where the backend allows it).
 */
#ifndef TG_PLAN_H
#define TG_PLAN_H

#include "../ops/ops.h"
#include "../parallel/parallel.h"

#define TG_PLAN_MAX 8 /* plans kept per function (least recently used goes) */

/* Sentinels (checked builds: NDEBUG unset, or -DTG_VM_GUARDS): TG_PLAN_GUARD bytes of a
 * known pattern follow the bytes of every block that its largest value uses. */
#if !defined(NDEBUG) || defined(TG_VM_GUARDS)
#define TG_PLAN_GUARD 64
#else
#define TG_PLAN_GUARD 0
#endif

enum {
    TG_PLAN_NONE,
    TG_PLAN_LEAF,
    TG_PLAN_PLANNED,
    TG_PLAN_EXTERNAL,
    TG_PLAN_KMADE,
    TG_PLAN_DYNAMIC
};

typedef struct tg_plan_block {
    void *raw;       /* from the ctx allocator */
    size_t raw_size; /* its size */
    size_t size;     /* usable bytes (planned: the largest value assigned) */
    tg_buffer *buf;  /* header for tensors over it (the plan holds one reference) */
    size_t guard;    /* offset of the TG_PLAN_GUARD sentinel bytes after it */
} tg_plan_block;

typedef struct tg_plan {
    int64_t *key; /* the input shapes, concatenated */
    int nkey;
    tg_type *rt;           /* per var: run-time type (when known) */
    uint8_t *known;        /* per var: rt is known at plan time */
    uint8_t *cls;          /* per var: storage class */
    int *blk;              /* per var: block of a PLANNED value */
    tg_tensor *tens;       /* per var: the tensor of a PLANNED value (or a view's slot) */
    uint8_t *dyn;          /* per instruction: run with run-time inference */
    bool dynamic;          /* some instruction is dyn, or some value's type is unknown */
    tg_plan_block *blocks; /* the memory */
    int nblocks;
    tg_plan_block ws;    /* scratch: ws_bytes, or ws_slices slices of ws_stride bytes */
    size_t ws_bytes;     /* its usable size (per instruction) */
    size_t ws_stride;    /* ws_bytes rounded up to 64 */
    int ws_slices;       /* set by the backend's runs hook: slices wanted (0: one) */
    int *seg_hi;         /* per instruction: end of its concurrent run, or 0 (NULL: none) */
    int *npred;          /* VM: per instruction of a concurrent run, its predecessors there */
    unsigned long stamp; /* last use (LRU) */
} tg_plan;

struct tg_plan_prog;

/* The kernel choice of a backend, which the plan asks about its instructions without
 * knowing the kernels (the VM's, src/backend/vm/vm_kernels.c, serves the VM and the C
 * JIT). */
typedef struct tg_plan_kernels {
    /* chooses the kernel of every instruction from the static types; may keep its data
       in pg->kinfo */
    tg_status (*choose)(struct tg_plan_prog *pg);
    void (*release)(struct tg_plan_prog *pg); /* frees pg->kinfo (also after a failed choose) */
    /* whether instruction i's output may take the block of an input dying there: its kernel
       computes element by element from the same elements of its inputs */
    bool (*reuse_ok)(const struct tg_plan_prog *pg, int i);
    /* workspace instruction i needs for these run-time types */
    size_t (*ws)(const struct tg_plan_prog *pg, int i, const tg_type *in, const tg_type *out);
    /* whether instruction i runs a kernel of the backend (not the op's reference kernel),
       which writes into a planned block */
    bool (*library)(const struct tg_plan_prog *pg, int i);
} tg_plan_kernels;

/* The program and its plans; embedded in the backend object. */
typedef struct tg_plan_prog {
    tg_ctx *ctx;
    tg_graph *g;                 /* borrowed */
    tg_node **order;             /* topological order of the needed nodes */
    int norder;                  /* instructions */
    int nvars;                   /* variables of g */
    const tg_plan_kernels *kern; /* the backend's kernel choice */
    void *kinfo;                 /* its per-instruction data (kern->choose) */
    uint8_t *reuse;              /* per instruction, set by the backend: its output may take the
                                    block of any input dying there (elementwise; tg_plan_reuse_ok) */
    int *last;                   /* per var: last instruction reading it; norder for outputs */
    int *ext;                    /* per var: last use of it or of a view of it */
    int *nouts;                  /* per var: times it appears among the outputs */
    int *rel, *rel_at;     /* vars whose last use is instruction i: rel[rel_at[i]..rel_at[i+1]) */
    tg_type *const_rt;     /* per var: run-time type of constants */
    tg_pool *pool;         /* used by kernels; NULL for one thread (started by a large plan) */
    const tg_subexec *sub; /* runs the bodies of `call` nodes (src/driver/compile.c); NULL: none */
    bool own_pool;
    int nthreads;
    tg_tensor **args; /* maxargs: scratch for one instruction (inputs then outputs) */
    tg_type *argt;    /* their run-time types */
    int maxargs;
    /* called by tg_plan_get once the run-time types are known, before blocks are assigned:
     * may set seg_hi, npred and ws_slices (the VM's concurrent runs); NULL: none */
    tg_status (*runs)(void *ud, tg_plan *p);
    void *runs_ud;
    tg_plan *plans[TG_PLAN_MAX];
    int nplans;
    unsigned long stamp;
} tg_plan_prog;

/* Makes the program of g (borrowed) for opts (may be NULL): order, last uses, the kernels
 * kern chooses (reuse all 0), the thread count. tg_plan_prog_fini releases it and its
 * plans (also after a failed init). */
tg_status tg_plan_prog_init(tg_plan_prog *pg, tg_graph *g, const tg_compile_opts *opts,
                            const tg_plan_kernels *kern);
void tg_plan_prog_fini(tg_plan_prog *pg);
/* Whether instruction i computes its one output element by element from the same elements
 * of its inputs with a kernel of the backend (the VM: a vector kernel, or a fused node
 * without reductions): then it may overwrite an input that dies there. */
bool tg_plan_reuse_ok(const tg_plan_prog *pg, int i);
/* The plan for the shapes of `in` (checked against the inputs' types): cached, or made. */
tg_status tg_plan_get(tg_plan_prog *pg, tg_tensor *const *in, tg_plan **out);

/* The values of a call of plan p (val, owned: per var, the backend's): constants, inputs,
 * planned tensors, and each EXTERNAL output into out[i] when `into` gives one that is
 * contiguous, of the result's type and shares no input's memory, else into a new tensor
 * (owned). After the program ran, tg_plan_results hands the results to out[] (copied
 * into the given tensors, or new ones); tg_plan_unbind frees what the call owns. */
tg_status tg_plan_bind(const tg_plan_prog *pg, tg_plan *p, tg_tensor *const *in, tg_tensor **out,
                       int nout, bool into, tg_tensor **val, uint8_t *owned);
tg_status tg_plan_results(const tg_plan_prog *pg, tg_tensor *const *in, tg_tensor **out, int nout,
                          bool into, tg_tensor **val, uint8_t *owned);
void tg_plan_unbind(const tg_plan_prog *pg, tg_tensor **val, uint8_t *owned);

/* The outputs the caller gave to a call (`into` and non-NULL); the others are set to NULL
 * by tg_plan_outs_begin, and freed and set to NULL again by tg_plan_outs_end when the
 * call failed (which returns st). */
typedef struct tg_plan_outs {
    bool stack[64], *given; /* given[i]: out[i] was given by the caller */
    int nout;
} tg_plan_outs;
tg_status tg_plan_outs_begin(tg_ctx *ctx, tg_plan_outs *o, tg_tensor **out, int nout, bool into);
tg_status tg_plan_outs_end(tg_ctx *ctx, tg_plan_outs *o, tg_tensor **out, tg_status st);

/* Run-time type of a tensor filling a variable of static type st (as the interpreter). */
void tg_plan_runtime_type(const tg_type *st, int ndim, const int64_t *shape, uint8_t dtype,
                          tg_type *rt);
void tg_plan_tensor_rt(const tg_type *st, const tg_tensor *t, tg_type *rt);
size_t tg_plan_type_bytes(const tg_type *t); /* SIZE_MAX when it overflows */
/* "3:14: add" or "node 5 (add)"; and an error naming the node that way. */
void tg_plan_node_where(const tg_graph *g, const tg_node *n, char *buf, size_t len);
tg_status tg_plan_node_fail(const tg_graph *g, const tg_node *n, tg_status st, const char *msg);
/* *out: a new tensor of run-time type rt for an output of node n; the error names the node
 * (and the type) when it is too large (TG_ELIMIT) or memory runs out. */
tg_status tg_plan_node_tensor(const tg_graph *g, const tg_node *n, tg_ctx *ctx, const tg_type *rt,
                              tg_tensor **out);
/* Checked builds: the first block of p (-1: the workspace) whose sentinel was changed, at
 * byte *byte, restored; -2 when none. */
int tg_plan_guard_find(tg_plan *p, size_t *byte);

/* Whether node n's outputs are made by its kernel in plan p (views, self-allocating ops
 * the plan gives no buffer): the caller then owns them. */
static inline bool tg_plan_kmade(const tg_plan *p, const tg_node *n) {
    return n->nout > 0 && p->cls[n->out[0]->id] == TG_PLAN_KMADE;
}

#endif
