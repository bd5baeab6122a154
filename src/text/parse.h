/* parse.h - private header of the .tg parser, shared by its three files: parse.c (the
 * parser's state, errors and scratch memory; statements, functions and their order; the
 * entry tg_txt_parse), parse_expr.c (expressions, calls and indexing) and parse_attr.c
 * (literals, attribute values and const).
 *
 * Invariants (each file's header adds its own):
 *  - Every function here takes the parser and reports through it: the first error wins
 *    (tg_prs_fail_at does nothing once one is set), and a function that fails returns
 *    false or NULL with the error set.
 *  - Nesting (calls, indexing, lists) goes through enter()/leave(), so the recursion of
 *    tg_prs_expr is bounded by TG_PARSE_MAX_DEPTH.
 *  - Temporaries of a statement come from the scratch arena (tg_prs_scratch_alloc); they
 *    live until parse.c trims it between statements.
 */
#ifndef TG_PARSE_H
#define TG_PARSE_H

#include "../ir/op.h"
#include "text.h"

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

/* Keeps the frames of non-recursive helpers out of the recursive ones (tg_prs_expr,
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

/* ---- errors (parse.c) ---- */

/* Sets the error "file:line:col: message" unless one is set; returns false. */
bool tg_prs_fail_at(parser *p, int line, int col, tg_status st, const char *fmt, ...)
    TG_PRINTF(5, 6);
#define FAIL_TOK(p, t, st, ...) tg_prs_fail_at((p), (t)->line, (t)->col, (st), __VA_ARGS__)
/* Reports "expected WHAT but found TOKEN" at the current token (or the lexer's error). */
bool tg_prs_expected(parser *p, const char *what);
/* Turns the failure of a builder into the parse error. The graph keeps the first error
 * with the position we stamped on it; otherwise the thread's last message is used. */
bool tg_prs_builder_failed(parser *p, int line, int col);
bool tg_prs_oom(parser *p, int line, int col);

static inline bool failed(const parser *p) { return p->st != TG_OK; }

/* ---- tokens ---- */

static inline void advance(parser *p) {
    if (p->have_ahead) {
        p->tok = p->ahead;
        p->have_ahead = false;
    } else {
        tg_lex_next(&p->lx, &p->tok);
    }
}

static inline const tg_tok *peek(parser *p) {
    if (!p->have_ahead) {
        tg_lex_next(&p->lx, &p->ahead);
        p->have_ahead = true;
    }
    return &p->ahead;
}

static inline bool at(const parser *p, tg_tok_kind k) { return p->tok.kind == k; }

static inline bool accept(parser *p, tg_tok_kind k) {
    if (!at(p, k)) return false;
    advance(p);
    return true;
}

static inline bool expect(parser *p, tg_tok_kind k, const char *what) {
    return accept(p, k) || tg_prs_expected(p, what);
}

/* End of a statement: a newline, or the end of the text. */
static inline bool expect_eol(parser *p) {
    if (at(p, TG_TK_EOF)) return true;
    return expect(p, TG_TK_NEWLINE, "end of line");
}

static inline void skip_newlines(parser *p) {
    while (at(p, TG_TK_NEWLINE)) advance(p);
}

/* Enters one level of nesting at token t; false (error set) beyond the limit. */
static inline bool enter(parser *p, const tg_tok *t) {
    if (p->depth >= TG_PARSE_MAX_DEPTH)
        return FAIL_TOK(p, t, TG_ELIMIT, "nesting deeper than %d", TG_PARSE_MAX_DEPTH);
    p->depth++;
    return true;
}

static inline void leave(parser *p) { p->depth--; }

/* ---- scratch memory (parse.c) ---- */

void *tg_prs_scratch_alloc(parser *p, size_t n, const tg_tok *t);
char *tg_prs_scratch_str(parser *p, const char *s, size_t n, const tg_tok *t);
/* Returns arr (n elements, room for *cap) with room for one more, moved within the
 * scratch arena when full; NULL on failure (error set). */
void *tg_prs_grow(parser *p, void *arr, int *cap, int n, size_t elem, const tg_tok *t);
#define GROW(p, arr, cap, n, t) ((arr) = tg_prs_grow((p), (arr), &(cap), (n), sizeof *(arr), (t)))

/* ---- the function being built ---- */

/* Stamps the position of the construct on the graph before a builder call. */
static inline bool set_pos(parser *p, const tg_tok *t) {
    p->g->line = t->line;
    p->g->col = t->col;
    return true;
}

/* The graph of function `nm` of this text, parsed already (callees come first). */
static inline tg_graph *func_graph(parser *p, const tg_tok *nm) {
    const tg_txt_entry *e = tg_txt_map_find(&p->funcs, nm->p, nm->len);
    return e ? e->val : NULL;
}

/* ---- literals and attribute values (parse_attr.c) ---- */

/* The current token starts a number: INT, FLOAT, '-', inf or nan. */
bool tg_prs_starts_number(const parser *p);
/* number := ["-"] (INT | FLOAT | inf | nan) */
bool tg_prs_number(parser *p, lit *out);
/* scalar := number | true | false | none; `what` names it in the message otherwise. */
bool tg_prs_scalar(parser *p, lit *out, const char *what);
/* The value of a `device=` keyword (a string naming a device) at the current token, into
 * *out: the graph's copy of the name (tg_ir_device_intern). */
bool tg_prs_device(parser *p, const char **out);
/* Value of an attribute: scalar, list, string or @function. */
bool tg_prs_attr_value(parser *p, tg_attr *a);
/* The value of attribute a->name of the call of optok (a list of pairs where the op's
 * attribute takes one). */
bool tg_prs_keyword_value(parser *p, const tg_tok *optok, tg_attr *a);
/* const(...) after its "(": the constant goes to p->outs[0]. */
bool tg_prs_const(parser *p, const tg_tok *optok);

/* ---- expressions (parse_expr.c) ---- */

/* expr := (NAME | literal | call) ("[" index ... "]")* ; the first value goes to *first
 * and the count to *nout; a call's values are all in p->outs (until the next call). */
bool tg_prs_expr(parser *p, tg_var **first, int *nout);
/* An expression that must give exactly one value (arguments, returns). */
bool tg_prs_expr1(parser *p, tg_var **out);

#endif
