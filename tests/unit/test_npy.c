/* test_npy.c - .npy reading and writing: round trips of every dtype and ranks 0..4, files
 * written by NumPy (tests/data/npy, made by make_npy.py: big-endian, Fortran order,
 * versions 2.0 and 3.0, 0-d, empty), byte-identical output to np.save, streams, and a
 * table of hostile headers that must each give the expected status through both the
 * memory and the file reader, without crashing or allocating what the header claims.
 * Runs with tests/ as the working directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DATA "data/npy/"

/* ---- helpers ---- */

typedef struct tmpfile_name {
    char path[64];
} tmpfile_name;

static tmpfile_name tmp_path(void) {
    tmpfile_name t;
    strcpy(t.path, "/tmp/tg_test_npy_XXXXXX");
    int fd = mkstemp(t.path);
    assert_true(fd >= 0);
    close(fd);
    return t;
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    *len = n;
    return buf;
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static tg_tensor *load_ok(const char *path) {
    tg_tensor *t = NULL;
    tg_status st = tg_npy_load(NULL, path, &t);
    if (st != TG_OK) fail_msg("loading %s: %s", path, tg_last_error());
    assert_non_null(t);
    assert_true(tg_tensor_is_contiguous(t));
    return t;
}

static void check_shape(const tg_tensor *t, tg_dtype dt, int ndim, const int64_t *shape) {
    assert_int_equal(tg_tensor_dtype(t), dt);
    assert_int_equal(tg_tensor_ndim(t), ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(tg_tensor_shape(t)[i], shape[i]);
}

static void check_values(const tg_tensor *t, const double *v, int64_t n) {
    assert_int_equal(tg_tensor_size(t), n);
    for (int64_t i = 0; i < n; i++) {
        double got = tg_tensor_get_f64(t, i);
        if (isnan(v[i]))
            assert_true(isnan(got));
        else if (got != v[i])
            fail_msg("element %lld: got %.17g, want %.17g", (long long)i, got, v[i]);
    }
}

/* ---- round trips ---- */

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 11;
}

static void test_round_trip(void **state) {
    (void)state;
    static const int64_t dims[4] = {2, 3, 1, 4};
    uint64_t seed = 42;
    tmpfile_name tp = tmp_path();
    for (int dt = 0; dt < TG_DT_COUNT; dt++) {
        for (int nd = 0; nd <= 4; nd++) {
            tg_tensor *t = tg_tensor_new(NULL, (tg_dtype)dt, nd, dims);
            assert_non_null(t);
            int64_t n = tg_tensor_size(t);
            size_t isz = tg_dtype_size((tg_dtype)dt);
            for (int64_t i = 0; i < n; i++) {
                char *p = (char *)tg_tensor_data(t) + i * (int64_t)isz;
                if (tg_dtype_is_float((tg_dtype)dt))
                    tg_store_f64(p, (tg_dtype)dt, ((double)(lcg(&seed) % 20001) - 10000) / 7.0);
                else
                    tg_store_i64(p, (tg_dtype)dt, (int64_t)lcg(&seed));
            }
            assert_int_equal(tg_npy_save(tp.path, t), TG_OK);
            /* Data starts at a multiple of 64, header ends in '\n'. */
            size_t len;
            unsigned char *raw = read_all(tp.path, &len);
            size_t hl = (size_t)raw[8] | (size_t)raw[9] << 8;
            assert_int_equal((10 + hl) % 64, 0);
            assert_int_equal(raw[10 + hl - 1], '\n');
            assert_int_equal(len, 10 + hl + (size_t)n * isz);
            free(raw);
            tg_tensor *u = load_ok(tp.path);
            check_shape(u, (tg_dtype)dt, nd, dims);
            assert_memory_equal(tg_tensor_data(u), tg_tensor_data(t), (size_t)n * isz);
            tg_tensor_free(u);
            tg_tensor_free(t);
        }
    }
    unlink(tp.path);
}

static void test_save_strided(void **state) {
    (void)state;
    int64_t s34[2] = {3, 4}, s43[2] = {4, 3}, tst[2] = {1, 4};
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_I16, 2, s34);
    for (int i = 0; i < 12; i++) ((int16_t *)tg_tensor_data(t))[i] = (int16_t)(i * 100 - 500);
    tg_tensor *tr = tg_tensor_view(t, 2, s43, tst, 0);
    tmpfile_name tp = tmp_path();
    assert_int_equal(tg_npy_save(tp.path, tr), TG_OK);
    tg_tensor *u = load_ok(tp.path);
    check_shape(u, TG_DT_I16, 2, s43);
    for (int64_t i = 0; i < 12; i++)
        assert_true(tg_tensor_get_f64(u, i) == tg_tensor_get_f64(tr, i));
    tg_tensor_free(u);
    /* Negative strides and a bool view whose bytes are not 0/1. */
    int64_t s4[1] = {4}, rs[1] = {-1};
    tg_tensor *b = tg_tensor_new(NULL, TG_DT_BOOL, 1, s4);
    unsigned char *bp = tg_tensor_data(b);
    bp[0] = 0;
    bp[1] = 7;
    bp[2] = 1;
    bp[3] = 0;
    tg_tensor *rb = tg_tensor_view(b, 1, s4, rs, 3);
    assert_int_equal(tg_npy_save(tp.path, rb), TG_OK);
    u = load_ok(tp.path);
    const unsigned char *up = tg_tensor_data(u);
    assert_int_equal(up[0], 0);
    assert_int_equal(up[1], 1);
    assert_int_equal(up[2], 1);
    assert_int_equal(up[3], 0);
    tg_tensor_free(u);
    tg_tensor_free(rb);
    tg_tensor_free(b);
    tg_tensor_free(tr);
    tg_tensor_free(t);
    unlink(tp.path);
}

