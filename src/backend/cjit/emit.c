/* emit.c - the C JIT's emitters: one per op (or op kind) in a registry, each writing the C
 * code of one node, and the whole-graph function: a table of steps, one per node in order,
 * that tg_rt_run (tg_rt.h) walks. Each distinct function is emitted once: a node whose
 * function has the same text as an earlier node's uses that one, views and BLAS calls
 * take their variables and numbers as arguments, and loops their constants (from tables
 * beside the steps), so the
 * source, and the compiler's time, grow with the distinct code rather than with the nodes.
 *
 * What is emitted:
 *  - elementwise nodes: an inner loop (tg_rt_loop) over one row of the output, with the
 *    scalar expression of the op record (c_expr) for the node's compute dtype; the library's
 *    loop driver (rt->ew) broadcasts, collapses axes and splits rows over the thread pool.
 *    Each loop has a contiguous variant (unit strides: plain indexed loads and stores that
 *    the compiler vectorizes), one for inputs that are contiguous or broadcast (stride 0,
 *    read from blocks filled with the value: the same vectorized loop) and a strided one.
 *  - fused nodes (elementwise outputs): the same loop, with one local per instruction of
 *    the node's program, so the whole expression runs in registers; fused nodes whose
 *    outputs reduce along rows (the innermost axis among the reduced ones): a loop that
 *    computes and accumulates in one pass, driven by rt->red, with the identity, combine
 *    and mean of each reduction's record (`reduce`, ops.h; red_c holds the C per combine).
 *  - BLAS products (dot and matmul of matrices, gemm, gemv): CBLAS calls through rt->gemm
 *    and rt->gemv after a run-time check of the operands' strides (the VM's rules); other
 *    layouts and large products (split over the pool) go to the library's kernel.
 *  - views (slice, transpose, expand_dims, squeeze, broadcast_to, reshape of contiguous
 *    values): address and stride arithmetic, handed to the library by rt->view.
 *  - loops (scan, map): the loop over the steps, around a direct call of the step's
 *    generated function (emit_scan), set up and finished by rt->scan_begin/scan_end.
 *  - everything else (plain reductions, gathers, constructors, ...): a call of the
 *    library's kernel for that node (rt->kernel), so every graph compiles.
 * A node whose record lacks the C expression for its dtype falls back to the kernel.
 *
 * Invariants: the text depends only on the graph (node order, types, attributes), never
 * on addresses or on the run, so equal graphs give equal sources (the cache key hashes
 * them); numbers are printed exactly (hexadecimal floats).
 */
#include "cjit.h"

#include "../../ops/fused.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>

/* ---- strings ---- */

void tg_cj_str_printf(tg_cj_str *s, const char *fmt, ...) {
    if (s->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->n;
        int w = vsnprintf(s->p ? s->p + s->n : NULL, s->p ? room : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            s->oom = true;
            return;
        }
        if (s->p && (size_t)w < room) {
            s->n += (size_t)w;
            return;
        }
        size_t cap = s->cap ? s->cap : 4096;
        while (cap - s->n <= (size_t)w) cap *= 2;
        char *p = tg_mem_realloc(s->ctx, s->p, s->cap, cap);
        if (!p) {
            s->oom = true;
            return;
        }
        s->p = p;
        s->cap = cap;
    }
}

void tg_cj_str_free(tg_cj_str *s) {
    if (s->p) tg_mem_free(s->ctx, s->p, s->cap);
    s->p = NULL;
    s->n = s->cap = 0;
}

/* ---- C types and constants ---- */

static const char *ctype(tg_dtype dt) {
    static const char *const names[TG_DT_COUNT] = {
        [TG_DT_BOOL] = "uint8_t", [TG_DT_I8] = "int8_t",   [TG_DT_I16] = "int16_t",
        [TG_DT_I32] = "int32_t",  [TG_DT_I64] = "int64_t", [TG_DT_U8] = "uint8_t",
        [TG_DT_F32] = "float",    [TG_DT_F64] = "double"};
    return names[dt];
}

/* An initializer of a tg_rt_num holding a constant of dtype dt, exactly: .i for integer
 * and bool dtypes, .f (the double value) for float ones. */
static void put_num(tg_cj_str *s, tg_dtype dt, int64_t i, double f) {
    if (!tg_dtype_is_float(dt)) {
        if (i == INT64_MIN)
            tg_cj_str_printf(s, "{.i = INT64_MIN}, ");
        else
            tg_cj_str_printf(s, "{.i = %lldLL}, ", (long long)i);
        return;
    }
    if (isnan(f))
        tg_cj_str_printf(s, "{.f = NAN}, ");
    else if (isinf(f))
        tg_cj_str_printf(s, "{.f = %sINFINITY}, ", f < 0 ? "-" : "");
    else
        tg_cj_str_printf(s, "{.f = %a}, ", f);
}

/* The constants of a loop: their values go to a table beside the steps (the loop receives
 * them as its argument k), and the loop copies them into locals kc<j> (j: the instruction)
 * before its loops, converted to their dtype, so that the loop's text does not depend on
 * them and the compiler sees them as loop invariants. */
typedef struct loop_nums {
    tg_cj_str *tab; /* receives the table's entries */
    int n;          /* entries written */
} loop_nums;

static void put_consts(tg_cj_str *s, const tg_fused_prog *p, loop_nums *kn) {
    for (int j = 0; p && j < p->ninstr; j++) {
        const tg_fused_instr *in = &p->instr[j];
        if (in->op != TG_FUSED_CONST) continue;
        tg_dtype dt = (tg_dtype)p->type[p->nin + j].dtype;
        const char *t = ctype(dt);
        tg_cj_str_printf(s, "    const %s kc%d = (%s)k[%d].%s;\n", t, j, t, kn->n,
                         tg_dtype_is_float(dt) ? "f" : "i");
        put_num(kn->tab, dt, in->ci, in->cf);
        kn->n++;
    }
    tg_cj_str_printf(s, "    (void)k;\n");
}

/* Writes the C expression template `tpl` with %k replaced by args[k] and %T by the C type
 * of `res`. false when the template is malformed. */
static bool put_expr(tg_cj_str *s, const char *tpl, const char *const *args, int nargs,
                     tg_dtype res) {
    for (const char *p = tpl; *p; p++) {
        if (*p != '%') {
            tg_cj_str_printf(s, "%c", *p);
            continue;
        }
        p++;
        if (*p == 'T') {
            tg_cj_str_printf(s, "%s", ctype(res));
        } else if (*p >= '0' && *p <= '9' && *p - '0' < nargs) {
            tg_cj_str_printf(s, "%s", args[*p - '0']);
        } else {
            return false;
        }
    }
    return true;
}

/* The expression template of elementwise op `op` for the given operand and result
 * dtypes: keyed by the result's dtype, by the operands' for comparisons. */
static const char *expr_for(int op, const tg_dtype *in, int nin, tg_dtype res) {
    const tg_op_def *d = tg_op_table[op];
    if (d->kind != TG_KIND_ELEMWISE) return NULL;
    tg_dtype key = res;
    if (d->ew.flags & TG_EW_CMP) {
        if (nin < 1) return NULL;
        key = in[0];
        for (int k = 1; k < nin; k++)
            if (in[k] != key) return NULL;
    }
    return d->c_expr[key];
}

/* ---- the elementwise loop ----
 * A loop body is a list of statements computing `o0..` from `a0..` (declared by the loop
 * writer); the body writer emits them into s. */
typedef struct ew_sig {
    int nin, nout;
    tg_dtype in[TG_MAX_OUTS];
    tg_dtype out[TG_MAX_OUTS];
} ew_sig;

typedef bool (*body_fn)(tg_cj_str *s, const void *data);

/* Whether the loop body written by body calls a function that GCC vectorizes with libmvec
 * (tg_rt.h: TG_RT_MVEC_FUNCS, and the helpers that call them), by name, in float or
 * double; true when the body cannot be written. */
static bool calls_vector_math(tg_ctx *ctx, body_fn body, const void *data) {
#define TG_X_NAME(f) #f,
    static const char *const names[] = {TG_RT_MVEC_FUNCS(TG_X_NAME) TG_RT_MVEC_HELPERS(TG_X_NAME)};
#undef TG_X_NAME
    tg_cj_str t = {.ctx = ctx};
    bool calls = !body(&t, data) || t.oom || !t.p;
    for (const char *p = t.p; !calls && p && *p; p++) {
        if (!(isalpha((unsigned char)*p) || *p == '_') ||
            (p > t.p && (isalnum((unsigned char)p[-1]) || p[-1] == '_')))
            continue;
        size_t len = 0;
        while (isalnum((unsigned char)p[len]) || p[len] == '_') len++;
        for (size_t i = 0; !calls && i < TG_COUNTOF(names); i++) {
            size_t n = strlen(names[i]);
            calls = strncmp(p, names[i], n) == 0 && (len == n || (len == n + 1 && p[n] == 'f')) &&
                    p[len] == '(';
        }
        p += len - 1;
    }
    tg_cj_str_free(&t);
    return calls;
}

