/* print.c - the .tg printer: a graph back to text that parses to the same graph.
 *
 * Owns: tg_graph_print, tg_ir_format_scalar.
 * Invariants:
 *  - Nodes print in the order of tg_ir_toposort (only what the outputs need), one line
 *    each; a strong constant prints as a `const(...)` line just before its first use;
 *    weak literals print inline where they are used.
 *  - Every printed name is a valid, unreserved identifier, unique in the function: a
 *    variable keeps its user name when it has one that is free, others get t<id> (with a
 *    suffix if that is taken). Names come from node order, never from addresses, so the
 *    output is deterministic and print(parse(print(parse(x)))) == print(parse(x)).
 *  - Attributes print in schema order, only where they differ from the schema default;
 *    floats always look like floats (1.0, 1e+30, inf) so they parse back as floats.
 *  - A device annotation prints as the last keyword of its node's call, `device="cpu:1"`
 *    (an annotated slice prints as a call of `slice`, since indexing has no keywords), and
 *    after the type of an annotated parameter; unannotated graphs print as if there were
 *    no annotations at all.
 *  - Everything is a loop over arrays: a chain of 100,000 nodes prints in linear time.
 */
#include "../ops/fused.h"
#include "text.h"

#include <stdio.h>

/* The functions printed together: a graph and the graphs it calls, or a module. Each
 * gets a distinct printed name, so that calls parse back to the graph they name. */
typedef struct unit_fn {
    const tg_graph *g;
    const char *name; /* printed name (arena) */
    bool alias;       /* not printed: g is the graph that a root is a clone of (tg_graphs_print),
                         and its calls print the root's name */
    const char *want; /* alias: the root's own name, which g must have (unit_add_callees) */
} unit_fn;
typedef struct unit {
    unit_fn *fn;
    int n, cap;
    tg_txt_map used; /* names taken */
    tg_arena arena;
} unit;

typedef struct printer {
    const unit *u;
    const tg_graph *g;
    FILE *f;
    tg_node **order; /* toposort, or g->nodes when there are no outputs */
    int norder;
    bool own_order;     /* order comes from tg_ir_toposort */
    const char **names; /* by var id */
    uint8_t *done;      /* by var id: constant already printed / name claimed */
    int nvars;
    tg_txt_map used; /* names taken */
    tg_arena arena;  /* fresh names */
    bool oom;        /* a line could not be made for want of memory */
} printer;

/* ---- scalars ---- */

static bool is_literal(const tg_var *v) {
    return v->kind == TG_VAR_CONST && v->lit && v->value && v->value->ndim == 0;
}

void tg_ir_format_scalar(const tg_var *v, char *buf, size_t n) {
    if (!v || !v->value) {
        snprintf(buf, n, "?");
        return;
    }
    const tg_tensor *t = v->value;
    if (t->ndim != 0) {
        tg_type_str(&v->type, buf, n);
        return;
    }
    tg_dtype dt = t->dtype;
    char kind = v->lit ? v->lit : tg_dtype_is_float(dt) ? 'f' : dt == TG_DT_BOOL ? 'b' : 'i';
    const void *p = tg_tensor_data(t);
    if (kind == 'b')
        snprintf(buf, n, "%s", tg_load_i64(p, dt) ? "true" : "false");
    else if (kind == 'i')
        snprintf(buf, n, "%lld", (long long)tg_load_i64(p, dt));
    else
        tg_format_float(tg_load_f64(p, dt), dt == TG_DT_F32, buf, n);
}

/* ---- names ---- */

static const char *name_of(const printer *pr, const tg_var *v) {
    return v->id >= 0 && v->id < pr->nvars && pr->names[v->id] ? pr->names[v->id] : "?";
}

static bool claim(printer *pr, const tg_var *v) {
    if (v->id < 0 || v->id >= pr->nvars || pr->names[v->id]) return true;
    if (!v->name || !tg_txt_is_name(v->name)) return true;
    size_t len = strlen(v->name);
    if (tg_txt_map_find(&pr->used, v->name, len)) return true;
    if (!tg_txt_map_add(&pr->used, v->name, len)) return false;
    pr->names[v->id] = v->name;
    return true;
}

