/* pmap.c - `pmap`, JAX's map of a function over an axis across devices (SPMD), and
 * `axis_index`, the first op that reads the SPMD context of a pmap's ranks (op.h).
 *
 *   ys = pmap(@body, xs, W, in_axes=[0, none], out_axes=[0], axis_name="batch", devices=4)
 *
 * Typing (docs/pmap.md). The mapped extent N is each mapped input's extent along its
 * in_axis (negative axes count from the end; a `none` entry replicates the input); the
 * extents must agree, and devices=N (0: the mapped extent) must equal it. The body is
 * typed as a call (tg_call_types) on the slices: a mapped input loses its in_axis, a
 * replicated one is passed as it is. Each output is the body's output stacked along a new
 * axis of extent N at its out_axis, or with out_axes `none` the body's output once, which
 * is allowed only for a value invariant over the axis: one that depends on no mapped input
 * and no axis_index of the axis, by a dataflow walk of the body (pmap_varying). While it
 * types its body a pmap pushes its axis (tg_infer.axes), so a nested pmap reusing the name
 * is an error naming its place.
 *
 * Execution. The kernel hands the body to the backend's sub-graph executor
 * (tg_subexec.run_ranks), which runs the N ranks at the same time: rank r reads views of
 * slice r of the mapped inputs (no copy in) and writes into views of slice r of the
 * stacked outputs (no copy out); for out_axes=none rank 0's result is the output. A pmap
 * is never constant-folded (TG_EFFECT_NOFOLD: compile time has no executor), though two
 * equal ones merge; the inline pass leaves it alone, so its body is compiled as a function
 * (src/driver/compile.c). Its gradient is a pmap of its body's backward function (below).
 *
 * axis_index(axis_name="batch") is the rank of the enclosing pmap of that axis, a 0-d
 * i64, read from the SPMD frame of the calling thread (tg_spmd_find). Where no pmap of
 * that name encloses it is an error when the function is compiled (tg_pmap_check_axes,
 * which also covers the collectives: every op with TG_EFFECT_AXIS) and, should a
 * kernel ever run outside one, at run time.
 *
 * Invariants:
 *  - The body has no state, returns 1 to TG_MAX_OUTS values, and takes one argument per
 *    input; in_axes and out_axes, when given, have one entry per input and per output.
 *  - Inference and the kernel agree on N: the first mapped input's extent, or `devices`
 *    when every input is replicated.
 */
#include "ops.h"

#include <limits.h>
#include <stdio.h>

enum { A_BODY, A_IN_AXES, A_OUT_AXES, A_AXIS, A_DEVICES };
static const tg_attr_spec pmap_attrs[] = {
    [A_BODY] = {"body", TG_AS_FUNC, 1, 0, {0}},
    /* absent: every input mapped along axis 0 (JAX's default) */
    [A_IN_AXES] = {"in_axes", TG_AS_INTS, 0, TG_NULL_ITEMS, {.kind = TG_ATTR_NONE}},
    /* absent: every output stacked along axis 0 */
    [A_OUT_AXES] = {"out_axes", TG_AS_INTS, 0, TG_NULL_ITEMS, {.kind = TG_ATTR_NONE}},
    [A_AXIS] = {"axis_name", TG_AS_STR, 1, 0, {0}},
    [A_DEVICES] = {"devices", TG_AS_INT, 0, 0, {.kind = TG_ATTR_INT, .i = 0}},
};

/* Entry k of in_axes/out_axes: false for `none`, else the axis as given in *ax. */
static bool axis_at(const tg_aval *a, int k, int64_t *ax) {
    if (a->kind != TG_ATTR_INTS) { /* absent: 0 */
        *ax = 0;
        return true;
    }
    if (tg_aval_none_at(a, k)) return false;
    *ax = a->ints[k];
    return true;
}

/* t without axis ax (the slice type a rank sees). */
static tg_type drop_axis(const tg_type *t, int ax) {
    tg_type s = *t;
    s.ndim = (uint8_t)(t->ndim - 1);
    s.nobcast = 0;
    for (int d = 0, o = 0; d < t->ndim; d++) {
        if (d == ax) continue;
        s.shape[o] = t->shape[d];
        if (t->nobcast & (1u << d)) s.nobcast |= 1u << o;
        o++;
    }
    return s;
}

/* t with a new axis of extent n at ax (a stacked output); nobcast: the new axis's bit. */
static tg_type insert_axis(const tg_type *t, int ax, int64_t n, bool nobcast) {
    tg_type s = *t;
    s.ndim = (uint8_t)(t->ndim + 1);
    s.nobcast = 0;
    s.weak = 0;
    for (int d = 0, i = 0; d < s.ndim; d++) {
        if (d == ax) {
            s.shape[d] = n;
            if (nobcast) s.nobcast |= 1u << d;
            continue;
        }
        s.shape[d] = t->shape[i];
        if (t->nobcast & (1u << i)) s.nobcast |= 1u << d;
        i++;
    }
    return s;
}

