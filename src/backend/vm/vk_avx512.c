/* vk_avx512.c - the vector kernel table for AVX-512 CPUs (eight doubles or sixteen floats
 * per vector), compiled with -mavx512f -mavx512dq (CMakeLists.txt) and used only after
 * the CPU was checked (vkernels.c). SLEEF's *avx512f functions. See vk_template.h.
 */
#if defined(TG_HAVE_VK_AVX512)
#include <immintrin.h>
#include <stdint.h>

typedef __m512d vd;
typedef __m512 vf;
typedef int64_t vdi __attribute__((vector_size(64)));
typedef int32_t vfi __attribute__((vector_size(64)));
#define VD_W 8
#define VF_W 16

static inline vd vd_sqrt(vd x) { return _mm512_sqrt_pd(x); }
static inline vd vd_floor(vd x) {
    return _mm512_roundscale_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
static inline vd vd_ceil(vd x) {
    return _mm512_roundscale_pd(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
}
static inline vd vd_round(vd x) {
    return _mm512_roundscale_pd(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline vf vf_sqrt(vf x) { return _mm512_sqrt_ps(x); }
static inline vf vf_floor(vf x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
static inline vf vf_ceil(vf x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
}
static inline vf vf_round(vf x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* the first n (< VD_W or VF_W) lanes: masked loads and stores, which touch no byte past
   them (vk_template.h, "partial vectors") */
#define VK_MASKED 1
static inline vd vd_load_n(const double *p, int64_t n) {
    return _mm512_maskz_loadu_pd((__mmask8)((1u << n) - 1), p);
}
static inline void vd_store_n(double *p, vd v, int64_t n) {
    _mm512_mask_storeu_pd(p, (__mmask8)((1u << n) - 1), v);
}
static inline vf vf_load_n(const float *p, int64_t n) {
    return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
}
static inline void vf_store_n(float *p, vf v, int64_t n) {
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), v);
}

#if defined(TG_HAVE_SLEEF)
#include <sleef.h>
#define VK_SLEEF_D(fn, u) Sleef_##fn##d8_##u##avx512f
#define VK_SLEEF_F(fn, u) Sleef_##fn##f16_##u##avx512f
#endif

#define VK_TABLE    tg_vk_table_avx512
#define VK_ISA_NAME "avx512"
#include "vk_template.h"
#define VK_NTABLE tg_vk_ntable_avx512
#include "vk_neutral.h"
#else
typedef int tg_vk_avx512_unused; /* this build has no AVX-512 kernels */
#endif
