/* hvp.c - a Hessian-vector product with tgraph: the gradient of a gradient.
 *
 *   build/example_hvp
 *
 * For a tiny regression model, loss(W, u) = mean((tanh(x . W) . u - t)^2), it builds the
 * gradient g = d loss / d(W, u) with tg_grad, then the gradient of <g, v> for a direction
 * v = (vW, vu): that is H v, the Hessian times v, without ever forming H. Gradients are
 * ordinary graph, so the second tg_grad differentiates the first one like any other
 * computation. The program prints H v beside a finite-difference estimate,
 * (g(theta + e v) - g(theta - e v)) / 2e, from the same compiled function.
 */
#include <tgraph.h>

#include <math.h>
#include <stdio.h>

#define N 6 /* samples */
#define D 3 /* features */
#define H 4 /* hidden units */

/* A tensor filled with a smooth deterministic pattern (f64). */
static tg_tensor *pattern(int ndim, const int64_t *shape, double scale, double phase) {
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F64, ndim, shape);
    if (!t) return NULL;
    double *p = tg_tensor_data(t);
    for (int64_t i = 0; i < tg_tensor_size(t); i++) p[i] = scale * sin(1.3 * (double)i + phase);
    return t;
}

static tg_var *sum_all(tg_graph *g, tg_var *v) { return tg_reduce(g, "sum", v, NULL, -1, false); }

int main(void) {
    int rc = 1;
    tg_graph *g = tg_graph_new(NULL, "hvp");
    tg_fn *f = NULL;
    tg_tensor *in[6] = {0}, *at[4] = {0}, *plus[4] = {0}, *minus[4] = {0}, *moved[6] = {0};

    /* data, parameters and the direction v are all inputs of one function */
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, (int64_t[]){TG_DIM_UNKNOWN, D});
    tg_var *t = tg_input(g, "t", TG_DT_F64, 1, (int64_t[]){TG_DIM_UNKNOWN});
    tg_var *p[2] = {tg_input(g, "W", TG_DT_F64, 2, (int64_t[]){D, H}),
                    tg_input(g, "u", TG_DT_F64, 1, (int64_t[]){H})};
    tg_var *v[2] = {tg_input(g, "vW", TG_DT_F64, 2, (int64_t[]){D, H}),
                    tg_input(g, "vu", TG_DT_F64, 1, (int64_t[]){H})};
    tg_var *r = tg_sub(g, tg_dot(g, tg_tanh(g, tg_dot(g, x, p[0])), p[1]), t);
    tg_var *loss = tg_reduce(g, "mean", tg_mul(g, r, r), NULL, -1, false);

    /* g = grad(loss); Hv = grad(<g, v>) */
    tg_var *grad[2], *hv[2];
    if (tg_grad(g, loss, p, 2, TG_DISCONNECTED_ERROR, grad) != TG_OK) goto fail;
    tg_var *gv =
        tg_add(g, sum_all(g, tg_mul(g, grad[0], v[0])), sum_all(g, tg_mul(g, grad[1], v[1])));
    if (tg_grad(g, gv, p, 2, TG_DISCONNECTED_ERROR, hv) != TG_OK) goto fail;
    tg_var *outs[4] = {grad[0], grad[1], hv[0], hv[1]};
    if (tg_graph_set_outputs(g, outs, 4) != TG_OK) goto fail;
    if (tg_graph_compile(g, NULL, &f) != TG_OK) goto fail;

    in[0] = pattern(2, (int64_t[]){N, D}, 1.0, 0.1);
    in[1] = pattern(1, (int64_t[]){N}, 0.7, 2.0);
    in[2] = pattern(2, (int64_t[]){D, H}, 0.6, 0.5);
    in[3] = pattern(1, (int64_t[]){H}, 0.9, 1.0);
    in[4] = pattern(2, (int64_t[]){D, H}, 1.0, 3.0);
    in[5] = pattern(1, (int64_t[]){H}, 1.0, 4.0);
    for (int i = 0; i < 6; i++)
        if (!in[i]) goto fail;
    if (tg_fn_call(f, in, 6, at, 4) != TG_OK) goto fail;

    /* the same function at theta +- e v: its first two outputs are the gradient there */
    const double e = 1e-5;
    for (int sgn = 0; sgn < 2; sgn++) {
        for (int i = 0; i < 6; i++) moved[i] = i == 2 || i == 3 ? tg_tensor_dup(in[i]) : in[i];
        if (!moved[2] || !moved[3]) {
            tg_tensor_free(moved[2]);
            tg_tensor_free(moved[3]);
            goto fail;
        }
        for (int k = 0; k < 2; k++) {
            double *w = tg_tensor_data(moved[2 + k]);
            const double *d = tg_tensor_data(in[4 + k]);
            for (int64_t j = 0; j < tg_tensor_size(in[4 + k]); j++) w[j] += (sgn ? -e : e) * d[j];
        }
        tg_status st = tg_fn_call(f, moved, 6, sgn ? minus : plus, 4);
        tg_tensor_free(moved[2]);
        tg_tensor_free(moved[3]);
        if (st != TG_OK) goto fail;
    }

    printf("Hessian-vector product of mean((tanh(x . W) . u - t)^2) along v\n");
    printf("%-8s %16s %16s %10s\n", "element", "H v", "finite diff.", "|diff|");
    double worst = 0.0;
    static const char *const names[2] = {"W", "u"};
    for (int k = 0; k < 2; k++) {
        for (int64_t j = 0; j < tg_tensor_size(at[2 + k]); j++) {
            double hvj = tg_tensor_get_f64(at[2 + k], j);
            double fd = (tg_tensor_get_f64(plus[k], j) - tg_tensor_get_f64(minus[k], j)) / (2 * e);
            char label[32];
            snprintf(label, sizeof label, "%s[%lld]", names[k], (long long)j);
            printf("%-8s %16.10f %16.10f %10.2e\n", label, hvj, fd, fabs(hvj - fd));
            worst = fmax(worst, fabs(hvj - fd));
        }
    }
    printf("largest difference: %.2e\n", worst);
    rc = worst < 1e-6 ? 0 : 1;
    goto done;
fail:
    fprintf(stderr, "hvp: %s\n", tg_graph_status(g) != TG_OK ? tg_graph_error(g) : tg_last_error());
done:
    for (int i = 0; i < 4; i++) {
        tg_tensor_free(at[i]);
        tg_tensor_free(plus[i]);
        tg_tensor_free(minus[i]);
    }
    for (int i = 0; i < 6; i++) tg_tensor_free(in[i]);
    tg_fn_free(f);
    tg_graph_free(g);
    return rc;
}
