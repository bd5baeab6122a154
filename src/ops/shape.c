/* shape.c - shape and basic-indexing ops: reshape transpose expand_dims squeeze
 * broadcast_to slice.
 *
 * One record per op. All of them are views (.views = 1): the reference kernel makes
 * out[0] itself, sharing the input's buffer, except reshape of a non-C-contiguous input,
 * which copies first. slice follows Python's slice.indices() clamping exactly and keeps
 * negative steps as negative strides; its attributes are four int lists of one length n
 * (starts, stops, steps, index flags; a `none` entry for an omitted bound or step), and
 * tg_slice_format prints them back in the `x[1:, ::-1, 0]` syntax. reshape also takes its
 * extents as 0-d integer inputs, reshape(x, d0, d1, ...), for extents known only at run
 * time. Gradients: each op's VJP applies the inverse shape op to the cotangent (reshape
 * back, inverse permutation, squeeze the new axes / expand the squeezed ones, sum over
 * the broadcast axes, set_subtensor of the slice into zeros). The shape helpers the VJPs
 * of every family share (tg_grad_dims, tg_grad_reshape*, tg_grad_broadcast_like) live
 * here, next to the ops they build.
 * Invariants: static extents stay static where NumPy's rule decides them from static
 * inputs; an extent that depends on a '?' is -1; `nobcast` bits follow the axes they
 * belong to. Checks that need a '?' extent run again when inference sees concrete types.
 */
#include "ops.h"

#include <stdio.h>

/* ---- helpers ---- */

/* The list held by an INTS (or single INT) attribute; 0 entries for none. */
static int aval_ints(const tg_aval *a, const int64_t **p) {
    if (a->kind == TG_ATTR_INTS) {
        *p = a->ints;
        return a->n;
    }
    if (a->kind == TG_ATTR_INT || a->kind == TG_ATTR_BOOL) {
        *p = &a->i;
        return 1;
    }
    *p = NULL;
    return 0;
}

/* "[4,-1]" into buf (always terminated). */
static const char *ints_str(const int64_t *v, int n, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i <= n && used + 1 < cap; i++) {
        int w = i == n ? snprintf(buf + used, cap - used, "]")
                       : snprintf(buf + used, cap - used, "%s%lld", i ? "," : "[", (long long)v[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
    if (n == 0 && cap > 2) snprintf(buf, cap, "[]");
    return buf;
}

/* Product of n extents; false when it overflows int64. */
static bool extents_product(const int64_t *v, int n, int64_t *out) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (v[i] == 0) {
            *out = 0;
            return true;
        }
    }
    for (int i = 0; i < n; i++) {
        if (v[i] > INT64_MAX / p) return false;
        p *= v[i];
    }
    *out = p;
    return true;
}

static void type_init(tg_type *o, tg_dtype dt, int ndim) {
    memset(o, 0, sizeof *o);
    o->dtype = (uint8_t)dt;
    o->ndim = (uint8_t)ndim;
}

static tg_status view_out(tg_kern *k, const tg_tensor *base, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset) {
    tg_tensor *y = tg_tensor_view(base, ndim, shape, strides, offset);
    if (!y) return tg_kern_fail(k, TG_ENOMEM, "cannot make a view: %s", tg_last_error());
    k->out[0] = y;
    return TG_OK;
}

/* The value of a constant 0-d integer variable. */
/* ---- shape helpers for the VJPs of every family (declared in ops.h) ---- */

static bool const_int(const tg_var *v, int64_t *out) {
    if (!v || v->kind != TG_VAR_CONST || !v->value || v->value->ndim != 0 ||
        !tg_dtype_is_int(v->value->dtype))
        return false;
    *out = tg_load_i64(tg_tensor_data(v->value), v->value->dtype);
    return true;
}

bool tg_grad_dims(tg_graph *g, tg_var *v, tg_var **dims) {
    tg_var *shape = NULL;
    if (!v || g->status != TG_OK) return false;
    for (int i = 0; i < v->type.ndim; i++) {
        if (v->type.shape[i] >= 0) {
            dims[i] = tg_literal_int(g, v->type.shape[i]);
        } else {
            if (!shape) shape = tg_apply(g, "shape", &v, 1, NULL, 0);
            tg_slice at = {.start = i, .is_index = true};
            dims[i] = tg_slice_apply(g, shape, &at, 1);
        }
        if (!dims[i]) return false;
    }
    return g->status == TG_OK;
}

/* The attribute form when at most one extent is dynamic (and it can be solved for), else
 * the form with dimension inputs. */
tg_var *tg_grad_reshape(tg_graph *g, tg_var *x, int ndim, tg_var *const *dims) {
    int64_t sh[TG_MAX_DIMS], known = 1;
    int unknown = 0;
    if (!x || g->status != TG_OK || ndim < 0 || ndim > TG_MAX_DIMS) return NULL;
    for (int i = 0; i < ndim; i++) {
        if (!dims[i]) return NULL;
        if (!const_int(dims[i], &sh[i])) {
            sh[i] = -1;
            unknown++;
        } else {
            known = sh[i] == 0 ? 0 : known;
        }
    }
    if (unknown == 0 || (unknown == 1 && known != 0)) {
        bool same = unknown == 0 && x->type.ndim == ndim;
        for (int i = 0; same && i < ndim; i++) same = x->type.shape[i] == sh[i];
        return same ? x : tg_reshape(g, x, ndim, sh);
    }
    tg_var *ins[TG_MAX_DIMS + 1];
    ins[0] = x;
    for (int i = 0; i < ndim; i++) ins[i + 1] = dims[i];
    return tg_apply(g, "reshape", ins, ndim + 1, NULL, 0);
}

