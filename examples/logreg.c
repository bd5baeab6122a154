/* logreg.c - logistic regression trained by a stateful compiled step, on synthetic data
 * drawn with tgraph's random numbers.
 *
 *   build/example_logreg [STEPS]          (default 300)
 *
 * Two functions written in the .tg text format:
 *  - `data` draws a dataset from a key: N points x ~ normal, labels y ~ bernoulli(
 *    sigmoid(x . w_true + b_true)), w_true itself drawn at random;
 *  - `step` is one SGD step: it keeps the parameters W and b and a random key as state
 *    (`mut`), draws a minibatch of B rows with permutation, computes the loss and its
 *    gradient, and updates W, b and the key (`W <- ...`).
 * The loop calls `step` with the dataset only: the parameters never leave the compiled
 * function, and no parameter is copied per step (docs/state.md). At the end it prints
 * the learned weights beside the true ones and the accuracy on the whole dataset.
 */
#include <tgraph.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 2048 /* data points */
#define D 8    /* features */

static const char program[] =
    "func data(seed: i64[]) {\n"
    "    ks = key_split(key(seed), n=3)\n"
    "    w_true = normal(ks[0], shape=[8, 1])\n"
    "    x = normal(ks[1], shape=[2048, 8])\n"
    "    p = sigmoid(add(dot(x, w_true), 0.5))\n"
    "    y = cast(bernoulli(ks[2], p), dtype=\"f32\")\n"
    "    return x, y, w_true\n"
    "}\n"
    "\n"
    "func step(mut W: f32[8, 1], mut b: f32[1], mut k: i64[], x: f32[2048, 8], "
    "y: f32[2048, 1]) {\n"
    "    ks = key_split(k, n=2)\n"
    "    idx = permutation(ks[1], n=2048)[:64]\n"
    "    xb = take(x, idx, axis=0)\n"
    "    yb = take(y, idx, axis=0)\n"
    "    z = add(dot(xb, W), b)\n"
    "    loss = mean(sub(softplus(z), mul(yb, z)))\n"
    "    gW, gb = grad(loss, W, b)\n"
    "    W <- sub(W, mul(0.5, gW))\n"
    "    b <- sub(b, mul(0.5, gb))\n"
    "    k <- ks[0]\n"
    "    return loss\n"
    "}\n"
    "\n"
    "func accuracy(W: f32[8, 1], b: f32[1], x: f32[2048, 8], y: f32[2048, 1]) {\n"
    "    pred = cast(gt(add(dot(x, W), b), 0.0), dtype=\"f32\")\n"
    "    return mean(eq(pred, y))\n"
    "}\n";

static int check(tg_status st, const char *what) {
    if (st == TG_OK) return 0;
    fprintf(stderr, "logreg: %s: %s\n", what, tg_last_error());
    return 1;
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 300;
    if (steps < 1) steps = 300;
    int rc = 1;
    tg_module *m = NULL;
    tg_fn *fdata = NULL, *fstep = NULL, *facc = NULL;
    tg_tensor *seed = NULL, *ds[3] = {0}, *loss = NULL, *acc = NULL, *k0 = NULL;
    if (check(tg_module_parse(NULL, program, strlen(program), "logreg.tg", &m), "parse")) goto done;
    if (check(tg_graph_compile(tg_module_find(m, "data"), NULL, &fdata), "compile data") ||
        check(tg_graph_compile(tg_module_find(m, "step"), NULL, &fstep), "compile step") ||
        check(tg_graph_compile(tg_module_find(m, "accuracy"), NULL, &facc), "compile accuracy"))
        goto done;

    int64_t s = 2024, kseed = 7;
    seed = tg_tensor_from_data(NULL, TG_DT_I64, 0, NULL, &s);
    if (check(tg_fn_call(fdata, &seed, 1, ds, 3), "draw the data")) goto done;

    /* W and b start at zeros (static shapes); the minibatch key starts at 7 */
    k0 = tg_tensor_from_data(NULL, TG_DT_I64, 0, NULL, &kseed);
    if (check(tg_fn_state_set(fstep, tg_fn_state_find(fstep, "k"), k0), "set the key")) goto done;
    printf("logistic regression: %d points, %d features, minibatches of 64\n", N, D);
    for (long i = 0; i < steps; i++) {
        tg_status st =
            i == 0 ? tg_fn_call(fstep, ds, 2, &loss, 1) : tg_fn_call_into(fstep, ds, 2, &loss, 1);
        if (check(st, "step")) goto done;
        if (i == 0 || (i + 1) % 50 == 0 || i + 1 == steps)
            printf("step %4ld  minibatch loss %.4f\n", i + 1, tg_tensor_get_f64(loss, 0));
    }

    tg_tensor *W = tg_fn_state(fstep, tg_fn_state_find(fstep, "W"));
    tg_tensor *b = tg_fn_state(fstep, tg_fn_state_find(fstep, "b"));
    printf("\n  learned W   true w\n");
    for (int j = 0; j < D; j++)
        printf("  %8.3f  %8.3f\n", tg_tensor_get_f64(W, j), tg_tensor_get_f64(ds[2], j));
    printf("  learned b %.3f (true 0.5)\n", tg_tensor_get_f64(b, 0));
    if (check(tg_fn_call(facc, (tg_tensor *[]){W, b, ds[0], ds[1]}, 4, &acc, 1), "accuracy"))
        goto done;
    printf("accuracy on all %d points: %.3f\n", N, tg_tensor_get_f64(acc, 0));
    rc = 0;
done:
    tg_tensor_free(seed);
    tg_tensor_free(k0);
    tg_tensor_free(loss);
    tg_tensor_free(acc);
    for (int i = 0; i < 3; i++) tg_tensor_free(ds[i]);
    tg_fn_free(fdata);
    tg_fn_free(fstep);
    tg_fn_free(facc);
    tg_module_free(m);
    return rc;
}
