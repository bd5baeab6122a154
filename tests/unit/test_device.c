/* test_device.c - the device layer (src/device): the registry and device names, the
 * settings from the environment and their errors, memory and copies on every kind, device
 * buffers freed through their device, sim transfers paced by latency and bandwidth, queue
 * order, events across the queues of two sim devices (concurrent transfers overlap, a
 * waiting queue runs after the record), a host read of protected sim memory faulting (in
 * a forked child), and the disjoint thread shares of virtual host devices.
 * Timing checks are lower bounds, except the one upper bound of the overlap test, which
 * leaves 35 ms of slack over a 50 ms latency. Runs under ThreadSanitizer (make tsan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

static void clear_env(void) {
    unsetenv("TGRAPH_HOST_DEVICES");
    unsetenv("TGRAPH_SIM_DEVICES");
    unsetenv("TGRAPH_SIM_LATENCY_US");
    unsetenv("TGRAPH_SIM_GBPS");
    unsetenv("TGRAPH_SIM_PROTECT");
}

static int teardown(void **state) {
    (void)state;
    clear_env();
    assert_int_equal(tg_device_configure(0, 0), TG_OK);
    return 0;
}

static void test_default_is_cpu(void **state) {
    (void)state;
    clear_env();
    assert_int_equal(tg_device_configure(-1, -1), TG_OK);
    tg_device *const *devs;
    int n;
    assert_int_equal(tg_device_list(&devs, &n), TG_OK);
    assert_int_equal(n, 1);
    assert_string_equal(devs[0]->name, "cpu");
    assert_int_equal(devs[0]->kind, TG_DEVICE_CPU);
    assert_ptr_equal(tg_device_cpu(), devs[0]);
    assert_int_equal(devs[0]->nthreads, tg_pool_default_threads());
    assert_int_equal(tg_pool_size(devs[0]->pool), devs[0]->nthreads);
    assert_true(devs[0]->iface->supports_op(devs[0], 0));
}

static void test_names(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(2, 2), TG_OK);
    const char *names[] = {"cpu", "cpu:0", "cpu:1", "sim:0", "sim:1"};
    tg_device *const *devs;
    int n;
    assert_int_equal(tg_device_list(&devs, &n), TG_OK);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++) {
        assert_string_equal(devs[i]->name, names[i]);
        assert_int_equal(devs[i]->index, i);
        assert_ptr_equal(tg_device_find(names[i]), devs[i]);
    }
    assert_int_equal(devs[1]->kind, TG_DEVICE_HOST);
    assert_int_equal(devs[3]->kind, TG_DEVICE_SIM);
    assert_true(devs[3]->iface->supports_op(devs[3], 0)); /* host kernels on its queue */
    assert_null(tg_device_find("gpu:0"));
    assert_string_equal(tg_last_error(),
                        "no device \"gpu:0\" (the devices are: cpu, cpu:0, cpu:1, sim:0, sim:1)");
    assert_null(tg_device_find("sim:2"));
}

