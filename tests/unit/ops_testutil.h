/* ops_testutil.h - helpers for the unit tests: for the op families (test_reduce.c,
 * test_shape.c, test_linalg.c), build static types and normalized attributes by hand, run
 * an op's inference (static or run time) and its reference kernel directly, without a
 * graph, and compare results; for whole programs (test_cjit.c, test_scan.c), parse .tg
 * text, compile and call it on a backend, and compare a backend's results with the
 * reference interpreter's. Include after <cmocka.h>. Everything here is static.
 */
#ifndef TG_OPS_TESTUTIL_H
#define TG_OPS_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops.h"

#define NARGS64(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

/* Types: TY(TG_DT_F32, 2, -1) is f32[2,?]; TY0(dt) is a scalar. */
static inline tg_type mk_type(tg_dtype dt, int nd, const int64_t *shape) {
    tg_type t;
    memset(&t, 0, sizeof t);
    t.dtype = (uint8_t)dt;
    t.ndim = (uint8_t)nd;
    for (int i = 0; i < nd; i++) t.shape[i] = shape[i];
    return t;
}
#define TY(dt, ...) mk_type((dt), NARGS64(__VA_ARGS__), (const int64_t[]){__VA_ARGS__})
#define TY0(dt)     mk_type((dt), 0, NULL)

/* Normalized attribute values, as the graph stores them. */
#define AV_NONE    ((tg_aval){.kind = TG_ATTR_NONE})
#define AV_BOOL(b) ((tg_aval){.kind = TG_ATTR_BOOL, .i = (b)})
#define AV_INT(v)  ((tg_aval){.kind = TG_ATTR_INT, .i = (v)})
#define AV_EMPTY   ((tg_aval){.kind = TG_ATTR_INTS, .ints = NULL, .n = 0})
#define AV_INTS(...)                                                                               \
    ((tg_aval){                                                                                    \
        .kind = TG_ATTR_INTS, .ints = (const int64_t[]){__VA_ARGS__}, .n = NARGS64(__VA_ARGS__)})
/* Tables of slices: marks a part left out; slice_attrs4 (test_shape.c) turns it into a
 * `none` entry. Only a marker of these tables: to tgraph every int64_t is a value. */
#define NONE_ (INT64_MAX - 1)

typedef struct infer_res {
    tg_status st;              /* what infer returned */
    tg_type out;               /* output 0 */
    char str[TG_TYPE_STR_MAX]; /* output 0 as text, "" on error */
    char msg[512];             /* error message */
} infer_res;

static inline infer_res infer_op(const tg_op_def *op, const tg_type *in, int nin,
                                 const tg_aval *attrs, bool runtime) {
    infer_res r;
    tg_type outs[TG_MAX_OUTS];
    memset(&r, 0, sizeof r);
    memset(outs, 0, sizeof outs);
    tg_infer ic = {.op = op,
                   .in = in,
                   .nin = nin,
                   .attrs = attrs,
                   .out = outs,
                   .nout = op->nout,
                   .runtime = runtime};
    r.st = op->infer(&ic);
    if (r.st == TG_OK) {
        r.out = outs[0];
        tg_type_str(&outs[0], r.str, sizeof r.str);
    } else {
        memcpy(r.msg, ic.msg, sizeof r.msg);
    }
    return r;
}

/* Infers and expects success with the given output type text ("f32[2,?]"). */
#define CHECK_INFER(op, attrs, want, ...)                                                          \
    do {                                                                                           \
        const tg_type in_[] = {__VA_ARGS__};                                                       \
        infer_res r_ = infer_op(&(op), in_, (int)(sizeof in_ / sizeof in_[0]), (attrs), false);    \
        if (r_.st != TG_OK) print_error("unexpected error: %s\n", r_.msg);                         \
        assert_int_equal(r_.st, TG_OK);                                                            \
        assert_string_equal(r_.str, (want));                                                       \
    } while (0)

/* Infers and expects the status, with `sub` somewhere in the message. */
#define CHECK_INFER_FAIL(op, attrs, status, sub, ...)                                              \
    do {                                                                                           \
        const tg_type in_[] = {__VA_ARGS__};                                                       \
        infer_res r_ = infer_op(&(op), in_, (int)(sizeof in_ / sizeof in_[0]), (attrs), false);    \
        if (r_.st == TG_OK) print_error("unexpected success: %s\n", r_.str);                       \
        assert_int_equal(r_.st, (status));                                                         \
        if (!strstr(r_.msg, (sub))) print_error("message: %s\n", r_.msg);                          \
        assert_non_null(strstr(r_.msg, (sub)));                                                    \
    } while (0)

