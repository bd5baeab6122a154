/* fused.c - the `fused` op: its record (inference and reference kernel), and the compiled
 * program of fused.h: the expression parser, the typing pass, builders and the formatter.
 *
 * Expression grammar (one line, no braces):
 *     prog    := expr (";" expr)*
 *     expr    := "%" INT | literal | NAME "(" [arg ("," arg)*] ")"
 *     arg     := expr | NAME "=" attr          (keywords after the operands)
 *     literal := ["-"] (INT | FLOAT | inf | nan) | true | false
 *     attr    := literal | none | STRING | "[" [INT ("," INT)*] "]"
 * A reduction (sum prod mean max min) may only be the outermost call of an expr.
 *
 * Invariants:
 *  - The parser is a loop over tokens with an explicit stack of open calls (never
 *    recursion); each token is read once, so parsing is linear in the text (the sharing
 *    table is a hash table).
 *  - Identical calls (same op, operands, literal values and attributes) get one slot.
 *    Literals are never shared: each literal instruction has exactly one user, so typing
 *    can give it the dtype that user's promotion asks for.
 *  - Typing calls the op records' own promote and infer: the types of a fused node are
 *    those of the unfused ops by construction. The reference kernel calls the records'
 *    own reference kernels on whole temporaries: it is the oracle for fused nodes.
 *  - Inference runs without a context (tg_infer has none): its temporary program comes
 *    from the default context. The reference kernel uses the kernel's context.
 */
#include "fused.h"
#include "../ir/ir.h"

#include <locale.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define FUSED_MAX_NUMBER 128 /* longest number in an expression, as in .tg text */

/* ---- ops allowed ---- */

bool tg_fused_can_inline(int op) {
    return op >= 0 && op < TG_OP_COUNT && tg_op_table[op]->kind == TG_KIND_ELEMWISE &&
           tg_op_table[op]->nout == 1 && op != TG_OP_FUSED;
}

bool tg_fused_can_reduce(int op) {
    return op >= 0 && op < TG_OP_COUNT && tg_reduce_plain(tg_op_table[op]);
}

/* ---- programs ---- */

static const tg_aval no_attrs = {.kind = TG_ATTR_NONE}; /* attrs of a literal */

tg_fused_prog *tg_fused_new(tg_ctx *ctx, int nin) {
    if (!ctx) ctx = tg_ctx_default();
    if (nin < 0 || nin > TG_FUSED_MAX_INSTRS) {
        tg_set_error(TG_ELIMIT, "fused: %d inputs", nin);
        return NULL;
    }
    tg_fused_prog *p = tg_mem_calloc(ctx, sizeof *p);
    if (!p) return NULL;
    p->ctx = ctx;
    tg_arena_init(&p->arena, ctx);
    p->nin = nin;
    p->nslot = nin;
    return p;
}

void tg_fused_free(tg_fused_prog *p) {
    if (!p) return;
    tg_ctx *ctx = p->ctx;
    tg_mem_free(ctx, p->instr, sizeof *p->instr * (size_t)p->capinstr);
    tg_mem_free(ctx, p->out, sizeof *p->out * (size_t)p->capout);
    tg_arena_fini(&p->arena);
    tg_mem_free(ctx, p, sizeof *p);
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

int tg_fused_add_op(tg_fused_prog *p, int op, const int *in, int nin, const tg_aval *attrs) {
    if (!tg_fused_can_inline(op) || nin < 0 || nin > TG_FUSED_MAX_ARGS) {
        tg_set_error(TG_EINVAL, "fused: op %d with %d operands cannot be an instruction", op, nin);
        return -1;
    }
    for (int k = 0; k < nin; k++)
        if (in[k] < 0 || in[k] >= p->nslot) {
            tg_set_error(TG_EINVAL, "fused: operand slot %d does not exist yet", in[k]);
            return -1;
        }
    if (instr_room(p) != TG_OK) return -1;
    const tg_aval *a = attrs_dup(p, tg_op_table[op], attrs);
    if (!a) return -1;
    tg_fused_instr *ins = &p->instr[p->ninstr++];
    *ins = (tg_fused_instr){.op = op, .nin = nin, .attrs = a, .pos = -1};
    for (int k = 0; k < nin; k++) ins->in[k] = in[k];
    return p->nslot++;
}

int tg_fused_add_const(tg_fused_prog *p, char lit, int64_t i, double f, tg_dtype dtype) {
    if ((lit != 'i' && lit != 'f' && lit != 'b') || (unsigned)dtype >= TG_DT_COUNT) {
        tg_set_error(TG_EINVAL, "fused: invalid literal");
        return -1;
    }
    if (instr_room(p) != TG_OK) return -1;
    p->instr[p->ninstr++] = (tg_fused_instr){.op = TG_FUSED_CONST,
                                             .attrs = &no_attrs,
                                             .lit = lit,
                                             .dtype = (uint8_t)dtype,
                                             .i = lit == 'b' ? i != 0 : i,
                                             .f = f,
                                             .pos = -1};
    return p->nslot++;
}

bool tg_fused_add_out(tg_fused_prog *p, int slot, int reduce, const tg_aval *reduce_attrs) {
    if (slot < 0 || slot >= p->nslot || (reduce >= 0 && !tg_fused_can_reduce(reduce)) ||
        (reduce < 0 && slot < p->nin) || p->nout >= TG_MAX_OUTS) {
        tg_set_error(TG_EINVAL, "fused: invalid output (slot %d, reduction %d)", slot, reduce);
        return false;
    }
    if (p->nout == p->capout) {
        int ncap = p->capout ? p->capout * 2 : 4;
        tg_fused_out *q =
            tg_mem_realloc(p->ctx, p->out, sizeof *q * (size_t)p->capout, sizeof *q * (size_t)ncap);
        if (!q) return false;
        p->out = q;
        p->capout = ncap;
    }
    tg_fused_out *o = &p->out[p->nout];
    *o = (tg_fused_out){.slot = slot, .reduce = reduce};
    if (reduce >= 0) {
        const tg_aval *a = attrs_dup(p, tg_op_table[reduce], reduce_attrs);
        if (!a) return false;
        o->attrs[0] = a[0];
        o->attrs[1] = a[1];
    }
    p->nout++;
    return true;
}

/* ---- the expression lexer ---- */

typedef enum {
    T_END,
    T_NAME,
    T_INPUT,
    T_INT,
    T_FLOAT,
    T_STR,
    T_LPAREN,
    T_RPAREN,
    T_LBRACKET,
    T_RBRACKET,
    T_COMMA,
    T_EQUAL,
    T_SEMI,
    T_MINUS,
    T_BAD,
} tkind;

typedef struct tok {
    tkind k;
    size_t pos, len; /* span in the text */
    uint64_t u;      /* T_INT, T_INPUT: value, saturated */
    double f;        /* T_FLOAT */
} tok;

typedef struct eparser {
    tg_fused_prog *p;
    const char *s;  /* the text */
    size_t len, at; /* its length, next byte */
    tok t;          /* current token */
    tg_status st;   /* first error */
    char *msg;      /* where it goes */
    size_t msgn;
    locale_t cloc; /* "C" numeric locale, made at the first float */
    /* sharing: open addressing over instruction indices (-1 empty) */
    int *tab;
    size_t tabcap;
} eparser;

static bool efail(eparser *e, size_t pos, tg_status st, const char *fmt, ...) TG_PRINTF(4, 5);
static bool efail(eparser *e, size_t pos, tg_status st, const char *fmt, ...) {
    if (e->st != TG_OK) return false;
    e->st = st;
    int off = snprintf(e->msg, e->msgn, "expression column %zu: ", pos + 1);
    if (off >= 0 && (size_t)off < e->msgn) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg + off, e->msgn - (size_t)off, fmt, ap);
        va_end(ap);
    }
    return false;
}