/* The loop's variant for contiguous outputs and inputs each contiguous or broadcast
 * (stride 0: one value for the row, as an input of shape [K, 1] gives along its rows).
 * It runs blocks of B elements of the contiguous loop, a broadcast input read from a
 * block on the stack filled with its value: the loop the compiler vectorizes, whatever
 * inputs broadcast, with the same expressions, so the same bits as the strided variant
 * these inputs took before. Not for a body that calls vector math, which would change its
 * bits once vectorized (libmvec's functions are not libm's: within 4 ulp). B: the blocks
 * take at most 16 KiB of stack. A block is filled 16 elements at a time into aligned
 * memory, in whole vectors that the loop's vector loads read back at once (filled element
 * by element, every load of a short row waited for the stores to drain). */
static void put_bcast_variant(tg_cj_str *s, const ew_sig *sig, body_fn body, const void *data,
                              bool *ok) {
    if (calls_vector_math(s->ctx, body, data)) return;
    size_t bytes = 0;
    for (int k = 0; k < sig->nin; k++) bytes += tg_dtype_size(sig->in[k]);
    if (bytes == 0) return;
    int64_t B = 256;
    while (B > 16 && (size_t)B * bytes > 16384) B /= 2;
    tg_cj_str_printf(s, "    if (");
    for (int o = 0; o < sig->nout; o++)
        tg_cj_str_printf(s, "s[%d] == %zu && ", o, tg_dtype_size(sig->out[o]));
    for (int k = 0; k < sig->nin; k++)
        tg_cj_str_printf(s, "%s(s[%d] == %zu || s[%d] == 0)", k ? " && " : "", sig->nout + k,
                         tg_dtype_size(sig->in[k]), sig->nout + k);
    tg_cj_str_printf(s, ") {\n");
    for (int k = 0; k < sig->nin; k++) {
        const char *t = ctype(sig->in[k]);
        int a = sig->nout + k;
        tg_cj_str_printf(s,
                         "        _Alignas(64) %s b%d[%lld];\n"
                         "        const %s *r%d = (const %s *)p[%d];\n"
                         "        int64_t w%d = %lld;\n"
                         "        if (s[%d] == 0) {\n"
                         "            const %s v = r%d[0];\n"
                         "            for (int64_t j0 = 0; j0 < n && j0 < %lld; j0 += 16)\n"
                         "                for (int j = 0; j < 16; j++) b%d[j0 + j] = v;\n"
                         "            r%d = b%d;\n"
                         "            w%d = 0;\n"
                         "        }\n",
                         t, k, (long long)B, t, k, t, a, k, (long long)B, a, t, k, (long long)B, k,
                         k, k, k);
    }
    tg_cj_str_printf(s,
                     "        for (int64_t j0 = 0; j0 < n; j0 += %lld) {\n"
                     "            const int64_t m = n - j0 < %lld ? n - j0 : %lld;\n",
                     (long long)B, (long long)B, (long long)B);
    for (int o = 0; o < sig->nout; o++)
        tg_cj_str_printf(s, "            %s *restrict q%d = (%s *)p[%d] + j0;\n",
                         ctype(sig->out[o]), o, ctype(sig->out[o]), o);
    tg_cj_str_printf(s, "            for (int64_t j = 0; j < m; j++) {\n");
    for (int k = 0; k < sig->nin; k++)
        tg_cj_str_printf(s, "            const %s a%d = r%d[j];\n", ctype(sig->in[k]), k, k);
    *ok = *ok && body(s, data);
    for (int o = 0; o < sig->nout; o++) tg_cj_str_printf(s, "            q%d[j] = o%d;\n", o, o);
    tg_cj_str_printf(s, "            }\n");
    for (int k = 0; k < sig->nin; k++) tg_cj_str_printf(s, "            r%d += w%d;\n", k, k);
    tg_cj_str_printf(s, "        }\n        return;\n    }\n");
}

static void put_loop(tg_cj_str *s, const char *name, const ew_sig *sig, body_fn body,
                     const void *data, const tg_fused_prog *kp, loop_nums *kn, bool *ok) {
    int na = sig->nout + sig->nin;
    tg_cj_str_printf(s,
                     "TG_RT_FN void %s(int64_t n, char *const *p, const int64_t *s, "
                     "const tg_rt_num *k) {\n",
                     name);
    put_consts(s, kp, kn);
    /* contiguous variant */
    tg_cj_str_printf(s, "    if (");
    for (int k = 0; k < na; k++) {
        tg_dtype dt = k < sig->nout ? sig->out[k] : sig->in[k - sig->nout];
        tg_cj_str_printf(s, "%ss[%d] == %zu", k ? " && " : "", k, tg_dtype_size(dt));
    }
    tg_cj_str_printf(s, ") {\n");
    /* restrict: no output of a generated loop shares memory with an input, since the memory
     * plan gives elementwise outputs a dying input's block only for call-backs (cjit.c) */
    for (int k = 0; k < sig->nout; k++)
        tg_cj_str_printf(s, "        %s *restrict q%d = (%s *)p[%d];\n", ctype(sig->out[k]), k,
                         ctype(sig->out[k]), k);
    for (int k = 0; k < sig->nin; k++)
        tg_cj_str_printf(s, "        const %s *r%d = (const %s *)p[%d];\n", ctype(sig->in[k]), k,
                         ctype(sig->in[k]), sig->nout + k);
    tg_cj_str_printf(s, "        for (int64_t j = 0; j < n; j++) {\n");
    for (int k = 0; k < sig->nin; k++)
        tg_cj_str_printf(s, "            const %s a%d = r%d[j];\n", ctype(sig->in[k]), k, k);
    *ok = *ok && body(s, data);
    for (int k = 0; k < sig->nout; k++) tg_cj_str_printf(s, "            q%d[j] = o%d;\n", k, k);
    tg_cj_str_printf(s, "        }\n        return;\n    }\n");
    put_bcast_variant(s, sig, body, data, ok);
    /* strided variant */
    tg_cj_str_printf(s, "    for (int64_t j = 0; j < n; j++) {\n");
    for (int k = 0; k < sig->nin; k++)
        tg_cj_str_printf(s, "        const %s a%d = *(const %s *)(p[%d] + j * s[%d]);\n",
                         ctype(sig->in[k]), k, ctype(sig->in[k]), sig->nout + k, sig->nout + k);
    *ok = *ok && body(s, data);
    for (int k = 0; k < sig->nout; k++)
        tg_cj_str_printf(s, "        *(%s *)(p[%d] + j * s[%d]) = o%d;\n", ctype(sig->out[k]), k, k,
                         k);
    tg_cj_str_printf(s, "    }\n}\n\n");
}

/* The result of an expression stored as dtype dt: bool results are normalized to 0/1. */
static void put_store_expr(tg_cj_str *s, tg_dtype dt, const char *expr_start) {
    (void)expr_start;
    if (dt == TG_DT_BOOL)
        tg_cj_str_printf(s, "(uint8_t)((");
    else
        tg_cj_str_printf(s, "(%s)(", ctype(dt));
}

static void put_store_end(tg_cj_str *s, tg_dtype dt) {
    tg_cj_str_printf(s, dt == TG_DT_BOOL ? ") != 0)" : ")");
}

/* ---- emitter: one elementwise op ---- */

typedef struct ew_one {
    const char *tpl;
    int nin;
    tg_dtype res;
} ew_one;

static bool body_one(tg_cj_str *s, const void *data) {
    const ew_one *e = data;
    static const char *const args[] = {"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"};
    tg_cj_str_printf(s, "            const %s o0 = ", ctype(e->res));
    put_store_expr(s, e->res, NULL);
    bool ok = put_expr(s, e->tpl, args, e->nin, e->res);
    put_store_end(s, e->res);
    tg_cj_str_printf(s, ";\n");
    return ok;
}

/* ---- the emitter interface ---- */
typedef struct emit_ctx {
    tg_cj_str *s; /* receives the node's function, named e->fn */
    const tg_graph *g;
    const tg_node *n;
    int k;                      /* graph number in the unit */
    int ins;                    /* instruction number */
    char fn[64];                /* the function's name in s (FN_HOLE: emit_graph names it) */
    int v[2 * TG_MAX_OUTS + 2]; /* TG_CJ_CALL: the variables the function reads as v[k] */
    int nv;
    double lit[4]; /* TG_CJ_CALL: the numbers it reads as lit[k] (BLAS's alpha and beta) */
    int nlit;
    loop_nums kn; /* TG_CJ_EW, TG_CJ_RED: the loop's constants */
    int cost;     /* per-element cost for the thread split */
    int kind;     /* TG_CJ_EW: fn is a loop for rt->ew; TG_CJ_CALL: fn(rt) runs the node;
                     TG_CJ_RED: fn is a reduction loop for rt->red */
    unsigned red; /* TG_CJ_RED: the reduced axes of the iteration space */
} emit_ctx;

