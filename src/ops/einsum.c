/* einsum.c - einsum(x, ..., subscripts="ij,jk->ik"), a composite (ir/op.h): NumPy's
 * subscripts lowered, when the graph is built, to transposes, reshapes, products and
 * sums, so that its gradient is theirs and the blas phase makes gemm/gemv of its products.
 *
 * Subscripts as np.einsum reads them: one term of letters (a-z, A-Z) per operand, joined
 * by ','; '...' stands for the operand's leading (broadcast) axes; an explicit output
 * after '->', else the implicit one (the '...' axes, then the letters that occur once,
 * in ASCII order). A letter repeated in one term takes the diagonal; a letter missing
 * from the output is summed over. Extents of a letter must agree between operands or be
 * 1 (broadcast), as NumPy allows.
 *
 * The lowering, operand by operand from the left (no search for a cheaper order):
 *  1. each operand: diagonals of repeated letters (a product with eye(n), summed), then
 *     sums over the letters no other operand and not the output has;
 *  2. the running result A and the next operand B: letters of both that the output or a
 *     later operand needs are batch axes, the others of both are contracted (K), the rest
 *     are A's (M) or B's (N). With no K: a broadcast mul. Otherwise A becomes
 *     [batch..., M, K] and B [batch..., K, N] (transposes, and reshapes that merge each
 *     group into one axis) and their matmul is reshaped back to [batch..., M..., N...]:
 *     without batch axes a 2-D matmul (gemm after the blas phase), or a matrix-vector
 *     product where M or N is empty (gemv); with batch axes a batched matmul;
 *  3. a transpose into the output's order, and a cast to the operands' promoted dtype
 *     where a sum widened it (np.einsum keeps the operands' dtype: i8 stays i8).
 * Errors name the subscripts and the operand's type.
 */
#include "ops.h"

#include <stdio.h>

#define NLAB     (52 + TG_MAX_DIMS) /* letters, then the broadcast ('...') axes */
#define ELL_BASE 52
#define MAX_OPS  32 /* operands of one einsum */

typedef struct term {
    int n;                /* axes */
    int lab[TG_MAX_DIMS]; /* label of each axis */
} term;

typedef struct einsum {
    tg_graph *g;
    const char *subs;
    int nop;
    tg_var *const *in;
    term t[MAX_OPS];
    term out;
    int nell; /* axes the '...' stands for in the result */
} einsum;

static tg_status fail(einsum *e, tg_status st, int op, const char *what) {
    char ts[TG_TYPE_STR_MAX];
    if (op >= 0)
        tg_ir_fail(e->g, st, "einsum: subscripts '%s': operand %d (%s): %s", e->subs, op,
                   tg_type_str(&e->in[op]->type, ts, sizeof ts), what);
    else
        tg_ir_fail(e->g, st, "einsum: subscripts '%s': %s", e->subs, what);
    return e->g->status;
}

static int letter(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + c - 'a';
    return -1;
}

static char label_char(int l) { return l < 26 ? (char)('A' + l) : (char)('a' + l - 26); }

/* Reads one term from *pp up to ',' '-' or the end: its letters, and where '...' stands
 * (*ell: the count of letters before it, -1 when none). */
static bool read_term(einsum *e, const char **pp, int *labs, int *n, int *ell, int op) {
    const char *p = *pp;
    char why[96];
    *n = 0;
    *ell = -1;
    for (; *p && *p != ',' && *p != '-'; p++) {
        if (*p == ' ') continue;
        if (*p == '.') {
            if (strncmp(p, "...", 3) != 0 || *ell >= 0) {
                snprintf(why, sizeof why, "'.' must be part of one '...' per term");
                fail(e, TG_EINVAL, op, why);
                return false;
            }
            *ell = *n;
            p += 2;
            continue;
        }
        int l = letter(*p);
        if (l < 0) {
            snprintf(why, sizeof why, "'%c' is not a subscript letter (a-z, A-Z)", *p);
            fail(e, TG_EINVAL, -1, why);
            return false;
        }
        if (*n == TG_MAX_DIMS) {
            fail(e, TG_ELIMIT, -1, "a term has too many subscripts");
            return false;
        }
        labs[(*n)++] = l;
    }
    *pp = p;
    return true;
}

