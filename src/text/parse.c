/* parse.c - the .tg parser: recursive descent over the lexer's tokens, building each
 * function through the public builders (tg_input, tg_literal_*, tg_constant,
 * tg_apply_multi, tg_graph_set_outputs). The grammar is in docs/text-format.md.
 *
 * Invariants:
 *  - Only nesting recurses (calls, indexing, lists), and every such level goes through
 *    enter(), which refuses to go deeper than TG_PARSE_MAX_DEPTH: the C stack use is
 *    bounded whatever the input. Files, functions and statements are loops.
 *  - The first error wins. It is kept in the parser as "file:line:col: message" and set
 *    as tg_last_error() once, at the end, after everything was freed.
 *  - Before each builder call g->line/g->col hold the position of the construct, so a
 *    builder's own message (the graph's first error) carries it; that message becomes the
 *    parse error unchanged. g->device holds the call's `device=` (NULL without one) while
 *    it builds, so every node the call makes carries it (docs/devices.md, "Annotations").
 *  - Names are SSA per function: the binding map keeps where each name was bound.
 *  - Temporaries of one statement (attribute arrays, strings, input lists) live in a
 *    scratch arena that is released every few statements, so memory stays bounded.
 */
#include "../ops/fused.h"
#include "text.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

/* A value made by indexing (x[...]): what set_subtensor/inc_subtensor of it update. */
typedef struct index_rec {
    tg_var *v;                   /* the indexed value */
    tg_var *x;                   /* what was indexed */
    int n;                       /* items */
    tg_index items[TG_MAX_DIMS]; /* as tg_index_apply took them */
    struct index_rec *next;      /* the one made before */
} index_rec;

typedef struct parser {
    tg_ctx *ctx;               /* allocator */
    tg_lexer lx;               /* the token stream */
    tg_tok tok;                /* current token */
    tg_tok ahead;              /* one token of lookahead when have_ahead */
    bool have_ahead;           /* ahead is valid */
    const char *file;          /* name used in messages (never NULL) */
    tg_status st;              /* first error */
    char msg[TG_ERRMSG_MAX];   /* its message, "file:line:col: ..." */
    int depth;                 /* current nesting of calls, indexing and lists */
    tg_module *m;              /* receives the functions */
    tg_graph *g;               /* function being parsed */
    tg_txt_map all_funcs;      /* every `func NAME` of the text (found by a first scan);
                                  val: 1 + its index in text order */
    tg_txt_map funcs;          /* functions defined so far; val: the graph */
    tg_txt_map names;          /* bindings of the current function: var and position */
    tg_txt_map updated;        /* states of the current function updated so far */
    tg_arena scratch;          /* temporaries of the current statement(s) */
    tg_var *outs[TG_MAX_OUTS]; /* outputs of the latest call (read before the next one) */
    index_rec *indexed;        /* values of the current function made by indexing, newest first */
    /* The pmap typing of the function about to be parsed (parse_funcs, from the pmap that
       maps it): declared on its graph once its parameters are known. NULL axis: none */
    const char *map_axis;
    bool *map_in; /* per parameter: mapped */
    int map_n;
} parser;

/* Keeps the frames of non-recursive helpers out of the recursive ones (parse_expr,
 * parse_call), so that 256 levels of nesting need little C stack. */
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

/* A scalar literal as written: 'i' int, 'f' float, 'b' bool, 'n' none. */
typedef struct lit {
    char kind;
    int64_t i;     /* 'i', 'b' */
    double f;      /* 'f' */
    int line, col; /* where it starts (at the '-' of a negative number) */
} lit;

/* ---- errors ---- */

static bool failed(const parser *p) { return p->st != TG_OK; }

static bool fail_at(parser *p, int line, int col, tg_status st, const char *fmt, ...)
    TG_PRINTF(5, 6);
static bool fail_at(parser *p, int line, int col, tg_status st, const char *fmt, ...) {
    if (failed(p)) return false;
    int off = snprintf(p->msg, sizeof p->msg, "%s:%d:%d: ", p->file, line, col);
    if (off > 0 && (size_t)off < sizeof p->msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->msg + off, sizeof p->msg - (size_t)off, fmt, ap);
        va_end(ap);
    }
    p->st = st;
    return false;
}

#define FAIL_TOK(p, t, st, ...) fail_at((p), (t)->line, (t)->col, (st), __VA_ARGS__)

/* Reports "expected WHAT but found TOKEN" at the current token (or the lexer's error). */
static bool expected(parser *p, const char *what) {
    const tg_tok *t = &p->tok;
    if (t->kind == TG_TK_ERROR) return FAIL_TOK(p, t, TG_ESYNTAX, "%s", p->lx.msg);
    char found[64];
    tg_tok_describe(t, found, sizeof found);
    return FAIL_TOK(p, t, TG_ESYNTAX, "expected %s but found %s", what, found);
}

/* Turns the failure of a builder into the parse error. The graph keeps the first error
 * with the position we stamped on it; otherwise the thread's last message is used. */
static bool builder_failed(parser *p, int line, int col) {
    if (failed(p)) return false;
    const char *m = tg_last_error();
    tg_status st = TG_EINTERNAL;
    if (p->g && p->g->status != TG_OK) {
        m = p->g->error;
        st = p->g->status;
    } else if (strstr(m, "out of memory")) {
        st = TG_ENOMEM;
    }
    if (!m || !*m) m = "internal error: a builder failed without a message";
    size_t fl = strlen(p->file);
    if (strncmp(m, p->file, fl) == 0 && m[fl] == ':') {
        snprintf(p->msg, sizeof p->msg, "%s", m);
        p->st = st;
        return false;
    }
    return fail_at(p, line, col, st, "%s", m);
}

static bool oom(parser *p, int line, int col) {
    return fail_at(p, line, col, TG_ENOMEM, "out of memory");
}

/* ---- tokens ---- */

static void advance(parser *p) {
    if (p->have_ahead) {
        p->tok = p->ahead;
        p->have_ahead = false;
    } else {
        tg_lex_next(&p->lx, &p->tok);
    }
}

static const tg_tok *peek(parser *p) {
    if (!p->have_ahead) {
        tg_lex_next(&p->lx, &p->ahead);
        p->have_ahead = true;
    }
    return &p->ahead;
}

static bool at(const parser *p, tg_tok_kind k) { return p->tok.kind == k; }

static bool accept(parser *p, tg_tok_kind k) {
    if (!at(p, k)) return false;
    advance(p);
    return true;
}

static bool expect(parser *p, tg_tok_kind k, const char *what) {
    return accept(p, k) || expected(p, what);
}

/* End of a statement: a newline, or the end of the text. */
static bool expect_eol(parser *p) {
    if (at(p, TG_TK_EOF)) return true;
    return expect(p, TG_TK_NEWLINE, "end of line");
}

static void skip_newlines(parser *p) {
    while (at(p, TG_TK_NEWLINE)) advance(p);
}

/* Enters one level of nesting at token t; false (error set) beyond the limit. */
static bool enter(parser *p, const tg_tok *t) {
    if (p->depth >= TG_PARSE_MAX_DEPTH)
        return FAIL_TOK(p, t, TG_ELIMIT, "nesting deeper than %d", TG_PARSE_MAX_DEPTH);
    p->depth++;
    return true;
}

static void leave(parser *p) { p->depth--; }

/* ---- scratch memory ---- */

static void *scratch_alloc(parser *p, size_t n, const tg_tok *t) {
    void *q = tg_arena_alloc(&p->scratch, n);
    if (!q) oom(p, t->line, t->col);
    return q;
}

static char *scratch_str(parser *p, const char *s, size_t n, const tg_tok *t) {
    char *q = scratch_alloc(p, n + 1, t);
    if (q) {
        memcpy(q, s, n);
        q[n] = '\0';
    }
    return q;
}

/* Returns arr (n elements, room for *cap) with room for one more, moved within the
 * scratch arena when full; NULL on failure (error set). */
static void *grow(parser *p, void *arr, int *cap, int n, size_t elem, const tg_tok *t) {
    if (n < *cap) return arr;
    if (*cap > (1 << 28)) {
        FAIL_TOK(p, t, TG_ELIMIT, "list longer than %d items", n);
        return NULL;
    }
    int ncap = *cap ? *cap * 2 : 8;
    void *q = scratch_alloc(p, (size_t)ncap * elem, t);
    if (!q) return NULL;
    if (n > 0) memcpy(q, arr, (size_t)n * elem);
    *cap = ncap;
    return q;
}

#define GROW(p, arr, cap, n, t) ((arr) = grow((p), (arr), &(cap), (n), sizeof *(arr), (t)))

/* Frees the scratch arena once it holds more than a little, between statements. */
static void scratch_trim(parser *p) {
    if (p->scratch.total > ((size_t)1 << 16)) {
        tg_arena_fini(&p->scratch);
        tg_arena_init(&p->scratch, p->ctx);
    }
}

/* ---- literals ---- */

static bool starts_number(const parser *p) {
    return at(p, TG_TK_INT) || at(p, TG_TK_FLOAT) || at(p, TG_TK_MINUS) ||
           tg_tok_is(&p->tok, "inf") || tg_tok_is(&p->tok, "nan");
}

/* number := ["-"] (INT | FLOAT | inf | nan) */
static bool parse_number(parser *p, lit *out) {
    tg_tok first = p->tok;
    bool neg = accept(p, TG_TK_MINUS);
    tg_tok t = p->tok;
    *out = (lit){.line = first.line, .col = first.col};
    if (t.kind == TG_TK_INT) {
        uint64_t lim = neg ? (uint64_t)1 << 63 : (uint64_t)INT64_MAX;
        if (t.u > lim)
            return FAIL_TOK(p, &first, TG_ESYNTAX, "integer literal %s%.*s is out of range of i64",
                            neg ? "-" : "", (int)(t.len > 40 ? 40 : t.len), t.p);
        out->kind = 'i';
        out->i = !neg ? (int64_t)t.u : t.u == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)t.u;
    } else if (t.kind == TG_TK_FLOAT) {
        out->kind = 'f';
        out->f = neg ? -t.f : t.f;
    } else if (tg_tok_is(&t, "inf")) {
        out->kind = 'f';
        out->f = neg ? -HUGE_VAL : HUGE_VAL;
    } else if (tg_tok_is(&t, "nan")) {
        out->kind = 'f';
        out->f = NAN;
    } else {
        return expected(p, neg ? "a number after '-'" : "a number");
    }
    advance(p);
    return true;
}

