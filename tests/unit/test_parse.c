/* test_parse.c - the .tg text format: lexer tokens and positions, every construct of the
 * grammar, attributes of every kind, the const form, indexing, error messages with their
 * file:line:col, the nesting limit, a 100,000-statement chain, printing (round trips
 * print(parse(print(parse(x)))) == print(parse(x))), Graphviz output and module files.
 * Runs from tests/ (ctest's working directory), where the parse/ example files live. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/text.h"
#include "ops/ops.h"

/* ---- helpers ---- */

static tg_module *parse_ok(const char *src) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "t.tg", &m);
    if (st != TG_OK) print_error("unexpected parse error: %s\nin:\n%s\n", tg_last_error(), src);
    assert_int_equal(st, TG_OK);
    assert_non_null(m);
    return m;
}

static void parse_err(const char *src, tg_status want_st, const char *want) {
    tg_module *m = (tg_module *)(uintptr_t)1;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "t.tg", &m);
    if (st == TG_OK) {
        print_error("expected error '%s' but the parse succeeded:\n%s\n", want, src);
        tg_module_free(m);
        fail();
    }
    assert_null(m);
    if (strcmp(tg_last_error(), want) != 0)
        print_error("got:  %s\nwant: %s\n", tg_last_error(), want);
    assert_string_equal(tg_last_error(), want);
    if (want_st != TG_OK) assert_int_equal(st, want_st);
}

/* An error raised by a builder: its position and op are ours, the wording is the op's. */
static void parse_err_prefix(const char *src, const char *prefix) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "t.tg", &m);
    assert_int_not_equal(st, TG_OK);
    assert_null(m);
    if (strncmp(tg_last_error(), prefix, strlen(prefix)) != 0)
        print_error("got:  %s\nwant: %s...\n", tg_last_error(), prefix);
    assert_true(strncmp(tg_last_error(), prefix, strlen(prefix)) == 0);
}

static void parse_err_has(const char *src, const char *prefix, const char *part) {
    parse_err_prefix(src, prefix);
    if (!strstr(tg_last_error(), part))
        print_error("got: %s\nwant: ...%s...\n", tg_last_error(), part);
    assert_non_null(strstr(tg_last_error(), part));
}

/* The error of src, whatever its status. */
static void parse_msg(const char *src, const char *want) { parse_err(src, TG_OK, want); }

static char *print_module(const tg_module *m) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(tg_module_print(m, f), TG_OK);
    fclose(f);
    return buf;
}

static char *print_graph(const tg_graph *g, bool dot) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(dot ? tg_graph_print_dot(g, f) : tg_graph_print(g, f), TG_OK);
    fclose(f);
    return buf;
}

static char *reprint(const char *src) {
    tg_module *m = parse_ok(src);
    char *s = print_module(m);
    tg_module_free(m);
    return s;
}

/* Structural equality of two graphs in print order: ops, types, literal values. */
static void assert_same_graph(const tg_graph *a, const tg_graph *b) {
    assert_int_equal(a->inputs.n, b->inputs.n);
    assert_int_equal(a->outputs.n, b->outputs.n);
    for (int i = 0; i < a->inputs.n; i++) {
        const tg_var *x = a->inputs.items[i], *y = b->inputs.items[i];
        assert_true(tg_type_equal(&x->type, &y->type));
        assert_string_equal(x->name, y->name);
    }
    int na, nb;
    tg_node **oa = tg_ir_toposort(a, &na), **ob = tg_ir_toposort(b, &nb);
    assert_non_null(oa);
    assert_non_null(ob);
    assert_int_equal(na, nb);
    for (int i = 0; i < na; i++) {
        assert_int_equal(oa[i]->op, ob[i]->op);
        assert_int_equal(oa[i]->nin, ob[i]->nin);
        assert_int_equal(oa[i]->nout, ob[i]->nout);
        for (int k = 0; k < oa[i]->nout; k++)
            assert_true(tg_type_equal(&oa[i]->out[k]->type, &ob[i]->out[k]->type));
        for (int k = 0; k < oa[i]->nin; k++) {
            const tg_var *x = oa[i]->in[k], *y = ob[i]->in[k];
            assert_int_equal(x->kind, y->kind);
            assert_true(tg_type_equal(&x->type, &y->type));
            if (x->kind == TG_VAR_NODE) assert_int_equal(x->index, y->index);
        }
    }
    for (int i = 0; i < a->outputs.n; i++) {
        const tg_var *x = a->outputs.items[i], *y = b->outputs.items[i];
        assert_true(tg_type_equal(&x->type, &y->type));
    }
    tg_mem_free(a->ctx, oa, sizeof *oa * (size_t)(a->nodes.n + 1));
    tg_mem_free(b->ctx, ob, sizeof *ob * (size_t)(b->nodes.n + 1));
}

/* parse -> print -> parse -> print: the two texts agree and so do the graphs. */
static void roundtrip(const char *src) {
    tg_module *m1 = parse_ok(src);
    char *t1 = print_module(m1);
    tg_module *m2 = parse_ok(t1);
    char *t2 = print_module(m2);
    if (strcmp(t1, t2) != 0) print_error("first print:\n%s\nsecond print:\n%s\n", t1, t2);
    assert_string_equal(t1, t2);
    assert_int_equal(tg_module_func_count(m1), tg_module_func_count(m2));
    for (int i = 0; i < tg_module_func_count(m1); i++)
        assert_same_graph(tg_module_func(m1, i), tg_module_func(m2, i));
    free(t1);
    free(t2);
    tg_module_free(m1);
    tg_module_free(m2);
}

static const tg_node *output_node(const tg_graph *g, int i) {
    const tg_var *v = tg_graph_output(g, i);
    assert_non_null(v);
    assert_int_equal(v->kind, TG_VAR_NODE);
    return v->node;
}

static const tg_aval *attr_of(const tg_node *n, const char *name) {
    const tg_op_def *def = tg_op_table[n->op];
    for (int j = 0; j < def->nattrs; j++)
        if (strcmp(def->attrs[j].name, name) == 0) return &n->attrs[j];
    fail_msg("no attribute %s", name);
    return NULL;
}

/* In `want`, NONE_MARK expects a `none` entry; every other number that value, not none. */
#define NONE_MARK (INT64_MAX - 1)

static void assert_ints(const tg_aval *a, const int64_t *want, int n) {
    assert_int_equal(a->kind, TG_ATTR_INTS);
    assert_int_equal(a->n, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(tg_aval_none_at(a, i), want[i] == NONE_MARK);
        if (want[i] != NONE_MARK) assert_true(a->ints[i] == want[i]);
    }
}

/* ---- lexer ---- */

typedef struct {
    tg_tok_kind kind;
    int line, col;
    const char *text;
} tokspec;

static void lex_expect(const char *src, const tokspec *want, int n) {
    tg_lexer lx;
    tg_lex_init(&lx, src, strlen(src));
    for (int i = 0; i < n; i++) {
        tg_tok t;
        tg_lex_next(&lx, &t);
        if (t.kind != want[i].kind || t.line != want[i].line || t.col != want[i].col)
            print_error("token %d: got kind %d at %d:%d '%.*s', want kind %d at %d:%d\n", i, t.kind,
                        t.line, t.col, (int)t.len, t.p, want[i].kind, want[i].line, want[i].col);
        assert_int_equal(t.kind, want[i].kind);
        assert_int_equal(t.line, want[i].line);
        assert_int_equal(t.col, want[i].col);
        if (want[i].text) {
            assert_int_equal(t.len, strlen(want[i].text));
            assert_memory_equal(t.p, want[i].text, t.len);
        }
    }
    tg_lex_fini(&lx);
}

