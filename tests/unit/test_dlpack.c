/* test_dlpack.c - DLPack exchange (src/core/dlpack.c): tensors lent and borrowed without
 * a copy, memory shared both ways, each deleter run exactly once and only when the last
 * tensor over the memory is freed, strided and reversed layouts (through a compiled
 * function too), and every refused input with the caller still owning it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/core.h"
#include "core/dlpack.h"

#include <string.h>

/* A producer's tensor: its memory, extents and strides, and how often it was deleted. */
typedef struct producer {
    DLManagedTensor m;
    int64_t shape[4], strides[4];
    int deleted;
} producer;

static void producer_delete(DLManagedTensor *m) { ((producer *)m->manager_ctx)->deleted++; }

static void producer_init(producer *p, void *data, DLDataType dt, int ndim, const int64_t *shape,
                          const int64_t *strides, uint64_t byte_offset) {
    memset(p, 0, sizeof *p);
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        if (strides) p->strides[i] = strides[i];
    }
    p->m.dl_tensor = (DLTensor){.data = data,
                                .device = {TG_DL_CPU, 0},
                                .ndim = ndim,
                                .dtype = dt,
                                .shape = p->shape,
                                .strides = strides ? p->strides : NULL,
                                .byte_offset = byte_offset};
    p->m.manager_ctx = p;
    p->m.deleter = producer_delete;
}

static const DLDataType F64 = {TG_DL_FLOAT, 64, 1};

/* Contiguous memory with an offset: the tensor reads it in place, and writes through it. */
static void test_borrow_contiguous(void **state) {
    (void)state;
    double data[7] = {-1, 0, 1, 2, 3, 4, 5};
    producer p;
    int64_t shape[2] = {2, 3};
    producer_init(&p, data, F64, 2, shape, NULL, sizeof(double));
    tg_tensor *t = tg_tensor_from_dlpack(NULL, &p.m);
    assert_non_null(t);
    assert_int_equal(tg_tensor_dtype(t), TG_DT_F64);
    assert_int_equal(tg_tensor_ndim(t), 2);
    assert_ptr_equal(tg_tensor_data(t), &data[1]);
    for (int i = 0; i < 6; i++) assert_true(tg_tensor_get_f64(t, i) == (double)i);
    ((double *)tg_tensor_data(t))[5] = 50;
    assert_true(data[6] == 50);
    tg_tensor *v = tg_tensor_view(t, 1, (int64_t[]){3}, (int64_t[]){1}, 3);
    assert_non_null(v);
    tg_tensor_free(t);
    assert_int_equal(p.deleted, 0); /* the view still holds the memory */
    assert_true(tg_tensor_get_f64(v, 2) == 50);
    tg_tensor_free(v);
    assert_int_equal(p.deleted, 1);
}

/* A reversed, strided layout (NumPy's a[::-2] of a column): element [0] is the highest
 * address; a compiled function sums it and reverses it. */
static void test_borrow_reversed_in_function(void **state) {
    (void)state;
    double data[12];
    for (int i = 0; i < 12; i++) data[i] = i;
    producer p;
    /* elements data[11], data[8], data[5], data[2] */
    producer_init(&p, data, F64, 1, (int64_t[]){4}, (int64_t[]){-3}, 11 * sizeof(double));
    tg_tensor *t = tg_tensor_from_dlpack(NULL, &p.m);
    assert_non_null(t);
    const double want[4] = {11, 8, 5, 2};
    for (int i = 0; i < 4; i++) assert_true(tg_tensor_get_f64(t, i) == want[i]);

    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, (int64_t[]){4});
    tg_var *outs[2] = {tg_reduce(g, "sum", x, NULL, 0, false), tg_mul(g, x, x)};
    assert_int_equal(tg_graph_set_outputs(g, outs, 2), TG_OK);
    const tg_mode modes[2] = {TG_MODE_REFERENCE, TG_MODE_VM};
    for (int k = 0; k < 2; k++) {
        tg_fn *f = NULL;
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = modes[k], .nthreads = 1);
        assert_int_equal(tg_graph_compile(g, &o, &f), TG_OK);
        tg_tensor *res[2] = {NULL, NULL};
        assert_int_equal(tg_fn_call(f, &t, 1, res, 2), TG_OK);
        assert_true(tg_tensor_get_f64(res[0], 0) == 26);
        for (int i = 0; i < 4; i++) assert_true(tg_tensor_get_f64(res[1], i) == want[i] * want[i]);
        tg_tensor_free(res[0]);
        tg_tensor_free(res[1]);
        tg_fn_free(f);
    }
    tg_graph_free(g);
    for (int i = 0; i < 12; i++) assert_true(data[i] == i); /* the input was not written */
    tg_tensor_free(t);
    assert_int_equal(p.deleted, 1);
}

/* Lending: the consumer sees the tensor's memory, layout and dtype; the memory outlives
 * the tensor until the deleter runs; a lent tensor borrowed back is the same memory. */
