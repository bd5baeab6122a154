/* scan.c - `scan`, a loop carrying states through a step function, and `map`, the form
 * with no carried state (docs/scan.md).
 *
 *   h_last, ys = scan(@step, h0, xs, W, n_sequences=1)
 *   ys = map(@f, xs, W, n_sequences=1)
 *
 * Inputs: the n_states initial states, then the n_sequences sequences (stepped along axis
 * 0), then the constants, then, with dynamic_steps=true, a 0-d integer tensor giving the
 * number of steps. The step takes the carried states (the first one as its taps, in the
 * order written, when `taps=` is given), then one slice of each sequence, then the
 * constants; it returns the new states, then the per-step outputs, then, with until=true,
 * a 0-d bool that stops the loop after the step that returns true. scan returns the last
 * states, then the per-step outputs stacked along a new axis 0.
 *
 * Taps (PyTensor's outputs_info): with taps=[-1, -2] the first state's initial value has
 * a leading axis holding the values before the first step, oldest first ([x(-2), x(-1)]);
 * its last value is in the same layout (the last `depth` values), so it can start another
 * scan. The number of steps is n_steps when given, else the value of the count input
 * (dynamic_steps), else the sequences' common extent; sequences longer than n_steps are
 * read from their start.
 *
 * Execution. The kernel runs the step through the backend's sub-graph executor
 * (tg_subexec.run), which runs the step's compiled program (planned once per input shape
 * signature) on each step. The states live in two buffers each that swap after every step;
 * sequence slices and stacked-output slices are views whose offset moves, so a step
 * allocates nothing. The outputs are the kernel's own (self_alloc): with until=true or a
 * count known only at run time, their length is known only once the loop has run. A loop
 * without carried state (map, or scan with n_states=0) hands its iterations to the
 * executor's run_each, which spreads them over the thread pool. With save=[j, ...] the
 * listed states' values are written straight into rows of their stacks (the value before
 * the first step, then after each step), which the gradient reads; a tapped state 0 saved
 * is its history (the depth values before the first step, then each step's), which the
 * step reads its taps from and writes into, in place of the ring.
 *
 * Gradient: a reverse scan of the step's backward function (scan_grad.c).
 *
 * Invariants:
 *  - Inference checks everything the kernel relies on: the body's arity, each state's type
 *    equal between the step's input and output, sequences of one length, a count >= 0,
 *    taps that are negative, distinct and reach no further back than the initial value.
 *  - The body has no `mut` state; the kernel never writes its inputs.
 */
#include "ops.h"

#include <stdio.h>

#define TAPS_MAX TG_LOOP_TAPS_MAX

enum { A_BODY, A_NSTATES, A_NSEQ, A_NSTEPS, A_DYN, A_TAPS, A_UNTIL, A_REVERSE, A_SAVE };
static const tg_attr_spec scan_attrs[] = {
    [A_BODY] = {"body", TG_AS_FUNC, 1, 0, {0}},
    [A_NSTATES] = {"n_states", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 1}},
    [A_NSEQ] = {"n_sequences", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 0}},
    [A_NSTEPS] = {"n_steps", TG_AS_INT, 0, TG_NULL_WHOLE, {.kind = TG_ATTR_NONE}},
    [A_DYN] = {"dynamic_steps", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
    [A_TAPS] = {"taps", TG_AS_INTS, 0, TG_NULL_WHOLE, {.kind = TG_ATTR_NONE}},
    [A_UNTIL] = {"until", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
    /* steps run from the sequences' last row to their first; row t of each stacked
       output is the step that read row t */
    [A_REVERSE] = {"reverse", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
    /* states whose value going into each step is also returned, stacked, after the
       per-step outputs (what the gradient reads; set by the gradient); a tapped state 0:
       its history, depth + steps rows */
    [A_SAVE] = {"save", TG_AS_INTS, 0, TG_NULL_WHOLE, {.kind = TG_ATTR_NONE}},
};
/* map: no states, taps or stop condition */
enum { M_BODY, M_NSEQ, M_NSTEPS, M_DYN };
static const tg_attr_spec map_attrs[] = {
    [M_BODY] = {"body", TG_AS_FUNC, 1, 0, {0}},
    [M_NSEQ] = {"n_sequences", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 1}},
    [M_NSTEPS] = {"n_steps", TG_AS_INT, 0, TG_NULL_WHOLE, {.kind = TG_ATTR_NONE}},
    [M_DYN] = {"dynamic_steps", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 0}},
};

