/* vk_avx2.c - the vector kernel table for AVX2 + FMA CPUs (four doubles or eight floats
 * per vector), compiled with -mavx2 -mfma (CMakeLists.txt) and used only after the CPU
 * was checked (vkernels.c). SLEEF's *avx2 functions. See vk_template.h.
 */
#if defined(TG_HAVE_VK_AVX2)
#include <immintrin.h>
#include <stdint.h>

typedef __m256d vd;
typedef __m256 vf;
typedef int64_t vdi __attribute__((vector_size(32)));
typedef int32_t vfi __attribute__((vector_size(32)));
#define VD_W 4
#define VF_W 8

static inline vd vd_sqrt(vd x) { return _mm256_sqrt_pd(x); }
static inline vd vd_floor(vd x) {
    return _mm256_round_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
static inline vd vd_ceil(vd x) {
    return _mm256_round_pd(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
}
static inline vd vd_round(vd x) {
    return _mm256_round_pd(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline vf vf_sqrt(vf x) { return _mm256_sqrt_ps(x); }
static inline vf vf_floor(vf x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
static inline vf vf_ceil(vf x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
}
static inline vf vf_round(vf x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* the first n (< VD_W or VF_W) lanes: masked loads and stores, which touch no byte past
   them (vk_template.h, "partial vectors") */
#define VK_MASKED 1
static inline __m256i lanes_below_d(int64_t n) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}
static inline __m256i lanes_below_f(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline vd vd_load_n(const double *p, int64_t n) {
    return _mm256_maskload_pd(p, lanes_below_d(n));
}
static inline void vd_store_n(double *p, vd v, int64_t n) {
    _mm256_maskstore_pd(p, lanes_below_d(n), v);
}
static inline vf vf_load_n(const float *p, int64_t n) {
    return _mm256_maskload_ps(p, lanes_below_f(n));
}
static inline void vf_store_n(float *p, vf v, int64_t n) {
    _mm256_maskstore_ps(p, lanes_below_f(n), v);
}

#if defined(TG_HAVE_SLEEF)
#include <sleef.h>
#define VK_SLEEF_D(fn, u) Sleef_##fn##d4_##u##avx2
#define VK_SLEEF_F(fn, u) Sleef_##fn##f8_##u##avx2
#endif

#define VK_TABLE    tg_vk_table_avx2
#define VK_ISA_NAME "avx2"
#include "vk_template.h"
#define VK_NTABLE tg_vk_ntable_avx2
#include "vk_neutral.h"
#else
typedef int tg_vk_avx2_unused; /* this build has no AVX2 kernels */
#endif
