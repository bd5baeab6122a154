/* lapack.c - the core linear-algebra ops, computed by LAPACK (lapack.h): cholesky,
 * solve_triangular, solve, cho_solve, inv, det, slogdet and eigh, with the semantics of
 * numpy.linalg and scipy.linalg, each with its gradient built as ordinary graph.
 *
 * Each is a Blockwise op (blockwise.h): its record's signature names its core, and leading
 * batch dimensions broadcast in front of it, as numpy.linalg's do. Inference comes from the
 * signature (tg_bw_infer), the kernels below compute one block (2-D matrices) and
 * tg_bw_ref runs them over the batch; the gradients are built on the batched values
 * (matmul, the batched transpose) and summed over broadcast batch dimensions (tg_bw_vjp).
 * The right-hand side of the solvers follows NumPy 2: b is a vector, "(m,m),(m)->(m)",
 * only when it is 1-D; otherwise it is a stack of matrices, "(m,m),(m,n)->(m,n)".
 *
 * One record per op. Dtypes: float32 runs LAPACK's s routines, float64 its d routines. As
 * numpy.linalg does, every other input (integers, bool) counts as float64: the result is
 * float32 only when every input is float32 (solve(f32, i8) is f64), and the promote hook
 * casts the inputs to it.
 *
 * Layout: LAPACK is column-major and overwrites its operands; tgraph's values are strided
 * views. Each kernel copies its operands, whatever their strides, into one scratch block
 * (from the kernel's context) in column-major order, runs the routine there, and copies the
 * results out through the outputs' strides: O(n^2) copies beside O(n^3) work, and no
 * transposition reasoning in the calls (uplo 'L' is the lower triangle as NumPy prints it).
 *
 * Reading: cholesky and eigh read only the triangle `lower` names, cho_solve and
 * solve_triangular only their factor's triangle (not its diagonal with unit_diagonal), as
 * LAPACK does; the other entries never matter, so their gradients are zero there.
 *
 * Failures (run-time errors, as numpy.linalg's LinAlgError): cholesky of a matrix that is
 * not positive definite names the leading minor of the first failing order; solve, inv and
 * solve_triangular of an exactly singular matrix name the zero pivot or diagonal entry;
 * eigh of a matrix with a non-finite entry in its triangle is refused (LAPACK's result
 * there is not defined), and a failed convergence is reported. det of a singular matrix
 * is 0 and slogdet's is (0, -inf), with no error. Extents beyond LAPACK's 32-bit integers
 * are an error. NaN entries elsewhere flow through the arithmetic.
 */
#include "blockwise.h"
#include "lapack.h"

#include "../core/blas.h"

#include <limits.h>
#include <math.h>

/* ---- dtypes and inference ---- */

/* numpy.linalg's rule: float32 when every input is, float64 otherwise. */
static tg_status promote_lapack(tg_infer *ic, tg_dtype *want) {
    bool single = true;
    for (int i = 0; i < ic->nin; i++) single = single && ic->in[i].dtype == TG_DT_F32;
    for (int i = 0; i < ic->nin; i++) want[i] = single ? TG_DT_F32 : TG_DT_F64;
    return TG_OK;
}

/* ---- kernels: shared ---- */

/* Every operand and output is f32 or f64, all of one dtype (the promote hook's casts). */
static bool float_operands(tg_kern *k) {
    tg_dtype dt = k->out[0]->dtype;
    bool ok = dt == TG_DT_F32 || dt == TG_DT_F64;
    for (int i = 0; i < k->nin; i++) ok = ok && k->in[i]->dtype == dt;
    for (int i = 1; i < k->nout; i++) ok = ok && k->out[i]->dtype == dt;
    if (!ok) tg_kern_fail(k, TG_EINTERNAL, "operands of different or non-float dtypes");
    return ok;
}

/* An extent as LAPACK's INTEGER. */
static bool lapack_extent(tg_kern *k, int64_t v, tg_lapack_int *out) {
    if (v > INT_MAX) {
        tg_kern_fail(k, TG_ELIMIT, "extent %lld is beyond LAPACK's 32-bit integers", (long long)v);
        return false;
    }
    *out = (tg_lapack_int)v;
    return true;
}

/* The extent of the square matrix t (run-time inference checked it). */
static bool square_extent(tg_kern *k, const tg_tensor *t, tg_lapack_int *n) {
    if (t->ndim != 2 || t->shape[0] != t->shape[1]) {
        tg_kern_fail(k, TG_EINTERNAL, "expected a square matrix");
        return false;
    }
    return lapack_extent(k, t->shape[0], n);
}

/* The scratch of one kernel call: ne elements of es bytes, then ni LAPACK integers. */
typedef struct scratch {
    char *p;     /* the block */
    size_t size; /* its bytes */
    size_t ints; /* offset of the integers */
} scratch;

static bool scratch_get(tg_kern *k, scratch *s, int64_t ne, size_t es, int64_t ni) {
    size_t a, b;
    s->p = NULL;
    if (!tg_size_mul((size_t)ne, es, &a) || !tg_size_mul((size_t)ni, sizeof(tg_lapack_int), &b) ||
        !tg_size_add(a, b, &s->size)) {
        tg_kern_fail(k, TG_ELIMIT, "the operands are too large");
        return false;
    }
    s->ints = a; /* a multiple of es (4 or 8 bytes): aligned for the integers */
    if (s->size == 0) s->size = 1;
    s->p = tg_mem_alloc(k->ctx, s->size);
    if (!s->p) tg_kern_fail(k, TG_ENOMEM, "out of memory (%zu bytes of scratch)", s->size);
    return s->p != NULL;
}

static void scratch_free(tg_kern *k, scratch *s) {
    if (s->p) tg_mem_free(k->ctx, s->p, s->size);
    s->p = NULL;
}

/* Element e of the scratch (of es bytes each), and its integers. */
static void *sc_at(const scratch *s, int64_t e, size_t es) { return s->p + (size_t)e * es; }
static tg_lapack_int *sc_ints(const scratch *s) { return (tg_lapack_int *)(s->p + s->ints); }

