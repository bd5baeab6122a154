/* canonicalize.c - the canonicalize phase: merging (common subexpressions, equal
 * constants), constant folding, algebraic identities, static shapes, and the canonical
 * form of sums and products with constants that later passes rely on.
 *
 * Invariants (each rule says which it relies on):
 *  - Exact: a rule changes no value, not an infinity, not the sign of a zero, not where a
 *    NaN appears (only the sign and payload of a NaN, which IEEE leaves open), except
 *    sum_sum, which regroups a float sum (rounding only). Hence add(x, 0) -> x only
 *    for -0.0 or integers, mul(x, 0) -> 0 only for integers and bool, and no
 *    reassociation of float constants (x*c1*c2 may overflow where x*(c1*c2) does not).
 *  - No hidden broadcast, dtype or weakness change: an identity applies only when the
 *    result has exactly the type of the value kept (tg_rw_same_type).
 *  - No error of the original program disappears: rewrites that could skip a run-time
 *    check (reshape chains over '?' extents) are not made.
 *  - Canonical form after this pass: a constant operand of a commutative op is on the
 *    right (mul(x, 2), never mul(2, x)); a negation is neg(x), never mul(x, -1); the
 *    negation of a product with a constant is folded into the constant (mul(x, -c));
 *    a sum with a negated term is a difference (add(x, neg(y)) -> sub(x, y)); integer
 *    chains of constant products and sums are one constant; at most one transpose and one
 *    reshape in a row; a shape that is static is a constant.
 *  - Devices: a rule that folds a producer's work into what it builds (sum_sum, add_neg,
 *    neg_mul_const, const_chain, transpose and reshape chains) only takes a producer on the
 *    device of the node it rewrites (producer_here); one whose result keeps none of the
 *    producer's work (neg_neg, mul_one through a broadcast 1, shape_index) applies across
 *    devices. Merging keeps nodes of two devices apart; a folded value is a constant,
 *    which has no device.
 *  - Generators without inputs (zeros, ones, full, eye, arange) stay nodes: they are cheap
 *    to run and later passes recognise them. Folded results stay below 1e6 elements, and
 *    a fold that grows its inputs stays below 256 elements.
 */
#include "rewrite.h"

#define FOLD_MAX      1000000 /* elements: bigger results (or inputs) are not folded */
#define FOLD_GROW_MAX 256     /* elements: a fold that grows its inputs stays below this */

/* ---- helpers ---- */

static tg_var *out0(tg_node *n) { return n ? n->out[0] : NULL; }

/* The producer of v when it is a node of op `op`, else NULL: for rules whose result keeps
 * none of the producer's work (neg(neg(x)) -> x), which apply across devices. */
static tg_node *producer(const tg_var *v, int op) {
    return v->kind == TG_VAR_NODE && v->node->op == op ? v->node : NULL;
}

/* The same when the producer is on n's device, else NULL: for rules that fold the
 * producer's work into the nodes they build in n's place (which take n's device), so that
 * no work moves from one device to another (docs/devices.md, "Annotations"). */
static tg_node *producer_here(const tg_node *n, const tg_var *v, int op) {
    tg_node *m = producer(v, op);
    return m && tg_ir_same_device(m->device, n->device) ? m : NULL;
}

static bool is_float(const tg_var *v) { return tg_dtype_is_float((tg_dtype)v->type.dtype); }

/* The list held by an INTS (or single INT) attribute; 0 entries for none. */
static int aval_ints(const tg_aval *a, const int64_t **p) {
    if (a->kind == TG_ATTR_INTS) {
        *p = a->ints;
        return a->n;
    }
    if (a->kind == TG_ATTR_INT || a->kind == TG_ATTR_BOOL) {
        *p = &a->i;
        return 1;
    }
    *p = NULL;
    return 0;
}

static tg_var *build(tg_rw *rw, int op, tg_var *a, tg_var *b, const tg_aval *attrs) {
    tg_var *in[2] = {a, b};
    return out0(tg_ir_node_make_norm(tg_rw_graph(rw), op, in, b ? 2 : 1, attrs));
}

/* ---- merging ---- */

/* Equal constants (dtype, shape, weakness, literal kind, bytes) become one. */
static tg_var *rw_merge_const(tg_rw *rw, tg_node *n) {
    for (int k = 0; k < n->nin; k++) {
        tg_var *c = n->in[k];
        if (c->kind != TG_VAR_CONST) continue;
        tg_var *rep = tg_rw_find_equal_const(rw, c);
        if (rep != c && tg_rw_replace(rw, c, rep) != TG_OK) break;
    }
    return NULL;
}