static void test_save_errors(void **state) {
    (void)state;
    int64_t s1[1] = {1};
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F32, 1, s1);
    assert_int_equal(tg_npy_save("/nonexistent-dir/x.npy", t), TG_EIO);
    assert_non_null(strstr(tg_last_error(), "/nonexistent-dir/x.npy"));
    assert_int_equal(tg_npy_save(NULL, t), TG_EINVAL);
    assert_int_equal(tg_npy_save("/tmp/x.npy", NULL), TG_EINVAL);
    tg_tensor_free(t);
}

/* Files np.save wrote (C order, little-endian) come back byte for byte. */
static void test_same_bytes_as_numpy(void **state) {
    (void)state;
    static const char *const files[] = {
        DATA "f32_2x3.npy",     DATA "f64_le.npy",
        DATA "i8.npy",          DATA "u8.npy",
        DATA "i64_3.npy",       DATA "bool_5.npy",
        DATA "scalar_f64.npy",  DATA "scalar_bool.npy",
        DATA "empty_f32_0.npy", DATA "empty_i64_2x0x3.npy",
    };
    tmpfile_name tp = tmp_path();
    for (size_t i = 0; i < TG_COUNTOF(files); i++) {
        tg_tensor *t = load_ok(files[i]);
        assert_int_equal(tg_npy_save(tp.path, t), TG_OK);
        size_t la, lb;
        unsigned char *a = read_all(files[i], &la), *b = read_all(tp.path, &lb);
        if (la != lb || memcmp(a, b, la) != 0) fail_msg("%s: saved bytes differ", files[i]);
        free(a);
        free(b);
        tg_tensor_free(t);
    }
    unlink(tp.path);
}

/* ---- files written by NumPy ---- */