static bool fresh(printer *pr, const tg_var *v) {
    if (v->id < 0 || v->id >= pr->nvars || pr->names[v->id]) return true;
    char buf[48];
    int len = snprintf(buf, sizeof buf, "t%d", v->id);
    for (int k = 1; tg_txt_map_find(&pr->used, buf, (size_t)len); k++)
        len = snprintf(buf, sizeof buf, "t%d_%d", v->id, k);
    char *s = tg_arena_strdup(&pr->arena, buf);
    if (!s || !tg_txt_map_add(&pr->used, s, (size_t)len)) return false;
    pr->names[v->id] = s;
    return true;
}

/* Variables that get names, in print order: inputs, then per node its not-yet-seen
 * strong constant inputs and its outputs, then constant outputs. Applies fn to each. */
static bool each_named(printer *pr, bool (*fn)(printer *, const tg_var *)) {
    const tg_graph *g = pr->g;
    for (int i = 0; i < g->inputs.n; i++)
        if (!fn(pr, g->inputs.items[i])) return false;
    for (int i = 0; i < pr->norder; i++) {
        const tg_node *n = pr->order[i];
        for (int k = 0; k < n->nin; k++)
            if (n->in[k]->kind == TG_VAR_CONST && !is_literal(n->in[k]) && !fn(pr, n->in[k]))
                return false;
        for (int k = 0; k < n->nout; k++)
            if (!fn(pr, n->out[k])) return false;
    }
    for (int i = 0; i < g->outputs.n; i++) {
        const tg_var *v = g->outputs.items[i];
        if (v->kind == TG_VAR_CONST && !is_literal(v) && !fn(pr, v)) return false;
    }
    return true;
}

/* ---- values ---- */

static void put_float(FILE *f, double x, bool single) {
    char buf[TG_FLOAT_STR_MAX];
    tg_format_float(x, single, buf, sizeof buf);
    fputs(buf, f);
}

/* A use of v as an argument: its name, or the literal itself. */
static void put_use(const printer *pr, const tg_var *v) {
    if (is_literal(v)) {
        char buf[64];
        tg_ir_format_scalar(v, buf, sizeof buf);
        fputs(buf, pr->f);
    } else {
        fputs(name_of(pr, v), pr->f);
    }
}

static const char *unit_name(const unit *u, const tg_graph *g) {
    for (int i = 0; u && i < u->n; i++)
        if (u->fn[i].g == g) return u->fn[i].name;
    return g ? g->name : "?";
}

static void put_aval(const unit *u, FILE *f, const tg_attr_spec *s, const tg_aval *a) {
    switch (a->kind) {
    case TG_ATTR_NONE:
        fputs("none", f);
        break;
    case TG_ATTR_INT:
        if (s->type == TG_AS_DTYPE) {
            fputc('"', f);
            fputs(tg_dtype_name((tg_dtype)a->i), f);
            fputc('"', f);
        } else {
            fprintf(f, "%lld", (long long)a->i);
        }
        break;
    case TG_ATTR_BOOL:
        fputs(a->i ? "true" : "false", f);
        break;
    case TG_ATTR_FLOAT:
        put_float(f, a->f, false);
        break;
    case TG_ATTR_STR:
        tg_txt_put_string(f, a->s ? a->s : "");
        break;
    case TG_ATTR_FUNC:
        fprintf(f, "@%s", unit_name(u, a->fn));
        break;
    case TG_ATTR_INTS:
        if (s->type == TG_AS_PAIRS) {
            fputc('[', f);
            for (int k = 0; k + 1 < a->n; k += 2)
                fprintf(f, "%s[%lld, %lld]", k ? ", " : "", (long long)a->ints[k],
                        (long long)a->ints[k + 1]);
            fputc(']', f);
            break;
        }
        fputc('[', f);
        for (int k = 0; k < a->n; k++) {
            if (k) fputs(", ", f);
            if (tg_aval_none_at(a, k))
                fputs("none", f);
            else
                fprintf(f, "%lld", (long long)a->ints[k]);
        }
        fputc(']', f);
        break;
    case TG_ATTR_FLOATS:
        fputc('[', f);
        for (int k = 0; k < a->n; k++) {
            if (k) fputs(", ", f);
            put_float(f, a->floats[k], false);
        }
        fputc(']', f);
        break;
    }
}

