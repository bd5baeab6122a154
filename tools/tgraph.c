/* tgraph.c - the command-line tool: `tgraph run | opt | dot | bench`.
 *
 * Written only against include/tgraph.h, like Lua's lauxlib: nothing here knows the
 * library's internals. Every failure prints one line on stderr, "tgraph: <message>"
 * (or "tgraph <command>: <message>" for usage errors), and ends the process with
 * exit status 2 for a malformed command line, or 1 for anything found in the files
 * (syntax, shapes, dtypes, unreadable or malformed files, failing runs). Nothing the
 * user passes may crash the tool. docs/cli.md is the user's reference.
 */
#include "tgraph.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif

/* The backends this build can run. Later backends add a row here. */
static const struct {
    const char *name; /* --mode value */
    tg_mode mode;     /* what tg_graph_compile gets */
    bool available;   /* built and usable */
} modes[] = {
    {"reference", TG_MODE_REFERENCE, true},
    {"vm", TG_MODE_VM, true},
    {"c", TG_MODE_C, true},
    {"debug", TG_MODE_DEBUG, true},
};

/* Options the design names but this build does not implement yet: they are refused
 * (exit 2) rather than silently ignored. */
static const char *const later_opts[] = {
    "--microbatches",
};

/* ---- messages ---------------------------------------------------------------------- */

/* The last message of fail(): what the other processes of an MPI job are told
 * (tg_world_finish, docs/mpi.md). */
static char last_failure[4096];

/* Runtime or data error: "tgraph: <msg>" on stderr ("tgraph (MPI rank R): <msg>" in a job
 * of several processes). Returns EXIT_FAIL for chaining. */
static int fail(const char *fmt, ...) PRINTF_LIKE(1, 2);
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_failure, sizeof last_failure, fmt, ap);
    va_end(ap);
    if (tg_world_size() > 1)
        fprintf(stderr, "tgraph (MPI rank %d): %s\n", tg_world_rank(), last_failure);
    else
        fprintf(stderr, "tgraph: %s\n", last_failure);
    return EXIT_FAIL;
}

/* Usage error of command `cmd`: names the command and how to get help. Returns EXIT_USAGE. */
static int usage_fail(const char *cmd, const char *fmt, ...) PRINTF_LIKE(2, 3);
static int usage_fail(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_failure, sizeof last_failure, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tgraph%s%s: %s (see 'tgraph %s%s--help')\n", cmd ? " " : "", cmd ? cmd : "",
            last_failure, cmd ? cmd : "", cmd ? " " : "");
    return EXIT_USAGE;
}

/* The library's last message, never empty. */
static const char *lib_error(tg_status st) {
    const char *m = tg_last_error();
    return m && *m ? m : tg_status_str(st);
}

/* The context of every library call: NULL (the default one), or one with the memory cap
 * that TGRAPH_MEM_LIMIT asks for (bytes, or a number with K, M or G; docs/hardening.md). */
static tg_ctx *cli_ctx;

static int setup_ctx(void) {
    const char *s = getenv("TGRAPH_MEM_LIMIT");
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10;
    if (*end == 'M' || *end == 'm') shift = 20;
    if (*end == 'G' || *end == 'g') shift = 30;
    if (shift) end++;
    if (errno || end == s || *end || s[0] == '-' || v == 0 || v > (SIZE_MAX >> shift))
        return fail("TGRAPH_MEM_LIMIT='%s' is not a size (bytes, or a number with K, M or G)", s);
    cli_ctx = tg_ctx_new(NULL, NULL);
    if (!cli_ctx || tg_ctx_set_mem_limit(cli_ctx, (size_t)v << shift) != TG_OK)
        return fail("%s", lib_error(TG_ENOMEM));
    return 0;
}

/* ---- help texts --------------------------------------------------------------------- */

static const char usage_main[] =
    "usage: tgraph COMMAND [ARGS]\n"
    "\n"
    "tgraph compiles and runs tensor programs written in the .tg text format.\n"
    "\n"
    "commands:\n"
    "  run FILE.tg   run a function on .npy inputs; write or print its outputs\n"
    "  opt FILE.tg   print the optimised graph as .tg text\n"
    "  dot FILE.tg   write the graph in Graphviz DOT format\n"
    "  bench FILE.tg time calls of a function (--profile: per-node times)\n"
    "  cache --list | --clear   the C JIT's cache of compiled code\n"
    "  help [CMD]    show this text, or the help of one command\n"
    "\n"
    "options:\n"
    "  -h, --help     show this text\n"
    "  --version      print the version\n"
    "\n"
    "Exit status: 0 on success, 1 when a file or a run fails, 2 for a bad command line.\n"
    "Run 'tgraph COMMAND --help' for the options of a command; docs/cli.md has more.\n";

static const char usage_run[] =
    "usage: tgraph run FILE.tg [--func F] --in NAME=PATH.npy ... [--out NAME=PATH.npy ...]\n"
    "                  [--mode reference|vm|c|debug] [--debug-backend vm|c] [--no-blas]\n"
    "                  [--no-inline] [--threads N] [-n K] [--profile]\n"
    "                  [--devices N] [--placement auto|manual]\n"
    "\n"
    "Runs one function of FILE.tg. Each parameter gets its value from an --in option,\n"
    "matched by name; the .npy file must have the declared dtype, rank and static extents.\n"
    "\n"
    "options:\n"
    "  --func F             the function to run (default: 'main', or the only function)\n"
    "  --in NAME=PATH       value of parameter NAME, a .npy file (one per parameter)\n"
    "  --out NAME=PATH      write output NAME to PATH as .npy; NAME is the name the\n"
    "                       output has in `return`, or its position (0, 1, ...), or a\n"
    "                       state (`mut` parameter): its value after the last call\n"
    "  -n K                 call the function K times (states carry over; the outputs\n"
    "                       of the last call are written)\n"
    "  --mode M             backend: vm (default: the graph after the rewrite\n"
    "                       pipeline), reference (the graph as written, node by\n"
    "                       node), c (generated C, compiled with the system cc and\n"
    "                       cached: docs/cjit.md) or debug (a backend checked node by\n"
    "                       node against the reference kernels)\n"
    "  --debug-backend B    the backend debug mode checks: vm (default) or c\n"
    "  --no-blas            keep dot and the ops around it (no gemm/gemv/ger)\n"
    "  --no-inline          keep calls of functions as calls (each backend runs the callee\n"
    "                       as a sub-graph) instead of inlining them first\n"
    "  --threads N          threads the vm splits large kernels over (default:\n"
    "                       TGRAPH_NUM_THREADS, else every core)\n"
    "  --profile            after the run, print the per-node table of its calls on\n"
    "                       stderr: time, calls, share of the total and bytes read and\n"
    "                       written per call (vm mode)\n"
    "  --devices N          N virtual host devices cpu:0..cpu:N-1 (1 to 256), each a share\n"
    "                       of the host's threads (default: TGRAPH_HOST_DEVICES, else none)\n"
    "  --placement P        how nodes are placed on the devices: auto (a cost model spreads\n"
    "                       independent work) or manual (annotations, then inputs' devices;\n"
    "                       the rest on the first device); docs/devices.md, \"Placement\"\n"
    "  -h, --help           show this text\n"
    "\n"
    "Outputs not written with --out are printed NumPy-style on stdout, in order; when\n"
    "the function returns several values each is preceded by 'NAME = '.\n";