/* scalar := number | true | false | none */
static bool parse_scalar(parser *p, lit *out, const char *what) {
    if (tg_tok_is(&p->tok, "true") || tg_tok_is(&p->tok, "false")) {
        *out = (lit){.kind = 'b', .i = p->tok.p[0] == 't', .line = p->tok.line, .col = p->tok.col};
        advance(p);
        return true;
    }
    if (tg_tok_is(&p->tok, "none")) {
        *out = (lit){.kind = 'n', .line = p->tok.line, .col = p->tok.col};
        advance(p);
        return true;
    }
    if (starts_number(p)) return parse_number(p, out);
    return expected(p, what);
}

/* "[" [scalar ("," scalar)* [","]] "]": items into *items (scratch), count into *n. */
static bool parse_list(parser *p, lit **items, int *n) {
    tg_tok lb = p->tok;
    if (!enter(p, &lb)) return false;
    advance(p);
    int cap = 0, cnt = 0;
    lit *v = NULL;
    while (!at(p, TG_TK_RBRACKET)) {
        if (!GROW(p, v, cap, cnt, &p->tok)) return false;
        if (!parse_scalar(p, &v[cnt], "a number or ']'")) return false;
        cnt++;
        if (!accept(p, TG_TK_COMMA)) break;
    }
    *items = v;
    *n = cnt;
    if (!expect(p, TG_TK_RBRACKET, "',' or ']'")) return false;
    leave(p);
    return true;
}

/* ---- bindings ---- */

/* Checks that name token t may be bound here (not reserved, not bound yet). */
static bool check_bindable(parser *p, const tg_tok *t) {
    if (t->kind != TG_TK_NAME) return expected(p, "a name");
    if (tg_txt_reserved(t->p, t->len))
        return FAIL_TOK(p, t, TG_ESYNTAX, "'%.*s' is a reserved word", (int)t->len, t->p);
    const tg_txt_entry *e = tg_txt_map_find(&p->names, t->p, t->len);
    if (e)
        return FAIL_TOK(p, t, TG_ESYNTAX, "'%.*s' is already defined at %d:%d", (int)t->len, t->p,
                        e->line, e->col);
    return true;
}

static bool bind(parser *p, const tg_tok *t, tg_var *v) {
    tg_txt_entry *e = tg_txt_map_add(&p->names, t->p, t->len);
    if (!e) return oom(p, t->line, t->col);
    e->val = v;
    e->line = t->line;
    e->col = t->col;
    /* the first name bound to a fresh value names it (an alias `y = x` keeps x's) */
    if (!v->name && !(v->kind == TG_VAR_CONST && v->lit)) {
        char *s = tg_arena_alloc(&p->g->arena, t->len + 1);
        if (!s) return oom(p, t->line, t->col);
        memcpy(s, t->p, t->len);
        s[t->len] = '\0';
        v->name = s;
    }
    return true;
}

/* ---- functions ---- */

/* Names the parser reads as built-in forms rather than ops (a function may not take one). */
static bool is_special_form(const char *name) {
    static const char *const forms[] = {"const", "grad", "vjp", "jacobian", "hessian", "vectorize"};
    for (size_t i = 0; i < TG_COUNTOF(forms); i++)
        if (strcmp(name, forms[i]) == 0) return true;
    return false;
}

/* The graph of function `nm` of this text, parsed already (callees come first). */
static tg_graph *func_graph(parser *p, const tg_tok *nm) {
    const tg_txt_entry *e = tg_txt_map_find(&p->funcs, nm->p, nm->len);
    return e ? e->val : NULL;
}

/* ---- expressions ---- */

static bool parse_expr(parser *p, tg_var **first, int *nout);

/* An expression that must give exactly one value (arguments, returns). */
static bool parse_expr1(parser *p, tg_var **out) {
    tg_tok start = p->tok;
    int n = 0;
    if (!parse_expr(p, out, &n)) return false;
    if (n != 1)
        return FAIL_TOK(p, &start, TG_ESYNTAX,
                        "'%.*s' gives %d values here, where one is expected (bind them: "
                        "a, b = ...)",
                        (int)start.len, start.p, n);
    return true;
}

static bool set_pos(parser *p, const tg_tok *t) {
    p->g->line = t->line;
    p->g->col = t->col;
    return true;
}

static bool literal_var(parser *p, const lit *l, tg_var **out) {
    p->g->line = l->line;
    p->g->col = l->col;
    tg_var *v = l->kind == 'i'   ? tg_literal_int(p->g, l->i)
                : l->kind == 'f' ? tg_literal_float(p->g, l->f)
                                 : tg_literal_bool(p->g, l->i != 0);
    if (!v) return builder_failed(p, l->line, l->col);
    *out = v;
    return true;
}

/* The value of a `device=` keyword (a string naming a device) at the current token, into
 * *out: the graph's copy of the name (tg_ir_device_intern). */
static NOINLINE bool parse_device(parser *p, const char **out) {
    tg_tok t = p->tok;
    if (!at(p, TG_TK_STRING)) return expected(p, "a device name string (\"cpu:1\")");
    char *s = scratch_alloc(p, t.len, &t);
    if (!s) return false;
    tg_tok_string(&t, s);
    if (!tg_ir_device_valid(s))
        return FAIL_TOK(p, &t, TG_EINVAL, "malformed device name \"%s\": expected %s", s,
                        TG_DEVICE_FORMS);
    if (!(*out = tg_ir_device_intern(p->g, s))) return oom(p, t.line, t.col);
    advance(p);
    return true;
}

/* "[" ["[" int "," int "]" ("," ...)* [","]] "]": a list of int pairs (TG_AS_PAIRS), into
 * a as a flat TG_ATTR_INTS. */
static NOINLINE bool parse_pairs(parser *p, tg_attr *a) {
    tg_tok lb = p->tok;
    if (!expect(p, TG_TK_LBRACKET, "a list of pairs [[a, b], ...]")) return false;
    if (!enter(p, &lb)) return false;
    int cap = 0, cnt = 0;
    lit *v = NULL;
    while (!at(p, TG_TK_RBRACKET)) {
        if (!expect(p, TG_TK_LBRACKET, "a pair [a, b] or ']'")) return false;
        for (int k = 0; k < 2; k++) {
            if (!GROW(p, v, cap, cnt, &p->tok)) return false;
            if (!parse_scalar(p, &v[cnt], "an integer")) return false;
            if (v[cnt].kind != 'i')
                return fail_at(p, v[cnt].line, v[cnt].col, TG_ESYNTAX,
                               "expected an integer in a pair");
            cnt++;
            if (k == 0 && !expect(p, TG_TK_COMMA, "',' (a pair is [a, b])")) return false;
        }
        if (!expect(p, TG_TK_RBRACKET, "']' (a pair is [a, b])")) return false;
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!expect(p, TG_TK_RBRACKET, "',' or ']'")) return false;
    leave(p);
    int64_t *ints = scratch_alloc(p, sizeof *ints * (size_t)(cnt + 1), &lb);
    if (!ints) return false;
    for (int k = 0; k < cnt; k++) ints[k] = v[k].i;
    a->kind = TG_ATTR_INTS;
    a->ints = ints;
    a->n = cnt;
    return true;
}

/* Value of an attribute: scalar, list, string or @function. */
static NOINLINE bool parse_attr_value(parser *p, tg_attr *a) {
    tg_tok t = p->tok;
    if (at(p, TG_TK_STRING)) {
        char *s = scratch_alloc(p, t.len, &t);
        if (!s) return false;
        tg_tok_string(&t, s);
        a->kind = TG_ATTR_STR;
        a->s = s;
        advance(p);
        return true;
    }
    if (at(p, TG_TK_AT)) {
        advance(p);
        tg_tok nm = p->tok;
        if (nm.kind != TG_TK_NAME) return expected(p, "a function name after '@'");
        a->kind = TG_ATTR_FUNC;
        a->func = func_graph(p, &nm);
        if (!a->func)
            return FAIL_TOK(p, &nm, TG_ENAME, "unknown function '%.*s'", (int)nm.len, nm.p);
        advance(p);
        return true;
    }
    if (at(p, TG_TK_LBRACKET)) {
        lit *items;
        int n;
        if (!parse_list(p, &items, &n)) return false;
        bool any_float = false;
        for (int k = 0; k < n; k++) {
            if (items[k].kind == 'b')
                return fail_at(p, items[k].line, items[k].col, TG_ESYNTAX,
                               "expected a number in a list but found a bool");
            any_float |= items[k].kind == 'f';
        }
        if (any_float) {
            double *v = scratch_alloc(p, sizeof *v * (size_t)(n + 1), &t);
            if (!v) return false;
            for (int k = 0; k < n; k++) {
                if (items[k].kind == 'n')
                    return fail_at(p, items[k].line, items[k].col, TG_ESYNTAX,
                                   "'none' cannot appear in a list of floats");
                v[k] = items[k].kind == 'f' ? items[k].f : (double)items[k].i;
            }
            a->kind = TG_ATTR_FLOATS;
            a->floats = v;
        } else {
            int64_t *v = scratch_alloc(p, sizeof *v * (size_t)(n + 1), &t);
            bool *none = scratch_alloc(p, sizeof *none * (size_t)(n + 1), &t);
            if (!v || !none) return false;
            bool any_none = false;
            for (int k = 0; k < n; k++) { /* `none` is kept apart from every integer */
                none[k] = items[k].kind == 'n';
                v[k] = none[k] ? 0 : items[k].i;
                any_none |= none[k];
            }
            a->kind = TG_ATTR_INTS;
            a->ints = v;
            a->none = any_none ? none : NULL;
        }
        a->n = n;
        return true;
    }
    if (tg_tok_is(&t, "true") || tg_tok_is(&t, "false") || tg_tok_is(&t, "none") ||
        starts_number(p)) {
        lit l;
        if (!parse_scalar(p, &l, "an attribute value")) return false;
        switch (l.kind) {
        case 'i':
            a->kind = TG_ATTR_INT;
            a->i = l.i;
            break;
        case 'f':
            a->kind = TG_ATTR_FLOAT;
            a->f = l.f;
            break;
        case 'b':
            a->kind = TG_ATTR_BOOL;
            a->i = l.i;
            break;
        default:
            a->kind = TG_ATTR_NONE;
            break;
        }
        return true;
    }
    return expected(p, "an attribute value");
}

/* The value of attribute `name` of the call of optok: a list of pairs where the op's
 * attribute takes one (TG_AS_PAIRS) or the value starts with "[[", any other value
 * otherwise. A list of pairs for an attribute that takes something else is an error here;
 * for a name the op lacks, tg_apply reports it. */
