/* test_rewrite.c - the rewrite engine (src/rewrite/engine.c), the canonicalize phase and the
 * pipeline: rules indexed by root op, fixed point, cycle guard, type refusal, rule errors,
 * use counts and dead nodes, statistics, constant folding (exact types, weak literals,
 * several outputs), uses kept where a constant would change a user's inference, NaN/inf
 * semantics of the identities (the graph as written and after the pipeline, both run with
 * the reference kernels, agree bit for bit), compilation never touching the user's graph,
 * determinism, 100,000-node chains (and the work of each pass on them, which must grow
 * linearly: a count of steps, not a time), and allocation failures. Timings are printed by
 * `tgraph opt --stats`, never asserted here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fault_alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rewrite/rewrite.h"

/* ---- helpers ---- */

/* The only function of a .tg text (the module is returned for freeing). */
static tg_graph *parse1(const char *src, tg_module **m) {
    tg_status st = tg_module_parse(NULL, src, strlen(src), "test.tg", m);
    if (st != TG_OK) print_message("parse: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    return tg_module_func(*m, 0);
}

/* Live nodes of op `op` (-1: all). */
static int count_op(const tg_graph *g, int op) {
    int n = 0, c = 0;
    tg_node **order = tg_ir_toposort(g, &n);
    assert_non_null(order);
    for (int i = 0; i < n; i++) c += op < 0 || order[i]->op == op;
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return c;
}

/* The text tg_graph_print writes (caller frees). */
static char *print_str(const tg_graph *g) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(tg_graph_print(g, f), TG_OK);
    fclose(f);
    return text;
}

