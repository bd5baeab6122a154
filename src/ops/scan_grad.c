/* scan_grad.c - the gradient of scan and map (docs/scan.md, "Gradients"):
 * backpropagation through time, as a scan running the other way.
 *
 * Its step is the backward function of the forward step: it takes the cotangents of the
 * float states and the sums so far of the constants' cotangents (carried), the value of
 * each state the backward pass reads going into the step, the sequences' rows and the
 * cotangents of the per-step outputs (sequences), and the constants; it recomputes the
 * step, and returns the states' cotangents going back one step, the sums with this step's
 * cotangents of the constants added, and the cotangents of the sequences' rows (stacked).
 * The states' values going into each step come from the forward scan itself: the gradient
 * replaces it by one that also returns, stacked (`save=`), the states the backward step
 * reads, and only those (a state it never reads, such as a running sum, is passed once as
 * a constant instead).
 *
 * Taps: the cotangent carried for a tapped state 0 is a window of depth rows in the
 * layout of the state's value (oldest first): before the backward step of forward step t
 * it holds the cotangents of x(t - depth + 1) .. x(t), the last one complete (every step
 * reading x(t) came later). The step takes that last row as the cotangent of its new
 * value, and returns the window moved one step back, each tap's cotangent added to the
 * row of the value it read. The first window is the cotangent of the state's last value;
 * the last one that of the values before the first step, the initial value's last depth
 * rows. The taps' values come from the state's saved history (depth + steps rows).
 *
 * Steps known only at run time: with until=true the backward loop runs as many steps as
 * the forward one ran (the rows of a stack it returned); with dynamic_steps=true it takes
 * the same count. A sequence longer than the loop (n_steps, a count, an early stop) gets
 * zero rows where no step read it; with reverse=true and an early stop the rows read are
 * the last ones of the loop, and the backward loop starts at the row where it stopped.
 *
 * Invariants: the backward loop never reads what the forward one did not run; the
 * cotangent of every input has the input's dtype and rank, and its extents where they are
 * static (a '?' where only the run knows them).
 */
#include "ops.h"

#include <stdio.h>
#include <string.h>

#define param_of tg_loop_param
#define drop0    tg_loop_row_type

enum { MAXLIST = 3 * TG_MAX_OUTS + 8, TAPS_MAX = TG_LOOP_TAPS_MAX };

/* A name no parameter of body has: base, then base_, base__, ... */
static void fresh_name(const tg_graph *body, const char *base, int k, char *buf, size_t cap) {
    for (int u = 0;; u++) {
        snprintf(buf, cap, "%s%d%.*s", base, k, u, "________________________________");
        bool taken = false;
        for (int i = 0; i < body->inputs.n && !taken; i++)
            taken = strcmp(((const tg_var *)body->inputs.items[i])->name, buf) == 0;
        if (!taken || u >= 32) return;
    }
}

/* The parts of the backward scan, by the forward node's groups. */
typedef struct bwd {
    bool fs[MAXLIST], fx[MAXLIST], fc[MAXLIST]; /* float state / sequence / constant */
    bool fy[TG_MAX_OUTS];                       /* per-step output with a float cotangent */
    int nfs, nfx, nfc, nfy;
} bwd;

/* What the backward step reads of the forward loop: per state, its values going into the
 * steps (before; a tapped state 0: per tap) and coming out of them (after); per output,
 * its values (out). */
typedef struct reads {
    bool before[MAXLIST], after[MAXLIST], out[TG_MAX_OUTS], tap[TAPS_MAX];
} reads;

/* The parameters of the backward step standing for values of the forward loop. */
typedef struct bparams {
    tg_var *pb[MAXLIST], *pa[MAXLIST], *py[TG_MAX_OUTS], *pt[TAPS_MAX];
} bparams;

static bool is_any(const tg_var *v, tg_var *const *set, int n) {
    for (int i = 0; i < n; i++)
        if (set[i] && v == set[i]) return true;
    return false;
}

