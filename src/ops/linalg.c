/* linalg.c - dot, matmul and outer with NumPy's rules (the lowered BLAS forms gemm, gemv
 * and ger live with the BLAS rewrite, not here), and diag, the diagonal of a batch of
 * matrices.
 *
 * One record per op. Both inputs are promoted to one dtype (NEP 50) before inference.
 *  - dot: a 0-d operand multiplies (NumPy allows it); otherwise it contracts the last
 *    axis of a with the last axis of a 1-D b or the second-to-last axis of b, giving
 *    a.shape[:-1] + b.shape without that axis (1-D.1-D is a scalar).
 *  - matmul: no 0-d operands; a 1-D a gains a leading 1 and a 1-D b a trailing 1, both
 *    removed from the result; the batch axes broadcast like NumPy (with the '?' rules):
 *    a Blockwise op of signature "(m?,n),(n,p?)->(m?,p?)" (blockwise.h).
 *  - outer: flattens both inputs: [size(a), size(b)].
 *  - diag: the main diagonal of the last two axes, over any leading (batch) axes, as
 *    numpy.linalg.diagonal (np.diagonal(x, axis1=-2, axis2=-1)): [..., m, n] gives
 *    [..., min(m, n)], a copy in x's dtype. A Blockwise op of signature "(m,n)->(k)"
 *    (k = min(m, n)): fused programs run it per block of a batch, so that
 *    sum(log(diag(cholesky(A))), axis=-1) computes n logarithms per block, not n^2.
 * Invariants: the reference kernels are plain loops over any strides (but matmul of two
 * float matrices of its dtype that BLAS can take: one gemm): floats multiply and
 * accumulate in double (rounded once at the store), integers in uint64 (wrapping, no
 * undefined overflow), bool is the logical or of ands; an empty contraction gives zeros.
 */
#include "blockwise.h"
#include "ops.h"

#include "../core/blas.h"

#include <cblas.h>
#include <limits.h>
#include <stdio.h>

/* ---- shared ---- */

static tg_status promote_common(tg_infer *ic, tg_dtype *want) {
    const tg_type *t[2] = {&ic->in[0], &ic->in[1]};
    tg_dtype dt = tg_promote_types(t, 2);
    want[0] = want[1] = dt;
    return TG_OK;
}

static tg_dtype result_dtype(const tg_infer *ic) {
    if (ic->in[0].dtype == ic->in[1].dtype) return (tg_dtype)ic->in[0].dtype;
    const tg_type *t[2] = {&ic->in[0], &ic->in[1]};
    return tg_promote_types(t, 2);
}

/* Names the core signature of an op that has one (matmul). */
static tg_status align_fail(tg_infer *ic, int64_t ka, int64_t kb) {
    char as[TG_TYPE_STR_MAX], bs[TG_TYPE_STR_MAX];
    const char *sig = ic->op->signature;
    return tg_infer_fail(ic, TG_ESHAPE, "%s and %s do not align (%lld != %lld)%s%s",
                         tg_type_str(&ic->in[0], as, sizeof as),
                         tg_type_str(&ic->in[1], bs, sizeof bs), (long long)ka, (long long)kb,
                         sig ? " in the signature " : "", sig ? sig : "");
}

/* Accumulator for one output element, by the category of the output dtype. */
typedef struct macc {
    double f;   /* floats */
    uint64_t u; /* integers (wraps) */
    bool b;     /* bool: or of ands */
} macc;

static bool truthy(const void *p, tg_dtype dt) {
    return tg_dtype_is_float(dt) ? tg_load_f64(p, dt) != 0.0 : tg_load_i64(p, dt) != 0;
}

/* acc += a * b in the arithmetic of dtype odt. */
static void macc_add(macc *m, const void *pa, tg_dtype da, const void *pb, tg_dtype db,
                     tg_dtype odt) {
    if (tg_dtype_is_float(odt))
        m->f += tg_load_f64(pa, da) * tg_load_f64(pb, db);
    else if (odt == TG_DT_BOOL)
        m->b = m->b || (truthy(pa, da) && truthy(pb, db));
    else
        m->u += (uint64_t)tg_load_i64(pa, da) * (uint64_t)tg_load_i64(pb, db);
}

static void macc_store(const macc *m, void *out, tg_dtype odt) {
    if (tg_dtype_is_float(odt))
        tg_store_f64(out, odt, m->f);
    else if (odt == TG_DT_BOOL)
        tg_store_i64(out, odt, m->b ? 1 : 0);
    else
        tg_store_i64(out, odt, tg_ops_wrap_i64(m->u));
}

/* The kernel's output must have the extents the inputs imply. */
static bool out_matches(const tg_tensor *y, int nd, const int64_t *shape) {
    if (y->ndim != nd) return false;
    for (int i = 0; i < nd; i++)
        if (y->shape[i] != shape[i]) return false;
    return true;
}

