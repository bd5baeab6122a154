/* vectorize.c - `vectorize`, JAX's vmap as a graph transformation: the body of a function
 * written over core shapes is rebuilt, node by node, as the graph over a batch of them.
 *
 *   ys = vectorize(@f, xs, W, in_axes=[0, none], out_axes=[0])
 *
 * The result is ordinary graph, built when the program is: no loop and no inner graph
 * remain, so every rewrite, backend and gradient sees it as if written by hand, and grad of
 * a vectorized function, vectorize of a function taking a gradient (per-example gradients),
 * nested vectorize and vectorize inside a pmap body need nothing more.
 *
 * Each value of the body is batched (its batch axis in front of its core axes) or unbatched
 * (as in the body: it depends on no mapped input). A node with no batched input is made
 * again as it is; the others follow their record's batching rule (op.h, "batching"): the
 * record's hook, else what its kind, signature or `axis` attribute says. tg_vectorize moves
 * each mapped input's in_axis to the front first and each batched output's batch axis to its
 * out_axis last.
 *
 * Invariants:
 *  - A batched value has the rank of its body value plus one, extent `size` in front (any
 *    where size is '?'), and the body value's dtype; each rule's results are checked so.
 *  - The mapped extents of the inputs agree where static; a disagreement names both inputs.
 */
#include "ops.h"

#include <stdio.h>

enum { MAX_ATTRS = 16 }; /* more attributes than any record has */

/* ---- helpers for the rules (ops.h) ---- */

tg_var *tg_batch_extent(tg_batch *b) {
    if (b->extent || b->g->status != TG_OK) return b->extent;
    if (b->size >= 0) {
        b->extent = tg_literal_int(b->g, b->size);
    } else {
        tg_var *dims[TG_MAX_DIMS];
        if (tg_grad_dims(b->g, b->src, dims)) b->extent = dims[0];
    }
    return b->extent;
}

tg_var *tg_batch_pad(tg_batch *b, tg_var *x, int ncore) {
    int have = x ? x->type.ndim - 1 : 0;
    if (!x || have >= ncore) return x;
    int64_t axes[TG_MAX_DIMS];
    for (int i = 0; i < ncore - have; i++) axes[i] = 1 + i;
    tg_attr a = TG_A_INTS("axis", axes, ncore - have);
    return tg_apply(b->g, "expand_dims", &x, 1, &a, 1);
}

tg_var *tg_batch_spread(tg_batch *b, tg_var *x) {
    tg_var *ins[TG_MAX_DIMS + 2];
    if (!x || x->type.ndim + 1 > TG_MAX_DIMS)
        return x ? tg_ir_fail(b->g, TG_ELIMIT,
                              "vectorize: a batched value would have more than "
                              "%d dimensions",
                              TG_MAX_DIMS)
                 : NULL;
    ins[0] = x;
    ins[1] = tg_batch_extent(b);
    if (!ins[1] || !tg_grad_dims(b->g, x, ins + 2)) return NULL;
    return tg_apply(b->g, "alloc", ins, x->type.ndim + 2, NULL, 0);
}

tg_var *tg_batch_flatten(tg_batch *b, tg_var *x) {
    if (!x) return NULL;
    int64_t p = 1;
    for (int d = 1; d < x->type.ndim; d++) {
        if (x->type.shape[d] < 0) {
            tg_ir_fail(b->g, TG_EUNSUPPORTED,
                       "vectorize: flattening a batched value needs its core extents static");
            return NULL;
        }
        p *= x->type.shape[d];
    }
    tg_var *dims[2] = {tg_batch_extent(b), tg_literal_int(b->g, p)};
    return tg_grad_reshape(b->g, x, 2, dims);
}

tg_status tg_batch_refuse(tg_batch *b, const tg_node *n, const char *why) {
    char at[300] = "";
    if (n->line > 0)
        snprintf(at, sizeof at, " at %s:%d:%d", b->fn->file ? b->fn->file : "<input>", n->line,
                 n->col);
    tg_ir_fail(b->g, TG_EUNSUPPORTED, "vectorize: %s%s in '%s': %s", tg_op_table[n->op]->name, at,
               b->fn->name, why);
    return b->g->status;
}

