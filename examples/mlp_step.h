/* mlp_step.h - the Fashion-MNIST model of examples/fashion_mnist.c, shared with the W6
 * benchmark (bench/w6.c): an MLP 784-256-10 with relu and a softmax cross-entropy loss,
 * built with the C API as one training-step function (forward, tg_grad, Adam update of
 * every parameter as state), the same step data-parallel over several devices (a pmap
 * whose body takes the gradient of the loss averaged over the devices with pmean, or
 * averages its own rows' gradients with pmean), and an evaluation function. Header-only
 * (static functions).
 */
#ifndef TG_EXAMPLES_MLP_STEP_H
#define TG_EXAMPLES_MLP_STEP_H

#include <tgraph.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define NIN  784 /* 28 x 28 pixels */
#define NHID 256 /* hidden units */
#define NOUT 10  /* classes */

/* ---- parameters and optimiser state ---------------------------------------------- */

enum { P_W1, P_B1, P_W2, P_B2, NPARAM };
static const char *const param_name[NPARAM] = {"W1", "b1", "W2", "b2"};
static const int param_ndim[NPARAM] = {2, 1, 2, 1};
static const int64_t param_shape[NPARAM][2] = {{NIN, NHID}, {NHID, 0}, {NHID, NOUT}, {NOUT, 0}};

/* ---- the model ------------------------------------------------------------------- */

static inline tg_var *apply1(tg_graph *g, const char *op, tg_var *x, tg_attr a) {
    return tg_apply(g, op, &x, 1, &a, 1);
}

static inline tg_var *lit(tg_graph *g, double v) { return tg_literal_float(g, v); }

/* logits = relu(x/255 . W1 + b1) . W2 + b2, for u8 pixels x */
static inline tg_var *logits_of(tg_graph *g, tg_var *x, tg_var *const *p) {
    tg_var *xf = tg_mul(g, tg_cast(g, x, TG_DT_F32), lit(g, 1.0 / 255.0));
    tg_var *z = tg_add(g, tg_dot(g, xf, p[P_W1]), p[P_B1]);
    tg_var *h = tg_where(g, tg_gt(g, z, lit(g, 0.0)), z, lit(g, 0.0)); /* relu */
    return tg_add(g, tg_dot(g, h, p[P_W2]), p[P_B2]);
}

/* The mean loss of a batch: -log softmax(logits)[y] averaged over the rows, the labels
 * made one-hot by comparing them with 0..9 (a static-shape form whose gradient stays
 * dense). */
static inline tg_var *batch_loss(tg_graph *g, tg_var *x, tg_var *y, tg_var *const *p) {
    tg_var *logp = apply1(g, "log_softmax", logits_of(g, x, p), TG_A_INT("axis", 1));
    tg_var *classes = tg_apply(g, "arange", NULL, 0,
                               (tg_attr[]){TG_A_INT("start", 0), TG_A_INT("stop", NOUT),
                                           TG_A_INT("step", 1), TG_A_STR("dtype", "i64")},
                               4);
    tg_var *onehot = tg_cast(
        g, tg_eq(g, apply1(g, "expand_dims", y, TG_A_INTS("axis", (int64_t[]){1}, 1)), classes),
        TG_DT_F32);
    tg_var *ll = tg_reduce(g, "sum", tg_mul(g, onehot, logp), (int64_t[]){1}, 1, false);
    return tg_neg(g, tg_reduce(g, "mean", ll, NULL, -1, false));
}

/* What a training step reads: the batch x u8[rows,784] and y i64[rows], the learning
 * rate lr f32[] (so the caller can schedule it), and Adam's step counter t, the parameters
 * and their two moments: state of the step function, or parameters of the pmap's body. */
typedef struct step_vars {
    tg_var *x, *y, *lr, *t;
    tg_var *p[NPARAM], *m[NPARAM], *v[NPARAM];
} step_vars;

#define NSTATE (1 + 3 * NPARAM) /* t, the parameters, their moments */