/* Common subexpressions: a node equal to one seen before (same op, inputs, attributes),
 * unless its record says it has effects (tg_op_mergeable). */
static tg_var *rw_merge(tg_rw *rw, tg_node *n) {
    if (!tg_op_mergeable(tg_op_table[n->op])) return NULL;
    tg_node *m = tg_rw_find_equal(rw, n);
    if (!m) return NULL;
    for (int i = 1; i < n->nout; i++)
        if (tg_rw_replace(rw, n->out[i], m->out[i]) != TG_OK) return NULL;
    return m->out[0];
}

/* ---- constant folding ---- */

/* A node whose inputs are all constants is evaluated with its reference kernel
 * (tg_node_eval: the code a run executes), so the folded value is the value the program
 * computes. Not folded: ops whose record forbids it (tg_op_foldable: calls, whose kernel
 * needs a run's sub-graph executor; ops with effects). */
static tg_var *rw_constant_fold(tg_rw *rw, tg_node *n) {
    tg_graph *g = tg_rw_graph(rw);
    int64_t insize = 0, outsize = 0;
    if (n->nin == 0 || n->nout > TG_MAX_OUTS || !tg_op_foldable(tg_op_table[n->op])) return NULL;
    for (int k = 0; k < n->nin; k++) {
        if (!tg_rw_is_constant(n->in[k])) return NULL;
        insize += tg_tensor_size(n->in[k]->value);
        if (insize > FOLD_MAX) return NULL;
    }
    for (int i = 0; i < n->nout; i++) {
        const tg_type *t = &n->out[i]->type;
        int64_t sz;
        if (!tg_type_known(t) || (t->weak && t->ndim != 0)) return NULL;
        if (!tg_shape_size(t->ndim, t->shape, &sz) || sz > FOLD_MAX - outsize) return NULL;
        outsize += sz;
    }
    if (outsize > insize && outsize > FOLD_GROW_MAX) return NULL;
    tg_tensor *in[TG_MAX_DIMS + 8], **inp = in, *out[TG_MAX_OUTS] = {0};
    size_t insz = sizeof *inp * (size_t)n->nin;
    if (n->nin > (int)TG_COUNTOF(in) && !(inp = tg_mem_alloc(g->ctx, insz)))
        return tg_ir_fail(g, TG_ENOMEM, "out of memory");
    for (int k = 0; k < n->nin; k++) inp[k] = n->in[k]->value;
    tg_status st = tg_node_eval(g->ctx, g, n, inp, NULL, out);
    if (inp != in) tg_mem_free(g->ctx, inp, insz);
    if (st == TG_ENOMEM) return tg_ir_fail(g, TG_ENOMEM, "out of memory");
    if (st != TG_OK) return NULL; /* the run will report it, at its place */
    tg_var *res[TG_MAX_OUTS] = {0};
    bool ok = true;
    for (int i = 0; i < n->nout; i++) {
        const tg_type *t = &n->out[i]->type;
        tg_tensor *c = ok ? tg_tensor_dup(out[i]) : NULL; /* contiguous, owns its buffer */
        tg_tensor_free(out[i]);
        if (!ok) continue;
        char lit = 0;
        if (t->weak)
            lit = tg_dtype_is_float((tg_dtype)t->dtype) ? 'f' : t->dtype == TG_DT_BOOL ? 'b' : 'i';
        res[i] = c ? tg_ir_const(g, c, lit) : tg_ir_fail(g, TG_ENOMEM, "out of memory");
        if (res[i]) {
            res[i]->type.weak = t->weak;
            res[i] = tg_rw_find_equal_const(rw, res[i]); /* one variable per value */
        }
        ok = res[i] != NULL;
    }
    if (!ok) return NULL;
    for (int i = 1; i < n->nout; i++)
        if (tg_rw_replace(rw, n->out[i], res[i]) != TG_OK) return NULL;
    return res[0];
}

/* ---- static shapes ---- */

