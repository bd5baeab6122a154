/* stabilize.c - the stabilize phase: rules that replace numerically fragile forms by
 * ops whose reference kernels are stable.
 *
 *   log(add(1, exp(x)))          -> softplus(x)             softplus
 *   log1p(exp(x))                -> softplus(x)             log1p_exp
 *   log(add(1, x)), log(add(x, 1)) -> log1p(x)              log1p
 *   sub(exp(x), 1)               -> expm1(x)                expm1
 *   log(sigmoid(x))              -> neg(softplus(neg(x)))   log_sigmoid
 *   log(sub(1, sigmoid(x)))      -> neg(softplus(x))        log1m_sigmoid
 *   log(softmax(x, axis))        -> log_softmax(x, axis)    log_softmax
 *   log(sum(exp(x), axis, keepdims)) -> logsumexp(x, axis, keepdims)     logsumexp
 *   log(div(exp(x), sum(exp(x), axis=a, keepdims=true))) -> log_softmax(x, axis=a)
 *                                                           log_softmax_div
 *   log(sub(1, exp(x))), log1p(neg(exp(x))), log(neg(expm1(x))) -> log1mexp(x)   log1mexp
 *   log(add(exp(a), exp(b)))     -> logaddexp(a, b)         logaddexp
 *   log(erfc(x))                 -> add(log_ndtr(mul(x, -sqrt 2)), log 2)        log_erfc
 *   log(mul(k, erfc(mul(x, c)))), k > 0 and c constants (also mul(c, x), div(x, c) and
 *     negations): log_ndtr(x) when k = 1/2 and c = -1/sqrt 2 (the normal CDF's log,
 *     a censored normal's tail), else add(log_ndtr(mul(x, -sqrt 2 c)), log(2 k))  log_ndtr
 * log_ndtr's lower tail is log(erfcx(z / sqrt 2) / 2) - z^2 / 2 (src/core/specfun.h):
 * log(erfc(x)) for large x is log(erfcx(x)) - x^2 through it, finite where erfc underflows,
 * and, unlike a where() between that form and log(erfc(x)), its gradient is finite too
 * (the unselected branch of a where would give 0 * inf).
 *
 * Invariants:
 *  - A "1" is a constant every element of which is 1 (tg_rw_is_const) and whose
 *    broadcast changes nothing: the other operand already has the type of the add/sub, so
 *    `add(ones[3], x: f64[])` is left alone (the replacement would lose the broadcast).
 *  - Every replacement is checked to have exactly the type of the value it replaces
 *    (dtype, static shape and weakness) before it is returned; otherwise the rule returns
 *    NULL (the engine drops the nodes it built). Rules check what the builders need
 *    before building, so no builder fails inside a rule.
 *  - Rules whose rewrite changes integer semantics (wrapping add, neg of INT_MIN) only
 *    match float values.
 *  - softplus comes before log1p among the rules rooted at log, so log(1 + exp(x)) becomes
 *    softplus(x); log1p(exp(x)) (written by hand, or left by log1p) becomes softplus too.
 *  - No rule builds a pattern another rule of this pass matches back: the pass ends.
 *  - A pattern lies on one device (producer): log(softmax(x)) with the softmax on another
 *    device than the log stays as it is, so no work moves between devices.
 */
#include "rewrite.h"

#include <math.h>

/* The node producing v when it is output 0 of an `op` node on the device of n (the node
 * being rewritten), else NULL: a rule folds the producer's work into what it builds in n's
 * place, on n's device, so it never reaches across devices (docs/devices.md). */
static tg_node *producer(const tg_node *n, const tg_var *v, int op) {
    return v->kind == TG_VAR_NODE && v->index == 0 && v->node->op == op &&
                   tg_ir_same_device(v->node->device, n->device)
               ? v->node
               : NULL;
}

/* The other operand of binary node b when operand `one` (0 or 1) is a 1 that broadcasts
 * into nothing: a constant equal to 1 everywhere, with the other operand of b's type. */
static tg_var *other_of_one(const tg_node *b, int one) {
    tg_var *o = b->in[1 - one];
    if (!tg_rw_is_const(b->in[one], 1.0)) return NULL;
    return tg_rw_same_type(o, b->out[0]) ? o : NULL;
}

/* x when v is add(1, x) or add(x, 1) with a clean 1 (see other_of_one), else NULL. */
static tg_var *one_plus(const tg_node *n, const tg_var *v) {
    tg_node *a = producer(n, v, TG_OP_ADD);
    if (!a || a->nin != 2) return NULL;
    tg_var *x = other_of_one(a, 0);
    return x ? x : other_of_one(a, 1);
}

