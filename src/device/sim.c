/* sim.c - `sim:K`, a simulated accelerator: the stand-in for a GPU until one can be
 * tested. Its memory is the device's own (each allocation its own anonymous mapping, never
 * the host's heap, so it starts zeroed), its queue runs on its own thread, and its transfers take
 * the time a bus would: the latency plus bytes over the bandwidth, measured from the start of the
 * copy and slept away after it.
 *
 * Settings (read when the registry is built; docs/devices.md):
 *  TGRAPH_SIM_LATENCY_US  latency of one transfer in microseconds, default 10
 *  TGRAPH_SIM_GBPS        bandwidth in gigabytes per second, default 16
 *  TGRAPH_SIM_PROTECT     1: protect sim memory (the default in checked builds, NDEBUG
 *                         unset), 0: do not
 *
 * Invariants: with protection, every mapping is PROT_NONE except while a copy of a queue
 * or a kernel run by the queue (tg_device_open) works on it: `opens` counts those copies (a peer
 * copy opens memory of another sim from this device's thread) and the mapping is readable and
 * writable exactly while it is positive. A host read of sim memory then faults (SIGSEGV), which is
 * what makes a missing transfer visible in tests. The list of mappings is guarded by the device's
 * mutex.
 */
#include "device.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_LATENCY_US 10.0
#define DEFAULT_GBPS       16.0

typedef struct mapping {
    void *p;
    size_t size; /* of the mapping, whole pages */
    int opens;   /* copies working on it now */
    struct mapping *next;
} mapping;

typedef struct sim {
    double latency_s, bytes_per_s;
    bool protect;
    pthread_mutex_t mu;
    mapping *maps;
} sim;

static tg_status env_double(const char *var, double def, double lo, double hi, double *out) {
    const char *s = getenv(var);
    *out = def;
    if (!s || !*s) return TG_OK;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= lo && v <= hi))
        return tg_set_error(TG_EINVAL, "%s=\"%s\": expected a number from %g to %g", var, s, lo,
                            hi);
    *out = v;
    return TG_OK;
}

tg_status tg_device_sim_settings(double *latency_s, double *bytes_per_s, bool *protect) {
    double us, gbps, prot;
#ifdef NDEBUG
    double prot_default = 0;
#else
    double prot_default = 1;
#endif
    tg_status st = env_double("TGRAPH_SIM_LATENCY_US", DEFAULT_LATENCY_US, 0, 1e7, &us);
    if (st == TG_OK) st = env_double("TGRAPH_SIM_GBPS", DEFAULT_GBPS, 1e-3, 1e6, &gbps);
    if (st == TG_OK) st = env_double("TGRAPH_SIM_PROTECT", prot_default, 0, 1, &prot);
    if (st != TG_OK) return st;
    if (prot != 0 && prot != 1)
        return tg_set_error(TG_EINVAL, "TGRAPH_SIM_PROTECT: expected 0 or 1");
    *latency_s = us * 1e-6;
    *bytes_per_s = gbps * 1e9;
    *protect = prot == 1;
    return TG_OK;
}

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static void *sim_alloc(tg_device *d, size_t nbytes) {
    sim *s = d->context;
    size_t pg = page_size(), size;
    if (!tg_size_add(nbytes ? nbytes : 1, pg - 1, &size)) {
        tg_set_error(TG_ENOMEM, "out of memory: %zu bytes on device %s", nbytes, d->name);
        return NULL;
    }
    size = size / pg * pg;
    mapping *m = malloc(sizeof *m);
    void *p = mmap(NULL, size, s->protect ? PROT_NONE : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!m || p == MAP_FAILED) {
        free(m);
        if (p != MAP_FAILED) munmap(p, size);
        tg_set_error(TG_ENOMEM, "out of memory: %zu bytes on device %s", nbytes, d->name);
        return NULL;
    }
    *m = (mapping){p, size, 0, NULL};
    pthread_mutex_lock(&s->mu);
    m->next = s->maps;
    s->maps = m;
    pthread_mutex_unlock(&s->mu);
    return p;
}

static void sim_free(tg_device *d, void *p, size_t nbytes) {
    sim *s = d->context;
    pthread_mutex_lock(&s->mu);
    mapping **at = &s->maps;
    while (*at && (*at)->p != p) at = &(*at)->next;
    mapping *m = *at;
    if (m) *at = m->next;
    pthread_mutex_unlock(&s->mu);
    if (!m) return; /* not ours: a caller's bug that must not unmap anything else */
    munmap(m->p, m->size);
    free(m);
}

