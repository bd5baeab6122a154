/* tg_rt.h - the runtime ABI of the C JIT: the only thing generated code and the library
 * share. The library compiles it in (cjit.c) and pastes its text at the top of every
 * generated source (through tg_rt_text.c, made by CMake from this file), so both sides
 * always see the same definitions and the cache key, which hashes the source, covers it.
 *
 * The generated source (one translation unit, or several linked into one shared object)
 * defines one function per compiled graph,
 *     int tg_cj_<k>(tg_rt *rt)          (k: the graph's place in the unit, from 0)
 * returning 0 on success, non-zero when a call-back failed (the library holds the message).
 * It reads and writes values through rt->val (one tg_rt_val per variable of the graph,
 * filled by the library from the memory plan before the call), and calls back into the
 * library for what it does not compute itself: the elementwise loop driver (broadcasting,
 * collapsing axes, splitting over the thread pool), the library's kernel of a node without
 * an emitter, the setup and the results of a generated loop (tg_rt_scan), and the debug
 * check after each node.
 *
 * The generated prelude is this file's text followed by src/core/specfun.h's (the special
 * functions, tg_sf_*, that the C expressions of gammaln ... gammaincc call; its
 * TG_RT_MVEC_HELPERS entries are listed here).
 *
 * Invariants: nothing here depends on the library's private structs; bump TG_RT_ABI when
 * anything in this file changes meaning (the cache key includes it). The helpers compute
 * what the op records' scalar functions compute (src/ops/elemwise.c), without undefined
 * behaviour: integer arithmetic that may overflow goes through uint64_t.
 */
#ifndef TG_RT_H
#define TG_RT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TG_RT_ABI      4
#define TG_RT_MAX_DIMS 8
#define TG_RT_LOOP_MAX 32 /* the most parameters and results of a step run by a generated loop */

/* The linkage of the generated functions: file-local in a source compiled as one unit; where
 * the source is split into several units (TG_RT_SPLIT, defined at the top of each), shared
 * between the units of the one shared object but not exported from it. */
#ifdef TG_RT_SPLIT
#define TG_RT_FN __attribute__((visibility("hidden")))
#else
#define TG_RT_FN static
#endif

/* One value during a call: a strided view (strides in elements, as tg_tensor's). */
typedef struct tg_rt_val {
    char *data;                     /* address of element [0, ..., 0] */
    int64_t shape[TG_RT_MAX_DIMS];  /* extents */
    int64_t stride[TG_RT_MAX_DIMS]; /* in elements, signed */
    int ndim;                       /* rank */
} tg_rt_val;

/* A scalar constant of a generated loop: .i for integer and bool dtypes, .f for float ones
 * (an f32 constant is a double holding its exact value). */
typedef union tg_rt_num {
    int64_t i;
    double f;
} tg_rt_num;

/* An elementwise inner loop over n elements: p[0..nout) are the outputs, then the inputs,
 * each advanced by s[k] bytes per element; k: its scalar constants, in the order of the
 * loop's instructions. */
typedef void (*tg_rt_loop)(int64_t n, char *const *p, const int64_t *s, const tg_rt_num *k);

typedef struct tg_rt tg_rt;

/* A scan or map node whose loop is generated code (emit.c): rt->scan_begin makes its
 * results and sets this up, the generated loop runs the steps, moving the addresses of the
 * step's moving parameters and of its results in body->val from step to step, and
 * rt->scan_end hands the results over. Every address is of element [0, ...] of a value. */
