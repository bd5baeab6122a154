/* test_core.c - unit tests of src/core: status strings and the last error, contexts and
 * tg_mem_*, arenas, dtypes and element load/store, tensors and views, copies with dtype
 * conversion, NumPy-style printing, and allocation-failure injection (each failing
 * allocation must give TG_ENOMEM and leak nothing; run under ASan to see it).
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

/* ---- a counting allocator that can fail its Nth call ---- */

typedef struct fault {
    long calls;       /* allocation / reallocation requests so far */
    long fail_at;     /* 0: never fail; otherwise the call number that fails */
    long live_blocks; /* blocks currently allocated */
    long live_bytes;  /* their sizes, as reported by tgraph (must balance) */
} fault;

static void *fault_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    fault *f = ud;
    if (nsize == 0) {
        if (ptr) {
            f->live_blocks--;
            f->live_bytes -= (long)osize;
            free(ptr);
        }
        return NULL;
    }
    f->calls++;
    if (f->fail_at && f->calls == f->fail_at) return NULL;
    void *p = realloc(ptr, nsize);
    if (!p) return NULL;
    if (ptr)
        f->live_bytes -= (long)osize;
    else
        f->live_blocks++;
    f->live_bytes += (long)nsize;
    return p;
}

/* ---- status and errors ---- */

static void test_status_strings(void **state) {
    (void)state;
    assert_string_equal(tg_status_str(TG_OK), "ok");
    assert_string_equal(tg_status_str(TG_ENOMEM), "out of memory");
    assert_string_equal(tg_status_str(TG_EFORMAT), "malformed file");
    assert_string_equal(tg_status_str(TG_EINTERNAL), "internal error");
    for (int i = 0; i < TG_STATUS_COUNT; i++) {
        assert_true(strlen(tg_status_str((tg_status)i)) > 0);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(tg_status_str((tg_status)i), tg_status_str((tg_status)j));
    }
    assert_string_equal(tg_status_str((tg_status)TG_STATUS_COUNT), "unknown status");
    assert_string_equal(tg_status_str((tg_status)-1), "unknown status");
}

static void test_last_error(void **state) {
    (void)state;
    assert_int_equal(tg_set_error(TG_ESHAPE, "bad %s %d", "thing", 42), TG_ESHAPE);
    assert_string_equal(tg_last_error(), "bad thing 42");
    /* Adding context to the previous message (arguments alias the buffer). */
    tg_set_error(TG_EIO, "while loading: %s", tg_last_error());
    assert_string_equal(tg_last_error(), "while loading: bad thing 42");
    /* Long messages are truncated, never overflow. */
    char big[3 * TG_ERRMSG_MAX];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tg_set_error(TG_EINVAL, "%s", big);
    assert_int_equal(strlen(tg_last_error()), TG_ERRMSG_MAX - 1);
}

/* ---- memory ---- */

static void test_size_math(void **state) {
    (void)state;
    size_t r = 0;
    assert_true(tg_size_mul(3, 5, &r));
    assert_int_equal(r, 15);
    assert_true(tg_size_mul(0, SIZE_MAX, &r));
    assert_int_equal(r, 0);
    assert_false(tg_size_mul(SIZE_MAX / 2 + 1, 2, &r));
    assert_true(tg_size_add(SIZE_MAX - 1, 1, &r));
    assert_true(r == SIZE_MAX);
    assert_false(tg_size_add(SIZE_MAX, 1, &r));
}

static void test_ctx_and_mem(void **state) {
    (void)state;
    assert_ptr_equal(tg_ctx_default(), tg_ctx_default());
    tg_ctx_free(tg_ctx_default()); /* a no-op */
    tg_ctx *plain = tg_ctx_new(NULL, NULL);
    assert_non_null(plain);
    char *s = tg_mem_strdup(plain, "hello");
    assert_string_equal(s, "hello");
    tg_mem_free(plain, s, 6);
    tg_ctx_free(plain);

    fault f = {0};
    tg_ctx *ctx = tg_ctx_new(fault_alloc, &f);
    assert_non_null(ctx);
    assert_int_equal(f.live_blocks, 1);
    /* Zero-size allocations are valid, distinct pointers, and balance on free. */
    void *a = tg_mem_alloc(ctx, 0), *b = tg_mem_alloc(ctx, 0);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    tg_mem_free(ctx, a, 0);
    tg_mem_free(ctx, b, 0);
    unsigned char *z = tg_mem_calloc(ctx, 100);
    for (int i = 0; i < 100; i++) assert_int_equal(z[i], 0);
    z = tg_mem_realloc(ctx, z, 100, 5000);
    assert_non_null(z);
    for (int i = 0; i < 100; i++) assert_int_equal(z[i], 0);
    tg_mem_free(ctx, z, 5000);
    tg_mem_free(ctx, NULL, 10); /* no-op */
    assert_int_equal(f.live_blocks, 1);
    assert_int_equal(f.live_bytes, (long)sizeof(tg_ctx));
    /* A failing allocation reports TG_ENOMEM with the size. */
    f.fail_at = f.calls + 1;
    tg_set_error(TG_OK, "%s", "");
    assert_null(tg_mem_alloc(ctx, 12345));
    assert_non_null(strstr(tg_last_error(), "12345"));
    assert_non_null(strstr(tg_last_error(), "out of memory"));
    /* A failing realloc leaves the old block owned by the caller. */
    char *p = tg_mem_alloc(ctx, 8);
    memcpy(p, "abcdefg", 8);
    f.fail_at = f.calls + 1;
    assert_null(tg_mem_realloc(ctx, p, 8, 1 << 20));
    assert_string_equal(p, "abcdefg");
    tg_mem_free(ctx, p, 8);
    tg_ctx_free(ctx);
    assert_int_equal(f.live_blocks, 0);
    assert_int_equal(f.live_bytes, 0);
    /* The context itself comes from the allocator, and its failure is reported. */
    fault g = {.fail_at = 1};
    assert_null(tg_ctx_new(fault_alloc, &g));
    assert_non_null(strstr(tg_last_error(), "out of memory"));
    assert_int_equal(g.live_blocks, 0);
}

