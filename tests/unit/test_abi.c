/* test_abi.c - the versioned structs of the public API (tgraph.h, docs/c-api.md "ABI"):
 * option and report structs carry their size, set by their TG_..._OPTS macro. A size of 0
 * (a struct set up without the macro) or one below the first version is TG_EINVAL naming
 * the function and the struct; a larger struct (a program built with a newer header) is
 * read when the fields this library does not know are zero, refused when one is set; a
 * report is written only as far as the caller's size reaches. (That libtgraph.so exports
 * exactly tgraph.h's functions is checked by tests/abi/exports.sh.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "core/core.h"

/* The structs of a program built with a later tgraph.h, where each has one more field. */
typedef struct {
    tg_compile_opts v;
    int64_t later;
} compile_opts_later;
typedef struct {
    tg_grad_check_report v;
    int64_t later;
} report_later;

/* The message of the last error holds each of the given strings. */
static void says(const char *a, const char *b, const char *c) {
    const char *want[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (want[i] && !strstr(tg_last_error(), want[i]))
            fail_msg("the message '%s' does not say '%s'", tg_last_error(), want[i]);
}

/* f(x: f64[3]) = exp(x) */
static tg_graph *graph_exp(void) {
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, (int64_t[]){3});
    tg_var *y = tg_exp(g, x);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    return g;
}

/* Compiles g with opts; the status, and when it is TG_OK a call that worked. */
static tg_status compile_run(tg_graph *g, const tg_compile_opts *opts, bool *profiled) {
    tg_fn *f = (tg_fn *)1;
    tg_status st = tg_graph_compile(g, opts, &f);
    if (st != TG_OK) {
        assert_null(f);
        return st;
    }
    tg_tensor *x = tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){3}, (double[]){0, 1, 2});
    tg_tensor *y = NULL;
    assert_int_equal(tg_fn_call(f, &x, 1, &y, 1), TG_OK);
    assert_true(fabs(tg_tensor_get_f64(y, 1) - exp(1.0)) < 1e-12);
    FILE *null = fopen("/dev/null", "w");
    assert_non_null(null);
    if (profiled) *profiled = tg_fn_profile_print(f, null) == TG_OK;
    fclose(null);
    tg_tensor_free(x);
    tg_tensor_free(y);
    tg_fn_free(f);
    return TG_OK;
}

static void test_compile_opts(void **state) {
    (void)state;
    tg_graph *g = graph_exp();
    bool profiled = false;
    assert_int_equal(compile_run(g, NULL, &profiled), TG_OK);
    assert_false(profiled);
    tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = 1, .profile = true);
    assert_int_equal(o.size, sizeof(tg_compile_opts));
    assert_int_equal(compile_run(g, &o, &profiled), TG_OK);
    assert_true(profiled);
    assert_int_equal(compile_run(g, &TG_COMPILE_OPTS(), &profiled), TG_OK);
    assert_false(profiled);

    /* set up without the macro: refused, never taken for the defaults */
    assert_int_equal(compile_run(g, &(tg_compile_opts){.mode = TG_MODE_REFERENCE}, NULL),
                     TG_EINVAL);
    says("tg_graph_compile: tg_compile_opts.size is 0", "TG_COMPILE_OPTS(...)", NULL);
    /* the first version's size is the least taken; garbage sizes are refused */
    o.size = TG_COMPILE_OPTS_FIRST;
    assert_int_equal(compile_run(g, &o, &profiled), TG_OK);
    assert_true(profiled);
    o.size = TG_COMPILE_OPTS_FIRST - 1;
    assert_int_equal(compile_run(g, &o, NULL), TG_EINVAL);
    says("tg_compile_opts.size is", "not the size of a tg_compile_opts", NULL);
    o.size = (size_t)1 << 40;
    assert_int_equal(compile_run(g, &o, NULL), TG_EINVAL);

    /* a program built with a later tgraph.h, whose struct has one more field */
    compile_opts_later newer = {.v = TG_COMPILE_OPTS(.nthreads = 1, .profile = true)};
    newer.v.size = sizeof newer;
    assert_true(offsetof(compile_opts_later, later) >= sizeof(tg_compile_opts));
    assert_int_equal(compile_run(g, &newer.v, &profiled), TG_OK);
    assert_true(profiled);
    newer.later = 1; /* asks for something this library cannot do */
    assert_int_equal(compile_run(g, &newer.v, NULL), TG_EUNSUPPORTED);
    says("tg_graph_compile: tg_compile_opts sets a field", "newer tgraph.h", NULL);
    tg_graph_free(g);
}

static void test_optimize_opts(void **state) {
    (void)state;
    tg_graph *g = graph_exp(), *r = NULL;
    assert_int_equal(tg_graph_optimize(g, &TG_OPTIMIZE_OPTS(.verify = true), &r), TG_OK);
    tg_graph_free(r);
    r = NULL;
    assert_int_equal(tg_graph_optimize(g, NULL, &r), TG_OK);
    tg_graph_free(r);
    r = NULL;
    assert_int_equal(tg_graph_optimize(g, &(tg_optimize_opts){.verify = true}, &r), TG_EINVAL);
    assert_null(r);
    says("tg_graph_optimize: tg_optimize_opts.size is 0", "TG_OPTIMIZE_OPTS(...)", NULL);
    /* print_after is read from a struct of the first version's size */
    tg_optimize_opts o = TG_OPTIMIZE_OPTS(.print_after = "nonsense");
    o.size = TG_OPTIMIZE_OPTS_FIRST;
    assert_int_equal(tg_graph_optimize(g, &o, &r), TG_EINVAL);
    says("unknown pass 'nonsense'", NULL, NULL);
    tg_graph_free(g);
}

static void test_grad_check_structs(void **state) {
    (void)state;
    tg_graph *g = graph_exp();
    tg_tensor *x = tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){3}, (double[]){0, 1, 2});
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    assert_int_equal(tg_grad_check(g, &x, 1, &TG_GRAD_CHECK_OPTS(.seed = 1), &rep), TG_OK);
    assert_true(rep.input == 0 && rep.index >= 0 && rep.abs_err < 1e-6);
    assert_int_equal(rep.size, sizeof rep);

    assert_int_equal(tg_grad_check(g, &x, 1, &(tg_grad_check_opts){.seed = 1}, NULL), TG_EINVAL);
    says("tg_grad_check: tg_grad_check_opts.size is 0", "TG_GRAD_CHECK_OPTS(...)", NULL);
    /* a report without its size is refused, and nothing is written into it */
    tg_grad_check_report old = {.input = 7};
    assert_int_equal(tg_grad_check(g, &x, 1, NULL, &old), TG_EINVAL);
    says("tg_grad_check_report.size is 0", "TG_GRAD_CHECK_REPORT(...)", NULL);
    assert_int_equal(old.input, 7);

    /* a later report with one more field: what this library knows is written, no more */
    report_later newer = {.v = TG_GRAD_CHECK_REPORT(.input = 7), .later = 77};
    newer.v.size = sizeof newer;
    assert_int_equal(tg_grad_check(g, &x, 1, NULL, &newer.v), TG_OK);
    assert_int_equal(newer.v.input, 0);
    assert_int_equal(newer.v.size, sizeof newer);
    assert_int_equal(newer.later, 77);
    tg_tensor_free(x);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_opts),
        cmocka_unit_test(test_optimize_opts),
        cmocka_unit_test(test_grad_check_structs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
