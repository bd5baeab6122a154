/* vkernels.c - choosing the VM's elementwise kernels (vkernels.h), and the kernels that
 * need no vectorizing: the general cast (the load/store rules, for the pairs without a
 * typed kernel in vk_neutral.h) and the fallbacks that run an elementwise record's own
 * scalar functions (ew.f in double, ew.i in int64, exactly as the reference kernel does)
 * for any dtype.
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

const tg_vk_ntable *tg_vk_ntable_get(tg_vk_isa isa) {
    if (!tg_vk_table_get(isa)) return NULL;
    switch (isa) {
    case TG_VK_GENERIC:
        return &tg_vk_ntable_generic;
#if defined(TG_HAVE_VK_AVX2)
    case TG_VK_AVX2:
        return &tg_vk_ntable_avx2;
#endif
#if defined(TG_HAVE_VK_AVX512)
    case TG_VK_AVX512:
        return &tg_vk_ntable_avx512;
#endif
    default:
        return NULL;
    }
}

bool tg_vk_have_sleef(void) {
#if defined(TG_HAVE_SLEEF)
    return true;
#else
    return false;
#endif
}

/* ---- cast: the general rules (typed casts to floats are in vk_neutral.h) ---- */

/* The general rules of cast_ref (elemwise.c), element by element. */
static void k_cast(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,
                   const int64_t *s) {
    tg_dtype xd = a->idt[0], yd = a->odt;
    int64_t sx = s[0];
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
    const tg_vk_ntable *nt = tg_vk_ntable_get(isa);
    if (!nt) nt = &tg_vk_ntable_generic;
    if (op == &tg_op_cast) {
        if (nin != 1) return NULL;
        return nt->cast[idt[0]][odt] ? nt->cast[idt[0]][odt] : k_cast;
    }
    if (op == &tg_op_where) {
        if (nin != 3 || idt[0] != TG_DT_BOOL || idt[1] != odt || idt[2] != odt) return NULL;
        size_t es = tg_dtype_size(odt);
        return nt->where[es == 8 ? 3 : es == 4 ? 2 : es == 2 ? 1 : 0];
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
    if (nt->cmp[idx][cdt] && (op->ew.flags & TG_EW_CMP) && (fl || op->ref == tg_ew_ref))
        return nt->cmp[idx][cdt];
    /* a record whose reference kernel checks more than tg_ew_ref (pow: negative integer
     * exponents are errors) keeps its reference kernel where no float math is involved */
    if (op->ref != tg_ew_ref && !fl) return NULL;
    if (fl) {
        int d = cdt == TG_DT_F64;
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
