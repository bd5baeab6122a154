/* async.c - all-reduces started now and waited for later (comm.h, "started collectives"):
 * what psum_start and psum_wait run (src/ops/collective.c), so that a rank goes on with its
 * backward pass while a bucket of gradients is reduced (docs/mpi.md, "Bucketed gradients").
 *
 * Each (communicator, rank) that starts one gets a queue: a thread of its own that runs the
 * rank's started all-reduces one after the other, in the order they were started, through
 * the communicator's ordinary call (comm.c between threads, mpi.c's two levels across
 * processes). Every rank starts them in one order (the compiled program's), so the queue
 * threads of the ranks meet in the same collectives and comm.h's contract holds between
 * them. The rank's own thread must not make a collective of that communicator while its
 * queue has work (two threads of one rank inside it at once): tg_comm_drain first, which
 * collective.c does before every blocking collective.
 *
 * Invariants:
 *  - A started all-reduce is known by its buffer; at most QMAX are in flight (started and
 *    not yet waited for) per queue. It holds a reference on the buffer until it is done:
 *    a rank whose call failed lets go of its values before it drains its queue. (In the
 *    VM those values live in the call's replica, which another call of the function may
 *    take meanwhile; the pmap call fails either way.)
 *  - Its status and message are kept and given to the thread that waits for it; a
 *    collective aborted by another rank's failure fails its wait as a blocking one would.
 *  - tg_comm_drain(retire) returns with every started all-reduce finished (and, retiring,
 *    forgotten: the next pmap call starts with an empty queue). The thread lives until the
 *    communicator is freed.
 */
#include "comm.h"

#include <pthread.h>
#include <stdio.h>
#include <time.h>

#define QMAX 256

typedef struct job {
    tg_comm_op op;
    tg_dtype dt;
    void *buf;
    size_t count;
    tg_buffer *hold;              /* a reference on buf's buffer until the all-reduce is done */
    double started, began, ended; /* seconds: started by the rank, run by the queue, done */
    tg_status st;
    char msg[TG_ERRMSG_MAX];
} job;

struct tg_comm_queue {
    tg_ctx *ctx;
    tg_comm *c;
    int rank;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* work for the thread, or a job done */
    bool stop;
    uint64_t retired, done, tail; /* retired <= done <= tail: jobs[seq % QMAX] */
    bool waited[QMAX];            /* waited for, not yet retired */
    job jobs[QMAX];
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *run(void *arg) {
    tg_comm_queue *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->stop && q->done == q->tail) pthread_cond_wait(&q->cv, &q->mu);
        if (q->done == q->tail) break; /* stopping, nothing left */
        job *j = &q->jobs[q->done % QMAX];
        pthread_mutex_unlock(&q->mu);
        j->began = now();
        j->st = tg_comm_all_reduce(q->c, q->rank, j->op, j->dt, j->buf, j->buf, j->count);
        if (j->st != TG_OK) snprintf(j->msg, sizeof j->msg, "%s", tg_last_error());
        j->ended = now();
        if (j->hold) tg_buffer_unref(j->hold);
        pthread_mutex_lock(&q->mu);
        q->done++;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static tg_status queue_of(tg_comm *c, int rank, tg_comm_queue **out) {
    tg_comm_queue **slot = &tg_comm_queues(c)[rank];
    if ((*out = *slot)) return TG_OK;
    tg_ctx *ctx = tg_comm_ctx(c);
    tg_comm_queue *q = tg_mem_calloc(ctx, sizeof *q);
    if (!q) return tg_set_error(TG_ENOMEM, "out of memory: the queue of started collectives");
    q->ctx = ctx;
    q->c = c;
    q->rank = rank;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (pthread_create(&q->th, NULL, run, q) != 0) {
        pthread_cond_destroy(&q->cv);
        pthread_mutex_destroy(&q->mu);
        tg_mem_free(ctx, q, sizeof *q);
        return tg_set_error(TG_EIO, "cannot start the thread of started collectives");
    }
    *out = *slot = q;
    return TG_OK;
}

void tg_comm_queue_free(tg_comm_queue *q) {
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    tg_mem_free(q->ctx, q, sizeof *q);
}

tg_status tg_comm_start_all_reduce(tg_comm *c, int rank, tg_comm_op op, tg_dtype dt, void *buf,
                                   size_t count, tg_buffer *hold) {
    tg_comm_queue *q;
    tg_status st = queue_of(c, rank, &q);
    if (st != TG_OK) return st;
    pthread_mutex_lock(&q->mu);
    if (q->tail - q->retired == QMAX) {
        pthread_mutex_unlock(&q->mu);
        return tg_set_error(TG_ELIMIT,
                            "more than %d started all-reduces in flight on one rank (fewer "
                            "buckets: a larger TGRAPH_BUCKET_BYTES)",
                            QMAX);
    }
    if (hold) tg_buffer_ref(hold);
    q->jobs[q->tail % QMAX] =
        (job){.op = op, .dt = dt, .buf = buf, .count = count, .hold = hold, .started = now()};
    q->waited[q->tail % QMAX] = false;
    q->tail++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return TG_OK;
}

/* Forgets the waited-for jobs at the front. Under q->mu. */
static void retire(tg_comm_queue *q) {
    while (q->retired < q->done && q->waited[q->retired % QMAX]) q->retired++;
}

tg_status tg_comm_wait(tg_comm *c, int rank, const void *buf, tg_comm_timing *t) {
    tg_comm_queue *q = tg_comm_queues(c)[rank];
    if (!q) return tg_set_error(TG_EINTERNAL, "psum_wait: no all-reduce was started");
    double w0 = now();
    pthread_mutex_lock(&q->mu);
    uint64_t s = q->retired;
    while (s < q->tail && (q->waited[s % QMAX] || q->jobs[s % QMAX].buf != buf)) s++;
    if (s == q->tail) {
        pthread_mutex_unlock(&q->mu);
        return tg_set_error(TG_EINTERNAL, "psum_wait: no all-reduce of this buffer was started");
    }
    while (q->done <= s) pthread_cond_wait(&q->cv, &q->mu);
    job *j = &q->jobs[s % QMAX];
    tg_status st = j->st;
    if (st != TG_OK) tg_set_error(st, "%s", j->msg);
    if (t)
        *t = (tg_comm_timing){
            .flight = j->ended - j->started, .run = j->ended - j->began, .waited = now() - w0};
    q->waited[s % QMAX] = true;
    retire(q);
    pthread_mutex_unlock(&q->mu);
    return st;
}

void tg_comm_drain(tg_comm *c, int rank, bool forget) {
    tg_comm_queue *q = tg_comm_queues(c)[rank];
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    while (q->done < q->tail) pthread_cond_wait(&q->cv, &q->mu);
    if (forget) q->retired = q->done;
    pthread_mutex_unlock(&q->mu);
}
