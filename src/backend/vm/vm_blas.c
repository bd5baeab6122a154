/* vm_blas.c - dot, matmul and outer of f32/f64 through CBLAS and libxsmm, and the lowered
 * forms gemm, gemv, ger (and their in-place variants; see the section at the end of the
 * file).
 *
 * Both become a loop over batches of C[M,N] = A[M,K] B[K,N] (dot: one batch, the leading
 * axes of a flattened into M when their strides allow; matmul: NumPy's broadcast batch
 * axes, 1-D operands as a row or a column). Each operand matrix is passed as stored:
 * unit column stride is BLAS's no-transpose with ld = row stride, unit row stride is its
 * transpose with ld = column stride; only an operand that is neither (broadcast, negative
 * or scattered strides) is first copied into the workspace. M = N = 1 is a dot, N = 1 or
 * M = 1 a gemv, anything else a gemm (tg_vm_gemm: libxsmm's generated kernel for small
 * products, CBLAS for the rest; chosen for the whole product, so that each thread's part
 * of a split one computes its elements as one thread would); an empty contraction gives
 * zeros.
 *
 * BLAS runs single-threaded (tg_vm_blas_single_thread at compile time): tgraph's pool
 * is the only one. Large products are split over the pool by rows or columns of C, or
 * over a long contraction into a small C with partial products summed in thread order
 * (split_of); batches over the pool when there are enough of them. Every BLAS call is
 * between tg_blas_enter and tg_blas_leave, and nothing is split where those serialize the
 * calls (core/blas.c).
 *
 * Invariant: results differ from the reference only by BLAS's summation order and, for
 * f32, its single-precision accumulation (the reference accumulates in double).
 */
#include "vm.h"

#include "../../core/blas.h"

#include <cblas.h>
#include <pthread.h>
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* How a product is split over the pool (split_of, below). */
#define SPLIT_FLOPS (1 << 21) /* multiply-adds above which the pool is used */
#define SPLIT_BYTES (1 << 19) /* bytes of A, B and C above which the pool is used */

enum { SPLIT_NONE, SPLIT_M, SPLIT_N, SPLIT_K };

/* The BLAS call a lowered op is (its record's `blas`; TG_BLAS_NONE for dot, matmul, outer). */
static int blas_form(int op) { return tg_op_table[op]->blas; }

bool tg_vm_blas_ok(const tg_node *n) {
    if (blas_form(n->op) != TG_BLAS_NONE) {
        tg_dtype y = (tg_dtype)n->out[0]->type.dtype;
        for (int k = 0; k < n->nin; k++)
            if (n->in[k]->type.dtype != y) return false;
        return y == TG_DT_F32 || y == TG_DT_F64;
    }
    if ((n->op != TG_OP_DOT && n->op != TG_OP_MATMUL && n->op != TG_OP_OUTER) || n->nin != 2 ||
        n->nout != 1)
        return false;
    tg_dtype a = (tg_dtype)n->in[0]->type.dtype, b = (tg_dtype)n->in[1]->type.dtype;
    tg_dtype y = (tg_dtype)n->out[0]->type.dtype;
    return a == b && a == y && (a == TG_DT_F32 || a == TG_DT_F64);
}

void tg_vm_blas_single_thread(void) {
#if defined(OPENBLAS_VERSION)
    openblas_set_num_threads(1);
#endif
    tg_blas_rebind(); /* objects loaded since the last compile (core/blas.c) */
}

static bool contraction_of(const tg_node *n, const tg_type *in, const tg_type *out, int64_t *M,
                           int64_t *N, int64_t *K, int64_t *nbatch);
static int split_of(int64_t M, int64_t N, int64_t K, int64_t es, int nth);
static size_t split_ws(int64_t M, int64_t N, int64_t es, int nth);

size_t tg_vm_blas_ws(const tg_node *n, const tg_type *in, const tg_type *out, int nthreads) {
    if (tg_blas_serialized()) nthreads = 1; /* no split (core/blas.c) */
    int64_t na = 0, nb = 0, M, N, K, nbatch;
    int k = blas_form(n->op) != TG_BLAS_NONE ? 1 : 0; /* the two operands (gemm: after C) */
    if (!tg_shape_size(in[k].ndim, in[k].shape, &na) ||
        !tg_shape_size(in[k + 1].ndim, in[k + 1].shape, &nb))
        return 0;
    int64_t es = (int64_t)tg_dtype_size((tg_dtype)n->out[0]->type.dtype);
    size_t ws = ((size_t)na + (size_t)nb) * (size_t)es + 128; /* operands' copies */
    if (contraction_of(n, in, out, &M, &N, &K, &nbatch) && nbatch == 1 &&
        split_of(M, N, K, es, nthreads) == SPLIT_K)
        ws += split_ws(M, N, es, nthreads);
    return ws;
}

/* Whether ger and outer (a y of [M, N]) split their rows over nthreads. */
static bool ger_splits(int64_t M, int64_t total, int nthreads) {
    return nthreads > 1 && total >= (1 << 16) && M >= 2 * (int64_t)nthreads;
}

bool tg_vm_blas_splits(const tg_node *n, const tg_type *in, const tg_type *out, int nthreads) {
    if (tg_blas_serialized()) nthreads = 1;
    int64_t M, N, K, nbatch;
    if ((blas_form(n->op) == TG_BLAS_GER || n->op == TG_OP_OUTER) && out[0].ndim == 2) {
        int64_t total;
        return tg_shape_size(2, out[0].shape, &total) &&
               ger_splits(out[0].shape[0], total, nthreads);
    }
    if (nthreads <= 1 || !contraction_of(n, in, out, &M, &N, &K, &nbatch)) return false;
    int64_t es = (int64_t)tg_dtype_size((tg_dtype)n->out[0]->type.dtype);
    if (nbatch == 1) return split_of(M, N, K, es, nthreads) != SPLIT_NONE;
    return nbatch >= nthreads && (double)nbatch * (double)M * (double)N * (double)K >= SPLIT_FLOPS;
}

/* A matrix as BLAS sees it: element (r, c) at p + (trans ? c * ld + r : r * ld + c). */
typedef struct mdesc {
    const char *p;
    bool trans;
    int64_t ld;
} mdesc;

/* BLAS layout of a rows x cols matrix with strides (sr, sc); false when it needs a copy. */
static bool mat_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc, bool *trans,
                       int64_t *ld) {
    int64_t mc = cols > 1 ? cols : 1, mr = rows > 1 ? rows : 1;
    if ((sc == 1 || cols == 1) && (rows == 1 || sr >= mc)) {
        *trans = false;
        *ld = rows == 1 ? mc : sr;
        return true;
    }
    if ((sr == 1 || rows == 1) && (cols == 1 || sc >= mr)) {
        *trans = true;
        *ld = cols == 1 ? mr : sc;
        return true;
    }
    return false;
}

/* Copies t (any strides) into dst, contiguous in C order. */
static void copy_contig(char *dst, const tg_tensor *t) {
    int64_t n = tg_tensor_size(t), idx[TG_MAX_DIMS] = {0};
    size_t es = tg_dtype_size(t->dtype);
    for (int64_t i = 0; i < n; i++) {
        memcpy(dst + (size_t)i * es, tg_tensor_at(t, idx), es);
        tg_index_next(t->ndim, t->shape, idx);
    }
}

typedef struct acc_job {
    const tg_tensor *c; /* accumulator (broadcasts to the output) */
    char *out;          /* contiguous rows x cols */
    int64_t rows, cols;
    int64_t sr, sc; /* C's strides along the output's rows and columns (0: broadcast) */
    double beta;
    bool f64;
} acc_job;