/* An emitter writes the code of node e->n and returns true, or writes nothing and returns
 * false (the node then calls the library's kernel). Its function's text must not depend on
 * the instruction's number or variables (a TG_CJ_CALL function takes them as arguments),
 * so that instructions with the same code share one function. */
typedef bool (*emit_fn)(emit_ctx *e);

/* The name written for the function while it is emitted; emit_graph replaces it. */
#define FN_HOLE "tg_cj_fn_"

static void set_name(emit_ctx *e) { snprintf(e->fn, sizeof e->fn, "%s", FN_HOLE); }

/* The index k in the function's argument v (v[k]) of variable id. */
static int use_var(emit_ctx *e, int id) {
    for (int k = 0; k < e->nv; k++)
        if (e->v[k] == id) return k;
    TG_ASSERT(e->nv < (int)TG_COUNTOF(e->v));
    e->v[e->nv] = id;
    return e->nv++;
}

static bool emit_ew(emit_ctx *e) {
    const tg_node *n = e->n;
    if (n->nout != 1 || n->nin < 1 || n->nin > 8) return false;
    ew_sig sig = {.nin = n->nin, .nout = 1};
    for (int k = 0; k < n->nin; k++) sig.in[k] = (tg_dtype)n->in[k]->type.dtype;
    sig.out[0] = (tg_dtype)n->out[0]->type.dtype;
    const char *tpl = expr_for(n->op, sig.in, n->nin, sig.out[0]);
    if (!tpl) return false;
    ew_one one = {.tpl = tpl, .nin = n->nin, .res = sig.out[0]};
    bool ok = true;
    set_name(e);
    tg_cj_str_printf(e->s, "/* %s -> %s */\n", tg_op_table[n->op]->name, tg_dtype_name(sig.out[0]));
    put_loop(e->s, e->fn, &sig, body_one, &one, NULL, &e->kn, &ok);
    e->cost = 1;
    return ok;
}

/* ---- emitter: fused nodes ---- */

typedef struct ew_fused {
    const tg_fused_prog *p;
} ew_fused;

static bool body_fused(tg_cj_str *s, const void *data) {
    const tg_fused_prog *p = ((const ew_fused *)data)->p;
    char names[TG_FUSED_MAX_ARGS][32];
    const char *args[TG_FUSED_MAX_ARGS];
    for (int j = 0; j < p->ninstr; j++) {
        const tg_fused_instr *in = &p->instr[j];
        int slot = p->nin + j;
        tg_dtype res = (tg_dtype)p->type[slot].dtype;
        tg_cj_str_printf(s, "            const %s t%d = ", ctype(res), j);
        if (in->op == TG_FUSED_CONST) { /* hoisted by put_consts */
            tg_cj_str_printf(s, "kc%d;\n", j);
            continue;
        }
        tg_dtype idt[TG_FUSED_MAX_ARGS];
        for (int a = 0; a < in->nin; a++) {
            int sl = in->in[a];
            idt[a] = (tg_dtype)p->type[sl].dtype;
            if (sl < p->nin)
                snprintf(names[a], sizeof names[a], "a%d", sl);
            else
                snprintf(names[a], sizeof names[a], "t%d", sl - p->nin);
            args[a] = names[a];
        }
        const char *tpl = expr_for(in->op, idt, in->nin, res);
        if (!tpl) return false;
        put_store_expr(s, res, NULL);
        if (!put_expr(s, tpl, args, in->nin, res)) return false;
        put_store_end(s, res);
        tg_cj_str_printf(s, ";\n");
    }
    for (int o = 0; o < p->nout; o++) {
        int sl = p->out[o].slot;
        tg_dtype dt = (tg_dtype)p->out_type[o].dtype;
        if (sl < p->nin)
            tg_cj_str_printf(s, "            const %s o%d = (%s)a%d;\n", ctype(dt), o, ctype(dt),
                             sl);
        else
            tg_cj_str_printf(s, "            const %s o%d = t%d;\n", ctype(dt), o, sl - p->nin);
    }
    return true;
}

/* Every template the program needs exists (checked before anything is written). */
static bool fused_ok(const tg_fused_prog *p) {
    if (p->reduces) return false;
    for (int j = 0; j < p->ninstr; j++) {
        const tg_fused_instr *in = &p->instr[j];
        if (in->op == TG_FUSED_CONST) continue;
        tg_dtype idt[TG_FUSED_MAX_ARGS];
        for (int a = 0; a < in->nin; a++) idt[a] = (tg_dtype)p->type[in->in[a]].dtype;
        if (!expr_for(in->op, idt, in->nin, (tg_dtype)p->type[p->nin + j].dtype)) return false;
    }
    for (int o = 0; o < p->nout; o++) {
        if (p->out[o].reduce >= 0) return false;
        if (p->out_type[o].ndim != p->out_type[0].ndim) return false;
        if (p->out_type[o].dtype != p->type[p->out[o].slot].dtype) return false;
    }
    return true;
}

/* ---- fused reductions ----
 * A fused node whose outputs reduce (one pass: compute and accumulate) over axes that
 * include the innermost one of its iteration space: one function of three phases (start,
 * accumulate a row, store) driven by rt->red. Accumulators are double. */

/* C text of c = combine(c, v) per combine of a record's computation (`reduce`, ops.h), and
 * the NaN rule the text implements (sum and prod: IEEE arithmetic; max and min: a NaN met
 * stays). Doubles c and v; a combine without text here runs the library's kernel. */
static const struct {
    const char *expr;
    bool nan_wins;
} red_c[] = {
    [TG_RED_SUM] = {"c + v", false},
    [TG_RED_PROD] = {"c * v", false},
    [TG_RED_MAX] = {"v > c || isnan(v) ? v : c", true},
    [TG_RED_MIN] = {"v < c || isnan(v) ? v : c", true},
};

/* The computation of output o's reduction. */
static const tg_reduce_def *red_of(const tg_fused_prog *p, int o) {
    return &tg_op_table[p->out[o].reduce]->reduce;
}

/* Whether the text above computes reduction r (finished by nothing or a mean). */
static bool red_emittable(const tg_reduce_def *r) {
    return r->combine < TG_COUNTOF(red_c) && red_c[r->combine].expr &&
           red_c[r->combine].nan_wins == (r->nan_wins != 0) &&
           (r->fin == TG_FIN_NONE || r->fin == TG_FIN_MEAN);
}

static bool fused_red_ok(const tg_fused_prog *p, unsigned *mask) {
    int nd = p->space.ndim;
    if (!p->uniform || !p->reduces || nd < 1 || nd > 30 || p->nout < 1) return false;
    unsigned m = 0;
    for (int d = 0; d < nd; d++)
        if (p->out[0].red[d]) m |= 1u << d;
    if (!(m >> (nd - 1) & 1u)) return false; /* rows: the innermost axis is reduced */
    for (int o = 0; o < p->nout; o++) {
        const tg_fused_out *x = &p->out[o];
        if (x->reduce < 0 || !tg_fused_can_reduce(x->reduce) || !red_emittable(red_of(p, o)))
            return false;
        for (int d = 0; d < nd; d++)
            if (x->red[d] != ((m >> d & 1u) != 0)) return false;
        tg_dtype dt = (tg_dtype)p->type[x->slot].dtype;
        if (!tg_dtype_is_float(dt) || p->out_type[o].dtype != dt) return false;
    }
    for (int j = 0; j < p->ninstr; j++) {
        const tg_fused_instr *in = &p->instr[j];
        if (in->op == TG_FUSED_CONST) continue;
        tg_dtype idt[TG_FUSED_MAX_ARGS];
        for (int a = 0; a < in->nin; a++) idt[a] = (tg_dtype)p->type[in->in[a]].dtype;
        if (!expr_for(in->op, idt, in->nin, (tg_dtype)p->type[p->nin + j].dtype)) return false;
    }
    *mask = m;
    return true;
}

static void put_combine(tg_cj_str *s, const tg_reduce_def *r, int o, const char *ind) {
    tg_cj_str_printf(s, "%s{ const double c = c%d, v = (double)o%d; c%d = %s; }\n", ind, o, o, o,
                     red_c[r->combine].expr);
}

/* A double as C source: exact (hexadecimal), infinities by name. */
static void put_double(tg_cj_str *s, double x) {
    if (isinf(x))
        tg_cj_str_printf(s, "%sINFINITY", x < 0 ? "-" : "");
    else
        tg_cj_str_printf(s, "%a", x);
}

