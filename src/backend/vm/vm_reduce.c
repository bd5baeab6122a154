/* vm_reduce.c - fast sum, mean, prod, max, min, argmax, argmin and logsumexp of f32/f64
 * tensors, and softmax and log_softmax (reductions whose result is spread over the row).
 * The kernel class is chosen from the op record's computation (`reduce` in ops.h: combine,
 * finalisation, NaN rule) and accumulators start from its identity, so a new reduction of
 * one of these forms runs here without a line in this file.
 *
 * The input's axes are simplified (extents of 1 dropped, neighbouring axes of the same
 * kind merged when their strides allow) into one of three layouts, anything else running
 * the reference kernel:
 *  - rows    [K, R] with the reduced axis contiguous (R stride 1), K any stride; the
 *            full reduction is K = 1;
 *  - columns [K1, R, K2] (K1 may be 1) with K2 contiguous: out[k1, :] is accumulated
 *            row by row, a whole contiguous row of K2 at a time.
 * Floats accumulate in double and are rounded once at the store, as the reference does.
 *  - Columns reduce every output element in the reference's order: bit-identical results
 *    for every op.
 *  - Rows: max and min are exact (NaN and signed-zero ties resolved by a second look at
 *    the row, which the reference's "first NaN, first of equals" rule needs); prod runs in
 *    order (exact); sum and mean add blocks of CHUNK elements with eight accumulators and
 *    then the blocks' sums in order, which rounds differently from the reference's single
 *    running sum (within n * eps of it) but never depends on the thread count.
 *  - argmax and argmin (i64 results) follow the reference's rule exactly in both layouts:
 *    the first NaN, else the first occurrence of the extreme.
 *  - logsumexp (rows only; columns run the reference): the reference's stable form,
 *    m = max (NaN wins), shift = m when finite else 0, log(sum(exp(x - shift))) + shift,
 *    with the exponentials from the vector kernel table (SLEEF, 1 ULP) summed in blocks
 *    as sum is: within a few ULP of the reference, independent of the thread count.
 *  - softmax and log_softmax (rows only, the output contiguous): the same shift and sum as
 *    logsumexp (softmax always shifts by m), then (x - shift) - log(sum) or
 *    exp(x - shift) / sum per element, in double and rounded once: f32 results are the
 *    reference's up to a rare last-bit rounding difference, f64 ones within a few ULP.
 * Work is split over the pool by rows, by column ranges, or, for few long rows, by
 * CHUNK blocks whose partial sums go through the workspace.
 */
#include "vm.h"

#include <math.h>

#define CHUNK      16384 /* elements per partial sum */
#define SPLIT_WORK 65536 /* elements above which the pool is used */

typedef enum { R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN, R_LSE, R_LSM, R_SM } rop;

#define LSE_BLK 512 /* elements per block of exponentials (on the stack) */

/* The kernel class of op, from its record's computation (reduce, ops.h): false when this
 * file has no kernel for it (any, all, and max/min forms without the NaN rule coded here). */
static bool rop_of(int op, rop *r) {
    const tg_reduce_def *d = &tg_op_table[op]->reduce;
    /* max and min as NumPy's (chunk_ext, ext_fix, row_arg); sum and prod in IEEE arithmetic */
    bool ext = (d->combine == TG_RED_MAX || d->combine == TG_RED_MIN) && d->nan_wins;
    bool mx = d->combine == TG_RED_MAX, sum = d->combine == TG_RED_SUM && !d->nan_wins;
    bool prod = d->combine == TG_RED_PROD && !d->nan_wins;
    switch (d->fin) {
    case TG_FIN_NONE:
        *r = ext ? (mx ? R_MAX : R_MIN) : sum ? R_SUM : R_PROD;
        return ext || sum || prod;
    case TG_FIN_MEAN:
        *r = R_MEAN;
        return sum;
    case TG_FIN_ARG:
        *r = mx ? R_ARGMAX : R_ARGMIN;
        return ext;
    case TG_FIN_LOGSUMEXP:
        *r = R_LSE;
        return sum;
    case TG_FIN_LOG_SOFTMAX:
        *r = R_LSM;
        return sum;
    case TG_FIN_SOFTMAX:
        *r = R_SM;
        return sum;
    default:
        return false;
    }
}

