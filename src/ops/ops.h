/* ops.h - private header of src/ops: the records of the ops (the interface they implement,
 * tg_op_def, is declared at the IR level, src/ir/op.h), running one node, and helpers
 * shared by the op families.
 *
 * Every op is one `const tg_op_def` record in its family's file, listed once in oplist.h.
 * Nothing about an op lives outside its record: no switch over ops grows elsewhere.
 * Inference serves both compile time (static types with '?') and run time (concrete
 * types, where `nobcast` marks extents of 1 that came from '?').
 */
#ifndef TG_OPS_H
#define TG_OPS_H

#include "../ir/op.h"
#include "oplist.h"

/* Runs node n's reference kernel on vin, with outputs of run-time types tout: new zeroed
 * tensors in vout, or the kernel's own for views and self-allocating ops. On failure vout
 * holds nothing and msg (cap bytes) the kernel's message, without the node's place. pool:
 * the threads the kernel may split its work over (tg_kern.pool; NULL: the caller's alone). */
tg_status tg_kern_run(tg_ctx *ctx, const struct tg_node *n, tg_tensor *const *vin,
                      const tg_type *tout, tg_tensor **vout, const tg_subexec *sub, tg_pool *pool,
                      char *msg, size_t cap);
/* Runs node n's reference kernel into the outputs vout as they are (allocated by the
 * caller, or NULL for views and self-allocating ops, which the kernel makes). note: where
 * the kernel leaves figures for the profile (tg_kern.note), NULL when not profiling. On
 * failure msg holds the kernel's message; the outputs are left to the caller. */
tg_status tg_kern_call(tg_ctx *ctx, const struct tg_node *n, tg_tensor *const *vin,
                       const tg_type *tout, tg_tensor **vout, const tg_subexec *sub, tg_pool *pool,
                       tg_kern_note *note, char *msg, size_t cap);
/* Infers node n's run-time output types tout (TG_MAX_OUTS slots) from input types tin and
 * the input values known before the run (values: NULL, or entries NULL where unknown).
 * On failure msg holds the op's message. */
tg_status tg_node_infer(const struct tg_node *n, const tg_type *tin, const tg_tensor *const *values,
                        tg_type *tout, char *msg, size_t cap);

/* Evaluates node n of g on the values in (one per input, any strides) as a call of a
 * compiled function would: run-time inference, then the op's reference kernel (with the
 * sub-graph executor sub, which may be NULL). out[0..nout) receive new tensors the caller
 * frees (views may share memory with in); on failure none, and tg_last_error() names the
 * node's place. Constant folding uses it, so a folded value is the value a run computes. */
tg_status tg_node_eval(tg_ctx *ctx, const tg_graph *g, const tg_node *n, tg_tensor *const *in,
                       const tg_subexec *sub, tg_tensor **out);

#define TG_X_DECL(U, l) extern const tg_op_def tg_op_##l;
TG_OPS(TG_X_DECL)
#undef TG_X_DECL

extern const tg_op_def *const tg_op_table[TG_OP_COUNT]; /* ir/op.h */
/* ---- helpers shared by the families (ops_util.c) ---- */
/* NEP 50 promotion of n types (weak ones adopt the strong category). Errors for
 * an integer literal out of range of the integer dtype it meets are raised when
 * the literal is converted, not here. */
tg_dtype tg_promote_types(const tg_type *const *t, int n);
/* NumPy broadcasting with the '?' rules of DESIGN.md; false with a message in ic. */
bool tg_broadcast_types(tg_infer *ic, const tg_type *const *t, int n, tg_type *out);
/* Normalizes an axis (negative counts from the end) into [0, ndim); false if out of range. */
bool tg_axis_norm(int64_t axis, int ndim, int *out);
/* Standard elementwise promote/infer/ref used by most elementwise records. */
tg_status tg_ew_promote(tg_infer *ic, tg_dtype *want);
tg_status tg_ew_infer(tg_infer *ic);
tg_status tg_ew_ref(tg_kern *k);