static const char usage_opt[] =
    "usage: tgraph opt FILE.tg [--func F] [--no-blas] [--no-inline]\n"
    "                  [--print-after=PASS | --print-after-all]\n"
    "                  [--stats] [--verify]\n"
    "                  [--placed [--placement auto|manual]] [--devices N]\n"
    "\n"
    "Prints the graph after the optimisation pipeline as .tg text that parses back.\n"
    "Passes, in order: inline, canonicalize, stabilize, specialize, blas, fuse, bucket\n"
    "(TGRAPH_BUCKET_BYTES), inplace; with --placed, placement follows them.\n"
    "\n"
    "options:\n"
    "  --func F             print only function F (default: every function of the file)\n"
    "  --no-blas            keep dot and the ops around it (no gemm/gemv/ger)\n"
    "  --no-inline          keep calls of functions as calls (each backend runs the callee\n"
    "                       as a sub-graph) instead of inlining them first\n"
    "  --print-after=PASS   also print the graph after pass PASS, under '# after PASS'\n"
    "  --print-after-all    also print the graph after every pass\n"
    "  --stats              print the compile-time report (time per pass and per rule,\n"
    "                       rules tried and applied) on stderr\n"
    "  --verify             verify the IR after every pass (always on in debug builds)\n"
    "  --placed             print the graph after placement: every node with its device,\n"
    "                       and the transfers between devices\n"
    "  --placement P        auto (default) or manual, as for 'tgraph run'\n"
    "  --devices N          N virtual host devices to place on, as for 'tgraph run'\n"
    "  -h, --help           show this text\n";

static const char usage_dot[] =
    "usage: tgraph dot FILE.tg [--func F] [--opt] [-o PATH]\n"
    "\n"
    "Writes the graph of one function in Graphviz DOT format.\n"
    "\n"
    "options:\n"
    "  --func F     the function (default: 'main', or the only function)\n"
    "  --opt        draw the graph after the optimisation pipeline\n"
    "  -o PATH      write to PATH instead of stdout; a PATH ending in .svg, .png or .pdf\n"
    "               is rendered with Graphviz's `dot` program, which must be installed\n"
    "  -h, --help   show this text\n";

static const char usage_bench[] =
    "usage: tgraph bench FILE.tg [--func F] --in NAME=PATH.npy ... [-n RUNS] [--profile]\n"
    "                    [--mode reference|vm|c|debug] [--threads N] [--no-blas]\n"
    "                    [--no-inline] [--devices N] [--placement auto|manual]\n"
    "\n"
    "Times calls of one function of FILE.tg on the given inputs: one warm-up call, then\n"
    "RUNS calls that write into the outputs of the first one (no allocation per call).\n"
    "Ends with the line 'per call: median <t> <unit>, min <t> <unit> (<n> runs)'.\n"
    "\n"
    "options:\n"
    "  --func F             the function to time (default: 'main', or the only function)\n"
    "  --in NAME=PATH       value of parameter NAME, a .npy file (one per parameter)\n"
    "  -n RUNS              timed calls (default 10)\n"
    "  --profile            first print the per-node table: time, calls, share of the\n"
    "                       total and bytes read and written per call (vm mode)\n"
    "  --mode M             backend, as for 'tgraph run' (default vm)\n"
    "  --threads N          threads the vm splits large kernels over (default:\n"
    "                       TGRAPH_NUM_THREADS, else every core)\n"
    "  --no-blas            keep dot and the ops around it (no gemm/gemv/ger)\n"
    "  --no-inline          keep calls of functions as calls (each backend runs the callee\n"
    "                       as a sub-graph) instead of inlining them first\n"
    "  --devices N          virtual host devices, as for 'tgraph run'\n"
    "  --placement P        auto or manual, as for 'tgraph run'\n"
    "  -h, --help           show this text\n";

/* ---- command line ------------------------------------------------------------------- */

typedef struct binding {
    const char *name; /* NAME of NAME=PATH (points into argv, '=' replaced) */
    const char *path; /* PATH */
} binding;

typedef struct options {
    const char *cmd;           /* "run", "opt", "dot" */
    const char *file;          /* FILE.tg */
    const char *func;          /* --func or NULL */
    const char *out;           /* dot: -o PATH or NULL */
    const char *mode;          /* run: --mode or NULL */
    const char *debug_backend; /* run: --debug-backend or NULL */
    bool opt;                  /* dot --opt */
    bool no_blas;              /* --no-blas */
    bool no_inline;            /* --no-inline */
    const char *print_after;   /* opt: --print-after=PASS, or "all" */
    bool stats;                /* opt: --stats */
    bool verify;               /* opt: --verify */
    binding *ins;              /* run: --in, argv order */
    int nin;
    binding *outs; /* run: --out */
    int nout;
    int threads;           /* run, bench: --threads, 0 when not given */
    int devices;           /* run, opt, bench: --devices, 0 when not given */
    const char *placement; /* run, opt, bench: --placement, or NULL */
    bool placed;           /* opt: --placed */
    int runs;              /* bench: timed runs; run: calls in a row (-n, 0 when not given) */
    bool profile;          /* run, bench: --profile */
} options;

/* Matches `arg` against option `name` given as "--name VALUE" or "--name=VALUE". Sets
 * *val (NULL when the value is missing) and advances *i past a separate value. */
static bool opt_value(int argc, char **argv, int *i, const char *name, char **val) {
    char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0) return false;
    if (arg[n] == '=') {
        *val = arg + n + 1;
        return true;
    }
    if (arg[n] != '\0') return false;
    *val = *i + 1 < argc ? argv[++*i] : NULL;
    return true;
}

/* A positive integer of at most max, or -1. */
static long parse_count(const char *val, long max) {
    char *end = NULL;
    if (!val || *val < '0' || *val > '9') return -1;
    errno = 0;
    long v = strtol(val, &end, 10);
    return errno == 0 && *end == '\0' && v >= 1 && v <= max ? v : -1;
}

