/* debug.c - debug mode (see debug.h): a backend (VM or C JIT) with a check after every node.
 *
 * The backend calls check() after each instruction, in the topological order both use
 * (tg_ir_toposort, split collectives moved apart by tg_ir_schedule). Before node i runs, prepare()
 * has computed its reference outputs with tg_interp_eval on the very input values the backend will
 * read, and checksums of those inputs: before the call for the first node (inputs and constants),
 * after node i-1 for node i (its inputs are all computed by then and still alive).
 *
 * Tolerance: integers and bools exactly; floats within rtol (1e-4 for f32, 1e-9 for f64) of
 * the larger magnitude, plus, for nodes that may sum (anything but single elementwise
 * ops), rtol times the larger of the largest magnitude of the reference output and a bound
 * on the terms summed (summation order differs between backends, and terms that cancel
 * leave a rounding error of their size, not of the result's): for a product (linear
 * algebra) the largest magnitude of an input times the second largest, for a reduction or
 * another node that may sum the largest input magnitude (terms_bound). NaN positions and
 * infinities must match. Magnitudes below the dtype's smallest normal count as that
 * normal: a subnormal result (softplus(-100) in f32) has fewer digits than rtol asks for.
 *
 * Threads: the state of one call (the pending node, its reference outputs and input
 * checksums, the leaf values) is a dbg_run of its own, which the backend hands check()
 * for that call (tg_vm_call_hooked, tg_cj_call_after): calls of one debug-mode function
 * run at the same time, as the backend's calls do, each on a replica and a run of its
 * own. The ranks of a pmap body must: they wait for each other in collectives. mu guards
 * only the list of idle runs.
 *
 * Nodes that talk to other ranks are not run again as their own reference: ops with state
 * outside their inputs (TG_EFFECT_STATE: the collectives), whose kernel is the reference
 * kernel in every backend, and calls and pmaps whose graphs hold one (whose ranks are
 * checked where they run). A second run would be a second exchange with the other ranks,
 * and its failure, kept for the comparison, would abort their collectives. Their inputs
 * are still checked, but for the input of a wait (TG_SCHED_LATE: psum_wait), which the
 * exchange its start began writes until the wait returns.
 *
 * Inputs: a node may have any number of inputs; the checksum and input arrays are sized
 * for the node with the most. The op record's destroys mask has one bit per input for the
 * first 32 inputs only: an input beyond them is one the node does not destroy.
 */
#include "debug.h"

#include "../interp/interp.h"
#include "../vm/vm.h"
#include "cjit.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

struct tg_dbg {
    tg_ctx *ctx;
    tg_graph *g;
    tg_node **order;
    int norder;
    bool *noref; /* per node of order: not run again as its own reference (see the top) */
    int maxin;   /* most inputs of one node of order (at least 1) */
    tg_vm *vm;
    tg_cj *cj;
    const char *backend;      /* "vm" or "c" */
    int break_op, clobber_op; /* test hooks, -1 when off */
    const tg_subexec *sub;    /* runs the bodies of `call` nodes (borrowed) */
    pthread_mutex_t mu;       /* guards idle */
    struct dbg_run *idle;     /* runs no call holds */
    struct dbg_run *all;      /* every run made */
};

/* The state of one call. */
typedef struct dbg_run {
    tg_dbg *d;
    struct dbg_run *next_idle, *next_all;
    int next; /* order index of the node the pending data is for */
    tg_tensor *ref[TG_MAX_OUTS];
    int nref;
    bool ref_failed;
    char ref_msg[512];
    double terms;     /* the pending node's bound on its terms (tolerance, above) */
    uint64_t *sums;   /* [maxin]: checksums of the pending node's inputs */
    tg_tensor **vin;  /* [maxin]: the pending node's input values */
    tg_tensor **leaf; /* per var: inputs and constants, before a call */
} dbg_run;

static int env_op(const char *name) {
    const char *s = getenv(name);
    return s && *s ? tg_op_lookup(s) : -1;
}

static uint64_t checksum(const tg_tensor *t) {
    uint64_t h = 0xcbf29ce484222325ull;
    int64_t n = tg_tensor_size(t);
    if (n <= 0) return h;
    size_t es = tg_dtype_size(t->dtype);
    int64_t idx[TG_MAX_DIMS] = {0};
    do {
        const unsigned char *p = (const unsigned char *)tg_tensor_at(t, idx);
        for (size_t b = 0; b < es; b++) h = (h ^ p[b]) * 0x100000001b3ull;
    } while (tg_index_next(t->ndim, t->shape, idx));
    return h;
}

