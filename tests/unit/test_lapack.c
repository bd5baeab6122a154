/* test_lapack.c - the LAPACK ops (src/ops/lapack.c): cholesky, solve_triangular, solve,
 * cho_solve, inv, det, slogdet and eigh.
 *
 *  - dtypes: numpy.linalg's promotion (float32 only when every input is);
 *  - inference: square and alignment errors naming the shapes, '?' extents, trans;
 *  - kernels against hand-computed values and against plain C on seeded random matrices
 *    (L L^T = A, A x = b, A A^-1 = I, det by Gaussian elimination, A v = w v with
 *    orthonormal v), on views with negative strides, in f32 and f64, 0 x 0 matrices, and a
 *    200 x 200 one (OpenBLAS's blocked factorizations);
 *  - failures as NumPy's: not positive definite (naming the leading minor), singular
 *    solve, inv and solve_triangular, det and slogdet of a singular matrix (0; (0, -inf)),
 *    eigh of a non-finite matrix;
 *  - every gradient with tg_grad_check on well-conditioned matrices (SPD, general,
 *    triangular; both triangles, every trans, unit diagonals, 1-d and 2-d right-hand
 *    sides, '?' extents) in f64 and f32;
 *  - the same graph in the reference, vm and c backends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops_testutil.h"
#include "ops/blockwise.h"

#define F32 TG_DT_F32
#define F64 TG_DT_F64
#define Q   TG_DIM_UNKNOWN

/* ---- matrices ---- */

typedef struct rng {
    uint64_t s;
} rng;

static double urand(rng *r) { /* uniform in [-1, 1) (splitmix64) */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}

#define NMAX 8

/* An n x n matrix of values in [-1, 1) plus `diag` on the diagonal. */
static void random_mat(uint64_t seed, int n, double diag, double *m) {
    rng r = {seed};
    for (int i = 0; i < n * n; i++) m[i] = urand(&r);
    for (int i = 0; i < n; i++) m[i * n + i] += diag;
}

/* X X^T + n I for a random X: symmetric positive definite, well conditioned. */
static void spd_mat(uint64_t seed, int n, double *a) {
    double x[NMAX * NMAX];
    random_mat(seed, n, 0.0, x);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = i == j ? n : 0.0;
            for (int k = 0; k < n; k++) s += x[i * n + k] * x[j * n + k];
            a[i * n + j] = s;
        }
}

/* A symmetric matrix with well separated eigenvalues (near 0, 3, 6, ...). */
static void sym_mat(uint64_t seed, int n, double *a) {
    double x[NMAX * NMAX];
    random_mat(seed, n, 0.0, x);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) a[i * n + j] = 0.25 * (x[i * n + j] + x[j * n + i]);
    for (int i = 0; i < n; i++) a[i * n + i] += 3.0 * i;
}

static tg_tensor *mat(tg_dtype dt, int r, int c, const double *v) {
    return mk_tensor(dt, 2, (const int64_t[]){r, c}, v);
}

static tg_tensor *vec(tg_dtype dt, int n, const double *v) {
    return mk_tensor(dt, 1, (const int64_t[]){n}, v);
}

static double at2(const tg_tensor *t, int64_t i, int64_t j) {
    return tg_tensor_get_f64(t, i * t->shape[1] + j);
}

/* ---- running ops ---- */

/* Runs op on in (run-time inference, then the reference kernel) with nout outputs; out[]
 * receives them. Returns the status, the message in msg. */
static tg_status run_multi(const tg_op_def *op, tg_tensor *const *in, int nin, const tg_aval *attrs,
                           tg_tensor **out, char *msg) {
    tg_type tin[4], touts[TG_MAX_OUTS];
    for (int i = 0; i < nin; i++) tin[i] = type_of(in[i]);
    tg_infer ic = {.op = op,
                   .in = tin,
                   .nin = nin,
                   .attrs = attrs,
                   .out = touts,
                   .nout = op->nout,
                   .runtime = true};
    tg_status st = op->infer(&ic);
    if (st != TG_OK) {
        snprintf(msg, 512, "%s", ic.msg);
        return st;
    }
    for (int o = 0; o < ic.nout; o++) {
        out[o] = tg_tensor_new(tg_ctx_default(), (tg_dtype)touts[o].dtype, touts[o].ndim,
                               touts[o].shape);
        assert_non_null(out[o]);
    }
    tg_kern k = {.ctx = tg_ctx_default(),
                 .attrs = attrs,
                 .in = in,
                 .nin = nin,
                 .out = out,
                 .nout = ic.nout,
                 .out_type = touts};
    st = op->ref(&k);
    if (st != TG_OK) {
        snprintf(msg, 512, "%s", k.msg);
        for (int o = 0; o < ic.nout; o++) tg_tensor_free(out[o]);
    }
    return st;
}

static tg_tensor *run1(const tg_op_def *op, tg_tensor *const *in, int nin, const tg_aval *attrs) {
    tg_tensor *out[TG_MAX_OUTS] = {0};
    char msg[512];
    tg_status st = run_multi(op, in, nin, attrs, out, msg);
    if (st != TG_OK) print_error("%s: %s\n", op->name, msg);
    assert_int_equal(st, TG_OK);
    return out[0];
}

/* Expects op on in to fail with status st and `sub` in its message. */
static void expect_fail(const tg_op_def *op, tg_tensor *const *in, int nin, const tg_aval *attrs,
                        tg_status st, const char *sub) {
    tg_tensor *out[TG_MAX_OUTS] = {0};
    char msg[512] = "";
    tg_status got = run_multi(op, in, nin, attrs, out, msg);
    if (got != st || !strstr(msg, sub))
        print_error("%s: status %d, message '%s'; want '%s'\n", op->name, got, msg, sub);
    assert_int_equal(got, st);
    assert_non_null(strstr(msg, sub));
}

static const tg_aval LOWER[] = {AV_BOOL(1)};
static const tg_aval UPPER[] = {AV_BOOL(0)};

static void free_all(tg_tensor **t, int n) {
    for (int i = 0; i < n; i++) tg_tensor_free(t[i]);
}

/* ---- dtypes and inference ---- */

static void test_promote(void **state) {
    (void)state;
    const struct {
        tg_dtype a, b, want;
    } cases[] = {
        {F32, F32, F32},
        {F64, F64, F64},
        {F32, F64, F64},
        {F32, TG_DT_I8, F64},
        {TG_DT_I32, F32, F64},
        {TG_DT_BOOL, F32, F64},
        {TG_DT_I64, TG_DT_U8, F64},
    };
    for (size_t c = 0; c < TG_COUNTOF(cases); c++) {
        tg_type in[2] = {TY(cases[c].a, 2, 2), TY(cases[c].b, 2)};
        tg_dtype want[2];
        tg_type outs[TG_MAX_OUTS];
        tg_infer ic = {.op = &tg_op_solve, .in = in, .nin = 2, .out = outs, .nout = 1};
        assert_int_equal(tg_op_solve.promote(&ic, want), TG_OK);
        assert_int_equal(want[0], cases[c].want);
        assert_int_equal(want[1], cases[c].want);
    }
    /* one input: integers become f64 (numpy.linalg.det of an int matrix is float64) */
    tg_graph *g = tg_graph_new(NULL, "t");
    tg_var *a = tg_input(g, "a", TG_DT_I32, 2, (const int64_t[]){2, 2});
    tg_var *d = tg_apply(g, "det", &a, 1, NULL, 0);
    assert_non_null(d);
    assert_int_equal(d->type.dtype, F64);
    tg_var *s = tg_input(g, "s", F32, 2, (const int64_t[]){2, 2});
    tg_var *c = tg_apply(g, "cholesky", &s, 1, NULL, 0);
    assert_int_equal(c->type.dtype, F32);
    tg_graph_free(g);
}

