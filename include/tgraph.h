/* tgraph.h - the public C API of tgraph, a symbolic tensor compiler.
 *
 * Everything is reached through opaque handles. Functions that can fail return a
 * tg_status (or NULL) and leave a one-line message in tg_last_error(). Pointers the
 * library returns are borrowed unless the function name says _new or _dup.
 * Graph builders are sticky: after the first error in a graph every builder returns
 * NULL and the first message is kept (tg_graph_status / tg_graph_error).
 * Bad arguments (NULL handles, NULL arrays with positive counts, negative counts or
 * ranks, out-of-range enums) give TG_EINVAL and a message naming the function; accessors
 * return NULL, -1, TG_DT_COUNT, false or NaN instead (docs/c-api.md).
 * Order of frees (docs/c-api.md): functions, then the pools they share and the graphs or
 * modules they were compiled from, then tensors; the context last.
 */
#ifndef TGRAPH_H
#define TGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* TG_API marks the exported functions. The library is compiled with hidden visibility
 * and TG_BUILDING_LIBRARY defined, so libtgraph.so exports what this header declares and
 * nothing else (docs/c-api.md, "ABI"); for a program including the header it is extern. */
#if defined(TG_BUILDING_LIBRARY) && defined(__GNUC__)
#define TG_API extern __attribute__((visibility("default")))
#else
#define TG_API extern
#endif
#define TG_VERSION  "0.3.0"
#define TG_MAX_DIMS 8 /* most dimensions a tensor or type may have */

/* Versioned structs (docs/c-api.md, "ABI"): the option and report structs passed by
 * pointer (tg_compile_opts, tg_optimize_opts, tg_grad_check_opts, tg_grad_check_report)
 * start with `size_t size`, the sizeof of the struct the caller was compiled with, so that
 * later versions can add fields at the end without breaking compiled programs. Each has a
 * macro that sets it and takes the other fields as designated initializers:
 *     tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_C, .nthreads = 1);
 *     tg_graph_compile(g, &TG_COMPILE_OPTS(.no_blas = true), &f);
 * The library reads (for a report, writes) only the fields that fit in `size`, taking a
 * field past it as zero, its default. A size of 0 (a struct set up without its macro) or
 * one too small for any version is TG_EINVAL, naming the struct; a size past the library's
 * own (a program built with a newer tgraph.h) is accepted when every field this library
 * does not know is zero, TG_EUNSUPPORTED otherwise. An opts pointer may still be NULL: every
 * field at its default. */

/* ---- status codes --------------------------------------------------------------- */
#define TG_STATUS_LIST(X)                                                                          \
    X(OK, "ok")                                                                                    \
    X(ENOMEM, "out of memory")                                                                     \
    X(EINVAL, "invalid argument")                                                                  \
    X(ESHAPE, "incompatible shapes")                                                               \
    X(ETYPE, "incompatible dtypes")                                                                \
    X(ESYNTAX, "syntax error")                                                                     \
    X(ENAME, "unknown name")                                                                       \
    X(EIO, "cannot read or write")                                                                 \
    X(EFORMAT, "malformed file")                                                                   \
    X(EINDEX, "index out of range")                                                                \
    X(EUNSUPPORTED, "not supported")                                                               \
    X(ELIMIT, "limit exceeded")                                                                    \
    X(ECHECK, "check failed")                                                                      \
    X(EINTERNAL, "internal error")
#define TG_X_STATUS(name, msg) TG_##name,
typedef enum { TG_STATUS_LIST(TG_X_STATUS) TG_STATUS_COUNT } tg_status;
#undef TG_X_STATUS

TG_API const char *tg_status_str(tg_status s); /* static text for a code */
TG_API const char *tg_last_error(void);        /* this thread's last message ("" if none) */

/* ---- dtypes --------------------------------------------------------------------- */
#define TG_DTYPE_LIST(X)                                                                           \
    X(BOOL, bool, "bool", 1)                                                                       \
    X(I8, int8_t, "i8", 1)                                                                         \
    X(I16, int16_t, "i16", 2)                                                                      \
    X(I32, int32_t, "i32", 4)                                                                      \
    X(I64, int64_t, "i64", 8)                                                                      \
    X(U8, uint8_t, "u8", 1)                                                                        \
    X(F32, float, "f32", 4)                                                                        \
    X(F64, double, "f64", 8)
#define TG_X_DTYPE(U, ct, s, sz) TG_DT_##U,
typedef enum { TG_DTYPE_LIST(TG_X_DTYPE) TG_DT_COUNT } tg_dtype;
#undef TG_X_DTYPE

TG_API const char *tg_dtype_name(tg_dtype dt);               /* "f32" */
TG_API size_t tg_dtype_size(tg_dtype dt);                    /* bytes per element */
TG_API bool tg_dtype_parse(const char *name, tg_dtype *out); /* "f32", "float32", ... */
TG_API bool tg_dtype_is_float(tg_dtype dt);
TG_API bool tg_dtype_is_int(tg_dtype dt); /* signed or unsigned, not bool */

/* ---- context: allocator hook ---------------------------------------------------- */
/* How calls into the BLAS and LAPACK library from several threads at once are kept safe,
 * in one line (docs/hardening.md, "Address-space limits and BLAS threads"): a thread-safe
 * library; OpenBLAS's serial build with its buffer table locked by libtgraph (products
 * split over threads); or its calls serialized, where that lock could not be put in place
 * (no product is split). Decided once per process by a probe product (a 160^3 dgemm),
 * at the first compile of a function with BLAS work, BLAS call or call of this. */
TG_API const char *tg_blas_guard(void);

/* Lua-style allocator: nsize == 0 frees ptr (returns NULL); otherwise (re)allocates.
 * Returning NULL for nsize > 0 is an allocation failure, which tgraph reports. */
