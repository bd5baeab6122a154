/* device.c - the registry of devices, their queues and events, copies and device buffers
 * (the contract is in device.h).
 *
 * The thread queue, which every kind so far uses as its iface's queue, is one thread and
 * a FIFO of tasks under a mutex; the thread is created with the
 * device and joined when the registry is rebuilt. An event is a pair of counters under a
 * mutex: `recorded` grows when a record is queued, `reached` when a queue runs it; a
 * waiter remembers `recorded` when it asks and waits until `reached` catches up, so a
 * later record never delays it. Both waits, an idle queue thread's and an event's, spin
 * as the pool's threads do (tg_spin_wait) before they sleep on their condition variable,
 * and the other side signals only a thread that sleeps: a handoff that comes soon costs
 * no system call. The registry is one global under a mutex, built on first
 * use.
 */
#include "device.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_DEVICES 256 /* per kind */

typedef struct task {
    tg_device_task fn;
    void *arg;
    struct task *next;
} task;

struct tg_queue {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    task *head, *tail;
    bool stop;
    bool sleeping;       /* the thread waits on cv (under mu): a submit must signal it */
    atomic_int pending;  /* tasks queued and not yet taken, read while spinning */
    atomic_bool halting; /* stop, read while spinning */
};

struct tg_event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t recorded;        /* records queued (under mu) */
    _Atomic uint64_t reached; /* records run: written under mu, read while spinning */
    int waiters;              /* threads asleep on cv (under mu): a record must wake them */
};

/* ---- queues ---- */

static bool queue_ready(void *arg) {
    tg_queue *q = arg;
    return atomic_load_explicit(&q->pending, memory_order_acquire) > 0 ||
           atomic_load_explicit(&q->halting, memory_order_acquire);
}

static void *queue_main(void *arg) {
    tg_device *d = arg;
    tg_queue *q = d->queue;
    for (;;) {
        tg_spin_wait(queue_ready, q); /* a task that comes soon costs no wake-up */
        pthread_mutex_lock(&q->mu);
        while (!q->head && !q->stop) {
            q->sleeping = true;
            pthread_cond_wait(&q->cv, &q->mu);
        }
        q->sleeping = false;
        task *t = q->head;
        if (!t) { /* stopping with nothing left */
            pthread_mutex_unlock(&q->mu);
            return NULL;
        }
        q->head = t->next;
        if (!q->head) q->tail = NULL;
        atomic_fetch_sub_explicit(&q->pending, 1, memory_order_relaxed);
        pthread_mutex_unlock(&q->mu);
        t->fn(t->arg, d);
        free(t);
    }
}

static tg_status queue_start(tg_device *d) {
    tg_queue *q = calloc(1, sizeof *q);
    if (!q) return tg_set_error(TG_ENOMEM, "out of memory: the queue of device %s", d->name);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    d->queue = q;
    if (pthread_create(&q->thread, NULL, queue_main, d) != 0) {
        d->queue = NULL;
        pthread_cond_destroy(&q->cv);
        pthread_mutex_destroy(&q->mu);
        free(q);
        return tg_set_error(TG_ENOMEM, "device %s: cannot start its queue thread", d->name);
    }
    return TG_OK;
}

/* Runs what is queued, then joins the thread. */
static void queue_stop(tg_device *d) {
    tg_queue *q = d->queue;
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    atomic_store_explicit(&q->halting, true, memory_order_release);
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
    d->queue = NULL;
}

tg_status tg_device_thread_submit(tg_device *d, tg_device_task fn, void *arg) {
    task *t = malloc(sizeof *t);
    if (!t) return tg_set_error(TG_ENOMEM, "out of memory: a task for device %s", d->name);
    t->fn = fn;
    t->arg = arg;
    t->next = NULL;
    tg_queue *q = d->queue;
    pthread_mutex_lock(&q->mu);
    if (q->tail)
        q->tail->next = t;
    else
        q->head = t;
    q->tail = t;
    atomic_fetch_add_explicit(&q->pending, 1, memory_order_release);
    if (q->sleeping) pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return TG_OK;
}

