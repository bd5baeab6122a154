/* blas.c - the blas phase: lowering of dot/matmul/outer and the add/sub/mul/neg/transpose
 * around them to gemm, gemv and ger (DESIGN.md, "BLAS lowering"); skipped under --no-blas.
 *
 * One rule (`blas_sum`) at the roots add, sub, neg, mul and transpose. It
 * reads the value at the root as a linear sum of terms, each `coef * s1 * s2 * ... * t`
 * (coef a constant, s_i symbolic 0-d scalars, t a value, possibly transposed), walking
 * through add, sub, neg, mul by a 0-d scalar, 2-D transpose and earlier gemm/gemv/ger
 * nodes (which read back as their product plus beta times their accumulator). Interior
 * nodes are walked only when the sum is their only reader. A term is a product when it
 * is a float dot/matmul of matrices (gemm) or of a matrix and a vector (gemv), an outer of
 * two vectors (ger), or such a BLAS node, of one dtype with operands of that dtype that
 * are not promoted from the other float dtype, read only from inside this sum. Identical
 * products are merged (their coefficients add), transposes become BLAS flags, and the
 * products are chained: the first takes the accumulator (the other terms, rebuilt as
 * graph, or the one term with its scale as beta), each next one the previous result.
 *
 * Devices: the walk stays on the root's device (a node on another device is a term as it
 * is), so no product or interior node moves its work to another device; what the rule
 * builds takes the root's device (the engine's stamp).
 *
 * Totality: every term reappears (rebuilt exactly as add/mul/neg/transpose of the
 * original values); anything the rule cannot place (a product whose shape differs from
 * the result's, an accumulator that does not broadcast to it, a product whose merged
 * coefficient is 0, too many terms) leaves the whole sum as it was.
 *
 * Cost: a ger costs one pass over its matrix (in place, or row by row from the
 * accumulator it must keep). Where the accumulator is itself elementwise work (several
 * addends, or one elementwise node only this sum reads), the outer product becomes the
 * broadcast form x[:, None] * y[None, :] instead, which the fuse phase folds into that
 * work's pass. A bare outer stays as it is. Accumulators that are zeros (constants or
 * `zeros`) are dropped: beta 0, an uninitialised output.
 */
#include "rewrite.h"

#include <math.h>

#define MAX_TERMS 32   /* terms of one sum (more: left as it is) */
#define MAX_SCAL  8    /* symbolic scalars of one term */
#define MERGED    (-1) /* term.kind of a product merged into an equal earlier one */

typedef struct term {
    tg_var *v;              /* the value (for products: the node's output, or NULL) */
    double coef;            /* constant factor */
    tg_var *scal[MAX_SCAL]; /* symbolic 0-d factors */
    int nscal;
    bool tr;       /* the term is v transposed (2-D) */
    int kind;      /* tg_blas_form of the product (TG_BLAS_NONE: not one), or MERGED */
    tg_var *a, *b; /* its operands (gemm: A, B; gemv: A, x; ger: x, y) */
    bool ta, tb;   /* BLAS transpose flags, already combined with tr */
} term;

typedef struct sumx {
    tg_rw *rw;
    const char *dev; /* the root's device: the sum walks only into nodes on it */
    term t[MAX_TERMS];
    int n;
    bool fail;
    /* products reached per value: a product is absorbed only when every use is here */
    tg_var *seen[MAX_TERMS];
    int seen_n[MAX_TERMS], nseen;
} sumx;

static bool is_float(const tg_var *v) {
    return v->type.dtype == TG_DT_F32 || v->type.dtype == TG_DT_F64;
}

static bool is_op(const tg_var *v, int op) { return v->kind == TG_VAR_NODE && v->node->op == op; }

/* A 2-D transpose that swaps the axes. */
static bool is_swap(const tg_var *v) {
    if (!is_op(v, TG_OP_TRANSPOSE) || v->type.ndim != 2) return false;
    const tg_aval *ax = &v->node->attrs[0];
    return ax->kind == TG_ATTR_NONE || (ax->kind == TG_ATTR_INTS && ax->n == 2 && ax->ints[0] == 1);
}