static tg_status body_check(tg_infer *ic, const tg_graph *body) {
    char at[300];
    tg_fn_place(body, at, sizeof at);
    int nstate = 0;
    for (int i = 0; i < body->inputs.n; i++) nstate += tg_var_is_state(body->inputs.items[i]);
    if (nstate > 0 || body->updates.n > 0)
        return tg_infer_fail(ic, TG_EINVAL,
                             "%s%s has state (`mut` parameters): it cannot be mapped", body->name,
                             at);
    if (body->inputs.n != ic->nin)
        return tg_infer_fail(ic, TG_EINVAL, "%s%s takes %d argument%s, got %d", body->name, at,
                             body->inputs.n, body->inputs.n == 1 ? "" : "s", ic->nin);
    if (body->nret < 1 || body->nret > TG_MAX_OUTS)
        return tg_infer_fail(ic, TG_ELIMIT, "%s%s returns %d values; a pmap maps 1 to %d",
                             body->name, at, body->nret, TG_MAX_OUTS);
    const tg_aval *ia = &ic->attrs[A_IN_AXES], *oa = &ic->attrs[A_OUT_AXES];
    if (ia->kind == TG_ATTR_INTS && ia->n != ic->nin)
        return tg_infer_fail(ic, TG_EINVAL, "in_axes has %d entr%s for %d input%s", ia->n,
                             ia->n == 1 ? "y" : "ies", ic->nin, ic->nin == 1 ? "" : "s");
    if (oa->kind == TG_ATTR_INTS && oa->n != body->nret)
        return tg_infer_fail(ic, TG_EINVAL, "out_axes has %d entr%s for the %d output%s of %s%s",
                             oa->n, oa->n == 1 ? "y" : "ies", body->nret,
                             body->nret == 1 ? "" : "s", body->name, at);
    const char *axis = ic->attrs[A_AXIS].s;
    if (!axis || !*axis) return tg_infer_fail(ic, TG_EINVAL, "axis_name must not be empty");
    for (const tg_axis_scope *s = ic->axes; s; s = s->outer)
        if (strcmp(s->axis, axis) == 0)
            return tg_infer_fail(ic, TG_EINVAL,
                                 "axis name '%s' is already the axis of an enclosing pmap", axis);
    if (body->spmd_axis && strcmp(body->spmd_axis, axis) != 0)
        return tg_infer_fail(ic, TG_EINVAL,
                             "%s%s is typed as the body of a pmap over the axis '%s' (the "
                             "gradient inside it is built for that), but this pmap's axis is '%s'",
                             body->name, at, body->spmd_axis, axis);
    for (int i = 0; body->spmd_axis && i < ic->nin && i < body->spmd_n; i++) {
        int64_t ax;
        bool maps = axis_at(ia, i, &ax);
        if (maps == (body->spmd_mapped[i] != 0)) continue;
        const tg_var *p = body->inputs.items[i];
        return tg_infer_fail(ic, TG_EINVAL,
                             "parameter '%s' of %s%s is typed %s over the axis '%s' (the "
                             "gradient inside it is built for that), but this pmap %s input %d",
                             p->name, body->name, at, maps ? "replicated" : "mapped", axis,
                             maps ? "maps" : "replicates", i + 1);
    }
    if (ic->attrs[A_DEVICES].i < 0)
        return tg_infer_fail(ic, TG_EINVAL,
                             "devices=%lld: expected a count >= 0 (0: the mapped extent)",
                             (long long)ic->attrs[A_DEVICES].i);
    return TG_OK;
}

/* Arguments take the parameters' dtypes: weak literals (replicated inputs) adopt them; a
 * typed argument of another dtype is an error naming both (no silent cast). */
static tg_status pmap_promote(tg_infer *ic, tg_dtype *want) {
    const tg_graph *body = ic->attrs[A_BODY].fn;
    if (body_check(ic, body) != TG_OK) return ic->status;
    for (int i = 0; i < ic->nin; i++) {
        const tg_var *p = body->inputs.items[i];
        tg_dtype pd = (tg_dtype)p->type.dtype;
        if (ic->in[i].dtype != pd && !ic->in[i].weak) {
            char nm[80], at[300];
            tg_fn_place(body, at, sizeof at);
            return tg_infer_fail(ic, TG_ETYPE, "input %d%s is %s, but parameter '%s' of %s%s is %s",
                                 i + 1, tg_infer_in_name(ic, i, nm, sizeof nm),
                                 tg_dtype_name((tg_dtype)ic->in[i].dtype), p->name, body->name, at,
                                 tg_dtype_name(pd));
        }
        want[i] = pd;
    }
    return TG_OK;
}

/* One pass over the inputs: the slice types, N and where it came from. */
typedef struct mapped {
    int64_t n;    /* the mapped extent, -1 unknown */
    int from;     /* the input it came from, -1: none (devices=) */
    bool nobcast; /* run time: N is a 1 that came from a '?' */
} mapped;

static tg_status map_inputs(tg_infer *ic, tg_type *slice, mapped *m) {
    *m = (mapped){.n = -1, .from = -1};
    const tg_aval *ia = &ic->attrs[A_IN_AXES];
    int64_t devices = ic->attrs[A_DEVICES].i;
    bool any = false;
    for (int i = 0; i < ic->nin; i++) {
        const tg_type *t = &ic->in[i];
        int64_t a;
        slice[i] = *t;
        if (!axis_at(ia, i, &a)) continue;
        any = true;
        char nm[80], ty[TG_TYPE_STR_MAX];
        int64_t ax = a < 0 ? a + t->ndim : a;
        if (ax < 0 || ax >= t->ndim)
            return tg_infer_fail(ic, TG_EINVAL,
                                 "in_axes[%d] = %lld is out of range for input %d%s of type %s", i,
                                 (long long)a, i + 1, tg_infer_in_name(ic, i, nm, sizeof nm),
                                 tg_type_str(t, ty, sizeof ty));
        slice[i] = drop_axis(t, (int)ax);
        int64_t e = t->shape[ax];
        if (e < 0) continue;
        if (m->n >= 0 && m->n != e) {
            char nm2[80];
            int64_t pa = 0;
            axis_at(ia, m->from, &pa);
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "mapped extents differ: input %d%s has %lld along its in_axis "
                                 "%lld, input %d%s has %lld along its in_axis %lld",
                                 m->from + 1, tg_infer_in_name(ic, m->from, nm2, sizeof nm2),
                                 (long long)m->n, (long long)pa, i + 1,
                                 tg_infer_in_name(ic, i, nm, sizeof nm), (long long)e,
                                 (long long)a);
        }
        if (m->n < 0) {
            m->n = e;
            m->from = i;
            m->nobcast = e == 1 && (t->nobcast & (1u << ax));
        }
    }
    if (!any && devices == 0)
        return tg_infer_fail(ic, TG_EINVAL,
                             "no input is mapped (every in_axes entry is none): give devices=N");
    if (devices > 0 && m->n >= 0 && devices != m->n)
        return tg_infer_fail(ic, TG_ESHAPE, "devices=%lld, but the mapped extent is %lld",
                             (long long)devices, (long long)m->n);
    if (devices > 0 && m->n < 0) {
        m->n = devices;
        m->nobcast = false;
    }
    if (m->n == 0)
        return tg_infer_fail(ic, TG_ESHAPE,
                             "the mapped extent is 0: a pmap needs at least one rank");
    return TG_OK;
}

/* Whether each slice fits its parameter: dtype, rank, and each static extent of the
 * parameter (a '?' accepts any); at run time extents must be known. */