void tg_loop_get(const tg_op_def *op, const tg_aval *a, int nin, tg_loop *l) {
    *l = (tg_loop){.ntap = 1, .depth = 1, .taps = {-1}, .nsteps = -1};
    l->map = op == &tg_op_map;
    const tg_aval *steps;
    if (l->map) {
        l->body = a[M_BODY].fn;
        l->nseq_attr = a[M_NSEQ].i;
        steps = &a[M_NSTEPS];
        l->dyn = a[M_DYN].i != 0;
    } else {
        l->body = a[A_BODY].fn;
        l->nstate_attr = a[A_NSTATES].i;
        l->nseq_attr = a[A_NSEQ].i;
        steps = &a[A_NSTEPS];
        l->dyn = a[A_DYN].i != 0;
        l->until = a[A_UNTIL].i != 0;
        l->reverse = a[A_REVERSE].i != 0;
        l->save = a[A_SAVE].kind == TG_ATTR_INTS ? &a[A_SAVE] : NULL;
        if (a[A_TAPS].kind == TG_ATTR_INTS) {
            l->tapped = true;
            l->ntap = a[A_TAPS].n < TAPS_MAX ? a[A_TAPS].n : TAPS_MAX;
            l->depth = 0;
            for (int k = 0; k < l->ntap; k++) {
                l->taps[k] = a[A_TAPS].ints[k];
                if (-l->taps[k] > l->depth) l->depth = (int)-l->taps[k];
            }
        }
    }
    /* clamped to the inputs there are, so that decoding never reads past them (inference
       reports counts that do not fit) */
    l->nstate = (int)(l->nstate_attr < 0 ? 0 : l->nstate_attr > nin ? nin : l->nstate_attr);
    int rest = nin - l->nstate;
    l->nseq = (int)(l->nseq_attr < 0 ? 0 : l->nseq_attr > rest ? rest : l->nseq_attr);
    if (steps->kind == TG_ATTR_INT) {
        l->nsteps_given = true;
        l->nsteps_attr = steps->i;
        l->nsteps = steps->i >= 0 ? steps->i : -1;
    }
    l->nconst = nin - l->nstate - l->nseq - (l->dyn ? 1 : 0);
    l->nparam = (l->nstate > 0 ? l->nstate - 1 + l->ntap : 0) + l->nseq + l->nconst;
    l->ny = l->body ? l->body->nret - l->nstate - (l->until ? 1 : 0) : 0;
}

#define param_of tg_loop_param

/* "'h2' (f.tg:4:3)": how a message names returned value j of body. */
static void output_desc(const tg_graph *body, int j, char *buf, size_t cap) {
    const tg_var *v = body->outputs.items[j];
    const char *name = j < body->out_names.n ? body->out_names.items[j] : NULL;
    if (!name) name = v->name;
    int off = name ? snprintf(buf, cap, "'%s'", name) : snprintf(buf, cap, "%d", j + 1);
    if (off < 0 || (size_t)off >= cap) return;
    if (v->kind == TG_VAR_NODE && v->node->line > 0)
        snprintf(buf + off, cap - (size_t)off, " (%s:%d:%d)", body->file ? body->file : "<input>",
                 v->node->line, v->node->col);
    else if (v->kind == TG_VAR_INPUT)
        snprintf(buf + off, cap - (size_t)off, " (a parameter)");
}

#define drop0 tg_loop_row_type

/* Checks the attributes and the body's arity; fills l. */
static tg_status loop_check(tg_infer *ic, tg_loop *l) {
    tg_loop_get(ic->op, ic->attrs, ic->nin, l);
    const tg_graph *body = l->body;
    char at[300];
    tg_fn_place(body, at, sizeof at);
    if (l->nstate_attr < 0 || l->nseq_attr < 0)
        return tg_infer_fail(ic, TG_EINVAL, "n_states=%lld, n_sequences=%lld: expected counts >= 0",
                             (long long)l->nstate_attr, (long long)l->nseq_attr);
    if (l->nconst < 0 || l->nstate_attr + l->nseq_attr > ic->nin)
        return tg_infer_fail(
            ic, TG_EINVAL, "%d input%s, fewer than the %lld state%s and %lld sequence%s%s", ic->nin,
            ic->nin == 1 ? "" : "s", (long long)l->nstate_attr, l->nstate_attr == 1 ? "" : "s",
            (long long)l->nseq_attr, l->nseq_attr == 1 ? "" : "s",
            l->dyn ? " and the count (dynamic_steps)" : "");
    if (l->nsteps_given && l->nsteps_attr < 0)
        return tg_infer_fail(ic, TG_EINVAL, "n_steps=%lld: expected a count >= 0",
                             (long long)l->nsteps_attr);
    if (l->dyn && l->nsteps_given)
        return tg_infer_fail(ic, TG_EINVAL, "n_steps= and dynamic_steps=true: give one count");
    for (int k = 0; l->save && k < l->save->n; k++) {
        int64_t j = l->save->ints[k];
        if (j < 0 || j >= l->nstate || (k > 0 && j <= l->save->ints[k - 1]))
            return tg_infer_fail(ic, TG_EINVAL,
                                 "save[%d] = %lld: expected increasing indices of states (0 "
                                 "to %d)",
                                 k, (long long)j, l->nstate - 1);
    }
    if (l->tapped) {
        if (l->nstate == 0)
            return tg_infer_fail(ic, TG_EINVAL, "taps= applies to the first state: n_states=0");
        const tg_aval *taps = &ic->attrs[A_TAPS];
        if (taps->n < 1 || taps->n > TAPS_MAX)
            return tg_infer_fail(ic, TG_ELIMIT, "taps= has %d entries: expected 1 to %d", taps->n,
                                 TAPS_MAX);
        for (int k = 0; k < l->ntap; k++) {
            if (l->taps[k] >= 0)
                return tg_infer_fail(ic, TG_EINVAL,
                                     "taps[%d] = %lld: a tap reads a past value (-1: the "
                                     "previous step)",
                                     k, (long long)l->taps[k]);
            for (int q = 0; q < k; q++)
                if (l->taps[q] == l->taps[k])
                    return tg_infer_fail(ic, TG_EINVAL, "taps[%d] = %lld is given twice", k,
                                         (long long)l->taps[k]);
        }
    }
    int nstate = 0;
    for (int i = 0; i < body->inputs.n; i++) nstate += tg_var_is_state(body->inputs.items[i]);
    if (nstate > 0 || body->updates.n > 0)
        return tg_infer_fail(ic, TG_EINVAL,
                             "%s%s has state (`mut` parameters): it cannot be a step", body->name,
                             at);
    if (body->inputs.n != l->nparam)
        return tg_infer_fail(ic, TG_EINVAL,
                             "%s%s takes %d argument%s, but the loop passes %d (%d tap%s and "
                             "%d other state%s, %d sequence slice%s, %d constant%s)",
                             body->name, at, body->inputs.n, body->inputs.n == 1 ? "" : "s",
                             l->nparam, l->nstate > 0 ? l->ntap : 0,
                             l->nstate > 0 && l->ntap == 1 ? "" : "s",
                             l->nstate > 0 ? l->nstate - 1 : 0, l->nstate == 2 ? "" : "s", l->nseq,
                             l->nseq == 1 ? "" : "s", l->nconst, l->nconst == 1 ? "" : "s");
    if (l->ny < 0 || body->nret > TG_MAX_OUTS)
        return tg_infer_fail(ic, TG_EINVAL,
                             "%s%s returns %d value%s; the loop expects its %d new state%s%s "
                             "then its per-step outputs",
                             body->name, at, body->nret, body->nret == 1 ? "" : "s", l->nstate,
                             l->nstate == 1 ? "" : "s", l->until ? ", the stop condition" : "");
    return TG_OK;
}