static bool put_red_loop(tg_cj_str *s, const char *name, const tg_fused_prog *p, const tg_node *n,
                         loop_nums *kn) {
    bool ok = true;
    ew_fused f = {p};
    tg_cj_str_printf(s,
                     "TG_RT_FN void %s(int phase, int64_t n, char *const *p, const int64_t *s, "
                     "double *acc, const tg_rt_num *k) {\n    if (phase == 0) {\n",
                     name);
    for (int o = 0; o < p->nout; o++) {
        tg_cj_str_printf(s, "        acc[%d] = ", o);
        put_double(s, red_of(p, o)->identity);
        tg_cj_str_printf(s, ";\n");
    }
    tg_cj_str_printf(s, "        return;\n    }\n    if (phase == 2) {\n");
    for (int o = 0; o < p->nout; o++) {
        const char *t = ctype((tg_dtype)p->out_type[o].dtype);
        tg_cj_str_printf(s, "        *(%s *)p[%d] = (%s)(acc[%d]%s);\n", t, o, t, o,
                         red_of(p, o)->fin == TG_FIN_MEAN ? " / (double)n" : "");
    }
    tg_cj_str_printf(s, "        return;\n    }\n");
    put_consts(s, p, kn);
    for (int o = 0; o < p->nout; o++) tg_cj_str_printf(s, "    double c%d = acc[%d];\n", o, o);
    tg_cj_str_printf(s, "    if (");
    for (int k = 0; k < n->nin; k++)
        tg_cj_str_printf(s, "%ss[%d] == %zu", k ? " && " : "", k,
                         tg_dtype_size((tg_dtype)n->in[k]->type.dtype));
    tg_cj_str_printf(s, "%s) {\n", n->nin ? "" : "1");
    for (int k = 0; k < n->nin; k++) {
        const char *t = ctype((tg_dtype)n->in[k]->type.dtype);
        tg_cj_str_printf(s, "        const %s *r%d = (const %s *)p[%d];\n", t, k, t, k);
    }
    tg_cj_str_printf(s, "        for (int64_t j = 0; j < n; j++) {\n");
    for (int k = 0; k < n->nin; k++)
        tg_cj_str_printf(s, "            const %s a%d = r%d[j];\n",
                         ctype((tg_dtype)n->in[k]->type.dtype), k, k);
    ok = ok && body_fused(s, &f);
    for (int o = 0; o < p->nout; o++) put_combine(s, red_of(p, o), o, "            ");
    tg_cj_str_printf(s, "        }\n    } else {\n        for (int64_t j = 0; j < n; j++) {\n");
    for (int k = 0; k < n->nin; k++) {
        const char *t = ctype((tg_dtype)n->in[k]->type.dtype);
        tg_cj_str_printf(s, "            const %s a%d = *(const %s *)(p[%d] + j * s[%d]);\n", t, k,
                         t, k, k);
    }
    ok = ok && body_fused(s, &f);
    for (int o = 0; o < p->nout; o++) put_combine(s, red_of(p, o), o, "            ");
    tg_cj_str_printf(s, "        }\n    }\n");
    for (int o = 0; o < p->nout; o++) tg_cj_str_printf(s, "    acc[%d] = c%d;\n", o, o);
    tg_cj_str_printf(s, "}\n\n");
    return ok;
}

static bool emit_fused(emit_ctx *e) {
    const tg_node *n = e->n;
    if (n->nin > TG_MAX_OUTS || n->nout > TG_MAX_OUTS || n->nin + n->nout > 64) return false;
    tg_fused_prog *p = NULL;
    char msg[256];
    tg_type tin[TG_MAX_OUTS];
    for (int k = 0; k < n->nin; k++) tin[k] = n->in[k]->type;
    tg_status st = tg_fused_node_typed(e->g->ctx, n, tin, false, &p, msg, sizeof msg);
    if (st == TG_ENOMEM) e->s->oom = true; /* never a different unit for want of memory */
    if (st != TG_OK) return false;
    bool typed = true;
    for (int o = 0; typed && o < n->nout; o++)
        typed = p->out_type[o].dtype == n->out[o]->type.dtype;
    unsigned mask = 0;
    if (typed && p->reduces) {
        bool ok = fused_red_ok(p, &mask) && n->nin <= 30 && n->nout <= 30;
        if (ok) {
            set_name(e);
            tg_cj_str_printf(e->s, "/* fused reduction, %d instructions */\n", p->ninstr);
            ok = put_red_loop(e->s, e->fn, p, n, &e->kn);
            e->cost = p->ninstr > 0 ? p->ninstr : 1;
            e->kind = TG_CJ_RED;
            e->red = mask;
        }
        tg_fused_free(p);
        return ok;
    }
    bool ok = typed && fused_ok(p);
    if (ok) {
        ew_sig sig = {.nin = n->nin, .nout = n->nout};
        for (int k = 0; k < n->nin; k++) sig.in[k] = (tg_dtype)n->in[k]->type.dtype;
        for (int o = 0; o < n->nout; o++) sig.out[o] = (tg_dtype)n->out[o]->type.dtype;
        set_name(e);
        tg_cj_str_printf(e->s, "/* fused, %d instructions */\n", p->ninstr);
        ew_fused f = {p};
        put_loop(e->s, e->fn, &sig, body_fused, &f, p, &e->kn, &ok);
        e->cost = p->ninstr > 0 ? p->ninstr : 1;
    }
    tg_fused_free(p);
    return ok;
}

/* ---- emitter: BLAS products as CBLAS calls ----
 * dot and matmul of a matrix with a matrix or a vector, gemm and gemv (and their in-place
 * variants) without the optional scalar inputs become a function that checks the run-time
 * layout (BLAS's stride rules, tg_rt_mat) and calls rt->gemm / rt->gemv; any other layout, an
 * accumulator that broadcasts, or a product large enough for the thread split goes to
 * the library's kernel at run time. */

/* Copies the accumulator value c (any strides, same shape as y) into y (contiguous); run
 * only when c->data != y->data: an in-place plan gives y the whole block of c, so the two
 * never partly overlap (restrict holds). */
static void put_acc_copy(tg_cj_str *s, tg_dtype dt, int nd) {
    const char *t = ctype(dt);
    tg_cj_str_printf(s,
                     "        %s *restrict yd = (%s *)y->data;\n"
                     "        const %s *cd = (const %s *)c->data;\n",
                     t, t, t, t);
    if (nd == 1) {
        tg_cj_str_printf(s, "        const int64_t s0 = c->stride[0];\n"
                            "        if (s0 == 1)\n"
                            "            memcpy(yd, cd, (size_t)M * sizeof *yd);\n"
                            "        else\n"
                            "            for (int64_t i = 0; i < M; i++) yd[i] = cd[i * s0];\n");
        return;
    }
    tg_cj_str_printf(s,
                     "        const int64_t s0 = c->stride[0], s1 = c->stride[1];\n"
                     "        for (int64_t i = 0; i < M; i++) {\n"
                     "            %s *restrict yr = yd + i * N;\n"
                     "            const %s *cr = cd + i * s0;\n"
                     "            if (s1 == 1)\n"
                     "                memcpy(yr, cr, (size_t)N * sizeof *yr);\n"
                     "            else\n"
                     "                for (int64_t j = 0; j < N; j++) yr[j] = cr[j * s1];\n"
                     "        }\n",
                     t, t);
}

