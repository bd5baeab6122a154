/* check.c - the gradient checker tg_grad_check (PyTensor's verify_grad): compares the
 * gradient that tg_grad builds with central finite differences.
 *
 * How: y is g's only output, evaluated once at the point to learn its concrete shape. A
 * projection r of that shape and of y's dtype is drawn from a splitmix64 stream seeded by
 * opts->seed (values of magnitude in [0.5, 1.5) with a random sign, so no element of y is
 * ignored). The gradient of cost = sum(y * r) with respect to every float input is built
 * in a clone of g as the VJP of y with cotangent r (tg_vjp: the same graph tg_grad would
 * build past the sum and the mul, in y's dtype, so an f32 graph stays f32; disconnected
 * inputs get zeros), and compiled with the reference interpreter. The numeric gradient
 * of element j of float input x is (c(x + h e_j) - c(x - h e_j)) / (x_+ - x_-), where
 * c = sum(y * r) is computed in double from the outputs of g itself, h =
 * eps * max(1, |x_j|) (a step relative to the element's magnitude), and x_+ / x_- are
 * the perturbed values as stored in the input's dtype (rounding to f32 changes the step;
 * the actual one divides).
 * Integer and bool inputs are held fixed.
 *
 * Tolerances: an element passes when |analytic - numeric| <= atol + rtol * |numeric|.
 * Defaults: eps 1e-6, rtol 1e-5, atol 1e-8 for f64 graphs; eps 1e-3, rtol 1e-2, atol 1e-3
 * for f32 graphs, where a graph is f32 when any of its float values (inputs, constants,
 * results of nodes) is f32: an f64 input that goes through an f32 computation needs the
 * larger step, or rounding to f32 swamps the difference. A non-finite analytic or
 * numeric value fails unless both are the same infinity.
 * The report holds the element with the largest excess |err| - atol - rtol * |numeric|
 * (also on success).
 *
 * Invariants: neither g nor the caller's tensors are modified (float inputs are
 * perturbed in private copies; g is only compiled, which reads it); nothing global.
 */
#include "../ops/ops.h"

#include <math.h>
#include <stdio.h>

/* ---- the projection's random numbers (splitmix64: small, seedable, local state) ---- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Magnitude uniform in [0.5, 1.5), sign random. */
static double proj_value(uint64_t *s) {
    uint64_t u = splitmix64(s);
    double mag = 0.5 + (double)(u >> 11) * 0x1.0p-53;
    return (u & 1u) ? -mag : mag;
}

/* ---- helpers ---- */

typedef struct check_state {
    tg_ctx *ctx;
    tg_graph *g;       /* the user's graph (read only) */
    tg_fn *fwd;        /* g compiled */
    tg_graph *c;       /* clone with the cost and gradients */
    tg_fn *bwd;        /* c compiled */
    tg_tensor **args;  /* per input: the caller's tensor, or a private copy (floats) */
    tg_tensor *r;      /* the projection */
    tg_tensor **grads; /* analytic gradients, per float input */
    int *fidx;         /* input index of each float input */
    int nf;            /* float input count */
    int nin;           /* input count */
} check_state;

static void state_fini(check_state *s) {
    if (s->args && s->fidx)
        for (int k = 0; k < s->nf; k++) tg_tensor_free(s->args[s->fidx[k]]); /* the copies */
    if (s->grads)
        for (int i = 0; i < s->nf; i++) tg_tensor_free(s->grads[i]);
    tg_tensor_free(s->r);
    tg_fn_free(s->bwd);
    tg_fn_free(s->fwd);
    tg_graph_free(s->c);
    if (s->args) tg_mem_free(s->ctx, s->args, sizeof *s->args * (size_t)(s->nin + 1));
    if (s->grads) tg_mem_free(s->ctx, s->grads, sizeof *s->grads * (size_t)(s->nin + 1));
    if (s->fidx) tg_mem_free(s->ctx, s->fidx, sizeof *s->fidx * (size_t)(s->nin + 1));
}

/* c = sum(y * r) in double, evaluated by running g on the current arguments. */
static tg_status eval_cost(check_state *s, double *out) {
    tg_tensor *y = NULL;
    tg_status st = tg_fn_call(s->fwd, s->args, s->nin, &y, 1);
    if (st != TG_OK) return st;
    int64_t n = tg_tensor_size(y);
    if (n != tg_tensor_size(s->r) || y->ndim != s->r->ndim) {
        tg_tensor_free(y);
        return tg_set_error(TG_ESHAPE, "grad check: the output changed shape between calls");
    }
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) acc += tg_tensor_get_f64(y, i) * tg_tensor_get_f64(s->r, i);
    tg_tensor_free(y);
    *out = acc;
    return TG_OK;
}