tg_var *tg_batch_make(tg_batch *b, const tg_node *n, tg_var *const *in, const tg_aval *attrs,
                      tg_var **out) {
    tg_node *m = tg_ir_node_make_norm(b->g, n->op, in, n->nin, attrs);
    if (!m) return NULL;
    if (m->nout != n->nout) {
        tg_batch_refuse(b, n, "the batched node has a different number of outputs");
        return NULL;
    }
    for (int k = 0; out && k < m->nout; k++) out[k] = m->out[k];
    return m->out[0];
}

/* Elementwise: inputs broadcast, so a batched input's core rank is padded to the largest
 * core rank (its axes of 1 go after the batch axis); an unbatched input broadcasts as it is. */
static tg_status batch_elemwise(tg_batch *b, const tg_node *n, tg_var *const *in,
                                const bool *batched, tg_var **out, bool *ob) {
    (void)ob;
    tg_var *x[TG_MAX_OUTS];
    int core = 0;
    if (n->nin > TG_MAX_OUTS) return tg_batch_refuse(b, n, "too many inputs");
    for (int k = 0; k < n->nin; k++) {
        int r = in[k]->type.ndim - batched[k];
        if (r > core) core = r;
    }
    for (int k = 0; k < n->nin; k++) x[k] = batched[k] ? tg_batch_pad(b, in[k], core) : in[k];
    tg_batch_make(b, n, x, n->attrs, out);
    return b->g->status;
}

/* Core ops (a signature): the batch axis is one more leading batch dimension. Batched inputs
 * are padded so that their batch dimensions line up (an unbatched input's are broadcast). */
static tg_status batch_core(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                            tg_var **out, bool *ob) {
    (void)ob;
    int core[TG_MAX_OUTS], nsig = 0, depth = 0;
    const char *s = tg_op_table[n->op]->signature;
    for (; *s && *s != '-' && nsig < TG_MAX_OUTS; s++) { /* the input groups: "(m,n),(n,k)" */
        if (*s != '(') continue;
        int dims = 0;
        bool any = false;
        for (s++; *s && *s != ')'; s++) {
            if (*s == ',')
                dims++;
            else if (*s != ' ')
                any = true;
        }
        core[nsig++] = any ? dims + 1 : 0;
        if (!*s) break;
    }
    if (nsig < n->nin) return tg_batch_refuse(b, n, "its signature has too few input groups");
    for (int k = 0; k < n->nin; k++) {
        int lead = in[k]->type.ndim - batched[k] - core[k];
        if (lead > depth) depth = lead;
    }
    tg_var *x[TG_MAX_OUTS];
    for (int k = 0; k < n->nin; k++)
        x[k] = batched[k] ? tg_batch_pad(b, in[k], depth + core[k]) : in[k];
    tg_batch_make(b, n, x, n->attrs, out);
    return b->g->status;
}

/* Ops along axes (the attribute `axis`): every input batched, the axes shifted past the batch
 * axis. An int axis counts from the end when negative, which the batch axis in front does
 * not change. `none` means all core axes for a list of axes (TG_AS_AXES), and the input
 * flattened for a single axis (TG_AS_INT): each input then becomes [batch, core size] along
 * axis 1, and results that keep a core shape get it back. */