/* ---- arenas ---- */

static void test_arena(void **state) {
    (void)state;
    fault f = {0};
    tg_ctx *ctx = tg_ctx_new(fault_alloc, &f);
    tg_arena a;
    tg_arena_init(&a, ctx);
    long calls0 = f.calls;
    unsigned char *blocks[2000];
    size_t sizes[2000];
    for (int i = 0; i < 2000; i++) {
        sizes[i] = (size_t)(i % 37) + (i % 5 == 0 ? 0 : 1);
        blocks[i] = tg_arena_alloc(&a, sizes[i]);
        assert_non_null(blocks[i]);
        assert_int_equal((uintptr_t)blocks[i] % 16, 0);
        for (size_t k = 0; k < sizes[i]; k++) assert_int_equal(blocks[i][k], 0);
        memset(blocks[i], i & 0xff, sizes[i]);
    }
    for (int i = 0; i < 2000; i++)
        for (size_t k = 0; k < sizes[i]; k++) assert_int_equal(blocks[i][k], i & 0xff);
    /* ~50 KB in 16-byte steps: geometric chunks make this a handful of allocations. */
    long chunks = f.calls - calls0;
    assert_true(chunks >= 2 && chunks <= 6);
    /* A large request gets its own chunk; the head keeps serving small ones. */
    unsigned char *big = tg_arena_alloc(&a, 1 << 20);
    assert_non_null(big);
    assert_int_equal((uintptr_t)big % 16, 0);
    assert_int_equal(big[0], 0);
    assert_int_equal(big[(1 << 20) - 1], 0);
    long after_big = f.calls;
    assert_non_null(tg_arena_alloc(&a, 16));
    assert_int_equal(f.calls, after_big);
    assert_true(a.total >= (1u << 20) + 2000);
    char *s = tg_arena_strdup(&a, "graph");
    assert_string_equal(s, "graph");
    int32_t v[3] = {1, 2, 3};
    int32_t *w = tg_arena_memdup(&a, v, sizeof v);
    assert_memory_equal(w, v, sizeof v);
    /* Overflowing requests fail cleanly. */
    assert_null(tg_arena_alloc(&a, SIZE_MAX));
    assert_non_null(strstr(tg_last_error(), "out of memory"));
    assert_null(tg_arena_alloc(&a, SIZE_MAX - 8));
    tg_arena_fini(&a);
    assert_int_equal(f.live_blocks, 1);
    /* A fresh arena whose first request is large, then small ones. */
    tg_arena_init(&a, ctx);
    assert_non_null(tg_arena_alloc(&a, 100000));
    assert_non_null(tg_arena_alloc(&a, 8));
    assert_non_null(tg_arena_alloc(&a, 8));
    tg_arena_fini(&a);
    tg_arena_fini(&a); /* idempotent */
    tg_ctx_free(ctx);
    assert_int_equal(f.live_blocks, 0);
    assert_int_equal(f.live_bytes, 0);
}

static void test_arena_oom(void **state) {
    (void)state;
    fault f = {0};
    tg_ctx *ctx = tg_ctx_new(fault_alloc, &f);
    for (long n = 1; n <= 8; n++) {
        tg_arena a;
        tg_arena_init(&a, ctx);
        f.fail_at = f.calls + n;
        int ok = 0;
        for (int i = 0; i < 1000; i++) {
            void *p = tg_arena_alloc(&a, (size_t)64 + (size_t)i * 8);
            if (!p) {
                assert_non_null(strstr(tg_last_error(), "out of memory"));
                break;
            }
            ok++;
        }
        assert_true(ok < 1000);
        f.fail_at = 0;
        tg_arena_fini(&a);
        assert_int_equal(f.live_blocks, 1);
    }
    tg_ctx_free(ctx);
    assert_int_equal(f.live_bytes, 0);
}

/* ---- dtypes, load and store ---- */

