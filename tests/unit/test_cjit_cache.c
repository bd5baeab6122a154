/* test_cjit_cache.c - the C JIT's cache and compiler driver (src/backend/cjit/cache.c) under
 * hostile conditions, and whole-or-nothing .npy writes (src/core/npy.c).
 *
 * Checked: an entry swapped for another graph's (its .so copied over, or its .ref pointing
 * at another entry) is not loaded but rebuilt, and the graph computes its own result; a
 * compiler that hangs at `--version` or while compiling is stopped after
 * TGRAPH_CC_TIMEOUT seconds with its whole process group, leaving no temporary file, and
 * the graph falls back to the VM; tg_cache_interrupt (what the CLI calls on SIGTERM) stops
 * a running compiler and removes its files; under a file-size limit (RLIMIT_FSIZE, in a
 * forked child whose SIGXFSZ is left at its default, which would kill it) tg_npy_save
 * fails with EFBIG naming the file, leaves no partial file and keeps an older file as it
 * was, and the cache writer fails cleanly; a cache directory that is a symbolic link to a
 * private directory is used, a link to a group-writable one or to nothing is refused with
 * the rule in the message.
 *
 * Every test works in its own fresh cache directory under /tmp.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/cjit/cjit.h"

static char cache_dir[200];

static void fresh_cache(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/tgcjc.XXXXXX");
    assert_non_null(mkdtemp(cache_dir));
    setenv("TGRAPH_CACHE_DIR", cache_dir, 1);
    unsetenv("TGRAPH_CC");
    unsetenv("TGRAPH_CFLAGS");
    unsetenv("TGRAPH_CC_TIMEOUT");
}

static void remove_cache(void) {
    char cmd[800];
    chmod(cache_dir, 0700);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.link' '%s.other'", cache_dir, cache_dir, cache_dir);
    assert_int_equal(system(cmd), 0);
    unsetenv("TGRAPH_CC");
    unsetenv("TGRAPH_CC_TIMEOUT");
}

/* Number of files of dir whose name contains pat. */
static int count_in(const char *dir, const char *pat) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '%s'", dir, pat);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int n = 0;
    if (fscanf(p, "%d", &n) != 1) n = 0;
    pclose(p);
    return n;
}

/* The names (without extension) of the .so entries of the cache, sorted, into names. */
static int entries(char names[][40], int max) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cd '%s' && ls *.so 2>/dev/null | sort", cache_dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int n = 0;
    char line[256];
    while (n < max && fgets(line, sizeof line, p)) {
        line[strcspn(line, ".\n")] = '\0';
        snprintf(names[n++], 40, "%.39s", line);
    }
    pclose(p);
    return n;
}

static void copy_file(const char *from, const char *to) {
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* main(x: f64[3]) = sum(exp(x * k)): graphs that differ only in a constant */
static void graph_text(char *buf, size_t n, double k) {
    snprintf(buf, n, "func main(x: f64[3]) {\n  return sum(exp(mul(x, %.1f)))\n}\n", k);
}

/* Compiles main of text in mode c (no_fallback as given) and calls it on [0.1, 0.2, 0.3]:
 * the result in *y. */
static tg_status run_c(const char *text, bool no_fallback, double *y) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, text, strlen(text), "t.tg", &m);
    assert_int_equal(st, TG_OK);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_C, .no_fallback = no_fallback);
    tg_fn *f = NULL;
    st = tg_graph_compile(tg_module_find(m, "main"), &o, &f);
    tg_tensor *in = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){3});
    double *x = tg_tensor_data(in);
    x[0] = 0.1, x[1] = 0.2, x[2] = 0.3;
    tg_tensor *out = NULL;
    if (st == TG_OK) st = tg_fn_call(f, &in, 1, &out, 1);
    if (st == TG_OK) *y = tg_tensor_get_f64(out, 0);
    tg_tensor_free(out);
    tg_tensor_free(in);
    tg_fn_free(f);
    tg_module_free(m);
    return st;
}

static double expect(double k) { return exp(0.1 * k) + exp(0.2 * k) + exp(0.3 * k); }