/* Marks in r what the outputs of b read among the parameters in p. */
static void find_reads(tg_graph *b, const tg_loop *l, const bparams *p, reads *r) {
    *r = (reads){0};
    int norder = 0;
    tg_node **order = tg_ir_toposort(b, &norder);
    if (!order) {
        tg_ir_fail(b, TG_ENOMEM, "out of memory");
        return;
    }
    for (int i = 0; i <= norder; i++) {
        int nin = i < norder ? order[i]->nin : b->nret;
        for (int e = 0; e < nin; e++) {
            const tg_var *v = i < norder ? order[i]->in[e] : b->outputs.items[e];
            for (int j = 0; j < l->nstate; j++) {
                r->before[j] = r->before[j] || is_any(v, &p->pb[j], 1);
                r->after[j] = r->after[j] || is_any(v, &p->pa[j], 1);
            }
            for (int q = 0; q < l->ntap; q++) r->tap[q] = r->tap[q] || is_any(v, &p->pt[q], 1);
            for (int m = 0; m < l->ny; m++) r->out[m] = r->out[m] || is_any(v, &p->py[m], 1);
        }
    }
    tg_mem_free(b->ctx, order, sizeof *order * (size_t)(b->nodes.n + 1));
}

static tg_var *row_of(tg_graph *g, tg_var *x, int64_t i) {
    tg_slice s = {.start = i, .is_index = true};
    return tg_slice_apply(g, x, &s, 1);
}

/* The cotangent window of a tapped state moved one step back (see the header): row i
 * holds the old row i - 1 (none for row 0) plus the cotangents ct[q] of the taps that
 * read x(t - depth + i). */
static tg_var *window_back(tg_graph *b, const tg_loop *l, tg_var *win, tg_var *const *ct) {
    tg_var *row[TAPS_MAX + 1];
    for (int i = 0; i < l->depth; i++) {
        tg_var *v = i > 0 ? row_of(b, win, i - 1) : NULL;
        for (int q = 0; q < l->ntap; q++)
            if (l->depth + l->taps[q] == i) v = v ? tg_add(b, v, ct[q]) : ct[q];
        row[i] = v ? v : tg_grad_zeros_like(b, row_of(b, win, 0));
    }
    return tg_apply(b, "stack", row, l->depth, NULL, 0);
}

/* The backward step. It reads the values r asks for as sequence rows (a state's value
 * before the step not asked for is a constant: the initial value, never read), and the
 * values the forward step returns from the forward loop's results rather than computing
 * them again. *used receives what it reads in the end. */
