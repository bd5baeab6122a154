/* op.h - the op interface, declared at the IR level: the record every op is (tg_op_def),
 * its attribute schema, the inference and reference-kernel contexts, the sub-graph
 * executor kernels of ops with inner graphs receive, the SPMD context the ranks of a pmap
 * run in, and the properties ops state as data (reductions, BLAS forms, effects). The IR builds,
 * types and verifies nodes through this interface alone; src/ops provides the instances (one record
 * per op, listed once in src/ops/oplist.h) and the table of them.
 *
 * Invariant: nothing in src/ir names a particular op except through tg_op_cast_id, the op the
 * builder inserts when promotion changes an input's dtype.
 */
#ifndef TG_IR_OP_H
#define TG_IR_OP_H

#include "ir.h"

#define TG_MAX_OUTS 64 /* most outputs one node may have (split) */

/* ---- attribute schema ---- */
typedef enum {
    TG_AS_INT,    /* integer (bool accepted as 0/1) */
    TG_AS_FLOAT,  /* number; ints are converted */
    TG_AS_BOOL,   /* true/false */
    TG_AS_STR,    /* string */
    TG_AS_INTS,   /* list of ints; a single int becomes a list of one */
    TG_AS_AXES,   /* int, list of ints, or none (= all axes) */
    TG_AS_DTYPE,  /* string naming a dtype; stored as INT holding the tg_dtype */
    TG_AS_SCALAR, /* int or float, kept as given */
    TG_AS_FUNC,   /* @name */
    TG_AS_PAIRS,  /* list of int pairs: `[[a, b], [c, d]]` in .tg; a TG_ATTR_INTS of even
                     length in C and in tg_aval (a, b, c, d) */
    TG_AS_FLOATS, /* a number (kept as FLOAT; ints converted) or a list of numbers (kept as
                     FLOATS, a list of ints converted): the two stay apart (quantile's q) */
    TG_AS_DATA,   /* op data (TG_ATTR_DATA) of the record's table `data`: made by the library,
                     never given through tg_apply; always required */
} tg_attr_type;

typedef struct tg_attr_spec {
    const char *name; /* keyword */
    uint8_t type;     /* tg_attr_type */
    uint8_t required; /* must be given */
    uint8_t nullable; /* TG_NULL_WHOLE: `none` accepted (stored as TG_ATTR_NONE);
                         TG_NULL_ITEMS: INTS whose entries may be `none` (tg_aval.none) */
    tg_aval def;      /* value when absent and not required */
} tg_attr_spec;
#define TG_NULL_WHOLE 1
#define TG_NULL_ITEMS 2

/* ---- inference ---- */
typedef struct tg_infer {
    const struct tg_op_def *op;       /* the op */
    const tg_type *in;                /* input types */
    int nin;                          /* input count */
    tg_var *const *vars;              /* input variables when building or verifying (constant
                                         inputs can give static extents); NULL at run time */
    const tg_tensor *const *values;   /* input values known before the run (the VM's memory
                                         plan computes shape arithmetic); NULL, or entries
                                         NULL where unknown */
    const tg_aval *attrs;             /* normalized attributes */
    tg_type *out;                     /* output types to fill (TG_MAX_OUTS slots) */
    int nout;                         /* preset to op->nout; ops with nout < 0 set it */
    bool runtime;                     /* concrete types at run time */
    int depth;                        /* calls being inferred around this node (call.c) */
    const struct tg_axis_scope *axes; /* the axes of the pmaps whose bodies are being inferred
                                         around this node, innermost first; NULL: none */
    tg_status status;                 /* set by tg_infer_fail */
    char msg[512];                    /* message, without the op name (the caller adds it) */
} tg_infer;

/* One enclosing pmap axis of a node being inferred (a list through `outer`): pmap.c pushes
 * its axis while it infers its body, so that a nested pmap can refuse a name already taken
 * and the collectives whose types depend on the number of ranks (all_gather, psum_scatter)
 * find it. */
