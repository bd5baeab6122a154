/* vk_generic.c - the vector kernel table for any CPU this build targets (x86-64: SSE2,
 * two doubles or four floats per vector). SLEEF's SSE2 entry points dispatch by
 * themselves to SSE4.1 or AVX2-128 code. floor/ceil/round work per lane. See
 * vk_template.h for the kernels and vkernels.h for the contract.
 */
#include <math.h>
#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>
typedef __m128d vd;
typedef __m128 vf;
#else
typedef double vd __attribute__((vector_size(16)));
typedef float vf __attribute__((vector_size(16)));
#endif
typedef int64_t vdi __attribute__((vector_size(16)));
typedef int32_t vfi __attribute__((vector_size(16)));
#define VD_W 2
#define VF_W 4

#if defined(__SSE2__)
static inline vd vd_sqrt(vd x) { return _mm_sqrt_pd(x); }
static inline vf vf_sqrt(vf x) { return _mm_sqrt_ps(x); }
#else
static inline vd vd_sqrt(vd x) {
    for (int i = 0; i < VD_W; i++) x[i] = sqrt(x[i]);
    return x;
}
static inline vf vf_sqrt(vf x) {
    for (int i = 0; i < VF_W; i++) x[i] = sqrtf(x[i]);
    return x;
}
#endif
static inline vd vd_floor(vd x) {
    for (int i = 0; i < VD_W; i++) x[i] = floor(x[i]);
    return x;
}
static inline vd vd_ceil(vd x) {
    for (int i = 0; i < VD_W; i++) x[i] = ceil(x[i]);
    return x;
}
static inline vd vd_round(vd x) {
    for (int i = 0; i < VD_W; i++) x[i] = rint(x[i]);
    return x;
}
static inline vf vf_floor(vf x) {
    for (int i = 0; i < VF_W; i++) x[i] = floorf(x[i]);
    return x;
}
static inline vf vf_ceil(vf x) {
    for (int i = 0; i < VF_W; i++) x[i] = ceilf(x[i]);
    return x;
}
static inline vf vf_round(vf x) {
    for (int i = 0; i < VF_W; i++) x[i] = rintf(x[i]);
    return x;
}

#if defined(TG_HAVE_SLEEF) && defined(__SSE2__)
#include <sleef.h>
#define VK_SLEEF_D(fn, u) Sleef_##fn##d2_##u
#define VK_SLEEF_F(fn, u) Sleef_##fn##f4_##u
#endif

#define VK_TABLE    tg_vk_table_generic
#define VK_ISA_NAME "generic"
#include "vk_template.h"
#define VK_NTABLE tg_vk_ntable_generic
#include "vk_neutral.h"