static bool e_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool e_digit(int c) { return c >= '0' && c <= '9'; }

/* Reads the token at e->at into *t and moves past it. Errors become T_BAD (message set). */
static void elex(eparser *e, tok *t) {
    const char *s = e->s;
    while (e->at < e->len && (s[e->at] == ' ' || s[e->at] == '\t')) e->at++;
    size_t b = e->at;
    *t = (tok){.k = T_END, .pos = b};
    if (b >= e->len) return;
    char c = s[b];
    if (e_alpha(c)) {
        size_t q = b;
        while (q < e->len && (e_alpha(s[q]) || e_digit(s[q]))) q++;
        *t = (tok){.k = T_NAME, .pos = b, .len = q - b};
        e->at = q;
        return;
    }
    if (c == '%' || e_digit(c) || (c == '.' && b + 1 < e->len && e_digit(s[b + 1]))) {
        size_t q = c == '%' ? b + 1 : b;
        bool isf = false;
        size_t d0 = q;
        while (q < e->len && e_digit(s[q])) q++;
        if (c == '%') {
            if (q == d0) {
                *t = (tok){.k = T_BAD, .pos = b, .len = 1};
                efail(e, b, TG_ESYNTAX, "expected an input number after '%%' (%%0, %%1, ...)");
                return;
            }
        } else {
            if (q < e->len && s[q] == '.') {
                isf = true;
                q++;
                while (q < e->len && e_digit(s[q])) q++;
            }
            if (q < e->len && (s[q] == 'e' || s[q] == 'E')) {
                size_t r = q + 1;
                if (r < e->len && (s[r] == '+' || s[r] == '-')) r++;
                if (r < e->len && e_digit(s[r])) {
                    isf = true;
                    while (r < e->len && e_digit(s[r])) r++;
                    q = r;
                }
            }
        }
        if (q < e->len && (e_alpha(s[q]) || s[q] == '.')) {
            *t = (tok){.k = T_BAD, .pos = b, .len = q - b};
            efail(e, b, TG_ESYNTAX, "malformed number '%.*s'", (int)(q - b + 1), s + b);
            return;
        }
        *t = (tok){.k = c == '%' ? T_INPUT : isf ? T_FLOAT : T_INT, .pos = b, .len = q - b};
        e->at = q;
        if (!isf) {
            uint64_t u = 0;
            for (size_t r = d0; r < q; r++) {
                unsigned dg = (unsigned)(s[r] - '0');
                if (u > (UINT64_MAX - dg) / 10) {
                    u = UINT64_MAX;
                    break;
                }
                u = u * 10 + dg;
            }
            t->u = u;
            return;
        }
        char buf[FUSED_MAX_NUMBER + 1];
        if (q - b > FUSED_MAX_NUMBER) {
            t->k = T_BAD;
            efail(e, b, TG_ESYNTAX, "number longer than %d characters", FUSED_MAX_NUMBER);
            return;
        }
        memcpy(buf, s + b, q - b);
        buf[q - b] = '\0';
        if (e->cloc == (locale_t)0) e->cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        t->f = e->cloc != (locale_t)0 ? strtod_l(buf, NULL, e->cloc) : strtod(buf, NULL);
        if (isinf(t->f)) {
            t->k = T_BAD;
            efail(e, b, TG_ESYNTAX, "float literal '%s' is out of range", buf);
        }
        return;
    }
    if (c == '"') {
        size_t q = b + 1;
        while (q < e->len && s[q] != '"') {
            if (s[q] == '\\' && q + 1 < e->len) q++;
            q++;
        }
        if (q >= e->len) {
            *t = (tok){.k = T_BAD, .pos = b};
            efail(e, b, TG_ESYNTAX, "unterminated string");
            return;
        }
        *t = (tok){.k = T_STR, .pos = b, .len = q + 1 - b};
        e->at = q + 1;
        return;
    }
    static const char punct[] = "()[],=;-";
    static const tkind kinds[] = {T_LPAREN, T_RPAREN, T_LBRACKET, T_RBRACKET,
                                  T_COMMA,  T_EQUAL,  T_SEMI,     T_MINUS};
    const char *hit = c ? strchr(punct, c) : NULL;
    if (!hit) {
        *t = (tok){.k = T_BAD, .pos = b, .len = 1};
        if (c > 0x20 && c < 0x7f)
            efail(e, b, TG_ESYNTAX, "unexpected character '%c'", c);
        else
            efail(e, b, TG_ESYNTAX, "unexpected byte 0x%02X", (unsigned)(unsigned char)c);
        return;
    }
    *t = (tok){.k = kinds[hit - punct], .pos = b, .len = 1};
    e->at = b + 1;
}

