/* grad.c - reverse-mode automatic differentiation. tg_vjp walks the nodes between the
 * requested inputs and the outputs in reverse topological order and asks each op record
 * for its vector-Jacobian product, which builds ordinary graph; cotangents reaching one
 * value from several uses are added. tg_grad seeds a scalar cost with 1.
 *
 * Invariants: only float values carry cotangents (integer and bool values cut the path);
 * every cotangent has its value's dtype and rank and an extent compatible with each of
 * its value's; the walk is iterative; the graph's first error is kept (sticky).
 * Devices (docs/devices.md, "Annotations"): the nodes a VJP builds carry the device of the
 * node they differentiate, and the sum of a value's cotangents (and zeros for a
 * disconnected input) the device that makes the value; where there is none, the device
 * scope in force when tg_vjp was called (g->device), as for any builder.
 * Pmap typing (docs/pmap.md, "Gradients"): in a graph that reads pmap axes (collectives,
 * axis_index, or a declared body: tg_graph_set_mapped) every value is typed varying or
 * invariant over each axis (tg_spmd_varying). A cotangent has its value's type: where an
 * invariant value is used by a node whose result varies over an axis (or by a collective of
 * that axis, which takes its input as varying), what that use gives it is summed over the
 * axis (psum), so that the gradient of an invariant value counts every rank's use once.
 */
#include "grad.h"

#include <stdio.h>
#include <string.h>

/* ---- the driver ---- */

tg_status tg_grad_fail(tg_graph *g, tg_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tg_ir_failv(g, st, fmt, ap);
    va_end(ap);
    return g->status;
}

bool tg_grad_owns(const tg_graph *g, const tg_var *v) {
    return v && v->id >= 0 && v->id < g->vars.n && g->vars.items[v->id] == v;
}

/* Two types a cotangent may have for a value: same dtype and rank, extents compatible. */
static bool compatible(const tg_type *a, const tg_type *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] >= 0 && b->shape[i] >= 0 && a->shape[i] != b->shape[i]) return false;
    return true;
}

const char *tg_grad_label(const tg_var *v, char *buf, size_t n) {
    if (v->name)
        snprintf(buf, n, "'%s'", v->name);
    else if (v->kind == TG_VAR_NODE)
        snprintf(buf, n, "the output of %s (node %d)", tg_op_table[v->node->op]->name, v->node->id);
    else
        snprintf(buf, n, "a constant");
    return buf;
}

enum { GRAD_MAX_AXES = 16 }; /* nested pmap axes one graph can see */

typedef struct grad_walk {
    tg_graph *g;
    const char *scope; /* g->device when the walk began */
    int nvars;         /* vars the per-var arrays have room for (those when the walk began,
                          and those of the callees' bodies it copies: backprop_inline) */
    tg_node **order;   /* nodes the outputs depend on, inputs first */
    int norder;
    uint8_t *needed; /* per var: depends on some wrt and is a float */
    tg_var **cot;    /* per var: accumulated cotangent */
    int naxes;       /* pmap axes the graph reads or is declared for (0: no typing) */
    const char *axis[GRAD_MAX_AXES];
    bool *vary[GRAD_MAX_AXES]; /* per axis, per var (nvars + 1): varies over it */
} grad_walk;