static void test_lex_tokens(void **state) {
    (void)state;
    const char *src = "func f(x: f32[?,3]) { # comment\n"
                      "  y = g(x, -1, .5, 2., 1e-3, \"a\\\"b\")  \n"
                      "  @ -> }";
    const tokspec want[] = {
        {TG_TK_NAME, 1, 1, "func"},   {TG_TK_NAME, 1, 6, "f"},
        {TG_TK_LPAREN, 1, 7, "("},    {TG_TK_NAME, 1, 8, "x"},
        {TG_TK_COLON, 1, 9, ":"},     {TG_TK_NAME, 1, 11, "f32"},
        {TG_TK_LBRACKET, 1, 14, "["}, {TG_TK_QUESTION, 1, 15, "?"},
        {TG_TK_COMMA, 1, 16, ","},    {TG_TK_INT, 1, 17, "3"},
        {TG_TK_RBRACKET, 1, 18, "]"}, {TG_TK_RPAREN, 1, 19, ")"},
        {TG_TK_LBRACE, 1, 21, "{"},   {TG_TK_NEWLINE, 1, 32, NULL},
        {TG_TK_NAME, 2, 3, "y"},      {TG_TK_EQUAL, 2, 5, "="},
        {TG_TK_NAME, 2, 7, "g"},      {TG_TK_LPAREN, 2, 8, "("},
        {TG_TK_NAME, 2, 9, "x"},      {TG_TK_COMMA, 2, 10, ","},
        {TG_TK_MINUS, 2, 12, "-"},    {TG_TK_INT, 2, 13, "1"},
        {TG_TK_COMMA, 2, 14, ","},    {TG_TK_FLOAT, 2, 16, ".5"},
        {TG_TK_COMMA, 2, 18, ","},    {TG_TK_FLOAT, 2, 20, "2."},
        {TG_TK_COMMA, 2, 22, ","},    {TG_TK_FLOAT, 2, 24, "1e-3"},
        {TG_TK_COMMA, 2, 28, ","},    {TG_TK_STRING, 2, 30, "\"a\\\"b\""},
        {TG_TK_RPAREN, 2, 36, ")"},   {TG_TK_NEWLINE, 2, 39, NULL},
        {TG_TK_AT, 3, 3, "@"},        {TG_TK_ARROW, 3, 5, "->"},
        {TG_TK_RBRACE, 3, 8, "}"},    {TG_TK_EOF, 3, 9, NULL},
        {TG_TK_EOF, 3, 9, NULL},
    };
    lex_expect(src, want, (int)TG_COUNTOF(want));
}

static void test_lex_values(void **state) {
    (void)state;
    const char *src =
        "18446744073709551615 18446744073709551616 1e-3 .5 2.5E+2 \"q\\n\\t\\\\\\x41\"";
    tg_lexer lx;
    tg_tok t;
    tg_lex_init(&lx, src, strlen(src));
    tg_lex_next(&lx, &t);
    assert_int_equal(t.kind, TG_TK_INT);
    assert_true(t.u == UINT64_MAX);
    tg_lex_next(&lx, &t);
    assert_true(t.u == UINT64_MAX); /* saturated */
    tg_lex_next(&lx, &t);
    assert_true(t.f == 1e-3);
    tg_lex_next(&lx, &t);
    assert_true(t.f == 0.5);
    tg_lex_next(&lx, &t);
    assert_true(t.f == 250.0);
    tg_lex_next(&lx, &t);
    assert_int_equal(t.kind, TG_TK_STRING);
    char buf[32];
    tg_tok_string(&t, buf);
    assert_string_equal(buf, "q\n\t\\A");
    tg_lex_fini(&lx);
}

static void test_lex_newlines_in_brackets(void **state) {
    (void)state;
    /* newlines inside ( ) and [ ] are not tokens; inside { } they are */
    const tokspec want[] = {
        {TG_TK_NAME, 1, 1, "a"},      {TG_TK_LPAREN, 1, 2, NULL},  {TG_TK_NAME, 2, 1, "b"},
        {TG_TK_LBRACKET, 2, 2, NULL}, {TG_TK_INT, 3, 1, "1"},      {TG_TK_RBRACKET, 3, 2, NULL},
        {TG_TK_RPAREN, 4, 1, NULL},   {TG_TK_NEWLINE, 4, 2, NULL}, {TG_TK_LBRACE, 5, 1, NULL},
        {TG_TK_NEWLINE, 5, 2, NULL},  {TG_TK_RBRACE, 6, 1, NULL},
    };
    lex_expect("a(\nb[\n1]\n)\n{\n}", want, (int)TG_COUNTOF(want));
}

static void test_lex_errors(void **state) {
    (void)state;
    struct {
        const char *src;
        int line, col;
        const char *msg;
    } cases[] = {
        {"x = \"abc", 1, 5, "unterminated string"},
        {"x = \"abc\ny\"", 1, 5, "unterminated string"},
        {"\n  \"a\\q\"", 2, 5, "unknown escape '\\' followed by 'q' in a string"},
        {"a $", 1, 3, "unexpected character '$'"},
        {"a\x01", 1, 2, "unexpected character byte 0x01"},
        {"12abc", 1, 1, "malformed number '12abc'"},
        {"1e+", 1, 1, "malformed number '1e+'"},
        {"1.2.3", 1, 1, "malformed number '1.2.3'"},
        {"1e999", 1, 1, "float literal '1e999' is out of range"},
        {"\"\\x0\"", 1, 2, "'\\x' needs two hex digits"},
        {"\"\\x00\"", 1, 2, "'\\x00' is not allowed in a string"},
    };
    for (size_t i = 0; i < TG_COUNTOF(cases); i++) {
        tg_lexer lx;
        tg_tok t;
        tg_lex_init(&lx, cases[i].src, strlen(cases[i].src));
        do tg_lex_next(&lx, &t);
        while (t.kind != TG_TK_ERROR && t.kind != TG_TK_EOF);
        assert_int_equal(t.kind, TG_TK_ERROR);
        assert_string_equal(lx.msg, cases[i].msg);
        assert_int_equal(t.line, cases[i].line);
        assert_int_equal(t.col, cases[i].col);
        tg_lex_next(&lx, &t); /* sticky */
        assert_int_equal(t.kind, TG_TK_ERROR);
        tg_lex_fini(&lx);
    }
}

static void test_float_format(void **state) {
    (void)state;
    struct {
        double x;
        bool single;
        const char *want;
    } cases[] = {
        {1.0, false, "1.0"},
        {0.1, false, "0.1"},
        {-0.5, false, "-0.5"},
        {1e300, false, "1e+300"},
        {-0.0, false, "-0.0"},
        {INFINITY, false, "inf"},
        {-INFINITY, false, "-inf"},
        {NAN, false, "nan"},
        {(double)0.1f, true, "0.1"},
        {1.0 / 3.0, false, "0.3333333333333333"},
        {123456789.0, false, "123456789.0"},
    };
    for (size_t i = 0; i < TG_COUNTOF(cases); i++) {
        char buf[TG_FLOAT_STR_MAX];
        tg_format_float(cases[i].x, cases[i].single, buf, sizeof buf);
        assert_string_equal(buf, cases[i].want);
    }
}

/* ---- parsing ---- */

