/* test_mlp_step.c - the training step of the Fashion-MNIST demo: the function built with
 * the C API (examples/mlp_step.h) and the same function written in .tg
 * (examples/fashion_mnist.tg) give the same losses and parameters over several steps on
 * a synthetic batch, in the VM and in the reference interpreter; the loss falls; the
 * parameters are state (13 of them, the call takes the batch and the learning rate); the
 * data-parallel step (build_step_pmap, on 2 and 4 devices) gives the one-device losses and
 * states to float rounding, and refuses a batch the devices cannot share equally; and
 * the evaluation function counts a padding label (-1) as never correct.
 * Runs with tests/ as the working directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../examples/mlp_step.h"

#include <math.h>
#include <string.h>

#define TG_FILE "../examples/fashion_mnist.tg"
#define B       256
#define STEPS   4

typedef struct batch {
    tg_tensor *in[3]; /* x u8[B,784], y i64[B], lr f32[] */
} batch;

static batch make_batch(void) {
    batch b;
    b.in[0] = tg_tensor_new(NULL, TG_DT_U8, 2, (int64_t[]){B, NIN});
    b.in[1] = tg_tensor_new(NULL, TG_DT_I64, 1, (int64_t[]){B});
    b.in[2] = tg_tensor_from_data(NULL, TG_DT_F32, 0, NULL, &(float){2e-3f});
    assert_non_null(b.in[0]);
    assert_non_null(b.in[1]);
    assert_non_null(b.in[2]);
    uint8_t *x = tg_tensor_data(b.in[0]);
    int64_t *y = tg_tensor_data(b.in[1]);
    for (int64_t i = 0; i < B; i++) { /* class c lights up pixels of row c */
        y[i] = i % NOUT;
        for (int64_t j = 0; j < NIN; j++)
            x[i * NIN + j] = (uint8_t)((j / 28 == 2 * y[i] ? 200 : 0) + (i * 7 + j) % 31);
    }
    return b;
}

static void free_batch(batch *b) {
    for (int i = 0; i < 3; i++) tg_tensor_free(b->in[i]);
}

/* Runs STEPS steps of f; losses[s] receives the loss of step s. */
static void run_steps(tg_fn *f, batch *b, double *losses) {
    tg_tensor *loss = tg_tensor_new(NULL, TG_DT_F32, 0, NULL);
    for (int s = 0; s < STEPS; s++) {
        assert_int_equal(tg_fn_call_into(f, b->in, 3, &loss, 1), TG_OK);
        losses[s] = tg_tensor_get_f64(loss, 0);
    }
    tg_tensor_free(loss);
}

static double max_diff(const tg_tensor *a, const tg_tensor *b) {
    assert_int_equal(tg_tensor_size(a), tg_tensor_size(b));
    double d = 0;
    for (int64_t i = 0; i < tg_tensor_size(a); i++)
        d = fmax(d, fabs(tg_tensor_get_f64(a, i) - tg_tensor_get_f64(b, i)));
    return d;
}

static void check_same(tg_mode mode) {
    tg_graph *gc = build_step(B);
    assert_non_null(gc);
    tg_module *m = NULL;
    assert_int_equal(tg_module_load(NULL, TG_FILE, &m), TG_OK);
    tg_graph *gt = tg_module_find(m, "train_step");
    assert_non_null(gt);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = 1);
    tg_fn *fc = NULL, *ft = NULL;
    assert_int_equal(tg_graph_compile(gc, &o, &fc), TG_OK);
    assert_int_equal(tg_graph_compile(gt, &o, &ft), TG_OK);
    assert_int_equal(tg_fn_state_count(fc), 13);
    assert_int_equal(tg_fn_state_count(ft), 13);

    /* the same initial weights in both (biases and moments start at zero) */
    assert_int_equal(init_params(fc, 7), TG_OK);
    for (int i = 0; i < NPARAM; i++) {
        int kc = tg_fn_state_find(fc, param_name[i]), kt = tg_fn_state_find(ft, param_name[i]);
        assert_true(kc >= 0 && kt >= 0);
        assert_int_equal(tg_fn_state_set(ft, kt, tg_fn_state(fc, kc)), TG_OK);
    }
    const tg_tensor *w1 = tg_fn_state(fc, tg_fn_state_find(fc, "W1"));
    double sd = 0;
    for (int64_t i = 0; i < tg_tensor_size(w1); i++) sd += pow(tg_tensor_get_f64(w1, i), 2);
    sd = sqrt(sd / (double)tg_tensor_size(w1));
    assert_true(fabs(sd - sqrt(2.0 / NIN)) < 0.01 * sqrt(2.0 / NIN)); /* He initialisation */

    batch b = make_batch();
    double lc[STEPS], lt[STEPS];
    run_steps(fc, &b, lc);
    run_steps(ft, &b, lt);
    for (int s = 0; s < STEPS; s++) assert_true(fabs(lc[s] - lt[s]) <= 1e-5 * fabs(lc[s]));
    assert_true(lc[STEPS - 1] < 0.8 * lc[0]); /* it learns */
    for (int i = 0; i < tg_fn_state_count(fc); i++) {
        const char *name = tg_fn_state_name(fc, i);
        int k = tg_fn_state_find(ft, name);
        assert_true(k >= 0);
        double d = max_diff(tg_fn_state(fc, i), tg_fn_state(ft, k));
        if (d > 1e-5) fail_msg("state %s differs by %g", name, d);
    }
    assert_true(tg_tensor_get_f64(tg_fn_state(fc, tg_fn_state_find(fc, "t")), 0) == STEPS);

    free_batch(&b);
    tg_fn_free(fc);
    tg_fn_free(ft);
    tg_module_free(m);
    tg_graph_free(gc);
}

