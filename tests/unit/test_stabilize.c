/* test_stabilize.c - the stabilize phase (src/rewrite/stabilize.c). For each rule a graph
 * holding the fragile form is run twice with the reference interpreter: as written (it
 * must be wrong by far: 0 for log(1 + 1e-20), -inf for log(sigmoid(-800)), inf for
 * log(sum(exp(1000)))) and after tg_stabilize on a clone (it must be within 1e-12 relative
 * error for f64), and so must the default compile mode, which runs the whole rewrite
 * pipeline. The rewritten graph must verify, keep every output's dtype and shape, and
 * hold the stable op. Further tests check the patterns that must be left alone.
 * Expected values were computed with mpmath at 50 digits and pasted as literals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rewrite/rewrite.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...)  ((const double[]){__VA_ARGS__})
#define NVALS(...) ((int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)))

/* ---- helpers ---- */

/* Whether an `op` node is reachable from g's outputs. */
static bool has_op(const tg_graph *g, int op) {
    int n = 0;
    tg_node **order = tg_ir_toposort(g, &n);
    assert_non_null(order);
    bool found = false;
    for (int i = 0; i < n; i++) found = found || order[i]->op == op;
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return found;
}

/* A clone of g after the stabilize phase (verified). */
static tg_graph *stabilized(const tg_graph *g) {
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    tg_status st = tg_stabilize(c, NULL, NULL);
    if (st != TG_OK) print_message("stabilize: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    st = tg_graph_verify(c);
    if (st != TG_OK) print_message("verify: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    return c;
}

/* Runs g's single output on one input: with the reference interpreter (the graph as
 * written) when `reference`, else in the default mode (the rewrite pipeline first). */
static tg_tensor *run_mode(tg_graph *g, tg_tensor *in, bool reference) {
    tg_compile_opts opts = TG_COMPILE_OPTS(.mode = reference ? TG_MODE_REFERENCE : TG_MODE_VM);
    tg_fn *f = NULL;
    tg_tensor *out = NULL;
    tg_status st = tg_graph_compile(g, reference ? &opts : NULL, &f);
    if (st != TG_OK) print_message("compile: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    st = tg_fn_call(f, &in, 1, &out, 1);
    if (st != TG_OK) print_message("call: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_fn_free(f);
    return out;
}

static tg_tensor *run1(tg_graph *g, tg_tensor *in) { return run_mode(g, in, true); }

/* Largest relative error of t against want (n values): 0 where equal (infinities
 * included), inf where one side is not finite and the other differs. */
static double max_rel_err(const tg_tensor *t, const double *want, int n) {
    assert_int_equal(tg_tensor_size(t), n);
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        double a = tg_tensor_get_f64(t, i), b = want[i], e;
        if (a == b)
            e = 0.0;
        else if (!isfinite(a) || !isfinite(b))
            e = INFINITY;
        else
            e = fabs(a - b) / fmax(fabs(b), DBL_MIN);
        if (!(e <= worst)) worst = e; /* NaN counts as worst */
    }
    return worst;
}

typedef tg_var *(*build_fn)(tg_graph *g, tg_var *x);

typedef struct rule_case {
    const char *name; /* for messages */
    tg_dtype dt;      /* of x */
    int ndim;         /* of x */
    const int64_t *shape;
    const double *x;    /* input values, C order */
    const double *want; /* exact results (mpmath), C order */
    int nwant;
    build_fn build; /* the fragile form of x */
    int stable_op;  /* op that must appear after stabilize */
    int gone_op;    /* op that must be gone after stabilize (-1: none) */
    double tol;     /* relative tolerance of the stable form */
} rule_case;

/* The fragile form (reference mode, as written) must miss by far; the stable ones, after
 * tg_stabilize alone and in the default mode (whole pipeline), must be within tol. */
static void check_case(const rule_case *c) {
    tg_graph *g = tg_graph_new(NULL, c->name);
    tg_var *x = tg_input(g, "x", c->dt, c->ndim, c->shape);
    tg_var *y = c->build(g, x);
    assert_non_null(y);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);

    int64_t n = 1;
    for (int i = 0; i < c->ndim; i++) n *= c->shape[i];
    tg_tensor *in = tg_tensor_new(NULL, c->dt, c->ndim, c->shape);
    assert_non_null(in);
    for (int64_t i = 0; i < n; i++)
        tg_store_f64((char *)tg_tensor_data(in) + i * (int64_t)tg_dtype_size(c->dt), c->dt,
                     c->x[i]);

    tg_graph *s = stabilized(g);
    if (!has_op(s, c->stable_op) || (c->gone_op >= 0 && has_op(s, c->gone_op))) {
        print_message("%s: the rule did not apply:\n", c->name);
        tg_graph_print(s, stderr);
    }
    assert_true(has_op(s, c->stable_op));
    if (c->gone_op >= 0) assert_false(has_op(s, c->gone_op));
    tg_var *ys = tg_graph_output(s, 0);
    assert_int_equal(tg_var_dtype(ys), tg_var_dtype(y));
    assert_int_equal(tg_var_ndim(ys), tg_var_ndim(y));
    for (int i = 0; i < tg_var_ndim(y); i++) assert_int_equal(tg_var_dim(ys, i), tg_var_dim(y, i));

    tg_tensor *fragile = run1(g, in), *stable = run1(s, in), *dflt = run_mode(g, in, false);
    assert_int_equal(tg_tensor_dtype(stable), tg_tensor_dtype(fragile));
    assert_int_equal(tg_tensor_ndim(stable), tg_tensor_ndim(fragile));
    assert_int_equal(tg_tensor_dtype(dflt), tg_tensor_dtype(fragile));
    assert_int_equal(tg_tensor_ndim(dflt), tg_tensor_ndim(fragile));
    double ef = max_rel_err(fragile, c->want, c->nwant);
    double es = max_rel_err(stable, c->want, c->nwant);
    double ed = max_rel_err(dflt, c->want, c->nwant);
    print_message("%-26s rel err as written %.3g, stabilized %.3g, default mode %.3g\n", c->name,
                  ef, es, ed);
    assert_true(es < c->tol);
    assert_true(ed < c->tol);
    assert_true(ef > 1e-3); /* the test is meaningful only if the fragile form fails */

    tg_tensor_free(fragile);
    tg_tensor_free(stable);
    tg_tensor_free(dflt);
    tg_tensor_free(in);
    tg_graph_free(s);
    tg_graph_free(g);
}

static tg_var *sum_axis(tg_graph *g, tg_var *v, int64_t axis, bool keepdims) {
    return tg_reduce(g, "sum", v, &axis, 1, keepdims);
}

/* ---- one numeric test per rule ---- */

static tg_var *b_log1p(tg_graph *g, tg_var *x) {
    return tg_log(g, tg_add(g, tg_literal_int(g, 1), x));
}
static tg_var *b_log1p_right(tg_graph *g, tg_var *x) {
    return tg_log(g, tg_add(g, x, tg_literal_float(g, 1.0)));
}

static void test_log1p(void **state) {
    (void)state;
    const double xs[] = {1e-20, 1e-10, -1e-17, 0.5};
    const double want[] = {1e-20, 9.9999999995e-11, -1e-17, 0.4054651081081644};
    rule_case c = {"log1p", TG_DT_F64, 1,           SHAPE(4),  xs,   want,
                   4,       b_log1p,   TG_OP_LOG1P, TG_OP_LOG, 1e-12};
    check_case(&c);
    c.name = "log1p (x + 1)";
    c.build = b_log1p_right;
    check_case(&c);
}

/* f32 stays f32: the weak 1 took x's dtype, so does log1p */
static void test_log1p_f32(void **state) {
    (void)state;
    const double xs[] = {1e-10, -3e-9, 0.25};
    const double want[] = {9.9999999995e-11, -3.0000000045e-09, 0.22314355131420976};
    rule_case c = {"log1p f32", TG_DT_F32, 1,           SHAPE(3),  xs,  want,
                   3,           b_log1p,   TG_OP_LOG1P, TG_OP_LOG, 1e-6};
    check_case(&c);
}

static tg_var *b_softplus(tg_graph *g, tg_var *x) {
    return tg_log(g, tg_add(g, tg_literal_int(g, 1), tg_exp(g, x)));
}
static tg_var *b_softplus_right(tg_graph *g, tg_var *x) {
    return tg_log(g, tg_add(g, tg_exp(g, x), tg_literal_int(g, 1)));
}

/* log(1 + exp(x)) becomes softplus(x), not log1p(exp(x)) (which overflows at 800 too) */
static void test_softplus(void **state) {
    (void)state;
    const double xs[] = {800, -800, 0, 30, -30, 1e-20};
    const double want[] = {800.0,
                           0.0,
                           0.6931471805599453,
                           30.000000000000092,
                           9.357622968839737e-14,
                           0.6931471805599453};
    rule_case c = {"softplus", TG_DT_F64,      2,           SHAPE(2, 3), xs, want, 6,
                   b_softplus, TG_OP_SOFTPLUS, TG_OP_LOG1P, 1e-12};
    check_case(&c);
    c.name = "softplus (e + 1)";
    c.build = b_softplus_right;
    check_case(&c);
    c.gone_op = TG_OP_EXP;
    check_case(&c);
}

static tg_var *b_log1p_exp(tg_graph *g, tg_var *x) { return tg_log1p(g, tg_exp(g, x)); }

static void test_log1p_exp(void **state) {
    (void)state;
    const double xs[] = {800, -30, 0};
    const double want[] = {800.0, 9.357622968839737e-14, 0.6931471805599453};
    rule_case c = {"log1p_exp", TG_DT_F64,      1,         SHAPE(3), xs, want, 3,
                   b_log1p_exp, TG_OP_SOFTPLUS, TG_OP_EXP, 1e-12};
    check_case(&c);
}

static tg_var *b_expm1(tg_graph *g, tg_var *x) {
    return tg_sub(g, tg_exp(g, x), tg_literal_int(g, 1));
}

static void test_expm1(void **state) {
    (void)state;
    const double xs[] = {1e-20, 1e-10, -3e-9, 2};
    const double want[] = {1e-20, 1.00000000005e-10, -2.9999999955e-09, 6.38905609893065};
    rule_case c = {"expm1", TG_DT_F64, 1,           SHAPE(4),  xs,   want,
                   4,       b_expm1,   TG_OP_EXPM1, TG_OP_SUB, 1e-12};
    check_case(&c);
}

static tg_var *b_log_sigmoid(tg_graph *g, tg_var *x) { return tg_log(g, tg_sigmoid(g, x)); }

static void test_log_sigmoid(void **state) {
    (void)state;
    const double xs[] = {-800, 40, 0, -2};
    const double want[] = {-800.0, -4.248354255291589e-18, -0.6931471805599453,
                           -2.1269280110429727};
    rule_case c = {"log_sigmoid",  TG_DT_F64,     1,    SHAPE(4), xs, want, 4, b_log_sigmoid,
                   TG_OP_SOFTPLUS, TG_OP_SIGMOID, 1e-12};
    check_case(&c);
}

static tg_var *b_log1m_sigmoid(tg_graph *g, tg_var *x) {
    return tg_log(g, tg_sub(g, tg_literal_int(g, 1), tg_sigmoid(g, x)));
}

static void test_log1m_sigmoid(void **state) {
    (void)state;
    const double xs[] = {800, -40, 0, 2};
    const double want[] = {-800.0, -4.248354255291589e-18, -0.6931471805599453,
                           -2.1269280110429727};
    rule_case c = {"log1m_sigmoid", TG_DT_F64,     1,    SHAPE(4), xs, want, 4, b_log1m_sigmoid,
                   TG_OP_SOFTPLUS,  TG_OP_SIGMOID, 1e-12};
    check_case(&c);
}

static tg_var *b_log_softmax(tg_graph *g, tg_var *x) {
    tg_attr ax = TG_A_INT("axis", 1);
    return tg_log(g, tg_apply(g, "softmax", &x, 1, &ax, 1));
}

static const double sm_x[] = {1000, 0, -1000, 0.5, -1, 2};
static const double sm_want[] = {
    0.0, -1000.0, -2000.0, -1.7413112966571571, -3.241311296657157, -0.24131129665715706};

static void test_log_softmax(void **state) {
    (void)state;
    rule_case c = {
        "log_softmax",     TG_DT_F64,     2,    SHAPE(2, 3), sm_x, sm_want, 6, b_log_softmax,
        TG_OP_LOG_SOFTMAX, TG_OP_SOFTMAX, 1e-12};
    check_case(&c);
}

static tg_var *b_log_softmax_div(tg_graph *g, tg_var *x) {
    return tg_log(g, tg_div(g, tg_exp(g, x), sum_axis(g, tg_exp(g, x), 1, true)));
}
/* one exp node shared by numerator and denominator */
static tg_var *b_log_softmax_div_shared(tg_graph *g, tg_var *x) {
    tg_var *e = tg_exp(g, x);
    return tg_log(g, tg_div(g, e, sum_axis(g, e, -1, true)));
}

static void test_log_softmax_div(void **state) {
    (void)state;
    rule_case c = {"log_softmax_div", TG_DT_F64,         2,         SHAPE(2, 3), sm_x, sm_want, 6,
                   b_log_softmax_div, TG_OP_LOG_SOFTMAX, TG_OP_DIV, 1e-12};
    check_case(&c);
    c.name = "log_softmax_div (one exp)";
    c.build = b_log_softmax_div_shared;
    check_case(&c);
}

static tg_var *b_logsumexp(tg_graph *g, tg_var *x) {
    return tg_log(g, sum_axis(g, tg_exp(g, x), 1, false));
}
static tg_var *b_logsumexp_keep(tg_graph *g, tg_var *x) {
    return tg_log(g, sum_axis(g, tg_exp(g, x), 1, true));
}
static tg_var *b_logsumexp_all(tg_graph *g, tg_var *x) {
    return tg_log(g, tg_reduce(g, "sum", tg_exp(g, x), NULL, -1, false));
}

static void test_logsumexp(void **state) {
    (void)state;
    const double xs[] = {1000, 1000, -1000, -1000, 1000, 999};
    const double want[] = {1000.6931471805599, -999.3068528194401, 1000.3132616875182};
    rule_case c = {"logsumexp", TG_DT_F64,       2,         SHAPE(3, 2), xs, want, 3,
                   b_logsumexp, TG_OP_LOGSUMEXP, TG_OP_SUM, 1e-12};
    check_case(&c);
    c.name = "logsumexp keepdims";
    c.build = b_logsumexp_keep;
    check_case(&c);
    const double xa[] = {1000, 999, -1000, -1001};
    const double wa[] = {1000.3132616875182};
    rule_case all = {"logsumexp all", TG_DT_F64,       2,         SHAPE(2, 2), xa, wa, 1,
                     b_logsumexp_all, TG_OP_LOGSUMEXP, TG_OP_SUM, 1e-12};
    check_case(&all);
}

static tg_var *b_log1mexp(tg_graph *g, tg_var *x) {
    return tg_log(g, tg_sub(g, tg_literal_int(g, 1), tg_exp(g, x)));
}
static tg_var *b_log1mexp_log1p(tg_graph *g, tg_var *x) {
    return tg_log1p(g, tg_neg(g, tg_exp(g, x)));
}

/* log(1 - exp(x)) becomes log1mexp(x): as written it is -inf at -1e-20 (1 - exp rounds
 * to 0) and 0 at -50 */
static void test_log1mexp(void **state) {
    (void)state;
    const double xs[] = {-1e-20, -1e-10, -0.5, -50.0};
    const double want[] = {-46.051701859880914, -23.025850929990458, -0.9327521295671886,
                           -1.9287498479639178e-22};
    rule_case c = {"log1mexp", TG_DT_F64,      1,         SHAPE(4), xs, want, 4,
                   b_log1mexp, TG_OP_LOG1MEXP, TG_OP_EXP, 1e-12};
    check_case(&c);
    c.name = "log1mexp (log1p)";
    c.build = b_log1mexp_log1p;
    check_case(&c);
}

static tg_var *b_logaddexp(tg_graph *g, tg_var *x) {
    tg_var *b = tg_mul(g, x, tg_literal_float(g, -0.5));
    return tg_log(g, tg_add(g, tg_exp(g, x), tg_exp(g, b)));
}

/* log(exp(x) + exp(-x/2)) becomes logaddexp(x, -x/2): inf as written at +-1000 */
static void test_logaddexp(void **state) {
    (void)state;
    const double xs[] = {1000.0, -1000.0, 0.5, 30.0};
    const double want[] = {1000.0, 500.0, 0.8868710061149, 30.0};
    rule_case c = {"logaddexp", TG_DT_F64,       1,         SHAPE(4), xs, want, 4,
                   b_logaddexp, TG_OP_LOGADDEXP, TG_OP_EXP, 1e-12};
    check_case(&c);
}

static tg_var *b_log_erfc(tg_graph *g, tg_var *x) { return tg_log(g, tg_erfc(g, x)); }

/* log(erfc(x)) goes through log_ndtr (its lower tail through erfcx): -inf as written at 40 */
static void test_log_erfc(void **state) {
    (void)state;
    const double xs[] = {40.0, 100.0, 0.5, -3.0};
    const double want[] = {-1604.2615566532736, -10005.177585122665, -0.7350111298370844,
                           0.6931361352504468};
    rule_case c = {"log_erfc", TG_DT_F64,      1,          SHAPE(4), xs, want, 4,
                   b_log_erfc, TG_OP_LOG_NDTR, TG_OP_ERFC, 1e-12};
    check_case(&c);
}

static tg_var *b_log_ndtr(tg_graph *g, tg_var *x) {
    tg_var *z = tg_div(g, tg_neg(g, x), tg_literal_float(g, 1.4142135623730951));
    return tg_log(g, tg_mul(g, tg_literal_float(g, 0.5), tg_erfc(g, z)));
}

/* A censored normal's log(0.5 * erfc(-x / sqrt 2)) becomes log_ndtr(x): -inf as written at
 * -40 */
static void test_log_ndtr(void **state) {
    (void)state;
    const double xs[] = {-40.0, -1e3, 0.5, 3.0};
    const double want[] = {-804.6084420137538, -500007.82669481216, -0.3689464152886564,
                           -0.0013508099647481938};
    rule_case c = {"log_ndtr", TG_DT_F64,      1,          SHAPE(4), xs, want, 4,
                   b_log_ndtr, TG_OP_LOG_NDTR, TG_OP_ERFC, 1e-12};
    check_case(&c);
}

/* ---- non-finite inputs: the stable forms agree with the fragile ones ---- */

/* Runs build(x) as written and stabilized on the same values (a [4,2] f64 input) and
 * requires the same results: NaN where the other has NaN, the same infinity, finite
 * values within rounding (0 and -0 count as equal). */
static void check_same(const char *name, const double *xs, build_fn build) {
    tg_graph *g = tg_graph_new(NULL, name);
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(4, 2));
    tg_var *y = build(g, x);
    assert_non_null(y);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    tg_tensor *in = tg_tensor_from_data(NULL, TG_DT_F64, 2, SHAPE(4, 2), xs);
    assert_non_null(in);
    tg_graph *s = stabilized(g);
    tg_tensor *a = run1(g, in), *b = run1(s, in);
    assert_int_equal(tg_tensor_size(a), tg_tensor_size(b));
    for (int64_t i = 0; i < tg_tensor_size(a); i++) {
        double u = tg_tensor_get_f64(a, i), v = tg_tensor_get_f64(b, i);
        bool ok = (isnan(u) && isnan(v)) || u == v ||
                  (isfinite(u) && isfinite(v) && fabs(u - v) <= 1e-12 * fmax(1.0, fabs(v)));
        if (!ok)
            print_message("%s: element %lld: as written %g, stabilized %g\n", name, (long long)i, u,
                          v);
        assert_true(ok);
    }
    tg_tensor_free(a);
    tg_tensor_free(b);
    tg_tensor_free(in);
    tg_graph_free(s);
    tg_graph_free(g);
}

static void test_nonfinite(void **state) {
    (void)state;
    const double inf = INFINITY;
    const double ew[] = {inf, -inf, NAN, -1, -2, 0, -0.0, 1};
    /* rows; a row mixing +inf with finite values is the one documented difference of
     * log(softmax) (NaN everywhere) and log_softmax ([nan, -inf]) */
    const double rows[] = {-inf, -inf, NAN, 1, inf, inf, -inf, 0};
    check_same("log1p", ew, b_log1p);
    check_same("softplus", ew, b_softplus);
    check_same("log1p_exp", ew, b_log1p_exp);
    check_same("expm1", ew, b_expm1);
    check_same("log_sigmoid", ew, b_log_sigmoid);
    check_same("log1m_sigmoid", ew, b_log1m_sigmoid);
    check_same("log_softmax", rows, b_log_softmax);
    check_same("log_softmax_div", rows, b_log_softmax_div);
    check_same("logsumexp", rows, b_logsumexp);
    check_same("log1mexp", ew, b_log1mexp);
    check_same("log1mexp (log1p)", ew, b_log1mexp_log1p);
    check_same("logaddexp", ew, b_logaddexp);
    check_same("log_erfc", ew, b_log_erfc);
    check_same("log_ndtr", ew, b_log_ndtr);
    const double mixed[] = {inf, 1, -inf, 0, NAN, inf, 2, 3};
    check_same("log_softmax_div +inf", mixed, b_log_softmax_div);
    check_same("logsumexp +inf", mixed, b_logsumexp);

    /* the documented difference: log(softmax([inf, 1])) is [nan, nan] as written, and
     * log_softmax gives [nan, -inf] (as scipy's two functions do) */
    tg_graph *g = tg_graph_new(NULL, "softmax_inf");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(1, 2));
    tg_var *y = b_log_softmax(g, x);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    tg_tensor *in = tg_tensor_from_data(NULL, TG_DT_F64, 2, SHAPE(1, 2), (double[]){inf, 1});
    tg_graph *s = stabilized(g);
    tg_tensor *a = run1(g, in), *b = run1(s, in);
    assert_true(isnan(tg_tensor_get_f64(a, 0)) && isnan(tg_tensor_get_f64(a, 1)));
    assert_true(isnan(tg_tensor_get_f64(b, 0)) && tg_tensor_get_f64(b, 1) == -inf);
    tg_tensor_free(a);
    tg_tensor_free(b);
    tg_tensor_free(in);
    tg_graph_free(s);
    tg_graph_free(g);
}