/* Nodes reachable backward from outs, in topological order (iterative DFS). */
static tg_status collect(grad_walk *w, tg_var *const *outs, int nouts) {
    tg_graph *g = w->g;
    int nn = g->nodes.n;
    uint8_t *state = tg_mem_calloc(g->ctx, (size_t)nn + 1);
    struct frame {
        tg_node *n;
        int next;
    } *stack = tg_mem_alloc(g->ctx, sizeof *stack * (size_t)(nn + 1));
    w->order = tg_mem_alloc(g->ctx, sizeof *w->order * (size_t)(nn + 1));
    tg_status st = TG_OK;
    if (!state || !stack || !w->order) {
        st = TG_ENOMEM;
        goto done;
    }
    for (int o = 0; o < nouts; o++) {
        if (outs[o]->kind != TG_VAR_NODE || state[outs[o]->node->id]) continue;
        int sp = 0;
        stack[sp++] = (struct frame){outs[o]->node, 0};
        state[outs[o]->node->id] = 1;
        while (sp > 0) {
            struct frame *f = &stack[sp - 1];
            if (f->next < f->n->nin) {
                tg_var *v = f->n->in[f->next++];
                if (v->kind == TG_VAR_NODE && !state[v->node->id]) {
                    state[v->node->id] = 1;
                    stack[sp++] = (struct frame){v->node, 0};
                }
            } else {
                w->order[w->norder++] = f->n;
                sp--;
            }
        }
    }
done:
    tg_mem_free(g->ctx, state, (size_t)nn + 1);
    tg_mem_free(g->ctx, stack, sizeof *stack * (size_t)(nn + 1));
    if (st != TG_OK) tg_ir_fail(g, st, "grad: out of memory");
    return st;
}

/* The device of the gradient nodes that belong to value v: v's own, else the scope. */
static const char *device_of(const grad_walk *w, const tg_var *v) {
    const char *d = tg_ir_var_device(v);
    return d ? d : w->scope;
}

static tg_status accumulate(grad_walk *w, tg_var *v, tg_var *c) {
    tg_var **slot = &w->cot[v->id];
    if (*slot) {
        w->g->device = device_of(w, v);
        *slot = tg_add(w->g, *slot, c);
        w->g->device = w->scope;
    } else {
        *slot = c;
    }
    return *slot ? TG_OK : w->g->status;
}

static bool axis_known(const grad_walk *w, const char *axis) {
    for (int a = 0; a < w->naxes; a++)
        if (strcmp(w->axis[a], axis) == 0) return true;
    return false;
}

/* The pmap axes of the walk's nodes (those they read, directly or through the graphs they
 * call or map, less those a pmap among them binds, and the graph's declared one) and the
 * typing over each. */
static tg_status type_axes(grad_walk *w) {
    tg_graph *g = w->g;
    bool any = g->spmd_axis != NULL;
    for (int i = 0; i < w->norder && !any; i++) {
        const tg_node *n = w->order[i];
        const tg_op_def *op = tg_op_table[n->op];
        any = (op->effects & TG_EFFECT_AXIS) != 0;
        for (int j = 0; j < op->nattrs && !any; j++) any = n->attrs[j].kind == TG_ATTR_FUNC;
    }
    if (!any) return TG_OK; /* most graphs */
    if (g->spmd_axis) w->axis[w->naxes++] = g->spmd_axis;
    for (int i = 0; i < w->norder; i++) {
        const char *names[GRAD_MAX_AXES + 1]; /* one more than fit: that one fails */
        int nn = tg_pmap_node_axes(g->ctx, w->order[i], names, GRAD_MAX_AXES + 1);
        if (nn < 0) return tg_grad_fail(g, TG_ENOMEM, "grad: out of memory");
        for (int k = 0; k < nn && k <= GRAD_MAX_AXES; k++) {
            if (axis_known(w, names[k])) continue;
            if (w->naxes == GRAD_MAX_AXES)
                return tg_grad_fail(g, TG_ELIMIT, "grad: more than %d pmap axes in one function",
                                    GRAD_MAX_AXES);
            w->axis[w->naxes++] = names[k];
        }
    }
    for (int a = 0; a < w->naxes; a++)
        if (tg_spmd_varying(g->ctx, g, w->axis[a], NULL, w->order, w->norder, &w->vary[a]) != TG_OK)
            return tg_grad_fail(g, TG_ENOMEM, "grad: out of memory");
    return TG_OK;
}

/* What node n gives its input x (cotangent c), summed over each axis over which the use
 * varies and x does not. */
