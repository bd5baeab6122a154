/* test_fuse.c - the `fused` op (src/ops/fused.c) and the fuse phase (src/rewrite/fuse.c).
 *
 * - Random graphs of elementwise ops, reductions, casts and literals over inputs of several
 *   shapes and dtypes are run with the reference interpreter before and after tg_fuse on a
 *   clone, and must give the same bits (fused nodes run the same reference kernels); the
 *   fused graph must verify, and printing it and parsing it back must give the same numbers
 *   again. Counters make sure fusion really happened (plain, multi-output, reductions).
 * - Long chains (and a chain whose shared values double the text at each step) are cut
 *   into several fused nodes whose expressions stay bounded.
 * - The text: parse/print round trips of fused nodes, and the errors of expressions (each
 *   naming its column), of their typing, and of the `fused{...}` syntax in .tg files.
 * - The program: sharing of identical calls, literals, outputs, `uniform`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/fused.h"
#include "rewrite/rewrite.h"
#include "text/text.h"

/* ---- helpers ---- */

/* The text of node n's program (free with free()). */
static char *prog_text(const tg_node *n) {
    const tg_fused_prog *p = tg_fused_node_prog(n);
    assert_non_null(p);
    size_t len = 0;
    char *t = tg_fused_format(p, &len);
    assert_non_null(t);
    char *c = strdup(t);
    assert_non_null(c);
    tg_mem_free(p->ctx, t, len + 1);
    return c;
}

/* A fused node of g over in[0..nin) whose program is the text expr, made as the .tg parser
 * makes it (the C API cannot: tg_apply refuses a program given as a string). The first
 * output, or NULL with g's error set. */
static tg_var *fused_node(tg_graph *g, const char *expr, tg_var *const *in, int nin) {
    tg_fused_prog *p = NULL;
    char msg[256];
    tg_status st = tg_txt_fused_parse(g->ctx, expr, strlen(expr), nin, &p, msg, sizeof msg);
    if (st != TG_OK) print_error("'%s': %s\n", expr, msg);
    assert_int_equal(st, TG_OK);
    tg_aval a = tg_fused_aval(p);
    tg_node *n = tg_ir_node_make_norm(g, TG_OP_FUSED, in, nin, &a);
    tg_fused_free(p);
    return n ? n->out[0] : NULL;
}

static uint64_t rng_state;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}
static int rndn(int n) { return (int)(rnd() % (uint32_t)n); }

/* Counts live nodes of op `op` in g (all ops when op < 0). */
static int count_op(const tg_graph *g, int op) {
    int n = 0, c = 0;
    tg_node **order = tg_ir_toposort(g, &n);
    assert_non_null(order);
    for (int i = 0; i < n; i++) c += op < 0 || order[i]->op == op;
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return c;
}