/* Arguments take the parameters' dtypes: weak literals adopt them; a typed argument of
 * another dtype is an error naming both (no silent cast). The count keeps its own. */
static tg_status scan_promote(tg_infer *ic, tg_dtype *want) {
    tg_loop l;
    if (loop_check(ic, &l) != TG_OK) return ic->status;
    for (int i = 0; i < ic->nin; i++) {
        want[i] = (tg_dtype)ic->in[i].dtype;
        if (l.dyn && i == ic->nin - 1) continue;
        const tg_var *p = l.body->inputs.items[param_of(&l, i)];
        tg_dtype pd = (tg_dtype)p->type.dtype;
        if (ic->in[i].dtype != pd && !ic->in[i].weak) {
            char nm[80], at[300];
            tg_fn_place(l.body, at, sizeof at);
            return tg_infer_fail(ic, TG_ETYPE, "input %d%s is %s, but parameter '%s' of %s%s is %s",
                                 i + 1, tg_infer_in_name(ic, i, nm, sizeof nm),
                                 tg_dtype_name((tg_dtype)ic->in[i].dtype), p->name, l.body->name,
                                 at, tg_dtype_name(pd));
        }
        want[i] = pd;
    }
    return TG_OK;
}

/* The number of steps as inference sees it: -1 when only the run knows it. */
static tg_status count_steps(tg_infer *ic, const tg_loop *l, int64_t *steps) {
    int s0 = l->nstate;
    int64_t len = -1;
    int from = -1;
    char nm[80], nm2[80], ty[TG_TYPE_STR_MAX];
    for (int i = s0; i < s0 + l->nseq; i++) {
        const tg_type *t = &ic->in[i];
        if (t->ndim < 1)
            return tg_infer_fail(
                ic, TG_ESHAPE, "sequence %d%s is %s: a sequence needs an axis to step along",
                i - s0 + 1, tg_infer_in_name(ic, i, nm, sizeof nm), tg_type_str(t, ty, sizeof ty));
        if (t->shape[0] < 0) continue;
        if (len >= 0 && t->shape[0] != len)
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "sequences of different lengths: input %d%s has %lld steps, "
                                 "input %d%s has %lld",
                                 from + 1, tg_infer_in_name(ic, from, nm2, sizeof nm2),
                                 (long long)len, i + 1, tg_infer_in_name(ic, i, nm, sizeof nm),
                                 (long long)t->shape[0]);
        if (len < 0) {
            len = t->shape[0];
            from = i;
        }
    }
    if (l->nseq == 0 && l->nsteps < 0 && !l->dyn)
        return tg_infer_fail(ic, TG_EINVAL,
                             "no sequence and no count: give n_steps= (or dynamic_steps=true "
                             "with the count as the last input)");
    *steps = l->nsteps >= 0 ? l->nsteps : l->dyn ? -1 : len;
    if (l->dyn) {
        const tg_type *t = &ic->in[ic->nin - 1];
        if (t->ndim != 0 || !tg_dtype_is_int((tg_dtype)t->dtype))
            return tg_infer_fail(ic, TG_ETYPE,
                                 "dynamic_steps: the last input%s is %s, expected a 0-d integer "
                                 "(the number of steps)",
                                 tg_infer_in_name(ic, ic->nin - 1, nm, sizeof nm),
                                 tg_type_str(t, ty, sizeof ty));
        int64_t c;
        if (tg_infer_const_int(ic, ic->nin - 1, &c)) {
            if (c < 0)
                return tg_infer_fail(ic, TG_EINVAL, "the number of steps is %lld: expected >= 0",
                                     (long long)c);
            *steps = c;
        }
    }
    if (*steps >= 0 && len >= 0 && len < *steps)
        return tg_infer_fail(
            ic, TG_ESHAPE, "sequence%s has %lld steps, fewer than the %lld steps of the loop",
            tg_infer_in_name(ic, from, nm, sizeof nm), (long long)len, (long long)*steps);
    return TG_OK;
}