/* Rows, columns and their strides of a 1-d (one column) or 2-d tensor. */
static void mat_dims(const tg_tensor *t, int64_t *r, int64_t *c, int64_t *rs, int64_t *cs) {
    *r = t->shape[0];
    *rs = t->strides[0];
    *c = t->ndim == 2 ? t->shape[1] : 1;
    *cs = t->ndim == 2 ? t->strides[1] : 0;
}

/* Whether the matrix t has contiguous rows (strides [n, 1]): its memory, read column-major
 * as LAPACK reads it, is then its transpose. */
static bool rows_contiguous(const tg_tensor *t) {
    return t->ndim == 2 && t->strides[1] == 1 && t->strides[0] == t->shape[1];
}

/* Copies the 1-d or 2-d tensor x into dst, column-major with leading dimension ld. */
static void load_cm(const tg_tensor *x, void *dst, int64_t ld) {
    int64_t r, c, rs, cs;
    mat_dims(x, &r, &c, &rs, &cs);
    if (r == 0 || c == 0) return;
    if (x->dtype == TG_DT_F64) {
        const double *s = tg_tensor_data(x);
        double *d = dst;
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++) d[i + j * ld] = s[i * rs + j * cs];
    } else {
        const float *s = tg_tensor_data(x);
        float *d = dst;
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++) d[i + j * ld] = s[i * rs + j * cs];
    }
}

/* Copies the column-major src (leading dimension ld) into the 1-d or 2-d tensor y. */
static void store_cm(tg_tensor *y, const void *src, int64_t ld) {
    int64_t r, c, rs, cs;
    mat_dims(y, &r, &c, &rs, &cs);
    if (r == 0 || c == 0) return;
    if (y->dtype == TG_DT_F64) {
        const double *s = src;
        double *d = tg_tensor_data(y);
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++) d[i * rs + j * cs] = s[i + j * ld];
    } else {
        const float *s = src;
        float *d = tg_tensor_data(y);
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++) d[i * rs + j * cs] = s[i + j * ld];
    }
}

/* Element (i, j) of the column-major n x n matrix m, as a double. */
static double cm_get(const void *m, bool d, int64_t n, int64_t i, int64_t j) {
    return d ? ((const double *)m)[i + j * n] : ((const float *)m)[i + j * n];
}

/* ---- the LAPACK calls, by dtype (d: float64). Each returns LAPACK's info. ---- */

static tg_lapack_int lp_potrf(bool d, char uplo, tg_lapack_int n, void *a) {
    tg_lapack_int info = 0;
    tg_blas_enter();
    if (d)
        dpotrf_(&uplo, &n, a, &n, &info, 1);
    else
        spotrf_(&uplo, &n, a, &n, &info, 1);
    tg_blas_leave();
    return info;
}

static tg_lapack_int lp_potrs(bool d, char uplo, tg_lapack_int n, tg_lapack_int nrhs, const void *a,
                              void *b) {
    tg_lapack_int info = 0;
    tg_blas_enter();
    if (d)
        dpotrs_(&uplo, &n, &nrhs, a, &n, b, &n, &info, 1);
    else
        spotrs_(&uplo, &n, &nrhs, a, &n, b, &n, &info, 1);
    tg_blas_leave();
    return info;
}

static tg_lapack_int lp_trtrs(bool d, char uplo, char trans, char diag, tg_lapack_int n,
                              tg_lapack_int nrhs, const void *a, void *b) {
    tg_lapack_int info = 0;
    tg_blas_enter();
    if (d)
        dtrtrs_(&uplo, &trans, &diag, &n, &nrhs, a, &n, b, &n, &info, 1, 1, 1);
    else
        strtrs_(&uplo, &trans, &diag, &n, &nrhs, a, &n, b, &n, &info, 1, 1, 1);
    tg_blas_leave();
    return info;
}

static tg_lapack_int lp_gesv(bool d, tg_lapack_int n, tg_lapack_int nrhs, void *a,
                             tg_lapack_int *ipiv, void *b) {
    tg_lapack_int info = 0;
    tg_blas_enter();
    if (d)
        dgesv_(&n, &nrhs, a, &n, ipiv, b, &n, &info);
    else
        sgesv_(&n, &nrhs, a, &n, ipiv, b, &n, &info);
    tg_blas_leave();
    return info;
}

static tg_lapack_int lp_getrf(bool d, tg_lapack_int n, void *a, tg_lapack_int *ipiv) {
    tg_lapack_int info = 0;
    tg_blas_enter();
    if (d)
        dgetrf_(&n, &n, a, &n, ipiv, &info);
    else
        sgetrf_(&n, &n, a, &n, ipiv, &info);
    tg_blas_leave();
    return info;
}

static tg_lapack_int lp_getrs(bool d, char trans, tg_lapack_int n, tg_lapack_int nrhs,
                              const void *a, const tg_lapack_int *ipiv, void *b) {
    tg_lapack_int info = 0;
    tg_blas_enter();
    if (d)
        dgetrs_(&trans, &n, &nrhs, a, &n, ipiv, b, &n, &info, 1);
    else
        sgetrs_(&trans, &n, &nrhs, a, &n, ipiv, b, &n, &info, 1);
    tg_blas_leave();
    return info;
}

/* lwork = -1: the workspace query (its answer in work[0]). */
static tg_lapack_int lp_getri(bool d, tg_lapack_int n, void *a, const tg_lapack_int *ipiv,
                              void *work, tg_lapack_int lwork) {
    tg_lapack_int info = 0;
    tg_blas_enter();
    if (d)
        dgetri_(&n, a, &n, ipiv, work, &lwork, &info);
    else
        sgetri_(&n, a, &n, ipiv, work, &lwork, &info);
    tg_blas_leave();
    return info;
}