static void drop_ref(dbg_run *c) {
    for (int o = 0; o < c->nref; o++) tg_tensor_free(c->ref[o]);
    c->nref = 0;
    c->ref_failed = false;
}

/* The largest finite magnitude among t's elements (0 for a non-float tensor). */
static double max_abs(const tg_tensor *t) {
    double m = 0.0;
    int64_t n = tg_tensor_size(t);
    if (n <= 0 || !tg_dtype_is_float(t->dtype)) return m;
    int64_t idx[TG_MAX_DIMS] = {0};
    do {
        double v = fabs(tg_load_f64(tg_tensor_at(t, idx), t->dtype));
        if (isfinite(v) && v > m) m = v;
    } while (tg_index_next(t->ndim, t->shape, idx));
    return m;
}

/* A bound on the terms a summing node adds: for a product (linear algebra) the largest
 * input magnitude times the second largest; for a reduction or another node that may sum
 * (fused, softmax) the largest input magnitude; none for a node that only moves values
 * (shape, indexing, construction) or a single elementwise op. */
static double terms_bound(const tg_node *n, tg_tensor *const *vin) {
    int kind = tg_op_table[n->op]->kind;
    if (kind != TG_KIND_LINALG && kind != TG_KIND_REDUCE && kind != TG_KIND_OTHER) return 0.0;
    double m1 = 0.0, m2 = 0.0;
    int nf = 0;
    for (int k = 0; k < n->nin; k++) {
        if (!tg_dtype_is_float(vin[k]->dtype)) continue;
        double m = max_abs(vin[k]);
        nf++;
        if (m > m1) {
            m2 = m1;
            m1 = m;
        } else if (m > m2) {
            m2 = m;
        }
    }
    return kind == TG_KIND_LINALG && nf >= 2 ? m1 * m2 : m1;
}

/* Reference outputs and input checksums of order[i], from the values val (by var id). */
static tg_status prepare(dbg_run *c, int i, tg_tensor *const *val) {
    tg_dbg *d = c->d;
    drop_ref(c);
    c->next = i;
    const tg_node *n = d->order[i];
    tg_tensor **vin = c->vin;
    TG_ASSERT(n->nin <= d->maxin && n->nout <= TG_MAX_OUTS); /* maxin: over all of order */
    for (int k = 0; k < n->nin; k++) {
        vin[k] = val[n->in[k]->id];
        if (!vin[k])
            return tg_set_error(TG_EINTERNAL, "debug: an input of node %d is missing", n->id);
        /* a wait's input is the buffer its exchange writes until the wait returns */
        c->sums[k] = tg_op_table[n->op]->sched == TG_SCHED_LATE ? 0 : checksum(vin[k]);
    }
    /* not read either for the bound: a wait's input is still being written */
    c->terms = tg_op_table[n->op]->sched == TG_SCHED_LATE ? 0 : terms_bound(n, vin);
    if (d->noref[i]) return TG_OK;
    tg_tensor *ref[TG_MAX_OUTS];
    if (tg_interp_eval(d->ctx, d->g, n, vin, d->sub, ref) != TG_OK) {
        c->ref_failed = true;
        snprintf(c->ref_msg, sizeof c->ref_msg, "%s", tg_last_error());
        return TG_OK;
    }
    for (int o = 0; o < n->nout; o++) c->ref[o] = ref[o];
    c->nref = n->nout;
    return TG_OK;
}

static void where(const tg_dbg *d, const tg_node *n, char *buf, size_t len) {
    const char *name = tg_op_table[n->op]->name;
    if (n->line > 0)
        snprintf(buf, len, "node %d (%s) at %s:%d:%d", n->id, name,
                 d->g->file ? d->g->file : "<input>", n->line, n->col);
    else
        snprintf(buf, len, "node %d (%s)", n->id, name);
}

static void index_str(const tg_tensor *t, int64_t flat, char *buf, size_t len) {
    int64_t idx[TG_MAX_DIMS];
    for (int a = t->ndim - 1; a >= 0; a--) {
        idx[a] = t->shape[a] ? flat % t->shape[a] : 0;
        flat = t->shape[a] ? flat / t->shape[a] : 0;
    }
    size_t u = (size_t)snprintf(buf, len, "[");
    for (int a = 0; a < t->ndim && u < len; a++)
        u += (size_t)snprintf(buf + u, len - u, "%s%lld", a ? "," : "", (long long)idx[a]);
    if (u < len) snprintf(buf + u, len - u, "]");
}

