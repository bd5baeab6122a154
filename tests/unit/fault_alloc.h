/* fault_alloc.h - an allocator hook for tests that fails the Nth allocation (count from 1;
 * fail_at 0 never fails), so a test can fail every allocation of a workload in turn and
 * check that each failure ends in TG_ENOMEM with nothing leaked (ASan). */
#ifndef TG_TEST_FAULT_ALLOC_H
#define TG_TEST_FAULT_ALLOC_H

#include <stdlib.h>

typedef struct fail_alloc {
    long count;   /* allocations so far */
    long fail_at; /* the one to refuse */
} fail_alloc;

static inline void *failing_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    fail_alloc *fa = ud;
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    if (++fa->count == fa->fail_at) return NULL;
    return realloc(ptr, nsize);
}

#endif