/* Splits NAME=PATH in place (argv strings are writable). 0 or a usage error. */
static int parse_binding(const char *cmd, const char *flag, char *arg, binding *b) {
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || eq[1] == '\0')
        return usage_fail(cmd, "%s expects NAME=PATH, got '%s'", flag, arg);
    *eq = '\0';
    b->name = arg;
    b->path = eq + 1;
    return 0;
}

/* The folder part of path (up to its last '/', "." if none) stat'ed into *st; *base
 * points at the name after it. */
static bool stat_dir(const char *path, struct stat *st, const char **base) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    *base = slash ? slash + 1 : path;
    if (!slash) return stat(".", st) == 0;
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= sizeof dir) return false;
    memcpy(dir, path, n);
    dir[n] = '\0';
    return stat(dir, st) == 0;
}

/* Whether two --out paths name the same file: the same text; or, for files that exist,
 * the same device and inode; or the same name in the same folder ("out.npy" and
 * "./out.npy" before either is written). */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    const char *ba, *bb;
    if (strcmp(a, b) == 0) return true;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return stat_dir(a, &sa, &ba) && stat_dir(b, &sb, &bb) && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino && strcmp(ba, bb) == 0;
}

static bool is_later_opt(const char *arg) {
    for (size_t k = 0; k < sizeof later_opts / sizeof later_opts[0]; k++) {
        size_t n = strlen(later_opts[k]);
        if (strncmp(arg, later_opts[k], n) == 0 && (arg[n] == '\0' || arg[n] == '=')) return true;
    }
    return false;
}

/* Parses the arguments of command o->cmd (argv[0] is the first argument after it).
 * Returns -1 when help was printed, 0 when parsed, else an exit status. */
static int parse_args(int argc, char **argv, options *o, const char *help) {
    const char *cmd = o->cmd;
    bool only_files = false;
    o->ins = calloc((size_t)argc + 1, sizeof *o->ins);
    o->outs = calloc((size_t)argc + 1, sizeof *o->outs);
    if (!o->ins || !o->outs) return fail("out of memory");
    for (int i = 0; i < argc; i++) {
        char *arg = argv[i];
        char *val = NULL; /* points into argv, which is writable */
        bool is_bench = strcmp(cmd, "bench") == 0;
        bool is_run = strcmp(cmd, "run") == 0 || is_bench; /* bench takes run's inputs */
        if (only_files || arg[0] != '-' || strcmp(arg, "-") == 0) {
            if (o->file) return usage_fail(cmd, "unexpected argument '%s'", arg);
            o->file = arg;
        } else if (strcmp(arg, "--") == 0) {
            only_files = true;
        } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            fputs(help, stdout);
            return -1;
        } else if (opt_value(argc, argv, &i, "--func", &val)) {
            if (!val || !*val) return usage_fail(cmd, "--func expects a function name");
            if (o->func) return usage_fail(cmd, "--func given twice");
            o->func = val;
        } else if (is_run && opt_value(argc, argv, &i, "--in", &val)) {
            if (!val) return usage_fail(cmd, "--in expects NAME=PATH");
            int st = parse_binding(cmd, "--in", val, &o->ins[o->nin]);
            if (st) return st;
            o->nin++;
        } else if (!is_bench && is_run && opt_value(argc, argv, &i, "--out", &val)) {
            if (!val) return usage_fail(cmd, "--out expects NAME=PATH");
            int st = parse_binding(cmd, "--out", val, &o->outs[o->nout]);
            if (st) return st;
            o->nout++;
        } else if (is_run && opt_value(argc, argv, &i, "--mode", &val)) {
            if (!val || !*val) return usage_fail(cmd, "--mode expects reference, vm, c or debug");
            if (o->mode) return usage_fail(cmd, "--mode given twice");
            o->mode = val;
        } else if (is_run && opt_value(argc, argv, &i, "--debug-backend", &val)) {
            if (!val || (strcmp(val, "vm") != 0 && strcmp(val, "c") != 0))
                return usage_fail(cmd, "--debug-backend expects vm or c");
            if (o->debug_backend) return usage_fail(cmd, "--debug-backend given twice");
            o->debug_backend = val;
        } else if (is_run && opt_value(argc, argv, &i, "--threads", &val)) {
            long n = parse_count(val, 1024);
            if (n < 0) return usage_fail(cmd, "--threads expects a number of threads (1 to 1024)");
            o->threads = (int)n;
        } else if (is_run && opt_value(argc, argv, &i, "-n", &val)) {
            long n = parse_count(val, 100000000);
            if (n < 0) return usage_fail(cmd, "-n expects a number of runs");
            o->runs = (int)n;
        } else if (is_run && strcmp(arg, "--profile") == 0) {
            o->profile = true;
        } else if ((is_run || strcmp(cmd, "opt") == 0) &&
                   opt_value(argc, argv, &i, "--devices", &val)) {
            long n = parse_count(val, 256);
            if (n < 0)
                return usage_fail(cmd, "--devices expects a number of host devices (1 to 256)");
            if (o->devices) return usage_fail(cmd, "--devices given twice");
            o->devices = (int)n;
        } else if ((is_run || strcmp(cmd, "opt") == 0) &&
                   opt_value(argc, argv, &i, "--placement", &val)) {
            if (!val || (strcmp(val, "auto") != 0 && strcmp(val, "manual") != 0))
                return usage_fail(cmd, "--placement expects auto or manual");
            if (o->placement) return usage_fail(cmd, "--placement given twice");
            o->placement = val;
        } else if (strcmp(cmd, "opt") == 0 && strcmp(arg, "--placed") == 0) {
            o->placed = true;
        } else if (strcmp(cmd, "dot") == 0 && strcmp(arg, "--opt") == 0) {
            o->opt = true;
        } else if (strcmp(arg, "--no-blas") == 0) {
            o->no_blas = true;
        } else if (strcmp(cmd, "dot") != 0 && strcmp(arg, "--no-inline") == 0) {
            o->no_inline = true;
        } else if (strcmp(cmd, "opt") == 0 && strcmp(arg, "--print-after-all") == 0) {
            if (o->print_after) return usage_fail(cmd, "--print-after given twice");
            o->print_after = "all";
        } else if (strcmp(cmd, "opt") == 0 && opt_value(argc, argv, &i, "--print-after", &val)) {
            if (o->print_after) return usage_fail(cmd, "--print-after given twice");
            int k = 0;
            while (val && tg_pass_name(k) && strcmp(tg_pass_name(k), val) != 0) k++;
            if (!val || !tg_pass_name(k))
                return usage_fail(cmd, "--print-after expects a pass: inline, canonicalize, "
                                       "stabilize, specialize, blas, fuse or inplace");
            o->print_after = val;
        } else if (strcmp(cmd, "opt") == 0 && strcmp(arg, "--stats") == 0) {
            o->stats = true;
        } else if (strcmp(cmd, "opt") == 0 && strcmp(arg, "--verify") == 0) {
            o->verify = true;
        } else if (strcmp(cmd, "dot") == 0 && (opt_value(argc, argv, &i, "-o", &val) ||
                                               opt_value(argc, argv, &i, "--output", &val))) {
            if (!val || !*val) return usage_fail(cmd, "-o expects a file name");
            if (o->out) return usage_fail(cmd, "-o given twice");
            o->out = val;
        } else if (is_later_opt(arg)) {
            size_t n = strcspn(arg, "=");
            return usage_fail(cmd, "option '%.*s' is not available in this build", (int)n, arg);
        } else {
            return usage_fail(cmd, "unknown option '%s'", arg);
        }
    }
    if (!o->file) return usage_fail(cmd, "missing the .tg file to read");
    for (int k = 0; k < o->nout; k++) /* two outputs written to one file: one would be lost */
        for (int j = 0; j < k; j++)
            if (strcmp(o->outs[j].name, o->outs[k].name) != 0 &&
                same_file(o->outs[j].path, o->outs[k].path))
                return usage_fail(cmd, "--out gives the same file '%s' to '%s' and '%s'",
                                  o->outs[k].path, o->outs[j].name, o->outs[k].name);
    if (o->debug_backend && (!o->mode || strcmp(o->mode, "debug") != 0))
        return usage_fail(cmd, "--debug-backend needs --mode debug");
    if (o->mode) {
        size_t k = 0;
        while (k < sizeof modes / sizeof modes[0] && strcmp(modes[k].name, o->mode) != 0) k++;
        if (k == sizeof modes / sizeof modes[0])
            return usage_fail(cmd, "unknown mode '%s': expected reference, vm, c or debug",
                              o->mode);
        if (!modes[k].available)
            return usage_fail(cmd, "mode '%s' is not available in this build", o->mode);
    }
    if (o->profile && o->mode && strcmp(o->mode, "vm") != 0)
        return usage_fail(cmd, "--profile needs --mode vm");
    if (o->placement && strcmp(cmd, "opt") == 0 && !o->placed)
        return usage_fail(cmd, "--placement needs --placed");
    return 0;
}