typedef struct tg_axis_scope {
    const struct tg_axis_scope *outer; /* the enclosing one, NULL at the outermost */
    const char *axis;                  /* its axis_name */
    int64_t size;                      /* its number of ranks; -1 while unknown ('?') */
} tg_axis_scope;
/* The number of ranks of the pmap axis `axis` around the node being inferred: from ic->axes,
 * else, at run time, from the SPMD frame of the rank the calling thread runs (tg_spmd_find:
 * a compiled body is typed again by each call, in its rank); -1 when unknown. */
int64_t tg_infer_axis_size(const tg_infer *ic, const char *axis);

tg_status tg_infer_fail(tg_infer *ic, tg_status st, const char *fmt, ...) TG_PRINTF(3, 4);
/* Whether input k is a 0-d integer whose value inference can use (a constant, or a value
 * known before the run); stores it in *out. */
bool tg_infer_const_int(const tg_infer *ic, int k, int64_t *out);

/* ---- reference kernels ---- */
/* Figures a kernel's run leaves for the profile (tg_kern.note, set only while profiling).
 * The ranks of a pmap add to their call's note at once (tg_spmd.note), hence atomics.
 * Today: the buckets the ranks waited for (psum_wait, src/ops/collective.c), summed over
 * the ranks of this process. */
typedef struct tg_kern_note {
    atomic_long waits;                          /* psum_waits run */
    atomic_uint_least64_t bytes;                /* the bytes of their buckets */
    atomic_uint_least64_t flight_ns, waited_ns; /* in flight; of which spent waiting */
} tg_kern_note;

/* A sub-graph executor: what a backend hands to kernels of ops with inner graphs (call,
 * pmap, scan, map), so that they run their body without knowing (or calling
 * up into) the backend: the interpreter for reference, a compiled sub-program for the VM,
 * emitted code for the C JIT (src/driver/compile.c implements it for every backend, with
 * each body compiled once per caller). On failure msg (cap bytes) holds the reason, which
 * names the place in the body. Implementations embed this struct first.
 *
 * run() runs `body` on in (one tensor per input of body) and writes its returned values
 * into out[0..nout), allocated by the caller with the run-time types of the outputs
 * (contiguous).
 *
 * run_ranks() is the SPMD run of a pmap (src/ops/pmap.c): nrank replicas of `body` at the
 * same time, each on its own thread (a virtual host device, or a thread made for the
 * pmap), rank r reading in[r * nin .. r * nin + nin) and writing its returned values into
 * out[r * nout .. r * nout + nout), any strides: the kernel passes views of the caller's
 * values (no copy in) and of slice r of its stacked outputs (no copy out). An out entry
 * NULL is a result nobody wants (out_axes=none beyond rank 0): made and dropped. While
 * rank r runs, the thread running it has the SPMD frame {axis, r, nrank} (tg_spmd_find
 * below). It returns once every rank has returned; when ranks failed, msg holds the
 * message of the lowest of them, "pmap rank R: ...". */
typedef struct tg_subexec tg_subexec;
/* run_each()'s callback: points in[0..nin) and out[0..nout) at the arguments and results
 * of iteration i, run by thread ith of the executor's threads (tg_subexec.threads). */
typedef tg_status (*tg_subexec_fill)(void *arg, int64_t i, int ith, tg_tensor **in,
                                     tg_tensor **out);
struct tg_subexec {
    tg_status (*run)(const tg_subexec *x, const tg_graph *body, tg_tensor *const *in, int nin,
                     tg_tensor **out, int nout, char *msg, size_t cap);
    /* note: the pmap's tg_kern.note, handed to its ranks' frames (tg_spmd.note) */
    tg_status (*run_ranks)(const tg_subexec *x, const tg_graph *body, const char *axis, int nrank,
                           tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                           tg_kern_note *note, char *msg, size_t cap);
    /* The threads run_each spreads iterations over (>= 1). */
    int (*threads)(const tg_subexec *x);
    /* Runs `body` n times, iterations that do not depend on each other (a map), spread over
     * the caller's thread pool: each thread takes a contiguous share of [0, n) and runs
     * iteration i on what fill(arg, i, ith, ...) sets (contiguous outputs, as run()). It
     * returns once every share has returned; on failure msg names the lowest iteration
     * that failed, "iteration I: ...". */
    tg_status (*run_each)(const tg_subexec *x, const tg_graph *body, int64_t n, int nin, int nout,
                          tg_subexec_fill fill, void *arg, char *msg, size_t cap);
    /* The object of the backend running the compiled `body` when that backend is the one
     * named `name` ("c": a tg_cj), else NULL: a backend may then run the body's code itself
     * (the C JIT's generated loops call the step's generated function). NULL: none. */
    void *(*backend)(const tg_subexec *x, const tg_graph *body, const char *name);
};

