/* parse.c - the .tg parser: its state, errors and scratch memory, the statements and
 * functions of a file and the order they are parsed in, and the entry tg_txt_parse. It
 * builds each function through the public builders (tg_input, tg_state, tg_update,
 * tg_graph_set_outputs); expressions are parse_expr.c's, literals and attribute values
 * parse_attr.c's (parse.h is what they share). The grammar is in docs/text-format.md.
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
#include "parse.h"

#include <stdio.h>

/* ---- errors ---- */

bool tg_prs_fail_at(parser *p, int line, int col, tg_status st, const char *fmt, ...) {
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

bool tg_prs_expected(parser *p, const char *what) {
    const tg_tok *t = &p->tok;
    if (t->kind == TG_TK_ERROR) return FAIL_TOK(p, t, TG_ESYNTAX, "%s", p->lx.msg);
    char found[64];
    tg_tok_describe(t, found, sizeof found);
    return FAIL_TOK(p, t, TG_ESYNTAX, "expected %s but found %s", what, found);
}

bool tg_prs_builder_failed(parser *p, int line, int col) {
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
    return tg_prs_fail_at(p, line, col, st, "%s", m);
}

bool tg_prs_oom(parser *p, int line, int col) {
    return tg_prs_fail_at(p, line, col, TG_ENOMEM, "out of memory");
}

/* ---- scratch memory ---- */

void *tg_prs_scratch_alloc(parser *p, size_t n, const tg_tok *t) {
    void *q = tg_arena_alloc(&p->scratch, n);
    if (!q) tg_prs_oom(p, t->line, t->col);
    return q;
}

char *tg_prs_scratch_str(parser *p, const char *s, size_t n, const tg_tok *t) {
    char *q = tg_prs_scratch_alloc(p, n + 1, t);
    if (q) {
        memcpy(q, s, n);
        q[n] = '\0';
    }
    return q;
}

void *tg_prs_grow(parser *p, void *arr, int *cap, int n, size_t elem, const tg_tok *t) {
    if (n < *cap) return arr;
    if (*cap > (1 << 28)) {
        FAIL_TOK(p, t, TG_ELIMIT, "list longer than %d items", n);
        return NULL;
    }
    int ncap = *cap ? *cap * 2 : 8;
    void *q = tg_prs_scratch_alloc(p, (size_t)ncap * elem, t);
    if (!q) return NULL;
    if (n > 0) memcpy(q, arr, (size_t)n * elem);
    *cap = ncap;
    return q;
}

/* Frees the scratch arena once it holds more than a little, between statements. */
static void scratch_trim(parser *p) {
    if (p->scratch.total > ((size_t)1 << 16)) {
        tg_arena_fini(&p->scratch);
        tg_arena_init(&p->scratch, p->ctx);
    }
}

/* ---- bindings ---- */

/* Checks that name token t may be bound here (not reserved, not bound yet). */
static bool check_bindable(parser *p, const tg_tok *t) {
    if (t->kind != TG_TK_NAME) return tg_prs_expected(p, "a name");
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
    if (!e) return tg_prs_oom(p, t->line, t->col);
    e->val = v;
    e->line = t->line;
    e->col = t->col;
    /* the first name bound to a fresh value names it (an alias `y = x` keeps x's) */
    if (!v->name && !(v->kind == TG_VAR_CONST && v->lit)) {
        char *s = tg_arena_alloc(&p->g->arena, t->len + 1);
        if (!s) return tg_prs_oom(p, t->line, t->col);
        memcpy(s, t->p, t->len);
        s[t->len] = '\0';
        v->name = s;
    }
    return true;
}

/* Names the parser reads as built-in forms rather than ops (a function may not take one). */
static bool is_special_form(const char *name) {
    static const char *const forms[] = {"const", "grad", "vjp", "jacobian", "hessian", "vectorize"};
    for (size_t i = 0; i < TG_COUNTOF(forms); i++)
        if (strcmp(name, forms[i]) == 0) return true;
    return false;
}

/* ---- statements and functions ---- */

/* NAME ("," NAME)* "=" expr NEWLINE */
static bool parse_binding(parser *p) {
    tg_tok names[TG_MAX_OUTS];
    int n = 0;
    for (;;) {
        tg_tok t = p->tok;
        if (t.kind != TG_TK_NAME) return tg_prs_expected(p, n ? "a name" : "a statement");
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
    if (!tg_prs_expr(p, &first, &nv)) return false;
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
        if (tg_graph_set_outputs(p->g, NULL, 0) != TG_OK)
            return tg_prs_builder_failed(p, rt.line, rt.col);
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
        if (!tg_prs_expr1(p, &outs[n])) return false;
        n++;
    } while (accept(p, TG_TK_COMMA));
    if (!expect_eol(p)) return false;
    set_pos(p, &rt);
    if (tg_graph_set_outputs(p->g, outs, n) != TG_OK)
        return tg_prs_builder_failed(p, rt.line, rt.col);
    for (int i = 0; i < n; i++)
        if (names[i].kind == TG_TK_NAME &&
            tg_ir_output_name_set(p->g, i, names[i].p, names[i].len) != TG_OK)
            return tg_prs_builder_failed(p, rt.line, rt.col);
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
    if (!tg_prs_expr1(p, &v) || !expect_eol(p)) return false;
    set_pos(p, &nm);
    if (tg_update(p->g, state, v) != TG_OK) return tg_prs_builder_failed(p, nm.line, nm.col);
    tg_txt_entry *ne = tg_txt_map_add(&p->updated, nm.p, nm.len);
    if (!ne) return tg_prs_oom(p, nm.line, nm.col);
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
    if (dtok.kind != TG_TK_NAME) return tg_prs_expected(p, "a dtype");
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
            return tg_prs_expected(p, nd ? "an extent or '?'" : "an extent, '?' or ']'");
        }
        advance(p);
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!expect(p, TG_TK_RBRACKET, "',' or ']'")) return false;
    const char *device = NULL; /* `x: f32[3] device="cpu:1"`: where the caller's tensor lives */
    if (tg_tok_is(&p->tok, "device") && peek(p)->kind == TG_TK_EQUAL) {
        advance(p);
        advance(p);
        if (!tg_prs_device(p, &device)) return false;
    }
    char *name = tg_prs_scratch_str(p, nm.p, nm.len, &nm);
    if (!name) return false;
    set_pos(p, &nm);
    tg_var *v = state ? tg_state(p->g, name, dt, nd, shape) : tg_input(p->g, name, dt, nd, shape);
    if (!v) return tg_prs_builder_failed(p, nm.line, nm.col);
    v->device = device;
    tg_txt_entry *e = tg_txt_map_add(&p->names, nm.p, nm.len);
    if (!e) return tg_prs_oom(p, nm.line, nm.col);
    e->val = v;
    e->line = nm.line;
    e->col = nm.col;
    return true;
}