tg_status tg_batch_axis(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                        tg_var **out, bool *ob) {
    (void)ob;
    const tg_op_def *op = tg_op_table[n->op];
    int j = -1;
    for (int k = 0; k < op->nattrs; k++)
        if (strcmp(op->attrs[k].name, "axis") == 0) j = k;
    if (j < 0 || op->nattrs > MAX_ATTRS || n->nin > TG_MAX_OUTS)
        return tg_batch_refuse(b, n, "no batching rule for batched inputs");
    tg_aval attrs[MAX_ATTRS];
    int64_t axes[TG_MAX_DIMS];
    memcpy(attrs, n->attrs, sizeof *attrs * (size_t)op->nattrs);
    tg_var *x[TG_MAX_OUTS];
    for (int k = 0; k < n->nin; k++) x[k] = batched[k] ? in[k] : tg_batch_spread(b, in[k]);
    int core = x[0] ? x[0]->type.ndim - 1 : 0;
    tg_aval *a = &attrs[j];
    bool flat = false;
    if (a->kind == TG_ATTR_NONE && op->attrs[j].type == TG_AS_AXES) {
        for (int d = 0; d < core; d++) axes[d] = d + 1;
        *a = (tg_aval){.kind = TG_ATTR_INTS, .ints = axes, .n = core};
    } else if (a->kind == TG_ATTR_NONE) {
        for (int k = 0; k < n->nin; k++) x[k] = tg_batch_flatten(b, x[k]);
        *a = (tg_aval){.kind = TG_ATTR_INT, .i = 1};
        flat = true;
    } else if (a->kind == TG_ATTR_INTS) {
        if (a->n > TG_MAX_DIMS) return tg_batch_refuse(b, n, "too many axes");
        for (int k = 0; k < a->n; k++) axes[k] = a->ints[k] + (a->ints[k] >= 0);
        a->ints = axes;
    } else if (a->kind == TG_ATTR_INT) {
        a->i += a->i >= 0;
    }
    if (b->g->status != TG_OK) return b->g->status;
    tg_batch_make(b, n, x, attrs, out);
    for (int k = 0; flat && b->g->status == TG_OK && k < n->nout; k++) {
        const tg_type *t = &n->out[k]->type; /* the core result: reshape back where it differs */
        if (out[k]->type.ndim == t->ndim + 1) continue;
        tg_var *dims[TG_MAX_DIMS + 1];
        dims[0] = tg_batch_extent(b);
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0)
                return tg_batch_refuse(b, n, "axis=none over core extents that are not static");
            dims[d + 1] = tg_literal_int(b->g, t->shape[d]);
        }
        out[k] = tg_grad_reshape(b->g, out[k], t->ndim + 1, dims);
    }
    return b->g->status;
}

tg_status tg_batch_leading(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                           tg_var **out, bool *ob) {
    (void)ob;
    tg_var *x[TG_MAX_OUTS];
    if (n->nin > TG_MAX_OUTS) return tg_batch_refuse(b, n, "too many inputs");
    for (int k = 0; k < n->nin; k++) x[k] = batched[k] ? in[k] : tg_batch_spread(b, in[k]);
    tg_batch_make(b, n, x, n->attrs, out);
    return b->g->status;
}

tg_status tg_batch_none(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                        tg_var **out, bool *ob) {
    (void)in, (void)batched, (void)out, (void)ob;
    return tg_batch_refuse(b, n, "no batching rule for batched inputs");
}

/* ---- the walk ---- */

/* The rule of node n's op, from its record (op.h, "batching"); NULL: none. */
static tg_batch_fn rule_of(const tg_op_def *op) {
    if (op->batch) return op->batch;
    if (op->kind == TG_KIND_ELEMWISE) return batch_elemwise;
    if (op->signature) return batch_core;
    for (int k = 0; k < op->nattrs; k++)
        if (strcmp(op->attrs[k].name, "axis") == 0) return tg_batch_axis;
    return NULL;
}

/* The copy in g of constant v of the body (unbatched). */
static tg_var *copy_const(tg_graph *g, const tg_var *v) {
    tg_tensor *val = tg_tensor_dup(v->value);
    tg_var *c = val ? tg_ir_const(g, val, v->lit) : tg_ir_fail(g, TG_ENOMEM, "out of memory");
    if (c) c->type = v->type;
    return c;
}

/* Whether the rule's result x fits the body's value t: batched, one more axis in front. */
static bool fits(const tg_batch *b, const tg_var *x, const tg_type *t, bool batched) {
    int off = batched ? 1 : 0;
    if (x->type.dtype != t->dtype || x->type.ndim != t->ndim + off) return false;
    if (batched && b->size >= 0 && x->type.shape[0] >= 0 && x->type.shape[0] != b->size)
        return false;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] >= 0 && x->type.shape[d + off] >= 0 &&
            t->shape[d] != x->type.shape[d + off])
            return false;
    return true;
}

