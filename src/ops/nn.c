/* nn.c - the softmax family: softmax log_softmax logsumexp.
 *
 * One record per op. Float inputs keep their dtype; bool and integer inputs are promoted
 * to a float dtype as NumPy's exp promotes them (bool, i8, u8, i16 -> f32, since tgraph has
 * no f16; i32, i64 -> f64): `promote` asks for it and the builder inserts the cast.
 * The reference kernels are the numerically stable forms, computed in double and rounded
 * once on the store, with scipy.special's conventions:
 *  - softmax:     e = exp(x - max(x)); e / sum(e)      (a +inf or all -inf row gives NaN)
 *  - log_softmax: m = max(x), replaced by 0 when not finite; (x - m) - log(sum(exp(x - m)))
 *  - logsumexp:   m as for log_softmax; log(sum(exp(x - m))) + m
 * so logsumexp of all -inf is -inf, with a +inf it is +inf, NaN propagates, and over an
 * empty axis it is -inf (log of an empty sum). softmax and log_softmax take one axis (or
 * none: all axes, as scipy does); logsumexp takes an int, a list or none, and keepdims.
 * Each record states the computation as data too (`reduce`, ops.h), which the VM's row
 * kernels read; the reference kernels here are the oracle they match.
 * Invariants: kernels read their input through its strides (any sign, 0-size) and visit
 * the reduced elements of each output position in C order.
 */
#include "ops.h"

#include <math.h>
#include <stdio.h>

/* ---- shared pieces ---- */

static const tg_attr_spec softmax_attrs[] = {
    {"axis", TG_AS_INT, 0, 1, {.kind = TG_ATTR_INT, .i = -1}},
};

static const tg_attr_spec lse_attrs[] = {
    {"axis", TG_AS_AXES, 0, 1, {.kind = TG_ATTR_NONE}},
    {"keepdims", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
};

/* NumPy's exp promotion of a non-float dtype (no f16 in tgraph: f32 instead). */
static tg_dtype float_for(tg_dtype dt) {
    if (tg_dtype_is_float(dt)) return dt;
    return dt == TG_DT_I32 || dt == TG_DT_I64 ? TG_DT_F64 : TG_DT_F32;
}

static tg_status promote_float(tg_infer *ic, tg_dtype *want) {
    want[0] = float_for((tg_dtype)ic->in[0].dtype);
    return TG_OK;
}

static tg_status check_float(tg_infer *ic, tg_axes *ax) {
    const tg_type *x = &ic->in[0];
    char a[TG_TYPE_STR_MAX], err[160];
    if (!tg_dtype_is_float((tg_dtype)x->dtype))
        return tg_infer_fail(ic, TG_ETYPE, "expects a float input, got %s",
                             tg_type_str(x, a, sizeof a));
    if (!tg_reduce_axes(ic->attrs, ic->op->nattrs, x->ndim, ax, err, sizeof err))
        return tg_infer_fail(ic, TG_EINVAL, "%s", err);
    return TG_OK;
}

static tg_status infer_softmax(tg_infer *ic) {
    tg_axes ax;
    if (check_float(ic, &ax) != TG_OK) return ic->status;
    ic->out[0] = ic->in[0];
    ic->out[0].weak = 0;
    ic->nout = 1;
    return TG_OK;
}

static tg_status infer_logsumexp(tg_infer *ic) {
    tg_axes ax;
    if (check_float(ic, &ax) != TG_OK) return ic->status;
    const tg_type *x = &ic->in[0];
    tg_type *o = &ic->out[0];
    memset(o, 0, sizeof *o);
    o->dtype = x->dtype;
    int nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (ax.red[i]) {
            if (ax.keep) o->shape[nd++] = 1; /* a static 1: broadcastable */
            continue;
        }
        if ((x->nobcast >> i) & 1u) o->nobcast |= 1u << nd;
        o->shape[nd++] = x->shape[i];
    }
    o->ndim = (uint8_t)nd;
    ic->nout = 1;
    return TG_OK;
}

/* ---- the reference kernel ---- */

typedef enum { NN_SOFTMAX, NN_LOG_SOFTMAX, NN_LOGSUMEXP } nn_form;

