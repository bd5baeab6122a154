/* state_steps.c - a 1,000-step training loop (softmax regression, W f32[784,10], batches
 * of 256) run three ways, with the allocator counting what each step asks for:
 *
 *   state      parameters are state (`mut W`, `W <- ...`), the call passes the batch only
 *              (tg_fn_call_into with a preallocated loss);
 *   stateless  the same step with W and b as inputs and their new values as outputs,
 *              called with tg_fn_call (new output tensors each step, the old ones freed):
 *              what a loop without state does;
 *   manual     stateless, but the caller double-buffers W and b itself (tg_fn_call_into
 *              into the spare pair, then swaps): the best a caller can do without state.
 *
 *   build/bench/bench_state_steps [-n STEPS] [--profile]
 *
 * Runs the three ways twice, interleaved (state, stateless, manual, state, ...), so that
 * warm-up and machine load hit all of them alike. Prints per run: time per step (median
 * over 10 blocks of STEPS/10), allocations and
 * bytes allocated per step, the growth of live bytes over the loop, and for `state`
 * whether the parameter buffers alternated between two addresses (no copy in or out).
 * --profile prints the VM's per-node table of the state step (no copy node).
 */
#include <tgraph.h>

#include "bench_util.h"

typedef struct counting {
    long allocs;     /* allocations (and growths) */
    long long bytes; /* bytes asked for */
    long long live;  /* bytes held */
} counting;

static void *counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    counting *c = ud;
    if (nsize == 0) {
        if (ptr) c->live -= (long long)osize;
        free(ptr);
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (!p) return NULL;
    c->allocs++;
    c->bytes += (long long)nsize;
    c->live += (long long)nsize - (ptr ? (long long)osize : 0);
    return p;
}

#define STEP_BODY                                                                                  \
    "    logits = add(dot(x, W), b)\n"                                                             \
    "    lp = log_softmax(logits, axis=1)\n"                                                       \
    "    loss = neg(mean(take_along(lp, expand_dims(y, axis=1), axis=1)))\n"                       \
    "    gW, gb = grad(loss, W, b)\n"                                                              \
    "    W2 = sub(W, mul(0.1, gW))\n"                                                              \
    "    b2 = sub(b, mul(0.1, gb))\n"

static const char src_state[] = "func step(mut W: f32[784,10], mut b: f32[10], x: f32[256,784], "
                                "y: i64[256]) {\n" STEP_BODY "    W <- W2\n"
                                "    b <- b2\n"
                                "    return loss\n"
                                "}\n";
static const char src_plain[] = "func step(W: f32[784,10], b: f32[10], x: f32[256,784], "
                                "y: i64[256]) {\n" STEP_BODY "    return loss, W2, b2\n"
                                "}\n";

static int fail(const char *what) {
    fprintf(stderr, "bench_state_steps: %s: %s\n", what, tg_last_error());
    return 1;
}