static bool is_float(const tg_var *v) { return tg_dtype_is_float((tg_dtype)v->type.dtype); }

/* r when it has exactly the type of n's output (the value it replaces, weakness included),
 * else NULL. */
static tg_var *same_type(const tg_node *n, tg_var *r) {
    return r && tg_rw_same_type(r, n->out[0]) ? r : NULL;
}

/* log(add(1, exp(x))) -> softplus(x) */
static tg_var *rw_softplus(tg_rw *rw, tg_node *n) {
    tg_var *e = one_plus(n, n->in[0]);
    tg_node *ex = e ? producer(n, e, TG_OP_EXP) : NULL;
    if (!ex || !is_float(e)) return NULL;
    return same_type(n, tg_softplus(tg_rw_graph(rw), ex->in[0]));
}

/* log1p(exp(x)) -> softplus(x) */
static tg_var *rw_log1p_exp(tg_rw *rw, tg_node *n) {
    tg_node *ex = producer(n, n->in[0], TG_OP_EXP);
    if (!ex || !is_float(n->in[0])) return NULL;
    return same_type(n, tg_softplus(tg_rw_graph(rw), ex->in[0]));
}

/* log(add(1, x)) -> log1p(x), for float x (an integer add wraps; log1p would not) */
static tg_var *rw_log1p(tg_rw *rw, tg_node *n) {
    tg_var *x = one_plus(n, n->in[0]);
    if (!x || !is_float(x)) return NULL;
    return same_type(n, tg_log1p(tg_rw_graph(rw), x));
}

/* sub(exp(x), 1) -> expm1(x) */
static tg_var *rw_expm1(tg_rw *rw, tg_node *n) {
    if (n->nin != 2 || !other_of_one(n, 1)) return NULL;
    tg_node *ex = producer(n, n->in[0], TG_OP_EXP);
    if (!ex || !is_float(n->in[0])) return NULL;
    return same_type(n, tg_expm1(tg_rw_graph(rw), ex->in[0]));
}

/* log(sigmoid(x)) -> neg(softplus(neg(x))), for float x (neg of an integer wraps) */
static tg_var *rw_log_sigmoid(tg_rw *rw, tg_node *n) {
    tg_node *s = producer(n, n->in[0], TG_OP_SIGMOID);
    if (!s || !is_float(s->in[0])) return NULL;
    tg_graph *g = tg_rw_graph(rw);
    return same_type(n, tg_neg(g, tg_softplus(g, tg_neg(g, s->in[0]))));
}

/* log(sub(1, sigmoid(x))) -> neg(softplus(x)), since 1 - sigmoid(x) = 1 / (1 + exp(x)) */
static tg_var *rw_log1m_sigmoid(tg_rw *rw, tg_node *n) {
    tg_node *d = producer(n, n->in[0], TG_OP_SUB);
    if (!d || d->nin != 2 || !other_of_one(d, 0)) return NULL;
    tg_node *s = producer(n, d->in[1], TG_OP_SIGMOID);
    if (!s || !is_float(s->in[0])) return NULL;
    tg_graph *g = tg_rw_graph(rw);
    return same_type(n, tg_neg(g, tg_softplus(g, s->in[0])));
}

/* log(softmax(x, axis)) -> log_softmax(x, axis): the two ops share one attribute schema */
static tg_var *rw_log_softmax(tg_rw *rw, tg_node *n) {
    tg_node *s = producer(n, n->in[0], TG_OP_SOFTMAX);
    if (!s) return NULL;
    tg_node *m = tg_ir_node_make_norm(tg_rw_graph(rw), TG_OP_LOG_SOFTMAX, s->in, 1, s->attrs);
    return m ? same_type(n, m->out[0]) : NULL;
}

/* log(sum(exp(x), axis, keepdims)) -> logsumexp(x, axis, keepdims): same schema as sum */
static tg_var *rw_logsumexp(tg_rw *rw, tg_node *n) {
    tg_node *s = producer(n, n->in[0], TG_OP_SUM);
    tg_node *ex = s ? producer(n, s->in[0], TG_OP_EXP) : NULL;
    if (!ex || !is_float(s->in[0])) return NULL;
    tg_node *m = tg_ir_node_make_norm(tg_rw_graph(rw), TG_OP_LOGSUMEXP, ex->in, 1, s->attrs);
    return m ? same_type(n, m->out[0]) : NULL;
}

/* The log_softmax `axis` equivalent to the axes a keepdims sum over a rank-nd value
 * reduces: one axis, or none for every axis. false for anything else (no axis at all). */