tg_var *tg_grad_reshape_like(tg_graph *g, tg_var *x, tg_var *like) {
    tg_var *dims[TG_MAX_DIMS];
    if (!like || !tg_grad_dims(g, like, dims)) return NULL;
    return tg_grad_reshape(g, x, like->type.ndim, dims);
}

/* broadcast_to where like's shape is static, alloc with like's extents otherwise; v itself
 * when it has like's shape already (a '?' of v is taken to be the same '?' of like). */
tg_var *tg_grad_broadcast_like(tg_graph *g, tg_var *v, tg_var *like) {
    if (!v || !like || g->status != TG_OK) return NULL;
    const tg_type *t = &like->type;
    bool same = v->type.ndim == t->ndim;
    for (int i = 0; same && i < t->ndim; i++) same = v->type.shape[i] == t->shape[i];
    if (same) return v;
    if (tg_type_known(t)) {
        tg_attr a = TG_A_INTS("shape", t->shape, t->ndim);
        return tg_apply(g, "broadcast_to", &v, 1, &a, 1);
    }
    tg_var *ins[TG_MAX_DIMS + 1];
    ins[0] = v;
    if (!tg_grad_dims(g, like, ins + 1)) return NULL;
    return tg_apply(g, "alloc", ins, t->ndim + 1, NULL, 0);
}

/* ---- reshape ---- */

/* `shape` is required unless the extents come as inputs: reshape(x, d0, d1, ...) with
 * 0-d integer inputs (a constant one gives a static extent, any other a '?'), as alloc
 * takes them. That form reshapes to extents only known at run time (the gradient of a
 * reshape of an input with several '?' extents needs it); its extents must be >= 0. */
static const tg_attr_spec reshape_attrs[] = {
    {"shape", TG_AS_INTS, 0, 1, {.kind = TG_ATTR_NONE}},
};

static tg_status infer_reshape_dims(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    int n = ic->nin - 1;
    char ts[TG_TYPE_STR_MAX], ss[200];
    if (ic->attrs[0].kind != TG_ATTR_NONE)
        return tg_infer_fail(ic, TG_EINVAL,
                             "give the shape either as the attribute or as dimension inputs, "
                             "not both");
    if (n > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "%d dimensions are more than %d", n, TG_MAX_DIMS);
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)x->dtype, n);
    for (int d = 0; d < n; d++) {
        const tg_type *t = &ic->in[d + 1];
        if (t->ndim != 0 || !tg_dtype_is_int((tg_dtype)t->dtype))
            return tg_infer_fail(ic, TG_ETYPE, "dimension %d must be a 0-d integer, got %s", d,
                                 tg_type_str(t, ts, sizeof ts));
        int64_t e;
        o->shape[d] = -1;
        if (tg_infer_const_int(ic, d + 1, &e)) {
            if (e < 0)
                return tg_infer_fail(ic, TG_EINVAL, "negative dimension %lld (dimension %d)",
                                     (long long)e, d);
            o->shape[d] = e;
        }
    }
    int64_t size, want;
    if (tg_type_known(x) && tg_type_known(o)) {
        if (!extents_product(x->shape, x->ndim, &size) ||
            !extents_product(o->shape, o->ndim, &want))
            return tg_infer_fail(ic, TG_ELIMIT, "the shapes are too large");
        if (size != want)
            return tg_infer_fail(ic, TG_ESHAPE, "cannot reshape %s (size %lld) into shape %s",
                                 tg_type_str(x, ts, sizeof ts), (long long)size,
                                 ints_str(o->shape, n, ss, sizeof ss));
    }
    return TG_OK;
}

static tg_status infer_reshape(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    const int64_t *sh;
    if (ic->nin > 1) return infer_reshape_dims(ic);
    if (ic->attrs[0].kind == TG_ATTR_NONE)
        return tg_infer_fail(ic, TG_EINVAL,
                             "missing attribute 'shape' (or the extents as dimension inputs)");
    int n = aval_ints(&ic->attrs[0], &sh);
    char ts[TG_TYPE_STR_MAX], ss[200];
    if (n > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "shape %s has more than %d dimensions",
                             ints_str(sh, n, ss, sizeof ss), TG_MAX_DIMS);
    int unknown = -1;
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        if (sh[i] == -1) {
            if (unknown >= 0)
                return tg_infer_fail(ic, TG_EINVAL,
                                     "can only specify one unknown dimension "
                                     "in shape %s",
                                     ints_str(sh, n, ss, sizeof ss));
            unknown = i;
        } else if (sh[i] < 0) {
            return tg_infer_fail(ic, TG_EINVAL, "negative dimension %lld in shape %s",
                                 (long long)sh[i], ints_str(sh, n, ss, sizeof ss));
        }
    }
    for (int i = 0; i < n; i++) {
        if (i == unknown) continue;
        if (sh[i] != 0 && known > INT64_MAX / sh[i])
            return tg_infer_fail(ic, TG_ELIMIT, "shape %s is too large",
                                 ints_str(sh, n, ss, sizeof ss));
        known *= sh[i];
    }
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)x->dtype, n);
    for (int i = 0; i < n; i++) o->shape[i] = sh[i];
    if (!tg_type_known(x)) {
        if (unknown >= 0) o->shape[unknown] = -1;
        return TG_OK; /* checked when the extents are known */
    }
    int64_t size;
    if (!extents_product(x->shape, x->ndim, &size))
        return tg_infer_fail(ic, TG_ELIMIT, "%s is too large", tg_type_str(x, ts, sizeof ts));
    bool ok = unknown >= 0 ? known != 0 && size % known == 0 : size == known;
    if (!ok)
        return tg_infer_fail(ic, TG_ESHAPE, "cannot reshape %s (size %lld) into shape %s",
                             tg_type_str(x, ts, sizeof ts), (long long)size,
                             ints_str(sh, n, ss, sizeof ss));
    if (unknown >= 0) o->shape[unknown] = size / known;
    return TG_OK;
}

