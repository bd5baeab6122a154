/* inplace.c - the inplace phase: in-place variants that overwrite dead buffers (destroy
 * maps).
 *
 * Empty until its issue lands: the rule list is empty and the pass changes nothing. Rules
 * go in inplace_rules (one row per rule, see docs/rewrites.md), each with a golden test in
 * tests/golden/inplace/.
 */
#include "rewrite.h"

static const tg_rule inplace_rules[] = {
    {NULL, -1, NULL}, /* placeholder: C has no empty arrays */
};

tg_status tg_inplace(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    (void)opts;
    return tg_rw_apply(g, "inplace", inplace_rules, 0, report);
}