typedef void *(*tg_alloc_fn)(void *ud, void *ptr, size_t osize, size_t nsize);
typedef struct tg_ctx tg_ctx;
TG_API tg_ctx *tg_ctx_new(tg_alloc_fn alloc, void *ud); /* alloc NULL: malloc/free */
TG_API void tg_ctx_free(tg_ctx *ctx); /* last: frees only the context, not what it allocated */
TG_API tg_ctx *tg_ctx_default(void);  /* process-wide context with the default allocator */
/* Memory cap (docs/hardening.md): a context made by tg_ctx_new counts the bytes it has
 * live; with a limit set, an allocation that would pass it fails with TG_ENOMEM and a
 * message saying the cap was hit, as if the allocator had refused it. 0 removes the cap.
 * TG_EINVAL for the default context, which is shared and counts nothing. The CLI reads
 * TGRAPH_MEM_LIMIT (bytes, or with a K/M/G suffix). */
TG_API tg_status tg_ctx_set_mem_limit(tg_ctx *ctx, size_t bytes);
TG_API size_t tg_ctx_mem_used(const tg_ctx *ctx); /* bytes live now (0: default context) */
TG_API size_t tg_ctx_mem_peak(const tg_ctx *ctx); /* most bytes live at once so far */

/* ---- tensors -------------------------------------------------------------------- */
/* A tensor is a strided view (strides in elements, signed; offset in elements) holding
 * one reference to a refcounted buffer. Layout is DLPack-compatible. */
typedef struct tg_tensor tg_tensor;
/* New contiguous (C order) tensor, zero-filled. shape may be NULL when ndim == 0. */
TG_API tg_tensor *tg_tensor_new(tg_ctx *ctx, tg_dtype dt, int ndim, const int64_t *shape);
/* New contiguous tensor holding a copy of `data` (C order, ndim/shape as above). */
TG_API tg_tensor *tg_tensor_from_data(tg_ctx *ctx, tg_dtype dt, int ndim, const int64_t *shape,
                                      const void *data);
/* New view over the same buffer (shares memory). strides in elements. */
TG_API tg_tensor *tg_tensor_view(const tg_tensor *t, int ndim, const int64_t *shape,
                                 const int64_t *strides, int64_t offset);
TG_API tg_tensor *tg_tensor_dup(const tg_tensor *t); /* contiguous deep copy */
TG_API void tg_tensor_free(tg_tensor *t);            /* drops the buffer reference */
TG_API tg_dtype tg_tensor_dtype(const tg_tensor *t);
TG_API int tg_tensor_ndim(const tg_tensor *t);
TG_API const int64_t *tg_tensor_shape(const tg_tensor *t);
TG_API const int64_t *tg_tensor_strides(const tg_tensor *t); /* in elements */
TG_API int64_t tg_tensor_offset(const tg_tensor *t);         /* in elements */
TG_API int64_t tg_tensor_size(const tg_tensor *t);           /* number of elements */
TG_API void *tg_tensor_data(const tg_tensor *t);             /* address of element [0,...,0] */
TG_API bool tg_tensor_is_contiguous(const tg_tensor *t);
TG_API tg_ctx *tg_tensor_ctx(const tg_tensor *t);
/* DLPack exchange (the unversioned DLManagedTensor of DLPack 0.x, as NumPy 1.24 and
 * PyTorch produce and consume it; include dlpack.h for its fields), host memory only.
 *
 * tg_tensor_from_dlpack borrows m's memory without a copy: the tensor (and every view of
 * it) reads and writes it in place, and m's deleter runs once, when the last of them is
 * freed. On failure (a device other than the host, a dtype tgraph lacks, lanes, a data
 * address not aligned to the element size, extents or strides beyond tgraph's limits) it
 * returns NULL with the reason in tg_last_error(), and m stays the caller's. ctx counts
 * only the tensor's header, never the borrowed memory.
 *
 * tg_tensor_to_dlpack returns a managed tensor sharing t's memory (no copy), with t's
 * shape, strides and dtype (bool as DLPack's bool code); it holds a reference to that
 * memory until the consumer calls its deleter, once. NULL with tg_last_error() set when t
 * lives on a device the host cannot read, or on allocation failure. */
struct DLManagedTensor;
TG_API tg_tensor *tg_tensor_from_dlpack(tg_ctx *ctx, struct DLManagedTensor *m);
TG_API struct DLManagedTensor *tg_tensor_to_dlpack(const tg_tensor *t);
/* Element access by flat C-order index (any strides), converted to/from double. */
TG_API double tg_tensor_get_f64(const tg_tensor *t, int64_t flat);

/* .npy files (format 1.0-3.0; C or Fortran order; all tgraph dtypes, either byte order) */
TG_API tg_status tg_npy_load(tg_ctx *ctx, const char *path, tg_tensor **out);
TG_API tg_status tg_npy_load_mem(tg_ctx *ctx, const void *data, size_t len, tg_tensor **out);
TG_API tg_status tg_npy_save(const char *path, const tg_tensor *t);
/* Prints NumPy-style (`array([...], dtype=float32)`), summarised past 1000 elements. */
TG_API tg_status tg_tensor_print(const tg_tensor *t, FILE *f);

/* ---- graphs --------------------------------------------------------------------- */
typedef struct tg_graph tg_graph; /* owns every node and variable it creates */
typedef struct tg_var tg_var;     /* borrowed from its graph; never freed on its own */

TG_API tg_graph *tg_graph_new(tg_ctx *ctx, const char *name);
/* Gives up the caller's graph. A graph that other graphs call (tg_call, FUNC attributes)
 * stays alive until the last of them is freed too; the caller must not use it after
 * this. NULL is a no-op. */