static void test_dtypes(void **state) {
    (void)state;
    static const char *const names[] = {"bool", "i8", "i16", "i32", "i64", "u8", "f32", "f64"};
    static const char *const npn[] = {"bool",  "int8",  "int16",   "int32",
                                      "int64", "uint8", "float32", "float64"};
    static const size_t sizes[] = {1, 1, 2, 4, 8, 1, 4, 8};
    for (int i = 0; i < TG_DT_COUNT; i++) {
        tg_dtype dt = (tg_dtype)i, p = TG_DT_BOOL;
        assert_string_equal(tg_dtype_name(dt), names[i]);
        assert_string_equal(tg_dtype_infos[i].numpy, npn[i]);
        assert_int_equal(tg_dtype_size(dt), sizes[i]);
        assert_true(tg_dtype_parse(names[i], &p));
        assert_int_equal(p, dt);
        p = TG_DT_BOOL;
        assert_true(tg_dtype_parse(npn[i], &p));
        assert_int_equal(p, dt);
        assert_int_equal(tg_dtype_is_float(dt), i == TG_DT_F32 || i == TG_DT_F64);
        assert_int_equal(tg_dtype_is_int(dt), i != TG_DT_F32 && i != TG_DT_F64 && i != TG_DT_BOOL);
    }
    tg_dtype p;
    assert_false(tg_dtype_parse("f16", &p));
    assert_false(tg_dtype_parse("", &p));
    assert_false(tg_dtype_parse(NULL, &p));
    assert_false(tg_dtype_parse("F32", &p));
}

static void test_store_wrap(void **state) {
    (void)state;
    unsigned char buf[8];
    tg_store_i64(buf, TG_DT_I8, 300);
    assert_int_equal(tg_load_i64(buf, TG_DT_I8), 44);
    tg_store_i64(buf, TG_DT_I8, -129);
    assert_int_equal(tg_load_i64(buf, TG_DT_I8), 127);
    tg_store_i64(buf, TG_DT_U8, -1);
    assert_int_equal(tg_load_i64(buf, TG_DT_U8), 255);
    tg_store_i64(buf, TG_DT_U8, 256 + 7);
    assert_int_equal(tg_load_i64(buf, TG_DT_U8), 7);
    tg_store_i64(buf, TG_DT_I16, 40000);
    assert_int_equal(tg_load_i64(buf, TG_DT_I16), 40000 - 65536);
    tg_store_i64(buf, TG_DT_I32, INT64_C(2147483648));
    assert_int_equal(tg_load_i64(buf, TG_DT_I32), INT32_MIN);
    tg_store_i64(buf, TG_DT_I32, INT64_MIN);
    assert_int_equal(tg_load_i64(buf, TG_DT_I32), 0);
    tg_store_i64(buf, TG_DT_I64, INT64_MIN);
    assert_true(tg_load_i64(buf, TG_DT_I64) == INT64_MIN);
    tg_store_i64(buf, TG_DT_BOOL, 256);
    assert_int_equal(buf[0], 1);
    tg_store_i64(buf, TG_DT_BOOL, 0);
    assert_int_equal(buf[0], 0);
    tg_store_i64(buf, TG_DT_F32, (INT64_C(1) << 24) + 1); /* rounds to nearest */
    assert_true(tg_load_f64(buf, TG_DT_F32) == 16777216.0);
    tg_store_i64(buf, TG_DT_F64, -7);
    assert_true(tg_load_f64(buf, TG_DT_F64) == -7.0);
    /* A bool byte other than 0/1 loads as true, without an invalid C bool. */
    buf[0] = 2;
    assert_int_equal(tg_load_i64(buf, TG_DT_BOOL), 1);
    assert_true(tg_load_f64(buf, TG_DT_BOOL) == 1.0);
    /* Every dtype round-trips a representable value through both paths. */
    for (int i = 0; i < TG_DT_COUNT; i++) {
        tg_dtype dt = (tg_dtype)i;
        int64_t v = dt == TG_DT_BOOL ? 1 : dt == TG_DT_U8 ? 200 : -100;
        tg_store_i64(buf, dt, v);
        assert_int_equal(tg_load_i64(buf, dt), v);
        tg_store_f64(buf, dt, (double)v);
        assert_true(tg_load_f64(buf, dt) == (double)v);
    }
}