static bool emit_blas(emit_ctx *e) {
    const tg_node *n = e->n;
    int form = tg_op_table[n->op]->blas; /* the record's BLAS call */
    bool gemm = form == TG_BLAS_GEMM, gemv = form == TG_BLAS_GEMV;
    bool prod = form == TG_BLAS_NONE; /* dot, matmul: the table's other entries */
    if (n->nout != 1) return false;
    tg_dtype dt = (tg_dtype)n->out[0]->type.dtype;
    if (dt != TG_DT_F32 && dt != TG_DT_F64) return false;
    for (int k = 0; k < n->nin; k++)
        if (n->in[k]->type.dtype != dt) return false;
    double alpha = 1.0, beta = 0.0;
    int trans_a = 0, trans_b = 0, ia, ib, ic = -1;
    if (prod) { /* matrix @ matrix: a gemm; matrix @ vector: a gemv */
        if (n->nin != 2 || n->in[0]->type.ndim != 2 || n->in[1]->type.ndim < 1 ||
            n->in[1]->type.ndim > 2)
            return false;
        gemv = n->in[1]->type.ndim == 1;
        ia = 0;
        ib = 1;
    } else if (gemm || gemv) {
        if (n->nin != 3) return false; /* the symbolic scalars: the kernel */
        alpha = n->attrs[0].f;
        beta = n->attrs[1].f;
        trans_a = (int)n->attrs[2].i;
        trans_b = gemm ? (int)n->attrs[3].i : 0;
        ic = 0;
        ia = 1;
        ib = 2;
        if (n->in[1]->type.ndim != 2 || n->in[2]->type.ndim != (gemm ? 2 : 1)) return false;
        if (n->out[0]->type.ndim != (gemm ? 2 : 1)) return false;
    } else {
        return false;
    }
    /* alpha 0 lets BLAS skip the product (and its NaN and inf): the library's kernel */
    if (!isfinite(alpha) || !isfinite(beta) || alpha == 0.0) return false;
    tg_cj_str *s = e->s;
    set_name(e);
    tg_cj_str_printf(
        s, "/* %s -> %s */\nTG_RT_FN int %s(tg_rt *rt, int i, const int *v, const double *lit) {\n",
        tg_op_table[n->op]->name, tg_dtype_name(dt), e->fn);
    int va = use_var(e, n->in[ia]->id), vb = use_var(e, n->in[ib]->id);
    int vc = ic >= 0 ? use_var(e, n->in[ic]->id) : -1, vy = use_var(e, n->out[0]->id);
    tg_cj_str_printf(s, "    const tg_rt_val *a = &rt->val[v[%d]], *b = &rt->val[v[%d]];\n", va,
                     vb);
    if (ic >= 0) tg_cj_str_printf(s, "    const tg_rt_val *c = &rt->val[v[%d]];\n", vc);
    tg_cj_str_printf(s,
                     "    tg_rt_val *y = &rt->val[v[%d]];\n    int ta, tb = 0;\n"
                     "    int64_t lda, ldb = 0;\n",
                     vy);
    int f64 = dt == TG_DT_F64;
    if (!gemv) {
        tg_cj_str_printf(
            s,
            "    int64_t M = y->shape[0], N = y->shape[1], K = a->shape[%d];\n"
            "    if (M < 1 || N < 1 || K < 1 || !tg_rt_mat(a, &ta, &lda) ||\n"
            "        !tg_rt_mat(b, &tb, &ldb) || !tg_rt_contig(y) ||\n"
            "        (rt->nthreads > 1 && (double)M * (double)N * (double)K >= 2097152.0))\n"
            "        return rt->kernel(rt, i);\n",
            trans_a ? 0 : 1);
    } else {
        tg_cj_str_printf(s, "    int64_t M = y->shape[0], K = b->shape[0];\n"
                            "    int64_t incx = K == 1 ? 1 : b->stride[0];\n"
                            "    if (M < 1 || K < 1 || incx < 1 || !tg_rt_mat(a, &ta, &lda) ||\n"
                            "        !tg_rt_contig(y) ||\n"
                            "        (rt->nthreads > 1 && (double)M * (double)K >= 2097152.0))\n"
                            "        return rt->kernel(rt, i);\n");
    }
    if (ic >= 0 && beta != 0.0) { /* the accumulator, when read, has the output's shape */
        int nd = gemm ? 2 : 1;
        tg_cj_str_printf(s,
                         "    if (c->ndim != %d || c->shape[0] != M%s) return rt->kernel(rt, i);\n",
                         nd, gemm ? " || c->shape[1] != N" : "");
        tg_cj_str_printf(s, "    if (c->data != y->data) {\n");
        put_acc_copy(s, dt, nd);
        tg_cj_str_printf(s, "    }\n");
    }
    if (!gemv) /* a single row or column of the result is a gemv (as the VM does) */
        tg_cj_str_printf(
            s,
            "    const int opa = %d ^ ta, opb = %d ^ tb;\n"
            "    if (N == 1)\n"
            "        rt->gemv(%d, opa, ta ? a->shape[1] : a->shape[0], ta ? a->shape[0] : "
            "a->shape[1], lit[0], a->data, lda, b->data, opb ? 1 : ldb, lit[1], y->data, 1);\n"
            "    else if (M == 1)\n"
            "        rt->gemv(%d, !opb, tb ? b->shape[1] : b->shape[0], tb ? b->shape[0] : "
            "b->shape[1], lit[0], b->data, ldb, a->data, opa ? lda : 1, lit[1], y->data, 1);\n"
            "    else\n"
            "        rt->gemm(%d, opa, opb, M, N, K, lit[0], a->data, lda, b->data, ldb, lit[1], "
            "y->data, N);\n",
            trans_a, trans_b, f64, f64, f64);
    else /* the stored matrix: A itself, or its transpose (ta) */
        tg_cj_str_printf(s,
                         "    rt->gemv(%d, %d ^ ta, ta ? a->shape[1] : a->shape[0], "
                         "ta ? a->shape[0] : a->shape[1], lit[0], a->data, lda, b->data, incx, "
                         "lit[1], y->data, 1);\n",
                         f64, trans_a);
    tg_cj_str_printf(s, "    return 0;\n}\n\n");
    e->lit[e->nlit++] = alpha;
    e->lit[e->nlit++] = beta;
    e->kind = TG_CJ_CALL;
    return true;
}

/* ---- emitters: views as pointer and stride arithmetic ----
 * transpose, expand_dims, squeeze, broadcast_to, slice and reshape (of a contiguous value)
 * make their output's address and strides from their input's; the library has already
 * set the output's extents (the memory plan's run-time types) and rt->view makes the
 * value visible to the library's kernels. The axis bookkeeping is decided here from the
 * static types and attributes, exactly as the ops' inference decides it. */

static void view_head(emit_ctx *e, const char *what) {
    const tg_node *n = e->n;
    set_name(e);
    int vx = use_var(e, n->in[0]->id), vy = use_var(e, n->out[0]->id);
    tg_cj_str_printf(
        e->s,
        "/* %s */\nTG_RT_FN int %s(tg_rt *rt, int i, const int *v, const double *lit) {\n"
        "    const tg_rt_val *x = &rt->val[v[%d]];\n"
        "    tg_rt_val *y = &rt->val[v[%d]];\n",
        what, e->fn, vx, vy);
    e->kind = TG_CJ_CALL;
}

static void view_tail(emit_ctx *e) { tg_cj_str_printf(e->s, "    return rt->view(rt, i);\n}\n\n"); }

/* Output axis i takes input axis src[i] (-1: a new axis of stride 0). */
static bool emit_axes_view(emit_ctx *e, const char *what, const int *src, int ond) {
    view_head(e, what);
    tg_cj_str_printf(e->s, "    y->data = x->data;\n");
    for (int i = 0; i < ond; i++) {
        if (src[i] < 0)
            tg_cj_str_printf(e->s, "    y->stride[%d] = 0;\n", i);
        else
            tg_cj_str_printf(e->s, "    y->stride[%d] = x->stride[%d];\n", i, src[i]);
    }
    view_tail(e);
    return true;
}

static bool view_ok(const tg_node *n) {
    return n->nin >= 1 && n->nout == 1 && n->in[0]->type.dtype == n->out[0]->type.dtype;
}

static bool emit_transpose(emit_ctx *e) {
    const tg_node *n = e->n;
    int nd = n->in[0]->type.ndim, src[TG_MAX_DIMS];
    if (!view_ok(n) || n->nin != 1 || n->out[0]->type.ndim != nd) return false;
    const tg_aval *a = &n->attrs[0];
    bool seen[TG_MAX_DIMS] = {0};
    for (int i = 0; i < nd; i++) {
        int64_t ax = a->kind == TG_ATTR_NONE ? nd - 1 - i : i < a->n ? a->ints[i] : -100;
        if (a->kind != TG_ATTR_NONE && a->n != nd) return false;
        if (ax < 0) ax += nd;
        if (ax < 0 || ax >= nd || seen[ax]) return false;
        seen[ax] = true;
        src[i] = (int)ax;
    }
    return emit_axes_view(e, "transpose", src, nd);
}

static bool emit_expand_dims(emit_ctx *e) {
    const tg_node *n = e->n;
    int nd = n->in[0]->type.ndim, ond = n->out[0]->type.ndim, src[TG_MAX_DIMS];
    const tg_aval *a = &n->attrs[0];
    if (!view_ok(n) || n->nin != 1 || a->kind != TG_ATTR_INTS || ond != nd + a->n) return false;
    bool isnew[TG_MAX_DIMS] = {0};
    for (int k = 0; k < a->n; k++) {
        int64_t ax = a->ints[k] < 0 ? a->ints[k] + ond : a->ints[k];
        if (ax < 0 || ax >= ond || isnew[ax]) return false;
        isnew[ax] = true;
    }
    for (int i = 0, j = 0; i < ond; i++) src[i] = isnew[i] ? -1 : j++;
    return emit_axes_view(e, "expand_dims", src, ond);
}

static bool emit_squeeze(emit_ctx *e) {
    const tg_node *n = e->n;
    const tg_type *t = &n->in[0]->type;
    int nd = t->ndim, ond = n->out[0]->type.ndim, src[TG_MAX_DIMS];
    const tg_aval *a = &n->attrs[0];
    if (!view_ok(n) || n->nin != 1) return false;
    bool drop[TG_MAX_DIMS] = {0};
    if (a->kind == TG_ATTR_NONE) {
        for (int d = 0; d < nd; d++) drop[d] = t->shape[d] == 1;
    } else if (a->kind == TG_ATTR_INTS) {
        for (int k = 0; k < a->n; k++) {
            int64_t ax = a->ints[k] < 0 ? a->ints[k] + nd : a->ints[k];
            if (ax < 0 || ax >= nd) return false;
            drop[ax] = true;
        }
    } else {
        return false;
    }
    int j = 0;
    for (int d = 0; d < nd; d++)
        if (!drop[d]) {
            if (j >= ond) return false;
            src[j++] = d;
        }
    if (j != ond) return false;
    return emit_axes_view(e, "squeeze", src, ond);
}

