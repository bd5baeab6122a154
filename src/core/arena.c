/* arena.c - bump allocation in growing chunks, released all at once (graphs use one).
 *
 * Owns: tg_arena_init/fini/alloc/strdup/memdup.
 * Invariants:
 *  - Chunks come from the arena's ctx; each records its own allocation size so fini
 *    frees exactly what was allocated. a->head is the chunk being bumped; a->used/a->cap
 *    describe its usable region, which starts 16-byte aligned whatever the allocator gives.
 *  - Ordinary chunks double in size (from TG_ARENA_FIRST up to TG_ARENA_MAX_CHUNK); a
 *    request larger than a quarter of the next chunk gets a chunk of its own, linked behind
 *    the head so the head's free space stays usable.
 *  - Every returned block is 16-byte aligned and zeroed; sizes are overflow-checked.
 */
#include "core.h"

#include <stdint.h>
#include <sys/mman.h>

#define TG_ARENA_ALIGN     16
#define TG_ARENA_FIRST     ((size_t)4096)
#define TG_ARENA_MAX_CHUNK ((size_t)1 << 24)
#define TG_ARENA_HUGE      ((size_t)4 << 20) /* chunks from this size ask for huge pages */
#define TG_ARENA_HUGE_PAGE ((uintptr_t)2 << 20)

struct tg_arena_chunk {
    tg_arena_chunk *next; /* older chunk */
    size_t alloc_size;    /* bytes obtained from the ctx for this chunk */
    size_t cap;           /* usable bytes at data */
    char *data;           /* 16-byte aligned start of the usable region */
    bool own;             /* holds one large request (not bumped, not a growth step) */
};

void tg_arena_init(tg_arena *a, tg_ctx *ctx) {
    a->ctx = ctx ? ctx : tg_ctx_default();
    a->head = NULL;
    a->used = 0;
    a->cap = 0;
    a->total = 0;
}

void tg_arena_fini(tg_arena *a) {
    tg_arena_chunk *c = a->head;
    while (c) {
        tg_arena_chunk *next = c->next;
        tg_mem_free(a->ctx, c, c->alloc_size);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
    a->cap = 0;
    a->total = 0;
}

/* A zeroed chunk with at least `cap` usable aligned bytes, or NULL (error set). */
static tg_arena_chunk *chunk_new(tg_arena *a, size_t cap) {
    size_t n;
    if (!tg_size_add(sizeof(tg_arena_chunk) + TG_ARENA_ALIGN, cap, &n)) {
        tg_set_error(TG_ENOMEM, "out of memory: arena request of %zu bytes is too large", cap);
        return NULL;
    }
    tg_arena_chunk *c = tg_mem_alloc(a->ctx, n);
    if (!c) return NULL;
#ifdef MADV_HUGEPAGE
    /* a big graph's chunks ask for transparent huge pages: faulting in fresh 4 KiB pages
     * one by one costs more than everything else building or rewriting the graph does */
    if (n >= TG_ARENA_HUGE) {
        uintptr_t lo = ((uintptr_t)c + TG_ARENA_HUGE_PAGE - 1) & ~(TG_ARENA_HUGE_PAGE - 1);
        uintptr_t hi = ((uintptr_t)c + n) & ~(TG_ARENA_HUGE_PAGE - 1);
        if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
#endif
    memset(c, 0, n);
    uintptr_t start = (uintptr_t)(c + 1);
    size_t pad = (TG_ARENA_ALIGN - start % TG_ARENA_ALIGN) % TG_ARENA_ALIGN;
    c->alloc_size = n;
    c->data = (char *)(c + 1) + pad;
    c->cap = n - sizeof *c - pad;
    return c;
}

void *tg_arena_alloc(tg_arena *a, size_t n) {
    size_t need = n ? n : 1;
    if (need > SIZE_MAX - (TG_ARENA_ALIGN - 1)) {
        tg_set_error(TG_ENOMEM, "out of memory: arena request of %zu bytes is too large", n);
        return NULL;
    }
    need = (need + TG_ARENA_ALIGN - 1) & ~(size_t)(TG_ARENA_ALIGN - 1);
    if (a->head && a->cap - a->used >= need) {
        void *p = a->head->data + a->used;
        a->used += need;
        a->total += need;
        return p;
    }
    size_t next = a->head && !a->head->own ? a->head->cap * 2 : TG_ARENA_FIRST;
    if (next > TG_ARENA_MAX_CHUNK) next = TG_ARENA_MAX_CHUNK;
    if (need > next / 4) {
        /* Its own chunk, behind the head, so the head keeps serving small requests. */
        tg_arena_chunk *c = chunk_new(a, need);
        if (!c) return NULL;
        c->own = true;
        if (a->head) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = NULL;
            a->head = c;
            a->used = c->cap; /* full: the next small request starts a normal chunk */
            a->cap = c->cap;
        }
        a->total += need;
        return c->data;
    }
    tg_arena_chunk *c = chunk_new(a, next);
    if (!c) return NULL;
    c->next = a->head;
    a->head = c;
    a->cap = c->cap;
    a->used = need;
    a->total += need;
    return c->data;
}

void *tg_arena_memdup(tg_arena *a, const void *p, size_t n) {
    void *q = tg_arena_alloc(a, n);
    if (q && n) memcpy(q, p, n);
    return q;
}

char *tg_arena_strdup(tg_arena *a, const char *s) { return tg_arena_memdup(a, s, strlen(s) + 1); }