static void test_signature(void **state) {
    (void)state;
    tg_bw_sig sig;
    assert_true(tg_bw_parse("(m?,n),(n,p?)->(m?,p?)", &sig));
    assert_int_equal(sig.nin, 2);
    assert_int_equal(sig.nout, 1);
    assert_int_equal(sig.nnames, 3);
    assert_int_equal(sig.rank[0], 2);
    assert_int_equal(sig.opt[0], 1u);
    assert_int_equal(sig.opt[1], 2u);
    assert_int_equal(sig.dim[1][0], sig.dim[0][1]);
    assert_true(tg_bw_parse("(m,m)->(),()", &sig));
    assert_int_equal(sig.nout, 2);
    assert_int_equal(sig.rank[1], 0);
    const char *bad[] = {"", "(m,m)", "(m,m)->", "(m,,m)->()", "(m)->(m)x", "(M)->()"};
    for (size_t i = 0; i < TG_COUNTOF(bad); i++) assert_false(tg_bw_parse(bad[i], &sig));
    /* optional names: a 1-d b of solve is a vector (n absent), a 2-d one a matrix */
    int core[3], bad_in;
    uint32_t absent;
    assert_true(tg_bw_parse(tg_op_solve.signature, &sig));
    assert_true(tg_bw_core_ranks(&sig, (const int[]){3, 1}, core, &absent, &bad_in));
    assert_int_equal(core[0], 2);
    assert_int_equal(core[1], 1);
    assert_int_equal(core[2], 1);
    assert_true(tg_bw_core_ranks(&sig, (const int[]){2, 3}, core, &absent, &bad_in));
    assert_int_equal(core[1], 2);
    assert_int_equal(core[2], 2);
    assert_false(tg_bw_core_ranks(&sig, (const int[]){1, 1}, core, &absent, &bad_in));
    assert_int_equal(bad_in, 0);
}

static void test_infer(void **state) {
    (void)state;
    const tg_aval st0[] = {AV_BOOL(0), AV_INT(0), AV_BOOL(0)};
    CHECK_INFER(tg_op_cholesky, LOWER, "f64[3,3]", TY(F64, 3, 3));
    CHECK_INFER(tg_op_cholesky, LOWER, "f32[4,4]", TY(F32, Q, 4));
    CHECK_INFER(tg_op_cholesky, LOWER, "f64[?,?]", TY(F64, Q, Q));
    CHECK_INFER(tg_op_inv, NULL, "f64[2,2]", TY(F64, 2, Q));
    CHECK_INFER(tg_op_det, NULL, "f64[]", TY(F64, 5, 5));
    CHECK_INFER(tg_op_solve, NULL, "f64[3]", TY(F64, 3, 3), TY(F64, 3));
    CHECK_INFER(tg_op_solve, NULL, "f64[3,?]", TY(F64, 3, Q), TY(F64, Q, Q));
    CHECK_INFER(tg_op_solve_triangular, st0, "f32[2,5]", TY(F32, 2, 2), TY(F32, 2, 5));
    CHECK_INFER(tg_op_cho_solve, LOWER, "f64[4,1]", TY(F64, 4, 4), TY(F64, 4, 1));
    CHECK_INFER_FAIL(tg_op_cholesky, LOWER, TG_ESHAPE,
                     "core shape [3,4] of input 0 does not match the signature (m,m)->(m,m): m "
                     "is 3 and 4",
                     TY(F64, 3, 4));
    CHECK_INFER_FAIL(tg_op_eigh, LOWER, TG_ESHAPE,
                     "input 0 (f64[3]) has 1 dimensions, fewer than its core in the signature "
                     "(m,m)->(m),(m,m)",
                     TY(F64, 3));
    CHECK_INFER_FAIL(tg_op_det, NULL, TG_ESHAPE, "core shape [2,3] of input 0", TY(F32, 2, 2, 3));
    CHECK_INFER_FAIL(tg_op_solve, NULL, TG_ESHAPE,
                     "core shapes [3,3] (input 0) and [4] (input 1) do not match the signature "
                     "(m,m),(m,n?)->(m,n?): m is 3 and 4",
                     TY(F64, 3, 3), TY(F64, 4));
    CHECK_INFER_FAIL(tg_op_solve, NULL, TG_ESHAPE, "core shapes [?,3] (input 0) and [2,5]",
                     TY(F64, Q, 3), TY(F64, 2, 5));
    CHECK_INFER_FAIL(tg_op_solve, NULL, TG_ESHAPE, "core shape [3,2] of input 0", TY(F64, 3, 2),
                     TY(F64, 3));
    /* batches: NumPy 2's rule (b is a vector only when 1-d), broadcasting, '?' */
    CHECK_INFER(tg_op_cholesky, LOWER, "f64[5,3,3]", TY(F64, 5, 3, 3));
    CHECK_INFER(tg_op_cholesky, LOWER, "f64[?,2,3,3]", TY(F64, Q, 2, 3, 3));
    CHECK_INFER(tg_op_det, NULL, "f64[2,7]", TY(F64, 2, 7, 4, 4));
    CHECK_INFER(tg_op_solve, NULL, "f64[5,3]", TY(F64, 5, 3, 3), TY(F64, 3));
    CHECK_INFER(tg_op_solve, NULL, "f64[5,3,2]", TY(F64, 5, 3, 3), TY(F64, 3, 2));
    CHECK_INFER(tg_op_solve, NULL, "f64[4,5,3,2]", TY(F64, 1, 5, 3, 3), TY(F64, 4, 1, 3, 2));
    CHECK_INFER(tg_op_cho_solve, LOWER, "f64[3,3,1]", TY(F64, 3, 3), TY(F64, 3, 3, 1));
    CHECK_INFER(tg_op_solve_triangular, st0, "f64[6,2,2]", TY(F64, Q, 2, 2), TY(F64, 6, 2, 2));
    CHECK_INFER_FAIL(tg_op_solve, NULL, TG_ESHAPE,
                     "the batch dimensions of f64[5,3,3], f64[4,3,2] do not broadcast "
                     "(cannot broadcast f64[5] with f64[4])",
                     TY(F64, 5, 3, 3), TY(F64, 4, 3, 2));
    /* a b of shape [B, m] is a stack of matrices [B, m] (NumPy 2), not of vectors */
    CHECK_INFER_FAIL(tg_op_solve, NULL, TG_ESHAPE, "core shapes [3,3] (input 0) and [5,3]",
                     TY(F64, 5, 3, 3), TY(F64, 5, 3));
    const tg_aval st3[] = {AV_BOOL(0), AV_INT(3), AV_BOOL(0)};
    CHECK_INFER_FAIL(tg_op_solve_triangular, st3, TG_EINVAL, "trans must be 0", TY(F64, 2, 2),
                     TY(F64, 2));
    /* the two outputs of eigh and slogdet */
    tg_type in[1] = {TY(F64, Q, 3)}, outs[TG_MAX_OUTS];
    char s0[TG_TYPE_STR_MAX], s1[TG_TYPE_STR_MAX];
    tg_infer ic = {.op = &tg_op_eigh, .in = in, .nin = 1, .attrs = LOWER, .out = outs, .nout = 2};
    assert_int_equal(tg_op_eigh.infer(&ic), TG_OK);
    assert_int_equal(ic.nout, 2);
    assert_string_equal(tg_type_str(&outs[0], s0, sizeof s0), "f64[3]");
    assert_string_equal(tg_type_str(&outs[1], s1, sizeof s1), "f64[3,3]");
    ic = (tg_infer){.op = &tg_op_slogdet, .in = in, .nin = 1, .out = outs, .nout = 2};
    assert_int_equal(tg_op_slogdet.infer(&ic), TG_OK);
    assert_string_equal(tg_type_str(&outs[0], s0, sizeof s0), "f64[]");
    assert_string_equal(tg_type_str(&outs[1], s1, sizeof s1), "f64[]");
}

