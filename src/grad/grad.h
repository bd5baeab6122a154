/* grad.h - what the files of src/grad share: the checks and labels of tg_grad and tg_vjp
 * (grad.c) that tg_jacobian and tg_hessian (jacobian.c) use for their own arguments.
 *
 * Invariants: nothing here builds graph or records an error; the label is for messages.
 */
#ifndef TG_GRAD_GRAD_H
#define TG_GRAD_GRAD_H

#include "../ops/ops.h"

/* Records the graph's first error (tg_ir_fail) and returns g's status. */
tg_status tg_grad_fail(tg_graph *g, tg_status st, const char *fmt, ...) TG_PRINTF(3, 4);
/* Whether v is a variable of g (not NULL, not another graph's). */
bool tg_grad_owns(const tg_graph *g, const tg_var *v);
/* A value as messages name it: 'x', "the output of exp (node 3)" or "a constant". */
const char *tg_grad_label(const tg_var *v, char *buf, size_t n);

#endif
