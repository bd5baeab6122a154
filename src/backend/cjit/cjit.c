/* cjit.c - the C JIT backend object: compiling (emit, build or load from the cache), the
 * runtime call-backs of tg_rt.h, and calls, over the memory plan shared with the VM
 * (src/backend/plan.c: per input-shape signature, run-time types, storage classes, blocks
 * reused after the last use, plan-time values, in-place outputs).
 *
 * The generated function of a graph runs its instructions in order (the topological
 * order of tg_ir_toposort, the one the source was emitted for). Instructions with an
 * emitter run generated loops through rt->ew, the others call back into rt->kernel, which
 * runs the same kernel class the VM would choose (vector elementwise, reduction, BLAS,
 * fused block evaluator) or the op's reference kernel. Values live in the plan's blocks
 * (reused once every reader and view of them has run); graph outputs are written straight
 * into the caller's tensors or into new ones; buffers stay allocated between calls.
 *
 * In-place outputs: an op's destroy map is honoured for every instruction (the emitted
 * BLAS call copies the accumulator only when it is not already the output). Elementwise
 * reuse of a dying input (plan.reuse) is enabled only for instructions run by the
 * library's kernels (TG_CJ_KERNEL): the generated loops declare their output pointers
 * `restrict` (emit.c), so an output must never share memory with one of their inputs.
 *
 * A signature whose plan cannot be made statically (values whose shapes depend on the
 * values of a self-allocating op, p->dynamic) runs on the VM, which runs such nodes at
 * run time; shapes computed by small arithmetic on input shapes are known at plan time.
 *
 * Calls run on replicas (plan.h), as the VM's: the replica (cj_rep) holds the call's
 * values as generated code sees them (rv), the runtime record it is handed (rt, whose host
 * is the replica) and the first failure of a call-back, so calls from several threads run
 * the generated code at the same time, each on its own replica. The VM that runs the
 * dynamic signatures is made once, under mu, and has replicas of its own.
 * Loops (scan, map) run as generated loops (emit.c, emit_scan): cb_scan_begin makes the
 * results and binds a replica of the step's compiled function (the step's own tg_cj, found
 * through the sub-graph executor), whose values the loop then moves from step to step;
 * that replica's call-backs re-point the library's tensors of those values first
 * (loop_sync). Whatever the generated loop does not cover runs the node's kernel.
 *
 * Invariants: results equal the VM's up to the rounding of libm's float functions (expf,
 * ...) and summation order.
 */
#include "cjit.h"
#include "../plan.h"
#include "../../core/blas.h"

#include <cblas.h>
#include <errno.h>
#include <stdlib.h>
#include <dlfcn.h>
#include <pthread.h>

#define SPLIT_WORK  32768
#define SPLIT_ALIGN 64

struct tg_cj {
    tg_ctx *ctx;
    tg_graph *g; /* borrowed */
    tg_compile_opts opts;
    tg_plan_prog pg; /* the program, its plans, the pool, the replicas */
    uint8_t *how;    /* per instruction: TG_CJ_EW, TG_CJ_CALL, TG_CJ_RED or TG_CJ_KERNEL */
    tg_cj_lib lib;
    int (*main)(tg_rt *rt);
    tg_cj_after_fn after;
    void *after_ud;
    pthread_mutex_t mu; /* guards vm */
    tg_vm *vm;          /* for dynamic signatures, made when first needed */
};

/* What one call writes (a replica, plan.h). */
typedef struct cj_rep {
    tg_plan_rep base; /* first: the values (val, owned), the plans' memory */
    tg_cj *cj;
    tg_status st;         /* the first failure of a call-back */
    tg_rt_val *rv;        /* per var: val as generated code sees it (set_val keeps them equal) */
    tg_rt rt;             /* what generated code gets (host: this replica) */
    void *after_ud;       /* what this call hands the after-function */
    struct cj_loop *loop; /* the step of a generated loop: the loop whose values move */
} cj_rep;

/* A loop run by generated code (tg_rt_scan): its step's replica, and the tensors the
 * library sees for the values the loop moves from step to step (each a view over one of at
 * most two buffers, re-pointed at the address generated code set before the library reads
 * it: sync). */
#define LOOP_MAX TG_RT_LOOP_MAX
typedef struct cj_loop {
    tg_cj *body;   /* the step's C JIT */
    cj_rep *B;     /* its replica, bound for this loop */
    tg_loop l;     /* the node's loop */
    int64_t steps; /* steps to run */
    int ntens;     /* tensors made here */
    tg_tensor *tens[6 * LOOP_MAX + 4];
    tg_tensor *state[LOOP_MAX][2]; /* per state not saved nor tapped: its two buffers */
    tg_tensor *ring;               /* taps=: state 0's last depth + 1 values */
    tg_tensor *stk[LOOP_MAX];      /* stacked results */
    tg_tensor *in[LOOP_MAX];       /* the step's arguments (by parameter) */
    tg_tensor *out[LOOP_MAX];      /* the step's results */
    tg_tensor *stop;               /* until=true: the condition */
    int nsync;
    struct cj_sync {
        int v;             /* the step's variable */
        tg_tensor *t;      /* its tensor (in or out) */
        tg_buffer *own;    /* the buffer t holds a reference to */
        tg_buffer *buf[2]; /* the buffers it may point into (buf[1] NULL: one) */
    } sync[2 * LOOP_MAX];
} cj_loop;

/* Points each moving value's tensor at the address generated code gave it. */
static void loop_sync(cj_rep *R) {
    cj_loop *c = R->loop;
    for (int k = 0; k < c->nsync; k++) {
        struct cj_sync *y = &c->sync[k];
        char *d = R->rv[y->v].data;
        tg_buffer *b = y->buf[0];
        if (y->buf[1] && !(d >= (char *)b->data && d < (char *)b->data + b->nbytes)) b = y->buf[1];
        y->t->buf = b;
        y->t->offset = (int64_t)(d - (char *)b->data) / (int64_t)tg_dtype_size(y->t->dtype);
    }
}
#define LOOP_SYNC(R)                                                                               \
    do {                                                                                           \
        if ((R)->loop) loop_sync(R);                                                               \
    } while (0)

