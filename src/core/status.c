/* status.c - status codes and the thread-local last-error message.
 *
 * Owns: tg_status_str (generated from TG_STATUS_LIST), the per-thread error buffer behind
 * tg_last_error / tg_set_error, and tg_bug (the only abort() in tgraph, for its own bugs).
 * Invariants: the error buffer is always NUL-terminated and is the only mutable state
 * outside explicit objects; messages longer than TG_ERRMSG_MAX - 1 bytes are truncated.
 */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>

static _Thread_local char last_error[TG_ERRMSG_MAX];

#define TG_X_STATUS_STR(name, msg) [TG_##name] = msg,
static const char *const status_strs[TG_STATUS_COUNT] = {TG_STATUS_LIST(TG_X_STATUS_STR)};
#undef TG_X_STATUS_STR

const char *tg_status_str(tg_status s) {
    if ((int)s < 0 || (int)s >= TG_STATUS_COUNT) return "unknown status";
    return status_strs[s];
}

const char *tg_last_error(void) { return last_error; }

tg_status tg_set_errorv(tg_status st, const char *fmt, va_list ap) {
    /* Format into a scratch buffer first: the arguments may point into last_error itself
     * (adding context to a previous message), and vsnprintf must not overlap. */
    char tmp[TG_ERRMSG_MAX];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0) snprintf(tmp, sizeof tmp, "%s (message could not be formatted)", tg_status_str(st));
    memcpy(last_error, tmp, strlen(tmp) + 1);
    return st;
}

tg_status tg_set_error(tg_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tg_set_errorv(st, fmt, ap);
    va_end(ap);
    return st;
}

_Noreturn void tg_bug(const char *file, int line, const char *expr) {
    fprintf(stderr, "tgraph internal error: %s:%d: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}
