/* print.c - tg_tensor_print: NumPy repr-style text for a tensor.
 *
 * Follows numpy.array_repr with the default print options (linewidth 75, precision 8,
 * threshold 1000, edgeitems 3, floatmode 'maxprec', sign '-'):
 *  - `array([1. , 2.5, 3. ], dtype=float32)`; the dtype suffix is left out for float64,
 *    int64 and bool unless the array is empty; 0-d is `array(2.5)`; an empty array other
 *    than shape (0,) is `array([], shape=(2, 0), dtype=float32)`.
 *  - Floats: the shortest digits that round-trip the value in its own dtype, at most 8
 *    digits after the point, trailing zeros dropped ("1."), all elements padded to a
 *    common layout; scientific notation when a finite non-zero |x| is >= 1e8 or < 1e-4,
 *    or max/min > 1000; nan / inf / -inf aligned right.
 *  - Integers right-aligned to a common width; bool as True/False (" True" inside arrays).
 *  - Nested brackets, rows wrapped at the line width, blank lines between blocks of rank
 *    3 and more; more than 1000 elements are summarised with "..." and 3 edge items, the
 *    layout computed over the shown elements only.
 * Known differences from NumPy: the dtype is written as NumPy's name of the tgraph dtype;
 * shortest digits come from printf/strtod round trips instead of Dragon4 (the same digits
 * except, possibly, in rare ties of the 8-digit cut-off); a newline is written after the
 * text (as print() does).
 * Invariants: the text is built in one ctx-allocated buffer, written once; nothing is
 * written to f when an allocation fails.
 */
#include "core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <float.h>
#include <locale.h>
#include <string.h>

#define LINE_WIDTH      75
#define EDGE_ITEMS      3
#define THRESHOLD       1000
#define FLOAT_PRECISION 8

/* ---- a growable output buffer ---- */

typedef struct sbuf {
    tg_ctx *ctx; /* allocator */
    char *p;     /* text, not NUL-terminated */
    size_t len;  /* bytes used */
    size_t cap;  /* bytes allocated */
    bool oom;    /* an allocation failed: further appends are dropped */
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->cap - b->len < n) {
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap - b->len < n) {
            if (!tg_size_mul(ncap, 2, &ncap)) {
                b->oom = true;
                return;
            }
        }
        char *np = tg_mem_realloc(b->ctx, b->p, b->cap, ncap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_spaces(sbuf *b, int n) {
    static const char sp[] = "                                ";
    while (n > 0) {
        int k = n < (int)sizeof sp - 1 ? n : (int)sizeof sp - 1;
        sb_putn(b, sp, (size_t)k);
        n -= k;
    }
}

static void sb_rstrip(sbuf *b) {
    while (b->len > 0 && b->p[b->len - 1] == ' ') b->len--;
}

/* ---- decimal digits of floats ---- */

typedef struct fdig {
    char d[24]; /* significant digits, no trailing zeros (at least one digit) */
    int n;      /* count */
    int e;      /* value = d[0].d[1]d[2]... * 10^e */
} fdig;

/* Splits printf "%e" output ("1.2345e+02", "5e-01") into digits and exponent. */
static void from_e(const char *s, fdig *g) {
    g->n = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && g->n < (int)sizeof g->d - 1) g->d[g->n++] = *s;
    g->e = *s == 'e' ? atoi(s + 1) : 0;
    while (g->n > 1 && g->d[g->n - 1] == '0') g->n--;
    g->d[g->n] = '\0';
}

/* Shortest digits that read back as v (finite, >= 0) in its dtype, cut to at most
 * `maxfrac` digits after the point of the chosen notation (rounded). */
