/* ranks.c - running the ranks of a pmap (docs/pmap.md, "Execution"): N replicas of one
 * compiled body at the same time, rank r on its own thread with the SPMD frame
 * {axis, r, N, the call's communicators} set around its call (op.h), the body's replicas
 * taking care of the rest (tg_fn calls from several threads are safe and run on replicas
 * of their own).
 *
 * Slots. A pmap call takes a slot of its size: the communicators its collectives talk
 * through (tg_comm_set, src/parallel/comm.h) and, on threads, its pool. A slot serves one
 * call at a time and is kept for the next: a call that finds every slot of its size busy
 * (concurrent calls of the function, or the ranks of an enclosing pmap calling this body
 * at once) makes another, as replicas are made, so no call waits for another's ranks and
 * no two calls share a communicator.
 *
 * Where the ranks run:
 *  - on the virtual host devices cpu:0..N-1 when the registry has any (TGRAPH_HOST_DEVICES,
 *    --devices, tg_devices_configure): rank r is a task of cpu:r's queue, and the caller
 *    waits for an event recorded after it on each queue. More ranks than host devices is
 *    an error naming both numbers. The tasks of one pmap call are submitted under one
 *    lock, so every queue sees the pmap calls of the process in the same order: ranks
 *    that will wait for each other (collectives) are never queued crosswise behind each
 *    other's calls.
 *  - on threads made for it otherwise: the slot's pool of N threads (the caller being
 *    rank 0), made on first use and kept.
 *  - on threads made for it also when the calling thread is itself a device's queue
 *    thread (a step of the multi-device scheduler, or a rank of an enclosing pmap on a
 *    device) or runs a rank of an enclosing pmap: the queues may hold steps that wait for
 *    this very call, and a rank queued behind them would never start.
 *
 * Across processes (docs/mpi.md): in an MPI job of P processes, a pmap that no other pmap
 * encloses and whose extent n is a multiple of P spans them: process p runs ranks
 * p * n/P .. (p + 1) * n/P - 1 as above (on its host devices or threads), their
 * communicators spanning the processes (comm.h), under tg_world_lock so that pmap calls
 * spanning processes are made one at a time, in program order. Every process holds the
 * whole inputs; an out_axes=none result comes from the process's first rank (the same
 * value everywhere, being invariant), and a stacked one is gathered from every process,
 * so each ends with the whole result. Other pmaps run whole in every process.
 *
 * Failure: a rank that fails aborts the communicators of its call and of every enclosing
 * pmap call (through its frames), so that no rank waits in a collective for it; every
 * rank then runs to its end. A rank whose failure only came from such an abort (a
 * collective that returned aborted, or a nested pmap call that failed only so) is noted
 * interrupted (tg_comm_set_note_interrupted). After the last rank has returned the call
 * fails with the message of the lowest rank that failed on its own ("pmap rank R: ...");
 * when every failure was an interruption, with the lowest one's, and the call's rank in
 * the enclosing pmap is noted interrupted in turn. So the failure reported is the one that
 * caused the others, whatever the timing. The slot's communicators are reset before it
 * serves another call.
 */
#include "driver.h"

#include "../parallel/comm.h"
#include "../parallel/world.h"

#include <pthread.h>
#include <stdio.h>

/* What one pmap call of n ranks takes (see "Slots" above). */
typedef struct slot {
    int n;
    bool spans;         /* across processes */
    bool busy;          /* a pmap call runs on it (under tg_ranks.mu) */
    tg_comm_set *comms; /* the frames' `shared` */
    tg_pool *pool;      /* n threads, the caller's included; NULL until ranks run on threads
                           (and for n = 1, which runs on the caller) */
} slot;

struct tg_ranks {
    tg_ctx *ctx;
    pthread_mutex_t mu; /* guards slots and their busy flags */
    slot **slots;       /* each allocated on its own: a call holds its slot's address */
    int nslot, cap;
};