static bool aval_equal(const tg_aval *a, const tg_aval *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case TG_ATTR_NONE:
        return true;
    case TG_ATTR_INT:
    case TG_ATTR_BOOL:
        return a->i == b->i;
    case TG_ATTR_FLOAT:
        return a->f == b->f || (a->f != a->f && b->f != b->f);
    case TG_ATTR_STR:
        return a->s && b->s ? strcmp(a->s, b->s) == 0 : a->s == b->s;
    case TG_ATTR_FUNC:
        return a->fn == b->fn;
    case TG_ATTR_INTS:
        if (a->n != b->n || !tg_aval_same_nones(a, b, a->n)) return false;
        for (int k = 0; k < a->n; k++)
            if (a->ints[k] != b->ints[k]) return false;
        return true;
    case TG_ATTR_FLOATS:
        if (a->n != b->n) return false;
        for (int k = 0; k < a->n; k++)
            if (a->floats[k] != b->floats[k]) return false;
        return true;
    }
    return false;
}

/* ---- lines ---- */

static void put_const(const printer *pr, const tg_var *v) {
    FILE *f = pr->f;
    const tg_tensor *t = v->value;
    fprintf(f, "    %s = const(value=", name_of(pr, v));
    if (!t) {
        fputs("[])\n", f);
        return;
    }
    tg_dtype dt = t->dtype;
    int64_t count = tg_tensor_size(t);
    if (t->ndim > 0) fputc('[', f);
    int64_t idx[TG_MAX_DIMS] = {0};
    for (int64_t k = 0; k < count; k++) {
        const void *p = tg_tensor_at(t, idx);
        if (k) fputs(", ", f);
        if (dt == TG_DT_BOOL)
            fputs(tg_load_i64(p, dt) ? "true" : "false", f);
        else if (tg_dtype_is_float(dt))
            put_float(f, tg_load_f64(p, dt), dt == TG_DT_F32);
        else
            fprintf(f, "%lld", (long long)tg_load_i64(p, dt));
        tg_index_next(t->ndim, t->shape, idx);
    }
    if (t->ndim > 0) fputc(']', f);
    fprintf(f, ", dtype=\"%s\"", tg_dtype_name(dt));
    if (t->ndim > 1 || (t->ndim == 1 && t->shape[0] != count)) {
        fputs(", shape=[", f);
        for (int d = 0; d < t->ndim; d++)
            fprintf(f, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        fputc(']', f);
    }
    fputs(")\n", f);
}

/* A slice node as indexing, x[1:, ::-1, 0]; false if its attributes do not allow it. */
static bool put_slice(const printer *pr, const tg_node *n) {
    const tg_op_def *def = tg_op_table[n->op];
    const tg_aval *a[4] = {NULL, NULL, NULL, NULL};
    static const char *const want[4] = {"starts", "stops", "steps", "index"};
    for (int j = 0; j < def->nattrs; j++)
        for (int w = 0; w < 4; w++)
            if (strcmp(def->attrs[j].name, want[w]) == 0) a[w] = &n->attrs[j];
    if (n->nin != 1 || n->nout != 1 || def->nattrs != 4) return false;
    for (int w = 0; w < 4; w++)
        if (!a[w] || a[w]->kind != TG_ATTR_INTS || a[w]->n != a[0]->n) return false;
    int cnt = a[0]->n;
    if (cnt < 1 || cnt > TG_MAX_DIMS) return false;
    FILE *f = pr->f;
    fprintf(f, "    %s = ", name_of(pr, n->out[0]));
    put_use(pr, n->in[0]);
    fputc('[', f);
    for (int k = 0; k < cnt; k++) {
        int64_t st = a[0]->ints[k], sp = a[1]->ints[k], step = a[2]->ints[k];
        if (k) fputs(", ", f);
        if (a[3]->ints[k]) {
            fprintf(f, "%lld", (long long)st);
            continue;
        }
        if (!tg_aval_none_at(a[0], k)) fprintf(f, "%lld", (long long)st);
        fputc(':', f);
        if (!tg_aval_none_at(a[1], k)) fprintf(f, "%lld", (long long)sp);
        if (!tg_aval_none_at(a[2], k)) fprintf(f, ":%lld", (long long)step);
    }
    fputs("]\n", f);
    return true;
}

/* The end of a call: `, device="..."` when n is annotated (`device` alone when the call
 * has no other argument), then ")". */
static void put_close(const printer *pr, const tg_node *n, bool first) {
    if (n->device) { /* a transfer's too: it says where the transfer moves its value */
        fprintf(pr->f, "%sdevice=", first ? "" : ", ");
        tg_txt_put_string(pr->f, n->device);
    }
    fputs(")\n", pr->f);
}

static void put_node(printer *pr, const tg_node *n) {
    FILE *f = pr->f;
    const tg_op_def *def = tg_op_table[n->op];
    if (n->op == TG_OP_SLICE && !n->device && put_slice(pr, n)) return;
    const tg_fused_prog *prog = tg_fused_node_prog(n);
    size_t len = 0;
    char *expr = prog ? tg_fused_format(prog, &len) : NULL;
    if (prog && !expr) {
        pr->oom = true;
        return;
    }
    fputs("    ", f);
    for (int k = 0; k < n->nout; k++) fprintf(f, "%s%s", k ? ", " : "", name_of(pr, n->out[k]));
    if (n->nout == 0) fputs("_", f);
    if (expr) { /* fused{EXPR}(inputs): the text of its program (no newline, no braces) */
        fprintf(f, " = fused{%s}(", expr);
        tg_mem_free(prog->ctx, expr, len + 1);
        for (int k = 0; k < n->nin; k++) {
            if (k) fputs(", ", f);
            put_use(pr, n->in[k]);
        }
        put_close(pr, n, n->nin == 0);
        return;
    }
    if (n->op == TG_OP_CALL) { /* a call prints as the callee's name: `a, b = f(x, y)` */
        fprintf(f, " = %s(", unit_name(pr->u, n->attrs[0].fn));
        for (int k = 0; k < n->nin; k++) {
            if (k) fputs(", ", f);
            put_use(pr, n->in[k]);
        }
        put_close(pr, n, n->nin == 0);
        return;
    }
    fprintf(f, " = %s(", def->name);
    bool first = true;
    /* leading function attributes print positionally (`pmap(@body, ...)`) */
    int npos = 0;
    bool positional = true;
    for (int j = 0; j < def->nattrs; j++) {
        if (def->attrs[j].type != TG_AS_FUNC) continue;
        if (positional && n->attrs[j].kind == TG_ATTR_FUNC) {
            fprintf(f, "%s@%s", first ? "" : ", ", unit_name(pr->u, n->attrs[j].fn));
            first = false;
            npos++;
        } else {
            positional = false;
        }
    }
    for (int k = 0; k < n->nin; k++) {
        if (!first) fputs(", ", f);
        put_use(pr, n->in[k]);
        first = false;
    }
    int seen_func = 0;
    for (int j = 0; j < def->nattrs; j++) {
        const tg_attr_spec *s = &def->attrs[j];
        if (s->type == TG_AS_FUNC && seen_func++ < npos) continue;
        if (!s->required && aval_equal(&n->attrs[j], &s->def)) continue;
        fprintf(f, "%s%s=", first ? "" : ", ", s->name);
        put_aval(pr->u, f, s, &n->attrs[j]);
        first = false;
    }
    put_close(pr, n, first);
}

/* The function's name as an identifier in buf (a graph built in C may have any name). */
static void func_ident(const char *name, char *buf, size_t cap) {
    if (!name || !*name) name = "main";
    size_t o = 0;
    const unsigned char *s = (const unsigned char *)name;
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_') &&
        o + 1 < cap)
        buf[o++] = '_';
    for (; *s && o + 1 < cap; s++) {
        bool ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                  (*s >= '0' && *s <= '9') || *s == '_';
        buf[o++] = ok ? (char)*s : '_';
    }
    buf[o] = '\0';
    if (tg_txt_reserved(buf, o) && o + 1 < cap) {
        buf[o++] = '_';
        buf[o] = '\0';
    }
}