/* ---- lines: the elements of a tensor along one axis (cumulative.c, sort.c) ----
 * Ops that work on one axis at a time (cumulative sums, sorts) see a tensor as lines: the
 * elements along `axis` at each position of the other axes, or, with axis < 0, all of it
 * flattened in C order (NumPy's axis=None). Element j of a line is at p + j * step bytes,
 * except for a flattened tensor whose strides do not collapse into one (a transposed or
 * sliced view), whose elements are found from their C-order position (`gather`). */
typedef struct tg_line {
    const tg_tensor *t; /* the tensor */
    char *p;            /* element 0 (when not gather) */
    int64_t step;       /* bytes from one element to the next (when not gather) */
    int64_t n;          /* elements */
    bool gather;        /* element j is t's element j in C order, found by unflattening j */
} tg_line;
/* The line of t along axis (< 0: t flattened) through position o of the other axes
 * (o[axis] is ignored; o is unused when axis < 0). */
void tg_line_get(const tg_tensor *t, int axis, const int64_t *o, tg_line *l);
char *tg_line_gather_at(const tg_line *l, int64_t j);
static inline char *tg_line_at(const tg_line *l, int64_t j) {
    return l->gather ? tg_line_gather_at(l, j) : l->p + j * l->step;
}
/* The positions of t's lines: outer = t's shape with extent 1 at axis (*nd = t->ndim; 0
 * when axis < 0: one line), walked with tg_index_next(*nd, outer, o) from o = 0. Returns
 * the number of lines (0 when another axis is empty). */
int64_t tg_lines_outer(const tg_tensor *t, int axis, int64_t *outer, int *nd);
/* Runs fn(&lx, &ly, ctx) on each pair of lines of x and y along axis (attrs[0] of a kernel
 * whose one input x and output y share their other extents): the kernel of an op that maps
 * each line of x to a line of y (cumulative ops, sort). Fails when the axis attribute is
 * out of bounds for x. */
tg_status tg_lines_map(tg_kern *k, void (*fn)(const tg_line *lx, const tg_line *ly, void *ctx),
                       void *ctx);
/* The type of x flattened (np.ravel) with dtype dt: one extent, the product of x's ('?' when
 * one is '?' and none is 0), nobcast when it is a 1 that came from a '?'. false when the
 * product does not fit in int64. */
bool tg_type_flat(const tg_type *x, tg_dtype dt, tg_type *o);
/* The `axis` attribute a of an op along one axis of an ndim-d input or along it flattened
 * (none): *out gets the axis normalized, or -1 for none; false when it is out of range. */
bool tg_axis_attr(const tg_aval *a, int ndim, int *out);
/* The inference failure of the axis attribute `axis` out of range of x. */
tg_status tg_axis_fail(tg_infer *ic, int64_t axis, const tg_type *x);
/* The result of an op along the axis of its attribute 0 (tg_axis_attr): input 0's type
 * with dtype dt, or input 0 flattened (np.ravel) when the axis is none. */
tg_status tg_infer_along(tg_infer *ic, tg_dtype dt);

/* ---- tiny helpers shared by the families ---- */
/* The int64 whose bits are u (two's complement wrap-around without undefined behaviour). */
static inline int64_t tg_ops_wrap_i64(uint64_t u) {
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(UINT64_MAX - u) - 1;
}
/* Threefry-2x32 with 20 rounds (random.c): the block of counter ctr under key (word 0 is
 * the high word of the 64-bit key and counter of the random ops). */
void tg_threefry2x32(const uint32_t key[2], const uint32_t ctr[2], uint32_t out[2]);
/* Whether input i of node n is a float value (only those carry gradients). */
static inline bool tg_ops_float_in(const tg_node *n, int i) {
    return tg_dtype_is_float((tg_dtype)n->in[i]->type.dtype);
}

/* ---- helpers for vector-Jacobian products (vjp_util.c, shape.c) ----
 * Sums g over the axes along which a value of type `to` was broadcast to g's shape
 * (leading axes, and static-1 axes of `to`), giving exactly type `to`'s shape. */
