/* elemwise.c - the elementwise op family: one record per op of TG_OPS_ELEMWISE, with
 * the scalar functions that define its meaning (NumPy's, NEP 50 promotion, see
 * ops_util.c for promotion and broadcasting).
 *
 * Semantics (checked against NumPy 1.24 with weak promotion):
 *  - Integers wrap: add/sub/mul/neg/abs/pow compute in uint64 and the store keeps the low
 *    bits of the output dtype (abs(i8 -128) is -128). int_div/mod floor (the remainder
 *    has the divisor's sign); an integer division or modulo by zero gives 0, and
 *    INT_MIN // -1 wraps to INT_MIN. Float int_div/mod follow NumPy's divmod: x // 0 is
 *    x / 0 (inf or nan), x % 0 is nan, the remainder takes the divisor's sign.
 *  - div is true division: bool and integer inputs become f64 (as in NumPy).
 *  - Unary math (exp ... erfc, sigmoid, softplus, rsqrt) and floor/ceil/round turn bool
 *    and integer inputs into floats as NumPy 1.24's ufuncs do (floor of an int is a
 *    float): i16 -> f32, i32/i64 -> f64, and bool/i8/u8 -> f32 (NumPy gives f16, which
 *    tgraph lacks). round is half to even (rint).
 *  - pow of integers: a negative exponent is a run-time error, as in NumPy; 0**0 is 1.
 *  - maximum/minimum/clip propagate NaN; clip(x, lo, hi) is minimum(maximum(x, lo), hi)
 *    with the three inputs promoted together (lo > hi gives hi, as NumPy).
 *  - and/or/xor/not are bitwise on integers and logical on bool; floats are refused.
 *  - left_shift/right_shift as NumPy on x86-64: a count >= the width (or negative)
 *    gives 0, or -1 for a right shift of a negative value; bool shifts as i8.
 *  - int_div, mod and pow take bool inputs as i8 (NumPy has no bool loop for them);
 *    sub, neg and sign refuse bool, as NumPy does.
 *  - isnan/isinf of bool and integers are false.
 *  - The special functions gammaln digamma polygamma betaln xlogy xlog1py log1mexp
 *    logaddexp erfcx log_ndtr erfinv gammainc gammaincc are SciPy's (NumPy's logaddexp),
 *    computed in double by src/core/specfun.h, which the C JIT's prelude carries too; their
 *    inputs promote as the unary math's do (integers become floats). polygamma(n, x) takes
 *    n as its first input, as scipy.special.polygamma does: NaN unless n is a non-negative
 *    integer.
 *  - where(cond, a, b): cond is converted to bool (x != 0), a and b promote together.
 *  - cast(x, dtype=...): float -> int truncates toward zero; NaN gives 0 and values out
 *    of the target's range saturate (the rule of core's tg_store_f64, also JAX's; NumPy's
 *    answer there is platform-dependent: x86-64 gives INT_MIN or the wrapped low bits);
 *    int -> int wraps; anything -> bool is x != 0 (NaN is true); i64 -> f32 rounds once.
 * Invariants: scalar functions are pure and total (no UB for any input: signed overflow
 * happens only in uint64), float ones compute in double.
 */
#include "ops.h"

#include "../core/specfun.h"

#include <math.h>

/* int64 with the bits of u (two's complement), without implementation-defined casts. */
static int64_t wrap(uint64_t u) { return u <= INT64_MAX ? (int64_t)u : -(int64_t)~u - 1; }

/* ---- arithmetic ---- */

static double f_add(const double *x) { return x[0] + x[1]; }
static int64_t i_add(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return wrap((uint64_t)x[0] + (uint64_t)x[1]);
}

static double f_sub(const double *x) { return x[0] - x[1]; }
static int64_t i_sub(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return wrap((uint64_t)x[0] - (uint64_t)x[1]);
}

static double f_mul(const double *x) { return x[0] * x[1]; }
static int64_t i_mul(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return wrap((uint64_t)x[0] * (uint64_t)x[1]);
}

static double f_div(const double *x) { return x[0] / x[1]; }

/* NumPy's float divmod: floor quotient, remainder with the divisor's sign. */
static double fdivmod(double a, double b, double *mod) {
    double m = fmod(a, b);
    if (b == 0.0) {
        *mod = m; /* nan */
        return a / b;
    }
    double d = (a - m) / b; /* an integer up to rounding */
    if (m != 0.0) {
        if ((b < 0.0) != (m < 0.0)) {
            m += b;
            d -= 1.0;
        }
    } else {
        m = copysign(0.0, b);
    }
    double q;
    if (d != 0.0) {
        q = floor(d);
        if (d - q > 0.5) q += 1.0;
    } else {
        q = copysign(0.0, a / b);
    }
    *mod = m;
    return q;
}

static double f_int_div(const double *x) {
    double m;
    return fdivmod(x[0], x[1], &m);
}
static int64_t i_int_div(const int64_t *x, tg_dtype dt) {
    (void)dt;
    int64_t a = x[0], b = x[1];
    if (b == 0) return 0;
    if (b == -1) return wrap(0 - (uint64_t)a); /* INT64_MIN // -1 wraps */
    int64_t q = a / b;
    if (a % b != 0 && (a < 0) != (b < 0)) q--;
    return q;
}

static double f_mod(const double *x) {
    double m;
    fdivmod(x[0], x[1], &m);
    return m;
}
static int64_t i_mod(const int64_t *x, tg_dtype dt) {
    (void)dt;
    int64_t a = x[0], b = x[1];
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && (r < 0) != (b < 0)) r += b;
    return r;
}

static double f_pow(const double *x) { return pow(x[0], x[1]); }
/* Exponentiation by squaring modulo 2^64. Negative exponents never get here (ref_pow). */
static int64_t i_pow(const int64_t *x, tg_dtype dt) {
    (void)dt;
    int64_t e = x[1];
    uint64_t base = (uint64_t)x[0], r = 1;
    if (e < 0) return 0;
    while (e > 0) {
        if (e & 1) r *= base;
        base *= base;
        e >>= 1;
    }
    return wrap(r);
}

/* NumPy refuses negative integer exponents. When the output is not empty every element
 * of the exponent is used, so scanning the exponent tensor alone is exact. */
