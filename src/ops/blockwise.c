/* blockwise.c - the machinery every Blockwise op shares (blockwise.h): parsing a core
 * signature, inferring the batch and core shapes of a node from it, the reference-kernel
 * driver that runs an op's core kernel once per block of the batch (split over the pool),
 * and the gradient wrapper that sums cotangents over broadcast batch dimensions.
 *
 * Invariants: the driver hands the core kernel views of one block's core (no copies, no
 * allocation: the views borrow the operands' buffers for the call); blocks are independent,
 * so a split over any number of threads gives the same values, and the error reported is
 * always that of the lowest failing block (each thread's range is contiguous and stops at
 * its first failure).
 */
#include "blockwise.h"

#include "../parallel/parallel.h"

#include <stdio.h>

/* ---- signatures ---- */

static const char *skip_space(const char *p) {
    while (*p == ' ') p++;
    return p;
}

/* One parenthesized group at *pp into operand k of sig. */
static bool parse_group(const char **pp, tg_bw_sig *sig, int k) {
    const char *p = skip_space(*pp);
    if (*p++ != '(') return false;
    sig->rank[k] = 0;
    sig->opt[k] = 0;
    p = skip_space(p);
    while (*p != ')') {
        char name[sizeof sig->names[0]];
        size_t len = 0;
        while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_') {
            if (len + 1 >= sizeof name) return false;
            name[len++] = *p++;
        }
        name[len] = '\0';
        if (len == 0 || sig->rank[k] >= TG_MAX_DIMS) return false;
        int d = sig->rank[k]++;
        if (*p == '?') {
            sig->opt[k] |= 1u << d;
            p++;
        }
        int j = 0;
        while (j < sig->nnames && strcmp(sig->names[j], name) != 0) j++;
        if (j == sig->nnames) {
            if (j >= TG_BW_MAX_NAMES) return false;
            memcpy(sig->names[sig->nnames++], name, len + 1);
        }
        sig->dim[k][d] = (int8_t)j;
        p = skip_space(p);
        if (*p == ',')
            p = skip_space(p + 1);
        else if (*p != ')')
            return false;
    }
    *pp = p + 1;
    return true;
}

/* The groups of one side ("(m,n),(n,k)") into operands first.. of sig; their count. */
static int parse_side(const char **pp, tg_bw_sig *sig, int first) {
    int n = 0;
    for (;;) {
        if (first + n >= TG_BW_MAX_OPERANDS || !parse_group(pp, sig, first + n)) return -1;
        n++;
        *pp = skip_space(*pp);
        if (**pp != ',') return n;
        (*pp)++;
    }
}

bool tg_bw_parse(const char *s, tg_bw_sig *sig) {
    memset(sig, 0, sizeof *sig);
    const char *p = s;
    if (!s || (sig->nin = parse_side(&p, sig, 0)) < 0) return false;
    p = skip_space(p);
    if (p[0] != '-' || p[1] != '>') return false;
    p += 2;
    if ((sig->nout = parse_side(&p, sig, sig->nin)) < 0) return false;
    return *skip_space(p) == '\0';
}

/* Whether core dimension d of operand k is there, given the absent names. */
static bool present(const tg_bw_sig *sig, int k, int d, uint32_t absent) {
    return !((sig->opt[k] >> d) & 1u) || !((absent >> sig->dim[k][d]) & 1u);
}

bool tg_bw_core_ranks(const tg_bw_sig *sig, const int *in_ndim, int *core, uint32_t *absent,
                      int *bad) {
    *absent = 0;
    for (int i = 0; i < sig->nin; i++) {
        int full = sig->rank[i], nopt = __builtin_popcount(sig->opt[i]);
        if (in_ndim[i] < full && (nopt == 0 || in_ndim[i] != full - nopt)) {
            *bad = i;
            return false;
        }
        if (in_ndim[i] >= full) continue;
        for (int d = 0; d < full; d++)
            if ((sig->opt[i] >> d) & 1u) *absent |= 1u << sig->dim[i][d];
    }
    for (int k = 0; k < sig->nin + sig->nout; k++) {
        core[k] = 0;
        for (int d = 0; d < sig->rank[k]; d++) core[k] += present(sig, k, d, *absent);
    }
    return true;
}

/* ---- inference ---- */