/* ---- the SPMD context of pmap ranks ----
 * While rank r of a pmap over axis `axis` runs its body, the thread running it has a
 * frame saying so: kernels that read the context (axis_index and the collectives: ops with
 * TG_EFFECT_AXIS) find the frame of the axis they name with tg_spmd_find. A
 * nested pmap's ranks get frames whose `outer` is the frame of the rank that called it, so
 * an inner rank sees every enclosing axis. The driver sets the frame around each rank's
 * call (tg_spmd_set); the kernels of ops with TG_EFFECT_AXIS run on the thread that called
 * the body (every backend runs reference kernels there), so they always see it. */
typedef struct tg_spmd tg_spmd;
struct tg_spmd {
    const tg_spmd *outer; /* the frame of the enclosing pmap's rank, NULL at the outermost */
    const char *axis;     /* the pmap's axis_name */
    int rank;             /* this replica's index along the axis, in [0, size) */
    int size;             /* the pmap's mapped extent: the number of ranks */
    void *shared;         /* one object per pmap call, the same for all its ranks, set before
                             the first rank starts and kept until the last one returns: the
                             call's communicators (tg_comm_set, src/parallel/comm.h), which
                             the collectives' kernels (src/ops/collective.c) talk through */
    tg_kern_note *note;   /* the pmap call's note for the profile; NULL when not profiling */
};
/* The frame of the innermost pmap rank the calling thread runs, NULL outside any. */
const tg_spmd *tg_spmd_current(void);
/* The innermost frame of axis `axis` around the calling thread, NULL when none. */
const tg_spmd *tg_spmd_find(const char *axis);
/* Makes s the calling thread's frame (NULL: none) and returns the previous one, which the
 * caller restores when the rank's call returns. */
const tg_spmd *tg_spmd_set(const tg_spmd *s);

typedef struct tg_kern {
    tg_ctx *ctx;             /* allocator for outputs the kernel makes itself */
    const tg_node *node;     /* the node (static types, op) */
    const tg_aval *attrs;    /* node->attrs */
    tg_tensor *const *in;    /* input values */
    int nin;                 /* count */
    tg_tensor **out;         /* outputs: preallocated (contiguous, zeroed) from out_type,
                                except for ops with .views, which set them */
    int nout;                /* count */
    const tg_type *out_type; /* run-time output types (all extents known) */
    const tg_subexec *sub;   /* the backend's sub-graph executor; NULL where there is none */
    tg_pool *pool;           /* threads the kernel may split its work over (Blockwise ops
                                split their batch, blockwise.c); NULL: the calling thread */
    tg_kern_note *note;      /* where the run's figures go while profiling; NULL otherwise */
    tg_status status;        /* set by tg_kern_fail */
    char msg[512];           /* message without the op name */
} tg_kern;

tg_status tg_kern_fail(tg_kern *k, tg_status st, const char *fmt, ...) TG_PRINTF(3, 4);

/* ---- elementwise scalar functions (reference semantics) ----
 * Floats compute in double (then round to the output dtype on store); integers and bool
 * compute in int64 and wrap to the output dtype on store. `dt` is the compute dtype. */
typedef double (*tg_sf_f64)(const double *x);
typedef int64_t (*tg_sf_i64)(const int64_t *x, tg_dtype dt);

enum {
    TG_EW_BOOL = 1u << 0,    /* accepts bool inputs */
    TG_EW_INT = 1u << 1,     /* accepts integer inputs */
    TG_EW_FLOAT = 1u << 2,   /* accepts float inputs */
    TG_EW_TOFLOAT = 1u << 3, /* integer/bool inputs are cast to a float dtype first */
    TG_EW_CMP = 1u << 4,     /* result is bool */
    TG_EW_TOF64 = 1u << 5,   /* with TOFLOAT: integer/bool inputs become f64 (true division) */
    TG_EW_BOOLI8 = 1u << 6,  /* bool inputs compute as i8 (NumPy has no bool loop: power) */
};

