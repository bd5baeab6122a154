/* debug.c - debug mode (see debug.h): a backend (VM or C JIT) with a check after every node.
 *
 * The backend calls check() after each instruction, in the topological order both use
 * (tg_ir_toposort). Before node i runs, prepare() has computed its reference outputs with
 * tg_interp_eval on the very input values the backend will read, and checksums of those
 * inputs: before the call for the first node (inputs and constants), after node i-1 for
 * node i (its inputs are all computed by then and still alive).
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
 * Threads: the fields below mu hold the state of one call (the pending node, its reference
 * outputs and input checksums, the leaf values), so tg_dbg_call holds mu for the whole call,
 * before it writes any of them: calls of one debug-mode function are serialized, and the
 * backend it checks (which could run calls at the same time, each on a replica) sees one
 * at a time (mu is always taken before the backend's locks).
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
    int maxin; /* most inputs of one node of order (at least 1) */
    tg_vm *vm;
    tg_cj *cj;
    const char *backend;      /* "vm" or "c" */
    int break_op, clobber_op; /* test hooks, -1 when off */
    const tg_subexec *sub;    /* runs the bodies of `call` nodes (borrowed) */
    pthread_mutex_t mu;       /* one call at a time: held while any field below is used */
    int next;                 /* order index of the node the pending data is for */
    tg_tensor *ref[TG_MAX_OUTS];
    int nref;
    bool ref_failed;
    char ref_msg[512];
    double terms;     /* the pending node's bound on its terms (tolerance, above) */
    uint64_t *sums;   /* [maxin]: checksums of the pending node's inputs */
    tg_tensor **vin;  /* [maxin]: the pending node's input values */
    tg_tensor **leaf; /* per var: inputs and constants, before a call */
};

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