static NOINLINE bool parse_keyword_value(parser *p, const tg_tok *optok, tg_attr *a) {
    char *opname = scratch_str(p, optok->p, optok->len, optok);
    if (!opname) return false;
    int opi = tg_op_lookup(opname), type = -1;
    for (int j = 0; opi >= 0 && j < tg_op_table[opi]->nattrs; j++)
        if (strcmp(tg_op_table[opi]->attrs[j].name, a->name) == 0)
            type = tg_op_table[opi]->attrs[j].type;
    bool pairs = at(p, TG_TK_LBRACKET) && peek(p)->kind == TG_TK_LBRACKET;
    if (pairs && type >= 0 && type != TG_AS_PAIRS)
        return FAIL_TOK(p, &p->tok, TG_EINVAL, "%s: attribute '%s' takes no list of pairs", opname,
                        a->name);
    return pairs || type == TG_AS_PAIRS ? parse_pairs(p, a) : parse_attr_value(p, a);
}

/* The range of integers each dtype holds (bool and floats excluded). */
static bool int_fits(tg_dtype dt, int64_t v) {
    switch (dt) {
    case TG_DT_I8:
        return v >= INT8_MIN && v <= INT8_MAX;
    case TG_DT_I16:
        return v >= INT16_MIN && v <= INT16_MAX;
    case TG_DT_I32:
        return v >= INT32_MIN && v <= INT32_MAX;
    case TG_DT_U8:
        return v >= 0 && v <= UINT8_MAX;
    default:
        return true;
    }
}

/* const(value=SCALAR | [SCALAR, ...], dtype="f32", shape=[...]) after its "(";
 * the constant goes to p->outs[0]. */
static NOINLINE bool parse_const(parser *p, const tg_tok *optok) {
    lit one, *items = NULL;
    int n = 0, ndim = -1;
    bool have_value = false, is_list = false, have_dtype = false;
    tg_tok vtok = *optok, dtok = *optok;
    tg_dtype dt = TG_DT_F64;
    int64_t shape[TG_MAX_DIMS];
    while (!at(p, TG_TK_RPAREN)) {
        tg_tok k = p->tok;
        if (k.kind != TG_TK_NAME || peek(p)->kind != TG_TK_EQUAL)
            return FAIL_TOK(p, &k, TG_ESYNTAX,
                            "const takes only keyword arguments (value=, dtype=, shape=)");
        advance(p);
        advance(p);
        bool dup = false;
        if (tg_tok_is(&k, "value")) {
            dup = have_value;
            have_value = true;
            vtok = p->tok;
            if (at(p, TG_TK_LBRACKET)) {
                is_list = true;
                if (!parse_list(p, &items, &n)) return false;
            } else {
                is_list = false;
                if (!parse_scalar(p, &one, "a number or a list")) return false;
                items = &one;
                n = 1;
            }
        } else if (tg_tok_is(&k, "dtype")) {
            dup = have_dtype;
            have_dtype = true;
            dtok = p->tok;
            if (!at(p, TG_TK_STRING)) return expected(p, "a dtype string");
            char *s = scratch_alloc(p, dtok.len, &dtok);
            if (!s) return false;
            tg_tok_string(&dtok, s);
            if (!tg_dtype_parse(s, &dt))
                return FAIL_TOK(p, &dtok, TG_ETYPE, "unknown dtype \"%s\"", s);
            advance(p);
        } else if (tg_tok_is(&k, "shape")) {
            dup = ndim >= 0;
            tg_tok st = p->tok;
            lit *dims;
            int nd;
            if (!at(p, TG_TK_LBRACKET)) return expected(p, "a list of extents");
            if (!parse_list(p, &dims, &nd)) return false;
            if (nd > TG_MAX_DIMS)
                return FAIL_TOK(p, &st, TG_ELIMIT, "const: more than %d dimensions", TG_MAX_DIMS);
            for (int d = 0; d < nd; d++) {
                if (dims[d].kind != 'i' || dims[d].i < 0)
                    return fail_at(p, dims[d].line, dims[d].col, TG_ESYNTAX,
                                   "const: an extent must be an integer >= 0");
                shape[d] = dims[d].i;
            }
            ndim = nd;
        } else if (tg_tok_is(&k, "device")) {
            return FAIL_TOK(p, &k, TG_EINVAL,
                            "const: a constant has no device (annotate the nodes that read it)");
        } else {
            return FAIL_TOK(p, &k, TG_EINVAL,
                            "const: unknown attribute '%.*s' (expected value, dtype, shape)",
                            (int)k.len, k.p);
        }
        if (dup)
            return FAIL_TOK(p, &k, TG_EINVAL, "const: attribute '%.*s' given twice", (int)k.len,
                            k.p);
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!expect(p, TG_TK_RPAREN, "',' or ')'")) return false;
    leave(p);
    if (!have_value) return FAIL_TOK(p, optok, TG_EINVAL, "const: missing attribute 'value'");
    if (!have_dtype) { /* f64 if any float, bool if all bools, else i64 */
        bool any_f = false, all_b = n > 0;
        for (int k = 0; k < n; k++) {
            any_f |= items[k].kind == 'f';
            all_b &= items[k].kind == 'b';
        }
        dt = any_f || n == 0 ? TG_DT_F64 : all_b ? TG_DT_BOOL : TG_DT_I64;
    }
    if (ndim < 0) {
        ndim = is_list ? 1 : 0;
        shape[0] = n;
    }
    int64_t count = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] != 0 && count > INT64_MAX / shape[d])
            return FAIL_TOK(p, optok, TG_ELIMIT, "const: shape is too large");
        count *= shape[d];
    }
    if (count != n)
        return FAIL_TOK(p, &vtok, TG_ESHAPE, "const: %d value%s cannot fill shape %s%lld%s", n,
                        n == 1 ? "" : "s", ndim ? "with " : "[] of ", (long long)count,
                        ndim ? " elements" : " element");
    size_t esz = tg_dtype_size(dt);
    char *data = scratch_alloc(p, esz * (size_t)(n + 1), &vtok);
    if (!data) return false;
    for (int k = 0; k < n; k++) {
        const lit *l = &items[k];
        void *dst = data + esz * (size_t)k;
        const char *dn = tg_dtype_name(dt);
        if (l->kind == 'n')
            return fail_at(p, l->line, l->col, TG_ETYPE, "const: 'none' is not a value");
        if (dt == TG_DT_BOOL) {
            if (l->kind != 'b')
                return fail_at(p, l->line, l->col, TG_ETYPE,
                               "const: dtype bool takes true or false");
            tg_store_i64(dst, dt, l->i);
        } else if (l->kind == 'b') {
            return fail_at(p, l->line, l->col, TG_ETYPE, "const: a bool value for dtype %s", dn);
        } else if (tg_dtype_is_float(dt)) {
            double v = l->kind == 'f' ? l->f : (double)l->i;
            if (dt == TG_DT_F32 && isfinite(v) && fabs(v) > FLT_MAX)
                return fail_at(p, l->line, l->col, TG_ETYPE, "const: %g is out of range of f32", v);
            tg_store_f64(dst, dt, v);
        } else {
            if (l->kind == 'f')
                return fail_at(p, l->line, l->col, TG_ETYPE,
                               "const: a float value for integer dtype %s", dn);
            if (!int_fits(dt, l->i))
                return fail_at(p, l->line, l->col, TG_ETYPE, "const: %lld is out of range of %s",
                               (long long)l->i, dn);
            tg_store_i64(dst, dt, l->i);
        }
    }
    tg_tensor *t = tg_tensor_from_data(p->ctx, dt, ndim, shape, data);
    if (!t) return builder_failed(p, optok->line, optok->col);
    set_pos(p, optok);
    tg_var *v = tg_constant(p->g, t);
    tg_tensor_free(t);
    if (!v) return builder_failed(p, optok->line, optok->col);
    p->outs[0] = v;
    return true;
}

/* ---- the derivative forms: grad, vjp, jacobian, hessian (docs/grad.md) ---- */

/* Their attributes: disconnected="error"|"zero", and n_outputs=N where n_outputs is not
 * NULL (vjp). */
static NOINLINE bool derivative_attrs(parser *p, const tg_tok *optok, const char *form,
                                      const tg_attr *attrs, int na, tg_disconnected *mode,
                                      int64_t *n_outputs) {
    *mode = TG_DISCONNECTED_ERROR;
    for (int k = 0; k < na; k++) {
        const tg_attr *a = &attrs[k];
        if (n_outputs && strcmp(a->name, "n_outputs") == 0) {
            if (a->kind != TG_ATTR_INT)
                return FAIL_TOK(p, optok, TG_EINVAL, "%s: n_outputs must be an integer", form);
            if (a->i < 1)
                return FAIL_TOK(p, optok, TG_EINVAL, "%s: n_outputs must be at least 1, got %lld",
                                form, (long long)a->i);
            *n_outputs = a->i;
            continue;
        }
        bool zero = a->kind == TG_ATTR_STR && a->s && !strcmp(a->s, "zero");
        bool err = a->kind == TG_ATTR_STR && a->s && !strcmp(a->s, "error");
        if (strcmp(a->name, "disconnected") != 0)
            return FAIL_TOK(p, optok, TG_EINVAL, "%s: unknown attribute '%s' (expected %s)", form,
                            a->name, n_outputs ? "n_outputs or disconnected" : "disconnected");
        if (!zero && !err)
            return FAIL_TOK(p, optok, TG_EINVAL, "%s: disconnected must be \"error\" or \"zero\"",
                            form);
        *mode = zero ? TG_DISCONNECTED_ZERO : TG_DISCONNECTED_ERROR;
    }
    return true;
}

typedef tg_status (*derivative_fn)(tg_graph *g, tg_var *y, tg_var *const *wrt, int nwrt,
                                   tg_disconnected disconnected, tg_var **out);

/* grad(cost, x1, x2, ...), jacobian(y, x1, ...) and hessian(cost, x1, ...), each with
 * disconnected="error"|"zero": one result per x, built at once by tg_grad, tg_jacobian or
 * tg_hessian (the result is ordinary graph). `first` says what the first argument is. */
static NOINLINE bool build_derivative(parser *p, const tg_tok *optok, const char *form,
                                      const char *first, derivative_fn fn, tg_var **ins, int nin,
                                      const tg_attr *attrs, int na, int *nout) {
    tg_disconnected mode;
    if (!derivative_attrs(p, optok, form, attrs, na, &mode, NULL)) return false;
    if (nin < 2)
        return FAIL_TOK(p, optok, TG_EINVAL, "%s: expects %s and at least one variable", form,
                        first);
    if (nin - 1 > TG_MAX_OUTS)
        return FAIL_TOK(p, optok, TG_ELIMIT, "%s: at most %d variables", form, TG_MAX_OUTS);
    set_pos(p, optok);
    if (fn(p->g, ins[0], ins + 1, nin - 1, mode, p->outs) != TG_OK)
        return builder_failed(p, optok->line, optok->col);
    *nout = nin - 1;
    return true;
}

