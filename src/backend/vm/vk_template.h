/* vk_template.h - the body of one instruction set's vector kernel table (see vkernels.h).
 * Included once by each of vk_generic.c, vk_avx2.c and vk_avx512.c, which first define:
 *   vd, vf        GCC vector types of doubles / floats (VD_W, VF_W lanes)
 *   vdi, vfi      integer vectors of the same sizes (int64_t / int32_t lanes: masks)
 *   vd_sqrt vd_floor vd_ceil vd_round (half to even), and the vf_ versions
 *   VK_TABLE      the name of the table to define, VK_ISA_NAME its printable name
 *   VK_SLEEF_D(fn, u), VK_SLEEF_F(fn, u)   only when SLEEF is used: the SLEEF function of
 *                 that ISA, e.g. Sleef_expd4_u10avx2
 *   VK_MASKED     optionally, with vd_load_n, vd_store_n, vf_load_n, vf_store_n: the
 *                 first n lanes through masked loads and stores (else through a copy)
 * Every op is written once per dtype on whole vectors; the map helpers run it over an
 * array, splatting broadcast operands, and pass the tail through the same vector code
 * (padded with zeros), so an element's result never depends on where it lies.
 * Semantics are the records' (elemwise.c): NaN-propagating maximum/minimum (on equal
 * values the second operand wins), sign(-0.0) = 0.0, round half to even, sigmoid and
 * softplus in their overflow-free forms.
 */
#include "vkernels.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define VK_INLINE static inline __attribute__((always_inline))

/* ---- vector helpers ---- */

VK_INLINE vd vd_load(const double *p) {
    vd v;
    memcpy(&v, p, sizeof v);
    return v;
}
VK_INLINE void vd_store(double *p, vd v) { memcpy(p, &v, sizeof v); }
VK_INLINE vd vd_set1(double x) { /* not 0 + x: that would turn -0.0 into +0.0 */
    vd v;
    for (int i = 0; i < VD_W; i++) v[i] = x;
    return v;
}
VK_INLINE vd vd_sel(vdi m, vd a, vd b) { return (vd)((m & (vdi)a) | (~m & (vdi)b)); }

VK_INLINE vf vf_load(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
VK_INLINE void vf_store(float *p, vf v) { memcpy(p, &v, sizeof v); }
VK_INLINE vf vf_set1(float x) {
    vf v;
    for (int i = 0; i < VF_W; i++) v[i] = x;
    return v;
}
VK_INLINE vf vf_sel(vfi m, vf a, vf b) { return (vf)((m & (vfi)a) | (~m & (vfi)b)); }

/* ---- partial vectors: the first n (< W) elements at p, the other lanes zero; a store
 * writes those n only. An array's tail goes through them, so that it runs the same vector
 * code as the rest. Without masked loads and stores, through a zeroed copy. ---- */
#ifndef VK_MASKED
VK_INLINE vd vd_load_n(const double *p, int64_t n) {
    double b[VD_W] = {0};
    memcpy(b, p, (size_t)n * sizeof *b);
    return vd_load(b);
}
VK_INLINE void vd_store_n(double *p, vd v, int64_t n) { memcpy(p, &v, (size_t)n * sizeof *p); }
VK_INLINE vf vf_load_n(const float *p, int64_t n) {
    float b[VF_W] = {0};
    memcpy(b, p, (size_t)n * sizeof *b);
    return vf_load(b);
}
VK_INLINE void vf_store_n(float *p, vf v, int64_t n) { memcpy(p, &v, (size_t)n * sizeof *p); }
#endif

/* ---- transcendentals: SLEEF's vector functions, or libm per lane ---- */

#ifdef VK_SLEEF_D
#define VK_MATH1(name, u)                                                                          \
    static inline vd vd_##name(vd x) { return VK_SLEEF_D(name, u)(x); }                            \
    static inline vf vf_##name(vf x) { return VK_SLEEF_F(name, u)(x); }
#define VK_MATH2(name, u)                                                                          \
    static inline vd vd_##name(vd x, vd y) { return VK_SLEEF_D(name, u)(x, y); }                   \
    static inline vf vf_##name(vf x, vf y) { return VK_SLEEF_F(name, u)(x, y); }
#else
#define VK_MATH1(name, u)                                                                          \
    static inline vd vd_##name(vd x) {                                                             \
        for (int i = 0; i < VD_W; i++) x[i] = name(x[i]);                                          \
        return x;                                                                                  \
    }                                                                                              \
    static inline vf vf_##name(vf x) {                                                             \
        for (int i = 0; i < VF_W; i++) x[i] = (float)name((double)x[i]);                           \
        return x;                                                                                  \
    }