static tg_status fit_params(tg_infer *ic, const tg_graph *body, const tg_type *slice) {
    const tg_aval *ia = &ic->attrs[A_IN_AXES];
    for (int i = 0; i < ic->nin; i++) {
        const tg_var *p = body->inputs.items[i];
        const tg_type *a = &slice[i];
        bool fits = a->dtype == p->type.dtype && a->ndim == p->type.ndim;
        for (int d = 0; fits && d < a->ndim; d++)
            fits = p->type.shape[d] < 0 ||
                   (a->shape[d] >= 0 ? a->shape[d] == p->type.shape[d] : !ic->runtime);
        if (fits) continue;
        char ta[TG_TYPE_STR_MAX], tb[TG_TYPE_STR_MAX], tt[TG_TYPE_STR_MAX], at[300], nm[80];
        int64_t ax;
        tg_fn_place(body, at, sizeof at);
        tg_infer_in_name(ic, i, nm, sizeof nm);
        if (axis_at(ia, i, &ax))
            return tg_infer_fail(ic, a->dtype == p->type.dtype ? TG_ESHAPE : TG_ETYPE,
                                 "the slice of input %d%s (%s along axis %lld) is %s, but "
                                 "parameter '%s' of %s%s is %s",
                                 i + 1, nm, tg_type_str(&ic->in[i], tt, sizeof tt), (long long)ax,
                                 tg_type_str(a, ta, sizeof ta), p->name, body->name, at,
                                 tg_type_str(&p->type, tb, sizeof tb));
        return tg_infer_fail(ic, a->dtype == p->type.dtype ? TG_ESHAPE : TG_ETYPE,
                             "input %d%s (replicated) is %s, but parameter '%s' of %s%s is %s",
                             i + 1, nm, tg_type_str(a, ta, sizeof ta), p->name, body->name, at,
                             tg_type_str(&p->type, tb, sizeof tb));
    }
    return TG_OK;
}

/* "'y' (f.tg:4:3)": how a message names returned value j of body. */
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

/* out_axes=none only for outputs invariant over the axis (checked at compile time; run
 * time types the same graph again). */
static tg_status check_invariant(tg_infer *ic, const tg_graph *body) {
    const tg_aval *oa = &ic->attrs[A_OUT_AXES];
    bool any = false;
    int64_t ax;
    for (int j = 0; j < body->nret && !any; j++) any = !axis_at(oa, j, &ax);
    if (!any) return TG_OK;
    bool *vary = NULL, *maps = tg_mem_alloc(body->ctx, sizeof *maps * (size_t)(ic->nin + 1));
    for (int i = 0; maps && i < ic->nin; i++) maps[i] = axis_at(&ic->attrs[A_IN_AXES], i, &ax);
    tg_status vs = maps
                       ? tg_spmd_varying(body->ctx, body, ic->attrs[A_AXIS].s, maps, NULL, 0, &vary)
                       : TG_ENOMEM;
    if (maps) tg_mem_free(body->ctx, maps, sizeof *maps * (size_t)(ic->nin + 1));
    if (vs != TG_OK)
        return tg_infer_fail(ic, TG_ENOMEM, "out of memory checking the outputs of '%s'",
                             body->name);
    tg_status st = TG_OK;
    for (int j = 0; j < body->nret && st == TG_OK; j++) {
        const tg_var *v = body->outputs.items[j];
        if (axis_at(oa, j, &ax) || !vary[v->id]) continue;
        char desc[300], at[300];
        output_desc(body, j, desc, sizeof desc);
        tg_fn_place(body, at, sizeof at);
        st = tg_infer_fail(ic, TG_EINVAL,
                           "out_axes[%d] is none, but output %s of %s%s varies along the axis "
                           "'%s' (it depends on a mapped input, the axis index or a collective "
                           "that leaves it varying); only a value invariant over the axis can "
                           "be returned once (reduce it with psum, pmean, pmax or pmin)",
                           j, desc, body->name, at, ic->attrs[A_AXIS].s);
    }
    tg_mem_free(body->ctx, vary, sizeof *vary * (size_t)(body->vars.n + 1));
    return st;
}

static tg_status pmap_infer(tg_infer *ic) {
    const tg_graph *body = ic->attrs[A_BODY].fn;
    if (body_check(ic, body) != TG_OK) return ic->status;
    tg_ctx *ctx = body->ctx;
    size_t nin1 = (size_t)ic->nin + 1;
    tg_type *slice = tg_mem_alloc(ctx, sizeof *slice * nin1);
    const tg_tensor **vals = tg_mem_calloc(ctx, sizeof *vals * nin1);
    tg_type *bout = tg_mem_alloc(ctx, sizeof *bout * TG_MAX_OUTS);
    mapped m;
    tg_status st = TG_OK;
    if (!slice || !vals || !bout)
        st = tg_infer_fail(ic, TG_ENOMEM, "out of memory typing the body of '%s'", body->name);
    if (st == TG_OK) st = map_inputs(ic, slice, &m);
    if (st == TG_OK) st = fit_params(ic, body, slice);
    if (st == TG_OK && !ic->runtime) st = check_invariant(ic, body);
    if (st == TG_OK) {
        const tg_aval *ia = &ic->attrs[A_IN_AXES];
        int64_t ax;
        for (int i = 0; ic->values && i < ic->nin; i++)
            if (!axis_at(ia, i, &ax)) vals[i] = ic->values[i]; /* a replicated value is known */
        tg_axis_scope scope = {.outer = ic->axes, .axis = ic->attrs[A_AXIS].s, .size = m.n};
        const tg_axis_scope *saved = ic->axes;
        ic->axes = &scope;
        st = tg_call_types(ic, body, slice, vals, bout);
        ic->axes = saved;
    }
    const tg_aval *oa = &ic->attrs[A_OUT_AXES];
    for (int j = 0; st == TG_OK && j < body->nret; j++) {
        const tg_type *t = &bout[j];
        int64_t a;
        bool known = true;
        for (int d = 0; ic->runtime && d < t->ndim; d++) known = known && t->shape[d] >= 0;
        if (!known) { /* a value-dependent extent (mask_select): ranks could disagree */
            char desc[300], ty[TG_TYPE_STR_MAX];
            output_desc(body, j, desc, sizeof desc);
            st = tg_infer_fail(ic, TG_ESHAPE,
                               "output %s of %s is %s, an extent its values decide: the ranks' "
                               "values must have one shape known before they run",
                               desc, body->name, tg_type_str(t, ty, sizeof ty));
            break;
        }
        if (!axis_at(oa, j, &a)) {
            ic->out[j] = *t;
            ic->out[j].weak = 0;
            continue;
        }
        int r = t->ndim + 1;
        int64_t ax = a < 0 ? a + r : a;
        char desc[300], ty[TG_TYPE_STR_MAX];
        if (r > TG_MAX_DIMS) {
            output_desc(body, j, desc, sizeof desc);
            st = tg_infer_fail(ic, TG_ELIMIT,
                               "output %s of %s is %s: stacked it would have more than %d axes",
                               desc, body->name, tg_type_str(t, ty, sizeof ty), TG_MAX_DIMS);
        } else if (ax < 0 || ax >= r) {
            output_desc(body, j, desc, sizeof desc);
            st = tg_infer_fail(ic, TG_EINVAL,
                               "out_axes[%d] = %lld is out of range for output %s of %s, of "
                               "type %s (stacked: %d axes)",
                               j, (long long)a, desc, body->name, tg_type_str(t, ty, sizeof ty), r);
        } else {
            ic->out[j] = insert_axis(t, (int)ax, m.n, ic->runtime && m.nobcast);
        }
    }
    if (st == TG_OK) ic->nout = body->nret;
    if (slice) tg_mem_free(ctx, slice, sizeof *slice * nin1);
    if (vals) tg_mem_free(ctx, vals, sizeof *vals * nin1);
    if (bout) tg_mem_free(ctx, bout, sizeof *bout * TG_MAX_OUTS);
    return st;
}