/* A clone of g after the fuse phase alone, verified. */
static tg_graph *fused_clone(const tg_graph *g) {
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    tg_rw_opts opts = {.verify = true};
    tg_status st = tg_fuse(c, &opts, NULL);
    if (st != TG_OK) print_error("fuse: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    st = tg_graph_verify(c);
    if (st != TG_OK) print_error("verify: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    return c;
}

/* Runs g with the reference interpreter; returns the status (outputs in out). */
static tg_status run_ref(tg_graph *g, tg_tensor *const *in, tg_tensor **out) {
    tg_compile_opts co = TG_COMPILE_OPTS(.mode = TG_MODE_REFERENCE);
    tg_fn *f = NULL;
    tg_status st = tg_graph_compile(g, &co, &f);
    if (st != TG_OK) print_error("compile: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    st = tg_fn_call(f, in, tg_graph_input_count(g), out, tg_graph_output_count(g));
    tg_fn_free(f);
    return st;
}

/* The same bits: same dtype, shape and bytes. */
static bool same_tensor(const tg_tensor *a, const tg_tensor *b) {
    if (tg_tensor_dtype(a) != tg_tensor_dtype(b) || tg_tensor_ndim(a) != tg_tensor_ndim(b))
        return false;
    for (int d = 0; d < tg_tensor_ndim(a); d++)
        if (tg_tensor_shape(a)[d] != tg_tensor_shape(b)[d]) return false;
    size_t n = (size_t)tg_tensor_size(a) * tg_dtype_size(tg_tensor_dtype(a));
    return n == 0 || memcmp(tg_tensor_data(a), tg_tensor_data(b), n) == 0;
}

/* Runs a and b on the same inputs; both fail with the same status or agree bit for bit. */
static void check_same(tg_graph *a, tg_graph *b, tg_tensor *const *in) {
    int no = tg_graph_output_count(a);
    assert_int_equal(no, tg_graph_output_count(b));
    tg_tensor *oa[16] = {0}, *ob[16] = {0};
    assert_true(no <= 16);
    tg_status sa = run_ref(a, in, oa);
    char msga[TG_ERRMSG_MAX];
    snprintf(msga, sizeof msga, "%s", tg_last_error());
    tg_status sb = run_ref(b, in, ob);
    if (sa != sb)
        print_error("statuses differ: %d (%s) and %d (%s)\n", sa, msga, sb, tg_last_error());
    assert_int_equal(sa, sb);
    for (int i = 0; i < no && sa == TG_OK; i++) {
        if (!same_tensor(oa[i], ob[i])) {
            print_error("output %d differs\n", i);
            tg_graph_print(a, stderr);
            tg_graph_print(b, stderr);
        }
        assert_true(same_tensor(oa[i], ob[i]));
    }
    for (int i = 0; i < no; i++) {
        tg_tensor_free(oa[i]);
        tg_tensor_free(ob[i]);
    }
}

/* g printed as .tg text and parsed back (one function). */
static tg_module *reparse(const tg_graph *g, char **text) {
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    assert_non_null(f);
    assert_int_equal(tg_graph_print(g, f), TG_OK);
    fclose(f);
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, *text, len, "printed.tg", &m);
    if (st != TG_OK) print_error("%s\n%s\n", tg_last_error(), *text);
    assert_int_equal(st, TG_OK);
    return m;
}

/* ---- random graphs ---- */

static bool is_bool(const tg_var *v) { return tg_var_dtype(v) == TG_DT_BOOL; }

/* Static right-aligned broadcasting of two shapes (no '?' in these graphs). */
static bool bcast_ok(const tg_var *a, const tg_var *b) {
    int na = tg_var_ndim(a), nb = tg_var_ndim(b);
    for (int i = 1; i <= na && i <= nb; i++) {
        int64_t x = tg_var_dim(a, na - i), y = tg_var_dim(b, nb - i);
        if (x != y && x != 1 && y != 1) return false;
    }
    return true;
}

static tg_var *rnd_literal(tg_graph *g) {
    static const double fl[] = {0.5, 2.0, -1.25, 3.0, 1e-3};
    static const int64_t il[] = {2, 3, -1, 7};
    return rndn(2) ? tg_literal_float(g, fl[rndn(5)]) : tg_literal_int(g, il[rndn(4)]);
}

/* One random op over the pool; NULL when the pick does not type-check (nothing built). */
static tg_var *rnd_op(tg_graph *g, tg_var **pool, int n) {
    tg_var *a = pool[rndn(n)], *b = pool[rndn(n)];
    int r = rndn(100);
    if (r < 30) { /* unary */
        static const char *const fops[] = {"neg",     "exp",   "sin",  "cos",   "tanh", "abs",
                                           "sigmoid", "floor", "sign", "log1p", "sqrt"};
        const char *op = fops[rndn((int)(sizeof fops / sizeof *fops))];
        if (is_bool(a)) return tg_apply(g, "not", &a, 1, NULL, 0);
        if (!strcmp(op, "log1p") || !strcmp(op, "sqrt")) a = tg_abs(g, a);
        return tg_apply(g, op, &a, 1, NULL, 0);
    }
    if (r < 70) { /* binary, maybe with a literal */
        static const char *const bops[] = {"add",     "sub", "mul", "div", "maximum", "minimum",
                                           "int_div", "mod", "lt",  "ge",  "eq",      "pow"};
        const char *op = bops[rndn((int)(sizeof bops / sizeof *bops))];
        if (rndn(4) == 0) b = rnd_literal(g);
        if (is_bool(a) && is_bool(b))
            return tg_apply(g, rndn(2) ? "and" : "or", (tg_var *[]){a, b}, 2, NULL, 0);
        if (is_bool(a) || is_bool(b) || !bcast_ok(a, b)) return NULL;
        bool fa = tg_dtype_is_float(tg_var_dtype(a)), fb = tg_dtype_is_float(tg_var_dtype(b));
        if (!strcmp(op, "pow") && !(fa && fb)) return NULL; /* negative int powers fail */
        return tg_apply(g, op, (tg_var *[]){a, b}, 2, NULL, 0);
    }
    if (r < 78) { /* where */
        tg_var *c = pool[rndn(n)];
        if (!is_bool(c) || is_bool(a) || is_bool(b)) return NULL;
        if (!bcast_ok(c, a) || !bcast_ok(c, b) || !bcast_ok(a, b)) return NULL;
        return tg_where(g, c, a, rndn(3) ? b : rnd_literal(g));
    }
    if (r < 85) { /* cast */
        static const tg_dtype to[] = {TG_DT_F32, TG_DT_F64, TG_DT_I32, TG_DT_I8};
        return tg_cast(g, a, to[rndn(4)]);
    }
    /* a reduction (keepdims where needed so the result still broadcasts) */
    static const char *const rops[] = {"sum", "max", "min", "prod", "mean"};
    const char *op = rops[rndn(5)];
    if (is_bool(a) || tg_var_ndim(a) == 0) return NULL;
    int k = rndn(3);
    if (k == 0) return tg_reduce(g, op, a, NULL, -1, false);
    int64_t axis = tg_var_ndim(a) - 1 - (k == 2 && tg_var_ndim(a) > 1);
    return tg_reduce(g, op, a, &axis, 1, tg_var_ndim(a) > 1);
}

static tg_tensor *rnd_tensor(tg_dtype dt, int nd, const int64_t *shape) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t);
    for (int64_t i = 0; i < n; i++) {
        void *p = (char *)tg_tensor_data(t) + (size_t)i * tg_dtype_size(dt);
        if (dt == TG_DT_F64) *(double *)p = ((double)rndn(3001) - 1500.0) / 1000.0;
        if (dt == TG_DT_F32) *(float *)p = (float)(((double)rndn(3001) - 1500.0) / 1000.0);
        if (dt == TG_DT_I32) *(int32_t *)p = rndn(13) - 6;
        if (dt == TG_DT_BOOL) *(bool *)p = rndn(2);
    }
    return t;
}

typedef struct stats {
    int fused, multi, reductions, graphs;
} stats;