bool tg_vm_reduce_ok(const tg_node *n) {
    rop r;
    if (!rop_of(n->op, &r) || n->nin != 1 || n->nout != 1) return false;
    tg_dtype in = (tg_dtype)n->in[0]->type.dtype, out = (tg_dtype)n->out[0]->type.dtype;
    bool arg = r == R_ARGMAX || r == R_ARGMIN;
    return (in == TG_DT_F32 || in == TG_DT_F64) && out == (arg ? TG_DT_I64 : in);
}

/* Doubles of workspace: one per output and per chunk (softmax rows need none). */
static int64_t ws_doubles(rop r, int64_t nin, int64_t nout) {
    return r == R_LSM || r == R_SM ? 2 : nout + nin / CHUNK + 2;
}

size_t tg_vm_reduce_ws(const tg_node *n, const tg_type *in, const tg_type *out, int nthreads) {
    (void)nthreads;
    int64_t ni = 0, no = 0;
    rop r;
    if (!rop_of(n->op, &r) || !tg_shape_size(in[0].ndim, in[0].shape, &ni) ||
        !tg_shape_size(out[0].ndim, out[0].shape, &no))
        return 0;
    return (size_t)ws_doubles(r, ni, no) * sizeof(double);
}

/* ---- rows ---- */

typedef struct red_job {
    rop r;
    double id; /* the record's identity: where accumulators start */
    bool f64;
    int64_t K, R;            /* rows, reduced length */
    int64_t ks;              /* row stride, elements */
    int64_t K1, K2, ks1, rs; /* columns: outer count and stride, inner count, row stride */
    const char *x;
    char *y;
    double *ws;    /* partials (rows) or accumulators (columns) */
    tg_vk_fn vexp; /* logsumexp: the f64 exp kernel */
    int64_t row;   /* the row being chunked */
    int64_t nchunks;
} red_job;

static inline double ld(const char *x, bool f64, int64_t i) {
    if (f64) return ((const double *)x)[i];
    return ((const float *)x)[i];
}

static inline void st(char *y, bool f64, int64_t i, double v) {
    if (f64)
        ((double *)y)[i] = v;
    else
        ((float *)y)[i] = (float)v;
}

/* Sum of x[0..n) with eight accumulators, added up in a fixed order. */
static double chunk_sum(const char *x, bool f64, int64_t n) {
    double a[8] = {0};
    int64_t i = 0;
    if (f64) {
        const double *p = (const double *)x;
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) a[k] += p[i + k];
    } else {
        const float *p = (const float *)x;
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) a[k] += (double)p[i + k];
    }
    for (; i < n; i++) a[i & 7] += ld(x, f64, i);
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* max (sgn > 0) or min of the non-NaN values of x[0..n), starting from init (the
 * identity, -inf or +inf); *nan set when a NaN is seen. */
static double chunk_ext(const char *x, bool f64, int64_t n, int sgn, double init, bool *nan) {
    double m[4] = {init, init, init, init};
    bool sawnan = false;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) {
            double v = ld(x, f64, i + k);
            sawnan = sawnan || v != v;
            if (sgn > 0 ? v > m[k] : v < m[k]) m[k] = v;
        }
    for (; i < n; i++) {
        double v = ld(x, f64, i);
        sawnan = sawnan || v != v;
        if (sgn > 0 ? v > m[0] : v < m[0]) m[0] = v;
    }
    double r = m[0];
    for (int k = 1; k < 4; k++)
        if (sgn > 0 ? m[k] > r : m[k] < r) r = m[k];
    *nan = *nan || sawnan;
    return r;
}

/* The reference's answer for a row whose extreme (ignoring NaN) is m: the first NaN if
 * any, else the first element equal to m (which matters for +-0). */
static double ext_fix(const char *x, bool f64, int64_t n, double m, bool nan) {
    if (!nan && m != 0.0) return m;
    for (int64_t i = 0; i < n; i++) {
        double v = ld(x, f64, i);
        if (nan ? v != v : v == m) return v;
    }
    return m;
}