/* A view of slice r along axis ax of t (rank one less): shares t's buffer. */
static tg_tensor *slice_view(const tg_tensor *t, int ax, int64_t r) {
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS], size = 1;
    for (int d = 0, o = 0; d < t->ndim; d++) {
        if (d == ax) continue;
        shape[o] = t->shape[d];
        size *= t->shape[d];
        strides[o++] = t->strides[d];
    }
    /* a slice with no element reads nothing: its view starts at the buffer's start (the
       computed offset may lie past the end of an empty buffer) */
    int64_t off = size == 0 ? 0 : t->offset + r * t->strides[ax];
    return tg_tensor_view(t, t->ndim - 1, shape, strides, off);
}

static tg_status pmap_ref(tg_kern *k) {
    const tg_graph *body = k->attrs[A_BODY].fn;
    const char *axis = k->attrs[A_AXIS].s;
    if (!k->sub || !k->sub->run_ranks)
        return tg_kern_fail(k, TG_EUNSUPPORTED, "no sub-graph executor here to run '%s'",
                            body->name);
    const tg_aval *ia = &k->attrs[A_IN_AXES], *oa = &k->attrs[A_OUT_AXES];
    int nin = k->nin, nout = k->nout;
    int inax[TG_MAX_OUTS + 1], outax[TG_MAX_OUTS];
    int *iax = nin <= TG_MAX_OUTS ? inax : tg_mem_alloc(k->ctx, sizeof *iax * (size_t)nin);
    if (!iax) return tg_kern_fail(k, TG_ENOMEM, "out of memory");
    int64_t n = k->attrs[A_DEVICES].i, a;
    for (int i = 0; i < nin; i++) { /* inference checked the axes and the extents */
        const tg_tensor *t = k->in[i];
        iax[i] = axis_at(ia, i, &a) ? (int)(a < 0 ? a + t->ndim : a) : -1;
        if (iax[i] >= 0) n = t->shape[iax[i]];
    }
    for (int j = 0; j < nout; j++) {
        const tg_tensor *t = k->out[j];
        outax[j] = axis_at(oa, j, &a) ? (int)(a < 0 ? a + t->ndim : a) : -1;
    }
    tg_status st = TG_OK;
    if (n > INT_MAX) st = tg_kern_fail(k, TG_ELIMIT, "a pmap over %lld ranks", (long long)n);
    size_t nview = st == TG_OK ? (size_t)n * (size_t)(nin + nout) : 0;
    tg_tensor **view = nview ? tg_mem_calloc(k->ctx, sizeof *view * nview) : NULL;
    if (st == TG_OK && !view)
        st = tg_kern_fail(k, TG_ENOMEM, "out of memory: %lld ranks' views", (long long)n);
    tg_tensor **vin = view, **vout = view ? view + (size_t)n * (size_t)nin : NULL;
    for (int64_t r = 0; st == TG_OK && r < n; r++) {
        for (int i = 0; st == TG_OK && i < nin; i++) {
            tg_tensor **v = &vin[r * nin + i];
            *v = iax[i] < 0 ? k->in[i] : slice_view(k->in[i], iax[i], r);
            if (!*v) st = tg_kern_fail(k, TG_ENOMEM, "%s", tg_last_error());
        }
        for (int j = 0; st == TG_OK && j < nout; j++) {
            tg_tensor **v = &vout[r * nout + j];
            *v = outax[j] >= 0 ? slice_view(k->out[j], outax[j], r) : r == 0 ? k->out[j] : NULL;
            if (!*v && outax[j] >= 0) st = tg_kern_fail(k, TG_ENOMEM, "%s", tg_last_error());
        }
    }
    if (st == TG_OK) {
        st = k->sub->run_ranks(k->sub, body, axis, (int)n, vin, nin, vout, nout, k->note, k->msg,
                               sizeof k->msg);
        if (st != TG_OK) k->status = st;
    }
    for (int64_t r = 0; view && r < n; r++) { /* the views made here (not the values) */
        for (int i = 0; i < nin; i++)
            if (iax[i] >= 0) tg_tensor_free(vin[r * nin + i]);
        for (int j = 0; j < nout; j++)
            if (outax[j] >= 0) tg_tensor_free(vout[r * nout + j]);
    }
    if (view) tg_mem_free(k->ctx, view, sizeof *view * nview);
    if (iax != inax) tg_mem_free(k->ctx, iax, sizeof *iax * (size_t)nin);
    return st;
}