TG_API void tg_graph_free(tg_graph *g);
TG_API const char *tg_graph_name(const tg_graph *g);
TG_API tg_status tg_graph_status(const tg_graph *g);  /* first error, or TG_OK */
TG_API const char *tg_graph_error(const tg_graph *g); /* its message ("" when none) */
/* The returned values (updates declared with tg_update are kept). */
TG_API tg_status tg_graph_set_outputs(tg_graph *g, tg_var *const *outs, int n);
TG_API int tg_graph_input_count(const tg_graph *g);
TG_API tg_var *tg_graph_input(const tg_graph *g, int i);
TG_API int tg_graph_output_count(const tg_graph *g);
TG_API tg_var *tg_graph_output(const tg_graph *g, int i);
/* The name returned value i goes by (borrowed; NULL when it has none): the name written
 * in `return`, else its variable's name when the outputs were set, else the one given
 * with tg_graph_set_output_name. It belongs to the position, not to the variable: it
 * survives tg_graph_clone and tg_graph_optimize even where rewrites replace or merge
 * the variables (two outputs may then share one variable but keep their names). */
TG_API const char *tg_graph_output_name(const tg_graph *g, int i);
/* Names returned value i (copied; NULL removes the name). tg_graph_set_outputs resets
 * every name to its variable's. */
TG_API tg_status tg_graph_set_output_name(tg_graph *g, int i, const char *name);
TG_API int tg_graph_node_count(const tg_graph *g);
TG_API tg_status tg_graph_verify(const tg_graph *g);         /* checks IR invariants */
TG_API tg_graph *tg_graph_clone(const tg_graph *g);          /* deep copy into a fresh arena */
TG_API tg_status tg_graph_print(const tg_graph *g, FILE *f); /* .tg text */
/* Prints gs[0..n) and, once each, the functions they call, as one .tg file. A graph of gs
 * that is a clone of a function it or another calls (tg_graph_clone, tg_graph_optimize:
 * an optimized function of a module) stands for that function: calls of it print its
 * name, and the function is not printed again. */
TG_API tg_status tg_graphs_print(const tg_graph *const *gs, int n, FILE *f);
TG_API tg_status tg_graph_print_dot(const tg_graph *g, FILE *f); /* Graphviz */

/* Variables: name (may be NULL), dtype, rank, and static shape (-1 for '?'). */
TG_API const char *tg_var_name(const tg_var *v);
TG_API tg_dtype tg_var_dtype(const tg_var *v);
TG_API int tg_var_ndim(const tg_var *v);
TG_API int64_t tg_var_dim(const tg_var *v, int axis); /* -1 when unknown */

/* Device annotations (docs/devices.md, "Annotations"): where a value is made. A name is
 * "cpu", "cpu:N" or "sim:N" (N >= 0, no leading zero); whether that device exists is
 * checked when the graph is placed, not here. tg_var_set_device annotates the node that
 * makes v (every output of that node), or v itself when it is an input; NULL clears.
 * TG_EINVAL with a message for a malformed name or a constant (constants have no device:
 * placement puts them where they are read); nothing changes then, and the graph stays
 * valid. Rewrites, tg_graph_clone, inlining and tg_grad keep annotations. */
TG_API tg_status tg_var_set_device(tg_var *v, const char *device);
/* v's annotation: its node's, an input's own; NULL when it has none (and for constants). */
TG_API const char *tg_var_device(const tg_var *v);
/* A device scope: every node built in g after this call is annotated with `device`, until
 * the next call (NULL ends it). tg_graph_device returns the current one (NULL: none), so
 * scopes nest by saving and restoring it:
 *     const char *outer = tg_graph_device(g);   (borrowed from g, valid while g lives)
 *     tg_graph_set_device(g, "cpu:1");  ...builders...  tg_graph_set_device(g, outer);
 * Errors as for tg_var_set_device. */
TG_API tg_status tg_graph_set_device(tg_graph *g, const char *device);
TG_API const char *tg_graph_device(const tg_graph *g);

/* Declares g the body of a pmap over the axis `axis_name` in which parameter i is mapped
 * (varies over the axis) when mapped[i], and replicated (invariant) otherwise; parameters
 * past n count as mapped. A gradient taken inside g (tg_grad, tg_vjp, ...) then follows the
 * typing rules of docs/pmap.md: the cotangent of a replicated parameter is summed over the
 * axis. A pmap of that axis mapping g checks that its in_axes agree. The parser declares it
 * for a function that a pmap maps and that takes a gradient. axis_name NULL clears it. */
TG_API tg_status tg_graph_set_mapped(tg_graph *g, const char *axis_name, const bool *mapped, int n);

/* ---- builders ------------------------------------------------------------------- */
#define TG_DIM_UNKNOWN (-1) /* '?' */

/* A function input; shape entries are extents or TG_DIM_UNKNOWN. */
TG_API tg_var *tg_input(tg_graph *g, const char *name, tg_dtype dt, int ndim, const int64_t *shape);
/* State (docs/state.md): a function input marked `mut` in .tg. A compiled function owns
 * the state's tensor between calls, and the caller does not pass it: tg_fn_call takes the
 * other inputs only, in declaration order. tg_update declares `state <- value` (value of
 * the state's dtype and shape): every read of `state` in the function sees the value from
 * before the call, and all updates take effect together at the end of a call that
 * succeeded (a failed call leaves every state as it was). A state is updated at most once
 * per function; a state without an update is read-only. */
TG_API tg_var *tg_state(tg_graph *g, const char *name, tg_dtype dt, int ndim, const int64_t *shape);
TG_API tg_status tg_update(tg_graph *g, tg_var *state, tg_var *value);
TG_API bool tg_var_is_state(const tg_var *v); /* an input made by tg_state */
/* A strongly typed constant holding a copy of `value`. */
TG_API tg_var *tg_constant(tg_graph *g, const tg_tensor *value);
/* Weak literals (NEP 50): they take the dtype of the strong operand they meet. */
TG_API tg_var *tg_literal_int(tg_graph *g, int64_t v);
TG_API tg_var *tg_literal_float(tg_graph *g, double v);
TG_API tg_var *tg_literal_bool(tg_graph *g, bool v);

/* Attributes are keyword arguments (NumPy's names). */
typedef enum {
    TG_ATTR_NONE,   /* `none` */
    TG_ATTR_INT,    /* i */
    TG_ATTR_FLOAT,  /* f */
    TG_ATTR_BOOL,   /* i (0 or 1) */
    TG_ATTR_STR,    /* s */
    TG_ATTR_INTS,   /* ints[0..n) */
    TG_ATTR_FLOATS, /* floats[0..n) */
    TG_ATTR_FUNC,   /* func: another function (`@name` in .tg) */
} tg_attr_kind;

