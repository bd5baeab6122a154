/* parse_expr.c - the .tg parser's expressions: names, literals, calls (ops, functions of
 * the file, fused{...}, vectorize, the derivative forms grad/vjp/jacobian/hessian, the
 * set_subtensor/inc_subtensor sugar) and indexing x[...], each built through the public
 * builders (tg_apply_multi, tg_call, tg_index_apply, ...) (parse.h).
 *
 * Invariants:
 *  - This is the only recursion of the parser: tg_prs_expr -> parse_call / parse_index ->
 *    tg_prs_expr1 -> tg_prs_expr, each level through enter(). The helpers of a call are
 *    NOINLINE so that their frames stay off the recursive path.
 *  - A call's outputs go to p->outs and are read before the next call overwrites them.
 *  - A value made by x[...] is remembered (index_rec, in the graph's arena for the
 *    function's life) so that set_subtensor/inc_subtensor of it update x there.
 */
#include "../ops/fused.h"
#include "parse.h"

/* ---- expressions ---- */

bool tg_prs_expr1(parser *p, tg_var **out) {
    tg_tok start = p->tok;
    int n = 0;
    if (!tg_prs_expr(p, out, &n)) return false;
    if (n != 1)
        return FAIL_TOK(p, &start, TG_ESYNTAX,
                        "'%.*s' gives %d values here, where one is expected (bind them: "
                        "a, b = ...)",
                        (int)start.len, start.p, n);
    return true;
}

static bool literal_var(parser *p, const lit *l, tg_var **out) {
    p->g->line = l->line;
    p->g->col = l->col;
    tg_var *v = l->kind == 'i'   ? tg_literal_int(p->g, l->i)
                : l->kind == 'f' ? tg_literal_float(p->g, l->f)
                                 : tg_literal_bool(p->g, l->i != 0);
    if (!v) return tg_prs_builder_failed(p, l->line, l->col);
    *out = v;
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
        return tg_prs_builder_failed(p, optok->line, optok->col);
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
        return tg_prs_builder_failed(p, optok->line, optok->col);
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
        if (!v) return tg_prs_builder_failed(p, optok->line, optok->col);
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
        tg_var **three = tg_prs_scratch_alloc(p, 3 * sizeof *three, optok);
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
        return tg_prs_builder_failed(p, optok->line, optok->col);
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
    if (!n) return tg_prs_builder_failed(p, optok->line, optok->col);
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
        ax[which] = tg_prs_scratch_alloc(p, sizeof *ax[which] * (size_t)(n + 1), optok);
        if (!ax[which] ||
            !vectorize_axes(p, optok, &attrs[k], n, which == 0 ? "input" : "output", ax[which]))
            return false;
    }
    set_pos(p, optok);
    int cap = TG_MAX_OUTS;
    if (tg_vectorize(p->g, fn, ins, nin, ax[0], ax[1], p->outs, &cap) != TG_OK)
        return tg_prs_builder_failed(p, optok->line, optok->col);
    *nout = cap;
    return true;
}

/* Builds the call whose arguments parse_call read: an op, a function of the file, fused,
 * a derivative form or the subtensor sugar; the outputs go to p->outs[0..*nout). */