/* The core extents of t (its last `core`), "[3,?]". */
static const char *core_str(const tg_type *t, int core, char *buf, size_t cap) {
    size_t at = 0;
    at += (size_t)snprintf(buf, cap, "[");
    for (int j = t->ndim - core; j < t->ndim && at < cap; j++) {
        if (t->shape[j] < 0)
            at += (size_t)snprintf(buf + at, cap - at, "%s?", j > t->ndim - core ? "," : "");
        else
            at += (size_t)snprintf(buf + at, cap - at, "%s%lld", j > t->ndim - core ? "," : "",
                                   (long long)t->shape[j]);
    }
    if (at < cap) snprintf(buf + at, cap - at, "]");
    return buf;
}

/* The input types, "f64[5,3,3], f64[3]". */
static const char *inputs_str(const tg_infer *ic, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < ic->nin && at < cap; i++) {
        char s[TG_TYPE_STR_MAX];
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", i ? ", " : "",
                               tg_type_str(&ic->in[i], s, sizeof s));
    }
    return buf;
}

tg_status tg_bw_infer(tg_infer *ic) {
    const char *sigs = ic->op->signature;
    tg_bw_sig sig;
    int nd[TG_BW_MAX_OPERANDS] = {0}, core[TG_BW_MAX_OPERANDS] = {0}, bad = 0;
    uint32_t absent;
    char s1[TG_TYPE_STR_MAX], s2[TG_TYPE_STR_MAX];
    if (!tg_bw_parse(sigs, &sig) || sig.nin != ic->nin || sig.nout > TG_MAX_OUTS)
        return tg_infer_fail(ic, TG_EINTERNAL, "malformed core signature \"%s\"", sigs ? sigs : "");
    for (int i = 0; i < ic->nin; i++) nd[i] = ic->in[i].ndim;
    if (!tg_bw_core_ranks(&sig, nd, core, &absent, &bad))
        return tg_infer_fail(ic, TG_ESHAPE,
                             "input %d (%s) has %d dimensions, fewer than its core in the "
                             "signature %s",
                             bad, tg_type_str(&ic->in[bad], s1, sizeof s1), nd[bad], sigs);
    /* the batch dimensions, as types of their own, broadcast with the shared rules */
    tg_type bt[TG_BW_MAX_OPERANDS], batch;
    const tg_type *bp[TG_BW_MAX_OPERANDS];
    for (int i = 0; i < ic->nin; i++) {
        bt[i] = ic->in[i];
        bt[i].ndim = (uint8_t)(nd[i] - core[i]);
        bt[i].nobcast &= (1u << bt[i].ndim) - 1;
        bp[i] = &bt[i];
    }
    if (!tg_broadcast_types(ic, bp, ic->nin, &batch)) {
        char why[sizeof ic->msg], ins[3 * TG_TYPE_STR_MAX];
        memcpy(why, ic->msg, sizeof why);
        why[sizeof why - 1] = '\0';
        tg_status st = ic->status != TG_OK ? ic->status : TG_ESHAPE;
        ic->status = TG_OK;
        return tg_infer_fail(ic, st, "the batch dimensions of %s do not broadcast (%s)",
                             inputs_str(ic, ins, sizeof ins), why);
    }
    /* each name bound to one extent, from the first operand that has it static */
    int64_t ext[TG_BW_MAX_NAMES];
    int who[TG_BW_MAX_NAMES];
    bool nob[TG_BW_MAX_NAMES] = {0};
    for (int j = 0; j < TG_BW_MAX_NAMES; j++) ext[j] = -1, who[j] = -1;
    for (int i = 0; i < ic->nin; i++) {
        const tg_type *t = &ic->in[i];
        for (int d = 0, a = nd[i] - core[i]; d < sig.rank[i]; d++) {
            if (!present(&sig, i, d, absent)) continue;
            int j = sig.dim[i][d];
            int64_t e = t->shape[a];
            bool eb = e == 1 && ((t->nobcast >> a) & 1u);
            a++;
            if (e < 0) continue;
            nob[j] = nob[j] || eb;
            if (ext[j] < 0) {
                ext[j] = e;
                who[j] = i;
                continue;
            }
            if (e == ext[j]) continue;
            if (who[j] == i)
                return tg_infer_fail(ic, TG_ESHAPE,
                                     "core shape %s of input %d does not match the signature "
                                     "%s: %s is %lld and %lld",
                                     core_str(t, core[i], s1, sizeof s1), i, sigs, sig.names[j],
                                     (long long)ext[j], (long long)e);
            return tg_infer_fail(ic, TG_ESHAPE,
                                 "core shapes %s (input %d) and %s (input %d) do not match the "
                                 "signature %s: %s is %lld and %lld",
                                 core_str(&ic->in[who[j]], core[who[j]], s1, sizeof s1), who[j],
                                 core_str(t, core[i], s2, sizeof s2), i, sigs, sig.names[j],
                                 (long long)ext[j], (long long)e);
        }
    }
    for (int o = 0; o < sig.nout; o++) {
        int k = sig.nin + o;
        tg_type *y = &ic->out[o];
        *y = batch;
        y->dtype = ic->in[0].dtype;
        y->weak = 0;
        for (int d = 0; d < sig.rank[k]; d++) {
            if (!present(&sig, k, d, absent)) continue;
            int j = sig.dim[k][d];
            if (nob[j] && ext[j] == 1) y->nobcast |= 1u << y->ndim;
            y->shape[y->ndim++] = ext[j];
        }
    }
    ic->nout = sig.nout;
    return TG_OK;
}