static void eadvance(eparser *e) { elex(e, &e->t); }

/* The token after the current one, without consuming it. */
static tok epeek(eparser *e) {
    size_t save = e->at;
    tg_status st = e->st;
    tok t;
    elex(e, &t);
    e->at = save;
    e->st = st; /* an error in the peeked token is reported when it is read */
    return t;
}

static bool tok_is(const eparser *e, const tok *t, const char *w) {
    size_t n = strlen(w);
    return t->k == T_NAME && t->len == n && memcmp(e->s + t->pos, w, n) == 0;
}

/* Describes the current token for "expected X but found Y". */
static bool eexpected(eparser *e, const char *what) {
    const tok *t = &e->t;
    if (t->k == T_BAD) return false; /* the lexer's message stands */
    if (t->k == T_END) return efail(e, t->pos, TG_ESYNTAX, "expected %s but found the end", what);
    return efail(e, t->pos, TG_ESYNTAX, "expected %s but found '%.*s'", what,
                 (int)(t->len > 24 ? 24 : t->len), e->s + t->pos);
}

/* ---- literals and attribute values ---- */

typedef struct operand {
    int slot; /* >= 0: a value; -1: the literal below (not an instruction yet) */
    char lit; /* 'i', 'f', 'b' */
    int64_t i;
    double f;
    size_t pos;
} operand;

static bool starts_literal(const eparser *e) {
    const tok *t = &e->t;
    return t->k == T_INT || t->k == T_FLOAT || t->k == T_MINUS || tok_is(e, t, "inf") ||
           tok_is(e, t, "nan") || tok_is(e, t, "true") || tok_is(e, t, "false");
}

/* literal := ["-"] (INT | FLOAT | inf | nan) | true | false */
static bool parse_literal(eparser *e, operand *o) {
    size_t pos = e->t.pos;
    *o = (operand){.slot = -1, .pos = pos};
    if (tok_is(e, &e->t, "true") || tok_is(e, &e->t, "false")) {
        o->lit = 'b';
        o->i = e->s[e->t.pos] == 't';
        eadvance(e);
        return true;
    }
    bool neg = e->t.k == T_MINUS;
    if (neg) eadvance(e);
    const tok *t = &e->t;
    if (t->k == T_INT) {
        uint64_t lim = neg ? (uint64_t)1 << 63 : (uint64_t)INT64_MAX;
        if (t->u > lim)
            return efail(e, pos, TG_ESYNTAX, "integer literal %s%.*s is out of range of i64",
                         neg ? "-" : "", (int)(t->len > 30 ? 30 : t->len), e->s + t->pos);
        o->lit = 'i';
        o->i = !neg ? (int64_t)t->u : t->u == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)t->u;
    } else if (t->k == T_FLOAT) {
        o->lit = 'f';
        o->f = neg ? -t->f : t->f;
    } else if (tok_is(e, t, "inf")) {
        o->lit = 'f';
        o->f = neg ? -HUGE_VAL : HUGE_VAL;
    } else if (tok_is(e, t, "nan")) {
        o->lit = 'f';
        o->f = NAN;
    } else {
        return eexpected(e, neg ? "a number after '-'" : "a number");
    }
    eadvance(e);
    return true;
}

/* A user attribute as written (before normalization to the op's schema). */
typedef struct uattr {
    size_t pos, nlen; /* the name */
    tg_aval v;        /* kind NONE for `none` */
} uattr;

#define MAX_UATTRS 4

