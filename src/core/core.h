/* core.h - private header of src/core: context and allocator hook, errors, arenas,
 * buffers, tensor views, dtype helpers, element load/store.
 *
 * Invariants: every allocation goes through a tg_ctx (tg_mem_*); a tensor holds exactly one
 * reference to its buffer; buffer refcounts are atomic; the last-error buffer is the only
 * state outside explicit objects (thread-local).
 */
#ifndef TG_CORE_H
#define TG_CORE_H

#include "tgraph.h"

#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

#define TG_COUNTOF(a) (sizeof(a) / sizeof((a)[0]))
#define TG_UNUSED(x)  ((void)(x))

#if defined(__GNUC__)
#define TG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TG_PRINTF(f, a)
#endif

/* Bugs in tgraph only; never on user input. Stays on in every build. */
_Noreturn void tg_bug(const char *file, int line, const char *expr);
#define TG_ASSERT(c) ((c) ? (void)0 : tg_bug(__FILE__, __LINE__, #c))

/* ---- errors ---- */
/* Sets this thread's last error to the formatted message; returns st for chaining. */
tg_status tg_set_error(tg_status st, const char *fmt, ...) TG_PRINTF(2, 3);
tg_status tg_set_errorv(tg_status st, const char *fmt, va_list ap);
#define TG_ERRMSG_MAX 1024

/* ---- versioned structs of the public API (abi.c; tgraph.h, docs/c-api.md "ABI") ---- */
/* Each starts with `size_t size`. Its first version ends with the field named here: the
 * least size the library takes. A later version adds fields past the earlier one's sizeof. */
#define TG_COMPILE_OPTS_FIRST      (offsetof(tg_compile_opts, no_inline) + sizeof(bool))
#define TG_OPTIMIZE_OPTS_FIRST     (offsetof(tg_optimize_opts, stats_to) + sizeof(FILE *))
#define TG_GRAD_CHECK_OPTS_FIRST   (offsetof(tg_grad_check_opts, seed) + sizeof(uint64_t))
#define TG_GRAD_CHECK_REPORT_FIRST (offsetof(tg_grad_check_report, rel_err) + sizeof(double))
/* Copies the caller's struct *src into dst, the library's version of it (dst_size bytes):
 * the fields past the caller's size are zero (their defaults), and dst's size is dst_size.
 * src NULL: every field zero. Errors name fn and the struct's type (TG_EINVAL for a size
 * below `first` or absurdly large, TG_EUNSUPPORTED for a field set past dst_size). */
tg_status tg_struct_in(void *dst, size_t dst_size, const void *src, size_t first, const char *fn,
                       const char *type);
/* Checks the size of the caller's output struct *p (NULL: none) before it is written;
 * own: the library's sizeof of it. */
tg_status tg_struct_out_check(const void *p, size_t own, size_t first, const char *fn,
                              const char *type);
/* Writes the library's src (src_size bytes) into the caller's checked *dst: the fields that
 * fit in dst's size; dst's size, and fields past src_size, are left as they are. */
void tg_struct_out(void *dst, const void *src, size_t src_size);

/* ---- context and memory ---- */
struct tg_ctx {
    tg_alloc_fn alloc;   /* never NULL */
    void *ud;            /* allocator's user data */
    size_t limit;        /* bytes live at most (0: no cap; tg_ctx_set_mem_limit) */
    _Atomic size_t used; /* bytes live now (not for the default context) */
    _Atomic size_t peak; /* most bytes ever live */
};
void *tg_mem_alloc(tg_ctx *ctx, size_t n);  /* NULL on failure (error already set) */
void *tg_mem_calloc(tg_ctx *ctx, size_t n); /* zeroed */
void *tg_mem_realloc(tg_ctx *ctx, void *p, size_t osize, size_t nsize);
void tg_mem_free(tg_ctx *ctx, void *p, size_t size);
char *tg_mem_strdup(tg_ctx *ctx, const char *s); /* free with tg_mem_free(ctx, p, strlen+1) */
/* Overflow-checked size arithmetic: false when the result does not fit. */
bool tg_size_mul(size_t a, size_t b, size_t *out);
bool tg_size_add(size_t a, size_t b, size_t *out);

/* ---- files (file.c) ---- */
/* SIGXFSZ held back in the calling thread while the library writes files: a write past
 * the file-size limit (ulimit -f) fails with EFBIG instead of killing the process.
 * tg_xfsz_end discards a SIGXFSZ the writes raised and restores the mask (and errno). */
typedef struct tg_xfsz {
    sigset_t old;     /* the mask before */
    bool was_pending; /* a SIGXFSZ was pending before: left alone */
} tg_xfsz;
void tg_xfsz_begin(tg_xfsz *x);
void tg_xfsz_end(tg_xfsz *x);
/* buf = path.tmp.<pid>.<n>, a name unique in this process for a file written beside path
 * and renamed onto it; false when it does not fit in n bytes. */
bool tg_file_tmp_name(char *buf, size_t n, const char *path);