static void test_parse_basic(void **state) {
    (void)state;
    tg_module *m = parse_ok("# a model\n"
                            "func mlp(x: f32[?,784], W: f32[784,256], b: f32[256]) {\n"
                            "  h = tanh(add(dot(x, W), b))   # nested calls\n"
                            "\n"
                            "  return h\n"
                            "}\n");
    assert_int_equal(tg_module_func_count(m), 1);
    tg_graph *g = tg_module_func(m, 0);
    assert_ptr_equal(tg_module_find(m, "mlp"), g);
    assert_null(tg_module_find(m, "nope"));
    assert_null(tg_module_func(m, 1));
    assert_string_equal(tg_graph_name(g), "mlp");
    assert_int_equal(tg_graph_input_count(g), 3);
    assert_int_equal(tg_var_dim(tg_graph_input(g, 0), 0), TG_DIM_UNKNOWN);
    assert_int_equal(tg_var_dim(tg_graph_input(g, 0), 1), 784);
    assert_string_equal(tg_var_name(tg_graph_input(g, 1)), "W");
    assert_int_equal(tg_graph_output_count(g), 1);
    tg_var *h = tg_graph_output(g, 0);
    assert_string_equal(tg_var_name(h), "h");
    assert_int_equal(tg_var_dtype(h), TG_DT_F32);
    assert_int_equal(tg_var_ndim(h), 2);
    assert_int_equal(tg_var_dim(h, 1), 256);
    const tg_node *n = h->node;
    assert_int_equal(n->op, TG_OP_TANH);
    assert_int_equal(n->line, 3);
    assert_int_equal(n->col, 7);
    assert_int_equal(n->in[0]->node->op, TG_OP_ADD);
    assert_int_equal(n->in[0]->node->col, 12);
    assert_int_equal(n->in[0]->node->in[0]->node->op, TG_OP_DOT);
    assert_int_equal(tg_graph_status(g), TG_OK);
    assert_int_equal(tg_graph_verify(g), TG_OK);
    tg_module_free(m);
}

static void test_parse_forms(void **state) {
    (void)state;
    /* scalars, no parameters, aliases, multi-line calls, trailing commas, CRLF, types */
    tg_module *m = parse_ok("func f(s: f64[], b: bool[2], i: i8[1], u: u8[3]) {\r\n"
                            "  y = s\r\n"
                            "  z = add(\n"
                            "        y,\n"
                            "        1,\n"
                            "  )\n"
                            "  return z, b, 2\n"
                            "}\n"
                            "func g() {\n"
                            "  return true\n"
                            "}");
    tg_graph *f = tg_module_find(m, "f");
    assert_int_equal(tg_graph_output_count(f), 3);
    assert_int_equal(tg_var_ndim(tg_graph_output(f, 0)), 0);
    assert_int_equal(tg_var_dtype(tg_graph_output(f, 0)), TG_DT_F64);
    assert_ptr_equal(tg_graph_output(f, 1), tg_graph_input(f, 1));
    tg_var *two = tg_graph_output(f, 2);
    assert_int_equal(two->kind, TG_VAR_CONST);
    assert_int_equal(two->lit, 'i');
    assert_int_equal(tg_var_dtype(tg_graph_input(f, 3)), TG_DT_U8);
    tg_graph *g = tg_module_find(m, "g");
    assert_int_equal(tg_graph_input_count(g), 0);
    assert_int_equal(tg_graph_output(g, 0)->lit, 'b');
    tg_module_free(m);
}

static void test_parse_literals(void **state) {
    (void)state;
    tg_module *m = parse_ok("func f(x: f32[3], k: i64[]) {\n"
                            "  a = mul(x, -2)\n"
                            "  b = add(a, -0.5)\n"
                            "  c = maximum(b, -inf)\n"
                            "  d = sub(k, -9223372036854775808)\n"
                            "  e = add(k, 9223372036854775807)\n"
                            "  return c, d, e, nan, - 1.5e3\n"
                            "}\n");
    tg_graph *g = tg_module_func(m, 0);
    const tg_node *c = output_node(g, 0);
    const tg_node *b = c->in[0]->node, *a = b->in[0]->node;
    /* weak literals adopted x's dtype (NEP 50) */
    assert_int_equal(tg_var_dtype(tg_graph_output(g, 0)), TG_DT_F32);
    assert_true(tg_tensor_get_f64(a->in[1]->value, 0) == -2.0);
    assert_int_equal(a->in[1]->lit, 'i');
    assert_true(tg_tensor_get_f64(b->in[1]->value, 0) == -0.5);
    assert_int_equal(b->in[1]->lit, 'f');
    assert_true(isinf(tg_tensor_get_f64(c->in[1]->value, 0)));
    assert_true(tg_tensor_get_f64(c->in[1]->value, 0) < 0);
    const tg_node *d = output_node(g, 1);
    assert_true(tg_load_i64(tg_tensor_data(d->in[1]->value), TG_DT_I64) == INT64_MIN);
    const tg_node *e = output_node(g, 2);
    assert_true(tg_load_i64(tg_tensor_data(e->in[1]->value), TG_DT_I64) == INT64_MAX);
    assert_true(isnan(tg_tensor_get_f64(tg_graph_output(g, 3)->value, 0)));
    assert_true(tg_tensor_get_f64(tg_graph_output(g, 4)->value, 0) == -1500.0);
    tg_module_free(m);
}

static void test_parse_indexing(void **state) {
    (void)state;
    tg_module *m = parse_ok("func f(x: f32[5,6,7]) {\n"
                            "  y = x[1:, ::-1, 0]\n"
                            "  z = neg(x)[-1][:-2:2]\n"
                            "  w = x[:, 2:4,]\n"
                            "  return y, z, w\n"
                            "}\n");
    tg_graph *g = tg_module_func(m, 0);
    const int64_t N = NONE_MARK;
    const tg_node *y = output_node(g, 0);
    assert_int_equal(y->op, TG_OP_SLICE);
    assert_int_equal(y->col, 8);
    assert_ints(attr_of(y, "starts"), (int64_t[]){1, N, 0}, 3);
    assert_ints(attr_of(y, "stops"), (int64_t[]){N, N, N}, 3);
    assert_ints(attr_of(y, "steps"), (int64_t[]){N, -1, N}, 3);
    assert_ints(attr_of(y, "index"), (int64_t[]){0, 0, 1}, 3);
    assert_int_equal(tg_var_ndim(tg_graph_output(g, 0)), 2);
    assert_int_equal(tg_var_dim(tg_graph_output(g, 0), 0), 4);
    assert_int_equal(tg_var_dim(tg_graph_output(g, 0), 1), 6);
    const tg_node *z = output_node(g, 1);
    assert_ints(attr_of(z, "starts"), (int64_t[]){N}, 1);
    assert_ints(attr_of(z, "stops"), (int64_t[]){-2}, 1);
    assert_ints(attr_of(z, "steps"), (int64_t[]){2}, 1);
    const tg_node *z0 = z->in[0]->node;
    assert_int_equal(z0->op, TG_OP_SLICE);
    assert_ints(attr_of(z0, "starts"), (int64_t[]){-1}, 1);
    assert_ints(attr_of(z0, "index"), (int64_t[]){1}, 1);
    assert_int_equal(z0->in[0]->node->op, TG_OP_NEG);
    assert_int_equal(tg_var_dim(tg_graph_output(g, 1), 0), 2);
    const tg_node *w = output_node(g, 2);
    assert_ints(attr_of(w, "starts"), (int64_t[]){N, 2}, 2);
    assert_ints(attr_of(w, "stops"), (int64_t[]){N, 4}, 2);
    tg_module_free(m);
}

