/* tensor.c - refcounted buffers and strided tensor views.
 *
 * Owns: tg_buffer_new/ref/unref, tg_tensor_new/empty/from_data/view/dup/free, the tensor
 * accessors of tgraph.h, tg_shape_size, tg_contiguous_strides, tg_tensor_copy_into and
 * tg_tensor_get_f64.
 * Invariants:
 *  - A buffer made here is one allocation from its ctx: the tg_buffer header, padding,
 *    then `nbytes` of data aligned to 64 bytes; alloc_size records the block size for the
 *    free. (Device buffers and borrowed DLPack memory have a `release` of their own.)
 *  - A tensor holds exactly one buffer reference. Every element a tensor can address
 *    (offset + sum (i_k * stride_k) for 0 <= i_k < shape_k) lies inside its buffer, and its
 *    offset lies in [0, buffer elements] even when the tensor is empty: tg_tensor_view
 *    checks this, so tg_tensor_at never leaves the buffer.
 *  - Element counts fit int64_t with room for 8-byte elements (tg_shape_size), so byte
 *    offsets never overflow. Zero-size tensors (an extent of 0) are valid everywhere.
 */
#include "core.h"

#include <math.h>
#include <stdint.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define TG_BUFFER_ALIGN 64
#define TG_BUFFER_HUGE  ((size_t)4 << 20) /* buffers from this size ask for huge pages */
#define TG_HUGE_PAGE    ((uintptr_t)2 << 20)

/* ---- buffers ---- */

tg_buffer *tg_buffer_new(tg_ctx *ctx, size_t nbytes) {
    if (!ctx) ctx = tg_ctx_default();
    size_t n;
    if (!tg_size_add(sizeof(tg_buffer) + (TG_BUFFER_ALIGN - 1), nbytes, &n)) {
        tg_set_error(TG_ENOMEM, "out of memory: a buffer of %zu bytes is too large", nbytes);
        return NULL;
    }
    tg_buffer *b = tg_mem_alloc(ctx, n);
    if (!b) return NULL;
    uintptr_t start = (uintptr_t)(b + 1);
    size_t pad = (TG_BUFFER_ALIGN - start % TG_BUFFER_ALIGN) % TG_BUFFER_ALIGN;
    atomic_init(&b->refs, 1);
    b->ctx = ctx;
    b->data = (char *)(b + 1) + pad;
    b->nbytes = nbytes;
    b->alloc_size = n;
    b->device = NULL;
    b->release = NULL;
#ifdef MADV_HUGEPAGE
    /* large buffers ask for transparent huge pages (as NumPy does from 4 MiB): streaming
     * over them then takes few TLB misses, which are dear under virtualisation */
    if (nbytes >= TG_BUFFER_HUGE) {
        uintptr_t lo = ((uintptr_t)b->data + TG_HUGE_PAGE - 1) & ~(TG_HUGE_PAGE - 1);
        uintptr_t hi = ((uintptr_t)b->data + nbytes) & ~(TG_HUGE_PAGE - 1);
        if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
#endif
    if (nbytes) memset(b->data, 0, nbytes);
    return b;
}

void tg_buffer_ref(tg_buffer *b) {
    if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

void tg_buffer_unref(tg_buffer *b) {
    if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
    if (b->release)
        b->release(b); /* device memory: its device frees it */
    else
        tg_mem_free(b->ctx, b, b->alloc_size);
}

/* ---- shapes ---- */

bool tg_shape_size(int ndim, const int64_t *shape, int64_t *out) {
    /* Largest count whose byte size (8-byte elements) still fits int64_t. Like NumPy, the
     * non-zero extents must respect it even when another extent is 0, so that strides
     * (products of extents) never overflow either. */
    const int64_t limit = INT64_MAX / 8;
    int64_t n = 1;
    bool empty = false;
    if (ndim < 0 || ndim > TG_MAX_DIMS) return false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return false;
        if (shape[i] == 0) {
            empty = true;
            continue;
        }
        if (shape[i] > limit / n) return false;
        n *= shape[i];
    }
    *out = empty ? 0 : n;
    return true;
}

void tg_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 1 ? shape[i] : 1; /* like NumPy: a 0 extent does not zero strides */
    }
}

/* Validates dtype/rank/shape for a new tensor; sets the error naming `fn`. */
static tg_status check_new(const char *fn, tg_dtype dt, int ndim, const int64_t *shape,
                           int64_t *size) {
    if ((int)dt < 0 || (int)dt >= TG_DT_COUNT)
        return tg_set_error(TG_EINVAL, "%s: invalid dtype %d", fn, (int)dt);
    if (ndim < 0 || ndim > TG_MAX_DIMS)
        return tg_set_error(TG_EINVAL, "%s: rank %d is outside 0..%d", fn, ndim, TG_MAX_DIMS);
    if (ndim > 0 && !shape) return tg_set_error(TG_EINVAL, "%s: shape is NULL", fn);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return tg_set_error(TG_EINVAL, "%s: extent %lld of axis %d is negative", fn,
                                (long long)shape[i], i);
    if (!tg_shape_size(ndim, shape, size))
        return tg_set_error(TG_ELIMIT, "%s: a tensor of this shape would be too large", fn);
    return TG_OK;
}