static uint64_t type_bytes(const tg_type *t) {
    int64_t n = 0;
    return tg_shape_size(t->ndim, t->shape, &n) ? (uint64_t)n * tg_dtype_size((tg_dtype)t->dtype)
                                                : 0;
}

void tg_loop_memory(const tg_node *n, const tg_type *const *out, uint64_t *mem) {
    tg_loop l;
    tg_loop_get(tg_op_table[n->op], n->attrs, n->nin, &l);
    for (int k = 0; k < TG_LOOP_MEM_N; k++) mem[k] = 0;
    bool saved[TG_MAX_OUTS] = {0}; /* a saved state's rows are its buffers */
    for (int q = 0; l.save && q < l.save->n; q++) {
        mem[TG_LOOP_MEM_SAVED] += type_bytes(out[l.nstate + l.ny + q]);
        if (l.save->ints[q] < TG_MAX_OUTS) saved[l.save->ints[q]] = true;
    }
    for (int y = 0; y < l.ny; y++) mem[TG_LOOP_MEM_STACKS] += type_bytes(out[l.nstate + y]);
    for (int j = 0; j < l.nstate && j < TG_MAX_OUTS; j++) {
        uint64_t b = type_bytes(out[j]); /* a tapped state: depth rows */
        if (saved[j])
            continue;
        else if (j == 0 && l.tapped)
            mem[TG_LOOP_MEM_STATES] += b / (uint64_t)l.depth * (uint64_t)(l.depth + 1);
        else
            mem[TG_LOOP_MEM_STATES] += 2 * b;
    }
}

/* Whether a value of type b fits where a state of type a goes back in: same dtype and
 * rank, extents equal where both are known. */
static bool same_state(const tg_type *a, const tg_type *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] >= 0 && b->shape[d] >= 0 && a->shape[d] != b->shape[d]) return false;
    return true;
}

static tg_status scan_infer(tg_infer *ic) {
    tg_loop l;
    if (loop_check(ic, &l) != TG_OK) return ic->status;
    const tg_graph *body = l.body;
    tg_ctx *ctx = body->ctx;
    size_t np = (size_t)l.nparam + 1;
    tg_type *pt = tg_mem_alloc(ctx, sizeof *pt * np);
    const tg_tensor **vals = tg_mem_calloc(ctx, sizeof *vals * np);
    tg_type *bout = tg_mem_alloc(ctx, sizeof *bout * TG_MAX_OUTS);
    tg_status st = TG_OK;
    int64_t steps = -1;
    char nm[80], at[300], ta[TG_TYPE_STR_MAX], tb[TG_TYPE_STR_MAX], desc[300];
    tg_fn_place(body, at, sizeof at);
    if (!pt || !vals || !bout)
        st = tg_infer_fail(ic, TG_ENOMEM, "out of memory typing the body of '%s'", body->name);
    if (st == TG_OK) st = count_steps(ic, &l, &steps);
    /* the parameters' types: the taps of state 0, the other states, slices, constants */
    for (int i = 0; st == TG_OK && i < ic->nin - (l.dyn ? 1 : 0); i++) {
        int p = param_of(&l, i);
        tg_type t = ic->in[i];
        if (i == 0 && l.nstate > 0 && l.tapped) {
            if (t.ndim < 1 || (t.shape[0] >= 0 && t.shape[0] < l.depth))
                st = tg_infer_fail(ic, TG_ESHAPE,
                                   "taps reach %d step%s before the start, but the initial value "
                                   "of the first state%s is %s (it holds the values before the "
                                   "first step along axis 0, oldest first)",
                                   l.depth, l.depth == 1 ? "" : "s",
                                   tg_infer_in_name(ic, 0, nm, sizeof nm),
                                   tg_type_str(&t, ta, sizeof ta));
            t = drop0(&t);
            for (int k = 0; k < l.ntap; k++) pt[k] = t;
            continue;
        }
        if (i >= l.nstate && i < l.nstate + l.nseq) t = drop0(&t);
        if (i >= l.nstate + l.nseq && ic->values) vals[p] = ic->values[i];
        pt[p] = t;
    }
    for (int p = 0; st == TG_OK && p < l.nparam; p++) { /* the slices fit the parameters */
        const tg_var *v = body->inputs.items[p];
        bool fits = pt[p].dtype == v->type.dtype && pt[p].ndim == v->type.ndim;
        for (int d = 0; fits && d < pt[p].ndim; d++)
            fits = v->type.shape[d] < 0 || pt[p].shape[d] < 0 || pt[p].shape[d] == v->type.shape[d];
        if (!fits)
            st = tg_infer_fail(ic, TG_ESHAPE, "the loop passes %s to parameter '%s' of %s%s, a %s",
                               tg_type_str(&pt[p], ta, sizeof ta), v->name, body->name, at,
                               tg_type_str(&v->type, tb, sizeof tb));
    }
    if (st == TG_OK) st = tg_call_types(ic, body, pt, vals, bout);
    for (int j = 0; st == TG_OK && j < l.nstate; j++) {
        const tg_type *in = &pt[j == 0 ? 0 : param_of(&l, j)];
        if (same_state(in, &bout[j])) continue;
        output_desc(body, j, desc, sizeof desc);
        st = tg_infer_fail(ic, TG_ETYPE,
                           "state %d%s is %s going into %s%s, but the step returns %s as its new "
                           "value %s: a carried state keeps its type",
                           j + 1, tg_infer_in_name(ic, j, nm, sizeof nm),
                           tg_type_str(in, ta, sizeof ta), body->name, at,
                           tg_type_str(&bout[j], tb, sizeof tb), desc);
    }
    if (st == TG_OK && l.until) {
        const tg_type *c = &bout[body->nret - 1];
        if (c->ndim != 0 || c->dtype != TG_DT_BOOL) {
            output_desc(body, body->nret - 1, desc, sizeof desc);
            st = tg_infer_fail(ic, TG_ETYPE,
                               "until=true: the last value %s of %s%s is %s, expected a 0-d "
                               "bool (true stops the loop)",
                               desc, body->name, at, tg_type_str(c, ta, sizeof ta));
        }
    }
    for (int j = 0; st == TG_OK && j < l.nstate; j++) {
        tg_type t = ic->in[j];
        if (j == 0 && l.tapped) t.shape[0] = l.depth;
        t.weak = 0;
        ic->out[j] = t;
    }
    for (int y = 0; st == TG_OK && y < l.ny; y++) {
        const tg_type *t = &bout[l.nstate + y];
        if (t->ndim + 1 > TG_MAX_DIMS) {
            output_desc(body, l.nstate + y, desc, sizeof desc);
            st = tg_infer_fail(ic, TG_ELIMIT,
                               "output %s of %s is %s: stacked it has more than %d axes", desc,
                               body->name, tg_type_str(t, ta, sizeof ta), TG_MAX_DIMS);
            break;
        }
        tg_type s = *t;
        s.ndim = (uint8_t)(t->ndim + 1);
        s.weak = 0;
        s.nobcast = (uint16_t)(t->nobcast << 1);
        s.shape[0] = l.until ? -1 : steps;
        for (int d = 0; d < t->ndim; d++) s.shape[d + 1] = t->shape[d];
        ic->out[l.nstate + y] = s;
    }
    for (int k = 0; st == TG_OK && l.save && k < l.save->n; k++) {
        const tg_type *t = &ic->in[l.save->ints[k]];
        if (l.save->ints[k] == 0 && l.tapped) { /* its history: depth + steps values */
            tg_type s = *t;
            s.weak = 0;
            s.shape[0] = l.until || steps < 0 ? -1 : steps + l.depth;
            ic->out[l.nstate + l.ny + k] = s;
            continue;
        }
        tg_type s = *t;
        s.ndim = (uint8_t)(t->ndim + 1);
        s.weak = 0;
        s.nobcast = (uint16_t)(t->nobcast << 1);
        s.shape[0] = l.until || steps < 0 ? -1 : steps + 1;
        for (int d = 0; d < t->ndim; d++) s.shape[d + 1] = t->shape[d];
        if (s.ndim > TG_MAX_DIMS)
            st = tg_infer_fail(ic, TG_ELIMIT, "state %lld stacked has more than %d axes",
                               (long long)l.save->ints[k] + 1, TG_MAX_DIMS);
        ic->out[l.nstate + l.ny + k] = s;
    }
    if (st == TG_OK) ic->nout = l.nstate + l.ny + (l.save ? l.save->n : 0);
    if (pt) tg_mem_free(ctx, pt, sizeof *pt * np);
    if (vals) tg_mem_free(ctx, vals, sizeof *vals * np);
    if (bout) tg_mem_free(ctx, bout, sizeof *bout * TG_MAX_OUTS);
    return st;
}