/* ---- events ---- */

tg_event *tg_event_new(void) {
    tg_event *e = calloc(1, sizeof *e);
    if (!e) {
        tg_set_error(TG_ENOMEM, "out of memory: an event");
        return NULL;
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    return e;
}

void tg_event_free(tg_event *e) {
    if (!e) return;
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

typedef struct event_point {
    tg_event *e;
    uint64_t target;
} event_point;

static bool point_reached(void *arg) {
    const event_point *p = arg;
    return atomic_load_explicit(&p->e->reached, memory_order_acquire) >= p->target;
}

static void event_wait_until(tg_event *e, uint64_t target, bool spin) {
    event_point p = {e, target};
    bool spun = spin && tg_spin_wait(point_reached, &p); /* no sleep when it comes soon */
    pthread_mutex_lock(&e->mu); /* also after spinning: the recorder sets `reached` under mu,
                                   and the waiter may free e as soon as it returns */
    if (spun) {
        pthread_mutex_unlock(&e->mu);
        return;
    }
    e->waiters++;
    while (atomic_load_explicit(&e->reached, memory_order_relaxed) < target)
        pthread_cond_wait(&e->cv, &e->mu);
    e->waiters--;
    pthread_mutex_unlock(&e->mu);
}

/* Marks e's records up to target as run (under e->mu), waking sleeping waiters. */
static void event_reach(tg_event *e, uint64_t target) {
    pthread_mutex_lock(&e->mu);
    if (atomic_load_explicit(&e->reached, memory_order_relaxed) < target)
        atomic_store_explicit(&e->reached, target, memory_order_release);
    if (e->waiters) pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void record_task(void *arg, tg_device *d) {
    event_point *p = arg;
    event_reach(p->e, p->target);
    free(p);
}

static void wait_task(void *arg, tg_device *d) {
    event_point *p = arg;
    event_wait_until(p->e, p->target, true);
    free(p);
}

/* Queues fn with an event_point for e (record: a new target; wait: the last one). */
static tg_status queue_event(tg_device *d, tg_event *e, bool record) {
    event_point *p = malloc(sizeof *p);
    if (!p) return tg_set_error(TG_ENOMEM, "out of memory: an event on device %s", d->name);
    p->e = e;
    pthread_mutex_lock(&e->mu);
    p->target = record ? ++e->recorded : e->recorded;
    pthread_mutex_unlock(&e->mu);
    tg_status st = tg_device_thread_submit(d, record ? record_task : wait_task, p);
    if (st != TG_OK) {
        if (record) /* no queue will reach it: count it as reached, nothing waits on it */
            event_reach(e, p->target);
        free(p);
    }
    return st;
}

tg_status tg_device_thread_record(tg_device *d, tg_event *e) { return queue_event(d, e, true); }

tg_status tg_device_thread_wait(tg_device *d, tg_event *e) { return queue_event(d, e, false); }

tg_status tg_device_submit(tg_device *d, tg_device_task fn, void *arg) {
    return d->iface->submit(d, fn, arg);
}

tg_status tg_device_record(tg_device *d, tg_event *e) { return d->iface->record(d, e); }

tg_status tg_device_wait(tg_device *d, tg_event *e) { return d->iface->wait(d, e); }

void tg_event_synchronize(tg_event *e) {
    pthread_mutex_lock(&e->mu);
    uint64_t target = e->recorded;
    pthread_mutex_unlock(&e->mu);
    event_wait_until(e, target, true);
}

void tg_event_sleep(tg_event *e) {
    pthread_mutex_lock(&e->mu);
    uint64_t target = e->recorded;
    pthread_mutex_unlock(&e->mu);
    event_wait_until(e, target, false);
}

tg_status tg_device_synchronize(tg_device *d) {
    tg_event *e = tg_event_new();
    if (!e) return TG_ENOMEM;
    tg_status st = tg_device_record(d, e);
    if (st == TG_OK) tg_event_synchronize(e);
    tg_event_free(e);
    return st;
}

/* ---- memory and copies ---- */

void *tg_device_alloc(tg_device *d, size_t nbytes) { return d->iface->alloc(d, nbytes); }

void tg_device_free(tg_device *d, void *p, size_t nbytes) {
    if (p) d->iface->free(d, p, nbytes);
}

static void release_device_buffer(tg_buffer *b) {
    tg_device *d = b->device;
    d->iface->free(d, b->data, b->nbytes);
    tg_mem_free(b->ctx, b, sizeof *b);
}

typedef struct copy_job {
    tg_device *dst_dev, *src_dev; /* never NULL here */
    void *dst;
    const void *src;
    size_t n;
} copy_job;

static void copy_task(void *arg, tg_device *d) {
    copy_job *j = arg;
    if (tg_device_is_host(j->dst_dev) && tg_device_is_host(j->src_dev))
        memcpy(j->dst, j->src, j->n); /* one address space */
    else if (tg_device_is_host(j->src_dev))
        d->iface->copy_in(d, j->dst, j->src, j->n);
    else if (tg_device_is_host(j->dst_dev))
        d->iface->copy_out(d, j->dst, j->src, j->n);
    else
        d->iface->copy_peer(d, j->dst, j->src_dev, j->src, j->n);
    free(j);
}

/* The queue a copy runs on: the side that is not the host (the destination's when both
 * are, or neither is). */
static tg_device *copy_queue(tg_device *dst_dev, tg_device *src_dev) {
    return !tg_device_is_host(dst_dev) || tg_device_is_host(src_dev) ? dst_dev : src_dev;
}

tg_status tg_device_copy_async(tg_device *dst_dev, void *dst, tg_device *src_dev, const void *src,
                               size_t n) {
    if (!dst_dev) dst_dev = tg_device_cpu();
    if (!src_dev) src_dev = tg_device_cpu();
    if (!dst_dev || !src_dev) return TG_EINVAL;
    if (n == 0) return TG_OK;
    copy_job *j = malloc(sizeof *j);
    if (!j) return tg_set_error(TG_ENOMEM, "out of memory: a copy of %zu bytes", n);
    *j = (copy_job){dst_dev, src_dev, dst, src, n};
    tg_status st = tg_device_submit(copy_queue(dst_dev, src_dev), copy_task, j);
    if (st != TG_OK) free(j);
    return st;
}

tg_status tg_device_copy(tg_device *dst_dev, void *dst, tg_device *src_dev, const void *src,
                         size_t n) {
    if (!dst_dev) dst_dev = tg_device_cpu();
    if (!src_dev) src_dev = tg_device_cpu();
    if (!dst_dev || !src_dev) return TG_EINVAL;
    tg_status st = tg_device_copy_async(dst_dev, dst, src_dev, src, n);
    if (st != TG_OK) return st;
    return tg_device_synchronize(copy_queue(dst_dev, src_dev));
}

tg_buffer *tg_device_buffer_new(tg_device *d, size_t nbytes) {
    if (!d) d = tg_device_cpu();
    if (!d) return NULL;
    if (tg_device_is_host(d)) {
        tg_buffer *b = tg_buffer_new(NULL, nbytes);
        if (b) b->device = d;
        return b;
    }
    tg_ctx *ctx = tg_ctx_default();
    tg_buffer *b = tg_mem_alloc(ctx, sizeof *b);
    if (!b) return NULL;
    void *data = tg_device_alloc(d, nbytes);
    if (!data && nbytes) {
        tg_mem_free(ctx, b, sizeof *b);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->ctx = ctx;
    b->data = data;
    b->nbytes = nbytes;
    b->alloc_size = sizeof *b;
    b->device = d;
    b->release = release_device_buffer;
    return b;
}

tg_tensor *tg_device_tensor_new(tg_device *d, tg_dtype dt, int ndim, const int64_t *shape) {
    int64_t n = 1;
    if (!tg_shape_size(ndim, shape, &n)) {
        tg_set_error(TG_ELIMIT, "tensor too large for device %s", d ? d->name : "cpu");
        return NULL;
    }
    size_t nbytes = (size_t)n * tg_dtype_infos[dt].size;
    tg_buffer *b = tg_device_buffer_new(d, nbytes);
    if (!b) {
        tg_set_error(TG_ENOMEM, "out of memory: %zu bytes on device %s", nbytes,
                     d ? d->name : "cpu");
        return NULL;
    }
    tg_tensor *t = tg_mem_alloc(b->ctx, sizeof *t);
    if (!t) {
        tg_buffer_unref(b);
        tg_set_error(TG_ENOMEM, "out of memory: a tensor on device %s", d ? d->name : "cpu");
        return NULL;
    }
    *t = (tg_tensor){.dtype = dt, .ndim = ndim, .buf = b};
    for (int k = 0; k < ndim; k++) t->shape[k] = shape[k];
    tg_contiguous_strides(ndim, shape, t->strides);
    return t;
}

/* ---- the registry ---- */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static tg_device **reg_devs; /* NULL until built */
static int reg_n;

/* A count from environment variable `var`: 0 when unset or empty. */
static tg_status env_count(const char *var, int *out) {
    const char *s = getenv(var);
    *out = 0;
    if (!s || !*s) return TG_OK;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 0 || v > MAX_DEVICES)
        return tg_set_error(TG_EINVAL, "%s=\"%s\": expected a device count from 0 to %d", var, s,
                            MAX_DEVICES);
    *out = (int)v;
    return TG_OK;
}

static void device_destroy(tg_device *d) {
    if (!d) return;
    queue_stop(d);
    tg_pool_free(d->pool);
    if (d->iface && d->iface->fini) d->iface->fini(d);
    free(d);
}

static void registry_free_locked(void) {
    for (int i = 0; i < reg_n; i++) device_destroy(reg_devs[i]);
    free(reg_devs);
    reg_devs = NULL;
    reg_n = 0;
}

static tg_status device_add(tg_device **devs, int *n, tg_device_kind kind, int k, int first,
                            int nthreads) {
    tg_device *d = calloc(1, sizeof *d);
    if (!d) return tg_set_error(TG_ENOMEM, "out of memory: a device");
    d->kind = kind;
    d->index = *n;
    d->first_thread = first;
    d->nthreads = nthreads;
    if (kind == TG_DEVICE_CPU)
        snprintf(d->name, sizeof d->name, "cpu");
    else
        snprintf(d->name, sizeof d->name, "%s:%d", kind == TG_DEVICE_SIM ? "sim" : "cpu", k);
    devs[(*n)++] = d;
    tg_status st = kind == TG_DEVICE_SIM ? tg_device_sim_init(d) : tg_device_host_init(d);
    if (st != TG_OK) return st;
    d->pool = tg_pool_new(NULL, nthreads);
    if (!d->pool) return TG_ENOMEM;
    return queue_start(d);
}

static tg_status registry_build_locked(int host, int sim) {
    tg_status st = TG_OK;
    if (host < 0) st = env_count("TGRAPH_HOST_DEVICES", &host);
    if (st == TG_OK && sim < 0) st = env_count("TGRAPH_SIM_DEVICES", &sim);
    if (st != TG_OK) return st;
    if (host > MAX_DEVICES || sim > MAX_DEVICES)
        return tg_set_error(TG_EINVAL, "device counts: at most %d of a kind", MAX_DEVICES);
    double lat, bps;
    bool protect;
    if (sim > 0 && (st = tg_device_sim_settings(&lat, &bps, &protect)) != TG_OK) return st;
    tg_device **devs = calloc((size_t)(1 + host + sim), sizeof *devs);
    if (!devs) return tg_set_error(TG_ENOMEM, "out of memory: the device registry");
    int n = 0, threads = tg_pool_default_threads();
    st = device_add(devs, &n, TG_DEVICE_CPU, 0, 0, threads);
    /* virtual host devices split the host's threads, each getting at least one */
    int total = threads > host ? threads : host;
    for (int k = 0; st == TG_OK && k < host; k++) {
        int64_t lo, hi;
        tg_pool_share(total, k, host, 1, &lo, &hi);
        st = device_add(devs, &n, TG_DEVICE_HOST, k, (int)lo, (int)(hi - lo));
        if (st == TG_OK) devs[n - 1]->cost.compute_speed = (double)(hi - lo) / threads;
    }
    for (int k = 0; st == TG_OK && k < sim; k++) st = device_add(devs, &n, TG_DEVICE_SIM, k, 0, 1);
    reg_devs = devs;
    reg_n = n;
    if (st != TG_OK) registry_free_locked();
    return st;
}

tg_status tg_device_list(tg_device *const **devs, int *n) {
    pthread_mutex_lock(&reg_mu);
    tg_status st = reg_devs ? TG_OK : registry_build_locked(-1, -1);
    *devs = reg_devs;
    *n = reg_n;
    pthread_mutex_unlock(&reg_mu);
    return st;
}

tg_status tg_device_count_peek(int *n) {
    pthread_mutex_lock(&reg_mu);
    int host = 0, sim = 0;
    tg_status st = TG_OK;
    if (reg_devs) {
        *n = reg_n;
    } else {
        st = env_count("TGRAPH_HOST_DEVICES", &host);
        if (st == TG_OK) st = env_count("TGRAPH_SIM_DEVICES", &sim);
        *n = 1 + host + sim;
    }
    pthread_mutex_unlock(&reg_mu);
    return st;
}

tg_status tg_device_configure(int host, int sim) {
    pthread_mutex_lock(&reg_mu);
    registry_free_locked();
    tg_status st = registry_build_locked(host, sim);
    pthread_mutex_unlock(&reg_mu);
    return st;
}

tg_device *tg_device_cpu(void) {
    tg_device *const *devs;
    int n;
    return tg_device_list(&devs, &n) == TG_OK ? devs[0] : NULL;
}

tg_device *tg_device_current(void) {
    tg_device *d = NULL;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < reg_n && !d; i++)
        if (reg_devs[i]->queue && pthread_equal(reg_devs[i]->queue->thread, self)) d = reg_devs[i];
    pthread_mutex_unlock(&reg_mu);
    return d;
}

tg_device *tg_device_find(const char *name) {
    tg_device *const *devs;
    int n;
    if (tg_device_list(&devs, &n) != TG_OK) return NULL;
    for (int i = 0; name && i < n; i++)
        if (strcmp(devs[i]->name, name) == 0) return devs[i];
    char list[512] = "";
    size_t used = 0;
    for (int i = 0; i < n && used + 1 < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", devs[i]->name);
        if (w < 0) break;
        used += (size_t)w < sizeof list - used ? (size_t)w : sizeof list - used - 1;
    }
    tg_set_error(TG_EINVAL, "no device \"%s\" (the devices are: %s)", name ? name : "(null)", list);
    return NULL;
}

/* ---- the public API (tgraph.h) ---- */

tg_status tg_devices_configure(int host_devices, int sim_devices) {
    if (host_devices < -1 || sim_devices < -1)
        return tg_set_error(TG_EINVAL, "tg_devices_configure: negative %s device count",
                            host_devices < -1 ? "host" : "sim");
    return tg_device_configure(host_devices, sim_devices);
}

int tg_devices_count(void) {
    tg_device *const *devs;
    int n;
    return tg_device_list(&devs, &n) == TG_OK ? n : -1;
}

const char *tg_devices_name(int i) {
    tg_device *const *devs;
    int n;
    if (tg_device_list(&devs, &n) != TG_OK) return NULL;
    if (i < 0 || i >= n) {
        tg_set_error(TG_EINDEX, "tg_devices_name: device %d: there are %d", i, n);
        return NULL;
    }
    return devs[i]->name;
}
