/* fused.c - the `fused` op: its record (inference and reference kernel), and the programs of
 * fused.h: builders (which give identical calls one slot), copies, the op-data table (hash,
 * equality, release), the writer of their expression text and the typing pass. Reading text
 * into a program is the .tg front end's (src/text/fused_expr.c).
 *
 * Invariants:
 *  - Builders append in dependency order; a call identical to one already in the program
 *    (same op, operand slots, literal values and attributes) gets that call's slot, found
 *    through a hash table, so building is linear. Literals are never shared: each literal
 *    instruction has exactly one user, so typing can give it the dtype that user's
 *    promotion asks for.
 *  - A program a node holds is never written again: typing works on a copy, which shares
 *    the attributes of the original and keeps a reference on it.
 *  - Typing calls the op records' own promote and infer: the types of a fused node are
 *    those of the unfused ops by construction. The reference kernel calls the records'
 *    own reference kernels on whole temporaries: it is the oracle for fused nodes.
 *  - Inference runs without a context (tg_infer has none): its typed copy comes from the
 *    default context. The reference kernel uses the kernel's context.
 */
#include "fused.h"

#include "blockwise.h"
#include "../ir/ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- ops allowed ---- */

bool tg_fused_can_inline(int op) {
    return op >= 0 && op < TG_OP_COUNT &&
           ((tg_op_table[op]->kind == TG_KIND_ELEMWISE && tg_op_table[op]->nout == 1 &&
             op != TG_OP_FUSED) ||
            tg_fused_is_core(op));
}

bool tg_fused_is_core(int op) {
    if (op < 0 || op >= TG_OP_COUNT) return false;
    const tg_op_def *d = tg_op_table[op];
    return d->signature && d->nout == 1 && d->max_in >= 1 && d->max_in <= TG_FUSED_MAX_ARGS;
}

bool tg_fused_can_reduce(int op) {
    return op >= 0 && op < TG_OP_COUNT && tg_reduce_plain(tg_op_table[op]);
}

/* ---- programs ---- */

static const tg_aval no_attrs = {.kind = TG_ATTR_NONE}; /* attrs of a literal */

static tg_fused_prog *prog_alloc(tg_ctx *ctx, int nin) {
    if (!ctx) ctx = tg_ctx_default();
    tg_fused_prog *p = tg_mem_calloc(ctx, sizeof *p);
    if (!p) return NULL;
    tg_opdata_init(&p->base, &tg_fused_data);
    p->ctx = ctx;
    tg_arena_init(&p->arena, ctx);
    p->nin = nin;
    p->nslot = nin;
    return p;
}

tg_fused_prog *tg_fused_new(tg_ctx *ctx, int nin) {
    if (nin < 0 || nin > TG_FUSED_MAX_INSTRS) {
        tg_set_error(TG_ELIMIT, "fused: %d inputs", nin);
        return NULL;
    }
    return prog_alloc(ctx, nin);
}

/* The table's release: frees the program (no reference is left). */
static void prog_release(tg_opdata *d) {
    tg_fused_prog *p = (tg_fused_prog *)d;
    tg_ctx *ctx = p->ctx;
    tg_mem_free(ctx, p->instr, sizeof *p->instr * (size_t)p->capinstr);
    tg_mem_free(ctx, p->out, sizeof *p->out * (size_t)p->capout);
    tg_mem_free(ctx, p->tab, sizeof *p->tab * p->tabcap);
    tg_arena_fini(&p->arena);
    const tg_opdata *src = p->src;
    tg_mem_free(ctx, p, sizeof *p);
    tg_opdata_release(src);
}

void tg_fused_free(tg_fused_prog *p) {
    if (p) tg_opdata_release(&p->base);
}

tg_aval tg_fused_aval(const tg_fused_prog *p) {
    return (tg_aval){.kind = TG_ATTR_DATA, .data = &p->base};
}

/* The program an attribute value holds, or NULL. */
static const tg_fused_prog *prog_of(const tg_aval *a) {
    if (a->kind != TG_ATTR_DATA || !a->data || a->data->vt != &tg_fused_data) return NULL;
    return (const tg_fused_prog *)a->data;
}

const tg_fused_prog *tg_fused_node_prog(const tg_node *node) {
    return node->op == TG_OP_FUSED ? prog_of(&node->attrs[TG_FUSED_A_EXPR]) : NULL;
}

tg_fused_prog *tg_fused_copy(tg_ctx *ctx, const tg_fused_prog *p) {
    tg_fused_prog *c = prog_alloc(ctx, p->nin);
    if (!c) return NULL;
    c->instr = tg_mem_alloc(c->ctx, sizeof *c->instr * (size_t)(p->ninstr + 1));
    c->out = tg_mem_alloc(c->ctx, sizeof *c->out * (size_t)(p->nout + 1));
    c->capinstr = p->ninstr + 1;
    c->capout = p->nout + 1;
    if (!c->instr || !c->out) {
        tg_fused_free(c);
        return NULL;
    }
    if (p->ninstr) memcpy(c->instr, p->instr, sizeof *c->instr * (size_t)p->ninstr);
    if (p->nout) memcpy(c->out, p->out, sizeof *c->out * (size_t)p->nout);
    c->ninstr = p->ninstr;
    c->nout = p->nout;
    c->nslot = p->nslot;
    tg_opdata_retain(&p->base); /* the attributes stay p's */
    c->src = &p->base;
    return c;
}

/* Room for one more instruction: TG_OK, or TG_ELIMIT / TG_ENOMEM (error set). */
static tg_status instr_room(tg_fused_prog *p) {
    if (p->ninstr >= TG_FUSED_MAX_INSTRS)
        return tg_set_error(TG_ELIMIT, "more than %d instructions", TG_FUSED_MAX_INSTRS);
    if (p->ninstr < p->capinstr) return TG_OK;
    int ncap = p->capinstr ? p->capinstr * 2 : 16;
    tg_fused_instr *q =
        tg_mem_realloc(p->ctx, p->instr, sizeof *q * (size_t)p->capinstr, sizeof *q * (size_t)ncap);
    if (!q) return TG_ENOMEM;
    p->instr = q;
    p->capinstr = ncap;
    return TG_OK;
}

/* Deep copy of normalized attributes (n entries; NULL src: the schema's defaults). */
static tg_aval *attrs_dup(tg_fused_prog *p, const tg_op_def *def, const tg_aval *src) {
    tg_aval *a = tg_arena_alloc(&p->arena, sizeof *a * (size_t)(def->nattrs + 1));
    if (!a) return NULL;
    for (int j = 0; j < def->nattrs; j++) {
        a[j] = src ? src[j] : def->attrs[j].def;
        if (a[j].s && !(a[j].s = tg_arena_strdup(&p->arena, a[j].s))) return NULL;
        if (a[j].n > 0 && a[j].ints &&
            !(a[j].ints =
                  tg_arena_memdup(&p->arena, a[j].ints, sizeof *a[j].ints * (size_t)a[j].n)))
            return NULL;
        if (a[j].n > 0 && a[j].floats &&
            !(a[j].floats =
                  tg_arena_memdup(&p->arena, a[j].floats, sizeof *a[j].floats * (size_t)a[j].n)))
            return NULL;
    }
    return a;
}

