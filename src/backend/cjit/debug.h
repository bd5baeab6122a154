/* debug.h - debug mode (TG_MODE_DEBUG): runs the rewritten graph with a backend (the VM or
 * the C JIT, tg_compile_opts.debug_backend) and checks every node, right after it ran,
 * against that node's reference kernel (tg_interp_eval) on the same input values, and
 * checks that it left unchanged every input it does not declare it destroys (checksums
 * taken before it ran). The first failing node stops the call with TG_ECHECK and a message
 * naming the node, its place, its output's type and the worst element. Nodes may have any
 * number of inputs (all are checksummed). Calls of one tg_dbg from several threads run at
 * the same time, each with a state of its own (the ranks of a pmap body must).
 *
 * Test hooks (environment, read when the function is compiled): TGRAPH_TEST_BREAK_OP=name
 * adds 1 to element 0 of output 0 of every node of that op after it ran (a wrong kernel),
 * TGRAPH_TEST_CLOBBER_OP=name does so to its input 0 (an undeclared write).
 */
#ifndef TG_CJ_DEBUG_H
#define TG_CJ_DEBUG_H

#include "../../ops/ops.h"

typedef struct tg_dbg tg_dbg;
tg_status tg_dbg_new(tg_graph *g, const tg_compile_opts *opts, tg_dbg **out);
void tg_dbg_free(tg_dbg *d); /* NULL is a no-op */
/* The executor that runs the bodies of g's `call` nodes, for the checked backend and for
 * the reference it is checked against (borrowed; it outlives d). */
void tg_dbg_set_sub(tg_dbg *d, const tg_subexec *sub);
tg_status tg_dbg_call(tg_dbg *d, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                      bool into);

#endif