tg_status tg_batch_body(tg_batch *b, const tg_graph *fn, tg_var *const *args, const bool *batched,
                        tg_var **outs, bool *out_batched) {
    tg_graph *g = b->g;
    if (g->status != TG_OK) return g->status;
    if (b->depth >= TG_CALL_MAX_DEPTH)
        return tg_ir_fail(g, TG_ELIMIT, "vectorize: calls nest deeper than %d", TG_CALL_MAX_DEPTH),
               g->status;
    const tg_graph *outer = b->fn;
    const char *dev = g->device; /* the scope's: nodes of the body without one take it */
    b->fn = fn;
    b->depth++;
    int norder = 0, nv = fn->vars.n + 1;
    tg_node **order = tg_ir_toposort(fn, &norder);
    tg_var **map = tg_mem_calloc(g->ctx, sizeof *map * (size_t)nv);
    bool *bat = tg_mem_calloc(g->ctx, sizeof *bat * (size_t)nv);
    tg_var **tmp = tg_mem_alloc(g->ctx, sizeof *tmp * (size_t)(2 * TG_MAX_OUTS + 2));
    bool *tb = tg_mem_alloc(g->ctx, sizeof *tb * (size_t)(2 * TG_MAX_OUTS + 2));
    if (!order || !map || !bat || !tmp || !tb)
        tg_ir_fail(g, TG_ENOMEM, "out of memory vectorizing '%s'", fn->name);
    for (int i = 0; g->status == TG_OK && i < fn->inputs.n; i++) {
        const tg_var *v = fn->inputs.items[i];
        map[v->id] = args[i];
        bat[v->id] = batched[i];
    }
    for (int i = 0; g->status == TG_OK && i < norder; i++) {
        const tg_node *n = order[i];
        const tg_op_def *op = tg_op_table[n->op];
        bool any = false;
        tg_var **in = n->nin <= TG_MAX_OUTS ? tmp : NULL;
        if (!in) {
            tg_batch_refuse(b, n, "too many inputs");
            break;
        }
        for (int k = 0; g->status == TG_OK && k < n->nin; k++) {
            const tg_var *v = n->in[k];
            if (v->kind == TG_VAR_CONST && !map[v->id]) map[v->id] = copy_const(g, v);
            in[k] = map[v->id];
            tb[k] = bat[v->id];
            any = any || tb[k];
        }
        if (g->status != TG_OK) break;
        g->device = n->device ? tg_ir_device_intern(g, n->device) : dev;
        tg_var **out = tmp + TG_MAX_OUTS + 1;
        bool *ob = tb + TG_MAX_OUTS + 1;
        if (n->nout > TG_MAX_OUTS) {
            tg_batch_refuse(b, n, "too many outputs");
            break;
        }
        for (int k = 0; k < n->nout; k++) ob[k] = any;
        if (!any) {
            tg_batch_make(b, n, in, n->attrs, out);
        } else {
            tg_batch_fn rule = rule_of(op);
            if (!rule) {
                tg_batch_refuse(b, n, "no batching rule for batched inputs");
                break;
            }
            for (int k = 0; k < n->nout; k++) out[k] = NULL;
            rule(b, n, in, tb, out, ob);
        }
        for (int k = 0; g->status == TG_OK && k < n->nout; k++) {
            if (!out[k] || !fits(b, out[k], &n->out[k]->type, ob[k])) {
                char t1[TG_TYPE_STR_MAX], t2[TG_TYPE_STR_MAX];
                tg_ir_fail(g, TG_EINTERNAL,
                           "vectorize: the batching rule of %s made %s for the %s value %s",
                           op->name, out[k] ? tg_type_str(&out[k]->type, t1, sizeof t1) : "nothing",
                           ob[k] ? "batched" : "unbatched",
                           tg_type_str(&n->out[k]->type, t2, sizeof t2));
                break;
            }
            map[n->out[k]->id] = out[k];
            bat[n->out[k]->id] = ob[k];
        }
    }
    for (int i = 0; g->status == TG_OK && i < fn->nret; i++) {
        const tg_var *v = fn->outputs.items[i];
        if (v->kind == TG_VAR_CONST && !map[v->id]) map[v->id] = copy_const(g, v);
        outs[i] = map[v->id];
        out_batched[i] = bat[v->id];
    }
    if (order) tg_mem_free(fn->ctx, order, sizeof *order * (size_t)(fn->nodes.n + 1));
    tg_mem_free(g->ctx, map, sizeof *map * (size_t)nv);
    tg_mem_free(g->ctx, bat, sizeof *bat * (size_t)nv);
    tg_mem_free(g->ctx, tmp, sizeof *tmp * (size_t)(2 * TG_MAX_OUTS + 2));
    tg_mem_free(g->ctx, tb, sizeof *tb * (size_t)(2 * TG_MAX_OUTS + 2));
    g->device = dev;
    b->fn = outer;
    b->depth--;
    return g->status;
}

