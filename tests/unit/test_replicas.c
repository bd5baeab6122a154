/* test_replicas.c - concurrent calls of one compiled function (program and replicas,
 * src/backend/plan.h).
 *
 * Eight threads call one function at once, in the vm and c modes, each going through
 * several input signatures in its own order (new tensors and given ones alternately), and
 * every result must equal, bit for bit, what one thread got from the same function before:
 * elementwise and reduction kernels with a large input that the pool splits, BLAS
 * products split over rows, concurrent runs of independent nodes, and a shape known only
 * at run time (the VM's dynamic instructions; the C JIT's fall-back VM). A product split
 * over its contraction (partial sums in the workspace, added in thread order) is the one
 * result that depends on the threads a call got: it must be within 1e-12.
 * Twelve signatures of one function, more than the 8 plans a function keeps, make the
 * program drop plans while other calls still run on them (each replica lets go of its
 * memory for a dropped plan at its next new signature).
 * A scan (an RNN cell with its gradient, a reverse scan) and a map whose iterations run
 * over the pool get the same treatment.
 * Calls ran at the same time: the function made more than one replica. A function with
 * state stays serialized: a counter updated by 8 x 25 calls ends at 200. The reference
 * interpreter is safe as well.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vm/vm.h"
#include "tgraph.h"

static const char *SRC =
    "func ew(x: f64[?]) {\n"
    "  y = add(mul(exp(mul(mul(x, x), -0.5)), sin(x)), mul(x, 0.5))\n"
    "  return y, sum(y), max(x)\n"
    "}\n"
    "func mlp(x: f32[?,64], W1: f32[64,128], b1: f32[128], W2: f32[128,10]) {\n"
    "  h = tanh(add(dot(x, W1), b1))\n"
    "  return softmax(dot(h, W2), axis=1), sum(h, axis=0)\n"
    "}\n"
    "func branches(A: f64[?,64], B: f64[64,64], C: f64[64,64]) {\n"
    "  p = dot(A, B)\n"
    "  q = dot(A, C)\n"
    "  r = add(tanh(p), exp(mul(q, 0.01)))\n"
    "  return r, sum(q, axis=0)\n"
    "}\n"
    "func ksplit(X: f64[?,8], Y: f64[?,8]) {\n"
    "  return dot(transpose(X), Y)\n"
    "}\n"
    "func dyn(x: f64[?], k: bool[?]) {\n"
    "  s = mask_select(x, k)\n"
    "  return mul(s, sum(s))\n"
    "}\n"
    "func cell(h: f64[16], x: f64[16], W: f64[16,16]) {\n"
    "  hn = tanh(add(dot(h, W), x))\n"
    "  return hn, sum(hn)\n"
    "}\n"
    "func rnn(h0: f64[16], xs: f64[?,16], W: f64[16,16]) {\n"
    "  h, ys = scan(@cell, h0, xs, W, n_sequences=1)\n"
    "  return h, ys, grad(sum(ys), W)\n"
    "}\n"
    "func bump(x: f64[64]) {\n"
    "  return sum(exp(mul(x, 0.1)))\n"
    "}\n"
    "func each(xs: f64[?,64]) {\n"
    "  return map(@bump, xs, n_sequences=1)\n"
    "}\n"
    "func count(mut n: f64[], x: f64[]) {\n"
    "  n <- add(n, x)\n"
    "  return mul(n, 2)\n"
    "}\n";

enum { NTHREADS = 8, MAXIN = 4, MAXOUT = 3, MAXSIG = 12 };

static tg_module *parse(const char *src) {
    tg_module *m = NULL;
    if (tg_module_parse(NULL, src, strlen(src), "replicas.tg", &m) != TG_OK)
        fail_msg("parse: %s", tg_last_error());
    return m;
}

static tg_fn *compile(tg_graph *g, tg_mode mode, int nthreads) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = nthreads, .no_fallback = true);
    tg_fn *f = NULL;
    if (tg_graph_compile(g, &o, &f) != TG_OK) fail_msg("compile: %s", tg_last_error());
    return f;
}

/* A tensor of the input's dtype with '?' extents set to n, of values from a seed. */
static tg_tensor *input(const tg_var *v, int64_t n, double seed) {
    int64_t shape[TG_MAX_DIMS];
    for (int d = 0; d < tg_var_ndim(v); d++) shape[d] = tg_var_dim(v, d) < 0 ? n : tg_var_dim(v, d);
    tg_tensor *t = tg_tensor_new(NULL, tg_var_dtype(v), tg_var_ndim(v), shape);
    assert_non_null(t);
    for (int64_t i = 0; i < tg_tensor_size(t); i++) {
        double x = sin((double)i * 0.7 + seed) * 2.0;
        if (tg_var_dtype(v) == TG_DT_BOOL) x = (i * 7 + (int64_t)seed) % 3 != 0;
        tg_store_f64((char *)tg_tensor_data(t) + i * (int64_t)tg_dtype_size(t->dtype), t->dtype, x);
    }
    return t;
}

