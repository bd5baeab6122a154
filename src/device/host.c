/* host.c - the host's devices: `cpu` (the whole pool) and the virtual host devices
 * `cpu:i` (a share of its threads). Their memory is the host's (tg_mem_alloc from the
 * default context, 64-byte aligned as tg_buffer_new's), so every copy is a memcpy and
 * every op runs: the kernels of the VM and the reference kernels are host code.
 */
#include "device.h"

#define HOST_ALIGN 64

/* A block is [pad][size_t offset back to the start][data], data aligned to HOST_ALIGN. */
static void *host_alloc(tg_device *d, size_t nbytes) {
    size_t n;
    if (!tg_size_add(nbytes, HOST_ALIGN + sizeof(size_t), &n)) {
        tg_set_error(TG_ENOMEM, "out of memory: %zu bytes on device %s", nbytes, d->name);
        return NULL;
    }
    char *raw = tg_mem_alloc(tg_ctx_default(), n);
    if (!raw) return NULL;
    uintptr_t start = (uintptr_t)(raw + sizeof(size_t));
    char *p = (char *)((start + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN);
    size_t back = (size_t)(p - raw);
    memcpy(p - sizeof back, &back, sizeof back);
    memset(p, 0, nbytes);
    return p;
}

static void host_free(tg_device *d, void *p, size_t nbytes) {
    size_t back;
    memcpy(&back, (char *)p - sizeof back, sizeof back);
    tg_mem_free(tg_ctx_default(), (char *)p - back, nbytes + HOST_ALIGN + sizeof(size_t));
}

static void host_copy(tg_device *d, void *dst, const void *src, size_t n) { memcpy(dst, src, n); }

static void host_copy_peer(tg_device *d, void *dst, tg_device *src_dev, const void *src, size_t n) {
    memcpy(dst, src, n);
}

static bool host_supports_op(const tg_device *d, int op) { return op >= 0; }

static const tg_device_iface host_iface = {
    .alloc = host_alloc,
    .free = host_free,
    .copy_in = host_copy,
    .copy_out = host_copy,
    .copy_peer = host_copy_peer,
    .submit = tg_device_thread_submit,
    .record = tg_device_thread_record,
    .wait = tg_device_thread_wait,
    .supports_op = host_supports_op,
    .fini = NULL,
};

tg_status tg_device_host_init(tg_device *d) {
    d->iface = &host_iface;
    d->context = NULL;
    /* one address space: a transfer is a memcpy (a rough figure for placement) */
    d->cost = (tg_device_cost){.latency_s = 0, .bytes_per_s = 10e9, .compute_speed = 1.0};
    return TG_OK;
}
