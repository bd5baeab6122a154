/* device.h - private header of src/device: places that own memory and run work, behind
 * one vtable in ggml's style ({iface, context}), and the registry of the devices there are.
 *
 * Kinds (docs/devices.md):
 *  - `cpu`: the host with the whole process-wide pool. With no setting it is the only
 *    device.
 *  - `cpu:0`..`cpu:N-1` (TGRAPH_HOST_DEVICES=N or tg_device_configure): virtual host
 *    devices. The host's threads (tg_pool_default_threads(), at least N) are numbered
 *    0..T-1 and split by tg_pool_share: each device owns a disjoint [first_thread,
 *    first_thread + nthreads) of them, at least one, as its queue thread plus its pool.
 *  - `sim:0`..`sim:K-1` (TGRAPH_SIM_DEVICES=K): stand-ins for a GPU. Memory of their own
 *    that the host must not read (in checked builds, NDEBUG unset, or with
 *    TGRAPH_SIM_PROTECT=1, it is PROT_NONE except while the device's queue works on it,
 *    so a host read faults), an asynchronous queue on the device's own thread, transfers
 *    paced by TGRAPH_SIM_LATENCY_US and TGRAPH_SIM_GBPS.
 *
 * Invariants:
 *  - Every device has one queue: tasks submitted to it run one at a time, in submission
 *    order, on its queue thread, which is ith 0 of the device's pool.
 *  - An event records a point of a queue; waiting on it (from another queue or from the
 *    host) waits for every task submitted to that queue before the record, and for
 *    nothing recorded after the wait was asked for. The records of one event are made on
 *    one queue (a later record on another queue could release a waiter early).
 *  - A copy runs on the queue of the device that is not the host (the destination's when
 *    both are, or both are not): tg_device_copy_async returns at once, and the memory on
 *    both sides must stay valid until that queue has run it.
 *  - The registry is built on first use and rebuilt only by tg_device_configure, which
 *    must not run while a device is in use (its queues are drained and joined).
 */
#ifndef TG_DEVICE_H
#define TG_DEVICE_H

#include "../core/core.h"
#include "../parallel/parallel.h"

typedef struct tg_device tg_device;
typedef struct tg_event tg_event;
typedef struct tg_queue tg_queue;

typedef enum {
    TG_DEVICE_CPU,  /* the host, whole pool */
    TG_DEVICE_HOST, /* a virtual host device, a share of the host's threads */
    TG_DEVICE_SIM,  /* a simulated accelerator */
} tg_device_kind;

/* What placement will weigh: transfer speeds and the compute speed relative to `cpu`. */
typedef struct tg_device_cost {
    double latency_s;     /* fixed cost of one transfer to or from the host */
    double bytes_per_s;   /* transfer bandwidth to or from the host */
    double compute_speed; /* relative to the cpu device (1.0) */
} tg_device_cost;

/* A task of a queue: runs on the device's queue thread, which may spread it over
 * tg_device_pool(dev) with tg_pool_run. */
typedef void (*tg_device_task)(void *arg, tg_device *dev);

typedef struct tg_device_iface {
    /* zero-filled device memory of nbytes; NULL with the error set on failure */
    void *(*alloc)(tg_device *d, size_t nbytes);
    void (*free)(tg_device *d, void *p, size_t nbytes);
    /* copies, run on d's queue thread: host -> d, d -> host, src_dev -> d */
    void (*copy_in)(tg_device *d, void *dst, const void *src, size_t n);
    void (*copy_out)(tg_device *d, void *dst, const void *src, size_t n);
    void (*copy_peer)(tg_device *d, void *dst, tg_device *src_dev, const void *src, size_t n);
    /* the queue: append a task, record an event at its end, make it wait for an event's
     * last record (the invariants above); kinds whose queue is a thread of the host use
     * the tg_device_thread_* functions */
    tg_status (*submit)(tg_device *d, tg_device_task fn, void *arg);
    tg_status (*record)(tg_device *d, tg_event *e);
    tg_status (*wait)(tg_device *d, tg_event *e);
    /* whether kernels of op `op` (an index of the op table) can run on d */
    bool (*supports_op)(const tg_device *d, int op);
    /* [p, p + n) of d's memory is about to be touched by host kernels run on d's queue
     * thread / is no longer (sim: unprotects and protects it, counted); NULL when the host
     * may always touch it */
    void (*open)(tg_device *d, const void *p, size_t n);
    void (*close)(tg_device *d, const void *p, size_t n);
    void (*fini)(tg_device *d); /* frees the context */
} tg_device_iface;