/* lwork = liwork = -1: the workspace query (answers in work[0] and iwork[0]). */
static tg_lapack_int lp_syevd(bool d, char uplo, tg_lapack_int n, void *a, void *w, void *work,
                              tg_lapack_int lwork, tg_lapack_int *iwork, tg_lapack_int liwork) {
    tg_lapack_int info = 0;
    char jobz = 'V';
    tg_blas_enter();
    if (d)
        dsyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    else
        ssyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    tg_blas_leave();
    return info;
}

/* A negative info is an argument LAPACK refused: a bug of these kernels. */
static tg_status lapack_refused(tg_kern *k, const char *routine, tg_lapack_int info) {
    return tg_kern_fail(k, TG_EINTERNAL, "LAPACK's %s refused argument %d", routine, (int)-info);
}

/* A workspace size LAPACK answered (a float holding an integer), at least the documented
 * minimum `least`: a float32 answer may have been rounded below it. */
static bool work_size(tg_kern *k, double q, int64_t least, tg_lapack_int *out) {
    int64_t w = !(q <= (double)INT_MAX) ? (int64_t)INT_MAX + 1 : q > 0 ? (int64_t)ceil(q) : 0;
    return lapack_extent(k, w > least ? w : least, out);
}

/* ---- gradients: shared ---- */

static tg_var *tr(tg_graph *g, tg_var *v) { return tg_bw_mT(g, v); }

/* A right-hand side (or its solution, or their cotangents) as a stack of matrices: a
 * vector one (vec: b was 1-D) gains a trailing column axis, which uncol removes again. */
static tg_var *col(tg_graph *g, tg_var *v, bool vec) { return vec ? tg_bw_expand(g, v, -1) : v; }
static tg_var *uncol(tg_graph *g, tg_var *v, bool vec) { return vec ? tg_bw_squeeze(g, v, -1) : v; }

/* v (a batch of scalars) broadcastable against a batch of matrices. */
static tg_var *per_matrix(tg_graph *g, tg_var *v) {
    return tg_bw_expand(g, tg_bw_expand(g, v, -1), -1);
}

/* tril(v, k) when lower, else triu(v, k). */
static tg_var *tri(tg_graph *g, tg_var *v, bool lower, int64_t k) {
    tg_attr a = TG_A_INT("k", k);
    return v ? tg_apply(g, lower ? "tril" : "triu", &v, 1, &a, 1) : NULL;
}

/* v with its off-diagonal entries zeroed. */
static tg_var *diag_part(tg_graph *g, tg_var *v) { return tri(g, tri(g, v, true, 0), false, 0); }

static tg_var *solve_tri(tg_graph *g, tg_var *a, tg_var *b, bool lower, int trans, bool unit) {
    tg_attr at[] = {TG_A_BOOL("lower", lower), TG_A_INT("trans", trans),
                    TG_A_BOOL("unit_diagonal", unit)};
    return a && b ? tg_apply(g, "solve_triangular", (tg_var *[]){a, b}, 2, at, 3) : NULL;
}

/* The gradient of a function of a symmetric matrix that reads only one triangle of its
 * input (cholesky, eigh): given G, a gradient with respect to the symmetric matrix whose
 * symmetric part is right, each entry of the triangle read stands for both of its mirror
 * entries: tri(G + G^T) with the diagonal counted once. */
static tg_var *triangle_grad(tg_graph *g, tg_var *G, bool lower) {
    tg_var *t = tg_add(g, G, tr(g, G));
    return tg_sub(g, tri(g, t, lower, 0), tg_mul(g, tg_literal_float(g, 0.5), diag_part(g, t)));
}

/* ---- cholesky ---- */

static const tg_attr_spec lower_true_attrs[] = {
    {"lower", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 1}},
};

static tg_status core_cholesky(tg_kern *k) {
    const tg_tensor *a = k->in[0];
    tg_tensor *y = k->out[0];
    bool lower = k->attrs[0].i != 0, d = y->dtype == TG_DT_F64;
    size_t es = tg_dtype_size(y->dtype);
    tg_lapack_int n;
    scratch s;
    if (!float_operands(k) || !square_extent(k, a, &n)) return k->status;
    if (n == 0) return TG_OK;
    if (!scratch_get(k, &s, (int64_t)n * n, es, 0)) return k->status;
    /* with contiguous rows in and out (the usual case), the scratch holds a^T as copied and
       the factor comes back as copied: the triangle of a^T that stands for a's `lower` one
       is the other, and the factor of a^T's, read row by row, is a's (the transposed copies
       took a third of a batch of 32 x 32 factorizations) */
    bool flip = rows_contiguous(a) && rows_contiguous(y);
    if (flip)
        memcpy(s.p, tg_tensor_data(a), (size_t)n * (size_t)n * es);
    else
        load_cm(a, s.p, n);
    bool lo = lower != flip; /* the triangle of the scratch potrf reads and writes */
    tg_lapack_int info = lp_potrf(d, lo ? 'L' : 'U', n, s.p);
    /* OpenBLAS's potrf stops only at a pivot <= 0; LAPACK's reference (and NumPy) also at
       a NaN one, which a NaN anywhere in the triangle read makes: the first NaN on the
       factor's diagonal is where the reference stops */
    for (tg_lapack_int i = 0; i < n && info == 0; i++)
        if (isnan(cm_get(s.p, d, n, i, i))) info = i + 1;
    if (info != 0) {
        scratch_free(k, &s);
        if (info < 0) return lapack_refused(k, "potrf", info);
        return tg_kern_fail(k, TG_EINVAL,
                            "the matrix is not positive definite (its leading minor of order %d "
                            "is not)",
                            (int)info);
    }
    for (int64_t j = 0; j < n; j++) { /* LAPACK leaves the other triangle as it was */
        int64_t i0 = lo ? 0 : j + 1, i1 = lo ? j : n;
        if (i1 > i0) memset(sc_at(&s, i0 + j * n, es), 0, (size_t)(i1 - i0) * es);
    }
    if (flip)
        memcpy(tg_tensor_data(y), s.p, (size_t)n * (size_t)n * es);
    else
        store_cm(y, s.p, n);
    scratch_free(k, &s);
    return TG_OK;
}

