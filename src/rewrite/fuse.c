/* fuse.c - the fuse phase: elementwise fusion into fused{...} kernels.
 *
 * Empty until its issue lands: the rule list is empty and the pass changes nothing. Rules
 * go in fuse_rules (one row per rule, see docs/rewrites.md), each with a golden test in
 * tests/golden/fuse/.
 */
#include "rewrite.h"

static const tg_rule fuse_rules[] = {
    {NULL, -1, NULL}, /* placeholder: C has no empty arrays */
};

tg_status tg_fuse(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    (void)opts;
    return tg_rw_apply(g, "fuse", fuse_rules, 0, report);
}
