/* compile.c - compiled functions (tg_fn): the driver between the public API and the backends.
 *
 * tg_graph_compile verifies the user's graph, rewrites a clone of it with the pipeline of
 * src/rewrite (every mode but TG_MODE_REFERENCE, which runs the graph as written), and
 * hands the result to one backend through the same table of calls (fn_backend): the
 * reference interpreter (src/backend/interp), the VM (src/backend/vm), the C JIT or debug
 * mode (src/backend/cjit). A call checks the arguments against the graph's declared inputs
 * and outputs here, once for every backend, then forwards.
 *
 * Invariants: compiling never modifies the user's graph; a function keeps the graph it
 * runs (the user's, borrowed, or its own rewritten clone) alive as long as it lives.
 *
 * Calls (docs/vm.md "Calls"): a `call` node left in the graph run (--no-inline, the reference
 * mode, no_rewrite) runs its callee as a function compiled with the caller's options, once,
 * when the caller is compiled. The backends reach it through the sub-graph executor
 * (tg_subexec, op.h) they hand to the call's kernel; each callee plans once per input
 * signature and reuses its buffers, like any compiled function.
 *
 * pmap (docs/pmap.md): the body of each pmap node is compiled the same way, once per
 * caller, without placement (a rank runs whole on its own device or thread), and the
 * executor's run_ranks runs its ranks at once through ranks.c, each on a replica of the
 * one compiled body. An entry function (tg_graph_compile) is first checked to read no pmap
 * axis outside a pmap of that axis (tg_pmap_check_axes); the callees and bodies it
 * compiles are covered by that check, made in their callers' context.
 *
 * State (docs/state.md): the graph's outputs end with the new value of each updated state
 * (ir.h), so every backend computes them as ordinary outputs. The function owns two
 * buffers per updated state: a call passes the current one as the state's input and has
 * the backend write the new value into the other (`into`: the VM computes it there, no
 * copy); only a call that succeeded swaps them, so a failed call changes no state.
 *
 * Threads (tgraph.h, tg_fn_call): calls of a function without state go to the backend at
 * once, and the VM and the C JIT run them at the same time, each on a replica of its own
 * (src/backend/plan.h), and so do those of the reference and debug modes; calls of a
 * function with state are serialized by mu, since every call reads the state the previous
 * one left.
 */
#include "../backend/interp/interp.h"
#include "../rewrite/rewrite.h"
#include "../backend/cjit/cjit.h"
#include "../backend/cjit/debug.h"
#include "../backend/vm/vm.h"
#include "driver.h"

#include <pthread.h>

/* One state of a compiled function. */
typedef struct fn_state {
    tg_var *var;      /* the state input of the graph run */
    int input;        /* its position among the graph's inputs */
    int update;       /* position among the graph's outputs of its new value, or -1 */
    tg_tensor *cur;   /* current value (owned); NULL while a '?' extent is not set */
    tg_tensor *spare; /* updated states: the buffer the next value is written into */
} fn_state;

/* Every backend runs every op today (fn_backend.supports). */
static bool all_ops(int op) {
    (void)op;
    return true;
}

static tg_status interp_make(tg_graph *g, const tg_compile_opts *opts, void **out) {
    (void)opts;
    return tg_interp_new(g, (tg_interp **)out);
}
static void interp_sub(void *b, const tg_subexec *sub) { tg_interp_set_sub(b, sub); }
static tg_status interp_call(void *b, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                             bool into) {
    return tg_interp_call(b, in, nin, out, nout, into);
}
static void interp_free(void *b) { tg_interp_free(b); }
static const fn_backend be_interp = {"reference", interp_make, interp_sub,
                                     interp_call, interp_free, all_ops};

static tg_status vm_make(tg_graph *g, const tg_compile_opts *opts, void **out) {
    return tg_vm_new(g, opts, (tg_vm **)out);
}
static void vm_sub(void *b, const tg_subexec *sub) { tg_vm_set_sub(b, sub); }
static tg_status vm_call(void *b, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                         bool into) {
    return tg_vm_call(b, in, nin, out, nout, into);
}
static void vm_free(void *b) { tg_vm_free(b); }
static const fn_backend be_vm = {"vm", vm_make, vm_sub, vm_call, vm_free, all_ops};

static tg_status cj_make(tg_graph *g, const tg_compile_opts *opts, void **out) {
    return tg_cj_new(g, opts, (tg_cj **)out);
}
static void cj_sub(void *b, const tg_subexec *sub) { tg_cj_set_sub(b, sub); }
static tg_status cj_call(void *b, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                         bool into) {
    return tg_cj_call(b, in, nin, out, nout, into);
}
static void cj_free(void *b) { tg_cj_free(b); }
static const fn_backend be_cj = {"c", cj_make, cj_sub, cj_call, cj_free, all_ops};

