/* test_call_graph.c - functions that call functions, at the IR level: tg_call, FUNC
 * attributes holding graphs, the call's types, inlining, gradients through calls.
 *
 * Cases: a callee with '?' extents called from two places with different static shapes
 * (each call typed from the callee's body on its own arguments); calls nested three deep;
 * two results; gradients through all of these checked with tg_grad_check (finite
 * differences) and against closed forms; cycles (direct and indirect) refused with the
 * cycle named; nesting beyond TG_CALL_MAX_DEPTH refused; argument dtype and shape errors
 * naming the parameter; a callee given up by its creator stays alive while called; clone,
 * verify and printing a module keep calls, and the printed text parses back; merge (CSE)
 * merges two equal calls and keeps calls of different callees apart.
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

#include "tgraph.h"

#define Q TG_DIM_UNKNOWN

static tg_var *in1(tg_graph *g, const char *name, int64_t n) {
    return tg_input(g, name, TG_DT_F64, 1, (int64_t[]){n});
}

/* sq(x: f64[?]) = x * x + sin(x) */
static tg_graph *make_sq(void) {
    tg_graph *f = tg_graph_new(NULL, "sq");
    tg_var *x = in1(f, "x", Q);
    tg_var *y = tg_add(f, tg_mul(f, x, x), tg_sin(f, x));
    assert_int_equal(tg_graph_set_outputs(f, &y, 1), TG_OK);
    return f;
}

/* Calls f(x) once, expecting one output. */
static tg_var *call1(tg_graph *g, tg_graph *f, tg_var *x) {
    tg_var *out[1];
    int n = 1;
    if (tg_call(g, f, &x, 1, out, &n) != TG_OK) return NULL;
    assert_int_equal(n, 1);
    return out[0];
}

static tg_tensor *vec(const double *v, int64_t n) {
    tg_tensor *t = tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){n}, v);
    assert_non_null(t);
    return t;
}