static tg_status ref_pow(tg_kern *k) {
    const tg_tensor *e = k->in[1];
    int64_t n = 0, ne = 0;
    if (!tg_dtype_is_float((tg_dtype)k->out_type[0].dtype) && !tg_dtype_is_float(e->dtype) &&
        tg_shape_size(k->out_type[0].ndim, k->out_type[0].shape, &n) && n > 0 &&
        tg_shape_size(e->ndim, e->shape, &ne) && ne > 0) {
        int64_t idx[TG_MAX_DIMS] = {0};
        do {
            int64_t v = tg_load_i64(tg_tensor_at(e, idx), e->dtype);
            if (v < 0)
                return tg_kern_fail(k, TG_EINVAL,
                                    "integers to negative integer powers are not allowed "
                                    "(exponent %lld)",
                                    (long long)v);
        } while (tg_index_next(e->ndim, e->shape, idx));
    }
    return tg_ew_ref(k);
}

/* NaN-propagating; on equal values the second operand wins, as NumPy's loops do. */
static double fmaxnan(double a, double b) { return a > b || isnan(a) ? a : b; }
static double fminnan(double a, double b) { return a < b || isnan(a) ? a : b; }

static double f_maximum(const double *x) { return fmaxnan(x[0], x[1]); }
static int64_t i_maximum(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return x[0] > x[1] ? x[0] : x[1];
}

static double f_minimum(const double *x) { return fminnan(x[0], x[1]); }
static int64_t i_minimum(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return x[0] < x[1] ? x[0] : x[1];
}

static double f_clip(const double *x) { return fminnan(fmaxnan(x[0], x[1]), x[2]); }
static int64_t i_clip(const int64_t *x, tg_dtype dt) {
    (void)dt;
    int64_t v = x[0] > x[1] ? x[0] : x[1];
    return v < x[2] ? v : x[2];
}

/* ---- unary ---- */

static double f_neg(const double *x) { return -x[0]; }
static int64_t i_neg(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return wrap(0 - (uint64_t)x[0]);
}

static double f_abs(const double *x) { return fabs(x[0]); }
static int64_t i_abs(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return x[0] < 0 ? wrap(0 - (uint64_t)x[0]) : x[0];
}

/* sign(-0.0) is 0.0 and sign(nan) is nan, as NumPy. */
static double f_sign(const double *x) {
    double v = x[0];
    return v > 0.0 ? 1.0 : v < 0.0 ? -1.0 : v == 0.0 ? 0.0 : v;
}
static int64_t i_sign(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return (x[0] > 0) - (x[0] < 0);
}

static double f_exp(const double *x) { return exp(x[0]); }
static double f_exp2(const double *x) { return exp2(x[0]); }
static double f_log(const double *x) { return log(x[0]); }
static double f_log2(const double *x) { return log2(x[0]); }
static double f_log1p(const double *x) { return log1p(x[0]); }
static double f_expm1(const double *x) { return expm1(x[0]); }
static double f_sqrt(const double *x) { return sqrt(x[0]); }
static double f_rsqrt(const double *x) { return 1.0 / sqrt(x[0]); }
static double f_sin(const double *x) { return sin(x[0]); }
static double f_cos(const double *x) { return cos(x[0]); }
static double f_tan(const double *x) { return tan(x[0]); }
static double f_tanh(const double *x) { return tanh(x[0]); }
static double f_erf(const double *x) { return erf(x[0]); }
static double f_erfc(const double *x) { return erfc(x[0]); }
static double f_floor(const double *x) { return floor(x[0]); }
static double f_ceil(const double *x) { return ceil(x[0]); }
static double f_round(const double *x) { return rint(x[0]); } /* half to even */

/* 1 / (1 + exp(-x)), never overflowing: exp only sees non-positive arguments. */
static double f_sigmoid(const double *x) {
    double v = x[0];
    if (v >= 0.0) return 1.0 / (1.0 + exp(-v));
    double e = exp(v);
    return e / (1.0 + e);
}

/* log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), finite for large x. */
static double f_softplus(const double *x) {
    double v = x[0];
    return v > 0.0 ? v + log1p(exp(-v)) : log1p(exp(v));
}

/* ---- special functions (src/core/specfun.h, SciPy's semantics) ---- */

static double f_gammaln(const double *x) { return tg_sf_gammaln(x[0]); }
static double f_digamma(const double *x) { return tg_sf_digamma(x[0]); }
static double f_polygamma(const double *x) { return tg_sf_polygamma(x[0], x[1]); }
static double f_betaln(const double *x) { return tg_sf_betaln(x[0], x[1]); }
static double f_xlogy(const double *x) { return tg_sf_xlogy(x[0], x[1]); }
static double f_xlog1py(const double *x) { return tg_sf_xlog1py(x[0], x[1]); }
static double f_log1mexp(const double *x) { return tg_sf_log1mexp(x[0]); }
static double f_logaddexp(const double *x) { return tg_sf_logaddexp(x[0], x[1]); }
static double f_erfcx(const double *x) { return tg_sf_erfcx(x[0]); }
static double f_log_ndtr(const double *x) { return tg_sf_log_ndtr(x[0]); }
static double f_erfinv(const double *x) { return tg_sf_erfinv(x[0]); }
static double f_gammainc(const double *x) { return tg_sf_gammainc(x[0], x[1]); }
static double f_gammaincc(const double *x) { return tg_sf_gammaincc(x[0], x[1]); }

/* ---- comparisons and predicates (bool result) ---- */

static double f_lt(const double *x) { return x[0] < x[1]; }
static int64_t i_lt(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return x[0] < x[1];
}
static double f_le(const double *x) { return x[0] <= x[1]; }
static int64_t i_le(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return x[0] <= x[1];
}
static double f_gt(const double *x) { return x[0] > x[1]; }
static int64_t i_gt(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return x[0] > x[1];
}
static double f_ge(const double *x) { return x[0] >= x[1]; }
static int64_t i_ge(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return x[0] >= x[1];
}
static double f_eq(const double *x) { return x[0] == x[1]; }
static int64_t i_eq(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return x[0] == x[1];
}
static double f_ne(const double *x) { return x[0] != x[1]; }
static int64_t i_ne(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return x[0] != x[1];
}

static double f_isnan(const double *x) { return isnan(x[0]) ? 1.0 : 0.0; }
static double f_isinf(const double *x) { return isinf(x[0]) ? 1.0 : 0.0; }
static int64_t i_false(const int64_t *x, tg_dtype dt) {
    (void)x;
    (void)dt;
    return 0;
}

