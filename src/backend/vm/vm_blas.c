/* vm_blas.c - dot and matmul of f32/f64 through CBLAS.
 *
 * Both become a loop over batches of C[M,N] = A[M,K] B[K,N] (dot: one batch, the leading
 * axes of a flattened into M when their strides allow; matmul: NumPy's broadcast batch
 * axes, 1-D operands as a row or a column). Each operand matrix is passed as stored:
 * unit column stride is BLAS's no-transpose with ld = row stride, unit row stride is its
 * transpose with ld = column stride; only an operand that is neither (broadcast, negative
 * or scattered strides) is first copied into the workspace. M = N = 1 is a dot, N = 1 or
 * M = 1 a gemv, anything else a gemm; an empty contraction gives zeros.
 *
 * BLAS runs single-threaded (tg_vm_blas_single_thread at compile time): tgraph's pool
 * is the only one. Large products are split over the pool by rows of C (or columns when
 * C is wide), batches over the pool when there are enough of them.
 *
 * Invariant: results differ from the reference only by BLAS's summation order and, for
 * f32, its single-precision accumulation (the reference accumulates in double).
 */
#include "vm.h"

#include <cblas.h>

#define SPLIT_FLOPS (1 << 21) /* multiply-adds above which the pool is used */

bool tg_vm_blas_ok(const tg_node *n) {
    if ((n->op != TG_OP_DOT && n->op != TG_OP_MATMUL) || n->nin != 2 || n->nout != 1) return false;
    tg_dtype a = (tg_dtype)n->in[0]->type.dtype, b = (tg_dtype)n->in[1]->type.dtype;
    tg_dtype y = (tg_dtype)n->out[0]->type.dtype;
    return a == b && a == y && (a == TG_DT_F32 || a == TG_DT_F64);
}

void tg_vm_blas_single_thread(void) {
#if defined(OPENBLAS_VERSION)
    openblas_set_num_threads(1);
#endif
}

size_t tg_vm_blas_ws(const tg_node *n, const tg_type *in, const tg_type *out, int nthreads) {
    (void)out;
    (void)nthreads;
    int64_t na = 0, nb = 0;
    if (!tg_shape_size(in[0].ndim, in[0].shape, &na) ||
        !tg_shape_size(in[1].ndim, in[1].shape, &nb))
        return 0;
    return ((size_t)na + (size_t)nb) * tg_dtype_size((tg_dtype)n->out[0]->type.dtype) + 128;
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

typedef struct gemm_job {
    bool f64;
    int64_t M, N, K;
    mdesc A, B;
    char *C;
    int64_t ldc;
    bool split_n; /* split columns instead of rows */
} gemm_job;

/* C[m0:m1, n0:n1] of the job. */
static void gemm_part(const gemm_job *J, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    int64_t M = m1 - m0, N = n1 - n0, K = J->K, es = J->f64 ? 8 : 4;
    if (M <= 0 || N <= 0) return;
    const char *a = J->A.p + (J->A.trans ? m0 : m0 * J->A.ld) * es;
    const char *b = J->B.p + (J->B.trans ? n0 * J->B.ld : n0) * es;
    char *c = J->C + (m0 * J->ldc + n0) * es;
    int lda = (int)J->A.ld, ldb = (int)J->B.ld, ldc = (int)J->ldc;
    enum CBLAS_TRANSPOSE ta = J->A.trans ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = J->B.trans ? CblasTrans : CblasNoTrans;
    /* element strides of A's row 0 and B's column 0 (for dot and gemv) */
    int sa = J->A.trans ? lda : 1, sb = J->B.trans ? 1 : ldb;
    if (M == 1 && N == 1) {
        if (J->f64)
            *(double *)c = cblas_ddot((int)K, (const double *)a, sa, (const double *)b, sb);
        else
            *(float *)c = cblas_sdot((int)K, (const float *)a, sa, (const float *)b, sb);
    } else if (N == 1) { /* c[m] = sum_k A(m, k) b[k] */
        int rows = J->A.trans ? (int)K : (int)M, cols = J->A.trans ? (int)M : (int)K;
        if (J->f64)
            cblas_dgemv(CblasRowMajor, ta, rows, cols, 1.0, (const double *)a, lda,
                        (const double *)b, sb, 0.0, (double *)c, ldc);
        else
            cblas_sgemv(CblasRowMajor, ta, rows, cols, 1.0f, (const float *)a, lda,
                        (const float *)b, sb, 0.0f, (float *)c, ldc);
    } else if (M == 1) { /* c[n] = sum_k a[k] B(k, n) */
        enum CBLAS_TRANSPOSE t = J->B.trans ? CblasNoTrans : CblasTrans;
        int rows = J->B.trans ? (int)N : (int)K, cols = J->B.trans ? (int)K : (int)N;
        if (J->f64)
            cblas_dgemv(CblasRowMajor, t, rows, cols, 1.0, (const double *)b, ldb,
                        (const double *)a, sa, 0.0, (double *)c, 1);
        else
            cblas_sgemv(CblasRowMajor, t, rows, cols, 1.0f, (const float *)b, ldb, (const float *)a,
                        sa, 0.0f, (float *)c, 1);
    } else if (J->f64) {
        cblas_dgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0, (const double *)a, lda,
                    (const double *)b, ldb, 0.0, (double *)c, ldc);
    } else {
        cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0f, (const float *)a, lda,
                    (const float *)b, ldb, 0.0f, (float *)c, ldc);
    }
}

