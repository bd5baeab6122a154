/* vkernels.c - choosing the VM's elementwise kernels (vkernels.h), and the kernels that
 * do not depend on the instruction set: comparisons and predicates with a bool result,
 * where, cast, and the fallbacks that run an elementwise record's own scalar functions
 * (ew.f in double, ew.i in int64, exactly as the reference kernel does) for any dtype.
 *
 * Invariants: the choice of a table depends only on this build and the CPU (read-only
 * state); every kernel here gives bit-identical results to the reference kernel.
 */
#include "vkernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- tables ---- */

static bool cpu_has(tg_vk_isa isa) {
#if defined(__x86_64__) || defined(__i386__)
    switch (isa) {
    case TG_VK_GENERIC:
        return true;
    case TG_VK_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TG_VK_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default:
        return false;
    }
#else
    return isa == TG_VK_GENERIC;
#endif
}

const tg_vk_table *tg_vk_table_get(tg_vk_isa isa) {
    if (!cpu_has(isa)) return NULL;
    switch (isa) {
    case TG_VK_GENERIC:
        return &tg_vk_table_generic;
#if defined(TG_HAVE_VK_AVX2)
    case TG_VK_AVX2:
        return &tg_vk_table_avx2;
#endif
#if defined(TG_HAVE_VK_AVX512)
    case TG_VK_AVX512:
        return &tg_vk_table_avx512;
#endif
    default:
        return NULL;
    }
}

tg_vk_isa tg_vk_isa_best(void) {
    tg_vk_isa cap = TG_VK_ISA_COUNT;
    const char *env = getenv("TGRAPH_ISA");
    if (env && *env) {
        for (int i = 0; i < TG_VK_ISA_COUNT; i++) {
            static const char *const names[] = {"generic", "avx2", "avx512"};
            if (strcmp(env, names[i]) == 0) cap = (tg_vk_isa)(i + 1);
        }
    }
    for (int i = (int)cap - 1; i > 0; i--)
        if (tg_vk_table_get((tg_vk_isa)i)) return (tg_vk_isa)i;
    return TG_VK_GENERIC;
}

bool tg_vk_have_sleef(void) {
#if defined(TG_HAVE_SLEEF)
    return true;
#else
    return false;
#endif
}

/* ---- comparisons and predicates of floats (bool result) ---- */

#define VK_CMP_OPS(X)                                                                              \
    X(LT, lt, <) X(LE, le, <=) X(GT, gt, >) X(GE, ge, >=) X(EQ, eq, ==) X(NE, ne, !=)

#define VK_X_CMP(U, l, opr)                                                                        \
    static void kd_##l(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,             \
                       const int64_t *s) {                                                         \
        (void)a;                                                                                   \
        const double *p = x[0], *q = x[1];                                                         \
        unsigned char *y = yp;                                                                     \
        for (int64_t i = 0; i < n; i++) y[i] = p[i * s[0]] opr q[i * s[1]];                        \
    }                                                                                              \
    static void kf_##l(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,             \
                       const int64_t *s) {                                                         \
        (void)a;                                                                                   \
        const float *p = x[0], *q = x[1];                                                          \
        unsigned char *y = yp;                                                                     \
        for (int64_t i = 0; i < n; i++) y[i] = p[i * s[0]] opr q[i * s[1]];                        \
    }
VK_CMP_OPS(VK_X_CMP)

static void kd_isnan(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,
                     const int64_t *s) {
    (void)a;
    const double *p = x[0];
    unsigned char *y = yp;
    for (int64_t i = 0; i < n; i++) y[i] = isnan(p[i * s[0]]) != 0;
}
static void kf_isnan(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,
                     const int64_t *s) {
    (void)a;
    const float *p = x[0];
    unsigned char *y = yp;
    for (int64_t i = 0; i < n; i++) y[i] = isnan(p[i * s[0]]) != 0;
}
static void kd_isinf(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,
                     const int64_t *s) {
    (void)a;
    const double *p = x[0];
    unsigned char *y = yp;
    for (int64_t i = 0; i < n; i++) y[i] = isinf(p[i * s[0]]) != 0;
}
static void kf_isinf(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,
                     const int64_t *s) {
    (void)a;
    const float *p = x[0];
    unsigned char *y = yp;
    for (int64_t i = 0; i < n; i++) y[i] = isinf(p[i * s[0]]) != 0;
}

