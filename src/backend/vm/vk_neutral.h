/* vk_neutral.h - the kernels whose meaning does not depend on the instruction set but whose
 * speed does: comparisons and predicates with a bool result, where, and the typed casts
 * to a float. Included once per ISA by vk_generic.c, vk_avx2.c and vk_avx512.c (after
 * vk_template.h), each compiled with its own target flags, so the compiler vectorizes the
 * same C for each: the results are the same bits on every table, and the reference
 * kernel's (IEEE comparisons, a select, C's integer to float conversion).
 *
 * Before including, define VK_NTABLE, the name of the tg_vk_ntable to define.
 *
 * Every operand is contiguous (stride 1) or one broadcast value (stride 0), as vkernels.h
 * says; each kernel has one loop per combination, since a loop over i * s[k] does not
 * vectorize. The selects are branch-free (a mask made from the condition byte): a
 * condition without a pattern, such as relu's, costs no mispredicted branches.
 */
#include "vkernels.h"

#include <math.h>
#include <string.h>

/* ---- comparisons and predicates (bool result) ---- */

#define VKN_CMP_OPS(X)                                                                             \
    X(LT, lt, <) X(LE, le, <=) X(GT, gt, >) X(GE, ge, >=) X(EQ, eq, ==) X(NE, ne, !=)

#define VKN_CMP_LOOPS(opr)                                                                         \
    if (n <= 0) return;                                                                            \
    if (s[0] && s[1])                                                                              \
        for (int64_t i = 0; i < n; i++) y[i] = p[i] opr q[i];                                      \
    else if (s[0])                                                                                 \
        for (int64_t i = 0; i < n; i++) y[i] = p[i] opr q[0];                                      \
    else if (s[1])                                                                                 \
        for (int64_t i = 0; i < n; i++) y[i] = p[0] opr q[i];                                      \
    else                                                                                           \
        memset(y, p[0] opr q[0], (size_t)n)

/* one kernel per comparison and operand type: name suffix, C type */
#define VKN_X_CMP_TYPED(l, opr, sfx, ct)                                                           \
    static void kn_##l##_##sfx(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,     \
                               const int64_t *s) {                                                 \
        (void)a;                                                                                   \
        const ct *p = x[0], *q = x[1];                                                             \
        unsigned char *y = yp;                                                                     \
        VKN_CMP_LOOPS(opr);                                                                        \
    }
#define VKN_X_CMP(U, l, opr)                                                                       \
    VKN_X_CMP_TYPED(l, opr, f32, float)                                                            \
    VKN_X_CMP_TYPED(l, opr, f64, double)                                                           \
    VKN_X_CMP_TYPED(l, opr, i32, int32_t)                                                          \
    VKN_X_CMP_TYPED(l, opr, i64, int64_t)
VKN_CMP_OPS(VKN_X_CMP)

#define VKN_X_PRED(l, fn, sfx, ct)                                                                 \
    static void kn_##l##_##sfx(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,     \
                               const int64_t *s) {                                                 \
        (void)a;                                                                                   \
        const ct *p = x[0];                                                                        \
        unsigned char *y = yp;                                                                     \
        if (n <= 0) return;                                                                        \
        if (s[0])                                                                                  \
            for (int64_t i = 0; i < n; i++) y[i] = fn(p[i]) != 0;                                  \
        else                                                                                       \
            memset(y, fn(p[0]) != 0, (size_t)n);                                                   \
    }
VKN_X_PRED(isnan, isnan, f32, float)
VKN_X_PRED(isnan, isnan, f64, double)
VKN_X_PRED(isinf, isinf, f32, float)
VKN_X_PRED(isinf, isinf, f64, double)

/* ---- where (a bool byte is true when != 0) ---- */

#define VKN_WHERE_LOOP(P, Q)                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                              \
        ut m = (ut)0 - (ut)(c[i] != 0);                                                            \
        y[i] = (ut)(((P)&m) | ((Q) & (ut)~m));                                                     \
    }

/* Elements of `bits` bits, moved as unsigned integers of that size. A broadcast condition
 * picks one operand for the whole range. */
#define VKN_X_WHERE(bits)                                                                          \
    static void kn_where##bits(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,     \
                               const int64_t *s) {                                                 \
        typedef uint##bits##_t ut;                                                                 \
        (void)a;                                                                                   \
        const unsigned char *c = x[0];                                                             \
        const ut *p = x[1], *q = x[2];                                                             \
        ut *y = yp;                                                                                \
        if (n <= 0) return;                                                                        \
        if (!s[0]) {                                                                               \
            const ut *src = c[0] ? p : q;                                                          \
            if (s[c[0] ? 1 : 2])                                                                   \
                memcpy(y, src, (size_t)n * sizeof *y);                                             \
            else                                                                                   \
                for (int64_t i = 0; i < n; i++) y[i] = src[0];                                     \
        } else if (s[1] && s[2]) {                                                                 \
            VKN_WHERE_LOOP(p[i], q[i])                                                             \
        } else if (s[1]) {                                                                         \
            VKN_WHERE_LOOP(p[i], q[0])                                                             \
        } else if (s[2]) {                                                                         \
            VKN_WHERE_LOOP(p[0], q[i])                                                             \
        } else {                                                                                   \
            VKN_WHERE_LOOP(p[0], q[0])                                                             \
        }                                                                                          \
    }