#define VK_MATH2(name, u)                                                                          \
    static inline vd vd_##name(vd x, vd y) {                                                       \
        for (int i = 0; i < VD_W; i++) x[i] = name(x[i], y[i]);                                    \
        return x;                                                                                  \
    }                                                                                              \
    static inline vf vf_##name(vf x, vf y) {                                                       \
        for (int i = 0; i < VF_W; i++) x[i] = (float)name((double)x[i], (double)y[i]);             \
        return x;                                                                                  \
    }
#endif

VK_MATH1(exp, u10)
VK_MATH1(exp2, u10)
VK_MATH1(log, u10)
VK_MATH1(log2, u10)
#define vd_log1p vd_log1p_raw
#define vf_log1p vf_log1p_raw
VK_MATH1(log1p, u10)
#undef vd_log1p
#undef vf_log1p
VK_MATH1(expm1, u10)
VK_MATH1(sin, u35)
VK_MATH1(cos, u35)
VK_MATH1(tan, u10)
VK_MATH1(tanh, u10)
VK_MATH1(erf, u10)
VK_MATH1(erfc, u15)
VK_MATH2(pow, u10)

/* SLEEF's log1p overflows to inf above about 1e307 (f64) and 1e38 (f32); there
 * log1p(x) rounds to log(x), which takes over in those lanes. */
static inline vd vd_log1p(vd x) {
    vd r = vd_log1p_raw(x);
    vdi big = (vdi)(x > vd_set1(1e300));
    for (int i = 0; i < VD_W; i++)
        if (big[i]) return vd_sel(big, vd_log(x), r);
    return r;
}
static inline vf vf_log1p(vf x) {
    vf r = vf_log1p_raw(x);
    vfi big = (vfi)(x > vf_set1(1e37f));
    for (int i = 0; i < VF_W; i++)
        if (big[i]) return vf_sel(big, vf_log(x), r);
    return r;
}

/* ---- the ops, f64 ---- */

static inline vd vd_neg(vd x) { return -x; }
static inline vd vd_abs(vd x) { return (vd)((vdi)x & INT64_MAX); }
static inline vd vd_sign(vd x) {
    vd one = vd_set1(1.0), zero = vd_set1(0.0);
    vd r = vd_sel((vdi)(x == zero), zero, x); /* -0.0 -> 0.0, NaN stays */
    r = vd_sel((vdi)(x < zero), -one, r);
    return vd_sel((vdi)(x > zero), one, r);
}
static inline vd vd_rsqrt(vd x) { return vd_set1(1.0) / vd_sqrt(x); }
/* 1 / (1 + exp(-x)) for x >= 0, e / (1 + e) with e = exp(x) below */
static inline vd vd_sigmoid(vd x) {
    vd e = vd_exp(-vd_abs(x)), one = vd_set1(1.0);
    return vd_sel((vdi)(x >= vd_set1(0.0)), one / (one + e), e / (one + e));
}
/* max(x, 0) + log1p(exp(-|x|)) */
static inline vd vd_softplus(vd x) {
    vd l = vd_log1p(vd_exp(-vd_abs(x)));
    return vd_sel((vdi)(x > vd_set1(0.0)), x + l, l);
}
static inline vd vd_add(vd a, vd b) { return a + b; }
static inline vd vd_sub(vd a, vd b) { return a - b; }
static inline vd vd_mul(vd a, vd b) { return a * b; }
static inline vd vd_div(vd a, vd b) { return a / b; }
static inline vd vd_maximum(vd a, vd b) { return vd_sel((vdi)((a > b) | (a != a)), a, b); }
static inline vd vd_minimum(vd a, vd b) { return vd_sel((vdi)((a < b) | (a != a)), a, b); }
static inline vd vd_clip(vd x, vd lo, vd hi) { return vd_minimum(vd_maximum(x, lo), hi); }