static void test_float_to_int(void **state) {
    (void)state;
    unsigned char buf[8];
    static const tg_dtype ints[] = {TG_DT_I8, TG_DT_I16, TG_DT_I32, TG_DT_I64, TG_DT_U8};
    static const int64_t lo[] = {INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN, 0};
    static const int64_t hi[] = {INT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX, UINT8_MAX};
    for (size_t i = 0; i < TG_COUNTOF(ints); i++) {
        tg_dtype dt = ints[i];
        tg_store_f64(buf, dt, NAN);
        assert_int_equal(tg_load_i64(buf, dt), 0);
        tg_store_f64(buf, dt, INFINITY);
        assert_true(tg_load_i64(buf, dt) == hi[i]);
        tg_store_f64(buf, dt, -INFINITY);
        assert_true(tg_load_i64(buf, dt) == lo[i]);
        tg_store_f64(buf, dt, 1e300);
        assert_true(tg_load_i64(buf, dt) == hi[i]);
        tg_store_f64(buf, dt, -1e300);
        assert_true(tg_load_i64(buf, dt) == lo[i]);
        tg_store_f64(buf, dt, 7.9);
        assert_int_equal(tg_load_i64(buf, dt), 7);
        tg_store_f64(buf, dt, -0.99);
        assert_int_equal(tg_load_i64(buf, dt), 0);
    }
    tg_store_f64(buf, TG_DT_I8, -7.9);
    assert_int_equal(tg_load_i64(buf, TG_DT_I8), -7);
    tg_store_f64(buf, TG_DT_I64, 9223372036854775807.0); /* 2^63: just out of range */
    assert_true(tg_load_i64(buf, TG_DT_I64) == INT64_MAX);
    tg_store_f64(buf, TG_DT_I64, -9223372036854775808.0); /* -2^63: in range */
    assert_true(tg_load_i64(buf, TG_DT_I64) == INT64_MIN);
    tg_store_f64(buf, TG_DT_BOOL, NAN);
    assert_int_equal(buf[0], 1);
    tg_store_f64(buf, TG_DT_BOOL, -0.0);
    assert_int_equal(buf[0], 0);
    tg_store_f64(buf, TG_DT_F32, 1e300);
    assert_true(isinf(tg_load_f64(buf, TG_DT_F32)));
    /* Loading a float as int64 follows the same rules. */
    float fx = NAN;
    assert_int_equal(tg_load_i64(&fx, TG_DT_F32), 0);
    double dx = -2.5e30;
    assert_true(tg_load_i64(&dx, TG_DT_F64) == INT64_MIN);
}

/* ---- tensors ---- */

static void test_tensor_new(void **state) {
    (void)state;
    int64_t shape[3] = {2, 3, 4};
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F32, 3, shape);
    assert_non_null(t);
    assert_int_equal(tg_tensor_dtype(t), TG_DT_F32);
    assert_int_equal(tg_tensor_ndim(t), 3);
    assert_int_equal(tg_tensor_size(t), 24);
    assert_int_equal(tg_tensor_strides(t)[0], 12);
    assert_int_equal(tg_tensor_strides(t)[1], 4);
    assert_int_equal(tg_tensor_strides(t)[2], 1);
    assert_int_equal(tg_tensor_offset(t), 0);
    assert_int_equal((uintptr_t)tg_tensor_data(t) % 64, 0);
    assert_true(tg_tensor_is_contiguous(t));
    assert_ptr_equal(tg_tensor_ctx(t), tg_ctx_default());
    for (int64_t i = 0; i < 24; i++) assert_true(tg_tensor_get_f64(t, i) == 0.0);
    tg_tensor_free(t);
    tg_tensor_free(NULL);

    /* 0-d and zero-size tensors. */
    t = tg_tensor_new(NULL, TG_DT_I64, 0, NULL);
    assert_non_null(t);
    assert_int_equal(tg_tensor_size(t), 1);
    *(int64_t *)tg_tensor_data(t) = 9;
    assert_true(tg_tensor_get_f64(t, 0) == 9.0);
    tg_tensor_free(t);
    int64_t zshape[3] = {4, 0, 5};
    t = tg_tensor_new(NULL, TG_DT_F64, 3, zshape);
    assert_non_null(t);
    assert_int_equal(tg_tensor_size(t), 0);
    assert_true(tg_tensor_is_contiguous(t));
    assert_int_equal(tg_tensor_strides(t)[0], 5); /* NumPy-like: 0 does not zero strides */
    tg_tensor *d = tg_tensor_dup(t);
    assert_non_null(d);
    assert_int_equal(tg_tensor_size(d), 0);
    tg_tensor_copy_into(d, t);
    tg_tensor_free(d);
    tg_tensor_free(t);

    /* Bad arguments are reported, not crashed on. */
    int64_t neg[2] = {3, -1};
    assert_null(tg_tensor_new(NULL, TG_DT_F32, 2, neg));
    assert_non_null(strstr(tg_last_error(), "negative"));
    assert_null(tg_tensor_new(NULL, TG_DT_F32, TG_MAX_DIMS + 1, shape));
    assert_null(tg_tensor_new(NULL, TG_DT_F32, -1, shape));
    assert_null(tg_tensor_new(NULL, TG_DT_F32, 2, NULL));
    assert_null(tg_tensor_new(NULL, (tg_dtype)TG_DT_COUNT, 1, shape));
    int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    assert_null(tg_tensor_new(NULL, TG_DT_U8, 2, huge));
    int64_t sz = 0;
    assert_false(tg_shape_size(2, huge, &sz));
    int64_t edge[1] = {INT64_MAX / 8};
    assert_true(tg_shape_size(1, edge, &sz));
    edge[0]++;
    assert_false(tg_shape_size(1, edge, &sz));
    int64_t zbig[3] = {INT64_C(1) << 30, 0, INT64_C(1) << 29};
    assert_true(tg_shape_size(3, zbig, &sz));
    assert_int_equal(sz, 0);
    int64_t zhuge[3] = {INT64_MAX, 0, INT64_MAX}; /* as NumPy: too big even when empty */
    assert_false(tg_shape_size(3, zhuge, &sz));
    assert_false(tg_shape_size(1, neg + 1, &sz));

    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t s23[2] = {2, 3};
    t = tg_tensor_from_data(NULL, TG_DT_F32, 2, s23, data);
    assert_non_null(t);
    assert_memory_equal(tg_tensor_data(t), data, sizeof data);
    assert_true(isnan(tg_tensor_get_f64(t, 6)));
    assert_non_null(strstr(tg_last_error(), "outside"));
    assert_true(isnan(tg_tensor_get_f64(t, -1)));
    tg_tensor_free(t);
    assert_null(tg_tensor_from_data(NULL, TG_DT_F32, 2, s23, NULL));
}