/* func := "func" NAME "(" [param ("," param)*] ")" "{" NEWLINE stmt* "}" */
static bool parse_func(parser *p) {
    advance(p); /* func */
    tg_tok nm = p->tok;
    if (nm.kind != TG_TK_NAME) return tg_prs_expected(p, "a function name");
    if (tg_txt_reserved(nm.p, nm.len))
        return FAIL_TOK(p, &nm, TG_ESYNTAX, "'%.*s' is a reserved word", (int)nm.len, nm.p);
    const tg_txt_entry *prev = tg_txt_map_find(&p->funcs, nm.p, nm.len);
    if (prev)
        return FAIL_TOK(p, &nm, TG_ESYNTAX, "function '%.*s' is already defined at %d:%d",
                        (int)nm.len, nm.p, prev->line, prev->col);
    char *name = tg_prs_scratch_str(p, nm.p, nm.len, &nm);
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
    if (!e) return tg_prs_oom(p, nm.line, nm.col);
    e->line = nm.line;
    e->col = nm.col;
    tg_graph *g = tg_graph_new(p->ctx, name);
    if (!g) return tg_prs_oom(p, nm.line, nm.col);
    e->val = g;
    g->def_line = nm.line;
    g->def_col = nm.col;
    if (!tg_vec_push(p->ctx, &p->m->funcs, g)) {
        tg_graph_free(g);
        return tg_prs_oom(p, nm.line, nm.col);
    }
    p->g = g;
    g->file = tg_arena_strdup(&g->arena, p->file);
    if (!g->file) return tg_prs_oom(p, nm.line, nm.col);
    tg_txt_map_fini(&p->names);
    tg_txt_map_init(&p->names, p->ctx);
    tg_txt_map_fini(&p->updated);
    tg_txt_map_init(&p->updated, p->ctx);
    p->indexed = NULL; /* the records live in the previous function's arena */
    advance(p);

    if (!expect(p, TG_TK_LPAREN, "'('")) return false;
    while (!at(p, TG_TK_RPAREN)) {
        if (!at(p, TG_TK_NAME)) return tg_prs_expected(p, "a parameter name or ')'");
        if (!parse_param(p)) return false;
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!expect(p, TG_TK_RPAREN, "',' or ')'")) return false;
    if (p->map_axis && p->map_n == g->inputs.n && /* else the pmap reports the arity */
        tg_graph_set_mapped(g, p->map_axis, p->map_in, p->map_n) != TG_OK)
        return tg_prs_builder_failed(p, nm.line, nm.col);
    if (!expect(p, TG_TK_LBRACE, "'{'")) return false;
    if (!expect(p, TG_TK_NEWLINE, "end of line")) return false;
    for (;;) {
        skip_newlines(p);
        scratch_trim(p);
        if (at(p, TG_TK_RBRACE))
            return FAIL_TOK(p, &p->tok, TG_ESYNTAX, "function '%s' has no 'return'", g->name);
        if (at(p, TG_TK_EOF)) return tg_prs_expected(p, "'}'");
        if (tg_tok_is(&p->tok, "return")) break;
        if (at(p, TG_TK_NAME) && peek(p)->kind == TG_TK_LARROW) {
            if (!parse_update(p)) return false;
            continue;
        }
        if (!parse_binding(p)) return false;
    }
    if (!parse_return(p)) return false;
    skip_newlines(p);
    if (!at(p, TG_TK_RBRACE)) return tg_prs_expected(p, "'}' after 'return'");
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
            ok = tg_prs_fail_at(p, a.line, a.col, TG_ESYNTAX, "%s", lx.msg);
        else if (!ok)
            tg_prs_oom(p, 1, 1);
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
    if (!ok) tg_prs_oom(p, 1, 1);
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
            ok = tg_prs_fail_at(p, first->line, first->col, TG_EINVAL, "call cycle: %s", chain);
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
            if ((ia || an) && !tg_prs_attr_value(p, &a)) return false;
            if (ia) in_axes = a;
            if (an && a.kind == TG_ATTR_STR) *axis = a.s;
        } else {
            npos++;
        }
        skip_arg(p);
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!*axis || npos < 0 || (in_axes.kind == TG_ATTR_INTS && in_axes.n != npos)) return false;
    bool *m = tg_prs_scratch_alloc(p, sizeof *m * (size_t)(npos + 1), pmap);
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
            return tg_prs_fail_at(
                p, f->maps[k].line, f->maps[k].col, TG_EINVAL,
                "this pmap types '%.*s' differently from the pmap at %d:%d (its axis "
                "name or which inputs it maps); the gradient inside '%.*s' is built "
                "for one typing: map it one way, or copy the function",
                (int)f->name.len, f->name.p, f->maps[0].line, f->maps[0].col, (int)f->name.len,
                f->name.p);
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
            tg_prs_expected(p, i + 1 < fo->n ? "'func'" : "'func' or end of file");
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
        tg_prs_fail_at(p, 1, 1, TG_ELIMIT, "text larger than %zu bytes", TG_TEXT_MAX_BYTES);
    } else {
        forder fo = {0};
        if (scan_funcs(p, src, len, &fo)) {
            advance(p);
            skip_newlines(p);
            if (fo.n == 0 || p->tok.p != fo.f[0].start.p)
                tg_prs_expected(p, "'func'");
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