static void test_numpy_files(void **state) {
    (void)state;
    tg_tensor *t;
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s3[1] = {3}, s5[1] = {5}, s22[2] = {2, 2};
    int64_t s34[2] = {3, 4}, s234[3] = {2, 3, 4}, s0[1] = {0}, s203[3] = {2, 0, 3};

    t = load_ok(DATA "f32_2x3.npy");
    check_shape(t, TG_DT_F32, 2, s23);
    check_values(t, (double[]){-1, -0.5, 0, 0.5, 1, 1.5}, 6);
    tg_tensor_free(t);

    const double f64v[4] = {1.5, -2.25, 1e300, -0.0};
    t = load_ok(DATA "f64_le.npy");
    check_shape(t, TG_DT_F64, 1, s4);
    check_values(t, f64v, 4);
    tg_tensor_free(t);
    t = load_ok(DATA "f64_be.npy");
    check_shape(t, TG_DT_F64, 1, s4);
    check_values(t, f64v, 4);
    assert_true(signbit(tg_tensor_get_f64(t, 3)));
    tg_tensor_free(t);

    t = load_ok(DATA "f32_be.npy");
    check_shape(t, TG_DT_F32, 1, s3);
    check_values(t, (double[]){(double)0.1f, -3.5, INFINITY}, 3);
    tg_tensor_free(t);

    t = load_ok(DATA "i16_be_2x2.npy");
    check_shape(t, TG_DT_I16, 2, s22);
    check_values(t, (double[]){1, -2, 300, -32768}, 4);
    tg_tensor_free(t);

    t = load_ok(DATA "i32_be.npy");
    check_shape(t, TG_DT_I32, 1, s4);
    check_values(t, (double[]){1, -1, 2147483647.0, -2147483648.0}, 4);
    tg_tensor_free(t);

    t = load_ok(DATA "i64_be.npy");
    check_shape(t, TG_DT_I64, 1, s4);
    const int64_t *p64 = tg_tensor_data(t);
    assert_true(p64[0] == 1 && p64[1] == -1 && p64[2] == INT64_MAX && p64[3] == INT64_MIN);
    tg_tensor_free(t);

    t = load_ok(DATA "i8.npy");
    check_shape(t, TG_DT_I8, 1, s4);
    check_values(t, (double[]){-128, -1, 0, 127}, 4);
    tg_tensor_free(t);

    t = load_ok(DATA "u8.npy");
    check_shape(t, TG_DT_U8, 1, s4);
    check_values(t, (double[]){0, 1, 200, 255}, 4);
    tg_tensor_free(t);

    t = load_ok(DATA "i64_3.npy");
    check_shape(t, TG_DT_I64, 1, s3);
    check_values(t, (double[]){10, -20, 30}, 3);
    tg_tensor_free(t);

    t = load_ok(DATA "bool_5.npy");
    check_shape(t, TG_DT_BOOL, 1, s5);
    check_values(t, (double[]){1, 0, 1, 1, 0}, 5);
    tg_tensor_free(t);

    /* Fortran order comes back C-contiguous with the right values. */
    t = load_ok(DATA "f64_fortran_3x4.npy");
    check_shape(t, TG_DT_F64, 2, s34);
    double v12[12];
    for (int i = 0; i < 12; i++) v12[i] = i;
    check_values(t, v12, 12);
    tg_tensor_free(t);

    t = load_ok(DATA "i32_fortran_2x3x4.npy");
    check_shape(t, TG_DT_I32, 3, s234);
    double v24[24];
    for (int i = 0; i < 24; i++) v24[i] = i;
    check_values(t, v24, 24);
    tg_tensor_free(t);

    t = load_ok(DATA "f32_be_fortran_2x3.npy");
    check_shape(t, TG_DT_F32, 2, s23);
    check_values(t, (double[]){0, 1, 2, 3, 4, 5}, 6);
    tg_tensor_free(t);

    t = load_ok(DATA "v2_f64_2x2.npy");
    check_shape(t, TG_DT_F64, 2, s22);
    check_values(t, (double[]){1, 2, 3, 4}, 4);
    tg_tensor_free(t);

    t = load_ok(DATA "v3_i8_3.npy");
    check_shape(t, TG_DT_I8, 1, s3);
    check_values(t, (double[]){1, 2, 3}, 3);
    tg_tensor_free(t);

    t = load_ok(DATA "scalar_f64.npy");
    check_shape(t, TG_DT_F64, 0, NULL);
    check_values(t, (double[]){2.5}, 1);
    tg_tensor_free(t);

    t = load_ok(DATA "scalar_bool.npy");
    check_shape(t, TG_DT_BOOL, 0, NULL);
    check_values(t, (double[]){1}, 1);
    tg_tensor_free(t);

    t = load_ok(DATA "empty_f32_0.npy");
    check_shape(t, TG_DT_F32, 1, s0);
    assert_int_equal(tg_tensor_size(t), 0);
    tg_tensor_free(t);

    t = load_ok(DATA "empty_i64_2x0x3.npy");
    check_shape(t, TG_DT_I64, 3, s203);
    assert_int_equal(tg_tensor_size(t), 0);
    tg_tensor_free(t);
}