static void drop_ref(tg_dbg *d) {
    for (int o = 0; o < d->nref; o++) tg_tensor_free(d->ref[o]);
    d->nref = 0;
    d->ref_failed = false;
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
static tg_status prepare(tg_dbg *d, int i, tg_tensor *const *val) {
    drop_ref(d);
    d->next = i;
    const tg_node *n = d->order[i];
    tg_tensor **vin = d->vin;
    TG_ASSERT(n->nin <= d->maxin && n->nout <= TG_MAX_OUTS); /* maxin: over all of order */
    for (int k = 0; k < n->nin; k++) {
        vin[k] = val[n->in[k]->id];
        if (!vin[k])
            return tg_set_error(TG_EINTERNAL, "debug: an input of node %d is missing", n->id);
        d->sums[k] = checksum(vin[k]);
    }
    d->terms = terms_bound(n, vin);
    tg_tensor *ref[TG_MAX_OUTS];
    if (tg_interp_eval(d->ctx, d->g, n, vin, d->sub, ref) != TG_OK) {
        d->ref_failed = true;
        snprintf(d->ref_msg, sizeof d->ref_msg, "%s", tg_last_error());
        return TG_OK;
    }
    for (int o = 0; o < n->nout; o++) d->ref[o] = ref[o];
    d->nref = n->nout;
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
    tg_dbg *d = ud;
    int i = d->next;
    if (i >= d->norder || d->order[i] != n)
        return tg_set_error(TG_EINTERNAL, "debug: the %s backend ran node %d out of order",
                            d->backend, n->id);
    char at[256], msg[700];
    where(d, n, at, sizeof at);
    if (n->op == d->break_op) poke(val[n->out[0]->id]);
    if (n->op == d->clobber_op && n->nin > 0) poke(val[n->in[0]->id]);
    if (d->ref_failed)
        return tg_set_error(TG_ECHECK,
                            "debug (%s backend): %s ran, but its reference kernel "
                            "failed on the same inputs: %s",
                            d->backend, at, d->ref_msg);
    for (int o = 0; o < d->nref; o++) {
        const tg_tensor *got = val[n->out[o]->id];
        if (!got) continue;
        if (!compare(n, got, d->ref[o], d->terms, msg, sizeof msg))
            return tg_set_error(TG_ECHECK, "debug (%s backend): %s: output %d %s", d->backend, at,
                                o, msg);
    }
    for (int k = 0; k < n->nin; k++) {
        if (destroys_input(tg_op_table[n->op], k)) continue;
        const tg_tensor *t = val[n->in[k]->id];
        if (t && shares_output(n, t, val))
            continue; /* the memory plan gave an output the
                         buffer of an input that dies here */
        if (t && checksum(t) != d->sums[k]) {
            char ty[TG_TYPE_STR_MAX];
            return tg_set_error(TG_ECHECK,
                                "debug (%s backend): %s wrote to its input %d (%s), "
                                "which it does not declare it destroys",
                                d->backend, at, k, tg_type_str(&n->in[k]->type, ty, sizeof ty));
        }
    }
    drop_ref(d);
    if (i + 1 < d->norder) return prepare(d, i + 1, val);
    d->next = d->norder;
    return TG_OK;
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
    d->leaf = tg_mem_calloc(ctx, sizeof *d->leaf * (size_t)(g->vars.n + 1));
    d->maxin = 1;
    for (int i = 0; d->order && i < d->norder; i++)
        if (d->order[i]->nin > d->maxin) d->maxin = d->order[i]->nin;
    d->sums = tg_mem_calloc(ctx, sizeof *d->sums * (size_t)d->maxin);
    d->vin = tg_mem_calloc(ctx, sizeof *d->vin * (size_t)d->maxin);
    if (!d->order || !d->leaf || !d->sums || !d->vin) {
        tg_dbg_free(d);
        return TG_ENOMEM;
    }
    tg_status st;
    if (opts && opts->debug_backend == TG_MODE_C) {
        d->backend = "c";
        tg_compile_opts o = *opts;
        o.mode = TG_MODE_C;
        st = tg_cj_new(g, &o, &d->cj);
        if (st == TG_OK) tg_cj_set_after(d->cj, check_cj, d);
    } else if (opts && opts->debug_backend != TG_MODE_VM) {
        st = tg_set_error(TG_EINVAL, "debug mode checks the vm or the c backend");
    } else {
        d->backend = "vm";
        st = tg_vm_new(g, opts, &d->vm);
        if (st == TG_OK) tg_vm_set_hook(d->vm, check, d);
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

void tg_dbg_free(tg_dbg *d) {
    if (!d) return;
    tg_ctx *ctx = d->ctx;
    drop_ref(d);
    tg_vm_free(d->vm);
    tg_cj_free(d->cj);
    if (d->order) tg_mem_free(ctx, d->order, sizeof *d->order * (size_t)(d->g->nodes.n + 1));
    if (d->leaf) tg_mem_free(ctx, d->leaf, sizeof *d->leaf * (size_t)(d->g->vars.n + 1));
    if (d->sums) tg_mem_free(ctx, d->sums, sizeof *d->sums * (size_t)d->maxin);
    if (d->vin) tg_mem_free(ctx, d->vin, sizeof *d->vin * (size_t)d->maxin);
    pthread_mutex_destroy(&d->mu);
    tg_mem_free(ctx, d, sizeof *d);
}

tg_status tg_dbg_call(tg_dbg *d, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                      bool into) {
    tg_graph *g = d->g;
    pthread_mutex_lock(&d->mu);
    for (int v = 0; v < g->vars.n; v++) {
        tg_var *var = g->vars.items[v];
        d->leaf[v] = var->kind == TG_VAR_CONST ? var->value : NULL;
    }
    for (int i = 0; i < g->inputs.n; i++) d->leaf[((tg_var *)g->inputs.items[i])->id] = in[i];
    d->next = 0;
    tg_status st = d->norder > 0 ? prepare(d, 0, d->leaf) : TG_OK;
    if (st == TG_OK)
        st = d->vm ? tg_vm_call(d->vm, in, nin, out, nout, into)
                   : tg_cj_call(d->cj, in, nin, out, nout, into);
    drop_ref(d);
    pthread_mutex_unlock(&d->mu);
    return st;
}