tg_var *tg_grad_unbroadcast(tg_graph *g, tg_var *grad, const tg_type *to);
/* Zeros of v's type (extents from shape(v) where they are '?'). */
tg_var *tg_grad_zeros_like(tg_graph *g, tg_var *v);
/* Shape helpers for the VJPs of every family (shape.c). Extents are 0-d i64 values: a
 * literal where the extent is static, shape(v)[i] where it is '?'. */
bool tg_grad_dims(tg_graph *g, tg_var *v, tg_var **dims); /* v->type.ndim of them */
tg_var *tg_grad_reshape(tg_graph *g, tg_var *x, int ndim, tg_var *const *dims);
tg_var *tg_grad_reshape_like(tg_graph *g, tg_var *x, tg_var *like);   /* x with like's shape */
tg_var *tg_grad_broadcast_like(tg_graph *g, tg_var *v, tg_var *like); /* v broadcast to it */
/* a * b for 0-d i64 extents, folded to a literal when both are static (vjp_util.c). */
tg_var *tg_grad_mul_extents(tg_graph *g, tg_var *a, tg_var *b);
/* The cotangent x gets from take_along(x, ind, axis) (axis < 0: none, x flattened) whose
 * result has the cotangent cot: zeros of x's type with cot added at the gathered places,
 * repeated indices accumulating (vjp_util.c). */
tg_var *tg_grad_put_along(tg_graph *g, tg_var *x, tg_var *ind, int axis, tg_var *cot);
/* The name of the parameter of a backward function (fn_vjp, built from fn's body) that
 * takes the cotangent of fn's output j: ct<j>, with '_' appended until no parameter of fn
 * has it (vjp_util.c). */
void tg_grad_cot_name(const tg_graph *fn, int j, char *name, size_t cap);

/* The builder of the einsum composite (einsum.c; its record is in composite.c). */
tg_status tg_einsum_build(tg_graph *g, tg_var *const *in, int nin, const tg_aval *attrs,
                          tg_var **out, int *nout);

/* ---- messages about functions (ops_util.c) ----
 * " (f.tg:3:1)": where the function's `func` header is, for messages of the ops that run
 * a function (call, pmap, scan, vectorize); empty for a function built in C. */
void tg_fn_place(const tg_graph *fn, char *buf, size_t cap);
/* " 'xs'" when input k of the node being inferred has a name (at build time), else "";
 * returns buf. */
const char *tg_infer_in_name(const tg_infer *ic, int k, char *buf, size_t cap);

/* ---- calls (call.c) ----
 * Output types of `body` called on arguments of types tin (one per input of body; values:
 * NULL, or per input the value known before the run), as the call's inference gives them:
 * the body's nodes are inferred again on these types. runtime: concrete types. On failure
 * ic holds the message (naming the node of the body). */
tg_status tg_call_types(tg_infer *ic, const tg_graph *body, const tg_type *tin,
                        const tg_tensor *const *values, tg_type *out);

/* ---- scan and map (scan.c; docs/scan.md) ---- */
#define TG_LOOP_TAPS_MAX 16 /* most taps of the first state */
/* A scan or map node's loop, decoded from its attributes and input count. The inputs are
 * the nstate states, the nseq sequences, the nconst constants, then the count (dyn). The
 * step takes nparam arguments: the taps of state 0 and the other states, one row of each
 * sequence, the constants; it returns nstate new states, ny per-step outputs, then the
 * stop condition (until). The node returns the last states, the stacked outputs, then
 * the stacks of the saved states. */
