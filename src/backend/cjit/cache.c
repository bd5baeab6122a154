/* cache.c - the C JIT's compiler driver and its per-user on-disk cache of shared objects.
 *
 * The cache directory is $TGRAPH_CACHE_DIR, else $XDG_CACHE_HOME/tgraph, else
 * ~/.cache/tgraph. It is created with mode 0700 and refused when it is not a directory,
 * is owned by another user, or is writable by group or others: loading a .so that someone
 * else could have written is running their code. A symbolic link is resolved once and the
 * directory it leads to is checked and used (never the link again during a build).
 *
 * An entry is <key>.so with its source <key>.c beside it, where key is a 128-bit hash of
 * the emitted source (which includes tg_rt.h, hence the runtime ABI), the compiler's
 * identity (`cc --version`), the command and flags, the CPU (model and feature flags:
 * -march=native code is for this CPU), and the tgraph version. A
 * <ref>.ref file, ref being the same hash without the compiler (command and identity),
 * names the entry last built for that source and flags: a run whose compiler cannot be
 * run (missing, or TGRAPH_CC=/bin/false) still finds it, so a warm cache needs no
 * compiler. The compiled unit ends with two strings, tg_cj_key and tg_cj_ref, compared
 * with the key and ref looked for right after dlopen and before any generated function
 * runs: an entry swapped for another's (copied over, or a .ref naming another entry) is
 * not used but rebuilt, as a corrupt one is.
 *
 * Writers never lock: each writes temporary files (tmp.<pid>.<n>.*) in the directory and
 * rename()s them into place, so a reader sees a whole entry or none, and two processes
 * building the same entry both succeed (the last rename wins; both files are valid).
 * Every .so ends with a trailer (magic, length, hash of the bytes before it) checked
 * before loading, so a truncated or corrupted entry is detected and rebuilt. A failed
 * build removes its temporary files (the source is kept as <key>.c); SIGXFSZ is held back
 * while building, so a write past `ulimit -f` is an error. Compiles in flight are
 * recorded (fixed slots) for tg_cache_interrupt, which a signal handler may call to stop
 * their compilers and remove their files.
 *
 * Compiler: $TGRAPH_CC (default `cc`, may hold arguments, split at spaces), flags
 * $TGRAPH_CFLAGS (default -O3 -march=native, plus -mprefer-vector-width=512 on CPUs with
 * AVX-512), always with -std=c11 -fPIC -shared
 * -ffp-contract=off -fno-math-errno first (no contraction into FMA: results must equal
 * the reference's roundings; the user's flags come after and may override). It runs in a
 * process group of its own, for at most $TGRAPH_CC_TIMEOUT seconds (default 60; 0: no
 * limit; `--version` at most 10), after which the whole group is killed and the build
 * fails (the caller falls back to the VM).
 */
#include "cjit.h"
#include "../../parallel/parallel.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_ARGS      64
#define TRAILER_MAGIC "TGCJSO01"
#define TRAILER_LEN   24

static const char *const required_flags =
    "-std=c11 -fPIC -shared -ffp-contract=off -fno-math-errno";
static const char *const default_flags = "-O3 -march=native";

/* ---- hashing (FNV-1a, two lanes) ---- */

typedef struct hash128 {
    uint64_t a, b;
} hash128;

static void hash_init(hash128 *h) {
    h->a = 0xcbf29ce484222325ull;
    h->b = 0x84222325cbf29ce4ull;
}

static void hash_bytes(hash128 *h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ c[i]) * 0x100000001b3ull;
        h->b = (h->b ^ c[i] ^ (h->a >> 29)) * 0x100000001b3ull;
    }
}

static void hash_str(hash128 *h, const char *s) { hash_bytes(h, s, strlen(s) + 1); }

static uint64_t hash64(const void *p, size_t n) {
    hash128 h;
    hash_init(&h);
    hash_bytes(&h, p, n);
    return h.a ^ (h.b << 1);
}

/* ---- the directory ---- */

static tg_status mkdir_private(const char *path) {
    if (mkdir(path, 0700) == 0 || errno == EEXIST) return TG_OK;
    return tg_set_error(TG_ECHECK, "cannot create the cache directory %s: %s", path,
                        strerror(errno));
}