typedef struct tg_ew_def {
    tg_sf_f64 f;    /* float kernel (NULL if floats are not accepted) */
    tg_sf_i64 i;    /* integer/bool kernel (NULL if not accepted) */
    unsigned flags; /* TG_EW_* */
} tg_ew_def;

/* ---- gradients ----
 * A vector-Jacobian product builds graph in g: given the node and the cotangents of its
 * outputs (gout[i] NULL means zero: only multi-output ops see NULL entries), it sets
 * gin[i] to the cotangent of input i, of exactly input i's type, or leaves it NULL when no
 * gradient flows into that input (indices, conditions, integer inputs). Errors go to the
 * graph (sticky) and the status is returned. Builders of the public API may be used. */
typedef tg_status (*tg_vjp_fn)(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin);

typedef enum {
    TG_GRAD_MISSING,   /* not decided: the op-table test fails */
    TG_GRAD_VJP,       /* .vjp computes the cotangents (zeros for piecewise-constant floats) */
    TG_GRAD_NONE,      /* outputs are not differentiable (integer/bool results): nothing flows */
    TG_GRAD_UNDEFINED, /* asking for a gradient through this op is an error */
} tg_grad_kind;

typedef enum {
    TG_KIND_ELEMWISE,
    TG_KIND_REDUCE,
    TG_KIND_SHAPE,
    TG_KIND_INDEX,
    TG_KIND_LINALG,
    TG_KIND_CONSTRUCT,
    TG_KIND_OTHER,
} tg_op_kind;

/* ---- reductions as data ----
 * For each output element a reduction folds its reduced elements x_1..x_n, in C order:
 *     a = identity;  a = combine(a, x_i) for i = 1..n;  result = fin(a, n)
 * The reference kernel (.ref) stays the oracle; this description is what the fast kernels
 * (the VM, fused reductions, the C JIT) and the rewrites read, so that none of them names a
 * reduction. Float accumulators are double, rounded once at the store. The softmax family
 * carries the same data: a sum of shifted exponentials, finished per element. */
typedef enum {
    TG_RED_NONE, /* not a reduction: the zero of every other record */
    TG_RED_SUM,  /* a + v */
    TG_RED_PROD, /* a * v */
    TG_RED_MAX,  /* v where v > a: ties keep the first */
    TG_RED_MIN,  /* v where v < a */
    TG_RED_OR,   /* a || v (bool results) */
    TG_RED_AND,  /* a && v */
} tg_red_combine;

typedef enum {
    TG_FIN_NONE,        /* a */
    TG_FIN_MEAN,        /* a / n (NaN for n = 0, as NumPy) */
    TG_FIN_ARG,         /* the position among the reduced elements of the element a holds */
    TG_FIN_LOGSUMEXP,   /* sums exp(x - s): log(a) + s, s = max(x) where finite, else 0 */
    TG_FIN_SOFTMAX,     /* sums exp(x - s), s = max(x); each element: exp(x - s) / a */
    TG_FIN_LOG_SOFTMAX, /* as logsumexp; each element: (x - s) - log(a) */
} tg_red_fin;

typedef struct tg_reduce_def {
    uint8_t combine;  /* tg_red_combine; TG_RED_NONE: the op is not a reduction */
    uint8_t fin;      /* tg_red_fin */
    uint8_t nan_wins; /* the first NaN met is the result and stays (NumPy's max, min and
                         their arg forms); otherwise NaN flows through the arithmetic */
    uint8_t nonempty; /* no identity to return: an empty reduced axis is an error */
    double identity;  /* where a starts, as in the reference kernel: combine(identity, v)
                         is v (up to a zero's sign: a sum of -0.0 alone is +0.0) */
} tg_reduce_def;