/* vjp(y1, .., yN, ct1, .., ctN, x1, x2, ..., n_outputs=N, disconnected=...): the outputs,
 * then their cotangents (each of its output's type), then the variables; one cotangent
 * per x, built by tg_vjp. */
static NOINLINE bool build_vjp(parser *p, const tg_tok *optok, tg_var **ins, int nin,
                               const tg_attr *attrs, int na, int *nout) {
    tg_disconnected mode;
    int64_t no = 1;
    if (!derivative_attrs(p, optok, "vjp", attrs, na, &mode, &no)) return false;
    if (no > TG_MAX_OUTS)
        return FAIL_TOK(p, optok, TG_ELIMIT, "vjp: at most %d outputs, got n_outputs=%lld",
                        TG_MAX_OUTS, (long long)no);
    if (nin < 2 * no + 1)
        return FAIL_TOK(p, optok, TG_EINVAL,
                        "vjp: expects %lld output%s, %lld cotangent%s and at least one variable "
                        "(n_outputs=%lld), got %d argument%s",
                        (long long)no, no == 1 ? "" : "s", (long long)no, no == 1 ? "" : "s",
                        (long long)no, nin, nin == 1 ? "" : "s");
    int nx = nin - 2 * (int)no;
    if (nx > TG_MAX_OUTS)
        return FAIL_TOK(p, optok, TG_ELIMIT, "vjp: at most %d variables", TG_MAX_OUTS);
    for (int j = 0; j < no; j++) {
        const tg_type *yt = &ins[j]->type, *ct = &ins[no + j]->type;
        bool ok = yt->dtype == ct->dtype && yt->ndim == ct->ndim;
        for (int d = 0; ok && d < yt->ndim; d++)
            ok = yt->shape[d] < 0 || ct->shape[d] < 0 || yt->shape[d] == ct->shape[d];
        char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
        if (!ok)
            return FAIL_TOK(p, optok, TG_ETYPE,
                            "vjp: cotangent %d (argument %d) is %s but its output (argument %d) "
                            "is %s; a cotangent has its output's dtype and shape",
                            j + 1, (int)no + j + 1, tg_type_str(ct, a, sizeof a), j + 1,
                            tg_type_str(yt, b, sizeof b));
    }
    set_pos(p, optok);
    if (tg_vjp(p->g, ins, ins + no, (int)no, ins + 2 * no, nx, mode, p->outs) != TG_OK)
        return builder_failed(p, optok->line, optok->col);
    *nout = nx;
    return true;
}

/* The derivative form named `name`: 1 built, 0 failed, -1 `name` is none of them. */
static NOINLINE int derivative_form(parser *p, const tg_tok *optok, const char *name, tg_var **ins,
                                    int nin, const tg_attr *attrs, int na, int *nout) {
    static const struct {
        const char *name, *first;
        derivative_fn fn;
    } forms[] = {
        {"grad", "a cost", tg_grad},
        {"jacobian", "a value", tg_jacobian},
        {"hessian", "a cost", tg_hessian},
    };
    if (strcmp(name, "vjp") == 0) return build_vjp(p, optok, ins, nin, attrs, na, nout);
    for (size_t k = 0; k < TG_COUNTOF(forms); k++)
        if (strcmp(name, forms[k].name) == 0)
            return build_derivative(p, optok, name, forms[k].first, forms[k].fn, ins, nin, attrs,
                                    na, nout);
    return -1;
}

/* set_subtensor(x[...], y) and inc_subtensor(x[...], y), as in PyTensor and JAX's
 * x.at[...].set/add: when the first argument was made by indexing, the update applies to
 * the indexed value, through tg_index_update (NumPy's rules; *done, with the value in
 * p->outs[0]). A value that a take or slice call made (not x[...]) updates its input with
 * set_take/inc_take or set_subtensor/inc_subtensor and that call's attributes: the op name
 * and arguments are rewritten in place. */
static NOINLINE bool build_subtensor_sugar(parser *p, char *opname, tg_var ***insp, int *nin,
                                           tg_attr **attrs, int *na, int *ca, const tg_tok *optok,
                                           bool *done) {
    tg_var **ins = *insp;
    bool set = strcmp(opname, "set_subtensor") == 0, inc = strcmp(opname, "inc_subtensor") == 0;
    tg_var *sub = ins[0];
    *done = false;
    if ((!set && !inc) || *nin != 2 || sub->kind != TG_VAR_NODE) return true;
    const tg_node *n = sub->node;
    const index_rec *r = p->indexed;
    while (r && r->v != sub) r = r->next;
    if ((r || n->op == TG_OP_SLICE || n->op == TG_OP_TAKE) && *na > 0)
        return FAIL_TOK(p, optok, TG_EINVAL,
                        "%s: give either an indexed value or index "
                        "attributes, not both",
                        opname);
    if (r) {
        set_pos(p, optok);
        tg_var *v = tg_index_update(p->g, r->x, r->items, r->n, ins[1], inc);
        if (!v) return builder_failed(p, optok->line, optok->col);
        p->outs[0] = v;
        *done = true;
        return true;
    }
    if (n->op == TG_OP_SLICE) {
        static const char *const keys[4] = {"starts", "stops", "steps", "index"};
        for (int k = 0; k < 4; k++) {
            if (!GROW(p, *attrs, *ca, *na, optok)) return false;
            (*attrs)[(*na)++] = (tg_attr){.name = keys[k],
                                          .kind = TG_ATTR_INTS,
                                          .ints = n->attrs[k].ints,
                                          .n = n->attrs[k].n,
                                          .none = n->attrs[k].none};
        }
        ins[0] = n->in[0];
        return true;
    }
    if (n->op == TG_OP_TAKE) {
        if (!GROW(p, *attrs, *ca, *na, optok)) return false;
        (*attrs)[(*na)++] =
            n->attrs[0].kind == TG_ATTR_NONE ? TG_A_NONE("axis") : TG_A_INT("axis", n->attrs[0].i);
        tg_var **three = scratch_alloc(p, 3 * sizeof *three, optok);
        if (!three) return false;
        three[0] = n->in[0];
        three[1] = n->in[1];
        three[2] = ins[1];
        *insp = three;
        *nin = 3;
        strcpy(opname, set ? "set_take" : "inc_take"); /* both shorter than the original */
        return true;
    }
    if (n->op == TG_OP_MASK_SELECT)
        return FAIL_TOK(p, optok, TG_EUNSUPPORTED,
                        "%s: of a mask_select call: write %s(x[mask], y) instead", opname, opname);
    return true;
}

/* f(x, y): a call of function f of this text (parsed before this one). */
static NOINLINE bool build_func_call(parser *p, const tg_tok *optok, const char *name, tg_var **ins,
                                     int nin, int na, int nf, int *nout) {
    tg_graph *fn = func_graph(p, optok);
    if (!fn)
        return FAIL_TOK(p, optok, TG_ENAME, "'%s' is neither an op nor a function of this file",
                        name);
    if (na > 0 || nf > 0)
        return FAIL_TOK(p, optok, TG_EINVAL,
                        "a call of function '%s' takes its arguments only (no attributes or "
                        "@functions)",
                        name);
    set_pos(p, optok);
    int cap = TG_MAX_OUTS;
    if (tg_call(p->g, fn, ins, nin, p->outs, &cap) != TG_OK)
        return builder_failed(p, optok->line, optok->col);
    *nout = cap;
    return true;
}

/* fused{EXPR}(x, ...), or fused(x, ..., expr="EXPR"): the expression (raw, or the one
 * attribute, a string) read into a program, which the node takes. */
static NOINLINE bool build_fused(parser *p, const tg_tok *optok, const tg_tok *raw, tg_var **ins,
                                 int nin, const tg_attr *attrs, int na, int *nout) {
    const char *expr = raw ? raw->p : NULL;
    size_t len = raw ? raw->len : 0;
    for (int k = 0; k < na; k++) {
        if (strcmp(attrs[k].name, "expr") != 0)
            return FAIL_TOK(p, optok, TG_EINVAL,
                            "fused: unknown attribute '%s' (expected one of expr)", attrs[k].name);
        if (attrs[k].kind != TG_ATTR_STR)
            return FAIL_TOK(p, optok, TG_EINVAL, "fused: attribute 'expr' expects a string");
        expr = attrs[k].s;
        len = strlen(expr);
    }
    if (!expr) return FAIL_TOK(p, optok, TG_EINVAL, "fused: missing attribute 'expr'");
    const tg_op_def *def = tg_op_table[TG_OP_FUSED];
    if (nin < def->min_in)
        return FAIL_TOK(p, optok, TG_EINVAL, "fused: expects at least %d inputs, got %d",
                        def->min_in, nin);
    tg_fused_prog *prog = NULL;
    char msg[TG_ERRMSG_MAX];
    tg_status st = tg_txt_fused_parse(p->ctx, expr, len, nin, &prog, msg, sizeof msg);
    if (st != TG_OK) return FAIL_TOK(p, optok, st, "fused: %s", msg);
    set_pos(p, optok);
    tg_aval a = tg_fused_aval(prog);
    tg_node *n = tg_ir_node_make_norm(p->g, TG_OP_FUSED, ins, nin, &a);
    tg_fused_free(prog); /* the node holds its own reference */
    if (!n) return builder_failed(p, optok->line, optok->col);
    for (int k = 0; k < n->nout; k++) p->outs[k] = n->out[k];
    *nout = n->nout;
    return true;
}

/* One of vectorize's in_axes/out_axes (attribute a) for n entries into ax: a list of one
 * entry each (`none` for an unmapped one), or a single int or `none` for all of them. */
static bool vectorize_axes(parser *p, const tg_tok *optok, const tg_attr *a, int n,
                           const char *what, int *ax) {
    if (a->kind == TG_ATTR_INTS && a->n != n)
        return FAIL_TOK(p, optok, TG_EINVAL, "vectorize: %s has %d entr%s for %d %s%s", a->name,
                        a->n, a->n == 1 ? "y" : "ies", n, what, n == 1 ? "" : "s");
    if (a->kind != TG_ATTR_INTS && a->kind != TG_ATTR_INT && a->kind != TG_ATTR_NONE)
        return FAIL_TOK(p, optok, TG_EINVAL,
                        "vectorize: %s expects a list of ints and nones, an int or none", a->name);
    for (int k = 0; k < n; k++) {
        int64_t v = a->kind == TG_ATTR_INTS ? a->ints[k] : a->i;
        bool none = a->kind == TG_ATTR_NONE || (a->kind == TG_ATTR_INTS && a->none && a->none[k]);
        if (!none && (v < -TG_MAX_DIMS || v > TG_MAX_DIMS))
            return FAIL_TOK(p, optok, TG_EINVAL, "vectorize: %s entry %lld is out of range",
                            a->name, (long long)v);
        ax[k] = none ? TG_AXIS_NONE : (int)v;
    }
    return true;
}

