/* world.h - private header of src/parallel: the processes of an MPI job (docs/mpi.md).
 * mpi.c implements it in builds with MPI, world_none.c (one process) in the others; the
 * public side is tg_world_rank, tg_world_size and tg_world_finish (include/tgraph.h).
 *
 * tgraph joins the job on the first call of any of these when the process was started by
 * mpirun (its environment says so); otherwise the world is this one process. The world is
 * process-wide state, as MPI's own is: made once, kept until tg_world_finish.
 */
#ifndef TG_WORLD_H
#define TG_WORLD_H

#include "../core/core.h"

/* pmap calls that span processes run one at a time in a process (so that every process
 * issues its MPI calls in the same order): taken around each such call. */
void tg_world_lock(void);
void tg_world_unlock(void);

/* In place over the processes: buf holds size blocks of `bytes`; process p's block p is
 * sent, and every other block is received. Waits as the collectives do (docs/mpi.md,
 * "Failures"). */
tg_status tg_world_all_gather(void *buf, size_t bytes);

#endif