static void test_views(void **state) {
    (void)state;
    double data[12];
    for (int i = 0; i < 12; i++) data[i] = i;
    int64_t s34[2] = {3, 4};
    tg_tensor *t = tg_tensor_from_data(NULL, TG_DT_F64, 2, s34, data);
    /* x[::-1, ::-1] */
    int64_t st[2] = {-4, -1};
    tg_tensor *r = tg_tensor_view(t, 2, s34, st, 11);
    assert_non_null(r);
    assert_false(tg_tensor_is_contiguous(r));
    for (int64_t i = 0; i < 12; i++) assert_true(tg_tensor_get_f64(r, i) == (double)(11 - i));
    /* x.T */
    int64_t s43[2] = {4, 3}, tst[2] = {1, 4};
    tg_tensor *tr = tg_tensor_view(t, 2, s43, tst, 0);
    assert_non_null(tr);
    assert_true(tg_tensor_get_f64(tr, 1) == 4.0); /* [0,1] */
    assert_true(tg_tensor_get_f64(tr, 3) == 1.0); /* [1,0] */
    /* x[1, ::-2] */
    int64_t s2[1] = {2}, st2[1] = {-2};
    tg_tensor *row = tg_tensor_view(t, 1, s2, st2, 7);
    assert_true(tg_tensor_get_f64(row, 0) == 7.0);
    assert_true(tg_tensor_get_f64(row, 1) == 5.0);
    /* A broadcast view (stride 0) and a 0-d view. */
    int64_t s5[1] = {5}, z[1] = {0};
    tg_tensor *bc = tg_tensor_view(t, 1, s5, z, 3);
    for (int64_t i = 0; i < 5; i++) assert_true(tg_tensor_get_f64(bc, i) == 3.0);
    tg_tensor *sc = tg_tensor_view(t, 0, NULL, NULL, 11);
    assert_true(tg_tensor_get_f64(sc, 0) == 11.0);
    /* NULL strides: contiguous; an empty view may sit at the end of the buffer. */
    int64_t s6[1] = {6};
    tg_tensor *flat = tg_tensor_view(t, 1, s6, NULL, 6);
    assert_true(tg_tensor_get_f64(flat, 5) == 11.0);
    tg_tensor *empty = tg_tensor_view(t, 1, z, NULL, 12);
    assert_non_null(empty);
    assert_int_equal(tg_tensor_size(empty), 0);

    /* Views outside the buffer are refused. */
    int64_t bad_st[2] = {4, -1};
    assert_null(tg_tensor_view(t, 2, s34, bad_st, 0)); /* reaches element -3 */
    assert_non_null(strstr(tg_last_error(), "outside"));
    assert_null(tg_tensor_view(t, 2, s34, NULL, 1));   /* reaches element 12 */
    assert_null(tg_tensor_view(t, 1, z, NULL, 13));    /* offset past the end */
    assert_null(tg_tensor_view(t, 0, NULL, NULL, -1)); /* negative offset */
    int64_t hs[1] = {INT64_C(1) << 40}, hst[1] = {INT64_C(1) << 40};
    assert_null(tg_tensor_view(t, 1, hs, hst, 0)); /* overflow in the bound */
    assert_null(tg_tensor_view(NULL, 0, NULL, NULL, 0));

    /* The views keep the buffer alive after the base is freed. */
    tg_tensor_free(t);
    tg_tensor *d = tg_tensor_dup(r);
    assert_true(tg_tensor_is_contiguous(d));
    for (int64_t i = 0; i < 12; i++) assert_true(((double *)tg_tensor_data(d))[i] == 11 - i);
    tg_tensor *dt = tg_tensor_dup(tr);
    double expect_t[12] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
    assert_memory_equal(tg_tensor_data(dt), expect_t, sizeof expect_t);
    tg_tensor_free(dt);
    tg_tensor_free(d);
    tg_tensor_free(r);
    tg_tensor_free(tr);
    tg_tensor_free(row);
    tg_tensor_free(bc);
    tg_tensor_free(sc);
    tg_tensor_free(flat);
    tg_tensor_free(empty);
}