static tg_status dbg_make(tg_graph *g, const tg_compile_opts *opts, void **out) {
    return tg_dbg_new(g, opts, (tg_dbg **)out);
}
static void dbg_sub(void *b, const tg_subexec *sub) { tg_dbg_set_sub(b, sub); }
static tg_status dbg_call(void *b, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                          bool into) {
    return tg_dbg_call(b, in, nin, out, nout, into);
}
static void dbg_free(void *b) { tg_dbg_free(b); }
static const fn_backend be_dbg = {"debug", dbg_make, dbg_sub, dbg_call, dbg_free, all_ops};

/* The scheduler (sched.c): a placed graph over several devices, each part run by the
 * backend of the mode. Its parts compile their own callees. */
static tg_status sched_make(tg_graph *g, const tg_compile_opts *opts, void **out) {
    return tg_sched_new(g, opts, (tg_sched **)out);
}
static void sched_sub(void *b, const tg_subexec *sub) {
    (void)b;
    (void)sub;
}
static tg_status sched_call(void *b, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                            bool into) {
    return tg_sched_call(b, in, nin, out, nout, into);
}
static void sched_free(void *b) { tg_sched_free(b); }
static const fn_backend be_sched = {"devices",  sched_make, sched_sub,
                                    sched_call, sched_free, all_ops};

/* One graph a function runs as a sub-graph, compiled. */
typedef struct fn_body {
    const tg_graph *g; /* the callee of call nodes, or the body of pmap nodes */
    bool mapped;       /* a pmap body (compiled without placement) */
    struct tg_fn *fn;  /* compiled */
} fn_body;

/* The sub-graph executor of a function: its callees and pmap bodies, compiled. */
typedef struct fn_callees {
    tg_subexec base;
    fn_body *b; /* distinct (graph, mapped) pairs */
    int n, cap;
    tg_ranks *ranks; /* the threads of its pmaps' ranks; NULL without pmap nodes */
    /* run_each: the caller's pool when its options give one, else its own, made by the
       first run_each of more than one iteration (under mu) */
    tg_pool *pool;
    bool own_pool;
    int nthreads; /* the pool's threads, or the count to make it with */
    pthread_mutex_t mu;
} fn_callees;

struct tg_fn {
    tg_graph *g;          /* the graph run: the user's (borrowed), or `owned` */
    tg_graph *owned;      /* a rewritten clone, freed with the function */
    tg_mode mode;         /* the mode compiled for */
    const fn_backend *be; /* the backend running `g` */
    void *run;            /* its object */
    fn_state *states;     /* state inputs, in declaration order (nstate of them) */
    int nstate;
    tg_tensor **args;   /* with state: the backend's inputs (states and the caller's) */
    tg_tensor **res;    /* with state: the backend's outputs (returns, then new states) */
    pthread_mutex_t mu; /* with state: one call, set or swap at a time */
    fn_callees calls;   /* its call nodes' callees and pmap bodies (calls.n == 0: none) */
};

static tg_status states_init(tg_fn *f);
static void states_free(tg_fn *f);
/* How compile() treats its graph. */
enum {
    REWRITTEN = 1, /* already rewritten: no pipeline */
    NO_PLACE = 2,  /* no placement: it runs where it is called (a part of a placed graph,
                      on its device's queue, and the callees of one; a pmap body, which runs
                      whole where its rank runs, and what it calls: its device annotations
                      apply only where the function is compiled on its own) */
    NESTED = 4,    /* a callee or a pmap body: the check of its caller's pmap axes covers it */
};
static tg_status callees_init(tg_fn *f, const tg_compile_opts *opts, int flags);
static void callees_free(tg_fn *f);

/* Whether g goes through placement: a placement asked for, several devices, or an
 * annotation. With none of them, nothing about devices happens at all. */
static tg_status wants_placement(const tg_graph *g, const tg_compile_opts *opts, bool *out) {
    int ndev = 1;
    tg_status st = tg_device_count_peek(&ndev);
    *out = opts->placement != TG_PLACEMENT_DEFAULT || ndev > 1;
    for (int i = 0; !*out && i < g->nodes.n; i++)
        *out = ((const tg_node *)g->nodes.items[i])->device != NULL;
    for (int i = 0; !*out && i < g->inputs.n; i++)
        *out = ((const tg_var *)g->inputs.items[i])->device != NULL;
    return st;
}

/* The device of a placed graph all of whose nodes are on one host device and that has no
 * transfer: it runs there (that device's pool) without the scheduler. NULL otherwise. */