/* A strong i64 constant: a vector of n values, or a scalar when n < 0. */
static tg_var *const_i64(tg_rw *rw, int n, const int64_t *vals) {
    tg_graph *g = tg_rw_graph(rw);
    int64_t len = n;
    tg_tensor *t = n < 0 ? tg_tensor_from_data(g->ctx, TG_DT_I64, 0, NULL, vals)
                         : tg_tensor_from_data(g->ctx, TG_DT_I64, 1, &len, vals);
    tg_var *c = t ? tg_ir_const(g, t, 0) : tg_ir_fail(g, TG_ENOMEM, "out of memory");
    return c ? tg_rw_find_equal_const(rw, c) : NULL;
}

/* shape(x) -> constant when every extent of x is static and computing x cannot fail (a
 * '?' extent upstream that does not fit must still be an error). */
static tg_var *rw_shape_static(tg_rw *rw, tg_node *n) {
    const tg_type *t = &n->in[0]->type;
    return tg_type_known(t) && tg_rw_cannot_fail(n->in[0]) ? const_i64(rw, t->ndim, t->shape)
                                                           : NULL;
}

/* size(x) -> constant when every extent of x is static and computing x cannot fail. */
static tg_var *rw_size_static(tg_rw *rw, tg_node *n) {
    const tg_type *t = &n->in[0]->type;
    int64_t size;
    if (!tg_type_known(t) || !tg_shape_size(t->ndim, t->shape, &size) ||
        !tg_rw_cannot_fail(n->in[0]))
        return NULL;
    return const_i64(rw, -1, &size);
}

/* shape(x)[i] -> constant when extent i of x is static (the others may be '?') and
 * computing x cannot fail. */
static tg_var *rw_shape_index(tg_rw *rw, tg_node *n) {
    tg_node *s = producer(n->in[0], TG_OP_SHAPE);
    const int64_t *starts, *index;
    if (!s || aval_ints(&n->attrs[TG_SLICE_A_STARTS], &starts) != 1 ||
        aval_ints(&n->attrs[TG_SLICE_A_INDEX], &index) != 1 || index[0] != 1)
        return NULL;
    const tg_type *t = &s->in[0]->type;
    int64_t i = starts[0] < 0 ? starts[0] + t->ndim : starts[0];
    if (i < 0 || i >= t->ndim || t->shape[i] < 0 || !tg_rw_cannot_fail(s->in[0])) return NULL;
    tg_var *c = const_i64(rw, -1, &t->shape[i]);
    return c && tg_rw_same_type(c, n->out[0]) ? c : NULL;
}

/* ---- canonical order ---- */

/* op(c, x) -> op(x, c) for a commutative op, a constant c and a non-constant x. Exact:
 * these ops are commutative in IEEE arithmetic too. (maximum/minimum are left alone:
 * which NaN or which signed zero they return depends on the operand order.) */
static tg_var *rw_commute_const(tg_rw *rw, tg_node *n) {
    tg_var *a = n->in[0], *b = n->in[1];
    if (!tg_rw_is_constant(a) || tg_rw_is_constant(b)) return NULL;
    tg_var *r = build(rw, n->op, b, a, n->attrs);
    return r && tg_rw_same_type(r, n->out[0]) ? r : NULL;
}

/* ---- identities ---- */

/* add(x, 0) -> x: exact for integers and bool, and for floats when the zero is -0.0
 * (x + +0.0 turns x = -0.0 into +0.0). */
static tg_var *rw_add_zero(tg_rw *rw, tg_node *n) {
    tg_var *x = n->in[0], *c = n->in[1];
    if (!tg_rw_same_type(x, n->out[0]) || !tg_rw_is_signed_zero(c, is_float(x))) return NULL;
    return x;
}

/* sub(x, 0) -> x: exact for integers, and for floats when the zero is +0.0. */
static tg_var *rw_sub_zero(tg_rw *rw, tg_node *n) {
    tg_var *x = n->in[0], *c = n->in[1];
    if (!tg_rw_same_type(x, n->out[0]) || !tg_rw_is_signed_zero(c, false)) return NULL;
    return x;
}

/* Whether every element of v is x: v a constant, or a broadcast of one (gradients seed
 * with broadcast_to(1, shape), which constant folding leaves unexpanded). */
static bool uniform_is(const tg_var *v, double x) {
    tg_node *b = producer(v, TG_OP_BROADCAST_TO);
    return tg_rw_is_const(b ? b->in[0] : v, x);
}

/* mul(x, 1) and mul(1, x) -> x (NaN * 1 is NaN, inf * 1 is inf), the 1 being a constant
 * or a broadcast of one: when the product has x's type (no broadcast, no dtype change). */