/* ---- comparing calls ---- */

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t f64_bits(double f) {
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint64_t aval_hash(const tg_aval *a) {
    uint64_t h = mix(0, (uint64_t)a->kind);
    h = mix(h, (uint64_t)a->i);
    h = mix(h, f64_bits(a->f));
    for (int k = 0; k < a->n && a->ints; k++) h = mix(h, (uint64_t)a->ints[k]);
    if (a->s)
        for (const char *c = a->s; *c; c++) h = mix(h, (unsigned char)*c);
    return h;
}

static bool aval_same(const tg_aval *a, const tg_aval *b) {
    if (a->kind != b->kind || a->i != b->i || f64_bits(a->f) != f64_bits(b->f) || a->n != b->n)
        return false;
    if ((a->s == NULL) != (b->s == NULL) || (a->s && strcmp(a->s, b->s) != 0)) return false;
    for (int k = 0; k < a->n; k++) {
        if (a->ints && b->ints && a->ints[k] != b->ints[k]) return false;
        if (a->floats && b->floats && f64_bits(a->floats[k]) != f64_bits(b->floats[k]))
            return false;
    }
    return true;
}

/* Operand k of instruction ins as a call's argument: literals by value. */
static tg_fused_arg arg_of(const tg_fused_prog *p, const tg_fused_instr *ins, int k) {
    int s = ins->in[k];
    const tg_fused_instr *c = s >= p->nin ? &p->instr[s - p->nin] : NULL;
    if (!c || c->op != TG_FUSED_CONST) return (tg_fused_arg){.slot = s};
    return (tg_fused_arg){.slot = -1, .lit = c->lit, .dtype = c->dtype, .i = c->i, .f = c->f};
}

static uint64_t arg_hash(uint64_t h, const tg_fused_arg *a) {
    if (a->slot >= 0) return mix(h, (uint64_t)a->slot);
    h = mix(h, (uint64_t)(unsigned char)a->lit);
    h = mix(h, a->dtype);
    return mix(h, a->lit == 'f' ? f64_bits(a->f) : (uint64_t)a->i);
}

static bool arg_same(const tg_fused_arg *a, const tg_fused_arg *b) {
    if (a->slot >= 0 || b->slot >= 0) return a->slot == b->slot;
    return a->lit == b->lit && a->dtype == b->dtype && a->i == b->i &&
           f64_bits(a->f) == f64_bits(b->f);
}

/* Hash of a call: literal operands count by value. */
static uint64_t call_hash(int op, const tg_fused_arg *args, int nargs, const tg_aval *attrs) {
    uint64_t h = mix(1, (uint64_t)op);
    for (int k = 0; k < nargs; k++) h = arg_hash(h, &args[k]);
    for (int j = 0; j < tg_op_table[op]->nattrs; j++) h = mix(h, aval_hash(&attrs[j]));
    return h;
}

static uint64_t instr_hash(const tg_fused_prog *p, const tg_fused_instr *ins) {
    tg_fused_arg args[TG_FUSED_MAX_ARGS];
    for (int k = 0; k < ins->nin; k++) args[k] = arg_of(p, ins, k);
    return call_hash(ins->op, args, ins->nin, ins->attrs);
}

static bool instr_matches(const tg_fused_prog *p, const tg_fused_instr *ins, int op,
                          const tg_fused_arg *args, int nargs, const tg_aval *attrs) {
    if (ins->op != op || ins->nin != nargs) return false;
    for (int k = 0; k < nargs; k++) {
        tg_fused_arg a = arg_of(p, ins, k);
        if (!arg_same(&a, &args[k])) return false;
    }
    for (int j = 0; j < tg_op_table[op]->nattrs; j++)
        if (!aval_same(&ins->attrs[j], &attrs[j])) return false;
    return true;
}

/* ---- building ---- */

/* Grows the sharing table to hold twice the instructions (rehash). */
static bool tab_grow(tg_fused_prog *p) {
    size_t ncap = p->tabcap ? p->tabcap * 2 : 64;
    int *nt = tg_mem_alloc(p->ctx, sizeof *nt * ncap);
    if (!nt) return false;
    for (size_t k = 0; k < ncap; k++) nt[k] = -1;
    for (int j = 0; j < p->ninstr; j++) {
        const tg_fused_instr *ins = &p->instr[j];
        if (ins->op == TG_FUSED_CONST) continue;
        size_t h = (size_t)instr_hash(p, ins) & (ncap - 1);
        while (nt[h] >= 0) h = (h + 1) & (ncap - 1);
        nt[h] = j;
    }
    tg_mem_free(p->ctx, p->tab, sizeof *p->tab * p->tabcap);
    p->tab = nt;
    p->tabcap = ncap;
    return true;
}

tg_status tg_fused_add_call(tg_fused_prog *p, int op, const tg_fused_arg *args, int nargs,
                            const tg_aval *attrs, int pos, int *slot) {
    *slot = -1;
    if (!tg_fused_can_inline(op) || nargs < 0 || nargs > TG_FUSED_MAX_ARGS)
        return tg_set_error(TG_EINVAL, "fused: op %d with %d operands cannot be an instruction", op,
                            nargs);
    tg_fused_arg a[TG_FUSED_MAX_ARGS];
    for (int k = 0; k < nargs; k++) {
        a[k] = args[k];
        if (a[k].slot >= p->nslot)
            return tg_set_error(TG_EINVAL, "fused: operand slot %d does not exist yet", a[k].slot);
        if (a[k].slot >= 0) continue;
        if ((a[k].lit != 'i' && a[k].lit != 'f' && a[k].lit != 'b') || a[k].dtype >= TG_DT_COUNT)
            return tg_set_error(TG_EINVAL, "fused: invalid literal");
        /* only the value as written counts */
        if (a[k].lit == 'f') a[k].i = 0;
        if (a[k].lit != 'f') a[k].f = 0.0;
        if (a[k].lit == 'b') a[k].i = a[k].i != 0;
    }
    const tg_op_def *def = tg_op_table[op];
    tg_aval *own = NULL; /* the schema's defaults */
    if (!attrs && !(attrs = own = attrs_dup(p, def, NULL))) return TG_ENOMEM;
    if ((size_t)(p->ninstr + nargs + 1) * 2 > p->tabcap && !tab_grow(p)) return TG_ENOMEM;
    size_t h = (size_t)call_hash(op, a, nargs, attrs) & (p->tabcap - 1);
    for (; p->tab[h] >= 0; h = (h + 1) & (p->tabcap - 1))
        if (instr_matches(p, &p->instr[p->tab[h]], op, a, nargs, attrs)) {
            *slot = p->nin + p->tab[h];
            return TG_OK;
        }
    int in[TG_FUSED_MAX_ARGS];
    for (int k = 0; k < nargs; k++) {
        if (a[k].slot >= 0) {
            in[k] = a[k].slot;
            continue;
        }
        tg_status st = instr_room(p);
        if (st != TG_OK) return st;
        p->instr[p->ninstr++] = (tg_fused_instr){.op = TG_FUSED_CONST,
                                                 .attrs = &no_attrs,
                                                 .lit = a[k].lit,
                                                 .dtype = a[k].dtype,
                                                 .i = a[k].i,
                                                 .f = a[k].f,
                                                 .pos = a[k].pos};
        in[k] = p->nslot++;
    }
    tg_status st = instr_room(p);
    if (st != TG_OK) return st;
    const tg_aval *kept = own ? own : attrs_dup(p, def, attrs);
    if (!kept) return TG_ENOMEM;
    tg_fused_instr *ins = &p->instr[p->ninstr];
    *ins = (tg_fused_instr){.op = op, .nin = nargs, .attrs = kept, .pos = pos};
    for (int k = 0; k < nargs; k++) ins->in[k] = in[k];
    p->tab[h] = p->ninstr++;
    *slot = p->nslot++;
    return TG_OK;
}

tg_status tg_fused_add_out(tg_fused_prog *p, int slot, int reduce, const tg_aval *reduce_attrs) {
    if (slot < 0 || slot >= p->nslot || (reduce >= 0 && !tg_fused_can_reduce(reduce)) ||
        (reduce < 0 && slot < p->nin) || p->nout >= TG_MAX_OUTS)
        return tg_set_error(TG_EINVAL, "fused: invalid output (slot %d, reduction %d)", slot,
                            reduce);
    if (p->nout == p->capout) {
        int ncap = p->capout ? p->capout * 2 : 4;
        tg_fused_out *q =
            tg_mem_realloc(p->ctx, p->out, sizeof *q * (size_t)p->capout, sizeof *q * (size_t)ncap);
        if (!q) return TG_ENOMEM;
        p->out = q;
        p->capout = ncap;
    }
    tg_fused_out *o = &p->out[p->nout];
    *o = (tg_fused_out){.slot = slot, .reduce = reduce};
    if (reduce >= 0) {
        const tg_aval *a = attrs_dup(p, tg_op_table[reduce], reduce_attrs);
        if (!a) return TG_ENOMEM;
        o->attrs[0] = a[0];
        o->attrs[1] = a[1];
    }
    p->nout++;
    return TG_OK;
}

/* ---- programs as op data ---- */

static uint64_t prog_hash(const tg_opdata *d) {
    const tg_fused_prog *p = (const tg_fused_prog *)d;
    uint64_t h = mix(mix(mix(7, (uint64_t)p->nin), (uint64_t)p->ninstr), (uint64_t)p->nout);
    for (int j = 0; j < p->ninstr; j++) {
        const tg_fused_instr *ins = &p->instr[j];
        if (ins->op == TG_FUSED_CONST) {
            tg_fused_arg a = {
                .slot = -1, .lit = ins->lit, .dtype = ins->dtype, .i = ins->i, .f = ins->f};
            h = arg_hash(h, &a);
            continue;
        }
        h = mix(h, (uint64_t)ins->op);
        for (int k = 0; k < ins->nin; k++) h = mix(h, (uint64_t)ins->in[k]);
        for (int k = 0; k < tg_op_table[ins->op]->nattrs; k++)
            h = mix(h, aval_hash(&ins->attrs[k]));
    }
    for (int o = 0; o < p->nout; o++) {
        const tg_fused_out *x = &p->out[o];
        h = mix(mix(h, (uint64_t)x->slot), (uint64_t)(int64_t)x->reduce);
        if (x->reduce >= 0) h = mix(mix(h, aval_hash(&x->attrs[0])), aval_hash(&x->attrs[1]));
    }
    return h;
}

static bool prog_equal(const tg_opdata *da, const tg_opdata *db) {
    const tg_fused_prog *a = (const tg_fused_prog *)da, *b = (const tg_fused_prog *)db;
    if (a->nin != b->nin || a->ninstr != b->ninstr || a->nout != b->nout) return false;
    for (int j = 0; j < a->ninstr; j++) {
        const tg_fused_instr *x = &a->instr[j], *y = &b->instr[j];
        if (x->op != y->op || x->nin != y->nin) return false;
        if (x->op == TG_FUSED_CONST) {
            if (x->lit != y->lit || x->dtype != y->dtype || x->i != y->i ||
                f64_bits(x->f) != f64_bits(y->f))
                return false;
            continue;
        }
        for (int k = 0; k < x->nin; k++)
            if (x->in[k] != y->in[k]) return false;
        for (int k = 0; k < tg_op_table[x->op]->nattrs; k++)
            if (!aval_same(&x->attrs[k], &y->attrs[k])) return false;
    }
    for (int o = 0; o < a->nout; o++) {
        const tg_fused_out *x = &a->out[o], *y = &b->out[o];
        if (x->slot != y->slot || x->reduce != y->reduce) return false;
        if (x->reduce >= 0 &&
            (!aval_same(&x->attrs[0], &y->attrs[0]) || !aval_same(&x->attrs[1], &y->attrs[1])))
            return false;
    }
    return true;
}

const tg_opdata_vt tg_fused_data = {
    .what = "a fused program",
    .origin = "made by the fuse pass, or written fused{EXPR}(inputs) in .tg text",
    .hash = prog_hash,
    .equal = prog_equal,
    .release = prog_release,
};

tg_status tg_fused_node_typed(tg_ctx *ctx, const tg_node *node, const tg_type *in, bool runtime,
                              tg_fused_prog **out, char *msg, size_t n) {
    *out = NULL;
    const tg_fused_prog *src = tg_fused_node_prog(node);
    if (!src || src->nin != node->nin) {
        if (msg && n) snprintf(msg, n, "not a fused node with a program for its inputs");
        return TG_EINVAL;
    }
    tg_fused_prog *p = tg_fused_copy(ctx, src);
    if (!p) {
        if (msg && n) snprintf(msg, n, "out of memory");
        return TG_ENOMEM;
    }
    tg_status st = tg_fused_type(p, in, runtime, msg, n);
    if (st != TG_OK) {
        tg_fused_free(p);
        return st;
    }
    *out = p;
    return TG_OK;
}

/* ---- the expression text ----
 * One writer makes the text of a program (the printer's) and the positions it gives the
 * instructions of built programs: the two always agree. */

typedef struct sbuf {
    tg_ctx *ctx;
    char *s;    /* the text; NULL when only counting (positions) */
    size_t n;   /* bytes written (or counted) */
    size_t cap; /* room in s */
    bool keep;  /* store the bytes, not only count them */
    bool bad;   /* out of memory */
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->bad) return;
    if (b->keep && b->n + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap < b->n + n + 1) ncap *= 2;
        char *q = tg_mem_realloc(b->ctx, b->s, b->cap, ncap);
        if (!q) {
            b->bad = true;
            return;
        }
        b->s = q;
        b->cap = ncap;
    }
    if (b->keep) {
        memcpy(b->s + b->n, s, n);
        b->s[b->n + n] = '\0';
    }
    b->n += n;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) TG_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof tmp) {
        b->bad = true;
        return;
    }
    sb_put(b, tmp, (size_t)w);
}