static void test_lend_and_borrow_back(void **state) {
    (void)state;
    double v[6] = {0, 1, 2, 3, 4, 5};
    tg_tensor *a = tg_tensor_from_data(NULL, TG_DT_F64, 2, (int64_t[]){2, 3}, v);
    /* the transposed view, reversed along its first axis: offset 2, strides {-1, 3} */
    tg_tensor *b = tg_tensor_view(a, 2, (int64_t[]){3, 2}, (int64_t[]){-1, 3}, 2);
    assert_non_null(b);
    DLManagedTensor *m = tg_tensor_to_dlpack(b);
    assert_non_null(m);
    const DLTensor *d = &m->dl_tensor;
    assert_int_equal(d->device.device_type, TG_DL_CPU);
    assert_int_equal(d->ndim, 2);
    assert_int_equal(d->dtype.code, TG_DL_FLOAT);
    assert_int_equal(d->dtype.bits, 64);
    assert_int_equal(d->dtype.lanes, 1);
    assert_int_equal(d->shape[0], 3);
    assert_int_equal(d->strides[0], -1);
    assert_int_equal(d->strides[1], 3);
    assert_ptr_equal((char *)d->data + d->byte_offset, tg_tensor_data(b));
    assert_true(*(double *)d->data == 2);
    tg_tensor_free(a);
    tg_tensor_free(b); /* the lent tensor still holds the memory */
    tg_tensor *c = tg_tensor_from_dlpack(NULL, m);
    assert_non_null(c);
    const double want[6] = {2, 5, 1, 4, 0, 3};
    for (int i = 0; i < 6; i++) assert_true(tg_tensor_get_f64(c, i) == want[i]);
    tg_tensor_free(c); /* runs m's deleter, which frees the memory (ASan checks) */
}

/* Every dtype crosses both ways with its DLPack code; bool as DLPack's bool. */
static void test_dtypes(void **state) {
    (void)state;
    for (int dt = 0; dt < TG_DT_COUNT; dt++) {
        tg_tensor *a = tg_tensor_new(NULL, (tg_dtype)dt, 1, (int64_t[]){5});
        DLManagedTensor *m = tg_tensor_to_dlpack(a);
        assert_non_null(m);
        assert_int_equal(m->dl_tensor.dtype.bits, 8 * tg_dtype_size((tg_dtype)dt));
        if (dt == TG_DT_BOOL) assert_int_equal(m->dl_tensor.dtype.code, TG_DL_BOOL);
        tg_tensor *b = tg_tensor_from_dlpack(NULL, m);
        assert_non_null(b);
        assert_int_equal(tg_tensor_dtype(b), dt);
        assert_ptr_equal(tg_tensor_data(b), tg_tensor_data(a));
        tg_tensor_free(b);
        tg_tensor_free(a);
    }
}

/* Empty and 0-d tensors. */
static void test_empty_and_scalar(void **state) {
    (void)state;
    producer p;
    producer_init(&p, NULL, F64, 2, (int64_t[]){0, 3}, NULL, 0);
    tg_tensor *t = tg_tensor_from_dlpack(NULL, &p.m);
    assert_non_null(t);
    assert_int_equal(tg_tensor_size(t), 0);
    tg_tensor_free(t);
    assert_int_equal(p.deleted, 1);
    double x = 4.5;
    producer_init(&p, &x, F64, 0, NULL, NULL, 0);
    t = tg_tensor_from_dlpack(NULL, &p.m);
    assert_non_null(t);
    assert_true(tg_tensor_get_f64(t, 0) == 4.5);
    tg_tensor_free(t);
    assert_int_equal(p.deleted, 1);
}

/* Refused inputs: a clear error, and the managed tensor stays the caller's. */
static void test_refused(void **state) {
    (void)state;
    double data[4] = {0};
    producer p;
    int64_t shape[1] = {4};
    const struct {
        const char *what, *msg;
    } cases[] = {
        {"device", "device type 2"},   {"complex", "complex128"}, {"lanes", "lanes 2"},
        {"misaligned", "not aligned"}, {"rank", "rank 9"},        {"negative extent", "negative"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        producer_init(&p, data, F64, 1, shape, NULL, 0);
        switch (c) {
        case 0:
            p.m.dl_tensor.device.device_type = TG_DL_CUDA;
            break;
        case 1:
            p.m.dl_tensor.dtype = (DLDataType){TG_DL_COMPLEX, 128, 1};
            break;
        case 2:
            p.m.dl_tensor.dtype.lanes = 2;
            break;
        case 3:
            p.m.dl_tensor.byte_offset = 4;
            break;
        case 4:
            p.m.dl_tensor.ndim = 9;
            break;
        default:
            p.shape[0] = -1;
            break;
        }
        assert_null(tg_tensor_from_dlpack(NULL, &p.m));
        if (!strstr(tg_last_error(), cases[c].msg))
            fail_msg("%s: message \"%s\" lacks \"%s\"", cases[c].what, tg_last_error(),
                     cases[c].msg);
        assert_int_equal(p.deleted, 0);
    }
    assert_null(tg_tensor_from_dlpack(NULL, NULL));
    assert_null(tg_tensor_to_dlpack(NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_borrow_contiguous),
        cmocka_unit_test(test_borrow_reversed_in_function),
        cmocka_unit_test(test_lend_and_borrow_back),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_empty_and_scalar),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