/* An operand promoted from the other float dtype: the product is a mixed one. */
static bool promoted_float(const tg_var *v) {
    if (!is_op(v, TG_OP_CAST)) return false;
    const tg_var *x = v->node->in[0];
    return is_float(x) && x->type.dtype != v->type.dtype;
}

static bool same_dtype3(const tg_var *y, const tg_var *a, const tg_var *b) {
    return is_float(y) && a->type.dtype == y->type.dtype && b->type.dtype == y->type.dtype &&
           !promoted_float(a) && !promoted_float(b);
}

/* The BLAS form of a dot/matmul/outer value: kind, operands and flags (no transpose of the
 * whole taken into account yet). TG_BLAS_NONE when it has none. */
static int product_form(const tg_var *v, tg_var **a, tg_var **b, bool *ta, bool *tb) {
    if (v->kind != TG_VAR_NODE || v->index != 0) return TG_BLAS_NONE;
    const tg_node *n = v->node;
    *ta = *tb = false;
    if (n->op == TG_OP_DOT || n->op == TG_OP_MATMUL) {
        tg_var *x = n->in[0], *y = n->in[1];
        if (!same_dtype3(v, x, y)) return TG_BLAS_NONE;
        int nx = x->type.ndim, ny = y->type.ndim;
        /* the contracted extents are known: a misalignment stays the product's own error */
        if (nx < 1 || ny < 1 || x->type.shape[nx - 1] < 0 || y->type.shape[ny > 2 ? ny - 2 : 0] < 0)
            return TG_BLAS_NONE;
        if (nx == 2 && ny == 2) {
            *a = x;
            *b = y;
            return TG_BLAS_GEMM;
        }
        if (nx == 2 && ny == 1) {
            *a = x;
            *b = y;
            return TG_BLAS_GEMV;
        }
        if (nx == 1 && ny == 2) { /* y @ A = Aᵀ y */
            *a = y;
            *b = x;
            *ta = true;
            return TG_BLAS_GEMV;
        }
        return TG_BLAS_NONE;
    }
    if (n->op == TG_OP_OUTER) {
        tg_var *x = n->in[0], *y = n->in[1];
        if (!same_dtype3(v, x, y) || x->type.ndim != 1 || y->type.ndim != 1) return TG_BLAS_NONE;
        *a = x;
        *b = y;
        return TG_BLAS_GER;
    }
    return TG_BLAS_NONE;
}

/* A 0-d value that scales the other operand of a mul without changing its type. */
static bool scalar_factor(const tg_var *s, const tg_var *other, const tg_var *out) {
    return s->type.ndim == 0 && tg_rw_same_type(out, other) && !tg_rw_same_type(out, s);
}

static bool zero_value(const tg_var *v) { return tg_rw_is_const(v, 0.0) || is_op(v, TG_OP_ZEROS); }

/* Whether node value v is made on the root's device. */
static bool is_here(const sumx *S, const tg_var *v) {
    return tg_ir_same_device(v->node->device, S->dev);
}

/* Counts one more reach of a product value; false when the table is full. */
static int seen_add(sumx *S, tg_var *v) {
    for (int i = 0; i < S->nseen; i++)
        if (S->seen[i] == v) return ++S->seen_n[i];
    if (S->nseen == MAX_TERMS) return -1;
    S->seen[S->nseen] = v;
    S->seen_n[S->nseen++] = 1;
    return 1;
}

static term *term_new(sumx *S, const term *ctx, tg_var *v) {
    if (S->n == MAX_TERMS) {
        S->fail = true;
        return NULL;
    }
    term *t = &S->t[S->n++];
    *t = *ctx;
    t->v = v;
    t->kind = TG_BLAS_NONE;
    return t;
}

/* Pushes scale s onto c; false when too many. */
static bool push_scal(term *c, tg_var *s) {
    if (c->nscal == MAX_SCAL) return false;
    c->scal[c->nscal++] = s;
    return true;
}

/* Multiplies term c by the 0-d value s: into coef when s is a constant; false when c has
 * too many symbolic scalars already. */
static bool scale_by(term *c, tg_var *s) {
    double x;
    if (tg_rw_const_value(s, &x)) {
        c->coef *= x;
        return true;
    }
    return push_scal(c, s);
}

