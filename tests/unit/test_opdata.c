/* test_opdata.c - the properties op records state as data (ops.h), checked against the
 * records' own behaviour:
 *  - reductions (`reduce`): for every record that has one, folding sample rows (NaN,
 *    infinities, signed zeros, ties, overflow, empty axes) by the data alone - identity,
 *    combine, NaN rule, finalisation - gives bit for bit what the op's reference kernel
 *    gives, and inference rejects an empty axis exactly where the data says there is no
 *    identity. A new reduction is checked here by its record alone;
 *  - the plain reductions (tg_reduce_plain) are the ones fused nodes may reduce;
 *  - tg_reduce_axes: none, ints, lists, negative axes, keepdims, the mask, and the errors;
 *  - the BLAS form (`blas`) of the lowered ops and their in-place variants;
 *  - effects (`effects`): which records carry flags, what tg_op_foldable/tg_op_mergeable
 *    make of each flag, and canonicalize honouring them: a call of constants is not
 *    folded (TG_EFFECT_NOFOLD) but equal calls merge, and the random ops, pure functions
 *    of their key, are folded and merged like any other.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops_testutil.h"

#include "ops/fused.h"

#include "rewrite/rewrite.h"

#define R 7 /* sample rows */
#define C 4 /* elements per row */

static const double rows[R][C] = {
    {1.0, 2.0, 3.0, 4.0},
    {-0.0, 0.0, -0.0, 0.0},
    {NAN, 1.0, NAN, 2.0},
    {3.0, -INFINITY, INFINITY, 1.0},
    {-INFINITY, -INFINITY, -INFINITY, -INFINITY},
    {2.5, -1.0, 0.5, 2.5},
    {1e308, 1e308, -1e308, 5.0},
};

/* What the record's data says reduction r gives for x[0..n): out[0] for a reduction,
 * out[0..n) for the softmax family. */
static void fold_by_data(const tg_reduce_def *r, const double *x, int n, double *out) {
    double m = -INFINITY; /* the shift of the exp forms: the maximum, a NaN winning */
    for (int i = 0; i < n && !isnan(m); i++)
        if (isnan(x[i]) || x[i] > m) m = x[i];
    bool expf =
        r->fin == TG_FIN_LOGSUMEXP || r->fin == TG_FIN_SOFTMAX || r->fin == TG_FIN_LOG_SOFTMAX;
    double s = r->fin == TG_FIN_SOFTMAX || isfinite(m) ? m : 0.0;
    double a = r->identity;
    int64_t arg = 0;
    for (int i = 0; i < n; i++) {
        double v = expf ? exp(x[i] - s) : x[i];
        switch (r->combine) {
        case TG_RED_SUM:
            a += v;
            break;
        case TG_RED_PROD:
            a *= v;
            break;
        case TG_RED_MAX:
        case TG_RED_MIN:
            if (r->nan_wins && isnan(a)) break;
            if ((r->nan_wins && isnan(v)) || (r->combine == TG_RED_MAX ? v > a : v < a)) {
                a = v;
                arg = i;
            }
            break;
        case TG_RED_OR:
            a = (a != 0.0 || v != 0.0) ? 1.0 : 0.0;
            break;
        case TG_RED_AND:
            a = (a != 0.0 && v != 0.0) ? 1.0 : 0.0;
            break;
        default:
            fail_msg("unknown combine %d", r->combine);
        }
    }
    switch (r->fin) {
    case TG_FIN_NONE:
        out[0] = a;
        break;
    case TG_FIN_MEAN:
        out[0] = a / (double)n;
        break;
    case TG_FIN_ARG:
        out[0] = (double)arg;
        break;
    case TG_FIN_LOGSUMEXP:
        out[0] = log(a) + s;
        break;
    case TG_FIN_SOFTMAX:
        for (int i = 0; i < n; i++) out[i] = exp(x[i] - s) / a;
        break;
    case TG_FIN_LOG_SOFTMAX:
        for (int i = 0; i < n; i++) out[i] = (x[i] - s) - log(a);
        break;
    default:
        fail_msg("unknown finalisation %d", r->fin);
    }
}