/* ---- gradients ----
 * NumPy's rules for every rank combination, as graph of dot/matmul/transpose/reshape:
 *  - dot with a 0-d operand is a product: the 0-d side gets sum(g * other), the other
 *    side g * the 0-d value;
 *  - 1-D.1-D: g * b and g * a;
 *  - N-D.1-D: ga = g[..., None] * b, gb = dot(g, a) for N = 2, else the sum of
 *    a * g[..., None] over the leading axes;
 *  - 1-D.M-D: ga = dot(b, g) for M = 2, else the sum of b * g[..., None, :] over every
 *    axis but the contracted one; gb = a[:, None] * g[..., None, :];
 *  - N-D.M-D: for N = M = 2, ga = g . b^T and gb = a^T . g; otherwise a, b and g are
 *    brought to 2-D (a as [prod(A), K], b as [K, prod(B) * P] after moving K first, g as
 *    [prod(A), prod(B) * P]), the 2-D rule applied, and the results reshaped back (the
 *    extents come from shape() where they are '?').
 *  - matmul: a 1-D a gains a leading and a 1-D b a trailing 1 (g gains it too), then
 *    ga = g @ swap(b) and gb = swap(a) @ g, summed over the batch axes along which the
 *    operand was broadcast (tg_grad_unbroadcast), and the added axis removed.
 *  - outer: ga = dot(g, ravel(b)) and gb = dot(ravel(a), g), reshaped to the operands.
 * Integer and bool operands get no gradient (their results are not floats).
 */

/* v with its last two axes swapped. */
static tg_var *swap_last(tg_graph *g, tg_var *v) {
    if (!v) return NULL;
    int nd = v->type.ndim;
    int64_t perm[TG_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    perm[nd - 1] = nd - 2;
    perm[nd - 2] = nd - 1;
    return tg_transpose(g, v, perm);
}

static tg_var *expand_at(tg_graph *g, tg_var *v, int64_t axis) {
    tg_attr a = TG_A_INTS("axis", &axis, 1);
    return v ? tg_apply(g, "expand_dims", &v, 1, &a, 1) : NULL;
}

static tg_var *squeeze_at(tg_graph *g, tg_var *v, int64_t axis) {
    tg_attr a = TG_A_INTS("axis", &axis, 1);
    return v ? tg_apply(g, "squeeze", &v, 1, &a, 1) : NULL;
}

/* Sum of v over every axis except `keep` (-1: over all). */
static tg_var *sum_except(tg_graph *g, tg_var *v, int keep) {
    int64_t axes[TG_MAX_DIMS];
    int na = 0;
    if (!v) return NULL;
    for (int i = 0; i < v->type.ndim; i++)
        if (i != keep) axes[na++] = i;
    return na ? tg_reduce(g, "sum", v, axes, na, false) : v;
}

/* Product of the extents dims[0..n) as a 0-d i64 value (a literal when all are static). */
static tg_var *dims_product(tg_graph *g, tg_var *const *dims, int n) {
    tg_var *p = NULL;
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        const tg_var *d = dims[i];
        if (!d) return NULL;
        if (d->kind == TG_VAR_CONST && d->value) {
            int64_t e = tg_load_i64(tg_tensor_data(d->value), d->value->dtype);
            if (__builtin_mul_overflow(known, e, &known))
                return tg_ir_fail(g, TG_ELIMIT, "dot gradient: the operands are too large");
        } else
            p = p ? tg_mul(g, p, dims[i]) : dims[i];
    }
    if (!p) return tg_literal_int(g, known);
    return known == 1 ? p : tg_mul(g, p, tg_literal_int(g, known));
}