static void one_random_graph(stats *s) {
    tg_graph *g = tg_graph_new(NULL, "r");
    static const struct {
        const char *name;
        tg_dtype dt;
        int nd;
        int64_t shape[2];
    } ins[] = {{"x", TG_DT_F64, 2, {3, 4}}, {"y", TG_DT_F32, 1, {4}},
               {"z", TG_DT_F64, 2, {3, 1}}, {"s", TG_DT_F64, 0, {0}},
               {"i", TG_DT_I32, 2, {3, 4}}, {"b", TG_DT_BOOL, 1, {4}}};
    enum { NIN = 6, MAXV = 64 };
    tg_var *pool[MAXV];
    tg_tensor *vals[NIN];
    int n = 0;
    for (int k = 0; k < NIN; k++) {
        pool[n++] = tg_input(g, ins[k].name, ins[k].dt, ins[k].nd, ins[k].shape);
        vals[k] = rnd_tensor(ins[k].dt, ins[k].nd, ins[k].shape);
    }
    int steps = 6 + rndn(26);
    for (int k = 0; k < steps && n < MAXV; k++) {
        tg_var *v = rnd_op(g, pool, n);
        if (tg_graph_status(g) != TG_OK) print_error("builder: %s\n", tg_graph_error(g));
        assert_int_equal(tg_graph_status(g), TG_OK);
        if (v) pool[n++] = v;
    }
    /* outputs: the last value and a few random ones (never an input) */
    tg_var *outs[4];
    int no = 0;
    if (n > NIN) outs[no++] = pool[n - 1];
    for (int k = 0; k < 3 && n > NIN; k++)
        if (rndn(2)) outs[no++] = pool[NIN + rndn(n - NIN)];
    if (no == 0) outs[no++] = tg_exp(g, pool[0]);
    assert_int_equal(tg_graph_set_outputs(g, outs, no), TG_OK);

    tg_graph *c = fused_clone(g);
    check_same(g, c, vals);
    int nf = 0, n_all = 0;
    tg_node **order = tg_ir_toposort(c, &n_all);
    for (int k = 0; k < n_all; k++) {
        const tg_node *nd = order[k];
        if (nd->op != TG_OP_FUSED) continue;
        nf++;
        /* what a blockwise backend relies on: programs made by the pass are uniform */
        tg_fused_prog *p = NULL;
        tg_type tin[16];
        char msg[256];
        assert_true(nd->nin <= 16);
        for (int q = 0; q < nd->nin; q++) tin[q] = nd->in[q]->type;
        assert_int_equal(tg_fused_node_typed(NULL, nd, tin, false, &p, msg, sizeof msg), TG_OK);
        char *text = prog_text(nd);
        if (!p->uniform) print_error("not uniform: %s\n", text);
        assert_true(p->uniform);
        tg_fused_free(p);
        s->multi += nd->nout > 1;
        s->reductions += strstr(text, "sum(") == text || strstr(text, "max(") == text;
        free(text);
    }
    tg_mem_free(c->ctx, order, sizeof *order * (size_t)(c->nodes.n + 1));
    s->fused += nf;
    s->graphs += nf > 0;
    /* the fused graph prints as text that parses back to the same numbers */
    char *text = NULL;
    tg_module *m = reparse(c, &text);
    check_same(g, tg_module_func(m, 0), vals);
    tg_module_free(m);
    free(text);
    for (int k = 0; k < NIN; k++) tg_tensor_free(vals[k]);
    tg_graph_free(c);
    tg_graph_free(g);
}

static void test_random_graphs_same_numbers(void **state) {
    (void)state;
    rng_state = 12345;
    stats s = {0};
    for (int it = 0; it < 400; it++) one_random_graph(&s);
    print_message("fused nodes %d in %d graphs, %d multi-output, %d with reductions\n", s.fused,
                  s.graphs, s.multi, s.reductions);
    assert_true(s.graphs > 200);
    assert_true(s.multi > 10);
    assert_true(s.reductions > 10);
}

/* ---- long chains ---- */

static void test_long_chain_is_cut(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "chain");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, (int64_t[]){5});
    tg_var *v = x;
    for (int k = 0; k < 3000; k++)
        v = k % 2 ? tg_sin(g, v) : tg_add(g, v, tg_literal_float(g, 0.25));
    assert_int_equal(tg_graph_set_outputs(g, &v, 1), TG_OK);
    tg_graph *c = fused_clone(g);
    int nf = count_op(c, TG_OP_FUSED), all = count_op(c, -1);
    assert_int_equal(nf, all);
    assert_true(nf >= 3 && nf <= 10);
    rng_state = 7;
    tg_tensor *in = rnd_tensor(TG_DT_F64, 1, (int64_t[]){5});
    check_same(g, c, &in);
    tg_tensor_free(in);
    tg_graph_free(c);
    tg_graph_free(g);

    /* a = mul(add(a, a), 0.5): every step doubles the text of a shared value */
    g = tg_graph_new(NULL, "doubling");
    x = tg_input(g, "x", TG_DT_F64, 1, (int64_t[]){5});
    v = x;
    for (int k = 0; k < 60; k++) v = tg_mul(g, tg_add(g, v, v), tg_literal_float(g, 0.5));
    assert_int_equal(tg_graph_set_outputs(g, &v, 1), TG_OK);
    c = fused_clone(g);
    int n = 0;
    tg_node **order = tg_ir_toposort(c, &n);
    assert_true(n >= 2);
    for (int k = 0; k < n; k++) {
        assert_int_equal(order[k]->op, TG_OP_FUSED);
        char *text = prog_text(order[k]);
        assert_true(strlen(text) < 100000);
        free(text);
    }
    tg_mem_free(c->ctx, order, sizeof *order * (size_t)(c->nodes.n + 1));
    in = rnd_tensor(TG_DT_F64, 1, (int64_t[]){5});
    check_same(g, c, &in);
    tg_tensor_free(in);
    tg_graph_free(c);
    tg_graph_free(g);
}

/* ---- text ---- */

static char *print_module(const tg_module *m) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(tg_module_print(m, f), TG_OK);
    fclose(f);
    return text;
}

