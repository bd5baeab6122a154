/* plan.h - private header of the schedule + memory plan stage (plan.c), shared by the VM
 * (src/backend/vm) and the C JIT (src/backend/cjit): the program (instructions in
 * topological order, last uses, kernel classes) and, per signature of input shapes, the
 * plan (run-time types, storage classes, block sizes), cached (least recently used goes);
 * and the replicas that calls run on.
 *
 * Program and replicas. The program and its plans are descriptions, immutable once made
 * and shared by every call; a replica holds what one call writes: the values, owned
 * flags, argument slots, and the memory of the plans it ran (blocks, workspace, planned
 * tensors: tg_plan_mem). A call takes a free replica (tg_plan_rep_take), runs on it alone
 * and gives it back (tg_plan_rep_give), so calls from several threads run at the same
 * time, each on its own replica. Replicas are made on demand and kept until the program
 * is freed: a function has as many as it ever had calls at once, each with memory for the
 * plans it ran that are still cached (at most TG_PLAN_MAX).
 * The program's lock (mu) is held only to look up or make a plan and to take or give a
 * replica from the list; never while a call runs. A replica finds the memory of a plan it
 * ran before without the lock (tg_plan_get).
 *
 * Storage of each value in a plan (cls):
 *  - TG_PLAN_LEAF: an input (the caller's tensor) or a constant (the graph's), borrowed.
 *  - TG_PLAN_PLANNED: a block of the replica's memory for the plan, reused by later values
 *    once every reader and every view of it has run; its tensor lives in that memory.
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
 * A plan is freed when the program dropped it and no replica holds memory for it (refs).
 */
#ifndef TG_PLAN_H
#define TG_PLAN_H

#include "../ops/ops.h"
#include "../parallel/parallel.h"

#include <pthread.h>

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
    tg_buffer *buf;  /* header for tensors over it (the memory holds one reference) */
    size_t guard;    /* offset of the TG_PLAN_GUARD sentinel bytes after it */
} tg_plan_block;

/* A plan: what a call of one signature of input shapes does, immutable once in the
 * program's cache (refs, stamp and evicted aside). */
typedef struct tg_plan {
    int64_t *key; /* the input shapes, concatenated */
    int nkey;
    tg_type *rt;         /* per var: run-time type (when known) */
    uint8_t *known;      /* per var: rt is known at plan time */
    uint8_t *cls;        /* per var: storage class */
    int *blk;            /* per var: block of a PLANNED value */
    uint8_t *dyn;        /* per instruction: run with run-time inference */
    bool dynamic;        /* some instruction is dyn, or some value's type is unknown */
    size_t *bsize;       /* per block: usable bytes (the largest value assigned) */
    int nblocks;         /* blocks */
    size_t ws_bytes;     /* workspace: its usable size (per instruction) */
    size_t ws_stride;    /* ws_bytes rounded up to 64 */
    int ws_slices;       /* set by the backend's runs hook: slices of ws_stride wanted (0: one) */
    int *seg_hi;         /* per instruction: end of its concurrent run, or 0 (NULL: none) */
    int *npred;          /* VM: per instruction of a concurrent run, its predecessors there */
    atomic_ulong stamp;  /* last use (the program's LRU) */
    atomic_int refs;     /* the program's cache, and each replica's memory for it */
    atomic_bool evicted; /* dropped from the program's cache: replicas let go of it */
} tg_plan;

/* A replica's memory for one plan: the blocks, the workspace and the planned tensors. */
typedef struct tg_plan_mem {
    tg_plan *plan;         /* its plan (a reference held) */
    tg_plan_block *blocks; /* plan->nblocks */
    tg_plan_block ws;      /* the workspace: ws_slices slices of ws_stride, or ws_bytes */
    tg_tensor *tens;       /* per var: the tensor of a PLANNED value (or a view's slot) */
    unsigned long used;    /* last use by its replica */
} tg_plan_mem;

/* What one call writes. A backend's replica embeds it first (tg_plan_prog.rep_size). */
typedef struct tg_plan_rep {
    tg_plan_mem *mem; /* the current call's plan and memory (tg_plan_get) */
    tg_pool *pool;    /* the program's pool as this call found it (NULL: one thread) */
    int nthreads;     /* its threads (1 without a pool) */
    tg_tensor **val;  /* per var: its value in this call */
    uint8_t *owned;   /* per var: this call frees val[v] */
    tg_tensor **args; /* maxargs: scratch for one instruction (inputs then outputs) */
    tg_type *argt;    /* their run-time types */
    tg_plan_mem *mems[TG_PLAN_MAX]; /* memory for plans this replica ran */
    int nmems;
    unsigned long clock;           /* use counter of mems */
    struct tg_plan_rep *next_free; /* in the program's list of free replicas */
    struct tg_plan_rep *next_all;  /* in the program's list of all replicas */
} tg_plan_rep;

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