/* --devices: the registry rebuilt with that many virtual host devices before anything is
 * compiled (the sim devices still from TGRAPH_SIM_DEVICES). */
static int setup_devices(const options *o) {
    if (!o->devices) return 0;
    tg_status st = tg_devices_configure(o->devices, -1);
    return st == TG_OK ? 0 : fail("%s", lib_error(st));
}

/* The tg_placement of --placement (DEFAULT when not given). */
static tg_placement placement_of(const options *o) {
    if (!o->placement) return TG_PLACEMENT_DEFAULT;
    return strcmp(o->placement, "manual") == 0 ? TG_PLACEMENT_MANUAL : TG_PLACEMENT_AUTO;
}

/* Without --threads, run and bench take TGRAPH_NUM_THREADS under --threads' own rules
 * (1 to 1024): a value outside them is an error, never silently replaced by the core count. */
static int setup_threads(options *o) {
    const char *s = getenv("TGRAPH_NUM_THREADS");
    if (o->threads || (strcmp(o->cmd, "run") != 0 && strcmp(o->cmd, "bench") != 0) || !s || !*s)
        return 0;
    long n = parse_count(s, 1024);
    if (n < 0)
        return fail("TGRAPH_NUM_THREADS='%s' is not a number of threads (1 to 1024, as for "
                    "--threads)",
                    s);
    o->threads = (int)n;
    return 0;
}

/* ---- files -------------------------------------------------------------------------- */

/* Parses FILE.tg ("-" is stdin). The library reads it through cli_ctx, so the memory cap
 * holds for the text too, and stops pipes and devices at its limit. NULL after a message. */
static tg_module *load_module(const char *path) {
    tg_module *m = NULL;
    tg_status st = strcmp(path, "-") == 0 ? tg_module_read(cli_ctx, stdin, "-", &m)
                                          : tg_module_load(cli_ctx, path, &m);
    if (st != TG_OK || !m) {
        fail("%s", lib_error(st));
        tg_module_free(m);
        return NULL;
    }
    return m;
}

/* Writes "a, b, c" (the module's function names) into buf. */
static void func_names(const tg_module *m, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < tg_module_func_count(m) && n < cap; i++) {
        const char *nm = tg_graph_name(tg_module_func(m, i));
        int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", nm ? nm : "?");
        if (w < 0) break;
        n += (size_t)w;
    }
}

/* The function to use: --func, else 'main', else the only one. NULL after a message. */
static tg_graph *select_func(const tg_module *m, const char *file, const char *name) {
    char names[512];
    func_names(m, names, sizeof names);
    if (name) {
        tg_graph *g = tg_module_find(m, name);
        if (!g) fail("%s: no function '%s' (functions: %s)", file, name, names);
        return g;
    }
    tg_graph *g = tg_module_find(m, "main");
    if (g) return g;
    if (tg_module_func_count(m) == 1) return tg_module_func(m, 0);
    if (tg_module_func_count(m) == 0)
        fail("%s: the file defines no function", file);
    else
        fail("%s: no function is named 'main': choose one with --func (functions: %s)", file,
             names);
    return NULL;
}

/* ---- types in messages -------------------------------------------------------------- */