static void test_roundtrip(void **state) {
    (void)state;
    static const char src[] =
        "func main(x: f32[3,4], y: f32[4], n: i32[4]) {\n"
        "  a = fused{add(mul(exp(neg(mul(%0, %0))), sin(%0)), div(%0, 2))}(x)\n"
        "  b, s = fused{exp(sub(%0, %1)); sum(exp(sub(%0, %1)), axis=[1])}(x, y)\n"
        "  m = fused{max(mul(%0, -0.5), axis=[0, 1], keepdims=true)}(x)\n"
        "  c = fused{where(gt(%0, 0), cast(%1, dtype=\"f32\"), inf)}(y, n)\n"
        "  d = fused{and(lt(%0, nan), true)}(y)\n"
        "  return a, b, s, m, c, d\n"
        "}\n";
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "rt.tg", &m);
    if (st != TG_OK) print_error("%s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    char *t1 = print_module(m);
    /* the expressions print as written; the names stay */
    assert_non_null(
        strstr(t1, "a = fused{add(mul(exp(neg(mul(%0, %0))), sin(%0)), div(%0, 2))}(x)"));
    assert_non_null(
        strstr(t1, "b, s = fused{exp(sub(%0, %1)); sum(exp(sub(%0, %1)), axis=[1])}(x, y)"));
    assert_non_null(strstr(t1, "c = fused{where(gt(%0, 0), cast(%1, dtype=\"f32\"), inf)}(y, n)"));
    tg_graph *g = tg_module_func(m, 0);
    assert_int_equal(count_op(g, TG_OP_FUSED), 5);
    assert_int_equal(tg_var_ndim(tg_graph_output(g, 2)), 1);
    assert_int_equal(tg_var_dim(tg_graph_output(g, 3), 1), 1);
    assert_int_equal(tg_var_dtype(tg_graph_output(g, 4)), TG_DT_F32);
    assert_int_equal(tg_var_dtype(tg_graph_output(g, 5)), TG_DT_BOOL);
    tg_module *m2 = NULL;
    assert_int_equal(tg_module_parse(NULL, t1, strlen(t1), "rt2.tg", &m2), TG_OK);
    char *t2 = print_module(m2);
    assert_string_equal(t1, t2);
    free(t1);
    free(t2);
    tg_module_free(m2);
    tg_module_free(m);

    /* the pass's own output parses back and prints the same */
    static const char src2[] = "func w(x: f32[7], i: i8[7]) {\n"
                               "  y = add(mul(exp(neg(div(mul(x, x), 2))), sin(x)), div(x, 2.5))\n"
                               "  k = maximum(mul(i, -3), 1)\n"
                               "  s = sum(exp(sub(x, 0.1)))\n"
                               "  return y, k, s\n"
                               "}\n";
    assert_int_equal(tg_module_parse(NULL, src2, strlen(src2), "w.tg", &m), TG_OK);
    tg_graph *c = fused_clone(tg_module_func(m, 0));
    assert_int_equal(count_op(c, TG_OP_FUSED), 3);
    char *t3 = NULL;
    tg_module *m3 = reparse(c, &t3);
    assert_non_null(strstr(t3, "div(%0, 2.5)"));
    assert_non_null(strstr(t3, "mul(%0, -3)"));
    assert_non_null(strstr(t3, "sub(%0, 0.1)"));
    char *t4 = print_module(m3);
    assert_string_equal(t3, t4);
    rng_state = 3;
    tg_tensor *in[2] = {rnd_tensor(TG_DT_F32, 1, (int64_t[]){7}),
                        tg_tensor_new(NULL, TG_DT_I8, 1, (int64_t[]){7})};
    for (int k = 0; k < 7; k++) ((int8_t *)tg_tensor_data(in[1]))[k] = (int8_t)(k * 40 - 120);
    check_same(tg_module_func(m, 0), tg_module_func(m3, 0), in);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    free(t3);
    free(t4);
    tg_module_free(m3);
    tg_graph_free(c);
    tg_module_free(m);
}

/* An expression that fails to parse (nin inputs): the status and a part of the message. */
static void expect_parse_error(const char *expr, int nin, tg_status want, const char *sub) {
    tg_fused_prog *p = (tg_fused_prog *)1;
    char msg[256];
    tg_status st = tg_txt_fused_parse(NULL, expr, strlen(expr), nin, &p, msg, sizeof msg);
    if (st != want || !strstr(msg, sub))
        print_error("'%s': status %d, message \"%s\" (want %d, \"%s\")\n", expr, st, msg, want,
                    sub);
    assert_int_equal(st, want);
    assert_null(p);
    assert_non_null(strstr(msg, sub));
}