/* ---- kernels: known values ---- */

static void test_known_values(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = t ? F32 : F64;
        double tol = t ? 1e-6 : 1e-14;
        tg_tensor *a = mat(dt, 2, 2, VALS(4, 2, 2, 3));
        /* cholesky: [[2, 0], [1, sqrt 2]]; the upper factor is its transpose */
        tg_tensor *l = run1(&tg_op_cholesky, &a, 1, LOWER);
        check_tensor(l, dt, SHAPE(2, 2), VALS(2, 0, 1, sqrt(2.0)), tol);
        tg_tensor *u = run1(&tg_op_cholesky, &a, 1, UPPER);
        check_tensor(u, dt, SHAPE(2, 2), VALS(2, 1, 0, sqrt(2.0)), tol);
        /* inv = [[3, -2], [-2, 4]] / 8, det = 8, slogdet = (1, log 8) */
        tg_tensor *ai = run1(&tg_op_inv, &a, 1, NULL);
        check_tensor(ai, dt, SHAPE(2, 2), VALS(0.375, -0.25, -0.25, 0.5), tol);
        tg_tensor *d = run1(&tg_op_det, &a, 1, NULL);
        check_tensor(d, dt, SHAPE0, VALS(8), tol * 8);
        tg_tensor *sl[2];
        char msg[512];
        assert_int_equal(run_multi(&tg_op_slogdet, &a, 1, NULL, sl, msg), TG_OK);
        check_tensor(sl[0], dt, SHAPE0, VALS(1), 0);
        check_tensor(sl[1], dt, SHAPE0, VALS(log(8.0)), tol);
        /* row swaps in the LU factorization: det([[2, 1], [4, 1]]) = -2 (one swap, positive
         * pivots), det([[0, 1], [1, 0]]) = -1; slogdet agrees on the sign */
        tg_tensor *p1 = mat(dt, 2, 2, VALS(2, 1, 4, 1)), *p2 = mat(dt, 2, 2, VALS(0, 1, 1, 0));
        tg_tensor *d1 = run1(&tg_op_det, &p1, 1, NULL), *d2 = run1(&tg_op_det, &p2, 1, NULL);
        check_tensor(d1, dt, SHAPE0, VALS(-2), tol * 2);
        check_tensor(d2, dt, SHAPE0, VALS(-1), tol);
        tg_tensor *sp[2];
        char pmsg[512];
        assert_int_equal(run_multi(&tg_op_slogdet, &p1, 1, NULL, sp, pmsg), TG_OK);
        check_tensor(sp[0], dt, SHAPE0, VALS(-1), 0);
        check_tensor(sp[1], dt, SHAPE0, VALS(log(2.0)), tol);
        tg_tensor_free(sp[0]);
        tg_tensor_free(sp[1]);
        tg_tensor_free(d1);
        tg_tensor_free(d2);
        tg_tensor_free(p1);
        tg_tensor_free(p2);
        /* solve A x = [2, 1]: x = [0.5, 0]; with b 2-d */
        tg_tensor *b = vec(dt, 2, VALS(2, 1)), *b2 = mat(dt, 2, 2, VALS(2, 0, 1, 1));
        tg_tensor *x = run1(&tg_op_solve, (tg_tensor *[]){a, b}, 2, NULL);
        check_tensor(x, dt, SHAPE(2), VALS(0.5, 0), tol);
        tg_tensor *x2 = run1(&tg_op_solve, (tg_tensor *[]){a, b2}, 2, NULL);
        check_tensor(x2, dt, SHAPE(2, 2), VALS(0.5, -0.25, 0, 0.5), tol);
        /* cho_solve from either factor gives the same */
        tg_tensor *c1 = run1(&tg_op_cho_solve, (tg_tensor *[]){l, b}, 2, LOWER);
        check_tensor(c1, dt, SHAPE(2), VALS(0.5, 0), tol);
        tg_tensor *c2 = run1(&tg_op_cho_solve, (tg_tensor *[]){u, b2}, 2, UPPER);
        check_tensor(c2, dt, SHAPE(2, 2), VALS(0.5, -0.25, 0, 0.5), tol);
        /* solve_triangular reads one triangle: a itself is taken as [[4, 0], [2, 3]] (lower)
           or [[4, 2], [0, 3]] (upper), with ones on the diagonal when unit_diagonal */
        const tg_aval lo[] = {AV_BOOL(1), AV_INT(0), AV_BOOL(0)};
        const tg_aval up_t[] = {AV_BOOL(0), AV_INT(1), AV_BOOL(0)};
        const tg_aval lo_unit[] = {AV_BOOL(1), AV_INT(0), AV_BOOL(1)};
        const tg_aval lo_c[] = {AV_BOOL(1), AV_INT(2), AV_BOOL(0)};
        tg_tensor *y1 = run1(&tg_op_solve_triangular, (tg_tensor *[]){a, b}, 2, lo);
        check_tensor(y1, dt, SHAPE(2), VALS(0.5, 0), tol);
        tg_tensor *y2 = run1(&tg_op_solve_triangular, (tg_tensor *[]){a, b}, 2, up_t);
        check_tensor(y2, dt, SHAPE(2), VALS(0.5, 0), tol); /* [[4,0],[2,3]] x = b */
        tg_tensor *y3 = run1(&tg_op_solve_triangular, (tg_tensor *[]){a, b}, 2, lo_unit);
        check_tensor(y3, dt, SHAPE(2), VALS(2, -3), tol);
        tg_tensor *y4 = run1(&tg_op_solve_triangular, (tg_tensor *[]){a, b}, 2, lo_c);
        check_tensor(y4, dt, SHAPE(2), VALS(1.0 / 3.0, 1.0 / 3.0), tol); /* [[4,2],[0,3]] */
        /* eigh of [[2, 1], [1, 2]]: w = [1, 3], v = [[-1, 1], [1, 1]] / sqrt 2 up to signs;
           the upper triangle of [[2, 1], [7, 2]] is the same matrix */
        tg_tensor *e = mat(dt, 2, 2, VALS(2, 1, 7, 2)), *wv[2];
        assert_int_equal(run_multi(&tg_op_eigh, &e, 1, UPPER, wv, msg), TG_OK);
        check_tensor(wv[0], dt, SHAPE(2), VALS(1, 3), tol * 4);
        double r = sqrt(0.5);
        for (int i = 0; i < 4; i++)
            assert_true(fabs(fabs(tg_tensor_get_f64(wv[1], i)) - r) < tol * 4);
        assert_true(at2(wv[1], 0, 0) * at2(wv[1], 1, 0) < 0); /* [-1, 1] for w = 1 */
        assert_true(at2(wv[1], 0, 1) * at2(wv[1], 1, 1) > 0); /* [1, 1] for w = 3 */
        free_all((tg_tensor *[]){a,  l,  u,  ai, d,  sl[0], sl[1], b, b2,    x,
                                 x2, c1, c2, y1, y2, y3,    y4,    e, wv[0], wv[1]},
                 20);
    }
}

