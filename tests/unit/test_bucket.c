/* test_bucket.c - the bucketed gradient all-reduce (src/rewrite/bucket.c, docs/mpi.md
 * "Bucketed gradients"): TGRAPH_BUCKET_BYTES is parsed or refused with a message naming
 * it; the data-parallel training step of the Fashion-MNIST demo (build_step_pmap, 2 and
 * 4 ranks: the gradients summed with psums, in buckets with the pmean of the loss; and
 * build_step_pmap_as with pmean_grads: each rank's gradients averaged with pmeans) gives
 * the same bits bucketed as not, step after step (losses and all 13 states), with every
 * gradient in a bucket of its own (1 byte), a few buckets (64 KiB), one bucket (the
 * default 25 MiB), in the VM and the reference interpreter, on threads or on host devices
 * (TGRAPH_HOST_DEVICES), in one process or, under mpirun (ctest mpi_bucket*), across the
 * processes; the pmeans are bucketed (no pmean is left in the optimized step); a step
 * that fails in one rank's backward pass while buckets are in flight reports its error,
 * and the next call runs.
 * Runs with tests/ as the working directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../examples/mlp_step.h"
#include "rewrite/rewrite.h"

#include <string.h>

#define B     256
#define STEPS 3

static void test_env_parsing(void **st) {
    (void)st;
    static const struct {
        const char *v;
        size_t bytes;
    } good[] = {{"0", 0},         {"1", 1},          {"65536", 65536},    {"64K", 65536},
                {"64KiB", 65536}, {"25M", 25 << 20}, {"25MiB", 25 << 20}, {"1G", (size_t)1 << 30},
                {"2k", 2048},     {"3mb", 3 << 20}};
    static const char *const bad[] = {"",     "abc",  "-1",     "12X",
                                      "25 M", "1.5M", "25MiBs", "99999999999999999999999"};
    size_t n;
    unsetenv("TGRAPH_BUCKET_BYTES");
    assert_int_equal(tg_bucket_bytes(&n), TG_OK);
    assert_int_equal(n, (size_t)25 << 20);
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        setenv("TGRAPH_BUCKET_BYTES", good[i].v, 1);
        assert_int_equal(tg_bucket_bytes(&n), TG_OK);
        if (n != good[i].bytes) fail_msg("'%s': %zu, expected %zu", good[i].v, n, good[i].bytes);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("TGRAPH_BUCKET_BYTES", bad[i], 1);
        assert_int_equal(tg_bucket_bytes(&n), TG_EINVAL);
        char want[64];
        snprintf(want, sizeof want, "TGRAPH_BUCKET_BYTES='%s': expected a number of bytes", bad[i]);
        if (!strstr(tg_last_error(), want)) fail_msg("'%s': %s", bad[i], tg_last_error());
    }
    /* compiling a pmap body with a malformed value fails with that message */
    setenv("TGRAPH_BUCKET_BYTES", "lots", 1);
    tg_graph *g = build_step_pmap(B, 2);
    assert_non_null(g);
    tg_fn *f = NULL;
    assert_int_not_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    assert_non_null(strstr(tg_last_error(), "TGRAPH_BUCKET_BYTES='lots'"));
    tg_graph_free(g);
    unsetenv("TGRAPH_BUCKET_BYTES");
}

typedef struct run {
    float loss[STEPS];
    tg_tensor *state[16];
    int nstate;
} run;

/* STEPS steps of the data-parallel step over ndev ranks (gradients averaged with pmean:
 * pmean_grads), compiled with TGRAPH_BUCKET_BYTES = bytes (NULL: unset), from the same
 * initial parameters. */