/* ---- the reference-kernel driver ---- */

/* The view of block `bi` (a batch index of the result, nbatch extents) of t, whose last
 * `core` dimensions are its core: t's leading dimensions right-aligned with the batch, an
 * extent 1 read at 0. Borrows t's buffer. */
static void block_view(const tg_tensor *t, int core, int nbatch, const int64_t *bi, tg_tensor *v) {
    int lead = t->ndim - core;
    v->dtype = t->dtype;
    v->ndim = core;
    v->offset = t->offset;
    v->buf = t->buf;
    for (int a = 0; a < lead; a++)
        if (t->shape[a] != 1) v->offset += bi[nbatch - lead + a] * t->strides[a];
    for (int d = 0; d < core; d++) {
        v->shape[d] = t->shape[lead + d];
        v->strides[d] = t->strides[lead + d];
    }
}

/* What a thread reports: its first failing block (-1: none) and that block's failure. */
typedef struct bw_fail {
    int64_t block;
    tg_status status;
    char msg[sizeof(((tg_kern *)0)->msg)];
} bw_fail;

typedef struct bw_job {
    tg_kern *k;
    tg_bw_core_fn core;
    const int *cores; /* core rank of each input, then of each output */
    int nbatch;       /* batch rank of the result */
    const int64_t *batch;
    int64_t nblocks;
    bw_fail *fail; /* one per thread */
} bw_job;

static void bw_task(void *arg, int ith, int nth) {
    bw_job *J = arg;
    tg_kern *k = J->k;
    int64_t lo, hi, bi[TG_MAX_DIMS];
    tg_tensor vin[TG_BW_MAX_OPERANDS], vout[TG_BW_MAX_OPERANDS];
    tg_tensor *pin[TG_BW_MAX_OPERANDS], *pout[TG_BW_MAX_OPERANDS];
    bw_fail *f = &J->fail[ith];
    f->block = -1;
    tg_pool_share(J->nblocks, ith, nth, 1, &lo, &hi);
    for (int i = 0; i < k->nin; i++) pin[i] = &vin[i];
    for (int o = 0; o < k->nout; o++) pout[o] = &vout[o];
    int64_t q = lo;
    for (int a = J->nbatch - 1; a >= 0; a--) { /* lo unravelled, C order */
        bi[a] = q % J->batch[a];
        q /= J->batch[a];
    }
    for (int64_t b = lo; b < hi; b++, tg_index_next(J->nbatch, J->batch, bi)) {
        for (int i = 0; i < k->nin; i++) block_view(k->in[i], J->cores[i], J->nbatch, bi, &vin[i]);
        for (int o = 0; o < k->nout; o++)
            block_view(k->out[o], J->cores[k->nin + o], J->nbatch, bi, &vout[o]);
        tg_kern sub = *k;
        sub.in = pin;
        sub.out = pout;
        sub.pool = NULL;
        sub.status = TG_OK;
        sub.msg[0] = '\0';
        if (J->core(&sub) == TG_OK) continue;
        f->block = b;
        f->status = sub.status ? sub.status : TG_EINVAL;
        memcpy(f->msg, sub.msg, sizeof f->msg);
        return;
    }
}

/* Blocks of fewer elements than this, all operands together, run on one thread: waking
 * the pool costs more than they do. */