#define VK_X_CMP_SLOT(U, l, opr) [TG_OP_##U] = {kf_##l, kd_##l},
/* clang-format off */
static const tg_vk_fn cmp_table[TG_OP_COUNT][2] = {
    VK_CMP_OPS(VK_X_CMP_SLOT)
    [TG_OP_ISNAN] = {kf_isnan, kd_isnan},
    [TG_OP_ISINF] = {kf_isinf, kd_isinf},
};
/* clang-format on */

/* ---- where: a bitwise select of elements of any size (a bool byte is true when != 0) ---- */

static void k_where(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,
                    const int64_t *s) {
    const unsigned char *c = x[0];
    size_t es = tg_dtype_size(a->odt);
    switch (es) {
    case 8: {
        const uint64_t *p = x[1], *q = x[2];
        uint64_t *y = yp;
        for (int64_t i = 0; i < n; i++) y[i] = c[i * s[0]] ? p[i * s[1]] : q[i * s[2]];
        break;
    }
    case 4: {
        const uint32_t *p = x[1], *q = x[2];
        uint32_t *y = yp;
        for (int64_t i = 0; i < n; i++) y[i] = c[i * s[0]] ? p[i * s[1]] : q[i * s[2]];
        break;
    }
    case 2: {
        const uint16_t *p = x[1], *q = x[2];
        uint16_t *y = yp;
        for (int64_t i = 0; i < n; i++) y[i] = c[i * s[0]] ? p[i * s[1]] : q[i * s[2]];
        break;
    }
    default: {
        const unsigned char *p = x[1], *q = x[2];
        unsigned char *y = yp;
        bool b = a->odt == TG_DT_BOOL; /* a stray non-0/1 bool byte is stored as 1 */
        for (int64_t i = 0; i < n; i++) {
            unsigned char v = c[i * s[0]] ? p[i * s[1]] : q[i * s[2]];
            y[i] = b ? v != 0 : v;
        }
        break;
    }
    }
}

/* ---- cast: typed loops for the common conversions, the load/store rules otherwise ---- */

static void k_cast(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,
                   const int64_t *s) {
    tg_dtype xd = a->idt[0], yd = a->odt;
    int64_t sx = s[0];
    if (xd == TG_DT_F64 && yd == TG_DT_F32) {
        const double *p = x[0];
        float *y = yp;
        for (int64_t i = 0; i < n; i++) y[i] = (float)p[i * sx];
        return;
    }
    if (xd == TG_DT_F32 && yd == TG_DT_F64) {
        const float *p = x[0];
        double *y = yp;
        for (int64_t i = 0; i < n; i++) y[i] = p[i * sx];
        return;
    }
    if (xd == TG_DT_I64 && yd == TG_DT_F64) {
        const int64_t *p = x[0];
        double *y = yp;
        for (int64_t i = 0; i < n; i++) y[i] = (double)p[i * sx];
        return;
    }
    if (xd == TG_DT_I32 && yd == TG_DT_F64) {
        const int32_t *p = x[0];
        double *y = yp;
        for (int64_t i = 0; i < n; i++) y[i] = p[i * sx];
        return;
    }
    if (xd == TG_DT_I32 && yd == TG_DT_F32) {
        const int32_t *p = x[0];
        float *y = yp;
        for (int64_t i = 0; i < n; i++) y[i] = (float)p[i * sx];
        return;
    }
    /* the general rules of cast_ref (elemwise.c) */
    const char *p = x[0];
    char *y = yp;
    size_t xs = tg_dtype_size(xd), ys = tg_dtype_size(yd);
    bool xf = tg_dtype_is_float(xd), yf = tg_dtype_is_float(yd);
    for (int64_t i = 0; i < n; i++) {
        const char *px = p + i * sx * (int64_t)xs;
        char *py = y + i * (int64_t)ys;
        if (xf) {
            tg_store_f64(py, yd, tg_load_f64(px, xd));
        } else if (yf) {
            int64_t v = tg_load_i64(px, xd);
            tg_store_f64(py, yd, yd == TG_DT_F32 ? (double)(float)v : (double)v);
        } else {
            tg_store_i64(py, yd, tg_load_i64(px, xd));
        }
    }
}