static void train(int ndev, bool pmean_grads, tg_mode mode, const char *bytes, run *r) {
    if (bytes)
        setenv("TGRAPH_BUCKET_BYTES", bytes, 1);
    else
        unsetenv("TGRAPH_BUCKET_BYTES");
    tg_graph *g = build_step_pmap_as(B, ndev, pmean_grads);
    assert_non_null(g);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = 1);
    tg_fn *f = NULL;
    if (tg_graph_compile(g, &o, &f) != TG_OK) fail_msg("compile: %s", tg_last_error());
    unsetenv("TGRAPH_BUCKET_BYTES");
    assert_int_equal(init_params(f, 7), TG_OK);
    tg_tensor *in[3];
    in[0] = tg_tensor_new(NULL, TG_DT_U8, 2, (int64_t[]){B, NIN});
    in[1] = tg_tensor_new(NULL, TG_DT_I64, 1, (int64_t[]){B});
    in[2] = tg_tensor_from_data(NULL, TG_DT_F32, 0, NULL, &(float){2e-3f});
    uint8_t *x = tg_tensor_data(in[0]);
    int64_t *y = tg_tensor_data(in[1]);
    for (int64_t i = 0; i < B; i++) {
        y[i] = i % NOUT;
        for (int64_t j = 0; j < NIN; j++)
            x[i * NIN + j] = (uint8_t)((j / 28 == 2 * y[i] ? 200 : 0) + (i * 7 + j) % 31);
    }
    tg_tensor *loss = tg_tensor_new(NULL, TG_DT_F32, 0, NULL);
    for (int s = 0; s < STEPS; s++) {
        if (tg_fn_call_into(f, in, 3, &loss, 1) != TG_OK) fail_msg("step: %s", tg_last_error());
        r->loss[s] = *(const float *)tg_tensor_data(loss);
    }
    r->nstate = tg_fn_state_count(f);
    assert_true(r->nstate == 13);
    for (int i = 0; i < r->nstate; i++) r->state[i] = tg_tensor_dup(tg_fn_state(f, i));
    tg_tensor_free(loss);
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    tg_fn_free(f);
    tg_graph_free(g);
}

static void run_free(run *r) {
    for (int i = 0; i < r->nstate; i++) tg_tensor_free(r->state[i]);
}

static void check_bits(int ndev, bool pmean_grads, tg_mode mode) {
    static const char *const sizes[] = {"1", "64K", NULL};
    const char *how = pmean_grads ? "gradients averaged with pmean" : "gradients summed";
    run off;
    train(ndev, pmean_grads, mode, "0", &off);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        run on;
        train(ndev, pmean_grads, mode, sizes[k], &on);
        for (int s = 0; s < STEPS; s++)
            if (memcmp(&on.loss[s], &off.loss[s], sizeof(float)) != 0)
                fail_msg("%d ranks, %s, TGRAPH_BUCKET_BYTES=%s, step %d: loss %.9g, unbucketed "
                         "%.9g",
                         ndev, how, sizes[k] ? sizes[k] : "(default)", s, on.loss[s], off.loss[s]);
        for (int i = 0; i < off.nstate; i++) {
            size_t bytes =
                (size_t)tg_tensor_size(off.state[i]) * tg_dtype_size(tg_tensor_dtype(off.state[i]));
            if (memcmp(tg_tensor_data(on.state[i]), tg_tensor_data(off.state[i]), bytes) != 0)
                fail_msg("%d ranks, %s, TGRAPH_BUCKET_BYTES=%s: state %d differs from unbucketed",
                         ndev, how, sizes[k] ? sizes[k] : "(default)", i);
        }
        run_free(&on);
    }
    run_free(&off);
}

static void test_same_bits_vm(void **st) {
    (void)st;
    check_bits(2, false, TG_MODE_VM);
    check_bits(4, false, TG_MODE_VM);
}

static void test_same_bits_reference(void **st) {
    (void)st;
    check_bits(2, false, TG_MODE_REFERENCE);
}

/* The optimized body of the step's pmap (the graph its ranks run), printed. */
static char *optimized(bool pmean_grads) {
    tg_graph *g = build_step_pmap_as(B, 2, pmean_grads), *o = NULL;
    assert_non_null(g);
    const tg_graph *body = NULL;
    for (int i = 0; i < g->nodes.n; i++) {
        const tg_node *n = g->nodes.items[i];
        if (n->op == TG_OP_PMAP) body = n->attrs[0].fn; /* attribute 0: body */
    }
    assert_non_null(body);
    if (tg_graph_optimize(body, NULL, &o) != TG_OK) fail_msg("optimize: %s", tg_last_error());
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(tg_graph_print(o, f), TG_OK);
    fclose(f);
    tg_graph_free(o);
    tg_graph_free(g);
    return text;
}

/* With the default size every collective of the step is in one bucket: the pmeans of the
 * averaged gradients (and of the loss) make one range of the wait, the first (the loss,
 * its input the first complete), where the gradients are summed. */
