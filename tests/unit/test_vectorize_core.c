/* test_vectorize_core.c - vectorize over core ops (ops with a signature, applied over
 * leading batch dimensions: cholesky, slogdet, diag), against the loop over the examples
 * (vectorize_testutil.h), and the gradients of vectorized log-determinants through the
 * checker.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vectorize_testutil.h"

/* S = A A^T + 3 I (positive definite), its Cholesky factor and its slogdet. */
static tg_graph *spd_core(void) {
    tg_graph *f = tg_graph_new(ctx, "spd");
    tg_var *A = tg_input(f, "A", TG_DT_F64, 2, SH(3, 3));
    tg_var *eye = tg_apply(f, "eye", NULL, 0, &TG_A_INT("n", 3), 1);
    tg_var *S = tg_add(f, tg_matmul(f, A, tg_transpose(f, A, NULL)),
                       tg_mul(f, eye, tg_literal_float(f, 3.0)));
    tg_var *outs[3];
    outs[0] = tg_apply(f, "cholesky", &S, 1, NULL, 0);
    int n = 2;
    assert_int_equal(tg_apply_multi(f, "slogdet", &S, 1, NULL, 0, outs + 1, &n), TG_OK);
    assert_int_equal(tg_graph_set_outputs(f, outs, 3), TG_OK);
    return f;
}

static void test_cholesky_slogdet(void **state) {
    (void)state;
    tg_graph *f = spd_core();
    tg_tensor *a0 = rnd(3, SH(5, 3, 3), 31), *a2 = rnd(3, SH(3, 3, 4), 32);
    tg_graph_free(check_loop(f, &a0, 1, (int[]){0}, (int[]){0, 0, 0}));
    tg_graph_free(check_loop(f, &a2, 1, (int[]){-1}, (int[]){2, 0, -1}));
    tg_tensor_free(a0);
    tg_tensor_free(a2);
    tg_graph_free(f);
}

/* f (one 3 x 3 input, nout outputs) vectorized over a batch of 4: the gradient of its
 * output `out` checked by tg_grad_check on random data of `seed`. */
static void check_vectorized_grad(tg_graph *f, int nout, int out, unsigned seed) {
    tg_graph *g = tg_graph_new(ctx, "main");
    tg_var *A = tg_input(g, "A", TG_DT_F64, 3, SH(4, 3, 3));
    tg_var *outs[8];
    int n = nout;
    assert_int_equal(tg_vectorize(g, f, &A, 1, NULL, NULL, outs, &n), TG_OK);
    assert_int_equal(tg_graph_set_outputs(g, &outs[out], 1), TG_OK);
    tg_tensor *a = rnd(3, SH(4, 3, 3), seed);
    tg_status st = tg_grad_check(g, &a, 1, NULL, NULL);
    if (st != TG_OK) print_error("%s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_tensor_free(a);
    tg_graph_free(g);
}

/* The sum of the batched log-determinants, differentiated through the batched slogdet. */
static void test_grad_of_vectorized_logdet(void **state) {
    (void)state;
    tg_graph *f = spd_core();
    check_vectorized_grad(f, 3, 2, 33);
    tg_graph_free(f);
}

/* A non-square block's diagonal, and sum(log(diag(L))) of S's factor (half its
 * log-determinant): diag keeps the batch axes leading. */
static tg_graph *diag_core(void) {
    tg_graph *f = tg_graph_new(ctx, "diags");
    tg_var *A = tg_input(f, "A", TG_DT_F64, 2, SH(3, 3));
    tg_var *eye = tg_apply(f, "eye", NULL, 0, &TG_A_INT("n", 3), 1);
    tg_var *S = tg_add(f, tg_matmul(f, A, tg_transpose(f, A, NULL)),
                       tg_mul(f, eye, tg_literal_float(f, 3.0)));
    tg_var *L = tg_apply(f, "cholesky", &S, 1, NULL, 0);
    int64_t lead[] = {0};
    tg_slice rows[] = {{.start = 0, .stop = 2, .step = 1}};
    tg_var *outs[2] = {tg_diag(f, tg_slice_apply(f, A, rows, 1)),
                       tg_reduce(f, "sum", tg_log(f, tg_diag(f, L)), lead, 1, false)};
    assert_int_equal(tg_graph_set_outputs(f, outs, 2), TG_OK);
    return f;
}

static void test_diag(void **state) {
    (void)state;
    tg_graph *f = diag_core();
    tg_tensor *a0 = rnd(3, SH(5, 3, 3), 41), *a2 = rnd(3, SH(3, 3, 4), 42);
    tg_graph_free(check_loop(f, &a0, 1, (int[]){0}, (int[]){0, 0}));
    tg_graph_free(check_loop(f, &a2, 1, (int[]){-1}, (int[]){-1, 0}));
    tg_tensor_free(a0);
    tg_tensor_free(a2);
    tg_graph_free(f);
    f = diag_core(); /* the gradient of the batched sum(log(diag(L))) */
    check_vectorized_grad(f, 2, 1, 43);
    tg_graph_free(f);
}

int main(void) {
    ctx = tg_ctx_default();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cholesky_slogdet),
        cmocka_unit_test(test_grad_of_vectorized_logdet),
        cmocka_unit_test(test_diag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