/* argmax (sgn > 0) or argmin of x[0..n): the first NaN, else the first extreme. */
static int64_t row_arg(const char *x, bool f64, int64_t n, int sgn) {
    double best = ld(x, f64, 0);
    int64_t arg = 0;
    if (best != best) return 0;
    for (int64_t i = 1; i < n; i++) {
        double v = ld(x, f64, i);
        if (v != v) return i;
        if (sgn > 0 ? v > best : v < best) {
            best = v;
            arg = i;
        }
    }
    return arg;
}

/* exp(x[c + i] - shift) for i in [0, k) into t, in double. */
static void exp_block(const red_job *J, const char *x, int64_t c, int64_t k, double shift,
                      double *t) {
    for (int64_t i = 0; i < k; i++) t[i] = ld(x, J->f64, c + i) - shift;
    const void *in[1] = {t};
    int64_t str[1] = {1};
    J->vexp(NULL, k, t, in, str);
}

/* The shift of the stable forms for x[0..n) (n >= 1): m = the maximum, a NaN winning;
 * softmax shifts by m, logsumexp and log_softmax by m when finite, else by 0. */
static double row_shift(const red_job *J, const char *x, int64_t n) {
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double v = ld(x, J->f64, i);
        if (v != v) {
            m = v;
            break;
        }
        if (v > m) m = v;
    }
    return J->r == R_SM || isfinite(m) ? m : 0.0;
}

/* sum(exp(x - shift)) of x[0..n) (n >= 1), summed in blocks as sum is; sets *shift. */
static double row_expsum(const red_job *J, const char *x, int64_t n, double *shift) {
    *shift = row_shift(J, x, n);
    double t[LSE_BLK], s = 0.0;
    for (int64_t c = 0; c < n; c += LSE_BLK) {
        int64_t k = n - c < LSE_BLK ? n - c : LSE_BLK;
        exp_block(J, x, c, k, *shift, t);
        s += chunk_sum((const char *)t, true, k);
    }
    return s;
}

/* logsumexp of x[0..n) (n >= 1), as the reference's stable form (see the top). */
static double row_lse(const red_job *J, const char *x, int64_t n) {
    double shift, s = row_expsum(J, x, n, &shift);
    return log(s) + shift;
}

/* log_softmax, (x - shift) - log(s), or softmax, exp(x - shift) / s, of the row x[0..n)
 * (n >= 1) into the contiguous row y. */
static void row_softmax(const red_job *J, const char *x, char *y, int64_t n) {
    bool f64 = J->f64;
    double shift, s = row_expsum(J, x, n, &shift);
    if (J->r == R_LSM) {
        double ls = log(s);
        for (int64_t i = 0; i < n; i++) st(y, f64, i, (ld(x, f64, i) - shift) - ls);
        return;
    }
    double t[LSE_BLK];
    for (int64_t c = 0; c < n; c += LSE_BLK) {
        int64_t k = n - c < LSE_BLK ? n - c : LSE_BLK;
        exp_block(J, x, c, k, shift, t);
        for (int64_t i = 0; i < k; i++) st(y, f64, c + i, t[i] / s);
    }
}

/* Rows [lo, hi) of softmax or log_softmax with rows of at most LSE_BLK elements: as many
 * rows as fit in a block share one call of the exp kernel (which gives every element the
 * same result wherever it sits), so short rows (10 classes) do not pay a call each. The
 * results are those of row_softmax. */