/* ---- kernels: random matrices against plain C ---- */

/* Determinant by Gaussian elimination with partial pivoting (plain C). */
static double det_c(int n, const double *a0) {
    double a[NMAX * NMAX], det = 1.0;
    memcpy(a, a0, sizeof(double) * (size_t)(n * n));
    for (int c = 0; c < n; c++) {
        int p = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r * n + c]) > fabs(a[p * n + c])) p = r;
        if (p != c) {
            det = -det;
            for (int j = 0; j < n; j++) {
                double t = a[c * n + j];
                a[c * n + j] = a[p * n + j];
                a[p * n + j] = t;
            }
        }
        det *= a[c * n + c];
        for (int r = c + 1; r < n; r++) {
            double f = a[r * n + c] / a[c * n + c];
            for (int j = c; j < n; j++) a[r * n + j] -= f * a[c * n + j];
        }
    }
    return det;
}

/* The tensor t (n x n, or n x k) as doubles, row-major. */
static void get(const tg_tensor *t, double *v) {
    for (int64_t i = 0; i < tg_tensor_size(t); i++) v[i] = tg_tensor_get_f64(t, i);
}

static void test_random_vs_c(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = t ? F32 : F64;
        double tol = t ? 2e-4 : 1e-11;
        for (int n = 1; n <= NMAX; n += 3) {
            double a[NMAX * NMAX], g[NMAX * NMAX], bv[NMAX * 3], r[NMAX * NMAX];
            spd_mat(100 + n, n, a);
            random_mat(200 + n, n, n, g);
            rng rb = {300 + n};
            for (int i = 0; i < n * 3; i++) bv[i] = urand(&rb);
            /* inputs as views with negative strides: the kernels take any strides */
            tg_tensor *ab = mat(dt, n, n, a), *gb = mat(dt, n, n, g);
            tg_tensor *bb = mat(dt, n, 3, bv);
            tg_tensor *A = mk_reversed(ab), *G = mk_reversed(gb), *B = mk_reversed(bb);
            double ar[NMAX * NMAX], gr[NMAX * NMAX], brr[NMAX * 3];
            get(A, ar);
            get(G, gr);
            get(B, brr);
            /* L L^T = A, L lower */
            tg_tensor *L = run1(&tg_op_cholesky, &A, 1, LOWER);
            get(L, r);
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) {
                    double s = 0;
                    for (int k = 0; k < n; k++) s += r[i * n + k] * r[j * n + k];
                    assert_true(fabs(s - ar[i * n + j]) <= tol * n);
                    if (j > i) assert_true(r[i * n + j] == 0.0);
                }
            /* G X = B */
            tg_tensor *X = run1(&tg_op_solve, (tg_tensor *[]){G, B}, 2, NULL);
            get(X, r);
            for (int i = 0; i < n; i++)
                for (int c = 0; c < 3; c++) {
                    double s = 0;
                    for (int k = 0; k < n; k++) s += gr[i * n + k] * r[k * 3 + c];
                    assert_true(fabs(s - brr[i * 3 + c]) <= tol * n);
                }
            /* A (cho_solve(L, B)) = B */
            tg_tensor *Y = run1(&tg_op_cho_solve, (tg_tensor *[]){L, B}, 2, LOWER);
            get(Y, r);
            for (int i = 0; i < n; i++)
                for (int c = 0; c < 3; c++) {
                    double s = 0;
                    for (int k = 0; k < n; k++) s += ar[i * n + k] * r[k * 3 + c];
                    assert_true(fabs(s - brr[i * 3 + c]) <= tol * n * n);
                }
            /* G G^-1 = I, det G */
            tg_tensor *Gi = run1(&tg_op_inv, &G, 1, NULL);
            get(Gi, r);
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) {
                    double s = 0;
                    for (int k = 0; k < n; k++) s += gr[i * n + k] * r[k * n + j];
                    assert_true(fabs(s - (i == j)) <= tol * n);
                }
            tg_tensor *D = run1(&tg_op_det, &G, 1, NULL);
            double dc = det_c(n, gr);
            assert_true(fabs(tg_tensor_get_f64(D, 0) - dc) <= tol * fabs(dc) * n);
            /* A v = w v, v orthonormal, w ascending */
            tg_tensor *wv[2];
            char msg[512];
            assert_int_equal(run_multi(&tg_op_eigh, &A, 1, LOWER, wv, msg), TG_OK);
            double w[NMAX];
            get(wv[0], w);
            get(wv[1], r);
            for (int j = 0; j < n; j++) {
                if (j) assert_true(w[j - 1] <= w[j]);
                for (int i = 0; i < n; i++) {
                    double s = 0;
                    for (int k = 0; k < n; k++) s += ar[i * n + k] * r[k * n + j];
                    assert_true(fabs(s - w[j] * r[i * n + j]) <= tol * 10 * n);
                }
                for (int j2 = 0; j2 < n; j2++) {
                    double s = 0;
                    for (int k = 0; k < n; k++) s += r[k * n + j] * r[k * n + j2];
                    assert_true(fabs(s - (j == j2)) <= tol * n);
                }
            }
            free_all((tg_tensor *[]){ab, gb, bb, A, G, B, L, X, Y, Gi, D, wv[0], wv[1]}, 13);
        }
    }
}

/* A matrix large enough for OpenBLAS's blocked (recursive) factorizations: the residuals
 * of cholesky, solve, inv and eigh stay at rounding level. */
static void test_large(void **state) {
    (void)state;
    enum { N = 200 };
    static double a[N * N], x[N * N], r[N * N];
    rng rr = {7};
    for (int i = 0; i < N * N; i++) x[i] = urand(&rr);
    for (int i = 0; i < N; i++) /* x x^T / N + I */
        for (int j = 0; j <= i; j++) {
            double s = 0;
            for (int k = 0; k < N; k++) s += x[i * N + k] * x[j * N + k];
            a[i * N + j] = a[j * N + i] = s / N + (i == j);
        }
    tg_tensor *A = mat(F64, N, N, a), *L = run1(&tg_op_cholesky, &A, 1, LOWER);
    tg_tensor *Ai = run1(&tg_op_inv, &A, 1, NULL), *wv[2];
    char msg[512];
    assert_int_equal(run_multi(&tg_op_eigh, &A, 1, LOWER, wv, msg), TG_OK);
    double el = 0, ei = 0, ee = 0, w[N];
    get(L, r);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < N; k++) s += r[i * N + k] * r[j * N + k];
            el = fmax(el, fabs(s - a[i * N + j]));
        }
    get(Ai, r);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < N; k++) s += a[i * N + k] * r[k * N + j];
            ei = fmax(ei, fabs(s - (i == j)));
        }
    get(wv[0], w);
    get(wv[1], r);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < N; k++) s += a[i * N + k] * r[k * N + j];
            ee = fmax(ee, fabs(s - w[j] * r[i * N + j]));
        }
    if (!(el < 1e-12 && ei < 1e-11 && ee < 1e-11))
        print_error("residuals: cholesky %g, inv %g, eigh %g\n", el, ei, ee);
    assert_true(el < 1e-12 && ei < 1e-11 && ee < 1e-11);
    free_all((tg_tensor *[]){A, L, Ai, wv[0], wv[1]}, 5);
}