/* A clone of g after the canonicalize pass, verified. */
static tg_graph *canon(const tg_graph *g) {
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    tg_status st = tg_canonicalize(c, NULL, NULL);
    if (st != TG_OK) print_message("canonicalize: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    st = tg_graph_verify(c);
    if (st != TG_OK) print_message("verify: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    return c;
}

static tg_tensor *vec_f64(const double *v, int64_t n) {
    return tg_tensor_from_data(NULL, TG_DT_F64, 1, &n, v);
}

/* Runs g in `mode` on the inputs; fills out (nout of them). */
static void run_mode(tg_graph *g, tg_mode mode, tg_tensor *const *in, int nin, tg_tensor **out,
                     int nout) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .verify = true);
    tg_fn *f = NULL;
    tg_status st = tg_graph_compile(g, &o, &f);
    if (st != TG_OK) print_message("compile: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    st = tg_fn_call(f, in, nin, out, nout);
    if (st != TG_OK) print_message("call: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_fn_free(f);
}

/* Runs the graph after the whole pipeline with the reference kernels: what the rewrites
 * alone do to the values, whatever executor later runs them. */
static void run_rewritten(tg_graph *g, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
    tg_graph *r = NULL;
    tg_optimize_opts o = TG_OPTIMIZE_OPTS(.verify = true);
    tg_status st = tg_graph_optimize(g, &o, &r);
    if (st != TG_OK) print_message("optimize: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    run_mode(r, TG_MODE_REFERENCE, in, nin, out, nout);
    tg_graph_free(r);
}

/* Same dtype, shape and bytes, except that any two NaNs are equal (IEEE leaves the sign
 * and payload of a NaN result open: -(x*3) and x*(-3) may differ there). Signed zeros and
 * infinities must match exactly. */
static void assert_same_tensor(const tg_tensor *a, const tg_tensor *b) {
    tg_dtype dt = tg_tensor_dtype(a);
    assert_int_equal(dt, tg_tensor_dtype(b));
    assert_int_equal(tg_tensor_ndim(a), tg_tensor_ndim(b));
    for (int i = 0; i < tg_tensor_ndim(a); i++)
        assert_int_equal(tg_tensor_shape(a)[i], tg_tensor_shape(b)[i]);
    assert_true(tg_tensor_is_contiguous(a) && tg_tensor_is_contiguous(b));
    size_t es = tg_dtype_size(dt);
    const char *pa = tg_tensor_data(a), *pb = tg_tensor_data(b);
    for (int64_t i = 0; i < tg_tensor_size(a); i++) {
        if (tg_dtype_is_float(dt) && isnan(tg_tensor_get_f64(a, i)) &&
            isnan(tg_tensor_get_f64(b, i)))
            continue;
        if (memcmp(pa + (size_t)i * es, pb + (size_t)i * es, es) != 0)
            print_message("element %lld: %g vs %g\n", (long long)i, tg_tensor_get_f64(a, i),
                          tg_tensor_get_f64(b, i));
        assert_memory_equal(pa + (size_t)i * es, pb + (size_t)i * es, es);
    }
}

/* ---- the engine, with rules made for the tests ---- */

static int calls_exp, calls_any;

static tg_var *r_count_exp(tg_rw *rw, tg_node *n) {
    (void)rw;
    assert_int_equal(n->op, TG_OP_EXP);
    calls_exp++;
    return NULL;
}

static tg_var *r_count_any(tg_rw *rw, tg_node *n) {
    (void)rw;
    (void)n;
    calls_any++;
    return NULL;
}

static void test_rules_indexed_by_root_op(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f64[3]) {\n y = exp(tanh(exp(x)))\n return y\n}\n", &m);
    static const tg_rule rules[] = {{"count_exp", TG_OP_EXP, r_count_exp},
                                    {"count_any", -1, r_count_any}};
    calls_exp = calls_any = 0;
    tg_graph *c = tg_graph_clone(g);
    tg_rw_report rep = {0};
    assert_int_equal(tg_rw_apply(c, "test", rules, 2, &rep), TG_OK);
    assert_int_equal(calls_exp, 2); /* the two exp nodes, once each */
    assert_int_equal(calls_any, 3); /* every node */
    assert_int_equal(rep.nrules, 2);
    assert_string_equal(rep.rules[0].name, "count_exp");
    assert_int_equal(rep.rules[0].tried, 2);
    assert_int_equal(rep.rules[0].applied, 0);
    assert_int_equal(rep.rules[1].tried, 3);
    tg_rw_report_free(c->ctx, &rep);
    tg_graph_free(c);
    tg_module_free(m);
}

/* neg(x) -> x: every neg of a chain goes, users being visited again after each rewrite. */
static tg_var *r_drop_neg(tg_rw *rw, tg_node *n) {
    (void)rw;
    return n->in[0];
}

static void test_fixed_point_and_stats(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1(
        "func f(x: f64[3]) {\n y = exp(neg(neg(neg(x))))\n z = neg(y)\n return z, y\n}\n", &m);
    static const tg_rule rules[] = {{"drop_neg", TG_OP_NEG, r_drop_neg}};
    tg_graph *c = tg_graph_clone(g);
    tg_rw_report rep = {0};
    assert_int_equal(tg_rw_apply(c, "test", rules, 1, &rep), TG_OK);
    assert_int_equal(count_op(c, TG_OP_NEG), 0);
    assert_int_equal(count_op(c, -1), 1);
    assert_int_equal(rep.rules[0].applied, 4);
    assert_int_equal(tg_graph_verify(c), TG_OK);
    /* both outputs now read exp(x) */
    assert_ptr_equal(tg_graph_output(c, 0), tg_graph_output(c, 1));
    tg_rw_report_free(c->ctx, &rep);
    tg_graph_free(c);
    tg_module_free(m);
}

/* exp(x) -> log(x) and log(x) -> exp(x): rules that undo each other. */
static tg_var *r_exp_to_log(tg_rw *rw, tg_node *n) { return tg_log(tg_rw_graph(rw), n->in[0]); }
static tg_var *r_log_to_exp(tg_rw *rw, tg_node *n) { return tg_exp(tg_rw_graph(rw), n->in[0]); }

static void test_cycle_guard(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f64[3]) {\n y = exp(x)\n return y\n}\n", &m);
    static const tg_rule rules[] = {{"exp_to_log", TG_OP_EXP, r_exp_to_log},
                                    {"log_to_exp", TG_OP_LOG, r_log_to_exp}};
    tg_graph *c = tg_graph_clone(g);
    assert_int_equal(tg_rw_apply(c, "pingpong", rules, 2, NULL), TG_ELIMIT);
    assert_non_null(strstr(tg_last_error(), "no fixed point"));
    assert_non_null(strstr(tg_last_error(), "pingpong"));
    assert_true(strstr(tg_last_error(), "exp_to_log") || strstr(tg_last_error(), "log_to_exp"));
    tg_graph_free(c);
    tg_module_free(m);
}

/* A rule that broadcasts behind the engine's back, and one whose builder fails. */
static tg_var *r_bad_type(tg_rw *rw, tg_node *n) {
    return tg_cast(tg_rw_graph(rw), n->in[0], TG_DT_F32);
}

static tg_var *r_bad_build(tg_rw *rw, tg_node *n) {
    tg_graph *g = tg_rw_graph(rw);
    tg_var *y = tg_input(g, "y", TG_DT_F64, 1, (int64_t[]){4});
    return tg_add(g, n->in[0], y); /* [3] + [4]: a builder error */
}

static void test_type_change_refused(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f64[3]) {\n y = exp(x)\n return y\n}\n", &m);
    static const tg_rule bad_type[] = {{"bad_type", TG_OP_EXP, r_bad_type}};
    static const tg_rule bad_build[] = {{"bad_build", TG_OP_EXP, r_bad_build}};
    tg_graph *c = tg_graph_clone(g);
    assert_int_equal(tg_rw_apply(c, "test", bad_type, 1, NULL), TG_EINTERNAL);
    assert_non_null(strstr(tg_last_error(), "bad_type"));
    assert_non_null(strstr(tg_last_error(), "f64[3]"));
    assert_non_null(strstr(tg_last_error(), "f32[3]"));
    tg_graph_free(c);
    c = tg_graph_clone(g);
    assert_int_equal(tg_rw_apply(c, "test", bad_build, 1, NULL), TG_EINTERNAL);
    assert_non_null(strstr(tg_last_error(), "bad_build"));
    assert_non_null(strstr(tg_last_error(), "cannot broadcast"));
    tg_graph_free(c);
    tg_module_free(m);
}

