/* test_memcap.c - the per-context memory cap (tg_ctx_set_mem_limit) and its accounting.
 *
 * A context counts the bytes it has live and its peak; with a limit, an allocation that
 * would pass it fails with TG_ENOMEM and a message naming the cap, whatever asks for it:
 * a tensor, the parser, the compiler, or a run with either backend. The count returns to
 * zero when everything is freed (so every free passes the size it allocated), also when
 * several threads share the context. The default context refuses a cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tgraph.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_default_ctx_has_no_cap(void **state) {
    (void)state;
    assert_int_equal(tg_ctx_set_mem_limit(tg_ctx_default(), 1024), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "default context"));
    assert_int_equal(tg_ctx_set_mem_limit(NULL, 1024), TG_EINVAL);
    assert_int_equal(tg_ctx_mem_used(tg_ctx_default()), 0);
}

static void test_accounting(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new(NULL, NULL);
    assert_non_null(ctx);
    assert_int_equal(tg_ctx_mem_used(ctx), 0);
    tg_tensor *t = tg_tensor_new(ctx, TG_DT_F64, 2, (int64_t[]){100, 10});
    assert_non_null(t);
    size_t used = tg_ctx_mem_used(ctx);
    assert_true(used >= 8000);
    tg_tensor *v = tg_tensor_view(t, 1, (int64_t[]){10}, (int64_t[]){1}, 0);
    assert_non_null(v);
    assert_true(tg_ctx_mem_used(ctx) > used);
    tg_tensor_free(t);
    assert_true(tg_ctx_mem_used(ctx) >= 8000); /* the view keeps the buffer */
    tg_tensor_free(v);
    assert_int_equal(tg_ctx_mem_used(ctx), 0);
    assert_true(tg_ctx_mem_peak(ctx) >= used);
    tg_ctx_free(ctx);
}

static void test_tensor_over_cap(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new(NULL, NULL);
    assert_int_equal(tg_ctx_set_mem_limit(ctx, 1 << 20), TG_OK);
    tg_tensor *small = tg_tensor_new(ctx, TG_DT_F32, 1, (int64_t[]){1000});
    assert_non_null(small);
    tg_tensor *big = tg_tensor_new(ctx, TG_DT_F32, 1, (int64_t[]){1 << 20});
    assert_null(big);
    assert_non_null(strstr(tg_last_error(), "memory limit of 1048576 bytes reached"));
    /* an absurd size is refused by the cap before anything asks the system */
    tg_tensor *absurd = tg_tensor_new(ctx, TG_DT_F64, 2, (int64_t[]){1 << 30, 1 << 30});
    assert_null(absurd);
    tg_tensor_free(small);
    assert_int_equal(tg_ctx_mem_used(ctx), 0);
    /* raising the cap (or removing it) lets the same request through */
    assert_int_equal(tg_ctx_set_mem_limit(ctx, 8 << 20), TG_OK);
    big = tg_tensor_new(ctx, TG_DT_F32, 1, (int64_t[]){1 << 20});
    assert_non_null(big);
    tg_tensor_free(big);
    assert_int_equal(tg_ctx_set_mem_limit(ctx, 0), TG_OK);
    assert_int_equal(tg_ctx_mem_used(ctx), 0);
    tg_ctx_free(ctx);
}

static const char big_src[] = "func main(x: f64[3]) {\n"
                              "  big = ones(shape=[2048, 2048], dtype=\"f64\")\n"
                              "  return add(sum(big), sum(x))\n"
                              "}\n";

/* Runs big_src under `limit` in `mode`; the status of the call. */
static tg_status run_capped(size_t limit, tg_mode mode, double *result) {
    tg_ctx *ctx = tg_ctx_new(NULL, NULL);
    assert_int_equal(tg_ctx_set_mem_limit(ctx, limit), TG_OK);
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(ctx, big_src, sizeof big_src - 1, "big.tg", &m), TG_OK);
    tg_fn *f = NULL;
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = 1);
    assert_int_equal(tg_graph_compile(tg_module_func(m, 0), &o, &f), TG_OK);
    tg_tensor *x = tg_tensor_new(ctx, TG_DT_F64, 1, (int64_t[]){3}), *y = NULL;
    assert_non_null(x);
    tg_status st = tg_fn_call(f, &x, 1, &y, 1);
    if (st == TG_OK)
        *result = tg_tensor_get_f64(y, 0);
    else
        assert_non_null(strstr(tg_last_error(), "memory limit"));
    tg_tensor_free(y);
    tg_tensor_free(x);
    tg_fn_free(f);
    tg_module_free(m);
    assert_int_equal(tg_ctx_mem_used(ctx), 0);
    tg_ctx_free(ctx);
    return st;
}

static void test_run_over_cap(void **state) {
    (void)state;
    double r = 0;
    /* 2048 x 2048 f64 is 32 MiB */
    assert_int_equal(run_capped(8 << 20, TG_MODE_VM, &r), TG_ENOMEM);
    assert_int_equal(run_capped(8 << 20, TG_MODE_REFERENCE, &r), TG_ENOMEM);
    assert_int_equal(run_capped(256 << 20, TG_MODE_VM, &r), TG_OK);
    assert_true(r == 2048.0 * 2048.0);
    assert_int_equal(run_capped(256 << 20, TG_MODE_REFERENCE, &r), TG_OK);
    assert_true(r == 2048.0 * 2048.0);
}