/* A view when the input is C-contiguous, else a contiguous copy viewed with the shape. */
static tg_status ref_reshape(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    int nd = k->out_type[0].ndim;
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS], size;
    char ss[200];
    if (k->nin > 1) { /* extents from the dimension inputs */
        nd = k->nin - 1;
        if (nd > TG_MAX_DIMS) return tg_kern_fail(k, TG_ELIMIT, "too many dimensions");
        for (int d = 0; d < nd; d++) {
            shape[d] = tg_load_i64(tg_tensor_data(k->in[d + 1]), k->in[d + 1]->dtype);
            if (shape[d] < 0)
                return tg_kern_fail(k, TG_EINVAL, "negative dimension %lld (dimension %d)",
                                    (long long)shape[d], d);
        }
    } else {
        memcpy(shape, k->out_type[0].shape, sizeof shape[0] * (size_t)nd);
    }
    if (!extents_product(shape, nd, &size) || size != tg_tensor_size(x))
        return tg_kern_fail(k, TG_ESHAPE, "cannot reshape %lld elements into shape %s",
                            (long long)tg_tensor_size(x), ints_str(shape, nd, ss, sizeof ss));
    tg_contiguous_strides(nd, shape, strides);
    if (tg_tensor_is_contiguous(x)) return view_out(k, x, nd, shape, strides, x->offset);
    tg_tensor *c = tg_tensor_dup(x);
    if (!c) return tg_kern_fail(k, TG_ENOMEM, "cannot copy the input");
    tg_status st = view_out(k, c, nd, shape, strides, c->offset);
    tg_tensor_free(c); /* the view holds its own reference */
    return st;
}

/* The cotangent reshaped back to the input's shape (shape(x) where it has '?'s). */
static tg_status vjp_reshape(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    if (tg_ops_float_in(n, 0)) gin[0] = tg_grad_reshape_like(g, gout[0], n->in[0]);
    return g->status;
}

/* Over a batch: the batch extent in front of the core result's extents (a '?' of the core
 * result comes from the extent inputs, which must not be batched). */
static tg_status batch_reshape(tg_batch *b, const tg_node *n, tg_var *const *in,
                               const bool *batched, tg_var **out, bool *ob) {
    (void)ob;
    for (int k = 1; k < n->nin; k++)
        if (batched[k]) return tg_batch_refuse(b, n, "its extents vary over the batch");
    const tg_type *t = &n->out[0]->type;
    tg_var *dims[TG_MAX_DIMS + 1];
    if (t->ndim + 1 > TG_MAX_DIMS) return tg_batch_refuse(b, n, "too many dimensions");
    dims[0] = tg_batch_extent(b);
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] >= 0)
            dims[d + 1] = tg_literal_int(b->g, t->shape[d]);
        else if (n->nin == t->ndim + 1)
            dims[d + 1] = in[d + 1];
        else
            return tg_batch_refuse(b, n, "a '?' extent of its result comes from shape=[..., -1]");
    }
    out[0] = tg_grad_reshape(b->g, in[0], t->ndim + 1, dims);
    return b->g->status;
}

const tg_op_def tg_op_reshape = {
    .name = "reshape",
    .min_in = 1,
    .max_in = -1,
    .nout = 1,
    .kind = TG_KIND_SHAPE,
    .attrs = reshape_attrs,
    .nattrs = (int)TG_COUNTOF(reshape_attrs),
    .infer = infer_reshape,
    .ref = ref_reshape,
    .views = 1u << 0,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_reshape,
    .batch = batch_reshape,
};

/* ---- transpose ---- */

static const tg_attr_spec transpose_attrs[] = {
    {"axes", TG_AS_INTS, 0, 1, {.kind = TG_ATTR_NONE}},
};

/* The permutation: none reverses the axes. false with a message in err. */
static bool transpose_perm(const tg_aval *a, int ndim, int *perm, char *err, size_t cap) {
    if (a->kind == TG_ATTR_NONE) {
        for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
        return true;
    }
    const int64_t *ax;
    int n = aval_ints(a, &ax);
    char ss[200];
    if (n != ndim) {
        snprintf(err, cap, "axes %s don't match an array of dimension %d",
                 ints_str(ax, n, ss, sizeof ss), ndim);
        return false;
    }
    bool seen[TG_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int p;
        if (!tg_axis_norm(ax[i], ndim, &p) || seen[p]) {
            snprintf(err, cap, "axes %s are not a permutation of the %d axes",
                     ints_str(ax, n, ss, sizeof ss), ndim);
            return false;
        }
        seen[p] = true;
        perm[i] = p;
    }
    return true;
}

static tg_status infer_transpose(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    int perm[TG_MAX_DIMS];
    char err[300];
    if (!transpose_perm(&ic->attrs[0], x->ndim, perm, err, sizeof err))
        return tg_infer_fail(ic, TG_EINVAL, "%s", err);
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)x->dtype, x->ndim);
    for (int i = 0; i < x->ndim; i++) {
        o->shape[i] = x->shape[perm[i]];
        if (x->nobcast & (1u << perm[i])) o->nobcast |= 1u << i;
    }
    return TG_OK;
}