/* Use counts seen by a rule: x is read twice, y once; dead users do not count. */
static int seen_uses_x = -1;

static tg_var *r_uses(tg_rw *rw, tg_node *n) {
    if (n->op == TG_OP_TANH) seen_uses_x = tg_rw_use_count(rw, n->in[0]);
    return NULL;
}

static void test_use_counts_ignore_dead_nodes(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1(
        "func f(x: f64[3]) {\n dead = exp(x)\n dead2 = sin(x)\n y = tanh(x)\n return y, x\n}\n",
        &m);
    static const tg_rule rules[] = {{"uses", TG_OP_TANH, r_uses}};
    assert_int_equal(tg_rw_apply(g, "test", rules, 1, NULL), TG_OK);
    assert_int_equal(seen_uses_x, 2); /* tanh and the output, not the dead exp and sin */
    tg_module_free(m);
}

/* tg_rw_const_fill: a constant of the node's exact type (weak 0-d ones are literals). */
static tg_var *r_fill(tg_rw *rw, tg_node *n) { return tg_rw_const_fill(rw, &n->out[0]->type, 2); }

static void test_const_fill(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f32[2,3]) {\n  return tanh(x), tanh(neg(2.5))\n}\n", &m);
    static const tg_rule rules[] = {{"fill", TG_OP_TANH, r_fill}};
    tg_graph *c = tg_graph_clone(g);
    assert_int_equal(tg_rw_apply(c, "test", rules, 1, NULL), TG_OK);
    assert_int_equal(tg_graph_verify(c), TG_OK);
    tg_var *a = tg_graph_output(c, 0), *b = tg_graph_output(c, 1);
    assert_true(tg_rw_same_type(a, tg_graph_output(g, 0)) && tg_rw_is_const(a, 2));
    assert_true(tg_rw_same_type(b, tg_graph_output(g, 1)) && tg_rw_is_const(b, 2));
    assert_true(b->type.weak && b->lit == 'f' && !a->type.weak && a->lit == 0);
    tg_graph_free(c);
    tg_module_free(m);
}