static void test_parse_attributes(void **state) {
    (void)state;
    tg_module *m = parse_ok("func f(x: f32[2,3,4]) {\n"
                            "  a = sum(x, axis=[0, -1], keepdims=true)\n"
                            "  b = sum(x, axis=none)\n"
                            "  c = argmax(x, axis=1)\n"
                            "  d = cast(x, dtype=\"f64\")\n"
                            "  e = reshape(x, shape=[4, -1])\n"
                            "  f = transpose(x, axes=[2, 0, 1])\n"
                            "  g = sum(x, axis=1)\n"
                            "  return a, b, c, d, e, f, g\n"
                            "}\n");
    tg_graph *g = tg_module_func(m, 0);
    const tg_node *a = output_node(g, 0);
    assert_ints(attr_of(a, "axis"), (int64_t[]){0, -1}, 2);
    assert_int_equal(attr_of(a, "keepdims")->i, 1);
    assert_int_equal(attr_of(output_node(g, 1), "axis")->kind, TG_ATTR_NONE);
    assert_int_equal(attr_of(output_node(g, 2), "axis")->kind, TG_ATTR_INT);
    assert_int_equal(attr_of(output_node(g, 2), "axis")->i, 1);
    assert_int_equal(tg_var_dtype(tg_graph_output(g, 3)), TG_DT_F64);
    assert_int_equal(tg_var_dim(tg_graph_output(g, 4), 1), 6);
    assert_int_equal(tg_var_dim(tg_graph_output(g, 5), 0), 4);
    assert_ints(attr_of(output_node(g, 6), "axis"), (int64_t[]){1}, 1);
    tg_module_free(m);
    /* the kinds the parser builds, seen through the builder's messages ("got ...") */
    parse_err_has("func f(x: f32[2]) {\n  a = sum(x, axis=[0.5, 1])\n  return a\n}\n",
                  "t.tg:2:7: sum: ", "got a list of floats");
    parse_err_has("func f(x: f32[2]) {\n  a = sum(x, axis=1.5)\n  return a\n}\n",
                  "t.tg:2:7: sum: ", "got a float");
    parse_err_has("func f(x: f32[2]) {\n  a = sum(x, axis=\"0\")\n  return a\n}\n",
                  "t.tg:2:7: sum: ", "got a string");
    parse_err_has("func f(x: f32[2]) {\n  a = sum(x, keepdims=1)\n  return a\n}\n",
                  "t.tg:2:7: sum: ", "got an int");
    parse_err_has("func f(x: f32[2]) {\n  a = sum(x, keepdims=@g)\n  return a\n}\n"
                  "func g(x: f32[2]) {\n  return x\n}\n",
                  "t.tg:2:7: sum: ", "got a function");
    parse_err_has("func f(x: f32[2]) {\n  a = sum(x, keepdims=[])\n  return a\n}\n",
                  "t.tg:2:7: sum: ", "got a list of ints");
    parse_err_has("func f(x: f32[2]) {\n  a = sum(x, keepdims=none)\n  return a\n}\n",
                  "t.tg:2:7: sum: ", "got none");
    /* none in an int list is kept apart from the integers: refused where the op takes
     * no none entries (it is never read as INT64_MIN) */
    parse_err_has("func f(x: f32[2]) {\n  a = sum(x, axis=[none])\n  return a\n}\n",
                  "t.tg:2:7: sum: ", "got a list holding none");
    parse_err_has("func f(x: f32[2]) {\n  a = sum(x, axis=[-9223372036854775808])\n"
                  "  return a\n}\n",
                  "t.tg:2:7: sum: ", "-9223372036854775808");
    parse_msg("func f(x: f32[2]) {\n  a = sum(x, axis=[true])\n  return a\n}\n",
              "t.tg:2:20: expected a number in a list but found a bool");
    parse_msg("func f(x: f32[2]) {\n  a = sum(x, axis=[1.5, none])\n  return a\n}\n",
              "t.tg:2:25: 'none' cannot appear in a list of floats");
}

static void test_parse_const(void **state) {
    (void)state;
    tg_module *m = parse_ok("func f(x: f32[3]) {\n"
                            "  c = const(value=2.5, dtype=\"f64\")\n"
                            "  v = const(value=[1, 2, 3], dtype=\"i32\", shape=[3])\n"
                            "  m = const(value=[1, 2, 3, 4, 5, 6], dtype=\"f32\", shape=[2, 3])\n"
                            "  b = const(value=[true, false])\n"
                            "  d = const(value=[1, 2.5])\n"
                            "  e = const(value=[], dtype=\"u8\")\n"
                            "  return add(x, c), v, m, b, d, e, const(value=-7)\n"
                            "}\n");
    tg_graph *g = tg_module_func(m, 0);
    const tg_var *c = output_node(g, 0)->in[1];
    assert_int_equal(c->kind, TG_VAR_CONST);
    assert_int_equal(c->lit, 0);
    assert_int_equal(tg_var_dtype(c), TG_DT_F64);
    assert_int_equal(tg_var_ndim(c), 0);
    assert_string_equal(tg_var_name(c), "c");
    assert_true(tg_tensor_get_f64(c->value, 0) == 2.5);
    assert_int_equal(tg_var_dtype(tg_graph_output(g, 0)), TG_DT_F64); /* strong: promotes */
    const tg_var *v = tg_graph_output(g, 1);
    assert_int_equal(tg_var_dtype(v), TG_DT_I32);
    assert_int_equal(tg_var_dim(v, 0), 3);
    assert_true(tg_tensor_get_f64(v->value, 2) == 3.0);
    const tg_var *mm = tg_graph_output(g, 2);
    assert_int_equal(tg_var_ndim(mm), 2);
    assert_true(tg_tensor_get_f64(mm->value, 5) == 6.0);
    assert_int_equal(tg_var_dtype(tg_graph_output(g, 3)), TG_DT_BOOL);
    assert_int_equal(tg_var_dtype(tg_graph_output(g, 4)), TG_DT_F64);
    assert_int_equal(tg_var_dim(tg_graph_output(g, 5), 0), 0);
    assert_int_equal(tg_var_dtype(tg_graph_output(g, 6)), TG_DT_I64);
    tg_module_free(m);

    const char *hdr = "func f() {\n  c = ";
    struct {
        const char *body;
        const char *msg;
    } cases[] = {
        {"const(value=1.5, dtype=\"i32\")",
         "t.tg:2:19: const: a float value for integer dtype i32"},
        {"const(value=300, dtype=\"u8\")", "t.tg:2:19: const: 300 is out of range of u8"},
        {"const(value=[1, 2], dtype=\"f32\", shape=[3])",
         "t.tg:2:19: const: 2 values cannot fill shape with 3 elements"},
        {"const(value=1, dtype=\"f16\")", "t.tg:2:28: unknown dtype \"f16\""},
        {"const(dtype=\"f32\")", "t.tg:2:7: const: missing attribute 'value'"},
        {"const(value=1, value=2)", "t.tg:2:22: const: attribute 'value' given twice"},
        {"const(1)", "t.tg:2:13: const takes only keyword arguments (value=, dtype=, shape=)"},
        {"const(value=1, color=2)",
         "t.tg:2:22: const: unknown attribute 'color' (expected value, dtype, shape)"},
        {"const(value=[1, true])", "t.tg:2:23: const: a bool value for dtype i64"},
        {"const(value=1, dtype=\"bool\")", "t.tg:2:19: const: dtype bool takes true or false"},
        {"const(value=1e300, dtype=\"f32\")", "t.tg:2:19: const: 1e+300 is out of range of f32"},
        {"const(value=\"a\")", "t.tg:2:19: expected a number or a list but found string \"a\""},
        {"const(value=[[1]])", "t.tg:2:20: expected a number or ']' but found '['"},
        {"const(value=1, shape=[-1])", "t.tg:2:29: const: an extent must be an integer >= 0"},
    };
    for (size_t i = 0; i < TG_COUNTOF(cases); i++) {
        char src[256];
        snprintf(src, sizeof src, "%s%s\n  return c\n}\n", hdr, cases[i].body);
        parse_msg(src, cases[i].msg);
    }
}