tg_status tg_cj_cache_dir(char *buf, size_t n, bool create) {
    const char *env = getenv("TGRAPH_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int w;
    char parent[4096] = "";
    if (env && *env) {
        w = snprintf(buf, n, "%s", env);
    } else if (xdg && *xdg == '/') {
        snprintf(parent, sizeof parent, "%s", xdg);
        w = snprintf(buf, n, "%s/tgraph", xdg);
    } else if (home && *home) {
        snprintf(parent, sizeof parent, "%s/.cache", home);
        w = snprintf(buf, n, "%s/.cache/tgraph", home);
    } else {
        return tg_set_error(TG_ECHECK, "no cache directory: set XDG_CACHE_HOME or HOME");
    }
    if (w < 0 || (size_t)w >= n) return tg_set_error(TG_ECHECK, "cache directory path too long");
    if (create) {
        tg_status st;
        if (parent[0] && (st = mkdir_private(parent)) != TG_OK) return st;
        if ((st = mkdir_private(buf)) != TG_OK) return st;
    }
    /* the rule, in every refusal */
    static const char *const rule =
        "tgraph requires a directory owned by you that only you can write (mode 0700), "
        "or a symbolic link to one; set TGRAPH_CACHE_DIR to choose another";
    char shown[4200]; /* the directory as messages name it */
    snprintf(shown, sizeof shown, "%s", buf);
    struct stat sb;
    if (lstat(buf, &sb) != 0)
        return tg_set_error(TG_ECHECK, "cache directory %s: %s", buf, strerror(errno));
    if (S_ISLNK(sb.st_mode)) { /* a link: the directory it leads to is checked and used */
        char *real = realpath(buf, NULL);
        if (!real)
            return tg_set_error(TG_ECHECK,
                                "cache directory %s is a symbolic link that leads nowhere (%s): "
                                "refused; %s",
                                buf, strerror(errno), rule);
        snprintf(shown, sizeof shown, "%s (a symbolic link to %s)", buf, real);
        int rw = snprintf(buf, n, "%s", real);
        free(real);
        if (rw < 0 || (size_t)rw >= n)
            return tg_set_error(TG_ECHECK, "cache directory path too long");
        if (lstat(buf, &sb) != 0)
            return tg_set_error(TG_ECHECK, "cache directory %s: %s", shown, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return tg_set_error(TG_ECHECK, "cache directory %s is not a directory: refused; %s", shown,
                            rule);
    if (sb.st_uid != geteuid())
        return tg_set_error(TG_ECHECK,
                            "cache directory %s is owned by another user (uid %u): refused (a "
                            "shared cache would load code others wrote); %s",
                            shown, (unsigned)sb.st_uid, rule);
    if (sb.st_mode & (S_IWGRP | S_IWOTH))
        return tg_set_error(TG_ECHECK,
                            "cache directory %s is writable by %s (mode %03o): refused (others "
                            "could plant code in it); chmod 700 it",
                            shown, sb.st_mode & S_IWOTH ? "others" : "its group",
                            (unsigned)(sb.st_mode & 0777));
    return TG_OK;
}

/* ---- processes ---- */

/* Splits s at blanks into argv[*argc...] (copies go to store, store_n bytes). */
static bool split_args(const char *s, char *store, size_t store_n, char **argv, int *argc) {
    size_t used = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t') s++;
        if (!*s) break;
        if (*argc >= MAX_ARGS - 8) return false;
        argv[(*argc)++] = store + used;
        while (*s && *s != ' ' && *s != '\t') {
            if (used + 2 >= store_n) return false;
            store[used++] = *s++;
        }
        store[used++] = '\0';
    }
    return true;
}

/* ---- compiles in flight, for tg_cache_interrupt ----
 *
 * A signal handler reads these, so they are fixed arrays of atomics and bytes: each slot
 * holds the prefix of a compile's temporary files (dir/tmp.<pid>.<n>.) and the process
 * group of its compiler while one runs. The only other state of this file besides the
 * compiler identity memo; a full table just leaves a compile unregistered. */
#define MAX_FLIGHT 16
#define MAX_PAR    16 /* compilers run at once by one build */
typedef struct flight {
    atomic_int state;         /* 0 free, 1 being filled, 2 set */
    atomic_int pgid[MAX_PAR]; /* the compilers' process groups while they run, else 0 */
    atomic_int nunits;        /* the units of the source (their files: see unit_file) */
    char base[4200];          /* prefix of the temporary files */
} flight;
static flight flights[MAX_FLIGHT];
static const char *const tmp_exts[] = {"c", "so", "log", "ref", "version", "o"};
static const char *const unit_exts[] = {"c", "o", "log"};

static int flight_begin(const char *base) {
    for (int i = 0; i < MAX_FLIGHT; i++) {
        int free_ = 0;
        if (!atomic_compare_exchange_strong(&flights[i].state, &free_, 1)) continue;
        snprintf(flights[i].base, sizeof flights[i].base, "%s", base);
        for (int k = 0; k < MAX_PAR; k++) atomic_store(&flights[i].pgid[k], 0);
        atomic_store(&flights[i].nunits, 1);
        atomic_store(&flights[i].state, 2);
        return i;
    }
    return -1;
}

/* The slot of process group k of flight fl (NULL: none). */
static atomic_int *pg_slot(int fl, int k) { return fl >= 0 ? &flights[fl].pgid[k] : NULL; }

/* The temporary file of unit u (> 0) with extension ext: base<u>.<ext>, written into out
 * (at least strlen(base) + 16 bytes) without stdio (a signal handler calls it). */
static void unit_file(char *out, const char *base, size_t b, int u, const char *ext) {
    memcpy(out, base, b);
    char d[12];
    int nd = 0;
    for (unsigned v = (unsigned)u; v; v /= 10) d[nd++] = (char)('0' + v % 10);
    for (int i = 0; i < nd; i++) out[b + (size_t)i] = d[nd - 1 - i];
    out[b + (size_t)nd] = '.';
    size_t l = strlen(ext);
    memcpy(out + b + (size_t)nd + 1, ext, l + 1);
}

static void flight_end(int i) {
    if (i >= 0) atomic_store(&flights[i].state, 0);
}

void tg_cache_interrupt(void) { /* async-signal-safe: kill, unlink, memcpy */
    for (int i = 0; i < MAX_FLIGHT; i++) {
        flight *f = &flights[i];
        if (atomic_load(&f->state) != 2) continue;
        for (int k = 0; k < MAX_PAR; k++) {
            int pg = atomic_load(&f->pgid[k]);
            if (pg > 0) kill(-pg, SIGKILL);
        }
        char path[4300];
        size_t b = strnlen(f->base, sizeof f->base - 1);
        memcpy(path, f->base, b);
        for (size_t e = 0; e < TG_COUNTOF(tmp_exts); e++) {
            size_t l = strlen(tmp_exts[e]);
            memcpy(path + b, tmp_exts[e], l + 1);
            unlink(path);
        }
        int nu = atomic_load(&f->nunits);
        for (int u = 1; u < nu && u < TG_CJ_MAX_UNITS; u++)
            for (size_t e = 0; e < TG_COUNTOF(unit_exts); e++) {
                unit_file(path, f->base, b, u, unit_exts[e]);
                unlink(path);
            }
    }
}

/* ---- processes ---- */

/* Seconds a compile may take ($TGRAPH_CC_TIMEOUT, default 60; 0: no limit); false with an
 * error when the variable is not a number of seconds. */
static bool cc_timeout(double *out) {
    const char *e = getenv("TGRAPH_CC_TIMEOUT");
    *out = 60;
    if (!e || !*e) return true;
    char *end;
    errno = 0;
    double v = strtod(e, &end);
    if (errno || end == e || *end || !isfinite(v) || v < 0 || v > 1e6) {
        tg_set_error(TG_ECHECK, "TGRAPH_CC_TIMEOUT='%s' is not a number of seconds", e);
        return false;
    }
    *out = v;
    return true;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits at most timeout_s seconds (0: no limit) for pid to end, without reaping it (so
 * its process group cannot be reused before the caller is done with it): true when it
 * ended. */
static bool wait_child(pid_t pid, double timeout_s) {
    siginfo_t info;
    if (timeout_s <= 0) {
        while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0)
            if (errno != EINTR) return true;
        return true;
    }
    double end = now_s() + timeout_s;
    int pfd = -1;
#ifdef SYS_pidfd_open
    pfd = (int)syscall(SYS_pidfd_open, pid, 0); /* readable when pid ends (Linux 5.3) */
#endif
    long nap_us = 200;
    bool ended = false;
    for (;;) {
        info.si_pid = 0;
        int r = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT);
        if ((r == 0 && info.si_pid == pid) || (r < 0 && errno != EINTR)) {
            ended = true;
            break;
        }
        double left = end - now_s();
        if (left <= 0) break;
        if (pfd >= 0) {
            struct pollfd p = {.fd = pfd, .events = POLLIN};
            poll(&p, 1, (int)ceil(left * 1000));
        } else { /* no pidfd: short naps, growing to 20 ms */
            double nap = fmin((double)nap_us * 1e-6, left);
            struct timespec ts = {(time_t)nap, (long)((nap - floor(nap)) * 1e9)};
            nanosleep(&ts, NULL);
            nap_us = nap_us < 20000 ? nap_us * 2 : 20000;
        }
    }
    if (pfd >= 0) close(pfd);
    return ended;
}

enum { RUN_NOSTART = -1, RUN_TIMEOUT = -2 };

/* Starts argv in a process group of its own with stdout and stderr to out_fd (or /dev/null
 * when < 0) and stdin from /dev/null; its group is recorded in *slot (NULL: nowhere) for
 * tg_cache_interrupt. Returns its pid, or -1 when it could not be started. */
static pid_t spawn_proc(char *const *argv, int out_fd, atomic_int *slot) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out_fd >= 0) {
        posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
        posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    } else {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    }
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none;
    sigemptyset(&none); /* not the caller's mask (tg_cj_build holds SIGXFSZ back) */
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&at, 0); /* its own group: a timeout kills all it started */
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0) return -1;
    if (slot) atomic_store(slot, (int)pid);
    return pid;
}