static tg_var *rw_mul_one(tg_rw *rw, tg_node *n) {
    (void)rw;
    for (int k = 0; k < 2; k++)
        if (uniform_is(n->in[1 - k], 1.0) && tg_rw_same_type(n->out[0], n->in[k])) return n->in[k];
    return NULL;
}

/* mul(x, 0) -> zeros like x, for integers and bool only (inf * 0 and NaN * 0 are NaN), when
 * computing x cannot fail (dropping it must not drop an error). */
static tg_var *rw_mul_zero(tg_rw *rw, tg_node *n) {
    tg_var *x = n->in[0];
    if (is_float(x) || !tg_rw_is_const(n->in[1], 0.0) || !tg_rw_same_type(n->out[0], x) ||
        !tg_rw_cannot_fail(x))
        return NULL;
    tg_var *z = tg_grad_zeros_like(tg_rw_graph(rw), x);
    return z && tg_rw_same_type(z, n->out[0]) ? z : NULL;
}

/* mul(x, -1) -> neg(x): exact for floats and (wrapping) integers. */
static tg_var *rw_mul_neg_one(tg_rw *rw, tg_node *n) {
    tg_var *x = n->in[0];
    if (x->type.dtype == TG_DT_BOOL || !tg_rw_is_const(n->in[1], -1.0) ||
        !tg_rw_same_type(n->out[0], x))
        return NULL;
    tg_var *r = build(rw, TG_OP_NEG, x, NULL, NULL);
    return r && tg_rw_same_type(r, n->out[0]) ? r : NULL;
}

/* neg(neg(x)) -> x. */
static tg_var *rw_neg_neg(tg_rw *rw, tg_node *n) {
    (void)rw;
    tg_node *m = producer(n->in[0], TG_OP_NEG);
    return m && tg_rw_same_type(m->in[0], n->out[0]) ? m->in[0] : NULL;
}

/* neg(mul(x, c)) -> mul(x, neg(c)) for a constant c (folded next): -(x*c) == x*(-c)
 * exactly, rounding being symmetric. */
static tg_var *rw_neg_mul_const(tg_rw *rw, tg_node *n) {
    tg_node *m = producer_here(n, n->in[0], TG_OP_MUL);
    if (!m || !tg_rw_is_constant(m->in[1]) || tg_rw_is_constant(m->in[0]) ||
        m->in[1]->type.dtype == TG_DT_BOOL)
        return NULL;
    tg_var *c = build(rw, TG_OP_NEG, m->in[1], NULL, NULL);
    tg_var *r = c ? build(rw, TG_OP_MUL, m->in[0], c, m->attrs) : NULL;
    return r && tg_rw_same_type(r, n->out[0]) ? r : NULL;
}

/* add(x, neg(y)) -> sub(x, y) and add(neg(x), y) -> sub(y, x): x + (-y) is x - y in IEEE
 * arithmetic and in wrapping integers. */
static tg_var *rw_add_neg(tg_rw *rw, tg_node *n) {
    tg_node *r = producer_here(n, n->in[1], TG_OP_NEG), *l = producer_here(n, n->in[0], TG_OP_NEG);
    tg_var *d = NULL;
    if (r)
        d = build(rw, TG_OP_SUB, n->in[0], r->in[0], n->attrs);
    else if (l)
        d = build(rw, TG_OP_SUB, n->in[1], l->in[0], n->attrs);
    return d && tg_rw_same_type(d, n->out[0]) ? d : NULL;
}

/* sub(x, neg(y)) -> add(x, y). */
static tg_var *rw_sub_neg(tg_rw *rw, tg_node *n) {
    tg_node *r = producer_here(n, n->in[1], TG_OP_NEG);
    tg_var *s = r ? build(rw, TG_OP_ADD, n->in[0], r->in[0], n->attrs) : NULL;
    return s && tg_rw_same_type(s, n->out[0]) ? s : NULL;
}

/* op(op(x, c1), c2) -> op(x, op(c1, c2)) for op add or mul on integers and bool (a ring
 * under wrapping: exact). Floats are not reassociated. */
static tg_var *rw_const_chain(tg_rw *rw, tg_node *n) {
    tg_node *m = producer_here(n, n->in[0], n->op);
    if (!m || is_float(n->out[0]) || is_float(m->in[0]) || !tg_rw_is_constant(n->in[1]) ||
        !tg_rw_is_constant(m->in[1]) || tg_rw_is_constant(m->in[0]) ||
        tg_rw_use_count(rw, m->out[0]) != 1)
        return NULL;
    tg_var *c = build(rw, n->op, m->in[1], n->in[1], n->attrs);
    if (!c || c->type.dtype != n->out[0]->type.dtype) return NULL;
    tg_var *r = build(rw, n->op, m->in[0], c, n->attrs);
    return r && tg_rw_same_type(r, n->out[0]) ? r : NULL;
}