/* The N-D.M-D case (N >= 2, M >= 2). */
static tg_status dot_nd_grad(tg_graph *g, const tg_node *n, tg_var *gy, tg_var **gin) {
    tg_var *a = n->in[0], *b = n->in[1];
    int na = a->type.ndim, nb = b->type.ndim;
    bool fa = tg_ops_float_in(n, 0), fb = tg_ops_float_in(n, 1);
    if (nb == 2) { /* ga = g . b^T: [A..., P] . [P, K] */
        if (fa) gin[0] = tg_dot(g, gy, tg_transpose(g, b, NULL));
        if (na == 2 && fb) gin[1] = tg_dot(g, tg_transpose(g, a, NULL), gy);
        if (na == 2 || !fb) return g->status;
    }
    /* a as [prod(A), K], b moved to [K, B..., P] and seen as [K, prod(B) * P], g as
     * [prod(A), prod(B) * P] */
    tg_var *ad[TG_MAX_DIMS], *bd[TG_MAX_DIMS];
    if (!tg_grad_dims(g, a, ad) || !tg_grad_dims(g, b, bd)) return g->status;
    int64_t perm[TG_MAX_DIMS], inv[TG_MAX_DIMS];
    perm[0] = nb - 2;
    for (int i = 0; i < nb - 2; i++) perm[i + 1] = i;
    perm[nb - 1] = nb - 1;
    for (int i = 0; i < nb; i++) inv[perm[i]] = i;
    tg_var *nA = dims_product(g, ad, na - 1);
    tg_var *nBP = dims_product(g, (tg_var *[]){dims_product(g, bd, nb - 2), bd[nb - 1]}, 2);
    tg_var *bt = nb == 2 ? b : tg_transpose(g, b, perm);
    tg_var *a2 = tg_grad_reshape(g, a, 2, (tg_var *[]){nA, ad[na - 1]});
    tg_var *b2 = tg_grad_reshape(g, bt, 2, (tg_var *[]){bd[nb - 2], nBP});
    tg_var *g2 = tg_grad_reshape(g, gy, 2, (tg_var *[]){nA, nBP});
    if (fa && nb > 2) gin[0] = tg_grad_reshape_like(g, tg_dot(g, g2, tg_transpose(g, b2, NULL)), a);
    if (fb) {
        tg_var *gbt = tg_grad_reshape_like(g, tg_dot(g, tg_transpose(g, a2, NULL), g2), bt);
        gin[1] = nb == 2 || !gbt ? gbt : tg_transpose(g, gbt, inv);
    }
    return g->status;
}

static tg_status vjp_dot(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *a = n->in[0], *b = n->in[1], *gy = gout[0];
    int na = a->type.ndim, nb = b->type.ndim;
    bool fa = tg_ops_float_in(n, 0), fb = tg_ops_float_in(n, 1);
    if (na == 0 || nb == 0) { /* a product with a scalar: the 0-d side sums */
        if (fa) gin[0] = na == 0 ? sum_except(g, tg_mul(g, gy, b), -1) : tg_mul(g, gy, b);
        if (fb) gin[1] = nb == 0 ? sum_except(g, tg_mul(g, gy, a), -1) : tg_mul(g, gy, a);
        return g->status;
    }
    if (na == 1 && nb == 1) {
        if (fa) gin[0] = tg_mul(g, gy, b);
        if (fb) gin[1] = tg_mul(g, gy, a);
        return g->status;
    }
    if (nb == 1) { /* [A..., K] . [K] -> [A...] */
        if (fa) gin[0] = tg_mul(g, expand_at(g, gy, -1), b);
        if (fb)
            gin[1] = na == 2 ? tg_dot(g, gy, a)
                             : sum_except(g, tg_mul(g, a, expand_at(g, gy, -1)), na - 1);
        return g->status;
    }
    if (na == 1) {                         /* [K] . [B..., K, P] -> [B..., P] */
        tg_var *ge = expand_at(g, gy, -2); /* [B..., 1, P] */
        if (fa) gin[0] = nb == 2 ? tg_dot(g, b, gy) : sum_except(g, tg_mul(g, b, ge), nb - 2);
        if (fb) gin[1] = tg_mul(g, expand_at(g, a, -1), ge);
        return g->status;
    }
    return dot_nd_grad(g, n, gy, gin);
}

/* ---- dot ---- */

static tg_status infer_dot(tg_infer *ic) {
    const tg_type *a = &ic->in[0], *b = &ic->in[1];
    tg_type *o = &ic->out[0];
    memset(o, 0, sizeof *o);
    o->dtype = (uint8_t)result_dtype(ic);
    if (a->ndim == 0 || b->ndim == 0) { /* multiply by a scalar */
        const tg_type *t = a->ndim == 0 ? b : a;
        o->ndim = t->ndim;
        o->nobcast = t->nobcast;
        for (int i = 0; i < t->ndim; i++) o->shape[i] = t->shape[i];
        return TG_OK;
    }
    int kb = b->ndim >= 2 ? b->ndim - 2 : 0;
    int64_t ea = a->shape[a->ndim - 1], eb = b->shape[kb];
    if (ea >= 0 && eb >= 0 && ea != eb) return align_fail(ic, ea, eb);
    int nd = a->ndim - 1 + b->ndim - 1;
    if (nd > TG_MAX_DIMS) {
        char as[TG_TYPE_STR_MAX], bs[TG_TYPE_STR_MAX];
        return tg_infer_fail(ic, TG_ELIMIT,
                             "the result of %s and %s would have %d dimensions "
                             "(at most %d)",
                             tg_type_str(a, as, sizeof as), tg_type_str(b, bs, sizeof bs), nd,
                             TG_MAX_DIMS);
    }
    int j = 0;
    for (int i = 0; i < a->ndim - 1; i++, j++) {
        o->shape[j] = a->shape[i];
        if (a->nobcast & (1u << i)) o->nobcast |= 1u << j;
    }
    for (int i = 0; i < b->ndim; i++) {
        if (i == kb) continue;
        o->shape[j] = b->shape[i];
        if (b->nobcast & (1u << i)) o->nobcast |= 1u << j;
        j++;
    }
    o->ndim = (uint8_t)nd;
    return TG_OK;
}