/* ---- bitwise / logical (bool values are 0 and 1, so & | ^ are the logical ops) ---- */

static int64_t i_and(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return wrap((uint64_t)x[0] & (uint64_t)x[1]);
}
static int64_t i_or(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return wrap((uint64_t)x[0] | (uint64_t)x[1]);
}
static int64_t i_xor(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return wrap((uint64_t)x[0] ^ (uint64_t)x[1]);
}
static int64_t i_not(const int64_t *x, tg_dtype dt) {
    return dt == TG_DT_BOOL ? x[0] == 0 : wrap(~(uint64_t)x[0]);
}

/* Counts below 64 shift the int64 value; its low bits are those NumPy computes in the
 * narrower dtype (a count >= the dtype's width leaves none of them). */
static int64_t i_left_shift(const int64_t *x, tg_dtype dt) {
    (void)dt;
    int64_t c = x[1];
    if (c < 0 || c >= 64) return 0;
    return wrap((uint64_t)x[0] << c);
}
static int64_t i_right_shift(const int64_t *x, tg_dtype dt) {
    (void)dt;
    int64_t a = x[0], c = x[1];
    if (c < 0 || c >= 64) return a < 0 ? -1 : 0;
    return a < 0 ? -1 - ((-1 - a) >> c) : a >> c; /* arithmetic shift, no negative >> */
}

/* ---- where ---- */

static double f_where(const double *x) { return x[0] != 0.0 ? x[1] : x[2]; }
static int64_t i_where(const int64_t *x, tg_dtype dt) {
    (void)dt;
    return x[0] != 0 ? x[1] : x[2];
}

static tg_dtype where_dtype(const tg_infer *ic) {
    const tg_type *ab[2] = {&ic->in[1], &ic->in[2]};
    return tg_promote_types(ab, 2);
}

static tg_status where_promote(tg_infer *ic, tg_dtype *want) {
    tg_dtype dt = where_dtype(ic);
    want[0] = TG_DT_BOOL;
    want[1] = want[2] = dt;
    return TG_OK;
}

static tg_status where_infer(tg_infer *ic) {
    const tg_type *p[3] = {&ic->in[0], &ic->in[1], &ic->in[2]};
    if (!tg_broadcast_types(ic, p, 3, &ic->out[0])) return ic->status;
    ic->out[0].dtype = (uint8_t)where_dtype(ic);
    ic->out[0].weak = ic->in[1].weak && ic->in[2].weak;
    ic->nout = 1;
    return TG_OK;
}

/* ---- cast ---- */

static const tg_attr_spec cast_attrs[] = {
    {"dtype", TG_AS_DTYPE, 1, 0, {.kind = TG_ATTR_NONE}},
};

static tg_status cast_infer(tg_infer *ic) {
    int64_t dt = ic->attrs[0].i;
    if (ic->attrs[0].kind != TG_ATTR_INT || dt < 0 || dt >= TG_DT_COUNT)
        return tg_infer_fail(ic, TG_EINVAL, "invalid dtype attribute");
    ic->out[0] = ic->in[0];
    ic->out[0].dtype = (uint8_t)dt;
    ic->out[0].weak = 0;
    ic->nout = 1;
    return TG_OK;
}

static tg_status cast_ref(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    tg_tensor *y = k->out[0];
    bool xf = tg_dtype_is_float(x->dtype), yf = tg_dtype_is_float(y->dtype);
    int64_t n;
    if (!tg_shape_size(x->ndim, x->shape, &n)) return tg_kern_fail(k, TG_ELIMIT, "input too large");
    if (n == 0) return TG_OK;
    int64_t idx[TG_MAX_DIMS] = {0};
    do {
        const char *px = tg_tensor_at(x, idx);
        char *py = tg_tensor_at(y, idx);
        if (xf) { /* to float: IEEE; to int: truncate, NaN 0, saturate; to bool: != 0 */
            tg_store_f64(py, y->dtype, tg_load_f64(px, x->dtype));
        } else if (yf) { /* int -> float rounds once, also i64 -> f32 */
            int64_t v = tg_load_i64(px, x->dtype);
            tg_store_f64(py, y->dtype, y->dtype == TG_DT_F32 ? (double)(float)v : (double)v);
        } else { /* int -> int wraps, -> bool is != 0 */
            tg_store_i64(py, y->dtype, tg_load_i64(px, x->dtype));
        }
    } while (tg_index_next(x->ndim, x->shape, idx));
    return TG_OK;
}

/* ---- gradients (vector-Jacobian products) ----
 * Each builds graph with the public builders from the cotangent ct of the output y and
 * gives every float input its cotangent, summed back to the input's type over the axes
 * the input was broadcast along (tg_grad_unbroadcast). Integer and bool inputs get none.
 * Ops with integer/bool results are TG_GRAD_NONE; an integer-valued op on floats only
 * runs its VJP for float values (the driver never asks for integer ones).
 * Choices at points where the derivative does not exist (also in docs/grad.md):
 *  - abs'(0) = 0 (like sign(0)); sign, floor, ceil, round and float int_div are
 *    piecewise constant: zero gradient everywhere (zeros of the input's type, never
 *    ct * 0, which would turn an infinite cotangent into NaN).
 *  - maximum/minimum: on a tie (a == b) each input gets half of the cotangent, as JAX
 *    does, so maximum(x, x) has gradient 1 with respect to x. Where the result is NaN
 *    neither input gets anything.
 *  - clip(x, lo, hi): x gets the cotangent where lo <= x <= hi (both ends included), lo
 *    where x < lo <= hi, hi everywhere else (x > hi, or lo > hi where the result is hi;
 *    also where x is NaN).
 *  - sqrt'(0) = +inf (ct * 0.5 / sqrt(x); NaN when ct is 0 there, as in JAX).
 *  - pow(a, b): d/da = b * a^(b-1), taken as 0 where b == 0 (so x**0 has gradient 0 even
 *    at x = 0); d/db = log(a) * a^b, taken as 0 where a == 0 (JAX's choice); NaN for a < 0.
 *  - mod(a, b) = a - int_div(a, b) * b: d/da = 1, d/db = -int_div(a, b) (one-sided at the
 *    jumps of the quotient).
 *  - where: the condition gets nothing; a gets ct where cond holds, b elsewhere.
 *  - cast between float dtypes casts the cotangent back; casts to or from integers and
 *    bool carry no gradient.
 */