/* cast(x, dtype=x's dtype) -> x. */
static tg_var *rw_cast_same(tg_rw *rw, tg_node *n) {
    (void)rw;
    return tg_rw_same_type(n->in[0], n->out[0]) ? n->in[0] : NULL;
}

/* ---- shapes: transpose and reshape chains ---- */

/* The permutation of a transpose node (none reverses); false when malformed. */
static bool transpose_perm(const tg_node *n, int64_t *perm) {
    int nd = n->in[0]->type.ndim;
    const int64_t *ax;
    if (n->attrs[0].kind == TG_ATTR_NONE) {
        for (int i = 0; i < nd; i++) perm[i] = nd - 1 - i;
        return true;
    }
    if (aval_ints(&n->attrs[0], &ax) != nd) return false;
    for (int i = 0; i < nd; i++) {
        int p;
        if (!tg_axis_norm(ax[i], nd, &p)) return false;
        perm[i] = p;
    }
    return true;
}

static bool is_identity(const int64_t *perm, int nd) {
    for (int i = 0; i < nd; i++)
        if (perm[i] != i) return false;
    return true;
}

/* transpose(x, identity) -> x. */
static tg_var *rw_transpose_identity(tg_rw *rw, tg_node *n) {
    int64_t perm[TG_MAX_DIMS];
    (void)rw;
    if (!transpose_perm(n, perm) || !is_identity(perm, n->in[0]->type.ndim)) return NULL;
    return tg_rw_same_type(n->in[0], n->out[0]) ? n->in[0] : NULL;
}

/* transpose(transpose(x, p), q) -> transpose(x, p[q]) (or x when that is the identity). */
static tg_var *rw_transpose_transpose(tg_rw *rw, tg_node *n) {
    tg_node *m = producer_here(n, n->in[0], TG_OP_TRANSPOSE);
    int64_t p[TG_MAX_DIMS], q[TG_MAX_DIMS], r[TG_MAX_DIMS];
    if (!m || !transpose_perm(m, p) || !transpose_perm(n, q)) return NULL;
    int nd = n->in[0]->type.ndim;
    for (int i = 0; i < nd; i++) r[i] = p[q[i]];
    tg_var *x = m->in[0];
    if (is_identity(r, nd)) return tg_rw_same_type(x, n->out[0]) ? x : NULL;
    tg_aval a = {.kind = TG_ATTR_INTS, .ints = r, .n = nd};
    tg_var *t = build(rw, TG_OP_TRANSPOSE, x, NULL, &a);
    return t && tg_rw_same_type(t, n->out[0]) ? t : NULL;
}

/* reshape(x, s) -> x when it changes nothing: the same type, and at most one '?' extent,
 * solved from the others by the attribute's -1 (which cannot fail when they are not 0). */
static tg_var *rw_reshape_identity(tg_rw *rw, tg_node *n) {
    const tg_type *t = &n->in[0]->type;
    (void)rw;
    if (!tg_rw_same_type(n->in[0], n->out[0])) return NULL;
    int unknown = 0;
    bool zero = false;
    for (int i = 0; i < t->ndim; i++) {
        unknown += t->shape[i] < 0;
        zero = zero || t->shape[i] == 0;
    }
    if (unknown > 1 || (unknown == 1 && (zero || n->nin > 1))) return NULL;
    return n->in[0];
}

/* reshape(reshape(x, s1), s2) -> reshape(x, s2), when the inner reshape cannot fail at run
 * time (x and its result fully static), so no error of the program disappears. */
static tg_var *rw_reshape_reshape(tg_rw *rw, tg_node *n) {
    tg_node *m = producer_here(n, n->in[0], TG_OP_RESHAPE);
    if (!m || !tg_type_known(&m->in[0]->type) || !tg_type_known(&m->out[0]->type) ||
        n->nin > TG_MAX_DIMS + 1)
        return NULL;
    tg_var *in[TG_MAX_DIMS + 1];
    in[0] = m->in[0];
    for (int k = 1; k < n->nin; k++) in[k] = n->in[k];
    tg_var *r = out0(tg_ir_node_make_norm(tg_rw_graph(rw), TG_OP_RESHAPE, in, n->nin, n->attrs));
    return r && tg_rw_same_type(r, n->out[0]) ? r : NULL;
}

