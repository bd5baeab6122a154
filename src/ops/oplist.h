/* oplist.h - the only list of ops. An op is one line here plus one record in its
 * family's file (elemwise.c, reduce.c, shape.c, linalg.c, ...). X(UPPER, lower). */
#ifndef TG_OPLIST_H
#define TG_OPLIST_H

/* The lists keep their hand layout (several ops per line). */
/* clang-format off */

#define TG_OPS_ELEMWISE(X)                                                                 \
    X(ADD, add) X(SUB, sub) X(MUL, mul) X(DIV, div) X(INT_DIV, int_div) X(MOD, mod)        \
    X(POW, pow) X(MAXIMUM, maximum) X(MINIMUM, minimum)                                    \
    X(NEG, neg) X(ABS, abs) X(SIGN, sign) X(EXP, exp) X(EXP2, exp2) X(LOG, log)            \
    X(LOG2, log2) X(LOG1P, log1p) X(EXPM1, expm1) X(SQRT, sqrt) X(RSQRT, rsqrt)            \
    X(SIN, sin) X(COS, cos) X(TAN, tan) X(TANH, tanh) X(SIGMOID, sigmoid)                  \
    X(SOFTPLUS, softplus) X(ERF, erf) X(ERFC, erfc) X(FLOOR, floor) X(CEIL, ceil)          \
    X(ROUND, round) X(LT, lt) X(LE, le) X(GT, gt) X(GE, ge) X(EQ, eq) X(NE, ne)            \
    X(AND, and) X(OR, or) X(XOR, xor) X(NOT, not) X(ISNAN, isnan) X(ISINF, isinf)          \
    X(CLIP, clip) X(WHERE, where) X(CAST, cast) X(LEFT_SHIFT, left_shift)                  \
    X(RIGHT_SHIFT, right_shift)                                                            \
    X(GAMMALN, gammaln) X(DIGAMMA, digamma) X(POLYGAMMA, polygamma) X(BETALN, betaln)      \
    X(XLOGY, xlogy) X(XLOG1PY, xlog1py) X(LOG1MEXP, log1mexp) X(LOGADDEXP, logaddexp)      \
    X(ERFCX, erfcx) X(LOG_NDTR, log_ndtr) X(ERFINV, erfinv) X(GAMMAINC, gammainc)          \
    X(GAMMAINCC, gammaincc)

#define TG_OPS_REDUCE(X)                                                                   \
    X(SUM, sum) X(PROD, prod) X(MEAN, mean) X(MAX, max) X(MIN, min) X(ARGMAX, argmax)      \
    X(ARGMIN, argmin) X(ANY, any) X(ALL, all)

#define TG_OPS_SHAPE(X)                                                                    \
    X(RESHAPE, reshape) X(TRANSPOSE, transpose) X(EXPAND_DIMS, expand_dims)                \
    X(SQUEEZE, squeeze) X(BROADCAST_TO, broadcast_to) X(SLICE, slice)

/* linalg.c: products, and the diagonal of a batch of matrices */
#define TG_OPS_LINALG(X) X(DOT, dot) X(MATMUL, matmul) X(OUTER, outer) X(DIAG, diag)
/* lapack.c: the core ops of 2-D matrices computed by LAPACK */
#define TG_OPS_LAPACK(X)                                                                   \
    X(CHOLESKY, cholesky) X(SOLVE_TRIANGULAR, solve_triangular) X(SOLVE, solve)            \
    X(CHO_SOLVE, cho_solve) X(SOLVE_FACTORED, solve_factored) X(INV, inv) X(DET, det) X(SLOGDET, slogdet) X(EIGH, eigh)
/* blas.c: the lowered BLAS forms and their in-place variants */
#define TG_OPS_BLAS(X)                                                                     \
    X(GEMM, gemm) X(GEMV, gemv) X(GER, ger) X(GEMM_INPLACE, gemm_inplace)                  \
    X(GEMV_INPLACE, gemv_inplace) X(GER_INPLACE, ger_inplace)

/* index.c: gathers and scatters; join.c: joining, splitting and constructors;
 * nn.c: the softmax family */