static tg_var *sum_over_axes(grad_walk *w, const tg_node *n, const tg_var *x, tg_var *c) {
    const tg_op_def *op = tg_op_table[n->op];
    const char *read = tg_op_axis_name(op, n->attrs);
    for (int a = 0; a < w->naxes && c; a++) {
        if (w->vary[a][x->id]) continue;
        bool use_varies = read && strcmp(read, w->axis[a]) == 0;
        for (int k = 0; k < n->nout && !use_varies; k++) use_varies = w->vary[a][n->out[k]->id];
        if (!use_varies) continue;
        tg_attr at = TG_A_STR("axis_name", w->axis[a]);
        c = tg_apply(w->g, "psum", &c, 1, &at, 1);
    }
    return c;
}

static tg_status backprop_node(grad_walk *w, tg_node *n);

/* Room in the per-value arrays for the values g has now: all grown, or none. */
static tg_status grow_arrays(grad_walk *w) {
    tg_graph *g = w->g;
    int nv = g->vars.n;
    if (nv <= w->nvars) return TG_OK;
    size_t o = (size_t)w->nvars + 1, m = (size_t)nv + 1;
    uint8_t *needed = tg_mem_calloc(g->ctx, m);
    tg_var **cot = tg_mem_calloc(g->ctx, sizeof *cot * m);
    bool *vary[GRAD_MAX_AXES] = {0};
    bool ok = needed && cot;
    for (int a = 0; ok && a < w->naxes; a++) ok = (vary[a] = tg_mem_calloc(g->ctx, m)) != NULL;
    if (!ok) {
        if (needed) tg_mem_free(g->ctx, needed, m);
        if (cot) tg_mem_free(g->ctx, cot, sizeof *cot * m);
        for (int a = 0; a < w->naxes; a++)
            if (vary[a]) tg_mem_free(g->ctx, vary[a], m);
        return tg_grad_fail(g, TG_ENOMEM, "grad: out of memory");
    }
    memcpy(needed, w->needed, o);
    memcpy(cot, w->cot, sizeof *cot * o);
    tg_mem_free(g->ctx, w->needed, o);
    tg_mem_free(g->ctx, w->cot, sizeof *cot * o);
    w->needed = needed;
    w->cot = cot;
    for (int a = 0; a < w->naxes; a++) {
        memcpy(vary[a], w->vary[a], o);
        tg_mem_free(g->ctx, w->vary[a], o);
        w->vary[a] = vary[a];
    }
    w->nvars = nv;
    return TG_OK;
}

/* The gradient of a call whose callee reads a pmap axis (collectives in a function a body
 * calls): the callee's body is copied here and the walk goes through it, so that its
 * values are typed with the call's arguments (a callee's invariant result, which the
 * call's own typing counts as varying, gets its cotangent summed over the axis) and its
 * collectives' transposes see the caller's types. A backward function of its own could
 * not know them. The copy recomputes the forward values it needs, as that function would. */
static tg_status backprop_inline(grad_walk *w, tg_node *n) {
    tg_graph *g = w->g;
    const tg_graph *fn = n->attrs[0].fn;
    tg_var *outs[TG_MAX_OUTS];
    int first = g->nodes.n, line = g->line, col = g->col;
    g->line = n->line;
    g->col = n->col;
    g->device = n->device ? n->device : w->scope;
    tg_status st = tg_ir_copy_body(g, fn, n->in, outs);
    if (st == TG_OK) st = grow_arrays(w);
    int nnew = g->nodes.n - first;
    tg_node *const *copy = (tg_node *const *)g->nodes.items + first;
    for (int a = 0; st == TG_OK && a < w->naxes; a++)
        if (tg_spmd_varying_more(g->ctx, w->axis[a], copy, nnew, w->vary[a]) != TG_OK)
            st = tg_grad_fail(g, TG_ENOMEM, "grad: out of memory");
    for (int i = 0; st == TG_OK && i < nnew; i++) { /* which copied values need cotangents */
        const tg_node *m = copy[i];
        bool dep = false;
        for (int k = 0; k < m->nin; k++) dep = dep || w->needed[m->in[k]->id];
        for (int k = 0; k < m->nout && dep; k++)
            if (tg_dtype_is_float((tg_dtype)m->out[k]->type.dtype)) w->needed[m->out[k]->id] = 1;
    }
    /* the call's outputs' cotangents go to the copy's; where the call's typing counted an
       output varying that the copy makes invariant, the uses' shares are summed */
    for (int k = 0; st == TG_OK && k < n->nout; k++) {
        tg_var *c = w->cot[n->out[k]->id];
        if (!c || !w->needed[outs[k]->id]) continue;
        for (int a = 0; a < w->naxes && c; a++) {
            if (!w->vary[a][n->out[k]->id] || w->vary[a][outs[k]->id]) continue;
            tg_attr at = TG_A_STR("axis_name", w->axis[a]);
            c = tg_apply(g, "psum", &c, 1, &at, 1);
        }
        st = c ? accumulate(w, outs[k], c) : g->status;
    }
    g->line = line;
    g->col = col;
    g->device = w->scope;
    for (int i = nnew - 1; st == TG_OK && i >= 0; i--) st = backprop_node(w, copy[i]);
    return st;
}