/* Walks the sum below root into S (iteratively, with an explicit stack). */
static void expand(sumx *S, tg_var *root) {
    term stack[MAX_TERMS * 2];
    int sp = 0;
    stack[sp++] = (term){.v = root, .coef = 1.0};
    while (sp > 0 && !S->fail) {
        term c = stack[--sp];
        tg_var *v = c.v;
        /* a node on another device is a term as it is: its work stays where it is */
        bool here = v == root || (v->kind == TG_VAR_NODE && is_here(S, v));
        bool inner =
            here && (v == root || (tg_rw_use_count(S->rw, v) == 1 && !tg_rw_is_output(S->rw, v)));
        int op = v->kind == TG_VAR_NODE ? v->node->op : -1;
        tg_node *n = v->kind == TG_VAR_NODE ? v->node : NULL;
        if (sp + 2 > (int)TG_COUNTOF(stack)) {
            S->fail = true;
            break;
        }
        /* the interior of the sum: same-typed add/sub/neg, scalar mul, 2-D transpose */
        if (inner && (op == TG_OP_ADD || op == TG_OP_SUB) && is_float(v) &&
            n->in[0]->type.dtype == v->type.dtype && n->in[1]->type.dtype == v->type.dtype &&
            n->in[0]->type.ndim <= v->type.ndim && n->in[1]->type.ndim <= v->type.ndim) {
            term r = c;
            r.v = n->in[1];
            if (op == TG_OP_SUB) r.coef = -r.coef;
            stack[sp++] = r;
            c.v = n->in[0];
            stack[sp++] = c;
            continue;
        }
        if (inner && op == TG_OP_NEG && is_float(v)) {
            c.v = n->in[0];
            c.coef = -c.coef;
            stack[sp++] = c;
            continue;
        }
        if (inner && op == TG_OP_MUL && is_float(v)) {
            int k = scalar_factor(n->in[1], n->in[0], v)   ? 1
                    : scalar_factor(n->in[0], n->in[1], v) ? 0
                                                           : -1;
            if (k >= 0 && scale_by(&c, n->in[k])) {
                c.v = n->in[1 - k];
                stack[sp++] = c;
                continue;
            }
        }
        if (inner && is_swap(v)) {
            c.v = n->in[0];
            c.tr = !c.tr;
            stack[sp++] = c;
            continue;
        }
        /* products and earlier BLAS nodes: absorbed when every use of them is in the sum */
        tg_var *a = NULL, *b = NULL;
        bool ta, tb;
        int kind = product_form(v, &a, &b, &ta, &tb);
        int bk = n ? tg_op_table[op]->blas : TG_BLAS_NONE; /* the record's BLAS form */
        /* a BLAS node with an accumulator is walked into only when the sum is its reader */
        if (bk != TG_BLAS_NONE && n->attrs[1].f != 0.0 && v != root && !inner) bk = TG_BLAS_NONE;
        if ((kind != TG_BLAS_NONE || bk != TG_BLAS_NONE) && here &&
            (v == root || !tg_rw_is_output(S->rw, v))) {
            int reach = v == root ? 1 : seen_add(S, v);
            if (reach < 0) {
                S->fail = true;
                break;
            }
            term *t = term_new(S, &c, v);
            if (!t) break;
            if (kind != TG_BLAS_NONE) {
                t->kind = kind;
                t->a = a;
                t->b = b;
                t->ta = ta;
                t->tb = tb;
            } else { /* gemm/gemv/ger: alpha*sa * product + beta*sb * C */
                t->kind = bk;
                t->a = n->in[1];
                t->b = n->in[2];
                t->ta = bk != TG_BLAS_GER && n->attrs[2].i != 0;
                t->tb = bk == TG_BLAS_GEMM && n->attrs[3].i != 0;
                t->coef *= n->attrs[0].f;
                if (n->nin > 3 && !scale_by(t, n->in[3])) S->fail = true;
                double beta = n->attrs[1].f;
                if (beta != 0.0) {
                    term r = c;
                    r.v = n->in[0];
                    r.coef *= beta;
                    if (n->nin > 4 && !scale_by(&r, n->in[4])) S->fail = true;
                    stack[sp++] = r;
                }
            }
            continue;
        }
        term_new(S, &c, v);
    }
    /* a product reached fewer times than it is used is read elsewhere: an addend */
    for (int i = 0; i < S->n && !S->fail; i++) {
        term *t = &S->t[i];
        if (t->kind == TG_BLAS_NONE || t->v == root) continue;
        for (int j = 0; j < S->nseen; j++)
            if (S->seen[j] == t->v && S->seen_n[j] != tg_rw_use_count(S->rw, t->v))
                t->kind = TG_BLAS_NONE;
    }
    /* a transposed product: (A B)ᵀ = Bᵀ Aᵀ; outer(x, y)ᵀ = outer(y, x) */
    for (int i = 0; i < S->n; i++) {
        term *t = &S->t[i];
        if (t->kind == TG_BLAS_NONE || !t->tr) continue;
        if (t->kind == TG_BLAS_GEMV) { /* a vector product broadcast under a transpose */
            S->fail = true;
            return;
        }
        tg_var *sw = t->a;
        t->a = t->b;
        t->b = sw;
        if (t->kind == TG_BLAS_GEMM) {
            bool f = t->ta;
            t->ta = !t->tb;
            t->tb = !f;
        }
        t->tr = false;
    }
    /* an operand that is a transposed matrix becomes a BLAS flag on the matrix itself */
    for (int i = 0; i < S->n; i++) {
        term *t = &S->t[i];
        for (int guard = 0; t->kind != TG_BLAS_NONE && t->kind != TG_BLAS_GER && is_swap(t->a) &&
                            is_here(S, t->a) && guard < 64;
             guard++) {
            t->a = t->a->node->in[0];
            t->ta = !t->ta;
        }
        for (int guard = 0;
             t->kind == TG_BLAS_GEMM && is_swap(t->b) && is_here(S, t->b) && guard < 64; guard++) {
            t->b = t->b->node->in[0];
            t->tb = !t->tb;
        }
    }
}