struct tg_device {
    const tg_device_iface *iface;
    void *context;       /* the kind's own state */
    char name[24];       /* "cpu", "cpu:1", "sim:0" */
    tg_device_kind kind; /* which iface */
    int index;           /* position in the registry */
    tg_device_cost cost; /* hints for placement */
    int first_thread;    /* its share of the host's thread ids (cpu: all of them) */
    int nthreads;        /* queue thread included, >= 1 */
    tg_pool *pool;       /* nthreads threads, the queue thread being ith 0 */
    tg_queue *queue;     /* in-order tasks */
};

/* The devices there are (building the registry on first use from the environment).
 * TG_EINVAL naming the variable when a setting is malformed. */
tg_status tg_device_list(tg_device *const **devs, int *n);
/* How many devices there are or will be, without building the registry (which starts
 * their threads): TG_EINVAL naming the variable when a setting is malformed. */
tg_status tg_device_count_peek(int *n);
/* The device called `name`, or NULL with TG_EINVAL naming it and listing the devices. */
tg_device *tg_device_find(const char *name);
/* The device whose queue thread is the calling thread; NULL on any other thread (and
 * before the registry is built). Never builds the registry. */
tg_device *tg_device_current(void);
/* The host device `cpu` (NULL only when the registry cannot be built). */
tg_device *tg_device_cpu(void);
/* Rebuilds the registry with `host` virtual host devices and `sim` sim devices; -1 takes
 * the count from TGRAPH_HOST_DEVICES / TGRAPH_SIM_DEVICES. The sim settings are read
 * again too. No device of the old registry may be in use. */
tg_status tg_device_configure(int host, int sim);
/* Whether memory of `d` is the host's (cpu and cpu:i; d NULL means cpu). */
static inline bool tg_device_is_host(const tg_device *d) { return !d || d->kind != TG_DEVICE_SIM; }

/* Memory through the device's iface. */
void *tg_device_alloc(tg_device *d, size_t nbytes);
void tg_device_free(tg_device *d, void *p, size_t nbytes);
/* A zero-filled buffer of nbytes on d whose last unref frees it through d. */
tg_buffer *tg_device_buffer_new(tg_device *d, size_t nbytes);

/* A zero-filled contiguous tensor on d (tg_device_buffer_new); NULL with the error set. */
tg_tensor *tg_device_tensor_new(tg_device *d, tg_dtype dt, int ndim, const int64_t *shape);
/* Around host kernels that d's queue runs on memory of d: iface open/close (no-ops for
 * kinds whose memory is the host's). */
static inline void tg_device_open(tg_device *d, const void *p, size_t n) {
    if (d && d->iface->open) d->iface->open(d, p, n);
}
static inline void tg_device_close(tg_device *d, const void *p, size_t n) {
    if (d && d->iface->close) d->iface->close(d, p, n);
}

/* Appends a task to d's queue. TG_ENOMEM when it cannot be queued. */
tg_status tg_device_submit(tg_device *d, tg_device_task fn, void *arg);
/* Copies n bytes from src (memory of src_dev) to dst (memory of dst_dev); NULL devices
 * mean the cpu. Queued as the header says; the _async form returns once queued, the
 * other once copied. */
tg_status tg_device_copy_async(tg_device *dst_dev, void *dst, tg_device *src_dev, const void *src,
                               size_t n);
tg_status tg_device_copy(tg_device *dst_dev, void *dst, tg_device *src_dev, const void *src,
                         size_t n);
/* Waits on the host until every task submitted to d so far has run. */
tg_status tg_device_synchronize(tg_device *d);

tg_event *tg_event_new(void);    /* NULL with TG_ENOMEM */
void tg_event_free(tg_event *e); /* no queue may still wait on it or record it */
/* Records e at the current end of d's queue. */
tg_status tg_device_record(tg_device *d, tg_event *e);
/* Makes d's queue wait, before its next task, for the last record of e. */
tg_status tg_device_wait(tg_device *d, tg_event *e);
/* Waits on the host for the last record of e (at once when none was made). */
void tg_event_synchronize(tg_event *e);
/* The same without spinning first: for a waiter whose core the work it waits for needs
 * (the caller of a pmap whose ranks run on every host device). */
void tg_event_sleep(tg_event *e);

/* The queue of a thread of the host (d->queue, started by the registry): the iface queue
 * functions of cpu, cpu:i and sim:i. */
tg_status tg_device_thread_submit(tg_device *d, tg_device_task fn, void *arg);
tg_status tg_device_thread_record(tg_device *d, tg_event *e);
tg_status tg_device_thread_wait(tg_device *d, tg_event *e);

/* Kind constructors (host.c, sim.c): fill d->iface, context, cost; the registry sets the
 * rest. */
tg_status tg_device_host_init(tg_device *d);
tg_status tg_device_sim_init(tg_device *d);
/* Sim settings as read from the environment, for errors at registry build time. */
tg_status tg_device_sim_settings(double *latency_s, double *bytes_per_s, bool *protect);

#endif