/* ---- the kernel ---- */

/* A view of row 0 of t along axis 0 (rank one less); the loop moves its offset. */
static tg_tensor *row_view(const tg_tensor *t) {
    return tg_tensor_view(t, t->ndim - 1, t->shape + 1, t->strides + 1, t->offset);
}

/* Points row view v at row t of t's axis 0. */
static tg_tensor *row_at(tg_tensor *v, const tg_tensor *t, int64_t row) {
    v->offset = t->offset + row * t->strides[0];
    return v;
}

/* t with axis 0 of extent n (same dtype, the rest of t's shape), uninitialised. */
static tg_tensor *stacked(tg_ctx *ctx, const tg_type *t, int64_t n) {
    int64_t shape[TG_MAX_DIMS];
    shape[0] = n;
    for (int d = 1; d < t->ndim; d++) shape[d] = t->shape[d];
    return tg_tensor_empty(ctx, (tg_dtype)t->dtype, t->ndim, shape);
}

/* The row of a tapped state's saved history holding x(i), i from -depth (the oldest value
 * before the first step) to steps - 1: in time order, mirrored with reverse=true (row t
 * then holds the value written by the step reading sequence row t). */
static int64_t hist_row(const tg_loop *l, int64_t steps, int64_t i) {
    return l->reverse ? steps - 1 - i : i + l->depth;
}

/* The tensors of one run of the loop. Each untapped state has two buffers that swap after
 * every step; a saved state's value going into each step is a row of its stacked output
 * instead, which the previous step writes directly. */
typedef struct run {
    int nbuf;           /* tensors in buf */
    tg_tensor **buf;    /* every tensor made here, freed at the end (NULL: handed out) */
    tg_tensor **cur;    /* per state: its current value */
    tg_tensor **nxt;    /* per state: where the step writes the new value */
    tg_tensor **ring;   /* state 0 tapped: depth + 1 slots */
    tg_tensor **in;     /* the step's arguments */
    tg_tensor **out;    /* the step's results */
    tg_tensor **seqrow; /* per sequence: a view of its current row */
    tg_tensor **row;    /* per stacked output (per-step, then saved): its current row */
    tg_tensor **ys;     /* the stacked outputs */
    int *saved;         /* per state: its index among the saved ones, -1 */
    tg_tensor *stop;    /* until: the condition's value */
} run;