static void put_graph(printer *pr) {
    const tg_graph *g = pr->g;
    FILE *f = pr->f;
    char tbuf[TG_TYPE_STR_MAX];
    fputs("func ", f);
    fputs(unit_name(pr->u, g), f);
    fputc('(', f);
    for (int i = 0; i < g->inputs.n; i++) {
        const tg_var *v = g->inputs.items[i];
        fprintf(f, "%s%s%s: %s", i ? ", " : "", v->state ? "mut " : "", name_of(pr, v),
                tg_type_str(&v->type, tbuf, sizeof tbuf));
        if (v->device) {
            fputs(" device=", f);
            tg_txt_put_string(f, v->device);
        }
    }
    fputs(") {\n", f);
    for (int i = 0; i < pr->norder; i++) {
        const tg_node *n = pr->order[i];
        for (int k = 0; k < n->nin; k++) {
            const tg_var *v = n->in[k];
            if (v->kind != TG_VAR_CONST || is_literal(v) || pr->done[v->id]) continue;
            pr->done[v->id] = 1;
            put_const(pr, v);
        }
        put_node(pr, n);
    }
    for (int i = 0; i < g->outputs.n; i++) {
        const tg_var *v = g->outputs.items[i];
        if (v->kind != TG_VAR_CONST || is_literal(v) || pr->done[v->id]) continue;
        pr->done[v->id] = 1;
        put_const(pr, v);
    }
    for (int j = 0; j < g->updates.n; j++) { /* `state <- value`, after every node */
        fprintf(f, "    %s <- ", name_of(pr, g->updates.items[j]));
        put_use(pr, g->outputs.items[g->nret + j]);
        fputc('\n', f);
    }
    if (g->nret == 0 && g->updates.n > 0) {
        fputs("    return\n", f); /* a function that only updates state */
    } else if (g->nret == 0) {
        fputs("    # no outputs\n", f);
    } else {
        fputs("    return ", f);
        for (int i = 0; i < g->nret; i++) {
            if (i) fputs(", ", f);
            put_use(pr, g->outputs.items[i]);
        }
        fputc('\n', f);
    }
    fputs("}\n", f);
}