/* The program and its plans; embedded in the backend object. Everything above `spare` is
 * immutable once the backend's constructor returned; spare is atomic, the rest is under
 * mu (pool is also read without it, atomically; clock is atomic). */
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
    const tg_subexec *sub; /* runs the bodies of `call` nodes (src/driver/compile.c); NULL: none */
    int maxargs;           /* most inputs and outputs of one instruction */
    const char **axes;     /* the pmap axes g reads (tg_pmap_free_axes): their numbers of ranks
                              end the key of a plan, since the types of all_gather and
                              psum_scatter depend on them */
    int naxes;
    /* called by tg_plan_get once the run-time types are known, before blocks are assigned
     * (under mu): may set seg_hi, npred and ws_slices (the VM's concurrent runs); NULL: none */
    tg_status (*runs)(void *ud, tg_plan *p);
    void *runs_ud;
    /* the backend's replicas: rep_size bytes each (tg_plan_rep first); rep_init sets up the
     * backend's part of a zeroed one (tg_plan_rep's part is set), rep_fini releases it
     * (also after a failed rep_init) */
    size_t rep_size;
    tg_status (*rep_init)(void *ud, tg_plan_rep *r);
    void (*rep_fini)(void *ud, tg_plan_rep *r);
    void *rep_ud;
    _Atomic(tg_plan_rep *) spare; /* one free replica, taken and given without the lock */
    pthread_mutex_t mu;           /* guards the fields below */
    _Atomic(tg_pool *) pool;      /* used by kernels; NULL for one thread (started by a large plan;
                                   written under mu, read by calls without it) */
    bool own_pool;
    int nthreads;     /* threads wanted (1 once a pool could not be started) */
    tg_tensor **args; /* maxargs: scratch of plan making (inputs then outputs) */
    tg_type *argt;    /* their run-time types */
    tg_plan *plans[TG_PLAN_MAX];
    int nplans;
    atomic_ulong clock; /* plan use counter (stamps; updated without mu too) */
    tg_plan_rep *reps;  /* every replica (through next_all) */
    tg_plan_rep *free;  /* the free ones but spare (through next_free) */
    int nreps;
} tg_plan_prog;

/* Makes the program of g (borrowed) for opts (may be NULL): order, last uses, the kernels
 * kern chooses (reuse all 0), the thread count. tg_plan_prog_fini releases it, its plans
 * and its replicas (also after a failed init); no call may be running. */
tg_status tg_plan_prog_init(tg_plan_prog *pg, tg_graph *g, const tg_compile_opts *opts,
                            const tg_plan_kernels *kern);
void tg_plan_prog_fini(tg_plan_prog *pg);
/* Whether instruction i computes its one output element by element from the same elements
 * of its inputs with a kernel of the backend (the VM: a vector kernel, or a fused node
 * without reductions): then it may overwrite an input that dies there. */
bool tg_plan_reuse_ok(const tg_plan_prog *pg, int i);

/* A free replica for one call (made when none is free), and giving it back after. */
tg_status tg_plan_rep_take(tg_plan_prog *pg, tg_plan_rep **out);
void tg_plan_rep_give(tg_plan_prog *pg, tg_plan_rep *r);
/* Sets r->mem to r's memory for the plan of the shapes of `in` (checked against the
 * inputs' types), and r->pool, r->nthreads: the plan is cached in the program or made
 * (under its lock); the memory is r's own, made on r's first call of the plan. */
tg_status tg_plan_get(tg_plan_prog *pg, tg_plan_rep *r, tg_tensor *const *in);
/* The number of plans cached, and *out the most recently used one (NULL when none), held
 * until tg_plan_unref (tests and diagnostics). */
int tg_plan_recent(tg_plan_prog *pg, tg_plan **out);
void tg_plan_unref(tg_plan_prog *pg, tg_plan *p);
/* Replicas made so far. */
int tg_plan_rep_count(tg_plan_prog *pg);

/* The values of a call on replica r (its plan r->mem; r->val, r->owned): constants,
 * inputs, planned tensors, and each EXTERNAL output into out[i] when `into` gives one that
 * is contiguous, of the result's type and shares no input's memory, else into a new tensor
 * (owned). After the program ran, tg_plan_results hands the results to out[] (copied
 * into the given tensors, or new ones); tg_plan_unbind frees what the call owns. */
tg_status tg_plan_bind(const tg_plan_prog *pg, tg_plan_rep *r, tg_tensor *const *in,
                       tg_tensor **out, int nout, bool into);
tg_status tg_plan_results(const tg_plan_prog *pg, tg_plan_rep *r, tg_tensor *const *in,
                          tg_tensor **out, int nout, bool into);
void tg_plan_unbind(const tg_plan_prog *pg, tg_plan_rep *r);

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
/* Checked builds: the first block of m (-1: the workspace) whose sentinel was changed, at
 * byte *byte, restored; -2 when none. */
int tg_plan_guard_find(tg_plan_mem *m, size_t *byte);

/* Whether node n's outputs are made by its kernel in plan p (views, self-allocating ops
 * the plan gives no buffer): the caller then owns them. */
static inline bool tg_plan_kmade(const tg_plan *p, const tg_node *n) {
    return n->nout > 0 && p->cls[n->out[0]->id] == TG_PLAN_KMADE;
}

#endif