typedef struct tg_attr {
    const char *name;     /* keyword */
    tg_attr_kind kind;    /* which of the fields below is meant */
    int64_t i;            /* INT, BOOL */
    double f;             /* FLOAT */
    const char *s;        /* STR */
    tg_graph *func;       /* FUNC: a graph of the same context; the node keeps it alive */
    const int64_t *ints;  /* INTS */
    const double *floats; /* FLOATS */
    int n;                /* length of ints / floats */
    const bool *none;     /* INTS: none[k] makes entry k `none` (ints[k] is then ignored);
                             NULL: no entry is none. Only some attributes take it (slices,
                             pmap's in_axes and out_axes) */
} tg_attr;

#define TG_A_INT(nm, v)   ((tg_attr){.name = (nm), .kind = TG_ATTR_INT, .i = (v)})
#define TG_A_FLOAT(nm, v) ((tg_attr){.name = (nm), .kind = TG_ATTR_FLOAT, .f = (v)})
#define TG_A_BOOL(nm, v)  ((tg_attr){.name = (nm), .kind = TG_ATTR_BOOL, .i = (v) ? 1 : 0})
#define TG_A_STR(nm, v)   ((tg_attr){.name = (nm), .kind = TG_ATTR_STR, .s = (v)})
#define TG_A_INTS(nm, p, cnt)                                                                      \
    ((tg_attr){.name = (nm), .kind = TG_ATTR_INTS, .ints = (p), .n = (cnt)})
#define TG_A_NONE(nm)     ((tg_attr){.name = (nm), .kind = TG_ATTR_NONE})
#define TG_A_FUNC(nm, fg) ((tg_attr){.name = (nm), .kind = TG_ATTR_FUNC, .func = (fg)})

/* Generic builder: applies the op named `op` to `in` with keyword attributes.
 * Returns the first output; tg_apply_multi returns all of them (n_out in, count out). */
TG_API tg_var *tg_apply(tg_graph *g, const char *op, tg_var *const *in, int nin,
                        const tg_attr *attrs, int nattrs);
TG_API tg_status tg_apply_multi(tg_graph *g, const char *op, tg_var *const *in, int nin,
                                const tg_attr *attrs, int nattrs, tg_var **out, int *nout);

/* Typed shortcuts for the common ops (each is tg_apply with the op's name). tg_diag(g, x) is
 * the diagonal of the last two axes of x, over its leading axes (numpy.linalg.diagonal). */
/* clang-format off */
#define TG_UNARY_BUILDERS(X)                                                                       \
    X(neg) X(abs) X(sign) X(exp) X(exp2) X(log) X(log2) X(log1p) X(expm1) X(sqrt) X(rsqrt)       \
    X(sin) X(cos) X(tan) X(tanh) X(sigmoid) X(softplus) X(erf) X(erfc) X(not) X(isnan)           \
    X(isinf) X(floor) X(ceil) X(round) X(gammaln) X(digamma) X(log1mexp) X(erfcx) X(log_ndtr)    \
    X(erfinv) X(diag)
#define TG_BINARY_BUILDERS(X)                                                                      \
    X(add) X(sub) X(mul) X(div) X(int_div) X(mod) X(pow) X(maximum) X(minimum) X(lt) X(le)       \
    X(gt) X(ge) X(eq) X(ne) X(and) X(or) X(xor) X(dot) X(matmul) X(outer) X(polygamma)           \
    X(betaln) X(xlogy) X(xlog1py) X(logaddexp) X(gammainc) X(gammaincc)
/* clang-format on */
#define TG_X_UNARY_DECL(nm)  TG_API tg_var *tg_##nm(tg_graph *g, tg_var *x);
#define TG_X_BINARY_DECL(nm) TG_API tg_var *tg_##nm(tg_graph *g, tg_var *a, tg_var *b);
TG_UNARY_BUILDERS(TG_X_UNARY_DECL)
TG_BINARY_BUILDERS(TG_X_BINARY_DECL)
#undef TG_X_UNARY_DECL
#undef TG_X_BINARY_DECL
TG_API tg_var *tg_where(tg_graph *g, tg_var *cond, tg_var *a, tg_var *b);
TG_API tg_var *tg_clip(tg_graph *g, tg_var *x, tg_var *lo, tg_var *hi);
TG_API tg_var *tg_cast(tg_graph *g, tg_var *x, tg_dtype dt);
/* Reductions: axes NULL / naxes < 0 means all axes. */
TG_API tg_var *tg_reduce(tg_graph *g, const char *op, tg_var *x, const int64_t *axes, int naxes,
                         bool keepdims);
TG_API tg_var *tg_reshape(tg_graph *g, tg_var *x, int ndim, const int64_t *shape);
TG_API tg_var *tg_transpose(tg_graph *g, tg_var *x, const int64_t *axes /* NULL: reverse */);
/* Basic slicing x[start:stop:step, ...]: one entry per axis from the front. A part left
 * out (x[:3], x[2:], x[::2]) is marked in `omit`, never by a value: every int64_t, INT64_MIN
 * included, is an ordinary bound or step. {.start = 1, .stop = 3, .step = 1} is x[1:3];
 * {.omit = TG_SLICE_OMIT_ALL} is x[:]; {.start = -1, .is_index = true} is x[-1]. */
typedef struct tg_slice {
    int64_t start, stop, step; /* NumPy meaning, where not omitted */
    bool is_index;             /* x[i]: take `start`, drop the axis */
    unsigned omit;             /* TG_SLICE_NO_START | TG_SLICE_NO_STOP | TG_SLICE_NO_STEP */
} tg_slice;
#define TG_SLICE_NO_START 1u
#define TG_SLICE_NO_STOP  2u
#define TG_SLICE_NO_STEP  4u /* step 1 */
#define TG_SLICE_OMIT_ALL (TG_SLICE_NO_START | TG_SLICE_NO_STOP | TG_SLICE_NO_STEP)
/* Two more items of tg_index_apply / tg_index_update (not of tg_slice_apply), each an
 * `omit` of its own with the other fields zero: NumPy's `None`, a new axis of extent 1
 * (taking no axis of x), and `...`, as many whole axes as the other items leave (at most
 * one per index). */