static tg_status print_one(const unit *u, const tg_graph *g, FILE *f) {
    printer pr = {.u = u, .g = g, .f = f, .nvars = g->vars.n};
    tg_txt_map_init(&pr.used, g->ctx);
    tg_arena_init(&pr.arena, g->ctx);
    tg_status st = TG_OK;
    if (g->outputs.n > 0) {
        pr.order = tg_ir_toposort(g, &pr.norder);
        pr.own_order = true;
        if (!pr.order) st = strstr(tg_last_error(), "out of memory") ? TG_ENOMEM : TG_EINTERNAL;
    } else {
        pr.order = (tg_node **)g->nodes.items;
        pr.norder = g->nodes.n;
    }
    size_t nv = (size_t)pr.nvars + 1;
    if (st == TG_OK) {
        pr.names = tg_mem_calloc(g->ctx, nv * sizeof *pr.names);
        pr.done = tg_mem_calloc(g->ctx, nv);
        if (!pr.names || !pr.done) st = TG_ENOMEM;
    }
    if (st == TG_OK && !(each_named(&pr, claim) && each_named(&pr, fresh))) st = TG_ENOMEM;
    if (st == TG_OK) {
        put_graph(&pr);
        if (pr.oom)
            st = tg_set_error(TG_ENOMEM, "out of memory printing '%s'", g->name);
        else if (ferror(f))
            st = tg_set_error(TG_EIO, "cannot write the text of '%s'", g->name);
    }
    if (pr.own_order && pr.order)
        tg_mem_free(g->ctx, pr.order, sizeof *pr.order * (size_t)(g->nodes.n + 1));
    if (pr.names) tg_mem_free(g->ctx, pr.names, nv * sizeof *pr.names);
    if (pr.done) tg_mem_free(g->ctx, pr.done, nv);
    tg_txt_map_fini(&pr.used);
    tg_arena_fini(&pr.arena);
    return st;
}