static tg_tensor *tensor_alloc(const char *fn, tg_ctx *ctx, tg_dtype dt, int ndim,
                               const int64_t *shape) {
    int64_t size;
    if (!ctx) ctx = tg_ctx_default();
    if (check_new(fn, dt, ndim, shape, &size) != TG_OK) return NULL;
    tg_tensor *t = tg_mem_alloc(ctx, sizeof *t);
    if (!t) return NULL;
    t->buf = tg_buffer_new(ctx, (size_t)size * tg_dtype_infos[dt].size);
    if (!t->buf) {
        tg_mem_free(ctx, t, sizeof *t);
        return NULL;
    }
    t->dtype = dt;
    t->ndim = ndim;
    t->offset = 0;
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        t->shape[i] = i < ndim ? shape[i] : 0;
        t->strides[i] = 0;
    }
    tg_contiguous_strides(ndim, t->shape, t->strides);
    return t;
}

tg_tensor *tg_tensor_new(tg_ctx *ctx, tg_dtype dt, int ndim, const int64_t *shape) {
    return tensor_alloc("tg_tensor_new", ctx, dt, ndim, shape);
}

tg_tensor *tg_tensor_empty(tg_ctx *ctx, tg_dtype dt, int ndim, const int64_t *shape) {
    return tensor_alloc("tg_tensor_empty", ctx, dt, ndim, shape);
}

tg_tensor *tg_tensor_from_data(tg_ctx *ctx, tg_dtype dt, int ndim, const int64_t *shape,
                               const void *data) {
    tg_tensor *t = tensor_alloc("tg_tensor_from_data", ctx, dt, ndim, shape);
    if (!t) return NULL;
    size_t n = (size_t)tg_tensor_size(t) * tg_dtype_infos[dt].size;
    if (n && !data) {
        tg_tensor_free(t);
        tg_set_error(TG_EINVAL, "tg_tensor_from_data: data is NULL");
        return NULL;
    }
    if (n) memcpy(t->buf->data, data, n);
    return t;
}

/* a * b + c with overflow detection (int64). */
static bool madd_i64(int64_t a, int64_t b, int64_t c, int64_t *out) {
    int64_t p;
    if (__builtin_mul_overflow(a, b, &p)) return false;
    return !__builtin_add_overflow(p, c, out);
}

tg_tensor *tg_tensor_view(const tg_tensor *t, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset) {
    static const char fn[] = "tg_tensor_view";
    int64_t size, cstrides[TG_MAX_DIMS];
    if (!t) {
        tg_set_error(TG_EINVAL, "%s: tensor is NULL", fn);
        return NULL;
    }
    if (check_new(fn, t->dtype, ndim, shape, &size) != TG_OK) return NULL;
    if (!strides) {
        tg_contiguous_strides(ndim, shape, cstrides);
        strides = cstrides;
    }
    const int64_t nelem = (int64_t)(t->buf->nbytes / tg_dtype_infos[t->dtype].size);
    if (offset < 0 || offset > nelem) {
        tg_set_error(TG_EINDEX, "%s: offset %lld is outside the buffer of %lld elements", fn,
                     (long long)offset, (long long)nelem);
        return NULL;
    }
    if (size > 0) {
        int64_t lo = offset, hi = offset;
        for (int i = 0; i < ndim; i++) {
            int64_t *end = strides[i] < 0 ? &lo : &hi;
            if (!madd_i64(shape[i] - 1, strides[i], *end, end)) {
                lo = -1;
                break;
            }
        }
        if (lo < 0 || hi >= nelem) {
            tg_set_error(TG_EINDEX,
                         "%s: the view reaches elements outside the buffer of %lld elements", fn,
                         (long long)nelem);
            return NULL;
        }
    }
    tg_ctx *ctx = t->buf->ctx;
    tg_tensor *v = tg_mem_alloc(ctx, sizeof *v);
    if (!v) return NULL;
    v->dtype = t->dtype;
    v->ndim = ndim;
    v->offset = offset;
    for (int i = 0; i < TG_MAX_DIMS; i++) {
        v->shape[i] = i < ndim ? shape[i] : 0;
        v->strides[i] = i < ndim ? strides[i] : 0;
    }
    v->buf = t->buf;
    tg_buffer_ref(v->buf);
    return v;
}

tg_tensor *tg_tensor_dup(const tg_tensor *t) {
    if (!t) {
        tg_set_error(TG_EINVAL, "tg_tensor_dup: tensor is NULL");
        return NULL;
    }
    tg_tensor *d = tensor_alloc("tg_tensor_dup", t->buf->ctx, t->dtype, t->ndim, t->shape);
    if (d) tg_tensor_copy_into(d, t);
    return d;
}