static void gemm_task(void *arg, int ith, int nth) {
    const gemm_job *J = arg;
    int64_t lo, hi;
    if (J->split_n) {
        tg_pool_share(J->N, ith, nth, 16, &lo, &hi);
        gemm_part(J, 0, J->M, lo, hi);
    } else {
        tg_pool_share(J->M, ith, nth, 4, &lo, &hi);
        gemm_part(J, lo, hi, 0, J->N);
    }
}

static void gemm_run(gemm_job *J, tg_pool *pool, int nth) {
    if (J->M == 0 || J->N == 0) return;
    if (J->K == 0) { /* an empty sum */
        int64_t es = J->f64 ? 8 : 4;
        for (int64_t m = 0; m < J->M; m++) memset(J->C + m * J->ldc * es, 0, (size_t)(J->N * es));
        return;
    }
    double flops = (double)J->M * (double)J->N * (double)J->K;
    J->split_n = J->N > J->M;
    if (nth > 1 && flops >= SPLIT_FLOPS && (J->split_n ? J->N : J->M) >= 2 * nth)
        tg_pool_run(pool, gemm_task, J);
    else
        gemm_part(J, 0, J->M, 0, J->N);
}

/* ---- batches ---- */

typedef struct batch_job {
    gemm_job g; /* the shared part (pointers of batch 0) */
    int nbat;   /* batch axes */
    int64_t bshape[TG_MAX_DIMS];
    int64_t sa[TG_MAX_DIMS], sb[TG_MAX_DIMS]; /* batch strides (0: broadcast), elements */
    int64_t nbatch, cstride;                  /* batches, and C's elements per batch */
} batch_job;

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
        gemm_run(&J, NULL, 1);
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
    *base = *ws;
    *ws += (bytes + 63) / 64 * 64;
    tg_contiguous_strides(t->ndim, shape, strides);
    return true;
}

tg_status tg_vm_exec_blas(vm_exec *e) {
    const tg_tensor *a = e->in[0], *b = e->in[1];
    tg_tensor *y = e->out[0];
    if (!tg_tensor_is_contiguous(y) || a->ndim == 0 || b->ndim == 0) return TG_EUNSUPPORTED;
    bool mm = e->node->op == TG_OP_MATMUL;
    if (!mm && b->ndim > 2) return TG_EUNSUPPORTED;
    int nth = e->pool ? e->nthreads : 1;
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
    B.cstride = M * N;
    if (B.nbatch == 1 || B.nbat == 0) {
        gemm_run(&B.g, e->pool, nth);
    } else if (nth > 1 && B.nbatch >= nth &&
               (double)B.nbatch * (double)M * (double)N * (double)K >= SPLIT_FLOPS) {
        tg_pool_run(e->pool, batch_task, &B);
    } else if (B.nbatch > 0) {
        batch_range(&B, 0, B.nbatch);
    }
    return TG_OK;
}
