/* optimize.c - the public optimiser entry tg_graph_optimize: the rewrite pipeline
 * (src/rewrite, tg_rw_optimize) with the .tg printer handed down for print_after, since
 * the printer lives here, in the text front end, a layer above the rewrites.
 */
#include "../rewrite/rewrite.h"
#include "text.h"

tg_status tg_graph_optimize(const tg_graph *g, const tg_optimize_opts *opts, tg_graph **out) {
    if (!g || !out)
        return tg_set_error(TG_EINVAL, "tg_graph_optimize: %s is NULL", g ? "out" : "graph");
    tg_rw_opts ro = {.print = tg_graph_print};
    if (opts) {
        ro.verify = opts->verify;
        ro.no_blas = opts->no_blas;
        ro.no_inline = opts->no_inline;
        ro.print_after = opts->print_after;
        ro.print_to = opts->print_to;
    }
    return tg_rw_optimize(g, &ro, opts ? opts->stats_to : NULL, out);
}