static tg_status ref_transpose(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    int perm[TG_MAX_DIMS];
    char err[300];
    if (!transpose_perm(&k->attrs[0], x->ndim, perm, err, sizeof err))
        return tg_kern_fail(k, TG_EINVAL, "%s", err);
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        shape[i] = x->shape[perm[i]];
        strides[i] = x->strides[perm[i]];
    }
    return view_out(k, x, x->ndim, shape, strides, x->offset);
}

/* The inverse permutation applied to the cotangent. */
static tg_status vjp_transpose(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    int perm[TG_MAX_DIMS], nd = n->in[0]->type.ndim;
    int64_t inv[TG_MAX_DIMS];
    char err[300];
    if (!tg_ops_float_in(n, 0)) return g->status;
    if (!transpose_perm(&n->attrs[0], nd, perm, err, sizeof err))
        return tg_ir_fail(g, TG_EINTERNAL, "transpose gradient: %s", err), g->status;
    for (int i = 0; i < nd; i++) inv[perm[i]] = i;
    gin[0] = tg_transpose(g, gout[0], inv);
    return g->status;
}

/* Over a batch: the batch axis stays in front, the core axes move as in the body. */
static tg_status batch_transpose(tg_batch *b, const tg_node *n, tg_var *const *in,
                                 const bool *batched, tg_var **out, bool *ob) {
    (void)batched, (void)ob;
    int nd = n->in[0]->type.ndim;
    int64_t perm[TG_MAX_DIMS];
    if (nd + 1 > TG_MAX_DIMS) return tg_batch_refuse(b, n, "too many dimensions");
    perm[0] = 0;
    for (int d = 0; d < nd; d++) {
        int64_t a = n->attrs[0].kind == TG_ATTR_INTS ? n->attrs[0].ints[d] : nd - 1 - d;
        perm[d + 1] = (a < 0 ? a + nd : a) + 1;
    }
    out[0] = tg_transpose(b->g, in[0], perm);
    return b->g->status;
}

const tg_op_def tg_op_transpose = {
    .name = "transpose",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_SHAPE,
    .attrs = transpose_attrs,
    .nattrs = (int)TG_COUNTOF(transpose_attrs),
    .infer = infer_transpose,
    .ref = ref_transpose,
    .views = 1u << 0,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_transpose,
    .batch = batch_transpose,
};

/* ---- expand_dims ---- */

static const tg_attr_spec expand_dims_attrs[] = {
    {"axis", TG_AS_INTS, 1, 0, {.kind = TG_ATTR_NONE}},
};

/* Marks the new axes (in the output's numbering); false with a message in err. */
static bool expand_axes(const tg_aval *a, int ndim, bool *isnew, int *ondim, char *err,
                        size_t cap) {
    const int64_t *ax;
    int n = aval_ints(a, &ax);
    int od = ndim + n;
    for (int i = 0; i < TG_MAX_DIMS; i++) isnew[i] = false;
    if (od > TG_MAX_DIMS) {
        snprintf(err, cap, "the result would have %d dimensions (at most %d)", od, TG_MAX_DIMS);
        return false;
    }
    for (int i = 0; i < n; i++) {
        int p;
        if (!tg_axis_norm(ax[i], od, &p)) {
            snprintf(err, cap, "axis %lld is out of bounds for an array of dimension %d",
                     (long long)ax[i], od);
            return false;
        }
        if (isnew[p]) {
            snprintf(err, cap, "repeated axis %lld", (long long)ax[i]);
            return false;
        }
        isnew[p] = true;
    }
    *ondim = od;
    return true;
}

static tg_status infer_expand_dims(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    bool isnew[TG_MAX_DIMS];
    int od;
    char err[200];
    if (!expand_axes(&ic->attrs[0], x->ndim, isnew, &od, err, sizeof err))
        return tg_infer_fail(ic, TG_EINVAL, "%s", err);
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)x->dtype, od);
    for (int i = 0, j = 0; i < od; i++) {
        if (isnew[i]) {
            o->shape[i] = 1; /* a static 1: broadcastable */
            continue;
        }
        if (x->nobcast & (1u << j)) o->nobcast |= 1u << i;
        o->shape[i] = x->shape[j++];
    }
    return TG_OK;
}

static tg_status ref_expand_dims(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    bool isnew[TG_MAX_DIMS];
    int od;
    char err[200];
    if (!expand_axes(k->attrs, x->ndim, isnew, &od, err, sizeof err))
        return tg_kern_fail(k, TG_EINVAL, "%s", err);
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    for (int i = 0, j = 0; i < od; i++) {
        if (isnew[i]) {
            shape[i] = 1;
            strides[i] = 0;
        } else {
            shape[i] = x->shape[j];
            strides[i] = x->strides[j++];
        }
    }
    return view_out(k, x, od, shape, strides, x->offset);
}

/* The new axes squeezed out of the cotangent. */
static tg_status vjp_expand_dims(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    bool isnew[TG_MAX_DIMS];
    int od, na = 0;
    int64_t axes[TG_MAX_DIMS];
    char err[200];
    if (!tg_ops_float_in(n, 0)) return g->status;
    if (!expand_axes(&n->attrs[0], n->in[0]->type.ndim, isnew, &od, err, sizeof err))
        return tg_ir_fail(g, TG_EINTERNAL, "expand_dims gradient: %s", err), g->status;
    for (int i = 0; i < od; i++)
        if (isnew[i]) axes[na++] = i;
    if (na == 0) {
        gin[0] = gout[0];
        return g->status;
    }
    tg_attr a = TG_A_INTS("axis", axes, na);
    gin[0] = tg_apply(g, "squeeze", &gout[0], 1, &a, 1);
    return g->status;
}