static tg_graph *backward_body(tg_graph *g, const tg_node *n, const tg_loop *l, const bwd *w,
                               tg_var *const *gout, const reads *r, reads *used) {
    const tg_graph *body = l->body;
    char name[256], pn[80];
    snprintf(name, sizeof name, "%s_vjp", body->name);
    tg_graph *b = tg_graph_new(g->ctx, name);
    if (!b) return tg_ir_fail(g, TG_ENOMEM, "out of memory building the gradient of a scan");
    b->file = body->file;
    int s0 = l->nstate, c0 = l->nstate + l->nseq;
    bparams p = {0};
    tg_var *ps[MAXLIST] = {0}, *px[MAXLIST] = {0}, *pc[MAXLIST] = {0}, *ptc[TAPS_MAX] = {0};
    tg_var *gs[MAXLIST] = {0}, *acc[MAXLIST] = {0}, *gy[TG_MAX_OUTS] = {0};
    tg_var *args[MAXLIST], *outs[TG_MAX_OUTS];
    /* the type of state j going into a step (a tapped state 0: one row of its history) */
    tg_type st[MAXLIST];
    for (int j = 0; j < l->nstate; j++)
        st[j] = j == 0 && l->tapped ? drop0(&n->in[0]->type) : n->in[j]->type;
#define PNAME(k)        (((const tg_var *)body->inputs.items[k])->name)
#define PARAM(v, nm, t) v = tg_input(b, nm, (tg_dtype)(t).dtype, (t).ndim, (t).shape)
    /* carried: the states' cotangents (a tapped state: its window), the constants' sums */
    for (int j = 0; j < l->nstate; j++)
        if (w->fs[j]) {
            fresh_name(body, "ct_state", j, pn, sizeof pn);
            PARAM(gs[j], pn, j == 0 && l->tapped ? n->out[0]->type : st[j]);
        }
    for (int k = 0; k < l->nconst; k++)
        if (w->fc[k]) {
            fresh_name(body, "ct_const", k, pn, sizeof pn);
            PARAM(acc[k], pn, n->in[c0 + k]->type);
        }
    /* sequences: states before and after, the rows, the outputs and their cotangents */
    for (int q = 0; l->tapped && q < l->ntap; q++)
        if (r->tap[q]) PARAM(p.pt[q], PNAME(q), st[0]);
    for (int j = l->tapped ? 1 : 0; j < l->nstate; j++)
        if (r->before[j]) PARAM(p.pb[j], PNAME(param_of(l, j)), st[j]);
    for (int j = 0; j < l->nstate; j++)
        if (r->after[j]) {
            fresh_name(body, "next", j, pn, sizeof pn);
            PARAM(p.pa[j], pn, st[j]);
        }
    for (int i = 0; i < l->nseq; i++) {
        tg_type t = drop0(&n->in[s0 + i]->type);
        PARAM(px[i], PNAME(param_of(l, s0 + i)), t);
    }
    for (int m = 0; m < l->ny; m++)
        if (r->out[m]) {
            tg_type t = drop0(&n->out[l->nstate + m]->type);
            fresh_name(body, "out", m, pn, sizeof pn);
            PARAM(p.py[m], pn, t);
        }
    for (int m = 0; m < l->ny; m++)
        if (w->fy[m]) {
            tg_type t = drop0(&gout[l->nstate + m]->type);
            fresh_name(body, "ct_out", m, pn, sizeof pn);
            PARAM(gy[m], pn, t);
        }
    /* constants: the constants, then the states (taps) whose values no step reads */
    for (int k = 0; k < l->nconst; k++)
        PARAM(pc[k], PNAME(param_of(l, c0 + k)), n->in[c0 + k]->type);
    for (int q = 0; l->tapped && q < l->ntap; q++)
        if (!r->tap[q]) PARAM(ptc[q], PNAME(q), st[0]);
    for (int j = l->tapped ? 1 : 0; j < l->nstate; j++)
        if (!r->before[j]) PARAM(ps[j], PNAME(param_of(l, j)), st[j]);
#undef PARAM
#undef PNAME
    /* the forward step's arguments, by its parameters */
    for (int q = 0; l->tapped && q < l->ntap; q++) args[q] = p.pt[q] ? p.pt[q] : ptc[q];
    for (int j = l->tapped ? 1 : 0; j < l->nstate; j++)
        args[param_of(l, j)] = p.pb[j] ? p.pb[j] : ps[j];
    for (int i = 0; i < l->nseq; i++) args[param_of(l, s0 + i)] = px[i];
    for (int k = 0; k < l->nconst; k++) args[param_of(l, c0 + k)] = pc[k];
    if (b->status == TG_OK) tg_ir_copy_body(b, body, args, outs);
    tg_var *ys[MAXLIST], *cots[MAXLIST], *wrt[MAXLIST], *res[MAXLIST], *ret[MAXLIST];
    int ny = 0, nw = 0, nr = 0;
    for (int j = 0; j < l->nstate && b->status == TG_OK; j++)
        if (w->fs[j]) {
            ys[ny] = outs[j];
            /* a tapped state's new value: the last row of its window */
            cots[ny++] = j == 0 && l->tapped ? row_of(b, gs[0], l->depth - 1) : gs[j];
        }
    for (int m = 0; m < l->ny; m++)
        if (w->fy[m]) {
            ys[ny] = outs[l->nstate + m];
            cots[ny++] = gy[m];
        }
    for (int j = 0; j < l->nstate; j++)
        if (w->fs[j]) {
            if (j == 0 && l->tapped)
                for (int q = 0; q < l->ntap; q++) wrt[nw++] = args[q];
            else
                wrt[nw++] = args[param_of(l, j)];
        }
    for (int i = 0; i < l->nseq; i++)
        if (w->fx[i]) wrt[nw++] = px[i];
    for (int k = 0; k < l->nconst; k++)
        if (w->fc[k]) wrt[nw++] = pc[k];
    if (b->status == TG_OK && ny > 0 && nw > 0)
        tg_vjp(b, ys, cots, ny, wrt, nw, TG_DISCONNECTED_ZERO, res);
    if (b->status == TG_OK) {
        int q = 0;
        for (int j = 0; j < l->nstate; j++)
            if (w->fs[j] && j == 0 && l->tapped) {
                ret[nr++] = window_back(b, l, gs[0], res);
                q += l->ntap;
            } else if (w->fs[j]) {
                ret[nr++] = res[q++];
            }
        int qx = q;
        for (int i = 0; i < l->nseq; i++)
            if (w->fx[i]) q++;
        for (int k = 0; k < l->nconst; k++)
            if (w->fc[k]) ret[nr++] = tg_add(b, acc[k], res[q++]);
        for (int i = 0; i < l->nseq; i++)
            if (w->fx[i]) ret[nr++] = res[qx++];
        if (b->status == TG_OK) tg_graph_set_outputs(b, ret, nr);
    }
    /* what the step returns is read from the forward loop's results (an exact type match
       only: a '?' the results know better is left to be computed again) */
    for (int j = 0; b->status == TG_OK && j < l->nstate; j++)
        if (p.pa[j] && outs[j]->kind == TG_VAR_NODE &&
            tg_type_equal(&outs[j]->type, &p.pa[j]->type))
            tg_ir_replace(b, outs[j], p.pa[j]);
    for (int m = 0; b->status == TG_OK && m < l->ny; m++)
        if (p.py[m] && outs[l->nstate + m]->kind == TG_VAR_NODE &&
            tg_type_equal(&outs[l->nstate + m]->type, &p.py[m]->type))
            tg_ir_replace(b, outs[l->nstate + m], p.py[m]);
    if (b->status == TG_OK) find_reads(b, l, &p, used);
    if (b->status != TG_OK) {
        tg_ir_fail(g, b->status, "%s", b->error);
        tg_graph_free(b);
        return NULL;
    }
    return b;
}