/* attr := literal | none | STRING | "[" [INT ("," INT)*] "]" */
static bool parse_attr_value(eparser *e, tg_aval *v) {
    tok t = e->t;
    if (tok_is(e, &t, "none")) {
        *v = (tg_aval){.kind = TG_ATTR_NONE};
        eadvance(e);
        return true;
    }
    if (t.k == T_STR) {
        char *s = tg_arena_alloc(&e->p->arena, t.len);
        if (!s) return efail(e, t.pos, TG_ENOMEM, "out of memory");
        size_t n = 0;
        for (size_t q = t.pos + 1; q + 1 < t.pos + t.len; q++) {
            if (e->s[q] == '\\') q++;
            s[n++] = e->s[q];
        }
        s[n] = '\0';
        *v = (tg_aval){.kind = TG_ATTR_STR, .s = s};
        eadvance(e);
        return true;
    }
    if (t.k == T_LBRACKET) {
        eadvance(e);
        int cap = 0, n = 0;
        int64_t *xs = NULL;
        while (e->t.k != T_RBRACKET) {
            operand o;
            if (!parse_literal(e, &o)) return false;
            if (o.lit != 'i') return efail(e, o.pos, TG_ESYNTAX, "expected an integer in a list");
            if (n == cap) {
                if (cap >= TG_MAX_DIMS * 8)
                    return efail(e, o.pos, TG_ELIMIT, "list longer than %d items", cap);
                int ncap = cap ? cap * 2 : 8;
                int64_t *nx = tg_arena_alloc(&e->p->arena, sizeof *nx * (size_t)ncap);
                if (!nx) return efail(e, o.pos, TG_ENOMEM, "out of memory");
                if (n) memcpy(nx, xs, sizeof *xs * (size_t)n);
                xs = nx;
                cap = ncap;
            }
            xs[n++] = o.i;
            if (e->t.k != T_COMMA) break;
            eadvance(e);
        }
        if (e->t.k != T_RBRACKET) return eexpected(e, "',' or ']'");
        eadvance(e);
        *v = (tg_aval){.kind = TG_ATTR_INTS, .ints = xs, .n = n};
        return true;
    }
    if (starts_literal(e)) {
        operand o;
        if (!parse_literal(e, &o)) return false;
        if (o.lit == 'i')
            *v = (tg_aval){.kind = TG_ATTR_INT, .i = o.i};
        else if (o.lit == 'b')
            *v = (tg_aval){.kind = TG_ATTR_BOOL, .i = o.i};
        else
            *v = (tg_aval){.kind = TG_ATTR_FLOAT, .f = o.f};
        return true;
    }
    return eexpected(e, "an attribute value");
}

/* Normalizes user attributes to op's schema into out (def->nattrs entries, arena). */
static bool attrs_normalize(eparser *e, const tg_op_def *def, const uattr *ua, int nua,
                            size_t oppos, tg_aval **out) {
    tg_aval *a = tg_arena_alloc(&e->p->arena, sizeof *a * (size_t)(def->nattrs + 1));
    if (!a) return efail(e, oppos, TG_ENOMEM, "out of memory");
    for (int k = 0; k < nua; k++) {
        int j = 0;
        while (j < def->nattrs && (strlen(def->attrs[j].name) != ua[k].nlen ||
                                   memcmp(def->attrs[j].name, e->s + ua[k].pos, ua[k].nlen) != 0))
            j++;
        if (j == def->nattrs)
            return efail(e, ua[k].pos, TG_EINVAL, "%s: unknown attribute '%.*s'", def->name,
                         (int)ua[k].nlen, e->s + ua[k].pos);
        for (int m = 0; m < k; m++)
            if (ua[m].nlen == ua[k].nlen && !memcmp(e->s + ua[m].pos, e->s + ua[k].pos, ua[k].nlen))
                return efail(e, ua[k].pos, TG_EINVAL, "%s: attribute '%s' given twice", def->name,
                             def->attrs[j].name);
    }
    for (int j = 0; j < def->nattrs; j++) {
        const tg_attr_spec *sp = &def->attrs[j];
        const uattr *u = NULL;
        for (int k = 0; k < nua && !u; k++)
            if (strlen(sp->name) == ua[k].nlen && !memcmp(sp->name, e->s + ua[k].pos, ua[k].nlen))
                u = &ua[k];
        if (!u) {
            if (sp->required)
                return efail(e, oppos, TG_EINVAL, "%s: missing attribute '%s'", def->name,
                             sp->name);
            a[j] = sp->def;
            continue;
        }
        tg_aval v = u->v;
        bool ok = true;
        if (v.kind == TG_ATTR_NONE) {
            ok = (sp->nullable & TG_NULL_WHOLE) != 0;
        } else {
            switch ((tg_attr_type)sp->type) {
            case TG_AS_INT:
                ok = v.kind == TG_ATTR_INT || v.kind == TG_ATTR_BOOL;
                v.kind = TG_ATTR_INT;
                break;
            case TG_AS_FLOAT:
                if (v.kind == TG_ATTR_INT) v = (tg_aval){.kind = TG_ATTR_FLOAT, .f = (double)v.i};
                ok = v.kind == TG_ATTR_FLOAT;
                break;
            case TG_AS_BOOL:
                ok = v.kind == TG_ATTR_BOOL;
                break;
            case TG_AS_STR:
                ok = v.kind == TG_ATTR_STR;
                break;
            case TG_AS_INTS:
            case TG_AS_AXES:
                if (v.kind == TG_ATTR_INT) {
                    int64_t *one = tg_arena_memdup(&e->p->arena, &v.i, sizeof v.i);
                    if (!one) return efail(e, u->pos, TG_ENOMEM, "out of memory");
                    v = (tg_aval){.kind = TG_ATTR_INTS, .ints = one, .n = 1};
                }
                ok = v.kind == TG_ATTR_INTS;
                break;
            case TG_AS_DTYPE: {
                tg_dtype dt;
                ok = v.kind == TG_ATTR_STR;
                if (ok && !tg_dtype_parse(v.s, &dt))
                    return efail(e, u->pos, TG_ETYPE, "%s: unknown dtype \"%s\"", def->name, v.s);
                if (ok) v = (tg_aval){.kind = TG_ATTR_INT, .i = dt};
                break;
            }
            case TG_AS_SCALAR:
                ok = v.kind == TG_ATTR_INT || v.kind == TG_ATTR_FLOAT || v.kind == TG_ATTR_BOOL;
                break;
            case TG_AS_FUNC:
                ok = false;
                break;
            }
        }
        if (!ok)
            return efail(e, u->pos, TG_EINVAL, "%s: attribute '%s' has a value of the wrong kind",
                         def->name, sp->name);
        a[j] = v;
    }
    *out = a;
    return true;
}

