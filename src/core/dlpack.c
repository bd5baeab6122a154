/* dlpack.c - exchange of tensors with other libraries through DLPack (dlpack.h): borrowing
 * a producer's memory as a tensor, and lending a tensor's memory to a consumer, both
 * without a copy.
 *
 * Invariants:
 *  - A borrowed buffer is a tg_buffer whose data is the producer's memory and whose
 *    `release` calls the producer's deleter, once, when the last tensor over it is freed;
 *    its `device` is NULL (host memory), so nothing takes it for device memory.
 *  - Its [data, data + nbytes) is exactly the span the DLPack tensor's elements cover
 *    (negative strides included): the tensor's offset places element [0,...,0] inside it,
 *    so tgraph's rule that a view never leaves its buffer holds for borrowed memory too.
 *  - A lent tensor holds one reference to the tensor's buffer until its deleter runs.
 */
#include "core.h"

#include "dlpack.h"

#include <stdint.h>
#include <stdlib.h>

/* ---- borrowing ---- */

typedef struct borrowed {
    tg_buffer buf; /* first: release gets the buffer */
    DLManagedTensor *m;
} borrowed;

static void release_borrowed(tg_buffer *b) {
    borrowed *o = (borrowed *)b;
    if (o->m->deleter) o->m->deleter(o->m);
    tg_mem_free(b->ctx, o, sizeof *o);
}

static bool dtype_from_dl(DLDataType t, tg_dtype *out) {
    static const struct {
        uint8_t code, bits;
        tg_dtype dt;
    } map[] = {
        {TG_DL_BOOL, 8, TG_DT_BOOL},  {TG_DL_INT, 8, TG_DT_I8},     {TG_DL_INT, 16, TG_DT_I16},
        {TG_DL_INT, 32, TG_DT_I32},   {TG_DL_INT, 64, TG_DT_I64},   {TG_DL_UINT, 8, TG_DT_U8},
        {TG_DL_FLOAT, 32, TG_DT_F32}, {TG_DL_FLOAT, 64, TG_DT_F64},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].code == t.code && map[i].bits == t.bits) {
            *out = map[i].dt;
            return true;
        }
    return false;
}

static const char *dl_code_name(uint8_t code) {
    switch (code) {
    case TG_DL_INT:
        return "int";
    case TG_DL_UINT:
        return "uint";
    case TG_DL_FLOAT:
        return "float";
    case TG_DL_BFLOAT:
        return "bfloat";
    case TG_DL_COMPLEX:
        return "complex";
    case TG_DL_BOOL:
        return "bool";
    default:
        return "unknown";
    }
}