static tg_device *single_host_device(const tg_graph *g) {
    const char *d = NULL;
    for (int i = 0; i < g->nodes.n; i++) {
        const tg_node *n = g->nodes.items[i];
        if (n->op == TG_OP_TRANSFER) return NULL;
        if (!d) d = n->device;
        if (!tg_ir_same_device(d, n->device)) return NULL;
    }
    tg_device *dev = d ? tg_device_find(d) : tg_device_cpu();
    return dev && tg_device_is_host(dev) ? dev : NULL;
}

/* tg_graph_compile (flags 0), the parts of a placed graph (REWRITTEN | NO_PLACE), the
 * callees of a function (NESTED, and the NO_PLACE of their caller: a call inside a part
 * runs on the part's queue thread, where a scheduler of its own would wait on that queue
 * for itself) and pmap bodies (NESTED | NO_PLACE). */
static tg_status compile(tg_graph *g, const tg_compile_opts *opts, int flags, tg_fn **out) {
    tg_mode mode = opts->mode;
    if (g->status != TG_OK) return tg_set_error(g->status, "%s", g->error);
    if (g->outputs.n == 0) return tg_set_error(TG_EINVAL, "function '%s' has no outputs", g->name);
    tg_status st = tg_graph_verify(g);
    if (st == TG_OK && !(flags & (REWRITTEN | NESTED))) st = tg_pmap_check_axes(g);
    if (st != TG_OK) return st;
    tg_graph *run = g, *owned = NULL;
    if (!(flags & REWRITTEN) && mode != TG_MODE_REFERENCE && !opts->no_rewrite) {
        /* the pipeline works on a clone: the user's graph is never modified */
        owned = tg_graph_clone(g);
        if (!owned) return tg_rw_error_status();
        tg_rw_opts ro = {
            .verify = opts->verify, .no_blas = opts->no_blas, .no_inline = opts->no_inline};
        st = tg_rw_pipeline(&owned, &ro, NULL);
        if (st != TG_OK) {
            tg_graph_free(owned);
            return st;
        }
        run = owned;
    }
    bool place = false;
    /* the graph run: annotations of inlined callees count */
    if (!(flags & NO_PLACE)) st = wants_placement(run, opts, &place);
    tg_compile_opts o = *opts; /* with the pool of the device it runs on, if one */
    const fn_backend *be = NULL;
    if (st == TG_OK && place) { /* placement, after every rewrite (docs/devices.md) */
        if (!owned && !(run = owned = tg_graph_clone(g))) st = tg_rw_error_status();
        if (st == TG_OK) st = tg_place(&owned, &(tg_place_opts){.placement = opts->placement});
        run = owned;
        tg_device *d = st == TG_OK ? single_host_device(run) : NULL;
        if (d && d != tg_device_cpu()) {
            o.pool = d->pool;
            o.nthreads = 0;
        }
        if (st == TG_OK && !d) be = &be_sched;
    }
    if (st != TG_OK) {
        tg_graph_free(owned);
        return st;
    }
    tg_fn *f = tg_mem_calloc(g->ctx, sizeof *f);
    if (!f) {
        tg_graph_free(owned);
        return TG_ENOMEM;
    }
    f->g = run;
    f->owned = owned;
    f->mode = mode;
    st = states_init(f);
    if (st == TG_OK && !be) st = callees_init(f, &o, flags & NO_PLACE);
    if (st != TG_OK) {
        tg_fn_free(f);
        return st;
    }
    if (!be)
        be = mode == TG_MODE_REFERENCE ? &be_interp
             : mode == TG_MODE_DEBUG   ? &be_dbg
             : mode == TG_MODE_C       ? &be_cj
                                       : &be_vm;
    st = be->make(run, &o, &f->run);
    if (st == TG_ECHECK && be == &be_cj && !opts->no_fallback) {
        /* no compiler: the VM, with a warning */
        fprintf(stderr, "tgraph: warning: %s; running '%s' with the vm backend\n", tg_last_error(),
                g->name);
        be = &be_vm;
        st = be->make(run, &o, &f->run);
    }
    if (st == TG_OK) {
        f->be = be;
        if (f->calls.n > 0) be->set_sub(f->run, &f->calls.base);
    }
    if (st != TG_OK) {
        tg_fn_free(f);
        return st;
    }
    *out = f;
    return TG_OK;
}