/* One pmap call. */
typedef struct job {
    tg_fn *body;
    const char *axis;
    int n;                /* ranks */
    int nlocal, base;     /* those of this process: base .. base + nlocal - 1 (all but
                             across processes) */
    tg_tensor *const *in; /* n * nin: rank r's at r * nin */
    int nin;
    tg_tensor **out; /* n * nout; NULL entries: results made and dropped */
    int nout;
    const tg_spmd *outer; /* the caller's frame: an enclosing pmap's rank, or NULL */
    tg_comm_set *comms;   /* the slot's */
    tg_kern_note *note;   /* the pmap's profile note, or NULL */
    tg_ctx *ctx;          /* allocator of the messages */
    tg_status *st;        /* per rank: how its call ended */
    char **msg;           /* per rank that failed: "pmap rank R: ..." (NULL if out of memory) */
} job;

/* A task of a device's queue: rank `rank` of job. */
typedef struct rank_task {
    job *j;
    int rank;
} rank_task;

/* Orders the submissions of whole pmap calls to the device queues (see above). */
static pthread_mutex_t submit_mu = PTHREAD_MUTEX_INITIALIZER;

tg_ranks *tg_ranks_new(tg_ctx *ctx) {
    tg_ranks *rk = tg_mem_calloc(ctx, sizeof *rk);
    if (!rk) return NULL;
    rk->ctx = ctx;
    pthread_mutex_init(&rk->mu, NULL);
    return rk;
}

void tg_ranks_free(tg_ranks *rk) {
    if (!rk) return;
    for (int i = 0; i < rk->nslot; i++) {
        tg_pool_free(rk->slots[i]->pool);
        tg_comm_set_free(rk->slots[i]->comms);
        tg_mem_free(rk->ctx, rk->slots[i], sizeof *rk->slots[i]);
    }
    if (rk->slots) tg_mem_free(rk->ctx, rk->slots, sizeof *rk->slots * (size_t)rk->cap);
    pthread_mutex_destroy(&rk->mu);
    tg_mem_free(rk->ctx, rk, sizeof *rk);
}

/* A failed rank: the communicators of its call and of every enclosing one are aborted, so
 * that no rank of any of them waits for this one in a collective. */
static void abort_from(const tg_spmd *frame, tg_status why) {
    for (const tg_spmd *f = frame; f; f = f->outer)
        if (f->shared) tg_comm_set_abort(f->shared, why);
}

static void run_rank(job *j, int r) {
    tg_spmd frame = {.outer = j->outer,
                     .axis = j->axis,
                     .rank = r,
                     .size = j->n,
                     .shared = j->comms,
                     .note = j->note};
    const tg_spmd *prev = tg_spmd_set(&frame);
    tg_tensor *out[TG_MAX_OUTS];
    tg_tensor *const *given = j->out + (size_t)r * (size_t)j->nout;
    for (int k = 0; k < j->nout; k++) out[k] = given[k];
    if (r == j->base && r > 0) /* a later process's first rank makes the out_axes=none ones */
        for (int k = 0; k < j->nout; k++)
            if (!out[k]) out[k] = j->out[k];
    tg_status st =
        tg_fn_call_into(j->body, j->in + (size_t)r * (size_t)j->nin, j->nin, out, j->nout);
    for (int k = 0; k < j->nout; k++)
        if (!given[k] && !(r == j->base && r > 0 && j->out[k]))
            tg_tensor_free(out[k]); /* a result nobody wants (NULL on failure) */
    tg_spmd_set(prev);
    if (st == TG_OK) {
        if (j->comms) tg_comm_set_drain(j->comms, r); /* every start was waited for: no-op */
        return;
    }
    j->st[r] = st; /* rank r's own entries: read after every rank has returned */
    if ((j->msg[r] = tg_mem_alloc(j->ctx, TG_ERRMSG_MAX)))
        snprintf(j->msg[r], TG_ERRMSG_MAX, "pmap rank %d: %s", r, tg_last_error());
    abort_from(&frame, st);
    /* after the abort, which ends what the other ranks will not join: no started all-reduce
       may outlive the call whose buffers it writes */
    if (j->comms) tg_comm_set_drain(j->comms, r);
}

static void pool_task(void *arg, int ith, int nth) {
    job *j = arg;
    for (int r = ith; r < j->nlocal; r += nth) run_rank(j, j->base + r);
}

static void device_task(void *arg, tg_device *dev) {
    (void)dev;
    rank_task *t = arg;
    run_rank(t->j, t->rank);
}