static void test_c_api_and_tg_agree_vm(void **st) {
    (void)st;
    check_same(TG_MODE_VM);
}

static void test_c_api_and_tg_agree_reference(void **st) {
    (void)st;
    check_same(TG_MODE_REFERENCE);
}

/* The data-parallel step (build_step_pmap: a pmap over ndev devices, each with 1/ndev of
 * the batch, the gradient taken through pmean of the loss) against the one-device step, in
 * the VM: the same losses and states, to float rounding, step after step. */
static void check_pmap(int ndev) {
    tg_graph *g1 = build_step(B), *gp = build_step_pmap(B, ndev);
    assert_non_null(g1);
    assert_non_null(gp);
    tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = 1);
    tg_fn *f1 = NULL, *fp = NULL;
    assert_int_equal(tg_graph_compile(g1, &o, &f1), TG_OK);
    assert_int_equal(tg_graph_compile(gp, &o, &fp), TG_OK);
    assert_int_equal(tg_fn_state_count(fp), 13);
    assert_int_equal(init_params(f1, 7), TG_OK);
    assert_int_equal(init_params(fp, 7), TG_OK);

    batch b = make_batch();
    double l1[STEPS], lp[STEPS];
    run_steps(f1, &b, l1);
    run_steps(fp, &b, lp);
    for (int s = 0; s < STEPS; s++)
        if (!(fabs(l1[s] - lp[s]) <= 1e-5 * fabs(l1[s])))
            fail_msg("%d devices, step %d: loss %.9g, one device %.9g", ndev, s, lp[s], l1[s]);
    for (int i = 0; i < tg_fn_state_count(f1); i++) {
        const char *name = tg_fn_state_name(f1, i);
        int k = tg_fn_state_find(fp, name);
        assert_true(k >= 0);
        double d = max_diff(tg_fn_state(f1, i), tg_fn_state(fp, k));
        if (d > 1e-5) fail_msg("%d devices: state %s differs by %g", ndev, name, d);
    }
    free_batch(&b);
    tg_fn_free(f1);
    tg_fn_free(fp);
    tg_graph_free(g1);
    tg_graph_free(gp);
}

static void test_pmap_step_agrees(void **st) {
    (void)st;
    check_pmap(2);
    check_pmap(4);
}

/* a batch the devices cannot share equally is refused when the step is built */
static void test_pmap_step_uneven_batch(void **st) {
    (void)st;
    assert_null(build_step_pmap(B + 1, 2));
}

static void test_eval_counts_correct(void **st) {
    (void)st;
    const int64_t E = 4;
    tg_graph *g = build_eval(E);
    assert_non_null(g);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    /* W2 = 0, b2 = one-hot of class 3: every prediction is 3 */
    tg_tensor *in[6];
    in[0] = tg_tensor_new(NULL, TG_DT_U8, 2, (int64_t[]){E, NIN});
    in[1] = tg_tensor_from_data(NULL, TG_DT_I64, 1, &E, (int64_t[]){3, 3, 5, -1});
    for (int i = 0; i < NPARAM; i++)
        in[2 + i] = tg_tensor_new(NULL, TG_DT_F32, param_ndim[i], param_shape[i]);
    ((float *)tg_tensor_data(in[2 + P_B2]))[3] = 1.0f;
    tg_tensor *out[2] = {NULL, NULL};
    assert_int_equal(tg_fn_call(f, in, 6, out, 2), TG_OK);
    assert_true(tg_tensor_get_f64(out[0], 0) == 2);
    for (int64_t i = 0; i < E; i++) assert_true(tg_tensor_get_f64(out[1], i) == 3);
    for (int i = 0; i < 6; i++) tg_tensor_free(in[i]);
    tg_tensor_free(out[0]);
    tg_tensor_free(out[1]);
    tg_fn_free(f);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_c_api_and_tg_agree_vm),
        cmocka_unit_test(test_c_api_and_tg_agree_reference),
        cmocka_unit_test(test_pmap_step_agrees),
        cmocka_unit_test(test_pmap_step_uneven_batch),
        cmocka_unit_test(test_eval_counts_correct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