const tg_op_def tg_op_expand_dims = {
    .name = "expand_dims",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_SHAPE,
    .attrs = expand_dims_attrs,
    .nattrs = (int)TG_COUNTOF(expand_dims_attrs),
    .infer = infer_expand_dims,
    .ref = ref_expand_dims,
    .views = 1u << 0,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_expand_dims,
};

/* ---- squeeze ---- */

static const tg_attr_spec squeeze_attrs[] = {
    {"axis", TG_AS_AXES, 0, 1, {.kind = TG_ATTR_NONE}},
};

/* With axis none, squeezes every broadcastable 1 (static 1s; at run time a 1 that came
 * from '?' is marked nobcast and kept, so the rank matches the static type). An explicit
 * axis must have extent 1, or be '?' statically (checked again at run time). */
static tg_status infer_squeeze(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    const tg_aval *a = &ic->attrs[0];
    bool drop[TG_MAX_DIMS] = {false};
    char ts[TG_TYPE_STR_MAX];
    if (a->kind == TG_ATTR_NONE) {
        for (int i = 0; i < x->ndim; i++) drop[i] = x->shape[i] == 1 && !(x->nobcast & (1u << i));
    } else {
        const int64_t *ax;
        int n = aval_ints(a, &ax);
        for (int j = 0; j < n; j++) {
            int p;
            if (!tg_axis_norm(ax[j], x->ndim, &p))
                return tg_infer_fail(ic, TG_EINVAL, "axis %lld is out of bounds for %s",
                                     (long long)ax[j], tg_type_str(x, ts, sizeof ts));
            if (drop[p])
                return tg_infer_fail(ic, TG_EINVAL, "duplicate value in 'axis' (%lld)",
                                     (long long)ax[j]);
            if (x->shape[p] != 1 && x->shape[p] != -1)
                return tg_infer_fail(ic, TG_ESHAPE,
                                     "cannot select an axis to squeeze out which has size not "
                                     "equal to one (axis %d of %s)",
                                     p, tg_type_str(x, ts, sizeof ts));
            drop[p] = true;
        }
    }
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)x->dtype, 0);
    int nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (drop[i]) continue;
        if (x->nobcast & (1u << i)) o->nobcast |= 1u << nd;
        o->shape[nd++] = x->shape[i];
    }
    o->ndim = (uint8_t)nd;
    return TG_OK;
}

/* The output type says which extents remain; dropping extent-1 axes never moves an
 * element, so the kernel matches the remaining extents in order. */
static tg_status ref_squeeze(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    const tg_type *ot = &k->out_type[0];
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
    int j = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (j < ot->ndim && x->shape[i] == ot->shape[j]) {
            shape[j] = x->shape[i];
            strides[j++] = x->strides[i];
        } else if (x->shape[i] != 1) {
            return tg_kern_fail(k, TG_ESHAPE,
                                "cannot select an axis to squeeze out which has "
                                "size not equal to one (axis %d, extent %lld)",
                                i, (long long)x->shape[i]);
        }
    }
    if (j != ot->ndim)
        return tg_kern_fail(k, TG_EINTERNAL, "input does not squeeze to the output type");
    return view_out(k, x, ot->ndim, shape, strides, x->offset);
}

/* The squeezed axes put back into the cotangent: those the static inference dropped
 * (axis none: the static 1s; otherwise the listed axes). */
static tg_status vjp_squeeze(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    const tg_type *x = &n->in[0]->type;
    const tg_aval *a = &n->attrs[0];
    int64_t axes[TG_MAX_DIMS];
    int na = 0;
    if (!tg_ops_float_in(n, 0)) return g->status;
    if (a->kind == TG_ATTR_NONE) {
        for (int i = 0; i < x->ndim; i++)
            if (x->shape[i] == 1 && !(x->nobcast & (1u << i))) axes[na++] = i;
    } else {
        const int64_t *ax;
        int cnt = aval_ints(a, &ax);
        bool drop[TG_MAX_DIMS] = {false};
        for (int j = 0; j < cnt; j++) {
            int p;
            if (tg_axis_norm(ax[j], x->ndim, &p)) drop[p] = true;
        }
        for (int i = 0; i < x->ndim; i++)
            if (drop[i]) axes[na++] = i;
    }
    if (na == 0) {
        gin[0] = gout[0];
        return g->status;
    }
    tg_attr at = TG_A_INTS("axis", axes, na);
    gin[0] = tg_apply(g, "expand_dims", &gout[0], 1, &at, 1);
    return g->status;
}

/* Over a batch: the axes shift past the batch axis; `none` (every axis of extent 1) becomes
 * the core axes of static extent 1, so that a batch of one is never squeezed. */
static tg_status batch_squeeze(tg_batch *b, const tg_node *n, tg_var *const *in,
                               const bool *batched, tg_var **out, bool *ob) {
    if (n->attrs[0].kind != TG_ATTR_NONE) return tg_batch_axis(b, n, in, batched, out, ob);
    const tg_type *t = &n->in[0]->type;
    int64_t axes[TG_MAX_DIMS];
    int na = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] == 1) axes[na++] = d + 1;
    tg_attr a = TG_A_INTS("axis", axes, na);
    out[0] = na ? tg_apply(b->g, "squeeze", &in[0], 1, &a, 1) : in[0];
    return b->g->status;
}

const tg_op_def tg_op_squeeze = {
    .name = "squeeze",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_SHAPE,
    .attrs = squeeze_attrs,
    .nattrs = (int)TG_COUNTOF(squeeze_attrs),
    .infer = infer_squeeze,
    .ref = ref_squeeze,
    .views = 1u << 0,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_squeeze,
    .batch = batch_squeeze,
};

/* ---- broadcast_to ---- */