static bool emit_broadcast_to(emit_ctx *e) {
    const tg_node *n = e->n;
    int nd = n->in[0]->type.ndim, ond = n->out[0]->type.ndim;
    if (!view_ok(n) || n->nin != 1 || ond < nd) return false;
    view_head(e, "broadcast_to");
    tg_cj_str_printf(e->s, "    y->data = x->data;\n");
    for (int i = 0; i < ond; i++) {
        int a = i - (ond - nd);
        if (a < 0)
            tg_cj_str_printf(e->s, "    y->stride[%d] = 0;\n", i);
        else
            tg_cj_str_printf(e->s, "    y->stride[%d] = x->shape[%d] == 1 ? 0 : x->stride[%d];\n",
                             i, a, a);
    }
    view_tail(e);
    return true;
}

static bool emit_reshape(emit_ctx *e) {
    const tg_node *n = e->n;
    int ond = n->out[0]->type.ndim;
    if (!view_ok(n) || n->nin != 1) return false;
    view_head(e, "reshape");
    tg_cj_str_printf(e->s, "    if (!tg_rt_contig(x)) return rt->kernel(rt, i); /* a copy */\n"
                           "    y->data = x->data;\n");
    tg_cj_str_printf(e->s, "    int64_t st = 1;\n");
    for (int i = ond - 1; i >= 0; i--)
        tg_cj_str_printf(e->s, "    y->stride[%d] = st;\n    st *= y->shape[%d];\n", i, i);
    tg_cj_str_printf(e->s, "    (void)st;\n");
    view_tail(e);
    return true;
}

/* Reads a slice attribute list: NULL when absent (all none / no index). */
static const int64_t *slice_list(const tg_aval *a, int n) {
    return a->kind == TG_ATTR_INTS && a->n == n ? a->ints : NULL;
}

/* Part i of a slice list: false when omitted (absent list or a `none` entry). */
static bool slice_part(const tg_aval *a, int n, int i, int64_t *out) {
    const int64_t *v = slice_list(a, n);
    if (!v || i >= n || tg_aval_none_at(a, i)) return false;
    *out = v[i];
    return true;
}

/* "(-9223372036854775807LL - 1)" for INT64_MIN, whose literal C cannot write. */
static const char *i64_lit(int64_t v, char *buf, size_t cap) {
    if (v == INT64_MIN)
        snprintf(buf, cap, "(-9223372036854775807LL - 1)");
    else
        snprintf(buf, cap, "%lldLL", (long long)v);
    return buf;
}

static bool emit_slice(emit_ctx *e) {
    const tg_node *n = e->n;
    int nd = n->in[0]->type.ndim, ond = n->out[0]->type.ndim;
    if (!view_ok(n) || n->nin != 1) return false;
    int len = 0;
    for (int i = 0; i < 4; i++)
        if (n->attrs[i].kind == TG_ATTR_INTS && n->attrs[i].n > len) len = n->attrs[i].n;
    for (int i = 0; i < 4; i++)
        if (n->attrs[i].kind == TG_ATTR_INTS && n->attrs[i].n != len && n->attrs[i].n != 0)
            return false;
    if (len > nd) return false;
    const int64_t *index = slice_list(&n->attrs[TG_SLICE_A_INDEX], len);
    int dropped = 0;
    for (int i = 0; i < len; i++) dropped += index && index[i];
    if (ond != nd - dropped) return false;
    view_head(e, "slice");
    tg_cj_str_printf(e->s, "    char *d = x->data;\n    int64_t first;\n");
    int j = 0;
    for (int i = 0; i < nd; i++) {
        int64_t start = 0, step = 1;
        bool has_start = slice_part(&n->attrs[TG_SLICE_A_STARTS], len, i, &start);
        slice_part(&n->attrs[TG_SLICE_A_STEPS], len, i, &step);
        char sbuf[32], tbuf[32];
        if (i >= len) {
            tg_cj_str_printf(e->s, "    y->stride[%d] = x->stride[%d];\n", j++, i);
            continue;
        }
        size_t es = tg_dtype_size((tg_dtype)n->in[0]->type.dtype);
        if (index && index[i]) { /* x[k]: k checked against the extent by the inference */
            if (!has_start) return false;
            tg_cj_str_printf(e->s,
                             "    first = %s;\n"
                             "    if (first < 0) first += x->shape[%d];\n"
                             "    d += first * x->stride[%d] * %zu;\n",
                             i64_lit(start, sbuf, sizeof sbuf), i, i, es);
            continue;
        }
        /* Python's slice.indices(): the first element, clamped to [lower, upper] */
        char upper[64];
        snprintf(upper, sizeof upper, step > 0 ? "x->shape[%d]" : "x->shape[%d] - 1", i);
        const char *lower = step > 0 ? "0" : "-1";
        if (!has_start)
            tg_cj_str_printf(e->s, "    first = %s;\n", step < 0 ? upper : lower);
        else
            tg_cj_str_printf(e->s,
                             "    first = %s;\n"
                             "    if (first < 0) first += x->shape[%d];\n"
                             "    if (first < %s) first = %s;\n"
                             "    else if (first > %s) first = %s;\n",
                             i64_lit(start, sbuf, sizeof sbuf), i, lower, lower, upper, upper);
        /* with one element or none the step does not matter (and may be as large as
         * INT64_MIN, whose product with the stride would overflow) */
        tg_cj_str_printf(
            e->s,
            "    if (y->shape[%d] > 0) d += first * x->stride[%d] * %zu;\n"
            "    y->stride[%d] = y->shape[%d] > 1 ? x->stride[%d] * %s : x->stride[%d];\n",
            j, i, es, j, j, i, i64_lit(step, tbuf, sizeof tbuf), i);
        j++;
    }
    tg_cj_str_printf(e->s, "    (void)first;\n    y->data = d;\n");
    view_tail(e);
    return true;
}

/* ---- loops: scan and map ----
 * The loop over the steps is generated code: rt->scan_begin makes the results and binds a
 * replica of the step's compiled function (its own generated code, in the shared object
 * of the step's source, cached under that source's key), and the loop moves the addresses
 * the step reads and writes by pointer arithmetic (rows of the sequences and of the
 * stacks, the two buffers of each state swapped), then calls the step's function
 * directly. The text holds the loop's structure (counts, direction, stop condition, saved
 * states, taps: a tapped state lives in a ring of depth + 1 rows, the taps reading the
 * rows before its head); everything else comes from scan_begin at run time. Loops of more
 * than TG_RT_LOOP_MAX parameters or results, and a tapped state saved for the gradient
 * (its history, not a ring), call the node's kernel. */