/* Ends the wait for pid (started by spawn_proc with slot): kills its group first unless it
 * ended, forgets the group, then reaps it (so the group id cannot be reused while it is
 * recorded). Returns as run_proc does. */
static int reap_proc(pid_t pid, atomic_int *slot, bool ended) {
    if (!ended) { /* not reaped yet: its group id is still its own */
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
    }
    if (slot) atomic_store(slot, 0);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return RUN_NOSTART;
    if (!ended) return RUN_TIMEOUT;
    if (WIFEXITED(status)) return WEXITSTATUS(status) == 127 ? RUN_NOSTART : WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 128;
}

/* Runs argv as spawn_proc starts it, for at most timeout_s seconds (0: no limit), after
 * which the whole group is killed. Returns the exit status (0 success), 128 + the signal
 * that ended it, RUN_NOSTART when it could not be started, RUN_TIMEOUT when it ran out of
 * time. slot: where the group is recorded for tg_cache_interrupt (NULL: nowhere). */
static int run_proc(char *const *argv, int out_fd, double timeout_s, atomic_int *slot) {
    pid_t pid = spawn_proc(argv, out_fd, slot);
    if (pid < 0) return RUN_NOSTART;
    return reap_proc(pid, slot, wait_child(pid, timeout_s));
}

/* Runs argv[0..n) (their output to fd[u]), at most par at once (par <= MAX_PAR), each in a
 * process group of its own recorded in flight fl, all within one limit of limit_s seconds
 * (0: none). Stops at the first failure: every compiler still running is killed (its
 * whole group) and reaped. Returns 0 when all succeeded, else what run_proc returns for
 * the first that failed (RUN_TIMEOUT when the limit passed), with *bad its index. */
