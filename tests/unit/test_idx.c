/* test_idx.c - the IDX reader of the examples (examples/idx.c): good files of every type
 * code, raw and gzipped, byte order; every truncation of a raw and of a gzipped file;
 * bad magic numbers; headers that lie about their sizes (more, fewer, overflowing, more
 * than a gzip stream can hold), checked with a counting allocator to show that nothing
 * of the claimed size is allocated; corrupt gzip data; files that cannot be read; and the
 * Fashion-MNIST files of Debian's dataset-fashion-mnist when they are installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../examples/idx.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* ---- helpers ---- */

/* An allocator that counts live and peak bytes. */
typedef struct counter {
    size_t live, peak;
} counter;

static void *count_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    counter *c = ud;
    if (nsize == 0) {
        if (ptr) c->live -= osize;
        free(ptr);
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (!p) return NULL;
    c->live += nsize - (ptr ? osize : 0);
    if (c->live > c->peak) c->peak = c->live;
    return p;
}

/* An IDX header: type code, ndim, extents. Returns its length. */
static size_t header(unsigned char *p, unsigned code, int ndim, const uint32_t *ext) {
    p[0] = 0, p[1] = 0, p[2] = (unsigned char)code, p[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) {
        p[4 + 4 * i] = (unsigned char)(ext[i] >> 24);
        p[5 + 4 * i] = (unsigned char)(ext[i] >> 16);
        p[6 + 4 * i] = (unsigned char)(ext[i] >> 8);
        p[7 + 4 * i] = (unsigned char)ext[i];
    }
    return 4 + 4 * (size_t)ndim;
}

/* A gzip stream of n bytes; *glen receives its length (caller frees). */
static unsigned char *gzip(const unsigned char *src, size_t n, size_t *glen) {
    z_stream z = {0};
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    unsigned char *out = malloc(cap);
    z.next_in = (Bytef *)(uintptr_t)src;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *glen = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

/* The u8 image file of the tests: 3 images of 4x5, value (i * 7) mod 256. */
static size_t u8_file(unsigned char *buf) {
    size_t h = header(buf, 0x08, 3, (uint32_t[]){3, 4, 5});
    for (int i = 0; i < 60; i++) buf[h + i] = (unsigned char)(i * 7);
    return h + 60;
}

static void check_u8_tensor(const tg_tensor *t) {
    assert_int_equal(tg_tensor_dtype(t), TG_DT_U8);
    assert_int_equal(tg_tensor_ndim(t), 3);
    assert_int_equal(tg_tensor_shape(t)[0], 3);
    assert_int_equal(tg_tensor_shape(t)[1], 4);
    assert_int_equal(tg_tensor_shape(t)[2], 5);
    const unsigned char *d = tg_tensor_data(t);
    for (int i = 0; i < 60; i++) assert_int_equal(d[i], (unsigned char)(i * 7));
}

/* ---- good files ---- */

static void test_good_u8_raw_and_gzip(void **st) {
    (void)st;
    unsigned char buf[256];
    char err[256];
    size_t n = u8_file(buf);
    tg_tensor *t = NULL;
    assert_int_equal(idx_parse(NULL, buf, n, &t, err, sizeof err), TG_OK);
    check_u8_tensor(t);
    tg_tensor_free(t);

    size_t glen;
    unsigned char *gz = gzip(buf, n, &glen);
    t = NULL;
    assert_int_equal(idx_parse(NULL, gz, glen, &t, err, sizeof err), TG_OK);
    check_u8_tensor(t);
    tg_tensor_free(t);
    free(gz);
}

/* Every other type code, with values whose bytes differ (byte order is checked). */
static void test_good_types_byte_order(void **st) {
    (void)st;
    static const struct {
        unsigned code;
        tg_dtype dt;
        size_t size;
    } types[] = {{0x09, TG_DT_I8, 1},
                 {0x0B, TG_DT_I16, 2},
                 {0x0C, TG_DT_I32, 4},
                 {0x0D, TG_DT_F32, 4},
                 {0x0E, TG_DT_F64, 8}};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        unsigned char buf[256];
        size_t h = header(buf, types[k].code, 2, (uint32_t[]){2, 3});
        double want[6] = {-3, 1, 100, -100, 7, 0};
        for (int i = 0; i < 6; i++) {
            unsigned char le[8];
            int64_t iv = (int64_t)want[i];
            float fv = (float)want[i];
            double dv = want[i];
            if (types[k].dt == TG_DT_F32)
                memcpy(le, &fv, 4);
            else if (types[k].dt == TG_DT_F64)
                memcpy(le, &dv, 8);
            else
                for (size_t b = 0; b < 8; b++) le[b] = (unsigned char)((uint64_t)iv >> (8 * b));
            for (size_t b = 0; b < types[k].size; b++) /* big-endian in the file */
                buf[h + i * types[k].size + b] = le[types[k].size - 1 - b];
        }
        size_t n = h + 6 * types[k].size, glen;
        unsigned char *gz = gzip(buf, n, &glen);
        for (int z = 0; z < 2; z++) {
            tg_tensor *t = NULL;
            char err[256];
            assert_int_equal(idx_parse(NULL, z ? gz : buf, z ? glen : n, &t, err, sizeof err),
                             TG_OK);
            assert_int_equal(tg_tensor_dtype(t), types[k].dt);
            assert_int_equal(tg_tensor_ndim(t), 2);
            for (int i = 0; i < 6; i++) assert_true(tg_tensor_get_f64(t, i) == want[i]);
            tg_tensor_free(t);
        }
        free(gz);
    }
}