typedef struct tg_rt_scan {
    tg_rt *body;                    /* the step's record (a replica of the step's function); NULL:
                                       the node's kernel has run the loop already */
    int (*step)(tg_rt *body);       /* the step's generated function */
    int64_t steps;                  /* steps to run */
    char *cur[TG_RT_LOOP_MAX];      /* per state not saved nor tapped: its value going in */
    char *nxt[TG_RT_LOOP_MAX];      /* ... and where the step writes the new one (they swap) */
    char *seq[TG_RT_LOOP_MAX];      /* per sequence: row 0 */
    int64_t seqs[TG_RT_LOOP_MAX];   /* ... bytes from one row to the next */
    char *stk[TG_RT_LOOP_MAX];      /* per stacked result (per-step outputs, then saved states):
                                       row 0 */
    int64_t stks[TG_RT_LOOP_MAX];   /* ... bytes from one row to the next */
    char *ring;                     /* taps=: state 0's last depth + 1 values, a row each */
    int64_t rings;                  /* ... bytes from one row to the next */
    char *stop;                     /* until=true: where the step writes its condition */
    tg_rt_val *in[TG_RT_LOOP_MAX];  /* per parameter: its entry in body->val */
    tg_rt_val *out[TG_RT_LOOP_MAX]; /* per result: the entry whose address is where the
                                       step writes it (a scratch one when copied) */
    const tg_rt_val *src[TG_RT_LOOP_MAX]; /* per result: the value copied to its place after
                                             each step (not computed in place), else NULL */
    size_t esize[TG_RT_LOOP_MAX];         /* per result: bytes of an element */
    tg_rt_val scratch;
    void *host; /* the library's state of this loop (opaque here) */
} tg_rt_scan;

struct tg_rt {
    int abi;        /* TG_RT_ABI of the library */
    void *host;     /* the library's call state (opaque here) */
    tg_rt_val *val; /* per variable of the graph (by id) */
    /* Runs `loop` over the output space of instruction `ins` (broadcasting its inputs),
     * passing it the constants k; `cost` a rough per-element cost for the thread split. */
    int (*ew)(tg_rt *rt, int ins, tg_rt_loop loop, const tg_rt_num *k, int cost);
    /* Runs the reduction `loop` of instruction `ins` (a fused node whose outputs reduce):
     * for each output element, loop(0, ...) starts the accumulators acc, loop(1, n, p, s,
     * acc) adds n values along one row of the reduced axes (p, s: the inputs), and
     * loop(2, count, p, NULL, acc) stores the results at p[0..nout) (count: the values
     * reduced); every call passes the constants k. `red` has bit d set for each reduced
     * axis of the iteration space. */
    int (*red)(tg_rt *rt, int ins,
               void (*loop)(int phase, int64_t n, char *const *p, const int64_t *s, double *acc,
                            const tg_rt_num *k),
               const tg_rt_num *k, int cost, unsigned red);
    /* Instruction `ins` is a view: generated code set the address and strides of its
     * output in rt->val (the library set the extents); this makes the library see it. */
    int (*view)(tg_rt *rt, int ins);
    /* Runs instruction `ins` with the library's kernel (nodes without an emitter). */
    int (*kernel)(tg_rt *rt, int ins);
    /* Debug mode: checks instruction `ins` after it ran (NULL otherwise). */
    int (*after)(tg_rt *rt, int ins);
    /* Threads of the pool: generated code leaves products large enough to split over
     * them to rt->kernel (which splits them as the VM does). */
    int nthreads;
    /* CBLAS, row-major, single-threaded (f64: double operands, else float; ta/tb: 1 for
     * a transposed operand): C = alpha op(A) op(B) + beta C, and y = alpha op(A) x + beta y. */
    void (*gemm)(int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                 const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                 int64_t ldc);
    void (*gemv)(int f64, int ta, int64_t m, int64_t n, double alpha, const void *a, int64_t lda,
                 const void *x, int64_t incx, double beta, void *y, int64_t incy);
    /* Loops (tg_rt_scan): scan_begin prepares the loop of instruction `ins`, or runs the
     * node's kernel instead (L->body NULL); scan_end, after `done` steps (failed: the step
     * returned non-zero), hands over the results and releases what scan_begin took. */
    int (*scan_begin)(tg_rt *rt, int ins, tg_rt_scan *L);
    int (*scan_end)(tg_rt *rt, int ins, tg_rt_scan *L, int64_t done, int failed);
};