/* ---- the gradient ----
 * The backward pass of a pmap is a pmap of the backward function of its body: that
 * function takes the body's parameters (typed as the slices the pmap passes) and the
 * cotangents of the float outputs that receive one, recomputes the body and returns the
 * cotangents of the float parameters, built by tg_vjp under the pmap's typing (declared
 * on it: tg_graph_set_mapped), so that the cotangent of a replicated parameter is summed
 * over the axis and comes back once (out_axes none), that of a mapped one stacked along
 * its in_axis. A cotangent is mapped like its output; that of a stacked output invariant
 * over the axis (the N copies of one value) is first summed over it, as the value counts
 * once in the body. */

/* The in_axes / out_axes entry of an argument: its axis, or none. */
typedef struct axis_entry {
    bool mapped;
    int64_t axis;
} axis_entry;

/* Sums over the axis each mapped cotangent (cot_mapped[j]) of an output ys[j] invariant over
 * it, in b (declared: tg_graph_set_mapped; its nodes in creation order, which is
 * topological). */
static void sum_invariant_cots(tg_graph *b, const char *axis, tg_var *const *ys, tg_var **cots,
                               int ny, const bool *cot_mapped) {
    size_t nv = (size_t)b->vars.n + 1;
    bool *vary = NULL;
    if (tg_spmd_varying(b->ctx, b, axis, NULL, (tg_node *const *)b->nodes.items, b->nodes.n,
                        &vary) != TG_OK) {
        tg_ir_fail(b, TG_ENOMEM, "out of memory");
        return;
    }
    tg_attr a = TG_A_STR("axis_name", axis);
    for (int j = 0; j < ny; j++)
        if (cot_mapped[j] && !vary[ys[j]->id]) cots[j] = tg_apply(b, "psum", &cots[j], 1, &a, 1);
    tg_mem_free(b->ctx, vary, sizeof *vary * nv);
}

static tg_graph *backward_body(tg_graph *g, const tg_node *n, tg_var *const *gout, int *flow,
                               axis_entry *inax, axis_entry *outax, int *nargs, int *nres) {
    const tg_graph *body = n->attrs[A_BODY].fn;
    const tg_aval *ia = &n->attrs[A_IN_AXES], *oa = &n->attrs[A_OUT_AXES];
    char name[256];
    snprintf(name, sizeof name, "%s_vjp", body->name);
    tg_graph *b = tg_graph_new(g->ctx, name);
    if (!b) return tg_ir_fail(g, TG_ENOMEM, "out of memory building the gradient of a pmap");
    b->file = body->file;
    int np = n->nin + TG_MAX_OUTS + 1;
    tg_var **params = tg_mem_alloc(g->ctx, sizeof *params * (size_t)np);
    bool *maps = tg_mem_alloc(g->ctx, sizeof *maps * (size_t)np);
    tg_var *outs[TG_MAX_OUTS], *cots[TG_MAX_OUTS], *ys[TG_MAX_OUTS], **wrt = NULL, **res = NULL;
    if (params && maps) {
        wrt = tg_mem_alloc(g->ctx, sizeof *wrt * (size_t)(n->nin + 1));
        res = tg_mem_alloc(g->ctx, sizeof *res * (size_t)(n->nin + 1));
    }
    if (!params || !maps || !wrt || !res) tg_ir_fail(b, TG_ENOMEM, "out of memory");
    int ny = 0, nw = 0, na = 0;
    for (int i = 0; b->status == TG_OK && i < n->nin; i++) {
        const tg_var *p = body->inputs.items[i];
        tg_type t = n->in[i]->type;
        int64_t a = 0;
        inax[na] = (axis_entry){axis_at(ia, i, &a), a};
        if (inax[na].mapped) t = drop_axis(&t, (int)(a < 0 ? a + t.ndim : a));
        maps[na] = inax[na].mapped;
        na++;
        params[i] = tg_input(b, p->name, (tg_dtype)t.dtype, t.ndim, t.shape);
    }
    if (b->status == TG_OK) tg_ir_copy_body(b, body, params, outs);
    for (int j = 0; b->status == TG_OK && j < n->nout; j++) {
        if (!gout[j] || !tg_dtype_is_float((tg_dtype)n->out[j]->type.dtype)) continue;
        char cn[64];
        tg_grad_cot_name(body, j, cn, sizeof cn);
        tg_type t = gout[j]->type;
        int64_t a = 0;
        inax[na] = (axis_entry){axis_at(oa, j, &a), a};
        if (inax[na].mapped) t = drop_axis(&t, (int)(a < 0 ? a + t.ndim : a));
        maps[na] = inax[na].mapped;
        na++;
        cots[ny] = tg_input(b, cn, (tg_dtype)t.dtype, t.ndim, t.shape);
        ys[ny++] = outs[j];
    }
    for (int i = 0; b->status == TG_OK && i < n->nin; i++) {
        flow[i] = -1;
        if (!tg_ops_float_in(n, i)) continue;
        flow[i] = nw;
        outax[nw] = inax[i];
        wrt[nw++] = params[i];
    }
    if (b->status == TG_OK) tg_graph_set_mapped(b, n->attrs[A_AXIS].s, maps, na);
    if (b->status == TG_OK) sum_invariant_cots(b, n->attrs[A_AXIS].s, ys, cots, ny, maps + n->nin);
    if (b->status == TG_OK && ny > 0 && nw > 0)
        tg_vjp(b, ys, cots, ny, wrt, nw, TG_DISCONNECTED_ZERO, res);
    if (b->status == TG_OK) tg_graph_set_outputs(b, res, nw);
    if (params) tg_mem_free(g->ctx, params, sizeof *params * (size_t)np);
    if (maps) tg_mem_free(g->ctx, maps, sizeof *maps * (size_t)np);
    if (wrt) tg_mem_free(g->ctx, wrt, sizeof *wrt * (size_t)(n->nin + 1));
    if (res) tg_mem_free(g->ctx, res, sizeof *res * (size_t)(n->nin + 1));
    if (b->status != TG_OK) {
        tg_ir_fail(g, b->status, "%s", b->error);
        tg_graph_free(b);
        return NULL;
    }
    *nargs = na;
    *nres = nw;
    return b;
}

/* An in_axes / out_axes attribute of these entries. */
static tg_attr axes_attr(const char *name, const axis_entry *e, int n, int64_t *ints, bool *none) {
    for (int k = 0; k < n; k++) {
        ints[k] = e[k].mapped ? e[k].axis : 0;
        none[k] = !e[k].mapped;
    }
    tg_attr a = TG_A_INTS(name, ints, n);
    a.none = none;
    return a;
}

