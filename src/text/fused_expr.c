/* fused_expr.c - the expression of `fused{...}` read into a program (src/ops/fused.h): the
 * .tg front end's lexer (in its expression mode) and a parser that builds the program
 * through the builders of fused.h. Writing a program back is tg_fused_format's.
 *
 * Grammar (one line, no braces):
 *     prog    := expr (";" expr)*
 *     expr    := "%" INT | literal | NAME "(" [arg ("," arg)*] ")"
 *     arg     := expr | NAME "=" attr          (keywords after the operands)
 *     literal := ["-"] (INT | FLOAT | inf | nan) | true | false
 *     attr    := literal | none | STRING | "[" [INT ("," INT)*] "]"
 * A reduction (sum prod mean max min) may only be the outermost call of an expr.
 *
 * Invariants:
 *  - The parser is a loop over tokens with an explicit stack of open calls (never
 *    recursion, at most TG_FUSED_MAX_DEPTH deep); each token is read once and the builder
 *    finds identical calls through a hash table, so parsing is linear in the text.
 *  - Every error names its column in the expression ("expression column 12"), 1 + the byte
 *    offset of what it is about; an instruction keeps that offset for the messages of
 *    typing and of the kernels.
 *  - Attribute values live in a scratch arena until the builder copies them.
 */
#include "../ops/fused.h"
#include "text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#define MAX_UATTRS 4 /* keyword attributes of one call */