static void acc_rows(const acc_job *J, int64_t lo, int64_t hi) {
    const char *cb = tg_tensor_data(J->c);
    for (int64_t i = lo; i < hi; i++) {
        if (J->f64) {
            const double *c = (const double *)cb + i * J->sr;
            double *o = (double *)J->out + i * J->cols;
            if (J->beta == 1.0 && J->sc == 1)
                memcpy(o, c, (size_t)J->cols * 8);
            else
                for (int64_t j = 0; j < J->cols; j++) o[j] = J->beta * c[j * J->sc];
        } else {
            const float *c = (const float *)cb + i * J->sr;
            float *o = (float *)J->out + i * J->cols;
            float b = (float)J->beta;
            if (J->beta == 1.0 && J->sc == 1)
                memcpy(o, c, (size_t)J->cols * 4);
            else
                for (int64_t j = 0; j < J->cols; j++) o[j] = b * c[j * J->sc];
        }
    }
}

static void acc_task(void *arg, int ith, int nth) {
    const acc_job *J = arg;
    int64_t lo, hi;
    tg_pool_share(J->rows, ith, nth, 1, &lo, &hi);
    acc_rows(J, lo, hi);
}

/* The job out = beta * broadcast(C) (out rows x cols, contiguous; a vector is one row). */
static void acc_prep(acc_job *J, const tg_tensor *c, tg_tensor *y, double beta) {
    *J = (acc_job){.c = c, .out = tg_tensor_data(y), .beta = beta, .f64 = y->dtype == TG_DT_F64};
    bool vec = y->ndim == 1;
    J->rows = vec ? 1 : y->shape[0];
    J->cols = vec ? y->shape[0] : y->shape[1];
    int64_t s[2] = {0, 0}; /* C's strides aligned to the output's axes */
    for (int d = 0; d < c->ndim; d++) {
        int od = y->ndim - c->ndim + d;
        s[od] = c->shape[d] == 1 ? 0 : c->strides[d];
    }
    J->sr = vec ? 0 : s[0];
    J->sc = vec ? s[0] : s[1];
}

static void acc_fill(vm_exec *e, const tg_tensor *c, tg_tensor *y, double beta) {
    acc_job J;
    acc_prep(&J, c, y, beta);
    if (J.rows * J.cols >= (1 << 16) && e->pool && e->nthreads > 1 && J.rows >= e->nthreads)
        tg_pool_run(e->pool, acc_task, &J);
    else
        acc_rows(&J, 0, J.rows);
}

typedef struct gemm_job {
    bool f64;
    int64_t M, N, K;
    double alpha, beta; /* C = alpha * A B + beta * C (dot and matmul: 1 and 0) */
    mdesc A, B;
    char *C;
    int64_t ldc;
    int split;  /* how the pool shares it (split_of) */
    char *part; /* SPLIT_K: the partial products of threads 1.., M x N each, contiguous */
    /* a kept accumulator read in place of C: C = alpha A B + src->beta * src->c, C being
       output only (beta unused); NULL: C holds the accumulator */
    const acc_job *src;
} gemm_job;

static void gemm_call(bool small, bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                      double beta, void *c, int64_t ldc);
static bool xsmm_src(const gemm_job *J, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                     const char *a, const char *b, char *c, int64_t ldc);

/* c[m0:m1, n0:n1] (c: the part's origin, ldc apart) = the kept accumulator's part. */
static void src_fill(const gemm_job *J, int64_t m0, int64_t m1, int64_t n0, int64_t n1, char *c,
                     int64_t ldc) {
    const acc_job *S = J->src;
    const char *cb = tg_tensor_data(S->c);
    for (int64_t i = m0; i < m1; i++) {
        if (J->f64) {
            const double *s = (const double *)cb + i * S->sr;
            double *o = (double *)c + (i - m0) * ldc - n0;
            for (int64_t j = n0; j < n1; j++) o[j] = S->beta * s[j * S->sc];
        } else {
            const float *s = (const float *)cb + i * S->sr;
            float *o = (float *)c + (i - m0) * ldc - n0, be = (float)S->beta;
            for (int64_t j = n0; j < n1; j++) o[j] = be * s[j * S->sc];
        }
    }
}
static bool gemm_small(int64_t M, int64_t N, int64_t K);

/* c[m0:m1, n0:n1] = alpha * A[m0:m1, k0:k1] B[k0:k1, n0:n1] + be * c (c: ldc apart). */
static void gemm_part(const gemm_job *J, int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t k0,
                      int64_t k1, char *c, int64_t ldc_, double be) {
    int64_t M = m1 - m0, N = n1 - n0, K = k1 - k0, es = J->f64 ? 8 : 4;
    if (M <= 0 || N <= 0) return;
    const char *a = J->A.p + (J->A.trans ? k0 * J->A.ld + m0 : m0 * J->A.ld + k0) * es;
    const char *b = J->B.p + (J->B.trans ? n0 * J->B.ld + k0 : k0 * J->B.ld + n0) * es;
    if (J->B.ld < 0) /* gemv's x with a negative increment: BLAS takes the lowest address,
                        where element k1 - 1 of the part is */
        b = J->B.p + (J->K - k1) * -J->B.ld * es;
    c += (m0 * ldc_ + n0) * es;
    if (J->src) { /* libxsmm reads the accumulator where it is; else it is copied first */
        if (xsmm_src(J, m0, m1, n0, n1, a, b, c, ldc_)) return;
        src_fill(J, m0, m1, n0, n1, c, ldc_);
        be = 1.0;
    }
    int lda = (int)J->A.ld, ldb = (int)J->B.ld, ldc = (int)ldc_;
    enum CBLAS_TRANSPOSE ta = J->A.trans ? CblasTrans : CblasNoTrans;
    /* element strides of A's row 0 and B's column 0 (for dot and gemv) */
    int sa = J->A.trans ? lda : 1, sb = J->B.trans ? 1 : ldb;
    double al = J->alpha;
    /* dot and gemv when the whole product is one (a one-row part of a split gemm stays a
       gemm: each element is computed as on one thread) */
    if (J->M == 1 && J->N == 1 && be == 0.0 && al == 1.0) {
        tg_blas_enter();
        if (J->f64)
            *(double *)c = cblas_ddot((int)K, (const double *)a, sa, (const double *)b, sb);
        else
            *(float *)c = cblas_sdot((int)K, (const float *)a, sa, (const float *)b, sb);
        tg_blas_leave();
    } else if (J->N == 1) { /* c[m] = sum_k A(m, k) b[k] */
        int rows = J->A.trans ? (int)K : (int)M, cols = J->A.trans ? (int)M : (int)K;
        tg_blas_enter();
        if (J->f64)
            cblas_dgemv(CblasRowMajor, ta, rows, cols, al, (const double *)a, lda,
                        (const double *)b, sb, be, (double *)c, ldc);
        else
            cblas_sgemv(CblasRowMajor, ta, rows, cols, (float)al, (const float *)a, lda,
                        (const float *)b, sb, (float)be, (float *)c, ldc);
        tg_blas_leave();
    } else if (J->M == 1) { /* c[n] = sum_k a[k] B(k, n) */
        enum CBLAS_TRANSPOSE t = J->B.trans ? CblasNoTrans : CblasTrans;
        int rows = J->B.trans ? (int)N : (int)K, cols = J->B.trans ? (int)K : (int)N;
        tg_blas_enter();
        if (J->f64)
            cblas_dgemv(CblasRowMajor, t, rows, cols, al, (const double *)b, ldb, (const double *)a,
                        sa, be, (double *)c, 1);
        else
            cblas_sgemv(CblasRowMajor, t, rows, cols, (float)al, (const float *)b, ldb,
                        (const float *)a, sa, (float)be, (float *)c, 1);
        tg_blas_leave();
    } else {
        /* the whole product picks the kernel, so that a part computes each element as
           the whole would (results do not depend on the thread count) */
        gemm_call(gemm_small(J->M, J->N, J->K), J->f64, J->A.trans, J->B.trans, M, N, K, al, a, lda,
                  b, ldb, be, c, ldc);
    }
}