/* ---- an entry swapped for another's ---- */

static void test_swapped_entry(void **state) {
    (void)state;
    fresh_cache();
    char ta[256], tb[256], a[2][40], b[2][40], ab[2][40];
    graph_text(ta, sizeof ta, 2.0);
    graph_text(tb, sizeof tb, 3.0);
    double y = 0;
    assert_int_equal(run_c(ta, true, &y), TG_OK);
    assert_float_equal(y, expect(2.0), 1e-9);
    assert_int_equal(entries(a, 2), 1);
    assert_int_equal(run_c(tb, true, &y), TG_OK);
    assert_float_equal(y, expect(3.0), 1e-9);
    assert_int_equal(entries(ab, 2), 2);
    int ib = strcmp(ab[0], a[0]) == 0 ? 1 : 0;
    snprintf(b[0], 40, "%s", ab[ib]);
    char pa[600], pb[600], ca[600], cb[600];
    snprintf(pa, sizeof pa, "%s/%s.so", cache_dir, a[0]);
    snprintf(pb, sizeof pb, "%s/%s.so", cache_dir, b[0]);
    snprintf(ca, sizeof ca, "%s/%s.c", cache_dir, a[0]);
    snprintf(cb, sizeof cb, "%s/%s.c", cache_dir, b[0]);
    /* B's entry (whole and valid, with its trailer) over A's: A's result, A's entry rebuilt */
    copy_file(pb, pa);
    copy_file(cb, ca);
    struct stat before, after;
    assert_int_equal(stat(pa, &before), 0);
    assert_int_equal(run_c(ta, true, &y), TG_OK);
    assert_float_equal(y, expect(2.0), 1e-9);
    assert_int_equal(stat(pa, &after), 0);
    assert_true(before.st_ino != after.st_ino);   /* a new file was renamed into place */
    assert_int_equal(run_c(tb, true, &y), TG_OK); /* B untouched */
    assert_float_equal(y, expect(3.0), 1e-9);
    /* no compiler: A's .ref is followed, but it names an entry swapped for B's */
    copy_file(pb, pa);
    setenv("TGRAPH_CC", "/bin/false", 1);
    assert_int_equal(run_c(ta, true, &y), TG_ECHECK); /* not loaded: cannot be rebuilt */
    assert_non_null(strstr(tg_last_error(), "cannot be run"));
    assert_int_equal(run_c(ta, false, &y), TG_OK); /* the VM: still A's result */
    assert_float_equal(y, expect(2.0), 1e-9);
    assert_int_equal(run_c(tb, true, &y), TG_OK); /* B's own entry still loads */
    assert_float_equal(y, expect(3.0), 1e-9);
    assert_int_equal(count_in(cache_dir, "tmp"), 0);
    remove_cache();
}

/* ---- a compiler that hangs ---- */

static void write_script(const char *path, const char *body) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\n%s", body);
    fclose(f);
    assert_int_equal(chmod(path, 0700), 0);
}

/* Whether process pid is gone (or a zombie no one reaps). */
static bool gone(pid_t pid) {
    char path[64], st[256] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    bool z = fgets(st, sizeof st, f) && strstr(st, ") Z");
    fclose(f);
    return z;
}

static pid_t read_pid(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long p = 0;
    if (fscanf(f, "%ld", &p) != 1) p = 0;
    fclose(f);
    return (pid_t)p;
}