typedef struct eparser {
    tg_fused_prog *p; /* the program being built */
    tg_lexer lx;      /* over the expression */
    tg_tok t;         /* current token */
    tg_tok ahead;     /* the next one when have_ahead */
    bool have_ahead;
    tg_status st; /* first error */
    char *msg;    /* where its message goes */
    size_t msgn;
    tg_arena scratch; /* attribute values, until they are copied into p */
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

static size_t pos_of(const tg_tok *t) { return (size_t)(t->col - 1); }

/* Moves to the next token; a lexical error is reported as soon as it is the current one. */
static void eadvance(eparser *e) {
    if (e->have_ahead) {
        e->t = e->ahead;
        e->have_ahead = false;
    } else {
        tg_lex_next(&e->lx, &e->t);
    }
    if (e->t.kind == TG_TK_ERROR) efail(e, pos_of(&e->t), TG_ESYNTAX, "%s", e->lx.msg);
}

/* The token after the current one, without moving. */
static const tg_tok *epeek(eparser *e) {
    if (!e->have_ahead) {
        tg_lex_next(&e->lx, &e->ahead);
        e->have_ahead = true;
    }
    return &e->ahead;
}

/* Reports "expected WHAT but found ..." at the current token. */
static bool eexpected(eparser *e, const char *what) {
    const tg_tok *t = &e->t;
    if (t->kind == TG_TK_ERROR) return false; /* the lexer's message stands */
    if (t->kind == TG_TK_EOF)
        return efail(e, pos_of(t), TG_ESYNTAX, "expected %s but found the end", what);
    return efail(e, pos_of(t), TG_ESYNTAX, "expected %s but found '%.*s'", what,
                 (int)(t->len > 24 ? 24 : t->len), t->p);
}

/* ---- literals and attribute values ---- */

static bool starts_literal(const eparser *e) {
    const tg_tok *t = &e->t;
    return t->kind == TG_TK_INT || t->kind == TG_TK_FLOAT || t->kind == TG_TK_MINUS ||
           tg_tok_is(t, "inf") || tg_tok_is(t, "nan") || tg_tok_is(t, "true") ||
           tg_tok_is(t, "false");
}

/* literal := ["-"] (INT | FLOAT | inf | nan) | true | false */
static bool parse_literal(eparser *e, tg_fused_arg *o) {
    size_t pos = pos_of(&e->t);
    *o = (tg_fused_arg){.slot = -1, .pos = (int)pos};
    if (tg_tok_is(&e->t, "true") || tg_tok_is(&e->t, "false")) {
        o->lit = 'b';
        o->i = tg_tok_is(&e->t, "true");
        eadvance(e);
        return true;
    }
    bool neg = e->t.kind == TG_TK_MINUS;
    if (neg) eadvance(e);
    const tg_tok *t = &e->t;
    if (t->kind == TG_TK_INT) {
        uint64_t lim = neg ? (uint64_t)1 << 63 : (uint64_t)INT64_MAX;
        if (t->u > lim)
            return efail(e, pos, TG_ESYNTAX, "integer literal %s%.*s is out of range of i64",
                         neg ? "-" : "", (int)(t->len > 30 ? 30 : t->len), t->p);
        o->lit = 'i';
        o->i = !neg ? (int64_t)t->u : t->u == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)t->u;
    } else if (t->kind == TG_TK_FLOAT) {
        o->lit = 'f';
        o->f = neg ? -t->f : t->f;
    } else if (tg_tok_is(t, "inf")) {
        o->lit = 'f';
        o->f = neg ? -HUGE_VAL : HUGE_VAL;
    } else if (tg_tok_is(t, "nan")) {
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
    tg_tok name; /* its name */
    tg_aval v;   /* kind NONE for `none` */
} uattr;

static bool same_name(const tg_tok *t, const char *name) {
    return strlen(name) == t->len && memcmp(name, t->p, t->len) == 0;
}

/* attr := literal | none | STRING | "[" [INT ("," INT)*] "]" */
static bool parse_attr_value(eparser *e, tg_aval *v) {
    tg_tok t = e->t;
    if (tg_tok_is(&t, "none")) {
        *v = (tg_aval){.kind = TG_ATTR_NONE};
        eadvance(e);
        return true;
    }
    if (t.kind == TG_TK_STRING) {
        char *s = tg_arena_alloc(&e->scratch, t.len);
        if (!s) return efail(e, pos_of(&t), TG_ENOMEM, "out of memory");
        tg_tok_string(&t, s);
        *v = (tg_aval){.kind = TG_ATTR_STR, .s = s};
        eadvance(e);
        return true;
    }
    if (t.kind == TG_TK_LBRACKET) {
        eadvance(e);
        int cap = 0, n = 0;
        int64_t *xs = NULL;
        while (e->t.kind != TG_TK_RBRACKET) {
            tg_fused_arg o;
            if (!parse_literal(e, &o)) return false;
            if (o.lit != 'i')
                return efail(e, (size_t)o.pos, TG_ESYNTAX, "expected an integer in a list");
            if (n == cap) {
                if (cap >= TG_MAX_DIMS * 8)
                    return efail(e, (size_t)o.pos, TG_ELIMIT, "list longer than %d items", cap);
                int ncap = cap ? cap * 2 : 8;
                int64_t *nx = tg_arena_alloc(&e->scratch, sizeof *nx * (size_t)ncap);
                if (!nx) return efail(e, (size_t)o.pos, TG_ENOMEM, "out of memory");
                if (n) memcpy(nx, xs, sizeof *xs * (size_t)n);
                xs = nx;
                cap = ncap;
            }
            xs[n++] = o.i;
            if (e->t.kind != TG_TK_COMMA) break;
            eadvance(e);
        }
        if (e->t.kind != TG_TK_RBRACKET) return eexpected(e, "',' or ']'");
        eadvance(e);
        *v = (tg_aval){.kind = TG_ATTR_INTS, .ints = xs, .n = n};
        return true;
    }
    if (starts_literal(e)) {
        tg_fused_arg o;
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

/* Normalizes user attributes to op's schema into *out (def->nattrs entries, scratch). */
static bool attrs_normalize(eparser *e, const tg_op_def *def, const uattr *ua, int nua,
                            size_t oppos, tg_aval **out) {
    tg_aval *a = tg_arena_alloc(&e->scratch, sizeof *a * (size_t)(def->nattrs + 1));
    if (!a) return efail(e, oppos, TG_ENOMEM, "out of memory");
    for (int k = 0; k < nua; k++) {
        const tg_tok *nm = &ua[k].name;
        int j = 0;
        while (j < def->nattrs && !same_name(nm, def->attrs[j].name)) j++;
        if (j == def->nattrs)
            return efail(e, pos_of(nm), TG_EINVAL, "%s: unknown attribute '%.*s'", def->name,
                         (int)nm->len, nm->p);
        for (int m = 0; m < k; m++)
            if (ua[m].name.len == nm->len && !memcmp(ua[m].name.p, nm->p, nm->len))
                return efail(e, pos_of(nm), TG_EINVAL, "%s: attribute '%s' given twice", def->name,
                             def->attrs[j].name);
    }
    for (int j = 0; j < def->nattrs; j++) {
        const tg_attr_spec *sp = &def->attrs[j];
        const uattr *u = NULL;
        for (int k = 0; k < nua && !u; k++)
            if (same_name(&ua[k].name, sp->name)) u = &ua[k];
        if (!u) {
            if (sp->required)
                return efail(e, oppos, TG_EINVAL, "%s: missing attribute '%s'", def->name,
                             sp->name);
            a[j] = sp->def;
            continue;
        }
        size_t upos = pos_of(&u->name);
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
                    int64_t *one = tg_arena_memdup(&e->scratch, &v.i, sizeof v.i);
                    if (!one) return efail(e, upos, TG_ENOMEM, "out of memory");
                    v = (tg_aval){.kind = TG_ATTR_INTS, .ints = one, .n = 1};
                }
                ok = v.kind == TG_ATTR_INTS;
                break;
            case TG_AS_DTYPE: {
                tg_dtype dt;
                ok = v.kind == TG_ATTR_STR;
                if (ok && !tg_dtype_parse(v.s, &dt))
                    return efail(e, upos, TG_ETYPE, "%s: unknown dtype \"%s\"", def->name, v.s);
                if (ok) v = (tg_aval){.kind = TG_ATTR_INT, .i = dt};
                break;
            }
            case TG_AS_SCALAR:
                ok = v.kind == TG_ATTR_INT || v.kind == TG_ATTR_FLOAT || v.kind == TG_ATTR_BOOL;
                break;
            case TG_AS_FUNC:
            case TG_AS_PAIRS:
            case TG_AS_FLOATS:
            case TG_AS_DATA:
                ok = false;
                break;
            }
        }
        if (!ok)
            return efail(e, upos, TG_EINVAL, "%s: attribute '%s' has a value of the wrong kind",
                         def->name, sp->name);
        a[j] = v;
    }
    *out = a;
    return true;
}

