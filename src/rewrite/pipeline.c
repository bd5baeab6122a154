/* pipeline.c - the optimiser: one list of passes, read top to bottom, in the order of
 * DESIGN.md; tg_rw_optimize (behind the public tg_graph_optimize, src/text/optimize.c,
 * which hands down the .tg printer), with placement (place.c) after the pipeline when asked,
 * and tg_pass_name.
 *
 * Invariants:
 *  - Each pass runs once, in list order; after it the IR is verified (checked builds, i.e.
 *    without NDEBUG, or opts->verify) and printed when --print-after asks. Dead nodes
 *    left by a pass are harmless to the next (passes start from the live nodes, and a dead
 *    node still verifies), so the graph is compacted once, at the end.
 *  - The graph handed back is always compact (tg_graph_clone drops dead nodes).
 *  - The user's graph is never touched: tg_graph_optimize works on a clone.
 */
#include "rewrite.h"

#include <stdio.h>
#include <time.h>

static const tg_pass pipeline[] = {
    {"inline", tg_inline},             /* calls replaced by their callees' bodies */
    {"canonicalize", tg_canonicalize}, /* merge, fold, identities, shapes, canonical forms */
    {"stabilize", tg_stabilize},       /* numerically stable forms */
    {"specialize", tg_specialize},     /* cheaper special cases */
    {"blas", tg_blas},                 /* dot + elementwise -> gemm / gemv / ger */
    {"fuse", tg_fuse},                 /* elementwise fusion */
    {"bucket", tg_bucket},             /* psums, pmeans merged into buckets: start / wait */
    {"inplace", tg_inplace},           /* destroy dead buffers */
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *const *tg_rw_pass_names(int *n) {
    static const char *const names[TG_COUNTOF(pipeline)] = {
        "inline", "canonicalize", "stabilize", "specialize", "blas", "fuse", "bucket", "inplace",
    };
    *n = (int)TG_COUNTOF(pipeline);
    return names;
}

const char *tg_pass_name(int i) {
    return i >= 0 && i < (int)TG_COUNTOF(pipeline) ? pipeline[i].name : NULL;
}

/* Nodes reachable from the outputs. */
static int live_nodes(const tg_graph *g) {
    int n = 0;
    tg_node **order = tg_ir_toposort(g, &n);
    if (!order) return -1;
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return n;
}

/* Replaces *g by a clone without dead nodes. */
static tg_status compact(tg_graph **g, tg_rw_report *report) {
    double t0 = now();
    tg_graph *c = tg_graph_clone(*g);
    if (!c) {
        const char *m = tg_last_error();
        return tg_set_error(tg_rw_error_status(), "rewrite: cannot compact the graph: %s",
                            m && *m ? m : "out of memory");
    }
    tg_graph_free(*g);
    *g = c;
    if (report) report->compact_seconds += now() - t0;
    return TG_OK;
}

static bool checked(const tg_rw_opts *opts) {
#ifndef NDEBUG
    (void)opts;
    return true;
#else
    return opts && opts->verify;
#endif
}

tg_status tg_rw_pipeline(tg_graph **gp, const tg_rw_opts *opts, tg_rw_report *report) {
    static const tg_rw_opts none = {0};
    if (!opts) opts = &none;
    if (!gp || !*gp) return tg_set_error(TG_EINVAL, "rewrite: graph is NULL");
    if ((*gp)->status != TG_OK) return tg_set_error((*gp)->status, "%s", (*gp)->error);
    double t_all = now();
    tg_status st = TG_OK;
    if (report) report->nodes_in = live_nodes(*gp);
    FILE *pf = opts->print_to ? opts->print_to : stdout;
    for (size_t i = 0; i < TG_COUNTOF(pipeline) && st == TG_OK; i++) {
        const tg_pass *p = &pipeline[i];
        tg_graph *g = *gp;
        int slot = -1;
        if (report && report->npasses < TG_RW_MAX_PASSES) {
            slot = report->npasses++;
            report->passes[slot] = (tg_pass_stats){.name = p->name};
            report->passes[slot].nodes_before = live_nodes(g);
        }
        double t0 = now();
        st = p->run(g, opts, report);
        if (st == TG_OK && checked(opts)) {
            st = tg_graph_verify(g);
            if (st != TG_OK) st = tg_set_error(st, "after pass '%s': %s", p->name, tg_last_error());
        }
        if (slot >= 0) report->passes[slot].seconds = now() - t0;
        if (st != TG_OK) break;
        if (opts->print_after && opts->print &&
            (strcmp(opts->print_after, "all") == 0 || strcmp(opts->print_after, p->name) == 0)) {
            fprintf(pf, "# after %s\n", p->name);
            st = opts->print(g, pf);
            if (st != TG_OK) break;
        }
        if (slot >= 0) report->passes[slot].nodes_after = live_nodes(*gp);
    }
    if (st == TG_OK && live_nodes(*gp) != (*gp)->nodes.n) st = compact(gp, report);
    if (report) {
        report->nodes_out = (*gp)->nodes.n;
        report->total_seconds += now() - t_all;
    }
    return st;
}

tg_status tg_rw_optimize(const tg_graph *g, const tg_rw_opts *opts, FILE *stats_to,
                         tg_graph **out) {
    *out = NULL;
    if (g->status != TG_OK) return tg_set_error(g->status, "%s", g->error);
    tg_rw_opts ro = *opts;
    ro.stats = stats_to != NULL;
    if (ro.print_after && strcmp(ro.print_after, "all") != 0) {
        size_t i = 0;
        while (i < TG_COUNTOF(pipeline) && strcmp(pipeline[i].name, ro.print_after) != 0) i++;
        if (i == TG_COUNTOF(pipeline))
            return tg_set_error(TG_EINVAL,
                                "unknown pass '%s' (passes: inline, canonicalize, stabilize, "
                                "specialize, blas, fuse, bucket, inplace)",
                                ro.print_after);
    }
    tg_rw_report rep = {0};
    double t0 = now();
    tg_graph *c = tg_graph_clone(g);
    if (!c) return tg_rw_error_status();
    rep.copy_seconds = now() - t0;
    rep.total_seconds = rep.copy_seconds;
    tg_status st = tg_rw_pipeline(&c, &ro, ro.stats ? &rep : NULL);
    if (st == TG_OK && ro.place) { /* after the pipeline: no rewrite sees a transfer */
        tg_place_stats ps = {0};
        int before = c->nodes.n;
        st = tg_place(&c, &(tg_place_opts){.placement = ro.placement, .stats = &ps});
        rep.placed = st == TG_OK;
        rep.place = (tg_pass_stats){.name = "place",
                                    .seconds = ps.seconds,
                                    .nodes_before = before,
                                    .nodes_after = c->nodes.n,
                                    .applied = ps.transfers + ps.removed};
        rep.total_seconds += ps.seconds;
        rep.nodes_out = c->nodes.n;
    }
    if (ro.stats) {
        rep.nodes_in = g->nodes.n; /* as written, dead code included */
        tg_rw_report_print(&rep, g->name, stats_to);
        tg_rw_report_free(g->ctx, &rep);
    }
    if (st != TG_OK) {
        tg_graph_free(c);
        return st;
    }
    *out = c;
    return TG_OK;
}