static bool emit_scan(emit_ctx *e) {
    const tg_node *n = e->n;
    tg_loop l;
    tg_loop_get(tg_op_table[n->op], n->attrs, n->nin, &l);
    if (!l.body) return false;
    int nsave = l.save ? l.save->n : 0, nres = l.body->nret, ns = l.nstate;
    if (l.nparam > TG_RT_LOOP_MAX || nres > TG_RT_LOOP_MAX || l.ny + nsave > TG_RT_LOOP_MAX)
        return false;
    int saved[TG_RT_LOOP_MAX];
    for (int j = 0; j < ns; j++) saved[j] = -1;
    for (int q = 0; q < nsave; q++) saved[l.save->ints[q]] = q;
    /* a tapped state saved for the gradient keeps its whole history (depth + steps rows,
       the taps read from it: docs/scan.md), not a ring: the node's kernel runs it */
    if (l.tapped && saved[0] >= 0) return false;
    int off = l.tapped ? l.ntap - 1 : 0, D = l.depth + 1; /* state j > 0 is parameter j + off */
    set_name(e);
    e->kind = TG_CJ_CALL;
    tg_cj_str *s = e->s;
    tg_cj_str_printf(s,
                     "/* %s of '%s': %d state%s, %d sequence%s, %d constant%s, %d per-step "
                     "output%s, %d saved%s%s */\n"
                     "TG_RT_FN int %s(tg_rt *rt, int i, const int *v, const double *lit) {\n"
                     "    tg_rt_scan L;\n"
                     "    (void)v;\n"
                     "    (void)lit;\n"
                     "    if (rt->scan_begin(rt, i, &L)) return 1;\n"
                     "    if (!L.body) return 0;\n"
                     "    int64_t t = 0;\n"
                     "    int failed = 0;\n"
                     "    for (; t < L.steps; t++) {\n"
                     "        const int64_t row = %s;\n",
                     l.map ? "map" : "scan", l.body->name, ns, ns == 1 ? "" : "s", l.nseq,
                     l.nseq == 1 ? "" : "s", l.nconst, l.nconst == 1 ? "" : "s", l.ny,
                     l.ny == 1 ? "" : "s", nsave, l.reverse ? ", reverse" : "",
                     l.until ? ", until" : "", e->fn, l.reverse ? "L.steps - 1 - t" : "t");
    if (nsave > 0)
        tg_cj_str_printf(s, "        const int64_t rd = %s, wr = %s;\n",
                         l.reverse ? "row + 1" : "row", l.reverse ? "row" : "row + 1");
    if (l.tapped) /* the ring's slot of x(t - depth) */
        tg_cj_str_printf(s, "        const int64_t head = t %% %d;\n", D);
    /* where each result goes, and the moving parameters */
    tg_cj_str_printf(s, "        char *const d[%d] = {", nres);
    for (int j = 0; j < ns; j++) {
        int q = saved[j];
        if (j == 0 && l.tapped)
            tg_cj_str_printf(s, "L.ring + (head + %d) %% %d * L.rings, ", l.depth, D);
        else if (q < 0)
            tg_cj_str_printf(s, "L.nxt[%d], ", j);
        else
            tg_cj_str_printf(s, "L.stk[%d] + wr * L.stks[%d], ", l.ny + q, l.ny + q);
    }
    for (int y = 0; y < l.ny; y++) tg_cj_str_printf(s, "L.stk[%d] + row * L.stks[%d], ", y, y);
    if (l.until) tg_cj_str_printf(s, "L.stop, ");
    tg_cj_str_printf(s, "};\n");
    for (int j = 0; j < ns; j++) {
        int q = saved[j], p = j > 0 ? j + off : 0;
        if (j == 0 && l.tapped) {
            for (int k = 0; k < l.ntap; k++)
                tg_cj_str_printf(
                    s, "        L.in[%d]->data = L.ring + (head + %lld) %% %d * L.rings;\n", k,
                    (long long)(l.depth + l.taps[k]), D);
        } else if (q < 0) {
            tg_cj_str_printf(s, "        L.in[%d]->data = L.cur[%d];\n", p, j);
        } else {
            tg_cj_str_printf(s, "        L.in[%d]->data = L.stk[%d] + rd * L.stks[%d];\n", p,
                             l.ny + q, l.ny + q);
        }
    }
    for (int q = 0; q < l.nseq; q++)
        tg_cj_str_printf(s, "        L.in[%d]->data = L.seq[%d] + row * L.seqs[%d];\n",
                         ns + off + q, q, q);
    tg_cj_str_printf(s,
                     "        for (int k = 0; k < %d; k++) L.out[k]->data = d[k];\n"
                     "        if (L.step(L.body)) {\n"
                     "            failed = 1;\n"
                     "            break;\n"
                     "        }\n"
                     "        for (int k = 0; k < %d; k++)\n"
                     "            if (L.src[k]) tg_rt_copy(d[k], L.src[k], L.esize[k]);\n",
                     nres, nres);
    for (int j = 0; j < ns; j++) /* the new value is the next step's input */
        if (saved[j] < 0 && !(j == 0 && l.tapped))
            tg_cj_str_printf(s,
                             "        {\n"
                             "            char *const x = L.cur[%d];\n"
                             "            L.cur[%d] = L.nxt[%d];\n"
                             "            L.nxt[%d] = x;\n"
                             "        }\n",
                             j, j, j, j);
    if (l.until)
        tg_cj_str_printf(s, "        if (*(const uint8_t *)L.stop) {\n"
                            "            t++;\n"
                            "            break;\n"
                            "        }\n");
    tg_cj_str_printf(s, "    }\n    return rt->scan_end(rt, i, &L, t, failed);\n}\n\n");
    return true;
}

/* ---- the registry: by op first, then by op kind ---- */

static const emit_fn by_op[TG_OP_COUNT] = {
    [TG_OP_FUSED] = emit_fused,
    [TG_OP_DOT] = emit_blas,
    [TG_OP_MATMUL] = emit_blas,
    [TG_OP_GEMM] = emit_blas,
    [TG_OP_GEMM_INPLACE] = emit_blas,
    [TG_OP_GEMV] = emit_blas,
    [TG_OP_GEMV_INPLACE] = emit_blas,
    [TG_OP_TRANSPOSE] = emit_transpose,
    [TG_OP_EXPAND_DIMS] = emit_expand_dims,
    [TG_OP_SQUEEZE] = emit_squeeze,
    [TG_OP_BROADCAST_TO] = emit_broadcast_to,
    [TG_OP_SLICE] = emit_slice,
    [TG_OP_RESHAPE] = emit_reshape,
    [TG_OP_SCAN] = emit_scan,
    [TG_OP_MAP] = emit_scan,
};

static const emit_fn by_kind[] = {
    [TG_KIND_ELEMWISE] = emit_ew,
};

static emit_fn emitter_for(int op) {
    if (by_op[op]) return by_op[op];
    unsigned kind = tg_op_table[op]->kind;
    return kind < TG_COUNTOF(by_kind) ? by_kind[kind] : NULL;
}

/* ---- the unit ---- */

extern const char tg_cj_rt_text[];

/* The prelude's last line: in the unit with the table only, when the source is split. */
static const char abi_line[] = "const int tg_cj_abi = TG_RT_ABI;\n\n";

void tg_cj_emit_prelude(tg_cj_str *s) {
    tg_cj_str_printf(s, "/* generated by tgraph %s: the C JIT (src/backend/cjit) */\n", TG_VERSION);
    tg_cj_str_printf(s, "%s\n", tg_cj_rt_text);
    tg_cj_str_printf(s, "%s", abi_line);
}

/* The distinct functions emitted so far: open addressing on the text's hash. */
typedef struct fn_set {
    tg_ctx *ctx;
    tg_cj_str text; /* every distinct function's text, with FN_HOLE for its name */
    struct fn_slot {
        uint64_t hash;
        size_t off, len; /* in text */
        int ins;         /* 1 + the instruction named after; 0: an empty slot */
    } * slot;
    size_t cap; /* a power of two, more than twice the entries */
} fn_set;

static uint64_t text_hash(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

/* The instruction whose function has text f (n bytes), or -1 after adding f as ins's;
 * -2 when out of memory. */
static int fn_find_or_add(fn_set *set, const char *f, size_t n, int ins) {
    uint64_t h = text_hash(f, n);
    size_t mask = set->cap - 1, i = (size_t)h & mask;
    for (; set->slot[i].ins; i = (i + 1) & mask) {
        const struct fn_slot *x = &set->slot[i];
        if (x->hash == h && x->len == n && memcmp(set->text.p + x->off, f, n) == 0)
            return x->ins - 1;
    }
    size_t off = set->text.n;
    tg_cj_str_printf(&set->text, "%s", f);
    if (set->text.oom) return -2;
    set->slot[i] = (struct fn_slot){.hash = h, .off = off, .len = n, .ins = ins + 1};
    return -1;
}

/* Appends function text f to s with its name (FN_HOLE's one occurrence) being name. */
static void put_named(tg_cj_str *s, const char *f, const char *name) {
    const char *hole = strstr(f, FN_HOLE "(");
    TG_ASSERT(hole != NULL);
    tg_cj_str_printf(s, "%.*s%s%s", (int)(hole - f), f, name, hole + strlen(FN_HOLE));
}

static const char *const step_kind[] = {"TG_RT_KERNEL", "TG_RT_EW", "TG_RT_CALL", "TG_RT_RED"};

/* Where the distinct functions lie in the emitted text (for splitting it into units). */
typedef struct fn_list {
    tg_ctx *ctx;
    struct fn_at {
        size_t off; /* where its text begins */
        int ins;    /* the instruction it is named after */
        uint8_t how;
    } * at;
    int n, cap;
    size_t table; /* where the tables and the graph's function begin */
    bool oom;
} fn_list;

static void fn_list_add(fn_list *l, size_t off, int ins, uint8_t how) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        struct fn_at *a = tg_mem_alloc(l->ctx, sizeof *a * (size_t)cap);
        if (!a) {
            l->oom = true;
            return;
        }
        if (l->n) memcpy(a, l->at, sizeof *a * (size_t)l->n);
        tg_mem_free(l->ctx, l->at, sizeof *a * (size_t)l->cap);
        l->at = a;
        l->cap = cap;
    }
    l->at[l->n++] = (struct fn_at){off, ins, how};
}