static void test_expression_errors(void **state) {
    (void)state;
    expect_parse_error("foo(%0)", 1, TG_ENAME, "column 1: unknown op 'foo'");
    expect_parse_error("add(%0, %3)", 2, TG_EINDEX, "column 9: input %3 does not exist");
    expect_parse_error("add(%0", 1, TG_ESYNTAX, "column 7: expected ',' or ')'");
    expect_parse_error("exp(sum(%0))", 1, TG_EUNSUPPORTED, "column 5: the reduction 'sum'");
    expect_parse_error("dot(%0, %0)", 1, TG_EUNSUPPORTED, "column 1: 'dot' cannot be part");
    expect_parse_error("exp(%0, %0)", 1, TG_EINVAL, "column 9: exp: takes 1 operand");
    expect_parse_error("add(%0)", 1, TG_EINVAL, "column 7: add: takes 2 operands, got 1");
    expect_parse_error("%0", 1, TG_EINVAL, "column 1: an output cannot be an input alone");
    expect_parse_error("2.5", 1, TG_EINVAL, "an output cannot be a literal");
    expect_parse_error("exp(%0);", 1, TG_ESYNTAX, "column 9: expected an expression");
    expect_parse_error("exp(%0) sin(%0)", 1, TG_ESYNTAX, "column 9: expected ';'");
    expect_parse_error("", 1, TG_ESYNTAX, "column 1: expected an expression");
    expect_parse_error("cast(%0, dtype=\"f99\")", 1, TG_ETYPE, "unknown dtype \"f99\"");
    expect_parse_error("cast(%0)", 1, TG_EINVAL, "cast: missing attribute 'dtype'");
    expect_parse_error("sum(%0, axis=1, foo=2)", 1, TG_EINVAL, "column 17: sum: unknown attribute");
    expect_parse_error("sum(%0, keepdims=1)", 1, TG_EINVAL, "'keepdims' has a value of the wrong");
    expect_parse_error("sum(%0, axis=1, axis=2)", 1, TG_EINVAL, "given twice");
    expect_parse_error("exp(%0 $", 1, TG_ESYNTAX, "column 8: unexpected character '$'");
    expect_parse_error("exp(x)", 1, TG_ENAME, "column 5: 'x' is not an operand");
    expect_parse_error("exp(%)", 1, TG_ESYNTAX, "column 5: expected an input number");
    expect_parse_error("add(%0, 1.5.2)", 1, TG_ESYNTAX, "malformed number");
    expect_parse_error("add(%0, 99999999999999999999)", 1, TG_ESYNTAX, "out of range");
    expect_parse_error("add(%0, -)", 1, TG_ESYNTAX, "a number after '-'");
    expect_parse_error("sum(2)", 1, TG_EINVAL, "cannot reduce a literal");
    expect_parse_error("exp(%0}", 1, TG_ESYNTAX, "column 7: '}' is not allowed");
    expect_parse_error("exp(%0)\nexp(%0)", 1, TG_ESYNTAX, "a newline is not allowed");
    /* nesting deeper than the limit: an error, never a deep recursion */
    size_t n = (size_t)TG_FUSED_MAX_DEPTH + 10;
    char *deep = malloc(n * 5 + 8);
    assert_non_null(deep);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) memcpy(deep + 4 * i, "exp(", 4), k += 4;
    memcpy(deep + k, "%0", 2), k += 2;
    for (size_t i = 0; i < n; i++) deep[k++] = ')';
    deep[k] = '\0';
    expect_parse_error(deep, 1, TG_ELIMIT, "nested deeper than");
    /* the limit itself parses */
    k = 0;
    n = TG_FUSED_MAX_DEPTH;
    for (size_t i = 0; i < n; i++) memcpy(deep + 4 * i, "exp(", 4), k += 4;
    memcpy(deep + k, "%0", 2), k += 2;
    for (size_t i = 0; i < n; i++) deep[k++] = ')';
    tg_fused_prog *p = NULL;
    assert_int_equal(tg_txt_fused_parse(NULL, deep, k, 1, &p, NULL, 0), TG_OK);
    assert_int_equal(p->ninstr, TG_FUSED_MAX_DEPTH);
    tg_fused_free(p);
    free(deep);
}

/* Parses (must succeed), then types with `in`: the status and a part of the message. */
static void expect_type_error(const char *expr, const tg_type *in, int nin, tg_status want,
                              const char *sub) {
    tg_fused_prog *p = NULL;
    char msg[256];
    assert_int_equal(tg_txt_fused_parse(NULL, expr, strlen(expr), nin, &p, msg, sizeof msg), TG_OK);
    tg_status st = tg_fused_type(p, in, false, msg, sizeof msg);
    if (st != want || !strstr(msg, sub))
        print_error("'%s': status %d, message \"%s\"\n", expr, st, msg);
    assert_int_equal(st, want);
    assert_non_null(strstr(msg, sub));
    tg_fused_free(p);
}

static tg_type ty(tg_dtype dt, int nd, int64_t a, int64_t b) {
    tg_type t = {.dtype = (uint8_t)dt, .ndim = (uint8_t)nd};
    t.shape[0] = a;
    t.shape[1] = b;
    return t;
}

static void test_typing_errors(void **state) {
    (void)state;
    tg_type i8 = ty(TG_DT_I8, 1, 4, 0), f32 = ty(TG_DT_F32, 1, 4, 0), i32 = ty(TG_DT_I32, 1, 4, 0);
    tg_type f3 = ty(TG_DT_F32, 1, 3, 0), b4 = ty(TG_DT_BOOL, 1, 4, 0);
    expect_type_error("add(%0, 300)", &i8, 1, TG_ETYPE,
                      "column 9: add: integer literal 300 is out of range for i8");
    expect_type_error("where(0.5, %0, %0)", &i8, 1, TG_ETYPE,
                      "column 7: where: float literal cannot become bool");
    expect_type_error("add(%0, %1)", (tg_type[]){i32, f32}, 2, TG_ETYPE,
                      "column 1: add: operand 1 is i32 where f64 is needed (write cast");
    expect_type_error("exp(add(%0, %1))", (tg_type[]){f32, f3}, 2, TG_ESHAPE,
                      "column 5: add: cannot broadcast f32[4] with f32[3]");
    expect_type_error("sub(%0, %0)", &b4, 1, TG_ETYPE, "column 1: sub: not supported");
    expect_type_error("sum(%0, axis=3)", &f32, 1, TG_EINVAL, "output 1: sum: axis 3 is out of");
    /* the same when a node is made: the graph's error names the op and the column */
    tg_graph *g = tg_graph_new(NULL, "e");
    tg_var *x = tg_input(g, "x", TG_DT_I8, 1, (int64_t[]){4});
    assert_null(fused_node(g, "neg(add(%0, 300))", &x, 1));
    assert_non_null(strstr(tg_graph_error(g), "fused: expression column 13: add: integer literal"));
    tg_graph_free(g);
    /* the C API cannot give a program as a string: the error names the .tg form */
    g = tg_graph_new(NULL, "s");
    x = tg_input(g, "x", TG_DT_F32, 1, (int64_t[]){4});
    tg_attr a = TG_A_STR("expr", "exp(%0)");
    assert_null(tg_apply(g, "fused", &x, 1, &a, 1));
    assert_int_equal(tg_graph_status(g), TG_EINVAL);
    assert_non_null(strstr(tg_graph_error(g), "fused: attribute 'expr' holds a fused program"));
    assert_non_null(strstr(tg_graph_error(g), "fused{EXPR}(inputs) in .tg text"));
    tg_graph_free(g);
}