/* ---- reductions ---- */

/* sum(sum(x, a1), a2) -> sum(x, a1 + a2) when both keep (or both drop) the reduced axes and
 * the inner sum has no other use. Float sums are regrouped (rounding may differ in the
 * last bits, as between NumPy's pairwise and a plain loop). */
static tg_var *rw_sum_sum(tg_rw *rw, tg_node *n) {
    tg_node *m = producer_here(n, n->in[0], TG_OP_SUM);
    if (!m || tg_rw_use_count(rw, m->out[0]) != 1 || n->attrs[1].i != m->attrs[1].i) return NULL;
    bool keep = n->attrs[1].i != 0;
    int nd = m->in[0]->type.ndim, mid = m->out[0]->type.ndim;
    int na = tg_op_sum.nattrs;
    tg_axes a1, a2;
    if (!tg_reduce_axes(m->attrs, na, nd, &a1, NULL, 0) ||
        !tg_reduce_axes(n->attrs, na, mid, &a2, NULL, 0))
        return NULL;
    const bool *r1 = a1.red, *r2 = a2.red;
    int64_t axes[TG_MAX_DIMS];
    int nax = 0;
    for (int i = 0, j = 0; i < nd; i++) {
        bool kept = !r1[i]; /* axis i of x survives the inner sum as axis j */
        bool outer = keep ? r2[i] : (kept && r2[j]);
        if (r1[i] || outer) axes[nax++] = i;
        if (kept || keep) j++;
    }
    tg_aval a[2] = {{.kind = TG_ATTR_INTS, .ints = axes, .n = nax}, n->attrs[1]};
    tg_var *r = build(rw, TG_OP_SUM, m->in[0], NULL, a);
    return r && tg_rw_same_type(r, n->out[0]) ? r : NULL;
}

/* ---- the rule list ---- */

static const tg_rule canonicalize_rules[] = {
    {"merge_const", -1, rw_merge_const},
    {"merge", -1, rw_merge},
    {"constant_fold", -1, rw_constant_fold},
    {"shape_static", TG_OP_SHAPE, rw_shape_static},
    {"size_static", TG_OP_SIZE, rw_size_static},
    {"shape_index", TG_OP_SLICE, rw_shape_index},
    {"commute_const", TG_OP_ADD, rw_commute_const},
    {"commute_const", TG_OP_MUL, rw_commute_const},
    {"commute_const", TG_OP_EQ, rw_commute_const},
    {"commute_const", TG_OP_NE, rw_commute_const},
    {"commute_const", TG_OP_AND, rw_commute_const},
    {"commute_const", TG_OP_OR, rw_commute_const},
    {"commute_const", TG_OP_XOR, rw_commute_const},
    {"add_zero", TG_OP_ADD, rw_add_zero},
    {"sub_zero", TG_OP_SUB, rw_sub_zero},
    {"mul_one", TG_OP_MUL, rw_mul_one},
    {"mul_zero", TG_OP_MUL, rw_mul_zero},
    {"mul_neg_one", TG_OP_MUL, rw_mul_neg_one},
    {"neg_neg", TG_OP_NEG, rw_neg_neg},
    {"neg_mul_const", TG_OP_NEG, rw_neg_mul_const},
    {"add_neg", TG_OP_ADD, rw_add_neg},
    {"sub_neg", TG_OP_SUB, rw_sub_neg},
    {"const_chain", TG_OP_ADD, rw_const_chain},
    {"const_chain", TG_OP_MUL, rw_const_chain},
    {"cast_same", TG_OP_CAST, rw_cast_same},
    {"transpose_identity", TG_OP_TRANSPOSE, rw_transpose_identity},
    {"transpose_transpose", TG_OP_TRANSPOSE, rw_transpose_transpose},
    {"reshape_identity", TG_OP_RESHAPE, rw_reshape_identity},
    {"reshape_reshape", TG_OP_RESHAPE, rw_reshape_reshape},
    {"sum_sum", TG_OP_SUM, rw_sum_sum},
};

tg_status tg_canonicalize(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    (void)opts;
    return tg_rw_apply(g, "canonicalize", canonicalize_rules, (int)TG_COUNTOF(canonicalize_rules),
                       report);
}