#define TG_OPS_INDEX(X)                                                                    \
    X(TAKE, take) X(TAKE_ALONG, take_along) X(SET_SUBTENSOR, set_subtensor)                \
    X(INC_SUBTENSOR, inc_subtensor) X(SET_TAKE, set_take) X(INC_TAKE, inc_take)            \
    X(MASK_SELECT, mask_select) X(INDEX, index) X(SET_INDEX, set_index)                      \
    X(INC_INDEX, inc_index)
#define TG_OPS_JOIN(X)                                                                     \
    X(CONCATENATE, concatenate) X(STACK, stack) X(SPLIT, split) X(ZEROS, zeros)             \
    X(ONES, ones) X(FULL, full) X(ALLOC, alloc) X(ARANGE, arange) X(EYE, eye) X(TRIL, tril) \
    X(TRIU, triu) X(SHAPE, shape) X(SIZE, size)
#define TG_OPS_NN(X) X(SOFTMAX, softmax) X(LOG_SOFTMAX, log_softmax) X(LOGSUMEXP, logsumexp)
/* fused.c: elementwise expressions (and a reduction at their root) in one node */
#define TG_OPS_FUSED(X) X(FUSED, fused)
/* random.c: counter-based random numbers with explicit keys (docs/random.md) */
#define TG_OPS_RANDOM(X)                                                                   \
    X(KEY, key) X(KEY_SPLIT, key_split) X(FOLD_IN, fold_in) X(UNIFORM, uniform)            \
    X(NORMAL, normal) X(BERNOULLI, bernoulli) X(CATEGORICAL, categorical)                  \
    X(PERMUTATION, permutation)

/* call.c: a call of another function (inlined first thing in the pipeline) */
#define TG_OPS_CALL(X) X(CALL, call)
/* pmap.c: a function mapped over an axis across devices, and the rank along it */
#define TG_OPS_PMAP(X) X(PMAP, pmap) X(AXIS_INDEX, axis_index) X(AXIS_SIZE, axis_size)
/* scan.c: loops over a step function, carrying states (scan) or not (map) */
#define TG_OPS_SCAN(X) X(SCAN, scan) X(MAP, map)
/* collective.c: values exchanged between the ranks of a pmap */
#define TG_OPS_COLLECTIVE(X)                                                               \
    X(PSUM, psum) X(PMEAN, pmean) X(PMAX, pmax) X(PMIN, pmin) X(ALL_GATHER, all_gather)    \
    X(PSUM_SCATTER, psum_scatter) X(PPERMUTE, ppermute) X(PSUM_START, psum_start)             \
    X(PSUM_WAIT, psum_wait)
/* transfer.c: a value moved to another device (inserted by placement, src/rewrite/place.c) */
#define TG_OPS_DEVICE(X) X(TRANSFER, transfer)
/* cumulative.c: cumulative ops along an axis; sort.c: sorting, selection, order statistics */
#define TG_OPS_CUMULATIVE(X)                                                               \
    X(CUMSUM, cumsum) X(CUMPROD, cumprod) X(CUMMAX, cummax) X(CUMMIN, cummin) X(DIFF, diff)
#define TG_OPS_SORT(X)                                                                     \
    X(SORT, sort) X(ARGSORT, argsort) X(TOPK, topk) X(SEARCHSORTED, searchsorted)          \
    X(QUANTILE, quantile) X(MEDIAN, median)

#define TG_OPS(X)                                                                          \
    TG_OPS_ELEMWISE(X) TG_OPS_REDUCE(X) TG_OPS_SHAPE(X) TG_OPS_LINALG(X) TG_OPS_LAPACK(X)    \
    TG_OPS_BLAS(X) TG_OPS_INDEX(X) TG_OPS_JOIN(X) TG_OPS_NN(X) TG_OPS_FUSED(X)               \
    TG_OPS_RANDOM(X)                                                                       \
    TG_OPS_CALL(X) TG_OPS_PMAP(X) TG_OPS_SCAN(X) TG_OPS_COLLECTIVE(X) TG_OPS_DEVICE(X)                    \
    TG_OPS_CUMULATIVE(X) TG_OPS_SORT(X)

/* clang-format on */

#define TG_X_ENUM(U, l) TG_OP_##U,
typedef enum { TG_OPS(TG_X_ENUM) TG_OP_COUNT } tg_op;
#undef TG_X_ENUM

#endif