static void test_parse_tuple_and_funcs(void **state) {
    (void)state;
    if (tg_op_lookup("split") < 0) skip();
    tg_module *m = parse_ok("func main(x: f32[6]) {\n"
                            "  a, b, c = split(x, sections=3)\n"
                            "  return c, a\n"
                            "}\n");
    tg_graph *g = tg_module_func(m, 0);
    assert_ptr_equal(tg_graph_output(g, 0)->node, tg_graph_output(g, 1)->node);
    assert_int_equal(tg_graph_output(g, 0)->index, 2);
    assert_string_equal(tg_var_name(tg_graph_output(g, 0)), "c");
    char *text = print_module(m);
    assert_non_null(strstr(text, "    a, b, c = split(x, sections=3)\n    return c, a\n"));
    free(text);
    tg_module_free(m);
    roundtrip("func main(x: f32[6]) {\n  a, b, c = split(x, sections=3)\n"
              "  d, e = split(neg(b), sections=2)\n  return e, c\n}\n");
    parse_err("func f(x: f32[6]) {\n  return split(x, sections=3)\n}", TG_ESYNTAX,
              "t.tg:2:10: 'split' gives 3 values here, where one is expected (bind them: a, b = "
              "...)");
    parse_err("func f(x: f32[6]) {\n  y = neg(split(x, sections=2))\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:11: 'split' gives 2 values here, where one is expected (bind them: a, b = "
              "...)");
    parse_err("func f(x: f32[6]) {\n  y = split(x, sections=2)[0]\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:27: cannot index 2 values at once");
    parse_err("func f(x: f32[6]) {\n  a, b, c = split(x, sections=2)\n  return a\n}", TG_ESYNTAX,
              "t.tg:2:13: 'split' gives 2 values but 3 names are bound");
    parse_err("func f(x: f32[6]) {\n  a = split(x, sections=2)\n  return a\n}", TG_ESYNTAX,
              "t.tg:2:7: 'split' gives 2 values but 1 name is bound");
}

/* The names outputs go by: those written in `return`, kept per position through clone and
 * the rewrite pipeline, even where one variable stands for several outputs. */
static void assert_out_names(const tg_graph *g, const char *a, const char *b) {
    assert_int_equal(tg_graph_output_count(g), 2);
    if (a) assert_string_equal(tg_graph_output_name(g, 0), a);
    if (!a) assert_null(tg_graph_output_name(g, 0));
    assert_string_equal(tg_graph_output_name(g, 1), b);
}

static void test_output_names(void **state) {
    (void)state;
    static const char *const src[] = {
        /* grad gives one variable for both gradients */
        "func main(x0: f64[3], x1: f64[3], w: f64[3]) {\n"
        "  loss = sum(mul(add(x0, x1), w))\n"
        "  g_x0, g_x1 = grad(loss, x0, x1)\n"
        "  return g_x0, g_x1\n}\n",
        /* merged by the pipeline into one variable */
        "func main(x: f64[3]) {\n  a = exp(x)\n  b = exp(x)\n  return a, b\n}\n",
        /* an alias and a rewrite that replaces the returned variable by the input */
        "func main(x: f64[3]) {\n  a = x\n  b = mul(x, 1)\n  return a, b\n}\n",
    };
    static const char *const want[][2] = {{"g_x0", "g_x1"}, {"a", "b"}, {"a", "b"}};
    for (size_t k = 0; k < sizeof src / sizeof src[0]; k++) {
        tg_module *m = parse_ok(src[k]);
        tg_graph *g = tg_module_func(m, 0);
        assert_out_names(g, want[k][0], want[k][1]);
        tg_graph *c = tg_graph_clone(g);
        assert_non_null(c);
        assert_out_names(c, want[k][0], want[k][1]);
        tg_graph *o = NULL;
        assert_int_equal(tg_graph_optimize(g, NULL, &o), TG_OK);
        assert_out_names(o, want[k][0], want[k][1]);
        if (k > 0) /* the variables were merged or replaced; the names stayed */
            assert_ptr_equal(tg_graph_output(o, 0), tg_graph_output(o, 1));
        assert_int_equal(tg_graph_verify(o), TG_OK);
        tg_graph_free(o);
        tg_graph_free(c);
        tg_module_free(m);
    }
    /* an expression has no name of its own; a literal keyword is not a name */
    tg_module *m = parse_ok("func main(x: f64[3]) {\n  return add(x, 1), x\n}\n");
    assert_out_names(tg_module_func(m, 0), NULL, "x");
    tg_module_free(m);
    m = parse_ok("func main(x: f64[3]) {\n  return x, true\n}\n");
    assert_null(tg_graph_output_name(tg_module_func(m, 0), 1));
    tg_module_free(m);
    /* built in C: the variables' names, until renamed */
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 1, (int64_t[]){3});
    tg_var *y = tg_exp(g, x);
    assert_int_equal(tg_graph_set_outputs(g, (tg_var *[]){x, y}, 2), TG_OK);
    assert_string_equal(tg_graph_output_name(g, 0), "x");
    assert_null(tg_graph_output_name(g, 1));
    assert_int_equal(tg_graph_set_output_name(g, 1, "y"), TG_OK);
    assert_int_equal(tg_graph_set_output_name(g, 0, NULL), TG_OK);
    assert_out_names(g, NULL, "y");
    tg_graph *c = tg_graph_clone(g);
    assert_out_names(c, NULL, "y");
    tg_graph_free(c);
    tg_graph_free(g);
}

static void test_parse_several_funcs(void **state) {
    (void)state;
    tg_module *m = parse_ok("func a(x: f32[]) {\n  return neg(x)\n}\n\n"
                            "# between functions\n"
                            "func b(x: f32[], y: f32[]) {\n  return add(x, y)\n}\n"
                            "func c(x: i32[2]) {\n  r = x\n  return r\n}\n");
    assert_int_equal(tg_module_func_count(m), 3);
    assert_string_equal(tg_graph_name(tg_module_func(m, 1)), "b");
    assert_int_equal(tg_graph_input_count(tg_module_find(m, "b")), 2);
    /* names are per function: x is bound in each */
    assert_int_equal(tg_graph_node_count(tg_module_find(m, "c")), 0);
    tg_module_free(m);
}

/* ---- errors ---- */