/* Normalized attributes reducing axis 1 of a matrix, without keepdims. */
static void axis1_attrs(const tg_op_def *op, tg_aval *a) {
    static const int64_t one[1] = {1};
    a[0] = op->attrs[0].type == TG_AS_AXES ? (tg_aval){.kind = TG_ATTR_INTS, .ints = one, .n = 1}
                                           : AV_INT(1);
    a[1] = AV_BOOL(0);
}

static bool same_value(double want, double got) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    return want == got && signbit(want) == signbit(got);
}

static void test_reduce_data_matches_reference(void **state) {
    (void)state;
    int nred = 0;
    for (int i = 0; i < TG_OP_COUNT; i++) {
        const tg_op_def *op = tg_op_table[i];
        const tg_reduce_def *r = &op->reduce;
        if (r->combine == TG_RED_NONE) {
            /* nothing else of the data is set without a combine */
            assert_int_equal(r->fin, TG_FIN_NONE);
            assert_int_equal(r->nan_wins, 0);
            assert_int_equal(r->nonempty, 0);
            assert_true(op->kind != TG_KIND_REDUCE);
            continue;
        }
        nred++;
        print_message("checking %s\n", op->name);
        bool spread = r->fin == TG_FIN_SOFTMAX || r->fin == TG_FIN_LOG_SOFTMAX;
        assert_int_equal(op->kind == TG_KIND_REDUCE, !spread);
        assert_int_equal(op->min_in, 1);
        assert_int_equal(op->nout, 1);
        tg_aval attrs[2];
        axis1_attrs(op, attrs);
        /* the sample rows */
        tg_tensor *x = mk_tensor(TG_DT_F64, SHAPE(R, C), &rows[0][0]);
        run_res res = run_op(op, &x, 1, attrs);
        if (res.st != TG_OK) print_error("%s: %s\n", op->name, res.msg);
        assert_int_equal(res.st, TG_OK);
        for (int row = 0; row < R; row++) {
            double want[C];
            fold_by_data(r, rows[row], C, want);
            for (int j = 0; j < (spread ? C : 1); j++) {
                int64_t idx[2] = {row, j};
                double got = tg_load_f64(tg_tensor_at(res.out, idx), res.out->dtype);
                if (!same_value(want[j], got))
                    print_error("%s, row %d, element %d: the data gives %.17g, the kernel %.17g\n",
                                op->name, row, j, want[j], got);
                assert_true(same_value(want[j], got));
            }
        }
        tg_tensor_free(res.out);
        tg_tensor_free(x);
        /* an empty axis: an error exactly where there is no identity, else fin(identity) */
        tg_type te = TY(TG_DT_F64, 2, 0);
        infer_res ir = infer_op(op, &te, 1, attrs, false);
        assert_int_equal(ir.st == TG_OK, !r->nonempty);
        if (r->nonempty || spread) continue;
        tg_tensor *e = mk_tensor(TG_DT_F64, SHAPE(2, 0), NULL);
        res = run_op(op, &e, 1, attrs);
        assert_int_equal(res.st, TG_OK);
        double want;
        fold_by_data(r, NULL, 0, &want);
        for (int64_t k = 0; k < 2; k++) {
            double got = tg_load_f64(tg_tensor_at(res.out, &k), res.out->dtype);
            if (!same_value(want, got))
                print_error("%s of nothing: the data gives %g, the kernel %g\n", op->name, want,
                            got);
            assert_true(same_value(want, got));
        }
        tg_tensor_free(res.out);
        tg_tensor_free(e);
    }
    assert_true(nred >= 12); /* sum prod mean max min argmax argmin any all + softmax family */
}

/* The plain reductions are exactly the ones fused nodes may reduce. */
static void test_reduce_plain(void **state) {
    (void)state;
    const int plain[] = {TG_OP_SUM, TG_OP_PROD, TG_OP_MEAN, TG_OP_MAX, TG_OP_MIN};
    for (int i = 0; i < TG_OP_COUNT; i++) {
        bool want = false;
        for (size_t k = 0; k < TG_COUNTOF(plain); k++) want = want || plain[k] == i;
        assert_int_equal(tg_reduce_plain(tg_op_table[i]), want);
        assert_int_equal(tg_fused_can_reduce(i), want);
    }
    assert_false(tg_fused_can_reduce(-1));
    assert_false(tg_fused_can_reduce(TG_OP_COUNT));
}

