/* ranks.c - running the ranks of a pmap (docs/pmap.md, "Execution"): N replicas of one
 * compiled body at the same time, rank r on its own thread with the SPMD frame
 * {axis, r, N} set around its call (op.h), the body's replicas taking care of the rest
 * (tg_fn calls from several threads are safe and run on replicas of their own).
 *
 * Where the ranks run:
 *  - on the virtual host devices cpu:0..N-1 when the registry has any (TGRAPH_HOST_DEVICES,
 *    --devices, tg_devices_configure): rank r is a task of cpu:r's queue, and the caller
 *    waits for an event recorded after it on each queue. More ranks than host devices is
 *    an error naming both numbers. The tasks of one pmap call are submitted under one
 *    lock, so every queue sees the pmap calls of the process in the same order: ranks
 *    that will wait for each other (collectives) are never queued crosswise behind each
 *    other's calls.
 *  - on threads made for it otherwise: a pool of N threads (the caller being rank 0),
 *    owned by the compiled function, made on first use and kept. A pool serves one pmap
 *    call at a time: a call that finds every pool of its size busy (concurrent calls of
 *    the function, or the ranks of an enclosing pmap calling this body at once) makes
 *    another, as replicas are made, so no call ever waits for another's ranks.
 *  - on threads made for it also when the calling thread is itself a device's queue
 *    thread (a step of the multi-device scheduler, or a rank of an enclosing pmap on a
 *    device) or runs a rank of an enclosing pmap: the queues may hold steps that wait for
 *    this very call, and a rank queued behind them would never start.
 *
 * Failure: every rank runs to its end; the call fails with the message of the lowest rank
 * that failed, "pmap rank R: ...", after every rank has returned.
 */
#include "driver.h"

#include <pthread.h>
#include <stdio.h>

typedef struct rank_pool {
    tg_pool *pool; /* n threads, the caller's included */
    int n;
    bool busy; /* a pmap call runs on it */
} rank_pool;

struct tg_ranks {
    tg_ctx *ctx;
    pthread_mutex_t mu; /* guards pools */
    rank_pool *pools;
    int npool, cap;
};

/* One pmap call. */
typedef struct job {
    tg_fn *body;
    const char *axis;
    int n;                /* ranks */
    tg_tensor *const *in; /* n * nin: rank r's at r * nin */
    int nin;
    tg_tensor **out; /* n * nout; NULL entries: results made and dropped */
    int nout;
    const tg_spmd *outer; /* the caller's frame: an enclosing pmap's rank, or NULL */
    pthread_mutex_t mu;   /* guards the failure below */
    int failed;           /* lowest rank that failed; n: none */
    tg_status st;
    char msg[TG_ERRMSG_MAX];
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
    for (int i = 0; i < rk->npool; i++) tg_pool_free(rk->pools[i].pool);
    if (rk->pools) tg_mem_free(rk->ctx, rk->pools, sizeof *rk->pools * (size_t)rk->cap);
    pthread_mutex_destroy(&rk->mu);
    tg_mem_free(rk->ctx, rk, sizeof *rk);
}

static void run_rank(job *j, int r) {
    tg_spmd frame = {.outer = j->outer, .axis = j->axis, .rank = r, .size = j->n};
    const tg_spmd *prev = tg_spmd_set(&frame);
    tg_tensor *out[TG_MAX_OUTS];
    tg_tensor *const *given = j->out + (size_t)r * (size_t)j->nout;
    for (int k = 0; k < j->nout; k++) out[k] = given[k];
    tg_status st =
        tg_fn_call_into(j->body, j->in + (size_t)r * (size_t)j->nin, j->nin, out, j->nout);
    for (int k = 0; k < j->nout; k++)
        if (!given[k]) tg_tensor_free(out[k]); /* a result nobody wants (NULL on failure) */
    tg_spmd_set(prev);
    if (st == TG_OK) return;
    pthread_mutex_lock(&j->mu);
    if (r < j->failed) {
        j->failed = r;
        j->st = st;
        snprintf(j->msg, sizeof j->msg, "pmap rank %d: %s", r, tg_last_error());
    }
    pthread_mutex_unlock(&j->mu);
}

static void pool_task(void *arg, int ith, int nth) {
    job *j = arg;
    for (int r = ith; r < j->n; r += nth) run_rank(j, r);
}

static void device_task(void *arg, tg_device *dev) {
    (void)dev;
    rank_task *t = arg;
    run_rank(t->j, t->rank);
}

/* A free pool of n threads, taken (busy), made when every one is busy; NULL with the
 * error set. The pools array may move when another call adds a pool: pools are named by
 * their tg_pool. */