static void float_digits(double v, bool f32, bool sci, fdig *g) {
    char tmp[64];
    int maxp = f32 ? 9 : 17;
    for (int p = 1; p <= maxp; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, v);
        bool ok = f32 ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v;
        if (ok || p == maxp) break;
    }
    from_e(tmp, g);
    int frac = sci ? g->n - 1 : g->n - 1 - g->e;
    if (frac <= FLOAT_PRECISION) return;
    if (sci) {
        snprintf(tmp, sizeof tmp, "%.*e", FLOAT_PRECISION, v);
        from_e(tmp, g);
        return;
    }
    /* Positional cut-off: round to 8 decimals, then re-split into digits. */
    snprintf(tmp, sizeof tmp, "%.*f", FLOAT_PRECISION, v);
    char *dot = strchr(tmp, '.');
    int ilen = (int)(dot - tmp);
    char all[64];
    int n = 0;
    for (char *c = tmp; *c; c++)
        if (*c != '.') all[n++] = *c;
    all[n] = '\0';
    int lead = 0; /* leading zeros */
    while (lead < n - 1 && all[lead] == '0') lead++;
    if (all[lead] == '0') { /* rounded to zero */
        g->n = 1;
        g->d[0] = '0';
        g->d[1] = '\0';
        g->e = 0;
        return;
    }
    g->e = ilen - 1 - lead;
    g->n = 0;
    for (int i = lead; i < n && g->n < (int)sizeof g->d - 1; i++) g->d[g->n++] = all[i];
    while (g->n > 1 && g->d[g->n - 1] == '0') g->n--;
    g->d[g->n] = '\0';
}

/* Integer and fraction parts of a positional rendering of digits g. */
static void positional_parts(const fdig *g, char *ip, char *fp) {
    int k = 0;
    if (g->e < 0) {
        ip[k++] = '0';
    } else {
        for (int i = 0; i <= g->e; i++) ip[k++] = i < g->n ? g->d[i] : '0';
    }
    ip[k] = '\0';
    k = 0;
    if (g->e < 0) {
        for (int i = 0; i < -g->e - 1; i++) fp[k++] = '0';
        for (int i = 0; i < g->n; i++) fp[k++] = g->d[i];
    } else {
        for (int i = g->e + 1; i < g->n; i++) fp[k++] = g->d[i];
    }
    fp[k] = '\0';
}

/* ---- element formats ---- */

typedef struct efmt {
    tg_dtype dt;   /* element dtype */
    bool scalar;   /* 0-d array: bools without the leading space */
    bool sci;      /* floats: scientific notation */
    int pad_left;  /* floats: characters before the point (sign included) */
    int pad_right; /* floats: characters after the point (positional) */
    int precision; /* floats, scientific: fraction digits */
    int exp_size;  /* floats, scientific: exponent digits */
    int width;     /* integers: common width */
} efmt;

static double elem_f64(const tg_tensor *t, const int64_t *idx) {
    return tg_load_f64(tg_tensor_at(t, idx), t->dtype);
}

/* Visits the shown elements (all, or the edge items of summarised axes). */
typedef struct shown {
    const tg_tensor *t;
    bool summary;
    int64_t rshape[TG_MAX_DIMS]; /* shown extent of each axis */
    int64_t ridx[TG_MAX_DIMS];   /* position in the shown index space */
    int64_t idx[TG_MAX_DIMS];    /* the corresponding tensor index */
    bool more;                   /* idx is valid */
} shown;

static void shown_map(shown *s) {
    for (int i = 0; i < s->t->ndim; i++) {
        int64_t n = s->t->shape[i], r = s->ridx[i];
        s->idx[i] =
            s->summary && n > 2 * EDGE_ITEMS && r >= EDGE_ITEMS ? n - 2 * EDGE_ITEMS + r : r;
    }
}

static void shown_init(shown *s, const tg_tensor *t, bool summary) {
    s->t = t;
    s->summary = summary;
    s->more = true;
    for (int i = 0; i < t->ndim; i++) {
        s->rshape[i] = summary && t->shape[i] > 2 * EDGE_ITEMS ? 2 * EDGE_ITEMS : t->shape[i];
        s->ridx[i] = 0;
        if (t->shape[i] == 0) s->more = false;
    }
    shown_map(s);
}

static void shown_next(shown *s) {
    s->more = tg_index_next(s->t->ndim, s->rshape, s->ridx);
    shown_map(s);
}

