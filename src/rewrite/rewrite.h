/* rewrite.h - private header of src/rewrite: the rewrite engine (rules indexed by root op,
 * a worklist run to a fixed point), the passes, and the pipeline. docs/rewrites.md is the
 * guide (every rule with an example, how to write a rule and its golden test).
 *
 * Invariants:
 *  - A rule never changes a type: its replacement has exactly the type of the value it
 *    replaces (dtype, static shape and weakness); the engine checks and refuses otherwise
 *    (an error naming the rule: a rule that wants a different type must return NULL).
 *  - Rules build new nodes with the ordinary builders (tg_apply, tg_ir_node_make_norm, ...);
 *    they never edit nodes in place. A builder error inside a rule is a bug in that rule:
 *    the engine stops with an error naming it, so rules check types before building.
 *  - A rule returns a value built from the inputs of its node (or any value that does not
 *    depend on the node): the engine checks the nodes the rule just built for a cycle.
 *  - A use is only redirected when the user infers exactly the same types afterwards
 *    (replacing a value by a constant can make an op's inference more precise: reshape,
 *    alloc and arange read constant inputs); such uses keep the old value.
 *  - Every pass leaves a graph that tg_graph_verify accepts (checked after each pass in
 *    checked builds, i.e. without NDEBUG, and whenever opts->verify is set).
 *  - The pipeline is one list in pipeline.c, in the order of DESIGN.md.
 *
 * What later passes may rely on after canonicalize (canonicalize.c has the details):
 *  - a constant operand of add, mul, eq, ne, and, or, xor is the right one: add(x, 1),
 *    never add(1, x) (so `tgraph opt` prints add(x, 2) for add(2, x));
 *  - neg(x), never mul(x, -1); neg(mul(x, c)) is mul(x, -c); add(x, neg(y)) is sub(x, y);
 *  - equal constants are one variable, equal nodes one node; nodes whose inputs are all
 *    constants are folded (except generators such as zeros and arange, and big results);
 *  - shape(x), size(x) and shape(x)[i] of static extents are constants.
 */
#ifndef TG_REWRITE_H
#define TG_REWRITE_H

#include "../ops/ops.h"

#include <stdio.h>

typedef struct tg_rw tg_rw; /* a running application of rules to one graph */

/* A rule looks at node n (whose op is the rule's root op) and returns a value to replace
 * n->out[0] with (same type), or NULL to leave it. Rules for multi-output nodes may
 * instead call tg_rw_replace themselves for each output and return NULL. Nodes the rule
 * built and then did not use are removed by the engine. */
typedef tg_var *(*tg_rule_fn)(tg_rw *rw, tg_node *n);

typedef struct tg_rule {
    const char *name; /* shown in --stats and golden tests; rows may share a name */
    int op;           /* root op (tg_op), or -1 for every op */
    tg_rule_fn fn;    /* the rewrite */
} tg_rule;

/* Per-rule statistics (rows of one pass with the same name are added up). */
typedef struct tg_rule_stats {
    const char *name; /* rule */
    const char *pass; /* pass it belongs to */
    long tried;       /* calls of fn */
    long applied;     /* calls that replaced at least one use */
    double seconds;   /* time inside fn */
} tg_rule_stats;

typedef struct tg_rw_opts {
    bool verify;             /* verify the IR after every pass */
    bool no_blas;            /* keep dot + elementwise (--no-blas) */
    bool no_inline;          /* keep calls (--no-inline): backends run them as sub-graphs */
    const char *print_after; /* print the graph after this pass ("all": every pass) */
    FILE *print_to;          /* where (default stdout) */
    /* the printer print_after uses: the .tg printer, which lives in the text front end,
     * a layer above this one, so the caller hands it down (NULL: print_after is ignored) */
    tg_status (*print)(const tg_graph *g, FILE *f);
    bool stats; /* collect per-rule and per-pass statistics */
    /* tg_rw_optimize only: place the rewritten graph (tg_place, after the pipeline) */
    bool place;
    tg_placement placement; /* how (tgraph.h) */
} tg_rw_opts;

#define TG_RW_MAX_PASSES 16