/* Parses the subscripts into the operands' terms and the output term. */
static bool parse(einsum *e) {
    const char *p = e->subs;
    int labs[MAX_OPS][TG_MAX_DIMS], nl[MAX_OPS], ellat[MAX_OPS];
    char why[160];
    for (int k = 0; k < e->nop; k++) {
        if (!read_term(e, &p, labs[k], &nl[k], &ellat[k], k)) return false;
        if (k + 1 < e->nop) {
            if (*p != ',') {
                snprintf(why, sizeof why, "%d operands but %d terms", e->nop, k + 1);
                return fail(e, TG_EINVAL, -1, why), false;
            }
            p++;
        }
    }
    if (*p == ',') {
        snprintf(why, sizeof why, "more terms than the %d operands", e->nop);
        return fail(e, TG_EINVAL, -1, why), false;
    }
    /* the axes '...' stands for, right-aligned over the operands */
    e->nell = 0;
    for (int k = 0; k < e->nop; k++) {
        int nd = e->in[k]->type.ndim, extra = nd - nl[k];
        if (extra < 0 || (extra > 0 && ellat[k] < 0)) {
            snprintf(why, sizeof why, "the term has %d subscripts for %d dimensions", nl[k], nd);
            return fail(e, TG_ESHAPE, k, why), false;
        }
        if (extra > e->nell) e->nell = extra;
    }
    for (int k = 0; k < e->nop; k++) {
        int nd = e->in[k]->type.ndim, extra = nd - nl[k], j = 0;
        term *t = &e->t[k];
        t->n = nd;
        for (int a = 0; a < nl[k]; a++) {
            if (a == ellat[k])
                for (int x = 0; x < extra; x++) t->lab[j++] = ELL_BASE + e->nell - extra + x;
            t->lab[j++] = labs[k][a];
        }
        if (ellat[k] == nl[k])
            for (int x = 0; x < extra; x++) t->lab[j++] = ELL_BASE + e->nell - extra + x;
    }
    int count[NLAB] = {0};
    for (int k = 0; k < e->nop; k++)
        for (int a = 0; a < e->t[k].n; a++) count[e->t[k].lab[a]]++;
    term *o = &e->out;
    o->n = 0;
    if (*p == '-') {
        if (p[1] != '>') return fail(e, TG_EINVAL, -1, "'-' must begin '->'"), false;
        p += 2;
        int ol[TG_MAX_DIMS], on, oell;
        if (!read_term(e, &p, ol, &on, &oell, -1)) return false;
        if (*p) return fail(e, TG_EINVAL, -1, "text after the output term"), false;
        if (oell < 0 && e->nell > 0)
            return fail(e, TG_EINVAL, -1,
                        "the operands have '...' axes, so the output needs '...' too"),
                   false;
        for (int a = 0; a <= on; a++) {
            if (a == oell)
                for (int x = 0; x < e->nell; x++) {
                    if (o->n == TG_MAX_DIMS)
                        return fail(e, TG_ELIMIT, -1, "the output has too many dimensions"), false;
                    o->lab[o->n++] = ELL_BASE + x;
                }
            if (a == on) break;
            int l = ol[a];
            if (count[l] == 0) {
                snprintf(why, sizeof why, "output subscript '%c' is in no input term",
                         label_char(l));
                return fail(e, TG_EINVAL, -1, why), false;
            }
            for (int b = 0; b < a; b++)
                if (ol[b] == l) {
                    snprintf(why, sizeof why, "output subscript '%c' is repeated", label_char(l));
                    return fail(e, TG_EINVAL, -1, why), false;
                }
            if (o->n == TG_MAX_DIMS)
                return fail(e, TG_ELIMIT, -1, "the output has too many dimensions"), false;
            o->lab[o->n++] = l;
        }
    } else {
        if (*p) return fail(e, TG_EINVAL, -1, "unexpected text"), false;
        for (int x = 0; x < e->nell; x++) o->lab[o->n++] = ELL_BASE + x;
        for (int l = 0; l < ELL_BASE; l++)
            if (count[l] == 1) {
                if (o->n == TG_MAX_DIMS)
                    return fail(e, TG_ELIMIT, -1, "the output has too many dimensions"), false;
                o->lab[o->n++] = l;
            }
    }
    return true;
}

static bool has(const term *t, int l) {
    for (int a = 0; a < t->n; a++)
        if (t->lab[a] == l) return true;
    return false;
}

static int pos(const term *t, int l) {
    for (int a = 0; a < t->n; a++)
        if (t->lab[a] == l) return a;
    return -1;
}

/* Whether label l is needed beyond operand k: by the output or a later operand. */
static bool needed_after(const einsum *e, int k, int l) {
    if (has(&e->out, l)) return true;
    for (int j = k + 1; j < e->nop; j++)
        if (has(&e->t[j], l)) return true;
    return false;
}