/* One function under test: its signatures (extents of its '?' axes), their inputs, and
 * the results one thread got. */
typedef struct sig {
    tg_tensor *in[MAXIN];
    tg_tensor *want[MAXOUT];
} sig;

typedef struct subject {
    tg_fn *f;
    int nin, nout, nsig;
    double tol; /* relative; 0: bit for bit */
    sig s[MAXSIG];
} subject;

static void subject_init(subject *S, tg_graph *g, tg_mode mode, int nthreads, const int64_t *ext,
                         int nsig) {
    S->f = compile(g, mode, nthreads);
    S->nin = tg_graph_input_count(g);
    S->nout = tg_graph_output_count(g);
    S->nsig = nsig;
    assert_true(S->nin <= MAXIN && S->nout <= MAXOUT && nsig <= MAXSIG);
    for (int k = 0; k < nsig; k++) {
        for (int i = 0; i < S->nin; i++)
            S->s[k].in[i] = input(tg_graph_input(g, i), ext[k], 0.3 * (i + 1) + k);
        assert_int_equal(tg_fn_call(S->f, S->s[k].in, S->nin, S->s[k].want, S->nout), TG_OK);
    }
}

static void subject_fini(subject *S) {
    for (int k = 0; k < S->nsig; k++)
        for (int i = 0; i < MAXIN; i++) {
            tg_tensor_free(S->s[k].in[i]);
            if (i < MAXOUT) tg_tensor_free(S->s[k].want[i]);
        }
    tg_fn_free(S->f);
}

/* Whether a equals b: bit for bit (tol 0), or within tol of the larger magnitude. */
static bool same(const tg_tensor *a, const tg_tensor *b, double tol) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    for (int64_t i = 0; i < tg_tensor_size(a); i++) {
        double x = tg_tensor_get_f64(a, i), y = tg_tensor_get_f64(b, i);
        if (tol > 0 ? fabs(x - y) > tol * fmax(fabs(x), fabs(y)) : memcmp(&x, &y, sizeof x) != 0)
            return false;
    }
    return true;
}

static bool same_bits(const tg_tensor *a, const tg_tensor *b) { return same(a, b, 0.0); }

typedef struct worker {
    subject *S;
    int id, rounds;
    int bad;
    char first[512];
} worker;

static void *work(void *arg) {
    worker *w = arg;
    subject *S = w->S;
    for (int r = 0; r < w->rounds; r++) {
        const sig *s = &S->s[(w->id + r) % S->nsig];
        bool into = (w->id + r) % 2 == 1;
        tg_tensor *got[MAXOUT] = {0};
        for (int o = 0; into && o < S->nout; o++) { /* given outputs, of the right shapes */
            const tg_tensor *t = s->want[o];
            got[o] = tg_tensor_new(NULL, t->dtype, t->ndim, t->shape);
        }
        tg_status st = into ? tg_fn_call_into(S->f, s->in, S->nin, got, S->nout)
                            : tg_fn_call(S->f, s->in, S->nin, got, S->nout);
        if (st != TG_OK && !w->bad++)
            snprintf(w->first, sizeof w->first, "call failed: %s", tg_last_error());
        for (int o = 0; st == TG_OK && o < S->nout; o++)
            if (!same(got[o], s->want[o], S->tol) && !w->bad++)
                snprintf(w->first, sizeof w->first, "round %d: output %d differs", r, o);
        for (int o = 0; o < S->nout; o++) tg_tensor_free(got[o]);
    }
    return NULL;
}