/* Builds r from y's concrete shape, the cost and the gradient graph, and compiles it. */
static tg_status build_grad(check_state *s, const tg_tensor *y0, uint64_t seed) {
    s->r = tg_tensor_new(s->ctx, y0->dtype, y0->ndim, y0->shape);
    if (!s->r) return tg_set_error(TG_ENOMEM, "grad check: out of memory");
    int64_t n = tg_tensor_size(s->r);
    uint64_t rng = seed;
    char *base = tg_tensor_data(s->r);
    size_t esz = tg_dtype_size(s->r->dtype);
    for (int64_t i = 0; i < n; i++)
        tg_store_f64(base + (size_t)i * esz, s->r->dtype, proj_value(&rng));
    s->c = tg_graph_clone(s->g);
    if (!s->c) {
        char why[TG_ERRMSG_MAX];
        snprintf(why, sizeof why, "%s", tg_last_error());
        return tg_set_error(TG_EINTERNAL, "grad check: cannot clone '%s': %s", tg_graph_name(s->g),
                            why);
    }
    tg_graph *c = s->c;
    tg_var *y = tg_graph_output(c, 0), *r = tg_constant(c, s->r);
    tg_var **wrt = tg_mem_alloc(s->ctx, sizeof *wrt * (size_t)(2 * s->nf + 1));
    if (!wrt) return tg_set_error(TG_ENOMEM, "grad check: out of memory");
    tg_var **gv = wrt + s->nf;
    for (int k = 0; k < s->nf; k++) wrt[k] = tg_graph_input(c, s->fidx[k]);
    /* the gradient of sum(y * r) is the VJP of y with cotangent r */
    tg_status st =
        r ? tg_vjp(c, &y, &r, 1, wrt, s->nf, TG_DISCONNECTED_ZERO, gv) : tg_graph_status(c);
    if (st == TG_OK) st = tg_graph_set_outputs(c, gv, s->nf);
    tg_mem_free(s->ctx, wrt, sizeof *wrt * (size_t)(2 * s->nf + 1));
    if (st != TG_OK) {
        /* the clone's first error, reported as the checker's */
        return tg_set_error(st, "grad check: %s", tg_graph_error(c));
    }
    st = tg_graph_compile(c, NULL, &s->bwd);
    if (st != TG_OK) return st;
    return tg_fn_call(s->bwd, s->args, s->nin, s->grads, s->nf);
}

/* How far an element is past its tolerance (> 0: it fails). */
static double excess(double a, double num, double rtol, double atol) {
    if (!isfinite(a) || !isfinite(num)) return a == num ? -atol : INFINITY;
    return fabs(a - num) - atol - rtol * fabs(num);
}