static void rows_softmax_short(const red_job *J, int64_t lo, int64_t hi) {
    bool f64 = J->f64;
    int64_t n = J->R, es = f64 ? 8 : 4, per = LSE_BLK / n;
    double t[LSE_BLK], shift[LSE_BLK];
    for (int64_t k0 = lo; k0 < hi; k0 += per) {
        int64_t nk = hi - k0 < per ? hi - k0 : per;
        for (int64_t k = 0; k < nk; k++) {
            const char *x = J->x + (k0 + k) * J->ks * es;
            shift[k] = row_shift(J, x, n);
            for (int64_t i = 0; i < n; i++) t[k * n + i] = ld(x, f64, i) - shift[k];
        }
        const void *in[1] = {t};
        int64_t str[1] = {1};
        J->vexp(NULL, nk * n, t, in, str);
        for (int64_t k = 0; k < nk; k++) {
            const char *x = J->x + (k0 + k) * J->ks * es;
            char *y = J->y + (k0 + k) * n * es;
            const double *e = t + k * n;
            double s = 0.0 + chunk_sum((const char *)e, true, n);
            if (J->r == R_LSM) {
                double ls = log(s);
                for (int64_t i = 0; i < n; i++) st(y, f64, i, (ld(x, f64, i) - shift[k]) - ls);
            } else {
                for (int64_t i = 0; i < n; i++) st(y, f64, i, e[i] / s);
            }
        }
    }
}

/* The whole row of n elements at x, on one thread. */
static double row_reduce(const red_job *J, const char *x, int64_t n) {
    bool f64 = J->f64;
    switch (J->r) {
    case R_LSE:
        return row_lse(J, x, n);
    case R_SUM:
    case R_MEAN: {
        double s = J->id;
        int64_t es = f64 ? 8 : 4;
        for (int64_t c = 0; c < n; c += CHUNK)
            s += chunk_sum(x + c * es, f64, n - c < CHUNK ? n - c : CHUNK);
        return J->r == R_MEAN ? s / (double)n : s;
    }
    case R_PROD: {
        double p = J->id;
        for (int64_t i = 0; i < n; i++) p *= ld(x, f64, i);
        return p;
    }
    default: {
        bool nan = false;
        int sgn = J->r == R_MAX ? 1 : -1;
        double m = chunk_ext(x, f64, n, sgn, J->id, &nan);
        return ext_fix(x, f64, n, m, nan);
    }
    }
}

static void rows_task(void *arg, int ith, int nth) {
    const red_job *J = arg;
    int64_t lo, hi, es = J->f64 ? 8 : 4;
    tg_pool_share(J->K, ith, nth, 1, &lo, &hi);
    if ((J->r == R_LSM || J->r == R_SM) && J->R <= LSE_BLK) {
        rows_softmax_short(J, lo, hi);
        return;
    }
    if (J->r == R_LSM || J->r == R_SM) {
        for (int64_t k = lo; k < hi; k++)
            row_softmax(J, J->x + k * J->ks * es, J->y + k * J->R * es, J->R);
        return;
    }
    if (J->r == R_ARGMAX || J->r == R_ARGMIN) {
        for (int64_t k = lo; k < hi; k++)
            ((int64_t *)J->y)[k] =
                row_arg(J->x + k * J->ks * es, J->f64, J->R, J->r == R_ARGMAX ? 1 : -1);
        return;
    }
    for (int64_t k = lo; k < hi; k++)
        st(J->y, J->f64, k, row_reduce(J, J->x + k * J->ks * es, J->R));
}

/* One long row split into chunks: partial results per chunk in ws. */
static void chunks_task(void *arg, int ith, int nth) {
    const red_job *J = arg;
    int64_t lo, hi, es = J->f64 ? 8 : 4;
    const char *x = J->x + J->row * J->ks * es;
    tg_pool_share(J->nchunks, ith, nth, 1, &lo, &hi);
    for (int64_t c = lo; c < hi; c++) {
        int64_t off = c * CHUNK, n = J->R - off < CHUNK ? J->R - off : CHUNK;
        if (J->r == R_SUM || J->r == R_MEAN) {
            J->ws[c] = chunk_sum(x + off * es, J->f64, n);
        } else {
            bool nan = false;
            J->ws[c] = chunk_ext(x + off * es, J->f64, n, J->r == R_MAX ? 1 : -1, J->id, &nan);
            if (nan) J->ws[c] = NAN;
        }
    }
}

bool tg_vm_reduce_splits(int64_t n, int nthreads) { return nthreads > 1 && n >= SPLIT_WORK; }