/* The kept and reduced axes of an input, in order. */
typedef struct axes_split {
    int nkeep, nred;
    int keep_ax[TG_MAX_DIMS], red_ax[TG_MAX_DIMS];
    int64_t keep_shape[TG_MAX_DIMS], red_shape[TG_MAX_DIMS];
    int64_t nrows, nelem; /* output positions, reduced elements per position */
} axes_split;

/* Sets idx on the reduced axes from the reduced multi-index ri. */
static void put_red(const axes_split *s, const int64_t *ri, int64_t *idx) {
    for (int t = 0; t < s->nred; t++) idx[s->red_ax[t]] = ri[t];
}

static tg_status nn_ref(tg_kern *k, nn_form form) {
    const tg_tensor *x = k->in[0];
    tg_tensor *y = k->out[0];
    tg_axes ax;
    char err[160];
    int nattrs = form == NN_LOGSUMEXP ? (int)TG_COUNTOF(lse_attrs) : (int)TG_COUNTOF(softmax_attrs);
    if (!tg_reduce_axes(k->attrs, nattrs, x->ndim, &ax, err, sizeof err))
        return tg_kern_fail(k, TG_EINVAL, "%s", err);
    const bool *red = ax.red;
    axes_split s = {.nrows = 1, .nelem = 1};
    for (int i = 0; i < x->ndim; i++) {
        if (red[i]) {
            s.red_shape[s.nred] = x->shape[i];
            s.red_ax[s.nred++] = i;
            s.nelem *= x->shape[i];
        } else {
            s.keep_shape[s.nkeep] = x->shape[i];
            s.keep_ax[s.nkeep++] = i;
            s.nrows *= x->shape[i];
        }
    }
    bool keepdims = ax.keep;
    int64_t ko[TG_MAX_DIMS] = {0}, ri[TG_MAX_DIMS], idx[TG_MAX_DIMS] = {0};
    int64_t yidx[TG_MAX_DIMS];
    for (int64_t r = 0; r < s.nrows; r++) {
        for (int t = 0; t < s.nkeep; t++) idx[s.keep_ax[t]] = ko[t];
        /* pass 1: the maximum (NaN wins and stays) */
        double m = -INFINITY;
        memset(ri, 0, sizeof ri);
        for (int64_t j = 0; j < s.nelem; j++) {
            put_red(&s, ri, idx);
            double v = tg_load_f64(tg_tensor_at(x, idx), x->dtype);
            if (isnan(v) || v > m) m = isnan(m) ? m : v;
            tg_index_next(s.nred, s.red_shape, ri);
        }
        double shift = form == NN_SOFTMAX || isfinite(m) ? m : 0.0;
        /* pass 2: the sum of the shifted exponentials */
        double sum = 0.0;
        memset(ri, 0, sizeof ri);
        for (int64_t j = 0; j < s.nelem; j++) {
            put_red(&s, ri, idx);
            sum += exp(tg_load_f64(tg_tensor_at(x, idx), x->dtype) - shift);
            tg_index_next(s.nred, s.red_shape, ri);
        }
        if (form == NN_LOGSUMEXP) {
            int nd = 0;
            for (int i = 0; i < x->ndim; i++)
                if (!red[i])
                    yidx[nd++] = idx[i];
                else if (keepdims)
                    yidx[nd++] = 0;
            tg_store_f64(tg_tensor_at(y, yidx), y->dtype, log(sum) + shift);
        } else {
            /* pass 3: the outputs */
            double lsum = log(sum);
            memset(ri, 0, sizeof ri);
            for (int64_t j = 0; j < s.nelem; j++) {
                put_red(&s, ri, idx);
                double t = tg_load_f64(tg_tensor_at(x, idx), x->dtype) - shift;
                tg_store_f64(tg_tensor_at(y, idx), y->dtype,
                             form == NN_SOFTMAX ? exp(t) / sum : t - lsum);
                tg_index_next(s.nred, s.red_shape, ri);
            }
        }
        tg_index_next(s.nkeep, s.keep_shape, ko);
    }
    return TG_OK;
}