/* ---- canonicalize ---- */

static void test_fold_types_exact(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f32[2]) {\n"
                         "  a = add(mul(3, 4), 1)\n"                           /* weak i64 */
                         "  b = neg(2.5)\n"                                    /* weak f64 */
                         "  c = exp(const(value=[0.0, 1.0], dtype=\"f32\"))\n" /* strong f32 */
                         "  d, e = split(const(value=[1, 2, 3, 4], dtype=\"i16\"), sections=2)\n"
                         "  return a, b, c, d, e\n}\n",
                         &m);
    tg_graph *c = canon(g);
    assert_int_equal(count_op(c, -1), 0); /* everything folded */
    for (int i = 0; i < 5; i++) {
        tg_var *o = tg_graph_output(c, i), *w = tg_graph_output(g, i);
        assert_int_equal(o->kind, TG_VAR_CONST);
        assert_true(tg_rw_same_type(o, w));
    }
    assert_true(tg_graph_output(c, 0)->type.weak && tg_graph_output(c, 0)->lit == 'i');
    assert_true(tg_rw_is_const(tg_graph_output(c, 0), 13));
    assert_true(tg_graph_output(c, 1)->type.weak && tg_graph_output(c, 1)->lit == 'f');
    assert_false(tg_graph_output(c, 2)->type.weak);
    assert_int_equal(tg_graph_output(c, 2)->type.dtype, TG_DT_F32);
    assert_int_equal(tg_graph_output(c, 3)->type.dtype, TG_DT_I16);
    tg_graph_free(c);
    tg_module_free(m);
}

/* A constant that would make reshape's inference more precise (or fail) keeps the use on
 * the old value, so the IR still verifies and the run still reports the error. */
static void test_uses_kept_where_inference_changes(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f64[6]) {\n"
                         "  d = add(1, 2)\n"
                         "  r = reshape(x, d, 2)\n"
                         "  s = add(d, 1)\n"
                         "  return r, s\n}\n",
                         &m);
    tg_graph *c = canon(g);
    assert_int_equal(count_op(c, TG_OP_RESHAPE), 1);
    assert_int_equal(count_op(c, TG_OP_ADD), 1); /* add(1, 2) kept for the reshape */
    assert_true(tg_rw_is_const(tg_graph_output(c, 1), 4));
    assert_int_equal(tg_graph_output(c, 0)->type.shape[0], -1);
    tg_graph_free(c);
    tg_module_free(m);
}

/* Identities around NaN, inf and signed zeros: the rewritten graph computes exactly the
 * bits of the graph as written. */
static void test_identities_keep_nan_inf_and_zero_signs(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f64[6]) {\n"
                         "  a = mul(x, 0.0)\n"
                         "  b = add(x, 0.0)\n"
                         "  c = sub(x, -0.0)\n"
                         "  d = mul(1, x)\n"
                         "  e = neg(neg(x))\n"
                         "  f = neg(mul(x, 3))\n"
                         "  h = add(neg(x), x)\n"
                         "  i = div(1.0, add(x, -0.0))\n"
                         "  j = mul(mul(x, 1e300), 1e-300)\n"
                         "  return a, b, c, d, e, f, h, i, j\n}\n",
                         &m);
    static const double xs[6] = {-0.0, 0.0, INFINITY, -INFINITY, NAN, 1.5};
    tg_tensor *x = vec_f64(xs, 6);
    tg_tensor *ref[9], *opt[9];
    run_mode(g, TG_MODE_REFERENCE, &x, 1, ref, 9);
    run_rewritten(g, &x, 1, opt, 9);
    for (int i = 0; i < 9; i++) {
        assert_same_tensor(ref[i], opt[i]);
        tg_tensor_free(ref[i]);
        tg_tensor_free(opt[i]);
    }
    /* and the rewrites that are allowed did happen */
    tg_graph *c = canon(g);
    assert_ptr_equal(tg_graph_output(c, 3), tg_graph_input(c, 0)); /* mul(1, x) */
    assert_ptr_equal(tg_graph_output(c, 4), tg_graph_input(c, 0)); /* neg(neg(x)) */
    assert_int_equal(tg_graph_output(c, 6)->node->op, TG_OP_SUB);  /* add(neg(x), x) */
    assert_int_equal(tg_graph_output(c, 0)->node->op, TG_OP_MUL);  /* mul(x, 0.0) kept */
    assert_int_equal(tg_graph_output(c, 1)->node->op, TG_OP_ADD);  /* add(x, +0.0) kept */
    tg_graph_free(c);
    tg_tensor_free(x);
    tg_module_free(m);
}