/* ---- sharing of identical calls ---- */

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

/* Hash of a call before it becomes an instruction: literal operands count by value. */
static uint64_t call_hash(int op, const operand *args, int nargs, const tg_aval *attrs,
                          int nattrs) {
    uint64_t h = mix(1, (uint64_t)op);
    for (int k = 0; k < nargs; k++) {
        if (args[k].slot >= 0) {
            h = mix(h, (uint64_t)args[k].slot);
        } else {
            h = mix(h, (uint64_t)(unsigned char)args[k].lit);
            h = mix(h, args[k].lit == 'f' ? f64_bits(args[k].f) : (uint64_t)args[k].i);
        }
    }
    for (int j = 0; j < nattrs; j++) h = mix(h, aval_hash(&attrs[j]));
    return h;
}

static uint64_t instr_hash(const tg_fused_prog *p, const tg_fused_instr *ins) {
    operand args[TG_FUSED_MAX_ARGS];
    for (int k = 0; k < ins->nin; k++) {
        int s = ins->in[k];
        const tg_fused_instr *c = s >= p->nin ? &p->instr[s - p->nin] : NULL;
        if (c && c->op == TG_FUSED_CONST)
            args[k] = (operand){.slot = -1, .lit = c->lit, .i = c->i, .f = c->f};
        else
            args[k] = (operand){.slot = s};
    }
    return call_hash(ins->op, args, ins->nin, ins->attrs, tg_op_table[ins->op]->nattrs);
}

static bool instr_matches(const tg_fused_prog *p, const tg_fused_instr *ins, int op,
                          const operand *args, int nargs, const tg_aval *attrs) {
    if (ins->op != op || ins->nin != nargs) return false;
    for (int k = 0; k < nargs; k++) {
        int s = ins->in[k];
        const tg_fused_instr *c = s >= p->nin ? &p->instr[s - p->nin] : NULL;
        bool islit = c && c->op == TG_FUSED_CONST;
        if ((args[k].slot < 0) != islit) return false;
        if (!islit && s != args[k].slot) return false;
        if (islit &&
            (c->lit != args[k].lit || c->i != args[k].i || f64_bits(c->f) != f64_bits(args[k].f)))
            return false;
    }
    for (int j = 0; j < tg_op_table[op]->nattrs; j++)
        if (!aval_same(&ins->attrs[j], &attrs[j])) return false;
    return true;
}

/* Grows the sharing table to hold twice the instructions (rehash). */
static bool tab_grow(eparser *e) {
    size_t ncap = e->tabcap ? e->tabcap * 2 : 64;
    int *nt = tg_mem_alloc(e->p->ctx, sizeof *nt * ncap);
    if (!nt) return false;
    for (size_t k = 0; k < ncap; k++) nt[k] = -1;
    for (size_t k = 0; k < e->tabcap; k++) {
        int j = e->tab[k];
        if (j < 0) continue;
        size_t h = (size_t)instr_hash(e->p, &e->p->instr[j]) & (ncap - 1);
        while (nt[h] >= 0) h = (h + 1) & (ncap - 1);
        nt[h] = j;
    }
    tg_mem_free(e->p->ctx, e->tab, sizeof *e->tab * e->tabcap);
    e->tab = nt;
    e->tabcap = ncap;
    return true;
}

/* The slot of the call op(args; attrs): an existing identical one, or new instructions
 * (its literals first, then the call). -1 on error (set). */
static int emit_call(eparser *e, int op, const operand *args, int nargs, const tg_aval *attrs,
                     size_t pos) {
    tg_fused_prog *p = e->p;
    int nattrs = tg_op_table[op]->nattrs;
    if ((size_t)(p->ninstr + nargs + 1) * 2 > e->tabcap && !tab_grow(e))
        return efail(e, pos, TG_ENOMEM, "out of memory"), -1;
    uint64_t h = call_hash(op, args, nargs, attrs, nattrs);
    size_t k = (size_t)h & (e->tabcap - 1);
    for (; e->tab[k] >= 0; k = (k + 1) & (e->tabcap - 1)) {
        const tg_fused_instr *ins = &p->instr[e->tab[k]];
        if (instr_matches(p, ins, op, args, nargs, attrs)) return p->nin + e->tab[k];
    }
    int in[TG_FUSED_MAX_ARGS];
    for (int a = 0; a < nargs; a++) {
        if (args[a].slot >= 0) {
            in[a] = args[a].slot;
            continue;
        }
        tg_status st = instr_room(p);
        if (st != TG_OK) return efail(e, pos, st, "%s", tg_last_error()), -1;
        p->instr[p->ninstr++] = (tg_fused_instr){.op = TG_FUSED_CONST,
                                                 .attrs = &no_attrs,
                                                 .lit = args[a].lit,
                                                 .i = args[a].i,
                                                 .f = args[a].f,
                                                 .pos = (int)args[a].pos};
        in[a] = p->nslot++;
    }
    tg_status st = instr_room(p);
    if (st != TG_OK) return efail(e, pos, st, "%s", tg_last_error()), -1;
    tg_fused_instr *ins = &p->instr[p->ninstr];
    *ins = (tg_fused_instr){.op = op, .nin = nargs, .attrs = attrs, .pos = (int)pos};
    for (int a = 0; a < nargs; a++) ins->in[a] = in[a];
    e->tab[k] = p->ninstr++;
    return p->nslot++;
}