/* Whether n calls a function that reads a pmap axis, with axes to type in this walk. */
static bool calls_axes(const grad_walk *w, const tg_node *n) {
    if (n->op != TG_OP_CALL || w->naxes == 0) return false;
    const char *name;
    return tg_pmap_free_axes(n->attrs[0].fn, &name, 1) != 0;
}

/* Runs one node's VJP and adds what it gives to its inputs' cotangents. */
static tg_status backprop_node(grad_walk *w, tg_node *n) {
    tg_graph *g = w->g;
    const tg_op_def *op = tg_op_table[n->op];
    bool any_out = false, any_in = false;
    for (int k = 0; k < n->nout; k++) any_out = any_out || w->cot[n->out[k]->id];
    for (int k = 0; k < n->nin; k++) any_in = any_in || w->needed[n->in[k]->id];
    if (!any_out || !any_in || op->grad == TG_GRAD_NONE) return TG_OK;
    if (calls_axes(w, n)) return backprop_inline(w, n);
    char where[96] = "";
    if (n->line > 0) snprintf(where, sizeof where, " at %d:%d", n->line, n->col);
    if (op->grad != TG_GRAD_VJP || !op->vjp)
        return tg_grad_fail(g, TG_EUNSUPPORTED, "grad: %s (node %d%s) has no gradient", op->name,
                            n->id, where);
    for (int k = 0; k < n->nin; k++)
        if ((op->grad_undefined >> k & 1u) && w->needed[n->in[k]->id])
            return tg_grad_fail(g, TG_EUNSUPPORTED,
                                "grad: %s (node %d%s) has no gradient with respect to its "
                                "input %d",
                                op->name, n->id, where, k);
    size_t isz = sizeof(tg_var *) * (size_t)(n->nin + 1);
    size_t osz = sizeof(tg_var *) * (size_t)(n->nout + 1);
    tg_var **gin = tg_mem_calloc(g->ctx, isz), **gout = tg_mem_calloc(g->ctx, osz);
    tg_status st = TG_OK;
    if (!gin || !gout) {
        st = tg_grad_fail(g, TG_ENOMEM, "grad: out of memory");
        goto done;
    }
    for (int k = 0; k < n->nout; k++) gout[k] = w->cot[n->out[k]->id];
    int line = g->line, col = g->col;
    g->line = n->line; /* nodes of the gradient carry the position of what they differentiate */
    g->col = n->col;
    g->device = n->device ? n->device : w->scope; /* and its device */
    st = op->vjp(g, n, gout, gin);
    g->line = line;
    g->col = col;
    g->device = w->scope;
    if (st == TG_OK && g->status != TG_OK) st = g->status;
    for (int k = 0; k < n->nin && st == TG_OK; k++) {
        tg_var *x = n->in[k];
        if (!gin[k] || !w->needed[x->id]) continue;
        if (!compatible(&gin[k]->type, &x->type)) {
            char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
            st = tg_grad_fail(g, TG_EINTERNAL,
                              "grad: %s gives input %d a cotangent of type %s, "
                              "the input is %s",
                              op->name, k, tg_type_str(&gin[k]->type, a, sizeof a),
                              tg_type_str(&x->type, b, sizeof b));
            break;
        }
        if (w->naxes > 0) {
            g->line = n->line;
            g->col = n->col;
            g->device = n->device ? n->device : w->scope;
            gin[k] = sum_over_axes(w, n, x, gin[k]);
            g->line = line;
            g->col = col;
            g->device = w->scope;
            if (!gin[k]) {
                st = g->status;
                break;
            }
        }
        st = accumulate(w, x, gin[k]);
    }
done:
    if (gin) tg_mem_free(g->ctx, gin, isz);
    if (gout) tg_mem_free(g->ctx, gout, osz);
    return st;
}