static void put_literal(sbuf *b, const tg_fused_instr *c) {
    if (c->lit == 'b') {
        sb_str(b, c->i ? "true" : "false");
    } else if (c->lit == 'i') {
        sb_printf(b, "%lld", (long long)c->i);
    } else {
        char buf[TG_FLOAT_STR_MAX];
        tg_format_float(c->f, c->dtype == TG_DT_F32, buf, sizeof buf);
        sb_str(b, buf);
    }
}

static void put_aval(sbuf *b, const tg_attr_spec *sp, const tg_aval *a) {
    switch (a->kind) {
    case TG_ATTR_NONE:
        sb_str(b, "none");
        break;
    case TG_ATTR_INT:
        if (sp->type == TG_AS_DTYPE)
            sb_printf(b, "\"%s\"", tg_dtype_name((tg_dtype)a->i));
        else
            sb_printf(b, "%lld", (long long)a->i);
        break;
    case TG_ATTR_BOOL:
        sb_str(b, a->i ? "true" : "false");
        break;
    case TG_ATTR_FLOAT: {
        char buf[TG_FLOAT_STR_MAX];
        tg_format_float(a->f, false, buf, sizeof buf);
        sb_str(b, buf);
        break;
    }
    case TG_ATTR_STR:
        sb_str(b, "\"");
        for (const char *c = a->s ? a->s : ""; *c; c++) {
            if (*c == '"' || *c == '\\') sb_str(b, "\\");
            sb_put(b, c, 1);
        }
        sb_str(b, "\"");
        break;
    case TG_ATTR_INTS:
        sb_str(b, "[");
        for (int k = 0; k < a->n; k++) sb_printf(b, "%s%lld", k ? ", " : "", (long long)a->ints[k]);
        sb_str(b, "]");
        break;
    default: /* FLOATS, FUNC: no schema of an op allowed here uses them */
        b->bad = true;
        break;
    }
}