/* Opens (delta 1) or closes (-1) the mapping of d that holds [p, p + n). */
static void sim_access(tg_device *d, const void *p, size_t n, int delta) {
    sim *s = d->context;
    if (!s->protect || n == 0) return;
    pthread_mutex_lock(&s->mu);
    for (mapping *m = s->maps; m; m = m->next) {
        if ((const char *)p < (char *)m->p || (const char *)p >= (char *)m->p + m->size) continue;
        int was = m->opens;
        m->opens += delta;
        if (was == 0 && m->opens == 1) mprotect(m->p, m->size, PROT_READ | PROT_WRITE);
        if (was == 1 && m->opens == 0) mprotect(m->p, m->size, PROT_NONE);
        break;
    }
    pthread_mutex_unlock(&s->mu);
}

static struct timespec now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t;
}

/* Sleeps until `seconds` after t0: the time the transfer would take. */
static void pace(struct timespec t0, double seconds) {
    double end = (double)t0.tv_sec + (double)t0.tv_nsec * 1e-9 + seconds;
    struct timespec until;
    until.tv_sec = (time_t)end;
    until.tv_nsec = (long)((end - (double)until.tv_sec) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_nsec = 999999999L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
}

static double transfer_time(const sim *s, size_t n) {
    return s->latency_s + (double)n / s->bytes_per_s;
}

static void sim_copy_in(tg_device *d, void *dst, const void *src, size_t n) {
    struct timespec t0 = now();
    sim_access(d, dst, n, 1);
    memcpy(dst, src, n);
    sim_access(d, dst, n, -1);
    pace(t0, transfer_time(d->context, n));
}

static void sim_copy_out(tg_device *d, void *dst, const void *src, size_t n) {
    struct timespec t0 = now();
    sim_access(d, src, n, 1);
    memcpy(dst, src, n);
    sim_access(d, src, n, -1);
    pace(t0, transfer_time(d->context, n));
}

/* From another sim (or within d): paced by d's link. */
static void sim_copy_peer(tg_device *d, void *dst, tg_device *src_dev, const void *src, size_t n) {
    struct timespec t0 = now();
    sim_access(d, dst, n, 1);
    sim_access(src_dev, src, n, 1);
    memmove(dst, src, n);
    sim_access(src_dev, src, n, -1);
    sim_access(d, dst, n, -1);
    pace(t0, transfer_time(d->context, n));
}

/* Kernels on a sim device are the host's, run by its queue thread on memory opened around
 * them (sim_open): every op. */
static bool sim_supports_op(const tg_device *d, int op) {
    (void)d;
    (void)op;
    return true;
}

static void sim_open(tg_device *d, const void *p, size_t n) { sim_access(d, p, n, 1); }
static void sim_close(tg_device *d, const void *p, size_t n) { sim_access(d, p, n, -1); }

static void sim_fini(tg_device *d) {
    sim *s = d->context;
    if (!s) return;
    for (mapping *m = s->maps, *next; m; m = next) {
        next = m->next;
        munmap(m->p, m->size);
        free(m);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
    d->context = NULL;
}

static const tg_device_iface sim_iface = {
    .alloc = sim_alloc,
    .free = sim_free,
    .copy_in = sim_copy_in,
    .copy_out = sim_copy_out,
    .copy_peer = sim_copy_peer,
    .submit = tg_device_thread_submit,
    .record = tg_device_thread_record,
    .wait = tg_device_thread_wait,
    .supports_op = sim_supports_op,
    .open = sim_open,
    .close = sim_close,
    .fini = sim_fini,
};

tg_status tg_device_sim_init(tg_device *d) {
    sim *s = calloc(1, sizeof *s);
    if (!s) return tg_set_error(TG_ENOMEM, "out of memory: device %s", d->name);
    tg_status st = tg_device_sim_settings(&s->latency_s, &s->bytes_per_s, &s->protect);
    if (st != TG_OK) {
        free(s);
        return st;
    }
    pthread_mutex_init(&s->mu, NULL);
    d->iface = &sim_iface;
    d->context = s;
    d->cost = (tg_device_cost){
        .latency_s = s->latency_s, .bytes_per_s = s->bytes_per_s, .compute_speed = 1.0};
    return TG_OK;
}