static void test_pmean_bucketed(void **st) {
    (void)st;
    unsetenv("TGRAPH_BUCKET_BYTES");
    char *text = optimized(true);
    int64_t n = 1 + NIN * NHID + NHID + NHID * NOUT + NOUT;
    char want[64];
    snprintf(want, sizeof want, "mean=[[0, %lld]])", (long long)n);
    if (strstr(text, "pmean(") || !strstr(text, want))
        fail_msg("the pmeans are not in one bucket (%s):\n%s", want, text);
    free(text);
    text = optimized(false);
    if (strstr(text, "pmean(") || strstr(text, "psum(") || !strstr(text, "mean=[[0, 1]])"))
        fail_msg("the loss's pmean is not in the gradients' bucket:\n%s", text);
    free(text);
}

static void test_pmean_same_bits_vm(void **st) {
    (void)st;
    check_bits(2, true, TG_MODE_VM);
    check_bits(4, true, TG_MODE_VM);
}

static void test_pmean_same_bits_reference(void **st) {
    (void)st;
    check_bits(2, true, TG_MODE_REFERENCE);
    check_bits(4, true, TG_MODE_REFERENCE);
}

/* A rank that fails after its buckets have started (rank 1's index is out of range for
 * take, which the program order runs after the starts) fails the call with its error;
 * the buckets in flight finish, and the next call works. In one process only: across
 * processes the failure ends the job (docs/mpi.md, "Failures"). */
static void test_failure_in_flight(void **st) {
    (void)st;
    if (tg_world_size() > 1) skip();
    const char *src = "func main(xs: f64[2,3], W: f64[3], V: f64[3], i: i64[2]) {\n"
                      "  l, a, b, k = pmap(@f, xs, W, V, i, in_axes=[0, none, none, 0], "
                      "out_axes=[none, none, none, 0], axis_name=\"r\")\n"
                      "  return l, a, b, k\n"
                      "}\n"
                      "func f(x: f64[3], W: f64[3], V: f64[3], i: i64[]) {\n"
                      "  l = pmean(sum(mul(mul(x, W), V)), axis_name=\"r\")\n"
                      "  gW, gV = grad(l, W, V)\n"
                      "  return l, gW, gV, take(const(value=[0, 1], dtype=\"i64\"), i)\n"
                      "}\n";
    setenv("TGRAPH_BUCKET_BYTES", "8", 1);
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(NULL, src, strlen(src), "t.tg", &m), TG_OK);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(tg_module_find(m, "main"), NULL, &f), TG_OK);
    unsetenv("TGRAPH_BUCKET_BYTES");
    double xs[6] = {1, 2, 3, 4, 5, 6}, w[3] = {1, 1, 1}, v[3] = {2, 2, 2};
    int64_t good[2] = {0, 1}, bad[2] = {0, 7};
    tg_tensor *in[4] = {tg_tensor_from_data(NULL, TG_DT_F64, 2, (int64_t[]){2, 3}, xs),
                        tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){3}, w),
                        tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){3}, v),
                        tg_tensor_from_data(NULL, TG_DT_I64, 1, (int64_t[]){2}, bad)};
    tg_tensor *out[4] = {NULL, NULL, NULL, NULL};
    assert_int_not_equal(tg_fn_call(f, in, 4, out, 4), TG_OK);
    assert_non_null(strstr(tg_last_error(), "pmap rank 1"));
    tg_tensor_free(in[3]);
    in[3] = tg_tensor_from_data(NULL, TG_DT_I64, 1, (int64_t[]){2}, good);
    if (tg_fn_call(f, in, 4, out, 4) != TG_OK) fail_msg("next call: %s", tg_last_error());
    /* gW = V (x0 + x1) / 2 = (5, 7, 9), gV = W (x0 + x1) / 2 = (2.5, 3.5, 4.5) */
    assert_true(tg_tensor_get_f64(out[1], 0) == 5.0 && tg_tensor_get_f64(out[1], 2) == 9.0);
    assert_true(tg_tensor_get_f64(out[2], 1) == 3.5);
    assert_true(tg_tensor_get_f64(out[3], 1) == 1.0);
    for (int i = 0; i < 4; i++) tg_tensor_free(out[i]);
    for (int i = 0; i < 4; i++) tg_tensor_free(in[i]);
    tg_fn_free(f);
    tg_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_parsing),
        cmocka_unit_test(test_same_bits_vm),
        cmocka_unit_test(test_same_bits_reference),
        cmocka_unit_test(test_pmean_bucketed),
        cmocka_unit_test(test_pmean_same_bits_vm),
        cmocka_unit_test(test_pmean_same_bits_reference),
        cmocka_unit_test(test_failure_in_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
