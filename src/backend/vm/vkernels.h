/* vkernels.h - the VM's elementwise kernels over contiguous and broadcast operands.
 *
 * A kernel computes y[i] = op(x[0][i * s[0]], x[1][i * s[1]], ...) for i in [0, n), where
 * every s[k] is 1 (a contiguous operand) or 0 (one value broadcast), and y is contiguous.
 * The strided and multi-dimensional cases are the driver's business (vm_ew.c): it
 * gathers strided rows into small contiguous blocks first.
 *
 * Kernels come from one table per instruction set, indexed by op and float dtype
 * (vk_template.h, compiled once per ISA by vk_generic.c, vk_avx2.c and vk_avx512.c); a
 * second table per ISA of kernels whose results do not depend on the ISA (vk_neutral.h:
 * comparisons and predicates with a bool result, of floats, i32 and i64; where of any
 * element size; casts from every dtype to f32 and f64), compiled by the same files; and
 * vkernels.c's general cast and scalar fallbacks that run any elementwise record's own
 * scalar functions (ew.f in double, ew.i in int64) for every dtype.
 *
 * Accuracy (the vector kernels against the reference kernels, which call libm in double):
 *  - add sub mul div sqrt neg abs sign maximum minimum clip floor ceil round, and where,
 *    comparisons, isnan, isinf, cast: bit-identical, on every table (also in f32: IEEE
 *    operations on f32 give the rounding of the same operation in double).
 *  - exp exp2 log log2 log1p expm1 tan tanh erf pow: SLEEF's 1.0-ULP functions
 *    (Sleef_*_u10), error at most 1.0 ULP, so within 2 ULP of glibc's result in f64 and of
 *    the correctly rounded result in f32; erfc: SLEEF's Sleef_erfc*_u15 (1.5 ULP).
 *  - sin cos: SLEEF's 3.5-ULP functions (Sleef_sin*_u35, Sleef_cos*_u35: error at most
 *    3.5 ULP, so within 4 ULP of glibc), which cost about 60% of the 1-ULP ones. This is
 *    the accuracy class of NumPy's own AVX-512 sin/cos (SVML, up to 4 ULP), and the
 *    1-ULP functions were the largest single cost of fused kernels such as W1.
 *    SLEEF's log1p overflows above ~1e307 (f64) / ~1e38 (f32); those lanes use its log,
 *    to which log1p rounds there.
 *  - composed ones (sigmoid, softplus, rsqrt in f32) add one or two roundings on top.
 *  - div by a broadcast power of two (with a representable reciprocal) multiplies by the
 *    reciprocal: the same exact value rounded once, so still bit-identical.
 *  tests/unit/test_vm.c measures these bounds over 1e5 values per function, dtype and
 *  instruction set, special values included. Measured on AMD EPYC (Zen 4) with SLEEF
 *  3.5.1, max error against glibc (f64) or the correctly rounded value (f32): 1 ULP for
 *  exp exp2 expm1 log log2 log1p tan erf softplus, 2 ULP for tanh (f64) and sigmoid, 2-4
 *  ULP for erfc (f64); every f32 function 1 ULP except sigmoid, sin and cos; sin and cos
 *  (3.5-ULP functions) 2 ULP in f64 and f32, also for |x| up to 1e15 (Intel Xeon,
 *  Sapphire Rapids, every table).
 *  Without SLEEF every transcendental is a scalar libm call per lane: in f64 the
 *  reference's exact result, in f32 the double result rounded once, as the reference.
 *
 * Invariants: kernels never allocate, never fail, read only x[k][0] for s[k] == 0, and
 * give each element the same result whatever n and the position in the array (the tail
 * of an array goes through the same vector code, padded), so splitting work over threads
 * or blocks never changes a result.
 */
#ifndef TG_VKERNELS_H
#define TG_VKERNELS_H

#include "../../ops/ops.h"

#define TG_VK_MAXIN 4 /* most inputs an elementwise kernel takes (clip, where: 3) */

/* What a kernel needs to know besides the data: the op and the dtypes (the ISA-neutral
 * kernels read them; the typed vector kernels ignore them). */
typedef struct tg_vk_args {
    const tg_op_def *op;       /* the record (scalar fallbacks call op->ew) */
    tg_dtype cdt;              /* compute dtype: the output's, or the inputs' for CMP */
    tg_dtype odt;              /* output dtype */
    tg_dtype idt[TG_VK_MAXIN]; /* input dtypes */
    int nin;                   /* inputs */
} tg_vk_args;

typedef void (*tg_vk_fn)(const tg_vk_args *a, int64_t n, void *y, const void *const *x,
                         const int64_t *s);

/* Instruction sets with a kernel table, best last. */
typedef enum { TG_VK_GENERIC, TG_VK_AVX2, TG_VK_AVX512, TG_VK_ISA_COUNT } tg_vk_isa;

/* One table per ISA: f[op][0] for f32, f[op][1] for f64; NULL where the ISA has none. */
typedef struct tg_vk_table {
    const char *name; /* "generic", "avx2", "avx512" */
    tg_vk_fn f[TG_OP_COUNT][2];
} tg_vk_table;

/* One table per ISA of the kernels in vk_neutral.h; NULL where there is none. */
typedef struct tg_vk_ntable {
    tg_vk_fn cmp[TG_OP_COUNT][TG_DT_COUNT];  /* comparisons, isnan, isinf: by input dtype */
    tg_vk_fn where[4];                       /* where: by element size, 1 2 4 8 bytes */
    tg_vk_fn cast[TG_DT_COUNT][TG_DT_COUNT]; /* cast[from][to], to f32 and f64 */
} tg_vk_ntable;

/* The table of isa, or NULL when this build or this CPU lacks it. */
const tg_vk_table *tg_vk_table_get(tg_vk_isa isa);
/* The neutral table of isa, or NULL when this build or this CPU lacks it. */
const tg_vk_ntable *tg_vk_ntable_get(tg_vk_isa isa);
/* The best ISA this build and CPU support; TGRAPH_ISA=generic|avx2|avx512 lowers it. */
tg_vk_isa tg_vk_isa_best(void);
/* True when the transcendentals come from SLEEF. */
bool tg_vk_have_sleef(void);

/* The kernel for an elementwise node with these dtypes, on isa: a vector kernel when the
 * op has one for the float dtype, else an ISA-neutral kernel (bool results, where, cast,
 * the record's scalar functions). Fills *a. NULL when the dtypes do not fit the op's
 * pattern (the caller then runs the reference kernel). */
tg_vk_fn tg_vk_select(const tg_op_def *op, int nin, const tg_dtype *idt, tg_dtype odt,
                      tg_vk_isa isa, tg_vk_args *a);
/* Rough cost of one element of op relative to an add (for the thread-split decision). */
int tg_vk_cost(const tg_op_def *op);

/* The per-ISA tables (vk_generic.c, vk_avx2.c, vk_avx512.c). */
extern const tg_vk_table tg_vk_table_generic;
extern const tg_vk_table tg_vk_table_avx2;
extern const tg_vk_table tg_vk_table_avx512;
extern const tg_vk_ntable tg_vk_ntable_generic;
extern const tg_vk_ntable tg_vk_ntable_avx2;
extern const tg_vk_ntable tg_vk_ntable_avx512;

#endif