static tg_status ref_dot(tg_kern *k) {
    const tg_tensor *a = k->in[0], *b = k->in[1];
    tg_tensor *y = k->out[0];
    tg_dtype odt = y->dtype;
    int64_t oidx[TG_MAX_DIMS] = {0}, ia[TG_MAX_DIMS], ib[TG_MAX_DIMS];
    int64_t n = tg_tensor_size(y);
    if (a->ndim == 0 || b->ndim == 0) {
        const tg_tensor *t = a->ndim == 0 ? b : a;
        if (!out_matches(y, t->ndim, t->shape))
            return tg_kern_fail(k, TG_EINTERNAL, "output does not match the operands");
        for (int64_t e = 0; e < n; e++) {
            macc m = {0};
            const void *pa = tg_tensor_at(a, a->ndim == 0 ? ia : oidx);
            const void *pb = tg_tensor_at(b, b->ndim == 0 ? ib : oidx);
            macc_add(&m, pa, a->dtype, pb, b->dtype, odt);
            macc_store(&m, tg_tensor_at(y, oidx), odt);
            tg_index_next(y->ndim, y->shape, oidx);
        }
        return TG_OK;
    }
    int ka = a->ndim - 1, kb = b->ndim >= 2 ? b->ndim - 2 : 0;
    int64_t K = a->shape[ka];
    if (b->shape[kb] != K)
        return tg_kern_fail(k, TG_ESHAPE, "operands do not align (%lld != %lld)", (long long)K,
                            (long long)b->shape[kb]);
    int64_t shape[TG_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < ka; i++) shape[nd++] = a->shape[i];
    for (int i = 0; i < b->ndim; i++)
        if (i != kb) shape[nd++] = b->shape[i];
    if (!out_matches(y, nd, shape))
        return tg_kern_fail(k, TG_EINTERNAL, "output does not match the operands");
    for (int64_t e = 0; e < n; e++) {
        /* oidx = a's free indices, then b's free indices */
        for (int i = 0; i < ka; i++) ia[i] = oidx[i];
        for (int i = 0, j = ka; i < b->ndim; i++)
            if (i != kb) ib[i] = oidx[j++];
        macc m = {0};
        for (int64_t c = 0; c < K; c++) {
            ia[ka] = c;
            ib[kb] = c;
            macc_add(&m, tg_tensor_at(a, ia), a->dtype, tg_tensor_at(b, ib), b->dtype, odt);
        }
        macc_store(&m, tg_tensor_at(y, oidx), odt);
        tg_index_next(nd, shape, oidx);
    }
    return TG_OK;
}

/* ---- batching (vectorize) ----
 * matmul maps over leading axes already: the batch axis is one more. A batched operand whose
 * core is a vector becomes a matrix (a row on the left, a column on the right: otherwise
 * its batch axis would be taken for rows), and the axis so added leaves the result again;
 * batched operands are padded so that their stacks of matrices line up. */
static tg_status batch_matmul(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                              tg_var **out, bool *ob) {
    (void)ob;
    tg_graph *g = b->g;
    tg_var *x[2];
    int depth = 0;
    bool row = batched[0] && in[0]->type.ndim == 2, col = batched[1] && in[1]->type.ndim == 2;
    /* vectors against a vector or a matrix: the batch folds into the rows of one product */
    if (row && !batched[1] && in[1]->type.ndim <= 2) {
        out[0] = tg_matmul(g, in[0], in[1]);
        return g->status;
    }
    if (col && !batched[0] && in[0]->type.ndim <= 2) {
        tg_var *a = in[0]->type.ndim == 2 ? tg_transpose(g, in[0], NULL) : in[0];
        out[0] = tg_matmul(g, in[1], a);
        return g->status;
    }
    if (row && col && tg_dtype_is_float((tg_dtype)n->out[0]->type.dtype)) { /* inner products */
        int64_t last = -1;
        tg_var *p = tg_mul(g, in[0], in[1]);
        out[0] = p ? tg_reduce(g, "sum", p, &last, 1, false) : NULL;
        return g->status;
    }
    x[0] = row ? expand_at(g, in[0], 1) : in[0];
    x[1] = col ? expand_at(g, in[1], 2) : in[1];
    for (int k = 0; k < 2 && x[k]; k++) {
        int stack = x[k]->type.ndim - batched[k] - 2;
        if (stack > depth) depth = stack;
    }
    for (int k = 0; k < 2; k++)
        if (batched[k]) x[k] = tg_batch_pad(b, x[k], depth + 2);
    tg_var *y = tg_matmul(g, x[0], x[1]);
    if (!y) return g->status;
    int64_t sq[2];
    int nsq = 0;
    if (row) sq[nsq++] = x[1]->type.ndim >= 2 ? -2 : -1;
    if (col) sq[nsq++] = -1;
    tg_attr a = TG_A_INTS("axis", sq, nsq);
    out[0] = nsq ? tg_apply(g, "squeeze", &y, 1, &a, 1) : y;
    return g->status;
}

