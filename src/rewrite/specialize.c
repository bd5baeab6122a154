/* specialize.c - the specialize phase: cheaper special forms of ops (pow(x, 2) ->
 * mul(x, x), ...).
 *
 * Empty until its issue lands: the rule list is empty and the pass changes nothing. Rules
 * go in specialize_rules (one row per rule, see docs/rewrites.md), each with a golden test in
 * tests/golden/specialize/.
 */
#include "rewrite.h"

static const tg_rule specialize_rules[] = {
    {NULL, -1, NULL}, /* placeholder: C has no empty arrays */
};

tg_status tg_specialize(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    (void)opts;
    return tg_rw_apply(g, "specialize", specialize_rules, 0, report);
}