int main(int argc, char **argv) {
    int steps = 1000;
    bool profile = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--profile") == 0)
            profile = true;
    }
    if (steps < 10) steps = 10;
    counting c = {0};
    tg_ctx *ctx = tg_ctx_new(counting_alloc, &c);
    tg_tensor *x = tg_tensor_new(ctx, TG_DT_F32, 2, (int64_t[]){256, 784});
    tg_tensor *y = tg_tensor_new(ctx, TG_DT_I64, 1, (int64_t[]){256});
    float *xd = tg_tensor_data(x);
    int64_t *yd = tg_tensor_data(y);
    uint64_t r = 1;
    for (int i = 0; i < 256 * 784; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        xd[i] = (float)((double)(r >> 11) * 0x1p-53);
    }
    for (int i = 0; i < 256; i++) yd[i] = i % 10;

    printf("1,000-step loop of softmax regression (W f32[784,10], batch 256), %d steps\n", steps);
    printf("%-10s %12s %14s %16s %14s\n", "way", "ms/step", "allocs/step", "bytes/step",
           "live growth");
    for (int run = 0; run < 6; run++) { /* two rounds of the three ways, interleaved */
        int way = run % 3;
        const char *src = way == 0 ? src_state : src_plain;
        tg_module *m = NULL;
        tg_fn *f = NULL;
        if (tg_module_parse(ctx, src, strlen(src), "step.tg", &m) != TG_OK) return fail("parse");
        tg_compile_opts o =
            TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = 1, .profile = profile && run == 3);
        if (tg_graph_compile(tg_module_func(m, 0), &o, &f) != TG_OK) return fail("compile");
        tg_tensor *in[4] = {NULL, NULL, x, y}, *out[3] = {NULL, NULL, NULL};
        tg_tensor *pW[2], *pb[2];
        pW[0] = tg_tensor_new(ctx, TG_DT_F32, 2, (int64_t[]){784, 10});
        pW[1] = tg_tensor_new(ctx, TG_DT_F32, 2, (int64_t[]){784, 10});
        pb[0] = tg_tensor_new(ctx, TG_DT_F32, 1, (int64_t[]){10});
        pb[1] = tg_tensor_new(ctx, TG_DT_F32, 1, (int64_t[]){10});
        tg_tensor *loss = tg_tensor_new(ctx, TG_DT_F32, 0, NULL);
        /* one warm-up step (plans, pools) */
        tg_status st;
        if (way == 0) {
            st = tg_fn_call_into(f, in + 2, 2, &loss, 1);
        } else {
            in[0] = pW[0];
            in[1] = pb[0];
            st = tg_fn_call(f, in, 4, out, 3);
        }
        if (st != TG_OK) return fail("warm-up");
        if (profile && run == 3) tg_fn_profile_reset(f);
        void *addr0 = way == 0 ? tg_tensor_data(tg_fn_state(f, 0)) : NULL;
        bool alternate = true;
        long a0 = c.allocs;
        long long b0 = c.bytes, l0 = c.live;
        double t[10];
        int per = steps / 10, cur = 0;
        for (int blk = 0; blk < 10 && st == TG_OK; blk++) {
            double t0 = bench_now();
            for (int s = 0; s < per && st == TG_OK; s++) {
                if (way == 0) {
                    st = tg_fn_call_into(f, in + 2, 2, &loss, 1);
                    bool moved = (blk * per + s) % 2 == 0; /* away from addr0 */
                    alternate = alternate && (tg_tensor_data(tg_fn_state(f, 0)) == addr0) == !moved;
                } else if (way == 1) {
                    in[0] = out[1];
                    in[1] = out[2];
                    tg_tensor *next[3] = {NULL, NULL, NULL};
                    st = tg_fn_call(f, in, 4, next, 3);
                    for (int k = 0; k < 3; k++) tg_tensor_free(out[k]);
                    memcpy(out, next, sizeof out);
                } else {
                    in[0] = pW[cur];
                    in[1] = pb[cur];
                    tg_tensor *o3[3] = {loss, pW[1 - cur], pb[1 - cur]};
                    st = tg_fn_call_into(f, in, 4, o3, 3);
                    cur = 1 - cur;
                }
            }
            t[blk] = (bench_now() - t0) / per;
        }
        if (st != TG_OK) return fail("step");
        double n = 10.0 * per;
        qsort(t, 10, sizeof *t, bench_cmp);
        static const char *const names[] = {"state", "stateless", "manual"};
        printf("%-10s %12.4f %14.2f %16.0f %14lld%s\n", names[way], 0.5 * (t[4] + t[5]) * 1e3,
               (double)(c.allocs - a0) / n, (double)(c.bytes - b0) / n, c.live - l0,
               way == 0 ? (alternate ? "  (W alternates between 2 buffers)" : "  (W moved!)") : "");
        if (profile && run == 3) tg_fn_profile_print(f, stdout);
        for (int k = 0; k < 3; k++) tg_tensor_free(out[k]);
        for (int k = 0; k < 2; k++) {
            tg_tensor_free(pW[k]);
            tg_tensor_free(pb[k]);
        }
        tg_tensor_free(loss);
        tg_fn_free(f);
        tg_module_free(m);
    }
    tg_tensor_free(x);
    tg_tensor_free(y);
    tg_ctx_free(ctx);
    return 0;
}