tg_status tg_grad_check(tg_graph *g, tg_tensor *const *in, int nin, const tg_grad_check_opts *opts,
                        tg_grad_check_report *rep) {
    /* the caller's structs, in this version's (tgraph.h, "versioned structs") */
    tg_grad_check_opts o;
    tg_status st = tg_struct_in(&o, sizeof o, opts, TG_GRAD_CHECK_OPTS_FIRST, "tg_grad_check",
                                "tg_grad_check_opts");
    if (st == TG_OK)
        st = tg_struct_out_check(rep, sizeof *rep, TG_GRAD_CHECK_REPORT_FIRST, "tg_grad_check",
                                 "tg_grad_check_report");
    if (st != TG_OK) return st;
    opts = &o;
    if (rep) tg_struct_out(rep, &(tg_grad_check_report){.input = -1, .index = -1}, sizeof *rep);
    if (!g) return tg_set_error(TG_EINVAL, "tg_grad_check: graph is NULL");
    if (tg_graph_status(g) != TG_OK)
        return tg_set_error(tg_graph_status(g), "grad check: the graph has an error: %s",
                            tg_graph_error(g));
    if (tg_graph_output_count(g) != 1)
        return tg_set_error(TG_EINVAL, "grad check: '%s' must have exactly one output, it has %d",
                            tg_graph_name(g), tg_graph_output_count(g));
    tg_var *yv = tg_graph_output(g, 0);
    if (!tg_dtype_is_float(tg_var_dtype(yv)))
        return tg_set_error(TG_ETYPE, "grad check: the output must be a float, got %s",
                            tg_dtype_name(tg_var_dtype(yv)));
    if (nin != tg_graph_input_count(g) || (nin > 0 && !in))
        return tg_set_error(TG_EINVAL, "tg_grad_check: '%s' takes %d inputs, got %d%s",
                            tg_graph_name(g), tg_graph_input_count(g), nin,
                            nin > 0 && !in ? " (NULL)" : "");
    for (int i = 0; i < nin; i++)
        if (!in[i]) return tg_set_error(TG_EINVAL, "tg_grad_check: input %d is NULL", i);

    check_state s = {.ctx = g->ctx, .g = g, .nin = nin};
    s.args = tg_mem_calloc(s.ctx, sizeof *s.args * (size_t)(nin + 1));
    s.grads = tg_mem_calloc(s.ctx, sizeof *s.grads * (size_t)(nin + 1));
    s.fidx = tg_mem_calloc(s.ctx, sizeof *s.fidx * (size_t)(nin + 1));
    if (!s.args || !s.grads || !s.fidx) {
        st = tg_set_error(TG_ENOMEM, "grad check: out of memory");
        goto done;
    }
    /* the least precise float value anywhere in g decides the defaults */
    bool f32 = false;
    for (int i = 0; i < g->vars.n && !f32; i++)
        f32 = ((tg_var *)g->vars.items[i])->type.dtype == TG_DT_F32;
    for (int i = 0; i < nin; i++) {
        tg_var *v = tg_graph_input(g, i);
        if (!tg_dtype_is_float(tg_var_dtype(v))) {
            s.args[i] = in[i]; /* borrowed; never written */
            continue;
        }
        if (in[i]->dtype != tg_var_dtype(v)) {
            st = tg_set_error(TG_ETYPE, "grad check: input '%s' is %s, got a %s tensor",
                              tg_var_name(v), tg_dtype_name(tg_var_dtype(v)),
                              tg_dtype_name(in[i]->dtype));
            goto done;
        }
        s.fidx[s.nf++] = i;
        if (!(s.args[i] = tg_tensor_dup(in[i]))) {
            st = tg_set_error(TG_ENOMEM, "grad check: out of memory");
            goto done;
        }
    }
    if (s.nf == 0) {
        st = tg_set_error(TG_EINVAL, "grad check: '%s' has no float input to check",
                          tg_graph_name(g));
        goto done;
    }
    double rtol = opts && opts->rtol > 0 ? opts->rtol : f32 ? 1e-2 : 1e-5;
    double atol = opts && opts->atol > 0 ? opts->atol : f32 ? 1e-3 : 1e-8;
    uint64_t seed = opts ? opts->seed : 0;

    /* y at the point: its shape gives r's */
    st = tg_graph_compile(g, NULL, &s.fwd);
    tg_tensor *y0 = NULL;
    if (st == TG_OK) st = tg_fn_call(s.fwd, s.args, nin, &y0, 1);
    if (st == TG_OK) st = build_grad(&s, y0, seed);
    tg_tensor_free(y0);
    if (st != TG_OK) goto done;

    /* the worst element over every float input */
    tg_grad_check_report worst = {.input = -1, .index = -1};
    double worst_ex = -INFINITY;
    for (int k = 0; k < s.nf && st == TG_OK; k++) {
        int i = s.fidx[k];
        tg_tensor *x = s.args[i];
        tg_dtype dt = x->dtype;
        double eps = opts && opts->eps > 0 ? opts->eps : f32 ? 1e-3 : 1e-6;
        char *base = tg_tensor_data(x); /* a contiguous copy */
        size_t esz = tg_dtype_size(dt);
        int64_t n = tg_tensor_size(x);
        if (tg_tensor_size(s.grads[k]) != n) {
            st = tg_set_error(TG_EINTERNAL,
                              "grad check: the gradient of input '%s' has %lld "
                              "elements, the input %lld",
                              tg_var_name(tg_graph_input(g, i)),
                              (long long)tg_tensor_size(s.grads[k]), (long long)n);
            break;
        }
        for (int64_t j = 0; j < n && st == TG_OK; j++) {
            char *p = base + (size_t)j * esz;
            double x0 = tg_load_f64(p, dt), h = eps * fmax(1.0, fabs(x0));
            double cp = 0.0, cm = 0.0;
            tg_store_f64(p, dt, x0 + h);
            double xp = tg_load_f64(p, dt);
            st = eval_cost(&s, &cp);
            tg_store_f64(p, dt, x0 - h);
            double xm = tg_load_f64(p, dt);
            if (st == TG_OK) st = eval_cost(&s, &cm);
            tg_store_f64(p, dt, x0);
            if (st != TG_OK) break;
            if (!(xp > xm)) {
                st = tg_set_error(TG_EINVAL,
                                  "grad check: step %g vanishes at input '%s' "
                                  "element %lld (value %g); use a larger eps",
                                  h, tg_var_name(tg_graph_input(g, i)), (long long)j, x0);
                break;
            }
            double num = (cp - cm) / (xp - xm);
            double a = tg_tensor_get_f64(s.grads[k], j);
            double ex = excess(a, num, rtol, atol);
            if (ex > worst_ex || worst.input < 0) {
                double err = fabs(a - num), mx = fmax(fabs(a), fabs(num));
                worst_ex = ex;
                worst = (tg_grad_check_report){.input = i,
                                               .index = j,
                                               .analytic = a,
                                               .numeric = num,
                                               .abs_err = err,
                                               .rel_err = mx > 0 ? err / mx : 0.0};
                if (isnan(err)) worst.rel_err = NAN;
            }
        }
    }
    if (st != TG_OK) goto done;
    if (rep) tg_struct_out(rep, &worst, sizeof worst);
    if (worst.input >= 0 && worst_ex > 0)
        st = tg_set_error(TG_ECHECK,
                          "grad check failed for input '%s' element %lld: analytic "
                          "%.9g, numeric %.9g (abs err %.3g; tolerance %.3g + %.3g * |numeric|)",
                          tg_var_name(tg_graph_input(g, worst.input)), (long long)worst.index,
                          worst.analytic, worst.numeric, worst.abs_err, atol, rtol);
done:
    state_fini(&s);
    return st;
}
