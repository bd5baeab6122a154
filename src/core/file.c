/* file.c - writing files whole or not at all.
 *
 * Owns: tg_xfsz_begin/tg_xfsz_end (a write past the file-size limit, `ulimit -f`, fails
 * with EFBIG instead of killing the process: SIGXFSZ is held back in the calling thread
 * while the library writes) and tg_file_tmp_name (the temporary file an atomic write goes
 * to, in the destination's directory, renamed into place when complete).
 *
 * Invariants: the calling thread's signal mask is the same after tg_xfsz_end as before
 * tg_xfsz_begin; a SIGXFSZ raised by the writes in between is discarded, one that was
 * pending before is left pending.
 */
#include "core.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

void tg_xfsz_begin(tg_xfsz *x) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGXFSZ);
    x->was_pending = false;
    if (pthread_sigmask(SIG_BLOCK, &s, &x->old) != 0) return;
    sigset_t p;
    x->was_pending = sigpending(&p) == 0 && sigismember(&p, SIGXFSZ) == 1;
}

void tg_xfsz_end(tg_xfsz *x) {
    if (sigismember(&x->old, SIGXFSZ) != 1 && !x->was_pending) {
        sigset_t s, p;
        sigemptyset(&s);
        sigaddset(&s, SIGXFSZ);
        if (sigpending(&p) == 0 && sigismember(&p, SIGXFSZ) == 1) {
            const struct timespec zero = {0, 0};
            int saved = errno;
            while (sigtimedwait(&s, NULL, &zero) < 0 && errno == EINTR) continue;
            errno = saved;
        }
    }
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &x->old, NULL);
    errno = saved;
}

bool tg_file_tmp_name(char *buf, size_t n, const char *path) {
    static _Atomic unsigned long counter;
    unsigned long k = atomic_fetch_add(&counter, 1);
    int w = snprintf(buf, n, "%s.tmp.%ld.%lu", path, (long)getpid(), k);
    return w > 0 && (size_t)w < n;
}