/* dot is matmul where b is at most a matrix or a is a vector, and a product with a 0-d
 * operand is a multiplication; the other forms pair the stacks of both operands, which a
 * batch cannot take. */
static tg_status batch_dot(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                           tg_var **out, bool *ob) {
    int na = n->in[0]->type.ndim, nb = n->in[1]->type.ndim;
    if (na == 0 || nb == 0) {
        int core = na > nb ? na : nb;
        tg_var *x[2];
        for (int k = 0; k < 2; k++) x[k] = batched[k] ? tg_batch_pad(b, in[k], core) : in[k];
        out[0] = tg_mul(b->g, x[0], x[1]);
        return b->g->status;
    }
    if (nb <= 2 || na == 1) return batch_matmul(b, n, in, batched, out, ob);
    return tg_batch_refuse(b, n, "dot of a stack of matrices with a stack of matrices");
}

const tg_op_def tg_op_dot = {
    .name = "dot",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_LINALG,
    .promote = promote_common,
    .infer = infer_dot,
    .ref = ref_dot,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_dot,
    .batch = batch_dot,
};

/* ---- matmul ---- */

static tg_status infer_matmul(tg_infer *ic) {
    const tg_type *a = &ic->in[0], *b = &ic->in[1];
    char as[TG_TYPE_STR_MAX], bs[TG_TYPE_STR_MAX];
    for (int i = 0; i < 2; i++)
        if (ic->in[i].ndim == 0)
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "input operand %d (%s) does not have enough dimensions (has 0, "
                                 "needs at least 1)",
                                 i, tg_type_str(&ic->in[i], as, sizeof as));
    bool a1 = a->ndim == 1, b1 = b->ndim == 1;
    int64_t ka = a->shape[a->ndim - 1], kb = b1 ? b->shape[0] : b->shape[b->ndim - 2];
    if (ka >= 0 && kb >= 0 && ka != kb) return align_fail(ic, ka, kb);
    /* the batch axes, as types of their own, broadcast with the shared rules */
    tg_type ta = *a, tb = *b, tbat;
    ta.ndim = (uint8_t)(a1 ? 0 : a->ndim - 2);
    tb.ndim = (uint8_t)(b1 ? 0 : b->ndim - 2);
    ta.nobcast &= (1u << ta.ndim) - 1;
    tb.nobcast &= (1u << tb.ndim) - 1;
    const tg_type *bt[2] = {&ta, &tb};
    if (!tg_broadcast_types(ic, bt, 2, &tbat)) {
        char why[sizeof ic->msg];
        memcpy(why, ic->msg, sizeof why);
        why[sizeof why - 1] = '\0';
        tg_status st = ic->status != TG_OK ? ic->status : TG_ESHAPE;
        ic->status = TG_OK;
        return tg_infer_fail(ic, st, "%s and %s: the batch axes do not broadcast (%s)",
                             tg_type_str(a, as, sizeof as), tg_type_str(b, bs, sizeof bs), why);
    }
    tg_type *o = &ic->out[0];
    memset(o, 0, sizeof *o);
    o->dtype = (uint8_t)result_dtype(ic);
    int nd = tbat.ndim;
    for (int i = 0; i < nd; i++) o->shape[i] = tbat.shape[i];
    o->nobcast = tbat.nobcast & ((1u << nd) - 1);
    if (!a1) {
        if (a->nobcast & (1u << (a->ndim - 2))) o->nobcast |= 1u << nd;
        o->shape[nd++] = a->shape[a->ndim - 2];
    }
    if (!b1) {
        if (b->nobcast & (1u << (b->ndim - 1))) o->nobcast |= 1u << nd;
        o->shape[nd++] = b->shape[b->ndim - 1];
    }
    o->ndim = (uint8_t)nd;
    return TG_OK;
}

/* A 2-D operand as BLAS takes it (row-major): one unit stride and a leading dimension. */
static bool blas_operand(const tg_tensor *t, CBLAS_TRANSPOSE *tr, int *ld) {
    int64_t r = t->shape[0], c = t->shape[1];
    if (t->strides[1] == 1 && t->strides[0] >= (c > 1 ? c : 1) && t->strides[0] <= INT_MAX) {
        *tr = CblasNoTrans;
        *ld = (int)(t->strides[0] > 0 ? t->strides[0] : 1);
        return true;
    }
    if (t->strides[0] == 1 && t->strides[1] >= (r > 1 ? r : 1) && t->strides[1] <= INT_MAX) {
        *tr = CblasTrans;
        *ld = (int)t->strides[1];
        return true;
    }
    return false;
}