static tg_status emit_graph(tg_cj_str *s, const tg_graph *g, tg_node *const *order, int norder,
                            int k, uint8_t *how, fn_list *fl) {
    tg_ctx *ctx = s->ctx;
    tg_cj_str steps = {.ctx = ctx}, vars = {.ctx = ctx}, lits = {.ctx = ctx}, f = {.ctx = ctx};
    tg_cj_str nums = {.ctx = ctx}, kf = {.ctx = ctx}; /* the constants: all, the node's */
    fn_set set = {.ctx = ctx, .text = {.ctx = ctx}};
    set.cap = 16;
    while (set.cap <= 2 * (size_t)norder) set.cap *= 2;
    set.slot = tg_mem_calloc(ctx, sizeof *set.slot * set.cap);
    bool oom = !set.slot;
    int nvars = 0, nlits = 0, nnums = 0;
    for (int i = 0; i < norder && !oom; i++) {
        const tg_node *n = order[i];
        emit_fn fn = emitter_for(n->op);
        emit_ctx e = {.s = &f, .g = g, .n = n, .k = k, .ins = i, .kind = TG_CJ_EW};
        e.kn.tab = &kf;
        f.n = kf.n = 0;
        if (f.p) f.p[0] = '\0';
        if (kf.p) kf.p[0] = '\0';
        how[i] = TG_CJ_KERNEL;
        if (fn && (!tg_op_table[n->op]->self_alloc || fn == emit_scan) && fn(&e) && !f.oom)
            how[i] = (uint8_t)e.kind;
        if (f.oom || kf.oom) break;
        const char *name = "0";
        char own[64];
        if (how[i] != TG_CJ_KERNEL) { /* the first instruction with this text names it */
            int first = fn_find_or_add(&set, f.p, f.n, i);
            if (first == -2) break;
            if (first == -1) {
                snprintf(own, sizeof own, "g%d_n%d", k, i);
                if (fl) fn_list_add(fl, s->n, i, how[i]);
                put_named(s, f.p, own);
            } else {
                snprintf(own, sizeof own, "g%d_n%d", k, first);
            }
            name = own;
        }
        bool call = how[i] == TG_CJ_CALL, loop = how[i] == TG_CJ_EW || how[i] == TG_CJ_RED;
        tg_cj_str_printf(&steps, "    {%s, %d, 0x%xu, %d, %d, {.%s = %s}}, /* %d %s */\n",
                         step_kind[how[i]], loop ? e.cost : 0, how[i] == TG_CJ_RED ? e.red : 0u,
                         call ? nvars : 0,
                         call                 ? nlits
                         : loop && e.kn.n > 0 ? nnums
                                              : 0,
                         how[i] == TG_CJ_RED    ? "red"
                         : how[i] == TG_CJ_CALL ? "call"
                                                : "ew",
                         how[i] == TG_CJ_KERNEL ? "0" : name, i, tg_op_table[n->op]->name);
        if (call) {
            for (int j = 0; j < e.nv; j++) tg_cj_str_printf(&vars, "%d, ", e.v[j]);
            for (int j = 0; j < e.nlit; j++) tg_cj_str_printf(&lits, "%a, ", e.lit[j]); /* finite */
            nvars += e.nv;
            nlits += e.nlit;
        }
        if (loop && e.kn.n > 0) {
            tg_cj_str_printf(&nums, "%s", kf.p);
            nnums += e.kn.n;
        }
    }
    oom = oom || f.oom || set.text.oom || steps.oom || vars.oom || lits.oom || nums.oom || kf.oom ||
          (fl && fl->oom);
    if (fl) fl->table = s->n;
    if (!oom) {
        tg_cj_str_printf(s, "static const int g%d_vars[] = {%s0};\n", k, vars.p ? vars.p : "");
        tg_cj_str_printf(s, "static const double g%d_lits[] = {%s0.0};\n", k, lits.p ? lits.p : "");
        tg_cj_str_printf(s, "static const tg_rt_num g%d_nums[] = {%s{.i = 0}};\n", k,
                         nums.p ? nums.p : "");
        tg_cj_str_printf(s, "static const tg_rt_step g%d_steps[%d] = {\n%s};\n\n", k,
                         norder > 0 ? norder : 1,
                         steps.p ? steps.p : "    {TG_RT_KERNEL, 0, 0x0u, 0, 0, {.ew = 0}},\n");
        tg_cj_str_printf(
            s,
            "int tg_cj_%d(tg_rt *rt) {\n"
            "    return tg_rt_run(rt, g%d_steps, %d, g%d_vars, g%d_lits, g%d_nums);\n}\n",
            k, k, norder, k, k, k);
    }
    oom = oom || s->oom;
    tg_cj_str_free(&steps);
    tg_cj_str_free(&vars);
    tg_cj_str_free(&lits);
    tg_cj_str_free(&nums);
    tg_cj_str_free(&kf);
    tg_cj_str_free(&f);
    tg_cj_str_free(&set.text);
    tg_mem_free(ctx, set.slot, set.slot ? sizeof *set.slot * set.cap : 0);
    return oom ? tg_set_error(TG_ENOMEM, "out of memory emitting C") : TG_OK;
}

tg_status tg_cj_emit_graph(tg_cj_str *s, const tg_graph *g, tg_node *const *order, int norder,
                           int k, uint8_t *how) {
    return emit_graph(s, g, order, norder, k, how, NULL);
}

/* ---- several units ---- */

/* The declaration of a generated function of kind how (the emitters' signatures). */
static void put_decl(tg_cj_str *s, uint8_t how, int k, int ins) {
    static const char *const sig[] = {
        [TG_CJ_EW] = "void g%d_n%d(int64_t n, char *const *p, const int64_t *s, "
                     "const tg_rt_num *k);\n",
        [TG_CJ_RED] = "void g%d_n%d(int phase, int64_t n, char *const *p, const int64_t *s, "
                      "double *acc, const tg_rt_num *k);\n",
        [TG_CJ_CALL] = "int g%d_n%d(tg_rt *rt, int i, const int *v, const double *lit);\n",
    };
    tg_cj_str_printf(s, "TG_RT_FN ");
    tg_cj_str_printf(s, sig[how], k, ins);
}

tg_status tg_cj_emit_units(tg_ctx *ctx, const tg_graph *g, tg_node *const *order, int norder,
                           uint8_t *how, int per_unit, tg_cj_str *units, int *nunits) {
    *nunits = 0;
    tg_cj_str all = {.ctx = ctx};
    fn_list fl = {.ctx = ctx};
    tg_cj_emit_prelude(&all);
    size_t head = all.n - strlen(abi_line); /* the header text ends here */
    tg_status st = emit_graph(&all, g, order, norder, 0, how, &fl);
    if (st == TG_OK && (per_unit <= 0 || fl.n <= per_unit)) { /* one unit: the text as is */
        units[0] = all;
        *nunits = 1;
        tg_mem_free(ctx, fl.at, sizeof *fl.at * (size_t)fl.cap);
        return TG_OK;
    }
    int m = 0; /* units of functions, after unit 0 (the tables and the graph's function) */
    if (st == TG_OK) {
        m = (fl.n + per_unit - 1) / per_unit;
        if (m > TG_CJ_MAX_UNITS - 1) m = TG_CJ_MAX_UNITS - 1;
        for (int u = 0; u <= m; u++) {
            units[u] = (tg_cj_str){.ctx = ctx};
            tg_cj_str_printf(&units[u], "#define TG_RT_SPLIT 1\n%.*s", (int)head, all.p);
        }
        tg_cj_str_printf(&units[0], "%s/* the generated functions (in units 1 to %d) */\n",
                         abi_line, m);
        for (int j = 0; j < fl.n; j++) put_decl(&units[0], fl.at[j].how, 0, fl.at[j].ins);
        tg_cj_str_printf(&units[0], "\n%s", all.p + fl.table);
        /* the functions in order, cut where the text reaches an equal share of the bytes,
         * each unit holding at least one */
        size_t from = fl.at[0].off, total = fl.table - from;
        int j = 0;
        for (int u = 1; u <= m; u++) {
            int e = j + 1; /* this unit: functions j..e-1 */
            size_t cut = from + total * (size_t)u / (size_t)m;
            while (e < fl.n - (m - u) && fl.at[e].off < cut) e++;
            if (u == m) e = fl.n;
            size_t b = e < fl.n ? fl.at[e].off : fl.table;
            tg_cj_str_printf(&units[u], "/* unit %d of units 0 to %d */\n%.*s", u, m,
                             (int)(b - fl.at[j].off), all.p + fl.at[j].off);
            j = e;
        }
        bool oom = false;
        for (int u = 0; u <= m; u++) oom = oom || units[u].oom;
        if (oom) {
            for (int u = 0; u <= m; u++) tg_cj_str_free(&units[u]);
            st = tg_set_error(TG_ENOMEM, "out of memory emitting C");
        }
    }
    tg_cj_str_free(&all);
    tg_mem_free(ctx, fl.at, sizeof *fl.at * (size_t)fl.cap);
    if (st == TG_OK) *nunits = m + 1;
    return st;
}