static void test_errors_syntax(void **state) {
    (void)state;
    parse_err("", TG_ESYNTAX, "t.tg:1:1: expected 'func' but found end of file");
    parse_err("# only a comment\n\n", TG_ESYNTAX,
              "t.tg:3:1: expected 'func' but found end of file");
    parse_err("fun f() {\n}", TG_ESYNTAX, "t.tg:1:1: expected 'func' but found 'fun'");
    parse_err("func (x: f32[]) {\n}", TG_ESYNTAX,
              "t.tg:1:6: expected a function name but found '('");
    parse_err("func f(x f32[]) {\n}", TG_ESYNTAX, "t.tg:1:10: expected ':' but found 'f32'");
    parse_err("func f(x: f16[]) {\n}", TG_ETYPE,
              "t.tg:1:11: unknown dtype 'f16' (expected bool i8 i16 i32 i64 u8 f32 f64)");
    parse_err("func f(x: f32[3,-1]) {\n}", TG_ESYNTAX,
              "t.tg:1:17: expected an extent or '?' but found '-'");
    parse_err("func f(x: f32[1,1,1,1,1,1,1,1,1]) {\n}", TG_ELIMIT,
              "t.tg:1:31: more than 8 dimensions");
    parse_err("func f(x: f32[]) { return x\n}", TG_ESYNTAX,
              "t.tg:1:20: expected end of line but found 'return'");
    parse_err("func f(x: f32[]) {\n  y = neg(x,)\n  z = add(x y)\n  return z\n}", TG_ESYNTAX,
              "t.tg:3:13: expected ',' or ')' but found 'y'");
    parse_err("func f(x: f32[]) {\n  y = neg(x)) \n  return y\n}", TG_ESYNTAX,
              "t.tg:2:13: expected end of line but found ')'");
    parse_err("func f(x: f32[]) {\n  y neg(x)\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:5: expected '=' or ',' but found 'neg'");
    parse_err("func f(x: f32[]) {\n  = neg(x)\n}", TG_ESYNTAX,
              "t.tg:2:3: expected a statement but found '='");
    parse_err("func f(x: f32[]) {\n  y = \n  return y\n}", TG_ESYNTAX,
              "t.tg:2:7: expected an expression but found end of line");
    parse_err("func f(x: f32[]) {\n  y = add(x, 1, axis=)\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:22: expected an attribute value but found ')'");
    parse_err("func f(x: f32[]) {\n  y = add(axis=1, x)\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:19: positional argument after keyword argument");
    parse_err("func f(x: f32[]) {\n  y = sum(x, axis=1, axis=2)\n  return y\n}", TG_EINVAL,
              "t.tg:2:22: attribute 'axis' given twice");
    parse_err("func f(x: f32[]) {\n  y = neg(x)\n  return y\n", TG_ESYNTAX,
              "t.tg:4:1: expected '}' after 'return' but found end of file");
    parse_err("func f(x: f32[]) {\n  y = neg(x)\n  return y\n  z = neg(y)\n}", TG_ESYNTAX,
              "t.tg:4:3: expected '}' after 'return' but found 'z'");
    parse_err("func f(x: f32[]) {\n  return x\n} x", TG_ESYNTAX,
              "t.tg:3:3: expected end of line but found 'x'");
    parse_err("func f(x: f32[]) {\n  y = neg(-x)\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:12: expected a number after '-' but found 'x'");
    parse_err("func f(x: f32[]) {\n  y = add(x, 99999999999999999999)\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:14: integer literal 99999999999999999999 is out of range of i64");
    parse_err("func f(x: f32[]) {\n  y = add(x, -9223372036854775809)\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:14: integer literal -9223372036854775809 is out of range of i64");
    parse_err("func f(x: f32[]) {\n  y = add(x, 1.5.)\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:14: malformed number '1.5.'");
    parse_err("func f(x: f32[]) {\n  y = cast(x, dtype=\"f32)\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:21: unterminated string");
    parse_err("func f(x: f32[]) {\n  true = neg(x)\n  return x\n}", TG_ESYNTAX,
              "t.tg:2:3: 'true' is a reserved word");
    parse_err("func f(x: f32[]) {\n  y = add(x, none)\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:14: 'none' cannot be used as a value");
    parse_err("func return(x: f32[]) {\n  return x\n}", TG_ESYNTAX,
              "t.tg:1:6: 'return' is a reserved word");
    parse_err("func f(x: f32[]) {\n  y = neg(x\n", TG_ESYNTAX,
              "t.tg:3:1: expected ',' or ')' but found end of file");
}

static void test_errors_names(void **state) {
    (void)state;
    parse_err("func f(x: f32[]) {\n  y = neg(x)\n  y = neg(y)\n  return y\n}", TG_ESYNTAX,
              "t.tg:3:3: 'y' is already defined at 2:3");
    parse_err("func f(x: f32[]) {\n  x = neg(x)\n  return x\n}", TG_ESYNTAX,
              "t.tg:2:3: 'x' is already defined at 1:8");
    parse_err("func f(x: f32[], x: f32[]) {\n  return x\n}", TG_ESYNTAX,
              "t.tg:1:18: 'x' is already defined at 1:8");
    parse_err("func f(x: f32[]) {\n  a, a = neg(x)\n  return a\n}", TG_ESYNTAX,
              "t.tg:2:6: 'a' is already defined at 2:3");
    parse_err("func f(x: f32[]) {\n  y = neg(z)\n  return y\n}", TG_ENAME,
              "t.tg:2:11: unknown name 'z'");
    parse_err("func f(x: f32[]) {\n  y = neg(y)\n  return y\n}", TG_ENAME,
              "t.tg:2:11: unknown name 'y'");
    parse_err("func f(x: f32[]) {\n  return q\n}", TG_ENAME, "t.tg:2:10: unknown name 'q'");
    parse_err("func f(x: f32[]) {\n  y = frobnicate(x)\n  return y\n}", TG_ENAME,
              "t.tg:2:7: 'frobnicate' is neither an op nor a function of this file");
    parse_err("func f(x: f32[]) {\n  y = neg(gard(x, x))\n  return y\n}", TG_ENAME,
              "t.tg:2:11: 'gard' is neither an op nor a function of this file");
    parse_err_prefix("func f(x: f32[3]) {\n  y = grad(x, x)\n  return y\n}",
                     "t.tg:2:7: grad: the cost must be a scalar, got f32[3]");
    parse_err_prefix("func f(x: f32[], y: f32[]) {\n  g = grad(neg(x), y)\n  return g\n}",
                     "t.tg:2:7: grad: the result does not depend on 'y'");
    parse_err_prefix("func f(x: f32[4,2], i: i64[2], j: i64[3]) {\n  y = x[i, j]\n  return y\n}",
                     "t.tg:2:8: index: shape mismatch: indexing arrays could not be broadcast "
                     "together");
    parse_err("func f(x: f32[]) {\n  a, b = neg(x)\n  return a\n}", TG_ESYNTAX,
              "t.tg:2:10: 'neg' gives 1 value but 2 names are bound");
    parse_err("func f(x: f32[]) {\n  a, b = x\n  return a\n}", TG_ESYNTAX,
              "t.tg:2:10: the expression gives 1 value but 2 names are bound");
    parse_err("func f(x: f32[]) {\n  y = pmap(@body, x)\n  return y\n}", TG_ENAME,
              "t.tg:2:13: unknown function 'body'");
    parse_err("func f(x: f32[]) {\n  y = sum(x, fn=@nope)\n  return y\n}", TG_ENAME,
              "t.tg:2:18: unknown function 'nope'");
    /* a function referenced before its definition is known (the op then fails) */
    parse_err("func f(x: f32[]) {\n  y = pmap(@g, x, axis_name=\"i\")\n  return y\n}\n"
              "func g(x: f32[]) {\n  return x\n}\n",
              TG_EINVAL,
              "t.tg:2:7: pmap: in_axes[0] = 0 is out of range for input 1 'x' of type f32[]");
    parse_err("func f(x: f32[]) {\n  y = vmap(@g, x)\n  return y\n}\n"
              "func g(x: f32[]) {\n  return x\n}\n",
              TG_ENAME, "t.tg:2:7: 'vmap' is neither an op nor a function of this file");
    parse_err("func f(x: f32[]) {\n  y = neg(x, @g)\n  return y\n}\n"
              "func g(x: f32[]) {\n  return x\n}\n",
              TG_EINVAL, "t.tg:2:15: neg: takes 0 function arguments");
    parse_err("func f(x: f32[]) {\n  return x\n}\nfunc f(y: f32[]) {\n  return y\n}", TG_ESYNTAX,
              "t.tg:4:6: function 'f' is already defined at 1:6");
    parse_err("func f(x: f32[]) {\n  y = neg(x)\n}", TG_ESYNTAX,
              "t.tg:3:1: function 'f' has no 'return'");
    parse_err("func f(x: f32[]) {\n}", TG_ESYNTAX, "t.tg:2:1: function 'f' has no 'return'");
}

static void test_errors_builders(void **state) {
    (void)state;
    /* builder messages carry the position of the call that failed */
    parse_err_prefix("func f(x: f32[2], y: f32[3]) {\n  z = neg(x)\n  w = add(z,\n     y)\n"
                     "  return w\n}",
                     "t.tg:3:7: add: ");
    parse_err_prefix("func f(x: f32[2]) {\n  y = add(x, 1)\n  return y, 2, neg(true)\n}",
                     "t.tg:3:16: neg: ");
    parse_err_prefix("func f(x: i8[2]) {\n  y = add(x, 1000)\n  return y\n}", "t.tg:2:7: add: ");
    parse_err_prefix("func f(x: f32[2]) {\n  y = reshape(x)\n  return y\n}", "t.tg:2:7: reshape: ");
}