/* ---- patterns that must be left alone ---- */

static tg_var *ones(tg_graph *g, int n) {
    double v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    tg_tensor *t = tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){n}, v);
    assert_non_null(t);
    tg_var *c = tg_constant(g, t);
    tg_tensor_free(t);
    return c;
}

/* Stabilizes a one-output graph and checks which ops are there afterwards. */
static void expect_kept(tg_graph *g, tg_var *y, int kept_op, int absent_op) {
    assert_non_null(y);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    tg_graph *s = stabilized(g);
    assert_true(has_op(s, kept_op));
    assert_false(has_op(s, absent_op));
    tg_graph_free(s);
    tg_graph_free(g);
}

static void test_not_rewritten(void **state) {
    (void)state;
    tg_graph *g;
    tg_var *x, *z;

    /* a 1 that broadcasts a scalar x to [3]: log1p(x) would be a scalar */
    g = tg_graph_new(NULL, "bcast");
    x = tg_input(g, "x", TG_DT_F64, 0, NULL);
    expect_kept(g, tg_log(g, tg_add(g, ones(g, 3), x)), TG_OP_ADD, TG_OP_LOG1P);

    /* ... but a ones vector that x already has the shape of is a clean 1 */
    g = tg_graph_new(NULL, "ones_same");
    x = tg_input(g, "x", TG_DT_F64, 1, SHAPE(3));
    expect_kept(g, tg_log(g, tg_add(g, x, ones(g, 3))), TG_OP_LOG1P, TG_OP_ADD);

    /* not a 1 */
    g = tg_graph_new(NULL, "two");
    x = tg_input(g, "x", TG_DT_F64, 1, SHAPE(3));
    expect_kept(g, tg_log(g, tg_add(g, tg_literal_int(g, 2), x)), TG_OP_ADD, TG_OP_LOG1P);

    /* integer x: the add wraps around, log1p would not */
    g = tg_graph_new(NULL, "int");
    x = tg_input(g, "x", TG_DT_I64, 1, SHAPE(3));
    expect_kept(g, tg_log(g, tg_add(g, tg_literal_int(g, 1), x)), TG_OP_ADD, TG_OP_LOG1P);

    /* 1 - exp(x) and exp(x) - 2 are not expm1 */
    g = tg_graph_new(NULL, "one_minus_exp");
    x = tg_input(g, "x", TG_DT_F64, 1, SHAPE(3));
    expect_kept(g, tg_sub(g, tg_literal_int(g, 1), tg_exp(g, x)), TG_OP_SUB, TG_OP_EXPM1);
    g = tg_graph_new(NULL, "exp_minus_two");
    x = tg_input(g, "x", TG_DT_F64, 1, SHAPE(3));
    expect_kept(g, tg_sub(g, tg_exp(g, x), tg_literal_int(g, 2)), TG_OP_SUB, TG_OP_EXPM1);

    /* a 1 that broadcasts exp(x) */
    g = tg_graph_new(NULL, "exp_bcast");
    x = tg_input(g, "x", TG_DT_F64, 0, NULL);
    expect_kept(g, tg_sub(g, tg_exp(g, x), ones(g, 2)), TG_OP_SUB, TG_OP_EXPM1);

    /* 2 - sigmoid(x) */
    g = tg_graph_new(NULL, "two_minus_sigmoid");
    x = tg_input(g, "x", TG_DT_F64, 1, SHAPE(3));
    expect_kept(g, tg_log(g, tg_sub(g, tg_literal_int(g, 2), tg_sigmoid(g, x))), TG_OP_SIGMOID,
                TG_OP_SOFTPLUS);

    /* hand-written softmax over two different values */
    g = tg_graph_new(NULL, "two_values");
    x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(2, 3));
    z = tg_input(g, "z", TG_DT_F64, 2, SHAPE(2, 3));
    expect_kept(g, tg_log(g, tg_div(g, tg_exp(g, x), sum_axis(g, tg_exp(g, z), 1, true))),
                TG_OP_DIV, TG_OP_LOG_SOFTMAX);

    /* the sum drops its axis: the div broadcasts it along the wrong axis */
    g = tg_graph_new(NULL, "no_keepdims");
    x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(3, 3));
    expect_kept(g, tg_log(g, tg_div(g, tg_exp(g, x), sum_axis(g, tg_exp(g, x), 1, false))),
                TG_OP_DIV, TG_OP_LOG_SOFTMAX);

    /* two of three axes: log_softmax takes one axis or all of them */
    g = tg_graph_new(NULL, "two_axes");
    x = tg_input(g, "x", TG_DT_F64, 3, SHAPE(2, 3, 4));
    tg_var *e = tg_exp(g, x);
    expect_kept(g, tg_log(g, tg_div(g, e, tg_reduce(g, "sum", e, (int64_t[]){0, 2}, 2, true))),
                TG_OP_DIV, TG_OP_LOG_SOFTMAX);

    /* prod is not sum */
    g = tg_graph_new(NULL, "prod");
    x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(2, 3));
    expect_kept(g, tg_log(g, tg_reduce(g, "prod", tg_exp(g, x), NULL, -1, false)), TG_OP_PROD,
                TG_OP_LOGSUMEXP);
}