static void run_rows(red_job *J, tg_pool *pool, int nth) {
    int64_t n = J->K * J->R, es = J->f64 ? 8 : 4;
    if (!tg_vm_reduce_splits(n, nth)) {
        rows_task(J, 0, 1);
        return;
    }
    if (J->K >= 4 * (int64_t)nth || J->r == R_PROD || J->r == R_ARGMAX || J->r == R_ARGMIN ||
        J->r == R_LSE || J->r == R_LSM || J->r == R_SM || J->R < 2 * CHUNK) {
        tg_pool_run(pool, rows_task, J);
        return;
    }
    /* few long rows: each row's chunks over the pool, then combined in order */
    for (int64_t k = 0; k < J->K; k++) {
        J->row = k;
        J->nchunks = (J->R + CHUNK - 1) / CHUNK;
        tg_pool_run(pool, chunks_task, J);
        const char *x = J->x + k * J->ks * es;
        double v;
        if (J->r == R_SUM || J->r == R_MEAN) {
            double s = J->id;
            for (int64_t c = 0; c < J->nchunks; c++) s += J->ws[c];
            v = J->r == R_MEAN ? s / (double)J->R : s;
        } else {
            bool nan = false;
            int sgn = J->r == R_MAX ? 1 : -1;
            double m = J->id;
            for (int64_t c = 0; c < J->nchunks; c++) {
                double p = J->ws[c];
                if (p != p)
                    nan = true;
                else if (sgn > 0 ? p > m : p < m)
                    m = p;
            }
            v = ext_fix(x, J->f64, J->R, m, nan);
        }
        st(J->y, J->f64, k, v);
    }
}

/* ---- columns ---- */

/* Output elements [lo, hi) of K1 x K2 (flat). */
static void cols_range(const red_job *J, int64_t lo, int64_t hi) {
    bool f64 = J->f64;
    int64_t es = f64 ? 8 : 4;
    while (lo < hi) {
        int64_t k1 = lo / J->K2, k2 = lo % J->K2;
        int64_t m = J->K2 - k2 < hi - lo ? J->K2 - k2 : hi - lo;
        const char *x = J->x + (k1 * J->ks1 + k2) * es;
        double *acc = J->ws + lo;
        if (J->r == R_ARGMAX || J->r == R_ARGMIN) {
            /* per element: the running extreme in acc, its row in y; a NaN stays */
            bool mx = J->r == R_ARGMAX;
            int64_t *arg = (int64_t *)J->y + lo;
            for (int64_t j = 0; j < m; j++) {
                acc[j] = ld(x, f64, j);
                arg[j] = 0;
            }
            for (int64_t r = 1; r < J->R; r++) {
                const char *row = x + r * J->rs * es;
                for (int64_t j = 0; j < m; j++) {
                    double a = acc[j], v = ld(row, f64, j);
                    if (a == a && (v != v || (mx ? v > a : v < a))) {
                        acc[j] = v;
                        arg[j] = r;
                    }
                }
            }
            lo += m;
            continue;
        }
        if (J->r == R_MAX || J->r == R_MIN) {
            /* the reference's rule per element: the first NaN stays, a strictly greater
             * (smaller) value replaces, ties keep the first */
            bool mx = J->r == R_MAX;
            for (int64_t j = 0; j < m; j++) acc[j] = ld(x, f64, j);
            for (int64_t r = 1; r < J->R; r++) {
                const char *row = x + r * J->rs * es;
                for (int64_t j = 0; j < m; j++) {
                    double a = acc[j], v = ld(row, f64, j);
                    bool take = a == a && (v != v || (mx ? v > a : v < a));
                    acc[j] = take ? v : a;
                }
            }
        } else {
            bool prod = J->r == R_PROD;
            for (int64_t j = 0; j < m; j++) acc[j] = J->id;
            for (int64_t r = 0; r < J->R; r++) {
                const char *row = x + r * J->rs * es;
                if (prod)
                    for (int64_t j = 0; j < m; j++) acc[j] *= ld(row, f64, j);
                else if (f64)
                    for (int64_t j = 0; j < m; j++) acc[j] += ((const double *)row)[j];
                else
                    for (int64_t j = 0; j < m; j++) acc[j] += (double)((const float *)row)[j];
            }
            if (J->r == R_MEAN)
                for (int64_t j = 0; j < m; j++) acc[j] /= (double)J->R;
        }
        for (int64_t j = 0; j < m; j++) st(J->y, f64, lo + j, acc[j]);
        lo += m;
    }
}