/* ---- rows y = alpha t + beta z ----
 * The pass that finishes a libxsmm product (C = alpha C + beta Z) and a ger's rows from a
 * kept accumulator (beta C + a y). Rows y[i, :] = alpha t[i, :] + beta z[i, :] for i < r
 * (t: tt apart; z with element strides (zr, zc), or none: y = alpha t). t may be y itself,
 * or z may (an accumulator overwritten in place, its row then set aside before y is
 * written), not both. The rows go through the VM's vector kernels of the best instruction
 * set (this file is compiled for the baseline one, where such a loop runs four floats at
 * a time): each product rounded, then the sum, as the scalar formula with contraction off.
 * A z with another column stride than 0 or 1 takes the scalar loop. */
#define ROW_PIECE 1024 /* elements of a row done at once (the scratch for beta z) */

/* The add and mul kernels rows_axpby uses, f32 [0] and f64 [1], chosen once per process
 * (tg_vk_isa_best reads the environment; the results do not depend on the ISA). */
static struct row_kernels {
    tg_vk_fn add, mul;
    tg_vk_args aa, am;
} row_k[2];
static pthread_once_t row_k_once = PTHREAD_ONCE_INIT;

static void row_k_init(void) {
    tg_vk_isa isa = tg_vk_isa_best();
    for (int d = 0; d < 2; d++) {
        tg_dtype dt = d ? TG_DT_F64 : TG_DT_F32, idt[2] = {dt, dt};
        row_k[d].add = tg_vk_select(&tg_op_add, 2, idt, dt, isa, &row_k[d].aa);
        row_k[d].mul = tg_vk_select(&tg_op_mul, 2, idt, dt, isa, &row_k[d].am);
    }
}

static void rows_axpby(bool f64, int64_t r, int64_t N, double alpha, const char *t, int64_t tt,
                       double beta, const char *z, int64_t zr, int64_t zc, char *y, int64_t ldy) {
    int64_t es = f64 ? 8 : 4;
    pthread_once(&row_k_once, row_k_init);
    const struct row_kernels *K = &row_k[f64];
    tg_vk_fn add = K->add, mul = K->mul;
    const tg_vk_args *aa = &K->aa, *am = &K->am;
    const float alf = (float)alpha, bef = (float)beta;
    const void *al = f64 ? (const void *)&alpha : (const void *)&alf;
    const void *be = f64 ? (const void *)&beta : (const void *)&bef;
    _Alignas(64) char bz[ROW_PIECE * 8]; /* beta z[i, :] */
    for (int64_t i = 0; i < r; i++) {
        const char *ti = t + i * tt * es, *zi = z ? z + i * zr * es : NULL;
        char *yi = y + i * ldy * es;
        if (zi && zc != 0 && zc != 1) { /* a strided accumulator row: the plain loop */
            for (int64_t j = 0; j < N; j++) {
                if (f64)
                    ((double *)yi)[j] =
                        alpha * ((const double *)ti)[j] + beta * ((const double *)zi)[j * zc];
                else
                    ((float *)yi)[j] =
                        alf * ((const float *)ti)[j] + bef * ((const float *)zi)[j * zc];
            }
            continue;
        }
        for (int64_t j0 = 0; j0 < N; j0 += ROW_PIECE) { /* pieces of at most bz's size */
            int64_t n = N - j0 < ROW_PIECE ? N - j0 : ROW_PIECE;
            const char *tj = ti + j0 * es, *zj = zi ? zi + j0 * zc * es : NULL;
            char *yj = yi + j0 * es;
            /* beta z: scaled first, or kept aside when alpha t overwrites it */
            const char *w = zj;
            if (zj && (beta != 1.0 || (alpha != 1.0 && zj == yj))) {
                mul(am, zc ? n : 1, bz, (const void *[]){zj, be}, (const int64_t[]){1, 0});
                w = bz;
            }
            const char *u = tj; /* alpha t */
            if (alpha != 1.0) {
                mul(am, n, yj, (const void *[]){tj, al}, (const int64_t[]){1, 0});
                u = yj;
            }
            if (w)
                add(aa, n, yj, (const void *[]){u, w}, (const int64_t[]){1, zc});
            else if (u != yj)
                memcpy(yj, u, (size_t)(n * es));
        }
    }
}

/* ---- the matrix product: libxsmm's generated kernels for small ones, else CBLAS ----
 * libxsmm (Debian: libxsmm-dev) generates machine code for a product of given extents
 * once, then finds it in its registry (about 40 ns); for small and medium products it
 * beats OpenBLAS, whose packing and blocking pay off only for large ones (one thread,
 * AVX-512: 64 products 128x128x128 in f64 1.55x as fast, 256x256x256 f32 1.1-1.3x; a
 * 1024^3 product 2.7x slower, hence the bounds below). Its kernels take column-major
 * operands, so the row-major C = op(A) op(B) is computed as the column-major
 * Cᵀ = op(B)ᵀ op(A)ᵀ: our B is its first operand, our A its second (a transposed A is
 * its TRANS_B); a transposed B has no generated kernel in libxsmm 1.17 and goes to CBLAS.
 * The kernels take alpha = 1 and beta = 0 or 1 (beta 0 never reads C: NaN there does not
 * leak); other scales cost one sweep over C's rows after the product (C = alpha C + beta S,
 * S a kept accumulator read where it is; per row up to two multiplies and an add of the
 * VM's vector kernels), or, for an accumulator overwritten in place, go
 * through a scratch block of rows: T = op(A) op(B) for a few rows, then C = alpha T +
 * beta C. */
#if defined(TG_HAVE_LIBXSMM)
#include <libxsmm.h>

#define XSMM_MAX_DIM 1024               /* extents above this go to CBLAS */
#define XSMM_MAX_MNK ((int64_t)1 << 26) /* and products above 256 x 256 x 1024 */
#define XSMM_SCRATCH                                                                               \
    (32 << 10) /* bytes of T (on the stack of any caller; the                                      \
                  closing pass adds 8 KiB of its own) */

/* The kernel for C[m, n] (column-major) = A[m, k] B[k, n] (+ C when acc), or NULL. */
static void *xsmm_kernel(bool f64, bool tb, int m, int n, int k, int lda, int ldb, int ldc,
                         bool acc) {
    int flags = tb ? LIBXSMM_GEMM_FLAG_TRANS_B : 0;
    /* no prefetch: a kernel made with one would read three more arguments */
    const int pf = LIBXSMM_GEMM_PREFETCH_NONE;
    if (f64) {
        const double one = 1.0, beta = acc ? 1.0 : 0.0;
        return (void *)libxsmm_dmmdispatch(m, n, k, &lda, &ldb, &ldc, &one, &beta, &flags, &pf);
    }
    const float one = 1.0f, beta = acc ? 1.0f : 0.0f;
    return (void *)libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &one, &beta, &flags, &pf);
}

static void xsmm_call(bool f64, void *kern, const void *a, const void *b, void *c) {
    if (f64)
        ((libxsmm_dmmfunction)kern)((const double *)a, (const double *)b, (double *)c);
    else
        ((libxsmm_smmfunction)kern)((const float *)a, (const float *)b, (float *)c);
}

/* C = alpha op(A) op(B) + beta S through libxsmm (xsmm_gemm, below), S being C itself
 * (src NULL; beta 0 does not read it, as in BLAS) or src with element strides (ssr, ssc)
 * (0: broadcast; always read, so that 0 times its NaN stays NaN); false when it has no
 * kernel for it. */