/* ---- values ---- */

static void set_val(cj_rep *R, int v, tg_tensor *t) {
    R->base.val[v] = t;
    tg_rt_val *r = &R->rv[v];
    if (!t) {
        r->data = NULL;
        return;
    }
    r->data = tg_tensor_data(t);
    r->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        r->shape[d] = t->shape[d];
        r->stride[d] = t->strides[d];
    }
}

/* ---- call-backs ---- */

/* Runs instruction i with the library's kernel (the VM's kernel classes). */
static tg_status run_kernel(cj_rep *R, int i) {
    tg_cj *cj = R->cj;
    const tg_plan_mem *m = R->base.mem;
    const tg_plan *p = m->plan;
    tg_node *n = cj->pg.order[i];
    vm_lane ln = {R->base.args,
                  R->base.argt,
                  R->base.pool,
                  R->base.nthreads,
                  m->ws.buf ? m->ws.buf->data : NULL,
                  cj->pg.sub};
    uint64_t copies = 0;
    tg_status st = tg_vm_run_node(cj->ctx, cj->g, p, R->base.val, n, tg_vm_info(&cj->pg, i), &ln,
                                  &copies, NULL);
    if (st != TG_OK || !tg_plan_kmade(p, n)) return st;
    for (int o = 0; o < n->nout; o++) { /* made by the kernel: ours to free (in the step of a
                                            loop, the previous step's value goes first) */
        if (R->base.owned[n->out[o]->id]) tg_tensor_free(R->base.val[n->out[o]->id]);
        set_val(R, n->out[o]->id, ln.args[n->nin + o]);
        R->base.owned[n->out[o]->id] = 1;
    }
    return TG_OK;
}

/* A view made by generated code: its tensor is the replica's slot for it (no allocation),
 * over the buffer of the value it views. */
static int cb_view(tg_rt *rt, int i) {
    cj_rep *R = rt->host;
    LOOP_SYNC(R);
    tg_node *n = R->cj->pg.order[i];
    int v = n->out[0]->id;
    const tg_tensor *src = R->base.val[n->in[0]->id];
    const tg_rt_val *r = &R->rv[v];
    tg_tensor *t = &R->base.mem->tens[v];
    int64_t es = (int64_t)tg_dtype_size(src->dtype);
    t->dtype = src->dtype;
    t->ndim = r->ndim;
    for (int d = 0; d < r->ndim; d++) {
        t->shape[d] = r->shape[d];
        t->strides[d] = r->stride[d];
    }
    t->buf = src->buf;
    t->offset = src->offset + (r->data - (char *)tg_tensor_data(src)) / es;
    R->base.val[v] = t;
    return 0;
}

static int cb_kernel(tg_rt *rt, int i) {
    cj_rep *R = rt->host;
    LOOP_SYNC(R);
    R->st = run_kernel(R, i);
    return R->st != TG_OK;
}

/* The elementwise loop driver: the broadcast iteration space of the node's outputs. */
typedef struct ew_job {
    tg_rt_loop loop;
    const tg_rt_num *k; /* the loop's constants */
    int na;             /* operands: outputs then inputs */
    int nd;             /* collapsed axes */
    int64_t n;          /* elements */
    int64_t shape[TG_MAX_DIMS];
    int64_t str[64][TG_MAX_DIMS]; /* per operand and axis, in bytes */
    char *base[64];
} ew_job;

static void ew_range(const ew_job *J, int64_t lo, int64_t hi) {
    if (lo >= hi) return;
    int nd = J->nd;
    int64_t inner = J->shape[nd - 1], idx[TG_MAX_DIMS];
    int64_t row = lo / inner, col = lo % inner;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = row % J->shape[d];
        row /= J->shape[d];
    }
    idx[nd - 1] = col;
    char *ptr[64];
    int64_t s[64];
    for (int k = 0; k < J->na; k++) s[k] = J->str[k][nd - 1];
    while (lo < hi) {
        int64_t len = inner - idx[nd - 1] < hi - lo ? inner - idx[nd - 1] : hi - lo;
        for (int k = 0; k < J->na; k++) {
            int64_t off = 0;
            for (int d = 0; d < nd; d++) off += idx[d] * J->str[k][d];
            ptr[k] = J->base[k] + off;
        }
        J->loop(len, ptr, s, J->k);
        lo += len;
        idx[nd - 1] = 0;
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < J->shape[d]) break;
            idx[d] = 0;
        }
    }
}

static void ew_task(void *arg, int ith, int nth) {
    const ew_job *J = arg;
    int64_t lo, hi;
    tg_pool_share(J->n, ith, nth, SPLIT_ALIGN, &lo, &hi);
    ew_range(J, lo, hi);
}