/* ---- the ops, f32 ---- */

static inline vf vf_neg(vf x) { return -x; }
static inline vf vf_abs(vf x) { return (vf)((vfi)x & INT32_MAX); }
static inline vf vf_sign(vf x) {
    vf one = vf_set1(1.0f), zero = vf_set1(0.0f);
    vf r = vf_sel((vfi)(x == zero), zero, x);
    r = vf_sel((vfi)(x < zero), -one, r);
    return vf_sel((vfi)(x > zero), one, r);
}
static inline vf vf_rsqrt(vf x) { return vf_set1(1.0f) / vf_sqrt(x); }
static inline vf vf_sigmoid(vf x) {
    vf e = vf_exp(-vf_abs(x)), one = vf_set1(1.0f);
    return vf_sel((vfi)(x >= vf_set1(0.0f)), one / (one + e), e / (one + e));
}
static inline vf vf_softplus(vf x) {
    vf l = vf_log1p(vf_exp(-vf_abs(x)));
    return vf_sel((vfi)(x > vf_set1(0.0f)), x + l, l);
}
static inline vf vf_add(vf a, vf b) { return a + b; }
static inline vf vf_sub(vf a, vf b) { return a - b; }
static inline vf vf_mul(vf a, vf b) { return a * b; }
static inline vf vf_div(vf a, vf b) { return a / b; }
static inline vf vf_maximum(vf a, vf b) { return vf_sel((vfi)((a > b) | (a != a)), a, b); }
static inline vf vf_minimum(vf a, vf b) { return vf_sel((vfi)((a < b) | (a != a)), a, b); }
static inline vf vf_clip(vf x, vf lo, vf hi) { return vf_minimum(vf_maximum(x, lo), hi); }

/* ---- map helpers: one vector op over an array (s: 1 contiguous, 0 broadcast) ---- */

/* The operand of the tail's m lanes from element i: contiguous or broadcast. */
VK_INLINE vd vd_part(const double *p, int64_t s, int64_t i, int64_t m) {
    return s ? vd_load_n(p + i, m) : vd_set1(p[0]);
}
VK_INLINE vf vf_part(const float *p, int64_t s, int64_t i, int64_t m) {
    return s ? vf_load_n(p + i, m) : vf_set1(p[0]);
}

VK_INLINE void d_map1(int64_t n, double *y, const double *x, int64_t sx, vd (*f)(vd)) {
    int64_t i = 0;
    if (sx == 0) {
        vd r = f(vd_set1(x[0]));
        for (; i + VD_W <= n; i += VD_W) vd_store(y + i, r);
        for (; i < n; i++) y[i] = r[0];
        return;
    }
    for (; i + VD_W <= n; i += VD_W) vd_store(y + i, f(vd_load(x + i)));
    if (i < n) vd_store_n(y + i, f(vd_load_n(x + i, n - i)), n - i);
}

VK_INLINE void d_map2(int64_t n, double *y, const double *a, int64_t sa, const double *b,
                      int64_t sb, vd (*f)(vd, vd)) {
    int64_t i = 0;
    if (sa && sb) {
        for (; i + VD_W <= n; i += VD_W) vd_store(y + i, f(vd_load(a + i), vd_load(b + i)));
    } else if (sa) {
        vd vb = vd_set1(b[0]);
        for (; i + VD_W <= n; i += VD_W) vd_store(y + i, f(vd_load(a + i), vb));
    } else if (sb) {
        vd va = vd_set1(a[0]);
        for (; i + VD_W <= n; i += VD_W) vd_store(y + i, f(va, vd_load(b + i)));
    } else {
        vd r = f(vd_set1(a[0]), vd_set1(b[0]));
        for (; i + VD_W <= n; i += VD_W) vd_store(y + i, r);
    }
    if (i < n) vd_store_n(y + i, f(vd_part(a, sa, i, n - i), vd_part(b, sb, i, n - i)), n - i);
}

