/* driver.h - private header of src/driver: compiled functions (compile.c) and the
 * multi-device scheduler (sched.c), which runs a placed graph as per-device parts that are
 * ordinary compiled functions.
 *
 * A backend, as compile.c sees it, is one table of calls (fn_backend): the reference
 * interpreter, the VM, the C JIT, debug mode, and the scheduler, which is chosen when
 * placement spreads a graph over several devices and itself runs each device's part with
 * the backend of the function's mode. A function's pmaps run their ranks through ranks.c.
 */
#ifndef TG_DRIVER_H
#define TG_DRIVER_H

#include "../device/device.h"
#include "../ir/ir.h"
#include "../ir/op.h"

#include <stdio.h>

/* A backend: make from a graph (borrowed, alive as long as the object), hand it the
 * sub-graph executor of call nodes, run, free. `supports` says whether it can run an op
 * (placement asks the devices, which ask their backend). */
typedef struct fn_backend {
    const char *name;
    tg_status (*make)(tg_graph *g, const tg_compile_opts *opts, void **out);
    void (*set_sub)(void *b, const tg_subexec *sub);
    tg_status (*call)(void *b, tg_tensor *const *in, int nin, tg_tensor **out, int nout, bool into);
    void (*free)(void *b);
    bool (*supports)(int op);
} fn_backend;

/* Compiles a graph that is already rewritten and placed (a part of the scheduler): no
 * rewrite, no placement; opts->pool is the device's pool. g is borrowed. */
tg_status tg_driver_compile_placed(tg_graph *g, const tg_compile_opts *opts, tg_fn **out);

/* The scheduler of a placed graph (the contract of src/rewrite/place.c: every node has a
 * device, every edge between devices goes through a transfer). */
typedef struct tg_sched tg_sched;
tg_status tg_sched_new(tg_graph *g, const tg_compile_opts *opts, tg_sched **out);
tg_status tg_sched_call(tg_sched *s, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                        bool into);
void tg_sched_free(tg_sched *s);
void tg_sched_profile_reset(tg_sched *s);
tg_status tg_sched_profile_print(tg_sched *s, FILE *f);
/* Whether the call checks that every value a part reads lives where the part runs (checked
 * builds, or TGRAPH_SIM_PROTECT=1): a missing transfer is an error, not a read of memory
 * the device cannot see. */
bool tg_sched_checked(void);

/* The ranks of a function's pmaps (ranks.c): where they run, their threads, their SPMD
 * frames. One object per compiled function that has pmap nodes; it owns the threads made
 * for them. */
typedef struct tg_ranks tg_ranks;
tg_ranks *tg_ranks_new(tg_ctx *ctx); /* NULL when out of memory */
void tg_ranks_free(tg_ranks *rk);    /* NULL is a no-op; no call may be running */
/* tg_subexec.run_ranks (op.h) with `body` compiled: n ranks of body at once, rank r on
 * in[r * nin ..) into out[r * nout ..), each rank's frame carrying note (may be NULL); on
 * failure msg (cap bytes) says why. */
tg_status tg_ranks_run(tg_ranks *rk, tg_fn *body, const char *axis, int n, tg_tensor *const *in,
                       int nin, tg_tensor **out, int nout, tg_kern_note *note, char *msg,
                       size_t cap);

#endif