/* Murray (2016), as PyTensor's CholeskyGrad: with A = L L^T and phi(X) the lower triangle
 * of X with its diagonal halved, S = L^-T phi(L^T gL) L^-1 is the gradient with respect to
 * the symmetric A (its symmetric part), which triangle_grad turns into the gradient of the
 * lower triangle read. The upper factor is the transpose of the lower one of A^T. */
static tg_status core_vjp_cholesky(tg_graph *g, const tg_node *n, tg_var *const *gout,
                                   tg_var **gin) {
    bool lower = n->attrs[0].i != 0;
    tg_var *L = n->out[0], *gL = gout[0];
    if (!lower) {
        L = tr(g, L);
        gL = tr(g, gL);
    }
    tg_var *m = tg_matmul(g, tr(g, L), gL);
    tg_var *phi =
        tg_mul(g, tg_literal_float(g, 0.5), tg_add(g, tri(g, m, true, 0), tri(g, m, true, -1)));
    tg_var *s1 = solve_tri(g, L, phi, true, 1, false);             /* L^-T phi */
    tg_var *s = tr(g, solve_tri(g, L, tr(g, s1), true, 1, false)); /* (L^-T s1^T)^T */
    tg_var *ga = triangle_grad(g, s, true);
    gin[0] = lower ? ga : tr(g, ga);
    return g->status;
}

static tg_status ref_cholesky(tg_kern *k) {
    return tg_bw_ref(k, tg_op_cholesky.signature, core_cholesky);
}
static tg_status vjp_cholesky(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_bw_vjp(g, n, gout, gin, core_vjp_cholesky);
}

const tg_op_def tg_op_cholesky = {
    .name = "cholesky",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_LINALG,
    .attrs = lower_true_attrs,
    .nattrs = (int)TG_COUNTOF(lower_true_attrs),
    .promote = promote_lapack,
    .infer = tg_bw_infer,
    .ref = ref_cholesky,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_cholesky,
    .signature = "(m,m)->(m,m)",
    .core = core_cholesky,
};

/* ---- solve_triangular ---- */