static void float_fill(efmt *f, const tg_tensor *t, bool summary) {
    const bool f32 = t->dtype == TG_DT_F32;
    bool any_finite = false, any_nonfinite = false, neginf = false, any_nonzero = false;
    double maxv = 0, minv = 0;
    shown s;
    for (shown_init(&s, t, summary); s.more; shown_next(&s)) {
        double v = elem_f64(t, s.idx);
        if (!isfinite(v)) {
            any_nonfinite = true;
            if (isinf(v) && v < 0) neginf = true;
            continue;
        }
        any_finite = true;
        double a = fabs(v);
        if (a == 0) continue;
        if (!any_nonzero || a > maxv) maxv = a;
        if (!any_nonzero || a < minv) minv = a;
        any_nonzero = true;
    }
    f->sci = any_nonzero && (maxv >= 1e8 || minv < 0.0001 || maxv / minv > 1000.0);
    f->pad_left = f->pad_right = 0;
    f->precision = 0;
    f->exp_size = -1;
    if (any_finite) {
        for (shown_init(&s, t, summary); s.more; shown_next(&s)) {
            double v = elem_f64(t, s.idx);
            if (!isfinite(v)) continue;
            fdig g;
            float_digits(fabs(v), f32, f->sci, &g);
            int ilen = (signbit(v) ? 1 : 0) + (f->sci ? 1 : 0);
            if (f->sci) {
                int frac = g.n - 1;
                int ae = abs(g.e), edig = ae >= 100 ? 3 : 2;
                if (frac > f->precision) f->precision = frac;
                if (edig > f->exp_size) f->exp_size = edig;
            } else {
                char ip[40], fp[40];
                positional_parts(&g, ip, fp);
                ilen += (int)strlen(ip);
                if ((int)strlen(fp) > f->pad_right) f->pad_right = (int)strlen(fp);
            }
            if (ilen > f->pad_left) f->pad_left = ilen;
        }
        if (f->sci) f->pad_right = f->exp_size + 2 + f->precision;
    }
    if (any_nonfinite) {
        int offset = f->pad_right + 1;
        int inflen = 3 + (neginf ? 1 : 0);
        if (3 - offset > f->pad_left) f->pad_left = 3 - offset;
        if (inflen - offset > f->pad_left) f->pad_left = inflen - offset;
    }
}

static int int_len(int64_t v) {
    char tmp[24];
    return snprintf(tmp, sizeof tmp, "%lld", (long long)v);
}

static void fill_format(efmt *f, const tg_tensor *t, bool summary) {
    memset(f, 0, sizeof *f);
    f->dt = t->dtype;
    f->scalar = t->ndim == 0;
    if (tg_dtype_is_float(t->dtype)) {
        float_fill(f, t, summary);
    } else if (tg_dtype_is_int(t->dtype)) {
        shown s;
        for (shown_init(&s, t, summary); s.more; shown_next(&s)) {
            int n = int_len(tg_load_i64(tg_tensor_at(t, s.idx), t->dtype));
            if (n > f->width) f->width = n;
        }
    }
}