static bool xsmm_gemm(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                      const char *a, int64_t lda, const char *b, int64_t ldb, double beta, char *c,
                      int64_t ldc, const char *src, int64_t ssr, int64_t ssc) {
    if (tb || M < 1 || N < 1 || K < 1) return false;
    int64_t es = f64 ? 8 : 4;
    if (src || beta == 0.0 || (alpha == 1.0 && beta == 1.0)) {
        /* the whole product at once, then at most one pass for the scales: C = alpha C +
           beta S (a kept accumulator is always read: 0 times its NaN stays NaN). Filling C
           with beta S first for a kernel that adds into it measured slower: the fill is a
           pass of its own (a 256 x 256 f32 product with a bias row, 295 against 287 us) */
        bool acc = !src && beta == 1.0;
        void *kern =
            xsmm_kernel(f64, ta, (int)N, (int)M, (int)K, (int)ldb, (int)lda, (int)ldc, acc);
        if (!kern) return false;
        xsmm_call(f64, kern, b, a, c);
        if (src)
            rows_axpby(f64, M, N, alpha, c, ldc, beta, src, ssr, ssc, c, ldc);
        else if (!acc && alpha != 1.0)
            rows_axpby(f64, M, N, alpha, c, ldc, 0.0, NULL, 0, 0, c, ldc);
        return true;
    }
    /* C holds the accumulator and the scales are not 1, 1: blocks of rb rows of the
       product through the scratch T (rb x N, contiguous), then C = alpha T + beta C */
    int64_t rb = XSMM_SCRATCH / (N * es);
    if (rb < 1) return false;
    if (rb > M) rb = M;
    void *full = xsmm_kernel(f64, ta, (int)N, (int)rb, (int)K, (int)ldb, (int)lda, (int)N, false);
    void *tail = M % rb ? xsmm_kernel(f64, ta, (int)N, (int)(M % rb), (int)K, (int)ldb, (int)lda,
                                      (int)N, false)
                        : full;
    if (!full || !tail) return false;
    _Alignas(64) char T[XSMM_SCRATCH];
    for (int64_t m0 = 0; m0 < M; m0 += rb) {
        int64_t r = M - m0 < rb ? M - m0 : rb;
        char *cm = c + m0 * ldc * es;
        xsmm_call(f64, r == rb ? full : tail, b, a + (ta ? m0 : m0 * lda) * es, T);
        rows_axpby(f64, r, N, alpha, T, N, beta, cm, ldc, 1, cm, ldc);
    }
    return true;
}
#endif

/* Whether a product of these extents is small enough for libxsmm. */
static bool gemm_small(int64_t M, int64_t N, int64_t K) {
#if defined(TG_HAVE_LIBXSMM)
    return M <= XSMM_MAX_DIM && N <= XSMM_MAX_DIM && K <= XSMM_MAX_DIM && M * N * K <= XSMM_MAX_MNK;
#else
    (void)M, (void)N, (void)K;
    return false;
#endif
}