/* The forward loop saving the states in need[]: n itself when it saves them already, else
 * a new scan (n's attributes, and the longer `save`) that replaces n's uses. *saved[j]
 * receives the stack of state j's values (steps + 1 rows; a tapped state 0: its history,
 * depth + steps rows), *f the node. */
static tg_status forward_saving(tg_graph *g, const tg_node *n, const tg_loop *l, const bool *need,
                                tg_var **saved, const tg_node **f) {
    int64_t save[MAXLIST];
    int nsave = 0, nold = l->save ? l->save->n : 0;
    bool all = true;
    for (int j = 0; j < l->nstate; j++) {
        bool old = false;
        for (int q = 0; q < nold; q++) old = old || l->save->ints[q] == j;
        all = all && (old || !need[j]);
        if (old || need[j]) save[nsave++] = j;
    }
    *f = n;
    tg_var *fo[TG_MAX_OUTS];
    if (!all) {
        tg_attr a[12];
        int na = 0;
        a[na++] = TG_A_FUNC("body", (tg_graph *)l->body); /* the node retains it */
        a[na++] = TG_A_INT("n_states", l->nstate);
        a[na++] = TG_A_INT("n_sequences", l->nseq);
        if (l->nsteps_given) a[na++] = TG_A_INT("n_steps", l->nsteps);
        a[na++] = TG_A_BOOL("dynamic_steps", l->dyn);
        if (l->tapped) a[na++] = TG_A_INTS("taps", l->taps, l->ntap);
        if (l->until) a[na++] = TG_A_BOOL("until", true);
        if (l->reverse) a[na++] = TG_A_BOOL("reverse", true);
        a[na++] = TG_A_INTS("save", save, nsave);
        int nout = TG_MAX_OUTS;
        if (tg_apply_multi(g, "scan", n->in, n->nin, a, na, fo, &nout) != TG_OK) return g->status;
        bool ok = true;
        for (int q = 0; q < l->nstate + l->ny && ok; q++) /* the same values, from the new node */
            ok = tg_ir_replace(g, n->out[q], fo[q]) == TG_OK;
        for (int q = 0; q < nold && ok; q++)
            for (int p = 0; p < nsave && ok; p++)
                if (save[p] == l->save->ints[q])
                    ok = tg_ir_replace(g, n->out[l->nstate + l->ny + q],
                                       fo[l->nstate + l->ny + p]) == TG_OK;
        if (!ok) {
            tg_ir_fail(g, TG_EINTERNAL, "scan gradient: %s", tg_last_error());
            return g->status;
        }
        *f = fo[0]->node;
    }
    for (int p = 0; p < nsave; p++) saved[save[p]] = (*f)->out[l->nstate + l->ny + p];
    return TG_OK;
}