static tg_tensor *keep(run *r, tg_tensor *t) {
    if (t) r->buf[r->nbuf++] = t;
    return t;
}

/* Takes t out of r's tensors (it becomes a result). */
static tg_tensor *hand_out(run *r, tg_tensor *t) {
    for (int q = 0; q < r->nbuf; q++)
        if (r->buf[q] == t) r->buf[q] = NULL;
    return t;
}

/* The iterations of a loop without carried state, spread over the executor's threads:
 * each thread has its own row views of the sequences and the stacked outputs. */
typedef struct each_arg {
    const tg_loop *l;
    tg_kern *k;
    tg_tensor *const *ys; /* the stacked outputs */
    tg_tensor **views;    /* per thread: nseq + ny row views */
} each_arg;

static tg_status each_fill(void *arg, int64_t i, int ith, tg_tensor **in, tg_tensor **out) {
    each_arg *e = arg;
    const tg_loop *l = e->l;
    tg_tensor **v = e->views + (size_t)ith * (size_t)(l->nseq + l->ny);
    for (int s = 0; s < l->nseq; s++) in[s] = row_at(v[s], e->k->in[s], i);
    for (int c = 0; c < l->nconst; c++) in[l->nseq + c] = e->k->in[l->nseq + c];
    for (int y = 0; y < l->ny; y++) out[y] = row_at(v[l->nseq + y], e->ys[y], i);
    return TG_OK;
}

static tg_status map_each(tg_kern *k, const tg_loop *l, int64_t steps, tg_tensor *const *ys) {
    int nth = k->sub->threads(k->sub), per = l->nseq + l->ny;
    size_t nv = (size_t)nth * (size_t)per;
    tg_tensor **views = tg_mem_calloc(k->ctx, sizeof *views * (nv + 1));
    tg_status st = views ? TG_OK : tg_kern_fail(k, TG_ENOMEM, "out of memory");
    for (size_t q = 0; st == TG_OK && q < nv; q++) {
        int j = (int)(q % (size_t)per);
        views[q] = row_view(j < l->nseq ? k->in[j] : ys[j - l->nseq]);
        if (!views[q]) st = tg_kern_fail(k, TG_ENOMEM, "out of memory: %s", tg_last_error());
    }
    if (st == TG_OK) {
        each_arg e = {.l = l, .k = k, .ys = ys, .views = views};
        st = k->sub->run_each(k->sub, l->body, steps, l->nparam, l->ny, each_fill, &e, k->msg,
                              sizeof k->msg);
        if (st != TG_OK) k->status = st;
    }
    for (size_t q = 0; views && q < nv; q++) tg_tensor_free(views[q]);
    if (views) tg_mem_free(k->ctx, views, sizeof *views * (nv + 1));
    return st;
}