/* v summed over its axes whose labels `drop` marks; t updated. */
static tg_var *sum_out(tg_graph *g, tg_var *v, term *t, const bool *drop) {
    int64_t axes[TG_MAX_DIMS];
    int na = 0, j = 0;
    for (int a = 0; a < t->n; a++) {
        if (drop[t->lab[a]])
            axes[na++] = a;
        else
            t->lab[j++] = t->lab[a];
    }
    if (na == 0) return v;
    t->n = j;
    return tg_reduce(g, "sum", v, axes, na, false);
}

/* v with its axes in the order of labels `order` (n of them, each in t); t updated. */
static tg_var *permute(tg_graph *g, tg_var *v, term *t, const int *order, int n) {
    int64_t perm[TG_MAX_DIMS];
    bool id = true;
    for (int a = 0; a < n; a++) {
        perm[a] = pos(t, order[a]);
        id = id && perm[a] == a;
    }
    for (int a = 0; a < n; a++) t->lab[a] = order[a];
    t->n = n;
    return id ? v : tg_transpose(g, v, perm);
}

/* The diagonal of operand k for each letter its term repeats: for axes p < q of one
 * letter (extent n, known), sum(v * eye(n) on axes p and q, axis=q). */
static tg_var *diagonals(einsum *e, int k, tg_var *v) {
    term *t = &e->t[k];
    char why[128];
    for (int p = 0; p < t->n; p++) {
        for (int q = p + 1; q < t->n; q++) {
            if (t->lab[q] != t->lab[p]) continue;
            int64_t n = v->type.shape[p], m = v->type.shape[q];
            if (n < 0 || m < 0 || n != m) {
                snprintf(why, sizeof why,
                         n < 0 || m < 0 ? "the repeated subscript '%c' needs known extents"
                                        : "the repeated subscript '%c' has unequal extents",
                         label_char(t->lab[p]));
                fail(e, n < 0 || m < 0 ? TG_EUNSUPPORTED : TG_ESHAPE, k, why);
                return NULL;
            }
            tg_attr ea[2] = {TG_A_INT("n", n),
                             TG_A_STR("dtype", tg_dtype_name((tg_dtype)v->type.dtype))};
            tg_var *eye = tg_apply(e->g, "eye", NULL, 0, ea, 2);
            int64_t sh[TG_MAX_DIMS];
            for (int a = 0; a < t->n; a++) sh[a] = a == p || a == q ? n : 1;
            eye = tg_reshape(e->g, eye, t->n, sh);
            int64_t ax = q;
            v = tg_reduce(e->g, "sum", tg_mul(e->g, v, eye), &ax, 1, false);
            for (int a = q; a + 1 < t->n; a++) t->lab[a] = t->lab[a + 1];
            t->n--;
            q--;
        }
    }
    return v;
}

/* Extents of v's axes a0..a1 merged into one value (dims as 0-d i64 values). */
static tg_var *group_extent(tg_graph *g, tg_var *const *dims, int a0, int a1) {
    tg_var *s = tg_literal_int(g, 1);
    for (int a = a0; a < a1; a++) s = tg_grad_mul_extents(g, s, dims[a]);
    return s;
}

/* v ([batch..., g0 axes, g1 axes]) with each group of axes made one: a group of one axis
 * stays, an empty one becomes an axis of 1 (size -1: no axis at all), a larger one is
 * merged by a reshape (extents from shape() where they are '?'). */
static tg_var *merge_groups(tg_graph *g, tg_var *v, int nbat, const int *size) {
    bool reshape = size[0] > 1 || size[1] > 1;
    if (!reshape) {
        int64_t ax[2];
        int na = 0;
        if (size[0] == 0) ax[na++] = nbat;
        if (size[1] == 0) ax[na++] = nbat + (size[0] != 0);
        tg_attr a = TG_A_INTS("axis", ax, na);
        return na > 0 ? tg_apply(g, "expand_dims", &v, 1, &a, 1) : v;
    }
    tg_var *dv[TG_MAX_DIMS], *sh[TG_MAX_DIMS];
    if (!tg_grad_dims(g, v, dv)) return NULL;
    int nd = 0, at = nbat;
    for (int i = 0; i < nbat; i++) sh[nd++] = dv[i];
    for (int k = 0; k < 2; k++) {
        if (size[k] < 0) continue;
        sh[nd++] = group_extent(g, dv, at, at + size[k]);
        at += size[k];
    }
    return tg_grad_reshape(g, v, nd, sh);
}