static NOINLINE bool build_call(parser *p, const tg_tok *optok, const tg_tok *raw, tg_var **ins,
                                int nin, tg_attr *attrs, int na, int ca, const tg_tok *fpos, int nf,
                                int *nout) {
    char *opname = tg_prs_scratch_str(p, optok->p, optok->len, optok);
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
        return tg_prs_builder_failed(p, optok->line, optok->col);
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
        if (!at(p, TG_TK_LPAREN)) return tg_prs_expected(p, "'(' after fused{...}");
    }
    if (!enter(p, &p->tok)) return false;
    advance(p);
    *nout = 1;
    if (tg_tok_is(&optok, "const")) return tg_prs_const(p, &optok);

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
            if (!tg_prs_device(p, &device)) return false;
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
            *a = (tg_attr){.name = tg_prs_scratch_str(p, t.p, t.len, &t)};
            if (!a->name) return false;
            advance(p);
            advance(p);
            if (!tg_prs_keyword_value(p, &optok, a)) return false;
            na++;
            keywords = true;
        } else if (keywords) {
            return FAIL_TOK(p, &t, TG_ESYNTAX, "positional argument after keyword argument");
        } else if (t.kind == TG_TK_AT) {
            advance(p);
            tg_tok nm = p->tok;
            if (nm.kind != TG_TK_NAME) return tg_prs_expected(p, "a function name after '@'");
            if (!tg_txt_map_find(&p->all_funcs, nm.p, nm.len))
                return FAIL_TOK(p, &nm, TG_ENAME, "unknown function '%.*s'", (int)nm.len, nm.p);
            if (!GROW(p, fpos, cf, nf, &t)) return false;
            fpos[nf++] = nm;
            advance(p);
        } else {
            if (!GROW(p, ins, cin, nin, &t)) return false;
            if (!tg_prs_expr1(p, &ins[nin])) return false;
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
    if (!r) return tg_prs_oom(p, at_tok->line, at_tok->col);
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
            if (!tg_prs_expr1(p, &it->array)) return false;
            n++;
            if (!accept(p, TG_TK_COMMA)) break;
            continue;
        }
        int part = 0;
        bool any = false;
        for (;;) {
            if (at(p, TG_TK_INT) || at(p, TG_TK_MINUS)) {
                lit l;
                if (!tg_prs_number(p, &l)) return false;
                if (l.kind != 'i')
                    return tg_prs_fail_at(p, l.line, l.col, TG_ESYNTAX,
                                          "an index must be an integer");
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
        if (!any) return tg_prs_expected(p, "an index");
        if (part == 0) it->slice = (tg_slice){.start = it->slice.start, .is_index = true};
        n++;
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (n == 0) return tg_prs_expected(p, "an index");
    if (!expect(p, TG_TK_RBRACKET, "',' or ']'")) return false;
    leave(p);
    set_pos(p, &lb);
    tg_var *v = tg_index_apply(p->g, x, items, n);
    if (!v) return tg_prs_builder_failed(p, lb.line, lb.col);
    p->outs[0] = v;
    return index_remember(p, v, x, items, n, &lb);
}

bool tg_prs_expr(parser *p, tg_var **first, int *nout) {
    tg_tok t = p->tok;
    *nout = 1;
    if (t.kind == TG_TK_NAME && (peek(p)->kind == TG_TK_LPAREN ||
                                 (tg_tok_is(&t, "fused") && peek(p)->kind == TG_TK_LBRACE))) {
        if (!parse_call(p, nout)) return false;
        *first = p->outs[0];
    } else if (tg_tok_is(&t, "true") || tg_tok_is(&t, "false") || tg_prs_starts_number(p)) {
        lit l;
        if (!tg_prs_scalar(p, &l, "an expression") || !literal_var(p, &l, first)) return false;
    } else if (t.kind == TG_TK_NAME) {
        if (tg_txt_reserved(t.p, t.len))
            return FAIL_TOK(p, &t, TG_ESYNTAX, "'%.*s' cannot be used as a value", (int)t.len, t.p);
        const tg_txt_entry *e = tg_txt_map_find(&p->names, t.p, t.len);
        if (!e) return FAIL_TOK(p, &t, TG_ENAME, "unknown name '%.*s'", (int)t.len, t.p);
        *first = e->val;
        advance(p);
    } else {
        return tg_prs_expected(p, "an expression");
    }
    while (at(p, TG_TK_LBRACKET)) {
        if (*nout != 1)
            return FAIL_TOK(p, &p->tok, TG_ESYNTAX, "cannot index %d values at once", *nout);
        if (!parse_index(p, *first)) return false;
        *first = p->outs[0];
    }
    return true;
}