static int cb_ew(tg_rt *rt, int i, tg_rt_loop loop, const tg_rt_num *nums, int cost) {
    cj_rep *R = rt->host;
    LOOP_SYNC(R);
    tg_node *n = R->cj->pg.order[i];
    tg_tensor *const *val = R->base.val;
    tg_tensor *o0 = val[n->out[0]->id];
    int nd = o0->ndim;
    ew_job J;
    J.loop = loop;
    J.k = nums;
    J.na = n->nout + n->nin;
    for (int o = 1; o < n->nout; o++) { /* outputs of one shape only */
        const tg_tensor *t = val[n->out[o]->id];
        bool same = t->ndim == nd;
        for (int d = 0; same && d < nd; d++) same = t->shape[d] == o0->shape[d];
        if (!same) return cb_kernel(rt, i);
    }
    int64_t total = 1;
    for (int d = 0; d < nd; d++) total *= o0->shape[d];
    if (total == 0) return 0;
    J.n = total;
    tg_tensor *ops[64];
    for (int o = 0; o < n->nout; o++) ops[o] = val[n->out[o]->id];
    for (int k = 0; k < n->nin; k++) ops[n->nout + k] = val[n->in[k]->id];
    int64_t esz[64];
    for (int k = 0; k < J.na; k++) {
        esz[k] = (int64_t)tg_dtype_size(ops[k]->dtype);
        J.base[k] = tg_tensor_data(ops[k]);
    }
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (o0->shape[d] == 1) continue;
        J.shape[m] = o0->shape[d];
        for (int k = 0; k < J.na; k++) {
            const tg_tensor *t = ops[k];
            int a = d - (nd - t->ndim);
            J.str[k][m] = a >= 0 && t->shape[a] != 1 ? t->strides[a] * esz[k] : 0;
        }
        bool merge = m > 0;
        for (int k = 0; k < J.na && merge; k++) merge = J.str[k][m - 1] == J.str[k][m] * J.shape[m];
        if (merge) {
            J.shape[m - 1] *= J.shape[m];
            for (int k = 0; k < J.na; k++) J.str[k][m - 1] = J.str[k][m];
        } else {
            m++;
        }
    }
    if (m == 0) {
        J.shape[0] = 1;
        for (int k = 0; k < J.na; k++) J.str[k][0] = esz[k];
        m = 1;
    }
    J.nd = m;
    int64_t work = total * (cost > 0 ? cost : 1);
    int nth = R->base.nthreads;
    if (nth > 1 && work >= SPLIT_WORK) {
        int64_t want = work / (SPLIT_WORK / 2);
        tg_pool_run_n(R->base.pool, want < nth ? (int)want : nth, ew_task, &J);
    } else {
        ew_range(&J, 0, total);
    }
    return 0;
}

/* The reduction driver: each output element reduces the rows of the reduced axes. */
typedef tg_rt_red_loop red_loop;

typedef struct red_job {
    red_loop loop;
    const tg_rt_num *k; /* the loop's constants */
    int nin, nout;
    int nk, nr; /* kept and reduced axes (the last reduced one innermost) */
    int64_t kshape[TG_MAX_DIMS], rshape[TG_MAX_DIMS];
    int64_t kstr[32][TG_MAX_DIMS]; /* per input and kept axis, bytes */
    int64_t rstr[32][TG_MAX_DIMS]; /* per input and reduced axis, bytes */
    char *ibase[32];
    char *obase[32];
    int64_t osz[32];
    int64_t nkept, count;
} red_job;

static void red_range(const red_job *J, int64_t lo, int64_t hi) {
    double acc[32];
    char *ip[32], *op[32], *rp[32];
    int64_t s[32];
    int nr = J->nr;
    for (int k = 0; k < J->nin; k++) s[k] = J->rstr[k][nr - 1];
    int64_t inner = J->rshape[nr - 1], rows = J->count / (inner ? inner : 1);
    for (int64_t e = lo; e < hi; e++) {
        int64_t rem = e;
        for (int k = 0; k < J->nin; k++) ip[k] = J->ibase[k];
        for (int d = J->nk - 1; d >= 0; d--) {
            int64_t i = rem % J->kshape[d];
            rem /= J->kshape[d];
            for (int k = 0; k < J->nin; k++) ip[k] += i * J->kstr[k][d];
        }
        J->loop(0, 0, NULL, NULL, acc, J->k);
        for (int64_t r = 0; r < rows; r++) {
            int64_t q = r;
            for (int k = 0; k < J->nin; k++) rp[k] = ip[k];
            for (int d = nr - 2; d >= 0; d--) {
                int64_t i = q % J->rshape[d];
                q /= J->rshape[d];
                for (int k = 0; k < J->nin; k++) rp[k] += i * J->rstr[k][d];
            }
            J->loop(1, inner, rp, s, acc, J->k);
        }
        for (int o = 0; o < J->nout; o++) op[o] = J->obase[o] + e * J->osz[o];
        J->loop(2, J->count, op, NULL, acc, J->k);
    }
}

static void red_task(void *arg, int ith, int nth) {
    const red_job *J = arg;
    int64_t lo, hi;
    tg_pool_share(J->nkept, ith, nth, 1, &lo, &hi);
    red_range(J, lo, hi);
}

static int cb_red(tg_rt *rt, int i, red_loop loop, const tg_rt_num *nums, int cost, unsigned red) {
    cj_rep *R = rt->host;
    LOOP_SYNC(R);
    tg_node *n = R->cj->pg.order[i];
    tg_tensor *const *val = R->base.val;
    if (n->nin > 32 || n->nout > 32) return cb_kernel(rt, i);
    int nd = 0;
    for (int k = 0; k < n->nin; k++)
        if (val[n->in[k]->id]->ndim > nd) nd = val[n->in[k]->id]->ndim;
    if (nd == 0 || (red >> nd) != 0 || !(red >> (nd - 1) & 1u)) return cb_kernel(rt, i);
    red_job J;
    J.loop = loop;
    J.k = nums;
    J.nin = n->nin;
    J.nout = n->nout;
    J.nk = J.nr = 0;
    J.nkept = J.count = 1;
    for (int d = 0; d < nd; d++) {
        int64_t ext = 1;
        for (int k = 0; k < n->nin; k++) {
            const tg_tensor *t = val[n->in[k]->id];
            int a = d - (nd - t->ndim);
            if (a >= 0 && t->shape[a] != 1) ext = t->shape[a];
        }
        bool r = red >> d & 1u;
        int slot = r ? J.nr++ : J.nk++;
        (r ? J.rshape : J.kshape)[slot] = ext;
        for (int k = 0; k < n->nin; k++) {
            const tg_tensor *t = val[n->in[k]->id];
            int a = d - (nd - t->ndim);
            int64_t st =
                a >= 0 && t->shape[a] != 1 ? t->strides[a] * (int64_t)tg_dtype_size(t->dtype) : 0;
            (r ? J.rstr[k] : J.kstr[k])[slot] = st;
        }
        if (r)
            J.count *= ext;
        else
            J.nkept *= ext;
    }
    if (J.count == 0) return cb_kernel(rt, i); /* empty reductions: the kernel's rules */
    for (int k = 0; k < n->nin; k++) J.ibase[k] = tg_tensor_data(val[n->in[k]->id]);
    for (int o = 0; o < n->nout; o++) {
        tg_tensor *t = val[n->out[o]->id];
        if (tg_tensor_size(t) != J.nkept || !tg_tensor_is_contiguous(t)) return cb_kernel(rt, i);
        J.obase[o] = tg_tensor_data(t);
        J.osz[o] = (int64_t)tg_dtype_size(t->dtype);
    }
    if (J.nkept == 0) return 0;
    int64_t work = J.nkept * J.count * (cost > 0 ? cost : 1);
    int nth = R->base.nthreads;
    if (nth > 1 && J.nkept > 1 && work >= SPLIT_WORK) {
        int64_t want = work / (SPLIT_WORK / 2);
        if (want > J.nkept) want = J.nkept;
        tg_pool_run_n(R->base.pool, want < nth ? (int)want : nth, red_task, &J);
    } else {
        red_range(&J, 0, J.nkept);
    }
    return 0;
}