/* Contracts the running result a (labels ta) with operand k (v, labels t[k]). */
static tg_var *contract(einsum *e, tg_var *a, term *ta, int k, tg_var *b) {
    tg_graph *g = e->g;
    term *tb = &e->t[k];
    /* a contracted letter of extent 1 on one side: summed out of each side alone
     * (sum_k a[0] b[k] = a[0] * sum_k b[k]) */
    bool drop[NLAB] = {false};
    bool any = false;
    for (int i = 0; i < ta->n; i++) {
        int l = ta->lab[i], j = pos(tb, l);
        if (j < 0 || needed_after(e, k, l)) continue;
        int64_t ea = a->type.shape[i], eb = b->type.shape[j];
        if ((ea == 1) != (eb == 1)) drop[l] = any = true;
    }
    if (any) {
        a = sum_out(g, a, ta, drop);
        b = sum_out(g, b, tb, drop);
    }
    int batch[TG_MAX_DIMS], ka[TG_MAX_DIMS], ma[TG_MAX_DIMS], nb_[TG_MAX_DIMS];
    int nbat = 0, nk = 0, nm = 0, nn = 0;
    for (int i = 0; i < ta->n; i++) {
        int l = ta->lab[i];
        if (!has(tb, l))
            ma[nm++] = l;
        else if (needed_after(e, k, l))
            batch[nbat++] = l;
        else
            ka[nk++] = l;
    }
    for (int j = 0; j < tb->n; j++)
        if (!has(ta, tb->lab[j])) nb_[nn++] = tb->lab[j];
    if (nbat + nm + nn > TG_MAX_DIMS) {
        fail(e, TG_ELIMIT, k, "an intermediate result would have too many dimensions");
        return NULL;
    }
    int order[TG_MAX_DIMS], n = 0;
    for (int i = 0; i < nbat; i++) order[n++] = batch[i];
    for (int i = 0; i < nm; i++) order[n++] = ma[i];
    int res[TG_MAX_DIMS], nres = 0;
    for (int i = 0; i < n; i++) res[nres++] = order[i];
    for (int i = 0; i < nn; i++) res[nres++] = nb_[i];
    if (nk == 0) { /* a broadcast product: a as [batch, M, 1...], b as [batch, 1..., N] */
        a = permute(g, a, ta, order, n);
        int ob[TG_MAX_DIMS], nob = 0;
        for (int i = 0; i < nbat; i++) ob[nob++] = batch[i];
        for (int i = 0; i < nn; i++) ob[nob++] = nb_[i];
        b = permute(g, b, tb, ob, nob);
        int64_t ax[TG_MAX_DIMS];
        for (int i = 0; i < nn; i++) ax[i] = nbat + nm + i;
        tg_attr xa = TG_A_INTS("axis", ax, nn);
        if (nn > 0) a = tg_apply(g, "expand_dims", &a, 1, &xa, 1);
        for (int i = 0; i < nm; i++) ax[i] = nbat + i;
        tg_attr xb = TG_A_INTS("axis", ax, nm);
        if (nm > 0) b = tg_apply(g, "expand_dims", &b, 1, &xb, 1);
        memcpy(ta->lab, res, sizeof res[0] * (size_t)nres);
        ta->n = nres;
        return tg_mul(g, a, b);
    }
    /* a as [batch, M..., K...], b as [batch, K..., N...] */
    for (int i = 0; i < nk; i++) order[n++] = ka[i];
    a = permute(g, a, ta, order, n);
    int ob[TG_MAX_DIMS], nob = 0;
    for (int i = 0; i < nbat; i++) ob[nob++] = batch[i];
    for (int i = 0; i < nk; i++) ob[nob++] = ka[i];
    for (int i = 0; i < nn; i++) ob[nob++] = nb_[i];
    b = permute(g, b, tb, ob, nob);
    tg_var *da[TG_MAX_DIMS], *db[TG_MAX_DIMS], *dm[TG_MAX_DIMS], *dn[TG_MAX_DIMS];
    if (!tg_grad_dims(g, a, da) || !tg_grad_dims(g, b, db)) return NULL;
    for (int i = 0; i < nm; i++) dm[i] = da[nbat + i];
    for (int i = 0; i < nn; i++) dn[i] = db[nbat + nk + i];
    tg_var *dc[TG_MAX_DIMS];
    /* an empty M or N is a vector operand without batch axes, an axis of 1 with them
     * (matmul's vectors do not broadcast over batches) */
    bool vec_a = nm == 0 && nbat == 0, vec_b = nn == 0 && nbat == 0;
    int ga[2] = {vec_a ? -1 : nm, nk}, gb[2] = {nk, vec_b ? -1 : nn};
    a = merge_groups(g, a, nbat, ga);
    b = merge_groups(g, b, nbat, gb);
    tg_var *c = tg_matmul(g, a, b);
    if (!c) return NULL;
    memcpy(ta->lab, res, sizeof res[0] * (size_t)nres);
    ta->n = nres;
    /* back to [batch..., M..., N...] */
    if (nm <= 1 && nn <= 1) { /* no group was merged: drop the axes of 1 inserted for them */
        int64_t ax[2];
        int na = 0;
        if (nm == 0 && !vec_a) ax[na++] = nbat;
        if (nn == 0 && !vec_b) ax[na++] = nbat + (vec_a ? 0 : 1);
        tg_attr sa = TG_A_INTS("axis", ax, na);
        return na > 0 ? tg_apply(g, "squeeze", &c, 1, &sa, 1) : c;
    }
    tg_var *sh[TG_MAX_DIMS];
    int nd = 0;
    if (!tg_grad_dims(g, c, dc)) return NULL;
    for (int i = 0; i < nbat; i++) sh[nd++] = dc[i];
    for (int i = 0; i < nm; i++) sh[nd++] = dm[i];
    for (int i = 0; i < nn; i++) sh[nd++] = dn[i];
    return tg_grad_reshape(g, c, nd, sh);
}