/* Zero dimensions (a scalar) and a zero extent (an empty tensor). */
static void test_good_scalar_and_empty(void **st) {
    (void)st;
    unsigned char buf[64];
    char err[256];
    size_t h = header(buf, 0x08, 0, NULL);
    buf[h] = 42;
    tg_tensor *t = NULL;
    assert_int_equal(idx_parse(NULL, buf, h + 1, &t, err, sizeof err), TG_OK);
    assert_int_equal(tg_tensor_ndim(t), 0);
    assert_true(tg_tensor_get_f64(t, 0) == 42);
    tg_tensor_free(t);
    h = header(buf, 0x0D, 2, (uint32_t[]){0, 784});
    t = NULL;
    assert_int_equal(idx_parse(NULL, buf, h, &t, err, sizeof err), TG_OK);
    assert_int_equal(tg_tensor_size(t), 0);
    tg_tensor_free(t);
}

/* ---- truncated ---- */

static void test_truncated_raw_every_prefix(void **st) {
    (void)st;
    unsigned char buf[256];
    size_t n = u8_file(buf);
    for (size_t k = 0; k < n; k++) {
        tg_tensor *t = (tg_tensor *)buf; /* must be reset to NULL */
        char err[256];
        tg_status s = idx_parse(NULL, buf, k, &t, err, sizeof err);
        assert_int_equal(s, TG_EFORMAT);
        assert_null(t);
        assert_non_null(strstr(err, "truncated"));
    }
}

static void test_truncated_gzip_every_prefix(void **st) {
    (void)st;
    unsigned char buf[256];
    size_t n = u8_file(buf), glen;
    unsigned char *gz = gzip(buf, n, &glen);
    for (size_t k = 0; k < glen; k++) {
        unsigned char *copy = malloc(k ? k : 1); /* exact size: ASan sees any overread */
        memcpy(copy, gz, k);
        tg_tensor *t = NULL;
        char err[256] = "";
        tg_status s = idx_parse(NULL, copy, k, &t, err, sizeof err);
        assert_int_not_equal(s, TG_OK);
        assert_null(t);
        assert_true(err[0] != '\0');
        free(copy);
    }
    free(gz);
}

/* ---- bad magic ---- */

static void test_bad_magic(void **st) {
    (void)st;
    unsigned char buf[256];
    char err[256];
    tg_tensor *t = NULL;
    size_t n = u8_file(buf);
    buf[0] = 0x50; /* e.g. a PNG or a text file */
    assert_int_equal(idx_parse(NULL, buf, n, &t, err, sizeof err), TG_EFORMAT);
    assert_non_null(strstr(err, "magic"));
    n = u8_file(buf);
    buf[2] = 0x0A; /* no such type code */
    assert_int_equal(idx_parse(NULL, buf, n, &t, err, sizeof err), TG_EFORMAT);
    assert_non_null(strstr(err, "0x0a"));
    n = u8_file(buf);
    buf[3] = 200; /* 200 dimensions */
    assert_int_equal(idx_parse(NULL, buf, n, &t, err, sizeof err), TG_ELIMIT);
    assert_null(t);
    /* an npy file is not an IDX file */
    static const unsigned char npy[] = "\x93NUMPY\x01\x00";
    assert_int_equal(idx_parse(NULL, npy, sizeof npy - 1, &t, err, sizeof err), TG_EFORMAT);
    /* empty buffer, and NULL arguments */
    assert_int_equal(idx_parse(NULL, NULL, 0, &t, err, sizeof err), TG_EFORMAT);
    assert_int_equal(idx_parse(NULL, NULL, 5, &t, err, sizeof err), TG_EINVAL);
    assert_int_equal(idx_parse(NULL, buf, n, NULL, err, sizeof err), TG_EINVAL);
    assert_int_equal(idx_parse(NULL, buf, 2, &t, NULL, 0), TG_EFORMAT); /* no err buffer */
}