/* Integer identities: mul by 0 and constant chains wrap exactly. */
static void test_integer_identities_run_the_same(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: i8[4]) {\n"
                         "  a = mul(mul(x, 100), 3)\n"
                         "  b = add(add(x, 100), 100)\n"
                         "  c = mul(x, 0)\n"
                         "  d = mul(x, -1)\n"
                         "  return a, b, c, d\n}\n",
                         &m);
    int8_t xs[4] = {-128, -1, 7, 127};
    tg_tensor *x = tg_tensor_from_data(NULL, TG_DT_I8, 1, (int64_t[]){4}, xs);
    tg_tensor *ref[4], *opt[4];
    run_mode(g, TG_MODE_REFERENCE, &x, 1, ref, 4);
    run_rewritten(g, &x, 1, opt, 4);
    for (int i = 0; i < 4; i++) {
        assert_same_tensor(ref[i], opt[i]);
        tg_tensor_free(ref[i]);
        tg_tensor_free(opt[i]);
    }
    tg_graph *c = canon(g);
    assert_int_equal(count_op(c, TG_OP_MUL), 1); /* the chain a */
    assert_int_equal(count_op(c, TG_OP_ADD), 1); /* the chain b */
    assert_int_equal(count_op(c, TG_OP_NEG), 1); /* d */
    assert_int_equal(tg_graph_output(c, 2)->kind, TG_VAR_CONST);
    tg_graph_free(c);
    tg_tensor_free(x);
    tg_module_free(m);
}

static void test_merge_multi_output(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f64[4]) {\n"
                         "  a, b = split(x, sections=2)\n"
                         "  c, d = split(x, sections=2)\n"
                         "  return add(a, c), mul(b, d)\n}\n",
                         &m);
    tg_graph *c = canon(g);
    assert_int_equal(count_op(c, TG_OP_SPLIT), 1);
    tg_graph_free(c);
    tg_module_free(m);
}

static void test_static_shapes(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f32[?,3]) {\n"
                         "  z = alloc(0.0, shape(x)[1])\n"
                         "  return z, shape(x)[0], size(x)\n}\n",
                         &m);
    tg_graph *c = canon(g);
    /* shape(x)[1] is 3, but alloc would then infer f64[3] for f64[?]: that use keeps it */
    assert_int_equal(tg_graph_output(c, 0)->type.shape[0], -1);
    assert_int_equal(tg_graph_output(c, 1)->kind, TG_VAR_NODE);
    assert_int_equal(tg_graph_output(c, 2)->kind, TG_VAR_NODE);
    tg_graph_free(c);
    tg_module_free(m);
}

/* ---- the pipeline and compilation ---- */

static void test_compile_leaves_user_graph_alone(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f64[3]) {\n"
                         "  y = mul(add(x, 0), 1)\n"
                         "  z = add(tanh(y), tanh(y))\n"
                         "  return z\n}\n",
                         &m);
    char *before = print_str(g);
    int nodes = tg_graph_node_count(g), vars = g->vars.n;
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK); /* default: TG_MODE_VM */
    char *after = print_str(g);
    assert_string_equal(before, after);
    assert_int_equal(tg_graph_node_count(g), nodes);
    assert_int_equal(g->vars.n, vars);
    assert_int_equal(tg_graph_verify(g), TG_OK);
    double xs[3] = {0.5, -1, 2};
    tg_tensor *x = vec_f64(xs, 3), *out = NULL;
    assert_int_equal(tg_fn_call(f, &x, 1, &out, 1), TG_OK);
    assert_true(fabs(((double *)tg_tensor_data(out))[1] - 2 * tanh(-1.0)) < 1e-15);
    tg_tensor_free(out);
    tg_tensor_free(x);
    tg_fn_free(f);
    free(before);
    free(after);
    tg_module_free(m);
}