VK_INLINE void d_map3(int64_t n, double *y, const double *a, int64_t sa, const double *b,
                      int64_t sb, const double *c, int64_t sc, vd (*f)(vd, vd, vd)) {
    int64_t i = 0;
    vd va = vd_set1(a[0]), vb = vd_set1(b[0]), vc = vd_set1(c[0]);
    for (; i + VD_W <= n; i += VD_W) {
        if (sa) va = vd_load(a + i);
        if (sb) vb = vd_load(b + i);
        if (sc) vc = vd_load(c + i);
        vd_store(y + i, f(va, vb, vc));
    }
    if (i < n)
        vd_store_n(y + i,
                   f(vd_part(a, sa, i, n - i), vd_part(b, sb, i, n - i), vd_part(c, sc, i, n - i)),
                   n - i);
}

VK_INLINE void f_map1(int64_t n, float *y, const float *x, int64_t sx, vf (*f)(vf)) {
    int64_t i = 0;
    if (sx == 0) {
        vf r = f(vf_set1(x[0]));
        for (; i + VF_W <= n; i += VF_W) vf_store(y + i, r);
        for (; i < n; i++) y[i] = r[0];
        return;
    }
    for (; i + VF_W <= n; i += VF_W) vf_store(y + i, f(vf_load(x + i)));
    if (i < n) vf_store_n(y + i, f(vf_load_n(x + i, n - i)), n - i);
}

VK_INLINE void f_map2(int64_t n, float *y, const float *a, int64_t sa, const float *b, int64_t sb,
                      vf (*f)(vf, vf)) {
    int64_t i = 0;
    if (sa && sb) {
        for (; i + VF_W <= n; i += VF_W) vf_store(y + i, f(vf_load(a + i), vf_load(b + i)));
    } else if (sa) {
        vf vb = vf_set1(b[0]);
        for (; i + VF_W <= n; i += VF_W) vf_store(y + i, f(vf_load(a + i), vb));
    } else if (sb) {
        vf va = vf_set1(a[0]);
        for (; i + VF_W <= n; i += VF_W) vf_store(y + i, f(va, vf_load(b + i)));
    } else {
        vf r = f(vf_set1(a[0]), vf_set1(b[0]));
        for (; i + VF_W <= n; i += VF_W) vf_store(y + i, r);
    }
    if (i < n) vf_store_n(y + i, f(vf_part(a, sa, i, n - i), vf_part(b, sb, i, n - i)), n - i);
}

VK_INLINE void f_map3(int64_t n, float *y, const float *a, int64_t sa, const float *b, int64_t sb,
                      const float *c, int64_t sc, vf (*f)(vf, vf, vf)) {
    int64_t i = 0;
    vf va = vf_set1(a[0]), vb = vf_set1(b[0]), vc = vf_set1(c[0]);
    for (; i + VF_W <= n; i += VF_W) {
        if (sa) va = vf_load(a + i);
        if (sb) vb = vf_load(b + i);
        if (sc) vc = vf_load(c + i);
        vf_store(y + i, f(va, vb, vc));
    }
    if (i < n)
        vf_store_n(y + i,
                   f(vf_part(a, sa, i, n - i), vf_part(b, sb, i, n - i), vf_part(c, sc, i, n - i)),
                   n - i);
}

/* ---- the kernels and the table (X-lists: op enum suffix, name) ---- */

/* clang-format off */
#define VK_UNARY_OPS(X)                                                                    \
    X(NEG, neg) X(ABS, abs) X(SIGN, sign) X(EXP, exp) X(EXP2, exp2) X(LOG, log)            \
    X(LOG2, log2) X(LOG1P, log1p) X(EXPM1, expm1) X(SQRT, sqrt) X(RSQRT, rsqrt)            \
    X(SIN, sin) X(COS, cos) X(TAN, tan) X(TANH, tanh) X(SIGMOID, sigmoid)                  \
    X(SOFTPLUS, softplus) X(ERF, erf) X(ERFC, erfc) X(FLOOR, floor) X(CEIL, ceil)          \
    X(ROUND, round)
#define VK_BINARY_OPS(X)                                                                   \
    X(ADD, add) X(SUB, sub) X(MUL, mul) X(MAXIMUM, maximum) X(MINIMUM, minimum)            \
    X(POW, pow)