/* 0 x 0 matrices: empty results, det 1, slogdet (1, 0) (NumPy's values). */
static void test_empty(void **state) {
    (void)state;
    tg_tensor *a = mat(F64, 0, 0, NULL), *b = vec(F64, 0, NULL), *o[2];
    char msg[512];
    tg_tensor *l = run1(&tg_op_cholesky, &a, 1, LOWER);
    assert_int_equal(tg_tensor_size(l), 0);
    tg_tensor *x = run1(&tg_op_solve, (tg_tensor *[]){a, b}, 2, NULL);
    assert_int_equal(tg_tensor_size(x), 0);
    tg_tensor *d = run1(&tg_op_det, &a, 1, NULL);
    check_tensor(d, F64, SHAPE0, VALS(1), 0);
    assert_int_equal(run_multi(&tg_op_slogdet, &a, 1, NULL, o, msg), TG_OK);
    check_tensor(o[0], F64, SHAPE0, VALS(1), 0);
    check_tensor(o[1], F64, SHAPE0, VALS(0), 0);
    tg_tensor *e[2];
    assert_int_equal(run_multi(&tg_op_eigh, &a, 1, LOWER, e, msg), TG_OK);
    assert_int_equal(tg_tensor_size(e[0]), 0);
    free_all((tg_tensor *[]){a, b, l, x, d, o[0], o[1], e[0], e[1]}, 9);
}

/* ---- failures ---- */

static void test_failures(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = t ? F32 : F64;
        /* [[1, 2], [2, 1]]: the minor of order 1 is positive, of order 2 is not */
        tg_tensor *np = mat(dt, 2, 2, VALS(1, 2, 2, 1));
        expect_fail(&tg_op_cholesky, &np, 1, LOWER, TG_EINVAL,
                    "not positive definite (its leading minor of order 2 is not)");
        tg_tensor *neg = mat(dt, 3, 3, VALS(-1, 0, 0, 0, 1, 0, 0, 0, 1));
        expect_fail(&tg_op_cholesky, &neg, 1, UPPER, TG_EINVAL, "leading minor of order 1");
        tg_tensor *nan = mat(dt, 2, 2, VALS(1, 0, 0, NAN));
        expect_fail(&tg_op_cholesky, &nan, 1, LOWER, TG_EINVAL, "leading minor of order 2");
        /* singular: solve, inv; solve_triangular names the zero diagonal entry */
        tg_tensor *s = mat(dt, 3, 3, VALS(1, 2, 3, 2, 4, 6, 1, 0, 1));
        tg_tensor *b = vec(dt, 3, VALS(1, 2, 3));
        expect_fail(&tg_op_solve, (tg_tensor *[]){s, b}, 2, NULL, TG_EINVAL, "singular matrix");
        expect_fail(&tg_op_inv, &s, 1, NULL, TG_EINVAL, "singular matrix");
        tg_tensor *tz = mat(dt, 3, 3, VALS(1, 0, 0, 5, 0, 0, 1, 1, 1));
        const tg_aval lo[] = {AV_BOOL(1), AV_INT(0), AV_BOOL(0)};
        const tg_aval lo_unit[] = {AV_BOOL(1), AV_INT(0), AV_BOOL(1)};
        expect_fail(&tg_op_solve_triangular, (tg_tensor *[]){tz, b}, 2, lo, TG_EINVAL,
                    "singular matrix: its diagonal entry [1, 1] is zero");
        tg_tensor *y = run1(&tg_op_solve_triangular, (tg_tensor *[]){tz, b}, 2, lo_unit);
        check_tensor(y, dt, SHAPE(3), VALS(1, -3, 5), 0); /* the diagonal is not read */
        /* det 0 and slogdet (0, -inf), no error */
        tg_tensor *d = run1(&tg_op_det, &s, 1, NULL), *sl[2];
        check_tensor(d, dt, SHAPE0, VALS(0), 0);
        char msg[512];
        assert_int_equal(run_multi(&tg_op_slogdet, &s, 1, NULL, sl, msg), TG_OK);
        check_tensor(sl[0], dt, SHAPE0, VALS(0), 0);
        assert_true(isinf(tg_tensor_get_f64(sl[1], 0)) && tg_tensor_get_f64(sl[1], 0) < 0);
        /* eigh refuses a non-finite entry of the triangle it reads, not of the other */
        tg_tensor *ei = mat(dt, 2, 2, VALS(1, INFINITY, 0, 1)), *wv[2];
        expect_fail(&tg_op_eigh, &ei, 1, UPPER, TG_EINVAL, "non-finite entry [0, 1] = inf");
        assert_int_equal(run_multi(&tg_op_eigh, &ei, 1, LOWER, wv, msg), TG_OK);
        check_tensor(wv[0], dt, SHAPE(2), VALS(1, 1), 0);
        free_all((tg_tensor *[]){np, neg, nan, s, b, tz, y, d, sl[0], sl[1], ei, wv[0], wv[1]}, 13);
    }
    /* a matrix of determinant 2^-1100 (beyond double's range as a running product of
       its pivots only at the end): det underflows to 0 exactly as the product would,
       slogdet stays finite */
    double v[4] = {0x1p-550, 0, 0, 0x1p-550};
    tg_tensor *tiny = mat(F64, 2, 2, v), *sl[2];
    char msg[512];
    tg_tensor *d = run1(&tg_op_det, &tiny, 1, NULL);
    check_tensor(d, F64, SHAPE0, VALS(0), 0);
    assert_int_equal(run_multi(&tg_op_slogdet, &tiny, 1, NULL, sl, msg), TG_OK);
    check_tensor(sl[1], F64, SHAPE0, VALS(-1100 * log(2.0)), 1e-9);
    free_all((tg_tensor *[]){tiny, d, sl[0], sl[1]}, 4);
    /* 2^600 * 2^600 * 2^-700 = 2^500: finite although a plain product overflows midway */
    double big[9] = {0x1p600, 0, 0, 0, 0x1p600, 0, 0, 0, 0x1p-700};
    tg_tensor *bm = mat(F64, 3, 3, big);
    d = run1(&tg_op_det, &bm, 1, NULL);
    check_tensor(d, F64, SHAPE0, VALS(0x1p500), 0);
    free_all((tg_tensor *[]){bm, d}, 2);
}

/* ---- gradients ---- */

static tg_graph *graph(void) {
    tg_graph *g = tg_graph_new(NULL, "t");
    assert_non_null(g);
    return g;
}