static bool aval_default(const tg_attr_spec *sp, const tg_aval *a) {
    if (sp->required || a->kind != sp->def.kind) return false;
    if (a->kind == TG_ATTR_INTS)
        return a->n == sp->def.n &&
               (a->n == 0 || !memcmp(a->ints, sp->def.ints, sizeof *a->ints * (size_t)a->n));
    return aval_same(a, &sp->def);
}

static void put_attrs(sbuf *b, const tg_op_def *def, const tg_aval *attrs) {
    for (int j = 0; j < def->nattrs; j++) {
        if (aval_default(&def->attrs[j], &attrs[j])) continue;
        sb_printf(b, ", %s=", def->attrs[j].name);
        put_aval(b, &def->attrs[j], &attrs[j]);
    }
}

/* Writes the expression of slot s, expanding shared values where used (iterative). first
 * (when not NULL) receives, per instruction not seen before, the offset where it starts. */
static void put_slot(sbuf *b, const tg_fused_prog *p, int s, int *stack, int *next, int *first) {
    int sp = 0;
    stack[sp] = s;
    next[sp++] = 0;
    while (sp > 0 && !b->bad) {
        int cur = stack[sp - 1];
        if (cur < p->nin) {
            sb_printf(b, "%%%d", cur);
            sp--;
            continue;
        }
        const tg_fused_instr *ins = &p->instr[cur - p->nin];
        int k = next[sp - 1]++;
        if (k == 0 && first && first[cur - p->nin] < 0) first[cur - p->nin] = (int)b->n;
        if (ins->op == TG_FUSED_CONST) {
            put_literal(b, ins);
            sp--;
            continue;
        }
        if (k == 0) {
            sb_str(b, tg_op_table[ins->op]->name);
            sb_str(b, "(");
        }
        if (k < ins->nin) {
            if (k > 0) sb_str(b, ", ");
            if (sp == p->nslot + 1) { /* cannot happen: operands precede their users */
                b->bad = true;
                return;
            }
            stack[sp] = ins->in[k];
            next[sp++] = 0;
            continue;
        }
        put_attrs(b, tg_op_table[ins->op], ins->attrs);
        sb_str(b, ")");
        sp--;
    }
}

/* Writes (or counts) p's expression into b: outputs joined by "; ". */
static void put_prog(sbuf *b, const tg_fused_prog *p, int *first) {
    size_t ns = (size_t)p->nslot + 2;
    int *stack = tg_mem_alloc(b->ctx, sizeof *stack * ns);
    int *next = tg_mem_alloc(b->ctx, sizeof *next * ns);
    if (!stack || !next) b->bad = true;
    for (int o = 0; o < p->nout && !b->bad; o++) {
        const tg_fused_out *x = &p->out[o];
        if (o) sb_str(b, "; ");
        if (x->reduce >= 0) {
            sb_str(b, tg_op_table[x->reduce]->name);
            sb_str(b, "(");
        }
        put_slot(b, p, x->slot, stack, next, first);
        if (x->reduce >= 0) {
            put_attrs(b, tg_op_table[x->reduce], x->attrs);
            sb_str(b, ")");
        }
    }
    if (stack) tg_mem_free(b->ctx, stack, sizeof *stack * ns);
    if (next) tg_mem_free(b->ctx, next, sizeof *next * ns);
}

char *tg_fused_format(const tg_fused_prog *p, size_t *len) {
    sbuf b = {.ctx = p->ctx, .keep = true};
    put_prog(&b, p, NULL);
    if (!b.bad && !b.s) sb_put(&b, "", 0);
    if (b.bad) {
        tg_mem_free(p->ctx, b.s, b.cap);
        return NULL;
    }
    /* hand back exactly len + 1 bytes, as documented */
    char *s = tg_mem_realloc(p->ctx, b.s, b.cap, b.n + 1);
    if (!s) {
        tg_mem_free(p->ctx, b.s, b.cap);
        return NULL;
    }
    *len = b.n;
    return s;
}