static void expect_tg_error(const char *src, tg_status want, const char *sub) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "f.tg", &m);
    if (st != want || !strstr(tg_last_error(), sub))
        print_error("status %d, message \"%s\"\n", st, tg_last_error());
    assert_int_equal(st, want);
    assert_non_null(strstr(tg_last_error(), sub));
    tg_module_free(m);
}

static void test_text_errors(void **state) {
    (void)state;
    expect_tg_error("func f(x: f32[3]) {\n  t = fused{exp(%0)(x)\n  return t\n}\n", TG_ESYNTAX,
                    "f.tg:2:12: 'fused{' is not closed");
    expect_tg_error("func f(x: f32[3]) {\n  t = fused{foo(%0)}(x)\n  return t\n}\n", TG_ENAME,
                    "f.tg:2:7: fused: expression column 1: unknown op 'foo'");
    expect_tg_error("func f(x: f32[3]) {\n  t = fused{exp(%0)}\n  return t\n}\n", TG_ESYNTAX,
                    "f.tg:2:21: expected '(' after fused{...}");
    expect_tg_error(
        "func f(x: f32[3]) {\n  t = fused{exp(%0)}(x, expr=\"sin(%0)\")\n  return t\n}\n",
        TG_EINVAL, "attribute 'expr' given twice");
    expect_tg_error("func f(x: f32[3]) {\n  t = fused{exp(%1)}(x)\n  return t\n}\n", TG_EINDEX,
                    "input %1 does not exist");
    expect_tg_error("func f(x: f32[3]) {\n  a, b = fused{exp(%0)}(x)\n  return a\n}\n", TG_ESYNTAX,
                    "gives 1 value but 2 names are bound");
    /* spaces inside the braces are fine, and a later function is still found by @name */
    static const char ok[] = "func f(x: f32[3]) {\n  a, b = fused{ exp(%0) ; sin(%0) }(x)\n"
                             "  return a, b\n}\nfunc g(x: f32[3]) {\n  return x\n}\n";
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, ok, strlen(ok), "ok.tg", &m);
    if (st != TG_OK) print_error("%s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    assert_int_equal(tg_module_func_count(m), 2);
    tg_module_free(m);
}

/* ---- the program ---- */