/* ---- the records' scalar functions, for every dtype ---- */

static void k_scalar_f(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,
                       const int64_t *s) {
    double v[TG_VK_MAXIN];
    size_t ys = tg_dtype_size(a->odt), xs[TG_VK_MAXIN];
    for (int k = 0; k < a->nin; k++) xs[k] = tg_dtype_size(a->idt[k]);
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < a->nin; k++)
            v[k] = tg_load_f64((const char *)x[k] + i * s[k] * (int64_t)xs[k], a->idt[k]);
        tg_store_f64((char *)yp + i * (int64_t)ys, a->odt, a->op->ew.f(v));
    }
}

static void k_scalar_i(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,
                       const int64_t *s) {
    int64_t v[TG_VK_MAXIN];
    size_t ys = tg_dtype_size(a->odt), xs[TG_VK_MAXIN];
    for (int k = 0; k < a->nin; k++) xs[k] = tg_dtype_size(a->idt[k]);
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < a->nin; k++)
            v[k] = tg_load_i64((const char *)x[k] + i * s[k] * (int64_t)xs[k], a->idt[k]);
        tg_store_i64((char *)yp + i * (int64_t)ys, a->odt, a->op->ew.i(v, a->cdt));
    }
}

/* ---- selection ---- */

static int op_index(const tg_op_def *op) {
    for (int i = 0; i < TG_OP_COUNT; i++)
        if (tg_op_table[i] == op) return i;
    return -1;
}

tg_vk_fn tg_vk_select(const tg_op_def *op, int nin, const tg_dtype *idt, tg_dtype odt,
                      tg_vk_isa isa, tg_vk_args *a) {
    memset(a, 0, sizeof *a);
    if (!op || nin < 1 || nin > TG_VK_MAXIN || op->kind != TG_KIND_ELEMWISE) return NULL;
    a->op = op;
    a->nin = nin;
    a->odt = odt;
    a->cdt = odt;
    for (int k = 0; k < nin; k++) a->idt[k] = idt[k];
    int idx = op_index(op);
    if (idx < 0) return NULL;
    if (op == &tg_op_cast) return nin == 1 ? k_cast : NULL;
    if (op == &tg_op_where) {
        bool ok = nin == 3 && idt[0] == TG_DT_BOOL && idt[1] == odt && idt[2] == odt;
        return ok ? k_where : NULL;
    }
    for (int k = 1; k < nin; k++)
        if (idt[k] != idt[0]) return NULL;
    if (op->ew.flags & TG_EW_CMP) {
        if (odt != TG_DT_BOOL) return NULL;
        a->cdt = idt[0];
    } else if (idt[0] != odt) {
        return NULL;
    }
    tg_dtype cdt = a->cdt;
    bool fl = cdt == TG_DT_F32 || cdt == TG_DT_F64;
    /* a record whose reference kernel checks more than tg_ew_ref (pow: negative integer
     * exponents are errors) keeps its reference kernel where no float math is involved */
    if (op->ref != tg_ew_ref && !fl) return NULL;
    if (fl) {
        int d = cdt == TG_DT_F64;
        if (cmp_table[idx][d]) return cmp_table[idx][d];
        const tg_vk_table *t = tg_vk_table_get(isa);
        if (!t) t = &tg_vk_table_generic;
        if (t->f[idx][d]) return t->f[idx][d];
        return op->ew.f ? k_scalar_f : NULL;
    }
    return op->ew.i ? k_scalar_i : NULL;
}

int tg_vk_cost(const tg_op_def *op) {
    if (op == &tg_op_pow || (op->ew.flags & TG_EW_TOFLOAT && op != &tg_op_div)) return 16;
    return 1;
}