static bool in_float(const tg_node *n, int i) {
    return tg_dtype_is_float((tg_dtype)n->in[i]->type.dtype);
}

/* gin[i] = v summed to input i's type, for a float input i. */
static void put(tg_graph *g, const tg_node *n, tg_var **gin, int i, tg_var *v) {
    if (in_float(n, i)) gin[i] = tg_grad_unbroadcast(g, v, &n->in[i]->type);
}

/* The unary case: gin[0] = ct * d, where d is dy/dx. */
static tg_status chain1(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                        tg_var *d) {
    put(g, n, gin, 0, tg_mul(g, gout[0], d));
    return tg_graph_status(g);
}

static tg_var *lit(tg_graph *g, double v) { return tg_literal_float(g, v); }

/* gin[i] = zeros of input i's type for every float input (piecewise-constant ops). */
static tg_status vjp_zero(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    (void)gout;
    for (int i = 0; i < n->nin; i++)
        if (in_float(n, i)) gin[i] = tg_grad_zeros_like(g, n->in[i]);
    return tg_graph_status(g);
}

static tg_status vjp_add(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    put(g, n, gin, 0, gout[0]);
    put(g, n, gin, 1, gout[0]);
    return tg_graph_status(g);
}

static tg_status vjp_sub(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    put(g, n, gin, 0, gout[0]);
    put(g, n, gin, 1, tg_neg(g, gout[0]));
    return tg_graph_status(g);
}

static tg_status vjp_mul(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    put(g, n, gin, 0, tg_mul(g, gout[0], n->in[1]));
    put(g, n, gin, 1, tg_mul(g, gout[0], n->in[0]));
    return tg_graph_status(g);
}

/* y = a / b: da = ct / b, db = -ct * y / b. */
static tg_status vjp_div(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *b = n->in[1];
    put(g, n, gin, 0, tg_div(g, gout[0], b));
    put(g, n, gin, 1, tg_neg(g, tg_div(g, tg_mul(g, gout[0], n->out[0]), b)));
    return tg_graph_status(g);
}

/* y = a - int_div(a, b) * b */
static tg_status vjp_mod(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *a = n->in[0], *b = n->in[1];
    put(g, n, gin, 0, gout[0]);
    put(g, n, gin, 1, tg_neg(g, tg_mul(g, gout[0], tg_int_div(g, a, b))));
    return tg_graph_status(g);
}

static tg_status vjp_pow(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *a = n->in[0], *b = n->in[1], *y = n->out[0], *ct = gout[0];
    tg_var *zero = lit(g, 0.0);
    /* da = ct * where(b == 0, 0, b * a^(b-1)) */
    tg_var *da = tg_mul(g, b, tg_pow(g, a, tg_sub(g, b, lit(g, 1.0))));
    put(g, n, gin, 0, tg_mul(g, ct, tg_where(g, tg_eq(g, b, zero), zero, da)));
    /* db = ct * where(a == 0, 0, log(a') * y) with a' = 1 where a == 0, so that no NaN
     * from log(0) reaches higher derivatives through the unselected branch */
    tg_var *a0 = tg_eq(g, a, zero);
    tg_var *loga = tg_log(g, tg_where(g, a0, lit(g, 1.0), a));
    put(g, n, gin, 1, tg_mul(g, ct, tg_where(g, a0, zero, tg_mul(g, loga, y))));
    return tg_graph_status(g);
}

/* maximum and minimum: the input equal to the result gets ct, half of it on a tie. */
static tg_status vjp_extreme(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *ct = gout[0], *y = n->out[0], *zero = lit(g, 0.0);
    tg_var *ma = tg_eq(g, n->in[0], y), *mb = tg_eq(g, n->in[1], y);
    tg_var *half = tg_mul(g, ct, lit(g, 0.5));
    put(g, n, gin, 0, tg_where(g, ma, tg_where(g, mb, half, ct), zero));
    put(g, n, gin, 1, tg_where(g, mb, tg_where(g, ma, half, ct), zero));
    return tg_graph_status(g);
}

static tg_status vjp_neg(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    put(g, n, gin, 0, tg_neg(g, gout[0]));
    return tg_graph_status(g);
}

static tg_status vjp_abs(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, tg_sign(g, n->in[0]));
}

static tg_status vjp_exp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, n->out[0]);
}

static tg_status vjp_exp2(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, tg_mul(g, n->out[0], lit(g, 0.69314718055994530942)));
}

static tg_status vjp_log(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    put(g, n, gin, 0, tg_div(g, gout[0], n->in[0]));
    return tg_graph_status(g);
}

static tg_status vjp_log2(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *d = tg_mul(g, n->in[0], lit(g, 0.69314718055994530942));
    put(g, n, gin, 0, tg_div(g, gout[0], d));
    return tg_graph_status(g);
}

static tg_status vjp_log1p(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    put(g, n, gin, 0, tg_div(g, gout[0], tg_add(g, n->in[0], lit(g, 1.0))));
    return tg_graph_status(g);
}

static tg_status vjp_expm1(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, tg_add(g, n->out[0], lit(g, 1.0)));
}

/* d sqrt(x) = 0.5 / sqrt(x): +inf at 0 */
static tg_status vjp_sqrt(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    put(g, n, gin, 0, tg_div(g, tg_mul(g, gout[0], lit(g, 0.5)), n->out[0]));
    return tg_graph_status(g);
}

/* d x^(-1/2) = -0.5 * y / x */
static tg_status vjp_rsqrt(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *t = tg_div(g, tg_mul(g, gout[0], n->out[0]), n->in[0]);
    put(g, n, gin, 0, tg_mul(g, t, lit(g, -0.5)));
    return tg_graph_status(g);
}

static tg_status vjp_sin(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, tg_cos(g, n->in[0]));
}

static tg_status vjp_cos(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, tg_neg(g, tg_sin(g, n->in[0])));
}

/* d tan(x) = 1 + tan(x)^2 */
static tg_status vjp_tan(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *y = n->out[0];
    return chain1(g, n, gout, gin, tg_add(g, lit(g, 1.0), tg_mul(g, y, y)));
}