/* Whether t lives in the buffer of one of n's outputs. */
static bool shares_output(const tg_node *n, const tg_tensor *t, tg_tensor *const *val) {
    for (int o = 0; o < n->nout; o++) {
        const tg_tensor *y = val[n->out[o]->id];
        if (y && y->buf == t->buf) return true;
    }
    return false;
}

/* Compares got with the reference; on a difference writes the message and returns false. */
static bool compare(const tg_node *n, const tg_tensor *got, const tg_tensor *ref, double terms,
                    char *msg, size_t len) {
    char ty[TG_TYPE_STR_MAX], tr[TG_TYPE_STR_MAX];
    tg_type a = {.dtype = (uint8_t)got->dtype, .ndim = (uint8_t)got->ndim};
    tg_type b = {.dtype = (uint8_t)ref->dtype, .ndim = (uint8_t)ref->ndim};
    for (int k = 0; k < got->ndim; k++) a.shape[k] = got->shape[k];
    for (int k = 0; k < ref->ndim; k++) b.shape[k] = ref->shape[k];
    tg_type_str(&a, ty, sizeof ty);
    tg_type_str(&b, tr, sizeof tr);
    bool same = got->dtype == ref->dtype && got->ndim == ref->ndim;
    for (int k = 0; same && k < got->ndim; k++) same = got->shape[k] == ref->shape[k];
    if (!same) {
        snprintf(msg, len, "is %s, its reference kernel gives %s", ty, tr);
        return false;
    }
    int64_t cnt = tg_tensor_size(ref);
    if (cnt <= 0) return true;
    bool fl = tg_dtype_is_float(ref->dtype);
    double rtol = ref->dtype == TG_DT_F32 ? 1e-4 : 1e-9, scale = isfinite(terms) ? terms : 0.0;
    double tiny = ref->dtype == TG_DT_F32 ? FLT_MIN : DBL_MIN; /* the smallest normal */
    const tg_op_def *op = tg_op_table[n->op];
    bool sums = op->kind != TG_KIND_ELEMWISE; /* fused nodes too: they may reduce */
    if (fl && sums)
        for (int64_t i = 0; i < cnt; i++) {
            double r = fabs(tg_tensor_get_f64(ref, i));
            if (isfinite(r) && r > scale) scale = r;
        }
    int64_t bad = 0, worst = -1;
    double worst_err = -1.0;
    for (int64_t i = 0; i < cnt; i++) {
        double x = tg_tensor_get_f64(got, i), y = tg_tensor_get_f64(ref, i);
        double err;
        bool ok;
        if (!fl) {
            err = fabs(x - y);
            ok = x == y;
        } else if (isnan(x) || isnan(y)) {
            ok = isnan(x) && isnan(y);
            err = ok ? 0.0 : INFINITY;
        } else if (isinf(x) || isinf(y)) {
            ok = x == y;
            err = ok ? 0.0 : INFINITY;
        } else {
            err = fabs(x - y);
            double m = fabs(x) > fabs(y) ? fabs(x) : fabs(y);
            if (m < tiny) m = tiny; /* a subnormal has fewer digits than rtol asks for */
            ok = err <= rtol * (m + scale);
        }
        if (!ok) {
            bad++;
            if (err > worst_err) {
                worst_err = err;
                worst = i;
            }
        }
    }
    if (bad == 0) return true;
    char ix[128];
    index_str(ref, worst, ix, sizeof ix);
    snprintf(msg, len,
             "%s differs from its reference kernel in %lld of %lld elements; worst at %s: "
             "got %.17g, reference %.17g",
             ty, (long long)bad, (long long)cnt, ix, tg_tensor_get_f64(got, worst),
             tg_tensor_get_f64(ref, worst));
    return false;
}

/* Whether op declares that it destroys its input k. The destroys mask has a fixed width;
 * inputs beyond it are never destroyed (and shifting by them would be undefined). */
static bool destroys_input(const tg_op_def *op, int k) {
    return k < (int)(sizeof op->destroys * CHAR_BIT) && (op->destroys >> k & 1u);
}

/* Adds 1 to element 0 of t (test hooks). */
static void poke(tg_tensor *t) {
    if (tg_tensor_size(t) <= 0) return;
    int64_t idx[TG_MAX_DIMS] = {0};
    char *p = tg_tensor_at(t, idx);
    if (tg_dtype_is_float(t->dtype))
        tg_store_f64(p, t->dtype, tg_load_f64(p, t->dtype) + 1.0);
    else
        tg_store_i64(p, t->dtype, tg_load_i64(p, t->dtype) + 1);
}