/* The axes a reduction (or the softmax family) reduces, from its normalized attributes:
 * attrs[0] is `axis` (none: every axis; an int or a list, negative counting from the end),
 * attrs[1] `keepdims` where the op's schema has it (nattrs > 1). */
typedef struct tg_axes {
    bool red[TG_MAX_DIMS]; /* axis d of the input is reduced (false from ndim on) */
    uint32_t mask;         /* the same as bits */
    int nred;              /* reduced axes */
    bool keep;             /* keepdims: the reduced axes stay as static 1s */
} tg_axes;
/* Decodes the reduced axes of a rank-ndim input into ax. false on an axis out of range or
 * repeated, with the message in err (n bytes; err may be NULL). */
bool tg_reduce_axes(const tg_aval *attrs, int nattrs, int ndim, tg_axes *ax, char *err, size_t n);

/* ---- the BLAS call a lowered op is (src/ops/blas.c) ---- */
typedef enum {
    TG_BLAS_NONE, /* not a lowered BLAS form */
    TG_BLAS_GEMM, /* gemm(C, A, B, ...): C[M,N] from A[M,K] @ B[K,N] */
    TG_BLAS_GEMV, /* gemv(y, A, x, ...): y[M] from A[M,K] @ x[K] */
    TG_BLAS_GER,  /* ger(A, x, y, ...): A[M,N] from outer(x[M], y[N]) */
} tg_blas_form;

/* ---- effects: what rewrites must not do with an op's nodes ----
 * Zero for a pure op, whose outputs depend on nothing but its inputs and attributes (the
 * random ops are pure: their state is an explicit key). */
enum {
    /* never constant-folded: the kernel needs what only a run has (a call's body runs
     * through the backend's sub-graph executor) */
    TG_EFFECT_NOFOLD = 1u << 0,
    /* side effects or state outside the inputs (collectives, which talk to other devices):
     * never folded, never merged with an equal node */
    TG_EFFECT_STATE = 1u << 1,
    /* reads the SPMD context of the pmap axis its string attribute `axis_name` names
     * (axis_index; the collectives): never folded; valid only inside a pmap of that axis,
     * which compiling checks (tg_pmap_check_axes) and the kernel checks again */
    TG_EFFECT_AXIS = 1u << 2,
};

/* ---- SPMD typing: how an op's result varies over the pmap axis it reads ----
 * Every value of a pmap body is varying or invariant over each named axis (docs/pmap.md,
 * "Typing"): what any op makes varies where one of its inputs does; the ops reading an
 * axis (TG_EFFECT_AXIS) say instead what their result is over that axis. A collective
 * takes its input as varying (an invariant input counts once per rank); the gradient walk
 * sums over the axis the cotangent an invariant value gets from a varying use. */
typedef enum {
    TG_SPMD_NONE,      /* the result varies where an input does (every op not reading an axis) */
    TG_SPMD_INVARIANT, /* the same on every rank of the axis (psum, pmean, pmax, pmin) */
    TG_SPMD_VARYING,   /* varies over the axis (all_gather, psum_scatter, ppermute, axis_index) */
} tg_spmd_kind;

/* ---- batching: how an op maps over a batch axis (vectorize, src/ops/vectorize.c) ----
 * vectorize rewrites a function written over core shapes into the graph over a batch: every
 * value of the body is either unbatched (as in the body) or batched, with the batch axis in
 * front of its core axes. A node none of whose inputs is batched is made again as it is. For
 * the others the rule is read from the record, in this order: the hook `batch` when set;
 * elementwise ops broadcast (a batched input's core rank is padded with axes of 1 after the
 * batch axis); ops with a `signature` apply to batched inputs as they are (the batch is one
 * more leading batch dimension); ops with an `axis` attribute (reductions, the softmax
 * family, cumulative, sorting and joining ops) shift it past the batch axis, every input
 * batched. An op none of these covers is refused by name.
 *
 * A hook builds in b's graph the batched form of node n (of the body) from in[0..n->nin),
 * each batched or not as batched[k] says (at least one is), into out[0..n->nout), and says
 * in out_batched[k] (preset true) whether output k is batched. Errors go to the graph. */