static tg_status scan_ref(tg_kern *k) {
    tg_loop l;
    tg_loop_get(tg_op_table[k->node->op], k->attrs, k->nin, &l);
    const tg_graph *body = l.body;
    if (!k->sub || !k->sub->run)
        return tg_kern_fail(k, TG_EUNSUPPORTED, "no sub-graph executor here to run '%s'",
                            body->name);
    int s0 = l.nstate, c0 = l.nstate + l.nseq, nsave = l.save ? l.save->n : 0;
    int nstk = l.ny + nsave, nbody = body->nret;
    int64_t steps = l.nsteps;
    if (l.dyn) {
        const tg_tensor *c = k->in[k->nin - 1];
        steps = tg_load_i64(tg_tensor_data(c), c->dtype);
        if (steps < 0)
            return tg_kern_fail(k, TG_EINVAL, "the number of steps is %lld: expected >= 0",
                                (long long)steps);
    }
    for (int i = s0; i < c0; i++) {
        int64_t e = k->in[i]->shape[0];
        if (steps < 0) steps = e;
        if (e < steps)
            return tg_kern_fail(k, TG_ESHAPE,
                                "sequence %d has %lld steps, fewer than the %lld steps of the loop",
                                i - s0 + 1, (long long)e, (long long)steps);
    }
    size_t cap = (size_t)(2 * l.nstate + l.depth + 2 + l.nparam + nbody + l.nseq + 2 * nstk + 4);
    size_t bytes = sizeof(tg_tensor *) * cap * 9 + sizeof(int) * (size_t)(l.nstate + 1);
    tg_tensor **mem = tg_mem_calloc(k->ctx, bytes);
    if (!mem) return tg_kern_fail(k, TG_ENOMEM, "out of memory");
    run r = {.buf = mem,
             .cur = mem + cap,
             .nxt = mem + 2 * cap,
             .ring = mem + 3 * cap,
             .in = mem + 4 * cap,
             .out = mem + 5 * cap,
             .seqrow = mem + 6 * cap,
             .row = mem + 7 * cap,
             .ys = mem + 8 * cap,
             .saved = (int *)(mem + 9 * cap)};
    bool oom = false;
    for (int j = 0; j < l.nstate; j++) r.saved[j] = -1;
    for (int q = 0; q < nsave; q++) r.saved[l.save->ints[q]] = q;
    /* a tapped state 0 saved: its history is a stack of depth + steps rows, which the step
       reads and writes in place of the ring */
    int hist = l.tapped && nsave > 0 && l.save->ints[0] == 0 ? l.ny : -1;
    /* the stacked outputs and their row views */
    for (int q = 0; q < nstk && !oom; q++) {
        /* a saved state: its values, all of them */
        int64_t rows = q < l.ny ? steps : steps + (q == hist ? l.depth : 1);
        r.ys[q] = keep(&r, stacked(k->ctx, &k->out_type[l.nstate + q], rows));
        /* no row to view when no step runs */
        oom = !r.ys[q] || (rows > 0 && !(r.row[q] = keep(&r, row_view(r.ys[q]))));
    }
    /* the states (state 0 tapped: a ring of depth + 1 values) */
    for (int j = 0; j < l.nstate && !oom; j++) {
        const tg_tensor *init = k->in[j];
        if (j == 0 && hist >= 0) { /* views of the history: the taps read, the value written */
            tg_tensor *row = keep(&r, row_view(init));
            for (int q = 0; q <= l.ntap && row && !oom; q++)
                oom = !(r.ring[q] = keep(&r, row_view(r.ys[hist])));
            for (int q = 0; q < l.depth && row && !oom; q++)
                tg_tensor_copy_into(row_at(r.ring[0], r.ys[hist], hist_row(&l, steps, q - l.depth)),
                                    row_at(row, init, init->shape[0] - l.depth + q));
            oom = oom || !row;
            continue;
        }
        if (j == 0 && l.tapped) {
            tg_tensor *row = keep(&r, row_view(init));
            for (int q = 0; q <= l.depth && row && !oom; q++) {
                r.ring[q] = keep(&r, tg_tensor_empty(k->ctx, init->dtype, row->ndim, row->shape));
                oom = !r.ring[q];
                if (!oom && q < l.depth) /* the last depth rows, oldest first */
                    tg_tensor_copy_into(r.ring[q], row_at(row, init, init->shape[0] - l.depth + q));
            }
            oom = oom || !row;
            continue;
        }
        if (r.saved[j] >= 0) { /* its rows are its buffers: row 0 (reverse: the last row)
                                  is the value before the first step */
            int q = l.ny + r.saved[j];
            tg_tensor_copy_into(row_at(r.row[q], r.ys[q], l.reverse ? steps : 0), init);
            continue;
        }
        r.cur[j] = keep(&r, tg_tensor_empty(k->ctx, init->dtype, init->ndim, init->shape));
        r.nxt[j] = keep(&r, tg_tensor_empty(k->ctx, init->dtype, init->ndim, init->shape));
        if (!r.cur[j] || !r.nxt[j])
            oom = true;
        else
            tg_tensor_copy_into(r.cur[j], init);
    }
    for (int i = s0; i < c0 && !oom && steps > 0; i++)
        oom = !(r.seqrow[i - s0] = keep(&r, row_view(k->in[i])));
    if (!oom && l.until) oom = !(r.stop = keep(&r, tg_tensor_empty(k->ctx, TG_DT_BOOL, 0, NULL)));
    tg_status st = oom ? tg_kern_fail(k, TG_ENOMEM, "out of memory: %s", tg_last_error()) : TG_OK;
    /* the saved rows need views of their own: one for the row read, one for the row written */
    tg_tensor **srd = r.row + nstk;
    for (int q = 0; q < nsave && st == TG_OK; q++)
        if (!(srd[q] = keep(&r, row_view(r.ys[l.ny + q]))))
            st = tg_kern_fail(k, TG_ENOMEM, "out of memory: %s", tg_last_error());
    for (int i = c0; i < c0 + l.nconst; i++) r.in[param_of(&l, i)] = k->in[i];
    int64_t done = 0;
    if (st == TG_OK && l.nstate == 0 && !l.until && k->sub->run_each && steps > 1) {
        /* no carried state: the iterations are independent (each writes its own rows) */
        st = map_each(k, &l, steps, r.ys);
        done = steps;
    }
    for (int64_t t = done; st == TG_OK && t < steps; t++) {
        /* the step reads row `row` of the sequences; a saved state's value going into it
           is row rd of its stack, and it writes the new one into row wr */
        int64_t row = l.reverse ? steps - 1 - t : t;
        int64_t rd = l.reverse ? row + 1 : row, wr = l.reverse ? row : row + 1;
        int head = (int)(t % (l.depth + 1)); /* ring slot of x(t - depth) */
        for (int j = 0; j < l.nstate; j++) {
            if (j == 0 && hist >= 0) {
                for (int q = 0; q < l.ntap; q++)
                    r.in[q] = row_at(r.ring[q], r.ys[hist], hist_row(&l, steps, t + l.taps[q]));
                r.out[0] = row_at(r.ring[l.ntap], r.ys[hist], hist_row(&l, steps, t));
                continue;
            }
            if (j == 0 && l.tapped) {
                for (int q = 0; q < l.ntap; q++)
                    r.in[q] = r.ring[(head + l.depth + (int)l.taps[q]) % (l.depth + 1)];
                r.out[0] = r.ring[(head + l.depth) % (l.depth + 1)];
                continue;
            }
            int q = r.saved[j];
            if (q >= 0) {
                r.in[param_of(&l, j)] = row_at(srd[q], r.ys[l.ny + q], rd);
                r.out[j] = row_at(r.row[l.ny + q], r.ys[l.ny + q], wr);
            } else {
                r.in[param_of(&l, j)] = r.cur[j];
                r.out[j] = r.nxt[j];
            }
        }
        for (int i = s0; i < c0; i++)
            r.in[param_of(&l, i)] = row_at(r.seqrow[i - s0], k->in[i], row);
        for (int y = 0; y < l.ny; y++) r.out[l.nstate + y] = row_at(r.row[y], r.ys[y], row);
        if (l.until) r.out[nbody - 1] = r.stop;
        st = k->sub->run(k->sub, body, r.in, l.nparam, r.out, nbody, k->msg, sizeof k->msg);
        if (st != TG_OK) {
            char m[sizeof k->msg];
            snprintf(m, sizeof m, "%s", k->msg);
            tg_kern_fail(k, st, "step %lld: %s", (long long)row, m);
            break;
        }
        done = t + 1;
        bool stop = l.until && *(const uint8_t *)tg_tensor_data(r.stop);
        for (int j = 0; j < l.nstate; j++) {
            if (j == 0 && l.tapped) continue; /* the ring moved by one */
            if (r.saved[j] >= 0) continue;    /* the value is in row wr */
            tg_tensor *tmp = r.cur[j];
            r.cur[j] = r.nxt[j];
            r.nxt[j] = tmp;
        }
        if (stop) break;
    }
    /* the results: the last states, and the stacked outputs cut to the steps run */
    for (int j = 0; st == TG_OK && j < l.nstate; j++) {
        tg_tensor *o = NULL;
        const tg_tensor *init = k->in[j];
        if (j == 0 && l.tapped) { /* the last depth values, oldest first */
            tg_type t = {.dtype = (uint8_t)init->dtype, .ndim = (uint8_t)init->ndim};
            memcpy(t.shape, init->shape, sizeof t.shape);
            o = stacked(k->ctx, &t, l.depth);
            tg_tensor *row = o ? row_view(o) : NULL;
            int head = (int)(done % (l.depth + 1));
            for (int q = 0; row && q < l.depth; q++)
                tg_tensor_copy_into(row_at(row, o, q),
                                    hist >= 0 ? row_at(r.ring[0], r.ys[hist],
                                                       hist_row(&l, steps, done - l.depth + q))
                                              : r.ring[(head + q) % (l.depth + 1)]);
            if (!row) {
                tg_tensor_free(o);
                o = NULL;
            }
            tg_tensor_free(row);
        } else if (r.saved[j] >= 0) { /* the last row written */
            int q = l.ny + r.saved[j];
            o = tg_tensor_empty(k->ctx, init->dtype, init->ndim, init->shape);
            if (o)
                tg_tensor_copy_into(o, row_at(r.row[q], r.ys[q], l.reverse ? steps - done : done));
        } else {
            o = hand_out(&r, r.cur[j]);
        }
        if (!o) st = tg_kern_fail(k, TG_ENOMEM, "out of memory: %s", tg_last_error());
        tg_tensor_free(k->out[j]);
        k->out[j] = o;
    }
    for (int q = 0; q < nstk; q++) {
        tg_tensor *o = hand_out(&r, r.ys[q]);
        if (st == TG_OK && done < steps) { /* stopped early: the rows that ran */
            int64_t shape[TG_MAX_DIMS];
            memcpy(shape, o->shape, sizeof shape);
            shape[0] = q < l.ny ? done : done + (q == hist ? l.depth : 1);
            tg_tensor *v =
                tg_tensor_view(o, o->ndim, shape, o->strides,
                               l.reverse ? o->offset + (steps - done) * o->strides[0] : o->offset);
            tg_tensor_free(o);
            o = v;
            if (!o) st = tg_kern_fail(k, TG_ENOMEM, "out of memory: %s", tg_last_error());
        }
        if (st != TG_OK) {
            tg_tensor_free(o);
            o = NULL;
        }
        tg_tensor_free(k->out[l.nstate + q]);
        k->out[l.nstate + q] = o;
    }
    for (int q = 0; q < r.nbuf; q++) tg_tensor_free(r.buf[q]);
    tg_mem_free(k->ctx, mem, bytes);
    return st;
}

const tg_op_def tg_op_scan = {.name = "scan",
                              .min_in = 0,
                              .max_in = -1,
                              .nout = -1,
                              .kind = TG_KIND_OTHER,
                              .attrs = scan_attrs,
                              .nattrs = TG_COUNTOF(scan_attrs),
                              .promote = scan_promote,
                              .infer = scan_infer,
                              .ref = scan_ref,
                              .self_alloc = 1,
                              .grad = TG_GRAD_VJP,
                              .vjp = tg_scan_vjp,
                              .effects = TG_EFFECT_NOFOLD};

const tg_op_def tg_op_map = {.name = "map",
                             .min_in = 0,
                             .max_in = -1,
                             .nout = -1,
                             .kind = TG_KIND_OTHER,
                             .attrs = map_attrs,
                             .nattrs = TG_COUNTOF(map_attrs),
                             .promote = scan_promote,
                             .infer = scan_infer,
                             .ref = scan_ref,
                             .self_alloc = 1,
                             .grad = TG_GRAD_VJP,
                             .vjp = tg_scan_vjp,
                             .effects = TG_EFFECT_NOFOLD};