static tg_status check(void *ud, const tg_node *n, tg_tensor *const *val) {
    dbg_run *c = ud;
    tg_dbg *d = c->d;
    int i = c->next;
    if (i >= d->norder || d->order[i] != n)
        return tg_set_error(TG_EINTERNAL, "debug: the %s backend ran node %d out of order",
                            d->backend, n->id);
    char at[256], msg[700];
    where(d, n, at, sizeof at);
    if (n->op == d->break_op) poke(val[n->out[0]->id]);
    if (n->op == d->clobber_op && n->nin > 0) poke(val[n->in[0]->id]);
    if (c->ref_failed)
        return tg_set_error(TG_ECHECK,
                            "debug (%s backend): %s ran, but its reference kernel "
                            "failed on the same inputs: %s",
                            d->backend, at, c->ref_msg);
    for (int o = 0; o < c->nref; o++) {
        const tg_tensor *got = val[n->out[o]->id];
        if (!got) continue;
        if (!compare(n, got, c->ref[o], c->terms, msg, sizeof msg))
            return tg_set_error(TG_ECHECK, "debug (%s backend): %s: output %d %s", d->backend, at,
                                o, msg);
    }
    for (int k = 0; k < n->nin; k++) {
        if (destroys_input(tg_op_table[n->op], k) || tg_op_table[n->op]->sched == TG_SCHED_LATE)
            continue;
        const tg_tensor *t = val[n->in[k]->id];
        if (t && shares_output(n, t, val))
            continue; /* the memory plan gave an output the
                         buffer of an input that dies here */
        if (t && checksum(t) != c->sums[k]) {
            char ty[TG_TYPE_STR_MAX];
            return tg_set_error(TG_ECHECK,
                                "debug (%s backend): %s wrote to its input %d (%s), "
                                "which it does not declare it destroys",
                                d->backend, at, k, tg_type_str(&n->in[k]->type, ty, sizeof ty));
        }
    }
    drop_ref(c);
    if (i + 1 < d->norder) return prepare(c, i + 1, val);
    c->next = d->norder;
    return TG_OK;
}

/* Whether node n talks to other ranks: a collective, or a node whose graphs (calls, pmap
 * bodies: acyclic, at most TG_CALL_MAX_DEPTH deep) hold one. */
static bool talks(const tg_node *n) {
    const tg_op_def *op = tg_op_table[n->op];
    if (op->effects & TG_EFFECT_STATE) return true;
    for (int j = 0; j < op->nattrs; j++) {
        const tg_graph *g = n->attrs[j].kind == TG_ATTR_FUNC ? n->attrs[j].fn : NULL;
        for (int k = 0; g && k < g->nodes.n; k++)
            if (talks(g->nodes.items[k])) return true;
    }
    return false;
}

static tg_status check_cj(void *ud, const tg_node *n, tg_tensor *const *val) {
    return check(ud, n, val);
}

tg_status tg_dbg_new(tg_graph *g, const tg_compile_opts *opts, tg_dbg **out) {
    *out = NULL;
    tg_ctx *ctx = g->ctx;
    tg_dbg *d = tg_mem_calloc(ctx, sizeof *d);
    if (!d) return TG_ENOMEM;
    pthread_mutex_init(&d->mu, NULL); /* first: tg_dbg_free destroys it */
    d->ctx = ctx;
    d->g = g;
    d->break_op = env_op("TGRAPH_TEST_BREAK_OP");
    d->clobber_op = env_op("TGRAPH_TEST_CLOBBER_OP");
    d->order = tg_ir_toposort(g, &d->norder);
    if (d->order && tg_ir_schedule(g, d->order, d->norder) != TG_OK) { /* the backends' order */
        tg_mem_free(ctx, d->order, sizeof *d->order * (size_t)(g->nodes.n + 1));
        d->order = NULL;
    }
    d->noref = d->order ? tg_mem_calloc(ctx, sizeof *d->noref * (size_t)(d->norder + 1)) : NULL;
    d->maxin = 1;
    for (int i = 0; d->noref && i < d->norder; i++) {
        if (d->order[i]->nin > d->maxin) d->maxin = d->order[i]->nin;
        d->noref[i] = talks(d->order[i]);
    }
    if (!d->noref) {
        tg_dbg_free(d);
        return TG_ENOMEM;
    }
    tg_status st;
    if (opts && opts->debug_backend == TG_MODE_C) {
        d->backend = "c";
        tg_compile_opts o = *opts;
        o.mode = TG_MODE_C;
        st = tg_cj_new(g, &o, &d->cj);
        if (st == TG_OK) tg_cj_set_after(d->cj, check_cj, NULL);
    } else if (opts && opts->debug_backend != TG_MODE_VM) {
        st = tg_set_error(TG_EINVAL, "debug mode checks the vm or the c backend");
    } else {
        d->backend = "vm";
        st = tg_vm_new(g, opts, &d->vm);
        if (st == TG_OK) tg_vm_set_hook(d->vm, check, NULL);
    }
    if (st != TG_OK) {
        tg_dbg_free(d);
        return st;
    }
    *out = d;
    return TG_OK;
}