/* ---- the public entry ---- */

/* x with axis `from` moved to `to` (both in [0, ndim)). */
static tg_var *move_axis(tg_graph *g, tg_var *x, int from, int to) {
    if (!x || from == to) return x;
    int64_t perm[TG_MAX_DIMS];
    int nd = x->type.ndim;
    for (int d = 0, k = 0; d < nd; d++) {
        if (d == to) continue;
        if (k == from) k++;
        perm[d] = k++;
    }
    perm[to] = from;
    return tg_transpose(g, x, perm);
}

/* " 'xs'" when v has a name, else "". */
static const char *var_name(const tg_var *v, char *buf, size_t cap) {
    if (v && v->name)
        snprintf(buf, cap, " '%s'", v->name);
    else
        buf[0] = '\0';
    return buf;
}

/* Argument i, mapped along ax (batched) or not, against parameter p of f. */
static tg_status check_arg(tg_graph *g, const tg_graph *f, int i, const tg_var *a, int ax,
                           const tg_var *p) {
    tg_type t = a->type;
    if (ax >= 0) {
        t.ndim--;
        for (int d = ax; d < t.ndim; d++) t.shape[d] = t.shape[d + 1];
    }
    bool fit = (t.dtype == p->type.dtype || a->type.weak) && t.ndim == p->type.ndim;
    for (int d = 0; fit && d < t.ndim; d++)
        fit = p->type.shape[d] < 0 || t.shape[d] < 0 || t.shape[d] == p->type.shape[d];
    if (fit) return TG_OK;
    char ta[TG_TYPE_STR_MAX], tp[TG_TYPE_STR_MAX], nm[80], at[300];
    tg_fn_place(f, at, sizeof at);
    t.weak = 0;
    tg_ir_fail(g, t.dtype == p->type.dtype ? TG_ESHAPE : TG_ETYPE,
               "vectorize: input %d%s %s %s, but parameter '%s' of %s%s is %s", i + 1,
               var_name(a, nm, sizeof nm), ax >= 0 ? "gives slices of type" : "is",
               tg_type_str(&t, ta, sizeof ta), p->name, f->name, at,
               tg_type_str(&p->type, tp, sizeof tp));
    return g->status;
}

