/* comm_set.c - the communicators of one pmap call (comm.h, "the communicators of one pmap
 * call"): the call's own, and one per position of nested ranks that reach the call's axis.
 *
 * Entries form a list that only grows, in `head`: an entry is complete before it is
 * published (release), never changes afterwards and lives as long as the set, so readers
 * walk the list without the lock. Making an entry, aborting and resetting take the lock,
 * so an abort either sees an entry (and aborts its communicator) or the entry's maker sees
 * the abort (and hands nothing out). tg_comm_set_get checks the flag before the lock-free
 * walk too: a communicator found after an abort has been aborted by it already.
 */
#include "comm.h"

#include <pthread.h>
#include <stdio.h>

typedef struct entry {
    struct entry *next;
    int nkey;
    int key[TG_COMM_SET_MAX_KEY];
    tg_comm *comm;
} entry;

struct tg_comm_set {
    tg_ctx *ctx;
    int n;                 /* ranks of every communicator */
    int nlocal, base;      /* ranks on this process (n unless the call spans processes) */
    _Atomic(entry *) head; /* newest first */
    pthread_mutex_t mu;    /* guards making entries and the abort below */
    atomic_bool aborted;
    tg_status why;
    char why_msg[TG_ERRMSG_MAX];
    bool *interrupted; /* per rank: its failure came from an abort */
};

tg_comm_set *tg_comm_set_new(tg_ctx *ctx, int n) {
    if (!ctx) ctx = tg_ctx_default();
    TG_ASSERT(n >= 1);
    tg_comm_set *s = tg_mem_calloc(ctx, sizeof *s);
    bool *flags = s ? tg_mem_calloc(ctx, sizeof *flags * (size_t)n) : NULL;
    if (!flags) {
        if (s) tg_mem_free(ctx, s, sizeof *s);
        tg_set_error(TG_ENOMEM, "out of memory: the communicators of a pmap");
        return NULL;
    }
    s->ctx = ctx;
    s->n = n;
    s->nlocal = n;
    s->interrupted = flags;
    atomic_init(&s->head, NULL);
    atomic_init(&s->aborted, false);
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

tg_comm_set *tg_comm_set_new_spanning(tg_ctx *ctx, int n, int nlocal, int base) {
    tg_comm_set *s = tg_comm_set_new(ctx, n);
    if (s) {
        s->nlocal = nlocal;
        s->base = base;
    }
    return s;
}

void tg_comm_set_free(tg_comm_set *s) {
    if (!s) return;
    for (entry *e = atomic_load(&s->head), *next; e; e = next) {
        next = e->next;
        tg_comm_free(e->comm);
        tg_mem_free(s->ctx, e, sizeof *e);
    }
    pthread_mutex_destroy(&s->mu);
    tg_mem_free(s->ctx, s->interrupted, sizeof *s->interrupted * (size_t)s->n);
    tg_mem_free(s->ctx, s, sizeof *s);
}

static entry *find(entry *e, const int *key, int nkey) {
    for (; e; e = e->next)
        if (e->nkey == nkey && (nkey == 0 || memcmp(e->key, key, sizeof *key * (size_t)nkey) == 0))
            return e;
    return NULL;
}

static tg_status refused(tg_comm_set *s) {
    return tg_set_error(s->why, "collective aborted: %s", s->why_msg);
}

tg_status tg_comm_set_get(tg_comm_set *s, const int *key, int nkey, tg_comm **out) {
    TG_ASSERT(nkey >= 0 && nkey <= TG_COMM_SET_MAX_KEY);
    *out = NULL;
    if (atomic_load_explicit(&s->aborted, memory_order_acquire)) {
        pthread_mutex_lock(&s->mu); /* why_msg is written under the lock */
        tg_status st = refused(s);
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    entry *e = find(atomic_load_explicit(&s->head, memory_order_acquire), key, nkey);
    if (e) {
        *out = e->comm;
        return TG_OK;
    }
    pthread_mutex_lock(&s->mu);
    tg_status st = TG_OK;
    if (atomic_load(&s->aborted)) {
        st = refused(s);
    } else if (s->n > TG_COMM_MAX_RANKS) {
        st = tg_set_error(TG_ELIMIT, "a collective between %d ranks: at most %d can talk", s->n,
                          TG_COMM_MAX_RANKS);
    } else if (s->nlocal < s->n && nkey > 0) {
        st = tg_set_error(TG_EUNSUPPORTED,
                          "a collective over the axis of a pmap that spans processes, from a pmap "
                          "nested in its body: not supported");
    } else if ((e = find(atomic_load(&s->head), key, nkey)) == NULL) {
        e = tg_mem_calloc(s->ctx, sizeof *e);
        tg_comm *c = NULL;
        if (e && s->nlocal < s->n)
            st = tg_comm_new_spanning(s->ctx, s->n, s->nlocal, s->base, &c);
        else if (e)
            c = tg_comm_new(s->ctx, s->n);
        if (c) {
            e->nkey = nkey;
            if (nkey) memcpy(e->key, key, sizeof *key * (size_t)nkey);
            e->comm = c;
            e->next = atomic_load(&s->head);
            atomic_store_explicit(&s->head, e, memory_order_release);
        } else {
            if (e) tg_mem_free(s->ctx, e, sizeof *e);
            e = NULL;
            if (st == TG_OK)
                st = tg_set_error(TG_ENOMEM, "out of memory: a communicator of %d ranks", s->n);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (e) *out = e->comm;
    return st;
}

void tg_comm_set_abort(tg_comm_set *s, tg_status why) {
    TG_ASSERT(why != TG_OK);
    pthread_mutex_lock(&s->mu);
    if (!atomic_load(&s->aborted)) {
        s->why = why;
        snprintf(s->why_msg, sizeof s->why_msg, "%s", tg_last_error());
        atomic_store_explicit(&s->aborted, true, memory_order_release);
    }
    for (entry *e = atomic_load(&s->head); e; e = e->next) tg_comm_abort(e->comm, why);
    pthread_mutex_unlock(&s->mu);
}

bool tg_comm_set_aborted(tg_comm_set *s) {
    return atomic_load_explicit(&s->aborted, memory_order_acquire);
}

void tg_comm_set_note_interrupted(tg_comm_set *s, int rank) {
    TG_ASSERT(rank >= 0 && rank < s->n);
    s->interrupted[rank] = true;
}

bool tg_comm_set_interrupted(const tg_comm_set *s, int rank) { return s->interrupted[rank]; }

void tg_comm_set_reset(tg_comm_set *s) {
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->aborted)) {
        for (entry *e = atomic_load(&s->head); e; e = e->next) tg_comm_reset(e->comm);
        memset(s->interrupted, 0, sizeof *s->interrupted * (size_t)s->n);
    }
    atomic_store(&s->aborted, false);
    pthread_mutex_unlock(&s->mu);
}

void tg_comm_set_drain(tg_comm_set *s, int rank) {
    for (entry *e = atomic_load_explicit(&s->head, memory_order_acquire); e; e = e->next)
        tg_comm_drain(e->comm, rank, true);
}