/* Writes one element as a word. */
static void format_elem(const efmt *f, const tg_tensor *t, const int64_t *idx, sbuf *b) {
    const void *p = tg_tensor_at(t, idx);
    char tmp[64];
    if (f->dt == TG_DT_BOOL) {
        sb_puts(b, tg_load_i64(p, f->dt) ? (f->scalar ? "True" : " True") : "False");
        return;
    }
    if (tg_dtype_is_int(f->dt)) {
        snprintf(tmp, sizeof tmp, "%*lld", f->width, (long long)tg_load_i64(p, f->dt));
        sb_puts(b, tmp);
        return;
    }
    double v = tg_load_f64(p, f->dt);
    if (!isfinite(v)) {
        const char *w = isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
        sb_spaces(b, f->pad_left + f->pad_right + 1 - (int)strlen(w));
        sb_puts(b, w);
        return;
    }
    fdig g;
    float_digits(fabs(v), f->dt == TG_DT_F32, f->sci, &g);
    const char *sign = signbit(v) ? "-" : "";
    if (f->sci) {
        sb_spaces(b, f->pad_left - (int)strlen(sign) - 1);
        sb_puts(b, sign);
        if (g.n - 1 < f->precision) {
            /* Like NumPy's min_digits: more real digits (rounded), not zeros. */
            snprintf(tmp, sizeof tmp, "%.*e", f->precision, fabs(v));
            g.n = 0;
            for (const char *c = tmp; *c && *c != 'e'; c++)
                if (*c != '.') g.d[g.n++] = *c;
            g.e = atoi(strchr(tmp, 'e') + 1);
        }
        sb_putn(b, g.d, 1);
        sb_puts(b, ".");
        sb_putn(b, g.d + 1, (size_t)(g.n - 1));
        snprintf(tmp, sizeof tmp, "e%c%0*d", g.e < 0 ? '-' : '+', f->exp_size, abs(g.e));
        sb_puts(b, tmp);
        return;
    }
    char ip[40], fp[40];
    positional_parts(&g, ip, fp);
    sb_spaces(b, f->pad_left - (int)strlen(sign) - (int)strlen(ip));
    sb_puts(b, sign);
    sb_puts(b, ip);
    sb_puts(b, ".");
    sb_puts(b, fp);
    sb_spaces(b, f->pad_right - (int)strlen(fp));
}

/* ---- layout (numpy's _formatArray) ---- */

typedef struct layout {
    const tg_tensor *t; /* the tensor */
    const efmt *f;      /* element format */
    bool summary;       /* summarise axes longer than 2 * EDGE_ITEMS */
    sbuf *b;            /* output */
    int64_t idx[TG_MAX_DIMS];
} layout;

/* Index of the k-th shown item of an axis of extent n (-1 for the "..." slot). */
static int64_t item_at(const layout *L, int64_t n, int64_t k, int64_t *count) {
    if (L->summary && n > 2 * EDGE_ITEMS) {
        *count = 2 * EDGE_ITEMS + 1;
        return k < EDGE_ITEMS ? k : k == EDGE_ITEMS ? -1 : n - (2 * EDGE_ITEMS + 1) + k;
    }
    *count = n;
    return k;
}

/* Writes the sub-array at L->idx[0..axis) like numpy's recurser, with a hanging indent of
 * `hang` spaces and `width` columns. The first line's indent is replaced by '['. */
static void recurse(layout *L, int axis, int hang, int width) {
    const tg_tensor *t = L->t;
    sbuf *b = L->b;
    const int axes_left = t->ndim - axis;
    const int64_t n = t->shape[axis];
    int64_t count;
    sb_puts(b, "[");
    if (axes_left == 1) {
        const int elem_width = width - 1; /* max(len(','), len(']')) */
        int line = hang;                  /* length of the current line, numpy's way */
        item_at(L, n, 0, &count);
        for (int64_t k = 0; k < count; k++) {
            int64_t i = item_at(L, n, k, &count);
            size_t before = b->len;
            char word[96];
            size_t wl;
            if (i < 0) {
                strcpy(word, "...");
                wl = 3;
            } else {
                /* Render into the buffer, then measure (and move if we wrap). */
                L->idx[axis] = i;
                format_elem(L->f, t, L->idx, b);
                if (b->oom) return;
                wl = b->len - before;
                if (wl >= sizeof word) wl = sizeof word - 1;
                memcpy(word, b->p + before, wl);
                b->len = before;
            }
            if (line + (int)wl > elem_width && line > hang) {
                sb_rstrip(b);
                sb_puts(b, "\n");
                sb_spaces(b, hang);
                line = hang;
            }
            sb_putn(b, word, wl);
            line += (int)wl;
            if (k + 1 < count) {
                sb_puts(b, ", ");
                line += 2;
            }
        }
    } else {
        item_at(L, n, 0, &count);
        for (int64_t k = 0; k < count; k++) {
            int64_t i = item_at(L, n, k, &count);
            if (k > 0) sb_spaces(b, hang);
            if (i < 0) {
                sb_puts(b, "...");
            } else {
                L->idx[axis] = i;
                recurse(L, axis + 1, hang + 1, width - 1);
            }
            if (k + 1 < count) {
                sb_puts(b, ",");
                for (int j = 0; j < axes_left - 1; j++) sb_puts(b, "\n");
            }
        }
    }
    sb_puts(b, "]");
}