#define TG_INDEX_NEWAXIS  8u
#define TG_INDEX_ELLIPSIS 16u
TG_API tg_var *tg_slice_apply(tg_graph *g, tg_var *x, const tg_slice *idx, int nidx);
/* Indexing x[...] as NumPy does it, basic and advanced items mixed. Each entry indexes
 * from the front: an item with `array` NULL is the basic `slice` (a slice, an integer
 * with is_index, a new axis or `...`: TG_INDEX_NEWAXIS, TG_INDEX_ELLIPSIS); otherwise
 * `array` is an integer index array (any rank, any integer dtype) or a bool mask, which
 * indexes as many axes as it has dimensions (its shape must equal theirs). Axes left over
 * are taken whole.
 *  - Without arrays this is tg_slice_apply (a view).
 *  - Index arrays (and integers, when any array is present, as NumPy counts them, and the
 *    true positions of each mask, one array per mask dimension) broadcast together to a
 *    shape B. Where the advanced items are adjacent, B replaces their axes in place;
 *    where a slice separates them, B comes first and the sliced axes follow.
 *  - Negative indices count from the end; an index out of range is a run-time error
 *    (EINDEX) naming the value, the axis and its extent: "index 7 is out of bounds for
 *    axis 1 with size 5", never a silent wrap.
 * Built as ops: one index array with full slices is `take`, a leading mask with full
 * slices `mask_select`; otherwise the basic items become a `slice` (integers excepted)
 * and the arrays one `index` node (docs/ops-index.md). */
typedef struct tg_index {
    tg_var *array;  /* index array or bool mask; NULL: `slice` is the item */
    tg_slice slice; /* the basic item when array is NULL */
} tg_index;
TG_API tg_var *tg_index_apply(tg_graph *g, tg_var *x, const tg_index *idx, int nidx);
/* A copy of x with x[idx] = y (inc false) or x[idx] += y (inc true; repeated places
 * accumulate, np.add.at's rule and JAX's x.at[...].add(y)); y broadcasts onto the
 * selection x[idx] as tg_index_apply gives it. For set, the last of repeated places wins.
 * dtypes as set_subtensor / inc_subtensor. */
TG_API tg_var *tg_index_update(tg_graph *g, tg_var *x, const tg_index *idx, int nidx, tg_var *y,
                               bool inc);

/* ---- calls: functions that call functions (docs/text-format.md, "Calls") ---------- */
#define TG_CALL_MAX_DEPTH 64 /* deepest nesting of calls (f calls g calls h ...) */
/* Calls `callee` (a graph of g's context, with its outputs set and no state) on args, one
 * per callee input. Argument dtypes must equal the parameters' (weak literals adopt
 * them); static extents must agree, a '?' extent of the callee accepts any. The outputs
 * are the callee's returned values typed for these arguments: *nouts holds the room of
 * outs on entry and the callee's output count on return. A call that would make a cycle
 * (callee calls g, directly or not) is an error naming it. The node keeps callee alive.
 * Calls are inlined first thing in the rewrite pipeline (tg_optimize_opts.no_inline keeps
 * them, and the backends then run the callee as a sub-graph). */
TG_API tg_status tg_call(tg_graph *g, tg_graph *callee, tg_var *const *args, int nargs,
                         tg_var **outs, int *nouts);

/* ---- vectorize: a function mapped over a batch axis (docs/vectorize.md) ------------ */
#define TG_AXIS_NONE INT32_MIN /* an in_axes/out_axes entry: not mapped (JAX's None) */
/* JAX's vmap as a graph transformation: builds in g the graph of f (written over core
 * shapes, outputs set, no state) applied to each slice of the mapped arguments, as ordinary
 * graph (no loop), so that gradients, rewrites and backends see it as if written by hand.
 * in_axes[i] (NULL: every entry 0) is the axis of args[i] that is mapped (negative counts
 * from the end), or TG_AXIS_NONE for an argument passed whole to every slice; at least one
 * argument is mapped, and the mapped extents agree. A slice (the argument without its
 * mapped axis) must fit the parameter as a call's argument does (tg_call). out_axes[i]
 * (NULL: every entry 0) is where output i gets the batch axis, or TG_AXIS_NONE for an
 * output that depends on no mapped argument, returned once. *nouts holds the room of outs
 * on entry and f's output count on return. Ops without a batching rule are an error naming
 * them. */
TG_API tg_status tg_vectorize(tg_graph *g, tg_graph *f, tg_var *const *args, int nargs,
                              const int *in_axes, const int *out_axes, tg_var **outs, int *nouts);
/* ---- gradients (reverse mode) --------------------------------------------------- */
/* What to do when the result does not depend on an input asked for. */
typedef enum {
    TG_DISCONNECTED_ERROR, /* an error naming the input (default) */
    TG_DISCONNECTED_ZERO,  /* zeros of the input's type */
} tg_disconnected;

/* Builds, in g, the gradient of the scalar float `cost` with respect to each wrt[i]
 * (float variables: inputs or intermediate values); out[i] has wrt[i]'s dtype and shape.
 * The result is ordinary graph, so gradients of gradients work. */
TG_API tg_status tg_grad(tg_graph *g, tg_var *cost, tg_var *const *wrt, int nwrt,
                         tg_disconnected disconnected, tg_var **out);
/* Vector-Jacobian product: the cotangent of each wrt[i] given cotangents cot[j] (each of
 * outs[j]'s type) for the values outs[0..nouts). */
TG_API tg_status tg_vjp(tg_graph *g, tg_var *const *outs, tg_var *const *cot, int nouts,
                        tg_var *const *wrt, int nwrt, tg_disconnected disconnected, tg_var **out);