static void test_errors_indexing(void **state) {
    (void)state;
    parse_err("func f(x: f32[3]) {\n  y = x[]\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:9: expected an index but found ']'");
    parse_err("func f(x: f32[3]) {\n  y = x[1.5]\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:9: an index must be an integer");
    parse_err("func f(x: f32[3]) {\n  y = x[1:2:3:4]\n  return y\n}", TG_ESYNTAX,
              "t.tg:2:14: expected ',' or ']' but found ':'");
    parse_err_prefix("func f(x: f32[3]) {\n  y = x[0, 0]\n  return y\n}", "t.tg:2:8: slice: ");
}

static void test_errors_depth(void **state) {
    (void)state;
    /* 10,000 nested calls: a clean error at the 257th '(' , never a stack overflow */
    size_t depth = 10000;
    size_t cap = depth * 5 + 128;
    char *src = malloc(cap);
    assert_non_null(src);
    size_t n = (size_t)snprintf(src, cap, "func f(x: f32[]) {\n  y = ");
    for (size_t i = 0; i < depth; i++) n += (size_t)snprintf(src + n, cap - n, "neg(");
    src[n++] = 'x';
    for (size_t i = 0; i < depth; i++) src[n++] = ')';
    n += (size_t)snprintf(src + n, cap - n, "\n  return y\n}\n");
    /* the 257th '(' is at column 7 + 4*256 + 3 */
    char want[64];
    snprintf(want, sizeof want, "t.tg:2:%d: nesting deeper than 256", 7 + 4 * 256 + 3);
    parse_err(src, TG_ELIMIT, want);

    /* exactly 256 levels are fine */
    n = (size_t)snprintf(src, cap, "func f(x: f32[]) {\n  y = ");
    for (int i = 0; i < 256; i++) n += (size_t)snprintf(src + n, cap - n, "neg(");
    src[n++] = 'x';
    for (int i = 0; i < 256; i++) src[n++] = ')';
    snprintf(src + n, cap - n, "\n  return y\n}\n");
    tg_module *m = parse_ok(src);
    assert_int_equal(tg_graph_node_count(tg_module_func(m, 0)), 256);
    tg_module_free(m);

    /* lists are flat, lists of pairs hold pairs of numbers: a '[' deeper is an error, not
       more nesting */
    n = (size_t)snprintf(src, cap, "func f(x: f32[]) {\n  y = sum(x, axis=");
    for (size_t i = 0; i < depth; i++) src[n++] = '[';
    snprintf(src + n, cap - n, "\n  return y\n}\n");
    parse_err(src, TG_EINVAL, "t.tg:2:19: sum: attribute 'axis' takes no list of pairs");
    n = (size_t)snprintf(src, cap, "func f(x: f32[]) {\n  y = ppermute(x, axis_name=\"i\", perm=");
    for (size_t i = 0; i < depth; i++) src[n++] = '[';
    snprintf(src + n, cap - n, "\n  return y\n}\n");
    parse_err(src, TG_ESYNTAX, "t.tg:2:41: expected an integer but found '['");
    free(src);
}

static void test_errors_module_files(void **state) {
    (void)state;
    tg_module *m = (tg_module *)(uintptr_t)1;
    assert_int_equal(tg_module_load(NULL, "parse/does-not-exist.tg", &m), TG_EIO);
    assert_null(m);
    assert_string_equal(tg_last_error(),
                        "cannot open 'parse/does-not-exist.tg': No such file or directory");
    assert_int_equal(tg_module_load(NULL, "parse", &m), TG_EIO);
    assert_string_equal(tg_last_error(), "cannot read 'parse': Is a directory");
    assert_int_equal(tg_module_load(NULL, "parse/bad_syntax.tg", &m), TG_ESYNTAX);
    assert_string_equal(tg_last_error(),
                        "parse/bad_syntax.tg:4:22: expected ',' or ')' but found 'b'");
    assert_int_equal(tg_module_parse(NULL, NULL, 0, NULL, &m), TG_ESYNTAX);
    assert_string_equal(tg_last_error(), "<input>:1:1: expected 'func' but found end of file");
    assert_int_equal(tg_module_parse(NULL, "x", 1, "a", NULL), TG_EINVAL);
}

/* ---- printing ---- */

static void test_print_exact(void **state) {
    (void)state;
    char *s = reprint("func mlp(x: f32[?,784], W: f32[784,256], b: f32[256]) {\n"
                      "  h = tanh(add(dot(x, W), b))\n"
                      "  s = sum(mul(h, 2), axis=[1], keepdims=true)\n"
                      "  t = add(s, 0.5)\n"
                      "  y = t[1:, ::-1]\n"
                      "  c = const(value=[1.5, 2], dtype=\"f32\")\n"
                      "  r = reshape(x, shape=[-1])\n"
                      "  return y, c, 3, cast(r, dtype=\"f64\"), x[-1, :2]\n"
                      "}\n");
    const char *want = "func mlp(x: f32[?,784], W: f32[784,256], b: f32[256]) {\n"
                       "    t3 = dot(x, W)\n"
                       "    t4 = add(t3, b)\n"
                       "    h = tanh(t4)\n"
                       "    t8 = mul(h, 2)\n"
                       "    s = sum(t8, axis=[1], keepdims=true)\n"
                       "    t = add(s, 0.5)\n"
                       "    y = t[1:, ::-1]\n"
                       "    r = reshape(x, shape=[-1])\n"
                       "    t17 = cast(r, dtype=\"f64\")\n"
                       "    t18 = x[-1, :2]\n"
                       "    c = const(value=[1.5, 2.0], dtype=\"f32\")\n"
                       "    return y, c, 3, t17, t18\n"
                       "}\n";
    if (strcmp(s, want) != 0) print_error("%s", s);
    assert_string_equal(s, want);
    free(s);
}

static void test_print_names(void **state) {
    (void)state;
    /* user names that look like fresh ones are kept; fresh ones step around them */
    char *s = reprint("func f(t2: f32[]) {\n"
                      "  t1 = neg(neg(t2))\n"
                      "  return t1\n"
                      "}\n");
    const char *want = "func f(t2: f32[]) {\n"
                       "    t1_1 = neg(t2)\n"
                       "    t1 = neg(t1_1)\n"
                       "    return t1\n"
                       "}\n";
    if (strcmp(s, want) != 0) print_error("%s", s);
    assert_string_equal(s, want);
    free(s);
}

static void test_print_graph_built_in_c(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "my model");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 1, (int64_t[]){4});
    tg_var *y = tg_mul(g, x, tg_literal_float(g, 0.1));
    tg_var *z = tg_add(g, y, tg_literal_float(g, 1e-300));
    y->name = "return"; /* reserved: printed under a fresh name */
    assert_int_equal(tg_graph_set_outputs(g, (tg_var *[]){z, x}, 2), TG_OK);
    char *s = print_graph(g, false);
    const char *want = "func my_model(x: f32[4]) {\n"
                       "    t3 = mul(x, 0.1)\n"
                       "    t6 = add(t3, 0.0)\n" /* 1e-300 is 0 in f32 */
                       "    return t6, x\n"
                       "}\n";
    if (strcmp(s, want) != 0) print_error("%s", s);
    assert_string_equal(s, want);
    free(s);
    char *d = print_graph(g, true);
    assert_non_null(strstr(d, "digraph \"my model\" {"));
    assert_non_null(strstr(d, "v0 -> n0;"));
    assert_non_null(strstr(d, "n0 -> n1;"));
    assert_non_null(strstr(d, "label=\"mul\\nreturn: f32[4]\""));
    assert_non_null(strstr(d, "n1 -> out0;"));
    assert_non_null(strstr(d, "v0 -> out1;"));
    free(d);
    tg_graph_free(g);
}