typedef struct tg_batch tg_batch;
typedef tg_status (*tg_batch_fn)(tg_batch *b, const tg_node *n, tg_var *const *in,
                                 const bool *batched, tg_var **out, bool *out_batched);

/* ---- scheduling: the half of a split collective that the program order moves ----
 * The program order (tg_ir_schedule, src/ir/schedule.c) runs the nodes of TG_SCHED_EARLY
 * ops as soon as their inputs exist, and those of TG_SCHED_LATE ops just before their
 * result is first used, so that what runs between them overlaps the exchange they start
 * and finish (psum_start, psum_wait). */
typedef enum {
    TG_SCHED_ANY,   /* wherever the topological order puts it */
    TG_SCHED_EARLY, /* starts something: as early as its inputs allow */
    TG_SCHED_LATE,  /* waits for something: as late as its users allow */
} tg_sched_kind;

/* ---- the record ---- */
typedef struct tg_op_def {
    const char *name;          /* .tg name */
    int8_t min_in, max_in;     /* arity; max_in < 0: variadic */
    int8_t nout;               /* outputs; < 0: decided by infer */
    uint8_t kind;              /* tg_op_kind */
    const tg_attr_spec *attrs; /* schema */
    int nattrs;                /* its length */
    /* Chooses the dtype each input is converted to before inference (NEP 50); weak
     * literals adopt it, other inputs get a cast node. NULL: inputs kept as they are. */
    tg_status (*promote)(tg_infer *ic, tg_dtype *want);
    tg_status (*infer)(tg_infer *ic); /* output types; errors via tg_infer_fail */
    tg_status (*ref)(tg_kern *k);     /* reference kernel */
    tg_ew_def ew;                     /* elementwise ops: scalar functions */
    /* Elementwise ops: one scalar C expression per compute dtype (the output's dtype; the
     * inputs' common dtype for comparisons), data for the C JIT (src/backend/cjit), which
     * writes the loops. %0..%2 stand for the operands (C values of their own dtypes:
     * bool as uint8_t 0/1), %T for the C type of the result; helpers are tg_rt_* of
     * cjit's tg_rt.h. NULL where the op has none for that dtype: the JIT then calls the
     * library's kernel. The expression must compute what the scalar functions compute. */
    const char *c_expr[TG_DT_COUNT];
    uint32_t views;    /* bit i: output 0 may alias input i (kernel makes it) */
    uint32_t destroys; /* bit i: output 0 may overwrite input i (in place) */
    /* Ops with several outputs that do not each depend on every input (fused): sets
     * reads[i] (nin entries, false on entry) for each input i that output k of a node with
     * these attributes depends on. NULL: every output depends on every input. Walks that
     * follow values rather than nodes ask it (which outputs of a pmap body vary over its
     * axis, src/ops/pmap.c). Returns TG_OK, or TG_ENOMEM. */
    tg_status (*out_reads)(const tg_aval *attrs, int nin, int k, bool *reads);
    /* The kernel creates its outputs itself: their extents depend on input values
     * (arange from tensors, boolean masks), so run-time inference may leave -1. */
    uint8_t self_alloc;
    uint8_t grad;  /* tg_grad_kind */
    tg_vjp_fn vjp; /* with TG_GRAD_VJP */
    /* With TG_GRAD_VJP: bit i set where the derivative with respect to input i has no
     * formula tgraph implements (gammainc's shape parameter): a gradient asked through that
     * input is an error naming it, while the other inputs differentiate as usual. */
    uint32_t grad_undefined;
    tg_reduce_def reduce;     /* reductions and the softmax family: the computation as data */
    uint8_t blas;             /* tg_blas_form: the BLAS call a lowered op is */
    uint8_t effects;          /* TG_EFFECT_* bits (0: pure) */
    uint8_t spmd;             /* tg_spmd_kind over the axis read (with TG_EFFECT_AXIS) */
    uint8_t sched;            /* tg_sched_kind: where the program order places its nodes */
    const tg_opdata_vt *data; /* the table of the op data its TG_AS_DATA attributes hold */
    /* Core ops (Blockwise): the core signature in NumPy's gufunc notation, one group per
     * input and output, "(m,n),(n,k)->(m,k)". Inputs may carry leading batch dimensions
     * in front of their core dimensions; the op runs once per block of the broadcast batch.
     * NULL: not a core op. */
    const char *signature;
    /* Core ops whose computation of one block is a function of its own (the LAPACK ops):
     * operands of exactly their core shapes; when it succeeds it has written every element
     * of its outputs (they need not be zeroed first). The reference kernel runs it
     * over the batch (tg_bw_ref); fused programs call it per block (vm_fcore.c), with no
     * signature to read each time. NULL: .ref only. */
    tg_status (*core)(tg_kern *k);
    tg_batch_fn batch; /* its own batching rule (above); NULL: derived from the record */
} tg_op_def;