/* BLAS's view of a 2-D value: 1 with *trans 0 and *ld the row stride when its rows are
 * contiguous, 1 with *trans 1 and *ld the column stride when its columns are, else 0
 * (the value needs a copy: the library's kernel does that). Same rules as the VM's. */
static inline int tg_rt_mat(const tg_rt_val *v, int *trans, int64_t *ld) {
    int64_t r = v->shape[0], c = v->shape[1], sr = v->stride[0], sc = v->stride[1];
    int64_t mc = c > 1 ? c : 1, mr = r > 1 ? r : 1;
    if ((sc == 1 || c == 1) && (r == 1 || sr >= mc)) {
        *trans = 0;
        *ld = r == 1 ? mc : sr;
        return 1;
    }
    if ((sr == 1 || r == 1) && (c == 1 || sc >= mr)) {
        *trans = 1;
        *ld = c == 1 ? mr : sc;
        return 1;
    }
    return 0;
}

/* Whether a value is contiguous in C order. */
static inline int tg_rt_contig(const tg_rt_val *v) {
    int64_t s = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] != 1 && v->stride[d] != s) return 0;
        s *= v->shape[d];
    }
    return 1;
}

/* Copies value src (any strides) into dst, contiguous in C order; es: bytes of an element. */
static inline void tg_rt_copy(char *dst, const tg_rt_val *src, size_t es) {
    int64_t idx[TG_RT_MAX_DIMS] = {0}, n = 1;
    int nd = src->ndim;
    for (int d = 0; d < nd; d++) n *= src->shape[d];
    if (tg_rt_contig(src)) {
        memcpy(dst, src->data, (size_t)n * es);
        return;
    }
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += idx[d] * src->stride[d];
        memcpy(dst + e * (int64_t)es, src->data + off * (int64_t)es, es);
        for (int d = nd - 1; d >= 0 && ++idx[d] == src->shape[d]; d--) idx[d] = 0;
    }
}

#define TG_RT_AFTER(rt, i) ((rt)->after && (rt)->after((rt), (i)))

/* ---- the program ----
 * A graph's function runs a table of steps, one per instruction in order, through
 * tg_rt_run: the table is data, so its compile time grows linearly with the graph (a
 * straight-line function of thousands of calls is slow to optimise), and generated
 * functions take what differs between instructions (variables, numbers, the constants of
 * loops) as arguments, so that instructions with the same code share one function. */
enum { TG_RT_KERNEL = 0, TG_RT_EW = 1, TG_RT_CALL = 2, TG_RT_RED = 3 };
typedef void (*tg_rt_red_loop)(int phase, int64_t n, char *const *p, const int64_t *s, double *acc,
                               const tg_rt_num *k);
/* A generated function of instruction `ins` (a view, a BLAS call): v[k] are the variables
 * it reads and writes, lit[k] its numbers. */
typedef int (*tg_rt_call)(tg_rt *rt, int ins, const int *v, const double *lit);
typedef struct tg_rt_step {
    int kind;     /* TG_RT_KERNEL: rt->kernel; TG_RT_EW: rt->ew(fn.ew, nums + lit); TG_RT_CALL:
                     fn.call(rt, ins, vars + v, lits + lit); TG_RT_RED: rt->red(fn.red,
                     nums + lit) */
    int cost;     /* TG_RT_EW, TG_RT_RED: per-element cost for the thread split */
    unsigned red; /* TG_RT_RED: the reduced axes */
    int v, lit;   /* TG_RT_CALL: offsets of the instruction's arguments in vars and lits;
                     TG_RT_EW, TG_RT_RED: lit is the offset of the loop's constants in nums */
    union {
        tg_rt_loop ew;
        tg_rt_red_loop red;
        tg_rt_call call;
    } fn;
} tg_rt_step;

