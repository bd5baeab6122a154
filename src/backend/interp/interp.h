/* interp.h - private header of src/backend/interp: the reference interpreter as a backend
 * (tg_interp, used by src/driver/compile.c for TG_MODE_REFERENCE) and the one-node evaluator
 * other stages call (constant folding, debug mode).
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
                         const tg_subexec *sub, tg_tensor **out);

/* Run-time type of a tensor t that fills a variable of static type st: t's extents, with
 * `nobcast` set on extents of 1 that st declares '?' (they do not broadcast). */
void tg_interp_runtime_type(const tg_type *st, const tg_tensor *t, tg_type *rt);

/* The interpreter as a backend: g (borrowed, verified) must outlive it. */
typedef struct tg_interp tg_interp;
tg_status tg_interp_new(tg_graph *g, tg_interp **out);
/* The executor that runs the bodies of g's `call` nodes (borrowed; it outlives ip). */
void tg_interp_set_sub(tg_interp *ip, const tg_subexec *sub);
void tg_interp_free(tg_interp *ip); /* NULL is a no-op */
/* A call with the contract of tg_fn_call / tg_fn_call_into (into: non-NULL out[i] on entry
 * receive output i). Inputs were checked by the caller (src/driver/compile.c). */
tg_status tg_interp_call(tg_interp *ip, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                         bool into);

#endif