static void test_types_from_the_body(void **state) {
    (void)state;
    tg_graph *sq = make_sq();
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_var *a = in1(g, "a", 3), *b = in1(g, "b", Q);
    tg_var *ya = call1(g, sq, a), *yb = call1(g, sq, b);
    assert_non_null(ya);
    assert_non_null(yb);
    assert_int_equal(tg_var_dim(ya, 0), 3); /* static where the argument is */
    assert_int_equal(tg_var_dim(yb, 0), Q);
    tg_graph_free(sq); /* the calls keep it alive */
    tg_var *outs[2] = {ya, yb};
    assert_int_equal(tg_graph_set_outputs(g, outs, 2), TG_OK);
    assert_int_equal(tg_graph_verify(g), TG_OK);
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    assert_int_equal(tg_graph_verify(c), TG_OK);
    tg_graph_free(g); /* the clone still holds sq */
    tg_optimize_opts keep = TG_OPTIMIZE_OPTS(.no_inline = true);
    tg_graph *o = NULL, *i = NULL;
    assert_int_equal(tg_graph_optimize(c, &keep, &o), TG_OK);
    assert_int_equal(tg_graph_optimize(c, NULL, &i), TG_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(tg_graph_print(o, f), TG_OK);
    fclose(f);
    assert_non_null(strstr(text, "func sq(x: f64[?])"));
    assert_non_null(strstr(text, " = sq(a)"));
    tg_module *m = NULL; /* the printed text parses back */
    assert_int_equal(tg_module_parse(NULL, text, len, "p.tg", &m), TG_OK);
    assert_int_equal(tg_module_func_count(m), 2);
    tg_module_free(m);
    free(text);
    text = NULL;
    f = open_memstream(&text, &len);
    assert_int_equal(tg_graph_print(i, f), TG_OK); /* inlined: no call, no callee */
    fclose(f);
    assert_null(strstr(text, "sq"));
    free(text);
    tg_graph_free(o);
    tg_graph_free(i);
    tg_graph_free(c);
}

/* loss = sum(w * outer(two(sq(a)))) + sum(sq(b)): sq called from two places with
 * different extents, and three deep through two -> sq. */
static void test_grad_through_calls(void **state) {
    (void)state;
    tg_graph *sq = make_sq();
    tg_graph *two = tg_graph_new(NULL, "two"); /* two(x, s) = (sq(x) * s, exp(x)) */
    {
        tg_var *x = in1(two, "x", Q), *s = tg_input(two, "s", TG_DT_F64, 0, NULL);
        tg_var *outs[2] = {tg_mul(two, call1(two, sq, x), s), tg_exp(two, x)};
        assert_int_equal(tg_graph_set_outputs(two, outs, 2), TG_OK);
    }
    tg_graph *top = tg_graph_new(NULL, "top"); /* top(x) = sum(first(two(x, 2))) */
    {
        tg_var *x = in1(top, "x", Q), *args[2] = {x, tg_literal_float(top, 2.0)}, *r[2];
        int n = 2;
        assert_int_equal(tg_call(top, two, args, 2, r, &n), TG_OK);
        assert_int_equal(n, 2);
        tg_var *y = tg_add(top, tg_mul(top, r[0], r[1]), x);
        assert_int_equal(tg_graph_set_outputs(top, &y, 1), TG_OK);
    }
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_var *a = in1(g, "a", 3), *b = in1(g, "b", 5);
    tg_var *ya = call1(g, top, a), *yb = call1(g, sq, b);
    assert_non_null(ya);
    assert_non_null(yb);
    assert_int_equal(tg_var_dim(ya, 0), 3);
    tg_var *loss = tg_add(g, tg_reduce(g, "sum", ya, NULL, -1, false),
                          tg_reduce(g, "sum", yb, NULL, -1, false));
    assert_int_equal(tg_graph_set_outputs(g, &loss, 1), TG_OK);
    tg_graph_free(sq);
    tg_graph_free(two);
    tg_graph_free(top);
    const double av[3] = {0.3, -0.7, 1.1}, bv[5] = {0.5, 1.5, -2.0, 0.1, 0.9};
    tg_tensor *in[2] = {vec(av, 3), vec(bv, 5)};
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    tg_grad_check_opts o = TG_GRAD_CHECK_OPTS(.seed = 7);
    tg_status st = tg_grad_check(g, in, 2, &o, &rep);
    if (st != TG_OK) print_error("%s\n", tg_last_error());
    assert_int_equal(st, TG_OK);

    /* the gradient itself, against its closed form: d/da of sum(2 sq(a) exp(a) + a) */
    tg_var *gr[2];
    assert_int_equal(tg_grad(g, loss, (tg_var *[]){a, b}, 2, TG_DISCONNECTED_ERROR, gr), TG_OK);
    assert_int_equal(tg_var_dim(gr[0], 0), 3);
    assert_int_equal(tg_graph_set_outputs(g, gr, 2), TG_OK);
    tg_fn *fn = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &fn), TG_OK);
    tg_tensor *out[2] = {NULL, NULL};
    assert_int_equal(tg_fn_call(fn, in, 2, out, 2), TG_OK);
    for (int i = 0; i < 3; i++) {
        double x = av[i], s = x * x + sin(x), ds = 2 * x + cos(x);
        double want = 2 * (ds * exp(x) + s * exp(x)) + 1;
        assert_true(fabs(tg_tensor_get_f64(out[0], i) - want) < 1e-9 * (1 + fabs(want)));
    }
    for (int i = 0; i < 5; i++) {
        double want = 2 * bv[i] + cos(bv[i]);
        assert_true(fabs(tg_tensor_get_f64(out[1], i) - want) < 1e-12 * (1 + fabs(want)));
    }
    for (int i = 0; i < 2; i++) {
        tg_tensor_free(out[i]);
        tg_tensor_free(in[i]);
    }
    tg_fn_free(fn);
    tg_graph_free(g);
}