/* NTHREADS threads calling S->f at once, rounds calls each. */
static void hammer(subject *S, int rounds, const char *what) {
    worker w[NTHREADS];
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        w[t] = (worker){.S = S, .id = t, .rounds = rounds};
        assert_int_equal(pthread_create(&th[t], NULL, work, &w[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++)
        if (w[t].bad)
            fail_msg("%s, thread %d: %d of %d calls wrong; first: %s", what, t, w[t].bad, rounds,
                     w[t].first);
}

static void run_all(tg_mode mode) {
    tg_module *m = parse(SRC);
    const char *mname = mode == TG_MODE_C ? "c" : mode == TG_MODE_VM ? "vm" : "reference";
    char what[64];
    /* '?' extents: small, middle, and a large one the pool splits; and more signatures
     * than the plans a function keeps */
    struct {
        const char *name;
        int nsig;
        int64_t ext[MAXSIG];
        int rounds;
        double tol;
    } cases[] = {
        {"ew", 3, {7, 1000, 300000}, 12, 0},
        {"mlp", 3, {1, 33, 1024}, 12, 0},
        {"branches", 3, {5, 200, 4096}, 12, 0},
        {"ksplit", 3, {3, 5000, 200000}, 12, 1e-12},
        {"dyn", 3, {9, 100, 5000}, 24, 0},
        {"rnn", 3, {1, 20, 300}, 12, 0},
        {"each", 3, {2, 100, 10000}, 12, 0},
        {"ew", 12, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 48, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        subject S = {.tol = cases[c].tol};
        subject_init(&S, tg_module_find(m, cases[c].name), mode, 2, cases[c].ext, cases[c].nsig);
        snprintf(what, sizeof what, "%s mode, %s", mname, cases[c].name);
        hammer(&S, cases[c].rounds, what);
        subject_fini(&S);
    }
    tg_module_free(m);
}

static void test_vm(void **state) {
    (void)state;
    run_all(TG_MODE_VM);
}

static void test_c(void **state) {
    (void)state;
    run_all(TG_MODE_C);
}

static void test_reference(void **state) {
    (void)state;
    tg_module *m = parse(SRC);
    subject S = {0};
    subject_init(&S, tg_module_find(m, "mlp"), TG_MODE_REFERENCE, 1, (int64_t[]){1, 33, 100}, 3);
    hammer(&S, 6, "reference mode, mlp");
    subject_fini(&S);
    tg_module_free(m);
}

/* Calls from several threads make replicas of their own (the VM directly, to see its
 * statistics), and the concurrent runs of independent nodes still run in them. */
typedef struct vm_arg {
    tg_vm *vm;
    tg_tensor *const *in, *const *want;
    int bad;
} vm_arg;

static void *call_vm(void *p) {
    vm_arg *a = p;
    for (int i = 0; i < 4; i++) {
        tg_tensor *got[2] = {0};
        if (tg_vm_call(a->vm, a->in, 3, got, 2, false) != TG_OK)
            a->bad++;
        else
            a->bad += !same_bits(got[0], a->want[0]) + !same_bits(got[1], a->want[1]);
        tg_tensor_free(got[0]);
        tg_tensor_free(got[1]);
    }
    return NULL;
}

static void test_replicas_made(void **state) {
    (void)state;
    tg_module *m = parse(SRC);
    tg_graph *g = NULL;
    assert_int_equal(tg_graph_optimize(tg_module_find(m, "branches"), NULL, &g), TG_OK);
    tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = 2);
    tg_vm *vm = NULL;
    assert_int_equal(tg_vm_new(g, &o, &vm), TG_OK);
    tg_tensor *in[3];
    for (int i = 0; i < 3; i++) in[i] = input(tg_graph_input(g, i), 200, i);
    tg_tensor *want[2] = {0};
    assert_int_equal(tg_vm_call(vm, in, 3, want, 2, false), TG_OK);
    tg_vm_stats st;
    tg_vm_get_stats(vm, &st);
    assert_int_equal(st.nreplicas, 1);
    assert_true(st.branch_runs > 0); /* the two products ran concurrently */
    /* until two calls overlapped (a call keeps its replica for its whole length) */
    for (int tries = 0; tries < 50 && st.nreplicas < 2; tries++) {
        pthread_t th[NTHREADS];
        vm_arg a[NTHREADS];
        for (int t = 0; t < NTHREADS; t++) {
            a[t] = (vm_arg){vm, in, want, 0};
            assert_int_equal(pthread_create(&th[t], NULL, call_vm, &a[t]), 0);
        }
        for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
        for (int t = 0; t < NTHREADS; t++) assert_int_equal(a[t].bad, 0);
        tg_vm_get_stats(vm, &st);
    }
    assert_true(st.nreplicas >= 2 && st.nreplicas <= NTHREADS);
    assert_int_equal(st.nplans, 1);
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    for (int k = 0; k < 2; k++) tg_tensor_free(want[k]);
    tg_vm_free(vm);
    tg_graph_free(g);
    tg_module_free(m);
}

/* A function with state: calls are serialized, none is lost. */
typedef struct count_arg {
    tg_fn *f;
    tg_tensor *x;
    int bad;
} count_arg;

static void *call_count(void *p) {
    count_arg *a = p;
    for (int i = 0; i < 25; i++) {
        tg_tensor *y = NULL;
        a->bad += tg_fn_call(a->f, &a->x, 1, &y, 1) != TG_OK;
        tg_tensor_free(y);
    }
    return NULL;
}

static void test_state_serialized(void **state) {
    (void)state;
    tg_module *m = parse(SRC);
    tg_fn *f = compile(tg_module_find(m, "count"), TG_MODE_VM, 1);
    tg_tensor *one = tg_tensor_new(NULL, TG_DT_F64, 0, NULL);
    tg_store_f64(tg_tensor_data(one), TG_DT_F64, 1.0);
    pthread_t th[NTHREADS];
    count_arg a[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        a[t] = (count_arg){f, one, 0};
        assert_int_equal(pthread_create(&th[t], NULL, call_count, &a[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++) assert_int_equal(a[t].bad, 0);
    assert_true(tg_tensor_get_f64(tg_fn_state(f, 0), 0) == NTHREADS * 25.0);
    tg_tensor_free(one);
    tg_fn_free(f);
    tg_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vm),
        cmocka_unit_test(test_c),
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_replicas_made),
        cmocka_unit_test(test_state_serialized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