static void test_contiguous(void **state) {
    (void)state;
    int64_t s[3] = {2, 1, 3};
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_I32, 3, s);
    int64_t st[3] = {3, 99, 1}; /* the stride of a length-1 axis does not matter */
    tg_tensor *v = tg_tensor_view(t, 3, s, st, 0);
    assert_true(tg_tensor_is_contiguous(v));
    int64_t s2[2] = {2, 2}, st2[2] = {3, 1};
    tg_tensor *w = tg_tensor_view(t, 2, s2, st2, 0);
    assert_false(tg_tensor_is_contiguous(w));
    tg_tensor_free(v);
    tg_tensor_free(w);
    tg_tensor_free(t);
}

static void test_copy_into(void **state) {
    (void)state;
    int64_t s4[1] = {4};
    double src[4] = {NAN, -1.5, 3e9, 255.75};
    tg_tensor *a = tg_tensor_from_data(NULL, TG_DT_F64, 1, s4, src);
    tg_tensor *i32 = tg_tensor_new(NULL, TG_DT_I32, 1, s4);
    tg_tensor_copy_into(i32, a);
    const int32_t *pi = tg_tensor_data(i32);
    assert_int_equal(pi[0], 0);
    assert_int_equal(pi[1], -1);
    assert_int_equal(pi[2], INT32_MAX);
    assert_int_equal(pi[3], 255);
    tg_tensor *u8 = tg_tensor_new(NULL, TG_DT_U8, 1, s4);
    tg_tensor_copy_into(u8, a);
    const uint8_t *pu = tg_tensor_data(u8);
    assert_int_equal(pu[0], 0);
    assert_int_equal(pu[1], 0);
    assert_int_equal(pu[2], 255);
    assert_int_equal(pu[3], 255);
    tg_tensor *b = tg_tensor_new(NULL, TG_DT_BOOL, 1, s4);
    tg_tensor_copy_into(b, a);
    const uint8_t *pb = tg_tensor_data(b);
    assert_int_equal(pb[0], 1);
    assert_int_equal(pb[1], 1);
    tg_tensor *f32 = tg_tensor_new(NULL, TG_DT_F32, 1, s4);
    tg_tensor_copy_into(f32, a);
    const float *pf = tg_tensor_data(f32);
    assert_true(isnan(pf[0]));
    assert_true(pf[1] == -1.5f);
    /* int -> int wraps; int -> float; bool -> float; int -> bool. */
    int64_t i64d[4] = {300, -1, INT64_C(1) << 53, 0};
    tg_tensor *i64 = tg_tensor_from_data(NULL, TG_DT_I64, 1, s4, i64d);
    tg_tensor *i8 = tg_tensor_new(NULL, TG_DT_I8, 1, s4);
    tg_tensor_copy_into(i8, i64);
    assert_int_equal(((int8_t *)tg_tensor_data(i8))[0], 44);
    assert_int_equal(((int8_t *)tg_tensor_data(i8))[1], -1);
    tg_tensor *f64 = tg_tensor_new(NULL, TG_DT_F64, 1, s4);
    tg_tensor_copy_into(f64, i64);
    assert_true(((double *)tg_tensor_data(f64))[2] == 9007199254740992.0);
    tg_tensor_copy_into(b, i64);
    assert_int_equal(pb[0], 1);
    assert_int_equal(pb[3], 0);
    tg_tensor_copy_into(f64, b);
    assert_true(((double *)tg_tensor_data(f64))[0] == 1.0);
    assert_true(((double *)tg_tensor_data(f64))[3] == 0.0);
    /* Strided source and destination: reverse into a reversed view (identity overall). */
    int64_t rs[1] = {-1};
    tg_tensor *rev_src = tg_tensor_view(i64, 1, s4, rs, 3);
    tg_tensor *dst = tg_tensor_new(NULL, TG_DT_I16, 1, s4);
    tg_tensor *rev_dst = tg_tensor_view(dst, 1, s4, rs, 3);
    tg_tensor_copy_into(rev_dst, rev_src);
    const int16_t *p16 = tg_tensor_data(dst);
    assert_int_equal(p16[0], 300);
    assert_int_equal(p16[1], -1);
    assert_int_equal(p16[2], 0); /* 2^53 wraps to 0 in 16 bits */
    /* 3-d transposed copy with conversion. */
    int64_t s234[3] = {2, 3, 4}, s432[3] = {4, 3, 2}, st432[3] = {1, 4, 12};
    tg_tensor *c = tg_tensor_new(NULL, TG_DT_I32, 3, s234);
    for (int i = 0; i < 24; i++) ((int32_t *)tg_tensor_data(c))[i] = i;
    tg_tensor *ct = tg_tensor_view(c, 3, s432, st432, 0);
    tg_tensor *out = tg_tensor_new(NULL, TG_DT_F32, 3, s432);
    tg_tensor_copy_into(out, ct);
    const float *po = tg_tensor_data(out);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++)
                assert_true(po[k * 6 + j * 2 + i] == (float)(i * 12 + j * 4 + k));
    tg_tensor *all[] = {a, i32, u8, b, f32, i64, i8, f64, rev_src, dst, rev_dst, c, ct, out};
    for (size_t i = 0; i < TG_COUNTOF(all); i++) tg_tensor_free(all[i]);
}

/* ---- printing ---- */