static void test_env(void **state) {
    (void)state;
    clear_env();
    setenv("TGRAPH_HOST_DEVICES", "3", 1);
    setenv("TGRAPH_SIM_DEVICES", "1", 1);
    assert_int_equal(tg_device_configure(-1, -1), TG_OK);
    tg_device *const *devs;
    int n;
    assert_int_equal(tg_device_list(&devs, &n), TG_OK);
    assert_int_equal(n, 5);
    assert_string_equal(devs[3]->name, "cpu:2");
    assert_string_equal(devs[4]->name, "sim:0");
    assert_true(near(devs[4]->cost.latency_s, 10e-6)); /* the defaults */
    assert_true(near(devs[4]->cost.bytes_per_s, 16e9));
    setenv("TGRAPH_SIM_LATENCY_US", "250", 1);
    setenv("TGRAPH_SIM_GBPS", "2.5", 1);
    assert_int_equal(tg_device_configure(-1, -1), TG_OK);
    assert_true(near(tg_device_find("sim:0")->cost.latency_s, 250e-6));
    assert_true(near(tg_device_find("sim:0")->cost.bytes_per_s, 2.5e9));

    const struct {
        const char *var, *value, *msg;
    } bad[] = {
        {"TGRAPH_HOST_DEVICES", "two", "TGRAPH_HOST_DEVICES=\"two\": expected a device count"},
        {"TGRAPH_HOST_DEVICES", "-1", "TGRAPH_HOST_DEVICES=\"-1\": expected a device count"},
        {"TGRAPH_HOST_DEVICES", "4x", "TGRAPH_HOST_DEVICES=\"4x\": expected a device count"},
        {"TGRAPH_SIM_DEVICES", "9999", "TGRAPH_SIM_DEVICES=\"9999\": expected a device count"},
        {"TGRAPH_SIM_GBPS", "0", "TGRAPH_SIM_GBPS=\"0\": expected a number"},
        {"TGRAPH_SIM_LATENCY_US", "soon", "TGRAPH_SIM_LATENCY_US=\"soon\": expected a number"},
        {"TGRAPH_SIM_PROTECT", "0.5", "TGRAPH_SIM_PROTECT: expected 0 or 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clear_env();
        setenv("TGRAPH_SIM_DEVICES", "1", 1);
        setenv(bad[i].var, bad[i].value, 1);
        assert_int_equal(tg_device_configure(-1, -1), TG_EINVAL);
        assert_non_null(strstr(tg_last_error(), bad[i].msg));
        /* a registry that failed to build is retried, and fails the same way */
        assert_null(tg_device_cpu());
        assert_null(tg_device_find("cpu"));
        assert_non_null(strstr(tg_last_error(), bad[i].var));
    }
}

/* Round trip of n bytes through d: host -> d, d -> d (a second block), d -> peer,
 * peer -> host, checked. */
static void round_trip(tg_device *d, tg_device *peer, size_t n) {
    unsigned char *src = malloc(n), *back = calloc(1, n);
    for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(i * 7 + 3);
    void *a = tg_device_alloc(d, n), *b = tg_device_alloc(d, n), *c = tg_device_alloc(peer, n);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_int_equal(tg_device_copy(d, a, NULL, src, n), TG_OK);
    assert_int_equal(tg_device_copy(d, b, d, a, n), TG_OK);
    assert_int_equal(tg_device_copy(peer, c, d, b, n), TG_OK);
    assert_int_equal(tg_device_copy(NULL, back, peer, c, n), TG_OK);
    assert_memory_equal(src, back, n);
    tg_device_free(d, a, n);
    tg_device_free(d, b, n);
    tg_device_free(peer, c, n);
    free(src);
    free(back);
}

static void test_memory(void **state) {
    (void)state;
    clear_env();
    setenv("TGRAPH_SIM_LATENCY_US", "0", 1);
    setenv("TGRAPH_SIM_PROTECT", "1", 1);
    assert_int_equal(tg_device_configure(2, 2), TG_OK);
    const char *pairs[][2] = {{"cpu", "cpu:1"},   {"cpu:0", "cpu:1"}, {"cpu:1", "sim:0"},
                              {"sim:0", "sim:1"}, {"sim:1", "cpu"},   {"sim:0", "sim:0"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        for (size_t n = 1; n <= 100000; n *= 100)
            round_trip(tg_device_find(pairs[i][0]), tg_device_find(pairs[i][1]), n);

    /* device buffers: zero-filled, owned by their device, freed through it */
    for (int i = 0; i < 2; i++) {
        tg_device *d = tg_device_find(i ? "sim:1" : "cpu:0");
        tg_buffer *buf = tg_device_buffer_new(d, 4096);
        assert_non_null(buf);
        assert_ptr_equal(buf->device, d);
        assert_true(!buf->release == tg_device_is_host(d));
        unsigned char out[4096];
        memset(out, 1, sizeof out);
        assert_int_equal(tg_device_copy(NULL, out, d, buf->data, sizeof out), TG_OK);
        for (size_t k = 0; k < sizeof out; k++) assert_int_equal(out[k], 0);
        tg_buffer_ref(buf);
        tg_buffer_unref(buf);
        tg_buffer_unref(buf);
    }
    tg_buffer *host = tg_device_buffer_new(NULL, 8);
    assert_ptr_equal(host->device, tg_device_cpu());
    tg_buffer_unref(host);
}

static void test_sim_pacing(void **state) {
    (void)state;
    clear_env();
    setenv("TGRAPH_SIM_LATENCY_US", "20000", 1);
    assert_int_equal(tg_device_configure(0, 1), TG_OK);
    tg_device *d = tg_device_find("sim:0");
    char byte = 5, *p = tg_device_alloc(d, 1);
    double t0 = now_s();
    assert_int_equal(tg_device_copy(d, p, NULL, &byte, 1), TG_OK);
    assert_true(now_s() - t0 >= 0.020);
    tg_device_free(d, p, 1);

    /* 10 MB/s and no latency: 200 kB take at least 20 ms */
    setenv("TGRAPH_SIM_LATENCY_US", "0", 1);
    setenv("TGRAPH_SIM_GBPS", "0.01", 1);
    assert_int_equal(tg_device_configure(0, 1), TG_OK);
    d = tg_device_find("sim:0");
    size_t n = 200000;
    char *host = calloc(1, n), *dev = tg_device_alloc(d, n);
    t0 = now_s();
    assert_int_equal(tg_device_copy(NULL, host, d, dev, n), TG_OK);
    assert_true(now_s() - t0 >= 0.020);
    tg_device_free(d, dev, n);
    free(host);
}

typedef struct order_log {
    int seen[200];
    int n;
} order_log;

typedef struct order_item {
    order_log *log;
    int k;
} order_item;

static void order_task(void *arg, tg_device *d) {
    order_item *it = arg;
    it->log->seen[it->log->n++] = it->k; /* only the queue thread writes */
}

static void test_queue_order(void **state) {
    (void)state;
    clear_env();
    assert_int_equal(tg_device_configure(1, 1), TG_OK);
    const char *names[] = {"cpu", "cpu:0", "sim:0"};
    for (int i = 0; i < 3; i++) {
        tg_device *d = tg_device_find(names[i]);
        order_log log = {{0}, 0};
        order_item items[200];
        for (int k = 0; k < 200; k++) {
            items[k] = (order_item){&log, k};
            assert_int_equal(tg_device_submit(d, order_task, &items[k]), TG_OK);
        }
        assert_int_equal(tg_device_synchronize(d), TG_OK);
        assert_int_equal(log.n, 200);
        for (int k = 0; k < 200; k++) assert_int_equal(log.seen[k], k);
    }
}

static void test_events(void **state) {
    (void)state;
    clear_env();
    const double lat = 0.050;
    setenv("TGRAPH_SIM_LATENCY_US", "50000", 1);
    assert_int_equal(tg_device_configure(0, 2), TG_OK);
    tg_device *s0 = tg_device_find("sim:0"), *s1 = tg_device_find("sim:1");
    int src = 42, out = 0;
    int *a = tg_device_alloc(s0, sizeof *a), *b = tg_device_alloc(s1, sizeof *b);

    /* two queues, a transfer each: they overlap, about one latency in all */
    tg_event *e0 = tg_event_new(), *e1 = tg_event_new();
    double t0 = now_s();
    assert_int_equal(tg_device_copy_async(s0, a, NULL, &src, sizeof src), TG_OK);
    assert_int_equal(tg_device_copy_async(s1, b, NULL, &src, sizeof src), TG_OK);
    assert_int_equal(tg_device_record(s0, e0), TG_OK);
    assert_int_equal(tg_device_record(s1, e1), TG_OK);
    tg_event_synchronize(e0);
    tg_event_synchronize(e1);
    double t = now_s() - t0;
    assert_true(t >= lat);
    assert_true(t < 1.7 * lat);

    /* sim:1 waits for sim:0's record before its copy from sim:0: two latencies in a row */
    src = 7;
    t0 = now_s();
    assert_int_equal(tg_device_copy_async(s0, a, NULL, &src, sizeof src), TG_OK);
    assert_int_equal(tg_device_record(s0, e0), TG_OK);
    assert_int_equal(tg_device_wait(s1, e0), TG_OK);
    assert_int_equal(tg_device_copy_async(s1, b, s0, a, sizeof *a), TG_OK);
    assert_int_equal(tg_device_record(s1, e1), TG_OK);
    tg_event_synchronize(e1);
    assert_true(now_s() - t0 >= 2 * lat);
    assert_int_equal(tg_device_copy(NULL, &out, s1, b, sizeof out), TG_OK);
    assert_int_equal(out, 7);

    /* an event never recorded does not block; waiting on it costs nothing */
    tg_event *never = tg_event_new();
    tg_event_synchronize(never);
    assert_int_equal(tg_device_wait(s0, never), TG_OK);
    assert_int_equal(tg_device_synchronize(s0), TG_OK);
    tg_event_free(never);
    tg_event_free(e0);
    tg_event_free(e1);
    tg_device_free(s0, a, sizeof *a);
    tg_device_free(s1, b, sizeof *b);
}

/* A forked child reads sim memory directly: it must die before it can exit 0. */
static bool host_read_faults(const volatile char *p) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        char c = *p;
        _exit(c == 0 ? 0 : 3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_host_read_detected(void **state) {
    (void)state;
    clear_env();
    setenv("TGRAPH_SIM_LATENCY_US", "0", 1);
    setenv("TGRAPH_SIM_PROTECT", "1", 1);
    assert_int_equal(tg_device_configure(0, 1), TG_OK);
    tg_device *d = tg_device_find("sim:0");
    tg_buffer *buf = tg_device_buffer_new(d, 100);
    assert_true(host_read_faults(buf->data));
    char zero[100] = {0};
    assert_int_equal(tg_device_copy(d, buf->data, NULL, zero, sizeof zero), TG_OK);
    assert_true(host_read_faults(buf->data)); /* closed again after the copy */
    tg_buffer_unref(buf);

    /* unprotected, the same read succeeds: the child's fault above was the protection */
    setenv("TGRAPH_SIM_PROTECT", "0", 1);
    assert_int_equal(tg_device_configure(0, 1), TG_OK);
    buf = tg_device_buffer_new(tg_device_find("sim:0"), 100);
    assert_false(host_read_faults(buf->data));
    tg_buffer_unref(buf);
}

typedef struct thread_log {
    pthread_t ids[64];
    atomic_int nth;
} thread_log;

static void log_thread(void *arg, int ith, int nth) {
    thread_log *l = arg;
    l->ids[ith] = pthread_self();
    atomic_store(&l->nth, nth);
}

static void pool_task(void *arg, tg_device *d) { tg_pool_run(d->pool, log_thread, arg); }

static void test_host_shares(void **state) {
    (void)state;
    clear_env();
    int threads = tg_pool_default_threads();
    for (int host = 1; host <= 5; host++) {
        assert_int_equal(tg_device_configure(host, 0), TG_OK);
        int total = threads > host ? threads : host, next = 0;
        thread_log logs[5];
        memset(logs, 0, sizeof logs);
        for (int k = 0; k < host; k++) {
            char name[16];
            snprintf(name, sizeof name, "cpu:%d", k);
            tg_device *d = tg_device_find(name);
            /* the shares tile [0, total) in order, at least one thread each */
            assert_int_equal(d->first_thread, next);
            assert_true(d->nthreads >= 1);
            assert_int_equal(tg_pool_size(d->pool), d->nthreads);
            next += d->nthreads;
            assert_int_equal(tg_device_submit(d, pool_task, &logs[k]), TG_OK);
        }
        assert_int_equal(next, total);
        for (int k = 0; k < host; k++) {
            char name[16];
            snprintf(name, sizeof name, "cpu:%d", k);
            assert_int_equal(tg_device_synchronize(tg_device_find(name)), TG_OK);
        }
        /* and the threads that ran the tasks are disjoint between devices */
        for (int k = 0; k < host; k++)
            for (int i = 0; i < atomic_load(&logs[k].nth); i++)
                for (int l = k + 1; l < host; l++)
                    for (int j = 0; j < atomic_load(&logs[l].nth); j++)
                        assert_false(pthread_equal(logs[k].ids[i], logs[l].ids[j]));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_default_is_cpu, teardown),
        cmocka_unit_test_teardown(test_names, teardown),
        cmocka_unit_test_teardown(test_env, teardown),
        cmocka_unit_test_teardown(test_memory, teardown),
        cmocka_unit_test_teardown(test_sim_pacing, teardown),
        cmocka_unit_test_teardown(test_queue_order, teardown),
        cmocka_unit_test_teardown(test_events, teardown),
        cmocka_unit_test_teardown(test_host_read_detected, teardown),
        cmocka_unit_test_teardown(test_host_shares, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