#define VK_TERNARY_OPS(X) X(CLIP, clip)
/* clang-format on */

#define VK_X_UNARY(U, l)                                                                           \
    static void kd_##l(const tg_vk_args *a, int64_t n, void *y, const void *const *x,              \
                       const int64_t *s) {                                                         \
        (void)a;                                                                                   \
        d_map1(n, y, x[0], s[0], vd_##l);                                                          \
    }                                                                                              \
    static void kf_##l(const tg_vk_args *a, int64_t n, void *y, const void *const *x,              \
                       const int64_t *s) {                                                         \
        (void)a;                                                                                   \
        f_map1(n, y, x[0], s[0], vf_##l);                                                          \
    }
#define VK_X_BINARY(U, l)                                                                          \
    static void kd_##l(const tg_vk_args *a, int64_t n, void *y, const void *const *x,              \
                       const int64_t *s) {                                                         \
        (void)a;                                                                                   \
        d_map2(n, y, x[0], s[0], x[1], s[1], vd_##l);                                              \
    }                                                                                              \
    static void kf_##l(const tg_vk_args *a, int64_t n, void *y, const void *const *x,              \
                       const int64_t *s) {                                                         \
        (void)a;                                                                                   \
        f_map2(n, y, x[0], s[0], x[1], s[1], vf_##l);                                              \
    }
#define VK_X_TERNARY(U, l)                                                                         \
    static void kd_##l(const tg_vk_args *a, int64_t n, void *y, const void *const *x,              \
                       const int64_t *s) {                                                         \
        (void)a;                                                                                   \
        d_map3(n, y, x[0], s[0], x[1], s[1], x[2], s[2], vd_##l);                                  \
    }                                                                                              \
    static void kf_##l(const tg_vk_args *a, int64_t n, void *y, const void *const *x,              \
                       const int64_t *s) {                                                         \
        (void)a;                                                                                   \
        f_map3(n, y, x[0], s[0], x[1], s[1], x[2], s[2], vf_##l);                                  \
    }

VK_UNARY_OPS(VK_X_UNARY)
VK_BINARY_OPS(VK_X_BINARY)
VK_TERNARY_OPS(VK_X_TERNARY)

/* div: by a broadcast power of two whose reciprocal is a normal or subnormal number, a
 * multiplication by that reciprocal (both round the same exact value x * 2^-k, so the
 * results are identical, and a multiply is several times cheaper than a divide). */
static void kd_div(const tg_vk_args *a, int64_t n, void *y, const void *const *x,
                   const int64_t *s) {
    (void)a;
    const double *b = x[1];
    int e;
    if (s[1] == 0 && isfinite(b[0]) && fabs(b[0]) >= DBL_MIN && fabs(frexp(b[0], &e)) == 0.5) {
        double r = 1.0 / b[0];
        d_map2(n, y, x[0], s[0], &r, 0, vd_mul);
        return;
    }
    d_map2(n, y, x[0], s[0], b, s[1], vd_div);
}
static void kf_div(const tg_vk_args *a, int64_t n, void *y, const void *const *x,
                   const int64_t *s) {
    (void)a;
    const float *b = x[1];
    int e;
    if (s[1] == 0 && isfinite(b[0]) && fabsf(b[0]) >= FLT_MIN && fabsf(frexpf(b[0], &e)) == 0.5f) {
        float r = 1.0f / b[0];
        f_map2(n, y, x[0], s[0], &r, 0, vf_mul);
        return;
    }
    f_map2(n, y, x[0], s[0], b, s[1], vf_div);
}

#define VK_X_SLOT(U, l) [TG_OP_##U] = {kf_##l, kd_##l},

/* clang-format off */
const tg_vk_table VK_TABLE = {
    .name = VK_ISA_NAME,
    .f = {
        VK_UNARY_OPS(VK_X_SLOT)
        VK_BINARY_OPS(VK_X_SLOT)
        VK_TERNARY_OPS(VK_X_SLOT)
        [TG_OP_DIV] = {kf_div, kd_div},
    },
};
/* clang-format on */
