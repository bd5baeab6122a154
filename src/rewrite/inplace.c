/* inplace.c - the inplace phase: in-place variants that overwrite dead buffers (destroy
 * maps, the `destroys` field of an op record).
 *
 * One rule, `inplace_blas`: gemm, gemv and ger become gemm_inplace, gemv_inplace and
 * ger_inplace (whose output may overwrite input 0, the accumulator) when that is safe:
 *  - the accumulator is read (beta != 0) and has the result's exact type (no broadcast);
 *  - it is computed by a node of this graph (not a function input or a constant, which
 *    belong to the caller), by an op that owns its memory (not a view of another value);
 *  - it is computed on this node's device (never a buffer another device made:
 *    docs/devices.md, "Annotations");
 *  - this node is its only reader, through one input slot (so no other reader runs later,
 *    it is not aliased with another input of the node: `gemm(Z, Z, Z, ...)` stays, and
 *    no ordering constraint, hence no cycle, is added), and it is not a graph output.
 * The destroy map is a permission: the memory plan then gives the output the
 * accumulator's block (src/backend/plan.c), and a kernel that finds its output elsewhere
 * copies the accumulator first, so a hand-written in-place node is never wrong.
 */
#include "rewrite.h"

static int inplace_op(int op) {
    switch (op) {
    case TG_OP_GEMM:
        return TG_OP_GEMM_INPLACE;
    case TG_OP_GEMV:
        return TG_OP_GEMV_INPLACE;
    case TG_OP_GER:
        return TG_OP_GER_INPLACE;
    default:
        return -1;
    }
}

static tg_var *rw_inplace_blas(tg_rw *rw, tg_node *n) {
    tg_var *c = n->in[0], *y = n->out[0];
    int op = inplace_op(n->op);
    if (op < 0 || n->attrs[1].f == 0.0 || c->kind != TG_VAR_NODE) return NULL;
    if (!tg_ir_same_device(c->node->device, n->device)) return NULL;
    if (!tg_type_equal(&c->type, &y->type) || c->type.weak) return NULL;
    const tg_op_def *prod = tg_op_table[c->node->op];
    if (prod->views || tg_rw_use_count(rw, c) != 1 || tg_rw_is_output(rw, c)) return NULL;
    tg_node *m = tg_ir_node_make_norm(tg_rw_graph(rw), op, n->in, n->nin, n->attrs);
    return m ? m->out[0] : NULL;
}

static const tg_rule inplace_rules[] = {
    {"inplace_blas", TG_OP_GEMM, rw_inplace_blas},
    {"inplace_blas", TG_OP_GEMV, rw_inplace_blas},
    {"inplace_blas", TG_OP_GER, rw_inplace_blas},
};

tg_status tg_inplace(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    (void)opts;
    return tg_rw_apply(g, "inplace", inplace_rules, (int)TG_COUNTOF(inplace_rules), report);
}