static tg_pool *pool_take(tg_ranks *rk, int n) {
    pthread_mutex_lock(&rk->mu);
    for (int i = 0; i < rk->npool; i++)
        if (!rk->pools[i].busy && rk->pools[i].n == n) {
            rk->pools[i].busy = true;
            pthread_mutex_unlock(&rk->mu);
            return rk->pools[i].pool;
        }
    pthread_mutex_unlock(&rk->mu);
    tg_pool *p = tg_pool_new(rk->ctx, n); /* starts n - 1 threads: outside the lock */
    if (!p) return NULL;
    pthread_mutex_lock(&rk->mu);
    if (rk->npool == rk->cap) {
        int ncap = rk->cap ? 2 * rk->cap : 4;
        rank_pool *np = tg_mem_realloc(rk->ctx, rk->pools, sizeof *np * (size_t)rk->cap,
                                       sizeof *np * (size_t)ncap);
        if (!np) {
            pthread_mutex_unlock(&rk->mu);
            tg_pool_free(p);
            tg_set_error(TG_ENOMEM, "out of memory: the threads of a pmap");
            return NULL;
        }
        rk->pools = np;
        rk->cap = ncap;
    }
    rk->pools[rk->npool++] = (rank_pool){.pool = p, .n = n, .busy = true};
    pthread_mutex_unlock(&rk->mu);
    return p;
}

static void pool_give(tg_ranks *rk, tg_pool *p) {
    pthread_mutex_lock(&rk->mu);
    for (int i = 0; i < rk->npool; i++)
        if (rk->pools[i].pool == p) rk->pools[i].busy = false;
    pthread_mutex_unlock(&rk->mu);
}

static tg_status run_on_threads(tg_ranks *rk, job *j) {
    if (j->n == 1) {
        pool_task(j, 0, 1);
        return TG_OK;
    }
    tg_pool *p = pool_take(rk, j->n);
    if (!p) return TG_ENOMEM;
    tg_pool_run(p, pool_task, j);
    pool_give(rk, p);
    return TG_OK;
}

static tg_status run_on_devices(tg_ctx *ctx, tg_device *const *dev, job *j) {
    size_t n = (size_t)j->n;
    rank_task *task = tg_mem_alloc(ctx, sizeof *task * n);
    tg_event **ev = tg_mem_calloc(ctx, sizeof *ev * n);
    tg_status st = task && ev ? TG_OK : tg_set_error(TG_ENOMEM, "out of memory: a pmap call");
    for (int r = 0; st == TG_OK && r < j->n; r++)
        if (!(ev[r] = tg_event_new())) st = tg_set_error(TG_ENOMEM, "out of memory: an event");
    int submitted = 0, recorded = 0;
    if (st == TG_OK) {
        pthread_mutex_lock(&submit_mu);
        for (int r = 0; st == TG_OK && r < j->n; r++) {
            task[r] = (rank_task){j, r};
            st = tg_device_submit(dev[r], device_task, &task[r]);
            if (st == TG_OK) submitted = r + 1;
            if (st == TG_OK && (st = tg_device_record(dev[r], ev[r])) == TG_OK) recorded = r + 1;
        }
        pthread_mutex_unlock(&submit_mu);
    }
    /* a rank queued without its event: its queue may still run it (on this job) */
    if (submitted > recorded) tg_device_synchronize(dev[submitted - 1]);
    for (int r = 0; r < recorded; r++) tg_event_synchronize(ev[r]);
    for (int r = 0; ev && r < j->n; r++) tg_event_free(ev[r]);
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

tg_status tg_ranks_run(tg_ranks *rk, tg_fn *body, const char *axis, int n, tg_tensor *const *in,
                       int nin, tg_tensor **out, int nout, char *msg, size_t cap) {
    job j = {.body = body,
             .axis = axis,
             .n = n,
             .in = in,
             .nin = nin,
             .out = out,
             .nout = nout,
             .outer = tg_spmd_current(),
             .failed = n};
    tg_device *const *dev = NULL;
    int nhost = 0;
    tg_status st = TG_OK;
    if (!j.outer && (st = host_devices(&dev, &nhost)) == TG_OK && nhost > 0 && tg_device_current())
        nhost = 0; /* on a queue thread: threads of its own (see the top of the file) */
    if (st == TG_OK && n > nhost && nhost > 0) {
        char list[32] = "cpu:0";
        if (nhost > 1) snprintf(list, sizeof list, "cpu:0..cpu:%d", nhost - 1);
        st = tg_set_error(TG_EINVAL,
                          "a pmap over %d entries, but there %s %d host device%s (%s): ask for "
                          "at least %d (TGRAPH_HOST_DEVICES, --devices)",
                          n, nhost == 1 ? "is" : "are", nhost, nhost == 1 ? "" : "s", list, n);
    }
    if (st == TG_OK) {
        pthread_mutex_init(&j.mu, NULL);
        st = nhost > 0 ? run_on_devices(rk->ctx, dev, &j) : run_on_threads(rk, &j);
        pthread_mutex_destroy(&j.mu);
    }
    if (st != TG_OK) {
        snprintf(msg, cap, "%s", tg_last_error());
        return st;
    }
    if (j.failed < n) {
        snprintf(msg, cap, "%s", j.msg);
        return j.st;
    }
    return TG_OK;
}