/* Jacobian of y with respect to each wrt[i], in reverse mode (JAX's jacrev, PyTensor's
 * jacobian): one tg_vjp per element of y with a one-hot cotangent, the results stacked.
 * out[i] has shape y.shape + wrt[i].shape and wrt[i]'s dtype; a 0-d y gives the gradient,
 * a 0-d wrt[i] gives y's shape. y must be a float of static shape with at most
 * TG_JACOBIAN_MAX elements, and y's rank plus wrt[i]'s at most TG_MAX_DIMS. The result is
 * ordinary graph, so jacobians of jacobians work. Errors are the graph's first error (as
 * for every builder) and leave every out[i] NULL; the same holds for tg_hessian. */
#define TG_JACOBIAN_MAX 1024 /* most elements of y in tg_jacobian (of wrt[i] in tg_hessian) */
TG_API tg_status tg_jacobian(tg_graph *g, tg_var *y, tg_var *const *wrt, int nwrt,
                             tg_disconnected disconnected, tg_var **out);
/* Hessian blocks of the 0-d float `cost`: out[i] = d2 cost / d wrt[i]^2, of shape
 * wrt[i].shape + wrt[i].shape (the jacobian of the gradient, as PyTensor's hessian; the
 * blocks between different wrt are not built). Each wrt[i] needs a static shape with at
 * most TG_JACOBIAN_MAX elements. `disconnected` applies to the cost's dependence on each
 * wrt[i]; a gradient that does not depend on its wrt[i] (a cost linear in it) gives zeros. */
TG_API tg_status tg_hessian(tg_graph *g, tg_var *cost, tg_var *const *wrt, int nwrt,
                            tg_disconnected disconnected, tg_var **out);

/* Gradient checker (like PyTensor's verify_grad). g must have one float output y; the
 * check projects it on a random r (cost = sum(y * r)), builds the gradient of that cost
 * with respect to every float input, and compares it at the point `in` (one tensor per
 * input of g) with central finite differences computed in float64. Returns TG_OK when
 * every element agrees within tolerance, TG_ECHECK with a message naming the worst input
 * and element otherwise (and other codes for errors). opts and rep may be NULL. */
typedef struct tg_grad_check_opts {
    size_t size;   /* sizeof(tg_grad_check_opts): set by TG_GRAD_CHECK_OPTS */
    double eps;    /* finite-difference step, relative to max(1, |x|); 0: 1e-6 for f64
                      graphs, 1e-3 for f32 (a graph is f32 when any float value in it is) */
    double rtol;   /* 0: 1e-5 for f64 graphs, 1e-2 for f32 */
    double atol;   /* 0: 1e-8 for f64 graphs, 1e-3 for f32 */
    uint64_t seed; /* of the projection r */
} tg_grad_check_opts;
#define TG_GRAD_CHECK_OPTS(...)                                                                    \
    ((tg_grad_check_opts){.size = sizeof(tg_grad_check_opts), __VA_ARGS__})
typedef struct tg_grad_check_report {
    size_t size;     /* sizeof(tg_grad_check_report): set by TG_GRAD_CHECK_REPORT */
    int input;       /* input index of the worst element */
    int64_t index;   /* its flat C-order index */
    double analytic; /* gradient from the graph */
    double numeric;  /* finite-difference estimate */
    double abs_err;  /* |analytic - numeric| */
    double rel_err;  /* abs_err / max(|analytic|, |numeric|) */
} tg_grad_check_report;
#define TG_GRAD_CHECK_REPORT(...)                                                                  \
    ((tg_grad_check_report){.size = sizeof(tg_grad_check_report), __VA_ARGS__})
TG_API tg_status tg_grad_check(tg_graph *g, tg_tensor *const *in, int nin,
                               const tg_grad_check_opts *opts, tg_grad_check_report *rep);

/* ---- modules: several functions parsed from one .tg text ------------------------ */
typedef struct tg_module tg_module;
/* Parses `src` (len bytes). `filename` is used in messages. On error returns the
 * status and tg_last_error() holds "file:line:col: message". */
TG_API tg_status tg_module_parse(tg_ctx *ctx, const char *src, size_t len, const char *filename,
                                 tg_module **out);
/* Reads and parses a .tg file (tg_module_read of the opened file; messages name path). */
TG_API tg_status tg_module_load(tg_ctx *ctx, const char *path, tg_module **out);
/* Reads the open stream f (a file, pipe or stdin) to its end and parses it; `name` is
 * used in messages. The text is read through ctx, so its memory cap applies, and stops
 * with an error past 1 GiB or at a NUL byte: a pipe or device is never read without
 * bound. f stays open. */
TG_API tg_status tg_module_read(tg_ctx *ctx, FILE *f, const char *name, tg_module **out);
TG_API void tg_module_free(tg_module *m);
TG_API int tg_module_func_count(const tg_module *m);
TG_API tg_graph *tg_module_func(const tg_module *m, int i);
TG_API tg_graph *tg_module_find(const tg_module *m, const char *name);
TG_API tg_status tg_module_print(const tg_module *m, FILE *f);
#define TG_PARSE_MAX_DEPTH 256 /* deepest nesting of calls and brackets the parser takes */

/* ---- devices (docs/devices.md) --------------------------------------------------- */
/* The places graphs run: `cpu` (the host, all its threads), the virtual host devices
 * `cpu:0`..`cpu:N-1` (each a disjoint share of the host's threads) and the test devices
 * `sim:0`..`sim:K-1`. With no setting `cpu` is the only one. The counts come from
 * TGRAPH_HOST_DEVICES and TGRAPH_SIM_DEVICES, or from tg_devices_configure, which sets
 * them (-1: from the environment again). No function compiled for the devices of the old
 * setting may run, or be freed, after it: free them first. */
TG_API tg_status tg_devices_configure(int host_devices, int sim_devices);
/* How many devices there are (>= 1), and the name of device i ("cpu", "cpu:1", "sim:0"),
 * in the order placement sees them; -1 / NULL with the error set when a setting is
 * malformed or i is out of range. */