/* d tanh(x) = 1 - tanh(x)^2 */
static tg_status vjp_tanh(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *y = n->out[0];
    return chain1(g, n, gout, gin, tg_sub(g, lit(g, 1.0), tg_mul(g, y, y)));
}

/* d sigmoid(x) = y * (1 - y) */
static tg_status vjp_sigmoid(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *y = n->out[0];
    return chain1(g, n, gout, gin, tg_mul(g, y, tg_sub(g, lit(g, 1.0), y)));
}

/* d softplus(x) = sigmoid(x) */
static tg_status vjp_softplus(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, tg_sigmoid(g, n->in[0]));
}

/* d erf(x) = 2 / sqrt(pi) * exp(-x^2); erfc is its negation */
static tg_var *derf(tg_graph *g, tg_var *x, double sign) {
    tg_var *e = tg_exp(g, tg_neg(g, tg_mul(g, x, x)));
    return tg_mul(g, e, lit(g, sign * 1.12837916709551257390));
}

static tg_status vjp_erf(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, derf(g, n->in[0], 1.0));
}

static tg_status vjp_erfc(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, derf(g, n->in[0], -1.0));
}

static tg_status vjp_clip(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0], *lo = n->in[1], *hi = n->in[2], *ct = gout[0], *zero = lit(g, 0.0);
    tg_var *mx = tg_and(g, tg_ge(g, x, lo), tg_le(g, x, hi));
    tg_var *mlo = tg_and(g, tg_lt(g, x, lo), tg_le(g, lo, hi));
    tg_var *mhi = tg_not(g, tg_or(g, mx, mlo));
    put(g, n, gin, 0, tg_where(g, mx, ct, zero));
    put(g, n, gin, 1, tg_where(g, mlo, ct, zero));
    put(g, n, gin, 2, tg_where(g, mhi, ct, zero));
    return tg_graph_status(g);
}

static tg_status vjp_where(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *c = n->in[0], *ct = gout[0], *zero = lit(g, 0.0);
    put(g, n, gin, 1, tg_where(g, c, ct, zero));
    put(g, n, gin, 2, tg_where(g, c, zero, ct));
    return tg_graph_status(g);
}

static tg_status vjp_cast(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->in[0], *ct = gout[0];
    if (!in_float(n, 0) || !tg_dtype_is_float((tg_dtype)ct->type.dtype)) return TG_OK;
    gin[0] = ct->type.dtype == x->type.dtype ? ct : tg_cast(g, ct, (tg_dtype)x->type.dtype);
    return tg_graph_status(g);
}

/* d gammaln(x) = digamma(x); d digamma(x) = polygamma(1, x) */
static tg_status vjp_gammaln(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, tg_digamma(g, n->in[0]));
}

static tg_status vjp_digamma(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return chain1(g, n, gout, gin, tg_polygamma(g, lit(g, 1.0), n->in[0]));
}

/* polygamma(n, x): d/dx = polygamma(n + 1, x); n is integer-valued: zero */
static tg_status vjp_polygamma(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *m = n->in[0];
    if (in_float(n, 0)) gin[0] = tg_grad_zeros_like(g, m);
    put(g, n, gin, 1, tg_mul(g, gout[0], tg_polygamma(g, tg_add(g, m, lit(g, 1.0)), n->in[1])));
    return tg_graph_status(g);
}

/* betaln(a, b): d/da = digamma(a) - digamma(a + b), d/db likewise */
static tg_status vjp_betaln(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *a = n->in[0], *b = n->in[1], *dab = tg_digamma(g, tg_add(g, a, b));
    put(g, n, gin, 0, tg_mul(g, gout[0], tg_sub(g, tg_digamma(g, a), dab)));
    put(g, n, gin, 1, tg_mul(g, gout[0], tg_sub(g, tg_digamma(g, b), dab)));
    return tg_graph_status(g);
}

/* xlogy(x, y): d/dx = log(y); d/dy = x / y, taken as 0 where x == 0 (where the value is
 * 0 whatever y is, so xlogy(0, 0) has a finite gradient); xlog1py with log1p and 1 + y */
static tg_status vjp_xlogy_common(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                                  bool one_plus) {
    tg_var *x = n->in[0], *y = n->in[1], *ct = gout[0], *zero = lit(g, 0.0);
    tg_var *den = one_plus ? tg_add(g, y, lit(g, 1.0)) : y;
    put(g, n, gin, 0, tg_mul(g, ct, one_plus ? tg_log1p(g, y) : tg_log(g, y)));
    tg_var *dy = tg_where(g, tg_eq(g, x, zero), zero, tg_div(g, x, den));
    put(g, n, gin, 1, tg_mul(g, ct, dy));
    return tg_graph_status(g);
}

static tg_status vjp_xlogy(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return vjp_xlogy_common(g, n, gout, gin, false);
}

static tg_status vjp_xlog1py(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return vjp_xlogy_common(g, n, gout, gin, true);
}

/* d log(1 - exp(x)) = -exp(x) / (1 - exp(x)) = 1 / expm1(-x) negated */
static tg_status vjp_log1mexp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *d = tg_neg(g, tg_expm1(g, tg_neg(g, n->in[0])));
    put(g, n, gin, 0, tg_div(g, gout[0], d));
    return tg_graph_status(g);
}

/* logaddexp(a, b) = y: d/da = exp(a - y), d/db = exp(b - y) (1/2 each where a == b) */
static tg_status vjp_logaddexp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *y = n->out[0];
    put(g, n, gin, 0, tg_mul(g, gout[0], tg_exp(g, tg_sub(g, n->in[0], y))));
    put(g, n, gin, 1, tg_mul(g, gout[0], tg_exp(g, tg_sub(g, n->in[1], y))));
    return tg_graph_status(g);
}

/* d erfcx(x) = 2 x erfcx(x) - 2 / sqrt(pi) */
static tg_status vjp_erfcx(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *d = tg_sub(g, tg_mul(g, tg_mul(g, n->in[0], n->out[0]), lit(g, 2.0)),
                       lit(g, 1.12837916709551257390));
    return chain1(g, n, gout, gin, d);
}

/* d log Phi(x) = phi(x) / Phi(x) = sqrt(2 / pi) / erfcx(-x / sqrt 2), finite everywhere */
static tg_status vjp_log_ndtr(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *e = tg_erfcx(g, tg_mul(g, n->in[0], lit(g, -0.70710678118654752440)));
    put(g, n, gin, 0, tg_div(g, tg_mul(g, gout[0], lit(g, 0.79788456080286535588)), e));
    return tg_graph_status(g);
}