static tg_status pmap_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    bool any_out = false, any_in = false;
    for (int j = 0; j < n->nout; j++)
        any_out = any_out || (gout[j] && tg_dtype_is_float((tg_dtype)n->out[j]->type.dtype));
    for (int i = 0; i < n->nin; i++) any_in = any_in || tg_ops_float_in(n, i);
    if (!any_out || !any_in) return TG_OK;
    size_t cap = (size_t)n->nin + TG_MAX_OUTS + 1;
    int *flow = tg_mem_alloc(g->ctx, sizeof *flow * cap);
    axis_entry *inax = tg_mem_alloc(g->ctx, sizeof *inax * cap);
    axis_entry *outax = tg_mem_alloc(g->ctx, sizeof *outax * cap);
    int64_t *ints = tg_mem_alloc(g->ctx, sizeof *ints * cap);
    bool *none = tg_mem_alloc(g->ctx, sizeof *none * cap);
    tg_var **args = tg_mem_alloc(g->ctx, sizeof *args * cap);
    tg_var **res = tg_mem_alloc(g->ctx, sizeof *res * cap);
    int na = 0, nres = 0;
    tg_graph *b = NULL;
    if (!flow || !inax || !outax || !ints || !none || !args || !res)
        tg_ir_fail(g, TG_ENOMEM, "out of memory building the gradient of a pmap");
    else
        b = backward_body(g, n, gout, flow, inax, outax, &na, &nres);
    if (b) {
        for (int i = 0; i < n->nin; i++) args[i] = n->in[i];
        for (int j = 0, k = n->nin; j < n->nout; j++)
            if (gout[j] && tg_dtype_is_float((tg_dtype)n->out[j]->type.dtype)) args[k++] = gout[j];
        tg_attr attrs[5] = {TG_A_FUNC("body", b),
                            axes_attr("in_axes", inax, na, ints, none),
                            {0},
                            TG_A_STR("axis_name", n->attrs[A_AXIS].s),
                            TG_A_INT("devices", n->attrs[A_DEVICES].i)};
        int64_t *oints = ints + na;
        bool *onone = none + na;
        if ((size_t)(na + nres) > cap) { /* never: na <= nin + outputs, nres <= nin */
            tg_ir_fail(g, TG_EINTERNAL, "pmap gradient: too many arguments");
        } else {
            attrs[2] = axes_attr("out_axes", outax, nres, oints, onone);
            int nout = nres;
            if (tg_apply_multi(g, "pmap", args, na, attrs, 5, res, &nout) == TG_OK)
                for (int i = 0; i < n->nin; i++) gin[i] = flow[i] >= 0 ? res[flow[i]] : NULL;
        }
        tg_graph_free(b); /* the pmap node keeps it */
    }
    if (flow) tg_mem_free(g->ctx, flow, sizeof *flow * cap);
    if (inax) tg_mem_free(g->ctx, inax, sizeof *inax * cap);
    if (outax) tg_mem_free(g->ctx, outax, sizeof *outax * cap);
    if (ints) tg_mem_free(g->ctx, ints, sizeof *ints * cap);
    if (none) tg_mem_free(g->ctx, none, sizeof *none * cap);
    if (args) tg_mem_free(g->ctx, args, sizeof *args * cap);
    if (res) tg_mem_free(g->ctx, res, sizeof *res * cap);
    return g->status;
}

const tg_op_def tg_op_pmap = {.name = "pmap",
                              .min_in = 0,
                              .max_in = -1,
                              .nout = -1,
                              .kind = TG_KIND_OTHER,
                              .attrs = pmap_attrs,
                              .nattrs = TG_COUNTOF(pmap_attrs),
                              .promote = pmap_promote,
                              .infer = pmap_infer,
                              .ref = pmap_ref,
                              .grad = TG_GRAD_VJP,
                              .vjp = pmap_vjp,
                              .effects = TG_EFFECT_NOFOLD};

/* ---- axis_index ---- */

static const tg_attr_spec axis_index_attrs[] = {{"axis_name", TG_AS_STR, 1, 0, {0}}};

static tg_status axis_index_infer(tg_infer *ic) {
    const char *axis = ic->attrs[0].s;
    if (!axis || !*axis) return tg_infer_fail(ic, TG_EINVAL, "axis_name must not be empty");
    ic->out[0] = (tg_type){.dtype = TG_DT_I64, .ndim = 0};
    return TG_OK;
}

/* The rank (axis_index) or the number of ranks (axis_size) of the calling thread's frame
 * of the axis. */
static tg_status axis_read(tg_kern *k, bool size) {
    const tg_spmd *s = tg_spmd_find(k->attrs[0].s);
    if (!s) return tg_kern_fail(k, TG_EINVAL, "no enclosing pmap has the axis '%s'", k->attrs[0].s);
    tg_store_i64(tg_tensor_data(k->out[0]), TG_DT_I64, size ? s->size : s->rank);
    return TG_OK;
}

static tg_status axis_index_ref(tg_kern *k) { return axis_read(k, false); }
/* axis_size(axis_name="batch"): the number of ranks of the enclosing pmap of that axis, a
 * 0-d i64, the same on every rank (pmean's gradient divides by it). */
static tg_status axis_size_ref(tg_kern *k) { return axis_read(k, true); }

/* An op reading the pmap axis its axis_name names: no input, a 0-d i64, never folded. */
#define AXIS_OP(op, ref_fn, spmd_kind)                                                             \
    const tg_op_def tg_op_##op = {.name = #op,                                                     \
                                  .min_in = 0,                                                     \
                                  .max_in = 0,                                                     \
                                  .nout = 1,                                                       \
                                  .kind = TG_KIND_OTHER,                                           \
                                  .attrs = axis_index_attrs,                                       \
                                  .nattrs = 1,                                                     \
                                  .infer = axis_index_infer,                                       \
                                  .ref = ref_fn,                                                   \
                                  .grad = TG_GRAD_NONE,                                            \
                                  .effects = TG_EFFECT_AXIS,                                       \
                                  .spmd = spmd_kind}

AXIS_OP(axis_index, axis_index_ref, TG_SPMD_VARYING);
AXIS_OP(axis_size, axis_size_ref, TG_SPMD_INVARIANT);