static bool softmax_axis(const tg_aval *axis, int nd, tg_aval *out) {
    if (axis->kind == TG_ATTR_NONE || axis->kind == TG_ATTR_INT) {
        *out = *axis;
        return true;
    }
    if (axis->kind != TG_ATTR_INTS || axis->n < 1) return false;
    if (axis->n == 1) {
        *out = (tg_aval){.kind = TG_ATTR_INT, .i = axis->ints[0]};
        return true;
    }
    /* the sum's inference rejected repeated and out-of-range axes: n distinct axes of
     * an n-rank value are all of them */
    *out = (tg_aval){.kind = TG_ATTR_NONE};
    return axis->n == nd;
}

/* log(div(exp(x), sum(exp(x), axis=a, keepdims=true))) -> log_softmax(x, axis=a), when
 * both exps read the same x and the sum keeps its axes (so the div broadcasts it back) */
static tg_var *rw_log_softmax_div(tg_rw *rw, tg_node *n) {
    tg_node *d = producer(n, n->in[0], TG_OP_DIV);
    if (!d || d->nin != 2) return NULL;
    tg_node *num = producer(n, d->in[0], TG_OP_EXP);
    tg_node *s = producer(n, d->in[1], TG_OP_SUM);
    tg_node *den = s ? producer(n, s->in[0], TG_OP_EXP) : NULL;
    if (!num || !den || num->in[0] != den->in[0] || !is_float(d->in[0])) return NULL;
    if (s->attrs[1].i == 0 || !tg_rw_same_type(d->in[0], d->out[0])) return NULL;
    tg_aval axis;
    if (!softmax_axis(&s->attrs[0], d->in[0]->type.ndim, &axis)) return NULL;
    tg_node *m = tg_ir_node_make_norm(tg_rw_graph(rw), TG_OP_LOG_SOFTMAX, num->in, 1, &axis);
    return m ? same_type(n, m->out[0]) : NULL;
}

/* log(sub(1, exp(x))) -> log1mexp(x) */
static tg_var *rw_log1mexp(tg_rw *rw, tg_node *n) {
    tg_node *d = producer(n, n->in[0], TG_OP_SUB);
    if (!d || d->nin != 2 || !other_of_one(d, 0)) return NULL;
    tg_node *ex = producer(n, d->in[1], TG_OP_EXP);
    if (!ex || !is_float(d->in[1])) return NULL;
    return same_type(n, tg_log1mexp(tg_rw_graph(rw), ex->in[0]));
}

/* log1p(neg(exp(x))) -> log1mexp(x) */
static tg_var *rw_log1p_negexp(tg_rw *rw, tg_node *n) {
    tg_node *ng = producer(n, n->in[0], TG_OP_NEG);
    tg_node *ex = ng ? producer(n, ng->in[0], TG_OP_EXP) : NULL;
    if (!ex || !is_float(ng->in[0])) return NULL;
    return same_type(n, tg_log1mexp(tg_rw_graph(rw), ex->in[0]));
}

/* log(neg(expm1(x))) -> log1mexp(x) (what the expm1 rule leaves of log(-(exp(x) - 1))) */
static tg_var *rw_log_negexpm1(tg_rw *rw, tg_node *n) {
    tg_node *ng = producer(n, n->in[0], TG_OP_NEG);
    tg_node *em = ng ? producer(n, ng->in[0], TG_OP_EXPM1) : NULL;
    if (!em || !is_float(ng->in[0])) return NULL;
    return same_type(n, tg_log1mexp(tg_rw_graph(rw), em->in[0]));
}

/* log(add(exp(a), exp(b))) -> logaddexp(a, b): both broadcast the same way */
static tg_var *rw_logaddexp(tg_rw *rw, tg_node *n) {
    tg_node *s = producer(n, n->in[0], TG_OP_ADD);
    if (!s || s->nin != 2) return NULL;
    tg_node *ea = producer(n, s->in[0], TG_OP_EXP), *eb = producer(n, s->in[1], TG_OP_EXP);
    if (!ea || !eb || !is_float(s->in[0]) || !is_float(s->in[1])) return NULL;
    return same_type(n, tg_logaddexp(tg_rw_graph(rw), ea->in[0], eb->in[0]));
}

/* v = x * scale, through mul by a constant (either side), div by a constant and neg, on
 * n's device; x and the scale in *x and *scale (v itself and 1 when v is none of them). */