typedef struct tg_loop {
    const struct tg_graph *body;
    bool map;                       /* a map node */
    int64_t nstate_attr, nseq_attr; /* n_states, n_sequences as given */
    int nstate, nseq, nconst;       /* input groups (counts clamped to the inputs) */
    int ntap, depth;                /* taps of state 0 (1 and 1 without `taps=`) */
    int64_t taps[TG_LOOP_TAPS_MAX]; /* as written, negative */
    bool tapped;                    /* `taps=` given: state 0's initial value has a leading axis */
    bool nsteps_given;              /* n_steps= given, with the value nsteps_attr */
    int64_t nsteps_attr;
    int64_t nsteps;           /* n_steps, -1 when absent or negative */
    bool dyn, until, reverse; /* count input; stop condition; direction */
    const tg_aval *save;      /* `save`, NULL when absent */
    int nparam;               /* parameters the step takes */
    int ny;                   /* per-step outputs */
} tg_loop;
/* Decodes the loop of a node of op (scan or map) with attributes a and nin inputs. */
void tg_loop_get(const tg_op_def *op, const tg_aval *a, int nin, tg_loop *l);
/* The parameter of the step that input i (not the count) feeds first. */
static inline int tg_loop_param(const tg_loop *l, int i) {
    return l->nstate > 0 && i > 0 ? i + l->ntap - 1 : i;
}
/* t without its axis 0: the type of one row. */
static inline tg_type tg_loop_row_type(const tg_type *t) {
    tg_type s = *t;
    s.ndim = (uint8_t)(t->ndim - 1);
    s.nobcast = (uint16_t)(t->nobcast >> 1);
    for (int d = 1; d < t->ndim; d++) s.shape[d - 1] = t->shape[d];
    return s;
}
/* What a run of loop node n holds, in bytes, from its results' concrete types out: the
 * stacked per-step outputs, the stacks of states saved for the gradient (save=), and the
 * buffers of the carried states (two per state, a tapped state's ring of depth + 1 rows;
 * none for a saved state, whose rows are its buffers). The profile reports them. */
enum { TG_LOOP_MEM_STACKS, TG_LOOP_MEM_SAVED, TG_LOOP_MEM_STATES, TG_LOOP_MEM_N };
void tg_loop_memory(const tg_node *n, const tg_type *const *out, uint64_t *mem);
/* The gradient of scan and map: a reverse scan of the step's backward function
 * (scan_grad.c). */
tg_status tg_scan_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin);

/* ---- pmap (pmap.c) ----
 * Checks that every op of g reading a pmap axis (TG_EFFECT_AXIS: axis_index, the
 * collectives), among its live nodes and in the graphs they call or map, is inside a pmap
 * of that axis: what compiling an entry function requires. A body used only by pmap is so
 * checked in its pmap's context. TG_OK, or TG_EINVAL with the error set, naming the first
 * such node's place (and its function when it is not g). */
tg_status tg_pmap_check_axes(const tg_graph *g);
/* The axes g reads without binding them, as tg_pmap_check_axes finds them, each once: at
 * most cap names into names (borrowed from g's nodes and the graphs they call or map).
 * Returns how many there are (possibly more than cap), -1 when out of memory. */
int tg_pmap_free_axes(const tg_graph *g, const char **names, int cap);
/* The same for one node: the axis it reads (an op with TG_EFFECT_AXIS) and those the graphs
 * it calls or maps read, less the axis a pmap binds for its body. names borrowed from the
 * nodes; ctx for the walk's memory. */
int tg_pmap_node_axes(tg_ctx *ctx, const tg_node *n, const char **names, int cap);
/* Which values of g vary over `axis` (docs/pmap.md, "Typing"), into *vary (ctx memory, one
 * bool per var id, g->vars.n + 1 entries): parameter i varies when mapped[i] (mapped NULL:
 * as g's declaration of that axis says, tg_graph_set_mapped, else every parameter varies);
 * constants do not; a node reading the axis makes what its record's spmd kind says; any
 * other node's outputs vary when an input does or when a graph it calls or maps reads the
 * axis. order: the nodes to type, inputs first (NULL: those the outputs reach). TG_OK or
 * TG_ENOMEM. */
tg_status tg_spmd_varying(tg_ctx *ctx, const tg_graph *g, const char *axis, const bool *mapped,
                          tg_node *const *order, int norder, bool **vary);