void tg_tensor_free(tg_tensor *t) {
    if (!t) return;
    tg_buffer *b = t->buf;
    tg_ctx *ctx = b->ctx;
    tg_mem_free(ctx, t, sizeof *t);
    tg_buffer_unref(b); /* may free ctx-owned memory, never ctx itself */
}

/* ---- accessors ---- */

/* A NULL tensor: the accessors set tg_last_error naming themselves and return NULL, -1,
 * TG_DT_COUNT, false or NaN (include/tgraph.h). */
static bool null_tensor(const tg_tensor *t, const char *fn) {
    if (!t) tg_set_error(TG_EINVAL, "%s: tensor is NULL", fn);
    return !t;
}

tg_dtype tg_tensor_dtype(const tg_tensor *t) {
    return null_tensor(t, "tg_tensor_dtype") ? TG_DT_COUNT : t->dtype;
}
int tg_tensor_ndim(const tg_tensor *t) { return null_tensor(t, "tg_tensor_ndim") ? -1 : t->ndim; }
const int64_t *tg_tensor_shape(const tg_tensor *t) {
    return null_tensor(t, "tg_tensor_shape") ? NULL : t->shape;
}
const int64_t *tg_tensor_strides(const tg_tensor *t) {
    return null_tensor(t, "tg_tensor_strides") ? NULL : t->strides;
}
int64_t tg_tensor_offset(const tg_tensor *t) {
    return null_tensor(t, "tg_tensor_offset") ? -1 : t->offset;
}
tg_ctx *tg_tensor_ctx(const tg_tensor *t) {
    return null_tensor(t, "tg_tensor_ctx") ? NULL : t->buf->ctx;
}

int64_t tg_tensor_size(const tg_tensor *t) {
    if (null_tensor(t, "tg_tensor_size")) return -1;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i]; /* validated: cannot overflow */
    return n;
}

void *tg_tensor_data(const tg_tensor *t) {
    if (null_tensor(t, "tg_tensor_data")) return NULL;
    return (char *)t->buf->data + t->offset * (int64_t)tg_dtype_infos[t->dtype].size;
}

bool tg_tensor_is_contiguous(const tg_tensor *t) {
    if (null_tensor(t, "tg_tensor_is_contiguous")) return false;
    int64_t expect = 1;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] == 0) return true;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

/* ---- copies ---- */

enum copy_mode { COPY_SAME, VIA_F64, VIA_I64 }; /* how copy_into converts one element */

void tg_tensor_copy_into(tg_tensor *dst, const tg_tensor *src) {
    TG_ASSERT(dst && src && dst->ndim == src->ndim);
    for (int i = 0; i < dst->ndim; i++) TG_ASSERT(dst->shape[i] == src->shape[i]);
    const int64_t n = tg_tensor_size(src);
    if (n == 0) return;
    const tg_dtype sdt = src->dtype, ddt = dst->dtype;
    const size_t ssz = tg_dtype_infos[sdt].size, dsz = tg_dtype_infos[ddt].size;
    if (sdt == ddt && tg_tensor_is_contiguous(src) && tg_tensor_is_contiguous(dst)) {
        memmove(tg_tensor_data(dst), tg_tensor_data(src), (size_t)n * ssz);
        return;
    }
    enum copy_mode mode = sdt == ddt ? COPY_SAME : tg_dtype_is_float(sdt) ? VIA_F64 : VIA_I64;
    const int nd = src->ndim;
    const int64_t inner = nd ? src->shape[nd - 1] : 1;
    const int64_t sstep = nd ? src->strides[nd - 1] * (int64_t)ssz : 0;
    const int64_t dstep = nd ? dst->strides[nd - 1] * (int64_t)dsz : 0;
    int64_t idx[TG_MAX_DIMS] = {0};
    do {
        const char *s = tg_tensor_at(src, idx);
        char *d = tg_tensor_at(dst, idx);
        for (int64_t i = 0; i < inner; i++) {
            switch (mode) {
            case COPY_SAME:
                memcpy(d, s, ssz);
                break;
            case VIA_F64:
                tg_store_f64(d, ddt, tg_load_f64(s, sdt));
                break;
            case VIA_I64:
                tg_store_i64(d, ddt, tg_load_i64(s, sdt));
                break;
            }
            if (i + 1 < inner) { /* never step past the last element */
                s += sstep;
                d += dstep;
            }
        }
    } while (nd > 1 && tg_index_next(nd - 1, src->shape, idx));
}

double tg_tensor_get_f64(const tg_tensor *t, int64_t flat) {
    if (null_tensor(t, "tg_tensor_get_f64")) return NAN;
    const int64_t n = tg_tensor_size(t);
    if (flat < 0 || flat >= n) {
        tg_set_error(TG_EINDEX, "tg_tensor_get_f64: index %lld is outside 0..%lld", (long long)flat,
                     (long long)n - 1);
        return NAN;
    }
    int64_t idx[TG_MAX_DIMS];
    for (int i = t->ndim - 1; i >= 0; i--) {
        idx[i] = flat % t->shape[i];
        flat /= t->shape[i];
    }
    return tg_load_f64(tg_tensor_at(t, idx), t->dtype);
}