void tg_vm_gemm(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                int64_t ldc) {
    gemm_call(gemm_small(M, N, K), f64, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* A product (or a part of one) with libxsmm when small says so and it has a kernel,
 * else with CBLAS. */
static void gemm_call(bool small, bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                      double beta, void *c, int64_t ldc) {
#if defined(TG_HAVE_LIBXSMM)
    if (small && xsmm_gemm(f64, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, NULL, 0, 0))
        return;
#else
    (void)small;
#endif
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    tg_blas_enter();
    if (f64)
        cblas_dgemm(CblasRowMajor, TA, TB, (int)M, (int)N, (int)K, alpha, (const double *)a,
                    (int)lda, (const double *)b, (int)ldb, beta, (double *)c, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, TA, TB, (int)M, (int)N, (int)K, (float)alpha, (const float *)a,
                    (int)lda, (const float *)b, (int)ldb, (float)beta, (float *)c, (int)ldc);
    tg_blas_leave();
}

/* ---- splitting a product over the pool ----
 * A product is split when it is large: at least SPLIT_FLOPS multiply-adds (bound by
 * arithmetic), or at least SPLIT_BYTES of operands and result (bound by memory: a product
 * with a short side, such as X θ or rᵀ X with X 10000 x 20, does few flops per byte and
 * gains from a second core's bandwidth and cache). It is split over
 *  - K, the contraction, when the result is small beside it (M N nth <= K): thread 0
 *    computes C = alpha A[:, K0] B[K0, :] + beta C over its share K0, thread t >= 1 writes
 *    alpha A[:, Kt] B[Kt, :] into its own M x N block of the workspace, and the caller then
 *    adds the blocks to C in thread order: C = ((C0 + P1) + P2) + ... Only this sum
 *    depends on the thread count; on one thread the call is the plain BLAS call;
 *  - else the longer of M (rows of C) and N (its columns), each thread writing its part.
 * Every split shares its extent with split_range, so two products that split the same
 * extent of one matrix (X θ over the rows of X as N, then rᵀ X over the same rows as K)
 * give each thread the same rows: each core reads its own half of X, which stays in its
 * cache from one call to the next. */

/* Thread ith's share [lo, hi) of an extent n: chunks of 16 (whole cache lines of a
 * contiguous f64 vector) when n is long, of 4 when short. */
static void split_range(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    tg_pool_share(n, ith, nth, n >= 64 * (int64_t)nth ? 16 : 4, lo, hi);
}

static int split_of(int64_t M, int64_t N, int64_t K, int64_t es, int nth) {
    if (nth <= 1 || M <= 0 || N <= 0 || K <= 0) return SPLIT_NONE;
    double m = (double)M, n = (double)N, k = (double)K;
    if (m * n * k < SPLIT_FLOPS && (m * k + k * n + m * n) * (double)es < SPLIT_BYTES)
        return SPLIT_NONE;
    if (m * n * nth <= k && K >= 8 * (int64_t)nth) return SPLIT_K;
    if (N > M) return N >= 2 * (int64_t)nth ? SPLIT_N : SPLIT_NONE;
    return M >= 2 * (int64_t)nth ? SPLIT_M : SPLIT_NONE;
}

/* Workspace of a K split: the partial products of threads 1.. */
static size_t split_ws(int64_t M, int64_t N, int64_t es, int nth) {
    return (size_t)(nth - 1) * (size_t)(M * N * es) + 64;
}

static void gemm_task(void *arg, int ith, int nth) {
    const gemm_job *J = arg;
    int64_t lo, hi, es = J->f64 ? 8 : 4;
    switch (J->split) {
    case SPLIT_N:
        split_range(J->N, ith, nth, &lo, &hi);
        gemm_part(J, 0, J->M, lo, hi, 0, J->K, J->C, J->ldc, J->beta);
        break;
    case SPLIT_M:
        split_range(J->M, ith, nth, &lo, &hi);
        gemm_part(J, lo, hi, 0, J->N, 0, J->K, J->C, J->ldc, J->beta);
        break;
    default: /* SPLIT_K */
        split_range(J->K, ith, nth, &lo, &hi);
        if (ith == 0) {
            gemm_part(J, 0, J->M, 0, J->N, lo, hi, J->C, J->ldc, J->beta);
        } else {
            char *p = J->part + (size_t)(ith - 1) * (size_t)(J->M * J->N * es);
            if (hi > lo)
                gemm_part(J, 0, J->M, 0, J->N, lo, hi, p, J->N, 0.0);
            else
                memset(p, 0, (size_t)(J->M * J->N * es));
        }
        break;
    }
}

/* C += P_1 + ... + P_{nth-1}, in that order (a K split's partial products). */
static void add_parts(const gemm_job *J, int nth) {
    int64_t M = J->M, N = J->N;
    for (int t = 1; t < nth; t++)
        for (int64_t m = 0; m < M; m++) {
            if (J->f64) {
                double *c = (double *)J->C + m * J->ldc;
                const double *p = (const double *)J->part + ((int64_t)(t - 1) * M + m) * N;
                for (int64_t n = 0; n < N; n++) c[n] += p[n];
            } else {
                float *c = (float *)J->C + m * J->ldc;
                const float *p = (const float *)J->part + ((int64_t)(t - 1) * M + m) * N;
                for (int64_t n = 0; n < N; n++) c[n] += p[n];
            }
        }
}

/* Part [m0, m1) x [n0, n1) of a job with a kept accumulator (J->src) through libxsmm,
 * reading the accumulator where it is (a, b, c: the part's origins); false when libxsmm
 * does not take it (the caller then copies the accumulator and goes on). */
static bool xsmm_src(const gemm_job *J, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                     const char *a, const char *b, char *c, int64_t ldc) {
#if defined(TG_HAVE_LIBXSMM)
    if (!gemm_small(J->M, J->N, J->K)) return false;
    const acc_job *S = J->src;
    int64_t es = J->f64 ? 8 : 4;
    const char *src = (const char *)tg_tensor_data(S->c) + (m0 * S->sr + n0 * S->sc) * es;
    return xsmm_gemm(J->f64, J->A.trans, J->B.trans, m1 - m0, n1 - n0, J->K, J->alpha, a, J->A.ld,
                     b, J->B.ld, S->beta, c, ldc, src, S->sr, S->sc);
#else
    (void)J, (void)m0, (void)m1, (void)n0, (void)n1, (void)a, (void)b, (void)c, (void)ldc;
    return false;
#endif
}

/* Runs the job, over the pool when it is large (split_of); ws (room bytes, 64-byte
 * aligned) holds a K split's partial products. */
static void gemm_run(gemm_job *J, tg_pool *pool, int nth, char *ws, size_t room) {
    if (J->M == 0 || J->N == 0) return;
    if (J->src && J->K == 0) { /* an empty sum: the accumulator */
        src_fill(J, 0, J->M, 0, J->N, J->C, J->ldc);
        return;
    }
    if (J->K == 0) { /* an empty sum: beta * C (beta is 0 or 1 here: C is already scaled) */
        int64_t es = J->f64 ? 8 : 4;
        if (J->beta == 0.0)
            for (int64_t m = 0; m < J->M; m++)
                memset(J->C + m * J->ldc * es, 0, (size_t)(J->N * es));
        return;
    }
    int64_t es = J->f64 ? 8 : 4;
    J->split = pool ? split_of(J->M, J->N, J->K, es, nth) : SPLIT_NONE;
    if (J->split == SPLIT_K && (!ws || split_ws(J->M, J->N, es, nth) > room))
        J->split = J->N > J->M ? (J->N >= 2 * nth ? SPLIT_N : SPLIT_NONE)
                               : (J->M >= 2 * nth ? SPLIT_M : SPLIT_NONE);
    if (J->split == SPLIT_K && J->src) { /* thread 0 adds to C: C holds the accumulator */
        src_fill(J, 0, J->M, 0, J->N, J->C, J->ldc);
        J->src = NULL;
        J->beta = 1.0;
    }
    if (J->split == SPLIT_NONE) {
        gemm_part(J, 0, J->M, 0, J->N, 0, J->K, J->C, J->ldc, J->beta);
        return;
    }
    J->part = ws;
    int used = tg_pool_run(pool, gemm_task, J);
    if (J->split == SPLIT_K) add_parts(J, used);
}

/* ---- batches ---- */

typedef struct batch_job {
    gemm_job g; /* the shared part (pointers of batch 0) */
    int nbat;   /* batch axes */
    int64_t bshape[TG_MAX_DIMS];
    int64_t sa[TG_MAX_DIMS], sb[TG_MAX_DIMS]; /* batch strides (0: broadcast), elements */
    int64_t nbatch, cstride;                  /* batches, and C's elements per batch */
} batch_job;

/* Whether a batched product is one product with the batch folded into the rows of A and
 * C: b the same for every batch (broadcast), a stored row by row (not transposed) with
 * each batch's rows right after the previous batch's (C is contiguous). A[b, M, K] @
 * B[K, N] is then one gemm of b * M rows, which splits over the pool by rows like any
 * other, instead of b small ones. */
static bool fold_rows(const batch_job *B) {
    if (B->g.A.trans) return false;
    int64_t want = B->g.M * B->g.A.ld; /* elements from one batch's rows to the next */
    for (int t = B->nbat - 1; t >= 0; t--) {
        if (B->bshape[t] == 1) continue;
        if (B->sb[t] != 0 || B->sa[t] != want) return false;
        want *= B->bshape[t];
    }
    return true;
}

static void batch_range(const batch_job *B, int64_t lo, int64_t hi) {
    int64_t es = B->g.f64 ? 8 : 4;
    for (int64_t e = lo; e < hi; e++) {
        int64_t r = e, oa = 0, ob = 0;
        for (int t = B->nbat - 1; t >= 0; t--) {
            int64_t i = r % B->bshape[t];
            r /= B->bshape[t];
            oa += i * B->sa[t];
            ob += i * B->sb[t];
        }
        gemm_job J = B->g;
        J.A.p += oa * es;
        J.B.p += ob * es;
        J.C += e * B->cstride * es;
        gemm_run(&J, NULL, 1, NULL, 0);
    }
}

static void batch_task(void *arg, int ith, int nth) {
    const batch_job *B = arg;
    int64_t lo, hi;
    tg_pool_share(B->nbatch, ith, nth, 1, &lo, &hi);
    batch_range(B, lo, hi);
}

/* Copies operand t into the workspace (contiguous); its strides become the copy's. */
static bool copy_operand(vm_exec *e, char **ws, const tg_tensor *t, const int64_t *shape,
                         int64_t *strides, const char **base) {
    size_t es = tg_dtype_size(t->dtype), bytes = (size_t)tg_tensor_size(t) * es;
    size_t used = (size_t)(*ws - (char *)e->ws);
    if (!e->ws || used + bytes > e->ws_bytes) return false;
    copy_contig(*ws, t);
    e->copies++; /* the profile reports it */
    *base = *ws;
    *ws += (bytes + 63) / 64 * 64;
    tg_contiguous_strides(t->ndim, shape, strides);
    return true;
}

/* Bytes of the workspace after ws (what the operands' copies left). */
static size_t ws_left(const vm_exec *e, const char *ws) {
    if (!e->ws || !ws) return 0;
    size_t used = (size_t)(ws - (const char *)e->ws);
    return used < e->ws_bytes ? e->ws_bytes - used : 0;
}

static tg_status exec_lowered(vm_exec *e);

static tg_status exec_outer(vm_exec *e);

tg_status tg_vm_exec_blas(vm_exec *e) {
    if (blas_form(e->node->op) != TG_BLAS_NONE) return exec_lowered(e);
    if (e->node->op == TG_OP_OUTER) return exec_outer(e);
    const tg_tensor *a = e->in[0], *b = e->in[1];
    tg_tensor *y = e->out[0];
    if (!tg_tensor_is_contiguous(y) || a->ndim == 0 || b->ndim == 0) return TG_EUNSUPPORTED;
    bool mm = e->node->op == TG_OP_MATMUL;
    if (!mm && b->ndim > 2) return TG_EUNSUPPORTED;
    int nth = e->pool && !tg_blas_serialized() ? e->nthreads : 1;
    batch_job B;
    memset(&B, 0, sizeof B);
    B.g.f64 = y->dtype == TG_DT_F64;
    char *ws = e->ws;
    /* strides of the two matrices, per operand (a copy when BLAS cannot take them) */
    const tg_tensor *ops[2] = {a, b};
    int64_t str[2][TG_MAX_DIMS], shp[2][TG_MAX_DIMS];
    const char *base[2];
    for (int k = 0; k < 2; k++) {
        const tg_tensor *t = ops[k];
        base[k] = tg_tensor_data(t);
        for (int d = 0; d < t->ndim; d++) {
            str[k][d] = t->strides[d];
            shp[k][d] = t->shape[d];
        }
    }
    int64_t M, N, K, sra, sca, srb, scb;
    bool a1 = a->ndim == 1, b1 = b->ndim == 1;
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: as given; pass 1: after copying the operands BLAS could not take */
        if (!mm) { /* dot: a's leading axes are the rows, b is [K] or [K, N] */
            K = shp[0][a->ndim - 1];
            M = 1;
            for (int d = 0; d < a->ndim - 1; d++) M *= shp[0][d];
            sca = str[0][a->ndim - 1];
            sra = a->ndim >= 2 ? str[0][a->ndim - 2] : 0;
            bool flat = true; /* the leading axes merge into one of stride sra */
            for (int d = a->ndim - 3; d >= 0; d--)
                flat = flat && (shp[0][d] == 1 || str[0][d] == str[0][d + 1] * shp[0][d + 1]);
            N = b1 ? 1 : shp[1][1];
            srb = str[1][0];
            scb = b1 ? 0 : str[1][1];
            bool oka = flat && mat_layout(M, K, sra, sca, &B.g.A.trans, &B.g.A.ld);
            bool okb = mat_layout(K, N, srb, scb, &B.g.B.trans, &B.g.B.ld);
            if (pass == 0 && (!oka || !okb)) {
                for (int k = 0; k < 2; k++)
                    if (!(k == 0 ? oka : okb) &&
                        !copy_operand(e, &ws, ops[k], shp[k], str[k], &base[k]))
                        return TG_EUNSUPPORTED;
                continue;
            }
            if (!oka || !okb) return TG_EUNSUPPORTED;
            B.nbat = 0;
            B.nbatch = 1;
            break;
        }
        /* matmul: batch axes broadcast; a 1-D a is a row, a 1-D b a column */
        int nba = a1 ? 0 : a->ndim - 2, nbb = b1 ? 0 : b->ndim - 2;
        int nbat = nba > nbb ? nba : nbb;
        M = a1 ? 1 : shp[0][a->ndim - 2];
        K = shp[0][a->ndim - 1];
        N = b1 ? 1 : shp[1][b->ndim - 1];
        sca = str[0][a->ndim - 1];
        sra = a1 ? 0 : str[0][a->ndim - 2];
        srb = b1 ? str[1][0] : str[1][b->ndim - 2];
        scb = b1 ? 0 : str[1][b->ndim - 1];
        B.nbat = nbat;
        B.nbatch = 1;
        for (int t = 0; t < nbat; t++) {
            int ta = t - (nbat - nba), tb = t - (nbat - nbb);
            int64_t ea = ta >= 0 ? shp[0][ta] : 1, eb = tb >= 0 ? shp[1][tb] : 1;
            B.bshape[t] = ea == 1 ? eb : ea;
            B.sa[t] = ea == 1 ? 0 : str[0][ta];
            B.sb[t] = eb == 1 ? 0 : str[1][tb];
            B.nbatch *= B.bshape[t];
        }
        bool oka = mat_layout(M, K, sra, sca, &B.g.A.trans, &B.g.A.ld);
        bool okb = mat_layout(K, N, srb, scb, &B.g.B.trans, &B.g.B.ld);
        if (pass == 0 && (!oka || !okb)) {
            for (int k = 0; k < 2; k++)
                if (!(k == 0 ? oka : okb) &&
                    !copy_operand(e, &ws, ops[k], shp[k], str[k], &base[k]))
                    return TG_EUNSUPPORTED;
            continue;
        }
        if (!oka || !okb) return TG_EUNSUPPORTED;
        break;
    }
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || B.g.A.ld > INT32_MAX ||
        B.g.B.ld > INT32_MAX)
        return TG_EUNSUPPORTED;
    B.g.M = M;
    B.g.N = N;
    B.g.K = K;
    B.g.A.p = base[0];
    B.g.B.p = base[1];
    B.g.C = tg_tensor_data(y);
    B.g.ldc = N;
    B.g.alpha = 1.0;
    B.g.beta = 0.0;
    B.cstride = M * N;
    if (B.nbatch > 1 && fold_rows(&B)) { /* one product: the batch folded into the rows */
        B.g.M = M * B.nbatch;
        B.nbatch = 1;
    }
    if (B.nbatch == 1 || B.nbat == 0) {
        gemm_run(&B.g, e->pool, nth, ws, ws_left(e, ws));
    } else if (nth > 1 && B.nbatch >= nth &&
               (double)B.nbatch * (double)M * (double)N * (double)K >= SPLIT_FLOPS) {
        tg_pool_run(e->pool, batch_task, &B);
    } else if (B.nbatch > 0) {
        batch_range(&B, 0, B.nbatch);
    }
    return TG_OK;
}