static inline tg_type type_of(const tg_tensor *t) { return mk_type(t->dtype, t->ndim, t->shape); }

/* Tensor from doubles (converted to dt), C order. */
static inline tg_tensor *mk_tensor(tg_dtype dt, int nd, const int64_t *shape, const double *v) {
    tg_tensor *t = tg_tensor_new(tg_ctx_default(), dt, nd, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t), idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        tg_store_f64(tg_tensor_at(t, idx), dt, v[i]);
        tg_index_next(nd, shape, idx);
    }
    return t;
}
#define SHAPE(...)                                                                                 \
    NARGS64(__VA_ARGS__), (const int64_t[]) { __VA_ARGS__ }
#define SHAPE0    0, NULL
#define VALS(...) ((const double[]){__VA_ARGS__})

/* 0, 1, 2, ... n-1 with the given shape (like np.arange(n).reshape(shape)). */
static inline tg_tensor *mk_arange(tg_dtype dt, int nd, const int64_t *shape) {
    tg_tensor *t = tg_tensor_new(tg_ctx_default(), dt, nd, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t), idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        tg_store_f64(tg_tensor_at(t, idx), dt, (double)i);
        tg_index_next(nd, shape, idx);
    }
    return t;
}

/* A view of t with every axis reversed (negative strides), like t[::-1, ::-1, ...]. */
static inline tg_tensor *mk_reversed(const tg_tensor *t) {
    int64_t strides[TG_MAX_DIMS], off = t->offset;
    for (int i = 0; i < t->ndim; i++) {
        strides[i] = -t->strides[i];
        if (t->shape[i] > 0) off += (t->shape[i] - 1) * t->strides[i];
    }
    if (tg_tensor_size(t) == 0) off = t->offset;
    tg_tensor *v = tg_tensor_view(t, t->ndim, t->shape, strides, off);
    assert_non_null(v);
    return v;
}

typedef struct run_res {
    tg_status st;
    tg_tensor *out; /* caller frees */
    char msg[512];
} run_res;

/* Run-time inference on the inputs' concrete types, then the reference kernel. */
static inline run_res run_op(const tg_op_def *op, tg_tensor *const *in, int nin,
                             const tg_aval *attrs) {
    run_res r;
    tg_type tin[8], touts[TG_MAX_OUTS];
    tg_tensor *outs[TG_MAX_OUTS] = {NULL};
    memset(&r, 0, sizeof r);
    for (int i = 0; i < nin; i++) tin[i] = type_of(in[i]);
    infer_res ir = infer_op(op, tin, nin, attrs, true);
    if (ir.st != TG_OK) {
        r.st = ir.st;
        memcpy(r.msg, ir.msg, sizeof r.msg);
        return r;
    }
    touts[0] = ir.out;
    if (!op->views) {
        outs[0] =
            tg_tensor_new(tg_ctx_default(), (tg_dtype)ir.out.dtype, ir.out.ndim, ir.out.shape);
        assert_non_null(outs[0]);
    }
    tg_kern k = {.ctx = tg_ctx_default(),
                 .node = NULL,
                 .attrs = attrs,
                 .in = in,
                 .nin = nin,
                 .out = outs,
                 .nout = 1,
                 .out_type = touts};
    r.st = op->ref(&k);
    if (r.st != TG_OK) {
        memcpy(r.msg, k.msg, sizeof r.msg);
        tg_tensor_free(outs[0]);
        return r;
    }
    assert_non_null(outs[0]);
    /* the kernel's output must have the type inference promised */
    tg_type got = type_of(outs[0]);
    assert_true(tg_type_equal(&got, &ir.out));
    r.out = outs[0];
    return r;
}