/* "f32[?,3]" for a variable's declared type. */
static void var_type_str(const tg_var *v, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s[", tg_dtype_name(tg_var_dtype(v)));
    for (int i = 0; i < tg_var_ndim(v) && n > 0 && (size_t)n < cap; i++) {
        int64_t d = tg_var_dim(v, i);
        n += d < 0 ? snprintf(buf + n, cap - (size_t)n, "%s?", i ? "," : "")
                   : snprintf(buf + n, cap - (size_t)n, "%s%lld", i ? "," : "", (long long)d);
    }
    if (n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, "]");
}

/* "f64[2,3]" for a tensor's actual type. */
static void tensor_type_str(const tg_tensor *t, char *buf, size_t cap) {
    const int64_t *shape = tg_tensor_shape(t);
    int n = snprintf(buf, cap, "%s[", tg_dtype_name(tg_tensor_dtype(t)));
    for (int i = 0; i < tg_tensor_ndim(t) && n > 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, "]");
}

static bool tensor_fits(const tg_var *v, const tg_tensor *t) {
    if (tg_var_dtype(v) != tg_tensor_dtype(t) || tg_var_ndim(v) != tg_tensor_ndim(t)) return false;
    for (int i = 0; i < tg_var_ndim(v); i++) {
        int64_t d = tg_var_dim(v, i);
        if (d >= 0 && d != tg_tensor_shape(t)[i]) return false;
    }
    return true;
}

/* ---- run ---------------------------------------------------------------------------- */

/* Splits the loaded parameters in[0..nparam) of g: the states' values (those given) go
 * into fn's state, the others into call[] in order (*ncall of them). */
static int bind_states(tg_fn *fn, const tg_graph *g, tg_tensor **in, tg_tensor **call, int *ncall) {
    *ncall = 0;
    for (int p = 0; p < tg_graph_input_count(g); p++) {
        const tg_var *v = tg_graph_input(g, p);
        if (!tg_var_is_state(v)) {
            call[(*ncall)++] = in[p];
            continue;
        }
        if (!in[p]) continue;
        tg_status st = tg_fn_state_set(fn, tg_fn_state_find(fn, tg_var_name(v)), in[p]);
        if (st != TG_OK) return fail("%s", lib_error(st));
    }
    return 0;
}

/* Whether `name` is a state of g (the --out of its final value). */
static bool is_state_name(const tg_graph *g, const char *name) {
    for (int p = 0; p < tg_graph_input_count(g); p++) {
        const tg_var *v = tg_graph_input(g, p);
        if (tg_var_is_state(v) && strcmp(tg_var_name(v), name) == 0) return true;
    }
    return false;
}

/* Name of output i as --out and the printout know it: the name it is returned by
 * (tg_graph_output_name: the name written in `return`), unless an earlier output has the
 * same name (or it has none), then its position. */
static const char *output_label(const tg_graph *g, int i, char *buf, size_t cap) {
    const char *nm = tg_graph_output_name(g, i);
    bool taken = false;
    for (int j = 0; nm && j < i; j++) {
        const char *o = tg_graph_output_name(g, j);
        taken = taken || (o && strcmp(o, nm) == 0);
    }
    if (nm && *nm && !taken) return nm;
    snprintf(buf, cap, "%d", i);
    return buf;
}

/* Index of the output that `name` designates (its label or its position), or -1. */
static int find_output(const tg_graph *g, const char *name) {
    char buf[32];
    int n = tg_graph_output_count(g);
    for (int i = 0; i < n; i++)
        if (strcmp(output_label(g, i, buf, sizeof buf), name) == 0) return i;
    char *end = NULL;
    errno = 0;
    long k = strtol(name, &end, 10);
    if (errno == 0 && *name >= '0' && *name <= '9' && *end == '\0' && k < n) return (int)k;
    return -1;
}

/* Prints a tensor with tg_tensor_print, making sure the text ends with a newline. */
static int print_tensor(const tg_tensor *t, const char *label) {
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) return fail("cannot print output '%s': %s", label, strerror(errno));
    tg_status st = tg_tensor_print(t, mem);
    if (fclose(mem) != 0 && st == TG_OK) st = TG_ENOMEM;
    if (st != TG_OK) {
        free(text);
        return fail("cannot print output '%s': %s", label, lib_error(st));
    }
    fwrite(text, 1, len, stdout);
    if (len == 0 || text[len - 1] != '\n') fputc('\n', stdout);
    free(text);
    return 0;
}

static bool static_shape(const tg_var *v) {
    for (int i = 0; i < tg_var_ndim(v); i++)
        if (tg_var_dim(v, i) < 0) return false;
    return true;
}

/* Loads and checks the --in files against g's parameters, in parameter order. A state
 * (`mut`) with a static shape may be left out: it starts as zeros. */
static int load_inputs(const options *o, const tg_graph *g, tg_tensor **in) {
    int nparam = tg_graph_input_count(g);
    char names[512] = "";
    size_t nn = 0;
    for (int p = 0; p < nparam && nn < sizeof names; p++) {
        int w = snprintf(names + nn, sizeof names - nn, "%s%s", p ? ", " : "",
                         tg_var_name(tg_graph_input(g, p)));
        nn += w > 0 ? (size_t)w : 0;
    }
    /* names first: unknown, repeated */
    for (int k = 0; k < o->nin; k++) {
        int p = 0;
        while (p < nparam && strcmp(tg_var_name(tg_graph_input(g, p)), o->ins[k].name) != 0) p++;
        if (p == nparam) {
            if (nparam == 0)
                return fail("unknown input '%s': function '%s' takes no parameters", o->ins[k].name,
                            tg_graph_name(g));
            return fail("unknown input '%s': function '%s' takes %s", o->ins[k].name,
                        tg_graph_name(g), names);
        }
        for (int j = 0; j < k; j++)
            if (strcmp(o->ins[j].name, o->ins[k].name) == 0)
                return fail("input '%s' is given twice", o->ins[k].name);
    }
    /* missing ones, all named in one message */
    char missing[512] = "";
    size_t mn = 0;
    int nmissing = 0;
    for (int p = 0; p < nparam; p++) {
        const tg_var *v = tg_graph_input(g, p);
        int k = 0;
        while (k < o->nin && strcmp(o->ins[k].name, tg_var_name(v)) != 0) k++;
        if (k < o->nin || (tg_var_is_state(v) && static_shape(v))) continue; /* zeros */
        char ty[128];
        var_type_str(v, ty, sizeof ty);
        if (mn < sizeof missing) {
            int w = snprintf(missing + mn, sizeof missing - mn, "%s'%s' (%s)", nmissing ? ", " : "",
                             tg_var_name(v), ty);
            mn += w > 0 ? (size_t)w : 0;
        }
        nmissing++;
    }
    if (nmissing)
        return fail("missing input%s %s: pass --in NAME=FILE.npy for each parameter",
                    nmissing > 1 ? "s" : "", missing);
    /* values */
    for (int p = 0; p < nparam; p++) {
        const tg_var *v = tg_graph_input(g, p);
        const binding *b = NULL;
        for (int k = 0; k < o->nin && !b; k++)
            if (strcmp(o->ins[k].name, tg_var_name(v)) == 0) b = &o->ins[k];
        if (!b) continue; /* a state left at its initial zeros */
        tg_status st = tg_npy_load(cli_ctx, b->path, &in[p]);
        if (st != TG_OK || !in[p]) {
            const char *msg = lib_error(st);
            if (strstr(msg, b->path)) return fail("input '%s': %s", b->name, msg);
            return fail("input '%s': %s: %s", b->name, b->path, msg);
        }
        if (!tensor_fits(v, in[p])) {
            char want[128], got[128];
            var_type_str(v, want, sizeof want);
            tensor_type_str(in[p], got, sizeof got);
            return fail("input '%s': expected %s, got %s from %s", b->name, want, got, b->path);
        }
    }
    return 0;
}

