/* mlp_forward.c - a user's first tgraph program in C: build a two-layer perceptron's
 * forward pass with the builder API, compile it and run it on a small batch.
 *
 *   build/example_mlp_forward
 *
 * It shows the three habits of the API: builders chain and are checked once (the first
 * error is kept by the graph), every call that can fail returns a tg_status with a
 * message in tg_last_error(), and tensors the library returns are the caller's to free.
 */
#include <tgraph.h>

#include <math.h>
#include <stdio.h>

#define BATCH  4
#define IN     3
#define HIDDEN 5
#define OUT    2

static tg_tensor *filled(tg_dtype dt, int ndim, const int64_t *shape, double scale) {
    tg_tensor *t = tg_tensor_new(NULL, dt, ndim, shape);
    if (!t) return NULL;
    float *p = tg_tensor_data(t);
    for (int64_t i = 0; i < tg_tensor_size(t); i++)
        p[i] = (float)(scale * sin(0.7 * (double)i + 0.3));
    return t;
}

int main(void) {
    tg_graph *g = tg_graph_new(NULL, "mlp");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 2, (int64_t[]){TG_DIM_UNKNOWN, IN});
    tg_var *W1 = tg_input(g, "W1", TG_DT_F32, 2, (int64_t[]){IN, HIDDEN});
    tg_var *b1 = tg_input(g, "b1", TG_DT_F32, 1, (int64_t[]){HIDDEN});
    tg_var *W2 = tg_input(g, "W2", TG_DT_F32, 2, (int64_t[]){HIDDEN, OUT});

    /* h = tanh(x @ W1 + b1); p = softmax(h @ W2) written with primitives */
    tg_var *h = tg_tanh(g, tg_add(g, tg_dot(g, x, W1), b1));
    tg_var *z = tg_dot(g, h, W2);
    tg_var *zmax = tg_reduce(g, "max", z, (int64_t[]){1}, 1, true);
    tg_var *e = tg_exp(g, tg_sub(g, z, zmax));
    tg_var *p = tg_div(g, e, tg_reduce(g, "sum", e, (int64_t[]){1}, 1, true));
    if (!p) { /* one check for the whole chain */
        fprintf(stderr, "building the graph failed: %s\n", tg_graph_error(g));
        tg_graph_free(g);
        return 1;
    }
    tg_graph_set_outputs(g, &p, 1);

    tg_fn *f = NULL;
    if (tg_graph_compile(g, NULL, &f) != TG_OK) {
        fprintf(stderr, "compile failed: %s\n", tg_last_error());
        tg_graph_free(g);
        return 1;
    }
    tg_tensor *in[4] = {
        filled(TG_DT_F32, 2, (int64_t[]){BATCH, IN}, 1.0),
        filled(TG_DT_F32, 2, (int64_t[]){IN, HIDDEN}, 0.5),
        filled(TG_DT_F32, 1, (int64_t[]){HIDDEN}, 0.1),
        filled(TG_DT_F32, 2, (int64_t[]){HIDDEN, OUT}, 0.8),
    };
    tg_tensor *probs = NULL;
    int rc = 0;
    if (!in[0] || !in[1] || !in[2] || !in[3] || tg_fn_call(f, in, 4, &probs, 1) != TG_OK) {
        fprintf(stderr, "run failed: %s\n", tg_last_error());
        rc = 1;
    } else {
        printf("class probabilities for a batch of %d:\n", BATCH);
        tg_tensor_print(probs, stdout);
    }
    tg_tensor_free(probs);
    for (int i = 0; i < 4; i++) tg_tensor_free(in[i]);
    tg_fn_free(f);
    tg_graph_free(g);
    return rc;
}