/* y = a @ b by one BLAS gemm: float operands of y's dtype, 2-D, each with a unit stride, y
 * contiguous, extents within BLAS's integers. The per-block product of a fused Blockwise
 * node (fused.h) runs here, as the LAPACK ops run LAPACK. false: not such a product. */
static bool matmul_blas(const tg_tensor *a, const tg_tensor *b, tg_tensor *y) {
    tg_dtype dt = y->dtype;
    CBLAS_TRANSPOSE ta, tb;
    int lda, ldb;
    if ((dt != TG_DT_F32 && dt != TG_DT_F64) || a->dtype != dt || b->dtype != dt || a->ndim != 2 ||
        b->ndim != 2 || y->ndim != 2)
        return false;
    int64_t M = a->shape[0], K = a->shape[1], N = b->shape[1];
    if (M < 1 || N < 1 || K < 1 || M > INT_MAX || N > INT_MAX || K > INT_MAX ||
        y->strides[1] != 1 || y->strides[0] != N || !blas_operand(a, &ta, &lda) ||
        !blas_operand(b, &tb, &ldb))
        return false;
    tg_blas_enter();
    if (dt == TG_DT_F64)
        cblas_dgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0, tg_tensor_data(a), lda,
                    tg_tensor_data(b), ldb, 0.0, tg_tensor_data(y), (int)N);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0f, tg_tensor_data(a), lda,
                    tg_tensor_data(b), ldb, 0.0f, tg_tensor_data(y), (int)N);
    tg_blas_leave();
    return true;
}

static tg_status ref_matmul(tg_kern *k) {
    const tg_tensor *a = k->in[0], *b = k->in[1];
    tg_tensor *y = k->out[0];
    tg_dtype odt = y->dtype;
    if (a->ndim == 2 && b->ndim == 2 && a->shape[1] == b->shape[0] && y->ndim == 2 &&
        y->shape[0] == a->shape[0] && y->shape[1] == b->shape[1] && matmul_blas(a, b, y))
        return TG_OK;
    if (a->ndim == 0 || b->ndim == 0)
        return tg_kern_fail(k, TG_ESHAPE, "input operand %d does not have enough dimensions",
                            a->ndim == 0 ? 0 : 1);
    bool a1 = a->ndim == 1, b1 = b->ndim == 1;
    int nba = a1 ? 0 : a->ndim - 2, nbb = b1 ? 0 : b->ndim - 2;
    int nbat = nba > nbb ? nba : nbb;
    int64_t bshape[TG_MAX_DIMS], shape[TG_MAX_DIMS];
    for (int t = 0; t < nbat; t++) {
        int ta = t - (nbat - nba), tb = t - (nbat - nbb);
        int64_t ea = ta >= 0 ? a->shape[ta] : 1, eb = tb >= 0 ? b->shape[tb] : 1;
        if (ea != eb && ea != 1 && eb != 1)
            return tg_kern_fail(k, TG_ESHAPE, "batch axes do not broadcast (%lld vs %lld)",
                                (long long)ea, (long long)eb);
        bshape[t] = ea == 1 ? eb : ea;
    }
    int64_t M = a1 ? 1 : a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
    int64_t N = b1 ? 1 : b->shape[b->ndim - 1], Kb = b1 ? b->shape[0] : b->shape[b->ndim - 2];
    if (K != Kb)
        return tg_kern_fail(k, TG_ESHAPE, "operands do not align (%lld != %lld)", (long long)K,
                            (long long)Kb);
    int nd = 0;
    for (int t = 0; t < nbat; t++) shape[nd++] = bshape[t];
    if (!a1) shape[nd++] = M;
    if (!b1) shape[nd++] = N;
    if (!out_matches(y, nd, shape))
        return tg_kern_fail(k, TG_EINTERNAL, "output does not match the operands");
    int64_t nbatch = 1;
    for (int t = 0; t < nbat; t++) nbatch *= bshape[t];
    int64_t bi[TG_MAX_DIMS] = {0}, ia[TG_MAX_DIMS], ib[TG_MAX_DIMS], oi[TG_MAX_DIMS];
    for (int64_t e = 0; e < nbatch; e++) {
        for (int t = 0; t < nba; t++) {
            int s = t + (nbat - nba);
            ia[t] = a->shape[t] == 1 ? 0 : bi[s];
        }
        for (int t = 0; t < nbb; t++) {
            int s = t + (nbat - nbb);
            ib[t] = b->shape[t] == 1 ? 0 : bi[s];
        }
        for (int t = 0; t < nbat; t++) oi[t] = bi[t];
        for (int64_t m = 0; m < M; m++) {
            for (int64_t n = 0; n < N; n++) {
                macc acc = {0};
                for (int64_t c = 0; c < K; c++) {
                    if (!a1) ia[nba] = m;
                    ia[a->ndim - 1] = c;
                    ib[b1 ? 0 : nbb] = c;
                    if (!b1) ib[nbb + 1] = n;
                    macc_add(&acc, tg_tensor_at(a, ia), a->dtype, tg_tensor_at(b, ib), b->dtype,
                             odt);
                }
                int j = nbat;
                if (!a1) oi[j++] = m;
                if (!b1) oi[j++] = n;
                macc_store(&acc, tg_tensor_at(y, oi), odt);
            }
        }
        tg_index_next(nbat, bshape, bi);
    }
    return TG_OK;
}