/* Static extents of one letter must agree between operands, or be 1. */
static bool check_extents(einsum *e) {
    int64_t ext[NLAB];
    int from[NLAB];
    char why[200], ts[TG_TYPE_STR_MAX];
    for (int l = 0; l < NLAB; l++) ext[l] = -1, from[l] = -1;
    for (int k = 0; k < e->nop; k++) {
        const term *t = &e->t[k];
        for (int a = 0; a < t->n; a++) {
            int l = t->lab[a];
            int64_t x = e->in[k]->type.shape[a];
            if (x < 0 || x == 1) continue;
            if (ext[l] >= 0 && ext[l] != x) {
                if (from[l] == k)
                    snprintf(why, sizeof why,
                             "the repeated subscript '%c' has unequal extents (%lld and %lld)",
                             label_char(l), (long long)ext[l], (long long)x);
                else if (l >= ELL_BASE)
                    snprintf(why, sizeof why,
                             "its '...' axes do not broadcast with operand %d's (%s)", from[l],
                             tg_type_str(&e->in[from[l]]->type, ts, sizeof ts));
                else
                    snprintf(why, sizeof why,
                             "subscript '%c' has extent %lld here and %lld in operand %d (%s)",
                             label_char(l), (long long)x, (long long)ext[l], from[l],
                             tg_type_str(&e->in[from[l]]->type, ts, sizeof ts));
                fail(e, TG_ESHAPE, k, why);
                return false;
            }
            ext[l] = x, from[l] = k;
        }
    }
    return true;
}

tg_status tg_einsum_build(tg_graph *g, tg_var *const *in, int nin, const tg_aval *attrs,
                          tg_var **out, int *nout) {
    einsum e = {.g = g, .subs = attrs[0].s ? attrs[0].s : "", .nop = nin, .in = in};
    if (nin > MAX_OPS)
        return tg_ir_fail(g, TG_ELIMIT, "einsum: at most %d operands, got %d", MAX_OPS, nin),
               g->status;
    if (!parse(&e) || !check_extents(&e)) return g->status;
    const tg_type *types[MAX_OPS];
    for (int k = 0; k < nin; k++) types[k] = &in[k]->type;
    tg_dtype dt = tg_promote_types(types, nin);
    tg_var *ops[MAX_OPS] = {NULL};
    for (int k = 0; k < nin; k++) {
        ops[k] = diagonals(&e, k, in[k]);
        if (!ops[k]) return g->status;
        /* letters only this operand has, and not the output */
        bool drop[NLAB] = {false};
        for (int a = 0; a < e.t[k].n; a++) {
            int l = e.t[k].lab[a];
            bool other = has(&e.out, l);
            for (int j = 0; j < nin && !other; j++) other = j != k && has(&e.t[j], l);
            drop[l] = !other;
        }
        ops[k] = sum_out(g, ops[k], &e.t[k], drop);
    }
    term acc = e.t[0];
    tg_var *v = ops[0];
    for (int k = 1; k < nin && v; k++) v = contract(&e, v, &acc, k, ops[k]);
    if (!v) return g->status;
    v = permute(g, v, &acc, e.out.lab, e.out.n);
    if (v && v->type.dtype != dt) v = tg_cast(g, v, dt);
    out[0] = v;
    *nout = 1;
    return v ? TG_OK : g->status;
}