static char *print_to_string(const tg_tensor *t) {
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    assert_non_null(f);
    assert_int_equal(tg_tensor_print(t, f), TG_OK);
    fclose(f);
    return s;
}

static void check_print(tg_dtype dt, int ndim, const int64_t *shape, const double *vals,
                        const char *expect) {
    tg_tensor *t = tg_tensor_new(NULL, dt, ndim, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t);
    for (int64_t i = 0; i < n; i++)
        tg_store_f64((char *)tg_tensor_data(t) + i * (int64_t)tg_dtype_size(dt), dt,
                     vals ? vals[i] : (double)i);
    char *s = print_to_string(t);
    size_t len = strlen(s);
    assert_true(len > 0 && s[len - 1] == '\n');
    s[len - 1] = '\0';
    assert_string_equal(s, expect);
    free(s);
    tg_tensor_free(t);
}

static void test_print(void **state) {
    (void)state;
    /* Expected strings are repr() of the same arrays in NumPy 1.24. */
    int64_t s3[1] = {3}, s2[1] = {2}, s34[2] = {3, 4}, s30[1] = {30}, s222[3] = {2, 2, 2};
    int64_t s0[1] = {0}, s20[2] = {2, 0}, s2000[1] = {2000}, s40x50[2] = {40, 50};
    check_print(TG_DT_F32, 1, s3, (double[]){1, 2.5, 3}, "array([1. , 2.5, 3. ], dtype=float32)");
    check_print(TG_DT_F64, 0, NULL, (double[]){2.5}, "array(2.5)");
    check_print(TG_DT_BOOL, 1, s2, (double[]){1, 0}, "array([ True, False])");
    check_print(TG_DT_BOOL, 0, NULL, (double[]){0}, "array(False)");
    double v34[12];
    for (int i = 0; i < 12; i++) v34[i] = i - 5;
    check_print(TG_DT_I32, 2, s34, v34,
                "array([[-5, -4, -3, -2],\n       [-1,  0,  1,  2],\n"
                "       [ 3,  4,  5,  6]], dtype=int32)");
    check_print(TG_DT_F64, 1, s30, NULL,
                "array([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12.,\n"
                "       13., 14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25.,\n"
                "       26., 27., 28., 29.])");
    check_print(TG_DT_I64, 3, s222, NULL,
                "array([[[0, 1],\n        [2, 3]],\n\n       [[4, 5],\n        [6, 7]]])");
    check_print(TG_DT_F32, 1, s0, NULL, "array([], dtype=float32)");
    check_print(TG_DT_F64, 2, s20, NULL, "array([], shape=(2, 0), dtype=float64)");
    check_print(TG_DT_F64, 1, s3, (double[]){NAN, -INFINITY, 1.5}, "array([ nan, -inf,  1.5])");
    check_print(TG_DT_F64, 1, s3, (double[]){1e-5, 1.5, -250},
                "array([ 1.0e-05,  1.5e+00, -2.5e+02])");
    check_print(TG_DT_F32, 1, s2, (double[]){1.0 / 3, 0.1},
                "array([0.33333334, 0.1       ], dtype=float32)");
    double *v2000 = malloc(2000 * sizeof *v2000);
    for (int i = 0; i < 2000; i++) v2000[i] = i % 256;
    check_print(TG_DT_U8, 1, s2000, v2000,
                "array([  0,   1,   2, ..., 205, 206, 207], dtype=uint8)");
    free(v2000);
    check_print(TG_DT_F64, 2, s40x50, NULL,
                "array([[0.000e+00, 1.000e+00, 2.000e+00, ..., 4.700e+01, 4.800e+01,\n"
                "        4.900e+01],\n"
                "       [5.000e+01, 5.100e+01, 5.200e+01, ..., 9.700e+01, 9.800e+01,\n"
                "        9.900e+01],\n"
                "       [1.000e+02, 1.010e+02, 1.020e+02, ..., 1.470e+02, 1.480e+02,\n"
                "        1.490e+02],\n"
                "       ...,\n"
                "       [1.850e+03, 1.851e+03, 1.852e+03, ..., 1.897e+03, 1.898e+03,\n"
                "        1.899e+03],\n"
                "       [1.900e+03, 1.901e+03, 1.902e+03, ..., 1.947e+03, 1.948e+03,\n"
                "        1.949e+03],\n"
                "       [1.950e+03, 1.951e+03, 1.952e+03, ..., 1.997e+03, 1.998e+03,\n"
                "        1.999e+03]])");
    /* A strided view prints its own elements. */
    int64_t s4[1] = {4}, rs[1] = {-1};
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_I8, 1, s4);
    for (int i = 0; i < 4; i++) ((int8_t *)tg_tensor_data(t))[i] = (int8_t)(i * 10);
    tg_tensor *r = tg_tensor_view(t, 1, s4, rs, 3);
    char *s = print_to_string(r);
    assert_string_equal(s, "array([30, 20, 10,  0], dtype=int8)\n");
    free(s);
    assert_int_equal(tg_tensor_print(NULL, stdout), TG_EINVAL);
    assert_int_equal(tg_tensor_print(r, NULL), TG_EINVAL);
    tg_tensor_free(r);
    tg_tensor_free(t);
}

