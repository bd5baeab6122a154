/* cjit.h - private header of src/backend/cjit: the C JIT backend.
 *
 *   emit.c    the per-op emitter registry and the whole-graph C source (deterministic)
 *   cache.c   the compiler driver (system cc) and the per-user on-disk cache of .so files
 *   cjit.c    the backend object: the runtime call-backs of tg_rt.h, calls (over the
 *             memory plan of src/backend/plan.c, shared with the VM, each call on a
 *             replica of its own, so calls from several threads run at the same time)
 *   debug.c   debug mode: every node checked against its reference kernel
 *
 * tg_graph_compile (src/driver/compile.c) hands TG_MODE_C graphs, already rewritten, to
 * tg_cj_new, which emits the graph's C source, finds its .so in the cache or compiles it,
 * and loads it. When no compiler can build it (missing, failing, no usable cache
 * directory) tg_cj_new returns TG_ECHECK with a message naming the kept source; compile.c
 * then warns once and runs the graph with the VM.
 */
#ifndef TG_CJIT_H
#define TG_CJIT_H

#include "../../ops/ops.h"
#include "../vm/vm.h"
#include "tg_rt.h"

#include <stdio.h>

/* ---- a growing string (emit.c) ---- */
typedef struct tg_cj_str {
    tg_ctx *ctx;
    char *p;    /* NUL-terminated text */
    size_t n;   /* its length */
    size_t cap; /* allocated bytes */
    bool oom;   /* an allocation failed: the text is incomplete */
} tg_cj_str;
void tg_cj_str_printf(tg_cj_str *s, const char *fmt, ...) TG_PRINTF(2, 3);
void tg_cj_str_free(tg_cj_str *s);

/* ---- emission (emit.c) ---- */
/* How instruction i of a graph runs: generated code, or a call-back into the library. */
enum {
    TG_CJ_KERNEL = TG_RT_KERNEL, /* rt->kernel(rt, i): the library's kernel */
    TG_CJ_EW = TG_RT_EW,         /* rt->ew(rt, i, loop, cost): a generated elementwise loop */
    TG_CJ_CALL = TG_RT_CALL,     /* a generated function of the node, called directly */
    TG_CJ_RED = TG_RT_RED,       /* rt->red(rt, i, loop, cost, axes): a generated reduction loop */
};

/* Appends to s the C code of graph g, whose instructions are order[0..norder) (a
 * topological order), as `int tg_cj_<k>(tg_rt *rt)`: the distinct generated functions
 * (instructions whose code is the same text share the first one's), then the table of
 * steps that tg_rt_run walks. how[i] receives how instruction i runs (TG_CJ_EW,
 * TG_CJ_CALL or TG_CJ_RED: generated code; TG_CJ_KERNEL: the library's kernel). */
tg_status tg_cj_emit_graph(tg_cj_str *s, const tg_graph *g, tg_node *const *order, int norder,
                           int k, uint8_t *how);
/* The prelude of every generated unit: tg_rt.h's text and the ABI check symbol. */
void tg_cj_emit_prelude(tg_cj_str *s);

/* The most translation units one source is split into. */
#define TG_CJ_MAX_UNITS 64
/* Emits graph g (instructions order[0..norder), as graph 0) as units[0..*nunits), strings of
 * ctx to free with tg_cj_str_free. When it has at most per_unit distinct functions (or
 * per_unit <= 0): one unit, tg_cj_emit_prelude's and tg_cj_emit_graph's text. Otherwise
 * unit 0 holds the declarations of the functions, the table of steps, the graph's
 * function and tg_cj_abi, and units 1..m hold the functions in order, m = ceil(functions /
 * per_unit) (at most TG_CJ_MAX_UNITS - 1), cut into shares of about equal bytes; each unit
 * starts with TG_RT_SPLIT and tg_rt.h's text (the functions are hidden, not static). */
tg_status tg_cj_emit_units(tg_ctx *ctx, const tg_graph *g, tg_node *const *order, int norder,
                           uint8_t *how, int per_unit, tg_cj_str *units, int *nunits);

/* ---- the compiler driver and the cache (cache.c) ---- */
typedef struct tg_cj_lib {
    void *handle;      /* dlopen handle */
    char path[4096];   /* the loaded .so */
    char source[4096]; /* the .c kept beside it */
    bool compiled;     /* this call ran the compiler (a cache miss) */
} tg_cj_lib;
/* Finds the .so of `src` in the cache or compiles it there, and loads it. On failure
 * returns TG_ECHECK (no compiler, compiler failed, unusable cache directory) with a
 * message naming the kept source where there is one, or another code. */
tg_status tg_cj_build(tg_ctx *ctx, const char *src, size_t len, tg_cj_lib *out);
/* The same for a source in several units (tg_cj_emit_units), n in 1..TG_CJ_MAX_UNITS: the
 * key covers every unit; more than one are compiled concurrently (`cc -c`, as many at once
 * as there are online CPUs) and linked into the one .so. */
typedef struct tg_cj_unit {
    const char *p;
    size_t n;
} tg_cj_unit;
tg_status tg_cj_build_units(tg_ctx *ctx, const tg_cj_unit *units, int n, tg_cj_lib *out);
void tg_cj_lib_close(tg_cj_lib *lib);
/* The cache directory ($XDG_CACHE_HOME/tgraph or ~/.cache/tgraph; TGRAPH_CACHE_DIR
 * overrides both), created 0700 when `create`, and checked: owned by this user, not
 * writable by group or others. */
tg_status tg_cj_cache_dir(char *buf, size_t n, bool create);

/* ---- the backend (cjit.c) ---- */
typedef struct tg_cj tg_cj;
/* Called after every instruction (debug mode), on the thread that called; non-OK stops the
 * call with that status. val holds every live value by variable id. */
typedef tg_status (*tg_cj_after_fn)(void *ud, const tg_node *n, tg_tensor *const *val);
tg_status tg_cj_new(tg_graph *g, const tg_compile_opts *opts, tg_cj **out);
/* The executor that runs the bodies of g's `call` nodes (borrowed; it outlives cj). */
void tg_cj_set_sub(tg_cj *cj, const tg_subexec *sub);
void tg_cj_free(tg_cj *cj); /* NULL is a no-op */
tg_status tg_cj_call(tg_cj *cj, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                     bool into);
void tg_cj_set_after(tg_cj *cj, tg_cj_after_fn fn, void *ud);
/* tg_cj_call whose after-function gets `ud` instead of the one set: the state of this call,
 * so that checked calls run at the same time, each with its own. */
tg_status tg_cj_call_after(tg_cj *cj, void *ud, tg_tensor *const *in, int nin, tg_tensor **out,
                           int nout, bool into);
/* Instructions with generated code / with a call-back (tests, diagnostics). */
void tg_cj_counts(const tg_cj *cj, int *emitted, int *kernels);
/* What the cached plans hold (tests, diagnostics): the most recently used plan. */
typedef struct tg_cj_stats {
    int nplans;    /* plans cached (src/backend/plan.c) */
    int nreplicas; /* replicas made so far: the most calls that ran at once */
    int nplanned;  /* values of the most recent plan living in its blocks */
    bool dynamic;  /* that plan is dynamic: its signature runs on the VM */
    bool vm;       /* some signature has run on the VM */
} tg_cj_stats;
void tg_cj_get_stats(tg_cj *cj, tg_cj_stats *s);

#endif
