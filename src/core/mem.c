/* mem.c - contexts (the allocator hook) and the tg_mem_* wrappers every allocation uses.
 *
 * Owns: tg_ctx_new/free, tg_ctx_default, tg_mem_alloc/calloc/realloc/free/strdup and the
 * overflow-checked size helpers.
 * Invariants:
 *  - A NULL ctx means tg_ctx_default(), a static context that is never written.
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
static const tg_ctx default_ctx = {default_alloc, NULL};

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
    return ctx;
}

void tg_ctx_free(tg_ctx *ctx) {
    if (!ctx || ctx == &default_ctx) return;
    tg_alloc_fn alloc = ctx->alloc;
    alloc(ctx->ud, ctx, sizeof *ctx, 0);
}

static size_t real_size(size_t n) { return n ? n : 1; }

void *tg_mem_alloc(tg_ctx *ctx, size_t n) {
    ctx = resolve(ctx);
    void *p = ctx->alloc(ctx->ud, NULL, 0, real_size(n));
    if (!p) tg_set_error(TG_ENOMEM, "out of memory allocating %zu bytes", n);
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
    void *q = ctx->alloc(ctx->ud, p, real_size(osize), real_size(nsize));
    if (!q) tg_set_error(TG_ENOMEM, "out of memory reallocating %zu bytes", nsize);
    return q; /* on failure p is still valid and owned by the caller */
}

void tg_mem_free(tg_ctx *ctx, void *p, size_t size) {
    if (!p) return;
    ctx = resolve(ctx);
    ctx->alloc(ctx->ud, p, real_size(size), 0);
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