/* Appends e to the unit's functions. */
static bool unit_push(unit *u, unit_fn e, tg_ctx *ctx) {
    if (u->n == u->cap) {
        int ncap = u->cap ? u->cap * 2 : 8;
        unit_fn *nf =
            tg_mem_realloc(ctx, u->fn, sizeof *nf * (size_t)u->cap, sizeof *nf * (size_t)ncap);
        if (!nf) return false;
        u->fn = nf;
        u->cap = ncap;
    }
    u->fn[u->n++] = e;
    return true;
}

/* The function's name as an identifier that no other function of the unit has and no op
 * has (a graph built in C may have any name; backward functions share their callee's). */
static bool unit_add(unit *u, const tg_graph *g, tg_ctx *ctx) {
    for (int i = 0; i < u->n; i++)
        if (u->fn[i].g == g) return true;
    char base[200], buf[232];
    func_ident(g->name, base, sizeof base);
    bool taken = tg_op_lookup(base) >= 0 || tg_composite_lookup(base);
    int len = snprintf(buf, sizeof buf, "%s%s", base, taken ? "_fn" : "");
    for (int k = 2; tg_txt_map_find(&u->used, buf, (size_t)len); k++)
        len = snprintf(buf, sizeof buf, "%s_%d", base, k);
    char *nm = tg_arena_strdup(&u->arena, buf);
    if (!nm || !tg_txt_map_add(&u->used, nm, (size_t)len)) return false;
    return unit_push(u, (unit_fn){g, nm, false, NULL}, ctx);
}

/* Lets root r, a clone of another graph (an optimized function), stand for it: calls of
 * the original print r's name, and the original is not printed again. The origin may have
 * been freed, so it is only compared by address here; a callee found at that address
 * must also have r's name (unit_add_callees), else the entry is dropped. */
static bool unit_alias(unit *u, const tg_graph *r, const char *name, tg_ctx *ctx) {
    const tg_graph *o = r->origin;
    if (!o || o == r) return true;
    for (int i = 0; i < u->n; i++)
        if (u->fn[i].g == o) return true;
    return unit_push(u, (unit_fn){o, name, true, r->name}, ctx);
}

/* The graphs that live nodes of g name in FUNC attributes (dead calls, left by inlining
 * until the graph is compacted, are not printed), each once, into *out (ctx memory). */
static bool live_callees(const tg_graph *g, tg_ctx *ctx, tg_vec *out) {
    out->n = 0;
    if (g->callees.n == 0) return true;
    int n = 0;
    tg_node **order = tg_ir_toposort(g, &n);
    if (!order) return false;
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        const tg_node *nd = order[i];
        const tg_op_def *op = tg_op_table[nd->op];
        for (int j = 0; ok && j < op->nattrs; j++) {
            if (nd->attrs[j].kind != TG_ATTR_FUNC) continue;
            bool seen = false;
            for (int k = 0; k < out->n && !seen; k++) seen = out->items[k] == nd->attrs[j].fn;
            if (!seen) ok = tg_vec_push(ctx, out, nd->attrs[j].fn);
        }
    }
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return ok;
}

/* Adds the graphs that root calls, directly or not, callees before callers (an iterative
 * depth-first walk; calls never form a cycle, and nest at most TG_CALL_MAX_DEPTH deep). */