/* The same for more nodes (order: inputs first), into an array vary already holding the
 * types of the values they read and room for those they make. */
tg_status tg_spmd_varying_more(tg_ctx *ctx, const char *axis, tg_node *const *order, int norder,
                               bool *vary);

/* ---- batching (vectorize.c): the state of a vectorize and what rules share ----
 * A batched value has its batch axis in front of its core axes (op.h, "batching"). */
struct tg_batch {
    tg_graph *g;        /* where the batched graph is built */
    int64_t size;       /* the batch extent, -1 when '?' */
    tg_var *src;        /* a batched value whose axis 0 is the batch (for a '?' extent) */
    tg_var *extent;     /* the extent as a 0-d i64 value, made on first use */
    const tg_graph *fn; /* the body being batched (messages) */
    int depth;          /* bodies being batched (calls inside the body) */
};
/* The batch extent as a 0-d i64 (a literal when static). */
tg_var *tg_batch_extent(tg_batch *b);
/* Batched x with axes of 1 inserted after the batch axis up to ncore core axes. */
tg_var *tg_batch_pad(tg_batch *b, tg_var *x, int ncore);
/* Unbatched x broadcast over the batch (batched). */
tg_var *tg_batch_spread(tg_batch *b, tg_var *x);
/* Batched x reshaped to [batch, core size] (core extents static). */
tg_var *tg_batch_flatten(tg_batch *b, tg_var *x);
/* Node n's op made on in with attrs (normalized), outputs into out (NULL: not wanted);
 * returns the first output, NULL on error. */
tg_var *tg_batch_make(tg_batch *b, const tg_node *n, tg_var *const *in, const tg_aval *attrs,
                      tg_var **out);
/* The error for node n of the body that cannot be batched: "vectorize: OP at PLACE in F: why". */
tg_status tg_batch_refuse(tg_batch *b, const tg_node *n, const char *why);
/* Rules records may name: along the attribute `axis` (what records with one get, every
 * input batched), and as it is (ops that already map over leading axes or work per
 * element: tril, triu, psum). */
tg_status tg_batch_axis(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                        tg_var **out, bool *out_batched);
tg_status tg_batch_leading(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                           tg_var **out, bool *out_batched);
/* The refusal, for a record whose derived rule would be wrong (categorical: its `axis` is
 * not all that a batch changes). */
tg_status tg_batch_none(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                        tg_var **out, bool *out_batched);
/* Batches the body of fn on args (batched[i]: args[i] is batched) into outs, saying which
 * are batched in out_batched: what vectorize does, and a call inside a body. */
tg_status tg_batch_body(tg_batch *b, const tg_graph *fn, tg_var *const *args, const bool *batched,
                        tg_var **outs, bool *out_batched);

/* ---- slice (shape.c): the parser builds slice nodes, the printer prints them back ----
 * Attribute order of tg_op_slice's schema: four int lists of one length n <= ndim. A
 * `none` entry of starts, stops or steps (tg_aval.none) is an omitted bound or step; every
 * integer is a value. index[i] == 1 makes axis i `x[starts[i]]`. */
enum { TG_SLICE_A_STARTS, TG_SLICE_A_STOPS, TG_SLICE_A_STEPS, TG_SLICE_A_INDEX };
/* Writes the index expression of normalized slice attributes, "[1:, ::-1, 0]", into buf
 * (cap bytes). false (buf "") when the attributes are malformed or buf is too small. */
bool tg_slice_format(const tg_aval *attrs, char *buf, size_t cap);
/* The slice attributes a (slice, set_subtensor, inc_subtensor) with a whole-axis entry in
 * front, for a batch axis (vectorize): into out[0..4), the lists kept in buf. */
typedef struct tg_slice_front {
    int64_t ints[4][TG_MAX_DIMS + 1];
    bool none[4][TG_MAX_DIMS + 1];
} tg_slice_front;
void tg_slice_batch_attrs(const tg_aval *a, tg_aval *out, tg_slice_front *buf);

#endif
