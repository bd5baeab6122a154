/* index.h - private to the indexing files of src/ops: what index.c (take, take_along,
 * set/inc_subtensor, set/inc_take, and the helpers below) shares with index_arrays.c
 * (mask_select, index, set_index, inc_index). index_apply.c (x[...]) builds those ops
 * through tg_apply and needs none of it.
 *
 * Invariants: the helpers follow NumPy's rules as index.c's header states them (negative
 * indices count from the end, every index is checked before anything is gathered, y
 * broadcasts one way onto the selection, 'same_kind' casting for inc); kernels read and
 * write through strides and never write an input.
 */
#ifndef TG_OPS_INDEX_H
#define TG_OPS_INDEX_H

#include "ops.h"

/* ---- types and kernels ---- */
void tg_ix_type_init(tg_type *o, tg_dtype dt, int ndim); /* zeroed, dtype and rank set */
/* Indices must be integers (signed or u8): bool and floats are refused. */
tg_status tg_ix_check_indices(tg_infer *ic, const tg_type *ind);
/* A negative index counts from the end; false when v is outside [-n, n). */
bool tg_ix_norm(int64_t v, int64_t n, int64_t *out);
/* Every index of ind against the extent n (axis < 0: flattened), before any gather. */
tg_status tg_ix_check_all(tg_kern *k, const tg_tensor *ind, int axis, int64_t n);
/* Element of y broadcast onto a target of rank tnd at multi-index t. */
const char *tg_ix_bcast_at(const tg_tensor *y, int tnd, const int64_t *t);
/* y broadcasts onto the target shape tshape (rank tnd), checked at run time. */
bool tg_ix_bcast_ok(const tg_tensor *y, int tnd, const int64_t *tshape);
/* Writes (inc: adds) the element at src (dtype sdt) into dst (dtype ddt). */
void tg_ix_elem_put(char *dst, tg_dtype ddt, const char *src, tg_dtype sdt, bool inc);

/* ---- assignment rules shared by set_* and inc_* ---- */
/* The dtypes an assignment with y in input 1 wants (tg_op_def.promote). */
tg_status tg_ix_promote_set_yi1(tg_infer *ic, tg_dtype *want);
tg_status tg_ix_promote_inc_yi1(tg_infer *ic, tg_dtype *want);
/* y must broadcast onto the selected type tgt (one way: the selection's shape is kept). */
tg_status tg_ix_assign_check(tg_infer *ic, const tg_type *tgt, const tg_type *y, bool inc);

/* ---- gradients ---- */
tg_var *tg_ix_scalar_const(tg_graph *g, tg_dtype dt, double v); /* strong 0-d constant */
/* v (of the selected shape) summed onto y's type (extra leading axes, broadcast, dtype). */
tg_var *tg_ix_onto(tg_graph *g, tg_var *v, const tg_var *y);
/* 0, 1, ... size(ind) - 1 in ind's shape (i64). */
tg_var *tg_ix_positions_like(tg_graph *g, tg_var *ind);

/* How an update node (set_take, set_index and their inc_ twins) reaches the places it
 * writes, built again with the node's own inputs and attributes. */
typedef struct tg_ix_places {
    int yi; /* the input holding y */
    /* x[places], of the selection's shape */
    tg_var *(*gather)(tg_graph *g, const tg_node *n, tg_var *x);
    /* a copy of x with x[places] = v */
    tg_var *(*scatter)(tg_graph *g, const tg_node *n, tg_var *x, tg_var *v);
    /* the i64 position of each element of the selection sel, broadcasting onto sel;
       NULL with the graph's error set on failure */
    tg_var *(*positions)(tg_graph *g, const tg_node *n, tg_var *sel);
} tg_ix_places;

/* The vjp of an update node whose places pl describes (inc: it adds, else it sets). */
tg_status tg_ix_vjp_assign(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                           bool inc, const tg_ix_places *pl);

#endif