static void test_optimize_api(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f64[3]) {\n"
                         "  unused = exp(x)\n"
                         "  y = neg(neg(mul(x, 1)))\n"
                         "  return y\n}\n",
                         &m);
    tg_graph *r = NULL;
    tg_optimize_opts bad = TG_OPTIMIZE_OPTS(.print_after = "nonsense");
    assert_int_equal(tg_graph_optimize(g, &bad, &r), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "unknown pass 'nonsense'"));
    assert_null(r);
    char *text = NULL, *stats = NULL;
    size_t len = 0, slen = 0;
    FILE *pf = open_memstream(&text, &len), *sf = open_memstream(&stats, &slen);
    tg_optimize_opts o =
        TG_OPTIMIZE_OPTS(.print_after = "all", .print_to = pf, .stats_to = sf, .verify = true);
    assert_int_equal(tg_graph_optimize(g, &o, &r), TG_OK);
    fclose(pf);
    fclose(sf);
    assert_int_equal(tg_graph_node_count(r), 0); /* compact: y is x */
    assert_ptr_equal(tg_graph_output(r, 0), tg_graph_input(r, 0));
    for (int i = 0; tg_pass_name(i); i++) {
        char head[64];
        snprintf(head, sizeof head, "# after %s\n", tg_pass_name(i));
        assert_non_null(strstr(text, head));
        assert_non_null(strstr(stats, tg_pass_name(i)));
    }
    assert_null(tg_pass_name(8));
    assert_non_null(strstr(stats, "compile-time report for 'f': 4 nodes in, 0 out"));
    assert_non_null(strstr(stats, "neg_neg"));
    assert_non_null(strstr(stats, "mul_one"));
    free(text);
    free(stats);
    tg_graph_free(r);
    tg_module_free(m);
}

static void test_deterministic(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse1("func f(x: f64[3], y: f64[3]) {\n"
                         "  a = add(mul(2, x), mul(x, 2))\n"
                         "  b = add(neg(y), mul(3, 4))\n"
                         "  c = sum(sum(outer(x, y), axis=0), axis=0)\n"
                         "  return a, b, c\n}\n",
                         &m);
    tg_graph *r1 = NULL, *r2 = NULL;
    assert_int_equal(tg_graph_optimize(g, NULL, &r1), TG_OK);
    assert_int_equal(tg_graph_optimize(g, NULL, &r2), TG_OK);
    char *t1 = print_str(r1), *t2 = print_str(r2);
    assert_string_equal(t1, t2);
    free(t1);
    free(t2);
    tg_graph_free(r1);
    tg_graph_free(r2);
    tg_module_free(m);
}

/* ---- long chains: every walk is iterative ---- */

static void test_long_chains(void **state) {
    (void)state;
    const int n = 100000;
    tg_graph *g = tg_graph_new(NULL, "chain");
    tg_var *x = tg_input(g, "x", TG_DT_I64, 1, (int64_t[]){2});
    tg_var *v = x, *w = x;
    for (int i = 0; i < n; i++) {
        v = tg_add(g, v, tg_literal_int(g, 1)); /* const_chain folds all of it */
        w = tg_exp(g, tg_neg(g, tg_neg(g, w))); /* neg_neg leaves the exps */
    }
    tg_var *outs[2] = {v, w};
    assert_int_equal(tg_graph_set_outputs(g, outs, 2), TG_OK);
    tg_graph *r = NULL;
    tg_optimize_opts o = TG_OPTIMIZE_OPTS(.verify = true);
    assert_int_equal(tg_graph_optimize(g, &o, &r), TG_OK);
    assert_int_equal(count_op(r, TG_OP_ADD), 1);
    assert_int_equal(count_op(r, TG_OP_NEG), 0);
    int64_t xs[2] = {5, -7};
    tg_tensor *in = tg_tensor_from_data(NULL, TG_DT_I64, 1, (int64_t[]){2}, xs), *out[2];
    tg_fn *f = NULL;
    tg_compile_opts co = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .no_rewrite = true);
    assert_int_equal(tg_graph_compile(r, &co, &f), TG_OK);
    assert_int_equal(tg_fn_call(f, &in, 1, out, 2), TG_OK);
    assert_int_equal(((int64_t *)tg_tensor_data(out[0]))[0], 5 + n);
    assert_int_equal(((int64_t *)tg_tensor_data(out[0]))[1], -7 + n);
    tg_tensor_free(out[0]);
    tg_tensor_free(out[1]);
    tg_tensor_free(in);
    tg_fn_free(f);
    tg_graph_free(r);
    tg_graph_free(g);
}

