/* interp.h - private header of src/backend/interp: what other stages may call of the
 * reference interpreter.
 *
 * Invariant: tg_interp_eval runs exactly the code a call of a compiled function runs for
 * one node (run-time inference, then the op record's reference kernel), so a value folded
 * at compile time equals the value the interpreter would compute.
 */
#ifndef TG_INTERP_H
#define TG_INTERP_H

#include "../../ops/ops.h"

/* Evaluates node n of graph g on the values in[0..n->nin) (any strides, one per input,
 * matching the inputs' static types) with its reference kernel. out[0..n->nout) receive
 * new tensors the caller frees; they may be views sharing memory with `in`. On error
 * every out[i] is NULL and tg_last_error() names the node. */
tg_status tg_interp_eval(tg_ctx *ctx, const tg_graph *g, const tg_node *n, tg_tensor *const *in,
                         tg_tensor **out);

#endif