static int cmd_run(const options *o) {
    int rc = EXIT_FAIL;
    tg_module *m = load_module(o->file);
    tg_graph *g = m ? select_func(m, o->file, o->func) : NULL;
    tg_fn *fn = NULL;
    tg_tensor **in = NULL, **out = NULL;
    int *out_dest = NULL;    /* per output: index into o->outs, or -1 to print */
    tg_tensor **call = NULL; /* the inputs passed to each call (states excluded) */
    int nparam = 0, nres = 0, ncall = 0;
    if (!g) goto done;
    nparam = tg_graph_input_count(g);
    nres = tg_graph_output_count(g);
    in = calloc((size_t)nparam + 1, sizeof *in);
    out = calloc((size_t)nres + 1, sizeof *out);
    out_dest = malloc(((size_t)nres + 1) * sizeof *out_dest);
    if (!in || !out || !out_dest) {
        fail("out of memory");
        goto done;
    }
    for (int r = 0; r < nres; r++) out_dest[r] = -1;
    for (int k = 0; k < o->nout; k++) {
        int r = find_output(g, o->outs[k].name);
        if (r < 0 && is_state_name(g, o->outs[k].name)) { /* the state's final value */
            for (int j = 0; j < k; j++)
                if (strcmp(o->outs[j].name, o->outs[k].name) == 0) {
                    fail("output '%s' is given twice to --out", o->outs[k].name);
                    goto done;
                }
            continue;
        }
        if (r < 0) {
            char list[512] = "", buf[32];
            size_t n = 0;
            for (int j = 0; j < nres && n < sizeof list; j++) {
                int w = snprintf(list + n, sizeof list - n, "%s%s", j ? ", " : "",
                                 output_label(g, j, buf, sizeof buf));
                n += w > 0 ? (size_t)w : 0;
            }
            for (int p = 0, ns = 0; p < tg_graph_input_count(g) && n < sizeof list; p++) {
                const tg_var *v = tg_graph_input(g, p); /* states can be written too */
                if (!tg_var_is_state(v)) continue;
                int w = snprintf(list + n, sizeof list - n, "%s%s",
                                 ns++ ? ", " : " (states: ", tg_var_name(v));
                n += w > 0 ? (size_t)w : 0;
            }
            if (n > 0 && n + 1 < sizeof list && strstr(list, " (states: ")) strcat(list, ")");
            fail("unknown output '%s': function '%s' returns %s", o->outs[k].name, tg_graph_name(g),
                 nres ? list : "nothing");
            goto done;
        }
        if (out_dest[r] >= 0) {
            fail("output '%s' is given twice to --out", o->outs[k].name);
            goto done;
        }
        out_dest[r] = k;
    }
    if ((rc = load_inputs(o, g, in)) != 0) goto done;
    rc = EXIT_FAIL;

    tg_compile_opts copts = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .no_blas = o->no_blas,
                                            .no_inline = o->no_inline, .placement = placement_of(o),
                                            .nthreads = o->threads, .profile = o->profile);
    if (o->debug_backend && strcmp(o->debug_backend, "c") == 0) copts.debug_backend = TG_MODE_C;
    for (size_t k = 0; o->mode && k < sizeof modes / sizeof modes[0]; k++)
        if (strcmp(modes[k].name, o->mode) == 0) copts.mode = modes[k].mode;
    tg_status st = tg_graph_compile(g, &copts, &fn);
    if (st != TG_OK || !fn) {
        fail("%s", lib_error(st));
        goto done;
    }
    call = calloc((size_t)nparam + 1, sizeof *call);
    if (!call) {
        fail("out of memory");
        goto done;
    }
    if (bind_states(fn, g, in, call, &ncall) != 0) goto done;
    st = tg_fn_call(fn, call, ncall, out, nres);
    for (int k = 1; k < o->runs && st == TG_OK; k++) /* -n K: the outputs of the last call */
        st = tg_fn_call_into(fn, call, ncall, out, nres);
    if (st != TG_OK) {
        fail("%s", lib_error(st));
        goto done;
    }
    if (tg_world_rank() != 0) { /* in an MPI job, rank 0 writes and prints (docs/mpi.md) */
        rc = EXIT_OK;
        goto done;
    }
    for (int k = 0; k < o->nout; k++) { /* final values of states */
        if (find_output(g, o->outs[k].name) >= 0) continue;
        const char *path = o->outs[k].path;
        st = tg_npy_save(path, tg_fn_state(fn, tg_fn_state_find(fn, o->outs[k].name)));
        if (st != TG_OK) {
            const char *msg = lib_error(st);
            if (strstr(msg, path))
                fail("state '%s': %s", o->outs[k].name, msg);
            else
                fail("state '%s': %s: %s", o->outs[k].name, path, msg);
            goto done;
        }
    }
    for (int r = 0; r < nres; r++) {
        char buf[32];
        const char *label = output_label(g, r, buf, sizeof buf);
        if (!out[r]) {
            fail("output '%s': the run produced no value", label);
            goto done;
        }
        if (out_dest[r] >= 0) {
            const char *path = o->outs[out_dest[r]].path;
            st = tg_npy_save(path, out[r]);
            if (st != TG_OK) {
                const char *msg = lib_error(st);
                if (strstr(msg, path))
                    fail("output '%s': %s", label, msg);
                else
                    fail("output '%s': %s: %s", label, path, msg);
                goto done;
            }
        } else {
            if (nres > 1) printf("%s = ", label);
            if (print_tensor(out[r], label) != 0) goto done;
        }
    }
    if (fflush(stdout) != 0) {
        fail("cannot write the results: %s", strerror(errno));
        goto done;
    }
    /* --profile: the table of every call, on stderr (stdout holds the outputs) */
    if (o->profile && (st = tg_fn_profile_print(fn, stderr)) != TG_OK) {
        fail("%s", lib_error(st));
        goto done;
    }
    rc = EXIT_OK;
done:
    for (int p = 0; in && p < nparam; p++) tg_tensor_free(in[p]);
    for (int r = 0; out && r < nres; r++) tg_tensor_free(out[r]);
    free(in);
    free(out);
    free(out_dest);
    free(call);
    tg_fn_free(fn);
    tg_module_free(m);
    return rc;
}

/* ---- bench -------------------------------------------------------------------------- */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* "12.345 ms": a duration in the unit that suits it. */
static void fmt_time(double s, char *buf, size_t cap) {
    if (s < 1e-6)
        snprintf(buf, cap, "%.1f ns", s * 1e9);
    else if (s < 1e-3)
        snprintf(buf, cap, "%.3f us", s * 1e6);
    else if (s < 1.0)
        snprintf(buf, cap, "%.3f ms", s * 1e3);
    else
        snprintf(buf, cap, "%.3f s", s);
}

