/* opdata.c - op data (ir.h): the reference count of the immutable objects that attributes of
 * kind TG_ATTR_DATA hold, and their comparison through the table each object carries.
 *
 * Invariants: the count is atomic, so graphs that share an object (clones) may be built and
 * freed on different threads; everything else in an object is fixed once it is made, which
 * is why retain and release take it const.
 */
#include "ir.h"

void tg_opdata_init(tg_opdata *d, const tg_opdata_vt *vt) {
    d->vt = vt;
    atomic_init(&d->refs, 1);
}

void tg_opdata_retain(const tg_opdata *d) {
    atomic_fetch_add_explicit(&((tg_opdata *)d)->refs, 1, memory_order_relaxed);
}

void tg_opdata_release(const tg_opdata *d) {
    tg_opdata *m = (tg_opdata *)d;
    if (m && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1) m->vt->release(m);
}

bool tg_opdata_equal(const tg_opdata *a, const tg_opdata *b) {
    return a == b || (a && b && a->vt == b->vt && a->vt->equal(a, b));
}

uint64_t tg_opdata_hash(const tg_opdata *d) { return d ? d->vt->hash(d) : 0; }
