/* dot.c - Graphviz output of a graph: inputs, constants and literals, one box per op
 * node (op name and output types, then `@device` when annotated), edges from producers to
 * users, and the outputs.
 *
 * Owns: tg_graph_print_dot.
 * Invariants: node identifiers come from variable and node ids (deterministic); labels
 * are escaped for DOT strings; the walk is a loop over tg_ir_toposort's order (or
 * g->nodes when the graph has no outputs), so a chain of 100,000 nodes works.
 */
#include "../ops/ops.h"
#include "text.h"

#include <stdio.h>

/* Writes s inside a DOT "..." string. */
static void put_escaped(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if (*s == '\n') {
            fputs("\\n", f);
            continue;
        }
        fputc(*s, f);
    }
}

/* The DOT node a variable's value comes from. */
static void put_source(FILE *f, const tg_var *v) {
    if (v->kind == TG_VAR_NODE)
        fprintf(f, "n%d", v->node->id);
    else
        fprintf(f, "v%d", v->id);
}

static void put_leaf(FILE *f, const tg_var *v, uint8_t *done) {
    if (v->kind == TG_VAR_NODE || done[v->id]) return;
    done[v->id] = 1;
    char tb[TG_TYPE_STR_MAX], lb[TG_TYPE_STR_MAX + 64];
    tg_type_str(&v->type, tb, sizeof tb);
    if (v->kind == TG_VAR_INPUT) {
        fprintf(f, "  v%d [shape=ellipse, style=filled, fillcolor=\"#dde8f8\", label=\"", v->id);
        put_escaped(f, v->name ? v->name : "?");
        fputs("\\n", f);
        put_escaped(f, tb);
        if (v->device) {
            fputs("\\n@", f);
            put_escaped(f, v->device);
        }
    } else if (v->lit && v->value && v->value->ndim == 0) {
        tg_ir_format_scalar(v, lb, sizeof lb);
        fprintf(f, "  v%d [shape=plaintext, label=\"", v->id);
        put_escaped(f, lb);
    } else {
        fprintf(f, "  v%d [shape=box, style=\"rounded,filled\", fillcolor=\"#eeeeee\", label=\"",
                v->id);
        if (v->name) {
            put_escaped(f, v->name);
            fputs(" = ", f);
        }
        fputs("const ", f);
        put_escaped(f, tb);
        if (v->value && v->value->ndim == 0) {
            tg_ir_format_scalar(v, lb, sizeof lb);
            fputs("\\n", f);
            put_escaped(f, lb);
        }
    }
    fputs("\"];\n", f);
}

tg_status tg_graph_print_dot(const tg_graph *g, FILE *f) {
    if (!g || !f) return tg_set_error(TG_EINVAL, "tg_graph_print_dot: graph or file is NULL");
    tg_node **order;
    int norder;
    bool own = g->outputs.n > 0;
    if (own) {
        order = tg_ir_toposort(g, &norder);
        if (!order) return tg_last_error()[0] ? TG_EINTERNAL : TG_ENOMEM;
    } else {
        order = (tg_node **)g->nodes.items;
        norder = g->nodes.n;
    }
    size_t nv = (size_t)g->vars.n + 1;
    uint8_t *done = tg_mem_calloc(g->ctx, nv);
    if (!done) {
        if (own) tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
        return TG_ENOMEM;
    }
    fputs("digraph \"", f);
    put_escaped(f, g->name ? g->name : "main");
    fputs("\" {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n", f);
    for (int i = 0; i < g->inputs.n; i++) put_leaf(f, g->inputs.items[i], done);
    char tb[TG_TYPE_STR_MAX];
    for (int i = 0; i < norder; i++) {
        const tg_node *n = order[i];
        for (int k = 0; k < n->nin; k++) put_leaf(f, n->in[k], done);
        fprintf(f, "  n%d [shape=box, label=\"", n->id);
        put_escaped(f, tg_op_table[n->op]->name);
        /* "call sq", "pmap @body": the functions a node runs, as the text names them */
        for (int j = 0; j < tg_op_table[n->op]->nattrs; j++) {
            if (n->attrs[j].kind != TG_ATTR_FUNC) continue;
            fputs(n->op == TG_OP_CALL ? " " : " @", f);
            put_escaped(f, n->attrs[j].fn->name);
        }
        for (int k = 0; k < n->nout; k++) {
            fputs(k ? ", " : "\\n", f);
            if (n->out[k]->name) {
                put_escaped(f, n->out[k]->name);
                fputs(": ", f);
            }
            put_escaped(f, tg_type_str(&n->out[k]->type, tb, sizeof tb));
        }
        if (n->device) {
            fputs("\\n@", f);
            put_escaped(f, n->device);
        }
        fputs("\"];\n", f);
        for (int k = 0; k < n->nin; k++) {
            const tg_var *v = n->in[k];
            fputs("  ", f);
            put_source(f, v);
            fprintf(f, " -> n%d", n->id);
            if (v->kind == TG_VAR_NODE && v->node->nout > 1)
                fprintf(f, " [label=\"%d\"]", v->index);
            fputs(";\n", f);
        }
    }
    for (int i = 0; i < g->outputs.n; i++) {
        const tg_var *v = g->outputs.items[i];
        put_leaf(f, v, done);
        if (i < g->nret) {
            fprintf(f, "  out%d [shape=plaintext, label=\"return %d\"];\n  ", i, i);
        } else { /* the new value of a state */
            const tg_var *st = g->updates.items[i - g->nret];
            fprintf(f, "  out%d [shape=plaintext, label=\"", i);
            put_escaped(f, st->name ? st->name : "?");
            fputs(" <-\"];\n  ", f);
        }
        put_source(f, v);
        fprintf(f, " -> out%d", i);
        if (v->kind == TG_VAR_NODE && v->node->nout > 1) fprintf(f, " [label=\"%d\"]", v->index);
        fputs(";\n", f);
    }
    fputs("}\n", f);
    if (own) tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    tg_mem_free(g->ctx, done, nv);
    if (ferror(f)) return tg_set_error(TG_EIO, "cannot write the graph '%s'", g->name);
    return TG_OK;
}