tg_status tg_vectorize(tg_graph *g, tg_graph *f, tg_var *const *args, int nargs, const int *in_axes,
                       const int *out_axes, tg_var **outs, int *nouts) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_vectorize: graph is NULL");
    if (g->status != TG_OK) return g->status;
    if (!f || !nouts || !outs || nargs < 0 || (nargs > 0 && !args))
        return tg_ir_fail(g, TG_EINVAL, "tg_vectorize: %s",
                          !f                ? "function is NULL"
                          : !nouts || !outs ? "outs or nouts is NULL"
                          : nargs < 0       ? "nargs is negative"
                                            : "args is NULL"),
               g->status;
    if (f == g)
        return tg_ir_fail(g, TG_EINVAL, "vectorize: '%s' cannot vectorize itself", f->name),
               g->status;
    if (f->status != TG_OK)
        return tg_ir_fail(g, f->status, "vectorize: '%s' failed to build: %s", f->name, f->error),
               g->status;
    if (f->ctx != g->ctx)
        return tg_ir_fail(g, TG_EINVAL, "vectorize: '%s' belongs to another context", f->name),
               g->status;
    char at[300];
    tg_fn_place(f, at, sizeof at);
    int nstate = 0;
    for (int i = 0; i < f->inputs.n; i++) nstate += tg_var_is_state(f->inputs.items[i]);
    if (nstate > 0 || f->updates.n > 0)
        return tg_ir_fail(g, TG_EINVAL, "vectorize: %s%s has state (`mut` parameters)", f->name,
                          at),
               g->status;
    if (f->inputs.n != nargs)
        return tg_ir_fail(g, TG_EINVAL, "vectorize: %s%s takes %d argument%s, got %d", f->name, at,
                          f->inputs.n, f->inputs.n == 1 ? "" : "s", nargs),
               g->status;
    if (f->nret < 1 || f->nret > *nouts || f->nret > TG_MAX_OUTS)
        return tg_ir_fail(g, TG_ELIMIT, "vectorize: %s%s returns %d values; room for %d", f->name,
                          at, f->nret, *nouts < TG_MAX_OUTS ? *nouts : TG_MAX_OUTS),
               g->status;
    for (int i = 0; i < nargs; i++)
        if (!args[i])
            return tg_ir_fail(g, TG_EINVAL, "tg_vectorize: argument %d is NULL", i + 1), g->status;
    tg_batch b = {.g = g, .size = -1, .fn = f};
    tg_var *x[TG_MAX_OUTS], *y[TG_MAX_OUTS];
    bool bx[TG_MAX_OUTS], by[TG_MAX_OUTS];
    if (nargs > TG_MAX_OUTS)
        return tg_ir_fail(g, TG_ELIMIT, "vectorize: at most %d arguments", TG_MAX_OUTS), g->status;
    int first = -1, first_ax = 0, mapped = 0;
    for (int i = 0; i < nargs; i++) mapped += !in_axes || in_axes[i] != TG_AXIS_NONE;
    if (mapped == 0)
        return tg_ir_fail(g, TG_EINVAL,
                          "vectorize: no input is mapped (every in_axes entry is none)"),
               g->status;
    for (int i = 0; i < nargs; i++) {
        const tg_var *a = args[i], *p = f->inputs.items[i];
        int ax = in_axes ? in_axes[i] : 0, nd = a->type.ndim;
        char nm[80];
        bx[i] = ax != TG_AXIS_NONE;
        if (bx[i] && (ax < -nd || ax >= nd))
            return tg_ir_fail(g, TG_EINVAL,
                              "vectorize: in_axes[%d] = %d is out of range for input %d%s of "
                              "rank %d",
                              i, ax, i + 1, var_name(a, nm, sizeof nm), nd),
                   g->status;
        if (bx[i] && ax < 0) ax += nd;
        if (check_arg(g, f, i, a, bx[i] ? ax : -1, p) != TG_OK) return g->status;
        if (!bx[i]) {
            x[i] = a->type.weak ? tg_cast(g, args[i], (tg_dtype)p->type.dtype) : args[i];
            continue;
        }
        int64_t e = a->type.shape[ax];
        if (first >= 0 && e >= 0 && b.size >= 0 && e != b.size) {
            char n0[80];
            return tg_ir_fail(g, TG_ESHAPE,
                              "vectorize: input %d%s has extent %lld along its mapped axis %d, "
                              "but input %d%s has %lld along axis %d",
                              first + 1, var_name(args[first], n0, sizeof n0), (long long)b.size,
                              first_ax, i + 1, var_name(a, nm, sizeof nm), (long long)e, ax),
                   g->status;
        }
        if (first < 0 || (b.size < 0 && e >= 0)) {
            first = i;
            first_ax = ax;
            b.size = e;
        }
        x[i] = move_axis(g, args[i], ax, 0);
        if (!b.src || b.src->type.shape[0] < 0) b.src = x[i];
    }
    if (g->status != TG_OK || tg_batch_body(&b, f, x, bx, y, by) != TG_OK) return g->status;
    for (int i = 0; i < f->nret; i++) {
        int ax = out_axes ? out_axes[i] : 0, nd = y[i]->type.ndim + !by[i];
        if (ax == TG_AXIS_NONE) {
            if (by[i])
                return tg_ir_fail(g, TG_EINVAL,
                                  "vectorize: output %d of %s%s depends on a mapped input, so "
                                  "out_axes[%d] cannot be none",
                                  i + 1, f->name, at, i),
                       g->status;
            outs[i] = y[i];
            continue;
        }
        if (ax < -nd || ax >= nd)
            return tg_ir_fail(g, TG_EINVAL,
                              "vectorize: out_axes[%d] = %d is out of range for output %d of "
                              "rank %d",
                              i, ax, i + 1, nd),
                   g->status;
        outs[i] = move_axis(g, by[i] ? y[i] : tg_batch_spread(&b, y[i]), 0, ax < 0 ? ax + nd : ax);
    }
    *nouts = f->nret;
    return g->status;
}