tg_status tg_vjp(tg_graph *g, tg_var *const *outs, tg_var *const *cot, int nouts,
                 tg_var *const *wrt, int nwrt, tg_disconnected disconnected, tg_var **out) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_vjp: graph is NULL");
    if (g->status != TG_OK) return g->status;
    if (nouts < 1 || nwrt < 0 || !outs || !cot || (nwrt > 0 && (!wrt || !out)))
        return tg_grad_fail(g, TG_EINVAL, "tg_vjp: invalid arguments (%s)",
                            nouts < 1 || nwrt < 0 ? "a count is not positive" : "an array is NULL");
    if ((unsigned)disconnected > TG_DISCONNECTED_ZERO)
        return tg_grad_fail(g, TG_EINVAL, "tg_vjp: invalid disconnected mode %d",
                            (int)disconnected);
    char lab[128];
    for (int i = 0; i < nouts; i++) {
        if (!tg_grad_owns(g, outs[i]) || !tg_grad_owns(g, cot[i]))
            return tg_grad_fail(g, TG_EINVAL,
                                "vjp: output %d or its cotangent is missing or "
                                "belongs to another graph",
                                i);
        if (!compatible(&outs[i]->type, &cot[i]->type)) {
            char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
            return tg_grad_fail(g, TG_ETYPE, "vjp: cotangent %d is %s, its value is %s", i,
                                tg_type_str(&cot[i]->type, a, sizeof a),
                                tg_type_str(&outs[i]->type, b, sizeof b));
        }
    }
    for (int i = 0; i < nwrt; i++) {
        if (!tg_grad_owns(g, wrt[i]))
            return tg_grad_fail(g, TG_EINVAL,
                                "grad: argument %d is missing or belongs to "
                                "another graph",
                                i + 1);
        if (!tg_dtype_is_float((tg_dtype)wrt[i]->type.dtype))
            return tg_grad_fail(g, TG_ETYPE,
                                "grad: cannot differentiate with respect to %s of "
                                "dtype %s (gradients are defined for float values)",
                                tg_grad_label(wrt[i], lab, sizeof lab),
                                tg_dtype_name((tg_dtype)wrt[i]->type.dtype));
    }
    grad_walk w = {.g = g, .scope = g->device, .nvars = g->vars.n};
    const int nn0 = g->nodes.n; /* collect sizes w.order by it; backprop adds nodes */
    w.needed = tg_mem_calloc(g->ctx, (size_t)w.nvars + 1);
    w.cot = tg_mem_calloc(g->ctx, sizeof *w.cot * (size_t)(w.nvars + 1));
    tg_status st = (w.needed && w.cot) ? collect(&w, outs, nouts)
                                       : tg_grad_fail(g, TG_ENOMEM, "grad: out of memory");
    if (st == TG_OK) {
        for (int i = 0; i < nwrt; i++) w.needed[wrt[i]->id] = 1;
        for (int i = 0; i < w.norder; i++) {
            tg_node *n = w.order[i];
            bool dep = false;
            for (int k = 0; k < n->nin; k++) dep = dep || w.needed[n->in[k]->id];
            for (int k = 0; k < n->nout && dep; k++)
                if (tg_dtype_is_float((tg_dtype)n->out[k]->type.dtype)) w.needed[n->out[k]->id] = 1;
        }
        st = type_axes(&w);
        for (int i = 0; i < nouts && st == TG_OK; i++)
            if (w.needed[outs[i]->id]) st = accumulate(&w, outs[i], cot[i]);
        for (int i = w.norder - 1; i >= 0 && st == TG_OK; i--) st = backprop_node(&w, w.order[i]);
    }
    for (int i = 0; i < nwrt && st == TG_OK; i++) {
        tg_var *c = w.cot[wrt[i]->id];
        if (!c && disconnected == TG_DISCONNECTED_ZERO) {
            g->device = device_of(&w, wrt[i]);
            c = tg_grad_zeros_like(g, wrt[i]);
            g->device = w.scope;
        } else if (!c) {
            st = tg_grad_fail(g, TG_EINVAL,
                              "grad: the result does not depend on %s (pass "
                              "disconnected=\"zero\" to get zeros)",
                              tg_grad_label(wrt[i], lab, sizeof lab));
        }
        if (st == TG_OK && !c) st = g->status;
        out[i] = c;
    }
    if (w.order) tg_mem_free(g->ctx, w.order, sizeof *w.order * (size_t)(nn0 + 1));
    if (w.needed) tg_mem_free(g->ctx, w.needed, (size_t)w.nvars + 1);
    if (w.cot) tg_mem_free(g->ctx, w.cot, sizeof *w.cot * (size_t)(w.nvars + 1));
    for (int a = 0; a < w.naxes; a++)
        if (w.vary[a]) tg_mem_free(g->ctx, w.vary[a], sizeof *w.vary[a] * (size_t)(w.nvars + 1));
    if (st != TG_OK)
        for (int i = 0; i < nwrt; i++) out[i] = NULL;
    return st;
}