static void test_reduce_axes(void **state) {
    (void)state;
    tg_axes ax;
    char err[160];
    tg_aval a[2] = {AV_NONE, AV_BOOL(1)};
    assert_true(tg_reduce_axes(a, 2, 3, &ax, err, sizeof err));
    assert_int_equal(ax.mask, 7u);
    assert_int_equal(ax.nred, 3);
    assert_true(ax.keep && ax.red[0] && ax.red[2] && !ax.red[3]);
    a[0] = AV_INTS(-1, 0);
    a[1] = AV_BOOL(0);
    assert_true(tg_reduce_axes(a, 2, 3, &ax, err, sizeof err));
    assert_int_equal(ax.mask, 5u);
    assert_int_equal(ax.nred, 2);
    assert_false(ax.keep || ax.red[1]);
    a[0] = AV_INT(-2); /* argmax's int, softmax's axis (no keepdims: nattrs 1) */
    a[1] = AV_BOOL(1);
    assert_true(tg_reduce_axes(a, 1, 3, &ax, err, sizeof err));
    assert_int_equal(ax.mask, 2u);
    assert_false(ax.keep);
    a[0] = AV_EMPTY; /* an empty list reduces nothing */
    assert_true(tg_reduce_axes(a, 2, 3, &ax, NULL, 0));
    assert_int_equal(ax.mask, 0u);
    assert_int_equal(ax.nred, 0);
    a[0] = AV_NONE; /* a scalar: none reduces no axis */
    assert_true(tg_reduce_axes(a, 2, 0, &ax, NULL, 0));
    assert_int_equal(ax.mask, 0u);
    a[0] = AV_INTS(3);
    assert_false(tg_reduce_axes(a, 2, 3, &ax, err, sizeof err));
    assert_string_equal(err, "axis 3 is out of bounds for an array of dimension 3");
    a[0] = AV_INTS(1, -2);
    assert_false(tg_reduce_axes(a, 2, 3, &ax, err, sizeof err));
    assert_string_equal(err, "duplicate value in 'axis' (-2)");
    assert_false(tg_reduce_axes(a, 2, 3, &ax, NULL, 0)); /* no message asked for */
    a[0] = (tg_aval){.kind = TG_ATTR_STR, .s = "x"};
    assert_false(tg_reduce_axes(a, 2, 3, &ax, err, sizeof err));
    a[0] = AV_INTS(0, 1, 2, 3, 4, 5, 6, 7); /* every axis of the highest rank */
    assert_true(tg_reduce_axes(a, 2, TG_MAX_DIMS, &ax, NULL, 0));
    assert_int_equal(ax.mask, (1u << TG_MAX_DIMS) - 1);
}

static void test_blas_forms(void **state) {
    (void)state;
    const struct {
        int op, inplace, form;
    } forms[] = {
        {TG_OP_GEMM, TG_OP_GEMM_INPLACE, TG_BLAS_GEMM},
        {TG_OP_GEMV, TG_OP_GEMV_INPLACE, TG_BLAS_GEMV},
        {TG_OP_GER, TG_OP_GER_INPLACE, TG_BLAS_GER},
    };
    int n = 0;
    for (int i = 0; i < TG_OP_COUNT; i++) {
        const tg_op_def *op = tg_op_table[i];
        if (op->blas == TG_BLAS_NONE) continue;
        n++;
        /* every lowered form: C, A, B and the optional scalars, alpha and beta first */
        assert_int_equal(op->kind, TG_KIND_LINALG);
        assert_int_equal(op->min_in, 3);
        assert_int_equal(op->max_in, 5);
        assert_string_equal(op->attrs[0].name, "alpha");
        assert_string_equal(op->attrs[1].name, "beta");
    }
    assert_int_equal(n, 6);
    for (size_t k = 0; k < TG_COUNTOF(forms); k++) {
        const tg_op_def *plain = tg_op_table[forms[k].op], *inp = tg_op_table[forms[k].inplace];
        assert_int_equal(plain->blas, forms[k].form);
        assert_int_equal(inp->blas, forms[k].form);
        assert_int_equal(plain->destroys, 0);
        assert_int_equal(inp->destroys, 1u); /* the accumulator */
        assert_int_equal(plain->nattrs, inp->nattrs);
    }
    assert_int_equal(tg_op_dot.blas, TG_BLAS_NONE); /* a product, not a BLAS form yet */
    assert_int_equal(tg_op_outer.blas, TG_BLAS_NONE);
}