/* ---- the work of each pass grows linearly with the graph ---- */

/* One block of a chain where many rules fire and fusion groups form (bench/rewrite_chain.c
 * times the same kind of chain). */
static tg_var *mixed_block(tg_graph *g, tg_var *h, tg_var *y, tg_var *W, tg_var *b) {
    const int64_t s84[2] = {8, 4}, s48[2] = {4, 8}, axis1 = 1;
    tg_attr keep[2] = {TG_A_INTS("axis", &axis1, 1), TG_A_BOOL("keepdims", true)};
    h = tg_mul(g, tg_literal_float(g, 2.0), tg_add(g, h, tg_literal_float(g, 1.0)));
    h = tg_neg(g, tg_log(g, tg_exp(g, h)));
    h = tg_mul(g, h, tg_literal_float(g, -1.0));
    h = tg_reshape(g, tg_reshape(g, h, 2, s84), 2, s48);
    h = tg_transpose(g, tg_transpose(g, h, NULL), NULL);
    h = tg_add(g, h, tg_neg(g, y));
    h = tg_log(g, tg_add(g, tg_literal_float(g, 1.0), tg_exp(g, h)));
    h = tg_sub(g, tg_exp(g, h), tg_literal_float(g, 1.0));
    h = tg_tanh(g, tg_add(g, tg_dot(g, tg_mul(g, h, tg_literal_float(g, 1.0)), W), b));
    h = tg_add(g, h, y);
    return tg_sub(g, h, tg_apply(g, "sum", &h, 1, keep, 2));
}

/* Runs the pipeline on a copy of g with a report, and checks that no pass did more than
 * 32 steps per node of g (plus a constant: the sibling searches of fuse near the end of a
 * chain). A merge table that lets equal keys pile up, a worklist that rescans, or sibling
 * searches that walk the rest of a chain for every pair, all grow quadratically. */
static tg_graph *optimize_counted(const tg_graph *g) {
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    tg_rw_report rep = {0};
    tg_rw_opts o = {0};
    assert_int_equal(tg_rw_pipeline(&c, &o, &rep), TG_OK);
    long n = tg_graph_node_count(g);
    assert_int_equal(rep.npasses, 8);
    for (int i = 0; i < rep.npasses; i++) {
        if (rep.passes[i].work > 32 * n + 1000000)
            print_message("pass %s: %ld steps for %ld nodes\n", rep.passes[i].name,
                          rep.passes[i].work, n);
        assert_true(rep.passes[i].work <= 32 * n + 1000000);
    }
    assert_true(rep.passes[1].work >= n); /* the count counts (canonicalize) */
    tg_rw_report_free(g->ctx, &rep);
    return c;
}