/* The caller's options in this version's struct, checked (tgraph.h, "versioned structs"). */
static tg_status opts_in(tg_compile_opts *o, const tg_compile_opts *opts) {
    tg_status st = tg_struct_in(o, sizeof *o, opts, TG_COMPILE_OPTS_FIRST, "tg_graph_compile",
                                "tg_compile_opts");
    if (st != TG_OK) return st;
    if ((unsigned)o->mode > TG_MODE_DEBUG || (unsigned)o->debug_backend > TG_MODE_DEBUG)
        return tg_set_error(TG_EINVAL, "tg_graph_compile: invalid mode %d",
                            (unsigned)o->mode > TG_MODE_DEBUG ? (int)o->mode
                                                              : (int)o->debug_backend);
    if ((unsigned)o->placement > TG_PLACEMENT_MANUAL)
        return tg_set_error(TG_EINVAL, "tg_graph_compile: invalid placement %d", (int)o->placement);
    return TG_OK;
}

tg_status tg_graph_compile(tg_graph *g, const tg_compile_opts *opts, tg_fn **out) {
    if (!g || !out)
        return tg_set_error(TG_EINVAL, "tg_graph_compile: %s is NULL", g ? "out" : "graph");
    *out = NULL;
    tg_compile_opts o;
    tg_status st = opts_in(&o, opts);
    return st == TG_OK ? compile(g, &o, 0, out) : st;
}

tg_status tg_driver_compile_placed(tg_graph *g, const tg_compile_opts *opts, tg_fn **out) {
    *out = NULL;
    return compile(g, opts, REWRITTEN | NO_PLACE, out);
}

void tg_fn_free(tg_fn *f) {
    if (!f) return;
    tg_ctx *ctx = f->g->ctx;
    if (f->be) f->be->free(f->run);
    states_free(f);
    callees_free(f);
    tg_graph_free(f->owned);
    tg_mem_free(ctx, f, sizeof *f);
}

/* Checks a caller's input against the declared type. */
static tg_status check_input(const tg_var *v, const tg_tensor *t, int i) {
    char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
    if (!t) return tg_set_error(TG_EINVAL, "input %d ('%s') is NULL", i, v->name);
    tg_type rt;
    tg_interp_runtime_type(&v->type, t, &rt);
    bool ok = t->dtype == v->type.dtype && t->ndim == v->type.ndim;
    for (int k = 0; ok && k < t->ndim; k++)
        ok = v->type.shape[k] < 0 || v->type.shape[k] == t->shape[k];
    if (ok) return TG_OK;
    return tg_set_error(t->dtype != v->type.dtype ? TG_ETYPE : TG_ESHAPE,
                        "input '%s': expected %s, got %s", v->name,
                        tg_type_str(&v->type, a, sizeof a), tg_type_str(&rt, b, sizeof b));
}

/* Runs the backend on the graph's full inputs and outputs. */
static tg_status backend_call(tg_fn *f, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                              bool into) {
    return f->be->call(f->run, in, nin, out, nout, into);
}

/* ---- callees and pmap bodies ---- */

static tg_fn *body_fn(const fn_callees *c, const tg_graph *body, bool mapped) {
    for (int i = 0; i < c->n; i++)
        if (c->b[i].g == body && c->b[i].mapped == mapped) return c->b[i].fn;
    return NULL;
}

/* tg_subexec.run: the callee `body` on in, into the caller's outputs out. */
static tg_status callee_run(const tg_subexec *x, const tg_graph *body, tg_tensor *const *in,
                            int nin, tg_tensor **out, int nout, char *msg, size_t cap) {
    tg_fn *fn = body_fn((const fn_callees *)x, body, false);
    if (!fn) {
        snprintf(msg, cap, "'%s' is not a callee of this function", body->name);
        return TG_EINTERNAL;
    }
    tg_status st = tg_fn_call_into(fn, in, nin, out, nout);
    if (st != TG_OK) snprintf(msg, cap, "in '%s': %s", body->name, tg_last_error());
    return st;
}

/* tg_subexec.backend: the backend object of body's compiled function, when it is `name`'s
 * and the function has no state (its arguments are the backend's). */
static void *callee_backend(const tg_subexec *x, const tg_graph *body, const char *name) {
    tg_fn *fn = body_fn((const fn_callees *)x, body, false);
    return fn && fn->nstate == 0 && strcmp(fn->be->name, name) == 0 ? fn->run : NULL;
}

/* tg_subexec.run_ranks: the ranks of a pmap of `body` (ranks.c). */
static tg_status ranks_run(const tg_subexec *x, const tg_graph *body, const char *axis, int nrank,
                           tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                           tg_kern_note *note, char *msg, size_t cap) {
    const fn_callees *c = (const fn_callees *)x;
    tg_fn *fn = body_fn(c, body, true);
    if (!fn) {
        snprintf(msg, cap, "'%s' is not a pmap body of this function", body->name);
        return TG_EINTERNAL;
    }
    return tg_ranks_run(c->ranks, fn, axis, nrank, in, nin, out, nout, note, msg, cap);
}

