/* blas.c - the lowered BLAS forms gemm, gemv and ger, and their in-place variants
 * gemm_inplace, gemv_inplace and ger_inplace (made by the blas and inplace rewrite phases,
 * also writable by hand). One record per op; the in-place records share everything with
 * their plain op but declare `.destroys = 1` (output 0 may overwrite input 0). Each record
 * names the BLAS call it is (`.blas`, tg_blas_form), which the blas rewrite phase, the VM and
 * the C JIT read.
 *
 *  - gemm(C, A, B[, sa[, sb]], alpha=, beta=, trans_a=, trans_b=):
 *      alpha*sa * op(A) @ op(B) + beta*sb * C, with op(A) = A or Aᵀ ([M,K]), op(B) = B or
 *      Bᵀ ([K,N]); C broadcasts to [M,N] (a 0-d, [N], [1,N], [M,1] or [M,N] addend).
 *  - gemv(y, A, x[, sa[, sb]], alpha=, beta=, trans_a=): alpha*sa * op(A) @ x + beta*sb * y,
 *      x is [K], y broadcasts to [M].
 *  - ger(A, x, y[, sa[, sb]], alpha=, beta=): alpha*sa * outer(x, y) + beta*sb * A, x is
 *      [M], y [N], A broadcasts to [M,N].
 * sa and sb are optional 0-d inputs (symbolic scalars) multiplying alpha and beta; the
 * product and the accumulator have one float dtype (f32 or f64) after promotion (every
 * input, literals included, is converted to the common dtype of the two operands).
 * beta == 0 means the accumulator is not read at all (BLAS's rule: the output starts
 * uninitialised, NaN in it cannot leak); any other beta multiplies it as IEEE does.
 *
 * Invariants: the reference kernels are plain loops in double over any strides; each
 * output element is written after the accumulator element at the same place is read, so
 * they are correct when the output overwrites the accumulator (the in-place variants).
 * Gradients: the lowering runs in the rewrite pipeline, after tg_grad has built every
 * gradient, so these ops never meet the autodiff (TG_GRAD_UNDEFINED).
 */
#include "ops.h"

#include <stdio.h>

enum { A_ALPHA, A_BETA, A_TRANS_A, A_TRANS_B };