tg_status tg_grad(tg_graph *g, tg_var *cost, tg_var *const *wrt, int nwrt,
                  tg_disconnected disconnected, tg_var **out) {
    if (!g) return tg_set_error(TG_EINVAL, "tg_grad: graph is NULL");
    if (g->status != TG_OK) return g->status;
    if (!tg_grad_owns(g, cost)) return tg_grad_fail(g, TG_EINVAL, "tg_grad: cost is missing");
    if (nwrt < 0 || (nwrt > 0 && (!wrt || !out)))
        return tg_grad_fail(g, TG_EINVAL, "tg_grad: %s",
                            nwrt < 0 ? "negative count"
                            : !wrt   ? "wrt is NULL"
                                     : "out is NULL");
    if ((unsigned)disconnected > TG_DISCONNECTED_ZERO)
        return tg_grad_fail(g, TG_EINVAL, "tg_grad: invalid disconnected mode %d",
                            (int)disconnected);
    char t[TG_TYPE_STR_MAX];
    if (cost->type.ndim != 0)
        return tg_grad_fail(g, TG_ESHAPE,
                            "grad: the cost must be a scalar, got %s (reduce it with sum or mean, "
                            "or use vjp with a cotangent of its type, or jacobian)",
                            tg_type_str(&cost->type, t, sizeof t));
    if (!tg_dtype_is_float((tg_dtype)cost->type.dtype))
        return tg_grad_fail(g, TG_ETYPE, "grad: the cost must be a float, got %s",
                            tg_type_str(&cost->type, t, sizeof t));
    tg_tensor *one = tg_tensor_new(g->ctx, (tg_dtype)cost->type.dtype, 0, NULL);
    if (one) tg_store_f64(tg_tensor_data(one), one->dtype, 1.0);
    tg_var *seed = tg_ir_const(g, one, 0);
    if (!seed) return g->status;
    return tg_vjp(g, &cost, &seed, 1, wrt, nwrt, disconnected, out);
}