/* ---- the parser ---- */

typedef struct frame {
    int op;                          /* the call's op */
    size_t pos;                      /* where its name starts */
    bool root;                       /* a reduction at the root of an output */
    int nargs;                       /* operands so far */
    operand args[TG_FUSED_MAX_ARGS]; /* them */
} frame;

/* Reads "NAME '=' attr (',' NAME '=' attr)*" into ua; the current token is the NAME. */
static bool parse_attrs(eparser *e, uattr *ua, int *nua) {
    for (;;) {
        if (e->t.k != T_NAME) return eexpected(e, "an attribute name");
        if (*nua == MAX_UATTRS)
            return efail(e, e->t.pos, TG_ELIMIT, "more than %d attributes", MAX_UATTRS);
        uattr *u = &ua[(*nua)++];
        u->pos = e->t.pos;
        u->nlen = e->t.len;
        eadvance(e);
        if (e->t.k != T_EQUAL) return eexpected(e, "'='");
        eadvance(e);
        if (!parse_attr_value(e, &u->v)) return false;
        if (e->t.k != T_COMMA) return true;
        eadvance(e);
    }
}

/* One output expression: its root operand, or for a root reduction its operand and op. */
static bool parse_output(eparser *e, frame *stack) {
    int depth = 0;
    operand v;
    for (;;) {
        /* want an operand */
        tok t = e->t;
        if (t.k == T_INPUT) {
            if (t.u >= (uint64_t)e->p->nin)
                return efail(e, t.pos, TG_EINDEX,
                             "input %%%.*s does not exist (the node has %d "
                             "input%s)",
                             (int)(t.len - 1), e->s + t.pos + 1, e->p->nin,
                             e->p->nin == 1 ? "" : "s");
            v = (operand){.slot = (int)t.u, .pos = t.pos};
            eadvance(e);
        } else if (starts_literal(e)) {
            if (!parse_literal(e, &v)) return false;
        } else if (t.k == T_NAME) {
            char name[32];
            if (t.len >= sizeof name)
                return efail(e, t.pos, TG_ENAME, "unknown op '%.*s...'", 24, e->s + t.pos);
            memcpy(name, e->s + t.pos, t.len);
            name[t.len] = '\0';
            if (epeek(e).k != T_LPAREN) {
                if (tok_is(e, &t, "none"))
                    return efail(e, t.pos, TG_ESYNTAX, "'none' is not a value");
                return efail(e, t.pos, TG_ENAME,
                             "'%s' is not an operand (inputs are %%0..%%%d; "
                             "calls need '(')",
                             name, e->p->nin - 1);
            }
            int op = tg_op_lookup(name);
            if (op < 0) return efail(e, t.pos, TG_ENAME, "unknown op '%s'", name);
            bool root = false;
            if (tg_fused_can_reduce(op)) {
                if (depth > 0)
                    return efail(e, t.pos, TG_EUNSUPPORTED,
                                 "the reduction '%s' can only be the "
                                 "outermost call of an output",
                                 name);
                root = true;
            } else if (!tg_fused_can_inline(op)) {
                return efail(e, t.pos, TG_EUNSUPPORTED,
                             "'%s' cannot be part of a fused "
                             "expression (only elementwise ops, and sum, prod, mean, max or min "
                             "at the root of an output)",
                             name);
            }
            if (depth == TG_FUSED_MAX_DEPTH)
                return efail(e, t.pos, TG_ELIMIT, "expression nested deeper than %d",
                             TG_FUSED_MAX_DEPTH);
            stack[depth++] = (frame){.op = op, .pos = t.pos, .root = root};
            eadvance(e); /* name */
            eadvance(e); /* ( */
            if (e->t.k != T_RPAREN && !(e->t.k == T_NAME && epeek(e).k == T_EQUAL)) continue;
            v = (operand){.slot = -2, .pos = e->t.pos}; /* no operand: straight to ')' */
        } else {
            return eexpected(e, depth ? "an operand" : "an expression");
        }
        /* have operand v (or, with slot -2, a call that closes before any operand) */
        for (;;) {
            if (depth == 0) {
                if (v.slot == -1)
                    return efail(e, v.pos, TG_EINVAL, "an output cannot be a literal alone");
                if (v.slot < e->p->nin)
                    return efail(e, v.pos, TG_EINVAL, "an output cannot be an input alone (%%%d)",
                                 v.slot);
                return tg_fused_add_out(e->p, v.slot, -1, NULL) ||
                       efail(e, v.pos, TG_ENOMEM, "%s", tg_last_error());
            }
            frame *f = &stack[depth - 1];
            const tg_op_def *def = tg_op_table[f->op];
            uattr ua[MAX_UATTRS];
            int nua = 0;
            if (v.slot != -2) {
                if (f->nargs == def->max_in || f->nargs == TG_FUSED_MAX_ARGS)
                    return efail(e, v.pos, TG_EINVAL, "%s: takes %d operand%s", def->name,
                                 def->max_in, def->max_in == 1 ? "" : "s");
                f->args[f->nargs++] = v;
                if (e->t.k == T_COMMA) {
                    eadvance(e);
                    if (!(e->t.k == T_NAME && epeek(e).k == T_EQUAL)) break; /* next operand */
                    if (!parse_attrs(e, ua, &nua)) return false;
                }
            } else if (e->t.k == T_NAME) {
                if (!parse_attrs(e, ua, &nua)) return false;
            }
            if (e->t.k != T_RPAREN) return eexpected(e, "',' or ')'");
            size_t close = e->t.pos;
            eadvance(e);
            if (f->nargs < def->min_in)
                return efail(e, close, TG_EINVAL, "%s: takes %d operand%s, got %d", def->name,
                             def->min_in, def->min_in == 1 ? "" : "s", f->nargs);
            tg_aval *attrs = NULL;
            if (!attrs_normalize(e, def, ua, nua, f->pos, &attrs)) return false;
            depth--;
            if (f->root) {
                const operand *x = &f->args[0];
                if (x->slot < 0)
                    return efail(e, x->pos, TG_EINVAL, "%s: cannot reduce a literal", def->name);
                if (!tg_fused_add_out(e->p, x->slot, f->op, attrs))
                    return efail(e, f->pos, TG_ENOMEM, "%s", tg_last_error());
                return true;
            }
            int slot = emit_call(e, f->op, f->args, f->nargs, attrs, f->pos);
            if (slot < 0) return false;
            v = (operand){.slot = slot, .pos = f->pos};
        }
    }
}