TG_API int tg_devices_count(void);
TG_API const char *tg_devices_name(int i);

/* ---- processes (docs/mpi.md) ------------------------------------------------------ */
/* Started by mpirun, a build with MPI joins the job (MPI_Init_thread) on the first call of
 * any of these; joining is collective (it duplicates MPI_COMM_WORLD for tgraph's own
 * messages), so a program that initialised MPI itself and runs its own collectives on other
 * threads calls tg_world_size() first. A pmap whose extent is a multiple of the processes
 * then spans them all,
 * each taking its share of the ranks. Without MPI, or outside mpirun, the world is this
 * process alone: rank 0 of 1. */
TG_API int tg_world_rank(void);
TG_API int tg_world_size(void);
/* Ends this process's part in the job; call it once, last, and exit with what it returns.
 * status 0 waits for every process to get there, then finalizes MPI; it returns non-zero
 * when another process failed meanwhile (tg_last_error() names it). A non-zero status
 * tells the other processes that this one failed, with the message `why` (NULL: this
 * thread's last error), and ends the job within TGRAPH_MPI_GRACE seconds (default 5).
 * A process that never calls it ends as with status 0 at exit. Returns status as is
 * without MPI. */
TG_API int tg_world_finish(int status, const char *why);
/* Where the nodes of a compiled function run (tg_compile_opts.placement). DEFAULT: AUTO
 * when there is more than one device or the graph has annotations, else everything on
 * `cpu` as with no devices at all. AUTO: nodes pinned by annotations stay; the rest are
 * spread by a cost model. MANUAL: nodes follow their annotations and their inputs' devices,
 * the rest run on the first device; two annotated values on different devices meeting at
 * one op are an error naming both. */
typedef enum { TG_PLACEMENT_DEFAULT, TG_PLACEMENT_AUTO, TG_PLACEMENT_MANUAL } tg_placement;

/* ---- optimising: the rewrite pipeline ------------------------------------------- */
/* inline -> canonicalize -> stabilize -> specialize -> blas -> fuse -> inplace
 * (docs/rewrites.md). */
typedef struct tg_optimize_opts {
    size_t size;             /* sizeof(tg_optimize_opts): set by TG_OPTIMIZE_OPTS */
    bool no_blas;            /* keep dot and its elementwise neighbours (no gemm/gemv/ger) */
    bool no_inline;          /* keep calls as calls (the backends run them as sub-graphs) */
    bool verify;             /* verify the IR after every pass (always on in debug builds) */
    const char *print_after; /* print the graph after the pass of this name; "all": each */
    FILE *print_to;          /* where those go (NULL: stdout) */
    FILE *stats_to;          /* when set, the compile-time report (per pass, per rule) */
    bool place;              /* after the pipeline, place the graph on the devices: a device
                                on every node, transfers between them (docs/devices.md) */
    tg_placement placement;  /* with place: how (see tg_placement) */
} tg_optimize_opts;
#define TG_OPTIMIZE_OPTS(...) ((tg_optimize_opts){.size = sizeof(tg_optimize_opts), __VA_ARGS__})
/* Runs the pipeline on a copy of g; *out receives the rewritten graph, which the caller
 * frees with tg_graph_free. g itself is never modified. opts may be NULL. */
TG_API tg_status tg_graph_optimize(const tg_graph *g, const tg_optimize_opts *opts, tg_graph **out);
/* Name of pass i of the pipeline, in order; NULL past the end. */
TG_API const char *tg_pass_name(int i);

/* ---- thread pool ---------------------------------------------------------------- */
/* A persistent pool of threads that large kernels split their work over. A compiled
 * function makes its own, or shares one given in its compile options (then the pool
 * must outlive every function using it). A pool runs one kernel at a time: functions
 * sharing a pool and called from several threads at once still compute correctly, the
 * later call running its kernels on its own thread. Workers spin briefly, then sleep. */
typedef struct tg_pool tg_pool;
/* nthreads counts the calling thread; <= 0 means TGRAPH_NUM_THREADS when set to a
 * positive integer, else the number of cores. NULL on failure. */
TG_API tg_pool *tg_pool_new(tg_ctx *ctx, int nthreads);
TG_API void tg_pool_free(tg_pool *p);      /* joins the workers; NULL is a no-op */
TG_API int tg_pool_size(const tg_pool *p); /* threads, the caller included */

/* ---- compiling and running ------------------------------------------------------ */
/* TG_MODE_VM (0, the default) runs the graph rewritten by the optimisation pipeline with
 * the fast executor (vector kernels, BLAS, fused kernels run block by block, a memory
 * plan per input-shape signature, the thread pool); TG_MODE_REFERENCE runs the graph as
 * written, node by node, with the reference kernels (the oracle); TG_MODE_C runs the
 * rewritten graph as C generated for it, compiled with the system cc and cached on disk
 * (docs/cjit.md; without a working compiler: the VM, after one warning on stderr);
 * TG_MODE_DEBUG runs it with debug_backend and checks every node against its reference
 * kernel, failing with TG_ECHECK at the first node that differs or writes to an input it
 * does not declare it destroys. */