/* d erfinv(y) = sqrt(pi) / 2 exp(erfinv(y)^2) */
static tg_status vjp_erfinv(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    tg_var *x = n->out[0];
    return chain1(g, n, gout, gin,
                  tg_mul(g, tg_exp(g, tg_mul(g, x, x)), lit(g, 0.88622692545275801365)));
}

/* gammainc(a, x): d/dx = x^(a-1) e^-x / Gamma(a) (the gamma density), negated for
 * gammaincc. The derivative in a has no closed form: asking for it is an error
 * (.grad_undefined). */
static tg_status vjp_igam(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                          double sign) {
    tg_var *a = n->in[0], *x = n->in[1];
    tg_var *l =
        tg_sub(g, tg_sub(g, tg_xlogy(g, tg_sub(g, a, lit(g, 1.0)), x), x), tg_gammaln(g, a));
    put(g, n, gin, 1, tg_mul(g, gout[0], tg_mul(g, tg_exp(g, l), lit(g, sign))));
    return tg_graph_status(g);
}

static tg_status vjp_gammainc(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return vjp_igam(g, n, gout, gin, 1.0);
}

static tg_status vjp_gammaincc(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    return vjp_igam(g, n, gout, gin, -1.0);
}

/* The same C expression for every integer dtype (records' c_expr, read by the C JIT). */
#define CX_INTS(e) [TG_DT_I8] = e, [TG_DT_I16] = e, [TG_DT_I32] = e, [TG_DT_I64] = e, [TG_DT_U8] = e

/* ---- the records ---- */
/* One record per op; kept in this compact layout on purpose. */
/* clang-format off */
const tg_op_def tg_op_add = {
    .name = "add", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_add, i_add, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT},
    .c_expr = {[TG_DT_BOOL] = "%0 | %1", CX_INTS("(%T)((uint64_t)%0 + (uint64_t)%1)"),
                [TG_DT_F32] = "%0 + %1", [TG_DT_F64] = "%0 + %1"},
    .grad = TG_GRAD_VJP, .vjp = vjp_add,
};

const tg_op_def tg_op_sub = {
    .name = "sub", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_sub, i_sub, TG_EW_INT | TG_EW_FLOAT},
    .c_expr = {CX_INTS("(%T)((uint64_t)%0 - (uint64_t)%1)"), [TG_DT_F32] = "%0 - %1",
                [TG_DT_F64] = "%0 - %1"},
    .grad = TG_GRAD_VJP, .vjp = vjp_sub,
};

const tg_op_def tg_op_mul = {
    .name = "mul", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_mul, i_mul, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT},
    .c_expr = {[TG_DT_BOOL] = "%0 & %1", CX_INTS("(%T)((uint64_t)%0 * (uint64_t)%1)"),
                [TG_DT_F32] = "%0 * %1", [TG_DT_F64] = "%0 * %1"},
    .grad = TG_GRAD_VJP, .vjp = vjp_mul,
};

const tg_op_def tg_op_div = {
    .name = "div", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_div, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT | TG_EW_TOF64},
    .c_expr = {[TG_DT_F32] = "%0 / %1", [TG_DT_F64] = "%0 / %1"},
    .grad = TG_GRAD_VJP, .vjp = vjp_div,
};

const tg_op_def tg_op_int_div = {
    .name = "int_div", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_int_div, i_int_div, TG_EW_INT | TG_EW_FLOAT | TG_EW_BOOLI8},
    .c_expr = {CX_INTS("(%T)tg_rt_idiv(%0, %1)"), [TG_DT_F32] = "(float)tg_rt_fdiv(%0, %1)",
                [TG_DT_F64] = "tg_rt_fdiv(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_zero,
};

const tg_op_def tg_op_mod = {
    .name = "mod", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_mod, i_mod, TG_EW_INT | TG_EW_FLOAT | TG_EW_BOOLI8},
    .c_expr = {CX_INTS("(%T)tg_rt_imod(%0, %1)"), [TG_DT_F32] = "(float)tg_rt_fmod(%0, %1)",
                [TG_DT_F64] = "tg_rt_fmod(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_mod,
};

const tg_op_def tg_op_pow = {
    .name = "pow", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = ref_pow,
    .ew = {f_pow, i_pow, TG_EW_INT | TG_EW_FLOAT | TG_EW_BOOLI8},
    .c_expr = {[TG_DT_F32] = "powf(%0, %1)", [TG_DT_F64] = "pow(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_pow,
};

const tg_op_def tg_op_maximum = {
    .name = "maximum", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_maximum, i_maximum, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT},
    .c_expr = {[TG_DT_BOOL] = "%0 | %1", CX_INTS("(%0 > %1 ? %0 : %1)"),
                [TG_DT_F32] = "tg_rt_fmaxf(%0, %1)", [TG_DT_F64] = "tg_rt_fmax(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_extreme,
};

const tg_op_def tg_op_minimum = {
    .name = "minimum", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_minimum, i_minimum, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT},
    .c_expr = {[TG_DT_BOOL] = "%0 & %1", CX_INTS("(%0 < %1 ? %0 : %1)"),
                [TG_DT_F32] = "tg_rt_fminf(%0, %1)", [TG_DT_F64] = "tg_rt_fmin(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_extreme,
};

const tg_op_def tg_op_neg = {
    .name = "neg", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_neg, i_neg, TG_EW_INT | TG_EW_FLOAT},
    .c_expr = {CX_INTS("(%T)(0 - (uint64_t)%0)"), [TG_DT_F32] = "-%0", [TG_DT_F64] = "-%0"},
    .grad = TG_GRAD_VJP, .vjp = vjp_neg,
};

const tg_op_def tg_op_abs = {
    .name = "abs", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_abs, i_abs, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT},
    .c_expr = {CX_INTS("(%T)(%0 < 0 ? 0 - (uint64_t)%0 : (uint64_t)%0)"), [TG_DT_F32] = "fabsf(%0)",
                [TG_DT_F64] = "fabs(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_abs,
};