/* Same scalar lists (as multisets). */
static bool same_scal(const term *x, const term *y) {
    if (x->nscal != y->nscal) return false;
    bool used[MAX_SCAL] = {false};
    for (int i = 0; i < x->nscal; i++) {
        int j = 0;
        while (j < y->nscal && (used[j] || y->scal[j] != x->scal[i])) j++;
        if (j == y->nscal) return false;
        used[j] = true;
    }
    return true;
}

/* The product of a term's symbolic scalars (NULL when none). */
static tg_var *scal_product(tg_graph *g, const term *t) {
    tg_var *p = NULL;
    for (int i = 0; i < t->nscal; i++) p = p ? tg_mul(g, p, t->scal[i]) : t->scal[i];
    return p;
}

/* A non-product term rebuilt as graph: transpose (or a column for a vector), scalars,
 * then the constant. */
static tg_var *rebuild(tg_graph *g, const term *t) {
    tg_var *v = t->v;
    double x;
    if (v->type.ndim == 0 && t->nscal == 0 && tg_rw_const_value(v, &x) && !isnan(x * t->coef))
        return tg_literal_float(g, x * t->coef); /* a scaled constant is a constant */
    if (t->tr && v->type.ndim == 2) {
        v = tg_transpose(g, v, NULL);
    } else if (t->tr && v->type.ndim == 1) {
        int64_t ax = 1;
        tg_attr at = TG_A_INTS("axis", &ax, 1);
        v = tg_apply(g, "expand_dims", &v, 1, &at, 1);
    }
    for (int i = 0; i < t->nscal; i++) v = tg_mul(g, v, t->scal[i]);
    if (t->coef == -1.0)
        v = tg_neg(g, v);
    else if (t->coef != 1.0)
        v = tg_mul(g, v, tg_literal_float(g, t->coef));
    return v;
}

/* Static shape of a product term's result. */
static int product_shape(const term *t, int64_t *shape) {
    const tg_type *a = &t->a->type, *b = &t->b->type;
    switch (t->kind) {
    case TG_BLAS_GEMM:
        shape[0] = a->shape[t->ta ? 1 : 0];
        shape[1] = b->shape[t->tb ? 0 : 1];
        return 2;
    case TG_BLAS_GEMV:
        shape[0] = a->shape[t->ta ? 1 : 0];
        return 1;
    default:
        shape[0] = a->shape[0];
        shape[1] = b->shape[0];
        return 2;
    }
}