/* A free slot of n ranks, taken (busy), made when every one is busy; NULL with the error
 * set. */
static slot *slot_take(tg_ranks *rk, int n, int nlocal, int base) {
    bool spans = nlocal < n;
    pthread_mutex_lock(&rk->mu);
    for (int i = 0; i < rk->nslot; i++)
        if (!rk->slots[i]->busy && rk->slots[i]->n == n && rk->slots[i]->spans == spans) {
            rk->slots[i]->busy = true;
            pthread_mutex_unlock(&rk->mu);
            return rk->slots[i];
        }
    pthread_mutex_unlock(&rk->mu);
    slot *sl = tg_mem_calloc(rk->ctx, sizeof *sl);
    tg_comm_set *cs = !sl     ? NULL
                      : spans ? tg_comm_set_new_spanning(rk->ctx, n, nlocal, base)
                              : tg_comm_set_new(rk->ctx, n);
    if (!cs) {
        if (sl) tg_mem_free(rk->ctx, sl, sizeof *sl);
        tg_set_error(TG_ENOMEM, "out of memory: a pmap call of %d ranks", n);
        return NULL;
    }
    *sl = (slot){.n = n, .spans = spans, .busy = true, .comms = cs};
    pthread_mutex_lock(&rk->mu);
    if (rk->nslot == rk->cap) {
        int ncap = rk->cap ? 2 * rk->cap : 4;
        slot **ns = tg_mem_realloc(rk->ctx, rk->slots, sizeof *ns * (size_t)rk->cap,
                                   sizeof *ns * (size_t)ncap);
        if (!ns) {
            pthread_mutex_unlock(&rk->mu);
            tg_comm_set_free(cs);
            tg_mem_free(rk->ctx, sl, sizeof *sl);
            tg_set_error(TG_ENOMEM, "out of memory: a pmap call of %d ranks", n);
            return NULL;
        }
        rk->slots = ns;
        rk->cap = ncap;
    }
    rk->slots[rk->nslot++] = sl;
    pthread_mutex_unlock(&rk->mu);
    return sl;
}

/* Gives a slot back once every rank of its call has returned: its communicators cleared of
 * an abort, for the next call. */
static void slot_give(tg_ranks *rk, slot *sl) {
    tg_comm_set_reset(sl->comms);
    pthread_mutex_lock(&rk->mu);
    sl->busy = false;
    pthread_mutex_unlock(&rk->mu);
}

static tg_status run_on_threads(tg_ranks *rk, slot *sl, job *j) {
    if (j->nlocal == 1) {
        pool_task(j, 0, 1);
        return TG_OK;
    }
    if (!sl->pool && !(sl->pool = tg_pool_new(rk->ctx, j->nlocal)))
        return tg_set_error(TG_ENOMEM, "cannot start the %d threads of a pmap", j->nlocal);
    tg_pool_run(sl->pool, pool_task, j);
    return TG_OK;
}

static tg_status run_on_devices(tg_ctx *ctx, tg_device *const *dev, job *j) {
    size_t n = (size_t)j->nlocal;
    rank_task *task = tg_mem_alloc(ctx, sizeof *task * n);
    tg_event **ev = tg_mem_calloc(ctx, sizeof *ev * n);
    tg_status st = task && ev ? TG_OK : tg_set_error(TG_ENOMEM, "out of memory: a pmap call");
    for (int r = 0; st == TG_OK && r < j->nlocal; r++)
        if (!(ev[r] = tg_event_new())) st = tg_set_error(TG_ENOMEM, "out of memory: an event");
    int submitted = 0, recorded = 0;
    if (st == TG_OK) {
        pthread_mutex_lock(&submit_mu);
        for (int r = 0; st == TG_OK && r < j->nlocal; r++) {
            task[r] = (rank_task){j, j->base + r};
            st = tg_device_submit(dev[r], device_task, &task[r]);
            if (st == TG_OK) submitted = r + 1;
            if (st == TG_OK && (st = tg_device_record(dev[r], ev[r])) == TG_OK) recorded = r + 1;
        }
        pthread_mutex_unlock(&submit_mu);
    }
    /* ranks left unsubmitted never come to the collectives the others wait in */
    if (st != TG_OK && submitted > 0) tg_comm_set_abort(j->comms, st);
    /* a rank queued without its event: its queue may still run it (on this job) */
    if (submitted > recorded) tg_device_synchronize(dev[submitted - 1]);
    for (int r = 0; r < recorded; r++) tg_event_sleep(ev[r]);
    for (int r = 0; ev && r < j->nlocal; r++) tg_event_free(ev[r]);
    if (ev) tg_mem_free(ctx, ev, sizeof *ev * n);
    if (task) tg_mem_free(ctx, task, sizeof *task * n);
    return st;
}