static int cmd_bench(const options *o) {
    int rc = EXIT_FAIL;
    tg_module *m = load_module(o->file);
    tg_graph *g = m ? select_func(m, o->file, o->func) : NULL;
    tg_fn *fn = NULL;
    tg_tensor **in = NULL, **out = NULL;
    tg_tensor **call = NULL; /* the inputs passed to each call (states excluded) */
    int nparam = 0, nres = 0, ncall = 0, runs = o->runs > 0 ? o->runs : 10;
    double *t = NULL;
    if (!g) goto done;
    nparam = tg_graph_input_count(g);
    nres = tg_graph_output_count(g);
    in = calloc((size_t)nparam + 1, sizeof *in);
    out = calloc((size_t)nres + 1, sizeof *out);
    t = malloc(sizeof *t * (size_t)runs);
    if (!in || !out || !t) {
        fail("out of memory");
        goto done;
    }
    if ((rc = load_inputs(o, g, in)) != 0) goto done;
    rc = EXIT_FAIL;
    tg_compile_opts copts = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .no_blas = o->no_blas,
                                            .no_inline = o->no_inline, .placement = placement_of(o),
                                            .nthreads = o->threads, .profile = o->profile);
    if (o->debug_backend && strcmp(o->debug_backend, "c") == 0) copts.debug_backend = TG_MODE_C;
    for (size_t k = 0; o->mode && k < sizeof modes / sizeof modes[0]; k++)
        if (strcmp(modes[k].name, o->mode) == 0) copts.mode = modes[k].mode;
    tg_status st = tg_graph_compile(g, &copts, &fn);
    if (st == TG_OK && !(call = calloc((size_t)nparam + 1, sizeof *call))) st = TG_ENOMEM;
    if (st == TG_OK && bind_states(fn, g, in, call, &ncall) != 0) goto done;
    if (st == TG_OK) st = tg_fn_call(fn, call, ncall, out, nres); /* warm-up: makes outputs */
    tg_fn_profile_reset(fn); /* the table shows the timed calls only */
    for (int r = 0; r < runs && st == TG_OK; r++) {
        double t0 = now_seconds();
        st = tg_fn_call_into(fn, call, ncall, out, nres);
        t[r] = now_seconds() - t0;
    }
    if (st == TG_OK && o->profile) st = tg_fn_profile_print(fn, stdout);
    if (st != TG_OK) {
        fail("%s", lib_error(st));
        goto done;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    char med[32], mn[32];
    fmt_time(runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]), med, sizeof med);
    fmt_time(t[0], mn, sizeof mn);
    printf("per call: median %s, min %s (%d runs)\n", med, mn, runs);
    if (fflush(stdout) != 0) {
        fail("cannot write the results: %s", strerror(errno));
        goto done;
    }
    rc = EXIT_OK;
done:
    for (int p = 0; in && p < nparam; p++) tg_tensor_free(in[p]);
    for (int r = 0; out && r < nres; r++) tg_tensor_free(out[r]);
    free(in);
    free(call);
    free(out);
    free(t);
    tg_fn_free(fn);
    tg_module_free(m);
    return rc;
}

/* ---- opt ---------------------------------------------------------------------------- */

/* The graph after the pipeline (a new graph), or NULL after a message. */
static tg_graph *optimized(const options *o, const tg_graph *g) {
    tg_optimize_opts oo = TG_OPTIMIZE_OPTS(.no_blas = o->no_blas, .no_inline = o->no_inline,
                                           .verify = o->verify, .print_after = o->print_after,
                                           .print_to = stdout, .stats_to = o->stats ? stderr : NULL,
                                           .place = o->placed, .placement = placement_of(o));
    tg_graph *r = NULL;
    tg_status st = tg_graph_optimize(g, &oo, &r);
    if (st != TG_OK || !r) {
        fail("%s", lib_error(st));
        return NULL;
    }
    return r;
}

static int cmd_opt(const options *o) {
    tg_module *m = load_module(o->file);
    if (!m) return EXIT_FAIL;
    int rc = EXIT_OK;
    tg_graph *only = o->func ? select_func(m, o->file, o->func) : NULL;
    if (o->func && !only) rc = EXIT_FAIL;
    /* With --print-after, each function is optimized and printed in turn (after what
       --print-after shows of it). Otherwise the functions are printed at the end as one
       file that parses back: where calls stay (--no-inline) and pmaps (never inlined) name
       another function, they print its name, and its optimized text is printed once, as
       its own function. */
    int nf = tg_module_func_count(m), nr = 0, np = 0;
    tg_graph **res = rc == EXIT_OK ? calloc((size_t)nf + 1, sizeof *res) : NULL;
    if (rc == EXIT_OK && !res) rc = fail("out of memory");
    for (int i = 0; rc == EXIT_OK && i < nf; i++) {
        tg_graph *g = tg_module_func(m, i);
        if (only && g != only) continue;
        if (!(res[nr] = optimized(o, g))) {
            rc = EXIT_FAIL;
        } else if (!o->no_inline && o->print_after) {
            if (np++ > 0) fputc('\n', stdout);
            tg_status st = tg_graph_print(res[nr], stdout);
            if (st != TG_OK) rc = fail("%s", lib_error(st));
            tg_graph_free(res[nr]);
        } else {
            nr++;
        }
    }
    if (rc == EXIT_OK && nr > 0) {
        tg_status st = tg_graphs_print((const tg_graph *const *)res, nr, stdout);
        if (st != TG_OK) rc = fail("%s", lib_error(st));
    }
    for (int i = 0; i < nr; i++) tg_graph_free(res[i]);
    free(res);
    if (rc == EXIT_OK && fflush(stdout) != 0)
        rc = fail("cannot write the graph: %s", strerror(errno));
    tg_module_free(m);
    return rc;
}

/* ---- dot ---------------------------------------------------------------------------- */

/* Extension of path if it is one Graphviz renders to, else NULL. */
static const char *render_format(const char *path) {
    const char *dot = strrchr(path, '.');
    if (!dot || strchr(dot, '/')) return NULL;
    static const char *const fmts[] = {"svg", "png", "pdf"};
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++)
        if (strcmp(dot + 1, fmts[k]) == 0) return fmts[k];
    return NULL;
}