static void repr(const tg_tensor *t, sbuf *b) {
    const char *np = tg_dtype_infos[t->dtype].numpy;
    const int64_t size = tg_tensor_size(t);
    const bool skipdtype =
        size > 0 && (t->dtype == TG_DT_F64 || t->dtype == TG_DT_I64 || t->dtype == TG_DT_BOOL);
    sb_puts(b, "array(");
    if (size == 0) {
        sb_puts(b, "[]");
        if (!(t->ndim == 1)) {
            char tmp[32];
            sb_puts(b, ", shape=(");
            for (int i = 0; i < t->ndim; i++) {
                snprintf(tmp, sizeof tmp, i ? ", %lld" : "%lld", (long long)t->shape[i]);
                sb_puts(b, tmp);
            }
            sb_puts(b, t->ndim == 1 ? ",)" : ")");
        }
    } else {
        efmt f;
        layout L = {.t = t, .f = &f, .summary = size > THRESHOLD, .b = b};
        fill_format(&f, t, L.summary);
        if (t->ndim == 0) {
            format_elem(&f, t, L.idx, b);
        } else {
            recurse(&L, 0, (int)strlen("array(") + 1, LINE_WIDTH - 1);
        }
    }
    if (skipdtype) {
        sb_puts(b, ")");
        return;
    }
    sb_puts(b, ",");
    size_t last_nl = 0;
    for (size_t i = 0; i < b->len; i++)
        if (b->p[i] == '\n') last_nl = i + 1;
    size_t last_line = b->len - last_nl;
    size_t dlen = strlen("dtype=") + strlen(np) + 1;
    if (last_line + dlen + 1 > LINE_WIDTH) {
        sb_puts(b, "\n");
        sb_spaces(b, (int)strlen("array("));
    } else {
        sb_puts(b, " ");
    }
    sb_puts(b, "dtype=");
    sb_puts(b, np);
    sb_puts(b, ")");
}

tg_status tg_tensor_print(const tg_tensor *t, FILE *f) {
    if (!t || !f) return tg_set_error(TG_EINVAL, "tg_tensor_print: %s is NULL", t ? "f" : "t");
    sbuf b = {.ctx = t->buf->ctx};
    repr(t, &b);
    sb_puts(&b, "\n");
    tg_status st = TG_OK;
    if (b.oom)
        st = tg_set_error(TG_ENOMEM, "tg_tensor_print: out of memory formatting a tensor");
    else if (fwrite(b.p, 1, b.len, f) != b.len || fflush(f) != 0)
        st = tg_set_error(TG_EIO, "tg_tensor_print: write error");
    tg_mem_free(b.ctx, b.p, b.cap);
    return st;
}

/* ---- one float as text that reads back as itself ---- */

void tg_format_float(double x, bool single, char *buf, size_t n) {
    if (isnan(x)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(x)) {
        snprintf(buf, n, x < 0 ? "-inf" : "inf");
        return;
    }
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c != (locale_t)0 ? uselocale(c) : (locale_t)0;
    char tmp[TG_FLOAT_STR_MAX];
    int lo = single ? 6 : 15, hi = single ? 9 : 17;
    for (int prec = lo; prec <= hi; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, x);
        double back = c != (locale_t)0 ? strtod_l(tmp, NULL, c) : strtod(tmp, NULL);
        if (single ? fabs(back) <= FLT_MAX && (float)back == (float)x : back == x) break;
    }
    if (old != (locale_t)0) uselocale(old);
    if (c != (locale_t)0) freelocale(c);
    if (!strpbrk(tmp, ".eE")) {
        size_t len = strlen(tmp);
        if (len + 2 < sizeof tmp) memcpy(tmp + len, ".0", 3);
    }
    snprintf(buf, n, "%s", tmp);
}