/* The virtual host devices cpu:0.. into *dev (borrowed from the registry), *nhost of them;
 * none, without building the registry, when no setting asks for any. */
static tg_status host_devices(tg_device *const **dev, int *nhost) {
    int ndev = 1;
    *dev = NULL;
    *nhost = 0;
    tg_status st = tg_device_count_peek(&ndev);
    if (st != TG_OK || ndev <= 1) return st;
    tg_device *const *all;
    if ((st = tg_device_list(&all, &ndev)) != TG_OK) return st;
    int first = -1;
    for (int i = 0; i < ndev; i++)
        if (all[i]->kind == TG_DEVICE_HOST) {
            if (first < 0) first = i;
            (*nhost)++;
        }
    if (first >= 0) *dev = all + first; /* the registry keeps cpu:0..cpu:H-1 together */
    return TG_OK;
}

/* The rank whose failure the call reports (see the top), -1 when none failed; *interrupted:
 * every failure was an interruption. */
static int reported(const job *j, bool *interrupted) {
    int first = -1, own = -1;
    for (int r = 0; r < j->n && own < 0; r++) {
        if (j->st[r] == TG_OK) continue;
        if (first < 0) first = r;
        if (!tg_comm_set_interrupted(j->comms, r)) own = r;
    }
    *interrupted = first >= 0 && own < 0;
    return own >= 0 ? own : first;
}

/* A stacked result of a call spanning processes: the slices of the other processes'
 * ranks gathered into it (see the top), through a contiguous copy unless the slices lie end
 * to end in rank order already (out_axes=0 of a contiguous result). */
static tg_status gather_result(tg_ctx *ctx, const job *j, int k) {
    tg_tensor *const *out = j->out;
    const tg_tensor *t0 = out[k];
    size_t bytes = (size_t)tg_tensor_size(t0) * tg_dtype_size(t0->dtype);
    bool in_place = true;
    for (int r = 0; r < j->n && in_place; r++) {
        const tg_tensor *t = out[(size_t)r * (size_t)j->nout + (size_t)k];
        in_place = tg_tensor_is_contiguous(t) &&
                   (char *)tg_tensor_data(t) == (char *)tg_tensor_data(t0) + (size_t)r * bytes;
    }
    if (in_place) return tg_world_all_gather(tg_tensor_data(t0), (size_t)j->nlocal * bytes);
    int64_t shape[TG_MAX_DIMS + 1] = {j->n};
    memcpy(shape + 1, t0->shape, sizeof *shape * (size_t)t0->ndim);
    tg_tensor *all = tg_tensor_empty(ctx, t0->dtype, t0->ndim + 1, shape);
    if (!all) return tg_set_error(TG_ENOMEM, "out of memory: gathering a result of a pmap");
    tg_status st = TG_OK;
    for (int pass = 0; pass < 2 && st == TG_OK; pass++) {
        if (pass == 1) st = tg_world_all_gather(tg_tensor_data(all), (size_t)j->nlocal * bytes);
        for (int r = 0; r < j->n && st == TG_OK; r++) {
            bool mine = r >= j->base && r < j->base + j->nlocal;
            if (mine != (pass == 0)) continue;
            tg_tensor *row = tg_tensor_view(all, t0->ndim, t0->shape, all->strides + 1,
                                            all->offset + r * all->strides[0]);
            if (!row) {
                st = tg_set_error(TG_ENOMEM, "out of memory: gathering a result of a pmap");
                break;
            }
            tg_tensor *slice = out[(size_t)r * (size_t)j->nout + (size_t)k];
            if (pass == 0)
                tg_tensor_copy_into(row, slice);
            else
                tg_tensor_copy_into(slice, row);
            tg_tensor_free(row);
        }
    }
    tg_tensor_free(all);
    return st;
}