/* ---- lying sizes ---- */

static void test_lying_sizes_raw(void **st) {
    (void)st;
    unsigned char buf[256];
    char err[256];
    tg_tensor *t = NULL;
    size_t h = header(buf, 0x08, 3, (uint32_t[]){4, 4, 5}); /* claims 80 bytes, has 60 */
    memset(buf + h, 1, 60);
    assert_int_equal(idx_parse(NULL, buf, h + 60, &t, err, sizeof err), TG_EFORMAT);
    assert_non_null(strstr(err, "truncated"));
    h = header(buf, 0x08, 3, (uint32_t[]){2, 4, 5}); /* claims 40, has 60 */
    assert_int_equal(idx_parse(NULL, buf, h + 60, &t, err, sizeof err), TG_EFORMAT);
    assert_non_null(strstr(err, "20 bytes after"));
    /* extents whose product overflows 64 bits */
    uint32_t big[8];
    for (int i = 0; i < 8; i++) big[i] = 0xFFFFFFFFu;
    h = header(buf, 0x0E, 8, big);
    assert_int_equal(idx_parse(NULL, buf, h + 16, &t, err, sizeof err), TG_ELIMIT);
    assert_null(t);
}

/* A tiny gzip whose header claims 60000x28x28 images (47 MB): refused before any
 * allocation of that size (the counting allocator sees every byte tgraph allocates). */
static void test_lying_sizes_gzip_no_allocation(void **st) {
    (void)st;
    counter c = {0, 0};
    tg_ctx *ctx = tg_ctx_new(count_alloc, &c);
    assert_non_null(ctx);
    unsigned char buf[256];
    char err[256];
    size_t h = header(buf, 0x08, 3, (uint32_t[]){60000, 28, 28}), glen;
    memset(buf + h, 0, 100);
    unsigned char *gz = gzip(buf, h + 100, &glen);
    tg_tensor *t = NULL;
    size_t before = c.peak;
    assert_int_equal(idx_parse(ctx, gz, glen, &t, err, sizeof err), TG_ELIMIT);
    assert_non_null(strstr(err, "more than a gzip stream"));
    assert_null(t);
    assert_true(c.peak - before < 4096);
    free(gz);

    /* a gzip that could hold the claim (20,000 bytes of noise: 7.8 MB claimed), with a
     * trailer that disagrees: also refused before allocating */
    size_t live0 = c.live;
    h = header(buf, 0x08, 3, (uint32_t[]){10000, 28, 28});
    size_t n = h + 20000;
    unsigned char *noise = malloc(n);
    memcpy(noise, buf, h);
    uint32_t s = 12345;
    for (size_t i = h; i < n; i++) noise[i] = (unsigned char)((s = s * 1103515245u + 12345u) >> 24);
    gz = gzip(noise, n, &glen);
    assert_true(glen * 1032 > 10000u * 28 * 28);
    before = c.peak;
    assert_int_equal(idx_parse(ctx, gz, glen, &t, err, sizeof err), TG_EFORMAT);
    assert_non_null(strstr(err, "trailer"));
    assert_true(c.peak - before < 4096);
    assert_int_equal(c.live, live0);

    /* a trailer that lies in agreement with the header: the data runs out (zlib's own
     * length check then fails at the end of the stream) */
    uint32_t claim = (uint32_t)(h + 10000u * 28 * 28);
    unsigned char *liar = malloc(glen);
    memcpy(liar, gz, glen);
    for (int b = 0; b < 4; b++) liar[glen - 4 + b] = (unsigned char)(claim >> (8 * b));
    assert_int_equal(idx_parse(ctx, liar, glen, &t, err, sizeof err), TG_EFORMAT);
    assert_null(t);
    assert_true(strstr(err, "truncated") || strstr(err, "length check"));
    assert_int_equal(c.live, live0); /* the tensor made for it was freed */
    free(liar);
    free(gz);
    free(noise);
    tg_ctx_free(ctx);
}

/* ---- corrupt gzip ---- */