VKN_X_WHERE(64)
VKN_X_WHERE(32)
VKN_X_WHERE(16)

/* One-byte elements: i8, u8, and bool, whose stray non-0/1 bytes are stored as 1. */
static void kn_where8(const tg_vk_args *a, int64_t n, void *yp, const void *const *x,
                      const int64_t *s) {
    const unsigned char *c = x[0], *p = x[1], *q = x[2];
    unsigned char *y = yp;
    if (a->odt == TG_DT_BOOL) {
        for (int64_t i = 0; i < n; i++)
            y[i] = (unsigned char)((c[i * s[0]] ? p[i * s[1]] : q[i * s[2]]) != 0);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = c[i * s[0]] ? p[i * s[1]] : q[i * s[2]];
}

/* ---- casts to a float ---- */

/* C's conversions, rounding to nearest; the reference's (double)(float)v stored as f32 is
 * the same value as (float)v. A bool byte converts as != 0. */
#define VKN_X_CAST(sn, st, dn, dt, conv)                                                           \
    static void kn_cast_##sn##_##dn(const tg_vk_args *a, int64_t n, void *yp,                      \
                                    const void *const *x, const int64_t *s) {                      \
        (void)a;                                                                                   \
        const st *p = x[0];                                                                        \
        dt *y = yp;                                                                                \
        if (n <= 0) return;                                                                        \
        if (s[0]) {                                                                                \
            for (int64_t i = 0; i < n; i++) y[i] = (dt)conv(p[i]);                                 \
        } else {                                                                                   \
            const dt v = (dt)conv(p[0]);                                                           \
            for (int64_t i = 0; i < n; i++) y[i] = v;                                              \
        }                                                                                          \
    }
#define VKN_NUM(v)  (v)
#define VKN_BOOL(v) ((v) != 0)

/* the sources with a typed cast to each float dtype: name, C type, dtype, conversion */
#define VKN_CAST_SRCS(X, dn, dt, DU)                                                               \
    X(b, unsigned char, BOOL, dn, dt, DU, VKN_BOOL)                                                \
    X(i8, int8_t, I8, dn, dt, DU, VKN_NUM)                                                         \
    X(i16, int16_t, I16, dn, dt, DU, VKN_NUM)                                                      \
    X(i32, int32_t, I32, dn, dt, DU, VKN_NUM)                                                      \
    X(i64, int64_t, I64, dn, dt, DU, VKN_NUM)                                                      \
    X(u8, uint8_t, U8, dn, dt, DU, VKN_NUM)                                                        \
    X(f32, float, F32, dn, dt, DU, VKN_NUM)                                                        \
    X(f64, double, F64, dn, dt, DU, VKN_NUM)

#define VKN_X_CAST_DEF(sn, st, SU, dn, dt, DU, conv) VKN_X_CAST(sn, st, dn, dt, conv)
VKN_CAST_SRCS(VKN_X_CAST_DEF, f32, float, F32)
VKN_CAST_SRCS(VKN_X_CAST_DEF, f64, double, F64)

/* ---- the table ---- */

#define VKN_X_CMP_SLOT(U, l, opr)                                                                  \
    [TG_OP_##U] = {[TG_DT_F32] = kn_##l##_f32,                                                     \
                   [TG_DT_F64] = kn_##l##_f64,                                                     \
                   [TG_DT_I32] = kn_##l##_i32,                                                     \
                   [TG_DT_I64] = kn_##l##_i64},
#define VKN_X_CAST_SLOT(sn, st, SU, dn, dt, DU, conv)                                              \
    [TG_DT_##SU][TG_DT_##DU] = kn_cast_##sn##_##dn,

/* clang-format off */
const tg_vk_ntable VK_NTABLE = {
    .cmp = {
        VKN_CMP_OPS(VKN_X_CMP_SLOT)
        [TG_OP_ISNAN] = {[TG_DT_F32] = kn_isnan_f32, [TG_DT_F64] = kn_isnan_f64},
        [TG_OP_ISINF] = {[TG_DT_F32] = kn_isinf_f32, [TG_DT_F64] = kn_isinf_f64},
    },
    .where = {kn_where8, kn_where16, kn_where32, kn_where64},
    .cast = {
        VKN_CAST_SRCS(VKN_X_CAST_SLOT, f32, float, F32)
        VKN_CAST_SRCS(VKN_X_CAST_SLOT, f64, double, F64)
    },
};
/* clang-format on */