/* ---- the lowered forms: gemm, gemv, ger and their in-place variants ----
 * out = alpha * product + beta * C. The accumulator first reaches the output: nothing when
 * beta is 0 (BLAS's beta 0 never reads the output, so no NaN of old content leaks; ger,
 * which only accumulates, starts from zeros), BLAS's own beta when the output is C's
 * memory (in place), else a copy of C broadcast and scaled (then BLAS's beta is 1). A
 * vector operand is passed with its increment whatever its sign; a matrix as stored, or
 * its transpose, when one axis has unit stride and the other a positive one (BLAS has no
 * negative leading dimension), else it is copied into the workspace. */

enum { L_ALPHA, L_BETA, L_TRANS_A, L_TRANS_B };

static double scale_of(const vm_exec *e, int which) {
    double s = e->node->attrs[which == 0 ? L_ALPHA : L_BETA].f;
    int k = 3 + which;
    if (k < e->node->nin) s *= tg_load_f64(tg_tensor_data(e->in[k]), e->in[k]->dtype);
    return s;
}

/* The output is C's own memory (the in-place variants, when the plan gave it). */
static bool same_memory(const tg_tensor *c, const tg_tensor *y) {
    if (c->ndim != y->ndim || tg_tensor_data(c) != tg_tensor_data(y)) return false;
    for (int d = 0; d < c->ndim; d++)
        if (c->shape[d] != y->shape[d] || c->strides[d] != y->strides[d]) return false;
    return true;
}

/* A vector as BLAS takes it: the lowest address and the increment. */
static const char *vec_base(const tg_tensor *t, int *inc) {
    int64_t s = t->shape[0] > 1 ? t->strides[0] : 1;
    *inc = (int)s;
    const char *p = tg_tensor_data(t);
    if (s < 0) p += (t->shape[0] - 1) * s * (int64_t)tg_dtype_size(t->dtype);
    return p;
}

typedef struct ger_job {
    bool f64;
    int64_t M, N;
    double alpha;
    const char *x, *y;
    int incx, incy;
    char *A;            /* contiguous M x N */
    const acc_job *acc; /* row by row: each row of the accumulator first (NULL: A holds it) */
    bool zero;          /* row by row from zeros (beta 0) */
    bool stream;        /* acc: rows written with streaming stores (ger_stream_ok) */
} ger_job;

/* row += a * y (y with increment incy, negative from its far end as in BLAS). Not
 * cblas_?axpy: it returns early when a is 0, and 0 * NaN must stay NaN. */
static void axpy_f64(int64_t n, double a, const double *y, int incy, double *row) {
    if (incy == 1) {
        for (int64_t j = 0; j < n; j++) row[j] += a * y[j];
        return;
    }
    const double *p = incy > 0 ? y : y + (n - 1) * (int64_t)-incy;
    for (int64_t j = 0; j < n; j++) row[j] += a * p[j * incy];
}