tg_status tg_fused_parse(tg_ctx *ctx, const char *expr, size_t len, int nin, tg_fused_prog **out,
                         char *msg, size_t n) {
    char dummy[8];
    if (!msg || n == 0) {
        msg = dummy;
        n = sizeof dummy;
    }
    msg[0] = '\0';
    *out = NULL;
    if (!expr) {
        snprintf(msg, n, "the expression is missing");
        return TG_EINVAL;
    }
    tg_fused_prog *p = tg_fused_new(ctx, nin);
    if (!p) {
        snprintf(msg, n, "%s", tg_last_error());
        return TG_ENOMEM;
    }
    eparser e = {.p = p, .s = expr, .len = len, .msg = msg, .msgn = n};
    frame *stack = tg_mem_alloc(p->ctx, sizeof *stack * TG_FUSED_MAX_DEPTH);
    if (!stack) efail(&e, 0, TG_ENOMEM, "out of memory");
    for (size_t k = 0; k < len && e.st == TG_OK; k++)
        if (expr[k] == '\n' || expr[k] == '{' || expr[k] == '}' || expr[k] == '\0')
            efail(&e, k, TG_ESYNTAX, "%s is not allowed in an expression",
                  expr[k] == '\n'   ? "a newline"
                  : expr[k] == '\0' ? "a NUL byte"
                  : expr[k] == '{'  ? "'{'"
                                    : "'}'");
    if (e.st == TG_OK) eadvance(&e);
    while (e.st == TG_OK) {
        if (e.t.k == T_END || e.t.k == T_SEMI) {
            efail(&e, e.t.pos, TG_ESYNTAX, "expected an expression but found %s",
                  e.t.k == T_END ? "the end" : "';'");
            break;
        }
        if (p->nout == TG_MAX_OUTS) {
            efail(&e, e.t.pos, TG_ELIMIT, "more than %d outputs", TG_MAX_OUTS);
            break;
        }
        if (!parse_output(&e, stack)) break;
        if (e.t.k == T_END) break;
        if (e.t.k != T_SEMI) {
            eexpected(&e, "';' or the end of the expression");
            break;
        }
        eadvance(&e);
    }
    if (stack) tg_mem_free(p->ctx, stack, sizeof *stack * TG_FUSED_MAX_DEPTH);
    if (e.tab) tg_mem_free(p->ctx, e.tab, sizeof *e.tab * e.tabcap);
    if (e.cloc != (locale_t)0) freelocale(e.cloc);
    if (e.st != TG_OK) {
        tg_fused_free(p);
        return e.st;
    }
    *out = p;
    return TG_OK;
}