static void test_load_errors(void **state) {
    (void)state;
    tg_tensor *t = (tg_tensor *)&t; /* must be reset to NULL */
    assert_int_equal(tg_npy_load(NULL, DATA "c16.npy", &t), TG_EUNSUPPORTED);
    assert_null(t);
    assert_non_null(strstr(tg_last_error(), "c16.npy"));
    assert_non_null(strstr(tg_last_error(), "'<c16'"));
    assert_int_equal(tg_npy_load(NULL, DATA "u4.npy", &t), TG_EUNSUPPORTED);
    assert_non_null(strstr(tg_last_error(), "'<u4'"));
    assert_int_equal(tg_npy_load(NULL, DATA "no-such-file.npy", &t), TG_EIO);
    assert_non_null(strstr(tg_last_error(), "no-such-file.npy"));
    assert_int_equal(tg_npy_load(NULL, DATA, &t), TG_EIO); /* a directory */
    assert_int_equal(tg_npy_load(NULL, NULL, &t), TG_EINVAL);
    assert_int_equal(tg_npy_load(NULL, DATA "i8.npy", NULL), TG_EINVAL);
    assert_int_equal(tg_npy_load_mem(NULL, NULL, 10, &t), TG_EINVAL);
    assert_int_equal(tg_npy_load_mem(NULL, NULL, 0, &t), TG_EFORMAT);
    assert_non_null(strstr(tg_last_error(), "<memory>"));
}

/* A pipe is not a regular file: the reader takes the whole stream, then parses it. */
static void test_load_fifo(void **state) {
    (void)state;
    size_t len;
    unsigned char *bytes = read_all(DATA "f64_fortran_3x4.npy", &len);
    tmpfile_name tp = tmp_path();
    unlink(tp.path);
    assert_int_equal(mkfifo(tp.path, 0600), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *f = fopen(tp.path, "wb");
        if (f) {
            fwrite(bytes, 1, len, f);
            fclose(f);
        }
        _exit(0);
    }
    tg_tensor *t = NULL;
    tg_status st = tg_npy_load(NULL, tp.path, &t);
    int wst;
    waitpid(pid, &wst, 0);
    unlink(tp.path);
    free(bytes);
    assert_int_equal(st, TG_OK);
    double v12[12];
    for (int i = 0; i < 12; i++) v12[i] = i;
    check_values(t, v12, 12);
    tg_tensor_free(t);
}

/* ---- hostile headers ---- */

typedef struct hcase {
    const char *what;   /* description */
    int major;          /* format version (0: use 1) */
    const char *header; /* dict text (padded with spaces and '\n' by the builder) */
    long data;          /* data bytes after the header */
    tg_status expect;   /* status */
} hcase;