static int run_many(char **const *argv, const int *fd, int n, int par, double limit_s, int fl,
                    int *bad) {
    struct job {
        pid_t pid; /* 0: a free place */
        int pfd;   /* readable when it ends; -1: none */
        int u;
    } job[MAX_PAR];
    for (int k = 0; k < par; k++) job[k] = (struct job){0, -1, -1};
    double end = limit_s > 0 ? now_s() + limit_s : 0;
    int next = 0, running = 0, rc = 0;
    *bad = -1;
    for (;;) {
        for (int k = 0; k < par && rc == 0 && next < n; k++) {
            if (job[k].pid) continue;
            pid_t pid = spawn_proc(argv[next], fd[next], pg_slot(fl, k));
            if (pid < 0) {
                rc = RUN_NOSTART;
                *bad = next;
                break;
            }
            int pfd = -1;
#ifdef SYS_pidfd_open
            pfd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
            job[k] = (struct job){pid, pfd, next++};
            running++;
        }
        if (running == 0) break;
        bool any = false, late = end > 0 && now_s() >= end;
        for (int k = 0; k < par; k++) {
            if (!job[k].pid) continue;
            siginfo_t info;
            info.si_pid = 0;
            int r = waitid(P_PID, (id_t)job[k].pid, &info, WEXITED | WNOHANG | WNOWAIT);
            bool ended = (r == 0 && info.si_pid == job[k].pid) || (r < 0 && errno != EINTR);
            if (!ended && rc == 0 && !late) continue;
            /* ended, or to be stopped: the limit passed or another one failed */
            int x = reap_proc(job[k].pid, pg_slot(fl, k), ended);
            if (x != 0 && rc == 0) {
                rc = x;
                *bad = job[k].u;
            }
            if (job[k].pfd >= 0) close(job[k].pfd);
            job[k] = (struct job){0, -1, -1};
            running--;
            any = true;
        }
        if (rc != 0 && running > 0) continue; /* stop the others now */
        if (rc != 0) break;
        if (any) continue;
        /* none ended: wait for one (or the limit) */
        double left = end > 0 ? end - now_s() : -1;
        struct pollfd p[MAX_PAR];
        int np = 0;
        bool all_fds = true;
        for (int k = 0; k < par; k++) {
            if (!job[k].pid) continue;
            if (job[k].pfd < 0)
                all_fds = false;
            else
                p[np++] = (struct pollfd){.fd = job[k].pfd, .events = POLLIN};
        }
        if (all_fds) {
            poll(p, (nfds_t)np, left < 0 ? -1 : (int)ceil(fmax(left, 0) * 1000));
        } else { /* no pidfd: short naps */
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    return rc;
}

typedef struct compiler {
    char store[4096];
    char *argv[MAX_ARGS];
    int argc;           /* command and flags */
    int ncmd;           /* of which the command */
    char cmdline[1024]; /* TGRAPH_CC as given */
    char flags[1024];   /* the flags as a string */
} compiler;

/* glibc's vector math library (x86-64): the generated loops may call it (tg_rt.h). */
static const char *const mvec_flags = " -DTG_RT_MVEC";
static const char *const mvec_libs = "-l:libmvec.so.1"; /* after the source (--as-needed) */

static bool have_mvec(void) {
#if defined(__x86_64__) && defined(__GLIBC__)
    void *h = dlopen("libmvec.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != NULL;
#else
    return false;
#endif
}

static bool compiler_get(compiler *c) {
    memset(c, 0, sizeof *c);
    const char *cc = getenv("TGRAPH_CC"), *fl = getenv("TGRAPH_CFLAGS");
    if (!cc || !*cc) cc = "cc";
    if (!fl) fl = default_flags;
#if defined(__x86_64__) && defined(__GNUC__)
    /* 512-bit vectors where the CPU has them (as the VM's AVX-512 kernels): the compilers
     * default to 256 bits even with -march=native */
    char wide[256];
    if (fl == default_flags && __builtin_cpu_supports("avx512f")) {
        snprintf(wide, sizeof wide, "%s -mprefer-vector-width=512", default_flags);
        fl = wide;
    }
#endif
    snprintf(c->cmdline, sizeof c->cmdline, "%s", cc);
    snprintf(c->flags, sizeof c->flags, "%s%s %s", required_flags, have_mvec() ? mvec_flags : "",
             fl);
    if (!split_args(cc, c->store, sizeof c->store / 2, c->argv, &c->argc) || c->argc == 0)
        return false;
    c->ncmd = c->argc;
    return split_args(c->flags, c->store + sizeof c->store / 2, sizeof c->store / 2, c->argv,
                      &c->argc);
}

/* The compiler's identity: the output of `cc --version`, memoized per command for the
 * life of the process (guarded). ID_NONE when it cannot be run, ID_TIMEOUT when it did not
 * answer within VERSION_TIMEOUT seconds (or the compile limit, when lower). */
#define VERSION_TIMEOUT 10.0
enum { ID_NONE = 0, ID_OK = 1, ID_TIMEOUT = 2 };
static pthread_mutex_t id_mu = PTHREAD_MUTEX_INITIALIZER;
static char id_cmd[1024], id_text[2048];
static int id_ok = -1;

static unsigned long tmp_counter(void) {
    static _Atomic unsigned long counter;
    return atomic_fetch_add(&counter, 1);
}

static int compiler_identity(const compiler *c, const char *dir, double limit, char *out,
                             size_t n) {
    pthread_mutex_lock(&id_mu);
    if (id_ok >= 0 && strcmp(id_cmd, c->cmdline) == 0) {
        snprintf(out, n, "%s", id_text);
        int ok = id_ok;
        pthread_mutex_unlock(&id_mu);
        return ok;
    }
    char *argv[MAX_ARGS];
    int argc = 0;
    for (int i = 0; i < c->ncmd; i++) argv[argc++] = c->argv[i];
    argv[argc++] = "--version";
    argv[argc] = NULL;
    char base[4200], tmp[4300];
    snprintf(base, sizeof base, "%s/tmp.%ld.%lu.", dir, (long)getpid(), tmp_counter());
    snprintf(tmp, sizeof tmp, "%sversion", base);
    int fl = flight_begin(base);
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int ok = ID_NONE;
    id_text[0] = '\0';
    if (fd >= 0) {
        double t = limit > 0 && limit < VERSION_TIMEOUT ? limit : VERSION_TIMEOUT;
        int rc = run_proc(argv, fd, t, pg_slot(fl, 0)); /* limited even when compiles are not */
        ok = rc == 0 ? ID_OK : rc == RUN_TIMEOUT ? ID_TIMEOUT : ID_NONE;
        if (ok == ID_OK) {
            ssize_t r = pread(fd, id_text, sizeof id_text - 1, 0);
            id_text[r > 0 ? r : 0] = '\0';
            ok = r > 0 ? ID_OK : ID_NONE;
        }
        close(fd);
        unlink(tmp);
    }
    flight_end(fl);
    snprintf(id_cmd, sizeof id_cmd, "%s", c->cmdline);
    id_ok = ok;
    snprintf(out, n, "%s", id_text);
    pthread_mutex_unlock(&id_mu);
    return ok;
}

/* The machine's CPU (model and feature flags of the first CPU in /proc/cpuinfo): code
 * built with -march=native on one CPU may not run on another sharing the home directory,
 * so it is part of the key. "" where there is no /proc/cpuinfo. */
static void cpu_identity(char *out, size_t n) {
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192];
    size_t used = 0;
    while (fgets(line, sizeof line, f)) {
        bool model = strncmp(line, "model name", 10) == 0;
        bool flags = strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0;
        if (!model && !flags) continue;
        int w = snprintf(out + used, n - used, "%s", line);
        if (w < 0 || (size_t)w >= n - used) break;
        used += (size_t)w;
        if (flags) break;
    }
    fclose(f);
}

/* ---- files ---- */

static const char *efbig_hint(int err) {
    return err == EFBIG ? " (the file-size limit, ulimit -f)" : "";
}

/* Writes a then b to a new file at path (mode 0600); on failure the file is removed. */
static tg_status write_file(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return tg_set_error(TG_ECHECK, "cannot write %s: %s", path, strerror(errno));
    const void *part[2] = {a, b};
    size_t len[2] = {na, nb};
    int err = 0;
    for (int k = 0; k < 2 && !err; k++) {
        const char *p = part[k];
        size_t n = len[k];
        while (n > 0) {
            ssize_t w = write(fd, p, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                err = w < 0 ? errno : EIO;
                break;
            }
            p += w;
            n -= (size_t)w;
        }
    }
    if (close(fd) != 0 && !err) err = errno;
    if (!err) return TG_OK;
    unlink(path);
    return tg_set_error(TG_ECHECK, "cannot write %s: %s%s", path, strerror(err), efbig_hint(err));
}

/* Reads a whole file (ctx-allocated, *n bytes; free with tg_mem_free(ctx, p, *n + 1)).
 * NULL when it cannot be read, with *oom set (oom may be NULL) when memory ran out. */
static char *read_file(tg_ctx *ctx, const char *path, size_t *n, bool *oom) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > (off_t)1 << 30) {
        close(fd);
        return NULL;
    }
    size_t len = (size_t)sb.st_size, got = 0;
    char *p = tg_mem_alloc(ctx, len + 1);
    while (p && got < len) {
        ssize_t r = read(fd, p + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!p) {
        if (oom) *oom = true;
        return NULL;
    }
    if (got != len) {
        tg_mem_free(ctx, p, len + 1);
        return NULL;
    }
    p[len] = '\0';
    *n = len;
    return p;
}

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Whether the .so at path is whole: 1 when its trailer matches its bytes, 0 when not (or
 * it is missing), -1 when memory ran out reading it. */
static int so_valid(tg_ctx *ctx, const char *path) {
    size_t n = 0;
    bool oom = false;
    char *p = read_file(ctx, path, &n, &oom);
    if (!p) return oom ? -1 : 0;
    bool ok = n > TRAILER_LEN;
    if (ok) {
        const unsigned char *t = (const unsigned char *)p + n - TRAILER_LEN;
        ok = memcmp(t, TRAILER_MAGIC, 8) == 0 && get_u64(t + 8) == n - TRAILER_LEN &&
             get_u64(t + 16) == hash64(p, n - TRAILER_LEN);
    }
    tg_mem_free(ctx, p, n + 1);
    return ok ? 1 : 0;
}

static tg_status append_trailer(tg_ctx *ctx, const char *path) {
    size_t n = 0;
    bool oom = false;
    char *p = read_file(ctx, path, &n, &oom);
    if (!p)
        return oom ? TG_ENOMEM
                   : tg_set_error(TG_ECHECK, "cannot read the compiler's output %s", path);
    unsigned char t[TRAILER_LEN];
    memcpy(t, TRAILER_MAGIC, 8);
    put_u64(t + 8, n);
    put_u64(t + 16, hash64(p, n));
    tg_mem_free(ctx, p, n + 1);
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return tg_set_error(TG_ECHECK, "cannot write %s: %s", path, strerror(errno));
    ssize_t w = write(fd, t, sizeof t);
    int err = w == (ssize_t)sizeof t ? 0 : w < 0 ? errno : EIO;
    if (close(fd) != 0 && !err) err = errno;
    return err ? tg_set_error(TG_ECHECK, "cannot write %s: %s%s", path, strerror(err),
                              efbig_hint(err))
               : TG_OK;
}

/* Loads the entry at path when it is the one built for key and ref (the tg_cj_key and
 * tg_cj_ref strings the compiled unit exports, appended by tg_cj_build): an entry swapped
 * for another's, or of another runtime ABI, is refused before any of its functions runs. */
static bool lib_open(tg_cj_lib *lib, const char *path, const char *key, const char *ref) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    const int *abi = dlsym(h, "tg_cj_abi");
    const char *k = dlsym(h, "tg_cj_key"), *r = dlsym(h, "tg_cj_ref");
    if (!abi || *abi != TG_RT_ABI || !k || !r || strncmp(k, key, 33) != 0 ||
        strncmp(r, ref, 33) != 0) {
        dlclose(h);
        return false;
    }
    lib->handle = h;
    snprintf(lib->path, sizeof lib->path, "%s", path);
    return true;
}

