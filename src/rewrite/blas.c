/* blas.c - the blas phase: lowering of dot and the add/sub/mul/neg around it to gemm, gemv
 * and ger (DESIGN.md, "BLAS lowering"); skipped under --no-blas.
 *
 * Empty until its issue lands: the rule list is empty and the pass changes nothing. Rules
 * go in blas_rules (one row per rule, see docs/rewrites.md), each with a golden test in
 * tests/golden/blas/.
 */
#include "rewrite.h"

static const tg_rule blas_rules[] = {
    {NULL, -1, NULL}, /* placeholder: C has no empty arrays */
};

tg_status tg_blas(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    if (opts && opts->no_blas) return TG_OK;
    return tg_rw_apply(g, "blas", blas_rules, 0, report);
}