enum { ST_LOWER, ST_TRANS, ST_UNIT };
static const tg_attr_spec solve_tri_attrs[] = {
    [ST_LOWER] = {"lower", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
    [ST_TRANS] = {"trans", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 0}},
    [ST_UNIT] = {"unit_diagonal", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
};

static tg_status infer_solve_tri(tg_infer *ic) {
    int64_t t = ic->attrs[ST_TRANS].i;
    if (t < 0 || t > 2)
        return tg_infer_fail(ic, TG_EINVAL,
                             "trans must be 0 (a x = b), 1 (a^T x = b) or 2 (a^H x = b), got %lld",
                             (long long)t);
    return tg_bw_infer(ic);
}

/* The right-hand side b of a square a ([n] or [n,k]) as LAPACK's extents. */
static bool rhs_extents(tg_kern *k, const tg_tensor *a, const tg_tensor *b, tg_lapack_int *n,
                        tg_lapack_int *nrhs) {
    if (!square_extent(k, a, n)) return false;
    if ((b->ndim != 1 && b->ndim != 2) || b->shape[0] != *n) {
        tg_kern_fail(k, TG_EINTERNAL, "the right-hand side does not match the matrix");
        return false;
    }
    return lapack_extent(k, b->ndim == 2 ? b->shape[1] : 1, nrhs);
}

/* The start of a solver's kernel (a square matrix a and a right-hand side b): loads the matrix into
 * the scratch's first n*n elements and the right-hand side after them (*rhs), column-major, with n
 * pivot integers after both when `pivots`. A matrix with contiguous rows is copied as it is
 * (*flip): the scratch then holds its transpose, which the caller solves with the transposed system
 * (a transposed copy took a third of the time of a batch of 32 x 32 solves). False when the kernel
 * is done: on a failure (k->status) or when n is 0 (nothing to solve). */
/* The n x n matrix a into dst, column-major; a matrix with contiguous rows is copied as it
 * is, and then dst holds its transpose (true). */
static bool load_square(const tg_tensor *a, void *dst, tg_lapack_int n) {
    if (!rows_contiguous(a)) {
        load_cm(a, dst, n);
        return false;
    }
    memcpy(dst, tg_tensor_data(a), (size_t)n * (size_t)n * tg_dtype_size(a->dtype));
    return true;
}

static bool solver_load(tg_kern *k, const tg_tensor *a, const tg_tensor *b, scratch *s, bool pivots,
                        tg_lapack_int *n, tg_lapack_int *nrhs, void **rhs, bool *flip) {
    size_t es = tg_dtype_size(k->out[0]->dtype);
    if (!float_operands(k) || !rhs_extents(k, a, b, n, nrhs) || *n == 0) return false;
    if (!scratch_get(k, s, (int64_t)*n * *n + (int64_t)*n * *nrhs, es, pivots ? *n : 0))
        return false;
    *rhs = sc_at(s, (int64_t)*n * *n, es);
    *flip = load_square(a, s->p, *n);
    load_cm(b, *rhs, *n);
    return true;
}

/* The end of a solver's kernel: stores the solution when LAPACK succeeded (info 0), frees
 * the scratch and refuses a negative info; returns info. */
static tg_lapack_int solver_store(tg_kern *k, scratch *s, const void *rhs, tg_lapack_int n,
                                  const char *routine, tg_lapack_int info) {
    if (info == 0) store_cm(k->out[0], rhs, n);
    scratch_free(k, s);
    if (info < 0) lapack_refused(k, routine, info);
    return info;
}

/* An exactly zero pivot (LAPACK's info > 0) of an LU factorization. */
static tg_status lu_singular(tg_kern *k, tg_lapack_int info) {
    return tg_kern_fail(k, TG_EINVAL,
                        "singular matrix: pivot %d of its LU factorization is exactly zero",
                        (int)info - 1);
}

static tg_status core_solve_tri(tg_kern *k) {
    bool lower = k->attrs[ST_LOWER].i != 0, unit = k->attrs[ST_UNIT].i != 0;
    bool d = k->out[0]->dtype == TG_DT_F64;
    tg_lapack_int n, nrhs;
    scratch s;
    void *rhs;
    bool flip;
    if (!solver_load(k, k->in[0], k->in[1], &s, false, &n, &nrhs, &rhs, &flip)) return k->status;
    /* trans 2 (conjugate transpose) is the transpose for real matrices; a^T (flip) has the
       other triangle and the other op */
    bool lo = lower != flip, t = (k->attrs[ST_TRANS].i != 0) != flip;
    tg_lapack_int info =
        lp_trtrs(d, lo ? 'L' : 'U', t ? 'T' : 'N', unit ? 'U' : 'N', n, nrhs, s.p, rhs);
    if (solver_store(k, &s, rhs, n, "trtrs", info) < 0) return k->status;
    if (info > 0)
        return tg_kern_fail(k, TG_EINVAL, "singular matrix: its diagonal entry [%d, %d] is zero",
                            (int)info - 1, (int)info - 1);
    return TG_OK;
}

/* x = op(A)^-1 b: gb = op(A)^-T gx; g op(A) = -gb x^T, of which A's triangle read (without
 * the diagonal when it is taken as ones) is the gradient. */
static tg_status core_vjp_solve_tri(tg_graph *g, const tg_node *n, tg_var *const *gout,
                                    tg_var **gin) {
    bool lower = n->attrs[ST_LOWER].i != 0, unit = n->attrs[ST_UNIT].i != 0;
    bool vec = n->in[1]->type.ndim == 1;
    int trans = n->attrs[ST_TRANS].i != 0;
    tg_var *a = n->in[0], *x = col(g, n->out[0], vec);
    tg_var *gb = solve_tri(g, a, col(g, gout[0], vec), lower, !trans, unit);
    tg_var *gop = tg_neg(g, tg_matmul(g, gb, tr(g, x)));
    gin[0] = tri(g, trans ? tr(g, gop) : gop, lower, unit ? (lower ? -1 : 1) : 0);
    gin[1] = uncol(g, gb, vec);
    return g->status;
}

static tg_status ref_solve_tri(tg_kern *k) {
    return tg_bw_ref(k, tg_op_solve_triangular.signature, core_solve_tri);
}
static tg_status vjp_solve_tri(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_bw_vjp(g, n, gout, gin, core_vjp_solve_tri);
}

const tg_op_def tg_op_solve_triangular = {
    .name = "solve_triangular",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_LINALG,
    .attrs = solve_tri_attrs,
    .nattrs = (int)TG_COUNTOF(solve_tri_attrs),
    .promote = promote_lapack,
    .infer = infer_solve_tri,
    .ref = ref_solve_tri,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_solve_tri,
    .signature = "(m,m),(m,n?)->(m,n?)",
    .core = core_solve_tri,
};

/* ---- solve ---- */

/* The end of solve's kernel once solver_load (with pivots) has run: LU with partial
 * pivoting of the loaded matrix, then the solution stored. */
static tg_status lu_solve(tg_kern *k, scratch *s, tg_lapack_int n, tg_lapack_int nrhs, void *rhs,
                          bool flip) {
    bool d = k->out[0]->dtype == TG_DT_F64;
    /* a^T (flip): its LU, then (a^T)^T x = b */
    tg_lapack_int info =
        flip ? lp_getrf(d, n, s->p, sc_ints(s)) : lp_gesv(d, n, nrhs, s->p, sc_ints(s), rhs);
    if (flip && info == 0) info = lp_getrs(d, 'T', n, nrhs, s->p, sc_ints(s), rhs);
    if (solver_store(k, s, rhs, n, flip ? "getrf/getrs" : "gesv", info) < 0) return k->status;
    return info > 0 ? lu_singular(k, info) : TG_OK;
}

static tg_status core_solve(tg_kern *k) {
    tg_lapack_int n, nrhs;
    scratch s;
    void *rhs;
    bool flip;
    if (!solver_load(k, k->in[0], k->in[1], &s, true, &n, &nrhs, &rhs, &flip)) return k->status;
    return lu_solve(k, &s, n, nrhs, rhs, flip);
}

/* x = A^-1 b: gb = A^-T gx, gA = -gb x^T. */
static tg_status core_vjp_solve(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    bool vec = n->in[1]->type.ndim == 1;
    tg_var *gx = col(g, gout[0], vec);
    tg_var *gb = tg_apply(g, "solve", (tg_var *[]){tr(g, n->in[0]), gx}, 2, NULL, 0);
    gin[0] = tg_neg(g, tg_matmul(g, gb, tr(g, col(g, n->out[0], vec))));
    gin[1] = uncol(g, gb, vec);
    return g->status;
}

static tg_status ref_solve(tg_kern *k) { return tg_bw_ref(k, tg_op_solve.signature, core_solve); }
static tg_status vjp_solve(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_bw_vjp(g, n, gout, gin, core_vjp_solve);
}

const tg_op_def tg_op_solve = {
    .name = "solve",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_LINALG,
    .promote = promote_lapack,
    .infer = tg_bw_infer,
    .ref = ref_solve,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_solve,
    .signature = "(m,m),(m,n?)->(m,n?)",
    .core = core_solve,
};

/* ---- solve_factored ----
 * solve(A, B) in a program that also computes L = cholesky(A): the specialize rule
 * solve_factored (src/rewrite/specialize.c) makes it solve_factored(A, L, B, lower=) there.
 * cholesky reads one triangle only, so L is A's factor only where A is symmetric: each
 * block whose A is exactly symmetric is solved with L (potrs, O(n^2) per column, where LU
 * would factor A again, twice cholesky's O(n^3)); any other block, NaN entries included,
 * as solve does. The rule runs after the gradients, so the op has none. */

/* Whether the n x n matrix at p (f64 when d, else f32) equals its transpose exactly. */
static bool symmetric(const void *p, tg_lapack_int n, bool d) {
    for (tg_lapack_int j = 0; j < n; j++)
        for (tg_lapack_int i = j + 1; i < n; i++) {
            size_t a = (size_t)j * (size_t)n + (size_t)i, b = (size_t)i * (size_t)n + (size_t)j;
            if (d ? ((const double *)p)[a] != ((const double *)p)[b]
                  : ((const float *)p)[a] != ((const float *)p)[b])
                return false;
        }
    return true;
}

static tg_status core_solve_factored(tg_kern *k) {
    bool lower = k->attrs[0].i != 0, d = k->out[0]->dtype == TG_DT_F64;
    const tg_tensor *c = k->in[1];
    tg_lapack_int n, nrhs;
    scratch s;
    void *rhs;
    bool flip;
    if (!solver_load(k, k->in[0], k->in[2], &s, true, &n, &nrhs, &rhs, &flip)) return k->status;
    if (!symmetric(s.p, n, d)) return lu_solve(k, &s, n, nrhs, rhs, flip);
    /* the factor instead of A (c^T when flipped: as cho_solve) */
    bool cflip = load_square(c, s.p, n);
    tg_lapack_int info = lp_potrs(d, lower != cflip ? 'L' : 'U', n, nrhs, s.p, rhs);
    solver_store(k, &s, rhs, n, "potrs", info);
    return k->status;
}

static tg_status ref_solve_factored(tg_kern *k) {
    return tg_bw_ref(k, tg_op_solve_factored.signature, core_solve_factored);
}

const tg_op_def tg_op_solve_factored = {
    .name = "solve_factored",
    .min_in = 3,
    .max_in = 3,
    .nout = 1,
    .kind = TG_KIND_LINALG,
    .attrs = lower_true_attrs,
    .nattrs = (int)TG_COUNTOF(lower_true_attrs),
    .promote = promote_lapack,
    .infer = tg_bw_infer,
    .ref = ref_solve_factored,
    .grad = TG_GRAD_UNDEFINED,
    .signature = "(m,m),(m,m),(m,n?)->(m,n?)",
    .core = core_solve_factored,
};

/* ---- cho_solve ---- */

static tg_status core_cho_solve(tg_kern *k) {
    bool lower = k->attrs[0].i != 0, d = k->out[0]->dtype == TG_DT_F64;
    tg_lapack_int n, nrhs;
    scratch s;
    void *rhs;
    bool flip;
    if (!solver_load(k, k->in[0], k->in[1], &s, false, &n, &nrhs, &rhs, &flip)) return k->status;
    /* c^T (flip) is the other triangle's factor of the same matrix */
    tg_lapack_int info = lp_potrs(d, lower != flip ? 'L' : 'U', n, nrhs, s.p, rhs);
    solver_store(k, &s, rhs, n, "potrs", info); /* potrs has no info > 0 */
    return k->status;
}

/* x = A^-1 b with A = L L^T (lower) or U^T U: gb = A^-1 gx (A is symmetric) and
 * gA = -gb x^T; through the factor, gL = tril((gA + gA^T) L), gU = triu(U (gA + gA^T)),
 * computed without forming gA. */
static tg_status core_vjp_cho_solve(tg_graph *g, const tg_node *n, tg_var *const *gout,
                                    tg_var **gin) {
    bool lower = n->attrs[0].i != 0, vec = n->in[1]->type.ndim == 1;
    tg_var *c = n->in[0];
    tg_attr at = TG_A_BOOL("lower", lower);
    tg_var *gb = tg_apply(g, "cho_solve", (tg_var *[]){c, col(g, gout[0], vec)}, 2, &at, 1);
    tg_var *x = col(g, n->out[0], vec), *f = tri(g, c, lower, 0); /* the factor potrs reads */
    /* (gA + gA^T) L = -(gb (x^T L) + x (gb^T L)), and L (gA + gA^T) for an upper factor:
       products with the k columns of the right-hand side, O(n^2 k) instead of O(n^3) */
    tg_var *p = lower ? tg_add(g, tg_matmul(g, gb, tg_matmul(g, tr(g, x), f)),
                               tg_matmul(g, x, tg_matmul(g, tr(g, gb), f)))
                      : tg_add(g, tg_matmul(g, tg_matmul(g, f, gb), tr(g, x)),
                               tg_matmul(g, tg_matmul(g, f, x), tr(g, gb)));
    gin[0] = tri(g, tg_neg(g, p), lower, 0);
    gin[1] = uncol(g, gb, vec);
    return g->status;
}

static tg_status ref_cho_solve(tg_kern *k) {
    return tg_bw_ref(k, tg_op_cho_solve.signature, core_cho_solve);
}
static tg_status vjp_cho_solve(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_bw_vjp(g, n, gout, gin, core_vjp_cho_solve);
}

const tg_op_def tg_op_cho_solve = {
    .name = "cho_solve",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_LINALG,
    .attrs = lower_true_attrs,
    .nattrs = (int)TG_COUNTOF(lower_true_attrs),
    .promote = promote_lapack,
    .infer = tg_bw_infer,
    .ref = ref_cho_solve,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_cho_solve,
    .signature = "(m,m),(m,n?)->(m,n?)",
    .core = core_cho_solve,
};

/* ---- inv ---- */

static tg_status core_inv(tg_kern *k) {
    const tg_tensor *a = k->in[0];
    tg_tensor *y = k->out[0];
    bool d = y->dtype == TG_DT_F64;
    size_t es = tg_dtype_size(y->dtype);
    tg_lapack_int n, lwork, piv = 0;
    double q[1];
    float qs[1];
    scratch s;
    if (!float_operands(k) || !square_extent(k, a, &n)) return k->status;
    if (n == 0) return TG_OK;
    /* the workspace query reads neither the matrix nor the pivots */
    tg_lapack_int info =
        lp_getri(d, n, d ? (void *)q : (void *)qs, &piv, d ? (void *)q : (void *)qs, -1);
    if (info < 0) return lapack_refused(k, "getri", info);
    if (!work_size(k, d ? q[0] : qs[0], n, &lwork)) return k->status;
    if (!scratch_get(k, &s, (int64_t)n * n + lwork, es, n)) return k->status;
    load_cm(a, s.p, n);
    info = lp_getrf(d, n, s.p, sc_ints(&s));
    if (info == 0) info = lp_getri(d, n, s.p, sc_ints(&s), sc_at(&s, (int64_t)n * n, es), lwork);
    if (info == 0) store_cm(y, s.p, n);
    scratch_free(k, &s);
    if (info < 0) return lapack_refused(k, "getrf/getri", info);
    return info > 0 ? lu_singular(k, info) : TG_OK;
}

/* Y = A^-1: gA = -Y^T gY Y^T. */
static tg_status core_vjp_inv(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *yt = tr(g, n->out[0]);
    gin[0] = tg_neg(g, tg_matmul(g, tg_matmul(g, yt, gout[0]), yt));
    return g->status;
}

static tg_status ref_inv(tg_kern *k) { return tg_bw_ref(k, tg_op_inv.signature, core_inv); }
static tg_status vjp_inv(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_bw_vjp(g, n, gout, gin, core_vjp_inv);
}

const tg_op_def tg_op_inv = {
    .name = "inv",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_LINALG,
    .promote = promote_lapack,
    .infer = tg_bw_infer,
    .ref = ref_inv,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_inv,
    .signature = "(m,m)->(m,m)",
    .core = core_inv,
};

/* ---- det, slogdet ---- */

/* The LU factorization of the square matrix a: its determinant as sign * exp(logabs),
 * numpy's way (sign ±1, 0 for a singular matrix whose logabs is -inf; a NaN pivot keeps
 * the sign and makes logabs NaN), and also as the product itself, *mant * 2^*expo, kept
 * normalized so that no intermediate overflows or underflows. */
typedef struct lu_det {
    double sign, logabs; /* slogdet */
    double mant;         /* det = mant * 2^expo */
    long expo;
} lu_det;

static tg_status lu_det_of(tg_kern *k, const tg_tensor *a, lu_det *r) {
    bool d = a->dtype == TG_DT_F64;
    size_t es = tg_dtype_size(a->dtype);
    tg_lapack_int n;
    scratch s;
    *r = (lu_det){.sign = 1.0, .mant = 1.0};
    if (!float_operands(k) || !square_extent(k, a, &n)) return k->status;
    if (n == 0) return TG_OK;
    if (!scratch_get(k, &s, (int64_t)n * n, es, n)) return k->status;
    load_cm(a, s.p, n);
    tg_lapack_int info = lp_getrf(d, n, s.p, sc_ints(&s));
    if (info < 0) {
        scratch_free(k, &s);
        return lapack_refused(k, "getrf", info);
    }
    if (info > 0) { /* an exactly zero pivot */
        scratch_free(k, &s);
        *r = (lu_det){.sign = 0.0, .logabs = -INFINITY, .mant = 0.0};
        return TG_OK;
    }
    const tg_lapack_int *ipiv = sc_ints(&s);
    for (int64_t i = 0; i < n; i++) {
        double u = cm_get(s.p, d, n, i, i);
        int e;
        if (ipiv[i] != i + 1) { /* a row swap: both forms change sign */
            r->sign = -r->sign;
            r->mant = -r->mant;
        }
        if (u < 0) r->sign = -r->sign;
        r->logabs += log(fabs(u));
        r->mant = frexp(r->mant * u, &e);
        r->expo += e;
    }
    scratch_free(k, &s);
    return TG_OK;
}

static tg_status core_det(tg_kern *k) {
    lu_det r;
    if (lu_det_of(k, k->in[0], &r) != TG_OK) return k->status;
    /* ldexp saturates to +-inf or 0 like the exact product would */
    double v = r.expo > INT_MAX   ? r.mant * INFINITY
               : r.expo < INT_MIN ? r.mant * 0.0
                                  : ldexp(r.mant, (int)r.expo);
    tg_store_f64(tg_tensor_data(k->out[0]), k->out[0]->dtype, v);
    return TG_OK;
}

/* d = det(A): gA = g d A^-T. */
static tg_status core_vjp_det(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *a = n->in[0];
    tg_var *ainv = tg_apply(g, "inv", &a, 1, NULL, 0);
    gin[0] = tg_mul(g, per_matrix(g, tg_mul(g, gout[0], n->out[0])), tr(g, ainv));
    return g->status;
}

static tg_status ref_det(tg_kern *k) { return tg_bw_ref(k, tg_op_det.signature, core_det); }
static tg_status vjp_det(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_bw_vjp(g, n, gout, gin, core_vjp_det);
}

const tg_op_def tg_op_det = {
    .name = "det",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_LINALG,
    .promote = promote_lapack,
    .infer = tg_bw_infer,
    .ref = ref_det,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_det,
    .signature = "(m,m)->()",
    .core = core_det,
};

static tg_status core_slogdet(tg_kern *k) {
    lu_det r;
    if (lu_det_of(k, k->in[0], &r) != TG_OK) return k->status;
    tg_store_f64(tg_tensor_data(k->out[0]), k->out[0]->dtype, r.sign);
    tg_store_f64(tg_tensor_data(k->out[1]), k->out[1]->dtype, r.logabs);
    return TG_OK;
}

/* The sign is piecewise constant (no gradient); log|det A| has gA = g A^-T. */
static tg_status core_vjp_slogdet(tg_graph *g, const tg_node *n, tg_var *const *gout,
                                  tg_var **gin) {
    tg_var *a = n->in[0];
    if (!gout[1]) {
        gin[0] = tg_grad_zeros_like(g, a);
        return g->status;
    }
    gin[0] = tg_mul(g, per_matrix(g, gout[1]), tr(g, tg_apply(g, "inv", &a, 1, NULL, 0)));
    return g->status;
}

static tg_status ref_slogdet(tg_kern *k) {
    return tg_bw_ref(k, tg_op_slogdet.signature, core_slogdet);
}
static tg_status vjp_slogdet(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_bw_vjp(g, n, gout, gin, core_vjp_slogdet);
}

const tg_op_def tg_op_slogdet = {
    .name = "slogdet",
    .min_in = 1,
    .max_in = 1,
    .nout = 2,
    .kind = TG_KIND_LINALG,
    .promote = promote_lapack,
    .infer = tg_bw_infer,
    .ref = ref_slogdet,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_slogdet,
    .signature = "(m,m)->(),()",
    .core = core_slogdet,
};

/* ---- eigh ---- */

static tg_status core_eigh(tg_kern *k) {
    const tg_tensor *a = k->in[0];
    tg_tensor *w = k->out[0], *v = k->out[1];
    bool lower = k->attrs[0].i != 0, d = w->dtype == TG_DT_F64;
    size_t es = tg_dtype_size(w->dtype);
    tg_lapack_int n, lwork, liwork, iq = 0;
    double q[1];
    float qs[1];
    scratch s;
    if (!float_operands(k) || !square_extent(k, a, &n)) return k->status;
    if (n == 0) return TG_OK;
    void *qp = d ? (void *)q : (void *)qs;
    tg_lapack_int info = lp_syevd(d, lower ? 'L' : 'U', n, qp, qp, qp, -1, &iq, -1);
    if (info < 0) return lapack_refused(k, "syevd", info);
    /* syevd's minimum with eigenvectors: 1 + 6n + 2n^2 and 3 + 5n */
    if (!work_size(k, d ? q[0] : qs[0], 1 + 6 * (int64_t)n + 2 * (int64_t)n * n, &lwork) ||
        !work_size(k, iq, 3 + 5 * (int64_t)n, &liwork))
        return k->status;
    if (!scratch_get(k, &s, (int64_t)n * n + n + lwork, es, liwork)) return k->status;
    load_cm(a, s.p, n);
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = lower ? j : 0; i < (lower ? n : j + 1); i++)
            if (!isfinite(cm_get(s.p, d, n, i, j))) {
                double x = cm_get(s.p, d, n, i, j);
                scratch_free(k, &s);
                return tg_kern_fail(k, TG_EINVAL,
                                    "the matrix has a non-finite entry [%lld, %lld] = %g",
                                    (long long)i, (long long)j, x);
            }
    void *ev = sc_at(&s, (int64_t)n * n, es);
    info = lp_syevd(d, lower ? 'L' : 'U', n, s.p, ev, sc_at(&s, (int64_t)n * n + n, es), lwork,
                    sc_ints(&s), liwork);
    if (info == 0) {
        store_cm(w, ev, n);
        store_cm(v, s.p, n);
    }
    scratch_free(k, &s);
    if (info < 0) return lapack_refused(k, "syevd", info);
    if (info > 0)
        return tg_kern_fail(k, TG_EINVAL, "the eigenvalue algorithm did not converge (info %d)",
                            (int)info);
    return TG_OK;
}