static void test_cc_timeout(void **state) {
    (void)state;
    fresh_cache();
    char cc[600], body[1400], pidf[600], text[256];
    graph_text(text, sizeof text, 4.0);
    snprintf(cc, sizeof cc, "%s.other", cache_dir);
    assert_int_equal(mkdir(cc, 0700), 0);
    snprintf(pidf, sizeof pidf, "%s.other/pid", cache_dir);
    snprintf(cc, sizeof cc, "%s.other/slowcc", cache_dir);
    /* hangs at --version, leaving a child of its own behind */
    snprintf(body, sizeof body, "sleep 30 &\necho $! > '%s'\nsleep 30\n", pidf);
    write_script(cc, body);
    setenv("TGRAPH_CC", cc, 1);
    setenv("TGRAPH_CC_TIMEOUT", "0.5", 1);
    double y = 0, t0 = now_s();
    assert_int_equal(run_c(text, true, &y), TG_ECHECK);
    assert_true(now_s() - t0 < 10);
    assert_non_null(strstr(tg_last_error(), "did not answer '--version' within 0.5 s"));
    assert_non_null(strstr(tg_last_error(), "TGRAPH_CC_TIMEOUT"));
    pid_t kid = read_pid(pidf);
    assert_true(kid > 0);
    for (int i = 0; i < 100 && !gone(kid); i++) usleep(10000);
    assert_true(gone(kid)); /* the whole group was stopped */
    assert_int_equal(count_in(cache_dir, "tmp"), 0);
    remove_cache();

    /* answers --version, hangs while compiling: stopped; the VM runs the graph */
    fresh_cache();
    snprintf(cc, sizeof cc, "%s.other", cache_dir);
    assert_int_equal(mkdir(cc, 0700), 0);
    snprintf(pidf, sizeof pidf, "%s.other/pid", cache_dir);
    snprintf(cc, sizeof cc, "%s.other/slowcc2", cache_dir);
    snprintf(body, sizeof body,
             "case \"$1\" in --version) echo slowcc 1.0; exit 0;; esac\n"
             "sleep 30 &\necho $! > '%s'\nsleep 30\n",
             pidf);
    write_script(cc, body);
    setenv("TGRAPH_CC", cc, 1);
    setenv("TGRAPH_CC_TIMEOUT", "0.5", 1);
    t0 = now_s();
    assert_int_equal(run_c(text, true, &y), TG_ECHECK);
    assert_true(now_s() - t0 < 10);
    assert_non_null(strstr(tg_last_error(), "did not finish within 0.5 s"));
    assert_non_null(strstr(tg_last_error(), "kept in"));
    kid = read_pid(pidf);
    assert_true(kid > 0);
    for (int i = 0; i < 100 && !gone(kid); i++) usleep(10000);
    assert_true(gone(kid));
    assert_int_equal(count_in(cache_dir, "tmp"), 0);
    assert_int_equal(count_in(cache_dir, "\\.so$"), 0);
    assert_int_equal(run_c(text, false, &y), TG_OK); /* fallback: the VM, after a warning */
    assert_float_equal(y, expect(4.0), 1e-9);
    /* a bad limit is an error naming the variable */
    setenv("TGRAPH_CC_TIMEOUT", "soon", 1);
    assert_int_equal(run_c(text, true, &y), TG_ECHECK);
    assert_non_null(strstr(tg_last_error(), "TGRAPH_CC_TIMEOUT='soon'"));
    remove_cache();
}

/* A graph of at least two generated functions (a view and a fused reduction), so that
 * TGRAPH_CC_SPLIT=1 splits it into units: main(x) = sum(exp(k * (x + x[::-1]))). */
static void split_graph_text(char *buf, size_t n, double k) {
    snprintf(buf, n,
             "func main(x: f64[3]) {\n  r = x[::-1]\n  return sum(exp(mul(add(x, r), %.1f)))\n}\n",
             k);
}

static double split_expect(double k) { return 3 * exp(0.4 * k); }

/* A compiler for split sources: answers --version, "compiles" units by creating their
 * object, but on unit 2 (a source ending in .2.c) leaves a child of its own behind and
 * hangs, and on unit 1 fails after a second when `fail1` is set. Each hanging process
 * writes its pid to pidf. */
static void write_split_cc(const char *cc, const char *pidf, bool fail1) {
    char body[2000];
    snprintf(body, sizeof body,
             "case \"$1\" in --version) echo splitcc 1.0; exit 0;; esac\n"
             "out=''; src=''; prev=''\n"
             "for a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; case $a in *.c) src=$a;; esac; "
             "prev=$a; done\n"
             "case $src in\n"
             "  *.2.c) sleep 30 &\n echo $! > '%s'\n sleep 30;;\n"
             "  *.1.c) if [ %d = 1 ]; then sleep 1; echo 'unit 1: error: no'; exit 1; fi;;\n"
             "esac\n"
             ": > \"$out\"\n",
             pidf, fail1 ? 1 : 0);
    write_script(cc, body);
}

