/* rewrite.h - private header of src/rewrite: the rewrite engine (rules indexed by root op,
 * a worklist run to a fixed point), passes, and the pipeline.
 *
 * Invariants:
 *  - A rule never changes a type: its replacement has exactly the type of the value it
 *    replaces (dtype and static shape); the engine checks and refuses otherwise.
 *  - Rules build new nodes with the ordinary builders; they never edit nodes in place.
 *  - Every pass leaves a graph that tg_graph_verify accepts (checked after each pass in
 *    checked builds and whenever opts->verify is set).
 *  - The pipeline is one list in pipeline.c, in the order of DESIGN.md.
 */
#ifndef TG_REWRITE_H
#define TG_REWRITE_H

#include "../ops/ops.h"

#include <stdio.h>

typedef struct tg_rw tg_rw; /* a running application of rules to one graph */

/* A rule looks at node n (whose op is the rule's root op) and returns a value to replace
 * n->out[0] with (same type), or NULL to leave it. Rules for multi-output nodes may
 * instead call tg_rw_replace themselves for each output and return NULL. */
typedef tg_var *(*tg_rule_fn)(tg_rw *rw, tg_node *n);

typedef struct tg_rule {
    const char *name; /* shown in --stats and golden tests */
    int op;           /* root op (tg_op), or -1 for every op */
    tg_rule_fn fn;    /* the rewrite */
} tg_rule;

/* Per-rule statistics. */
typedef struct tg_rule_stats {
    const char *name;   /* rule */
    const char *pass;   /* pass it belongs to */
    long tried;         /* calls of fn */
    long applied;       /* replacements made */
    double seconds;     /* time inside fn */
} tg_rule_stats;

typedef struct tg_rw_opts {
    bool verify;              /* verify the IR after every pass */
    bool no_blas;             /* keep dot + elementwise (--no-blas) */
    const char *print_after;  /* print the graph after this pass ("all": every pass) */
    FILE *print_to;           /* where (default stdout) */
    bool stats;               /* collect per-rule and per-pass statistics */
} tg_rw_opts;

/* Statistics of one pipeline run (owned by the caller; tg_rw_report_free). */
typedef struct tg_rw_report {
    tg_rule_stats *rules;  /* one per rule that was tried */
    int nrules, caprules;
    struct { const char *name; double seconds; int nodes_before, nodes_after; } passes[16];
    int npasses;
} tg_rw_report;
void tg_rw_report_free(tg_ctx *ctx, tg_rw_report *r);
void tg_rw_report_print(const tg_rw_report *r, FILE *f);

/* ---- the engine (engine.c) ---- */
/* Applies rules to g until none applies (fixed point). Each node reachable from the
 * outputs is visited; after a replacement the users of the new value and the new nodes are
 * visited again. A rule applying more than a bounded number of times (cycle guard) is an
 * error naming it. */
tg_status tg_rw_apply(tg_graph *g, const char *pass, const tg_rule *rules, int nrules,
                      tg_rw_report *report);
tg_graph *tg_rw_graph(tg_rw *rw);
/* Replaces every use of old by new inside a rule (types must be equal). */
tg_status tg_rw_replace(tg_rw *rw, tg_var *old, tg_var *new);
/* Number of uses of v (node inputs and graph outputs) in the current graph. */
int tg_rw_use_count(tg_rw *rw, const tg_var *v);

/* ---- helpers for rules ---- */
/* True when v is a constant whose every element equals x (any dtype). */
bool tg_rw_is_const(const tg_var *v, double x);
/* True when v is a constant (scalar or tensor). */
bool tg_rw_is_constant(const tg_var *v);

/* ---- passes (one file each) and the pipeline (pipeline.c) ---- */
typedef struct tg_pass {
    const char *name;
    tg_status (*run)(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
} tg_pass;

tg_status tg_canonicalize(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
tg_status tg_stabilize(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
tg_status tg_specialize(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);

/* Runs the whole pipeline on g in place (then compacts it). */
tg_status tg_rw_pipeline(tg_graph **g, const tg_rw_opts *opts, tg_rw_report *report);
/* Names of the passes in order, for --print-after validation. */
const char *const *tg_rw_pass_names(int *n);

#endif