static const tg_attr_spec gemm_attrs[] = {
    {"alpha", TG_AS_FLOAT, 1, 0, {.kind = TG_ATTR_FLOAT, .f = 1.0}},
    {"beta", TG_AS_FLOAT, 1, 0, {.kind = TG_ATTR_FLOAT, .f = 1.0}},
    {"trans_a", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
    {"trans_b", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
};

/* ---- shared ---- */

/* Every input converted to the common dtype of the two operands (inputs 1 and 2). */
static tg_status promote_blas(tg_infer *ic, tg_dtype *want) {
    const tg_type *t[2] = {&ic->in[1], &ic->in[2]};
    tg_dtype dt = tg_promote_types(t, 2);
    for (int i = 0; i < ic->nin; i++) want[i] = dt;
    return TG_OK;
}

/* The checks shared by the three ops: float operands of one dtype, 0-d scalars. */
static tg_status check_common(tg_infer *ic, const char *what) {
    tg_dtype dt = (tg_dtype)ic->in[1].dtype;
    char ts[TG_TYPE_STR_MAX];
    if (dt != TG_DT_F32 && dt != TG_DT_F64)
        return tg_infer_fail(ic, TG_ETYPE, "%s takes float32 or float64 operands, not %s", what,
                             tg_type_str(&ic->in[1], ts, sizeof ts));
    for (int i = 0; i < ic->nin; i++)
        if (ic->in[i].dtype != dt)
            return tg_infer_fail(ic, TG_ETYPE, "input %d (%s) is not of the operands' dtype", i,
                                 tg_type_str(&ic->in[i], ts, sizeof ts));
    for (int i = 3; i < ic->nin; i++)
        if (ic->in[i].ndim != 0)
            return tg_infer_fail(ic, TG_ESHAPE, "scale input %d (%s) must be 0-d", i,
                                 tg_type_str(&ic->in[i], ts, sizeof ts));
    return TG_OK;
}

/* Extents must agree: -1 (unknown) agrees with anything at compile time. */
static bool dims_agree(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

/* The accumulator (input 0) broadcasts to out (rank nd, extents shape): it has at most nd
 * axes, each equal to the output's or a static 1 that broadcasts. */
static tg_status check_acc(tg_infer *ic, int nd, const int64_t *shape) {
    const tg_type *c = &ic->in[0];
    char ts[TG_TYPE_STR_MAX];
    bool ok = c->ndim <= nd;
    for (int i = 0; ok && i < c->ndim; i++) {
        int j = nd - c->ndim + i;
        int64_t e = c->shape[i];
        bool bcast = e == 1 && !(c->nobcast & (1u << i));
        ok = bcast || dims_agree(e, shape[j]);
        if (ic->runtime && !bcast && e != shape[j]) ok = false;
    }
    if (!ok)
        return tg_infer_fail(ic, TG_ESHAPE, "the accumulator %s does not broadcast to the result",
                             tg_type_str(c, ts, sizeof ts));
    return TG_OK;
}

static void set_out(tg_infer *ic, int nd, const int64_t *shape, uint32_t nobcast) {
    tg_type *o = &ic->out[0];
    memset(o, 0, sizeof *o);
    o->dtype = ic->in[1].dtype;
    o->ndim = (uint8_t)nd;
    for (int i = 0; i < nd; i++) o->shape[i] = shape[i];
    o->nobcast = nobcast;
}

static bool nobcast_bit(const tg_type *t, int axis) { return (t->nobcast >> axis) & 1u; }

static tg_status align_fail(tg_infer *ic, int64_t ka, int64_t kb) {
    return tg_infer_fail(ic, TG_ESHAPE, "operands do not align (%lld != %lld)", (long long)ka,
                         (long long)kb);
}

/* ---- inference ---- */

static tg_status infer_gemm(tg_infer *ic) {
    tg_status st = check_common(ic, "gemm");
    if (st != TG_OK) return st;
    const tg_type *a = &ic->in[1], *b = &ic->in[2];
    if (a->ndim != 2 || b->ndim != 2)
        return tg_infer_fail(ic, TG_ESHAPE, "the operands must be matrices (ranks %d and %d)",
                             a->ndim, b->ndim);
    bool ta = ic->attrs[A_TRANS_A].i != 0, tb = ic->attrs[A_TRANS_B].i != 0;
    int am = ta ? 1 : 0, bn = tb ? 0 : 1;
    int64_t ka = a->shape[1 - am], kb = b->shape[1 - bn];
    if (!dims_agree(ka, kb)) return align_fail(ic, ka, kb);
    int64_t shape[2] = {a->shape[am], b->shape[bn]};
    uint32_t nb = (nobcast_bit(a, am) ? 1u : 0u) | (nobcast_bit(b, bn) ? 2u : 0u);
    if ((st = check_acc(ic, 2, shape)) != TG_OK) return st;
    set_out(ic, 2, shape, nb);
    return TG_OK;
}

static tg_status infer_gemv(tg_infer *ic) {
    tg_status st = check_common(ic, "gemv");
    if (st != TG_OK) return st;
    const tg_type *a = &ic->in[1], *x = &ic->in[2];
    if (a->ndim != 2 || x->ndim != 1)
        return tg_infer_fail(ic, TG_ESHAPE, "needs a matrix and a vector (ranks %d and %d)",
                             a->ndim, x->ndim);
    bool ta = ic->attrs[A_TRANS_A].i != 0;
    int am = ta ? 1 : 0;
    int64_t ka = a->shape[1 - am];
    if (!dims_agree(ka, x->shape[0])) return align_fail(ic, ka, x->shape[0]);
    int64_t shape[1] = {a->shape[am]};
    if ((st = check_acc(ic, 1, shape)) != TG_OK) return st;
    set_out(ic, 1, shape, nobcast_bit(a, am) ? 1u : 0u);
    return TG_OK;
}

static tg_status infer_ger(tg_infer *ic) {
    tg_status st = check_common(ic, "ger");
    if (st != TG_OK) return st;
    const tg_type *x = &ic->in[1], *y = &ic->in[2];
    if (x->ndim != 1 || y->ndim != 1)
        return tg_infer_fail(ic, TG_ESHAPE, "needs two vectors (ranks %d and %d)", x->ndim,
                             y->ndim);
    int64_t shape[2] = {x->shape[0], y->shape[0]};
    if ((st = check_acc(ic, 2, shape)) != TG_OK) return st;
    set_out(ic, 2, shape, (nobcast_bit(x, 0) ? 1u : 0u) | (nobcast_bit(y, 0) ? 2u : 0u));
    return TG_OK;
}

/* ---- reference kernels ---- */

static double blas_scale(const tg_kern *k, int which) {
    double s = k->attrs[which == 0 ? A_ALPHA : A_BETA].f;
    int in = 3 + which;
    if (in < k->nin) s *= tg_load_f64(tg_tensor_data(k->in[in]), k->in[in]->dtype);
    return s;
}

/* The accumulator's element at output index (i, j) of a rank-nd output. */
static double acc_at(const tg_tensor *c, int nd, int64_t i, int64_t j) {
    int64_t full[2] = {i, j}, idx[2] = {0, 0};
    for (int d = 0; d < c->ndim; d++) {
        int64_t v = full[nd - c->ndim + d];
        idx[d] = c->shape[d] == 1 ? 0 : v;
    }
    return tg_load_f64(tg_tensor_at(c, idx), c->dtype);
}

/* out[i, j] = alpha * sum_k a(i, k) b(k, j) + beta * C[i, j] over an M x N x K problem given
 * by element accessors of strides (element units). */
typedef struct refmm {
    const char *a, *b; /* base of op(A)'s (0, 0) and op(B)'s (0, 0) */
    int64_t ai, ak;    /* strides of op(A) along i and k */
    int64_t bk, bj;    /* strides of op(B) along k and j */
    int64_t M, N, K;   /* extents */
    int nd;            /* rank of the output (1: gemv) */
} refmm;

static tg_status ref_run(tg_kern *k, const refmm *p) {
    const tg_tensor *c = k->in[0];
    tg_tensor *y = k->out[0];
    tg_dtype dt = y->dtype;
    size_t es = tg_dtype_size(dt);
    double alpha = blas_scale(k, 0), beta = blas_scale(k, 1);
    bool read_c = k->attrs[A_BETA].f != 0.0;
    for (int64_t i = 0; i < p->M; i++) {
        for (int64_t j = 0; j < p->N; j++) {
            double s = 0.0;
            for (int64_t q = 0; q < p->K; q++)
                s += tg_load_f64(p->a + (i * p->ai + q * p->ak) * (int64_t)es, dt) *
                     tg_load_f64(p->b + (q * p->bk + j * p->bj) * (int64_t)es, dt);
            double v = alpha * s;
            if (read_c) v += beta * acc_at(c, p->nd, i, j);
            int64_t oi[2] = {i, j};
            tg_store_f64(tg_tensor_at(y, oi), dt, v); /* a 1-D y reads oi[0] only */
        }
    }
    return TG_OK;
}

static bool out_is(const tg_tensor *y, int nd, int64_t m, int64_t n) {
    return y->ndim == nd && y->shape[0] == m && (nd == 1 || y->shape[1] == n);
}

static tg_status ref_gemm(tg_kern *k) {
    const tg_tensor *a = k->in[1], *b = k->in[2];
    bool ta = k->attrs[A_TRANS_A].i != 0, tb = k->attrs[A_TRANS_B].i != 0;
    refmm p = {.a = tg_tensor_data(a), .b = tg_tensor_data(b), .nd = 2};
    p.M = a->shape[ta ? 1 : 0];
    p.K = a->shape[ta ? 0 : 1];
    p.N = b->shape[tb ? 0 : 1];
    p.ai = a->strides[ta ? 1 : 0];
    p.ak = a->strides[ta ? 0 : 1];
    p.bk = b->strides[tb ? 1 : 0];
    p.bj = b->strides[tb ? 0 : 1];
    if (b->shape[tb ? 1 : 0] != p.K)
        return tg_kern_fail(k, TG_ESHAPE, "operands do not align (%lld != %lld)", (long long)p.K,
                            (long long)b->shape[tb ? 1 : 0]);
    if (!out_is(k->out[0], 2, p.M, p.N))
        return tg_kern_fail(k, TG_EINTERNAL, "output does not match the operands");
    return ref_run(k, &p);
}

static tg_status ref_gemv(tg_kern *k) {
    const tg_tensor *a = k->in[1], *x = k->in[2];
    bool ta = k->attrs[A_TRANS_A].i != 0;
    refmm p = {.a = tg_tensor_data(a), .b = tg_tensor_data(x), .nd = 1, .N = 1};
    p.M = a->shape[ta ? 1 : 0];
    p.K = a->shape[ta ? 0 : 1];
    p.ai = a->strides[ta ? 1 : 0];
    p.ak = a->strides[ta ? 0 : 1];
    p.bk = x->strides[0];
    if (x->shape[0] != p.K)
        return tg_kern_fail(k, TG_ESHAPE, "operands do not align (%lld != %lld)", (long long)p.K,
                            (long long)x->shape[0]);
    if (!out_is(k->out[0], 1, p.M, 1))
        return tg_kern_fail(k, TG_EINTERNAL, "output does not match the operands");
    return ref_run(k, &p);
}

static tg_status ref_ger(tg_kern *k) {
    const tg_tensor *x = k->in[1], *y = k->in[2];
    refmm p = {.a = tg_tensor_data(x), .b = tg_tensor_data(y), .nd = 2, .K = 1};
    p.M = x->shape[0];
    p.N = y->shape[0];
    p.ai = x->strides[0];
    p.bj = y->strides[0];
    if (!out_is(k->out[0], 2, p.M, p.N))
        return tg_kern_fail(k, TG_EINTERNAL, "output does not match the operands");
    return ref_run(k, &p);
}

#define BLAS_RECORD(var, nm, nattr, inf, rf, form, destroy)                                        \
    const tg_op_def var = {                                                                        \
        .name = nm,                                                                                \
        .min_in = 3,                                                                               \
        .max_in = 5,                                                                               \
        .nout = 1,                                                                                 \
        .kind = TG_KIND_LINALG,                                                                    \
        .attrs = gemm_attrs,                                                                       \
        .nattrs = nattr,                                                                           \
        .promote = promote_blas,                                                                   \
        .infer = inf,                                                                              \
        .ref = rf,                                                                                 \
        .destroys = destroy,                                                                       \
        .blas = form,                                                                              \
        .grad = TG_GRAD_UNDEFINED,                                                                 \
    }

/* gemm has alpha, beta, trans_a, trans_b; gemv the first three; ger alpha and beta. */
BLAS_RECORD(tg_op_gemm, "gemm", 4, infer_gemm, ref_gemm, TG_BLAS_GEMM, 0);
BLAS_RECORD(tg_op_gemv, "gemv", 3, infer_gemv, ref_gemv, TG_BLAS_GEMV, 0);
BLAS_RECORD(tg_op_ger, "ger", 2, infer_ger, ref_ger, TG_BLAS_GER, 0);
BLAS_RECORD(tg_op_gemm_inplace, "gemm_inplace", 4, infer_gemm, ref_gemm, TG_BLAS_GEMM, 1u);
BLAS_RECORD(tg_op_gemv_inplace, "gemv_inplace", 3, infer_gemv, ref_gemv, TG_BLAS_GEMV, 1u);
BLAS_RECORD(tg_op_ger_inplace, "ger_inplace", 2, infer_ger, ref_ger, TG_BLAS_GER, 1u);