static void cols_task(void *arg, int ith, int nth) {
    const red_job *J = arg;
    int64_t lo, hi;
    tg_pool_share(J->K1 * J->K2, ith, nth, 16, &lo, &hi);
    cols_range(J, lo, hi);
}

/* ---- dispatch ---- */

tg_status tg_vm_exec_reduce(vm_exec *e) {
    const tg_tensor *x = e->in[0];
    tg_tensor *y = e->out[0];
    red_job J;
    memset(&J, 0, sizeof J);
    if (!rop_of(e->node->op, &J.r)) return TG_EUNSUPPORTED;
    tg_axes ax;
    const tg_op_def *def = tg_op_table[e->node->op];
    if (!tg_reduce_axes(e->node->attrs, def->nattrs, x->ndim, &ax, NULL, 0)) return TG_EUNSUPPORTED;
    const bool *red = ax.red;
    J.id = def->reduce.identity;
    J.f64 = x->dtype == TG_DT_F64;
    if (J.r == R_LSE || J.r == R_LSM || J.r == R_SM) {
        const vm_ins_info *info = e->info;
        const tg_vk_table *t = tg_vk_table_get(info ? info->isa : TG_VK_GENERIC);
        J.vexp = (t ? t : &tg_vk_table_generic)->f[TG_OP_EXP][1];
        if (!J.vexp) return TG_EUNSUPPORTED;
    }
    int64_t nelem = tg_tensor_size(x), nout = tg_tensor_size(y);
    if (nelem == 0 || nout == 0 || !tg_tensor_is_contiguous(y)) return TG_EUNSUPPORTED;
    if ((J.r == R_LSM || J.r == R_SM) && nout != nelem) return TG_EUNSUPPORTED;
    /* simplified layout */
    int64_t shape[TG_MAX_DIMS], str[TG_MAX_DIMS];
    bool kind[TG_MAX_DIMS];
    int m = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 1) continue;
        if (m > 0 && kind[m - 1] == red[d] && str[m - 1] == x->strides[d] * x->shape[d]) {
            shape[m - 1] *= x->shape[d];
            str[m - 1] = x->strides[d];
            continue;
        }
        shape[m] = x->shape[d];
        str[m] = x->strides[d];
        kind[m++] = red[d];
    }
    J.x = tg_tensor_data(x);
    J.y = tg_tensor_data(y);
    J.ws = e->ws;
    int64_t need = ws_doubles(J.r, nelem, nout) * (int64_t)sizeof(double);
    if (!e->ws || (int64_t)e->ws_bytes < need) return TG_EUNSUPPORTED;
    int nth = e->pool ? e->nthreads : 1;
    if (m == 1 && kind[0] && str[0] == 1) { /* everything */
        J.K = 1;
        J.R = shape[0];
        run_rows(&J, e->pool, nth);
        return TG_OK;
    }
    if (m == 2 && !kind[0] && kind[1] && str[1] == 1) { /* rows */
        J.K = shape[0];
        J.ks = str[0];
        J.R = shape[1];
        run_rows(&J, e->pool, nth);
        return TG_OK;
    }
    if (J.r == R_LSE || J.r == R_LSM || J.r == R_SM) return TG_EUNSUPPORTED; /* columns */
    int off = m == 2 ? 0 : 1; /* columns: [R, K2] or [K1, R, K2] */
    if ((m == 2 || m == 3) && kind[off] && !kind[off + 1] && str[off + 1] == 1 &&
        (m == 2 || !kind[0])) {
        J.K1 = m == 3 ? shape[0] : 1;
        J.ks1 = m == 3 ? str[0] : 0;
        J.R = shape[off];
        J.rs = str[off];
        J.K2 = shape[off + 1];
        if (nth > 1 && nelem >= SPLIT_WORK && J.K1 * J.K2 >= 64)
            tg_pool_run(e->pool, cols_task, &J);
        else
            cols_range(&J, 0, J.K1 * J.K2);
        return TG_OK;
    }
    return TG_EUNSUPPORTED;
}