/* ---- composite ops: names built as graphs of other ops ----
 * An op that is a short composition of others (relu is maximum(x, 0), moveaxis a
 * transpose, einsum transposes, reshapes, products and sums) is a composite: tg_apply
 * by its name runs `build`, which applies the ops it is made of, and no node of the
 * composite itself exists, so rewrites, backends and gradients see only the ops it made.
 * Attributes are normalized to the schema as an op's are; `build` sets out[0..*nout)
 * (room for TG_MAX_OUTS) and reports errors to g, prefixed with its name. */
typedef tg_status (*tg_composite_fn)(tg_graph *g, tg_var *const *in, int nin, const tg_aval *attrs,
                                     tg_var **out, int *nout);
typedef struct tg_composite_def {
    const char *name;          /* .tg name */
    int8_t min_in, max_in;     /* arity; max_in < 0: variadic */
    const tg_attr_spec *attrs; /* schema */
    int nattrs;                /* its length */
    tg_composite_fn build;     /* the graph it is */
} tg_composite_def;

/* Composite by .tg name (src/ops/composite.c); NULL when none has it. */
const tg_composite_def *tg_composite_lookup(const char *name);

/* Normalizes user attributes to a schema (defaults filled in, kinds converted); `name` prefixes
 * the messages, `data` describes TG_AS_DATA attributes (NULL when the schema has none). NULL on
 * error (recorded in g). */
tg_aval *tg_ir_attrs_normalize(tg_graph *g, const char *name, const tg_attr_spec *spec, int nspec,
                               const tg_opdata_vt *data, const tg_attr *attrs, int nattrs);

/* The reductions with one double accumulator per output element and at most a division by
 * the count to finish (sum prod mean max min): what fused nodes may reduce (fused.h) and
 * what their blockwise and compiled kernels implement. */
static inline bool tg_reduce_plain(const tg_op_def *op) {
    const tg_reduce_def *r = &op->reduce;
    return r->combine >= TG_RED_SUM && r->combine <= TG_RED_MIN &&
           (r->fin == TG_FIN_NONE || r->fin == TG_FIN_MEAN);
}
/* Whether rewrites may evaluate a node of op at compile time (constant folding). */
static inline bool tg_op_foldable(const tg_op_def *op) {
    return !(op->effects & (TG_EFFECT_NOFOLD | TG_EFFECT_STATE | TG_EFFECT_AXIS));
}
/* Whether rewrites may merge two equal nodes of op (same inputs and attributes). */
static inline bool tg_op_mergeable(const tg_op_def *op) { return !(op->effects & TG_EFFECT_STATE); }

/* The pmap axis a node of an op with TG_EFFECT_AXIS reads: its `axis_name` attribute. NULL
 * for other ops. */
static inline const char *tg_op_axis_name(const tg_op_def *op, const tg_aval *attrs) {
    if (!(op->effects & TG_EFFECT_AXIS)) return NULL;
    for (int j = 0; j < op->nattrs; j++)
        if (op->attrs[j].type == TG_AS_STR && strcmp(op->attrs[j].name, "axis_name") == 0)
            return attrs[j].s;
    return NULL;
}

/* Op by .tg name; -1 when unknown. */
int tg_op_lookup(const char *name);

/* The records, indexed by op (src/ops/table.c): tg_op_count of them. */
extern const tg_op_def *const tg_op_table[];
extern const int tg_op_count;
/* The op the builder inserts to convert an input to the dtype promotion asks for. */
extern const int tg_op_cast_id;

#endif