static void hex(const hash128 *h, char *out) {
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h->a, (unsigned long long)h->b);
}

/* The first line of the compiler's messages, for the error. */
static void first_line(tg_ctx *ctx, const char *path, char *out, size_t n) {
    size_t len = 0;
    char *p = read_file(ctx, path, &len, NULL);
    out[0] = '\0';
    if (!p) return;
    const char *s = p;
    const char *err = strstr(p, "error");
    if (err) { /* the line holding the first error */
        s = err;
        while (s > p && s[-1] != '\n') s--;
    }
    size_t k = 0;
    while (s[k] && s[k] != '\n' && k + 1 < n) {
        out[k] = s[k];
        k++;
    }
    out[k] = '\0';
    tg_mem_free(ctx, p, len + 1);
}

/* The error of a compiler run that ended with rc (not 0); line: the first line of its
 * messages; what: "" or " linking"; kept: where the source is kept. */
static tg_status cc_error(const compiler *cc, int rc, const char *line, double limit,
                          const char *what, const char *kept) {
    if (rc == RUN_NOSTART)
        return tg_set_error(TG_ECHECK,
                            "the C compiler '%s' cannot be run; the source is kept in %s",
                            cc->cmdline, kept);
    if (rc == RUN_TIMEOUT)
        return tg_set_error(TG_ECHECK,
                            "the C compiler '%s' did not finish within %g s (TGRAPH_CC_TIMEOUT) "
                            "and was stopped; the source is kept in %s",
                            cc->cmdline, limit, kept);
    if (rc > 128)
        return tg_set_error(TG_ECHECK,
                            "the C compiler '%s' was killed by signal %d%s%s%s; the source is "
                            "kept in %s",
                            cc->cmdline, rc - 128, what, line[0] ? ": " : "", line, kept);
    return tg_set_error(TG_ECHECK,
                        "the C compiler '%s' failed%s (exit %d)%s%s; the source is kept in %s",
                        cc->cmdline, what, rc, line[0] ? ": " : "", line, kept);
}