/* Every axis of a hand-written softmax, as a list, is log_softmax over all axes. */
static void test_softmax_div_all_axes(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "all");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, SHAPE(2, 2));
    tg_var *e = tg_exp(g, x);
    tg_var *y = tg_log(g, tg_div(g, e, tg_reduce(g, "sum", e, (int64_t[]){1, 0}, 2, true)));
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    tg_graph *s = stabilized(g);
    assert_true(has_op(s, TG_OP_LOG_SOFTMAX));
    assert_false(has_op(s, TG_OP_DIV));
    tg_tensor *in =
        tg_tensor_from_data(NULL, TG_DT_F64, 2, SHAPE(2, 2), (double[]){1000, 999, -1000, -1001});
    tg_tensor *out = run1(s, in);
    /* x - logsumexp(x) with logsumexp = 1000.3132616875182 */
    double want[] = {-0.3132616875182, -1.3132616875182, -2000.3132616875182, -2001.3132616875182};
    assert_true(max_rel_err(out, want, 4) < 1e-12);
    tg_tensor_free(out);
    tg_tensor_free(in);
    tg_graph_free(s);
    tg_graph_free(g);
}

/* Several rules in one graph, sharing subexpressions; a value with another user keeps it. */
static void test_shared_users(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "shared");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, SHAPE(3));
    tg_var *p = tg_add(g, tg_literal_int(g, 1), x);
    tg_var *outs[2] = {tg_log(g, p), tg_mul(g, p, p)};
    assert_int_equal(tg_graph_set_outputs(g, outs, 2), TG_OK);
    tg_graph *s = stabilized(g);
    assert_true(has_op(s, TG_OP_LOG1P));
    assert_true(has_op(s, TG_OP_ADD)); /* still feeds mul */
    assert_false(has_op(s, TG_OP_LOG));
    tg_graph_free(s);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log1p),
        cmocka_unit_test(test_log1p_f32),
        cmocka_unit_test(test_softplus),
        cmocka_unit_test(test_log1mexp),
        cmocka_unit_test(test_logaddexp),
        cmocka_unit_test(test_log_erfc),
        cmocka_unit_test(test_log_ndtr),
        cmocka_unit_test(test_log1p_exp),
        cmocka_unit_test(test_expm1),
        cmocka_unit_test(test_log_sigmoid),
        cmocka_unit_test(test_log1m_sigmoid),
        cmocka_unit_test(test_log_softmax),
        cmocka_unit_test(test_log_softmax_div),
        cmocka_unit_test(test_logsumexp),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_not_rewritten),
        cmocka_unit_test(test_softmax_div_all_axes),
        cmocka_unit_test(test_shared_users),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
