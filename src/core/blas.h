/* blas.h - calling the BLAS and LAPACK library from several threads at once.
 *
 * Every call of ours into the library's level-2 and level-3 routines (and LAPACK, which
 * calls them) sits between tg_blas_enter and tg_blas_leave. Where concurrent calls are
 * safe (the common case) the pair costs one check; where they are not, it serializes the
 * calls (blas.c says when), and tg_blas_serialized tells the pool not to split products.
 */
#ifndef TG_CORE_BLAS_H
#define TG_CORE_BLAS_H

#include <stdbool.h>

void tg_blas_enter(void);
void tg_blas_leave(void);
/* Whether calls run one at a time (splitting a product over threads gains nothing).
 * Decided once per process by a probe product, at the first call of any function here or
 * of tg_blas_guard (the VM asks when it compiles a function with BLAS work). */
bool tg_blas_serialized(void);
/* Locks the buffer table for objects loaded since the last call (blas.c): at compile time. */
void tg_blas_rebind(void);

#endif