tg_status tg_fused_node_prog(tg_ctx *ctx, const tg_node *node, tg_fused_prog **out, char *msg,
                             size_t n) {
    const tg_aval *a = &node->attrs[TG_FUSED_A_EXPR];
    if (node->op != TG_OP_FUSED || a->kind != TG_ATTR_STR || !a->s) {
        *out = NULL;
        if (msg && n) snprintf(msg, n, "not a fused node with an expression");
        return TG_EINVAL;
    }
    return tg_fused_parse(ctx, a->s, strlen(a->s), node->nin, out, msg, n);
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

/* ---- formatting ---- */

typedef struct sbuf {
    tg_ctx *ctx;
    char *s;
    size_t n, cap, max;
    bool bad; /* out of memory or over max */
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->bad) return;
    if (b->max && b->n + n > b->max) {
        b->bad = true;
        return;
    }
    if (b->n + n + 1 > b->cap) {
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
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
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

/* Writes the expression of slot s, expanding shared values where used (iterative). */
static void put_slot(sbuf *b, const tg_fused_prog *p, int s, int *stack, int *next) {
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
        if (ins->op == TG_FUSED_CONST) {
            put_literal(b, ins);
            sp--;
            continue;
        }
        int k = next[sp - 1]++;
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

char *tg_fused_format(const tg_fused_prog *p, size_t max_len, size_t *len) {
    sbuf b = {.ctx = p->ctx, .max = max_len};
    size_t ns = (size_t)p->nslot + 2;
    int *stack = tg_mem_alloc(p->ctx, sizeof *stack * ns);
    int *next = tg_mem_alloc(p->ctx, sizeof *next * ns);
    if (!stack || !next) b.bad = true;
    for (int o = 0; o < p->nout && !b.bad; o++) {
        const tg_fused_out *x = &p->out[o];
        if (o) sb_str(&b, "; ");
        if (x->reduce >= 0) {
            sb_str(&b, tg_op_table[x->reduce]->name);
            sb_str(&b, "(");
        }
        put_slot(&b, p, x->slot, stack, next);
        if (x->reduce >= 0) {
            put_attrs(&b, tg_op_table[x->reduce], x->attrs);
            sb_str(&b, ")");
        }
    }
    if (stack) tg_mem_free(p->ctx, stack, sizeof *stack * ns);
    if (next) tg_mem_free(p->ctx, next, sizeof *next * ns);
    if (!b.bad && !b.s) sb_put(&b, "", 0);
    if (b.bad) {
        tg_mem_free(p->ctx, b.s, b.cap);
        if (!max_len || b.n <= max_len)
            tg_set_error(TG_ENOMEM, "fused: out of memory");
        else
            tg_set_error(TG_ELIMIT, "fused: expression longer than %zu bytes", max_len);
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

/* ---- the record ---- */

static const tg_attr_spec fused_attrs[] = {
    {"expr", TG_AS_STR, 1, 0, {.kind = TG_ATTR_NONE}},
};

static tg_status fused_infer(tg_infer *ic) {
    const tg_aval *a = &ic->attrs[TG_FUSED_A_EXPR];
    if (a->kind != TG_ATTR_STR || !a->s)
        return tg_infer_fail(ic, TG_EINVAL, "the attribute 'expr' must be a string");
    tg_fused_prog *p;
    char msg[sizeof ic->msg];
    tg_status st =
        tg_fused_parse(tg_ctx_default(), a->s, strlen(a->s), ic->nin, &p, msg, sizeof msg);
    if (st == TG_OK) st = tg_fused_type(p, ic->in, ic->runtime, msg, sizeof msg);
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

/* The oracle: every instruction with its op's reference kernel on whole temporaries. */
static tg_status fused_ref(tg_kern *k) {
    char msg[sizeof k->msg];
    tg_fused_prog *p;
    tg_status st = tg_fused_node_prog(k->ctx, k->node, &p, msg, sizeof msg);
    if (st != TG_OK) return tg_kern_fail(k, st, "%s", msg);
    tg_type *tin = tg_mem_alloc(k->ctx, sizeof *tin * (size_t)(p->nin + 1));
    tg_tensor **val = tg_mem_calloc(k->ctx, sizeof *val * (size_t)(p->nslot + 1));
    int *last = tg_mem_alloc(k->ctx, sizeof *last * (size_t)(p->nslot + 1));
    if (!tin || !val || !last) {
        st = tg_kern_fail(k, TG_ENOMEM, "out of memory");
        goto done;
    }
    for (int s = 0; s < p->nin; s++) runtime_type(&k->node->in[s]->type, k->in[s], &tin[s]);
    st = tg_fused_type(p, tin, true, msg, sizeof msg);
    if (st != TG_OK) {
        st = tg_kern_fail(k, st, "%s", msg);
        goto done;
    }
    /* last use of each temporary: an instruction index, or ninstr for outputs */
    for (int s = 0; s < p->nslot; s++) last[s] = -1;
    for (int j = 0; j < p->ninstr; j++)
        for (int a = 0; a < p->instr[j].nin; a++) last[p->instr[j].in[a]] = j;
    for (int o = 0; o < p->nout; o++) last[p->out[o].slot] = p->ninstr;
    for (int s = 0; s < p->nin; s++) val[s] = k->in[s];
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
            tg_tensor_copy_into(k->out[o], val[x->slot]);
            continue;
        }
        tg_tensor *arg = val[x->slot];
        st = run_ref(k, x->reduce, x->attrs, &arg, 1, &k->out_type[o], &k->out[o], -1);
    }
done:
    if (val)
        for (int s = p->nin; s < p->nslot; s++) tg_tensor_free(val[s]);
    if (tin) tg_mem_free(k->ctx, tin, sizeof *tin * (size_t)(p->nin + 1));
    if (val) tg_mem_free(k->ctx, val, sizeof *val * (size_t)(p->nslot + 1));
    if (last) tg_mem_free(k->ctx, last, sizeof *last * (size_t)(p->nslot + 1));
    tg_fused_free(p);
    return st;
}

/* clang-format off */
const tg_op_def tg_op_fused = {
    .name = "fused", .min_in = 1, .max_in = -1, .nout = -1, .kind = TG_KIND_OTHER,
    .attrs = fused_attrs, .nattrs = (int)TG_COUNTOF(fused_attrs),
    .promote = NULL, .infer = fused_infer, .ref = fused_ref,
    .grad = TG_GRAD_UNDEFINED,
};
/* clang-format on */