/* Expects the tensor's shape and values (C order; NaN equals NaN; tol absolute). */
static inline void check_tensor(const tg_tensor *t, tg_dtype dt, int nd, const int64_t *shape,
                                const double *want, double tol) {
    assert_non_null(t);
    assert_int_equal(t->dtype, dt);
    assert_int_equal(t->ndim, nd);
    for (int i = 0; i < nd; i++) assert_int_equal(t->shape[i], shape[i]);
    int64_t n = tg_tensor_size(t);
    for (int64_t i = 0; i < n; i++) {
        double g = tg_tensor_get_f64(t, i), w = want[i];
        if (isnan(w) && isnan(g)) continue;
        if (!(fabs(g - w) <= tol))
            print_error("element %lld: got %.17g, want %.17g\n", (long long)i, g, w);
        assert_true(fabs(g - w) <= tol);
    }
}
#define CHECK_T(t, dt, shp, vals) check_tensor((t), (dt), shp, (vals), 0.0)

/* Through the public API: sets the outputs of g, compiles it (reference mode) and calls
 * it. Returns the first failing status; out[] receives new tensors on success. */
static inline tg_status call_graph(tg_graph *g, tg_var *const *outs, int nout, tg_tensor *const *in,
                                   int nin, tg_tensor **out) {
    tg_fn *f = NULL;
    tg_status st = tg_graph_set_outputs(g, outs, nout);
    if (st == TG_OK) st = tg_graph_compile(g, NULL, &f);
    if (st == TG_OK) st = tg_fn_call(f, in, nin, out, nout);
    tg_fn_free(f);
    return st;
}

/* ---- whole programs through the public API ---- */

/* The module of .tg text (named t.tg); a parse error fails the test with its message. */
static inline tg_module *parse_text(const char *text) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, text, strlen(text), "t.tg", &m);
    if (st != TG_OK) fail_msg("parse: %s", tg_last_error());
    return m;
}

/* Compiles g with o and calls it on in[]; a failure fails the test with its message. */
static inline void compile_call(tg_graph *g, const tg_compile_opts *o, tg_tensor *const *in,
                                int nin, tg_tensor **out, int nout) {
    tg_fn *f = NULL;
    if (tg_graph_compile(g, o, &f) != TG_OK) fail_msg("compile: %s", tg_last_error());
    if (tg_fn_call(f, in, nin, out, nout) != TG_OK) fail_msg("call: %s", tg_last_error());
    tg_fn_free(f);
}

/* Compiles main of `text` in `mode` (no fallback for c; dbg: the backend debug mode checks)
 * and calls it on in[]. Returns the first failing status. */
static inline tg_status run_text(const char *text, tg_mode mode, tg_mode dbg, tg_tensor **in,
                                 int nin, tg_tensor **out, int nout) {
    tg_module *m = parse_text(text);
    tg_graph *g = tg_module_find(m, "main");
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .debug_backend = dbg, .no_fallback = true);
    tg_fn *f = NULL;
    tg_status st = tg_graph_compile(g, &o, &f);
    if (st == TG_OK) st = tg_fn_call(f, in, nin, out, nout);
    tg_fn_free(f);
    tg_module_free(m);
    return st;
}

/* a equals b element by element within rtol relative to max(1, |b|) (NaN equals NaN). */
static inline void assert_close(const tg_tensor *a, const tg_tensor *b, double rtol) {
    assert_int_equal(tg_tensor_dtype(a), tg_tensor_dtype(b));
    assert_int_equal(tg_tensor_size(a), tg_tensor_size(b));
    for (int64_t i = 0; i < tg_tensor_size(a); i++) {
        double x = tg_tensor_get_f64(a, i), y = tg_tensor_get_f64(b, i);
        if (isnan(x) && isnan(y)) continue;
        if (fabs(x - y) > rtol * fmax(1.0, fabs(y)))
            fail_msg("element %lld: %.17g vs %.17g", (long long)i, x, y);
    }
}

/* main of `text` run on in[] in `mode`, then by the reference interpreter: each of the nout
 * outputs agrees within rtol (assert_close). The outputs are freed, the inputs kept. */
static inline void check_against_reference(const char *text, tg_mode mode, tg_tensor **in, int nin,
                                           int nout, double rtol) {
    tg_tensor *got[TG_MAX_OUTS] = {0}, *want[TG_MAX_OUTS] = {0};
    assert_true(nout <= TG_MAX_OUTS);
    assert_int_equal(run_text(text, mode, 0, in, nin, got, nout), TG_OK);
    assert_int_equal(run_text(text, TG_MODE_REFERENCE, 0, in, nin, want, nout), TG_OK);
    for (int i = 0; i < nout; i++) {
        assert_close(got[i], want[i], rtol);
        tg_tensor_free(got[i]);
        tg_tensor_free(want[i]);
    }
}

#endif