/* The flags of each record, and what the two predicates make of them. */
static void test_effects_flags(void **state) {
    (void)state;
    for (int i = 0; i < TG_OP_COUNT; i++) {
        const tg_op_def *op = tg_op_table[i];
        /* a call, a pmap, a scan and a map need a run's sub-graph executor, a transfer says
         * where a value lives at run time, axis_index and axis_size read the rank it runs
         * as and their number, the collectives talk to the other ranks; the rest are pure */
        bool nofold = i == TG_OP_CALL || i == TG_OP_PMAP || i == TG_OP_SCAN || i == TG_OP_MAP ||
                      i == TG_OP_TRANSFER;
        bool collective = i == TG_OP_PSUM || i == TG_OP_PMEAN || i == TG_OP_PMAX ||
                          i == TG_OP_PMIN || i == TG_OP_ALL_GATHER || i == TG_OP_PSUM_SCATTER ||
                          i == TG_OP_PPERMUTE || i == TG_OP_PSUM_START || i == TG_OP_PSUM_WAIT;
        bool axis_read = i == TG_OP_AXIS_INDEX || i == TG_OP_AXIS_SIZE;
        unsigned want = nofold       ? TG_EFFECT_NOFOLD
                        : collective ? TG_EFFECT_STATE | TG_EFFECT_AXIS
                        : axis_read  ? TG_EFFECT_AXIS
                                     : 0u;
        if (op->effects != want) print_error("%s: effects %u\n", op->name, op->effects);
        assert_int_equal(op->effects, want);
        /* the SPMD typing (docs/pmap.md): the reductions and the axis size are the same on
         * every rank, the other collectives and the rank vary; an op reading no axis has
         * no kind of its own */
        bool invariant = i == TG_OP_PSUM || i == TG_OP_PMEAN || i == TG_OP_PMAX ||
                         i == TG_OP_PMIN || i == TG_OP_AXIS_SIZE || i == TG_OP_PSUM_WAIT;
        unsigned spmd = invariant                             ? TG_SPMD_INVARIANT
                        : collective || i == TG_OP_AXIS_INDEX ? TG_SPMD_VARYING
                                                              : TG_SPMD_NONE;
        if (op->spmd != spmd) print_error("%s: spmd %u\n", op->name, op->spmd);
        assert_int_equal(op->spmd, spmd);
        /* only the halves of the split psum move in the program order (tg_ir_schedule) */
        unsigned sched = i == TG_OP_PSUM_START  ? TG_SCHED_EARLY
                         : i == TG_OP_PSUM_WAIT ? TG_SCHED_LATE
                                                : TG_SCHED_ANY;
        assert_int_equal(op->sched, sched);
    }
    tg_op_def fx = tg_op_exp;
    assert_true(tg_op_foldable(&fx) && tg_op_mergeable(&fx));
    fx.effects = TG_EFFECT_NOFOLD;
    assert_false(tg_op_foldable(&fx));
    assert_true(tg_op_mergeable(&fx));
    fx.effects = TG_EFFECT_STATE; /* state implies no folding */
    assert_false(tg_op_foldable(&fx));
    assert_false(tg_op_mergeable(&fx));
    fx.effects = TG_EFFECT_AXIS; /* the rank is known only when it runs; equal ones merge */
    assert_false(tg_op_foldable(&fx));
    assert_true(tg_op_mergeable(&fx));
}

/* Live nodes of op `op`. */
static int count_op(const tg_graph *g, int op) {
    int n = 0, c = 0;
    tg_node **order = tg_ir_toposort(g, &n);
    assert_non_null(order);
    for (int i = 0; i < n; i++) c += order[i]->op == op;
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return c;
}