/* ---- the parser ---- */

typedef struct frame {
    int op;                               /* the call's op */
    size_t pos;                           /* where its name starts */
    bool root;                            /* a reduction at the root of an output */
    int nargs;                            /* operands so far */
    tg_fused_arg args[TG_FUSED_MAX_ARGS]; /* them */
} frame;

/* Reads "NAME '=' attr (',' NAME '=' attr)*" into ua; the current token is the NAME. */
static bool parse_attrs(eparser *e, uattr *ua, int *nua) {
    for (;;) {
        if (e->t.kind != TG_TK_NAME) return eexpected(e, "an attribute name");
        if (*nua == MAX_UATTRS)
            return efail(e, pos_of(&e->t), TG_ELIMIT, "more than %d attributes", MAX_UATTRS);
        uattr *u = &ua[(*nua)++];
        u->name = e->t;
        eadvance(e);
        if (e->t.kind != TG_TK_EQUAL) return eexpected(e, "'='");
        eadvance(e);
        if (!parse_attr_value(e, &u->v)) return false;
        if (e->t.kind != TG_TK_COMMA) return true;
        eadvance(e);
    }
}

/* Whether the current token is NAME and the next one '=' (a keyword attribute). */
static bool at_keyword(eparser *e) {
    return e->t.kind == TG_TK_NAME && epeek(e)->kind == TG_TK_EQUAL;
}