/* ---- which axes a graph reads ----
 * The axes a graph reads without binding them: the axis_name of each op with
 * TG_EFFECT_AXIS among its live nodes, and those of the graphs its nodes call or map, less
 * the axis of the pmap that maps them. Computed once per graph of a walk (call graphs are
 * acyclic and at most TG_CALL_MAX_DEPTH deep), each with its first reader for messages. */

typedef struct axis_use {
    const char *axis;    /* the axis read */
    const tg_graph *g;   /* the graph of the node that reads it */
    const tg_node *node; /* that node */
} axis_use;

typedef struct graph_axes {
    const tg_graph *g;
    axis_use *use;
    int n, cap;
} graph_axes;

typedef struct axes_walk {
    tg_ctx *ctx;
    graph_axes *memo;
    int n, cap;
    bool oom;
} axes_walk;

static bool use_add(axes_walk *w, graph_axes *ga, const axis_use *u) {
    for (int k = 0; k < ga->n; k++)
        if (strcmp(ga->use[k].axis, u->axis) == 0) return true;
    if (ga->n == ga->cap) {
        int ncap = ga->cap ? 2 * ga->cap : 4;
        axis_use *nu = tg_mem_realloc(w->ctx, ga->use, sizeof *nu * (size_t)ga->cap,
                                      sizeof *nu * (size_t)ncap);
        if (!nu) return !(w->oom = true);
        ga->use = nu;
        ga->cap = ncap;
    }
    ga->use[ga->n++] = *u;
    return true;
}

static int graph_axes_of(axes_walk *w, const tg_graph *g);

/* The axis a node binds for the graph it maps: a pmap's, else NULL. */
static const char *bound_axis(const tg_node *n) {
    return n->op == TG_OP_PMAP ? n->attrs[A_AXIS].s : NULL;
}

/* Adds to ga the axes node n (of graph g) reads without binding them: the axis_name of an
 * op reading one, and those the graphs it calls or maps read, less the axis it binds. */
static void node_axes(axes_walk *w, graph_axes *ga, const tg_graph *g, const tg_node *n) {
    const tg_op_def *op = tg_op_table[n->op];
    const char *read = tg_op_axis_name(op, n->attrs), *bound = bound_axis(n);
    if (read) use_add(w, ga, &(axis_use){read, g, n});
    for (int j = 0; j < op->nattrs && !w->oom; j++) {
        if (n->attrs[j].kind != TG_ATTR_FUNC) continue;
        int s = graph_axes_of(w, n->attrs[j].fn);
        for (int k = 0; s >= 0 && k < w->memo[s].n && !w->oom; k++)
            if (!bound || strcmp(w->memo[s].use[k].axis, bound) != 0)
                use_add(w, ga, &w->memo[s].use[k]);
    }
}

/* The index in w->memo of g's axes (-1 when out of memory). */
static int graph_axes_of(axes_walk *w, const tg_graph *g) {
    for (int i = 0; i < w->n; i++)
        if (w->memo[i].g == g) return i;
    int norder = 0;
    tg_node **order = tg_ir_toposort(g, &norder);
    if (!order) {
        w->oom = true;
        return -1;
    }
    graph_axes ga = {.g = g};
    for (int i = 0; i < norder && !w->oom; i++) node_axes(w, &ga, g, order[i]);
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    if (!w->oom && w->n == w->cap) {
        int ncap = w->cap ? 2 * w->cap : 8;
        graph_axes *nm =
            tg_mem_realloc(w->ctx, w->memo, sizeof *nm * (size_t)w->cap, sizeof *nm * (size_t)ncap);
        if (nm) {
            w->memo = nm;
            w->cap = ncap;
        } else {
            w->oom = true;
        }
    }
    if (w->oom) {
        if (ga.use) tg_mem_free(w->ctx, ga.use, sizeof *ga.use * (size_t)ga.cap);
        return -1;
    }
    w->memo[w->n] = ga;
    return w->n++;
}

static void walk_fini(axes_walk *w) {
    for (int i = 0; i < w->n; i++)
        if (w->memo[i].use)
            tg_mem_free(w->ctx, w->memo[i].use, sizeof *w->memo[i].use * (size_t)w->memo[i].cap);
    if (w->memo) tg_mem_free(w->ctx, w->memo, sizeof *w->memo * (size_t)w->cap);
}

/* Whether node n reads `axis`: it is an op reading it, or a graph it calls or maps does
 * (for a pmap of that axis, its body reads the pmap's own axis, not the enclosing one). */
static bool node_reads(axes_walk *w, const tg_node *n, const char *axis) {
    const tg_op_def *op = tg_op_table[n->op];
    const char *read = tg_op_axis_name(op, n->attrs), *bound = bound_axis(n);
    if (read && strcmp(read, axis) == 0) return true;
    if (bound && strcmp(bound, axis) == 0) return false;
    for (int j = 0; j < op->nattrs; j++) {
        if (n->attrs[j].kind != TG_ATTR_FUNC) continue;
        int s = graph_axes_of(w, n->attrs[j].fn);
        for (int k = 0; s >= 0 && k < w->memo[s].n; k++)
            if (strcmp(w->memo[s].use[k].axis, axis) == 0) return true;
    }
    return false;
}

/* A call's outputs vary as its callee's results do when the callee's parameters vary as
 * the call's arguments do (so a helper returning a psum makes an invariant value). */
static tg_status type_call(tg_ctx *ctx, const char *axis, const tg_node *n, bool *v) {
    const tg_graph *fn = n->attrs[0].fn;
    bool *maps = tg_mem_alloc(ctx, sizeof *maps * (size_t)(n->nin + 1)), *cv = NULL;
    if (!maps) return TG_ENOMEM;
    for (int k = 0; k < n->nin; k++) maps[k] = v[n->in[k]->id];
    tg_status st = tg_spmd_varying(ctx, fn, axis, maps, NULL, 0, &cv);
    tg_mem_free(ctx, maps, sizeof *maps * (size_t)(n->nin + 1));
    if (st != TG_OK) return st;
    for (int k = 0; k < n->nout && k < fn->nret; k++)
        v[n->out[k]->id] = cv[((const tg_var *)fn->outputs.items[k])->id];
    tg_mem_free(ctx, cv, sizeof *cv * (size_t)(fn->vars.n + 1));
    return TG_OK;
}