/* Pipes DOT text through Graphviz's `dot -T<fmt> -o path`. */
static int render(const char *text, size_t len, const char *fmt, const char *path) {
    int fds[2];
    if (pipe(fds) != 0) return fail("cannot run Graphviz: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return fail("cannot run Graphviz: %s", strerror(errno));
    }
    if (pid == 0) {
        char tflag[16];
        snprintf(tflag, sizeof tflag, "-T%s", fmt);
        close(fds[1]);
        if (dup2(fds[0], STDIN_FILENO) < 0) _exit(126);
        close(fds[0]);
        execlp("dot", "dot", tflag, "-o", path, (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fds[1], text + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    close(fds[1]);
    signal(SIGPIPE, old);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return fail("cannot make '%s': Graphviz's 'dot' program is not installed "
                    "(write a .dot file with -o FILE.dot instead)",
                    path);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || done < len)
        return fail("cannot make '%s': Graphviz's 'dot' program failed", path);
    return EXIT_OK;
}

static int cmd_dot(const options *o) {
    tg_module *m = load_module(o->file);
    tg_graph *g = m ? select_func(m, o->file, o->func) : NULL;
    tg_graph *opt = NULL;
    int rc = EXIT_FAIL;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = NULL;
    if (!g) goto done;
    if (o->opt && !(g = opt = optimized(o, g))) goto done;
    mem = open_memstream(&text, &len);
    if (!mem) {
        fail("cannot draw the graph: %s", strerror(errno));
        goto done;
    }
    tg_status st = tg_graph_print_dot(g, mem);
    if (fclose(mem) != 0 && st == TG_OK) st = TG_ENOMEM;
    if (st != TG_OK) {
        fail("%s", lib_error(st));
        goto done;
    }
    const char *fmt = o->out ? render_format(o->out) : NULL;
    if (fmt) {
        rc = render(text, len, fmt, o->out);
        goto done;
    }
    FILE *f = o->out ? fopen(o->out, "wb") : stdout;
    if (!f) {
        fail("cannot write '%s': %s", o->out, strerror(errno));
        goto done;
    }
    bool ok = fwrite(text, 1, len, f) == len;
    ok = (f == stdout ? fflush(f) == 0 : fclose(f) == 0) && ok;
    if (!ok) {
        fail("cannot write '%s': %s", o->out ? o->out : "stdout", strerror(errno));
        goto done;
    }
    rc = EXIT_OK;
done:
    free(text);
    tg_graph_free(opt);
    tg_module_free(m);
    return rc;
}

/* ---- main --------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int (*fn)(const options *o);
    const char *help;
} commands[] = {
    {"run", cmd_run, usage_run},
    {"opt", cmd_opt, usage_opt},
    {"dot", cmd_dot, usage_dot},
    {"bench", cmd_bench, usage_bench},
};

static const char usage_cache[] =
    "usage: tgraph cache --list | --clear\n"
    "\n"
    "The C JIT (--mode c) keeps compiled code in a per-user cache directory\n"
    "($XDG_CACHE_HOME/tgraph, else ~/.cache/tgraph; TGRAPH_CACHE_DIR overrides both).\n"
    "\n"
    "options:\n"
    "  --list       print the directory, then one line per entry: size, date, .so path\n"
    "  --clear      remove every entry (and left-over temporary files)\n"
    "  -h, --help   show this text\n";

static int cmd_cache(int argc, char **argv) {
    if (argc == 1 && (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0)) {
        fputs(usage_cache, stdout);
        return EXIT_OK;
    }
    if (argc != 1 || (strcmp(argv[0], "--list") != 0 && strcmp(argv[0], "--clear") != 0))
        return usage_fail("cache", "expected --list or --clear");
    if (strcmp(argv[0], "--list") == 0) {
        tg_status st = tg_cache_list(stdout);
        return st == TG_OK ? EXIT_OK : fail("%s", lib_error(st));
    }
    int removed = 0;
    tg_status st = tg_cache_clear(&removed);
    if (st != TG_OK) return fail("%s", lib_error(st));
    printf("removed %d file%s\n", removed, removed == 1 ? "" : "s");
    return EXIT_OK;
}

/* Commands of the design that later work adds. */
static const char *const later_commands[] = {NULL}; /* none at present */

/* SIGINT, SIGTERM, SIGHUP: stop the C compilers the cache runs and remove their temporary
 * files, then end as the signal would have. */
static void on_signal(int sig) {
    tg_cache_interrupt();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* A write past the file-size limit (ulimit -f) fails with EFBIG, reported with the file's
 * name, instead of killing the process; the end signals clean up the compiler cache. */
static void set_signals(void) {
    signal(SIGXFSZ, SIG_IGN);
    const int ends[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t k = 0; k < sizeof ends / sizeof ends[0]; k++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        if (sigaction(ends[k], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(ends[k], &sa, NULL); /* left ignored when started ignoring it (nohup) */
    }
}

/* main's exit status, after this process's part in an MPI job has ended (docs/mpi.md): a
 * failure is told to the other processes with its message. */
static int finish(int rc) {
    int status = tg_world_finish(rc == EXIT_OK ? 0 : rc, last_failure[0] ? last_failure : NULL);
    if (status != 0 && rc == EXIT_OK) return fail("%s", tg_last_error()); /* another's */
    return rc;
}

int main(int argc, char **argv) {
    set_signals();
    tg_world_size(); /* joins the MPI job when started by mpirun */
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        fputs(usage_main, stdout);
        return EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("tgraph %s\n", TG_VERSION);
        return EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc == 2) {
            fputs(usage_main, stdout);
            return EXIT_OK;
        }
        for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
            if (strcmp(argv[2], commands[k].name) == 0) {
                fputs(commands[k].help, stdout);
                return EXIT_OK;
            }
        return usage_fail(NULL, "unknown command '%s'", argv[2]);
    }
    if (strcmp(cmd, "cache") == 0) return cmd_cache(argc - 2, argv + 2);
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        if (strcmp(cmd, commands[k].name) != 0) continue;
        options o = {.cmd = commands[k].name};
        int rc = parse_args(argc - 2, argv + 2, &o, commands[k].help);
        if (rc == 0) rc = setup_ctx();
        if (rc == 0) rc = setup_threads(&o);
        if (rc == 0) rc = setup_devices(&o);
        if (rc == 0) rc = commands[k].fn(&o);
        free(o.ins);
        free(o.outs);
        tg_ctx_free(cli_ctx);
        return finish(rc < 0 ? EXIT_OK : rc);
    }
    for (size_t k = 0; k < sizeof later_commands / sizeof later_commands[0]; k++)
        if (later_commands[k] && strcmp(cmd, later_commands[k]) == 0) {
            fprintf(stderr, "tgraph: command '%s' is not available in this build\n", cmd);
            return EXIT_USAGE;
        }
    if (cmd[0] == '-') return usage_fail(NULL, "unknown option '%s'", cmd);
    return usage_fail(NULL, "unknown command '%s'", cmd);
}