static inline void step_declare(tg_graph *g, int64_t rows, bool state, step_vars *s) {
    tg_var *(*mk)(tg_graph *, const char *, tg_dtype, int, const int64_t *) =
        state ? tg_state : tg_input;
    s->x = tg_input(g, "x", TG_DT_U8, 2, (int64_t[]){rows, NIN});
    s->y = tg_input(g, "y", TG_DT_I64, 1, (int64_t[]){rows});
    s->lr = tg_input(g, "lr", TG_DT_F32, 0, NULL);
    s->t = mk(g, "t", TG_DT_F32, 0, NULL);
    for (int i = 0; i < NPARAM; i++) {
        char name[16];
        s->p[i] = mk(g, param_name[i], TG_DT_F32, param_ndim[i], param_shape[i]);
        snprintf(name, sizeof name, "m_%s", param_name[i]);
        s->m[i] = mk(g, name, TG_DT_F32, param_ndim[i], param_shape[i]);
        snprintf(name, sizeof name, "v_%s", param_name[i]);
        s->v[i] = mk(g, name, TG_DT_F32, param_ndim[i], param_shape[i]);
    }
}

/* t, then each parameter followed by its two moments: the NSTATE values in the order
 * step_declare makes them. */
static inline void step_state(const step_vars *s, tg_var **out) {
    out[0] = s->t;
    for (int i = 0; i < NPARAM; i++) {
        out[1 + 3 * i] = s->p[i];
        out[2 + 3 * i] = s->m[i];
        out[3 + 3 * i] = s->v[i];
    }
}

/* Adam with bias correction, into next's t, p, m, v: t += 1;
 * step = lr sqrt(1 - b2^t) / (1 - b1^t); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * p -= step m / (sqrt(v) + eps). */
static inline void adam(tg_graph *g, const step_vars *s, tg_var *const *grad, step_vars *next) {
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    next->t = tg_add(g, s->t, lit(g, 1.0));
    tg_var *step =
        tg_mul(g, s->lr,
               tg_div(g, tg_sqrt(g, tg_sub(g, lit(g, 1.0), tg_pow(g, lit(g, b2), next->t))),
                      tg_sub(g, lit(g, 1.0), tg_pow(g, lit(g, b1), next->t))));
    for (int i = 0; i < NPARAM; i++) {
        next->m[i] = tg_add(g, tg_mul(g, s->m[i], lit(g, b1)), tg_mul(g, grad[i], lit(g, 1 - b1)));
        next->v[i] = tg_add(g, tg_mul(g, s->v[i], lit(g, b2)),
                            tg_mul(g, tg_mul(g, grad[i], grad[i]), lit(g, 1 - b2)));
        next->p[i] = tg_sub(
            g, s->p[i],
            tg_mul(g, step, tg_div(g, next->m[i], tg_add(g, tg_sqrt(g, next->v[i]), lit(g, eps)))));
    }
}

/* Declares each state's new value (state[k] <- value[k]) and returns loss. */
static inline tg_status step_finish(tg_graph *g, tg_var *const *state, tg_var *const *value,
                                    tg_var *loss) {
    tg_status st = TG_OK;
    for (int k = 0; k < NSTATE && st == TG_OK; k++) st = tg_update(g, state[k], value[k]);
    return st == TG_OK ? tg_graph_set_outputs(g, &loss, 1) : st;
}

static inline tg_graph *step_failed(tg_graph *g) {
    fprintf(stderr, "building the training step: %s\n",
            tg_graph_status(g) != TG_OK ? tg_graph_error(g) : tg_last_error());
    tg_graph_free(g);
    return NULL;
}

/* The training step: forward, gradients (tg_grad) and the Adam update of every parameter
 * (state, updated in place); inputs x, y, lr; output the mean loss of the batch (before
 * the update). The batch extent is static: every shape in the step, gradients included,
 * is then known when the function is compiled, and the executor plans all of it ahead. */
static inline tg_graph *build_step(int64_t batch) {
    tg_graph *g = tg_graph_new(NULL, "train_step");
    step_vars s, next;
    step_declare(g, batch, true, &s);
    tg_var *loss = batch_loss(g, s.x, s.y, s.p), *grad[NPARAM], *state[NSTATE], *value[NSTATE];
    if (!loss || tg_grad(g, loss, s.p, NPARAM, TG_DISCONNECTED_ERROR, grad) != TG_OK)
        return step_failed(g);
    adam(g, &s, grad, &next);
    step_state(&s, state);
    step_state(&next, value);
    if (step_finish(g, state, value, loss) != TG_OK) return step_failed(g);
    return g;
}

