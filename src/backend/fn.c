/* fn.c - compiled functions (tg_fn): the layer between the public API and the backends.
 *
 * tg_graph_compile verifies the user's graph, rewrites a clone of it with the pipeline of
 * src/rewrite (every mode but TG_MODE_REFERENCE, which runs the graph as written), and
 * hands the result to one backend: the reference interpreter (src/backend/interp) or the
 * VM (src/backend/vm). A call checks the arguments against the graph's declared inputs and
 * outputs here, once for every backend, then forwards.
 *
 * Invariants: compiling never modifies the user's graph; a function keeps the graph it
 * runs (the user's, borrowed, or its own rewritten clone) alive as long as it lives.
 */
#include "interp/interp.h"
#include "../rewrite/rewrite.h"
#include "vm/vm.h"

struct tg_fn {
    tg_graph *g;        /* the graph run: the user's (borrowed), or `owned` */
    tg_graph *owned;    /* a rewritten clone, freed with the function */
    tg_mode mode;       /* the mode compiled for */
    tg_interp *interp;  /* TG_MODE_REFERENCE: the interpreter of `g` */
    tg_vm *vm;          /* TG_MODE_VM: the executor of `g` */
};

static const char *mode_name(tg_mode m) {
    static const char *const names[] = {[TG_MODE_REFERENCE] = "reference", [TG_MODE_VM] = "vm",
                                        [TG_MODE_C] = "c", [TG_MODE_DEBUG] = "debug"};
    return (unsigned)m < TG_COUNTOF(names) && names[m] ? names[m] : "?";
}

tg_status tg_graph_compile(tg_graph *g, const tg_compile_opts *opts, tg_fn **out) {
    if (!g || !out) return tg_set_error(TG_EINVAL, "compile: graph or result pointer is NULL");
    *out = NULL;
    if (g->status != TG_OK) return tg_set_error(g->status, "%s", g->error);
    tg_mode mode = opts ? opts->mode : TG_MODE_VM;
    if (mode != TG_MODE_REFERENCE && mode != TG_MODE_VM)
        return tg_set_error(TG_EUNSUPPORTED, "mode '%s' is not available in this build",
                            mode_name(mode));
    if (g->outputs.n == 0)
        return tg_set_error(TG_EINVAL, "function '%s' has no outputs", g->name);
    tg_status st = tg_graph_verify(g);
    if (st != TG_OK) return st;
    tg_graph *run = g, *owned = NULL;
    if (mode != TG_MODE_REFERENCE && !(opts && opts->no_rewrite)) {
        /* the pipeline works on a clone: the user's graph is never modified */
        owned = tg_graph_clone(g);
        if (!owned) return tg_rw_error_status();
        tg_rw_opts ro = {.verify = opts && opts->verify, .no_blas = opts && opts->no_blas};
        st = tg_rw_pipeline(&owned, &ro, NULL);
        if (st != TG_OK) {
            tg_graph_free(owned);
            return st;
        }
        run = owned;
    }
    tg_fn *f = tg_mem_calloc(g->ctx, sizeof *f);
    if (!f) {
        tg_graph_free(owned);
        return TG_ENOMEM;
    }
    f->g = run;
    f->owned = owned;
    f->mode = mode;
    if (mode == TG_MODE_REFERENCE)
        st = tg_interp_new(run, &f->interp);
    else
        st = tg_vm_new(run, opts, &f->vm);
    if (st != TG_OK) {
        tg_fn_free(f);
        return st;
    }
    *out = f;
    return TG_OK;
}

void tg_fn_free(tg_fn *f) {
    if (!f) return;
    tg_ctx *ctx = f->g->ctx;
    tg_vm_free(f->vm);
    tg_interp_free(f->interp);
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

static tg_status fn_call(tg_fn *f, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                         bool into) {
    if (!f) return tg_set_error(TG_EINVAL, "call: function is NULL");
    tg_graph *g = f->g;
    if (nin != g->inputs.n)
        return tg_set_error(TG_EINVAL, "function '%s' takes %d inputs, got %d", g->name,
                            g->inputs.n, nin);
    if (nout != g->outputs.n)
        return tg_set_error(TG_EINVAL, "function '%s' returns %d outputs, room for %d", g->name,
                            g->outputs.n, nout);
    if (nout > 0 && !out) return tg_set_error(TG_EINVAL, "call: output array is NULL");
    for (int i = 0; i < nin; i++) {
        tg_status st = check_input(g->inputs.items[i], in ? in[i] : NULL, i);
        if (st != TG_OK) return st;
    }
    if (f->vm) return tg_vm_call(f->vm, in, nin, out, nout, into);
    return tg_interp_call(f->interp, in, nin, out, nout, into);
}

tg_status tg_fn_call(tg_fn *f, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
    return fn_call(f, in, nin, out, nout, false);
}

tg_status tg_fn_call_into(tg_fn *f, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
    return fn_call(f, in, nin, out, nout, true);
}

void tg_fn_profile_reset(tg_fn *f) {
    if (f && f->vm) tg_vm_profile_reset(f->vm);
}

tg_status tg_fn_profile_print(tg_fn *f, FILE *out) {
    if (!f || !out) return tg_set_error(TG_EINVAL, "profile: function or file is NULL");
    if (!f->vm) return tg_set_error(TG_EINVAL, "profile: only TG_MODE_VM functions keep one");
    return tg_vm_profile_print(f->vm, out);
}