/* A fake split compiler (write_split_cc) in a folder beside the cache, made TGRAPH_CC; cc and
 * pidf receive its path and its pid file's (600 bytes each). */
static void use_split_cc(char *dir, size_t ndir, char *cc, char *pidf, bool fail1) {
    snprintf(dir, ndir, "%s.other", cache_dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(pidf, 600, "%s/pid", dir);
    snprintf(cc, 600, "%s/splitcc", dir);
    write_split_cc(cc, pidf, fail1);
    setenv("TGRAPH_CC", cc, 1);
}

static void test_split_timeout(void **state) {
    (void)state;
    fresh_cache();
    char dir[400], cc[600], pidf[600], text[256];
    split_graph_text(text, sizeof text, 2.0);
    /* the real compiler, split: the right result, the units' sources kept */
    setenv("TGRAPH_CC_SPLIT", "1", 1);
    double y = 0;
    assert_int_equal(run_c(text, true, &y), TG_OK);
    assert_float_equal(y, split_expect(2.0), 1e-9);
    assert_int_equal(count_in(cache_dir, "\\.2\\.c$"), 1);
    assert_int_equal(count_in(cache_dir, "tmp"), 0);
    remove_cache();

    /* unit 2 hangs: every compiler stopped at the limit, no temporary file left */
    fresh_cache();
    setenv("TGRAPH_CC_SPLIT", "1", 1);
    use_split_cc(dir, sizeof dir, cc, pidf, false);
    setenv("TGRAPH_CC_TIMEOUT", "0.5", 1);
    double t0 = now_s();
    assert_int_equal(run_c(text, true, &y), TG_ECHECK);
    assert_true(now_s() - t0 < 10);
    assert_non_null(strstr(tg_last_error(), "did not finish within 0.5 s"));
    assert_non_null(strstr(tg_last_error(), "kept in"));
    pid_t kid = read_pid(pidf);
    assert_true(kid > 0);
    for (int i = 0; i < 100 && !gone(kid); i++) usleep(10000);
    assert_true(gone(kid)); /* the hanging unit's whole group was stopped */
    assert_int_equal(count_in(cache_dir, "tmp"), 0);
    assert_int_equal(count_in(cache_dir, "\\.so$"), 0);
    assert_int_equal(count_in(cache_dir, "\\.2\\.c$"), 1); /* the sources are kept */
    assert_int_equal(run_c(text, false, &y), TG_OK);       /* fallback: the VM */
    assert_float_equal(y, split_expect(2.0), 1e-9);
    remove_cache();

    /* unit 1 fails while unit 2 hangs (no limit): the failure stops unit 2 at once, and the
     * error names unit 1's source and the compiler's message */
    fresh_cache();
    setenv("TGRAPH_CC_SPLIT", "1", 1);
    use_split_cc(dir, sizeof dir, cc, pidf, true);
    setenv("TGRAPH_CC_TIMEOUT", "0", 1);
    t0 = now_s();
    assert_int_equal(run_c(text, true, &y), TG_ECHECK);
    assert_true(now_s() - t0 < 10);
    assert_non_null(strstr(tg_last_error(), "failed (exit 1): unit 1: error: no"));
    assert_non_null(strstr(tg_last_error(), ".1.c"));
    kid = read_pid(pidf);
    if (kid > 0) { /* unit 2 had started (one CPU runs the units one at a time) */
        for (int i = 0; i < 100 && !gone(kid); i++) usleep(10000);
        assert_true(gone(kid));
    }
    assert_int_equal(count_in(cache_dir, "tmp"), 0);
    unsetenv("TGRAPH_CC_SPLIT");
    remove_cache();
}

/* tg_cache_interrupt from a SIGTERM handler in a child compiling with a hanging compiler. */
static void on_term(int sig) {
    (void)sig;
    tg_cache_interrupt();
    _exit(42);
}

static void test_interrupt(void **state) {
    (void)state;
    fresh_cache();
    char cc[600], body[1400], pidf[600], text[256];
    graph_text(text, sizeof text, 5.0);
    snprintf(cc, sizeof cc, "%s.other", cache_dir);
    assert_int_equal(mkdir(cc, 0700), 0);
    snprintf(pidf, sizeof pidf, "%s.other/pid", cache_dir);
    snprintf(cc, sizeof cc, "%s.other/slowcc", cache_dir);
    snprintf(body, sizeof body,
             "case \"$1\" in --version) echo slowcc 1.0; exit 0;; esac\n"
             "sleep 30 &\necho $! > '%s'\nsleep 30\n",
             pidf);
    write_script(cc, body);
    setenv("TGRAPH_CC", cc, 1);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGTERM, on_term);
        double y;
        run_c(text, true, &y);
        _exit(0);
    }
    pid_t kid = 0;
    for (int i = 0; i < 1000 && (kid = read_pid(pidf)) <= 0; i++) usleep(10000);
    assert_true(kid > 0);
    assert_true(count_in(cache_dir, "tmp") > 0); /* compiling */
    assert_int_equal(kill(pid, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 42);
    for (int i = 0; i < 100 && !gone(kid); i++) usleep(10000);
    assert_true(gone(kid));
    assert_int_equal(count_in(cache_dir, "tmp"), 0);
    remove_cache();
}