/* The accumulator type c broadcasts to the product's result (nd, shape), as gemm wants. */
static bool acc_fits(const tg_type *c, int nd, const int64_t *shape) {
    if (c->ndim > nd) return false;
    for (int i = 0; i < c->ndim; i++) {
        int64_t e = c->shape[i], o = shape[nd - c->ndim + i];
        bool bcast = e == 1 && !(c->nobcast & (1u << i));
        if (!bcast && e >= 0 && o >= 0 && e != o) return false;
    }
    return true;
}

/* An addend that is elementwise work of its own (an elementwise or fused node that only
 * this sum reads): the fuse phase can compute it and the outer product in one pass. */
static bool elementwise_addend(tg_rw *rw, const tg_var *v) {
    if (v->kind != TG_VAR_NODE || tg_rw_is_output(rw, v) || tg_rw_use_count(rw, v) != 1)
        return false;
    return tg_op_table[v->node->op]->kind == TG_KIND_ELEMWISE || v->node->op == TG_OP_FUSED;
}

/* A ger term as the broadcast elementwise form x[:, None] * y[None, :], scaled. */
static tg_var *outer_form(tg_graph *g, const term *t) {
    int64_t ax1 = 1, ax0 = 0;
    tg_attr a1 = TG_A_INTS("axis", &ax1, 1), a0 = TG_A_INTS("axis", &ax0, 1);
    tg_var *x = t->a, *y = t->b;
    term e = *t;
    e.kind = TG_BLAS_NONE;
    e.tr = false;
    e.v = tg_mul(g, tg_apply(g, "expand_dims", &x, 1, &a1, 1),
                 tg_apply(g, "expand_dims", &y, 1, &a0, 1));
    return e.v ? rebuild(g, &e) : NULL;
}

static tg_var *build_blas(tg_graph *g, const term *t, tg_var *acc, double beta, tg_var *sb) {
    static const int form_op[] = {
        [TG_BLAS_GEMM] = TG_OP_GEMM, [TG_BLAS_GEMV] = TG_OP_GEMV, [TG_BLAS_GER] = TG_OP_GER};
    const tg_op_def *op = tg_op_table[form_op[t->kind]];
    tg_var *in[5] = {acc, t->a, t->b, NULL, NULL};
    int nin = 3;
    tg_var *sa = scal_product(g, t);
    if (sa || sb) {
        in[nin++] = sa ? sa : tg_literal_float(g, 1.0);
        if (sb) in[nin++] = sb;
    }
    tg_attr at[4] = {TG_A_FLOAT("alpha", t->coef), TG_A_FLOAT("beta", beta),
                     TG_A_BOOL("trans_a", t->ta), TG_A_BOOL("trans_b", t->tb)};
    return tg_apply(g, op->name, in, nin, at, op->nattrs); /* the first nattrs of at */
}