static inline int tg_rt_run(tg_rt *rt, const tg_rt_step *step, int n, const int *vars,
                            const double *lits, const tg_rt_num *nums) {
    for (int i = 0; i < n; i++) {
        const tg_rt_step *s = &step[i];
        int r;
        if (s->kind == TG_RT_EW)
            r = rt->ew(rt, i, s->fn.ew, nums + s->lit, s->cost);
        else if (s->kind == TG_RT_CALL)
            r = s->fn.call(rt, i, vars + s->v, lits + s->lit);
        else if (s->kind == TG_RT_RED)
            r = rt->red(rt, i, s->fn.red, nums + s->lit, s->cost, s->red);
        else
            r = rt->kernel(rt, i);
        if (r || TG_RT_AFTER(rt, i)) return 1;
    }
    return 0;
}

/* ---- vector math ----
 * With TG_RT_MVEC (the driver defines it where glibc's libmvec is present and links it),
 * libm's functions are declared `simd`, as glibc's own headers do under -ffast-math: GCC
 * then vectorizes loops calling them with libmvec's vector versions (within 4 ulp), with
 * IEEE semantics otherwise kept (no -ffast-math). TG_RT_MVEC_FUNCS lists them (each in
 * double and, suffixed f, in float), and TG_RT_MVEC_HELPERS the helpers below that call
 * them: the emitter reads both, since a loop that calls one gives other bits once it is
 * vectorized than in scalar code. */
#define TG_RT_MVEC_FUNCS(X)                                                                        \
    X(exp) X(exp2) X(expm1) X(log) X(log2) X(log1p) X(sin) X(cos) X(tan) X(tanh) X(erf) X(erfc)
/* clang-format off */
#define TG_RT_MVEC_HELPERS(X)                                                                      \
    X(tg_rt_sigmoid) X(tg_rt_softplus) X(tg_sf_gammaln) X(tg_sf_digamma) X(tg_sf_polygamma)        \
    X(tg_sf_betaln) X(tg_sf_xlogy) X(tg_sf_xlog1py) X(tg_sf_log1mexp) X(tg_sf_logaddexp)           \
    X(tg_sf_erfcx) X(tg_sf_log_ndtr) X(tg_sf_erfinv) X(tg_sf_gammainc) X(tg_sf_gammaincc)
/* clang-format on */
#if defined(TG_RT_MVEC) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TG_RT_SIMD __attribute__((__simd__("notinbranch")))
/* (the parameter is not named f: f##f would paste the argument to itself, tanhtanh) */
#define TG_RT_SIMD_DECL(name)                                                                      \
    TG_RT_SIMD double name(double);                                                                \
    TG_RT_SIMD float name##f(float);
TG_RT_MVEC_FUNCS(TG_RT_SIMD_DECL)
#endif

/* ---- scalar helpers used by the ops' C expressions (c_expr in the op records) ---- */

static inline double tg_rt_fmax(double a, double b) { return a > b || isnan(a) ? a : b; }
static inline double tg_rt_fmin(double a, double b) { return a < b || isnan(a) ? a : b; }
static inline float tg_rt_fmaxf(float a, float b) { return a > b || isnan(a) ? a : b; }
static inline float tg_rt_fminf(float a, float b) { return a < b || isnan(a) ? a : b; }

static inline double tg_rt_sign(double v) {
    return v > 0.0 ? 1.0 : v < 0.0 ? -1.0 : v == 0.0 ? 0.0 : v;
}
static inline float tg_rt_signf(float v) {
    return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v == 0.0f ? 0.0f : v;
}

static inline double tg_rt_sigmoid(double v) {
    if (v >= 0.0) return 1.0 / (1.0 + exp(-v));
    double e = exp(v);
    return e / (1.0 + e);
}
static inline float tg_rt_sigmoidf(float v) { return (float)tg_rt_sigmoid((double)v); }

static inline double tg_rt_softplus(double v) {
    return v > 0.0 ? v + log1p(exp(-v)) : log1p(exp(v));
}
static inline float tg_rt_softplusf(float v) { return (float)tg_rt_softplus((double)v); }

/* int64 with the bits of u (two's complement), without implementation-defined casts. */
static inline int64_t tg_rt_wrap(uint64_t u) {
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)~u - 1;
}

