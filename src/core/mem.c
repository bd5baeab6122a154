/* mem.c - contexts (the allocator hook) and the tg_mem_* wrappers every allocation uses.
 *
 * Owns: tg_ctx_new/free, tg_ctx_default, the memory cap (tg_ctx_set_mem_limit, _mem_used,
 * _mem_peak), tg_mem_alloc/calloc/realloc/free/strdup and the overflow-checked size helpers.
 * Invariants:
 *  - A NULL ctx means tg_ctx_default(), a static context that is never written (so it
 *    counts nothing and has no cap).
 *  - Any other context counts the bytes it has live (requested sizes, after the 1-byte
 *    rounding below), atomically, so threads may share it. An allocation that would take
 *    the count past the limit fails before the allocator is called, with TG_ENOMEM and a
 *    message naming the cap; callers cannot tell it from a refused allocation.
 *  - The allocator is never asked for 0 bytes: a zero-size request is served as a 1-byte
 *    block (a valid, unique pointer), and freeing it passes osize 1, so a user allocator
 *    always sees matching sizes.
 *  - Every failure sets the last error (TG_ENOMEM) and returns NULL.
 */
#include "core.h"

#include <stdlib.h>

static void *default_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    TG_UNUSED(ud);
    TG_UNUSED(osize);
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
}

/* Read-only: returned without const because the API takes tg_ctx *, never written. */
static const tg_ctx default_ctx = {.alloc = default_alloc, .ud = NULL};

tg_ctx *tg_ctx_default(void) { return (tg_ctx *)&default_ctx; }

static tg_ctx *resolve(tg_ctx *ctx) { return ctx ? ctx : tg_ctx_default(); }

tg_ctx *tg_ctx_new(tg_alloc_fn alloc, void *ud) {
    if (!alloc) {
        alloc = default_alloc;
        ud = NULL;
    }
    tg_ctx *ctx = alloc(ud, NULL, 0, sizeof *ctx);
    if (!ctx) {
        tg_set_error(TG_ENOMEM, "out of memory allocating %zu bytes for a context", sizeof *ctx);
        return NULL;
    }
    ctx->alloc = alloc;
    ctx->ud = ud;
    ctx->limit = 0;
    atomic_init(&ctx->used, 0);
    atomic_init(&ctx->peak, 0);
    return ctx;
}

void tg_ctx_free(tg_ctx *ctx) {
    if (!ctx || ctx == &default_ctx) return;
    tg_alloc_fn alloc = ctx->alloc;
    alloc(ctx->ud, ctx, sizeof *ctx, 0);
}

tg_status tg_ctx_set_mem_limit(tg_ctx *ctx, size_t bytes) {
    if (!ctx || ctx == &default_ctx)
        return tg_set_error(TG_EINVAL, "tg_ctx_set_mem_limit: the default context cannot have "
                                       "a memory limit (make one with tg_ctx_new)");
    ctx->limit = bytes;
    return TG_OK;
}

size_t tg_ctx_mem_used(const tg_ctx *ctx) {
    return ctx ? atomic_load_explicit(&((tg_ctx *)ctx)->used, memory_order_relaxed) : 0;
}

size_t tg_ctx_mem_peak(const tg_ctx *ctx) {
    return ctx ? atomic_load_explicit(&((tg_ctx *)ctx)->peak, memory_order_relaxed) : 0;
}

/* Counts `add` more live bytes; false (error set) when that would pass the cap. */
static bool reserve(tg_ctx *ctx, size_t add) {
    if (ctx == &default_ctx || add == 0) return true;
    size_t cur = atomic_load_explicit(&ctx->used, memory_order_relaxed), next;
    do {
        if (!tg_size_add(cur, add, &next) || (ctx->limit && next > ctx->limit)) {
            tg_set_error(TG_ENOMEM,
                         "out of memory: memory limit of %zu bytes reached (%zu bytes in use, "
                         "%zu more requested; raise it with TGRAPH_MEM_LIMIT or "
                         "tg_ctx_set_mem_limit)",
                         ctx->limit, cur, add);
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(&ctx->used, &cur, next, memory_order_relaxed,
                                                    memory_order_relaxed));
    size_t pk = atomic_load_explicit(&ctx->peak, memory_order_relaxed);
    while (pk < next && !atomic_compare_exchange_weak_explicit(
                            &ctx->peak, &pk, next, memory_order_relaxed, memory_order_relaxed)) {
    }
    return true;
}

static void release(tg_ctx *ctx, size_t n) {
    if (ctx != &default_ctx && n) atomic_fetch_sub_explicit(&ctx->used, n, memory_order_relaxed);
}

static size_t real_size(size_t n) { return n ? n : 1; }

void *tg_mem_alloc(tg_ctx *ctx, size_t n) {
    ctx = resolve(ctx);
    if (!reserve(ctx, real_size(n))) return NULL;
    void *p = ctx->alloc(ctx->ud, NULL, 0, real_size(n));
    if (!p) {
        release(ctx, real_size(n));
        tg_set_error(TG_ENOMEM, "out of memory allocating %zu bytes", n);
    }
    return p;
}

void *tg_mem_calloc(tg_ctx *ctx, size_t n) {
    void *p = tg_mem_alloc(ctx, n);
    if (p) memset(p, 0, real_size(n));
    return p;
}

void *tg_mem_realloc(tg_ctx *ctx, void *p, size_t osize, size_t nsize) {
    if (!p) return tg_mem_alloc(ctx, nsize);
    ctx = resolve(ctx);
    size_t os = real_size(osize), ns = real_size(nsize);
    if (ns > os && !reserve(ctx, ns - os)) return NULL;
    void *q = ctx->alloc(ctx->ud, p, os, ns);
    if (!q) {
        if (ns > os) release(ctx, ns - os);
        tg_set_error(TG_ENOMEM, "out of memory reallocating %zu bytes", nsize);
        return NULL; /* p is still valid and owned by the caller */
    }
    if (ns < os) release(ctx, os - ns);
    return q;
}

void tg_mem_free(tg_ctx *ctx, void *p, size_t size) {
    if (!p) return;
    ctx = resolve(ctx);
    ctx->alloc(ctx->ud, p, real_size(size), 0);
    release(ctx, real_size(size));
}

char *tg_mem_strdup(tg_ctx *ctx, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = tg_mem_alloc(ctx, n);
    if (p) memcpy(p, s, n);
    return p;
}

bool tg_size_mul(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}

bool tg_size_add(size_t a, size_t b, size_t *out) {
    if (b > SIZE_MAX - a) return false;
    *out = a + b;
    return true;
}