#define BW_SPLIT_MIN 4096

tg_status tg_bw_ref(tg_kern *k, const char *signature, tg_bw_core_fn core) {
    tg_bw_sig sig;
    int nd[TG_BW_MAX_OPERANDS] = {0}, cores[TG_BW_MAX_OPERANDS] = {0}, bad = 0;
    uint32_t absent;
    if (!tg_bw_parse(signature, &sig) || sig.nin != k->nin || sig.nout != k->nout)
        return tg_kern_fail(k, TG_EINTERNAL, "malformed core signature");
    for (int i = 0; i < k->nin; i++) nd[i] = k->in[i]->ndim;
    if (!tg_bw_core_ranks(&sig, nd, cores, &absent, &bad))
        return tg_kern_fail(k, TG_EINTERNAL, "input %d has fewer dimensions than its core", bad);
    int nbatch = k->out[0]->ndim - cores[k->nin];
    const int64_t *batch = k->out[0]->shape;
    bool plain = nbatch == 0; /* one block, the operands themselves */
    int64_t nblocks = 1, elems = 0;
    for (int a = 0; a < nbatch; a++) nblocks *= batch[a];
    for (int i = 0; i < k->nin && plain; i++) plain = nd[i] == cores[i];
    if (plain) return core(k);
    if (nblocks == 0) return TG_OK;
    for (int i = 0; i < k->nin; i++) elems += tg_tensor_size(k->in[i]);
    for (int o = 0; o < k->nout; o++) elems += tg_tensor_size(k->out[o]);
    int nth = k->pool && nblocks > 1 && elems >= BW_SPLIT_MIN ? tg_pool_size(k->pool) : 1;
    if (nth > nblocks) nth = (int)nblocks;
    bw_fail one, *fail = &one;
    if (nth > 1 && !(fail = tg_mem_alloc(k->ctx, sizeof *fail * (size_t)nth)))
        return tg_kern_fail(k, TG_ENOMEM, "out of memory");
    bw_job J = {k, core, cores, nbatch, batch, nblocks, fail};
    int used = nth > 1 ? tg_pool_run_n(k->pool, nth, bw_task, &J) : (bw_task(&J, 0, 1), 1);
    const bw_fail *first = NULL;
    for (int t = 0; t < used; t++)
        if (fail[t].block >= 0 && (!first || fail[t].block < first->block)) first = &fail[t];
    if (first) {
        int64_t bi[TG_MAX_DIMS], q = first->block;
        char where[8 * TG_MAX_DIMS + 8];
        size_t at = 0;
        for (int a = nbatch - 1; a >= 0; a--) {
            bi[a] = q % batch[a];
            q /= batch[a];
        }
        for (int a = 0; a < nbatch; a++)
            at += (size_t)snprintf(where + at, sizeof where - at, "%s%lld", a ? ", " : "",
                                   (long long)bi[a]);
        tg_kern_fail(k, first->status, "batch element [%s]: %s", where, first->msg);
    }
    if (fail != &one) tg_mem_free(k->ctx, fail, sizeof *fail * (size_t)nth);
    return first ? k->status : TG_OK;
}

/* ---- gradients ---- */

tg_status tg_bw_vjp(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin,
                    tg_vjp_fn core) {
    if (core(g, n, gout, gin) != TG_OK) return g->status;
    for (int i = 0; i < n->nin; i++)
        if (gin[i]) gin[i] = tg_grad_unbroadcast(g, gin[i], &n->in[i]->type);
    return g->status;
}

tg_var *tg_bw_mT(tg_graph *g, tg_var *v) {
    if (!v) return NULL;
    int nd = v->type.ndim;
    int64_t perm[TG_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    perm[nd - 1] = nd - 2;
    perm[nd - 2] = nd - 1;
    return tg_transpose(g, v, perm);
}

tg_var *tg_bw_expand(tg_graph *g, tg_var *v, int64_t axis) {
    tg_attr a = TG_A_INTS("axis", &axis, 1);
    return v ? tg_apply(g, "expand_dims", &v, 1, &a, 1) : NULL;
}

tg_var *tg_bw_squeeze(tg_graph *g, tg_var *v, int64_t axis) {
    tg_attr a = TG_A_INTS("axis", &axis, 1);
    return v ? tg_apply(g, "squeeze", &v, 1, &a, 1) : NULL;
}