static tg_status ref_softmax(tg_kern *k) { return nn_ref(k, NN_SOFTMAX); }
static tg_status ref_log_softmax(tg_kern *k) { return nn_ref(k, NN_LOG_SOFTMAX); }
static tg_status ref_logsumexp(tg_kern *k) { return nn_ref(k, NN_LOGSUMEXP); }

/* ---- gradients ----
 * With y the output and ct its cotangent (reductions keep their axes so that they
 * broadcast back):
 *  - softmax:     dx = y * (ct - sum(ct * y, axis, keepdims))
 *  - log_softmax: dx = ct - exp(y) * sum(ct, axis, keepdims)
 *  - logsumexp:   dx = ct' * exp(x - y'), where ' re-inserts the reduced axes when
 *                 keepdims is false; exp(x - y) is the softmax over the reduced axes.
 * Rows whose maximum is not finite (all -inf, or a +inf) get NaN gradients. */

/* sum(v) over a softmax's axis (an int, or none: every axis), keeping dims. */
static tg_var *sum_axis(tg_graph *g, const tg_aval *axis, tg_var *v) {
    if (axis->kind == TG_ATTR_NONE) return tg_reduce(g, "sum", v, NULL, -1, true);
    return tg_reduce(g, "sum", v, &axis->i, 1, true);
}

static tg_status vjp_softmax(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *y = n->out[0], *ct = gout[0];
    tg_var *s = sum_axis(g, &n->attrs[0], tg_mul(g, ct, y));
    gin[0] = tg_mul(g, y, tg_sub(g, ct, s));
    return tg_graph_status(g);
}

static tg_status vjp_log_softmax(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *y = n->out[0], *ct = gout[0];
    gin[0] = tg_sub(g, ct, tg_mul(g, tg_exp(g, y), sum_axis(g, &n->attrs[0], ct)));
    return tg_graph_status(g);
}

static tg_status vjp_logsumexp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0], *y = n->out[0], *ct = gout[0];
    tg_axes ax;
    char err[160];
    if (!tg_reduce_axes(n->attrs, tg_op_logsumexp.nattrs, x->type.ndim, &ax, err, sizeof err)) {
        tg_ir_fail(g, TG_EINTERNAL, "logsumexp: %s", err);
        return tg_graph_status(g);
    }
    if (!ax.keep) {
        int64_t axes[TG_MAX_DIMS];
        int nax = 0;
        for (int i = 0; i < x->type.ndim; i++)
            if (ax.red[i]) axes[nax++] = i;
        if (nax > 0) {
            tg_attr a = TG_A_INTS("axis", axes, nax);
            ct = tg_apply(g, "expand_dims", &ct, 1, &a, 1);
            y = tg_apply(g, "expand_dims", &y, 1, &a, 1);
        }
    }
    gin[0] = tg_mul(g, ct, tg_exp(g, tg_sub(g, x, y)));
    return tg_graph_status(g);
}

/* ---- the records ---- */

const tg_op_def tg_op_softmax = {
    .name = "softmax",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = softmax_attrs,
    .nattrs = (int)TG_COUNTOF(softmax_attrs),
    .promote = promote_float,
    .infer = infer_softmax,
    .ref = ref_softmax,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_softmax,
    .reduce = {.combine = TG_RED_SUM, .fin = TG_FIN_SOFTMAX, .identity = 0.0},
};

const tg_op_def tg_op_log_softmax = {
    .name = "log_softmax",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = softmax_attrs,
    .nattrs = (int)TG_COUNTOF(softmax_attrs),
    .promote = promote_float,
    .infer = infer_softmax,
    .ref = ref_log_softmax,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_log_softmax,
    .reduce = {.combine = TG_RED_SUM, .fin = TG_FIN_LOG_SOFTMAX, .identity = 0.0},
};

const tg_op_def tg_op_logsumexp = {
    .name = "logsumexp",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_REDUCE,
    .attrs = lse_attrs,
    .nattrs = (int)TG_COUNTOF(lse_attrs),
    .promote = promote_float,
    .infer = infer_logsumexp,
    .ref = ref_logsumexp,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_logsumexp,
    .reduce = {.combine = TG_RED_SUM, .fin = TG_FIN_LOGSUMEXP, .identity = 0.0},
};