static tg_status vjp_matmul(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *a = n->in[0], *b = n->in[1], *gy = gout[0];
    bool a1 = a->type.ndim == 1, b1 = b->type.ndim == 1;
    tg_var *ae = a1 ? expand_at(g, a, 0) : a, *be = b1 ? expand_at(g, b, -1) : b;
    if (a1) gy = expand_at(g, gy, b1 ? -1 : -2);
    if (b1) gy = expand_at(g, gy, -1);
    if (tg_ops_float_in(n, 0) && ae) {
        tg_var *ga = tg_grad_unbroadcast(g, tg_matmul(g, gy, swap_last(g, be)), &ae->type);
        gin[0] = a1 ? squeeze_at(g, ga, 0) : ga;
    }
    if (tg_ops_float_in(n, 1) && be) {
        tg_var *gb = tg_grad_unbroadcast(g, tg_matmul(g, swap_last(g, ae), gy), &be->type);
        gin[1] = b1 ? squeeze_at(g, gb, -1) : gb;
    }
    return g->status;
}

const tg_op_def tg_op_matmul = {
    .name = "matmul",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_LINALG,
    .promote = promote_common,
    .infer = infer_matmul,
    .ref = ref_matmul,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_matmul,
    /* NumPy's; its kernel and inference handle the batch themselves (BLAS lowering reads
       the batch from the operands' ranks) */
    .signature = "(m?,n),(n,p?)->(m?,p?)",
    .batch = batch_matmul,
};

/* ---- outer ---- */

/* Static element count, -1 when a '?' is involved; false on overflow. */
static bool type_size(const tg_type *t, int64_t *out) {
    int64_t p = 1;
    bool unknown = false;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 0) {
            *out = 0;
            return true;
        }
        if (t->shape[i] < 0) unknown = true;
    }
    for (int i = 0; i < t->ndim && !unknown; i++) {
        if (t->shape[i] > INT64_MAX / p) return false;
        p *= t->shape[i];
    }
    *out = unknown ? -1 : p;
    return true;
}

static tg_status infer_outer(tg_infer *ic) {
    tg_type *o = &ic->out[0];
    int64_t sz[2];
    for (int i = 0; i < 2; i++) {
        if (!type_size(&ic->in[i], &sz[i])) {
            char ts[TG_TYPE_STR_MAX];
            return tg_infer_fail(ic, TG_ELIMIT, "%s has too many elements",
                                 tg_type_str(&ic->in[i], ts, sizeof ts));
        }
    }
    memset(o, 0, sizeof *o);
    o->dtype = (uint8_t)result_dtype(ic);
    o->ndim = 2;
    o->shape[0] = sz[0];
    o->shape[1] = sz[1];
    return TG_OK;
}

static tg_status ref_outer(tg_kern *k) {
    const tg_tensor *a = k->in[0], *b = k->in[1];
    tg_tensor *y = k->out[0];
    tg_dtype odt = y->dtype;
    int64_t na = tg_tensor_size(a), nb = tg_tensor_size(b);
    if (!out_matches(y, 2, (const int64_t[]){na, nb}))
        return tg_kern_fail(k, TG_EINTERNAL, "output does not match the operands");
    int64_t ia[TG_MAX_DIMS] = {0}, oi[2];
    for (int64_t i = 0; i < na; i++) {
        int64_t ib[TG_MAX_DIMS] = {0};
        const void *pa = tg_tensor_at(a, ia);
        for (int64_t j = 0; j < nb; j++) {
            macc m = {0};
            macc_add(&m, pa, a->dtype, tg_tensor_at(b, ib), b->dtype, odt);
            oi[0] = i;
            oi[1] = j;
            macc_store(&m, tg_tensor_at(y, oi), odt);
            tg_index_next(b->ndim, b->shape, ib);
        }
        tg_index_next(a->ndim, a->shape, ia);
    }
    return TG_OK;
}

static tg_status vjp_outer(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *a = n->in[0], *b = n->in[1], *gy = gout[0];
    int64_t flat = -1;
    if (tg_ops_float_in(n, 0))
        gin[0] = tg_grad_reshape_like(g, tg_dot(g, gy, tg_reshape(g, b, 1, &flat)), a);
    if (tg_ops_float_in(n, 1))
        gin[1] = tg_grad_reshape_like(g, tg_dot(g, tg_reshape(g, a, 1, &flat), gy), b);
    return g->status;
}