/* Sets out as g's output, expects tg_grad_check to pass, frees g and the inputs. */
static void check_grad(tg_graph *g, tg_var *out, tg_tensor **in, int nin, const char *what) {
    if (!out) print_error("%s: building failed: %s\n", what, tg_graph_error(g));
    assert_non_null(out);
    assert_int_equal(tg_graph_set_outputs(g, &out, 1), TG_OK);
    tg_grad_check_opts o = TG_GRAD_CHECK_OPTS(.seed = 11);
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    tg_status st = tg_grad_check(g, in, nin, &o, &rep);
    if (st != TG_OK) print_error("%s: %s\n", what, tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_graph_free(g);
    free_all(in, nin);
}

static tg_var *op1(tg_graph *g, const char *op, tg_var *x, const tg_attr *a, int na) {
    return tg_apply(g, op, &x, 1, a, na);
}

static tg_var *op2(tg_graph *g, const char *op, tg_var *x, tg_var *y, const tg_attr *a, int na) {
    return tg_apply(g, op, (tg_var *[]){x, y}, 2, a, na);
}

/* Matrix inputs: static n x n, or [?, ?] when dyn. */
static tg_var *in_mat(tg_graph *g, const char *name, tg_dtype dt, int n, bool dyn) {
    return tg_input(g, name, dt, 2, (const int64_t[]){dyn ? Q : n, dyn ? Q : n});
}

static tg_var *in_rhs(tg_graph *g, const char *name, tg_dtype dt, int n, int k) {
    return k ? tg_input(g, name, dt, 2, (const int64_t[]){n, k})
             : tg_input(g, name, dt, 1, (const int64_t[]){n});
}

static tg_tensor *rhs(uint64_t seed, tg_dtype dt, int n, int k) {
    double v[NMAX * 3];
    rng r = {seed};
    for (int i = 0; i < n * (k ? k : 1); i++) v[i] = urand(&r);
    return k ? mat(dt, n, k, v) : vec(dt, n, v);
}

static tg_tensor *spd(uint64_t seed, tg_dtype dt, int n) {
    double a[NMAX * NMAX];
    spd_mat(seed, n, a);
    return mat(dt, n, n, a);
}

static tg_tensor *general(uint64_t seed, tg_dtype dt, int n) {
    double a[NMAX * NMAX];
    random_mat(seed, n, n, a);
    return mat(dt, n, n, a);
}

static void test_grad_cholesky(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = t ? F32 : F64;
        for (int lower = 0; lower < 2; lower++) {
            for (int dyn = 0; dyn < 2; dyn++) {
                tg_graph *g = graph();
                tg_var *a = in_mat(g, "a", dt, 4, dyn);
                tg_attr at = TG_A_BOOL("lower", lower);
                check_grad(g, op1(g, "cholesky", a, &at, 1), (tg_tensor *[]){spd(1 + dyn, dt, 4)},
                           1, "cholesky");
            }
        }
        /* through a symmetric input built in the graph: d/dX of cholesky(X X^T + 4 I) */
        tg_graph *g = graph();
        tg_var *x = in_mat(g, "x", dt, 3, false);
        tg_tensor *eye = mat(dt, 3, 3, VALS(3, 0, 0, 0, 3, 0, 0, 0, 3));
        tg_var *a = tg_add(g, tg_dot(g, x, tg_transpose(g, x, NULL)), tg_constant(g, eye));
        tg_tensor_free(eye);
        check_grad(g, op1(g, "cholesky", a, NULL, 0), (tg_tensor *[]){general(5, dt, 3)}, 1,
                   "cholesky of x x^T");
    }
}

static void test_grad_solvers(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = t ? F32 : F64;
        for (int k = 0; k < 3; k += 2) { /* b 1-d, then [n, 2] */
            /* solve */
            tg_graph *g = graph();
            tg_var *a = in_mat(g, "a", dt, 4, k == 2), *b = in_rhs(g, "b", dt, 4, k);
            check_grad(g, op2(g, "solve", a, b, NULL, 0),
                       (tg_tensor *[]){general(10 + k, dt, 4), rhs(20 + k, dt, 4, k)}, 2, "solve");
            /* solve_triangular: both triangles, every trans, with and without unit diagonal */
            for (int lower = 0; lower < 2; lower++)
                for (int trans = 0; trans < 3; trans++)
                    for (int unit = 0; unit < 2; unit++) {
                        g = graph();
                        a = in_mat(g, "a", dt, 4, false);
                        b = in_rhs(g, "b", dt, 4, k);
                        tg_attr at[] = {TG_A_BOOL("lower", lower), TG_A_INT("trans", trans),
                                        TG_A_BOOL("unit_diagonal", unit)};
                        check_grad(
                            g, op2(g, "solve_triangular", a, b, at, 3),
                            (tg_tensor *[]){general(30 + trans, dt, 4), rhs(40 + k, dt, 4, k)}, 2,
                            "solve_triangular");
                    }
            /* cho_solve with a lower and an upper factor (the other triangle is ignored) */
            for (int lower = 0; lower < 2; lower++) {
                g = graph();
                a = in_mat(g, "c", dt, 4, false);
                b = in_rhs(g, "b", dt, 4, k);
                tg_attr at = TG_A_BOOL("lower", lower);
                check_grad(g, op2(g, "cho_solve", a, b, &at, 1),
                           (tg_tensor *[]){general(50 + lower, dt, 4), rhs(60 + k, dt, 4, k)}, 2,
                           "cho_solve");
            }
        }
    }
}

static void test_grad_inv_det(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = t ? F32 : F64;
        tg_graph *g = graph();
        tg_var *a = in_mat(g, "a", dt, 4, false);
        check_grad(g, op1(g, "inv", a, NULL, 0), (tg_tensor *[]){general(70, dt, 4)}, 1, "inv");
        g = graph();
        a = in_mat(g, "a", dt, 3, true);
        check_grad(g, op1(g, "det", a, NULL, 0), (tg_tensor *[]){general(71, dt, 3)}, 1, "det");
        /* slogdet: log|det| of a matrix with a negative determinant; the sign has a zero
           gradient */
        for (int o = 0; o < 2; o++) {
            g = graph();
            a = in_mat(g, "a", dt, 3, false);
            tg_var *outs[2];
            int nout = 2;
            assert_int_equal(tg_apply_multi(g, "slogdet", &a, 1, NULL, 0, outs, &nout), TG_OK);
            assert_int_equal(nout, 2);
            double m[9] = {0, 2, 0.5, 3, 0.1, 0, 0.2, 0, 4};
            check_grad(g, outs[o], (tg_tensor *[]){mat(dt, 3, 3, m)}, 1, "slogdet");
        }
    }
}

static void test_grad_eigh(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = t ? F32 : F64;
        /* w; v * v (free of the eigenvectors' signs); v itself (LAPACK's signs do not
           flip under a small change); v diag(w) v^T, which rebuilds the symmetric
           matrix from the triangle read */
        for (int what = 0; what < 4; what++)
            for (int lower = 0; lower < 2; lower++) {
                tg_graph *g = graph();
                tg_var *a = in_mat(g, "a", dt, 4, what == 1), *wv[2];
                tg_attr at = TG_A_BOOL("lower", lower);
                int nout = 2;
                assert_int_equal(tg_apply_multi(g, "eigh", &a, 1, &at, 1, wv, &nout), TG_OK);
                tg_var *y = what == 0   ? wv[0]
                            : what == 1 ? tg_mul(g, wv[1], wv[1])
                            : what == 2
                                ? wv[1]
                                : tg_dot(g, tg_mul(g, wv[1], wv[0]), tg_transpose(g, wv[1], NULL));
                double m[16];
                sym_mat(80 + what, 4, m);
                /* f32: eigenvalues near 0, 0.5, 1, 1.5, where float32's rounding stays
                   below the checker's tolerance once divided by its step */
                for (int i = 0; i < 16 && t; i++) m[i] /= 6.0;
                check_grad(g, y, (tg_tensor *[]){mat(dt, 4, 4, m)}, 1, "eigh");
            }
    }
}