static bool unit_add_callees(unit *u, const tg_graph *root, tg_ctx *ctx) {
    struct frame {
        const tg_graph *g;
        tg_vec calls;
        int next;
    } stack[TG_CALL_MAX_DEPTH + 2];
    int sp = 0;
    bool ok = true;
    stack[sp] = (struct frame){root, {0}, 0};
    ok = live_callees(root, ctx, &stack[sp++].calls);
    while (ok && sp > 0) {
        struct frame *fr = &stack[sp - 1];
        if (fr->next < fr->calls.n) {
            const tg_graph *c = fr->calls.items[fr->next++];
            bool seen = false;
            for (int i = 0; i < u->n && !seen; i++) {
                if (u->fn[i].g != c) continue;
                if (u->fn[i].alias && strcmp(c->name, u->fn[i].want) != 0)
                    u->fn[i].g = NULL; /* another graph where a freed origin was */
                else
                    seen = true;
            }
            if (seen || sp == TG_CALL_MAX_DEPTH + 2) continue;
            stack[sp] = (struct frame){c, {0}, 0};
            ok = live_callees(c, ctx, &stack[sp++].calls);
        } else {
            if (fr->g != root) ok = unit_add(u, fr->g, ctx);
            tg_vec_fini(ctx, &fr->calls);
            sp--;
        }
    }
    while (sp > 0) tg_vec_fini(ctx, &stack[--sp].calls);
    return ok;
}

static void unit_fini(unit *u, tg_ctx *ctx) {
    tg_mem_free(ctx, u->fn, sizeof *u->fn * (size_t)u->cap);
    tg_txt_map_fini(&u->used);
    tg_arena_fini(&u->arena);
}

/* Prints the functions of roots[0..n) (in that order, their names kept first) and the
 * functions they call that are not among them (before the first root that calls them). */
tg_status tg_txt_print_unit(const tg_graph *const *roots, int n, tg_ctx *ctx, FILE *f) {
    unit u = {0};
    tg_txt_map_init(&u.used, ctx);
    tg_arena_init(&u.arena, ctx);
    bool ok = true;
    for (int i = 0; ok && i < n; i++) ok = unit_add(&u, roots[i], ctx);
    int nroots = u.n;
    for (int i = 0; ok && i < nroots; i++) ok = unit_alias(&u, u.fn[i].g, u.fn[i].name, ctx);
    for (int i = 0; ok && i < n; i++) ok = unit_add_callees(&u, roots[i], ctx);
    tg_status st = ok ? TG_OK : tg_set_error(TG_ENOMEM, "out of memory printing functions");
    int printed = 0;
    for (int i = nroots; st == TG_OK && i < u.n; i++) { /* callees not given */
        if (u.fn[i].alias) continue;
        if (printed++) fputc('\n', f);
        st = print_one(&u, u.fn[i].g, f);
    }
    for (int i = 0; st == TG_OK && i < nroots; i++) {
        if (printed++) fputc('\n', f);
        st = print_one(&u, u.fn[i].g, f);
    }
    unit_fini(&u, ctx);
    return st;
}

tg_status tg_graphs_print(const tg_graph *const *gs, int n, FILE *f) {
    if (!gs || !f || n <= 0)
        return tg_set_error(TG_EINVAL, "tg_graphs_print: %s",
                            !f    ? "file is NULL"
                            : !gs ? "graphs are NULL"
                                  : "no graph to print");
    for (int i = 0; i < n; i++)
        if (!gs[i]) return tg_set_error(TG_EINVAL, "tg_graphs_print: graph %d is NULL", i);
    return tg_txt_print_unit(gs, n, gs[0]->ctx, f);
}

tg_status tg_graph_print(const tg_graph *g, FILE *f) {
    if (!g || !f) return tg_set_error(TG_EINVAL, "tg_graph_print: graph or file is NULL");
    return tg_txt_print_unit(&g, 1, g->ctx, f);
}