static void axpy_f32(int64_t n, float a, const float *y, int incy, float *row) {
    if (incy == 1) {
        for (int64_t j = 0; j < n; j++) row[j] += a * y[j];
        return;
    }
    const float *p = incy > 0 ? y : y + (n - 1) * (int64_t)-incy;
    for (int64_t j = 0; j < n; j++) row[j] += a * p[j * incy];
}

/* Streaming stores for a ger whose output is larger than the caches: each output row is
 * written once, as beta C[i, :] + a y in one pass, without the cache first reading the
 * output's lines (a third of the memory traffic of A + outer(x, y) when A is kept). The
 * same arithmetic as the copy-then-axpy path, so the same bits. */
#define GER_STREAM_BYTES ((int64_t)8 << 20)

/* Whether job J (its acc set) can stream: a large output, C's rows and y contiguous. */
static bool ger_stream_ok(const ger_job *J) {
#if defined(__SSE2__)
    int64_t es = J->f64 ? 8 : 4;
    return J->acc && J->acc->sc == 1 && J->incy == 1 && J->M * J->N * es > GER_STREAM_BYTES &&
           (J->N * es) % 16 == 0 && ((uintptr_t)J->A & 15) == 0;
#else
    (void)J;
    return false;
#endif
}

#if defined(__SSE2__)
static void ger_row_stream(const ger_job *J, int64_t i, double a) {
    const acc_job *C = J->acc;
    const char *cb = (const char *)tg_tensor_data(C->c);
    int64_t n = J->N, j = 0;
    if (J->f64) {
        const double *c = (const double *)cb + i * C->sr, *y = (const double *)J->y;
        double *o = (double *)J->A + i * n, b = C->beta;
        __m128d vb = _mm_set1_pd(b), va = _mm_set1_pd(a);
        for (; j + 2 <= n; j += 2)
            _mm_stream_pd(o + j, _mm_add_pd(_mm_mul_pd(vb, _mm_loadu_pd(c + j)),
                                            _mm_mul_pd(va, _mm_loadu_pd(y + j))));
        for (; j < n; j++) o[j] = b * c[j] + a * y[j];
    } else {
        const float *c = (const float *)cb + i * C->sr, *y = (const float *)J->y;
        float *o = (float *)J->A + i * n, b = (float)C->beta, af = (float)a;
        __m128 vb = _mm_set1_ps(b), va = _mm_set1_ps(af);
        for (; j + 4 <= n; j += 4)
            _mm_stream_ps(o + j, _mm_add_ps(_mm_mul_ps(vb, _mm_loadu_ps(c + j)),
                                            _mm_mul_ps(va, _mm_loadu_ps(y + j))));
        for (; j < n; j++) o[j] = b * c[j] + af * y[j];
    }
}
#endif

/* Row by row: out[i, :] = beta C[i, :] + (alpha x[i]) y, each row still in cache for its
 * axpy, so the matrix is read and written once (a copy then a ger would do it twice). */
static void ger_rows(const ger_job *J, int64_t lo, int64_t hi) {
    int64_t es = J->f64 ? 8 : 4, step = J->incx > 0 ? J->incx : -(int64_t)J->incx;
#if defined(__SSE2__)
    if (J->stream) {
        for (int64_t i = lo; i < hi; i++) {
            const char *px = J->x + (J->incx > 0 ? i : J->M - 1 - i) * step * es;
            double xi = J->f64 ? *(const double *)px : (double)*(const float *)px;
            /* f32: the factor as the axpy path rounds it */
            ger_row_stream(J, i, J->f64 ? J->alpha * xi : (double)((float)J->alpha * (float)xi));
        }
        _mm_sfence(); /* the streamed lines reach memory before the pool's barrier */
        return;
    }
#endif
    const acc_job *C = J->acc;
    for (int64_t i = lo; i < hi; i++) {
        char *row = J->A + i * J->N * es;
        const char *px = J->x + (J->incx > 0 ? i : J->M - 1 - i) * step * es;
        if (C && C->sc == 1 && J->incy == 1) { /* beta C[i, :] + a y on the vector kernels */
            double a = J->f64 ? J->alpha * *(const double *)px
                              : (double)((float)J->alpha * *(const float *)px);
            rows_axpby(J->f64, 1, J->N, C->beta,
                       (const char *)tg_tensor_data(C->c) + i * C->sr * es, 0, a, J->y, 0, 1, row,
                       J->N);
            continue;
        }
        if (C)
            acc_rows(C, i, i + 1);
        else
            memset(row, 0, (size_t)(J->N * es));
        if (J->f64)
            axpy_f64(J->N, J->alpha * *(const double *)px, (const double *)J->y, J->incy,
                     (double *)row);
        else
            axpy_f32(J->N, (float)J->alpha * *(const float *)px, (const float *)J->y, J->incy,
                     (float *)row);
    }
}

static void ger_part(const ger_job *J, int64_t lo, int64_t hi) {
    if (hi <= lo || J->N == 0) return;
    if (J->acc || J->zero) {
        ger_rows(J, lo, hi);
        return;
    }
    int64_t es = J->f64 ? 8 : 4;
    /* rows lo..hi: x's logical elements lo..hi, given by their lowest address */
    int64_t step = J->incx > 0 ? J->incx : -(int64_t)J->incx;
    const char *x = J->x + (J->incx > 0 ? lo : J->M - hi) * step * es;
    char *a = J->A + lo * J->N * es;
    tg_blas_enter();
    if (J->f64)
        cblas_dger(CblasRowMajor, (int)(hi - lo), (int)J->N, J->alpha, (const double *)x, J->incx,
                   (const double *)J->y, J->incy, (double *)a, (int)J->N);
    else
        cblas_sger(CblasRowMajor, (int)(hi - lo), (int)J->N, (float)J->alpha, (const float *)x,
                   J->incx, (const float *)J->y, J->incy, (float *)a, (int)J->N);
    tg_blas_leave();
}

static void ger_task(void *arg, int ith, int nth) {
    const ger_job *J = arg;
    int64_t lo, hi;
    tg_pool_share(J->M, ith, nth, 1, &lo, &hi);
    ger_part(J, lo, hi);
}

/* The axis of A that is contracted (K). */
static int ta_axis(const tg_node *n) { return n->attrs[L_TRANS_A].i != 0 ? 0 : 1; }

/* The product a node computes, from its run-time types: nbatch products C[M,N] = A[M,K]
 * B[K,N] (false for ger and outer, which contract nothing, and for shapes exec rejects). */
static bool contraction_of(const tg_node *n, const tg_type *in, const tg_type *out, int64_t *M,
                           int64_t *N, int64_t *K, int64_t *nbatch) {
    int kind = blas_form(n->op);
    int64_t ny;
    if (kind == TG_BLAS_GER || n->op == TG_OP_OUTER ||
        !tg_shape_size(out[0].ndim, out[0].shape, &ny))
        return false;
    if (kind != TG_BLAS_NONE) { /* gemm, gemv: A is in[1], 2-D */
        const tg_type *a = &in[1], *b = &in[2];
        if (a->ndim != 2 || (kind == TG_BLAS_GEMM && b->ndim != 2)) return false;
        int ka = ta_axis(n);
        *K = a->shape[ka];
        *M = a->shape[1 - ka];
        *N = kind == TG_BLAS_GEMV ? 1 : b->shape[n->attrs[L_TRANS_B].i != 0 ? 0 : 1];
    } else { /* dot, matmul */
        const tg_type *a = &in[0], *b = &in[1];
        if (a->ndim == 0 || b->ndim == 0) return false;
        *K = a->shape[a->ndim - 1];
        *N = b->ndim == 1 ? 1 : b->shape[b->ndim - 1];
        *M = 1;
        if (n->op == TG_OP_DOT)
            for (int d = 0; d < a->ndim - 1; d++) *M *= a->shape[d];
        else if (a->ndim >= 2)
            *M = a->shape[a->ndim - 2];
    }
    *nbatch = *M * *N > 0 ? ny / (*M * *N) : 1;
    return *M >= 0 && *N >= 0 && *K >= 0;
}