tg_status tg_fused_place(tg_fused_prog *p) {
    size_t nf = (size_t)p->ninstr + 1;
    int *first = tg_mem_alloc(p->ctx, sizeof *first * nf);
    if (!first) return TG_ENOMEM;
    for (int j = 0; j < p->ninstr; j++) first[j] = -1;
    sbuf b = {.ctx = p->ctx};
    put_prog(&b, p, first);
    for (int j = 0; j < p->ninstr && !b.bad; j++)
        if (p->instr[j].pos < 0) p->instr[j].pos = first[j];
    tg_mem_free(p->ctx, first, sizeof *first * nf);
    return b.bad ? TG_ENOMEM : TG_OK;
}

/* ---- typing ---- */

static tg_status tfail(const tg_fused_prog *p, int pos, char *msg, size_t n, tg_status st,
                       const char *fmt, ...) TG_PRINTF(6, 7);
static tg_status tfail(const tg_fused_prog *p, int pos, char *msg, size_t n, tg_status st,
                       const char *fmt, ...) {
    (void)p;
    int off = pos >= 0 ? snprintf(msg, n, "expression column %d: ", pos + 1) : 0;
    if (off >= 0 && (size_t)off < n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg + off, n - (size_t)off, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Gives literal c (typed as a weak literal) the dtype dt, as node construction converts a
 * weak literal: an integer literal must fit an integer dtype, a float one cannot become an
 * integer or bool. */
static bool literal_convert(tg_fused_instr *c, tg_dtype dt, char *why, size_t n) {
    if (tg_dtype_is_int(dt) && c->lit == 'i') {
        int bits = (int)tg_dtype_size(dt) * 8;
        int64_t hi = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
        int64_t lo = dt == TG_DT_U8 ? 0 : -hi - 1;
        if (dt == TG_DT_U8) hi = 255;
        if (c->i < lo || c->i > hi) {
            snprintf(why, n, "integer literal %lld is out of range for %s", (long long)c->i,
                     tg_dtype_name(dt));
            return false;
        }
    } else if (!tg_dtype_is_float(dt) && c->lit == 'f') {
        snprintf(why, n, "float literal cannot become %s", tg_dtype_name(dt));
        return false;
    }
    char buf[8];
    if (c->lit == 'f')
        tg_store_f64(buf, dt, c->f);
    else
        tg_store_i64(buf, dt, c->i);
    c->dtype = (uint8_t)dt;
    c->cf = tg_dtype_is_float(dt) ? tg_load_f64(buf, dt) : 0.0;
    c->ci = tg_dtype_is_float(dt) ? 0 : tg_load_i64(buf, dt);
    return true;
}

static tg_dtype lit_dtype(char lit) {
    return lit == 'f' ? TG_DT_F64 : lit == 'b' ? TG_DT_BOOL : TG_DT_I64;
}

static bool same_shape(const tg_type *a, const tg_type *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* t broadcasts to shape s (right-aligned; static 1 extents, or equal extents). */
static bool broadcasts_to(const tg_type *t, const tg_type *s) {
    if (t->ndim > s->ndim) return false;
    for (int d = 0; d < t->ndim; d++) {
        int64_t e = t->shape[d], x = s->shape[d + s->ndim - t->ndim];
        if (e != x && !(e == 1 && !((t->nobcast >> d) & 1u))) return false;
    }
    return true;
}

static void check_uniform(tg_fused_prog *p) {
    p->uniform = false;
    p->reduces = p->nout > 0 && p->out[0].reduce >= 0;
    p->core = false;
    for (int j = 0; j < p->ninstr; j++) p->core = p->core || tg_fused_is_core(p->instr[j].op);
    if (p->core) return;
    /* the iteration space */
    const tg_type *vals[TG_MAX_OUTS];
    for (int o = 0; o < p->nout; o++) vals[o] = &p->type[p->out[o].slot];
    tg_infer ic = {.op = &tg_op_fused};
    if (p->nout == 0 || !tg_broadcast_types(&ic, vals, p->nout, &p->space)) return;
    for (int o = 0; o < p->nout; o++) {
        const tg_fused_out *x = &p->out[o];
        if ((x->reduce >= 0) != p->reduces || !same_shape(&p->type[x->slot], &p->space)) return;
        if (p->reduces) {
            const tg_fused_out *f = &p->out[0];
            if (memcmp(x->red, f->red, sizeof x->red) != 0 || x->attrs[1].i != f->attrs[1].i)
                return;
        }
    }
    for (int j = 0; j < p->ninstr; j++)
        if (p->instr[j].op != TG_FUSED_CONST && !same_shape(&p->type[p->nin + j], &p->space))
            return;
    for (int s = 0; s < p->nin; s++)
        if (!broadcasts_to(&p->type[s], &p->space)) return;
    p->uniform = true;
}

tg_status tg_fused_type(tg_fused_prog *p, const tg_type *in, bool runtime, char *msg, size_t n) {
    char dummy[8];
    if (!msg || n == 0) {
        msg = dummy;
        n = sizeof dummy;
    }
    msg[0] = '\0';
    if (!p->type) {
        p->type = tg_arena_alloc(&p->arena, sizeof *p->type * (size_t)(p->nslot + 1));
        p->out_type = tg_arena_alloc(&p->arena, sizeof *p->out_type * (size_t)(p->nout + 1));
        if (!p->type || !p->out_type) {
            p->type = NULL;
            return tfail(p, -1, msg, n, TG_ENOMEM, "out of memory");
        }
    }
    for (int s = 0; s < p->nin; s++) p->type[s] = in[s];
    tg_type tin[TG_FUSED_MAX_ARGS], tout[TG_MAX_OUTS];
    tg_dtype want[TG_FUSED_MAX_ARGS];
    /* literals are weak until their user converts them; a user is typed after them */
    for (int j = 0; j < p->ninstr; j++) {
        tg_fused_instr *ins = &p->instr[j];
        tg_type *t = &p->type[p->nin + j];
        if (ins->op == TG_FUSED_CONST) {
            *t = (tg_type){.dtype = (uint8_t)lit_dtype(ins->lit), .weak = 1};
            continue;
        }
        const tg_op_def *def = tg_op_table[ins->op];
        for (int k = 0; k < ins->nin; k++) tin[k] = p->type[ins->in[k]];
        tg_infer ic = {.op = def,
                       .in = tin,
                       .nin = ins->nin,
                       .attrs = ins->attrs,
                       .out = tout,
                       .nout = def->nout,
                       .runtime = runtime};
        if (def->promote) {
            for (int k = 0; k < ins->nin; k++) want[k] = (tg_dtype)tin[k].dtype;
            if (def->promote(&ic, want) != TG_OK)
                return tfail(p, ins->pos, msg, n, ic.status ? ic.status : TG_ETYPE, "%s: %s",
                             def->name, ic.msg);
            bool all_weak = true;
            for (int k = 0; k < ins->nin; k++) all_weak = all_weak && tin[k].weak;
            for (int k = 0; k < ins->nin; k++) {
                int s = ins->in[k];
                tg_fused_instr *c = s >= p->nin ? &p->instr[s - p->nin] : NULL;
                bool lit = c && c->op == TG_FUSED_CONST && p->type[s].weak;
                if (lit) {
                    char why[128];
                    if (!literal_convert(c, want[k], why, sizeof why))
                        return tfail(p, c->pos >= 0 ? c->pos : ins->pos, msg, n, TG_ETYPE, "%s: %s",
                                     def->name, why);
                    p->type[s].dtype = (uint8_t)want[k];
                    p->type[s].weak = all_weak;
                    tin[k] = p->type[s];
                } else if (want[k] != (tg_dtype)tin[k].dtype) {
                    return tfail(p, ins->pos, msg, n, TG_ETYPE,
                                 "%s: operand %d is %s where %s is needed (write cast(..., "
                                 "dtype=\"%s\"))",
                                 def->name, k + 1, tg_dtype_name((tg_dtype)tin[k].dtype),
                                 tg_dtype_name(want[k]), tg_dtype_name(want[k]));
                }
            }
        }
        if (def->infer(&ic) != TG_OK || ic.nout != 1)
            return tfail(p, ins->pos, msg, n, ic.status ? ic.status : TG_ESHAPE, "%s: %s",
                         def->name, ic.msg);
        *t = tout[0];
        t->nobcast = runtime ? t->nobcast : 0;
    }
    /* a literal nobody converted (a weak-only call keeps literals weak): value as written */
    for (int j = 0; j < p->ninstr; j++) {
        tg_fused_instr *c = &p->instr[j];
        if (c->op != TG_FUSED_CONST || !p->type[p->nin + j].weak) continue;
        c->dtype = p->type[p->nin + j].dtype;
        c->cf = c->lit == 'f' ? c->f : 0.0;
        c->ci = c->lit == 'f' ? 0 : c->i;
    }
    for (int o = 0; o < p->nout; o++) {
        tg_fused_out *x = &p->out[o];
        const tg_type *v = &p->type[x->slot];
        if (x->reduce < 0) {
            p->out_type[o] = *v;
            for (int d = 0; d < TG_MAX_DIMS; d++) x->red[d] = false;
            continue;
        }
        const tg_op_def *def = tg_op_table[x->reduce];
        tg_infer ic = {.op = def,
                       .in = v,
                       .nin = 1,
                       .attrs = x->attrs,
                       .out = tout,
                       .nout = def->nout,
                       .runtime = runtime};
        if (def->infer(&ic) != TG_OK || ic.nout != 1)
            return tfail(p, -1, msg, n, ic.status ? ic.status : TG_ESHAPE, "output %d: %s: %s",
                         o + 1, def->name, ic.msg);
        p->out_type[o] = tout[0];
        tg_axes ax;
        char why[160];
        if (!tg_reduce_axes(x->attrs, def->nattrs, v->ndim, &ax, why, sizeof why))
            return tfail(p, -1, msg, n, TG_EINVAL, "output %d: %s: %s", o + 1, def->name, why);
        memcpy(x->red, ax.red, sizeof x->red);
    }
    check_uniform(p);
    return TG_OK;
}

/* ---- the record ---- */

static const tg_attr_spec fused_attrs[] = {
    {"expr", TG_AS_DATA, 1, 0, {.kind = TG_ATTR_NONE}},
};

static tg_status fused_infer(tg_infer *ic) {
    const tg_fused_prog *src = prog_of(&ic->attrs[TG_FUSED_A_EXPR]);
    if (!src) return tg_infer_fail(ic, TG_EINVAL, "the attribute 'expr' must hold a program");
    if (src->nin != ic->nin)
        return tg_infer_fail(ic, TG_EINVAL, "the program reads %d input%s, the node has %d",
                             src->nin, src->nin == 1 ? "" : "s", ic->nin);
    tg_fused_prog *p = tg_fused_copy(tg_ctx_default(), src);
    if (!p) return tg_infer_fail(ic, TG_ENOMEM, "out of memory");
    char msg[sizeof ic->msg];
    tg_status st = tg_fused_type(p, ic->in, ic->runtime, msg, sizeof msg);
    if (st != TG_OK) {
        tg_fused_free(p);
        return tg_infer_fail(ic, st, "%s", msg);
    }
    for (int o = 0; o < p->nout; o++) ic->out[o] = p->out_type[o];
    ic->nout = p->nout;
    tg_fused_free(p);
    return TG_OK;
}

/* Run-time type of an input tensor of static type st (as the interpreter makes them). */
static void runtime_type(const tg_type *st, const tg_tensor *t, tg_type *rt) {
    *rt = (tg_type){.dtype = (uint8_t)t->dtype, .ndim = (uint8_t)t->ndim};
    for (int d = 0; d < t->ndim; d++) {
        rt->shape[d] = t->shape[d];
        if (t->shape[d] == 1 && (d >= st->ndim || st->shape[d] != 1)) rt->nobcast |= 1u << d;
    }
}

/* Runs one op's reference kernel: out receives a new tensor of type *ot. */
static tg_status run_ref(tg_kern *k, int op, const tg_aval *attrs, tg_tensor *const *in, int nin,
                         const tg_type *ot, tg_tensor **out, int pos) {
    const tg_op_def *def = tg_op_table[op];
    tg_tensor *o = *out ? *out : tg_tensor_new(k->ctx, (tg_dtype)ot->dtype, ot->ndim, ot->shape);
    if (!o) return tg_kern_fail(k, TG_ENOMEM, "out of memory");
    tg_node fake = {.op = op,
                    .id = k->node->id,
                    .nin = nin,
                    .nout = 1,
                    .attrs = (tg_aval *)attrs,
                    .line = k->node->line,
                    .col = k->node->col};
    tg_kern sub = {.ctx = k->ctx,
                   .node = &fake,
                   .attrs = attrs,
                   .in = in,
                   .nin = nin,
                   .out = &o,
                   .nout = 1,
                   .out_type = ot};
    tg_status st = def->ref(&sub);
    if (st != TG_OK) {
        if (!*out) tg_tensor_free(o);
        if (pos >= 0)
            return tg_kern_fail(k, st, "expression column %d: %s: %s", pos + 1, def->name, sub.msg);
        return tg_kern_fail(k, st, "%s: %s", def->name, sub.msg);
    }
    *out = o;
    return TG_OK;
}

/* Runs the typed program p on the values in (p->nin of them) into the outputs out (of
 * p->out_type's shapes, any strides): every instruction with its op's reference kernel on
 * whole temporaries. */
static tg_status eval_prog(tg_kern *k, const tg_fused_prog *p, tg_tensor *const *in,
                           tg_tensor **out) {
    tg_status st = TG_OK;
    tg_tensor **val = tg_mem_calloc(k->ctx, sizeof *val * (size_t)(p->nslot + 1));
    int *last = tg_mem_alloc(k->ctx, sizeof *last * (size_t)(p->nslot + 1));
    if (!val || !last) {
        st = tg_kern_fail(k, TG_ENOMEM, "out of memory");
        goto done;
    }
    /* last use of each temporary: an instruction index, or ninstr for outputs */
    for (int s = 0; s < p->nslot; s++) last[s] = -1;
    for (int j = 0; j < p->ninstr; j++)
        for (int a = 0; a < p->instr[j].nin; a++) last[p->instr[j].in[a]] = j;
    for (int o = 0; o < p->nout; o++) last[p->out[o].slot] = p->ninstr;
    for (int s = 0; s < p->nin; s++) val[s] = in[s];
    for (int j = 0; j < p->ninstr && st == TG_OK; j++) {
        const tg_fused_instr *ins = &p->instr[j];
        int s = p->nin + j;
        const tg_type *t = &p->type[s];
        if (last[s] < 0) continue; /* unused */
        if (ins->op == TG_FUSED_CONST) {
            val[s] = tg_tensor_new(k->ctx, (tg_dtype)t->dtype, 0, NULL);
            if (!val[s]) {
                st = tg_kern_fail(k, TG_ENOMEM, "out of memory");
                break;
            }
            if (tg_dtype_is_float((tg_dtype)t->dtype))
                tg_store_f64(tg_tensor_data(val[s]), (tg_dtype)t->dtype, ins->cf);
            else
                tg_store_i64(tg_tensor_data(val[s]), (tg_dtype)t->dtype, ins->ci);
            continue;
        }
        tg_tensor *args[TG_FUSED_MAX_ARGS];
        for (int a = 0; a < ins->nin; a++) args[a] = val[ins->in[a]];
        st = run_ref(k, ins->op, ins->attrs, args, ins->nin, t, &val[s], ins->pos);
        for (int a = 0; a < ins->nin; a++) {
            int u = ins->in[a];
            if (u >= p->nin && last[u] == j && val[u]) {
                tg_tensor_free(val[u]);
                val[u] = NULL;
            }
        }
    }
    for (int o = 0; o < p->nout && st == TG_OK; o++) {
        const tg_fused_out *x = &p->out[o];
        if (x->reduce < 0) {
            tg_tensor_copy_into(out[o], val[x->slot]);
            continue;
        }
        tg_tensor *arg = val[x->slot];
        st = run_ref(k, x->reduce, x->attrs, &arg, 1, &p->out_type[o], &out[o], -1);
    }
done:
    if (val)
        for (int s = p->nin; s < p->nslot; s++) tg_tensor_free(val[s]);
    if (val) tg_mem_free(k->ctx, val, sizeof *val * (size_t)(p->nslot + 1));
    if (last) tg_mem_free(k->ctx, last, sizeof *last * (size_t)(p->nslot + 1));
    return st;
}

/* ---- the batch loop of programs with core ops (fused.h, tg_fused_is_core) ---- */

/* A reduction output's axes written from the end (so that they name the same axes of a block
 * as of the whole value). */
static bool axes_from_end(const tg_aval *axis) {
    if (axis->kind == TG_ATTR_INT) return axis->i < 0;
    if (axis->kind != TG_ATTR_INTS) return false;
    for (int k = 0; k < axis->n; k++)
        if (tg_aval_none_at(axis, k) || axis->ints[k] >= 0) return false;
    return true;
}

bool tg_fused_block_plan(const tg_fused_prog *p, int *lead, int *nbatch) {
    int b = -1;
    if (!p->core) return false;
    for (int j = 0; j < p->ninstr; j++) { /* the core ops fix b */
        const tg_fused_instr *ins = &p->instr[j];
        int cores[TG_BW_MAX_OPERANDS] = {0}, nd[TG_BW_MAX_OPERANDS] = {0}, bad;
        uint32_t absent;
        tg_bw_sig sig;
        if (ins->op == TG_FUSED_CONST || !tg_fused_is_core(ins->op)) continue;
        for (int a = 0; a < ins->nin; a++) nd[a] = p->type[ins->in[a]].ndim;
        if (!tg_bw_parse(tg_op_table[ins->op]->signature, &sig) || sig.nin != ins->nin ||
            !tg_bw_core_ranks(&sig, nd, cores, &absent, &bad))
            return false;
        int bj = p->type[p->nin + j].ndim - cores[sig.nin];
        if (b >= 0 && bj != b) return false;
        b = bj;
    }
    if (b <= 0) return false;
    /* the leading (batch) dimensions of every slot, from the outputs back: readers fix them */
    int *sl = tg_mem_alloc(p->ctx, sizeof *sl * (size_t)(p->nslot + 1));
    bool ok = sl != NULL;
    for (int s = 0; ok && s < p->nslot; s++) sl[s] = -1;
    for (int o = 0; ok && o < p->nout; o++) {
        const tg_fused_out *x = &p->out[o];
        ok = x->slot >= p->nin && p->type[x->slot].ndim >= b &&
             (sl[x->slot] < 0 || sl[x->slot] == b);
        if (ok && x->reduce >= 0) { /* a reduction of a block's value: over its core axes */
            ok = axes_from_end(&x->attrs[0]);
            for (int d = 0; ok && d < b; d++) ok = !x->red[d];
        }
        if (ok) sl[x->slot] = b;
    }
    for (int j = p->ninstr - 1; ok && j >= 0; j--) {
        const tg_fused_instr *ins = &p->instr[j];
        int s = p->nin + j, nds = p->type[s].ndim;
        if (ins->op == TG_FUSED_CONST) continue;
        int cores[TG_BW_MAX_OPERANDS] = {0}, nd[TG_BW_MAX_OPERANDS] = {0}, bad;
        uint32_t absent;
        tg_bw_sig sig;
        bool core = tg_fused_is_core(ins->op);
        for (int a = 0; a < ins->nin; a++) nd[a] = p->type[ins->in[a]].ndim;
        /* a core op's value is a batch of its blocks; an elementwise one has the core rank
           its readers see (its rank less its leading dimensions), a value read by no one
           splits nowhere */
        if (core)
            ok = tg_bw_parse(tg_op_table[ins->op]->signature, &sig) &&
                 tg_bw_core_ranks(&sig, nd, cores, &absent, &bad) && sl[s] == b;
        else
            ok = sl[s] >= 0 && sl[s] <= nds;
        for (int a = 0; ok && a < ins->nin; a++) {
            int u = ins->in[a], c = nds - sl[s];
            if (u >= p->nin && p->instr[u - p->nin].op == TG_FUSED_CONST) continue;
            int want = core ? nd[a] - cores[a] : nd[a] > c ? nd[a] - c : 0;
            ok = want <= b && (sl[u] < 0 || sl[u] == want);
            sl[u] = want;
        }
    }
    for (int s = 0; ok && s < p->nin; s++) lead[s] = sl[s] < 0 ? 0 : sl[s];
    if (sl) tg_mem_free(p->ctx, sl, sizeof *sl * (size_t)(p->nslot + 1));
    *nbatch = b;
    return ok;
}

/* The view of block bi (nbatch indices) of t whose first `lead` dimensions are batch ones,
 * right-aligned with the batch (an extent 1 read at 0). Borrows t's buffer. */
static void block_of(const tg_tensor *t, int lead, int nbatch, const int64_t *bi, tg_tensor *v) {
    *v = *t;
    v->ndim = t->ndim - lead;
    for (int d = 0; d < lead; d++)
        if (t->shape[d] != 1) v->offset += bi[nbatch - lead + d] * t->strides[d];
    for (int d = 0; d < v->ndim; d++) {
        v->shape[d] = t->shape[lead + d];
        v->strides[d] = t->strides[lead + d];
    }
}

/* Runs the program of node k->node block by block (tg_fused_block_plan's split): each block's
 * values are views of the inputs and outputs, the program typed once for a block. TG_EUNSUPPORTED
 * (nothing run) when the program does not split. */
static tg_status run_blocks(tg_kern *k, const tg_fused_prog *whole) {
    int nin = k->node->nin, nout = k->node->nout, b = 0;
    size_t sz = (sizeof(int) + sizeof(tg_tensor) + sizeof(tg_tensor *) + sizeof(tg_type)) *
                (size_t)(nin + nout + 1);
    char *mem = tg_mem_alloc(k->ctx, sz);
    if (!mem) return tg_kern_fail(k, TG_ENOMEM, "out of memory");
    tg_tensor *views = (tg_tensor *)mem;
    tg_tensor **pv = (tg_tensor **)(views + nin + nout + 1);
    tg_type *tin = (tg_type *)(pv + nin + nout + 1);
    int *lead = (int *)(tin + nin + nout + 1);
    tg_status st = TG_EUNSUPPORTED;
    tg_fused_prog *q = NULL;
    if (!tg_fused_block_plan(whole, lead, &b)) goto done;
    const int64_t *batch = k->out[0]->shape;
    int64_t bi[TG_MAX_DIMS] = {0}, nblocks = 1;
    for (int d = 0; d < b; d++) nblocks *= batch[d];
    for (int i = 0; i < nin + nout; i++) pv[i] = &views[i];
    /* the block's types: the inputs' static types less their batch dimensions */
    for (int s = 0; s < nin; s++) {
        tg_type st0 = k->node->in[s]->type;
        block_of(k->in[s], lead[s], b, bi, &views[s]);
        st0.ndim = (uint8_t)(st0.ndim - lead[s]);
        memmove(st0.shape, st0.shape + lead[s], sizeof st0.shape[0] * st0.ndim);
        runtime_type(&st0, &views[s], &tin[s]);
    }
    char msg[sizeof k->msg];
    st = tg_fused_node_typed(k->ctx, k->node, tin, true, &q, msg, sizeof msg);
    if (st != TG_OK) {
        st = TG_EUNSUPPORTED; /* whole values, where the program's own error will show */
        goto done;
    }
    for (int64_t e = 0; e < nblocks && st == TG_OK; e++, tg_index_next(b, batch, bi)) {
        for (int s = 0; s < nin; s++) block_of(k->in[s], lead[s], b, bi, &views[s]);
        for (int o = 0; o < nout; o++) block_of(k->out[o], b, b, bi, &views[nin + o]);
        st = eval_prog(k, q, pv, pv + nin);
        if (st == TG_OK) continue;
        char where[8 * TG_MAX_DIMS + 8], why[sizeof k->msg];
        size_t at = 0;
        for (int d = 0; d < b; d++)
            at += (size_t)snprintf(where + at, sizeof where - at, "%s%lld", d ? ", " : "",
                                   (long long)bi[d]);
        memcpy(why, k->msg, sizeof why);
        tg_kern_fail(k, st, "batch element [%s]: %s", where, why);
    }
done:
    tg_fused_free(q);
    tg_mem_free(k->ctx, mem, sz);
    return st;
}

/* The oracle: every instruction with its op's reference kernel on whole temporaries, or on
 * the blocks of the batch for a program with core ops. */
static tg_status fused_ref(tg_kern *k) {
    char msg[sizeof k->msg];
    int nin = k->node->nin;
    tg_type *tin = tg_mem_alloc(k->ctx, sizeof *tin * (size_t)(nin + 1));
    if (!tin) return tg_kern_fail(k, TG_ENOMEM, "out of memory");
    for (int s = 0; s < nin; s++) runtime_type(&k->node->in[s]->type, k->in[s], &tin[s]);
    tg_fused_prog *p;
    tg_status st = tg_fused_node_typed(k->ctx, k->node, tin, true, &p, msg, sizeof msg);
    tg_mem_free(k->ctx, tin, sizeof *tin * (size_t)(nin + 1));
    if (st != TG_OK) return tg_kern_fail(k, st, "%s", msg);
    st = p->core ? run_blocks(k, p) : TG_EUNSUPPORTED;
    if (st == TG_EUNSUPPORTED) st = eval_prog(k, p, k->in, k->out);
    tg_fused_free(p);
    return st;
}

/* The inputs output k reads: the slots below nin its expression reaches, walking the
 * instructions backwards (each reads only smaller slots). */
static tg_status fused_out_reads(const tg_aval *attrs, int nin, int k, bool *reads) {
    const tg_fused_prog *p = prog_of(&attrs[TG_FUSED_A_EXPR]);
    bool *need = tg_mem_calloc(p->ctx, sizeof *need * (size_t)p->nslot);
    if (!need) return TG_ENOMEM;
    need[p->out[k].slot] = true;
    for (int j = p->ninstr - 1; j >= 0; j--)
        for (int a = 0; need[p->nin + j] && a < p->instr[j].nin; a++)
            need[p->instr[j].in[a]] = true;
    for (int i = 0; i < nin && i < p->nin; i++) reads[i] = need[i];
    tg_mem_free(p->ctx, need, sizeof *need * (size_t)p->nslot);
    return TG_OK;
}

/* clang-format off */
const tg_op_def tg_op_fused = {
    .name = "fused", .min_in = 1, .max_in = -1, .nout = -1, .kind = TG_KIND_OTHER,
    .attrs = fused_attrs, .nattrs = (int)TG_COUNTOF(fused_attrs),
    .promote = NULL, .infer = fused_infer, .ref = fused_ref, .out_reads = fused_out_reads,
    .grad = TG_GRAD_UNDEFINED, .data = &tg_fused_data,
};
/* clang-format on */