static void test_program(void **state) {
    (void)state;
    static const char e[] = "add(exp(%0), mul(exp(%0), 2)); sum(exp(%0), axis=1, keepdims=true)";
    tg_fused_prog *p = NULL;
    char msg[256];
    assert_int_equal(tg_txt_fused_parse(NULL, e, strlen(e), 1, &p, msg, sizeof msg), TG_OK);
    /* exp(%0) once, the literal, mul, add */
    assert_int_equal(p->nin, 1);
    assert_int_equal(p->ninstr, 4);
    assert_int_equal(p->nslot, 5);
    assert_int_equal(p->instr[0].op, TG_OP_EXP);
    assert_int_equal(p->instr[0].in[0], 0);
    assert_int_equal(p->instr[1].op, TG_FUSED_CONST);
    assert_int_equal(p->instr[1].lit, 'i');
    assert_int_equal(p->instr[1].i, 2);
    assert_int_equal(p->instr[2].op, TG_OP_MUL);
    assert_int_equal(p->instr[2].in[0], 1);
    assert_int_equal(p->instr[2].in[1], 2);
    assert_int_equal(p->instr[3].op, TG_OP_ADD);
    assert_int_equal(p->nout, 2);
    assert_int_equal(p->out[0].slot, 4);
    assert_int_equal(p->out[0].reduce, -1);
    assert_int_equal(p->out[1].slot, 1);
    assert_int_equal(p->out[1].reduce, TG_OP_SUM);
    assert_int_equal(p->out[1].attrs[0].kind, TG_ATTR_INTS);
    assert_int_equal(p->out[1].attrs[1].i, 1);
    tg_type x = ty(TG_DT_F32, 2, 3, 4);
    assert_int_equal(tg_fused_type(p, &x, false, msg, sizeof msg), TG_OK);
    assert_int_equal(p->instr[1].dtype, TG_DT_F32); /* the literal took its user's dtype */
    assert_true(p->instr[1].cf == 2.0);
    assert_int_equal(p->out_type[0].dtype, TG_DT_F32);
    assert_int_equal(p->out_type[1].ndim, 2);
    assert_int_equal(p->out_type[1].shape[1], 1);
    assert_true(p->out[1].red[1] && !p->out[1].red[0]);
    assert_false(p->uniform); /* an elementwise output with a reduction */
    assert_false(p->reduces);
    /* printing gives the text back, shared values written where used */
    size_t len = 0;
    char *t = tg_fused_format(p, &len);
    assert_non_null(t);
    assert_string_equal(t, "add(exp(%0), mul(exp(%0), 2)); sum(exp(%0), axis=[1], keepdims=true)");
    tg_mem_free(p->ctx, t, len + 1);
    tg_fused_free(p);

    /* uniform: every instruction has the iteration space's shape, inputs broadcast to it */
    static const char u[] = "sum(mul(%0, %1), axis=0); max(%0, axis=0)";
    assert_int_equal(tg_txt_fused_parse(NULL, u, strlen(u), 2, &p, msg, sizeof msg), TG_OK);
    tg_type in2[2] = {ty(TG_DT_F64, 2, 5, 3), ty(TG_DT_F64, 1, 3, 0)};
    assert_int_equal(tg_fused_type(p, in2, false, msg, sizeof msg), TG_OK);
    assert_true(p->uniform);
    assert_true(p->reduces);
    assert_int_equal(p->space.ndim, 2);
    assert_int_equal(p->space.shape[0], 5);
    tg_fused_free(p);
    static const char nu[] = "exp(%0); exp(%1)";
    assert_int_equal(tg_txt_fused_parse(NULL, nu, strlen(nu), 2, &p, msg, sizeof msg), TG_OK);
    tg_type in3[2] = {ty(TG_DT_F64, 1, 3, 0), ty(TG_DT_F64, 2, 2, 3)};
    assert_int_equal(tg_fused_type(p, in3, false, msg, sizeof msg), TG_OK);
    assert_false(p->uniform); /* exp(%0) has shape [3], the space is [2,3] */
    tg_fused_free(p);

    /* the extreme integer literals of i64 */
    static const char lo[] = "add(%0, -9223372036854775808); mul(%0, 9223372036854775807)";
    assert_int_equal(tg_txt_fused_parse(NULL, lo, strlen(lo), 1, &p, msg, sizeof msg), TG_OK);
    tg_type i64 = ty(TG_DT_I64, 1, 2, 0);
    assert_int_equal(tg_fused_type(p, &i64, false, msg, sizeof msg), TG_OK);
    assert_true(p->instr[0].ci == INT64_MIN);
    assert_true(p->instr[2].ci == INT64_MAX);
    t = tg_fused_format(p, &len);
    assert_string_equal(t, lo);
    tg_mem_free(p->ctx, t, len + 1);
    tg_fused_free(p);

    /* programs built by hand (the pass's way): an identical call gets the same slot */
    p = tg_fused_new(NULL, 1);
    assert_non_null(p);
    tg_fused_arg args[2] = {{.slot = 0},
                            {.slot = -1, .lit = 'f', .dtype = TG_DT_F32, .f = 0.1, .pos = -1}};
    int a = -1, b = -1, bad = 0;
    assert_int_equal(tg_fused_add_call(p, TG_OP_ADD, args, 2, NULL, -1, &a), TG_OK);
    assert_int_equal(tg_fused_add_call(p, TG_OP_ADD, args, 2, NULL, -1, &b), TG_OK);
    assert_int_equal(a, b);
    assert_int_equal(p->ninstr, 2); /* the literal, then add: no second literal */
    assert_int_equal(tg_fused_add_call(p, TG_OP_DOT, (tg_fused_arg[]){{.slot = 0}, {.slot = 0}}, 2,
                                       NULL, -1, &bad),
                     TG_EINVAL);
    assert_int_equal(bad, -1);
    assert_int_equal(
        tg_fused_add_call(p, TG_OP_EXP, (tg_fused_arg[]){{.slot = 7}}, 1, NULL, -1, &bad),
        TG_EINVAL);
    assert_int_equal(tg_fused_add_out(p, a, TG_OP_MAX,
                                      (tg_aval[]){{.kind = TG_ATTR_NONE}, {.kind = TG_ATTR_BOOL}}),
                     TG_OK);
    assert_int_equal(tg_fused_add_out(p, 0, -1, NULL), TG_EINVAL); /* an input alone */
    t = tg_fused_format(p, &len);
    assert_string_equal(t, "max(add(%0, 0.1))"); /* an f32 literal in its short form */
    tg_mem_free(p->ctx, t, len + 1);
    /* built instructions take the columns where the text writes them */
    assert_int_equal(p->instr[1].pos, -1);
    assert_int_equal(tg_fused_place(p), TG_OK);
    assert_int_equal(p->instr[0].pos, 12); /* 0.1 */
    assert_int_equal(p->instr[1].pos, 4);  /* add */
    /* as op data: a copy compares equal; the parsed text differs in the literal's dtype */
    tg_fused_prog *q = tg_fused_copy(NULL, p);
    assert_non_null(q);
    assert_true(tg_opdata_equal(&p->base, &q->base));
    assert_true(tg_opdata_hash(&p->base) == tg_opdata_hash(&q->base));
    tg_fused_free(q);
    static const char mx[] = "max(add(%0, 0.1))";
    assert_int_equal(tg_txt_fused_parse(NULL, mx, strlen(mx), 1, &q, msg, sizeof msg), TG_OK);
    assert_false(tg_opdata_equal(&p->base, &q->base));
    tg_fused_free(q);
    tg_fused_free(p);
    /* the same program however it is spaced; another literal makes another program */
    static const char *const texts[3] = {"add(exp(%0), 1); mul(%1, %0)",
                                         " add( exp(%0) ,1 ) ;mul(%1,%0)",
                                         "add(exp(%0), 2); mul(%1, %0)"};
    tg_fused_prog *ps[3];
    for (int k = 0; k < 3; k++)
        assert_int_equal(
            tg_txt_fused_parse(NULL, texts[k], strlen(texts[k]), 2, &ps[k], msg, sizeof msg),
            TG_OK);
    assert_true(tg_opdata_equal(&ps[0]->base, &ps[1]->base));
    assert_true(tg_opdata_hash(&ps[0]->base) == tg_opdata_hash(&ps[1]->base));
    assert_false(tg_opdata_equal(&ps[0]->base, &ps[2]->base));
    for (int k = 0; k < 3; k++) tg_fused_free(ps[k]);
}