/* CBLAS for generated code (row-major; BLAS runs single-threaded in tgraph). */
static void rt_gemm(int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                    const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                    int64_t ldc) {
    tg_vm_gemm(f64 != 0, ta != 0, tb != 0, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void rt_gemv(int f64, int ta, int64_t m, int64_t n, double alpha, const void *a, int64_t lda,
                    const void *x, int64_t incx, double beta, void *y, int64_t incy) {
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans;
    tg_blas_enter();
    if (f64)
        cblas_dgemv(CblasRowMajor, TA, (int)m, (int)n, alpha, a, (int)lda, x, (int)incx, beta, y,
                    (int)incy);
    else
        cblas_sgemv(CblasRowMajor, TA, (int)m, (int)n, (float)alpha, a, (int)lda, x, (int)incx,
                    (float)beta, y, (int)incy);
    tg_blas_leave();
}

static int cb_after(tg_rt *rt, int i) {
    cj_rep *R = rt->host;
    LOOP_SYNC(R);
    tg_cj *cj = R->cj;
    R->st = cj->after(R->after_ud, cj->pg.order[i], R->base.val);
    return R->st != TG_OK;
}

/* ---- loops run by generated code (emit.c, emit_scan) ---- */

static tg_tensor *loop_keep(cj_loop *c, tg_tensor *t) {
    if (t) c->tens[c->ntens++] = t;
    return t;
}

/* Takes t out of c's tensors (it becomes a result). */
static tg_tensor *loop_hand_out(cj_loop *c, tg_tensor *t) {
    for (int q = 0; q < c->ntens; q++)
        if (c->tens[q] == t) c->tens[q] = NULL;
    return t;
}

/* A view of row `row` of t along axis 0 (rank one less). */
static tg_tensor *loop_row(const tg_tensor *t, int64_t row) {
    return tg_tensor_view(t, t->ndim - 1, t->shape + 1, t->strides + 1,
                          t->offset + row * t->strides[0]);
}

/* t with axis 0 of extent n before shape[0..nd). */
static tg_tensor *loop_stack(tg_ctx *ctx, tg_dtype dt, int nd, const int64_t *shape, int64_t n) {
    int64_t sh[TG_MAX_DIMS];
    sh[0] = n;
    for (int d = 0; d < nd; d++) sh[d + 1] = shape[d];
    return tg_tensor_empty(ctx, dt, nd + 1, sh);
}

static void loop_add_sync(cj_loop *c, int v, tg_tensor *t, tg_buffer *b0, tg_buffer *b1) {
    c->sync[c->nsync++] = (struct cj_sync){.v = v, .t = t, .own = t->buf, .buf = {b0, b1}};
}

/* Releases what loop_begin took: the step's replica, and the tensors not handed out. */
static void loop_free(tg_cj *cj, cj_loop *c) {
    if (c->B) {
        for (int k = 0; k < c->nsync; k++) { /* the references the tensors hold */
            c->sync[k].t->buf = c->sync[k].own;
            c->sync[k].t->offset = 0;
        }
        c->B->loop = NULL;
        tg_plan_unbind(&c->body->pg, &c->B->base);
        tg_plan_rep_give(&c->body->pg, &c->B->base);
    }
    for (int q = 0; q < c->ntens; q++) tg_tensor_free(c->tens[q]);
    tg_mem_free(cj->ctx, c, sizeof *c);
}

/* Sets up the loop of instruction i (a scan or map node) for generated code: TG_OK with
 * L->body set, or with *kernel set when the node's kernel runs it instead (a step not
 * compiled by the C JIT, a debug check, a parallel map, a plan made at run time, no step
 * to run, and every error, which the kernel reports). */
static tg_status loop_begin(cj_rep *R, int i, tg_rt_scan *L, bool *kernel) {
    tg_cj *cj = R->cj;
    tg_node *n = cj->pg.order[i];
    tg_tensor *const *val = R->base.val;
    const tg_subexec *sub = cj->pg.sub;
    *kernel = true;
    tg_loop l;
    tg_loop_get(tg_op_table[n->op], n->attrs, n->nin, &l);
    tg_cj *bcj = sub && sub->backend ? sub->backend(sub, l.body, "c") : NULL;
    if (!bcj || bcj->after || cj->after) return TG_OK;
    if (l.nstate == 0 && !l.until && sub->run_each && sub->threads(sub) > 1) return TG_OK;
    int ns = l.nstate, s0 = ns, c0 = ns + l.nseq, nres = l.body->nret;
    int nsave = l.save ? l.save->n : 0, nstk = l.ny + nsave;
    int64_t steps = l.nsteps;
    if (l.dyn) {
        const tg_tensor *t = val[n->in[n->nin - 1]->id];
        steps = tg_load_i64(tg_tensor_data(t), t->dtype);
        if (steps < 0) return TG_OK;
    }
    for (int q = s0; q < c0; q++) {
        int64_t e = val[n->in[q]->id]->shape[0];
        if (steps < 0) steps = e;
        if (e < steps) return TG_OK;
    }
    if (steps <= 0) return TG_OK;
    cj_loop *c = tg_mem_calloc(cj->ctx, sizeof *c);
    if (!c) return TG_ENOMEM;
    c->body = bcj;
    c->l = l;
    c->steps = steps;
    tg_ctx *ctx = cj->ctx;
    bool oom = false;
    int saved[LOOP_MAX];
    for (int j = 0; j < ns; j++) saved[j] = -1;
    for (int q = 0; q < nsave; q++) saved[l.save->ints[q]] = q;
    int off = l.tapped ? l.ntap - 1 : 0, D = l.depth + 1; /* input i > 0 is parameter i + off */
    /* the arguments of step 0: states, rows of the sequences, constants */
    for (int j = 0; j < ns && !oom; j++) {
        const tg_tensor *init = val[n->in[j]->id];
        int p = j > 0 ? j + off : 0;
        if (j == 0 && l.tapped) { /* a ring of D rows: the last depth values, oldest first */
            oom = !(c->ring = loop_keep(
                        c, loop_stack(ctx, init->dtype, init->ndim - 1, init->shape + 1, D)));
            for (int q = 0; q < l.depth && !oom; q++) {
                tg_tensor *a = loop_row(c->ring, q),
                          *b = loop_row(init, init->shape[0] - l.depth + q);
                if (a && b) tg_tensor_copy_into(a, b);
                oom = !a || !b;
                tg_tensor_free(a);
                tg_tensor_free(b);
            }
            for (int k = 0; k < l.ntap && !oom; k++)
                oom = !(c->in[k] = loop_keep(c, loop_row(c->ring, (l.depth + l.taps[k]) % D)));
            oom = oom || !(c->out[0] = loop_keep(c, loop_row(c->ring, l.depth)));
            continue;
        }
        if (saved[j] < 0) {
            for (int h = 0; h < 2 && !oom; h++)
                oom = !(c->state[j][h] = loop_keep(
                            c, tg_tensor_empty(ctx, init->dtype, init->ndim, init->shape)));
            if (oom) break;
            tg_tensor_copy_into(c->state[j][0], init);
            c->in[p] = loop_keep(c, tg_tensor_view(c->state[j][0], init->ndim, init->shape,
                                                   c->state[j][0]->strides, 0));
            c->out[j] = loop_keep(c, tg_tensor_view(c->state[j][1], init->ndim, init->shape,
                                                    c->state[j][1]->strides, 0));
        } else { /* its stack: row 0 (reverse: the last row) is the value before step 0 */
            int q = l.ny + saved[j];
            int64_t rd = l.reverse ? steps : 0, wr = l.reverse ? steps - 1 : 1;
            oom = !(c->stk[q] = loop_keep(
                        c, loop_stack(ctx, init->dtype, init->ndim, init->shape, steps + 1)));
            if (oom) break;
            c->in[p] = loop_keep(c, loop_row(c->stk[q], rd));
            c->out[j] = loop_keep(c, loop_row(c->stk[q], wr));
            if (c->in[p]) tg_tensor_copy_into(c->in[p], init);
        }
        oom = !c->in[p] || !c->out[j];
    }
    for (int q = s0; q < c0 && !oom; q++)
        oom = !(c->in[q + off] =
                    loop_keep(c, loop_row(val[n->in[q]->id], l.reverse ? steps - 1 : 0)));
    for (int q = c0; q < c0 + l.nconst; q++) c->in[q + off] = val[n->in[q]->id];
    tg_status st = oom ? TG_ENOMEM : TG_OK;
    /* the step's plan for these shapes, which gives the shapes of its results */
    tg_plan_rep *br = NULL;
    if (st == TG_OK) st = tg_plan_rep_take(&bcj->pg, &br);
    if (st == TG_OK) {
        c->B = (cj_rep *)br;
        c->B->loop = NULL;
        st = tg_plan_get(&bcj->pg, br, c->in);
    }
    if (st != TG_OK || br->mem->plan->dynamic) {
        if (c->B) {
            tg_plan_rep_give(&bcj->pg, br);
            c->B = NULL;
        }
        loop_free(cj, c);
        return st == TG_OK || st == TG_ENOMEM ? st : TG_OK; /* the kernel reports the rest */
    }
    const tg_plan *bp = br->mem->plan;
    const tg_graph *bg = bcj->g; /* the step as compiled (its variables are bcj's) */
    for (int y = 0; y < l.ny && !oom; y++) {
        const tg_type *t = &bp->rt[((tg_var *)bg->outputs.items[ns + y])->id];
        oom = !(c->stk[y] =
                    loop_keep(c, loop_stack(ctx, (tg_dtype)t->dtype, t->ndim, t->shape, steps)));
        oom =
            oom || !(c->out[ns + y] = loop_keep(c, loop_row(c->stk[y], l.reverse ? steps - 1 : 0)));
    }
    if (!oom && l.until)
        oom =
            !(c->stop = c->out[nres - 1] = loop_keep(c, tg_tensor_empty(ctx, TG_DT_BOOL, 0, NULL)));
    st = oom ? TG_ENOMEM : tg_plan_bind(&bcj->pg, br, c->in, c->out, nres, true);
    if (st != TG_OK) {
        loop_free(cj, c);
        return st;
    }
    cj_rep *B = c->B;
    for (int v = 0; v < bcj->pg.nvars; v++) set_val(B, v, br->val[v]);
    for (int v = 0; v < bcj->pg.nvars; v++) {
        if (bp->cls[v] != TG_PLAN_KMADE) continue;
        B->rv[v].ndim = bp->rt[v].ndim;
        for (int d = 0; d < bp->rt[v].ndim; d++) B->rv[v].shape[d] = bp->rt[v].shape[d];
    }
    B->st = TG_OK;
    B->rt.nthreads = br->nthreads;
    /* what generated code moves, and the tensors the library sees for it */
    memset(L, 0, sizeof *L);
    for (int p = 0; p < l.nparam; p++) L->in[p] = &B->rv[((tg_var *)bg->inputs.items[p])->id];
    for (int j = 0; j < ns; j++) {
        int p = j > 0 ? j + off : 0, v = ((tg_var *)bg->inputs.items[p])->id;
        if (j == 0 && l.tapped) {
            L->ring = tg_tensor_data(c->ring);
            L->rings = c->ring->strides[0] * (int64_t)tg_dtype_size(c->ring->dtype);
            for (int k = 0; k < l.ntap; k++)
                loop_add_sync(c, ((tg_var *)bg->inputs.items[k])->id, c->in[k], c->ring->buf, NULL);
        } else if (saved[j] < 0) {
            L->cur[j] = tg_tensor_data(c->state[j][0]);
            L->nxt[j] = tg_tensor_data(c->state[j][1]);
            loop_add_sync(c, v, c->in[p], c->state[j][0]->buf, c->state[j][1]->buf);
        } else {
            loop_add_sync(c, v, c->in[p], c->in[p]->buf, NULL);
        }
    }
    for (int q = 0; q < l.nseq; q++) {
        const tg_tensor *x = val[n->in[s0 + q]->id];
        L->seq[q] = tg_tensor_data(x);
        L->seqs[q] = x->strides[0] * (int64_t)tg_dtype_size(x->dtype);
        loop_add_sync(c, ((tg_var *)bg->inputs.items[s0 + off + q])->id, c->in[s0 + off + q],
                      x->buf, NULL);
    }
    for (int q = 0; q < nstk; q++) {
        L->stk[q] = tg_tensor_data(c->stk[q]);
        L->stks[q] = c->stk[q]->strides[0] * (int64_t)tg_dtype_size(c->stk[q]->dtype);
    }
    if (c->stop) L->stop = tg_tensor_data(c->stop);
    for (int k = 0; k < nres; k++) {
        int v = ((tg_var *)bg->outputs.items[k])->id;
        L->esize[k] = tg_dtype_size(c->out[k]->dtype);
        if (br->val[v] == c->out[k]) { /* computed in place */
            L->out[k] = &B->rv[v];
            bool two = k < ns && saved[k] < 0 && c->state[k][0];
            loop_add_sync(c, v, c->out[k], two ? c->state[k][1]->buf : c->out[k]->buf,
                          two ? c->state[k][0]->buf : NULL);
        } else { /* a parameter, a value returned twice, a view: copied after each step */
            L->out[k] = &L->scratch;
            L->src[k] = &B->rv[v];
        }
    }
    B->loop = c;
    L->body = &B->rt;
    L->step = bcj->main;
    L->steps = steps;
    L->host = c;
    *kernel = false;
    return TG_OK;
}

static int cb_scan_begin(tg_rt *rt, int i, tg_rt_scan *L) {
    cj_rep *R = rt->host;
    bool kernel = true;
    LOOP_SYNC(R); /* a loop in the step of a loop reads the moving values */
    L->body = NULL;
    R->st = loop_begin(R, i, L, &kernel);
    if (R->st == TG_ENOMEM)
        R->st = tg_plan_node_fail(R->cj->g, R->cj->pg.order[i], TG_ENOMEM,
                                  "out of memory setting up the loop");
    if (R->st != TG_OK) return 1;
    return kernel ? cb_kernel(rt, i) : 0;
}

/* The results of a loop that ran `done` steps: the last states, the stacks (cut to the
 * steps run), as the kernel's (src/ops/scan.c). */
static int cb_scan_end(tg_rt *rt, int i, tg_rt_scan *L, int64_t done, int failed) {
    cj_rep *R = rt->host;
    tg_cj *cj = R->cj;
    cj_loop *c = L->host;
    const tg_loop *l = &c->l;
    tg_node *n = cj->pg.order[i];
    int ns = l->nstate, nsave = l->save ? l->save->n : 0;
    int64_t steps = c->steps;
    tg_status st = TG_OK;
    if (failed) {
        char msg[1024];
        tg_status bst = c->B->st != TG_OK ? c->B->st : TG_EINTERNAL;
        snprintf(msg, sizeof msg, "step %lld: in '%s': %s",
                 (long long)(l->reverse ? steps - 1 - done : done), l->body->name,
                 c->B->st != TG_OK ? tg_last_error() : "generated code failed");
        st = tg_plan_node_fail(cj->g, n, bst, msg);
    }
    tg_tensor *res[3 * LOOP_MAX] = {0};
    for (int j = 0; st == TG_OK && j < ns; j++) {
        if (j == 0 && l->tapped) { /* the last depth values, oldest first */
            const tg_tensor *r0 = c->ring;
            int D = l->depth + 1, head = (int)(done % D);
            res[0] = loop_stack(cj->ctx, r0->dtype, r0->ndim - 1, r0->shape + 1, l->depth);
            for (int q = 0; res[0] && q < l->depth; q++) {
                tg_tensor *a = loop_row(res[0], q), *b = loop_row(r0, (head + q) % D);
                if (a && b) tg_tensor_copy_into(a, b);
                if (!a || !b) st = TG_ENOMEM;
                tg_tensor_free(a);
                tg_tensor_free(b);
            }
            if (!res[0]) st = TG_ENOMEM;
            continue;
        }
        if (c->state[j][0]) { /* not saved: the buffer holding the last value */
            int h = tg_tensor_data(c->state[j][0]) == L->cur[j] ? 0 : 1;
            res[j] = loop_hand_out(c, c->state[j][h]);
            continue;
        }
        int q = -1;
        for (int k = 0; k < nsave; k++)
            if (l->save->ints[k] == j) q = l->ny + k;
        tg_tensor *row = loop_row(c->stk[q], l->reverse ? steps - done : done);
        res[j] = row ? tg_tensor_dup(row) : NULL;
        tg_tensor_free(row);
        if (!res[j]) st = TG_ENOMEM;
    }
    for (int q = 0; st == TG_OK && q < l->ny + nsave; q++) {
        tg_tensor *o = c->stk[q];
        if (done < steps) { /* stopped early: the rows that ran */
            int64_t shape[TG_MAX_DIMS];
            memcpy(shape, o->shape, sizeof shape);
            shape[0] = q < l->ny ? done : done + 1;
            o = tg_tensor_view(o, o->ndim, shape, o->strides,
                               l->reverse ? o->offset + (steps - done) * o->strides[0] : o->offset);
            if (!o) st = TG_ENOMEM;
        } else {
            loop_hand_out(c, o);
        }
        res[ns + q] = o;
    }
    loop_free(cj, c);
    for (int k = 0; k < n->nout; k++) {
        if (st != TG_OK) {
            tg_tensor_free(res[k]);
            continue;
        }
        if (R->base.owned[n->out[k]->id]) tg_tensor_free(R->base.val[n->out[k]->id]);
        set_val(R, n->out[k]->id, res[k]);
        R->base.owned[n->out[k]->id] = 1;
    }
    if (st == TG_ENOMEM) st = tg_set_error(TG_ENOMEM, "out of memory running a loop");
    R->st = st;
    return st != TG_OK;
}

/* The program of a graph none of whose nodes has an emitter: the call-backs in order (what
 * the generated function would do, without compiling it). */
static int kernels_only(tg_rt *rt) {
    cj_rep *R = rt->host;
    for (int i = 0; i < R->cj->pg.norder; i++)
        if (cb_kernel(rt, i) || TG_RT_AFTER(rt, i)) return 1;
    return 0;
}

/* ---- compiling ---- */

void tg_cj_free(tg_cj *cj) {
    if (!cj) return;
    tg_ctx *ctx = cj->ctx;
    size_t no = (size_t)cj->pg.norder + 1;
    tg_vm_free(cj->vm);
    tg_plan_prog_fini(&cj->pg);
    tg_cj_lib_close(&cj->lib);
    tg_mem_free(ctx, cj->how, cj->how ? no : 0);
    pthread_mutex_destroy(&cj->mu);
    tg_mem_free(ctx, cj, sizeof *cj);
}

/* The source of the graph, then the library (or kernels_only when nothing is emitted). */
/* Distinct generated functions per translation unit ($TGRAPH_CC_SPLIT, default
 * SPLIT_DEFAULT; 0: one unit whatever the size); false with an error when the variable is
 * not a count. */
#define SPLIT_DEFAULT 64
static bool split_bound(int *out) {
    const char *e = getenv("TGRAPH_CC_SPLIT");
    *out = SPLIT_DEFAULT;
    if (!e || !*e) return true;
    char *end;
    errno = 0;
    long v = strtol(e, &end, 10);
    if (errno || end == e || *end || v < 0 || v > 1000000) {
        tg_set_error(TG_ECHECK, "TGRAPH_CC_SPLIT='%s' is not a count of functions", e);
        return false;
    }
    *out = (int)v;
    return true;
}

static tg_status cj_build(tg_cj *cj) {
    tg_cj_str units[TG_CJ_MAX_UNITS];
    int nunits = 0, bound;
    if (!split_bound(&bound)) return TG_ECHECK;
    tg_status st = tg_cj_emit_units(cj->ctx, cj->g, cj->pg.order, cj->pg.norder, cj->how, bound,
                                    units, &nunits);
    int emitted = 0;
    for (int i = 0; i < cj->pg.norder; i++) emitted += cj->how[i] != TG_CJ_KERNEL;
    if (st == TG_OK && emitted == 0) { /* nothing to compile: every node is a call-back */
        cj->main = kernels_only;
    } else if (st == TG_OK) {
        tg_cj_unit u[TG_CJ_MAX_UNITS];
        for (int k = 0; k < nunits; k++) u[k] = (tg_cj_unit){units[k].p, units[k].n};
        st = tg_cj_build_units(cj->ctx, u, nunits, &cj->lib);
    }
    for (int k = 0; k < nunits; k++) tg_cj_str_free(&units[k]);
    if (st == TG_OK && !cj->main) {
        *(void **)&cj->main = dlsym(cj->lib.handle, "tg_cj_0");
        if (!cj->main)
            st = tg_set_error(TG_ECHECK, "%s lacks its function; the source is kept in %s",
                              cj->lib.path, cj->lib.source);
    }
    return st;
}

void tg_cj_set_sub(tg_cj *cj, const tg_subexec *sub) {
    cj->pg.sub = sub;
    if (cj->vm) tg_vm_set_sub(cj->vm, sub);
}

static tg_status rep_init(void *ud, tg_plan_rep *r) {
    tg_cj *cj = ud;
    cj_rep *R = (cj_rep *)r;
    R->cj = cj;
    R->rv = tg_mem_calloc(cj->ctx, sizeof *R->rv * (size_t)(cj->pg.nvars + 1));
    if (!R->rv) return TG_ENOMEM;
    R->rt.abi = TG_RT_ABI;
    R->rt.host = R;
    R->rt.val = R->rv;
    R->rt.ew = cb_ew;
    R->rt.kernel = cb_kernel;
    R->rt.red = cb_red;
    R->rt.view = cb_view;
    R->rt.after = cj->after ? cb_after : NULL;
    R->rt.gemm = rt_gemm;
    R->rt.gemv = rt_gemv;
    R->rt.scan_begin = cb_scan_begin;
    R->rt.scan_end = cb_scan_end;
    return TG_OK;
}

static void rep_fini(void *ud, tg_plan_rep *r) {
    tg_cj *cj = ud;
    cj_rep *R = (cj_rep *)r;
    tg_mem_free(cj->ctx, R->rv, R->rv ? sizeof *R->rv * (size_t)(cj->pg.nvars + 1) : 0);
}

tg_status tg_cj_new(tg_graph *g, const tg_compile_opts *opts, tg_cj **out) {
    static const tg_compile_opts none = {0};
    if (!opts) opts = &none;
    *out = NULL;
    tg_ctx *ctx = g->ctx;
    tg_cj *cj = tg_mem_calloc(ctx, sizeof *cj);
    if (!cj) return TG_ENOMEM;
    pthread_mutex_init(&cj->mu, NULL);
    cj->ctx = ctx;
    cj->g = g;
    cj->opts = *opts;
    tg_status st = tg_plan_prog_init(&cj->pg, g, opts, &tg_vm_kernels);
    size_t no = (size_t)cj->pg.norder + 1;
    if (st == TG_OK) {
        cj->how = tg_mem_calloc(ctx, no);
        if (!cj->how) st = TG_ENOMEM;
    }
    if (st == TG_OK) st = cj_build(cj);
    if (st != TG_OK) {
        tg_cj_free(cj);
        return st;
    }
    /* elementwise reuse only where no generated loop (restrict pointers) runs the node */
    for (int i = 0; i < cj->pg.norder; i++)
        cj->pg.reuse[i] = cj->how[i] == TG_CJ_KERNEL && tg_plan_reuse_ok(&cj->pg, i);
    cj->pg.rep_size = sizeof(cj_rep);
    cj->pg.rep_init = rep_init;
    cj->pg.rep_fini = rep_fini;
    cj->pg.rep_ud = cj;
    *out = cj;
    return TG_OK;
}

void tg_cj_set_after(tg_cj *cj, tg_cj_after_fn fn, void *ud) {
    cj->after = fn; /* before the first call: replicas made later see it */
    cj->after_ud = ud;
}

void tg_cj_counts(const tg_cj *cj, int *emitted, int *kernels) {
    int e = 0;
    for (int i = 0; i < cj->pg.norder; i++) e += cj->how[i] != TG_CJ_KERNEL;
    *emitted = e;
    *kernels = cj->pg.norder - e;
}

void tg_cj_get_stats(tg_cj *cj, tg_cj_stats *s) {
    memset(s, 0, sizeof *s);
    tg_plan *p = NULL;
    s->nplans = tg_plan_recent(&cj->pg, &p);
    s->nreplicas = tg_plan_rep_count(&cj->pg);
    pthread_mutex_lock(&cj->mu);
    s->vm = cj->vm != NULL;
    pthread_mutex_unlock(&cj->mu);
    for (int v = 0; p && v < cj->pg.nvars; v++) s->nplanned += p->cls[v] == TG_PLAN_PLANNED;
    s->dynamic = p && p->dynamic;
    tg_plan_unref(&cj->pg, p);
}

/* ---- calls ---- */

static tg_status call_rep(cj_rep *R, tg_tensor *const *in, tg_tensor **out, int nout, bool into) {
    tg_cj *cj = R->cj;
    tg_plan_rep *r = &R->base;
    const tg_plan *p = r->mem->plan;
    tg_status st = tg_plan_bind(&cj->pg, r, in, out, nout, into);
    for (int v = 0; v < cj->pg.nvars; v++) set_val(R, v, r->val[v]); /* and rt->val */
    if (st != TG_OK) goto done;
    for (int v = 0; v < cj->pg.nvars; v++) { /* views made by generated code: their extents */
        if (p->cls[v] != TG_PLAN_KMADE) continue;
        R->rv[v].ndim = p->rt[v].ndim;
        for (int d = 0; d < p->rt[v].ndim; d++) R->rv[v].shape[d] = p->rt[v].shape[d];
    }
    /* the generated program; values are released at the end of the call (buffers of
     * planned values are the replica's, so nothing is freed early but views and
     * kernel-made values, freed after their last use below) */
    R->st = TG_OK;
    R->rt.nthreads = r->nthreads;
    if (cj->main(&R->rt) != 0) {
        st = R->st != TG_OK ? R->st : tg_set_error(TG_EINTERNAL, "generated code failed");
        goto done;
    }
    st = tg_plan_results(&cj->pg, r, in, out, nout, into);
done:
    tg_plan_unbind(&cj->pg, r);
    return st;
}

/* The VM for signatures the plan cannot cover (made once, on first need). */
static tg_status vm_fallback(tg_cj *cj, tg_vm **out) {
    pthread_mutex_lock(&cj->mu);
    tg_status st = TG_OK;
    if (!cj->vm) {
        st = tg_vm_new(cj->g, &cj->opts, &cj->vm);
        if (st == TG_OK && cj->after) tg_vm_set_hook(cj->vm, cj->after, cj->after_ud);
        if (st == TG_OK) tg_vm_set_sub(cj->vm, cj->pg.sub);
    }
    *out = cj->vm;
    pthread_mutex_unlock(&cj->mu);
    return st;
}

tg_status tg_cj_call(tg_cj *cj, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                     bool into) {
    return tg_cj_call_after(cj, cj->after_ud, in, nin, out, nout, into);
}

tg_status tg_cj_call_after(tg_cj *cj, void *ud, tg_tensor *const *in, int nin, tg_tensor **out,
                           int nout, bool into) {
    tg_plan_outs o;
    if (tg_plan_outs_begin(cj->ctx, &o, out, nout, into) != TG_OK) return TG_ENOMEM;
    tg_plan_rep *r = NULL;
    tg_status st = tg_plan_rep_take(&cj->pg, &r);
    bool dyn = false;
    if (st == TG_OK) {
        ((cj_rep *)r)->after_ud = ud;
        st = tg_plan_get(&cj->pg, r, in);
        dyn = st == TG_OK && r->mem->plan->dynamic;
        if (st == TG_OK && !dyn) st = call_rep((cj_rep *)r, in, out, nout, into);
        tg_plan_rep_give(&cj->pg, r);
    }
    tg_vm *vm = NULL;
    if (dyn) st = vm_fallback(cj, &vm);
    if (dyn && st == TG_OK) st = tg_vm_call_hooked(vm, ud, in, nin, out, nout, into);
    return tg_plan_outs_end(cj->ctx, &o, out, st);
}