/* vectorize(@f, x1, x2, ..., in_axes=[0, none], out_axes=[0]) (docs/vectorize.md): f mapped
 * over the batch axis, built at once by tg_vectorize as ordinary graph. */
static NOINLINE bool build_vectorize(parser *p, const tg_tok *optok, tg_var **ins, int nin,
                                     const tg_attr *attrs, int na, const tg_tok *fpos, int nf,
                                     int *nout) {
    if (nf != 1)
        return FAIL_TOK(p, optok, TG_EINVAL,
                        "vectorize: expects one function (@f) and its arguments, got %d "
                        "functions",
                        nf);
    tg_graph *fn = func_graph(p, &fpos[0]);
    if (!fn)
        return FAIL_TOK(p, &fpos[0], TG_ENAME, "unknown function '%.*s'", (int)fpos[0].len,
                        fpos[0].p);
    int *ax[2] = {NULL, NULL};
    for (int k = 0; k < na; k++) {
        int which = strcmp(attrs[k].name, "in_axes") == 0    ? 0
                    : strcmp(attrs[k].name, "out_axes") == 0 ? 1
                                                             : -1;
        if (which < 0)
            return FAIL_TOK(p, optok, TG_EINVAL,
                            "vectorize: unknown attribute '%s' (expected in_axes or out_axes)",
                            attrs[k].name);
        int n = which == 0 ? nin : fn->nret;
        ax[which] = scratch_alloc(p, sizeof *ax[which] * (size_t)(n + 1), optok);
        if (!ax[which] ||
            !vectorize_axes(p, optok, &attrs[k], n, which == 0 ? "input" : "output", ax[which]))
            return false;
    }
    set_pos(p, optok);
    int cap = TG_MAX_OUTS;
    if (tg_vectorize(p->g, fn, ins, nin, ax[0], ax[1], p->outs, &cap) != TG_OK)
        return builder_failed(p, optok->line, optok->col);
    *nout = cap;
    return true;
}

/* Builds the call whose arguments parse_call read: an op, a function of the file, fused,
 * a derivative form or the subtensor sugar; the outputs go to p->outs[0..*nout). */
static NOINLINE bool build_call(parser *p, const tg_tok *optok, const tg_tok *raw, tg_var **ins,
                                int nin, tg_attr *attrs, int na, int ca, const tg_tok *fpos, int nf,
                                int *nout) {
    char *opname = scratch_str(p, optok->p, optok->len, optok);
    if (!opname) return false;
    if (raw)
        for (int k = 0; k < na; k++)
            if (strcmp(attrs[k].name, "expr") == 0)
                return FAIL_TOK(p, optok, TG_EINVAL, "fused: attribute 'expr' given twice");
    int df = derivative_form(p, optok, opname, ins, nin, attrs, na, nout);
    if (df >= 0) return df == 1;
    bool sugar = false;
    if (nin >= 2 && !build_subtensor_sugar(p, opname, &ins, &nin, &attrs, &na, &ca, optok, &sugar))
        return false;
    if (sugar) {
        *nout = 1;
        return true;
    }
    int opi = tg_op_lookup(opname);
    if (nf > 0 && opi >= 0) { /* positional @f: the op's function attributes, in order */
        const tg_op_def *def = tg_op_table[opi];
        int k = 0;
        for (int j = 0; j < def->nattrs && k < nf; j++) {
            if (def->attrs[j].type != TG_AS_FUNC) continue;
            if (!GROW(p, attrs, ca, na, &fpos[k])) return false;
            attrs[na] = (tg_attr){
                .name = def->attrs[j].name, .kind = TG_ATTR_FUNC, .func = func_graph(p, &fpos[k])};
            if (!attrs[na].func)
                return FAIL_TOK(p, &fpos[k], TG_ENAME, "unknown function '%.*s'", (int)fpos[k].len,
                                fpos[k].p);
            na++;
            k++;
        }
        if (k < nf)
            return FAIL_TOK(p, &fpos[k], TG_EINVAL, "%s: takes %d function argument%s", opname, k,
                            k == 1 ? "" : "s");
    }
    if (strcmp(opname, "vectorize") == 0)
        return build_vectorize(p, optok, ins, nin, attrs, na, fpos, nf, nout);
    if (opi < 0 && !tg_composite_lookup(opname))
        return build_func_call(p, optok, opname, ins, nin, na, nf, nout);
    if (opi == TG_OP_FUSED) return build_fused(p, optok, raw, ins, nin, attrs, na, nout);
    set_pos(p, optok);
    int cap = TG_MAX_OUTS;
    if (tg_apply_multi(p->g, opname, ins, nin, attrs, na, p->outs, &cap) != TG_OK)
        return builder_failed(p, optok->line, optok->col);
    *nout = cap;
    return true;
}

/* call := NAME "(" [arg ("," arg)* [","]] ")"   arg := expr | NAME "=" attr | "@" NAME
 * At entry the current token is the op name and the next one is "(". The outputs go to
 * p->outs[0..*nout). A `device="..."` keyword is the call's own: every node the call
 * builds carries it, whatever the call is (op, function, fused, derivative form). */
static bool parse_call(parser *p, int *nout) {
    tg_tok optok = p->tok;
    advance(p);
    tg_tok raw = {.kind = TG_TK_EOF}; /* fused{EXPR}(...): the expression */
    if (at(p, TG_TK_LBRACE)) {
        advance(p);
        raw = p->tok;
        if (!expect(p, TG_TK_RAW, "an expression") || !expect(p, TG_TK_RBRACE, "'}'")) return false;
        if (!at(p, TG_TK_LPAREN)) return expected(p, "'(' after fused{...}");
    }
    if (!enter(p, &p->tok)) return false;
    advance(p);
    *nout = 1;
    if (tg_tok_is(&optok, "const")) return parse_const(p, &optok);

    tg_var **ins = NULL;
    tg_attr *attrs = NULL;
    tg_tok *fpos = NULL;         /* positional @functions */
    const char *device = NULL;   /* device="...": the call's, not an attribute of its op */
    int devline = 0, devcol = 0; /* where it was given */
    int nin = 0, cin = 0, na = 0, ca = 0, nf = 0, cf = 0;
    bool keywords = false;
    while (!at(p, TG_TK_RPAREN)) {
        tg_tok t = p->tok;
        if (t.kind == TG_TK_NAME && peek(p)->kind == TG_TK_EQUAL && tg_tok_is(&t, "device")) {
            if (devline)
                return FAIL_TOK(p, &t, TG_EINVAL, "attribute 'device' given twice (first at %d:%d)",
                                devline, devcol);
            devline = t.line;
            devcol = t.col;
            advance(p);
            advance(p);
            if (!parse_device(p, &device)) return false;
            keywords = true;
        } else if (t.kind == TG_TK_NAME && peek(p)->kind == TG_TK_EQUAL) {
            if (tg_txt_reserved(t.p, t.len))
                return FAIL_TOK(p, &t, TG_ESYNTAX, "'%.*s' is a reserved word", (int)t.len, t.p);
            for (int k = 0; k < na; k++)
                if (strlen(attrs[k].name) == t.len && memcmp(attrs[k].name, t.p, t.len) == 0)
                    return FAIL_TOK(p, &t, TG_EINVAL, "attribute '%.*s' given twice", (int)t.len,
                                    t.p);
            if (!GROW(p, attrs, ca, na, &t)) return false;
            tg_attr *a = &attrs[na];
            *a = (tg_attr){.name = scratch_str(p, t.p, t.len, &t)};
            if (!a->name) return false;
            advance(p);
            advance(p);
            if (!parse_keyword_value(p, &optok, a)) return false;
            na++;
            keywords = true;
        } else if (keywords) {
            return FAIL_TOK(p, &t, TG_ESYNTAX, "positional argument after keyword argument");
        } else if (t.kind == TG_TK_AT) {
            advance(p);
            tg_tok nm = p->tok;
            if (nm.kind != TG_TK_NAME) return expected(p, "a function name after '@'");
            if (!tg_txt_map_find(&p->all_funcs, nm.p, nm.len))
                return FAIL_TOK(p, &nm, TG_ENAME, "unknown function '%.*s'", (int)nm.len, nm.p);
            if (!GROW(p, fpos, cf, nf, &t)) return false;
            fpos[nf++] = nm;
            advance(p);
        } else {
            if (!GROW(p, ins, cin, nin, &t)) return false;
            if (!parse_expr1(p, &ins[nin])) return false;
            nin++;
        }
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!expect(p, TG_TK_RPAREN, "',' or ')'")) return false;
    leave(p);
    const char *outer = p->g->device;
    p->g->device = device;
    bool ok = build_call(p, &optok, raw.kind == TG_TK_RAW ? &raw : NULL, ins, nin, attrs, na, ca,
                         fpos, nf, nout);
    p->g->device = outer;
    return ok;
}

/* Remembers that v was made by indexing x with items (in g's arena, for the function's
 * life), so that set_subtensor(v, y) / inc_subtensor(v, y) update x there. */
static NOINLINE bool index_remember(parser *p, tg_var *v, tg_var *x, const tg_index *items, int n,
                                    const tg_tok *at_tok) {
    index_rec *r = tg_arena_alloc(&p->g->arena, sizeof *r);
    if (!r) return oom(p, at_tok->line, at_tok->col);
    *r = (index_rec){.v = v, .x = x, .n = n, .next = p->indexed};
    memcpy(r->items, items, sizeof items[0] * (size_t)n);
    p->indexed = r;
    return true;
}

/* Indexing "[" item ("," item)* [","] "]" applied to x; item := INT | [INT] ":" [INT]
 * [":" [INT]] | "none" (a new axis) | "..." | NAME (an index array or a boolean mask: any
 * expression starting with a name). Built by tg_index_apply (NumPy's rules); the value
 * goes to p->outs[0]. */
