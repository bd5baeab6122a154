/* table.c - the op table, generated from oplist.h (declared at the IR level, ir/op.h),
 * and lookup by name. */
#include "ops.h"

#define TG_X_SLOT(U, l) [TG_OP_##U] = &tg_op_##l,
const tg_op_def *const tg_op_table[TG_OP_COUNT] = {TG_OPS(TG_X_SLOT)};
#undef TG_X_SLOT
const int tg_op_count = TG_OP_COUNT;
const int tg_op_cast_id = TG_OP_CAST;

int tg_op_lookup(const char *name) {
    for (int i = 0; i < TG_OP_COUNT; i++)
        if (strcmp(tg_op_table[i]->name, name) == 0) return i;
    return -1;
}