/* Floor division and modulo of integers (NumPy's); by zero gives 0. */
static inline int64_t tg_rt_idiv(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return tg_rt_wrap(0 - (uint64_t)a);
    int64_t q = a / b;
    if (a % b != 0 && (a < 0) != (b < 0)) q--;
    return q;
}
static inline int64_t tg_rt_imod(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && (r < 0) != (b < 0)) r += b;
    return r;
}

/* NumPy's float divmod, computed in double. */
static inline double tg_rt_fdivmod(double a, double b, double *mod) {
    double m = fmod(a, b);
    if (b == 0.0) {
        *mod = m;
        return a / b;
    }
    double d = (a - m) / b;
    if (m != 0.0) {
        if ((b < 0.0) != (m < 0.0)) {
            m += b;
            d -= 1.0;
        }
    } else {
        m = copysign(0.0, b);
    }
    double q;
    if (d != 0.0) {
        q = floor(d);
        if (d - q > 0.5) q += 1.0;
    } else {
        q = copysign(0.0, a / b);
    }
    *mod = m;
    return q;
}
static inline double tg_rt_fdiv(double a, double b) {
    double m;
    return tg_rt_fdivmod(a, b, &m);
}
static inline double tg_rt_fmod(double a, double b) {
    double m;
    tg_rt_fdivmod(a, b, &m);
    return m;
}

static inline int64_t tg_rt_shl(int64_t a, int64_t c) {
    return c < 0 || c >= 64 ? 0 : tg_rt_wrap((uint64_t)a << c);
}
static inline int64_t tg_rt_shr(int64_t a, int64_t c) {
    if (c < 0 || c >= 64) return a < 0 ? -1 : 0;
    return a < 0 ? -1 - ((-1 - a) >> c) : a >> c;
}

static inline int64_t tg_rt_iclip(int64_t x, int64_t lo, int64_t hi) {
    int64_t v = x > lo ? x : lo;
    return v < hi ? v : hi;
}

/* ---- casts (cast's c_expr): float -> int truncates, NaN 0, saturates; int -> int wraps;
 * anything -> bool is != 0; int -> float rounds once ---- */

static inline int64_t tg_rt_f2i(double v, double lo, double hi, int64_t ilo, int64_t ihi) {
    if (isnan(v)) return 0;
    if (v <= lo) return ilo;
    if (v >= hi) return ihi;
    return (int64_t)v;
}
/* int64's range is not exact in double: the bounds are -2^63 and 2^63. */
#define TG_RT_F2I(T, x, lo, hi)                                                                    \
    _Generic((x), float                                                                            \
             : (T)tg_rt_f2i((double)(x), (lo), (hi), (int64_t)(lo), (int64_t)(hi)), double         \
             : (T)tg_rt_f2i((double)(x), (lo), (hi), (int64_t)(lo), (int64_t)(hi)), default        \
             : (T)(x))
#define tg_rt_cast_i8(x)  TG_RT_F2I(int8_t, x, -128.0, 127.0)
#define tg_rt_cast_i16(x) TG_RT_F2I(int16_t, x, -32768.0, 32767.0)
#define tg_rt_cast_i32(x) TG_RT_F2I(int32_t, x, -2147483648.0, 2147483647.0)
#define tg_rt_cast_u8(x)  TG_RT_F2I(uint8_t, x, 0.0, 255.0)
#define tg_rt_cast_i64(x)                                                                          \
    _Generic((x), float                                                                            \
             : tg_rt_f2i64((double)(x)), double                                                    \
             : tg_rt_f2i64((double)(x)), default                                                   \
             : (int64_t)(x))
static inline int64_t tg_rt_f2i64(double v) {
    if (isnan(v)) return 0;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    return (int64_t)v;
}
#define tg_rt_cast_bool(x) ((uint8_t)((x) != 0))
#define tg_rt_cast_f32(x)  ((float)(x))
#define tg_rt_cast_f64(x)  ((double)(x))

#endif