static void test_cycles_and_depth(void **state) {
    (void)state;
    tg_graph *f = tg_graph_new(NULL, "f"), *g = tg_graph_new(NULL, "g");
    tg_var *x = in1(f, "x", Q);
    assert_int_equal(tg_graph_set_outputs(f, &x, 1), TG_OK);
    tg_var *y = in1(g, "y", Q);
    tg_var *gy = call1(g, f, y); /* g calls f */
    assert_non_null(gy);
    assert_int_equal(tg_graph_set_outputs(g, &gy, 1), TG_OK);
    assert_null(call1(f, g, x)); /* f -> g -> f */
    assert_int_equal(tg_graph_status(f), TG_EINVAL);
    assert_string_equal(tg_graph_error(f), "call cycle: f -> g -> f");
    tg_graph *h = tg_graph_new(NULL, "h");
    tg_var *hx = in1(h, "x", Q);
    assert_null(call1(h, h, hx));
    assert_string_equal(tg_graph_error(h), "call cycle: h -> h");
    tg_graph_free(h);
    tg_graph_free(f);
    tg_graph_free(g);

    /* a chain c0 <- c1 <- ... : the call that would nest deeper than the limit fails */
    tg_graph *prev = NULL;
    int made = 0;
    for (int k = 0; k <= TG_CALL_MAX_DEPTH + 1; k++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", k);
        tg_graph *c = tg_graph_new(NULL, name);
        tg_var *v = in1(c, "x", Q);
        tg_var *r = prev ? call1(c, prev, v) : tg_neg(c, v);
        if (!r) {
            assert_int_equal(tg_graph_status(c), TG_ELIMIT);
            assert_non_null(strstr(tg_graph_error(c), "calls nest deeper than 64"));
            tg_graph_free(c);
            break;
        }
        assert_int_equal(tg_graph_set_outputs(c, &r, 1), TG_OK);
        tg_graph_free(prev); /* the chain keeps itself alive */
        prev = c;
        made++;
    }
    assert_int_equal(made, TG_CALL_MAX_DEPTH + 1);
    tg_graph_free(prev); /* frees the whole chain, iteratively */
}

static void test_argument_errors(void **state) {
    (void)state;
    tg_graph *f = tg_graph_new(NULL, "f");
    tg_var *p = tg_input(f, "p", TG_DT_F64, 1, (int64_t[]){4});
    assert_int_equal(tg_graph_set_outputs(f, &p, 1), TG_OK);
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_var *x32 = tg_input(g, "x", TG_DT_F32, 1, (int64_t[]){4});
    assert_null(call1(g, f, x32));
    assert_string_equal(tg_graph_error(g),
                        "call: f: argument 1 is f32[4], but parameter 'p' of f is f64[4]");
    tg_graph_free(g);
    g = tg_graph_new(NULL, "main");
    tg_var *x3 = tg_input(g, "x", TG_DT_F64, 1, (int64_t[]){3});
    assert_null(call1(g, f, x3));
    assert_string_equal(tg_graph_error(g),
                        "call: f: argument 1 is f64[3], but parameter 'p' of f is f64[4]");
    tg_graph_free(g);
    g = tg_graph_new(NULL, "main");
    tg_var *xq = tg_input(g, "x", TG_DT_F64, 1, (int64_t[]){Q}); /* '?' into 4: checked at run */
    assert_non_null(call1(g, f, xq));
    tg_var *out[1];
    int room = 0; /* no room for the output */
    assert_int_equal(tg_call(g, f, &xq, 1, out, &room), TG_EINVAL);
    tg_graph_free(g);
    g = tg_graph_new(NULL, "main");
    tg_var *lit = tg_literal_float(g, 2.0);
    assert_null(call1(g, f, lit)); /* a weak literal takes the dtype, not the shape */
    assert_int_equal(tg_graph_status(g), TG_ESHAPE);
    tg_graph_free(g);
    tg_graph_free(f);
}

/* merge (CSE) treats two calls of one graph on the same arguments as one value */
static void test_merge_calls(void **state) {
    (void)state;
    tg_graph *sq = make_sq(), *sq2 = make_sq();
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_var *x = in1(g, "x", 3);
    tg_var *outs[3] = {call1(g, sq, x), call1(g, sq, x), call1(g, sq2, x)};
    assert_int_equal(tg_graph_set_outputs(g, outs, 3), TG_OK);
    tg_optimize_opts keep = TG_OPTIMIZE_OPTS(.no_inline = true);
    tg_graph *o = NULL;
    assert_int_equal(tg_graph_optimize(g, &keep, &o), TG_OK);
    assert_ptr_equal(tg_graph_output(o, 0), tg_graph_output(o, 1));
    assert_ptr_not_equal(tg_graph_output(o, 0), tg_graph_output(o, 2));
    assert_int_equal(tg_graph_node_count(o), 2);
    tg_graph_free(o);
    tg_graph_free(g);
    tg_graph_free(sq);
    tg_graph_free(sq2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types_from_the_body), cmocka_unit_test(test_grad_through_calls),
        cmocka_unit_test(test_cycles_and_depth),    cmocka_unit_test(test_argument_errors),
        cmocka_unit_test(test_merge_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