/* The same step, data-parallel over ndev devices with pmap (docs/pmap.md, "Examples"):
 * the same inputs, state and output as build_step(batch), and the same losses and
 * parameters to float rounding. The pmap's body is the step of one device: it takes
 * batch/ndev consecutive rows of the batch (mapped; ndev must divide the batch) and the
 * learning rate, step counter, parameters and moments (replicated); loss = pmean(the loss
 * of its rows) is the batch's loss (the mean of equal shares' means), so grad(loss,
 * parameters) is the batch's gradient, the same on every device (the gradient of a
 * replicated parameter is summed over the devices); every device then makes the same
 * Adam update, and the new values are returned once (out_axes none) into the state.
 * With pmean_grads the gradients are averaged as JAX's data-parallel examples do: each
 * device differentiates the loss of its own rows with respect to its own copy of the
 * parameters (mapped: the step passes them broadcast over the devices), and pmean of
 * those gradients is the batch's gradient. */
static inline tg_graph *build_step_pmap_as(int64_t batch, int ndev, bool pmean_grads) {
    if (ndev < 1 || batch % ndev) {
        fprintf(stderr, "building the training step: %d devices do not divide a batch of %lld\n",
                ndev, (long long)batch);
        return NULL;
    }
    const int64_t rows = batch / ndev;
    const tg_attr axis = TG_A_STR("axis_name", "batch");
    enum { NIN_BODY = 3 + NSTATE + NPARAM }; /* the step's inputs, then the parameters' copies */
    const int nin = 3 + NSTATE + (pmean_grads ? NPARAM : 0);

    /* the body: the inputs in step_vars' order, x and y mapped, the rest replicated; then,
       with pmean_grads, the device's copies of the parameters (mapped) */
    tg_graph *body = tg_graph_new(NULL, "device_step");
    step_vars b, next;
    step_declare(body, rows, false, &b);
    tg_var *copy[NPARAM];
    bool mapped[NIN_BODY] = {true, true};
    for (int i = 0; pmean_grads && i < NPARAM; i++) {
        char name[16];
        snprintf(name, sizeof name, "%s_copy", param_name[i]);
        copy[i] = tg_input(body, name, TG_DT_F32, param_ndim[i], param_shape[i]);
        mapped[3 + NSTATE + i] = true;
    }
    tg_var *loss = NULL, *own = NULL, *grad[NPARAM], *res[1 + NSTATE];
    if (tg_graph_set_mapped(body, "batch", mapped, nin) == TG_OK)
        own = batch_loss(body, b.x, b.y, pmean_grads ? copy : b.p);
    if (own) loss = tg_apply(body, "pmean", &own, 1, &axis, 1);
    if (!loss || tg_grad(body, pmean_grads ? own : loss, pmean_grads ? copy : b.p, NPARAM,
                         TG_DISCONNECTED_ERROR, grad) != TG_OK) {
        step_failed(body);
        return NULL;
    }
    for (int i = 0; pmean_grads && i < NPARAM; i++)
        grad[i] = tg_apply(body, "pmean", &grad[i], 1, &axis, 1);
    adam(body, &b, grad, &next);
    res[0] = loss;
    step_state(&next, res + 1);
    if (tg_graph_set_outputs(body, res, 1 + NSTATE) != TG_OK) {
        step_failed(body);
        return NULL;
    }

    /* the step: xs = x reshaped [ndev, rows, 784], ys [ndev, rows], the parameters'
       copies broadcast to [ndev, ...]; every result once */
    tg_graph *g = tg_graph_new(NULL, "train_step");
    step_vars s;
    step_declare(g, batch, true, &s);
    tg_var *in[NIN_BODY], *out[1 + NSTATE];
    in[0] = tg_reshape(g, s.x, 3, (int64_t[]){ndev, rows, NIN});
    in[1] = tg_reshape(g, s.y, 2, (int64_t[]){ndev, rows});
    in[2] = s.lr;
    step_state(&s, in + 3);
    for (int i = 0; pmean_grads && i < NPARAM; i++) {
        int64_t shape[3] = {ndev, param_shape[i][0], param_shape[i][1]};
        tg_attr a = TG_A_INTS("shape", shape, 1 + param_ndim[i]);
        in[3 + NSTATE + i] = tg_apply(g, "broadcast_to", &s.p[i], 1, &a, 1);
    }
    int64_t in_axes[NIN_BODY] = {0}, out_axes[1 + NSTATE] = {0};
    bool in_none[NIN_BODY], out_none[1 + NSTATE];
    for (int k = 0; k < nin; k++) in_none[k] = !mapped[k];
    for (int k = 0; k < 1 + NSTATE; k++) out_none[k] = true;
    tg_attr pa[4] = {TG_A_FUNC("body", body), axis, TG_A_INTS("in_axes", in_axes, nin),
                     TG_A_INTS("out_axes", out_axes, 1 + NSTATE)};
    pa[2].none = in_none;
    pa[3].none = out_none;
    int nout = 1 + NSTATE;
    tg_status st = tg_apply_multi(g, "pmap", in, nin, pa, 4, out, &nout);
    tg_graph_free(body); /* the pmap node keeps it */
    if (st != TG_OK || step_finish(g, in + 3, out + 1, out[0]) != TG_OK) return step_failed(g);
    return g;
}