/* Compiles the unit at tc (the kept source goes to cpath) into tso with the log in tlog;
 * on failure every temporary file is gone and the error names the kept source. */
static tg_status compile(tg_ctx *ctx, const compiler *cc, double limit, int fl, const char *tc,
                         const char *tso, const char *tlog, const char *cpath) {
    char *argv[MAX_ARGS];
    int argc = 0;
    for (int i = 0; i < cc->argc; i++) argv[argc++] = cc->argv[i];
    argv[argc++] = "-o";
    argv[argc++] = (char *)tso;
    argv[argc++] = (char *)tc;
    char libs[64];
    snprintf(libs, sizeof libs, "%s", mvec_libs);
    if (strstr(cc->flags, "-DTG_RT_MVEC")) argv[argc++] = libs;
    argv[argc] = NULL;
    int fd = open(tlog, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd >= 0 ? run_proc(argv, fd, limit, pg_slot(fl, 0)) : RUN_NOSTART;
    if (fd >= 0) close(fd);
    if (rc == 0) {
        unlink(tlog);
        return TG_OK;
    }
    char line[300] = "";
    if (rc != RUN_TIMEOUT) first_line(ctx, tlog, line, sizeof line);
    unlink(tlog);
    unlink(tso);
    if (rename(tc, cpath) != 0) unlink(tc);
    return cc_error(cc, rc, line, limit, "", cpath);
}

/* The temporary file of unit u with extension ext (unit 0: base<ext>, as a one-unit build's). */
static void tmp_unit(char *out, size_t n, const char *base, int u, const char *ext) {
    if (u == 0)
        snprintf(out, n, "%s%s", base, ext);
    else
        unit_file(out, base, strlen(base), u, ext);
}

/* Where unit u's source is kept: stem.c for unit 0, stem.<u>.c for the others. */
static void kept_unit(char *out, size_t n, const char *stem, int u) {
    if (u == 0)
        snprintf(out, n, "%s.c", stem);
    else
        snprintf(out, n, "%s.%d.c", stem, u);
}

/* Compiles units 0..nu-1 (their sources written at tmp_unit(u, "c")) concurrently with
 * `cc -c`, then links the objects into tso, all within limit seconds; stem: where the
 * sources are kept (stem.c, stem.<u>.c). On failure every compiler is stopped, the
 * objects, logs and tso are gone, the sources are kept, and the error names the failing
 * unit's source. */
static tg_status compile_units(tg_ctx *ctx, const compiler *cc, double limit, int fl,
                               const char *base, const char *stem, int nu, const char *tso) {
    typedef struct unit_job {
        char c[4200], o[4200], log[4200];
        char *argv[MAX_ARGS];
        int fd;
    } unit_job;
    int nlink = cc->argc + nu + 4;
    unit_job *J = tg_mem_calloc(ctx, sizeof *J * (size_t)nu);
    char ***argv = tg_mem_calloc(ctx, sizeof *argv * (size_t)nu);
    int *fd = tg_mem_calloc(ctx, sizeof *fd * (size_t)nu);
    char **largv = tg_mem_calloc(ctx, sizeof *largv * (size_t)nlink);
    tg_status st = TG_OK;
    if (!J || !argv || !fd || !largv) st = TG_ENOMEM;
    int rc = 0, bad = 0, nopen = 0; /* units whose log is open */
    bool linking = false;
    double t0 = now_s();
    char libs[64];
    snprintf(libs, sizeof libs, "%s", mvec_libs);
    for (int u = 0; u < nu && st == TG_OK; u++) {
        unit_job *j = &J[u];
        tmp_unit(j->c, sizeof j->c, base, u, "c");
        tmp_unit(j->o, sizeof j->o, base, u, "o");
        tmp_unit(j->log, sizeof j->log, base, u, "log");
        int argc = 0;
        for (int i = 0; i < cc->argc; i++) j->argv[argc++] = cc->argv[i];
        j->argv[argc++] = "-c";
        j->argv[argc++] = "-o";
        j->argv[argc++] = j->o;
        j->argv[argc++] = j->c;
        j->argv[argc] = NULL;
        argv[u] = j->argv;
        fd[u] = j->fd = open(j->log, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (j->fd < 0) {
            rc = RUN_NOSTART;
            bad = -1;
            break;
        }
        nopen++;
    }
    int par = tg_cpu_count();
    if (par > nu) par = nu;
    if (par > MAX_PAR) par = MAX_PAR;
    if (st == TG_OK && rc == 0) rc = run_many(argv, fd, nu, par, limit, fl, &bad);
    if (st == TG_OK && rc == 0) { /* link, within what is left of the limit */
        int argc = 0;
        for (int i = 0; i < cc->argc; i++) largv[argc++] = cc->argv[i];
        largv[argc++] = "-o";
        largv[argc++] = (char *)tso;
        for (int u = 0; u < nu; u++) largv[argc++] = J[u].o;
        if (strstr(cc->flags, "-DTG_RT_MVEC")) largv[argc++] = libs;
        largv[argc] = NULL;
        double left = limit > 0 ? limit - (now_s() - t0) : 0;
        linking = true;
        bad = 0;
        close(J[0].fd); /* the link's messages replace unit 0's */
        J[0].fd = open(J[0].log, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (J[0].fd < 0)
            rc = RUN_NOSTART;
        else if (limit > 0 && left <= 0)
            rc = RUN_TIMEOUT;
        else
            rc = run_proc(largv, J[0].fd, limit > 0 ? left : 0, pg_slot(fl, 0));
    }
    char line[300] = "", kept[4200];
    if (st == TG_OK && rc != 0 && rc != RUN_TIMEOUT && bad >= 0)
        first_line(ctx, J[bad].log, line, sizeof line);
    for (int u = 0; u < nopen; u++) {
        if (J[u].fd >= 0) close(J[u].fd);
        unlink(J[u].log);
        unlink(J[u].o);
    }
    if (st == TG_OK && rc != 0) {
        unlink(tso);
        kept_unit(kept, sizeof kept, stem, rc == RUN_TIMEOUT || bad < 0 || linking ? 0 : bad);
        st = cc_error(cc, rc, line, limit, linking ? " linking" : "", kept);
    }
    tg_mem_free(ctx, J, J ? sizeof *J * (size_t)nu : 0);
    tg_mem_free(ctx, argv, argv ? sizeof *argv * (size_t)nu : 0);
    tg_mem_free(ctx, fd, fd ? sizeof *fd * (size_t)nu : 0);
    tg_mem_free(ctx, largv, largv ? sizeof *largv * (size_t)nlink : 0);
    return st;
}

/* Renames the written sources of units 0..nu-1 to where they are kept (removes them where
 * that fails); false when some rename failed. */
static bool keep_sources(const char *base, const char *stem, int nu) {
    bool ok = true;
    for (int u = 0; u < nu; u++) {
        char tc[4200], kept[4200];
        tmp_unit(tc, sizeof tc, base, u, "c");
        kept_unit(kept, sizeof kept, stem, u);
        if (rename(tc, kept) != 0) {
            unlink(tc);
            ok = false;
        }
    }
    return ok;
}

static tg_status build(tg_ctx *ctx, const tg_cj_unit *units, int nu, tg_cj_lib *out) {
    char dir[3000];
    tg_status st = tg_cj_cache_dir(dir, sizeof dir, true);
    if (st != TG_OK) return st;
    compiler cc;
    if (!compiler_get(&cc))
        return tg_set_error(TG_ECHECK, "TGRAPH_CC or TGRAPH_CFLAGS is too long or empty");
    double limit;
    if (!cc_timeout(&limit)) return TG_ECHECK;
    char id[2048];
    int ident = compiler_identity(&cc, dir, limit, id, sizeof id);
    bool have_cc = ident == ID_OK;
    hash128 ref, key;
    char cpu[4096];
    cpu_identity(cpu, sizeof cpu);
    hash_init(&ref);
    if (nu == 1) {
        hash_bytes(&ref, units[0].p, units[0].n);
    } else { /* every unit, each with its length */
        for (int u = 0; u < nu; u++) {
            uint64_t n = units[u].n;
            hash_bytes(&ref, &n, sizeof n);
            hash_bytes(&ref, units[u].p, units[u].n);
        }
    }
    hash_str(&ref, cpu);
    hash_str(&ref, cc.flags);
    hash_str(&ref, TG_VERSION);
    key = ref;
    hash_str(&key, cc.cmdline);
    hash_str(&key, id);
    char kref[40], kfull[40], path[4096], stem[4096], cpath[4200], refpath[4096];
    hex(&ref, kref);
    hex(&key, kfull);
    snprintf(refpath, sizeof refpath, "%s/%s.ref", dir, kref);
    if (!have_cc) { /* no compiler to ask: the entry last built for this source */
        size_t n = 0;
        bool oom = false;
        char *name = read_file(ctx, refpath, &n, &oom);
        if (oom) return TG_ENOMEM;
        if (name) {
            char kname[40] = "";
            bool okname = n == 32 && strspn(name, "0123456789abcdef") == 32;
            if (okname) {
                snprintf(kname, sizeof kname, "%s", name);
                snprintf(path, sizeof path, "%s/%s.so", dir, name);
                snprintf(out->source, sizeof out->source, "%s/%s.c", dir, name);
            }
            tg_mem_free(ctx, name, n + 1);
            int v = okname ? so_valid(ctx, path) : 0;
            if (v < 0) return TG_ENOMEM;
            if (v > 0 && lib_open(out, path, kname, kref)) return TG_OK;
        }
    }
    snprintf(path, sizeof path, "%s/%s.so", dir, kfull);
    snprintf(stem, sizeof stem, "%s/%s", dir, kfull);
    snprintf(cpath, sizeof cpath, "%s.c", stem);
    snprintf(out->source, sizeof out->source, "%s/%s.c", dir, kfull);
    if (have_cc) {
        int v = so_valid(ctx, path);
        if (v < 0) return TG_ENOMEM;
        if (v > 0 && lib_open(out, path, kfull, kref)) return TG_OK;
    }
    /* a miss: compile into temporary files, then rename them into place */
    char base[4096], tso[4200], tlog[4200], tref[4200];
    snprintf(base, sizeof base, "%s/tmp.%ld.%lu.", dir, (long)getpid(), tmp_counter());
    snprintf(tso, sizeof tso, "%sso", base);
    snprintf(tlog, sizeof tlog, "%slog", base);
    snprintf(tref, sizeof tref, "%sref", base);
    /* unit 0 says which entry it is: lib_open compares these with the key it looks for */
    char tail[160];
    int tl = snprintf(tail, sizeof tail,
                      "\nconst char tg_cj_key[] = \"%s\";\nconst char tg_cj_ref[] = \"%s\";\n",
                      kfull, kref);
    int fl = flight_begin(base);
    if (fl >= 0) atomic_store(&flights[fl].nunits, nu);
    int written = 0;
    for (; written < nu && st == TG_OK; written++) {
        char tc[4200];
        tmp_unit(tc, sizeof tc, base, written, "c");
        st = write_file(tc, units[written].p, units[written].n, written == 0 ? tail : "",
                        written == 0 ? (size_t)tl : 0);
    }
    if (st != TG_OK) { /* write_file removed the one it failed on */
        for (int u = 0; u + 1 < written; u++) {
            char tc[4200];
            tmp_unit(tc, sizeof tc, base, u, "c");
            unlink(tc);
        }
    }
    if (st == TG_OK && !have_cc) {
        keep_sources(base, stem, nu);
        if (ident == ID_TIMEOUT)
            st = tg_set_error(
                TG_ECHECK,
                "the C compiler '%s' did not answer '--version' within %g s "
                "(TGRAPH_CC_TIMEOUT) and was stopped; the source is kept in %s",
                cc.cmdline, limit > 0 && limit < VERSION_TIMEOUT ? limit : VERSION_TIMEOUT, cpath);
        else
            st = tg_set_error(TG_ECHECK,
                              "the C compiler '%s' cannot be run; the source is kept in %s",
                              cc.cmdline, cpath);
    }
    if (st == TG_OK && nu == 1) {
        char tc[4200];
        tmp_unit(tc, sizeof tc, base, 0, "c");
        st = compile(ctx, &cc, limit, fl, tc, tso, tlog, cpath);
    } else if (st == TG_OK) {
        st = compile_units(ctx, &cc, limit, fl, base, stem, nu, tso);
        if (st != TG_OK) keep_sources(base, stem, nu);
    }
    if (st == TG_OK && (st = append_trailer(ctx, tso)) != TG_OK) unlink(tso);
    if (st == TG_OK && !keep_sources(base, stem, nu)) {
        st = tg_set_error(TG_ECHECK, "cannot rename into the cache %s: %s", dir, strerror(errno));
        unlink(tso);
    }
    if (st == TG_OK && rename(tso, path) != 0) {
        st = tg_set_error(TG_ECHECK, "cannot rename into the cache %s: %s", dir, strerror(errno));
        unlink(tso);
    }
    if (st == TG_OK && write_file(tref, kfull, 32, "", 0) == TG_OK && rename(tref, refpath) != 0)
        unlink(tref);
    flight_end(fl);
    if (st != TG_OK) return st;
    out->compiled = true;
    if (!lib_open(out, path, kfull, kref)) {
        const char *why = dlerror();
        return tg_set_error(TG_ECHECK, "cannot load %s: %s; the source is kept in %s", path,
                            why ? why : "not the entry of its key", cpath);
    }
    return TG_OK;
}

tg_status tg_cj_build_units(tg_ctx *ctx, const tg_cj_unit *units, int n, tg_cj_lib *out) {
    memset(out, 0, sizeof *out);
    if (n < 1 || n > TG_CJ_MAX_UNITS)
        return tg_set_error(TG_EINVAL, "C JIT: %d translation units (1 to %d)", n, TG_CJ_MAX_UNITS);
    tg_xfsz x;
    tg_xfsz_begin(&x); /* past ulimit -f: an EFBIG error, not a killed process */
    tg_status st = build(ctx, units, n, out);
    tg_xfsz_end(&x);
    return st;
}

tg_status tg_cj_build(tg_ctx *ctx, const char *src, size_t len, tg_cj_lib *out) {
    tg_cj_unit u = {src, len};
    return tg_cj_build_units(ctx, &u, 1, out);
}

void tg_cj_lib_close(tg_cj_lib *lib) {
    if (lib && lib->handle) dlclose(lib->handle);
    if (lib) lib->handle = NULL;
}

/* ---- listing and clearing ---- */

/* Whether a file name is one the cache writes: <32 hex>.{so,c,ref}, <32 hex>.<unit>.c or
 * tmp.*. */
static bool cache_name(const char *name, const char **ext) {
    if (strncmp(name, "tmp.", 4) == 0) {
        *ext = "tmp";
        return true;
    }
    if (strspn(name, "0123456789abcdef") != 32 || name[32] != '.') return false;
    const char *e = name + 33;
    size_t d = strspn(e, "0123456789");
    if (d > 0 && d < 4 && e[d] == '.' && strcmp(e + d + 1, "c") == 0) { /* a unit's source */
        *ext = "c";
        return true;
    }
    *ext = e;
    return strcmp(e, "so") == 0 || strcmp(e, "c") == 0 || strcmp(e, "ref") == 0;
}

tg_status tg_cache_list(FILE *f) {
    if (!f) return tg_set_error(TG_EINVAL, "cache list: file is NULL");
    char dir[3000];
    tg_status st = tg_cj_cache_dir(dir, sizeof dir, false);
    if (st != TG_OK) {
        struct stat sb;
        if (tg_cj_cache_dir(dir, sizeof dir, false) != TG_OK && lstat(dir, &sb) != 0 &&
            errno == ENOENT) {
            fprintf(f, "%s (empty: not created yet)\n", dir);
            return TG_OK;
        }
        return st;
    }
    DIR *d = opendir(dir);
    if (!d) return tg_set_error(TG_EIO, "cannot read %s: %s", dir, strerror(errno));
    fprintf(f, "%s\n", dir);
    int n = 0;
    long long total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *ext;
        if (!cache_name(e->d_name, &ext) || strcmp(ext, "so") != 0) continue;
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &sb) != 0) continue;
        char when[32];
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime_r(&sb.st_mtime, &tm));
        fprintf(f, "%10lld  %s  %s\n", (long long)sb.st_size, when, path);
        n++;
        total += sb.st_size;
    }
    closedir(d);
    fprintf(f, "%d entr%s, %lld bytes\n", n, n == 1 ? "y" : "ies", total);
    return TG_OK;
}

tg_status tg_cache_clear(int *removed) {
    if (removed) *removed = 0;
    char dir[3000];
    tg_status st = tg_cj_cache_dir(dir, sizeof dir, false);
    if (st != TG_OK) {
        struct stat sb;
        if (lstat(dir, &sb) != 0 && errno == ENOENT) return TG_OK; /* nothing cached yet */
        return st;
    }
    DIR *d = opendir(dir);
    if (!d) return tg_set_error(TG_EIO, "cannot read %s: %s", dir, strerror(errno));
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        const char *ext;
        if (!cache_name(e->d_name, &ext)) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0) n++;
    }
    closedir(d);
    if (removed) *removed = n;
    return TG_OK;
}
