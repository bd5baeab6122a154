/* world_none.c - the world of a build without MPI (world.h): one process, always. */
#include "world.h"

int tg_world_rank(void) { return 0; }

int tg_world_size(void) { return 1; }

int tg_world_finish(int status, const char *why) {
    (void)why;
    return status;
}

void tg_world_lock(void) {}

void tg_world_unlock(void) {}

tg_status tg_world_all_gather(void *buf, size_t bytes) {
    (void)buf, (void)bytes;
    return TG_OK; /* one block, this process's own */
}