/* One output expression: its root operand, or for a root reduction its operand and op. */
static bool parse_output(eparser *e, frame *stack) {
    tg_fused_prog *p = e->p;
    int depth = 0;
    tg_fused_arg v;
    for (;;) {
        /* want an operand */
        tg_tok t = e->t;
        if (t.kind == TG_TK_INPUT) {
            if (t.u >= (uint64_t)p->nin)
                return efail(e, pos_of(&t), TG_EINDEX,
                             "input %%%.*s does not exist (the node has %d input%s)",
                             (int)(t.len - 1), t.p + 1, p->nin, p->nin == 1 ? "" : "s");
            v = (tg_fused_arg){.slot = (int)t.u, .pos = (int)pos_of(&t)};
            eadvance(e);
        } else if (starts_literal(e)) {
            if (!parse_literal(e, &v)) return false;
        } else if (t.kind == TG_TK_NAME) {
            char name[32];
            if (t.len >= sizeof name)
                return efail(e, pos_of(&t), TG_ENAME, "unknown op '%.*s...'", 24, t.p);
            memcpy(name, t.p, t.len);
            name[t.len] = '\0';
            if (epeek(e)->kind != TG_TK_LPAREN) {
                if (tg_tok_is(&t, "none"))
                    return efail(e, pos_of(&t), TG_ESYNTAX, "'none' is not a value");
                return efail(e, pos_of(&t), TG_ENAME,
                             "'%s' is not an operand (inputs are %%0..%%%d; calls need '(')", name,
                             p->nin - 1);
            }
            int op = tg_op_lookup(name);
            if (op < 0) return efail(e, pos_of(&t), TG_ENAME, "unknown op '%s'", name);
            bool root = false;
            if (tg_fused_can_reduce(op)) {
                if (depth > 0)
                    return efail(e, pos_of(&t), TG_EUNSUPPORTED,
                                 "the reduction '%s' can only be the outermost call of an output",
                                 name);
                root = true;
            } else if (!tg_fused_can_inline(op)) {
                return efail(e, pos_of(&t), TG_EUNSUPPORTED,
                             "'%s' cannot be part of a fused expression (only elementwise ops, "
                             "and sum, prod, mean, max or min at the root of an output)",
                             name);
            }
            if (depth == TG_FUSED_MAX_DEPTH)
                return efail(e, pos_of(&t), TG_ELIMIT, "expression nested deeper than %d",
                             TG_FUSED_MAX_DEPTH);
            stack[depth++] = (frame){.op = op, .pos = pos_of(&t), .root = root};
            eadvance(e); /* name */
            eadvance(e); /* ( */
            if (e->t.kind != TG_TK_RPAREN && !at_keyword(e)) continue;
            v = (tg_fused_arg){.slot = -2, .pos = (int)pos_of(&e->t)}; /* straight to ')' */
        } else {
            return eexpected(e, depth ? "an operand" : "an expression");
        }
        /* have operand v (or, with slot -2, a call that closes before any operand) */
        for (;;) {
            if (depth == 0) {
                if (v.slot == -1)
                    return efail(e, (size_t)v.pos, TG_EINVAL,
                                 "an output cannot be a literal alone");
                if (v.slot < p->nin)
                    return efail(e, (size_t)v.pos, TG_EINVAL,
                                 "an output cannot be an input alone (%%%d)", v.slot);
                tg_status st = tg_fused_add_out(p, v.slot, -1, NULL);
                return st == TG_OK || efail(e, (size_t)v.pos, st, "%s", tg_last_error());
            }
            frame *f = &stack[depth - 1];
            const tg_op_def *def = tg_op_table[f->op];
            uattr ua[MAX_UATTRS];
            int nua = 0;
            if (v.slot != -2) {
                if (f->nargs == def->max_in || f->nargs == TG_FUSED_MAX_ARGS)
                    return efail(e, (size_t)v.pos, TG_EINVAL, "%s: takes %d operand%s", def->name,
                                 def->max_in, def->max_in == 1 ? "" : "s");
                f->args[f->nargs++] = v;
                if (e->t.kind == TG_TK_COMMA) {
                    eadvance(e);
                    if (!at_keyword(e)) break; /* next operand */
                    if (!parse_attrs(e, ua, &nua)) return false;
                }
            } else if (e->t.kind == TG_TK_NAME) {
                if (!parse_attrs(e, ua, &nua)) return false;
            }
            if (e->t.kind != TG_TK_RPAREN) return eexpected(e, "',' or ')'");
            size_t close = pos_of(&e->t);
            eadvance(e);
            if (f->nargs < def->min_in)
                return efail(e, close, TG_EINVAL, "%s: takes %d operand%s, got %d", def->name,
                             def->min_in, def->min_in == 1 ? "" : "s", f->nargs);
            tg_aval *attrs = NULL;
            if (!attrs_normalize(e, def, ua, nua, f->pos, &attrs)) return false;
            depth--;
            if (f->root) {
                const tg_fused_arg *x = &f->args[0];
                if (x->slot < 0)
                    return efail(e, (size_t)x->pos, TG_EINVAL, "%s: cannot reduce a literal",
                                 def->name);
                tg_status st = tg_fused_add_out(p, x->slot, f->op, attrs);
                return st == TG_OK || efail(e, f->pos, st, "%s", tg_last_error());
            }
            int slot;
            tg_status st =
                tg_fused_add_call(p, f->op, f->args, f->nargs, attrs, (int)f->pos, &slot);
            if (st != TG_OK) return efail(e, f->pos, st, "%s", tg_last_error());
            v = (tg_fused_arg){.slot = slot, .pos = (int)f->pos};
        }
    }
}

