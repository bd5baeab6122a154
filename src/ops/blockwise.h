/* blockwise.h - private to src/ops and the passes that read core ops: the machinery of
 * Blockwise ops, the ops whose record has a core signature (tg_op_def.signature, NumPy's
 * gufunc notation) and that apply it over broadcast leading batch dimensions.
 *
 * An operand is its batch dimensions followed by its core dimensions. A signature names
 * each core dimension; a name stands for one extent across every operand. A name with '?'
 * (matmul's "(m?,n),(n,p?)->(m?,p?)") is optional: an input whose rank is below its full
 * core rank (the one it has with its optional dimensions) is taken without them, and then
 * has no batch dimensions; the name is absent from every operand then, outputs included.
 * This is NumPy 2's rule for matmul and for the right-hand side of solve: b is a vector
 * only when it is 1-D.
 *
 * Invariant: an op with a non-NULL signature accepts leading batch dimensions in front of
 * its core dimensions, whatever its rank; batch dimensions broadcast as NumPy's do (with the
 * '?' rules of tg_broadcast_types: only a static 1 broadcasts, and a mismatch found at run
 * time is an error naming both extents).
 */
#ifndef TG_OPS_BLOCKWISE_H
#define TG_OPS_BLOCKWISE_H

#include "ops.h"

#define TG_BW_MAX_OPERANDS 8 /* inputs and outputs of one signature */
#define TG_BW_MAX_NAMES    8 /* distinct dimension names */

/* A parsed signature: operands 0..nin) are the inputs, nin..nin+nout) the outputs. */
typedef struct tg_bw_sig {
    int nin, nout;
    int nnames;                                  /* distinct names */
    char names[TG_BW_MAX_NAMES][8];              /* each name, without '?' */
    int8_t rank[TG_BW_MAX_OPERANDS];             /* core rank with the optional dimensions */
    int8_t dim[TG_BW_MAX_OPERANDS][TG_MAX_DIMS]; /* name index of each core dimension */
    uint32_t opt[TG_BW_MAX_OPERANDS];            /* bit d: core dimension d is optional */
} tg_bw_sig;

/* Parses s; false when it is malformed (a bug of the record that holds it). */
bool tg_bw_parse(const char *s, tg_bw_sig *sig);

/* The core ranks of the operands of an op with signature sig given its inputs' ranks:
 * core[0..nin+nout) and the names absent (bit per name). false when an input has fewer
 * dimensions than its core needs, with the input's index in *bad. */
bool tg_bw_core_ranks(const tg_bw_sig *sig, const int *in_ndim, int *core, uint32_t *absent,
                      int *bad);

/* The inference of a Blockwise op from its signature alone: every output has input 0's
 * dtype, the broadcast batch of the inputs, and the core extents its names are bound to.
 * Errors: an input of too low a rank, batches that do not broadcast, and core extents
 * that disagree (naming both core shapes and the signature). */
tg_status tg_bw_infer(tg_infer *ic);

/* The kernel of one block: k's inputs and outputs are views of the block's core (no batch
 * dimensions), k->pool NULL. */
typedef tg_status (*tg_bw_core_fn)(tg_kern *k);

/* The reference kernel of a Blockwise op of that signature (its record's): runs core once
 * per block of the broadcast batch (outputs preallocated), the blocks split over k->pool
 * when there are several. On a failure the message is that of the first failing block,
 * prefixed by its batch index. */
tg_status tg_bw_ref(tg_kern *k, const char *signature, tg_bw_core_fn core);

/* The cotangents of a Blockwise op: core builds them on the batched values (with builders
 * that treat leading dimensions as batch: matmul, tg_bw_mT, tril, ...), and each is then
 * summed over the batch dimensions along which its input was broadcast. */
tg_status tg_bw_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                    tg_vjp_fn core);

/* v with its last two axes swapped (the batched transpose, NumPy's .mT). */
tg_var *tg_bw_mT(tg_graph *g, tg_var *v);
/* v with a new axis of extent 1 at `axis` (negative counts from the end of the result). */
tg_var *tg_bw_expand(tg_graph *g, tg_var *v, int64_t axis);
/* v without its axis `axis` of extent 1. */
tg_var *tg_bw_squeeze(tg_graph *g, tg_var *v, int64_t axis);

#endif