tg_tensor *tg_tensor_from_dlpack(tg_ctx *ctx, struct DLManagedTensor *m) {
    static const char fn[] = "tg_tensor_from_dlpack";
    if (!m) {
        tg_set_error(TG_EINVAL, "%s: the managed tensor is NULL", fn);
        return NULL;
    }
    const DLTensor *d = &m->dl_tensor;
    tg_dtype dt;
    if (d->device.device_type != TG_DL_CPU && d->device.device_type != TG_DL_CUDA_HOST) {
        tg_set_error(TG_EUNSUPPORTED,
                     "%s: memory of DLPack device type %d cannot be borrowed: only host memory "
                     "(type %d) can; copy it to the host first",
                     fn, (int)d->device.device_type, TG_DL_CPU);
        return NULL;
    }
    if (d->dtype.lanes != 1 || !dtype_from_dl(d->dtype, &dt)) {
        tg_set_error(TG_EUNSUPPORTED,
                     "%s: DLPack dtype %s%u (lanes %u) has no tgraph dtype (bool, int8..int64, "
                     "uint8, float32, float64)",
                     fn, dl_code_name(d->dtype.code), (unsigned)d->dtype.bits,
                     (unsigned)d->dtype.lanes);
        return NULL;
    }
    if (d->ndim < 0 || d->ndim > TG_MAX_DIMS) {
        tg_set_error(TG_ELIMIT, "%s: rank %d is outside 0..%d", fn, (int)d->ndim, TG_MAX_DIMS);
        return NULL;
    }
    if (d->ndim > 0 && !d->shape) {
        tg_set_error(TG_EINVAL, "%s: the shape is NULL", fn);
        return NULL;
    }
    int ndim = d->ndim;
    int64_t size, strides[TG_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        if (d->shape[i] < 0) {
            tg_set_error(TG_EINVAL, "%s: extent %lld of axis %d is negative", fn,
                         (long long)d->shape[i], i);
            return NULL;
        }
    if (!tg_shape_size(ndim, d->shape, &size)) {
        tg_set_error(TG_ELIMIT, "%s: a tensor of this shape is too large for tgraph", fn);
        return NULL;
    }
    if (d->strides)
        memcpy(strides, d->strides, sizeof *strides * (size_t)ndim);
    else
        tg_contiguous_strides(ndim, d->shape, strides);
    size_t esz = tg_dtype_size(dt);
    char *first = (char *)d->data + d->byte_offset;
    if (size > 0 && (!d->data || (uintptr_t)first % esz != 0)) {
        tg_set_error(TG_EINVAL,
                     "%s: element [0,...,0] at %p is not aligned to its %zu-byte elements; "
                     "pass an aligned copy",
                     fn, (void *)first, esz);
        return NULL;
    }
    /* the span of elements, in elements relative to element [0,...,0]: [lo, hi] */
    int64_t lo = 0, hi = 0, bytes;
    for (int i = 0; size > 0 && i < ndim; i++) {
        int64_t reach;
        int64_t *end = strides[i] < 0 ? &lo : &hi;
        if (__builtin_mul_overflow(d->shape[i] - 1, strides[i], &reach) ||
            __builtin_add_overflow(*end, reach, end)) {
            tg_set_error(TG_ELIMIT, "%s: the strides reach beyond tgraph's limits", fn);
            return NULL;
        }
    }
    if (__builtin_sub_overflow(hi, lo, &bytes) || __builtin_add_overflow(bytes, 1, &bytes) ||
        __builtin_mul_overflow(bytes, (int64_t)esz, &bytes) || bytes > INT64_MAX / 2) {
        tg_set_error(TG_ELIMIT, "%s: the strides reach beyond tgraph's limits", fn);
        return NULL;
    }
    if (!ctx) ctx = tg_ctx_default();
    borrowed *o = tg_mem_alloc(ctx, sizeof *o);
    tg_tensor *t = o ? tg_mem_alloc(ctx, sizeof *t) : NULL;
    if (!t) {
        if (o) tg_mem_free(ctx, o, sizeof *o);
        return NULL;
    }
    atomic_init(&o->buf.refs, 1);
    o->buf.ctx = ctx;
    o->buf.data = size > 0 ? first + lo * (int64_t)esz : first;
    o->buf.nbytes = size > 0 ? (size_t)bytes : 0;
    o->buf.alloc_size = sizeof *o;
    o->buf.device = NULL;
    o->buf.release = release_borrowed;
    o->m = m;
    t->dtype = dt;
    t->ndim = ndim;
    t->offset = size > 0 ? -lo : 0;
    for (int i = 0; i < TG_MAX_DIMS; i++) { /* entries past ndim zero, as tg_tensor_new's */
        t->shape[i] = i < ndim ? d->shape[i] : 0;
        t->strides[i] = i < ndim ? strides[i] : 0;
    }
    t->buf = &o->buf;
    return t;
}

/* ---- lending ---- */

typedef struct lent {
    DLManagedTensor m; /* first: the deleter gets it */
    tg_buffer *buf;    /* the reference held */
    int64_t shape[TG_MAX_DIMS], strides[TG_MAX_DIMS];
} lent;

static void delete_lent(DLManagedTensor *m) {
    lent *l = (lent *)m;
    tg_buffer_unref(l->buf);
    free(l);
}

struct DLManagedTensor *tg_tensor_to_dlpack(const tg_tensor *t) {
    static const char fn[] = "tg_tensor_to_dlpack";
    if (!t) {
        tg_set_error(TG_EINVAL, "%s: tensor is NULL", fn);
        return NULL;
    }
    if (t->buf->device && t->buf->release) {
        tg_set_error(TG_EUNSUPPORTED,
                     "%s: the tensor lives on a device the host cannot read; transfer it to "
                     "the host first",
                     fn);
        return NULL;
    }
    /* the consumer frees it through the deleter, on any thread, after any context of ours
     * may be gone: plain malloc, not a context's allocator */
    lent *l = calloc(1, sizeof *l);
    if (!l) {
        tg_set_error(TG_ENOMEM, "%s: out of memory", fn);
        return NULL;
    }
    static const DLDataType codes[TG_DT_COUNT] = {
        [TG_DT_BOOL] = {TG_DL_BOOL, 8, 1},  [TG_DT_I8] = {TG_DL_INT, 8, 1},
        [TG_DT_I16] = {TG_DL_INT, 16, 1},   [TG_DT_I32] = {TG_DL_INT, 32, 1},
        [TG_DT_I64] = {TG_DL_INT, 64, 1},   [TG_DT_U8] = {TG_DL_UINT, 8, 1},
        [TG_DT_F32] = {TG_DL_FLOAT, 32, 1}, [TG_DT_F64] = {TG_DL_FLOAT, 64, 1},
    };
    for (int i = 0; i < t->ndim; i++) {
        l->shape[i] = t->shape[i];
        l->strides[i] = t->strides[i];
    }
    l->buf = t->buf;
    tg_buffer_ref(l->buf);
    l->m.dl_tensor = (DLTensor){
        .data = tg_tensor_data(t),
        .device = {TG_DL_CPU, 0},
        .ndim = t->ndim,
        .dtype = codes[t->dtype],
        .shape = l->shape,
        .strides = l->strides,
        .byte_offset = 0,
    };
    l->m.manager_ctx = l;
    l->m.deleter = delete_lent;
    return &l->m;
}