/* Per-pass statistics. */
typedef struct tg_pass_stats {
    const char *name;              /* pass */
    double seconds;                /* its time: engine, rules and verification */
    int nodes_before, nodes_after; /* live nodes */
    long visits;                   /* nodes taken from the worklist */
    long applied;                  /* rewrites made */
    long work; /* steps of the pass's own loops (engine: worklist visits, rule calls, use
                  entries and hash-table slots walked, nodes killed or revived; fuse: nodes,
                  uses, readers and node visits of the sibling searches): a count that grows
                  linearly with the graph whatever the rewrites, unlike the times */
} tg_pass_stats;

/* Statistics of one pipeline run (owned by the caller; tg_rw_report_free). */
typedef struct tg_rw_report {
    tg_rule_stats *rules; /* one per rule that was tried */
    int nrules, caprules;
    tg_pass_stats passes[TG_RW_MAX_PASSES];
    int npasses;
    double copy_seconds;     /* tg_graph_optimize: the clone of the user's graph */
    double compact_seconds;  /* dead-code removal (tg_graph_clone) at the end */
    bool placed;             /* placement ran after the pipeline (tg_rw_optimize) */
    tg_pass_stats place;     /* its figures: applied counts transfers inserted and removed */
    double total_seconds;    /* the whole pipeline, with the copy */
    int nodes_in, nodes_out; /* live nodes before and after the pipeline */
} tg_rw_report;
void tg_rw_report_free(tg_ctx *ctx, tg_rw_report *r);
void tg_rw_report_print(const tg_rw_report *r, const char *func, FILE *f);

/* ---- the engine (engine.c) ---- */
/* Applies rules to g until none applies (fixed point). Each node reachable from the
 * outputs is visited, inputs before users; after a replacement the users of the new value
 * and the new nodes are visited again. A pass making more than a bounded number of
 * rewrites (16 per live node, plus 1000) is an error naming the rule applied most: rules
 * that undo each other. report may be NULL (then nothing is timed). */
tg_status tg_rw_apply(tg_graph *g, const char *pass, const tg_rule *rules, int nrules,
                      tg_rw_report *report);
tg_graph *tg_rw_graph(tg_rw *rw);
/* TG_ENOMEM when tg_last_error() reports an allocation failure, else TG_EINTERNAL: the
 * status to return after a helper that only sets the message (clone, toposort) failed. */
tg_status tg_rw_error_status(void);
/* Replaces every use of old (node inputs and graph outputs) by `by`, inside a rule. Types
 * must be equal (tg_rw_same_type). Returns TG_OK also when some uses had to keep old (see
 * the invariants above). */
tg_status tg_rw_replace(tg_rw *rw, tg_var *old, tg_var *by);
/* Number of uses of v (inputs of live nodes and graph outputs) in the current graph. */
int tg_rw_use_count(tg_rw *rw, const tg_var *v);
/* True when v is an output of the graph. */
bool tg_rw_is_output(tg_rw *rw, const tg_var *v);
/* A live node equal to n (same op, same inputs, same attributes, same output count, same
 * device), or NULL after remembering n (common-subexpression elimination). */
tg_node *tg_rw_find_equal(tg_rw *rw, tg_node *n);
/* The first constant seen with c's dtype, shape, weakness, literal kind and bytes (c itself
 * when it is the first). */
tg_var *tg_rw_find_equal_const(tg_rw *rw, tg_var *c);

/* ---- helpers for rules (engine.c) ---- */
/* True when v is a constant whose every element equals x (any dtype; -0.0 == 0.0). */
bool tg_rw_is_const(const tg_var *v, double x);
/* True when v is a constant (scalar or tensor). */
bool tg_rw_is_constant(const tg_var *v);
/* True when v is a constant whose elements all equal one value, stored in *x. */
bool tg_rw_const_value(const tg_var *v, double *x);
/* True when every element of the constant v is a zero with the given sign bit (floats), or
 * zero (integers and bool, whatever `negative` says). */