/* Rows [lo, hi) of x along axis 0, hi counted from the end when <= 0. */
static tg_var *rows(tg_graph *g, tg_var *x, int64_t lo, int64_t hi) {
    tg_slice s = {
        .start = lo, .stop = hi, .omit = TG_SLICE_NO_STEP | (hi == 0 ? TG_SLICE_NO_STOP : 0)};
    return tg_slice_apply(g, x, &s, 1);
}

/* x's extent along axis 0 as a 0-d i64 value (a literal when static). */
static tg_var *extent0(tg_graph *g, tg_var *x) {
    if (x->type.shape[0] >= 0) return tg_literal_int(g, x->type.shape[0]);
    return row_of(g, tg_apply(g, "shape", &x, 1, NULL, 0), 0);
}

/* a - b for 0-d i64 extents, a literal when both are. */
static tg_var *extent_sub(tg_graph *g, tg_var *a, int64_t as, tg_var *b, int64_t bs) {
    if (as >= 0 && bs >= 0) return tg_literal_int(g, as - bs);
    return tg_apply(g, "sub", (tg_var *[]){a, b}, 2, NULL, 0);
}

/* v with `ext` (a 0-d i64) zero rows added before (front) or after its rows. */
static tg_var *zero_rows(tg_graph *g, tg_var *v, tg_var *ext, bool front) {
    tg_var *ins[TG_MAX_DIMS + 1];
    if (!tg_grad_dims(g, v, ins + 1)) return NULL;
    ins[1] = ext;
    ins[0] = tg_ir_const(g, tg_tensor_new(g->ctx, (tg_dtype)v->type.dtype, 0, NULL), 0);
    tg_var *z = tg_apply(g, "alloc", ins, v->type.ndim + 1, NULL, 0);
    tg_var *parts[2] = {front ? z : v, front ? v : z};
    return tg_apply(g, "concatenate", parts, 2, NULL, 0);
}

/* The cotangent v of the rows of x that the loop touched, as a cotangent of all of x:
 * zero rows added before (front) or after them, up to x's extent along axis 0. */
static tg_var *pad_rows(tg_graph *g, tg_var *v, tg_var *x, bool front) {
    int64_t nx = x->type.shape[0], nv = v->type.shape[0];
    if (nx >= 0 && nx == nv) return v;
    return zero_rows(g, v, extent_sub(g, extent0(g, x), nx, extent0(g, v), nv), front);
}

/* The values of the tapped state x(t + tap) the forward step t read (tap 0: the values it
 * wrote), ordered as the backward loop's rows, from the history h (depth + steps rows,
 * kernel layout: time order, mirrored with reverse=true). */
static tg_var *history_rows(tg_graph *g, const tg_loop *l, tg_var *h, int64_t tap) {
    int64_t d = l->depth;
    return l->reverse ? rows(g, h, -tap, -(d + tap)) : rows(g, h, d + tap, tap);
}

/* The number of steps the loop f ran, from the rows of a stack it returned. */
static tg_var *steps_ran(tg_graph *g, const tg_node *f, const tg_loop *l, int nsave0) {
    tg_var *s = f->out[l->nstate];
    int64_t extra = 0;
    if (l->ny == 0) { /* the first saved state: one row more (the history: depth more) */
        extra = nsave0 == 0 && l->tapped ? l->depth : 1;
    }
    return extent_sub(g, extent0(g, s), -1, tg_literal_int(g, extra), extra);
}

/* The loop's number of steps when inference knows it, else -1. */
static int64_t static_steps(const tg_node *f, const tg_loop *l) {
    if (l->until) return -1;
    if (l->nsteps_given) return l->nsteps;
    tg_loop lf; /* f's saved states */
    tg_loop_get(tg_op_table[f->op], f->attrs, f->nin, &lf);
    for (int q = l->nstate; q < f->nout; q++) {
        int64_t e = f->out[q]->type.shape[0];
        if (e < 0) continue;
        if (q < l->nstate + l->ny) return e;
        bool hist = l->tapped && lf.save && lf.save->ints[q - l->nstate - l->ny] == 0;
        return e - (hist ? l->depth : 1);
    }
    return -1;
}

