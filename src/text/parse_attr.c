/* parse_attr.c - the .tg parser's literals and attribute values: numbers and scalars
 * (true, false, none, inf, nan), lists of them, lists of pairs, strings, @functions, the
 * `device=` keyword, and the const(value=, dtype=, shape=) form (parse.h).
 *
 * Invariants:
 *  - A literal keeps its kind as written ('i', 'f', 'b', 'n'): an integer never becomes a
 *    float on the way, `none` stays apart from every integer (tg_attr's none flags), and
 *    a value out of range of its dtype is an error naming the value, never a wrap.
 *  - Lists nest through enter()/leave() like every other bracket.
 *  - Everything read lives in the scratch arena (strings, arrays) or the graph (device
 *    names, constants): nothing here outlives its statement otherwise.
 */
#include "parse.h"

#include <float.h>
#include <math.h>

/* ---- literals ---- */

bool tg_prs_starts_number(const parser *p) {
    return at(p, TG_TK_INT) || at(p, TG_TK_FLOAT) || at(p, TG_TK_MINUS) ||
           tg_tok_is(&p->tok, "inf") || tg_tok_is(&p->tok, "nan");
}

/* number := ["-"] (INT | FLOAT | inf | nan) */
bool tg_prs_number(parser *p, lit *out) {
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
        return tg_prs_expected(p, neg ? "a number after '-'" : "a number");
    }
    advance(p);
    return true;
}

/* scalar := number | true | false | none */
bool tg_prs_scalar(parser *p, lit *out, const char *what) {
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
    if (tg_prs_starts_number(p)) return tg_prs_number(p, out);
    return tg_prs_expected(p, what);
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
        if (!tg_prs_scalar(p, &v[cnt], "a number or ']'")) return false;
        cnt++;
        if (!accept(p, TG_TK_COMMA)) break;
    }
    *items = v;
    *n = cnt;
    if (!expect(p, TG_TK_RBRACKET, "',' or ']'")) return false;
    leave(p);
    return true;
}

/* The value of a `device=` keyword (a string naming a device) at the current token, into
 * *out: the graph's copy of the name (tg_ir_device_intern). */
NOINLINE bool tg_prs_device(parser *p, const char **out) {
    tg_tok t = p->tok;
    if (!at(p, TG_TK_STRING)) return tg_prs_expected(p, "a device name string (\"cpu:1\")");
    char *s = tg_prs_scratch_alloc(p, t.len, &t);
    if (!s) return false;
    tg_tok_string(&t, s);
    if (!tg_ir_device_valid(s))
        return FAIL_TOK(p, &t, TG_EINVAL, "malformed device name \"%s\": expected %s", s,
                        TG_DEVICE_FORMS);
    if (!(*out = tg_ir_device_intern(p->g, s))) return tg_prs_oom(p, t.line, t.col);
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
            if (!tg_prs_scalar(p, &v[cnt], "an integer")) return false;
            if (v[cnt].kind != 'i')
                return tg_prs_fail_at(p, v[cnt].line, v[cnt].col, TG_ESYNTAX,
                                      "expected an integer in a pair");
            cnt++;
            if (k == 0 && !expect(p, TG_TK_COMMA, "',' (a pair is [a, b])")) return false;
        }
        if (!expect(p, TG_TK_RBRACKET, "']' (a pair is [a, b])")) return false;
        if (!accept(p, TG_TK_COMMA)) break;
    }
    if (!expect(p, TG_TK_RBRACKET, "',' or ']'")) return false;
    leave(p);
    int64_t *ints = tg_prs_scratch_alloc(p, sizeof *ints * (size_t)(cnt + 1), &lb);
    if (!ints) return false;
    for (int k = 0; k < cnt; k++) ints[k] = v[k].i;
    a->kind = TG_ATTR_INTS;
    a->ints = ints;
    a->n = cnt;
    return true;
}