static NOINLINE bool parse_index(parser *p, tg_var *x) {
    tg_tok lb = p->tok;
    if (!enter(p, &lb)) return false;
    advance(p);
    tg_index items[TG_MAX_DIMS];
    int n = 0;
    while (!at(p, TG_TK_RBRACKET)) {
        if (n == TG_MAX_DIMS)
            return FAIL_TOK(p, &p->tok, TG_ELIMIT, "more than %d indices", TG_MAX_DIMS);
        tg_index *it = &items[n];
        *it = (tg_index){.slice = {.omit = TG_SLICE_OMIT_ALL}};
        if (at(p, TG_TK_ELLIPSIS) || tg_tok_is(&p->tok, "none")) {
            it->slice.omit = at(p, TG_TK_ELLIPSIS) ? TG_INDEX_ELLIPSIS : TG_INDEX_NEWAXIS;
            advance(p);
            n++;
            if (!accept(p, TG_TK_COMMA)) break;
            continue;
        }
        if (at(p, TG_TK_NAME) && !tg_tok_is(&p->tok, "inf") && !tg_tok_is(&p->tok, "nan")) {
            if (!parse_expr1(p, &it->array)) return false;
            n++;
            if (!accept(p, TG_TK_COMMA)) break;
            continue;
        }
        int part = 0;
        bool any = false;
        for (;;) {
            if (at(p, TG_TK_INT) || at(p, TG_TK_MINUS)) {
                lit l;
                if (!parse_number(p, &l)) return false;
                if (l.kind != 'i')
                    return fail_at(p, l.line, l.col, TG_ESYNTAX, "an index must be an integer");
                int64_t *dst[3] = {&it->slice.start, &it->slice.stop, &it->slice.step};
                *dst[part] = l.i;
                it->slice.omit &= ~(1u << part); /* NO_START, NO_STOP, NO_STEP in order */
                any = true;
            } else if (at(p, TG_TK_FLOAT)) {
                return FAIL_TOK(p, &p->tok, TG_ESYNTAX, "an index must be an integer");
            }
            if (part == 2 || !at(p, TG_TK_COLON)) break;
            advance(p);
            part++;
            any = true;
        }
        if (!any) return expected(p, "an index");
        if (part == 0) it->slice = (tg_slice){.start = it->slice.start, .is_index = true};
        n++;
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (n == 0) return expected(p, "an index");
    if (!expect(p, TG_TK_RBRACKET, "',' or ']'")) return false;
    leave(p);
    set_pos(p, &lb);
    tg_var *v = tg_index_apply(p->g, x, items, n);
    if (!v) return builder_failed(p, lb.line, lb.col);
    p->outs[0] = v;
    return index_remember(p, v, x, items, n, &lb);
}

/* expr := (NAME | literal | call) ("[" index ... "]")* ; the first value goes to *first
 * and the count to *nout; a call's values are all in p->outs (until the next call). */
static bool parse_expr(parser *p, tg_var **first, int *nout) {
    tg_tok t = p->tok;
    *nout = 1;
    if (t.kind == TG_TK_NAME && (peek(p)->kind == TG_TK_LPAREN ||
                                 (tg_tok_is(&t, "fused") && peek(p)->kind == TG_TK_LBRACE))) {
        if (!parse_call(p, nout)) return false;
        *first = p->outs[0];
    } else if (tg_tok_is(&t, "true") || tg_tok_is(&t, "false") || starts_number(p)) {
        lit l;
        if (!parse_scalar(p, &l, "an expression") || !literal_var(p, &l, first)) return false;
    } else if (t.kind == TG_TK_NAME) {
        if (tg_txt_reserved(t.p, t.len))
            return FAIL_TOK(p, &t, TG_ESYNTAX, "'%.*s' cannot be used as a value", (int)t.len, t.p);
        const tg_txt_entry *e = tg_txt_map_find(&p->names, t.p, t.len);
        if (!e) return FAIL_TOK(p, &t, TG_ENAME, "unknown name '%.*s'", (int)t.len, t.p);
        *first = e->val;
        advance(p);
    } else {
        return expected(p, "an expression");
    }
    while (at(p, TG_TK_LBRACKET)) {
        if (*nout != 1)
            return FAIL_TOK(p, &p->tok, TG_ESYNTAX, "cannot index %d values at once", *nout);
        if (!parse_index(p, *first)) return false;
        *first = p->outs[0];
    }
    return true;
}

/* ---- statements and functions ---- */

/* NAME ("," NAME)* "=" expr NEWLINE */
static bool parse_binding(parser *p) {
    tg_tok names[TG_MAX_OUTS];
    int n = 0;
    for (;;) {
        tg_tok t = p->tok;
        if (t.kind != TG_TK_NAME) return expected(p, n ? "a name" : "a statement");
        if (!check_bindable(p, &t)) return false;
        for (int k = 0; k < n; k++)
            if (names[k].len == t.len && memcmp(names[k].p, t.p, t.len) == 0)
                return FAIL_TOK(p, &t, TG_ESYNTAX, "'%.*s' is already defined at %d:%d", (int)t.len,
                                t.p, names[k].line, names[k].col);
        if (n == TG_MAX_OUTS)
            return FAIL_TOK(p, &t, TG_ELIMIT, "more than %d names in one statement", TG_MAX_OUTS);
        names[n++] = t;
        advance(p);
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!expect(p, TG_TK_EQUAL, n > 1 ? "',' or '='" : "'=' or ','")) return false;
    tg_tok start = p->tok;
    bool is_call = start.kind == TG_TK_NAME &&
                   (peek(p)->kind == TG_TK_LPAREN || peek(p)->kind == TG_TK_LBRACE);
    tg_var *first = NULL;
    int nv = 0;
    if (!parse_expr(p, &first, &nv)) return false;
    if (nv != n) {
        if (is_call && !at(p, TG_TK_LBRACKET))
            return FAIL_TOK(p, &start, TG_ESYNTAX, "'%.*s' gives %d value%s but %d name%s bound",
                            (int)start.len, start.p, nv, nv == 1 ? "" : "s", n,
                            n == 1 ? " is" : "s are");
        return FAIL_TOK(p, &start, TG_ESYNTAX,
                        "the expression gives %d value%s but %d name%s bound", nv,
                        nv == 1 ? "" : "s", n, n == 1 ? " is" : "s are");
    }
    if (!expect_eol(p)) return false;
    for (int k = 0; k < n; k++)
        if (!bind(p, &names[k], n == 1 ? first : p->outs[k])) return false;
    return true;
}

/* "return" [expr ("," expr)*] NEWLINE (a bare return: a function that only updates state).
 * A value returned by name goes by that name (tg_graph_output_name), even where one
 * variable has several names (`g_a, g_b = grad(...)` may bind both to one value). */
static bool parse_return(parser *p) {
    tg_tok rt = p->tok;
    advance(p);
    tg_var **outs = NULL;
    tg_tok *names = NULL; /* per output: the NAME it is written as, or kind != NAME */
    int n = 0, cap = 0, ncap = 0;
    if (at(p, TG_TK_NEWLINE) && p->g->updates.n > 0) {
        set_pos(p, &rt);
        if (tg_graph_set_outputs(p->g, NULL, 0) != TG_OK) return builder_failed(p, rt.line, rt.col);
        return expect_eol(p);
    }
    do {
        if (!GROW(p, outs, cap, n, &p->tok) || !GROW(p, names, ncap, n, &p->tok)) return false;
        names[n] = p->tok;
        tg_tok_kind next = peek(p)->kind;
        if (next != TG_TK_COMMA && next != TG_TK_NEWLINE && next != TG_TK_EOF)
            names[n].kind = TG_TK_EOF; /* an expression, not a bare name */
        else if (names[n].kind == TG_TK_NAME && !tg_txt_map_find(&p->names, p->tok.p, p->tok.len))
            names[n].kind = TG_TK_EOF; /* `true`, `inf`: a literal, not a bound name */
        if (!parse_expr1(p, &outs[n])) return false;
        n++;
    } while (accept(p, TG_TK_COMMA));
    if (!expect_eol(p)) return false;
    set_pos(p, &rt);
    if (tg_graph_set_outputs(p->g, outs, n) != TG_OK) return builder_failed(p, rt.line, rt.col);
    for (int i = 0; i < n; i++)
        if (names[i].kind == TG_TK_NAME &&
            tg_ir_output_name_set(p->g, i, names[i].p, names[i].len) != TG_OK)
            return builder_failed(p, rt.line, rt.col);
    return true;
}

/* NAME "<-" expr NEWLINE: the new value of state NAME (docs/state.md). */
static bool parse_update(parser *p) {
    tg_tok nm = p->tok;
    const tg_txt_entry *e = tg_txt_map_find(&p->names, nm.p, nm.len);
    if (!e) return FAIL_TOK(p, &nm, TG_ENAME, "unknown name '%.*s'", (int)nm.len, nm.p);
    tg_var *state = e->val;
    if (!tg_var_is_state(state))
        return FAIL_TOK(p, &nm, TG_EINVAL,
                        "'%.*s' is not a state (only a parameter declared `mut %.*s: ...` "
                        "can be updated)",
                        (int)nm.len, nm.p, (int)nm.len, nm.p);
    const tg_txt_entry *u = tg_txt_map_find(&p->updated, nm.p, nm.len);
    if (u)
        return FAIL_TOK(p, &nm, TG_EINVAL, "state '%.*s' is already updated at %d:%d", (int)nm.len,
                        nm.p, u->line, u->col);
    advance(p); /* NAME */
    advance(p); /* <- */
    tg_var *v = NULL;
    if (!parse_expr1(p, &v) || !expect_eol(p)) return false;
    set_pos(p, &nm);
    if (tg_update(p->g, state, v) != TG_OK) return builder_failed(p, nm.line, nm.col);
    tg_txt_entry *ne = tg_txt_map_add(&p->updated, nm.p, nm.len);
    if (!ne) return oom(p, nm.line, nm.col);
    ne->line = nm.line;
    ne->col = nm.col;
    return true;
}

/* param := ["mut"] NAME ":" type ["device" "=" STRING] ;
 * type := DTYPE "[" [dim ("," dim)*] "]" ; dim := INT | "?"
 * then tg_input, or tg_state for `mut` (a parameter may itself be named mut). */
static bool parse_param(parser *p) {
    bool state = false;
    if (tg_tok_is(&p->tok, "mut") && peek(p)->kind == TG_TK_NAME) {
        state = true;
        advance(p);
    }
    tg_tok nm = p->tok;
    if (!check_bindable(p, &nm)) return false;
    advance(p);
    if (!expect(p, TG_TK_COLON, "':'")) return false;
    tg_tok dtok = p->tok;
    if (dtok.kind != TG_TK_NAME) return expected(p, "a dtype");
    char dname[16] = "";
    tg_dtype dt;
    if (dtok.len >= sizeof dname) dtok.len = sizeof dname - 1;
    memcpy(dname, dtok.p, dtok.len);
    if (!tg_dtype_parse(dname, &dt))
        return FAIL_TOK(p, &dtok, TG_ETYPE,
                        "unknown dtype '%.*s' (expected bool i8 i16 i32 i64 u8 f32 f64)",
                        (int)p->tok.len, p->tok.p);
    advance(p);
    if (!expect(p, TG_TK_LBRACKET, "'['")) return false;
    int64_t shape[TG_MAX_DIMS];
    int nd = 0;
    while (!at(p, TG_TK_RBRACKET)) {
        tg_tok t = p->tok;
        if (nd == TG_MAX_DIMS)
            return FAIL_TOK(p, &t, TG_ELIMIT, "more than %d dimensions", TG_MAX_DIMS);
        if (t.kind == TG_TK_QUESTION) {
            shape[nd++] = TG_DIM_UNKNOWN;
        } else if (t.kind == TG_TK_INT) {
            if (t.u > (uint64_t)INT64_MAX)
                return FAIL_TOK(p, &t, TG_ELIMIT, "extent %.*s is too large", (int)t.len, t.p);
            shape[nd++] = (int64_t)t.u;
        } else {
            return expected(p, nd ? "an extent or '?'" : "an extent, '?' or ']'");
        }
        advance(p);
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!expect(p, TG_TK_RBRACKET, "',' or ']'")) return false;
    const char *device = NULL; /* `x: f32[3] device="cpu:1"`: where the caller's tensor lives */
    if (tg_tok_is(&p->tok, "device") && peek(p)->kind == TG_TK_EQUAL) {
        advance(p);
        advance(p);
        if (!parse_device(p, &device)) return false;
    }
    char *name = scratch_str(p, nm.p, nm.len, &nm);
    if (!name) return false;
    set_pos(p, &nm);
    tg_var *v = state ? tg_state(p->g, name, dt, nd, shape) : tg_input(p->g, name, dt, nd, shape);
    if (!v) return builder_failed(p, nm.line, nm.col);
    v->device = device;
    tg_txt_entry *e = tg_txt_map_add(&p->names, nm.p, nm.len);
    if (!e) return oom(p, nm.line, nm.col);
    e->val = v;
    e->line = nm.line;
    e->col = nm.col;
    return true;
}

/* func := "func" NAME "(" [param ("," param)*] ")" "{" NEWLINE stmt* "}" */
static bool parse_func(parser *p) {
    advance(p); /* func */
    tg_tok nm = p->tok;
    if (nm.kind != TG_TK_NAME) return expected(p, "a function name");
    if (tg_txt_reserved(nm.p, nm.len))
        return FAIL_TOK(p, &nm, TG_ESYNTAX, "'%.*s' is a reserved word", (int)nm.len, nm.p);
    const tg_txt_entry *prev = tg_txt_map_find(&p->funcs, nm.p, nm.len);
    if (prev)
        return FAIL_TOK(p, &nm, TG_ESYNTAX, "function '%.*s' is already defined at %d:%d",
                        (int)nm.len, nm.p, prev->line, prev->col);
    char *name = scratch_str(p, nm.p, nm.len, &nm);
    if (!name) return false;
    if (tg_op_lookup(name) >= 0 || tg_composite_lookup(name) || is_special_form(name)) {
        const char *what =
            tg_op_lookup(name) >= 0 || tg_composite_lookup(name) ? "op" : "built-in form";
        return FAIL_TOK(p, &nm, TG_EINVAL,
                        "function '%s' has the name of the %s '%s': a call of it would mean the "
                        "%s (rename the function)",
                        name, what, name, what);
    }
    tg_txt_entry *e = tg_txt_map_add(&p->funcs, nm.p, nm.len);
    if (!e) return oom(p, nm.line, nm.col);
    e->line = nm.line;
    e->col = nm.col;
    tg_graph *g = tg_graph_new(p->ctx, name);
    if (!g) return oom(p, nm.line, nm.col);
    e->val = g;
    g->def_line = nm.line;
    g->def_col = nm.col;
    if (!tg_vec_push(p->ctx, &p->m->funcs, g)) {
        tg_graph_free(g);
        return oom(p, nm.line, nm.col);
    }
    p->g = g;
    g->file = tg_arena_strdup(&g->arena, p->file);
    if (!g->file) return oom(p, nm.line, nm.col);
    tg_txt_map_fini(&p->names);
    tg_txt_map_init(&p->names, p->ctx);
    tg_txt_map_fini(&p->updated);
    tg_txt_map_init(&p->updated, p->ctx);
    p->indexed = NULL; /* the records live in the previous function's arena */
    advance(p);

    if (!expect(p, TG_TK_LPAREN, "'('")) return false;
    while (!at(p, TG_TK_RPAREN)) {
        if (!at(p, TG_TK_NAME)) return expected(p, "a parameter name or ')'");
        if (!parse_param(p)) return false;
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!expect(p, TG_TK_RPAREN, "',' or ')'")) return false;
    if (p->map_axis && p->map_n == g->inputs.n && /* else the pmap reports the arity */
        tg_graph_set_mapped(g, p->map_axis, p->map_in, p->map_n) != TG_OK)
        return builder_failed(p, nm.line, nm.col);
    if (!expect(p, TG_TK_LBRACE, "'{'")) return false;
    if (!expect(p, TG_TK_NEWLINE, "end of line")) return false;
    for (;;) {
        skip_newlines(p);
        scratch_trim(p);
        if (at(p, TG_TK_RBRACE))
            return FAIL_TOK(p, &p->tok, TG_ESYNTAX, "function '%s' has no 'return'", g->name);
        if (at(p, TG_TK_EOF)) return expected(p, "'}'");
        if (tg_tok_is(&p->tok, "return")) break;
        if (at(p, TG_TK_NAME) && peek(p)->kind == TG_TK_LARROW) {
            if (!parse_update(p)) return false;
            continue;
        }
        if (!parse_binding(p)) return false;
    }
    if (!parse_return(p)) return false;
    skip_newlines(p);
    if (!at(p, TG_TK_RBRACE)) return expected(p, "'}' after 'return'");
    advance(p);
    if (!expect_eol(p)) return false;
    g->line = g->col = 0;
    p->g = NULL;
    return true;
}

/* ---- the order of functions ----
 * A function is parsed after the functions it calls (`f(x)`, `@f`), so that a call is
 * typed from its callee's body; a first scan finds every `func NAME`, a second the calls
 * of each function; calls that form a cycle are an error naming it. */
typedef struct fref {
    int callee;    /* index in text order */
    int line, col; /* the call */
} fref;
typedef struct fdef {
    tg_tok start; /* the `func` token */
    tg_tok name;
    fref *refs;
    int nrefs, crefs;
    tg_graph *g;  /* once parsed */
    bool deriv;   /* has a derivative form (grad, vjp, jacobian, hessian) */
    tg_tok *maps; /* the `pmap` of each `pmap(@NAME, ...)` naming this function */
    int nmaps, cmaps;
} fdef;
typedef struct forder {
    fdef *f;
    int n, cap;
    int *order; /* parse order: indices into f */
} forder;

static void forder_fini(tg_ctx *ctx, forder *fo) {
    for (int i = 0; i < fo->n; i++) {
        tg_mem_free(ctx, fo->f[i].refs, sizeof *fo->f[i].refs * (size_t)fo->f[i].crefs);
        tg_mem_free(ctx, fo->f[i].maps, sizeof *fo->f[i].maps * (size_t)fo->f[i].cmaps);
    }
    tg_mem_free(ctx, fo->f, sizeof *fo->f * (size_t)fo->cap);
    tg_mem_free(ctx, fo->order, sizeof *fo->order * (size_t)(fo->n + 1));
}

static bool ref_add(tg_ctx *ctx, fdef *d, int callee, const tg_tok *t) {
    for (int k = 0; k < d->nrefs; k++)
        if (d->refs[k].callee == callee) return true;
    if (d->nrefs == d->crefs) {
        int nc = d->crefs ? d->crefs * 2 : 8;
        fref *r =
            tg_mem_realloc(ctx, d->refs, sizeof *r * (size_t)d->crefs, sizeof *r * (size_t)nc);
        if (!r) return false;
        d->refs = r;
        d->crefs = nc;
    }
    d->refs[d->nrefs++] = (fref){callee, t->line, t->col};
    return true;
}

static bool map_add(tg_ctx *ctx, fdef *d, const tg_tok *pmap) {
    if (d->nmaps == d->cmaps) {
        int nc = d->cmaps ? d->cmaps * 2 : 4;
        tg_tok *m =
            tg_mem_realloc(ctx, d->maps, sizeof *m * (size_t)d->cmaps, sizeof *m * (size_t)nc);
        if (!m) return false;
        d->maps = m;
        d->cmaps = nc;
    }
    d->maps[d->nmaps++] = *pmap;
    return true;
}

static bool is_deriv_form(const tg_tok *t) {
    return tg_tok_is(t, "grad") || tg_tok_is(t, "vjp") || tg_tok_is(t, "jacobian") ||
           tg_tok_is(t, "hessian");
}

/* Both scans. A lexical error ends them: it is reported where the parser meets it. The
 * second also notes the functions with a derivative form and the pmaps naming each. */
static bool scan_funcs(parser *p, const char *src, size_t len, forder *fo) {
    for (int pass = 0; pass < 2; pass++) {
        tg_lexer lx;
        tg_tok a, b, b1 = {0}, b2 = {0}; /* b1, b2: the two tokens before a */
        tg_lex_init(&lx, src, len);
        tg_lex_next(&lx, &a);
        bool ok = true;
        fdef *cur = NULL;
        bool after_func = false; /* a is the name after `func` */
        while (ok && a.kind != TG_TK_EOF && a.kind != TG_TK_ERROR) {
            tg_lex_next(&lx, &b);
            tg_txt_entry *e;
            if (tg_tok_is(&a, "func")) { /* every `func`, even a bad one: parse_func judges */
                e = b.kind == TG_TK_NAME ? tg_txt_map_find(&p->all_funcs, b.p, b.len) : NULL;
                if (pass == 0) {
                    if (b.kind == TG_TK_NAME && !e) {
                        ok = (e = tg_txt_map_add(&p->all_funcs, b.p, b.len)) != NULL;
                        if (ok) e->val = (void *)(intptr_t)(fo->n + 1);
                    }
                    if (ok && fo->n == fo->cap) {
                        int nc = fo->cap ? fo->cap * 2 : 8;
                        fdef *f = tg_mem_realloc(p->ctx, fo->f, sizeof *f * (size_t)fo->cap,
                                                 sizeof *f * (size_t)nc);
                        ok = f != NULL;
                        if (ok) fo->f = f, fo->cap = nc;
                    }
                    if (ok) fo->f[fo->n++] = (fdef){.start = a, .name = b};
                } else {
                    fdef *d = e ? &fo->f[(intptr_t)e->val - 1] : NULL;
                    cur = d && d->start.p == a.p ? d : NULL; /* a second definition: an error */
                }
            } else if (pass == 1 && cur && !after_func &&
                       ((a.kind == TG_TK_NAME && b.kind == TG_TK_LPAREN) ||
                        (a.kind == TG_TK_AT && b.kind == TG_TK_NAME))) {
                const tg_tok *nm = a.kind == TG_TK_NAME ? &a : &b;
                if ((e = tg_txt_map_find(&p->all_funcs, nm->p, nm->len)))
                    ok = ref_add(p->ctx, cur, (int)(intptr_t)e->val - 1, nm);
                if (ok && e && a.kind == TG_TK_AT && b1.kind == TG_TK_LPAREN &&
                    tg_tok_is(&b2, "pmap"))
                    ok = map_add(p->ctx, &fo->f[(intptr_t)e->val - 1], &b2);
                if (a.kind == TG_TK_NAME && is_deriv_form(&a)) cur->deriv = true;
            }
            after_func = tg_tok_is(&a, "func");
            b2 = b1;
            b1 = a;
            a = b;
        }
        if (ok && a.kind == TG_TK_ERROR) /* the text cannot be read past it */
            ok = fail_at(p, a.line, a.col, TG_ESYNTAX, "%s", lx.msg);
        else if (!ok)
            oom(p, 1, 1);
        tg_lex_fini(&lx);
        if (!ok) return false;
    }
    return true;
}

/* Callees before callers (an iterative depth-first walk in text order); a cycle is an
 * error at the first call of the cycle: "call cycle: f -> g -> f". */
static bool order_funcs(parser *p, forder *fo) {
    int n = fo->n, norder = 0;
    fo->order = tg_mem_alloc(p->ctx, sizeof *fo->order * (size_t)(n + 1));
    uint8_t *color = tg_mem_calloc(p->ctx, (size_t)n + 1);
    struct frame {
        int f, next;
    } *stack = tg_mem_alloc(p->ctx, sizeof *stack * (size_t)(n + 1));
    bool ok = fo->order && color && stack;
    if (!ok) oom(p, 1, 1);
    for (int r = 0; ok && r < n; r++) {
        if (color[r]) continue;
        int sp = 0;
        stack[sp++] = (struct frame){r, 0};
        color[r] = 1;
        while (ok && sp > 0) {
            struct frame *fr = &stack[sp - 1];
            fdef *d = &fo->f[fr->f];
            if (fr->next == d->nrefs) {
                color[fr->f] = 2;
                fo->order[norder++] = fr->f;
                sp--;
                continue;
            }
            int c = d->refs[fr->next++].callee;
            if (color[c] == 2) continue;
            if (color[c] == 0) {
                color[c] = 1;
                stack[sp++] = (struct frame){c, 0};
                continue;
            }
            int from = sp - 1; /* c is on the stack: the cycle runs from c to the top */
            while (stack[from].f != c) from--;
            char chain[TG_ERRMSG_MAX];
            int off = 0;
            for (int i = from; i < sp && off < (int)sizeof chain; i++) {
                const tg_tok *nm = &fo->f[stack[i].f].name;
                off += snprintf(chain + off, sizeof chain - (size_t)off, "%.*s -> ", (int)nm->len,
                                nm->p);
            }
            if (off < (int)sizeof chain)
                snprintf(chain + off, sizeof chain - (size_t)off, "%.*s", (int)fo->f[c].name.len,
                         fo->f[c].name.p);
            const fref *first = &fo->f[c].refs[stack[from].next - 1];
            ok = fail_at(p, first->line, first->col, TG_EINVAL, "call cycle: %s", chain);
        }
    }
    tg_mem_free(p->ctx, color, (size_t)n + 1);
    tg_mem_free(p->ctx, stack, sizeof *stack * (size_t)(n + 1));
    return ok;
}

/* Skips one argument of a call: up to the `,` or `)` that ends it. */
static void skip_arg(parser *p) {
    int depth = 0;
    while (!at(p, TG_TK_EOF) && !at(p, TG_TK_ERROR)) {
        if (depth == 0 && (at(p, TG_TK_COMMA) || at(p, TG_TK_RPAREN))) return;
        if (at(p, TG_TK_LPAREN) || at(p, TG_TK_LBRACKET)) depth++;
        if (at(p, TG_TK_RPAREN) || at(p, TG_TK_RBRACKET)) depth--;
        advance(p);
    }
}

/* The typing a pmap gives the function it maps, read from its call (at `pmap`): the axis
 * name, and per argument whether in_axes maps it (absent: all are). false when the call
 * does not say (the parse of the call reports what is wrong with it). Strings and flags
 * live in the scratch arena. */
static bool read_map_site(parser *p, const tg_tok *pmap, const char **axis, bool **in, int *n) {
    tg_lex_seek(&p->lx, pmap);
    p->have_ahead = false;
    advance(p); /* pmap */
    advance(p); /* ( */
    advance(p);
    tg_attr in_axes = {.kind = TG_ATTR_NONE};
    *axis = NULL;
    int npos = -1; /* the first positional argument is @body */
    while (!failed(p) && !at(p, TG_TK_RPAREN) && !at(p, TG_TK_EOF)) {
        if (at(p, TG_TK_NAME) && peek(p)->kind == TG_TK_EQUAL) {
            bool ia = tg_tok_is(&p->tok, "in_axes"), an = tg_tok_is(&p->tok, "axis_name");
            advance(p);
            advance(p);
            tg_attr a = {0};
            if ((ia || an) && !parse_attr_value(p, &a)) return false;
            if (ia) in_axes = a;
            if (an && a.kind == TG_ATTR_STR) *axis = a.s;
        } else {
            npos++;
        }
        skip_arg(p);
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!*axis || npos < 0 || (in_axes.kind == TG_ATTR_INTS && in_axes.n != npos)) return false;
    bool *m = scratch_alloc(p, sizeof *m * (size_t)(npos + 1), pmap);
    if (!m) return false;
    for (int i = 0; i < npos; i++)
        m[i] = in_axes.kind != TG_ATTR_INTS || !in_axes.none || !in_axes.none[i];
    *in = m;
    *n = npos;
    return true;
}

/* A function that takes a gradient and that a pmap maps is typed by that pmap (docs/pmap.md,
 * "Typing"): its mapped parameters vary over the axis. Two pmaps typing it differently are
 * an error naming both. Sets p->map_*, or leaves them NULL. */
static bool map_typing(parser *p, const fdef *f) {
    p->map_axis = NULL;
    if (!f->deriv) return true;
    for (int k = 0; k < f->nmaps; k++) {
        const char *axis;
        bool *in;
        int n;
        if (!read_map_site(p, &f->maps[k], &axis, &in, &n)) {
            if (failed(p)) return false;
            continue;
        }
        if (!p->map_axis) {
            p->map_axis = axis;
            p->map_in = in;
            p->map_n = n;
            continue;
        }
        bool same = strcmp(axis, p->map_axis) == 0 && n == p->map_n;
        for (int i = 0; same && i < n; i++) same = in[i] == p->map_in[i];
        if (!same)
            return fail_at(p, f->maps[k].line, f->maps[k].col, TG_EINVAL,
                           "this pmap types '%.*s' differently from the pmap at %d:%d (its axis "
                           "name or which inputs it maps); the gradient inside '%.*s' is built "
                           "for one typing: map it one way, or copy the function",
                           (int)f->name.len, f->name.p, f->maps[0].line, f->maps[0].col,
                           (int)f->name.len, f->name.p);
    }
    return true;
}

/* Parses the functions in dependency order, each from its `func` token; after each, what
 * follows it in the text must be the next function or the end (nothing else lives at the
 * top level). The module lists the functions in text order. */
static void parse_funcs(parser *p, forder *fo) {
    for (int k = 0; k < fo->n && !failed(p); k++) {
        int i = fo->order[k];
        if (!map_typing(p, &fo->f[i])) return;
        tg_lex_seek(&p->lx, &fo->f[i].start);
        p->have_ahead = false;
        advance(p);
        if (!parse_func(p)) return;
        fo->f[i].g = p->m->funcs.items[p->m->funcs.n - 1];
        skip_newlines(p);
        if (i + 1 < fo->n ? p->tok.p != fo->f[i + 1].start.p : !at(p, TG_TK_EOF)) {
            expected(p, i + 1 < fo->n ? "'func'" : "'func' or end of file");
            return;
        }
    }
    for (int i = 0; i < fo->n; i++) p->m->funcs.items[i] = fo->f[i].g;
}

tg_status tg_txt_parse(tg_module *m, const char *src, size_t len, const char *filename) {
    parser *p = tg_mem_calloc(m->ctx, sizeof *p);
    if (!p) return TG_ENOMEM;
    p->ctx = m->ctx;
    p->m = m;
    p->file = filename ? filename : "<input>";
    tg_txt_map_init(&p->all_funcs, p->ctx);
    tg_txt_map_init(&p->funcs, p->ctx);
    tg_txt_map_init(&p->names, p->ctx);
    tg_txt_map_init(&p->updated, p->ctx);
    tg_arena_init(&p->scratch, p->ctx);
    tg_lex_init(&p->lx, src, len);
    if (len >= TG_TEXT_MAX_BYTES) {
        fail_at(p, 1, 1, TG_ELIMIT, "text larger than %zu bytes", TG_TEXT_MAX_BYTES);
    } else {
        forder fo = {0};
        if (scan_funcs(p, src, len, &fo)) {
            advance(p);
            skip_newlines(p);
            if (fo.n == 0 || p->tok.p != fo.f[0].start.p)
                expected(p, "'func'");
            else if (order_funcs(p, &fo))
                parse_funcs(p, &fo);
        }
        forder_fini(p->ctx, &fo);
    }
    if (p->g) p->g->line = p->g->col = 0;
    tg_lex_fini(&p->lx);
    tg_arena_fini(&p->scratch);
    tg_txt_map_fini(&p->names);
    tg_txt_map_fini(&p->updated);
    tg_txt_map_fini(&p->funcs);
    tg_txt_map_fini(&p->all_funcs);
    tg_status st = p->st;
    if (st != TG_OK) tg_set_error(st, "%s", p->msg);
    tg_mem_free(m->ctx, p, sizeof *p);
    return st;
}