tg_status tg_ranks_run(tg_ranks *rk, tg_fn *body, const char *axis, int n, tg_tensor *const *in,
                       int nin, tg_tensor **out, int nout, tg_kern_note *note, char *msg,
                       size_t cap) {
    job j = {.body = body,
             .axis = axis,
             .n = n,
             .nlocal = n,
             .in = in,
             .nin = nin,
             .out = out,
             .nout = nout,
             .note = note,
             .outer = tg_spmd_current()};
    int procs = j.outer ? 1 : tg_world_size();
    bool spans = procs > 1 && n % procs == 0;
    if (spans) {
        j.nlocal = n / procs;
        j.base = tg_world_rank() * j.nlocal;
        tg_world_lock();
    }
    tg_device *const *dev = NULL;
    int nhost = 0;
    tg_status st = TG_OK;
    if (!j.outer && (st = host_devices(&dev, &nhost)) == TG_OK && nhost > 0 && tg_device_current())
        nhost = 0; /* on a queue thread: threads of its own (see the top of the file) */
    if (st == TG_OK && j.nlocal > nhost && nhost > 0) {
        char list[32] = "cpu:0", each[64] = "";
        if (nhost > 1) snprintf(list, sizeof list, "cpu:0..cpu:%d", nhost - 1);
        if (spans) snprintf(each, sizeof each, " (%d on each of %d MPI ranks)", j.nlocal, procs);
        st = tg_set_error(TG_EINVAL,
                          "a pmap over %d entries%s, but there %s %d host device%s (%s): ask for "
                          "at least %d (TGRAPH_HOST_DEVICES, --devices)",
                          n, each, nhost == 1 ? "is" : "are", nhost, nhost == 1 ? "" : "s", list,
                          j.nlocal);
    }
    j.ctx = rk->ctx;
    j.st = st == TG_OK ? tg_mem_calloc(rk->ctx, sizeof *j.st * (size_t)n) : NULL;
    j.msg = j.st ? tg_mem_calloc(rk->ctx, sizeof *j.msg * (size_t)n) : NULL;
    if (st == TG_OK && !j.msg) st = tg_set_error(TG_ENOMEM, "out of memory: a pmap call");
    slot *sl = st == TG_OK ? slot_take(rk, n, j.nlocal, j.base) : NULL;
    if (st == TG_OK && !sl) st = TG_ENOMEM;
    int failed = -1;
    if (st == TG_OK) {
        j.comms = sl->comms;
        st = nhost > 0 ? run_on_devices(rk->ctx, dev, &j) : run_on_threads(rk, sl, &j);
        bool interrupted;
        failed = reported(&j, &interrupted);
        if (interrupted && j.outer && j.outer->shared)
            tg_comm_set_note_interrupted(j.outer->shared, j.outer->rank);
        slot_give(rk, sl);
    }
    for (int k = 0; spans && st == TG_OK && failed < 0 && k < nout; k++)
        if (out[(size_t)nout + (size_t)k]) st = gather_result(rk->ctx, &j, k); /* stacked */
    if (spans) tg_world_unlock();
    if (st != TG_OK)
        snprintf(msg, cap, "%s", tg_last_error());
    else if (failed >= 0 && j.msg[failed])
        snprintf(msg, cap, "%s", j.msg[failed]);
    else if (failed >= 0)
        snprintf(msg, cap, "pmap rank %d: %s (out of memory for its message)", failed,
                 tg_status_str(j.st[failed]));
    tg_status ret = st != TG_OK ? st : failed >= 0 ? j.st[failed] : TG_OK;
    for (int r = 0; j.msg && r < n; r++)
        if (j.msg[r]) tg_mem_free(rk->ctx, j.msg[r], TG_ERRMSG_MAX);
    if (j.msg) tg_mem_free(rk->ctx, j.msg, sizeof *j.msg * (size_t)n);
    if (j.st) tg_mem_free(rk->ctx, j.st, sizeof *j.st * (size_t)n);
    return ret;
}