/* Over a batch: each operand's core flattened to a vector, then a broadcast product, the
 * left one as a column. */
static tg_status batch_outer(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                             tg_var **out, bool *ob) {
    (void)ob;
    tg_graph *g = b->g;
    tg_var *x[2];
    int64_t flat = -1;
    for (int k = 0; k < 2; k++) {
        if (batched[k])
            x[k] = in[k]->type.ndim == 2 ? in[k] : tg_batch_flatten(b, in[k]);
        else
            x[k] = in[k]->type.ndim == 1 ? in[k] : tg_reshape(g, in[k], 1, &flat);
    }
    x[0] = expand_at(g, x[0], -1);
    if (batched[1]) x[1] = expand_at(g, x[1], 1);
    out[0] = tg_mul(g, x[0], x[1]);
    return g->status;
}

const tg_op_def tg_op_outer = {
    .name = "outer",
    .min_in = 2,
    .max_in = 2,
    .nout = 1,
    .kind = TG_KIND_LINALG,
    .promote = promote_common,
    .infer = infer_outer,
    .ref = ref_outer,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_outer,
    .batch = batch_outer,
};

/* ---- diag ---- */

static tg_status infer_diag(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    char xs[TG_TYPE_STR_MAX];
    if (x->ndim < 2)
        return tg_infer_fail(ic, TG_ESHAPE,
                             "needs a matrix or a batch of matrices (at least 2 dimensions), "
                             "got %s",
                             tg_type_str(x, xs, sizeof xs));
    int nd = x->ndim;
    int64_t m = x->shape[nd - 2], n = x->shape[nd - 1];
    tg_type *y = &ic->out[0];
    *y = *x;
    y->weak = 0;
    y->ndim = (uint8_t)(nd - 1);
    y->nobcast &= (1u << (nd - 2)) - 1;
    /* min(m, n); a '?' leaves it unknown unless the other extent is 0 */
    y->shape[nd - 2] = m == 0 || n == 0 ? 0 : m < 0 || n < 0 ? -1 : m < n ? m : n;
    /* a 1 that came from a '?' one (run-time types) must not broadcast */
    bool nob_m = m == 1 && ((x->nobcast >> (nd - 2)) & 1u),
         nob_n = n == 1 && ((x->nobcast >> (nd - 1)) & 1u);
    if (y->shape[nd - 2] == 1 && (nob_m || nob_n)) y->nobcast |= 1u << (nd - 2);
    ic->nout = 1;
    return TG_OK;
}

/* One block: y[i] = x[i, i], any dtype and strides. */
static tg_status core_diag(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    tg_tensor *y = k->out[0];
    if (x->ndim != 2 || y->ndim != 1 || y->dtype != x->dtype ||
        y->shape[0] != (x->shape[0] < x->shape[1] ? x->shape[0] : x->shape[1]))
        return tg_kern_fail(k, TG_EINTERNAL, "output does not match the operand");
    size_t es = tg_dtype_size(x->dtype);
    int64_t step = x->strides[0] + x->strides[1], ys = y->strides[0];
    const char *px = tg_tensor_data(x);
    char *py = tg_tensor_data(y);
    for (int64_t i = 0; i < y->shape[0]; i++)
        memcpy(py + i * ys * (int64_t)es, px + i * step * (int64_t)es, es);
    return TG_OK;
}

static tg_status ref_diag(tg_kern *k) { return tg_bw_ref(k, tg_op_diag.signature, core_diag); }

/* The cotangent on the diagonal of zeros of x's type: x[..., r, r] = g with
 * r = arange(min(m, n)) (an index update; '?' extents through shape(x)). */
static tg_status vjp_diag(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0], *d[TG_MAX_DIMS];
    int nd = x->type.ndim;
    if (!tg_ops_float_in(n, 0) || !tg_grad_dims(g, x, d)) return g->status;
    int64_t m = x->type.shape[nd - 2], c = x->type.shape[nd - 1];
    tg_var *k =
        m >= 0 && c >= 0 ? tg_literal_int(g, m < c ? m : c) : tg_minimum(g, d[nd - 2], d[nd - 1]);
    tg_var *r = k ? tg_apply(g, "arange", &k, 1, NULL, 0) : NULL;
    tg_index idx[3] = {{.slice = {.omit = TG_INDEX_ELLIPSIS}}, {.array = r}, {.array = r}};
    if (r) gin[0] = tg_index_update(g, tg_grad_zeros_like(g, x), idx, 3, gout[0], false);
    return g->status;
}

const tg_op_def tg_op_diag = {
    .name = "diag",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .infer = infer_diag,
    .ref = ref_diag,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_diag,
    /* k is min(m, n), which infer_diag binds: the signature gives the core ranks (the
       batch driver, fused programs and vectorize read them) */
    .signature = "(m,n)->(k)",
    .core = core_diag,
};