tg_status tg_scan_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_loop l;
    tg_loop_get(tg_op_table[n->op], n->attrs, n->nin, &l);
    int s0 = l.nstate, c0 = l.nstate + l.nseq, nold = l.save ? l.save->n : 0;
    bwd w = {0};
    for (int j = 0; j < l.nstate; j++) w.nfs += w.fs[j] = tg_ops_float_in(n, j);
    for (int i = 0; i < l.nseq; i++) w.nfx += w.fx[i] = tg_ops_float_in(n, s0 + i);
    for (int k = 0; k < l.nconst; k++) w.nfc += w.fc[k] = tg_ops_float_in(n, c0 + k);
    bool any_out = false;
    for (int j = 0; j < l.nstate; j++) any_out = any_out || (w.fs[j] && gout[j]);
    for (int m = 0; m < l.ny; m++)
        w.nfy += w.fy[m] =
            gout[l.nstate + m] && tg_dtype_is_float((tg_dtype)n->out[l.nstate + m]->type.dtype);
    any_out = any_out || w.nfy > 0;
    if (!any_out || w.nfs + w.nfx + w.nfc == 0) return TG_OK;
    const char *why = NULL;
    for (int q = 0; q < nold; q++)
        if (gout[l.nstate + l.ny + q]) why = "its saved states (save=) used";
    if (l.nstate + l.ntap + l.nseq + l.nconst + l.ny > 2 * TG_MAX_OUTS)
        why = "this many inputs and outputs";
    if (why) {
        tg_ir_fail(g, TG_EUNSUPPORTED, "grad: a scan with %s has no gradient", why);
        return g->status;
    }
    /* first reading everything, to find what the backward step needs */
    reads all, used;
    memset(&all, 1, sizeof all);
    if (l.tapped) all.before[0] = false;
    tg_graph *b = backward_body(g, n, &l, &w, gout, &all, &used);
    if (b && memcmp(&all, &used, sizeof all) != 0) {
        tg_graph_free(b);
        all = used;
        b = backward_body(g, n, &l, &w, gout, &all, &used);
    }
    if (!b) return g->status;
    bool need[MAXLIST], any_need = false;
    for (int j = 0; j < l.nstate; j++) need[j] = all.before[j] || all.after[j];
    for (int q = 0; l.tapped && q < l.ntap; q++) need[0] = need[0] || all.tap[q];
    for (int j = 0; j < l.nstate; j++) any_need = any_need || need[j];
    /* an early stop: the backward loop counts the rows of a stack, a state's if no output's */
    if (l.until && l.ny == 0 && !any_need) need[0] = true;
    tg_var *saved[MAXLIST] = {0};
    const tg_node *f = n;
    if (forward_saving(g, n, &l, need, saved, &f) != TG_OK) {
        tg_graph_free(b);
        return g->status;
    }
    int64_t steps = static_steps(f, &l);
    tg_var *args[MAXLIST];
    int na = 0;
    for (int j = 0; j < l.nstate; j++)
        if (w.fs[j]) args[na++] = gout[j] ? gout[j] : tg_grad_zeros_like(g, n->out[j]);
    for (int k = 0; k < l.nconst; k++)
        if (w.fc[k]) args[na++] = tg_grad_zeros_like(g, n->in[c0 + k]);
    int nst = na;
    /* a state's stack: row t is its value before the step reading row t (reverse: row t + 1) */
    for (int q = 0; l.tapped && q < l.ntap; q++)
        if (all.tap[q]) args[na++] = history_rows(g, &l, saved[0], l.taps[q]);
    for (int j = 0; j < l.nstate; j++)
        if (all.before[j])
            args[na++] = l.reverse ? rows(g, saved[j], 1, 0) : rows(g, saved[j], 0, -1);
    for (int j = 0; j < l.nstate; j++)
        if (all.after[j] && j == 0 && l.tapped)
            args[na++] = history_rows(g, &l, saved[0], 0);
        else if (all.after[j])
            args[na++] = l.reverse ? rows(g, saved[j], 0, -1) : rows(g, saved[j], 1, 0);
    tg_var *count = NULL, *skip = NULL;
    if (l.until) {
        int nsave0 = 0; /* the first state f saves */
        while (l.ny == 0 && !saved[nsave0]) nsave0++;
        count = steps_ran(g, f, &l, nsave0);
    } else if (l.dyn) {
        count = n->in[n->nin - 1];
    }
    if (l.until && l.reverse && l.nseq > 0) {
        /* the rows read run from the last row of the loop down to the one where it
           stopped: the backward loop starts there (skip rows in) */
        tg_var *planned = l.nsteps_given ? tg_literal_int(g, l.nsteps)
                          : l.dyn        ? n->in[n->nin - 1]
                                         : extent0(g, n->in[s0]);
        skip = extent_sub(g, planned, -1, count, -1);
        tg_var *read = tg_apply(g, "arange", (tg_var *[]){skip, planned}, 2, NULL, 0);
        for (int i = 0; i < l.nseq; i++) {
            tg_attr ax = TG_A_INT("axis", 0);
            args[na++] = tg_apply(g, "take", (tg_var *[]){n->in[s0 + i], read}, 2, &ax, 1);
        }
    }
    for (int i = 0; !skip && i < l.nseq; i++) { /* the rows the loop read */
        tg_var *x = n->in[s0 + i];
        if (steps >= 0 && x->type.shape[0] != steps) {
            tg_slice s = {.start = 0, .stop = steps, .omit = TG_SLICE_NO_STEP};
            x = tg_slice_apply(g, x, &s, 1);
        } else if (count) { /* the stacks of the steps run sit beside it: of one length */
            tg_attr ax = TG_A_INT("axis", 0);
            tg_var *first = tg_apply(g, "arange", &count, 1, NULL, 0);
            x = tg_apply(g, "take", (tg_var *[]){x, first}, 2, &ax, 1);
        }
        args[na++] = x;
    }
    for (int m = 0; m < l.ny; m++)
        if (all.out[m]) args[na++] = f->out[l.nstate + m];
    for (int m = 0; m < l.ny; m++)
        if (w.fy[m]) args[na++] = gout[l.nstate + m];
    int nsq = na - nst;
    for (int k = 0; k < l.nconst; k++) args[na++] = n->in[c0 + k];
    for (int q = 0; l.tapped && q < l.ntap; q++) /* any row: never read */
        if (!all.tap[q]) args[na++] = row_of(g, n->in[0], -1);
    for (int j = l.tapped ? 1 : 0; j < l.nstate; j++)
        if (!all.before[j]) args[na++] = n->in[j];
    bool dyn = count != NULL;
    if (dyn) args[na++] = count;
    tg_attr a[12];
    int nat = 0;
    a[nat++] = TG_A_FUNC("body", b); /* the node retains it */
    a[nat++] = TG_A_INT("n_states", nst);
    a[nat++] = TG_A_INT("n_sequences", nsq);
    if (l.nsteps_given && !l.until) a[nat++] = TG_A_INT("n_steps", l.nsteps);
    a[nat++] = TG_A_BOOL("dynamic_steps", dyn);
    if (!l.reverse) a[nat++] = TG_A_BOOL("reverse", true);
    tg_var *res[MAXLIST];
    int nout = MAXLIST;
    if (g->status == TG_OK && tg_apply_multi(g, "scan", args, na, a, nat, res, &nout) == TG_OK) {
        int q = 0;
        for (int j = 0; j < l.nstate; j++)
            if (w.fs[j]) {
                /* the window of a tapped state: the initial value's last depth rows */
                gin[j] = j == 0 && l.tapped ? pad_rows(g, res[q], n->in[0], true) : res[q];
                q++;
            }
        for (int k = 0; k < l.nconst; k++)
            if (w.fc[k]) gin[c0 + k] = res[q++];
        for (int i = 0; i < l.nseq; i++)
            if (w.fx[i]) {
                tg_var *gx = skip ? zero_rows(g, res[q++], skip, true) : res[q++];
                gin[s0 + i] = pad_rows(g, gx, n->in[s0 + i], false);
            }
    }
    tg_graph_free(b); /* the scan node keeps it */
    return g->status;
}