bool tg_rw_is_signed_zero(const tg_var *v, bool negative);
/* True when computing v cannot fail at run time: v is an input or a constant, or every
 * node it comes from has outputs within the size limit and is an elementwise op without
 * checks of its own whose inputs surely broadcast (no '?' extent beside another extent
 * than 1), a transpose or expand_dims, sum/mean/prod (max/min over static non-zero
 * extents), a dot or matmul of matrices and vectors with static equal contracted extents,
 * or a view between static types (broadcast_to, squeeze, reshape). A rule that drops v
 * and keeps only its static type (shape(v) -> constant, i * 0 -> zeros) needs it: a
 * value whose '?' extents do not fit must still fail as the unrewritten graph does.
 * Running out of memory does not count (the rewritten graph may need less). Conservative:
 * false past 64 distinct nodes. */
bool tg_rw_cannot_fail(const tg_var *v);
/* Equal attribute values (as the merging of equal nodes compares them). */
bool tg_rw_aval_same(const tg_aval *a, const tg_aval *b);
/* Equal types including weakness: what a replacement needs. */
bool tg_rw_same_type(const tg_var *a, const tg_var *b);
/* A new constant of the static type t (every extent known) with every element = x. Weak
 * types must be 0-d and become literals. NULL (graph error set) on failure. */
tg_var *tg_rw_const_fill(tg_rw *rw, const tg_type *t, double x);

/* ---- passes (one file each) and the pipeline (pipeline.c) ---- */
typedef struct tg_pass {
    const char *name;
    tg_status (*run)(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
} tg_pass;

tg_status tg_inline(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
/* bucket.c: the psums and pmeans of one axis and dtype merged into buckets of
 * TGRAPH_BUCKET_BYTES */
tg_status tg_bucket(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
/* TGRAPH_BUCKET_BYTES (default 25 MiB, 0: off); TG_EINVAL with a message when malformed */
tg_status tg_bucket_bytes(size_t *out);
tg_status tg_canonicalize(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
tg_status tg_stabilize(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
tg_status tg_specialize(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
tg_status tg_blas(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
tg_status tg_fuse(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);
tg_status tg_inplace(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report);

/* Runs the pipeline on a copy of g (g is never changed): *out receives the rewritten
 * graph. An unknown print_after pass is an error naming the passes; stats_to, when set,
 * receives the compile-time report. */
tg_status tg_rw_optimize(const tg_graph *g, const tg_rw_opts *opts, FILE *stats_to, tg_graph **out);
/* Runs the whole pipeline on *g, which it owns: after a pass that changed the graph, *g is
 * replaced by a compacted clone (dead nodes dropped) and the old graph freed. On error *g
 * is still a valid graph to free. report may be NULL. */
tg_status tg_rw_pipeline(tg_graph **g, const tg_rw_opts *opts, tg_rw_report *report);
/* Names of the passes in order, for --print-after validation. */
const char *const *tg_rw_pass_names(int *n);

/* ---- placement (place.c; docs/devices.md "Placement") ----
 * Not a pass of the pipeline: it runs after it, on the rewritten graph, and is the only
 * maker of transfers, so no rewrite ever sees one it made. */
typedef struct tg_place_stats {
    double seconds; /* the pass, checks included */
    int transfers;  /* transfers inserted */
    int removed;    /* transfers of the graph dropped (cancelled, or equal to another) */
} tg_place_stats;

typedef struct tg_place_opts {
    tg_placement placement; /* DEFAULT (as AUTO), AUTO or MANUAL (tgraph.h) */
    tg_place_stats *stats;  /* when set, receives the figures */
} tg_place_opts;

/* Places *g on the devices of the registry (tg_device_list): every node gets a device and
 * every read across devices a transfer (place.c states the contract). *g may be replaced by
 * a compacted clone (the old one freed) when transfers of the graph died; on error *g is
 * still a valid graph to free. opts may be NULL (DEFAULT). */
tg_status tg_place(tg_graph **g, const tg_place_opts *opts);
/* TG_OK when g keeps placement's contract (place.c), else TG_EINTERNAL naming the first
 * node or output that breaks it. */
tg_status tg_place_check(const tg_graph *g);

#endif