/* tg_subexec.threads. */
static int each_threads(const tg_subexec *x) { return ((const fn_callees *)x)->nthreads; }

/* The first failure of one thread of a run_each. */
typedef struct each_fail {
    int64_t at; /* the iteration, -1: none */
    tg_status st;
    char msg[256];
} each_fail;

/* One run_each. */
typedef struct each_task {
    tg_fn *fn;
    int64_t n;
    int nin, nout;
    tg_subexec_fill fill;
    void *arg;
    tg_ctx *ctx;
    each_fail *fail; /* one per thread of the pool */
} each_task;

static void each_share(void *a, int ith, int nth) {
    each_task *t = a;
    each_fail *f = &t->fail[ith];
    int64_t lo, hi;
    tg_pool_share(t->n, ith, nth, 1, &lo, &hi);
    f->at = -1;
    size_t bytes = sizeof(tg_tensor *) * (size_t)(t->nin + t->nout + 1);
    tg_tensor **io = lo < hi ? tg_mem_alloc(t->ctx, bytes) : NULL;
    if (!io && lo < hi) {
        *f = (each_fail){.at = lo, .st = TG_ENOMEM, .msg = "out of memory"};
        return;
    }
    for (int64_t i = lo; i < hi; i++) {
        tg_status st = t->fill(t->arg, i, ith, io, io + t->nin);
        if (st == TG_OK) st = tg_fn_call_into(t->fn, io, t->nin, io + t->nin, t->nout);
        if (st != TG_OK) {
            f->at = i;
            f->st = st;
            snprintf(f->msg, sizeof f->msg, "%s", tg_last_error());
            break;
        }
    }
    if (io) tg_mem_free(t->ctx, io, bytes);
}

/* tg_subexec.run_each: the iterations of a map over the pool (parallel.h). */
static tg_status each_run(const tg_subexec *x, const tg_graph *body, int64_t n, int nin, int nout,
                          tg_subexec_fill fill, void *arg, char *msg, size_t cap) {
    fn_callees *c = (fn_callees *)x;
    tg_fn *fn = body_fn(c, body, false);
    if (!fn) {
        snprintf(msg, cap, "'%s' is not a body of this function", body->name);
        return TG_EINTERNAL;
    }
    tg_pool *pool = NULL;
    if (n > 1 && c->nthreads > 1) {
        pthread_mutex_lock(&c->mu);
        if (!c->pool && (c->pool = tg_pool_new(body->ctx, c->nthreads))) c->own_pool = true;
        pool = c->pool;
        pthread_mutex_unlock(&c->mu);
    }
    int cap_th = pool ? tg_pool_size(pool) : 1;
    each_fail *fail = tg_mem_alloc(body->ctx, sizeof *fail * (size_t)cap_th);
    if (!fail) {
        snprintf(msg, cap, "out of memory");
        return TG_ENOMEM;
    }
    each_task t = {.fn = fn,
                   .n = n,
                   .nin = nin,
                   .nout = nout,
                   .fill = fill,
                   .arg = arg,
                   .ctx = body->ctx,
                   .fail = fail};
    int nth = pool ? tg_pool_run(pool, each_share, &t) : (each_share(&t, 0, 1), 1);
    tg_status st = TG_OK;
    int64_t first = -1;
    for (int i = 0; i < nth; i++)
        if (fail[i].at >= 0 && (first < 0 || fail[i].at < first)) {
            first = fail[i].at;
            st = fail[i].st;
            snprintf(msg, cap, "iteration %lld: in '%s': %s", (long long)first, body->name,
                     fail[i].msg);
        }
    tg_mem_free(body->ctx, fail, sizeof *fail * (size_t)cap_th);
    return st;
}

/* Compiles the inner graph of every live node of f->g that has one (a call's callee, the body
 * of a pmap, a scan or a map: attribute 0 of its op is a function),
 * each distinct one once, with the caller's options: a call the rewrites left dead
 * compiles nothing (in the C mode, no run of cc). A pmap body, and whatever a function
 * compiled with NO_PLACE runs, is compiled without placement. */