void tg_dbg_set_sub(tg_dbg *d, const tg_subexec *sub) {
    d->sub = sub;
    if (d->vm) tg_vm_set_sub(d->vm, sub);
    if (d->cj) tg_cj_set_sub(d->cj, sub);
}

static void run_free(tg_dbg *d, dbg_run *c) {
    tg_ctx *ctx = d->ctx;
    drop_ref(c);
    if (c->leaf) tg_mem_free(ctx, c->leaf, sizeof *c->leaf * (size_t)(d->g->vars.n + 1));
    if (c->sums) tg_mem_free(ctx, c->sums, sizeof *c->sums * (size_t)d->maxin);
    if (c->vin) tg_mem_free(ctx, c->vin, sizeof *c->vin * (size_t)d->maxin);
    tg_mem_free(ctx, c, sizeof *c);
}

void tg_dbg_free(tg_dbg *d) {
    if (!d) return;
    tg_ctx *ctx = d->ctx;
    tg_vm_free(d->vm);
    tg_cj_free(d->cj);
    for (dbg_run *c = d->all, *next; c; c = next) {
        next = c->next_all;
        run_free(d, c);
    }
    if (d->order) tg_mem_free(ctx, d->order, sizeof *d->order * (size_t)(d->g->nodes.n + 1));
    if (d->noref) tg_mem_free(ctx, d->noref, sizeof *d->noref * (size_t)(d->norder + 1));
    pthread_mutex_destroy(&d->mu);
    tg_mem_free(ctx, d, sizeof *d);
}

/* An idle run, or a new one; NULL when out of memory. */
static dbg_run *run_take(tg_dbg *d) {
    pthread_mutex_lock(&d->mu);
    dbg_run *c = d->idle;
    if (c) d->idle = c->next_idle;
    pthread_mutex_unlock(&d->mu);
    if (c) return c;
    tg_ctx *ctx = d->ctx;
    c = tg_mem_calloc(ctx, sizeof *c);
    if (!c) return NULL;
    c->d = d;
    c->leaf = tg_mem_calloc(ctx, sizeof *c->leaf * (size_t)(d->g->vars.n + 1));
    c->sums = tg_mem_calloc(ctx, sizeof *c->sums * (size_t)d->maxin);
    c->vin = tg_mem_calloc(ctx, sizeof *c->vin * (size_t)d->maxin);
    if (!c->leaf || !c->sums || !c->vin) {
        run_free(d, c);
        return NULL;
    }
    pthread_mutex_lock(&d->mu);
    c->next_all = d->all;
    d->all = c;
    pthread_mutex_unlock(&d->mu);
    return c;
}

static void run_give(tg_dbg *d, dbg_run *c) {
    drop_ref(c);
    pthread_mutex_lock(&d->mu);
    c->next_idle = d->idle;
    d->idle = c;
    pthread_mutex_unlock(&d->mu);
}

tg_status tg_dbg_call(tg_dbg *d, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                      bool into) {
    tg_graph *g = d->g;
    dbg_run *c = run_take(d);
    if (!c) return tg_set_error(TG_ENOMEM, "out of memory: the state of a checked call");
    for (int v = 0; v < g->vars.n; v++) {
        tg_var *var = g->vars.items[v];
        c->leaf[v] = var->kind == TG_VAR_CONST ? var->value : NULL;
    }
    for (int i = 0; i < g->inputs.n; i++) c->leaf[((tg_var *)g->inputs.items[i])->id] = in[i];
    c->next = 0;
    tg_status st = d->norder > 0 ? prepare(c, 0, c->leaf) : TG_OK;
    if (st == TG_OK)
        st = d->vm ? tg_vm_call_hooked(d->vm, c, in, nin, out, nout, into)
                   : tg_cj_call_after(d->cj, c, in, nin, out, nout, into);
    run_give(d, c);
    return st;
}