static const tg_attr_spec broadcast_to_attrs[] = {
    {"shape", TG_AS_INTS, 1, 0, {.kind = TG_ATTR_NONE}},
};

static tg_status infer_broadcast_to(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    const int64_t *sh;
    int n = aval_ints(&ic->attrs[0], &sh);
    char ts[TG_TYPE_STR_MAX], ss[200];
    if (n > TG_MAX_DIMS)
        return tg_infer_fail(ic, TG_ELIMIT, "shape %s has more than %d dimensions",
                             ints_str(sh, n, ss, sizeof ss), TG_MAX_DIMS);
    for (int i = 0; i < n; i++)
        if (sh[i] < 0)
            return tg_infer_fail(ic, TG_EINVAL, "negative dimension %lld in shape %s",
                                 (long long)sh[i], ints_str(sh, n, ss, sizeof ss));
    if (x->ndim > n)
        return tg_infer_fail(ic, TG_ESHAPE,
                             "cannot broadcast %s to shape %s: the input has more dimensions",
                             tg_type_str(x, ts, sizeof ts), ints_str(sh, n, ss, sizeof ss));
    int lead = n - x->ndim;
    for (int i = 0; i < x->ndim; i++) {
        int64_t xe = x->shape[i], te = sh[lead + i];
        if (xe == te || xe == -1) continue; /* '?' is checked at run time */
        if (xe == 1 && (x->nobcast & (1u << i)))
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "cannot broadcast %s to shape %s: axis %d is a '?' that is 1 "
                                 "at run time (declare the dimension as 1 to broadcast)",
                                 tg_type_str(x, ts, sizeof ts), ints_str(sh, n, ss, sizeof ss), i);
        if (xe != 1)
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "cannot broadcast %s to shape %s (axis %d: %lld vs %lld)",
                                 tg_type_str(x, ts, sizeof ts), ints_str(sh, n, ss, sizeof ss), i,
                                 (long long)xe, (long long)te);
    }
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)x->dtype, n);
    for (int i = 0; i < n; i++) o->shape[i] = sh[i];
    return TG_OK;
}

static tg_status ref_broadcast_to(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    const int64_t *sh;
    int n = aval_ints(&k->attrs[0], &sh);
    if (n > TG_MAX_DIMS || x->ndim > n)
        return tg_kern_fail(k, TG_ESHAPE, "cannot broadcast the input to the shape");
    int64_t strides[TG_MAX_DIMS];
    int lead = n - x->ndim;
    for (int i = 0; i < n; i++) {
        if (i < lead) {
            strides[i] = 0;
            continue;
        }
        int64_t xe = x->shape[i - lead];
        if (xe == sh[i])
            strides[i] = x->strides[i - lead];
        else if (xe == 1)
            strides[i] = 0;
        else
            return tg_kern_fail(k, TG_ESHAPE, "cannot broadcast axis %d of extent %lld to %lld",
                                i - lead, (long long)xe, (long long)sh[i]);
    }
    return view_out(k, x, n, sh, strides, x->offset);
}

/* Summed over the axes the input was broadcast along. */
static tg_status vjp_broadcast_to(tg_graph *g, const tg_node *n, tg_var *const *gout,
                                  tg_var **gin) {
    if (tg_ops_float_in(n, 0)) gin[0] = tg_grad_unbroadcast(g, gout[0], &n->in[0]->type);
    return g->status;
}

/* Over a batch: the input's core rank padded to the target's, then the batch extent in
 * front of the target shape. */
static tg_status batch_broadcast_to(tg_batch *b, const tg_node *n, tg_var *const *in,
                                    const bool *batched, tg_var **out, bool *ob) {
    (void)batched, (void)ob;
    const tg_aval *s = &n->attrs[0];
    tg_var *ins[TG_MAX_DIMS + 2];
    if (s->n + 1 > TG_MAX_DIMS) return tg_batch_refuse(b, n, "too many dimensions");
    ins[0] = tg_batch_pad(b, in[0], s->n);
    ins[1] = tg_batch_extent(b);
    for (int d = 0; d < s->n; d++) ins[d + 2] = tg_literal_int(b->g, s->ints[d]);
    if (b->g->status != TG_OK) return b->g->status;
    out[0] = tg_apply(b->g, "alloc", ins, s->n + 2, NULL, 0);
    return b->g->status;
}

const tg_op_def tg_op_broadcast_to = {
    .name = "broadcast_to",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_SHAPE,
    .attrs = broadcast_to_attrs,
    .nattrs = (int)TG_COUNTOF(broadcast_to_attrs),
    .infer = infer_broadcast_to,
    .ref = ref_broadcast_to,
    .views = 1u << 0,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_broadcast_to,
    .batch = batch_broadcast_to,
};

/* ---- slice ---- */

static const tg_attr_spec slice_attrs[] = {
    [TG_SLICE_A_STARTS] = {"starts", TG_AS_INTS, 0, TG_NULL_ITEMS, {.kind = TG_ATTR_INTS}},
    [TG_SLICE_A_STOPS] = {"stops", TG_AS_INTS, 0, TG_NULL_ITEMS, {.kind = TG_ATTR_INTS}},
    [TG_SLICE_A_STEPS] = {"steps", TG_AS_INTS, 0, TG_NULL_ITEMS, {.kind = TG_ATTR_INTS}},
    [TG_SLICE_A_INDEX] = {"index", TG_AS_INTS, 0, 0, {.kind = TG_ATTR_INTS}},
};

/* The slice attributes read back: n entries; absent lists are all-none / no index. */
typedef struct slice_spec {
    int n;
    const int64_t *starts, *stops, *steps, *index; /* NULL: all none / 0 */
    const bool *nstart, *nstop, *nstep;            /* none masks; NULL: no entry is none */
} slice_spec;

