/* vm_ew.c - the elementwise driver: runs a vkernel over the broadcast of its inputs into
 * an output of any strides.
 *
 * The iteration space (the output's shape) is simplified first: extents of 1 go, and
 * neighbouring axes merge when every operand's strides allow it. When one axis remains
 * and every operand is contiguous or broadcast along it, the kernel runs on the whole
 * range (the common case). Otherwise rows are walked in C order and cut into blocks of
 * BLK elements; an operand with another stride along the row (negative, transposed,
 * sliced) is gathered into a contiguous block on the stack first, and the output
 * scattered from one. Work large enough (elements times the op's cost) is split over the
 * pool by ranges of the flat C-order index, aligned to 64 elements.
 *
 * Invariants: every output element is written exactly once; the result of an element
 * does not depend on the split or the blocking (vkernels.h).
 */
#include "vm.h"

#define BLK         256   /* elements per gathered block */
#define SPLIT_WORK  32768 /* elements x cost above which the pool is used */
#define SPLIT_ALIGN 64    /* thread ranges start at multiples of this */

typedef struct ew_job {
    tg_vk_fn fn;
    const tg_vk_args *a;
    int nin;
    int nd; /* axes after simplification (>= 1) */
    int64_t shape[TG_MAX_DIMS];
    int64_t ostr[TG_MAX_DIMS];              /* output strides, elements */
    int64_t istr[TG_VK_MAXIN][TG_MAX_DIMS]; /* input strides (0: broadcast) */
    char *y;                                /* element [0,...,0] of the output */
    const char *x[TG_VK_MAXIN];             /* and of each input */
    int64_t osz, isz[TG_VK_MAXIN];          /* element sizes, bytes */
    int64_t n;                              /* elements */
    bool flat;                              /* one axis, strides 1 / 0 */
} ew_job;

void tg_vm_gather(void *dst, const char *src, int64_t s, int64_t n, int64_t es) {
    if (s == 1) {
        memcpy(dst, src, (size_t)(n * es));
        return;
    }
    if (s == 0) { /* a fill, in loops the compiler vectorizes */
        switch (es) {
        case 8: {
            uint64_t v, *d = dst;
            memcpy(&v, src, 8);
            for (int64_t i = 0; i < n; i++) d[i] = v;
            return;
        }
        case 4: {
            uint32_t v, *d = dst;
            memcpy(&v, src, 4);
            for (int64_t i = 0; i < n; i++) d[i] = v;
            return;
        }
        case 2: {
            uint16_t v, *d = dst;
            memcpy(&v, src, 2);
            for (int64_t i = 0; i < n; i++) d[i] = v;
            return;
        }
        default:
            memset(dst, *src, (size_t)n);
            return;
        }
    }
    switch (es) {
    case 8: {
        uint64_t *d = dst;
        for (int64_t i = 0; i < n; i++) memcpy(&d[i], src + i * s * 8, 8);
        break;
    }
    case 4: {
        uint32_t *d = dst;
        for (int64_t i = 0; i < n; i++) memcpy(&d[i], src + i * s * 4, 4);
        break;
    }
    case 2: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) memcpy(&d[i], src + i * s * 2, 2);
        break;
    }
    default: {
        unsigned char *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = (unsigned char)src[i * s];
        break;
    }
    }
}

static void scatter(char *dst, int64_t s, const void *src, int64_t n, int64_t es) {
    switch (es) {
    case 8: {
        const uint64_t *p = src;
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * s * 8, &p[i], 8);
        break;
    }
    case 4: {
        const uint32_t *p = src;
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * s * 4, &p[i], 4);
        break;
    }
    case 2: {
        const uint16_t *p = src;
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * s * 2, &p[i], 2);
        break;
    }
    default: {
        const unsigned char *p = src;
        for (int64_t i = 0; i < n; i++) dst[i * s] = (char)p[i];
        break;
    }
    }
}

/* One row segment of len elements starting at y / x[k] (inner strides from the job). */
static void run_row(const ew_job *J, char *y, const char *const *x, int64_t len) {
    int nd = J->nd;
    int64_t os = J->ostr[nd - 1], s[TG_VK_MAXIN];
    bool direct = os == 1;
    for (int k = 0; k < J->nin; k++) {
        s[k] = J->istr[k][nd - 1];
        direct = direct && (s[k] == 0 || s[k] == 1);
    }
    if (direct) {
        J->fn(J->a, len, y, (const void *const *)x, s);
        return;
    }
    _Alignas(64) unsigned char ib[TG_VK_MAXIN][BLK * 8], ob[BLK * 8];
    for (int64_t i = 0; i < len; i += BLK) {
        int64_t m = len - i < BLK ? len - i : BLK, ks[TG_VK_MAXIN];
        const void *xp[TG_VK_MAXIN];
        for (int k = 0; k < J->nin; k++) {
            const char *base = x[k] + i * s[k] * J->isz[k];
            if (s[k] == 0 || s[k] == 1) {
                xp[k] = base;
                ks[k] = s[k];
            } else {
                tg_vm_gather(ib[k], base, s[k], m, J->isz[k]);
                xp[k] = ib[k];
                ks[k] = 1;
            }
        }
        char *yb = y + i * os * J->osz;
        if (os == 1) {
            J->fn(J->a, m, yb, xp, ks);
        } else {
            J->fn(J->a, m, ob, xp, ks);
            scatter(yb, os, ob, m, J->osz);
        }
    }
}