const tg_op_def tg_op_sign = {
    .name = "sign", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_sign, i_sign, TG_EW_INT | TG_EW_FLOAT},
    .c_expr = {CX_INTS("(%T)((%0 > 0) - (%0 < 0))"), [TG_DT_F32] = "tg_rt_signf(%0)",
                [TG_DT_F64] = "tg_rt_sign(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_zero,
};

const tg_op_def tg_op_exp = {
    .name = "exp", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_exp, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "expf(%0)", [TG_DT_F64] = "exp(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_exp,
};

const tg_op_def tg_op_exp2 = {
    .name = "exp2", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_exp2, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "exp2f(%0)", [TG_DT_F64] = "exp2(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_exp2,
};

const tg_op_def tg_op_log = {
    .name = "log", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_log, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "logf(%0)", [TG_DT_F64] = "log(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_log,
};

const tg_op_def tg_op_log2 = {
    .name = "log2", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_log2, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "log2f(%0)", [TG_DT_F64] = "log2(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_log2,
};

const tg_op_def tg_op_log1p = {
    .name = "log1p", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_log1p, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "log1pf(%0)", [TG_DT_F64] = "log1p(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_log1p,
};

const tg_op_def tg_op_expm1 = {
    .name = "expm1", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_expm1, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "expm1f(%0)", [TG_DT_F64] = "expm1(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_expm1,
};

const tg_op_def tg_op_sqrt = {
    .name = "sqrt", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_sqrt, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "sqrtf(%0)", [TG_DT_F64] = "sqrt(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_sqrt,
};

const tg_op_def tg_op_rsqrt = {
    .name = "rsqrt", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_rsqrt, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "1.0f / sqrtf(%0)", [TG_DT_F64] = "1.0 / sqrt(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_rsqrt,
};

const tg_op_def tg_op_sin = {
    .name = "sin", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_sin, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "sinf(%0)", [TG_DT_F64] = "sin(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_sin,
};

const tg_op_def tg_op_cos = {
    .name = "cos", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_cos, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "cosf(%0)", [TG_DT_F64] = "cos(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_cos,
};

const tg_op_def tg_op_tan = {
    .name = "tan", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_tan, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "tanf(%0)", [TG_DT_F64] = "tan(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_tan,
};

const tg_op_def tg_op_tanh = {
    .name = "tanh", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_tanh, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "tanhf(%0)", [TG_DT_F64] = "tanh(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_tanh,
};

const tg_op_def tg_op_sigmoid = {
    .name = "sigmoid", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_sigmoid, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "tg_rt_sigmoidf(%0)", [TG_DT_F64] = "tg_rt_sigmoid(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_sigmoid,
};

const tg_op_def tg_op_softplus = {
    .name = "softplus", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_softplus, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "tg_rt_softplusf(%0)", [TG_DT_F64] = "tg_rt_softplus(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_softplus,
};

const tg_op_def tg_op_erf = {
    .name = "erf", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_erf, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "erff(%0)", [TG_DT_F64] = "erf(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_erf,
};

const tg_op_def tg_op_erfc = {
    .name = "erfc", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_erfc, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "erfcf(%0)", [TG_DT_F64] = "erfc(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_erfc,
};

const tg_op_def tg_op_floor = {
    .name = "floor", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_floor, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "floorf(%0)", [TG_DT_F64] = "floor(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_zero,
};

const tg_op_def tg_op_ceil = {
    .name = "ceil", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_ceil, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "ceilf(%0)", [TG_DT_F64] = "ceil(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_zero,
};

const tg_op_def tg_op_round = {
    .name = "round", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_round, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "rintf(%0)", [TG_DT_F64] = "rint(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_zero,
};