/* ---- batches (Blockwise) ---- */

/* nb matrices n x n stacked as [nb, n, n]: symmetric positive definite (kind 0), general
 * (1) or symmetric with separated eigenvalues (2), each from its own seed. */
static tg_tensor *stack(uint64_t seed, tg_dtype dt, int nb, int n, int kind) {
    double v[6 * NMAX * NMAX];
    assert_true(nb <= 6);
    for (int b = 0; b < nb; b++) {
        double *m = v + b * n * n;
        if (kind == 0)
            spd_mat(seed + (uint64_t)b, n, m);
        else if (kind == 1)
            random_mat(seed + (uint64_t)b, n, n, m);
        else
            sym_mat(seed + (uint64_t)b, n, m);
    }
    return mk_tensor(dt, 3, (const int64_t[]){nb, n, n}, v);
}

/* Block b (along axis 0) of t, copied contiguous, one dimension less. */
static tg_tensor *block(const tg_tensor *t, int64_t b) {
    int64_t per = tg_tensor_size(t) / t->shape[0];
    double v[6 * NMAX * NMAX];
    for (int64_t e = 0; e < per; e++) v[e] = tg_tensor_get_f64(t, b * per + e);
    return mk_tensor(t->dtype, t->ndim - 1, t->shape + 1, v);
}

static void expect_same(const tg_tensor *x, const tg_tensor *y, const char *what) {
    assert_int_equal(tg_tensor_size(x), tg_tensor_size(y));
    for (int64_t e = 0; e < tg_tensor_size(x); e++)
        if (tg_tensor_get_f64(x, e) != tg_tensor_get_f64(y, e)) {
            print_error("%s: element %lld: %.17g != %.17g\n", what, (long long)e,
                        tg_tensor_get_f64(x, e), tg_tensor_get_f64(y, e));
            fail();
        }
}

/* Every op on a batch of 4 equals the op on each block, bit for bit, on one thread and
 * split over a pool of 3; b broadcasts (a 1-d b against every block, and a batch of
 * right-hand sides against one matrix). */
static void test_batched(void **state) {
    (void)state;
    tg_pool *pool = tg_pool_new(NULL, 3);
    assert_non_null(pool);
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = t ? F32 : F64;
        const int nb = 4, n = 5;
        tg_tensor *A = stack(100, dt, nb, n, 0), *G = stack(200, dt, nb, n, 1);
        tg_tensor *S = stack(300, dt, nb, n, 2), *b1 = rhs(400, dt, n, 0);
        tg_tensor *B = stack(500, dt, nb, n, 1); /* a batch of n x n right-hand sides */
        const tg_aval st0[] = {AV_BOOL(1), AV_INT(1), AV_BOOL(0)};
        struct {
            const tg_op_def *op;
            const tg_aval *attrs;
            tg_tensor *in[2];
            int nin;
            bool bcast; /* input 1 is the same for every block */
        } cases[] = {
            {&tg_op_cholesky, LOWER, {A}, 1, false},
            {&tg_op_inv, NULL, {G}, 1, false},
            {&tg_op_det, NULL, {G}, 1, false},
            {&tg_op_slogdet, NULL, {G}, 1, false},
            {&tg_op_eigh, LOWER, {S}, 1, false},
            {&tg_op_solve, NULL, {G, b1}, 2, true},
            {&tg_op_solve, NULL, {G, B}, 2, false},
            {&tg_op_solve_triangular, st0, {G, b1}, 2, true},
            {&tg_op_cho_solve, LOWER, {A, B}, 2, false},
        };
        for (size_t c = 0; c < TG_COUNTOF(cases); c++) {
            const tg_op_def *op = cases[c].op;
            tg_tensor *one[TG_MAX_OUTS] = {0}, *split[TG_MAX_OUTS] = {0};
            char msg[512];
            assert_int_equal(run_multi(op, cases[c].in, cases[c].nin, cases[c].attrs, one, msg),
                             TG_OK);
            /* the same through a pool (tg_kern.pool): the blocks split over 3 threads */
            tg_type tin[2], touts[TG_MAX_OUTS];
            for (int i = 0; i < cases[c].nin; i++)
                tg_type_of_tensor(&(tg_type){0}, cases[c].in[i], &tin[i]);
            tg_infer ic = {.op = op,
                           .in = tin,
                           .nin = cases[c].nin,
                           .attrs = cases[c].attrs,
                           .out = touts,
                           .nout = op->nout,
                           .runtime = true};
            assert_int_equal(op->infer(&ic), TG_OK);
            for (int o = 0; o < op->nout; o++)
                split[o] =
                    tg_tensor_new(NULL, (tg_dtype)touts[o].dtype, touts[o].ndim, touts[o].shape);
            tg_kern k = {.ctx = tg_ctx_default(),
                         .attrs = cases[c].attrs,
                         .in = cases[c].in,
                         .nin = cases[c].nin,
                         .out = split,
                         .nout = op->nout,
                         .out_type = touts,
                         .pool = pool};
            assert_int_equal(op->ref(&k), TG_OK);
            for (int o = 0; o < op->nout; o++) {
                assert_int_equal(one[o]->shape[0], nb);
                expect_same(one[o], split[o], op->name);
            }
            for (int b = 0; b < nb; b++) {
                tg_tensor *bin[2] = {block(cases[c].in[0], b), NULL}, *bout[TG_MAX_OUTS] = {0};
                if (cases[c].nin == 2)
                    bin[1] = cases[c].bcast ? cases[c].in[1] : block(cases[c].in[1], b);
                assert_int_equal(run_multi(op, bin, cases[c].nin, cases[c].attrs, bout, msg),
                                 TG_OK);
                for (int o = 0; o < op->nout; o++) {
                    tg_tensor *ob = block(one[o], b);
                    expect_same(ob, bout[o], op->name);
                    tg_tensor_free(ob);
                    tg_tensor_free(bout[o]);
                }
                tg_tensor_free(bin[0]);
                if (cases[c].nin == 2 && !cases[c].bcast) tg_tensor_free(bin[1]);
            }
            free_all(one, op->nout);
            free_all(split, op->nout);
        }
        /* a failing block is named by its batch index, the lowest one whatever the split */
        tg_tensor *bad = stack(100, dt, nb, n, 0);
        for (int b = 1; b < nb; b += 2) /* a negative first pivot */
            tg_store_f64((char *)tg_tensor_data(bad) + (size_t)b * n * n * tg_dtype_size(dt), dt,
                         -1.0);
        expect_fail(&tg_op_cholesky, &bad, 1, LOWER, TG_EINVAL,
                    "batch element [1]: the matrix is not positive definite (its leading minor "
                    "of order 1 is not)");
        tg_tensor *bout[1] = {tg_tensor_new(NULL, dt, 3, bad->shape)};
        tg_type tb[1];
        tg_type_of_tensor(&(tg_type){0}, bad, &tb[0]);
        tg_kern k = {.ctx = tg_ctx_default(),
                     .attrs = LOWER,
                     .in = &bad,
                     .nin = 1,
                     .out = bout,
                     .nout = 1,
                     .out_type = tb,
                     .pool = pool};
        assert_int_equal(tg_op_cholesky.ref(&k), TG_EINVAL);
        assert_non_null(strstr(k.msg, "batch element [1]:"));
        tg_tensor_free(bout[0]);
        tg_tensor_free(bad);
        tg_tensor *ins[] = {A, G, S, b1, B};
        free_all(ins, 5);
    }
    tg_pool_free(pool);
}