typedef enum { TG_MODE_VM, TG_MODE_REFERENCE, TG_MODE_C, TG_MODE_DEBUG } tg_mode;
typedef struct tg_compile_opts {
    size_t size;            /* sizeof(tg_compile_opts): set by TG_COMPILE_OPTS */
    tg_mode mode;           /* see above; 0 (the default, as with opts NULL): TG_MODE_VM */
    bool no_rewrite;        /* TG_MODE_VM: skip the rewrite pipeline */
    bool no_blas;           /* keep dot and its elementwise neighbours (no gemm/gemv/ger) */
    bool verify;            /* verify the IR after every rewrite pass (always on in debug builds) */
    int nthreads;           /* TG_MODE_VM: threads of the function's pool, the caller included;
                               0: TGRAPH_NUM_THREADS when set, else the number of cores */
    tg_pool *pool;          /* TG_MODE_VM: a pool to share (borrowed; nthreads is then ignored) */
    bool profile;           /* TG_MODE_VM: time every node (tg_fn_profile_print) */
    tg_mode debug_backend;  /* TG_MODE_DEBUG: the backend checked, TG_MODE_VM (0) or TG_MODE_C */
    bool no_fallback;       /* TG_MODE_C: fail (TG_ECHECK) when no compiler can build the code,
                               instead of running the VM after a warning on stderr */
    bool no_inline;         /* keep calls as calls: each backend runs a callee as a sub-graph
                               (reference: interpreted; vm, c, debug: compiled once per callee
                               in the same mode), instead of inlining it first */
    tg_placement placement; /* see tg_placement (docs/devices.md "Placement") */
} tg_compile_opts;
#define TG_COMPILE_OPTS(...) ((tg_compile_opts){.size = sizeof(tg_compile_opts), __VA_ARGS__})
typedef struct tg_fn tg_fn;
/* Compiles g (which must stay alive while the function is used, and be freed after it:
 * TG_MODE_REFERENCE and no_rewrite run g itself). opts may be NULL. */
TG_API tg_status tg_graph_compile(tg_graph *g, const tg_compile_opts *opts, tg_fn **out);
/* Runs f: inputs in the graph's input order, states left out (tg_state); outputs (the
 * returned values: updates are not outputs) receive new tensors the caller
 * frees with tg_tensor_free (whatever out[i] held on entry is ignored). Inputs must match
 * the declared dtypes and static shapes.
 * Threads: tg_fn_call and tg_fn_call_into may be called on one function from several
 * threads at once. In TG_MODE_VM and TG_MODE_C the calls run at the same time: the
 * compiled program and its plans are shared and read-only, and each call runs on a replica
 * of its own (its values, and for each input-shape signature it ran, a copy of the plan's
 * buffers and workspace), taken from the function's replicas and given back at its end;
 * the function makes a replica when all are busy and keeps it until tg_fn_free, so its
 * memory grows to (calls that ran at once) x (the buffers of each cached signature). Only
 * the look-up or making of a plan for a signature is under a lock, never the run. Kernels
 * split their work over the function's pool while it is free; a call that finds it busy
 * with another call's kernel runs that kernel on its own thread (same results, but for a
 * BLAS product split over its inner dimension, whose partial sums depend on the threads).
 * TG_MODE_REFERENCE and TG_MODE_DEBUG calls also run at the same time (their state is per
 * call). Serialized: calls of a function with state (tg_state: the state is one for all
 * calls, and a call swaps it in when it succeeds; tg_fn_state_set waits for them too).
 * Inputs are only read, so threads may share them; a given output must
 * be written by one call at a time. tg_fn_profile_print and tg_fn_profile_reset may run
 * during calls (the profile sums the calls that ended); tg_fn_free must not. */
TG_API tg_status tg_fn_call(tg_fn *f, tg_tensor *const *in, int nin, tg_tensor **out, int nout);
/* Like tg_fn_call, writing into tensors the caller owns (for training loops and
 * benchmarks: no allocation per call): where out[i] is non-NULL on entry it must be a
 * tensor of output i's dtype and run-time shape, and receives the result (any strides; it
 * may share memory with an input, then the result is computed aside and copied in);
 * where out[i] is NULL it receives a new tensor, as with tg_fn_call. On error the given
 * tensors' contents are unspecified and the new ones are not made (out[i] NULL). */
TG_API tg_status tg_fn_call_into(tg_fn *f, tg_tensor *const *in, int nin, tg_tensor **out,
                                 int nout);
/* Prints the per-node profile of a function compiled with opts.profile (TG_MODE_VM):
 * per node its time, calls, share of the total and bytes read and written per call, the
 * most expensive first. TG_EINVAL when the function keeps no profile. */
TG_API tg_status tg_fn_profile_print(tg_fn *f, FILE *out);
TG_API void tg_fn_profile_reset(tg_fn *f); /* forgets the times so far (e.g. warm-up) */
/* The state of a compiled function (see tg_state), numbered in declaration order. A state
 * whose shape is fully static starts as zeros; one with '?' extents must be set before the
 * first call (the call fails naming it otherwise). tg_fn_state returns the current value,
 * borrowed: valid until the next call or set; it may be read, and written in place
 * between calls. tg_fn_state_set copies t into the state (dtype and static extents must
 * match; the '?' extents are fixed by t). */
TG_API int tg_fn_state_count(const tg_fn *f);
TG_API const char *tg_fn_state_name(const tg_fn *f, int i);
TG_API int tg_fn_state_find(const tg_fn *f, const char *name); /* -1 when none */
TG_API tg_tensor *tg_fn_state(tg_fn *f, int i);
TG_API tg_status tg_fn_state_set(tg_fn *f, int i, const tg_tensor *t);
TG_API void tg_fn_free(tg_fn *f); /* before its graph (or module) and its shared pool */

/* ---- the C JIT's cache (TG_MODE_C, docs/cjit.md) --------------------------------- */
/* Prints the cache directory, then one line per compiled entry (bytes, date, .so path). */
TG_API tg_status tg_cache_list(FILE *f);
/* Removes every entry and left-over temporary file; *removed (may be NULL) counts files. */
TG_API tg_status tg_cache_clear(int *removed);
/* Kills the compilers this process is running for the cache and removes their temporary
 * files. Async-signal-safe: for a SIGINT/SIGTERM handler that then ends the process.
 * A compiler runs in a process group of its own (so that a time limit stops all it
 * started), so a terminal's Ctrl-C does not reach it: a program that compiles with
 * TG_MODE_C and handles SIGINT or SIGTERM should call this from its handler (the tgraph
 * tool does), or a compiler that hangs outlives it until TGRAPH_CC_TIMEOUT has no one
 * left to enforce it. */
TG_API void tg_cache_interrupt(void);

#ifdef __cplusplus
}
#endif
#endif