static tg_status exec_lowered(vm_exec *e) {
    const tg_node *n = e->node;
    int kind = blas_form(n->op);
    const tg_tensor *c = e->in[0], *a = e->in[1], *b = e->in[2];
    tg_tensor *y = e->out[0];
    if (!tg_tensor_is_contiguous(y)) return TG_EUNSUPPORTED;
    double alpha = scale_of(e, 0), beta = scale_of(e, 1);
    bool read_c = n->attrs[L_BETA].f != 0.0;
    /* alpha 0 would let BLAS skip the product, and with it NaN and inf; an infinite or NaN
     * alpha scales each term before the sum (inf * a - inf * b is NaN where alpha times
     * the finite sum is inf): the reference for both */
    if (alpha == 0.0 || !isfinite(alpha)) return TG_EUNSUPPORTED;
    int nth = e->pool && !tg_blas_serialized() ? e->nthreads : 1;
    bool f64 = y->dtype == TG_DT_F64;
    int64_t es = f64 ? 8 : 4;
    int64_t total = tg_tensor_size(y);
    bool inplace = read_c && same_memory(c, y);
    double bblas = 0.0; /* BLAS's beta */
    bool rows =
        kind == TG_BLAS_GER && !inplace; /* ger from a kept accumulator: row by row, below */
    /* gemm from a kept accumulator: read where it is (gemm_job.src), not copied first */
    bool src = kind == TG_BLAS_GEMM && read_c && !inplace;
    acc_job acc;
    if (rows) {
    } else if (src) {
        acc_prep(&acc, c, y, beta);
    } else if (read_c && inplace) {
        bblas = beta;
        if (beta == 0.0 ||
            kind == TG_BLAS_GER) { /* scale explicitly (0 * NaN is NaN; ger has no beta) */
            if (beta != 1.0) acc_fill(e, c, y, beta);
            bblas = 1.0;
        }
    } else if (read_c) {
        acc_fill(e, c, y, beta);
        bblas = 1.0;
    }
    if (total == 0) return TG_OK;
    if (kind != TG_BLAS_GER && a->shape[ta_axis(n)] == 0) { /* an empty contraction: beta * C */
        if (src)
            acc_fill(e, c, y, beta);
        else if (bblas == 0.0)
            memset(tg_tensor_data(y), 0, (size_t)(total * es));
        else if (bblas != 1.0)
            acc_fill(e, y, y, bblas);
        return TG_OK;
    }
    if (kind == TG_BLAS_GER) { /* ger: A += alpha x yᵀ */
        ger_job J = {.f64 = f64,
                     .M = y->shape[0],
                     .N = y->shape[1],
                     .alpha = alpha,
                     .A = tg_tensor_data(y),
                     .zero = rows && !read_c};
        if (rows && read_c) { /* each row of C, scaled, then the row's axpy, in cache */
            acc_prep(&acc, c, y, beta);
            J.acc = &acc;
        }
        J.x = vec_base(a, &J.incx);
        J.y = vec_base(b, &J.incy);
        J.stream = ger_stream_ok(&J);
        if (J.M > INT32_MAX || J.N > INT32_MAX) return TG_EUNSUPPORTED;
        if (ger_splits(J.M, total, nth))
            tg_pool_run(e->pool, ger_task, &J);
        else
            ger_part(&J, 0, J.M);
        return TG_OK;
    }
    bool ta = n->attrs[L_TRANS_A].i != 0, tb = kind == TG_BLAS_GEMM && n->attrs[L_TRANS_B].i != 0;
    gemm_job J;
    memset(&J, 0, sizeof J);
    J.f64 = f64;
    J.alpha = alpha;
    J.beta = bblas;
    J.src = src ? &acc : NULL;
    /* op(A): [M, K] with strides (sam, sak) */
    int64_t M = a->shape[ta ? 1 : 0], K = a->shape[ta ? 0 : 1];
    int64_t sam = a->strides[ta ? 1 : 0], sak = a->strides[ta ? 0 : 1];
    char *ws = e->ws;
    const char *pa = tg_tensor_data(a);
    if (!mat_layout(M, K, sam, sak, &J.A.trans, &J.A.ld)) {
        int64_t shp[2] = {a->shape[0], a->shape[1]}, str[2];
        if (!copy_operand(e, &ws, a, shp, str, &pa)) return TG_EUNSUPPORTED;
        sam = str[ta ? 1 : 0];
        sak = str[ta ? 0 : 1];
        if (!mat_layout(M, K, sam, sak, &J.A.trans, &J.A.ld)) return TG_EUNSUPPORTED;
    }
    J.A.p = pa;
    J.M = M;
    J.K = K;
    J.C = tg_tensor_data(y);
    if (kind == TG_BLAS_GEMV) { /* gemv: y = alpha op(A) x + beta y */
        int incx;
        const char *px = vec_base(b, &incx);
        if (M > INT32_MAX || K > INT32_MAX || J.A.ld > INT32_MAX) return TG_EUNSUPPORTED;
        /* a column problem: gemm_run splits the rows of op(A) over the pool */
        J.N = 1;
        J.B.p = px;
        J.B.trans = false;
        J.B.ld = incx;
        J.ldc = 1;
        gemm_run(&J, e->pool, nth, ws, ws_left(e, ws));
        return TG_OK;
    }
    int64_t N = b->shape[tb ? 0 : 1];
    int64_t sbk = b->strides[tb ? 1 : 0], sbn = b->strides[tb ? 0 : 1];
    const char *pb = tg_tensor_data(b);
    if (!mat_layout(K, N, sbk, sbn, &J.B.trans, &J.B.ld)) {
        int64_t shp[2] = {b->shape[0], b->shape[1]}, str[2];
        if (!copy_operand(e, &ws, b, shp, str, &pb)) return TG_EUNSUPPORTED;
        sbk = str[tb ? 1 : 0];
        sbn = str[tb ? 0 : 1];
        if (!mat_layout(K, N, sbk, sbn, &J.B.trans, &J.B.ld)) return TG_EUNSUPPORTED;
    }
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || J.A.ld > INT32_MAX || J.B.ld > INT32_MAX)
        return TG_EUNSUPPORTED;
    J.B.p = pb;
    J.N = N;
    J.ldc = N;
    gemm_run(&J, e->pool, nth, ws, ws_left(e, ws));
    return TG_OK;
}

/* outer of two vectors (other ranks: the reference kernel): rows of zeros plus an axpy. */
static tg_status exec_outer(vm_exec *e) {
    const tg_tensor *a = e->in[0], *b = e->in[1];
    tg_tensor *y = e->out[0];
    if (a->ndim != 1 || b->ndim != 1 || !tg_tensor_is_contiguous(y)) return TG_EUNSUPPORTED;
    ger_job J = {.f64 = y->dtype == TG_DT_F64,
                 .M = a->shape[0],
                 .N = b->shape[0],
                 .alpha = 1.0,
                 .A = tg_tensor_data(y),
                 .zero = true};
    if (J.M > INT32_MAX || J.N > INT32_MAX) return TG_EUNSUPPORTED;
    J.x = vec_base(a, &J.incx);
    J.y = vec_base(b, &J.incy);
    int nth = e->pool && !tg_blas_serialized() ? e->nthreads : 1;
    if (ger_splits(J.M, J.M * J.N, nth))
        tg_pool_run(e->pool, ger_task, &J);
    else
        ger_part(&J, 0, J.M);
    return TG_OK;
}
