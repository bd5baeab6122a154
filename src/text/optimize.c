/* optimize.c - the public optimiser entry tg_graph_optimize: the rewrite pipeline
 * (src/rewrite, tg_rw_optimize), then placement when asked, with the .tg printer handed
 * down for print_after, since the printer lives here, in the text front end, a layer above
 * the rewrites.
 */
#include "../rewrite/rewrite.h"
#include "text.h"

tg_status tg_graph_optimize(const tg_graph *g, const tg_optimize_opts *opts, tg_graph **out) {
    if (!g || !out)
        return tg_set_error(TG_EINVAL, "tg_graph_optimize: %s is NULL", g ? "out" : "graph");
    tg_optimize_opts o; /* the caller's, in this version's struct (tgraph.h) */
    tg_status st = tg_struct_in(&o, sizeof o, opts, TG_OPTIMIZE_OPTS_FIRST, "tg_graph_optimize",
                                "tg_optimize_opts");
    if (st != TG_OK) return st;
    if ((unsigned)o.placement > TG_PLACEMENT_MANUAL)
        return tg_set_error(TG_EINVAL, "tg_graph_optimize: placement %d is not a tg_placement",
                            (int)o.placement);
    tg_rw_opts ro = {.print = tg_graph_print,
                     .verify = o.verify,
                     .no_blas = o.no_blas,
                     .no_inline = o.no_inline,
                     .print_after = o.print_after,
                     .print_to = o.print_to,
                     .place = o.place,
                     .placement = o.placement};
    return tg_rw_optimize(g, &ro, o.stats_to, out);
}