/* Function `name` of src after the canonicalize phase alone (calls are kept: no inlining). */
static tg_graph *canon_func(const char *src, const char *name, tg_module **m) {
    tg_status st = tg_module_parse(NULL, src, strlen(src), "test.tg", m);
    if (st != TG_OK) print_error("parse: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_graph *g = tg_graph_clone(tg_module_find(*m, name));
    assert_non_null(g);
    assert_int_equal(tg_canonicalize(g, NULL, NULL), TG_OK);
    assert_int_equal(tg_graph_verify(g), TG_OK);
    return g;
}

/* A call of constants (its record says TG_EFFECT_NOFOLD) stays a call; two equal ones
 * become one; so do transfers. The same graph with the squares written out folds to a
 * constant. */
static void test_effects_in_canonicalize(void **state) {
    (void)state;
    static const char *src = "func sq(x: f64[3]) {\n"
                             "  return mul(x, x)\n"
                             "}\n"
                             "func main(y: f64[3]) {\n"
                             "  c = const(value=[1.0, 2.0, 3.0], dtype=\"f64\")\n"
                             "  return add(add(sq(c), sq(c)), y)\n"
                             "}\n"
                             "func open(y: f64[3]) {\n"
                             "  c = const(value=[1.0, 2.0, 3.0], dtype=\"f64\")\n"
                             "  return add(add(mul(c, c), mul(c, c)), y)\n"
                             "}\n"
                             "func moved(y: f64[3]) {\n"
                             "  c = const(value=[1.0, 2.0, 3.0], dtype=\"f64\")\n"
                             "  a = transfer(c, device=\"cpu:1\")\n"
                             "  b = transfer(c, device=\"cpu:1\")\n"
                             "  return add(add(a, b), y)\n"
                             "}\n";
    tg_module *m = NULL;
    tg_graph *g = canon_func(src, "main", &m);
    tg_module_free(m);
    assert_int_equal(count_op(g, TG_OP_CALL), 1); /* merged, not folded */
    assert_int_equal(count_op(g, TG_OP_ADD), 2);
    tg_graph_free(g);
    g = canon_func(src, "open", &m);
    tg_module_free(m);
    assert_int_equal(count_op(g, TG_OP_MUL), 0); /* folded */
    assert_int_equal(count_op(g, TG_OP_ADD), 1);
    tg_graph_free(g);
    g = canon_func(src, "moved", &m);
    tg_module_free(m);
    assert_int_equal(count_op(g, TG_OP_TRANSFER), 1); /* merged, not folded */
    assert_int_equal(count_op(g, TG_OP_ADD), 2);
    tg_graph_free(g);
}

/* Random ops are pure functions of their key: with a constant key they fold, and two
 * equal draws are one value. */
static void test_random_ops_are_pure(void **state) {
    (void)state;
    static const char *src = "func main(y: f64[4], s: i64[]) {\n"
                             "  k = key(7)\n"
                             "  u = add(uniform(k, shape=[4], dtype=\"f64\"), y)\n"
                             "  v = add(uniform(k, shape=[4], dtype=\"f64\"), y)\n"
                             "  j = key(s)\n"
                             "  w = normal(j, shape=[4], dtype=\"f64\")\n"
                             "  z = normal(j, shape=[4], dtype=\"f64\")\n"
                             "  return add(add(u, v), add(w, z))\n"
                             "}\n";
    tg_module *m = NULL;
    tg_graph *g = canon_func(src, "main", &m);
    tg_module_free(m);
    assert_int_equal(count_op(g, TG_OP_KEY), 1); /* key(s) stays: s is an input */
    assert_int_equal(count_op(g, TG_OP_UNIFORM), 0);
    assert_int_equal(count_op(g, TG_OP_NORMAL), 1);
    assert_int_equal(count_op(g, TG_OP_ADD), 4); /* v is u, z is w: add(add(u, u), add(w, w)) */
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_data_matches_reference),
        cmocka_unit_test(test_reduce_plain),
        cmocka_unit_test(test_reduce_axes),
        cmocka_unit_test(test_blas_forms),
        cmocka_unit_test(test_effects_flags),
        cmocka_unit_test(test_effects_in_canonicalize),
        cmocka_unit_test(test_random_ops_are_pure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