/* One part of axis i: false when it is omitted (`none`, or the list is absent). */
static bool part_at(const int64_t *v, const bool *none, int i, int64_t *out) {
    if (!v || (none && none[i])) return false;
    *out = v[i];
    return true;
}

static bool slice_read(const tg_aval *attrs, slice_spec *s, char *err, size_t cap) {
    const int64_t *v[4];
    int len[4], n = 0;
    for (int i = 0; i < 4; i++) {
        len[i] = aval_ints(&attrs[i], &v[i]);
        if (len[i] > n) n = len[i];
    }
    for (int i = 0; i < 4; i++) {
        if (len[i] != 0 && len[i] != n) {
            snprintf(err, cap,
                     "starts, stops, steps and index have different lengths "
                     "(%d, %d, %d, %d)",
                     len[0], len[1], len[2], len[3]);
            return false;
        }
    }
    s->n = n;
    s->starts = len[0] ? v[0] : NULL;
    s->stops = len[1] ? v[1] : NULL;
    s->steps = len[2] ? v[2] : NULL;
    s->index = len[3] ? v[3] : NULL;
    s->nstart = len[0] ? attrs[0].none : NULL;
    s->nstop = len[1] ? attrs[1].none : NULL;
    s->nstep = len[2] ? attrs[2].none : NULL;
    for (int i = 0; i < n; i++) {
        int64_t v0;
        if (s->index && s->index[i] != 0 && s->index[i] != 1) {
            snprintf(err, cap, "index flags must be 0 or 1, got %lld", (long long)s->index[i]);
            return false;
        }
        bool is_index = s->index && s->index[i];
        if (is_index && !part_at(s->starts, s->nstart, i, &v0)) {
            snprintf(err, cap, "axis %d is an integer index without a value", i);
            return false;
        }
        if (!is_index && part_at(s->steps, s->nstep, i, &v0) && v0 == 0) {
            snprintf(err, cap, "slice step cannot be zero (axis %d)", i);
            return false;
        }
    }
    return true;
}

/* Python's slice.indices(len) followed by the element count, for axis i of s (which has
 * a part there, not an index). Every int64_t is a bound or step, INT64_MIN included. */
static int64_t slice_count(int64_t len, const slice_spec *s, int i, int64_t *first,
                           int64_t *stepp) {
    int64_t start, stop, step;
    if (!part_at(s->steps, s->nstep, i, &step)) step = 1;
    *stepp = step;
    int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? len : len - 1;
    if (!part_at(s->starts, s->nstart, i, &start)) {
        start = step < 0 ? upper : lower;
    } else {
        if (start < 0) start += len;
        if (start < lower)
            start = lower;
        else if (start > upper)
            start = upper;
    }
    if (!part_at(s->stops, s->nstop, i, &stop)) {
        stop = step < 0 ? lower : upper;
    } else {
        if (stop < 0) stop += len;
        if (stop < lower)
            stop = lower;
        else if (stop > upper)
            stop = upper;
    }
    *first = start;
    /* start and stop lie in [-1, len]; |step| as unsigned, so -INT64_MIN does not overflow */
    uint64_t mag = step > 0 ? (uint64_t)step : (uint64_t)0 - (uint64_t)step;
    if (step > 0) return start < stop ? (int64_t)((uint64_t)(stop - start - 1) / mag) + 1 : 0;
    return stop < start ? (int64_t)((uint64_t)(start - stop - 1) / mag) + 1 : 0;
}

static tg_status infer_slice(tg_infer *ic) {
    const tg_type *x = &ic->in[0];
    slice_spec s;
    char err[200], ts[TG_TYPE_STR_MAX];
    if (!slice_read(ic->attrs, &s, err, sizeof err)) return tg_infer_fail(ic, TG_EINVAL, "%s", err);
    if (s.n > x->ndim)
        return tg_infer_fail(ic, TG_EINDEX, "too many indices for %s: %d were indexed",
                             tg_type_str(x, ts, sizeof ts), s.n);
    tg_type *o = &ic->out[0];
    type_init(o, (tg_dtype)x->dtype, 0);
    int nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        int64_t ext = x->shape[i];
        bool bit = (x->nobcast & (1u << i)) != 0;
        if (i >= s.n) {
            if (bit) o->nobcast |= 1u << nd;
            o->shape[nd++] = ext;
        } else if (s.index && s.index[i]) {
            int64_t idx = s.starts[i];
            if (ext >= 0 && (idx < -ext || idx >= ext))
                return tg_infer_fail(ic, TG_EINDEX,
                                     "index %lld is out of bounds for axis %d with extent %lld "
                                     "(%s)",
                                     (long long)idx, i, (long long)ext,
                                     tg_type_str(x, ts, sizeof ts));
        } else if (ext < 0) {
            o->shape[nd++] = -1;
        } else {
            int64_t first, step;
            int64_t cnt = slice_count(ext, &s, i, &first, &step);
            if (bit && cnt == 1) o->nobcast |= 1u << nd;
            o->shape[nd++] = cnt;
        }
    }
    o->ndim = (uint8_t)nd;
    return TG_OK;
}