tg_status tg_txt_fused_parse(tg_ctx *ctx, const char *expr, size_t len, int nin,
                             tg_fused_prog **out, char *msg, size_t n) {
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
        return nin < 0 || nin > TG_FUSED_MAX_INSTRS ? TG_ELIMIT : TG_ENOMEM;
    }
    eparser e = {.p = p, .msg = msg, .msgn = n};
    tg_arena_init(&e.scratch, p->ctx);
    frame *stack = tg_mem_alloc(p->ctx, sizeof *stack * TG_FUSED_MAX_DEPTH);
    if (!stack) efail(&e, 0, TG_ENOMEM, "out of memory");
    for (size_t k = 0; k < len && e.st == TG_OK; k++)
        if (expr[k] == '\n' || expr[k] == '{' || expr[k] == '}' || expr[k] == '\0')
            efail(&e, k, TG_ESYNTAX, "%s is not allowed in an expression",
                  expr[k] == '\n'   ? "a newline"
                  : expr[k] == '\0' ? "a NUL byte"
                  : expr[k] == '{'  ? "'{'"
                                    : "'}'");
    tg_lex_init_expr(&e.lx, expr, len);
    if (e.st == TG_OK) eadvance(&e);
    while (e.st == TG_OK) {
        if (e.t.kind == TG_TK_EOF || e.t.kind == TG_TK_SEMI) {
            efail(&e, pos_of(&e.t), TG_ESYNTAX, "expected an expression but found %s",
                  e.t.kind == TG_TK_EOF ? "the end" : "';'");
            break;
        }
        if (p->nout == TG_MAX_OUTS) {
            efail(&e, pos_of(&e.t), TG_ELIMIT, "more than %d outputs", TG_MAX_OUTS);
            break;
        }
        if (!parse_output(&e, stack)) break;
        if (e.t.kind == TG_TK_EOF) break;
        if (e.t.kind != TG_TK_SEMI) {
            eexpected(&e, "';' or the end of the expression");
            break;
        }
        eadvance(&e);
    }
    tg_lex_fini(&e.lx);
    if (stack) tg_mem_free(p->ctx, stack, sizeof *stack * TG_FUSED_MAX_DEPTH);
    tg_arena_fini(&e.scratch);
    if (e.st != TG_OK) {
        tg_fused_free(p);
        return e.st;
    }
    *out = p;
    return TG_OK;
}