static tg_var *rw_blas_sum(tg_rw *rw, tg_node *n) {
    tg_var *root = n->out[0];
    if (n->nout != 1 || !is_float(root)) return NULL;
    /* a bare product has nothing to absorb: dot and matmul already run as BLAS calls, and
     * a bare outer has no accumulator */
    if (n->op == TG_OP_OUTER || n->op == TG_OP_DOT || n->op == TG_OP_MATMUL) return NULL;
    sumx *S = &(sumx){.rw = rw, .dev = n->device};
    expand(S, root);
    if (S->fail) return NULL;
    /* merge identical products */
    int nprod = 0;
    for (int i = 0; i < S->n; i++) {
        term *t = &S->t[i];
        if (t->kind == TG_BLAS_NONE) continue;
        for (int j = 0; j < i; j++) {
            term *u = &S->t[j];
            if (u->kind == t->kind && u->a == t->a && u->b == t->b && u->ta == t->ta &&
                u->tb == t->tb && same_scal(u, t)) {
                u->coef += t->coef;
                t->kind = MERGED;
                break;
            }
        }
        if (t->kind != MERGED) nprod++;
    }
    if (nprod == 0) return NULL;
    /* a lone ger or transposed-root sum is only worth it as part of a larger sum */
    int64_t shape[2] = {0, 0};
    int nd = -1, acc_terms = 0;
    for (int i = 0; i < S->n; i++) {
        const term *t = &S->t[i];
        if (t->kind == TG_BLAS_NONE && !zero_value(t->v)) acc_terms++;
        if (t->kind == TG_BLAS_NONE || t->kind == MERGED) continue;
        if (t->coef == 0.0) return NULL; /* 0 * (X@Y) keeps NaN and inf: leave it */
        int64_t s[2] = {0, 0};
        int d = product_shape(t, s);
        if (nd < 0) {
            nd = d;
            shape[0] = s[0];
            shape[1] = s[1];
        } else if (d != nd || s[0] != shape[0] || (d == 2 && s[1] != shape[1])) {
            return NULL;
        }
    }
    if (nd != root->type.ndim) return NULL;
    for (int d = 0; d < nd; d++)
        if (root->type.shape[d] != shape[d]) return NULL;
    if (n->op == TG_OP_TRANSPOSE && acc_terms > 0) return NULL; /* the view is free */
    tg_graph *g = tg_rw_graph(rw);
    /* the accumulator: the one remaining term with its scale as beta, or their sum */
    tg_var *acc = NULL, *sb = NULL;
    double beta = 1.0;
    const term *only = NULL;
    for (int i = 0; i < S->n; i++) {
        const term *t = &S->t[i];
        if (t->kind != TG_BLAS_NONE || zero_value(t->v)) continue;
        only = acc_terms == 1 ? t : NULL;
        if (only) break;
        tg_var *r = rebuild(g, t);
        acc = acc ? tg_add(g, acc, r) : r;
    }
    tg_var *orig = NULL; /* the accumulator when it is an original addend, unscaled */
    if (only && !only->tr) {
        acc = orig = only->v;
        beta = only->coef;
        sb = scal_product(g, only);
        if (beta == 0.0 && !sb) { /* 0 * Z keeps NaN: the product of the scale instead */
            acc = rebuild(g, only);
            beta = 1.0;
        }
    } else if (only) {
        acc = rebuild(g, only);
    }
    if (!acc) { /* no accumulator: beta 0, an uninitialised output */
        acc = tg_literal_float(g, 0.0);
        beta = 0.0;
    }
    if (!acc || !acc_fits(&acc->type, nd, shape)) return NULL;
    /* gemm/gemv first, then ger. A ger costs one pass over its matrix (in place, or row by
     * row from its accumulator: see vm_blas.c); an accumulator that is elementwise work
     * (several addends, or one computed elementwise here) would cost a pass of its own,
     * so there the outer product takes the fused form and joins that pass. */
    tg_var *out = NULL;
    bool first = true, out_blas = false;
    bool fold = beta != 0.0 && (acc != orig || elementwise_addend(rw, orig));
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < S->n; i++) {
            const term *t = &S->t[i];
            if (t->kind == TG_BLAS_NONE || t->kind == MERGED ||
                (t->kind == TG_BLAS_GER) != (pass == 1))
                continue;
            bool blas = t->kind != TG_BLAS_GER || (first ? !fold : out_blas);
            if (blas) {
                out = build_blas(g, t, first ? acc : out, first ? beta : 1.0, first ? sb : NULL);
                out_blas = true;
            } else {
                tg_var *r = outer_form(g, t), *base = out;
                if (first) {
                    term sc = {.v = acc, .coef = beta, .scal = {sb}, .nscal = sb ? 1 : 0};
                    base = rebuild(g, &sc);
                }
                out = tg_add(g, base, r);
                out_blas = false;
            }
            first = false;
        }
    }
    if (!out || !tg_rw_same_type(out, root)) return NULL;
    return out;
}

static const tg_rule blas_rules[] = {
    {"blas_sum", TG_OP_ADD, rw_blas_sum},       {"blas_sum", TG_OP_SUB, rw_blas_sum},
    {"blas_sum", TG_OP_NEG, rw_blas_sum},       {"blas_sum", TG_OP_MUL, rw_blas_sum},
    {"blas_sum", TG_OP_TRANSPOSE, rw_blas_sum},
};

tg_status tg_blas(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    if (opts && opts->no_blas) return TG_OK;
    return tg_rw_apply(g, "blas", blas_rules, (int)TG_COUNTOF(blas_rules), report);
}