/* Builds a .npy image: magic, version, length, header, padding, `data` bytes of 0x11. */
static unsigned char *build_npy(int major, const char *header, size_t hdr_len, long data,
                                size_t *len) {
    size_t pre = major == 1 ? 10 : 12, hl = hdr_len + 1;
    while ((pre + hl) % 64) hl++;
    *len = pre + hl + (size_t)data;
    unsigned char *p = malloc(*len);
    memcpy(p, "\x93NUMPY", 6);
    p[6] = (unsigned char)major;
    p[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) p[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(p + pre, header, hdr_len);
    memset(p + pre + hdr_len, ' ', hl - hdr_len - 1);
    p[pre + hl - 1] = '\n';
    memset(p + pre + hl, 0x11, (size_t)data);
    return p;
}

static void expect_both(const char *what, const unsigned char *p, size_t len, tg_status expect) {
    tg_tensor *t = (tg_tensor *)&t;
    tg_status st = tg_npy_load_mem(NULL, p, len, &t);
    if (st != expect)
        fail_msg("%s (memory): got %s (%s), want %s", what, tg_status_str(st), tg_last_error(),
                 tg_status_str(expect));
    if (st != TG_OK) {
        assert_null(t);
        if (strncmp(tg_last_error(), "<memory>: ", 10) != 0)
            fail_msg("%s: message does not name the source: %s", what, tg_last_error());
    } else {
        tg_tensor_free(t);
    }
    tmpfile_name tp = tmp_path();
    write_all(tp.path, p, len);
    t = (tg_tensor *)&t;
    st = tg_npy_load(NULL, tp.path, &t);
    if (st != expect)
        fail_msg("%s (file): got %s (%s), want %s", what, tg_status_str(st), tg_last_error(),
                 tg_status_str(expect));
    if (st != TG_OK) {
        assert_null(t);
        assert_non_null(strstr(tg_last_error(), tp.path));
    } else {
        tg_tensor_free(t);
    }
    unlink(tp.path);
}

static void test_hostile_headers(void **state) {
    (void)state;
    const char *ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    static const hcase cases[] = {
        {"valid", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, TG_OK},
        {"keys in another order, double quotes, no trailing comma", 1,
         "{\"shape\": (2,3), \"fortran_order\": True, \"descr\": \"<f4\"}", 24, TG_OK},
        {"spaces everywhere", 2,
         "{ 'descr' : '<i2' , 'fortran_order' : False , 'shape' : ( 3 , ) , }", 6, TG_OK},
        {"python 2 long extents", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", 24, TG_OK},
        {"empty tuple", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (), }", 1, TG_OK},
        {"zero extent with a large one", 1,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 100000000000), }", 0, TG_OK},
        {"zero extent with overflowing ones", 1,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 9223372036854775807, 2), }", 0,
         TG_EFORMAT},
        {"8 dims", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,2), }", 2,
         TG_OK},
        {"9 dims", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 1,
         TG_EUNSUPPORTED},
        {"negative extent", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 0,
         TG_EFORMAT},
        {"negative extent among others", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 0, TG_EFORMAT},
        {"size overflows int64", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0,
         TG_EFORMAT},
        {"bytes overflow", 1,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", 0,
         TG_EFORMAT},
        {"extent beyond int64", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0,
         TG_EFORMAT},
        {"huge claim, tiny file", 1,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", 8, TG_EFORMAT},
        {"one extent without comma", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }",
         12, TG_EFORMAT},
        {"shape not a tuple", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': 3, }", 12,
         TG_EFORMAT},
        {"shape a list", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [3], }", 12,
         TG_EFORMAT},
        {"lone comma", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (,), }", 0,
         TG_EFORMAT},
        {"missing comma between extents", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 24, TG_EFORMAT},
        {"missing key", 1, "{'descr': '<f4', 'shape': (2, 3), }", 24, TG_EFORMAT},
        {"empty dict", 1, "{}", 0, TG_EFORMAT},
        {"extra key", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1, }", 24,
         TG_EFORMAT},
        {"duplicate key", 1,
         "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24,
         TG_EFORMAT},
        {"unterminated dict", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", 24,
         TG_EFORMAT},
        {"unterminated tuple", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", 24,
         TG_EFORMAT},
        {"unterminated string", 1, "{'fortran_order': False, 'shape': (2, 3), 'descr': '<f4}", 24,
         TG_EFORMAT},
        {"misquoted string", 1, "{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3), }", 24,
         TG_EUNSUPPORTED},
        {"not a dict", 1, "['descr', '<f4']", 0, TG_EFORMAT},
        {"missing colon", 1, "{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24,
         TG_EFORMAT},
        {"missing comma between items", 1,
         "{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }", 24, TG_EFORMAT},
        {"fortran_order not a bool", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }",
         24, TG_EFORMAT},
        {"fortran_order prefix word", 1,
         "{'descr': '<f4', 'fortran_order': Falsehood, 'shape': (2, 3), }", 24, TG_EFORMAT},
        {"text after the dict", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x",
         24, TG_EFORMAT},
        {"escape in a string", 1, "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3), }",
         24, TG_EFORMAT},
        {"unsupported complex", 1, "{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }", 16,
         TG_EUNSUPPORTED},
        {"unsupported object", 1, "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", 8,
         TG_EUNSUPPORTED},
        {"unsupported half", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }", 2,
         TG_EUNSUPPORTED},
        {"unsupported uint32", 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }", 4,
         TG_EUNSUPPORTED},
        {"structured dtype", 1,
         "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4, TG_EUNSUPPORTED},
        {"descr not a string", 1, "{'descr': 4, 'fortran_order': False, 'shape': (1,), }", 4,
         TG_EFORMAT},
        {"multi-byte type without byte order", 1,
         "{'descr': '|i4', 'fortran_order': False, 'shape': (1,), }", 4, TG_EFORMAT},
        {"data shorter than claimed", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 23, TG_EFORMAT},
        {"no data at all", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0,
         TG_EFORMAT},
        {"trailing garbage", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 25,
         TG_EFORMAT},
        {"data for an empty array", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }",
         4, TG_EFORMAT},
        {"version 2.0 fortran", 2, "{'descr': '>i4', 'fortran_order': True, 'shape': (2, 2), }", 16,
         TG_OK},
        {"version 3.0", 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24,
         TG_OK},
        {"version 4.0", 4, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24,
         TG_EUNSUPPORTED},
    };
    for (size_t i = 0; i < TG_COUNTOF(cases); i++) {
        size_t len;
        unsigned char *p = build_npy(cases[i].major, cases[i].header, strlen(cases[i].header),
                                     cases[i].data, &len);
        expect_both(cases[i].what, p, len, cases[i].expect);
        free(p);
    }

    /* Byte-level damage to a valid image. */
    size_t len;
    unsigned char *good = build_npy(1, ok, strlen(ok), 24, &len);
    unsigned char *p = malloc(len + 8);

    memcpy(p, good, len);
    p[1] = 'X';
    expect_both("bad magic", p, len, TG_EFORMAT);

    expect_both("empty file", good, 0, TG_EFORMAT);
    expect_both("magic only", good, 6, TG_EFORMAT);
    expect_both("truncated in the length", good, 9, TG_EFORMAT);
    expect_both("truncated in the header", good, 40, TG_EFORMAT);

    memcpy(p, good, len);
    p[7] = 1; /* version 1.1 */
    expect_both("minor version", p, len, TG_EUNSUPPORTED);

    memcpy(p, good, len);
    p[8] = 0xff; /* header length 0xff75 > file */
    p[9] = 0xff;
    expect_both("header length past the end", p, len, TG_EFORMAT);

    memcpy(p, good, len);
    p[8] = 0; /* header length 0 */
    p[9] = 0;
    expect_both("header length zero", p, len, TG_EFORMAT);

    memcpy(p, good, len);
    p[20] = '\0'; /* a NUL inside the header */
    expect_both("NUL in the header", p, len, TG_EFORMAT);

    /* Version 2.0 with a 4 GiB header length: refused before reading or allocating it. */
    unsigned char big[16] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xff, 0xff, 0xff, 0xff};
    expect_both("huge header length", big, sizeof big, TG_ELIMIT);
    big[8] = 0x01; /* 0x00100001 bytes: just over 1 MiB */
    big[9] = 0x00;
    big[10] = 0x10;
    big[11] = 0x00;
    expect_both("header over the limit", big, sizeof big, TG_ELIMIT);

    free(p);
    free(good);

    /* A header that uses the version-2 room: 200 KiB of spaces before the newline. */
    size_t hl = strlen(ok);
    char *longh = malloc(200000);
    memcpy(longh, ok, hl);
    memset(longh + hl, ' ', 200000 - hl);
    p = build_npy(2, longh, 200000, 24, &len);
    expect_both("long version 2.0 header", p, len, TG_OK);
    free(p);
    free(longh);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),  cmocka_unit_test(test_save_strided),
        cmocka_unit_test(test_save_errors), cmocka_unit_test(test_same_bytes_as_numpy),
        cmocka_unit_test(test_numpy_files), cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_load_fifo),   cmocka_unit_test(test_hostile_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