/* The same with a split source whose unit 2 hangs: tg_cache_interrupt stops it and
 * removes every unit's temporary files. */
static void test_split_interrupt(void **state) {
    (void)state;
    fresh_cache();
    char dir[400], cc[600], pidf[600], text[256];
    split_graph_text(text, sizeof text, 3.0);
    use_split_cc(dir, sizeof dir, cc, pidf, false);
    setenv("TGRAPH_CC_SPLIT", "1", 1);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGTERM, on_term);
        double y;
        run_c(text, true, &y);
        _exit(0);
    }
    pid_t kid = 0;
    for (int i = 0; i < 1000 && (kid = read_pid(pidf)) <= 0; i++) usleep(10000);
    assert_true(kid > 0);
    assert_true(count_in(cache_dir, "tmp.*\\.2\\.c") > 0); /* compiling unit 2 */
    assert_int_equal(kill(pid, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 42);
    for (int i = 0; i < 100 && !gone(kid); i++) usleep(10000);
    assert_true(gone(kid));
    assert_int_equal(count_in(cache_dir, "tmp"), 0);
    unsetenv("TGRAPH_CC_SPLIT");
    remove_cache();
}

/* ---- the file-size limit ---- */

/* In a forked child (SIGXFSZ at its default action, which kills): files of at most
 * limit bytes. Returns the child's exit status; the child runs fn and exits with its
 * result. */
static int limited(rlim_t limit, int (*fn)(void)) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_DFL);
        struct rlimit rl = {limit, limit};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(99);
        _exit(fn());
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

static char npy_path[600];

static int save_big(void) {
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){100, 30});
    tg_status st = tg_npy_save(npy_path, t);
    tg_tensor_free(t);
    if (st != TG_EIO) return 1;
    const char *msg = tg_last_error();
    if (!strstr(msg, npy_path) || !strstr(msg, "File too large")) return 2;
    return 0;
}

static int build_unit(void) {
    tg_cj_str s = {.ctx = tg_ctx_default()};
    tg_cj_emit_prelude(&s);
    tg_cj_str_printf(&s, "int tg_cj_0(void) { return 0; }\n");
    tg_cj_lib lib;
    tg_status st = tg_cj_build(tg_ctx_default(), s.p, s.n, &lib);
    tg_cj_str_free(&s);
    if (st != TG_ECHECK) return 1;
    if (!strstr(tg_last_error(), "File too large") &&
        !strstr(tg_last_error(), "C compiler")) /* the compiler's own output may fail first */
        return 2;
    return 0;
}