/* ---- fault injection: every failing allocation gives TG_ENOMEM and leaks nothing ---- */

typedef tg_status (*fault_op)(tg_ctx *ctx, void *arg);

/* Runs op with the 1st, 2nd, ... allocation failing until it succeeds; returns how many
 * allocations a successful run makes. */
static long run_with_faults(fault_op op, void *arg) {
    for (long n = 1; n < 1000; n++) {
        fault f = {0};
        tg_ctx *ctx = tg_ctx_new(fault_alloc, &f);
        assert_non_null(ctx);
        f.fail_at = f.calls + n;
        tg_status st = op(ctx, arg);
        bool failed_here = f.calls >= f.fail_at;
        tg_ctx_free(ctx);
        assert_int_equal(f.live_blocks, 0);
        assert_int_equal(f.live_bytes, 0);
        if (!failed_here) {
            assert_int_equal(st, TG_OK);
            return n - 1;
        }
        assert_int_equal(st, TG_ENOMEM);
        assert_non_null(strstr(tg_last_error(), "out of memory"));
    }
    fail_msg("operation never succeeded");
    return -1;
}

static tg_status op_tensor_new(tg_ctx *ctx, void *arg) {
    (void)arg;
    int64_t s[2] = {3, 5};
    tg_tensor *t = tg_tensor_new(ctx, TG_DT_F32, 2, s);
    if (!t) return TG_ENOMEM;
    tg_tensor_free(t);
    return TG_OK;
}

static tg_status op_view_dup_print(tg_ctx *ctx, void *arg) {
    (void)arg;
    int64_t s[2] = {3, 5}, st[2] = {-5, 1};
    tg_tensor *t = tg_tensor_new(ctx, TG_DT_F64, 2, s);
    if (!t) return TG_ENOMEM;
    tg_tensor *v = tg_tensor_view(t, 2, s, st, 10);
    tg_tensor *d = v ? tg_tensor_dup(v) : NULL;
    tg_status status = d ? TG_OK : TG_ENOMEM;
    if (d) {
        FILE *f = fopen("/dev/null", "w");
        status = tg_tensor_print(d, f);
        fclose(f);
    }
    tg_tensor_free(d);
    tg_tensor_free(v);
    tg_tensor_free(t);
    return status;
}

static tg_status op_npy_load_file(tg_ctx *ctx, void *arg) {
    tg_tensor *t = NULL;
    tg_status st = tg_npy_load(ctx, arg, &t);
    if (st == TG_OK) {
        assert_non_null(t);
        tg_tensor_free(t);
    } else {
        assert_null(t);
    }
    return st;
}

typedef struct membuf {
    const void *p;
    size_t n;
} membuf;

static tg_status op_npy_load_mem(tg_ctx *ctx, void *arg) {
    const membuf *m = arg;
    tg_tensor *t = NULL;
    tg_status st = tg_npy_load_mem(ctx, m->p, m->n, &t);
    if (st == TG_OK)
        tg_tensor_free(t);
    else
        assert_null(t);
    return st;
}

static tg_status op_arena(tg_ctx *ctx, void *arg) {
    (void)arg;
    tg_arena a;
    tg_arena_init(&a, ctx);
    tg_status st = TG_OK;
    for (int i = 0; i < 200 && st == TG_OK; i++)
        if (!tg_arena_alloc(&a, (size_t)i * 40)) st = TG_ENOMEM;
    tg_arena_fini(&a);
    return st;
}

static void test_fault_injection(void **state) {
    (void)state;
    assert_int_equal(run_with_faults(op_tensor_new, NULL), 2);
    assert_true(run_with_faults(op_view_dup_print, NULL) >= 5);
    assert_true(run_with_faults(op_arena, NULL) >= 3);
    /* Loading: C order, Fortran order, big-endian, from a file and from memory. */
    static const char *const files[] = {"data/npy/f32_2x3.npy", "data/npy/f64_fortran_3x4.npy",
                                        "data/npy/i16_be_2x2.npy", "data/npy/scalar_f64.npy"};
    for (size_t i = 0; i < TG_COUNTOF(files); i++) {
        assert_true(run_with_faults(op_npy_load_file, (void *)files[i]) >= 2);
        FILE *f = fopen(files[i], "rb");
        assert_non_null(f);
        unsigned char buf[4096];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        membuf m = {buf, n};
        assert_true(run_with_faults(op_npy_load_mem, &m) >= 2);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_strings),  cmocka_unit_test(test_last_error),
        cmocka_unit_test(test_size_math),       cmocka_unit_test(test_ctx_and_mem),
        cmocka_unit_test(test_arena),           cmocka_unit_test(test_arena_oom),
        cmocka_unit_test(test_dtypes),          cmocka_unit_test(test_store_wrap),
        cmocka_unit_test(test_float_to_int),    cmocka_unit_test(test_tensor_new),
        cmocka_unit_test(test_views),           cmocka_unit_test(test_contiguous),
        cmocka_unit_test(test_copy_into),       cmocka_unit_test(test_print),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