/* Elements [lo, hi) of the flat C-order index. */
static void run_range(const ew_job *J, int64_t lo, int64_t hi) {
    if (lo >= hi) return;
    int nd = J->nd;
    if (J->flat) {
        const char *x[TG_VK_MAXIN];
        int64_t s[TG_VK_MAXIN];
        for (int k = 0; k < J->nin; k++) {
            s[k] = J->istr[k][0];
            x[k] = J->x[k] + lo * s[k] * J->isz[k];
        }
        J->fn(J->a, hi - lo, J->y + lo * J->osz, (const void *const *)x, s);
        return;
    }
    int64_t inner = J->shape[nd - 1], idx[TG_MAX_DIMS];
    int64_t row = lo / inner, col = lo % inner;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = row % J->shape[d];
        row /= J->shape[d];
    }
    idx[nd - 1] = col;
    while (lo < hi) {
        int64_t len = inner - idx[nd - 1] < hi - lo ? inner - idx[nd - 1] : hi - lo;
        int64_t oo = 0, io[TG_VK_MAXIN] = {0};
        for (int d = 0; d < nd; d++) {
            oo += idx[d] * J->ostr[d];
            for (int k = 0; k < J->nin; k++) io[k] += idx[d] * J->istr[k][d];
        }
        const char *x[TG_VK_MAXIN];
        for (int k = 0; k < J->nin; k++) x[k] = J->x[k] + io[k] * J->isz[k];
        run_row(J, J->y + oo * J->osz, x, len);
        lo += len;
        idx[nd - 1] = 0;
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < J->shape[d]) break;
            idx[d] = 0;
        }
    }
}

static void ew_task(void *arg, int ith, int nth) {
    const ew_job *J = arg;
    int64_t lo, hi;
    tg_pool_share(J->n, ith, nth, SPLIT_ALIGN, &lo, &hi);
    run_range(J, lo, hi);
}

/* Fills the job from the tensors; false when the output is empty. */
static bool ew_setup(ew_job *J, tg_tensor *out, tg_tensor *const *in, int nin) {
    int nd = out->ndim;
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= out->shape[d];
    J->n = n;
    if (n == 0) return false;
    J->nin = nin;
    J->y = tg_tensor_data(out);
    J->osz = (int64_t)tg_dtype_size(out->dtype);
    int m = 0; /* kept axes */
    for (int d = 0; d < nd; d++) {
        if (out->shape[d] == 1) continue;
        J->shape[m] = out->shape[d];
        J->ostr[m] = out->strides[d];
        for (int k = 0; k < nin; k++) {
            const tg_tensor *t = in[k];
            int a = d - (nd - t->ndim);
            J->istr[k][m] = a >= 0 && t->shape[a] != 1 ? t->strides[a] : 0;
        }
        /* merge with the previous axis when every operand allows it */
        bool merge = m > 0 && J->ostr[m - 1] == J->ostr[m] * J->shape[m];
        for (int k = 0; k < nin && merge; k++)
            merge = J->istr[k][m - 1] == J->istr[k][m] * J->shape[m];
        if (merge) {
            J->shape[m - 1] *= J->shape[m];
            J->ostr[m - 1] = J->ostr[m];
            for (int k = 0; k < nin; k++) J->istr[k][m - 1] = J->istr[k][m];
        } else {
            m++;
        }
    }
    if (m == 0) { /* one element */
        J->shape[0] = 1;
        J->ostr[0] = 1;
        for (int k = 0; k < nin; k++) J->istr[k][0] = 0;
        m = 1;
    }
    J->nd = m;
    for (int k = 0; k < nin; k++) {
        J->x[k] = tg_tensor_data(in[k]);
        J->isz[k] = (int64_t)tg_dtype_size(in[k]->dtype);
    }
    J->flat = m == 1 && J->ostr[0] == 1;
    for (int k = 0; k < nin && J->flat; k++) J->flat = J->istr[k][0] == 0 || J->istr[k][0] == 1;
    return true;
}

bool tg_vm_ew_splits(int64_t n, int cost, int nthreads) {
    return nthreads > 1 && n * (cost > 0 ? cost : 1) >= SPLIT_WORK;
}

tg_status tg_vm_ew_run(tg_pool *pool, tg_vk_fn fn, const tg_vk_args *a, int cost, tg_tensor *out,
                       tg_tensor *const *in, int nin) {
    ew_job J;
    if (nin > TG_VK_MAXIN) return TG_EUNSUPPORTED;
    J.fn = fn;
    J.a = a;
    if (!ew_setup(&J, out, in, nin)) return TG_OK;
    int64_t work = J.n * (cost > 0 ? cost : 1);
    int nth = pool ? tg_pool_size(pool) : 1;
    if (tg_vm_ew_splits(J.n, cost, nth)) {
        int64_t want = work / (SPLIT_WORK / 2);
        tg_pool_run_n(pool, want < nth ? (int)want : nth, ew_task, &J);
    } else {
        run_range(&J, 0, J.n);
    }
    return TG_OK;
}

tg_status tg_vm_exec_ew(vm_exec *e) {
    const vm_ins_info *info = e->info;
    /* alloc: its value broadcast to the output (the other inputs are the extents) */
    int nin = e->node->op == TG_OP_ALLOC ? 1 : e->node->nin;
    return tg_vm_ew_run(e->pool, info->vk, &info->vargs, info->cost, e->out[0], e->in, nin);
}