static void test_file_size_limit(void **state) {
    (void)state;
    fresh_cache();
    snprintf(npy_path, sizeof npy_path, "%s/big.npy", cache_dir);
    assert_int_equal(limited(4096, save_big), 0);    /* not killed by SIGXFSZ */
    assert_int_equal(count_in(cache_dir, "big"), 0); /* no partial file, no temporary */
    /* an older file is kept as it was */
    tg_tensor *small = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){3});
    assert_int_equal(tg_npy_save(npy_path, small), TG_OK);
    struct stat sb0, sb1;
    assert_int_equal(stat(npy_path, &sb0), 0);
    assert_int_equal(limited(4096, save_big), 0);
    assert_int_equal(stat(npy_path, &sb1), 0);
    assert_int_equal(sb0.st_size, sb1.st_size);
    assert_int_equal(count_in(cache_dir, "big"), 1);
    tg_tensor *back = NULL;
    assert_int_equal(tg_npy_load(NULL, npy_path, &back), TG_OK);
    assert_int_equal(tg_tensor_size(back), 3);
    tg_tensor_free(back);
    tg_tensor_free(small);
    unlink(npy_path);
    /* the cache writer: the source fits, the compiled object does not (or the reverse) */
    assert_int_equal(limited(2048, build_unit), 0);
    assert_int_equal(count_in(cache_dir, "tmp"), 0);
    assert_int_equal(count_in(cache_dir, "\\.so$"), 0);
    remove_cache();
}

/* ---- the directory ---- */

static void test_symlinked_dir(void **state) {
    (void)state;
    fresh_cache();
    char link[600], text[256], buf[4096];
    graph_text(text, sizeof text, 6.0);
    snprintf(link, sizeof link, "%s.link", cache_dir);
    assert_int_equal(symlink(cache_dir, link), 0);
    setenv("TGRAPH_CACHE_DIR", link, 1);
    assert_int_equal(tg_cj_cache_dir(buf, sizeof buf, true), TG_OK);
    assert_string_equal(buf, cache_dir); /* the directory itself is used */
    double y = 0;
    assert_int_equal(run_c(text, true, &y), TG_OK);
    assert_float_equal(y, expect(6.0), 1e-9);
    assert_int_equal(count_in(cache_dir, "\\.so$"), 1);
    /* a link to a directory others could write: refused, the rule said */
    assert_int_equal(chmod(cache_dir, 0770), 0);
    assert_int_equal(run_c(text, true, &y), TG_ECHECK);
    const char *msg = tg_last_error();
    assert_non_null(strstr(msg, "a symbolic link to"));
    assert_non_null(strstr(msg, "writable by its group"));
    assert_int_equal(chmod(cache_dir, 0700), 0);
    /* a link to a file, and one that leads nowhere */
    char other[600];
    snprintf(other, sizeof other, "%s.other", cache_dir);
    FILE *f = fopen(other, "w");
    assert_non_null(f);
    fclose(f);
    unlink(link);
    assert_int_equal(symlink(other, link), 0);
    assert_int_equal(tg_cj_cache_dir(buf, sizeof buf, true), TG_ECHECK);
    msg = tg_last_error();
    assert_non_null(strstr(msg, "is not a directory"));
    assert_non_null(strstr(msg, "owned by you that only you can write (mode 0700)"));
    assert_non_null(strstr(msg, "TGRAPH_CACHE_DIR"));
    unlink(other);
    assert_int_equal(tg_cj_cache_dir(buf, sizeof buf, true), TG_ECHECK);
    assert_non_null(strstr(tg_last_error(), "leads nowhere"));
    unlink(link);
    remove_cache();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swapped_entry),   cmocka_unit_test(test_cc_timeout),
        cmocka_unit_test(test_split_timeout),   cmocka_unit_test(test_interrupt),
        cmocka_unit_test(test_split_interrupt), cmocka_unit_test(test_file_size_limit),
        cmocka_unit_test(test_symlinked_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