/* Value of an attribute: scalar, list, string or @function. */
NOINLINE bool tg_prs_attr_value(parser *p, tg_attr *a) {
    tg_tok t = p->tok;
    if (at(p, TG_TK_STRING)) {
        char *s = tg_prs_scratch_alloc(p, t.len, &t);
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
        if (nm.kind != TG_TK_NAME) return tg_prs_expected(p, "a function name after '@'");
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
                return tg_prs_fail_at(p, items[k].line, items[k].col, TG_ESYNTAX,
                                      "expected a number in a list but found a bool");
            any_float |= items[k].kind == 'f';
        }
        if (any_float) {
            double *v = tg_prs_scratch_alloc(p, sizeof *v * (size_t)(n + 1), &t);
            if (!v) return false;
            for (int k = 0; k < n; k++) {
                if (items[k].kind == 'n')
                    return tg_prs_fail_at(p, items[k].line, items[k].col, TG_ESYNTAX,
                                          "'none' cannot appear in a list of floats");
                v[k] = items[k].kind == 'f' ? items[k].f : (double)items[k].i;
            }
            a->kind = TG_ATTR_FLOATS;
            a->floats = v;
        } else {
            int64_t *v = tg_prs_scratch_alloc(p, sizeof *v * (size_t)(n + 1), &t);
            bool *none = tg_prs_scratch_alloc(p, sizeof *none * (size_t)(n + 1), &t);
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
        tg_prs_starts_number(p)) {
        lit l;
        if (!tg_prs_scalar(p, &l, "an attribute value")) return false;
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
    return tg_prs_expected(p, "an attribute value");
}

/* The value of attribute `name` of the call of optok: a list of pairs where the op's
 * attribute takes one (TG_AS_PAIRS) or the value starts with "[[", any other value
 * otherwise. A list of pairs for an attribute that takes something else is an error here;
 * for a name the op lacks, tg_apply reports it. */
NOINLINE bool tg_prs_keyword_value(parser *p, const tg_tok *optok, tg_attr *a) {
    char *opname = tg_prs_scratch_str(p, optok->p, optok->len, optok);
    if (!opname) return false;
    int opi = tg_op_lookup(opname), type = -1;
    for (int j = 0; opi >= 0 && j < tg_op_table[opi]->nattrs; j++)
        if (strcmp(tg_op_table[opi]->attrs[j].name, a->name) == 0)
            type = tg_op_table[opi]->attrs[j].type;
    bool pairs = at(p, TG_TK_LBRACKET) && peek(p)->kind == TG_TK_LBRACKET;
    if (pairs && type >= 0 && type != TG_AS_PAIRS)
        return FAIL_TOK(p, &p->tok, TG_EINVAL, "%s: attribute '%s' takes no list of pairs", opname,
                        a->name);
    return pairs || type == TG_AS_PAIRS ? parse_pairs(p, a) : tg_prs_attr_value(p, a);
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
NOINLINE bool tg_prs_const(parser *p, const tg_tok *optok) {
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
                if (!tg_prs_scalar(p, &one, "a number or a list")) return false;
                items = &one;
                n = 1;
            }
        } else if (tg_tok_is(&k, "dtype")) {
            dup = have_dtype;
            have_dtype = true;
            dtok = p->tok;
            if (!at(p, TG_TK_STRING)) return tg_prs_expected(p, "a dtype string");
            char *s = tg_prs_scratch_alloc(p, dtok.len, &dtok);
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
            if (!at(p, TG_TK_LBRACKET)) return tg_prs_expected(p, "a list of extents");
            if (!parse_list(p, &dims, &nd)) return false;
            if (nd > TG_MAX_DIMS)
                return FAIL_TOK(p, &st, TG_ELIMIT, "const: more than %d dimensions", TG_MAX_DIMS);
            for (int d = 0; d < nd; d++) {
                if (dims[d].kind != 'i' || dims[d].i < 0)
                    return tg_prs_fail_at(p, dims[d].line, dims[d].col, TG_ESYNTAX,
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
    char *data = tg_prs_scratch_alloc(p, esz * (size_t)(n + 1), &vtok);
    if (!data) return false;
    for (int k = 0; k < n; k++) {
        const lit *l = &items[k];
        void *dst = data + esz * (size_t)k;
        const char *dn = tg_dtype_name(dt);
        if (l->kind == 'n')
            return tg_prs_fail_at(p, l->line, l->col, TG_ETYPE, "const: 'none' is not a value");
        if (dt == TG_DT_BOOL) {
            if (l->kind != 'b')
                return tg_prs_fail_at(p, l->line, l->col, TG_ETYPE,
                                      "const: dtype bool takes true or false");
            tg_store_i64(dst, dt, l->i);
        } else if (l->kind == 'b') {
            return tg_prs_fail_at(p, l->line, l->col, TG_ETYPE, "const: a bool value for dtype %s",
                                  dn);
        } else if (tg_dtype_is_float(dt)) {
            double v = l->kind == 'f' ? l->f : (double)l->i;
            if (dt == TG_DT_F32 && isfinite(v) && fabs(v) > FLT_MAX)
                return tg_prs_fail_at(p, l->line, l->col, TG_ETYPE,
                                      "const: %g is out of range of f32", v);
            tg_store_f64(dst, dt, v);
        } else {
            if (l->kind == 'f')
                return tg_prs_fail_at(p, l->line, l->col, TG_ETYPE,
                                      "const: a float value for integer dtype %s", dn);
            if (!int_fits(dt, l->i))
                return tg_prs_fail_at(p, l->line, l->col, TG_ETYPE,
                                      "const: %lld is out of range of %s", (long long)l->i, dn);
            tg_store_i64(dst, dt, l->i);
        }
    }
    tg_tensor *t = tg_tensor_from_data(p->ctx, dt, ndim, shape, data);
    if (!t) return tg_prs_builder_failed(p, optok->line, optok->col);
    set_pos(p, optok);
    tg_var *v = tg_constant(p->g, t);
    tg_tensor_free(t);
    if (!v) return tg_prs_builder_failed(p, optok->line, optok->col);
    p->outs[0] = v;
    return true;
}