static void scaled(const tg_node *n, tg_var *v, tg_var **x, double *scale) {
    double s = 1.0, c;
    for (;;) {
        tg_node *m;
        if ((m = producer(n, v, TG_OP_NEG)) != NULL) {
            s = -s;
            v = m->in[0];
        } else if ((m = producer(n, v, TG_OP_MUL)) != NULL && m->nin == 2 &&
                   tg_rw_const_value(m->in[1], &c) && tg_rw_same_type(m->in[0], m->out[0])) {
            s *= c;
            v = m->in[0];
        } else if (m && m->nin == 2 && tg_rw_const_value(m->in[0], &c) &&
                   tg_rw_same_type(m->in[1], m->out[0])) {
            s *= c;
            v = m->in[1];
        } else if ((m = producer(n, v, TG_OP_DIV)) != NULL && m->nin == 2 &&
                   tg_rw_const_value(m->in[1], &c) && c != 0.0 &&
                   tg_rw_same_type(m->in[0], m->out[0])) {
            s /= c;
            v = m->in[0];
        } else {
            break;
        }
    }
    *x = v;
    *scale = s;
}

/* log(k erfc(c x)) = log(2k) + log_ndtr(-sqrt(2) c x), since erfc(z) = 2 Phi(-sqrt(2) z).
 * The scale -sqrt(2) c is dropped when it is 1 to within the roundings of x's dtype (c =
 * -1/sqrt 2 written as a constant), so a censored normal's log(0.5 * erfc(-x / sqrt(2))) is
 * log_ndtr(x); -1 becomes a neg. */
static tg_var *ndtr_of(tg_graph *g, const tg_node *n, tg_var *erfc_in, double k) {
    tg_var *x;
    double c;
    scaled(n, erfc_in, &x, &c);
    if (!is_float(x)) return NULL;
    /* +-1 to within a few roundings of x's dtype: a constant written for 1/sqrt(2) */
    double z = -1.41421356237309504880 * c, tol = x->type.dtype == TG_DT_F32 ? 1e-6 : 1e-12;
    tg_var *arg = fabs(z - 1.0) <= tol   ? x
                  : fabs(z + 1.0) <= tol ? tg_neg(g, x)
                                         : tg_mul(g, x, tg_literal_float(g, z));
    tg_var *r = tg_log_ndtr(g, arg);
    double off = log(2.0 * k);
    return fabs(off) <= 1e-15 ? r : tg_add(g, r, tg_literal_float(g, off));
}

/* log(erfc(v)) -> log_ndtr form (see ndtr_of), for float v */
static tg_var *rw_log_erfc(tg_rw *rw, tg_node *n) {
    tg_node *e = producer(n, n->in[0], TG_OP_ERFC);
    if (!e || !is_float(n->in[0])) return NULL;
    return same_type(n, ndtr_of(tg_rw_graph(rw), n, e->in[0], 1.0));
}

/* log(mul(k, erfc(v))) or log(mul(erfc(v), k)) with a constant k > 0 -> log_ndtr form */
static tg_var *rw_log_ndtr(tg_rw *rw, tg_node *n) {
    tg_node *m = producer(n, n->in[0], TG_OP_MUL);
    if (!m || m->nin != 2) return NULL;
    for (int side = 0; side < 2; side++) {
        double k;
        tg_node *e = producer(n, m->in[side], TG_OP_ERFC);
        if (e && is_float(m->in[side]) && tg_rw_const_value(m->in[1 - side], &k) && k > 0.0 &&
            isfinite(k) && tg_rw_same_type(m->in[side], m->out[0]))
            return same_type(n, ndtr_of(tg_rw_graph(rw), n, e->in[0], k));
    }
    return NULL;
}

/* Order matters among the rules rooted at log: softplus before log1p. */
static const tg_rule stabilize_rules[] = {
    {"softplus", TG_OP_LOG, rw_softplus},
    {"log1p", TG_OP_LOG, rw_log1p},
    {"log_sigmoid", TG_OP_LOG, rw_log_sigmoid},
    {"log1m_sigmoid", TG_OP_LOG, rw_log1m_sigmoid},
    {"log_softmax", TG_OP_LOG, rw_log_softmax},
    {"logsumexp", TG_OP_LOG, rw_logsumexp},
    {"log_softmax_div", TG_OP_LOG, rw_log_softmax_div},
    {"log1mexp", TG_OP_LOG, rw_log1mexp},
    {"log1mexp_expm1", TG_OP_LOG, rw_log_negexpm1},
    {"logaddexp", TG_OP_LOG, rw_logaddexp},
    {"log_erfc", TG_OP_LOG, rw_log_erfc},
    {"log_ndtr", TG_OP_LOG, rw_log_ndtr},
    {"log1p_exp", TG_OP_LOG1P, rw_log1p_exp},
    {"log1mexp_log1p", TG_OP_LOG1P, rw_log1p_negexp},
    {"expm1", TG_OP_SUB, rw_expm1},
};

tg_status tg_stabilize(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    (void)opts;
    return tg_rw_apply(g, "stabilize", stabilize_rules, (int)TG_COUNTOF(stabilize_rules), report);
}