static tg_status ref_slice(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    slice_spec s;
    char err[200];
    if (!slice_read(k->attrs, &s, err, sizeof err)) return tg_kern_fail(k, TG_EINVAL, "%s", err);
    if (s.n > x->ndim)
        return tg_kern_fail(k, TG_EINDEX,
                            "too many indices for an array of dimension %d: "
                            "%d were indexed",
                            x->ndim, s.n);
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS], offset = x->offset;
    int nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        int64_t ext = x->shape[i], st = x->strides[i];
        if (i >= s.n) {
            shape[nd] = ext;
            strides[nd++] = st;
        } else if (s.index && s.index[i]) {
            int64_t idx = s.starts[i];
            if (idx < -ext || idx >= ext)
                return tg_kern_fail(k, TG_EINDEX,
                                    "index %lld is out of bounds for axis %d with extent %lld",
                                    (long long)idx, i, (long long)ext);
            offset += (idx < 0 ? idx + ext : idx) * st;
        } else {
            int64_t first, step;
            int64_t cnt = slice_count(ext, &s, i, &first, &step);
            if (cnt > 0) offset += first * st;
            shape[nd] = cnt;
            /* with two or more elements |step| < ext, so the product cannot overflow */
            strides[nd++] = cnt > 1 ? st * step : st;
        }
    }
    for (int i = 0; i < nd; i++)
        if (shape[i] == 0) offset = x->offset; /* empty: no element is addressed */
    return view_out(k, x, nd, shape, strides, offset);
}

/* The cotangent written into zeros of the input's shape at the same selection
 * (set_subtensor takes the slice attributes unchanged: negative steps, integer indices). */
static tg_status vjp_slice(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    static const char *const names[4] = {"starts", "stops", "steps", "index"};
    tg_attr at[4];
    if (!tg_ops_float_in(n, 0)) return g->status;
    for (int i = 0; i < 4; i++) {
        const int64_t *v;
        int cnt = aval_ints(&n->attrs[i], &v);
        at[i] = TG_A_INTS(names[i], v, cnt);
        at[i].none = cnt ? n->attrs[i].none : NULL;
    }
    tg_var *ins[2] = {tg_grad_zeros_like(g, n->in[0]), gout[0]};
    gin[0] = tg_apply(g, "set_subtensor", ins, 2, at, 4);
    return g->status;
}

void tg_slice_batch_attrs(const tg_aval *a, tg_aval *out, tg_slice_front *buf) {
    int n = a[TG_SLICE_A_STARTS].n;
    for (int q = 0; q < 4; q++) {
        buf->ints[q][0] = 0;
        buf->none[q][0] = q < 3;
        for (int i = 0; i < n; i++) {
            buf->ints[q][i + 1] = a[q].n > i ? a[q].ints[i] : 0;
            buf->none[q][i + 1] = tg_aval_none_at(&a[q], i);
        }
        out[q] = (tg_aval){.kind = TG_ATTR_INTS,
                           .ints = buf->ints[q],
                           .n = n + 1,
                           .none = q < 3 ? buf->none[q] : NULL};
    }
}

/* Over a batch: a whole-axis entry in front for the batch axis. */
static tg_status batch_slice(tg_batch *b, const tg_node *n, tg_var *const *in, const bool *batched,
                             tg_var **out, bool *ob) {
    (void)batched, (void)ob;
    tg_aval attrs[4];
    tg_slice_front buf;
    if (n->attrs[TG_SLICE_A_STARTS].n + 1 > TG_MAX_DIMS)
        return tg_batch_refuse(b, n, "too many dimensions");
    tg_slice_batch_attrs(n->attrs, attrs, &buf);
    tg_batch_make(b, n, in, attrs, out);
    return b->g->status;
}

const tg_op_def tg_op_slice = {
    .name = "slice",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_INDEX,
    .attrs = slice_attrs,
    .nattrs = (int)TG_COUNTOF(slice_attrs),
    .infer = infer_slice,
    .ref = ref_slice,
    .views = 1u << 0,
    .grad = TG_GRAD_VJP,
    .vjp = vjp_slice,
    .batch = batch_slice,
};

/* Part i of list v (none mask `none`): nothing where it is omitted. */
static bool put_bound(char *buf, size_t cap, size_t *used, const int64_t *list, const bool *none,
                      int i) {
    int64_t v;
    if (!part_at(list, none, i, &v)) return true;
    int w = snprintf(buf + *used, cap - *used, "%lld", (long long)v);
    if (w < 0 || (size_t)w >= cap - *used) return false;
    *used += (size_t)w;
    return true;
}

static bool put_str(char *buf, size_t cap, size_t *used, const char *s) {
    size_t l = strlen(s);
    if (l >= cap - *used) return false;
    memcpy(buf + *used, s, l + 1);
    *used += l;
    return true;
}

bool tg_slice_format(const tg_aval *attrs, char *buf, size_t cap) {
    slice_spec s;
    char err[200];
    size_t used = 0;
    if (cap == 0) return false;
    buf[0] = '\0';
    if (!slice_read(attrs, &s, err, sizeof err)) return false;
    bool ok = put_str(buf, cap, &used, "[");
    for (int i = 0; ok && i < s.n; i++) {
        if (i) ok = put_str(buf, cap, &used, ", ");
        if (s.index && s.index[i]) {
            ok = ok && put_bound(buf, cap, &used, s.starts, s.nstart, i);
            continue;
        }
        int64_t step;
        ok = ok && put_bound(buf, cap, &used, s.starts, s.nstart, i);
        ok = ok && put_str(buf, cap, &used, ":");
        ok = ok && put_bound(buf, cap, &used, s.stops, s.nstop, i);
        if (ok && part_at(s.steps, s.nstep, i, &step)) {
            ok = put_str(buf, cap, &used, ":");
            ok = ok && put_bound(buf, cap, &used, s.steps, s.nstep, i);
        }
    }
    ok = ok && put_str(buf, cap, &used, "]");
    if (!ok) buf[0] = '\0';
    return ok;
}