static inline tg_graph *build_step_pmap(int64_t batch, int ndev) {
    return build_step_pmap_as(batch, ndev, false);
}

/* The evaluation function: inputs x u8[batch,784], y i64[batch] and the four parameters;
 * outputs the number of correct predictions (i64[]) and the predicted classes (i64[batch]).
 * A label outside 0..9 (padding) never counts as correct. */
static inline tg_graph *build_eval(int64_t batch) {
    tg_graph *g = tg_graph_new(NULL, "evaluate");
    tg_var *x = tg_input(g, "x", TG_DT_U8, 2, (int64_t[]){batch, NIN});
    tg_var *y = tg_input(g, "y", TG_DT_I64, 1, (int64_t[]){batch});
    tg_var *p[NPARAM];
    for (int i = 0; i < NPARAM; i++)
        p[i] = tg_input(g, param_name[i], TG_DT_F32, param_ndim[i], param_shape[i]);
    tg_var *logits = logits_of(g, x, p);
    tg_var *pred = apply1(g, "argmax", logits, TG_A_INT("axis", 1));
    tg_var *correct = tg_reduce(g, "sum", tg_eq(g, pred, y), NULL, -1, false);
    tg_var *outs[2] = {correct, pred};
    if (!correct || tg_graph_set_outputs(g, outs, 2) != TG_OK) {
        fprintf(stderr, "building the evaluation: %s\n", tg_graph_error(g));
        tg_graph_free(g);
        return NULL;
    }
    return g;
}

/* He initialisation with tgraph's random numbers: W ~ Normal(0, 2 / fan_in), biases
 * zero. A small graph (key, key_split, normal) computes the weights, which go into the
 * step function's state; the same seed gives the same weights on every backend. */
static inline tg_status init_params(tg_fn *step, int64_t seed) {
    tg_graph *g = tg_graph_new(NULL, "init");
    tg_attr sa = TG_A_INT("seed", seed), na = TG_A_INT("n", 2);
    tg_var *k = tg_apply(g, "key", NULL, 0, &sa, 1);
    tg_var *ks = tg_apply(g, "key_split", &k, 1, &na, 1);
    tg_var *w[2];
    for (int i = 0; i < 2; i++) {
        const int p = i ? P_W2 : P_W1;
        tg_slice at = {.start = i, .is_index = true};
        tg_var *ki = tg_slice_apply(g, ks, &at, 1);
        tg_attr na2[2] = {TG_A_INTS("shape", param_shape[p], 2), TG_A_STR("dtype", "f32")};
        w[i] = tg_mul(g, tg_apply(g, "normal", &ki, 1, na2, 2),
                      lit(g, sqrt(2.0 / (double)param_shape[p][0])));
    }
    tg_fn *f = NULL;
    tg_tensor *out[2] = {NULL, NULL};
    tg_status st = w[1] ? tg_graph_set_outputs(g, w, 2) : tg_graph_status(g);
    if (st == TG_OK) st = tg_graph_compile(g, NULL, &f);
    if (st == TG_OK) st = tg_fn_call(f, NULL, 0, out, 2);
    for (int i = 0; i < 2 && st == TG_OK; i++)
        st = tg_fn_state_set(step, tg_fn_state_find(step, param_name[i ? P_W2 : P_W1]), out[i]);
    tg_tensor_free(out[0]);
    tg_tensor_free(out[1]);
    tg_fn_free(f);
    tg_graph_free(g);
    return st;
}

#endif