const tg_op_def tg_op_lt = {
    .name = "lt", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_lt, i_lt, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_CMP},
    .c_expr = {[TG_DT_BOOL] = "%0 < %1", CX_INTS("%0 < %1"), [TG_DT_F32] = "%0 < %1",
                [TG_DT_F64] = "%0 < %1"},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_le = {
    .name = "le", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_le, i_le, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_CMP},
    .c_expr = {[TG_DT_BOOL] = "%0 <= %1", CX_INTS("%0 <= %1"), [TG_DT_F32] = "%0 <= %1",
                [TG_DT_F64] = "%0 <= %1"},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_gt = {
    .name = "gt", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_gt, i_gt, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_CMP},
    .c_expr = {[TG_DT_BOOL] = "%0 > %1", CX_INTS("%0 > %1"), [TG_DT_F32] = "%0 > %1",
                [TG_DT_F64] = "%0 > %1"},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_ge = {
    .name = "ge", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_ge, i_ge, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_CMP},
    .c_expr = {[TG_DT_BOOL] = "%0 >= %1", CX_INTS("%0 >= %1"), [TG_DT_F32] = "%0 >= %1",
                [TG_DT_F64] = "%0 >= %1"},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_eq = {
    .name = "eq", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_eq, i_eq, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_CMP},
    .c_expr = {[TG_DT_BOOL] = "%0 == %1", CX_INTS("%0 == %1"), [TG_DT_F32] = "%0 == %1",
                [TG_DT_F64] = "%0 == %1"},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_ne = {
    .name = "ne", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_ne, i_ne, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_CMP},
    .c_expr = {[TG_DT_BOOL] = "%0 != %1", CX_INTS("%0 != %1"), [TG_DT_F32] = "%0 != %1",
                [TG_DT_F64] = "%0 != %1"},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_isnan = {
    .name = "isnan", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_isnan, i_false, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_CMP},
    .c_expr = {[TG_DT_BOOL] = "0", CX_INTS("0"), [TG_DT_F32] = "isnan(%0)",
                [TG_DT_F64] = "isnan(%0)"},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_isinf = {
    .name = "isinf", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_isinf, i_false, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_CMP},
    .c_expr = {[TG_DT_BOOL] = "0", CX_INTS("0"), [TG_DT_F32] = "isinf(%0)",
                [TG_DT_F64] = "isinf(%0)"},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_and = {
    .name = "and", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {NULL, i_and, TG_EW_BOOL | TG_EW_INT},
    .c_expr = {[TG_DT_BOOL] = "%0 & %1", CX_INTS("(%T)(%0 & %1)")},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_or = {
    .name = "or", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {NULL, i_or, TG_EW_BOOL | TG_EW_INT},
    .c_expr = {[TG_DT_BOOL] = "%0 | %1", CX_INTS("(%T)(%0 | %1)")},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_xor = {
    .name = "xor", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {NULL, i_xor, TG_EW_BOOL | TG_EW_INT},
    .c_expr = {[TG_DT_BOOL] = "%0 ^ %1", CX_INTS("(%T)(%0 ^ %1)")},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_not = {
    .name = "not", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {NULL, i_not, TG_EW_BOOL | TG_EW_INT},
    .c_expr = {[TG_DT_BOOL] = "!%0", CX_INTS("(%T)~%0")},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_left_shift = {
    .name = "left_shift", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {NULL, i_left_shift, TG_EW_INT | TG_EW_BOOLI8},
    .c_expr = {CX_INTS("(%T)tg_rt_shl(%0, %1)")},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_right_shift = {
    .name = "right_shift", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {NULL, i_right_shift, TG_EW_INT | TG_EW_BOOLI8},
    .c_expr = {CX_INTS("(%T)tg_rt_shr(%0, %1)")},
    .grad = TG_GRAD_NONE,
};

const tg_op_def tg_op_clip = {
    .name = "clip", .min_in = 3, .max_in = 3, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_clip, i_clip, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT},
    .c_expr = {CX_INTS("(%T)tg_rt_iclip(%0, %1, %2)"),
                [TG_DT_F32] = "tg_rt_fminf(tg_rt_fmaxf(%0, %1), %2)",
                [TG_DT_F64] = "tg_rt_fmin(tg_rt_fmax(%0, %1), %2)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_clip,
};

const tg_op_def tg_op_where = {
    .name = "where", .min_in = 3, .max_in = 3, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = where_promote, .infer = where_infer, .ref = tg_ew_ref,
    .ew = {f_where, i_where, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT},
    .c_expr = {[TG_DT_BOOL] = "(%0 ? %1 : %2)", CX_INTS("(%0 ? %1 : %2)"),
                [TG_DT_F32] = "(%0 ? %1 : %2)", [TG_DT_F64] = "(%0 ? %1 : %2)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_where,
};

const tg_op_def tg_op_cast = {
    .name = "cast", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .attrs = cast_attrs, .nattrs = 1, .promote = NULL, .infer = cast_infer, .ref = cast_ref,
    .c_expr = {[TG_DT_BOOL] = "tg_rt_cast_bool(%0)", [TG_DT_I8] = "tg_rt_cast_i8(%0)",
                [TG_DT_I16] = "tg_rt_cast_i16(%0)", [TG_DT_I32] = "tg_rt_cast_i32(%0)",
                [TG_DT_I64] = "tg_rt_cast_i64(%0)", [TG_DT_U8] = "tg_rt_cast_u8(%0)",
                [TG_DT_F32] = "tg_rt_cast_f32(%0)", [TG_DT_F64] = "tg_rt_cast_f64(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_cast,
};
const tg_op_def tg_op_gammaln = {
    .name = "gammaln", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_gammaln, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_gammaln((double)%0)", [TG_DT_F64] = "tg_sf_gammaln(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_gammaln,
};

const tg_op_def tg_op_digamma = {
    .name = "digamma", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_digamma, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_digamma((double)%0)", [TG_DT_F64] = "tg_sf_digamma(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_digamma,
};

const tg_op_def tg_op_polygamma = {
    .name = "polygamma", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_polygamma, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_polygamma((double)%0, (double)%1)", [TG_DT_F64] = "tg_sf_polygamma(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_polygamma,
};

const tg_op_def tg_op_betaln = {
    .name = "betaln", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_betaln, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_betaln((double)%0, (double)%1)", [TG_DT_F64] = "tg_sf_betaln(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_betaln,
};

const tg_op_def tg_op_xlogy = {
    .name = "xlogy", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_xlogy, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_xlogy((double)%0, (double)%1)", [TG_DT_F64] = "tg_sf_xlogy(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_xlogy,
};

const tg_op_def tg_op_xlog1py = {
    .name = "xlog1py", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_xlog1py, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_xlog1py((double)%0, (double)%1)", [TG_DT_F64] = "tg_sf_xlog1py(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_xlog1py,
};

const tg_op_def tg_op_log1mexp = {
    .name = "log1mexp", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_log1mexp, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_log1mexp((double)%0)", [TG_DT_F64] = "tg_sf_log1mexp(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_log1mexp,
};

const tg_op_def tg_op_logaddexp = {
    .name = "logaddexp", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_logaddexp, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_logaddexp((double)%0, (double)%1)", [TG_DT_F64] = "tg_sf_logaddexp(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_logaddexp,
};

const tg_op_def tg_op_erfcx = {
    .name = "erfcx", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_erfcx, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_erfcx((double)%0)", [TG_DT_F64] = "tg_sf_erfcx(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_erfcx,
};

const tg_op_def tg_op_log_ndtr = {
    .name = "log_ndtr", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_log_ndtr, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_log_ndtr((double)%0)", [TG_DT_F64] = "tg_sf_log_ndtr(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_log_ndtr,
};

const tg_op_def tg_op_erfinv = {
    .name = "erfinv", .min_in = 1, .max_in = 1, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_erfinv, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_erfinv((double)%0)", [TG_DT_F64] = "tg_sf_erfinv(%0)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_erfinv,
};

const tg_op_def tg_op_gammainc = {
    .name = "gammainc", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_gammainc, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_gammainc((double)%0, (double)%1)", [TG_DT_F64] = "tg_sf_gammainc(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_gammainc,
    .grad_undefined = 1u << 0, /* no derivative in a */
};

const tg_op_def tg_op_gammaincc = {
    .name = "gammaincc", .min_in = 2, .max_in = 2, .nout = 1, .kind = TG_KIND_ELEMWISE,
    .promote = tg_ew_promote, .infer = tg_ew_infer, .ref = tg_ew_ref,
    .ew = {f_gammaincc, NULL, TG_EW_BOOL | TG_EW_INT | TG_EW_FLOAT | TG_EW_TOFLOAT},
    .c_expr = {[TG_DT_F32] = "(float)tg_sf_gammaincc((double)%0, (double)%1)", [TG_DT_F64] = "tg_sf_gammaincc(%0, %1)"},
    .grad = TG_GRAD_VJP, .vjp = vjp_gammaincc,
    .grad_undefined = 1u << 0, /* no derivative in a */
};
/* clang-format on */