/* Gradients through batches, with batch dimensions broadcast (summed back). */
static void test_grad_batched(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        tg_dtype dt = t ? F32 : F64;
        tg_graph *g = graph();
        tg_var *a = tg_input(g, "a", dt, 3, (const int64_t[]){3, 4, 4});
        check_grad(g, op1(g, "cholesky", a, NULL, 0), (tg_tensor *[]){stack(600, dt, 3, 4, 0)}, 1,
                   "batched cholesky");
        /* k 0: one matrix, a batch of right-hand sides (gA sums over the batch); k 1: a
           batch of matrices, one 1-d right-hand side (gb sums) */
        for (int k = 0; k < 2; k++) {
            const char *ops[] = {"solve", "cho_solve", "solve_triangular"};
            for (int o = 0; o < 3; o++) {
                tg_graph *g2 = graph();
                tg_var *x, *y;
                tg_tensor *in[2];
                if (k == 0) {
                    x = tg_input(g2, "a", dt, 2, (const int64_t[]){4, 4});
                    y = tg_input(g2, "b", dt, 3, (const int64_t[]){2, 4, 4});
                    in[0] = general(610, dt, 4);
                    in[1] = stack(620, dt, 2, 4, 1);
                } else {
                    x = tg_input(g2, "a", dt, 3, (const int64_t[]){2, 4, 4});
                    y = tg_input(g2, "b", dt, 1, (const int64_t[]){4});
                    in[0] = stack(630, dt, 2, 4, 1);
                    in[1] = rhs(640, dt, 4, 0);
                }
                check_grad(g2, op2(g2, ops[o], x, y, NULL, 0), in, 2, ops[o]);
            }
        }
        g = graph();
        a = tg_input(g, "a", dt, 3, (const int64_t[]){2, 3, 3});
        check_grad(g, op1(g, "det", a, NULL, 0), (tg_tensor *[]){stack(650, dt, 2, 3, 1)}, 1,
                   "batched det");
        g = graph();
        a = tg_input(g, "a", dt, 3, (const int64_t[]){2, 3, 3});
        check_grad(g, op1(g, "inv", a, NULL, 0), (tg_tensor *[]){stack(660, dt, 2, 3, 1)}, 1,
                   "batched inv");
        for (int o = 0; o < 2; o++) {
            g = graph();
            a = tg_input(g, "a", dt, 3, (const int64_t[]){2, 4, 4});
            tg_var *outs[2];
            int nout = 2;
            assert_int_equal(tg_apply_multi(g, o ? "eigh" : "slogdet", &a, 1, NULL, 0, outs, &nout),
                             TG_OK);
            tg_tensor *m = stack(670, dt, 2, 4, o ? 2 : 1);
            for (int64_t e = 0; e < tg_tensor_size(m) && o && t; e++) /* as test_grad_eigh */
                tg_store_f64((char *)tg_tensor_data(m) + e * 4, dt, tg_tensor_get_f64(m, e) / 6.0);
            check_grad(g, o ? outs[0] : outs[1], (tg_tensor *[]){m}, 1,
                       o ? "batched eigh" : "batched slogdet");
        }
    }
}

/* ---- backends ---- */

/* Every op in one graph, run by the reference interpreter, the VM and the C JIT: the
 * outputs must agree (all three call the same kernels). */
static void test_backends(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *a = in_mat(g, "a", F64, 5, true), *b = in_rhs(g, "b", F64, 5, 2);
    tg_var *outs[12];
    int n2 = 2;
    outs[0] = op1(g, "cholesky", a, NULL, 0);
    outs[1] = op2(g, "solve", a, b, NULL, 0);
    outs[2] = op2(g, "solve_triangular", outs[0], b, (tg_attr[]){TG_A_BOOL("lower", true)}, 1);
    outs[3] = op2(g, "cho_solve", outs[0], b, NULL, 0);
    outs[4] = op1(g, "inv", a, NULL, 0);
    outs[5] = op1(g, "det", a, NULL, 0);
    assert_int_equal(tg_apply_multi(g, "slogdet", &a, 1, NULL, 0, &outs[6], &n2), TG_OK);
    assert_int_equal(tg_apply_multi(g, "eigh", &a, 1, NULL, 0, &outs[8], &n2), TG_OK);
    tg_var *cost = tg_reduce(g, "sum", tg_mul(g, outs[1], outs[3]), NULL, -1, false);
    tg_var *ga = NULL;
    assert_int_equal(tg_grad(g, cost, &a, 1, TG_DISCONNECTED_ERROR, &ga), TG_OK);
    outs[10] = ga;
    outs[11] = tg_transpose(g, a, NULL);
    assert_int_equal(tg_graph_set_outputs(g, outs, 12), TG_OK);
    tg_tensor *in[2] = {spd(90, F64, 5), rhs(91, F64, 5, 2)};
    tg_tensor *ref[12], *got[12];
    const tg_mode modes[] = {TG_MODE_REFERENCE, TG_MODE_VM, TG_MODE_C};
    for (size_t m = 0; m < TG_COUNTOF(modes); m++) {
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = modes[m], .no_fallback = true);
        tg_fn *f = NULL;
        tg_status st = tg_graph_compile(g, &o, &f);
        if (st == TG_OK) st = tg_fn_call(f, in, 2, m ? got : ref, 12);
        if (st != TG_OK) print_error("mode %d: %s\n", (int)modes[m], tg_last_error());
        assert_int_equal(st, TG_OK);
        tg_fn_free(f);
        for (int i = 0; i < 12 && m; i++) {
            assert_int_equal(tg_tensor_size(got[i]), tg_tensor_size(ref[i]));
            for (int64_t e = 0; e < tg_tensor_size(ref[i]); e++) {
                double x = tg_tensor_get_f64(got[i], e), y = tg_tensor_get_f64(ref[i], e);
                if (!(fabs(x - y) <= 1e-12 * (1 + fabs(y))))
                    print_error("mode %d output %d element %lld: %.17g != %.17g\n", (int)modes[m],
                                i, (long long)e, x, y);
                assert_true(fabs(x - y) <= 1e-12 * (1 + fabs(y)));
            }
            tg_tensor_free(got[i]);
        }
    }
    free_all(ref, 12);
    free_all(in, 2);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promote),       cmocka_unit_test(test_signature),
        cmocka_unit_test(test_infer),         cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_random_vs_c),   cmocka_unit_test(test_large),
        cmocka_unit_test(test_empty),         cmocka_unit_test(test_failures),
        cmocka_unit_test(test_grad_cholesky), cmocka_unit_test(test_grad_solvers),
        cmocka_unit_test(test_grad_inv_det),  cmocka_unit_test(test_grad_eigh),
        cmocka_unit_test(test_batched),       cmocka_unit_test(test_grad_batched),
        cmocka_unit_test(test_backends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