/* ---- arenas: bump allocation in growing chunks, released all at once ---- */
typedef struct tg_arena_chunk tg_arena_chunk;
typedef struct tg_arena {
    tg_ctx *ctx;          /* where chunks come from */
    tg_arena_chunk *head; /* newest chunk first */
    size_t used, cap;     /* in the head chunk */
    size_t total;         /* bytes handed out, for statistics */
} tg_arena;
void tg_arena_init(tg_arena *a, tg_ctx *ctx);
void tg_arena_fini(tg_arena *a);
void *tg_arena_alloc(tg_arena *a, size_t n); /* 16-byte aligned, zeroed; NULL on failure */
char *tg_arena_strdup(tg_arena *a, const char *s);
void *tg_arena_memdup(tg_arena *a, const void *p, size_t n);

/* ---- dtypes ---- */
typedef struct tg_dtype_info {
    const char *name;  /* "f32" */
    const char *numpy; /* "float32" */
    size_t size;       /* bytes */
    char npy_kind;     /* 'b', 'i', 'u', 'f' */
} tg_dtype_info;
extern const tg_dtype_info tg_dtype_infos[TG_DT_COUNT];

/* Load/store one element converted through double or int64 (any alignment). Integer
 * stores wrap modulo 2^bits; float -> int truncates, NaN -> 0, out-of-range values
 * saturate to the target's min/max (never UB); bool stores v != 0; a bool byte loads as
 * 1 when non-zero. See dtype.c. */
double tg_load_f64(const void *p, tg_dtype dt);
int64_t tg_load_i64(const void *p, tg_dtype dt);
void tg_store_f64(void *p, tg_dtype dt, double v);
void tg_store_i64(void *p, tg_dtype dt, int64_t v);

/* ---- buffers and tensors ---- */
typedef struct tg_buffer tg_buffer;
struct tg_buffer {
    atomic_long refs;  /* last unref frees */
    tg_ctx *ctx;       /* allocator of `data` (of the header alone when `release` is set) */
    void *data;        /* nbytes bytes, 64-byte aligned when from tg_buffer_new */
    size_t nbytes;     /* size of data */
    size_t alloc_size; /* size of the one ctx block holding this header and data */
    /* The device that owns `data` (a tg_device of src/device, opaque here): NULL or the
     * cpu device for host memory. Memory of a device the host must not read has
     * `release` set: the last unref calls it, and it frees `data` through the device and
     * then the header. Host memory borrowed from another library (dlpack.c) has `release`
     * set and `device` NULL: releasing it hands the memory back to its owner. Core never
     * reads `device` itself. */
    void *device;
    void (*release)(tg_buffer *b);
};
tg_buffer *tg_buffer_new(tg_ctx *ctx, size_t nbytes); /* zero-filled; NULL on failure */
void tg_buffer_ref(tg_buffer *b);
void tg_buffer_unref(tg_buffer *b);

struct tg_tensor {
    tg_dtype dtype;               /* element type */
    int ndim;                     /* 0..TG_MAX_DIMS */
    int64_t shape[TG_MAX_DIMS];   /* extents, >= 0 */
    int64_t strides[TG_MAX_DIMS]; /* in elements, signed */
    int64_t offset;               /* of element [0,...,0], in elements */
    tg_buffer *buf;               /* one reference held */
};
/* Element count of a shape; false on overflow past INT64_MAX/elem_size limits. */
bool tg_shape_size(int ndim, const int64_t *shape, int64_t *out);
void tg_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* Like tg_tensor_new, for owners that overwrite every element: callers must not rely on
 * the contents (currently zero-filled too, so no uninitialised memory is ever exposed). */
tg_tensor *tg_tensor_empty(tg_ctx *ctx, tg_dtype dt, int ndim, const int64_t *shape);
/* Address of the element at multi-index idx. */
static inline char *tg_tensor_at(const tg_tensor *t, const int64_t *idx) {
    int64_t off = t->offset;
    for (int i = 0; i < t->ndim; i++) off += idx[i] * t->strides[i];
    return (char *)t->buf->data + off * (int64_t)tg_dtype_infos[t->dtype].size;
}
/* Advances a C-order multi-index over shape; false when it wrapped around. */
static inline bool tg_index_next(int ndim, const int64_t *shape, int64_t *idx) {
    for (int i = ndim - 1; i >= 0; i--) {
        if (++idx[i] < shape[i]) return true;
        idx[i] = 0;
    }
    return false;
}
/* Copies src into dst elementwise (same shape; dtypes may differ: converted as by the
 * load/store rules above). dst and src may be the same tensor but must not otherwise
 * overlap in memory. */
void tg_tensor_copy_into(tg_tensor *dst, const tg_tensor *src);

/* Shortest text that reads back as the same double (or float when `single`), always
 * looking like a float literal: "1.0", "0.1", "1e+300", "inf", "-inf", "nan"; in the "C"
 * numeric locale whatever the process's is (print.c). */
#define TG_FLOAT_STR_MAX 40
void tg_format_float(double x, bool single, char *buf, size_t n);

#endif