/* Types the nodes of order (inputs first) over axis into v, whose entries for the values
 * they read are set. */
static tg_status type_nodes(tg_ctx *ctx, const char *axis, tg_node *const *order, int norder,
                            bool *v) {
    size_t nr = 1;
    for (int i = 0; i < norder; i++)
        if ((size_t)order[i]->nin > nr) nr = (size_t)order[i]->nin;
    bool *reads = tg_mem_alloc(ctx, sizeof *reads * nr);
    if (!reads) return TG_ENOMEM;
    axes_walk w = {.ctx = ctx};
    for (int i = 0; i < norder && !w.oom; i++) {
        const tg_node *n = order[i];
        const tg_op_def *op = tg_op_table[n->op];
        const char *read = tg_op_axis_name(op, n->attrs);
        bool any = false, per_out = false;
        if (read && strcmp(read, axis) == 0) {
            any = op->spmd != TG_SPMD_INVARIANT;
        } else if (n->op == TG_OP_CALL) { /* the callee typed with the arguments' types */
            if (type_call(ctx, axis, n, v) != TG_OK) w.oom = true;
            continue;
        } else {
            for (int k = 0; k < n->nin && !any; k++) any = v[n->in[k]->id];
            per_out = any && op->out_reads && n->nout > 1 && !node_reads(&w, n, axis);
            if (!any) any = node_reads(&w, n, axis);
        }
        for (int k = 0; k < n->nout; k++) v[n->out[k]->id] = any;
        /* outputs that read different inputs (fused): each varies when its own inputs do */
        for (int k = 0; per_out && k < n->nout && !w.oom; k++) {
            memset(reads, 0, sizeof *reads * nr);
            w.oom = op->out_reads(n->attrs, n->nin, k, reads) != TG_OK;
            bool some = false;
            for (int j = 0; j < n->nin && !some; j++) some = reads[j] && v[n->in[j]->id];
            v[n->out[k]->id] = some;
        }
    }
    walk_fini(&w);
    tg_mem_free(ctx, reads, sizeof *reads * nr);
    return w.oom ? TG_ENOMEM : TG_OK;
}

tg_status tg_spmd_varying(tg_ctx *ctx, const tg_graph *g, const char *axis, const bool *maps,
                          tg_node *const *order, int norder, bool **vary) {
    size_t nv = (size_t)g->vars.n + 1;
    bool *v = tg_mem_calloc(ctx, sizeof *v * nv);
    tg_node **own = NULL;
    if (v && !order) order = own = tg_ir_toposort(g, &norder);
    bool declared = g->spmd_axis && strcmp(g->spmd_axis, axis) == 0;
    for (int i = 0; v && order && i < g->inputs.n; i++) {
        bool m = maps ? maps[i] : !declared || i >= g->spmd_n || g->spmd_mapped[i];
        v[((const tg_var *)g->inputs.items[i])->id] = m;
    }
    tg_status st = v && order ? type_nodes(ctx, axis, order, norder, v) : TG_ENOMEM;
    if (own) tg_mem_free(g->ctx, own, sizeof *own * (size_t)(g->nodes.n + 1));
    if (st != TG_OK) {
        if (v) tg_mem_free(ctx, v, sizeof *v * nv);
        return st;
    }
    *vary = v;
    return TG_OK;
}

tg_status tg_spmd_varying_more(tg_ctx *ctx, const char *axis, tg_node *const *order, int norder,
                               bool *vary) {
    return type_nodes(ctx, axis, order, norder, vary);
}

int tg_pmap_free_axes(const tg_graph *g, const char **names, int cap) {
    bool any = g->callees.n > 0;
    for (int i = 0; i < g->nodes.n && !any; i++)
        any = tg_op_table[((const tg_node *)g->nodes.items[i])->op]->effects & TG_EFFECT_AXIS;
    if (!any) return 0;
    axes_walk w = {.ctx = g->ctx};
    int s = graph_axes_of(&w, g), n = s < 0 ? -1 : w.memo[s].n;
    for (int k = 0; k < n && k < cap; k++) names[k] = w.memo[s].use[k].axis;
    walk_fini(&w);
    return n;
}

int tg_pmap_node_axes(tg_ctx *ctx, const tg_node *n, const char **names, int cap) {
    axes_walk w = {.ctx = ctx};
    graph_axes ga = {0};
    node_axes(&w, &ga, NULL, n);
    int cnt = w.oom ? -1 : ga.n;
    for (int k = 0; k < cnt && k < cap; k++) names[k] = ga.use[k].axis;
    if (ga.use) tg_mem_free(ctx, ga.use, sizeof *ga.use * (size_t)ga.cap);
    walk_fini(&w);
    return cnt;
}

tg_status tg_pmap_check_axes(const tg_graph *g) {
    bool any = g->callees.n > 0; /* most graphs: no walk at all */
    for (int i = 0; i < g->nodes.n && !any; i++)
        any = tg_op_table[((const tg_node *)g->nodes.items[i])->op]->effects & TG_EFFECT_AXIS;
    if (!any) return TG_OK;
    axes_walk w = {.ctx = g->ctx};
    int s = graph_axes_of(&w, g);
    tg_status st = TG_OK;
    if (s < 0) {
        st = tg_set_error(TG_ENOMEM, "out of memory checking the pmap axes of '%s'", g->name);
    } else if (w.memo[s].n > 0) {
        const axis_use *u = &w.memo[s].use[0];
        const char *opname = tg_op_table[u->node->op]->name;
        char where[400];
        if (u->node->line > 0)
            snprintf(where, sizeof where, "%s:%d:%d", u->g->file ? u->g->file : "<input>",
                     u->node->line, u->node->col);
        else
            snprintf(where, sizeof where, "node %d", u->node->id);
        if (u->g == g)
            st = tg_set_error(TG_EINVAL, "%s: %s: no enclosing pmap has the axis '%s'", where,
                              opname, u->axis);
        else
            st = tg_set_error(TG_EINVAL,
                              "in '%s', at %s: %s: no enclosing pmap has the axis '%s' ('%s' "
                              "reaches it outside any pmap of that axis)",
                              u->g->name, where, opname, u->axis, g->name);
    }
    walk_fini(&w);
    return st;
}