static void test_parse_over_cap(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new(NULL, NULL);
    assert_int_equal(tg_ctx_set_mem_limit(ctx, 256), TG_OK);
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(ctx, big_src, sizeof big_src - 1, "big.tg", &m), TG_ENOMEM);
    assert_null(m);
    assert_non_null(strstr(tg_last_error(), "memory limit"));
    assert_int_equal(tg_ctx_mem_used(ctx), 0);
    tg_ctx_free(ctx);
}

static void *churn(void *arg) {
    tg_ctx *ctx = arg;
    for (int i = 0; i < 2000; i++) {
        tg_tensor *t = tg_tensor_new(ctx, TG_DT_I32, 1, (int64_t[]){1 + i % 50});
        tg_tensor_free(t); /* NULL (over the cap) is fine too */
    }
    return NULL;
}

static void test_shared_between_threads(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new(NULL, NULL);
    assert_int_equal(tg_ctx_set_mem_limit(ctx, 4096), TG_OK);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, churn, ctx), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    assert_int_equal(tg_ctx_mem_used(ctx), 0);
    assert_true(tg_ctx_mem_peak(ctx) <= 4096);
    tg_ctx_free(ctx);
}

/* Writes n bytes of `fill` after `head` (hlen bytes) to a fresh temporary file. */
static void make_file(char *path, const void *head, size_t hlen, char fill, size_t n) {
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(head, 1, hlen, f), hlen);
    char buf[4096];
    memset(buf, fill, sizeof buf);
    for (size_t done = 0; done < n; done += sizeof buf)
        assert_true(fwrite(buf, 1, n - done < sizeof buf ? n - done : sizeof buf, f) > 0);
    assert_int_equal(fclose(f), 0);
}

/* What the library reads from files counts against the cap too: a .tg text or a .npy
 * file larger than the cap fails before it is read, with a message naming the file and
 * the cap; a pipe is read no further than the cap (the text) or than its header promises
 * (.npy); an endless device (/dev/zero) fails at once. Nothing stays allocated. */
static void test_files_over_cap(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new(NULL, NULL);
    assert_int_equal(tg_ctx_set_mem_limit(ctx, 1 << 20), TG_OK);
    char tg_path[] = "/tmp/tg_memcap_XXXXXX";
    make_file(tg_path, "# ", 2, '#', 4 << 20); /* a 4 MiB comment */
    tg_module *m = NULL;
    assert_int_equal(tg_module_load(ctx, tg_path, &m), TG_ENOMEM);
    assert_null(m);
    assert_non_null(strstr(tg_last_error(), tg_path));
    assert_non_null(strstr(tg_last_error(), "memory limit of 1048576 bytes reached"));
    assert_true(tg_ctx_mem_peak(ctx) < (1 << 20));
    /* the same text through a pipe: read in chunks, stopped at the cap */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cat %s", tg_path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_int_equal(tg_module_read(ctx, p, "piped.tg", &m), TG_ENOMEM);
    assert_non_null(strstr(tg_last_error(), "cannot read 'piped.tg'"));
    assert_non_null(strstr(tg_last_error(), "memory limit of 1048576 bytes reached"));
    pclose(p);
    unlink(tg_path);

    /* a 4 MiB .npy: f32[1048576] */
    static const char hdr[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (1048576,), }";
    unsigned char head[128];
    memset(head, ' ', sizeof head);
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = 128 - 10;
    head[9] = 0;
    memcpy(head + 10, hdr, sizeof hdr - 1);
    head[127] = '\n';
    char npy_path[] = "/tmp/tg_memcap_XXXXXX";
    make_file(npy_path, head, sizeof head, 0, 4 << 20);
    tg_tensor *t = NULL;
    assert_int_equal(tg_npy_load(ctx, npy_path, &t), TG_ENOMEM);
    assert_null(t);
    assert_non_null(strstr(tg_last_error(), npy_path));
    assert_non_null(strstr(tg_last_error(), "memory limit of 1048576 bytes reached"));
    /* through a pipe: the cap is checked when the header is read, before the data */
    snprintf(cmd, sizeof cmd, "cat %s", npy_path);
    p = popen(cmd, "r");
    assert_non_null(p);
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/dev/fd/%d", fileno(p));
    assert_int_equal(tg_npy_load(ctx, fdpath, &t), TG_ENOMEM);
    assert_non_null(strstr(tg_last_error(), "memory limit of 1048576 bytes reached"));
    pclose(p);
    unlink(npy_path);

    /* endless devices */
    assert_int_equal(tg_npy_load(ctx, "/dev/zero", &t), TG_EFORMAT);
    assert_non_null(strstr(tg_last_error(), "/dev/zero: not a .npy file"));
    assert_int_equal(tg_module_load(ctx, "/dev/zero", &m), TG_ESYNTAX);
    assert_non_null(strstr(tg_last_error(), "/dev/zero:1:1: unexpected character byte 0x00"));
    assert_int_equal(tg_npy_load(NULL, "/dev/zero", &t), TG_EFORMAT); /* no cap either */
    assert_int_equal(tg_module_load(NULL, "/dev/zero", &m), TG_ESYNTAX);
    assert_int_equal(tg_ctx_mem_used(ctx), 0);
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_ctx_has_no_cap), cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_tensor_over_cap),        cmocka_unit_test(test_run_over_cap),
        cmocka_unit_test(test_parse_over_cap),         cmocka_unit_test(test_files_over_cap),
        cmocka_unit_test(test_shared_between_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