/* A = V diag(w) V^T with distinct eigenvalues: with F_ij = 1 / (w_j - w_i) off the diagonal
 * and 0 on it, G = V (diag(gw) + F o (V^T gV)) V^T is the gradient with respect to the
 * symmetric A, which triangle_grad turns into that of the triangle read. Equal eigenvalues
 * give infinities or NaN (the eigenvectors are not differentiable there). */
static tg_status core_vjp_eigh(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    bool lower = n->attrs[0].i != 0;
    tg_var *a = n->in[0], *w = n->out[0], *v = n->out[1], *gw = gout[0], *G;
    if (!gout[1]) { /* V diag(gw) V^T */
        G = tg_matmul(g, tg_mul(g, v, tg_bw_expand(g, gw, -2)), tr(g, v));
    } else {
        tg_tensor *one = tg_tensor_new(g->ctx, (tg_dtype)a->type.dtype, 0, NULL);
        if (!one) {
            tg_ir_fail(g, TG_ENOMEM, "out of memory");
            return g->status;
        }
        tg_store_f64(tg_tensor_data(one), one->dtype, 1.0);
        tg_var *eye = diag_part(g, tg_grad_broadcast_like(g, tg_ir_const(g, one, 0), a));
        tg_var *m = tg_matmul(g, tr(g, v), gout[1]);
        tg_var *diff = tg_sub(g, tg_bw_expand(g, w, -2), tg_bw_expand(g, w, -1)); /* w_j - w_i */
        /* F o m: m without its diagonal, divided by w_j - w_i (plus 1 on the diagonal,
           where it divides a zero) */
        tg_var *inner = tg_div(g, tg_sub(g, m, tg_mul(g, m, eye)), tg_add(g, diff, eye));
        if (gw) inner = tg_add(g, inner, tg_mul(g, eye, tg_bw_expand(g, gw, -2))); /* diag(gw) */
        G = tg_matmul(g, tg_matmul(g, v, inner), tr(g, v));
    }
    gin[0] = triangle_grad(g, G, lower);
    return g->status;
}

static tg_status ref_eigh(tg_kern *k) { return tg_bw_ref(k, tg_op_eigh.signature, core_eigh); }
static tg_status vjp_eigh(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return tg_bw_vjp(g, n, gout, gin, core_vjp_eigh);
}

const tg_op_def tg_op_eigh = {
    .name = "eigh",
    .min_in = 1,
    .max_in = 1,
    .nout = 2,
    .kind = TG_KIND_LINALG,
    .attrs = lower_true_attrs,
    .nattrs = (int)TG_COUNTOF(lower_true_attrs),
    .promote = promote_lapack,
    .infer = tg_bw_infer,
    .ref = ref_eigh,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_eigh,
    .signature = "(m,m)->(m),(m,m)",
    .core = core_eigh,
};