static void test_roundtrip_programs(void **state) {
    (void)state;
    static const char *const programs[] = {
        "func sugar(x: f64[4,3], i: i64[2], y: f64[2,3], m: bool[4]) {\n"
        "  a = set_subtensor(x[1:3], y)\n"
        "  b = inc_subtensor(x[i], y)\n"
        "  c = x[:, i]\n"
        "  d = x[m]\n"
        "  s = sum(mul(a, b))\n"
        "  ga, gy = grad(s, x, y)\n"
        "  return a, b, c, d, ga, gy\n"
        "}\n",
        "func mlp(x: f32[?,784], W: f32[784,256], b: f32[256], y: i64[?]) {\n"
        "  h = tanh(add(dot(x, W), b))\n"
        "  loss = mean(neg(h))\n"
        "  return loss, h\n"
        "}\n",
        "func f(x: f64[2,3], k: i32[]) {\n"
        "  a = mul(x, 1e-3)\n"
        "  b = add(a, -inf)\n"
        "  c = maximum(b, nan)\n"
        "  d = where(gt(a, 0), a, c)\n"
        "  e = add(k, -7)\n"
        "  f = mul(x, k)\n"
        "  return d, e, f, true, -0.0\n"
        "}\n"
        "func g(s: bool[]) {\n"
        "  return not(s)\n"
        "}\n",
        "func idx(x: f32[5,6,7]) {\n"
        "  a = x[1:, ::-1, 0]\n"
        "  b = x[-1][::2, 1:-1:3]\n"
        "  c = x[:, :, :]\n"
        "  d = x[0, 0, 0]\n"
        "  return a, b, c, d\n"
        "}\n",
        "func attrs(x: f32[2,3,4]) {\n"
        "  a = sum(x, axis=[0, -1], keepdims=true)\n"
        "  b = sum(x)\n"
        "  c = argmax(x, axis=1)\n"
        "  d = cast(x, dtype=\"i8\")\n"
        "  e = reshape(x, shape=[4, -1])\n"
        "  f = transpose(x, axes=[2, 0, 1])\n"
        "  g = expand_dims(x, axis=[0])\n"
        "  h = squeeze(g, axis=0)\n"
        "  i = broadcast_to(x, shape=[5, 2, 3, 4])\n"
        "  return a, b, c, d, e, f, h, i\n"
        "}\n",
        "func consts(x: f32[3]) {\n"
        "  c = const(value=[1, 2, 3], dtype=\"f32\")\n"
        "  m = const(value=[1, 2, 3, 4, 5, 6], dtype=\"i16\", shape=[2, 3])\n"
        "  s = const(value=0.1, dtype=\"f32\")\n"
        "  b = const(value=[true, false], dtype=\"bool\")\n"
        "  e = const(value=[], dtype=\"f64\", shape=[0, 2])\n"
        "  return add(add(x, c), s), m, b, e, c\n"
        "}\n",
        "func weak(x: f32[3], n: i64[]) {\n"
        "  y = add(2, 3)\n"
        "  z = mul(x, y)\n"
        "  w = add(n, 2.5)\n"
        "  return z, w, y\n"
        "}\n",
        "func shared(x: f32[3]) {\n"
        "  c = const(value=[1, 2, 3], dtype=\"f32\")\n"
        "  return mul(add(x, c), c)\n"
        "}\n",
        "func promo(a: i32[3], b: f32[3], u: u8[3]) {\n"
        "  return add(a, b), mul(u, 2), div(a, 2), add(u, a)\n"
        "}\n",
    };
    for (size_t i = 0; i < TG_COUNTOF(programs); i++) roundtrip(programs[i]);
}

static void test_roundtrip_files(void **state) {
    (void)state;
    static const char *const files[] = {"parse/mlp.tg", "parse/features.tg"};
    for (size_t i = 0; i < TG_COUNTOF(files); i++) {
        tg_module *m = NULL;
        tg_status st = tg_module_load(NULL, files[i], &m);
        if (st != TG_OK) print_error("%s\n", tg_last_error());
        assert_int_equal(st, TG_OK);
        char *t1 = print_module(m);
        roundtrip(t1);
        free(t1);
        tg_module_free(m);
    }
}

static void test_locale_independent(void **state) {
    (void)state;
    if (!setlocale(LC_NUMERIC, "de_DE.UTF-8") && !setlocale(LC_NUMERIC, "fr_FR.UTF-8")) skip();
    char *s = reprint("func f(x: f64[]) {\n  return add(x, 0.25)\n}\n");
    setlocale(LC_NUMERIC, "C");
    assert_non_null(strstr(s, "add(x, 0.25)"));
    free(s);
}

/* ---- scale ---- */

static void test_long_chain(void **state) {
    (void)state;
    const int n = 100000;
    size_t cap = (size_t)n * 32 + 64;
    char *src = malloc(cap);
    assert_non_null(src);
    size_t len = (size_t)snprintf(src, cap, "func chain(x: f32[4]) {\n  t1 = neg(x)\n");
    for (int i = 2; i <= n; i++)
        len += (size_t)snprintf(src + len, cap - len, "  t%d = neg(t%d)\n", i, i - 1);
    len += (size_t)snprintf(src + len, cap - len, "  return t%d\n}\n", n);
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(NULL, src, len, "chain.tg", &m), TG_OK);
    tg_graph *g = tg_module_func(m, 0);
    assert_int_equal(tg_graph_node_count(g), n);
    char *text = print_graph(g, false);
    /* printing keeps every user name, so the text is the input reformatted */
    assert_non_null(strstr(text, "    t100000 = neg(t99999)\n    return t100000\n}\n"));
    tg_module *m2 = NULL;
    assert_int_equal(tg_module_parse(NULL, text, strlen(text), "chain2.tg", &m2), TG_OK);
    assert_int_equal(tg_graph_node_count(tg_module_func(m2, 0)), n);
    char *dot = print_graph(g, true);
    assert_non_null(strstr(dot, "n99999 -> out0;"));
    free(dot);
    free(text);
    tg_module_free(m2);
    tg_module_free(m);
    free(src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lex_tokens),
        cmocka_unit_test(test_lex_values),
        cmocka_unit_test(test_lex_newlines_in_brackets),
        cmocka_unit_test(test_lex_errors),
        cmocka_unit_test(test_float_format),
        cmocka_unit_test(test_parse_basic),
        cmocka_unit_test(test_parse_forms),
        cmocka_unit_test(test_parse_literals),
        cmocka_unit_test(test_parse_indexing),
        cmocka_unit_test(test_parse_attributes),
        cmocka_unit_test(test_parse_const),
        cmocka_unit_test(test_parse_tuple_and_funcs),
        cmocka_unit_test(test_parse_several_funcs),
        cmocka_unit_test(test_output_names),
        cmocka_unit_test(test_errors_syntax),
        cmocka_unit_test(test_errors_names),
        cmocka_unit_test(test_errors_builders),
        cmocka_unit_test(test_errors_indexing),
        cmocka_unit_test(test_errors_depth),
        cmocka_unit_test(test_errors_module_files),
        cmocka_unit_test(test_print_exact),
        cmocka_unit_test(test_print_names),
        cmocka_unit_test(test_print_graph_built_in_c),
        cmocka_unit_test(test_roundtrip_programs),
        cmocka_unit_test(test_roundtrip_files),
        cmocka_unit_test(test_locale_independent),
        cmocka_unit_test(test_long_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