static void test_linear_work(void **state) {
    (void)state;
    const int n = 100000;
    const int64_t s[2] = {4, 8}, sw[2] = {8, 8};
    /* neg(neg(...)): pairs cancel, each equal to a node merged before */
    tg_graph *g = tg_graph_new(NULL, "cancel");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 2, s), *h = x;
    for (int i = 0; i < n; i++) h = tg_neg(g, h);
    assert_int_equal(tg_graph_set_outputs(g, &h, 1), TG_OK);
    tg_graph *r = optimize_counted(g);
    assert_int_equal(tg_graph_node_count(r), 0);
    assert_string_equal(tg_var_name(tg_graph_output(r, 0)), "x");
    tg_graph_free(r);
    tg_graph_free(g);
    /* the mixed chain: merges, identities, stabilize, gemm, fusion with reductions */
    g = tg_graph_new(NULL, "mixed");
    h = tg_input(g, "x", TG_DT_F32, 2, s);
    tg_var *y = tg_input(g, "y", TG_DT_F32, 2, s), *W = tg_input(g, "W", TG_DT_F32, 2, sw);
    tg_var *b = tg_input(g, "b", TG_DT_F32, 2, s);
    while (h && tg_graph_node_count(g) < n) h = mixed_block(g, h, y, W, b);
    assert_non_null(h);
    assert_int_equal(tg_graph_set_outputs(g, &h, 1), TG_OK);
    r = optimize_counted(g);
    int blocks = count_op(r, TG_OP_GEMM);
    assert_true(blocks > 3000);
    assert_int_equal(count_op(r, TG_OP_FUSED), 2 * blocks);
    assert_int_equal(count_op(r, TG_OP_SUM), blocks);
    assert_int_equal(count_op(r, TG_OP_SUB), 1); /* the last block's, fused with nothing */
    assert_int_equal(count_op(r, -1), 4 * blocks + 1);
    tg_graph_free(r);
    tg_graph_free(g);
}

/* ---- allocation failures ---- */

static const char oom_src[] = "func f(x: f64[3], i: i32[3]) {\n"
                              "  a = add(mul(2, x), mul(x, 2))\n"
                              "  b = neg(mul(neg(neg(x)), 3))\n"
                              "  c = add(mul(mul(i, 2), 3), mul(i, 0))\n"
                              "  d = sum(sum(outer(x, x), axis=0), axis=0)\n"
                              "  e = reshape(transpose(transpose(outer(x, x))), shape=[9])\n"
                              "  f = add(shape(x), const(value=[1, 2, 3], dtype=\"i64\"))\n"
                              "  return a, b, c, d, e, f\n}\n";

static tg_status optimize_with(tg_ctx *ctx) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(ctx, oom_src, strlen(oom_src), "oom.tg", &m);
    tg_graph *r = NULL;
    if (st == TG_OK) st = tg_graph_optimize(tg_module_func(m, 0), NULL, &r);
    tg_graph_free(r);
    tg_module_free(m);
    return st;
}

static void test_allocation_failures(void **state) {
    (void)state;
    fail_alloc fa = {0, 0};
    tg_ctx *ctx = tg_ctx_new(failing_alloc, &fa);
    assert_int_equal(optimize_with(ctx), TG_OK);
    long total = fa.count;
    assert_true(total > 50);
    for (long k = 1; k <= total; k++) {
        fa.count = 0;
        fa.fail_at = k;
        tg_status st = optimize_with(ctx);
        if (st != TG_OK && st != TG_ENOMEM)
            print_message("allocation %ld: status %d: %s\n", k, (int)st, tg_last_error());
        if (st != TG_OK) assert_int_equal(st, TG_ENOMEM);
    }
    fa.fail_at = 0;
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_indexed_by_root_op),
        cmocka_unit_test(test_fixed_point_and_stats),
        cmocka_unit_test(test_cycle_guard),
        cmocka_unit_test(test_type_change_refused),
        cmocka_unit_test(test_use_counts_ignore_dead_nodes),
        cmocka_unit_test(test_const_fill),
        cmocka_unit_test(test_fold_types_exact),
        cmocka_unit_test(test_uses_kept_where_inference_changes),
        cmocka_unit_test(test_identities_keep_nan_inf_and_zero_signs),
        cmocka_unit_test(test_integer_identities_run_the_same),
        cmocka_unit_test(test_merge_multi_output),
        cmocka_unit_test(test_static_shapes),
        cmocka_unit_test(test_compile_leaves_user_graph_alone),
        cmocka_unit_test(test_optimize_api),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_long_chains),
        cmocka_unit_test(test_linear_work),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