static void test_corrupt_gzip(void **st) {
    (void)st;
    unsigned char buf[4096];
    size_t h = header(buf, 0x08, 2, (uint32_t[]){40, 100});
    for (int i = 0; i < 4000; i++) buf[h + i] = (unsigned char)(i * i % 251);
    size_t n = h + 4000, glen;
    unsigned char *gz = gzip(buf, n, &glen);
    int failures = 0;
    /* flip one bit at many places of the deflate payload and of the CRC */
    for (size_t k = 10; k < glen; k += 3) {
        unsigned char *bad = malloc(glen);
        memcpy(bad, gz, glen);
        bad[k] ^= 0x10;
        tg_tensor *t = NULL;
        char err[256] = "";
        tg_status s = idx_parse(NULL, bad, glen, &t, err, sizeof err);
        if (s == TG_OK) { /* a flip may still decode, but never to the wrong bytes */
            assert_int_equal(tg_tensor_size(t), 4000);
            assert_memory_equal(tg_tensor_data(t), buf + h, 4000);
            tg_tensor_free(t);
        } else {
            assert_null(t);
            assert_true(err[0] != '\0');
            failures++;
        }
        free(bad);
    }
    assert_true(failures > 0);
    /* garbage after the gzip stream */
    unsigned char *more = malloc(glen + 3);
    memcpy(more, gz, glen);
    memcpy(more + glen, "abc", 3);
    tg_tensor *t = NULL;
    char err[256];
    assert_int_equal(idx_parse(NULL, more, glen + 3, &t, err, sizeof err), TG_EFORMAT);
    assert_null(t);
    free(more);
    free(gz);
}

/* ---- files ---- */

static void test_load_files(void **st) {
    (void)st;
    char err[256];
    tg_tensor *t = NULL;
    assert_int_equal(idx_load(NULL, "/nonexistent/train-images-idx3-ubyte.gz", &t, err, sizeof err),
                     TG_EIO);
    assert_non_null(strstr(err, "/nonexistent/train-images-idx3-ubyte.gz"));
    assert_int_equal(idx_load(NULL, "/tmp", &t, err, sizeof err), TG_EIO);

    char path[] = "/tmp/tg_test_idx_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unsigned char buf[256];
    size_t n = u8_file(buf), glen;
    unsigned char *gz = gzip(buf, n, &glen);
    assert_int_equal(write(fd, gz, glen), (ssize_t)glen);
    close(fd);
    assert_int_equal(idx_load(NULL, path, &t, err, sizeof err), TG_OK);
    check_u8_tensor(t);
    tg_tensor_free(t);
    /* the same file cut short: the message starts with the path */
    assert_int_equal(truncate(path, (off_t)(glen - 9)), 0);
    assert_int_not_equal(idx_load(NULL, path, &t, err, sizeof err), TG_OK);
    assert_int_equal(strncmp(err, path, strlen(path)), 0);
    unlink(path);
    free(gz);
}

/* The real files, when dataset-fashion-mnist is installed. */
static void test_fashion_mnist_files(void **st) {
    (void)st;
    const char *dir = "/usr/share/datasets/fashion-mnist/";
    char path[256];
    snprintf(path, sizeof path, "%st10k-labels-idx1-ubyte.gz", dir);
    if (access(path, R_OK) != 0) skip();
    char err[256];
    tg_tensor *t = NULL;
    assert_int_equal(idx_load(NULL, path, &t, err, sizeof err), TG_OK);
    assert_int_equal(tg_tensor_ndim(t), 1);
    assert_int_equal(tg_tensor_shape(t)[0], 10000);
    int counts[10] = {0};
    const unsigned char *y = tg_tensor_data(t);
    for (int i = 0; i < 10000; i++) {
        assert_true(y[i] < 10);
        counts[y[i]]++;
    }
    for (int c = 0; c < 10; c++) assert_int_equal(counts[c], 1000); /* balanced test set */
    tg_tensor_free(t);
    snprintf(path, sizeof path, "%st10k-images-idx3-ubyte.gz", dir);
    assert_int_equal(idx_load(NULL, path, &t, err, sizeof err), TG_OK);
    assert_int_equal(tg_tensor_dtype(t), TG_DT_U8);
    assert_int_equal(tg_tensor_ndim(t), 3);
    assert_int_equal(tg_tensor_shape(t)[0], 10000);
    assert_int_equal(tg_tensor_shape(t)[1], 28);
    assert_int_equal(tg_tensor_shape(t)[2], 28);
    tg_tensor_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_u8_raw_and_gzip),
        cmocka_unit_test(test_good_types_byte_order),
        cmocka_unit_test(test_good_scalar_and_empty),
        cmocka_unit_test(test_truncated_raw_every_prefix),
        cmocka_unit_test(test_truncated_gzip_every_prefix),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_lying_sizes_raw),
        cmocka_unit_test(test_lying_sizes_gzip_no_allocation),
        cmocka_unit_test(test_corrupt_gzip),
        cmocka_unit_test(test_load_files),
        cmocka_unit_test(test_fashion_mnist_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