static tg_status callees_init(tg_fn *f, const tg_compile_opts *opts, int flags) {
    tg_graph *g = f->g;
    tg_ctx *ctx = g->ctx;
    if (g->callees.n == 0) return TG_OK;
    int norder = 0;
    tg_node **order = tg_ir_toposort(g, &norder);
    if (!order) return TG_ENOMEM;
    f->calls.base.run = callee_run;
    f->calls.base.run_ranks = ranks_run;
    f->calls.base.threads = each_threads;
    f->calls.base.run_each = each_run;
    f->calls.base.backend = callee_backend;
    f->calls.pool = opts->pool;
    f->calls.nthreads = opts->pool           ? tg_pool_size(opts->pool)
                        : opts->nthreads > 0 ? opts->nthreads
                                             : tg_pool_default_threads();
    pthread_mutex_init(&f->calls.mu, NULL);
    f->calls.cap = 2 * g->callees.n; /* the distinct graphs of g, live or not, both ways */
    f->calls.b = tg_mem_calloc(ctx, sizeof *f->calls.b * (size_t)f->calls.cap);
    tg_status st = f->calls.b ? TG_OK : TG_ENOMEM;
    for (int i = 0; i < norder && st == TG_OK; i++) {
        const tg_node *n = order[i];
        const tg_op_def *op = tg_op_table[n->op];
        if (op->nattrs == 0 || op->attrs[0].type != TG_AS_FUNC) continue; /* no inner graph */
        const tg_graph *body = n->attrs[0].fn;
        bool mapped = n->op == TG_OP_PMAP;
        if (body_fn(&f->calls, body, mapped)) continue;
        if (mapped && !f->calls.ranks && !(f->calls.ranks = tg_ranks_new(ctx))) st = TG_ENOMEM;
        tg_fn *cf = NULL;
        /* the callee is compiled, not changed: compiling takes a graph it never modifies
           (it rewrites a clone) */
        int cfl = NESTED | flags | (mapped ? NO_PLACE : 0);
        if (st == TG_OK) st = compile((tg_graph *)body, opts, cfl, &cf);
        if (st != TG_OK) break;
        f->calls.b[f->calls.n++] = (fn_body){.g = body, .mapped = mapped, .fn = cf};
    }
    tg_mem_free(ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return st;
}

static void callees_free(tg_fn *f) {
    tg_ctx *ctx = f->g->ctx;
    for (int i = 0; i < f->calls.n; i++) tg_fn_free(f->calls.b[i].fn);
    if (f->calls.b) tg_mem_free(ctx, f->calls.b, sizeof *f->calls.b * (size_t)f->calls.cap);
    tg_ranks_free(f->calls.ranks);
    if (f->calls.own_pool) tg_pool_free(f->calls.pool);
    if (f->calls.base.run_each) pthread_mutex_destroy(&f->calls.mu);
}

/* ---- state ---- */

static tg_status states_init(tg_fn *f) {
    tg_graph *g = f->g;
    int n = 0;
    for (int i = 0; i < g->inputs.n; i++) n += tg_var_is_state(g->inputs.items[i]);
    if (n == 0) return TG_OK;
    pthread_mutex_init(&f->mu, NULL);
    f->nstate = n;
    f->states = tg_mem_calloc(g->ctx, sizeof *f->states * (size_t)n);
    f->args = tg_mem_calloc(g->ctx, sizeof *f->args * (size_t)(g->inputs.n + 1));
    f->res = tg_mem_calloc(g->ctx, sizeof *f->res * (size_t)(g->outputs.n + 1));
    if (!f->states || !f->args || !f->res) return TG_ENOMEM;
    for (int i = 0, k = 0; i < g->inputs.n; i++)
        if (tg_var_is_state(g->inputs.items[i]))
            f->states[k++] = (fn_state){.var = g->inputs.items[i], .input = i, .update = -1};
    for (int j = 0; j < g->updates.n; j++)
        for (int k = 0; k < n; k++)
            if (f->states[k].var == g->updates.items[j]) f->states[k].update = g->nret + j;
    for (int k = 0; k < n; k++) { /* static shapes start as zeros */
        fn_state *s = &f->states[k];
        const tg_type *t = &s->var->type;
        if (!tg_type_known(t)) continue;
        s->cur = tg_tensor_new(g->ctx, (tg_dtype)t->dtype, t->ndim, t->shape);
        if (s->update >= 0) s->spare = tg_tensor_new(g->ctx, (tg_dtype)t->dtype, t->ndim, t->shape);
        if (!s->cur || (s->update >= 0 && !s->spare)) return TG_ENOMEM;
    }
    return TG_OK;
}

static void states_free(tg_fn *f) {
    tg_ctx *ctx = f->g->ctx;
    if (f->nstate > 0) pthread_mutex_destroy(&f->mu);
    for (int k = 0; f->states && k < f->nstate; k++) {
        tg_tensor_free(f->states[k].cur);
        tg_tensor_free(f->states[k].spare);
    }
    if (f->states) tg_mem_free(ctx, f->states, sizeof *f->states * (size_t)f->nstate);
    if (f->args) tg_mem_free(ctx, f->args, sizeof *f->args * (size_t)(f->g->inputs.n + 1));
    if (f->res) tg_mem_free(ctx, f->res, sizeof *f->res * (size_t)(f->g->outputs.n + 1));
}

/* The backends report a new value of the wrong run-time shape as a mismatch of "output K"
 * (an output after the returned ones, given as the spare buffer): say which state. */
static void update_error(const tg_fn *f, tg_status st) {
    const char *m = tg_last_error(), *res = strstr(m, "the result is ");
    int k = -1;
    if (sscanf(m, "output %d", &k) != 1 || k < f->g->nret || !res) return;
    for (int s = 0; s < f->nstate; s++) {
        if (f->states[s].update != k) continue;
        char ty[TG_TYPE_STR_MAX], got[TG_TYPE_STR_MAX];
        snprintf(got, sizeof got, "%s", res + strlen("the result is "));
        tg_tensor *c = f->states[s].cur;
        tg_type t = f->states[s].var->type;
        for (int d = 0; d < c->ndim; d++) t.shape[d] = c->shape[d];
        const tg_var *sv = f->states[s].var;
        char where[256] = "";
        if (sv->upd_line > 0)
            snprintf(where, sizeof where, "%s:%d:%d: update of ",
                     f->g->file ? f->g->file : "<input>", sv->upd_line, sv->upd_col);
        tg_set_error(st, "%sstate '%s': the new value is %s, the state is %s", where, sv->name, got,
                     tg_type_str(&t, ty, sizeof ty));
    }
}

/* A call of a function with state: the states' current tensors join the caller's inputs,
 * the spare buffers receive the new values, and success swaps them in. */
static tg_status call_with_state(tg_fn *f, tg_tensor *const *in, tg_tensor **out, int nout,
                                 bool into) {
    tg_graph *g = f->g;
    tg_status st = TG_OK;
    pthread_mutex_lock(&f->mu);
    for (int i = 0, k = 0, s = 0; i < g->inputs.n; i++) {
        if (s < f->nstate && f->states[s].input == i) {
            const fn_state *S = &f->states[s++];
            if (!S->cur) {
                char ty[TG_TYPE_STR_MAX];
                st = tg_set_error(TG_EINVAL,
                                  "state '%s' (%s) has no value: set it before the first call",
                                  S->var->name, tg_type_str(&S->var->type, ty, sizeof ty));
                break;
            }
            f->args[i] = S->cur;
        } else {
            f->args[i] = in[k++];
        }
    }
    if (st == TG_OK) {
        for (int i = 0; i < nout; i++) f->res[i] = into ? out[i] : NULL;
        for (int s = 0; s < f->nstate; s++)
            if (f->states[s].update >= 0) f->res[f->states[s].update] = f->states[s].spare;
        st = backend_call(f, f->args, g->inputs.n, f->res, g->outputs.n, true);
        for (int i = 0; i < nout; i++) out[i] = f->res[i];
        if (st != TG_OK) update_error(f, st);
    } else {
        for (int i = 0; i < nout; i++)
            if (!into) out[i] = NULL;
    }
    for (int s = 0; st == TG_OK && s < f->nstate; s++) {
        fn_state *S = &f->states[s];
        if (S->update < 0) continue;
        tg_tensor *t = S->cur;
        S->cur = S->spare;
        S->spare = t;
    }
    pthread_mutex_unlock(&f->mu);
    return st;
}

int tg_fn_state_count(const tg_fn *f) {
    if (!f) return tg_set_error(TG_EINVAL, "tg_fn_state_count: function is NULL"), -1;
    return f->nstate;
}

const char *tg_fn_state_name(const tg_fn *f, int i) {
    if (!f || i < 0 || i >= f->nstate) {
        tg_set_error(f ? TG_EINDEX : TG_EINVAL, "tg_fn_state_name: %s",
                     f ? "no such state" : "function is NULL");
        return NULL;
    }
    return f->states[i].var->name;
}

int tg_fn_state_find(const tg_fn *f, const char *name) {
    if (!f || !name)
        return tg_set_error(TG_EINVAL, "tg_fn_state_find: %s is NULL", f ? "name" : "function"), -1;
    for (int i = 0; i < f->nstate; i++)
        if (strcmp(f->states[i].var->name, name) == 0) return i;
    return -1;
}

tg_tensor *tg_fn_state(tg_fn *f, int i) {
    if (!f || i < 0 || i >= f->nstate) {
        if (!f)
            tg_set_error(TG_EINVAL, "tg_fn_state: function is NULL");
        else
            tg_set_error(TG_EINDEX, "tg_fn_state: state %d: the function has %d states", i,
                         f->nstate);
        return NULL;
    }
    return f->states[i].cur;
}

tg_status tg_fn_state_set(tg_fn *f, int i, const tg_tensor *t) {
    if (!f || !t)
        return tg_set_error(TG_EINVAL, "tg_fn_state_set: %s is NULL", f ? "tensor" : "function");
    if (i < 0 || i >= f->nstate)
        return tg_set_error(TG_EINDEX, "state %d: the function has %d states", i, f->nstate);
    fn_state *s = &f->states[i];
    bool ok = t->dtype == s->var->type.dtype && t->ndim == s->var->type.ndim;
    for (int d = 0; ok && d < t->ndim; d++)
        ok = s->var->type.shape[d] < 0 || s->var->type.shape[d] == t->shape[d];
    if (!ok) {
        char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
        tg_type rt;
        tg_interp_runtime_type(&s->var->type, t, &rt);
        return tg_set_error(t->dtype != s->var->type.dtype ? TG_ETYPE : TG_ESHAPE,
                            "state '%s': expected %s, got %s", s->var->name,
                            tg_type_str(&s->var->type, a, sizeof a), tg_type_str(&rt, b, sizeof b));
    }
    tg_ctx *ctx = f->g->ctx;
    pthread_mutex_lock(&f->mu);
    bool same = s->cur != NULL;
    for (int d = 0; same && d < t->ndim; d++) same = s->cur->shape[d] == t->shape[d];
    if (!same) { /* a new shape for the '?' extents: new buffers */
        tg_tensor *c = tg_tensor_new(ctx, t->dtype, t->ndim, t->shape);
        tg_tensor *sp = s->update >= 0 ? tg_tensor_new(ctx, t->dtype, t->ndim, t->shape) : NULL;
        if (!c || (s->update >= 0 && !sp)) {
            tg_tensor_free(c);
            tg_tensor_free(sp);
            pthread_mutex_unlock(&f->mu);
            return tg_set_error(TG_ENOMEM, "state '%s': out of memory", s->var->name);
        }
        tg_tensor_free(s->cur);
        tg_tensor_free(s->spare);
        s->cur = c;
        s->spare = sp;
    }
    tg_tensor_copy_into(s->cur, t);
    pthread_mutex_unlock(&f->mu);
    return TG_OK;
}

/* ---- calls ---- */

static tg_status fn_call(tg_fn *f, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                         bool into) {
    const char *fn = into ? "tg_fn_call_into" : "tg_fn_call";
    if (!f) return tg_set_error(TG_EINVAL, "%s: function is NULL", fn);
    if (nin < 0 || nout < 0)
        return tg_set_error(TG_EINVAL, "%s: negative %s count", fn, nin < 0 ? "input" : "output");
    tg_graph *g = f->g;
    int nuser = g->inputs.n - f->nstate;
    if (nin != nuser)
        return tg_set_error(TG_EINVAL, "function '%s' takes %d inputs%s, got %d", g->name, nuser,
                            f->nstate ? " (besides its state)" : "", nin);
    if (nout != g->nret)
        return tg_set_error(TG_EINVAL, "function '%s' returns %d outputs, room for %d", g->name,
                            g->nret, nout);
    if (nout > 0 && !out) return tg_set_error(TG_EINVAL, "%s: output array is NULL", fn);
    for (int i = 0, k = 0; i < g->inputs.n; i++) {
        tg_var *v = g->inputs.items[i];
        if (v->state) continue;
        tg_status st = check_input(v, in ? in[k] : NULL, k);
        if (st != TG_OK) return st;
        k++;
    }
    if (f->nstate > 0) return call_with_state(f, in, out, nout, into);
    return backend_call(f, in, nin, out, nout, into);
}

tg_status tg_fn_call(tg_fn *f, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
    return fn_call(f, in, nin, out, nout, false);
}

tg_status tg_fn_call_into(tg_fn *f, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
    return fn_call(f, in, nin, out, nout, true);
}

void tg_fn_profile_reset(tg_fn *f) {
    if (f && f->be == &be_vm) tg_vm_profile_reset(f->run);
    if (f && f->be == &be_sched) tg_sched_profile_reset(f->run);
}

tg_status tg_fn_profile_print(tg_fn *f, FILE *out) {
    if (!f || !out)
        return tg_set_error(TG_EINVAL, "tg_fn_profile_print: %s is NULL", f ? "file" : "function");
    if (f->be == &be_sched) return tg_sched_profile_print(f->run, out);
    if (f->be != &be_vm)
        return tg_set_error(TG_EINVAL, "profile: only TG_MODE_VM functions keep one");
    return tg_vm_profile_print(f->run, out);
}
