/* spmd.c - the SPMD context of pmap ranks (op.h): the frame of the rank the calling thread
 * runs, in a thread-local pointer the driver sets around each rank's call.
 *
 * Invariant: a frame lives on the stack of the driver's call of its rank and is set only
 * for that call's duration, so a thread never sees a frame that has ended; frames of
 * nested pmaps chain outward through `outer`, which outlives them (the enclosing rank waits
 * for every inner rank).
 */
#include "op.h"

static _Thread_local const tg_spmd *current;

const tg_spmd *tg_spmd_current(void) { return current; }

const tg_spmd *tg_spmd_find(const char *axis) {
    for (const tg_spmd *s = current; s && axis; s = s->outer)
        if (strcmp(s->axis, axis) == 0) return s;
    return NULL;
}

const tg_spmd *tg_spmd_set(const tg_spmd *s) {
    const tg_spmd *prev = current;
    current = s;
    return prev;
}