/* A node holds its program as op data: clones share it, merging compares contents, and the
 * last graph freed releases it. */
static void test_program_as_data(void **state) {
    (void)state;
    static const char src[] = "func f(x: f32[4], y: f32[4]) {\n"
                              "  a = fused{add(exp(%0), %1)}(x, y)\n"
                              "  b = fused{ add(exp(%0),%1) }(x, y)\n"
                              "  return mul(a, b)\n"
                              "}\n";
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(NULL, src, strlen(src), "d.tg", &m), TG_OK);
    tg_graph *g = tg_module_func(m, 0);
    assert_int_equal(count_op(g, TG_OP_FUSED), 2);
    const tg_node *n = ((tg_var *)g->outputs.items[0])->node->in[0]->node;
    const tg_fused_prog *p = tg_fused_node_prog(n);
    assert_non_null(p);
    assert_int_equal(atomic_load(&p->base.refs), 1);
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    const tg_node *cn = ((tg_var *)c->outputs.items[0])->node->in[0]->node;
    assert_ptr_equal(tg_fused_node_prog(cn), p); /* shared, not copied */
    assert_int_equal(atomic_load(&p->base.refs), 2);
    assert_int_equal(tg_graph_verify(c), TG_OK);
    tg_module_free(m); /* the clone keeps the program alive */
    assert_int_equal(atomic_load(&p->base.refs), 1);
    char *text = prog_text(cn);
    assert_string_equal(text, "add(exp(%0), %1)");
    free(text);
    /* the two nodes hold equal programs: optimizing merges them */
    tg_graph *o = NULL;
    assert_int_equal(tg_graph_optimize(c, NULL, &o), TG_OK);
    assert_int_equal(count_op(o, TG_OP_FUSED), 1);
    tg_graph_free(o);
    tg_graph_free(c);
}

/* ---- run time ---- */

static void test_runtime_errors(void **state) {
    (void)state;
    /* an error inside a fused node names the op and its column */
    tg_graph *g = tg_graph_new(NULL, "p");
    tg_var *x = tg_input(g, "x", TG_DT_I32, 1, (int64_t[]){2});
    tg_var *y = tg_input(g, "y", TG_DT_I32, 1, (int64_t[]){2});
    tg_var *f = fused_node(g, "add(pow(%0, %1), 1)", (tg_var *[]){x, y}, 2);
    assert_non_null(f);
    assert_int_equal(tg_graph_set_outputs(g, &f, 1), TG_OK);
    int32_t xv[2] = {2, 3}, yv[2] = {3, -1};
    tg_tensor *in[2] = {tg_tensor_from_data(NULL, TG_DT_I32, 1, (int64_t[]){2}, xv),
                        tg_tensor_from_data(NULL, TG_DT_I32, 1, (int64_t[]){2}, yv)};
    tg_tensor *out = NULL;
    assert_int_not_equal(run_ref(g, in, &out), TG_OK);
    assert_non_null(
        strstr(tg_last_error(), "(fused): expression column 5: pow: integers to negative"));
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_graph_free(g);

    /* a '?' extent that is 1 at run time does not broadcast, fused or not */
    g = tg_graph_new(NULL, "b");
    x = tg_input(g, "x", TG_DT_F32, 1, (int64_t[]){TG_DIM_UNKNOWN});
    y = tg_input(g, "y", TG_DT_F32, 1, (int64_t[]){4});
    tg_var *v = tg_exp(g, tg_add(g, x, y));
    assert_int_equal(tg_graph_set_outputs(g, &v, 1), TG_OK);
    tg_graph *c = fused_clone(g);
    assert_int_equal(count_op(c, TG_OP_FUSED), 1);
    float one[1] = {1}, four[4] = {1, 2, 3, 4};
    in[0] = tg_tensor_from_data(NULL, TG_DT_F32, 1, (int64_t[]){1}, one);
    in[1] = tg_tensor_from_data(NULL, TG_DT_F32, 1, (int64_t[]){4}, four);
    assert_int_equal(run_ref(c, in, &out), TG_ESHAPE);
    assert_non_null(strstr(tg_last_error(), "declare the dimension as 1"));
    check_same(g, c, in);
    tg_tensor_free(in[0]);
    in[0] = tg_tensor_from_data(NULL, TG_DT_F32, 1, (int64_t[]){4}, four);
    check_same(g, c, in);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_graph_free(c);
    tg_graph_free(g);
}

/* Fusion runs in the default pipeline: the optimised graph of W1 is one fused node, and the
 * default compile mode gives the reference's numbers. */
static void test_pipeline(void **state) {
    (void)state;
    static const char src[] = "func w1(x: f32[1000]) {\n"
                              "  y = add(mul(exp(neg(div(mul(x, x), 2))), sin(x)), div(x, 2))\n"
                              "  return y\n"
                              "}\n";
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(NULL, src, strlen(src), "w1.tg", &m), TG_OK);
    tg_graph *o = NULL;
    assert_int_equal(tg_graph_optimize(tg_module_func(m, 0), NULL, &o), TG_OK);
    assert_int_equal(count_op(o, -1), 1);
    assert_int_equal(count_op(o, TG_OP_FUSED), 1);
    rng_state = 99;
    tg_tensor *in = rnd_tensor(TG_DT_F32, 1, (int64_t[]){1000});
    check_same(tg_module_func(m, 0), o, &in);
    tg_tensor_free(in);
    tg_graph_free(o);
    tg_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_graphs_same_numbers),
        cmocka_unit_test(test_long_chain_is_cut),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_expression_errors),
        cmocka_unit_test(test_typing_errors),
        cmocka_unit_test(test_text_errors),
        cmocka_unit_test(test_program),
        cmocka_unit_test(test_program_as_data),
        cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_pipeline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
