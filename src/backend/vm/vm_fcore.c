/* vm_fcore.c - fused programs with core ops (fused.h, tg_fused_is_core) run block by block
 * of their batch with the VM's kernels.
 *
 * At compile time the program is split as tg_fused_block_plan splits it and typed once for
 * one block (the inputs' static types less their batch dimensions); every block extent must
 * then be static. Each value of a block gets a scratch buffer of its own in the thread's
 * workspace (a block of a few matrices stays in L1/L2); a matmul of two f32 or f64 matrices
 * is one gemm (tg_vm_gemm) over its operands in place (row-major or transposed, else gathered), an
 * elementwise instruction its vector kernel (vkernels.h) over the block, its operands
 * contiguous, one value, or gathered with broadcasting first. Another core op (the LAPACK
 * ops: cholesky, solve_triangular, solve, ...; diag) runs its computation of one block
 * (tg_op_def.core: one LAPACK call on the block's operands, with no signature to read and
 * no output to zero; else its reference kernel on the block). An output that reduces a
 * block's value over its core axes folds the block as the reduction's record says
 * (tg_reduce_def: sum, prod, mean, max, min of floats, in double; a whole block's sum or
 * product in eight lanes; other reductions run their reference kernel on the block). So a
 * batched log-density's Cholesky factor, triangular solve, log(diag(L)) and their sums take
 * one pass over the batch, each block's values in cache (log(diag(L)) takes m logarithms of
 * a block, not m^2). A program with an elementwise
 * instruction without a vector kernel runs the reference kernel.
 *
 * A kernel that fails on a block (a matrix that is not positive definite, a singular one)
 * makes the whole node fail over to the reference kernel (TG_EUNSUPPORTED), which runs it
 * again and reports the lowest failing block as the unfused ops would: errors cost a second
 * run, successes nothing.
 *
 * At run time the blocks (the batch shape of the outputs, C order) are split over the pool;
 * the values the outputs give are made straight in the outputs' blocks (contiguous), the
 * others in scratch. An output never aliases an input: inputs broadcast over the batch are
 * read by every block, so the plan gives such nodes no in-place output (vk_reuse_ok).
 *
 * Invariants: every element is computed by the same kernels whatever the thread count; a
 * block's values never leave its thread's scratch.
 */
#include "vm.h"
#include "../../ops/blockwise.h"
#include "../../ops/fused.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

typedef tg_status (*fc_kern_fn)(tg_kern *k);

typedef struct fc_ins {
    tg_vk_fn fn; /* elementwise kernel; NULL for a literal or a core op */
    tg_vk_args args;
    bool mm;          /* a matmul */
    fc_kern_fn core;  /* another core op: its kernel on the block (block_kernel) */
    int64_t m, n, kk; /* matmul: [m, kk] x [kk, n] */
} fc_ins;

struct vm_fcore {
    tg_ctx *ctx;
    tg_fused_prog *q; /* the program typed for one block (a copy) */
    int nbatch;       /* batch rank */
    int lead[TG_MAX_OUTS];
    fc_ins *ins;            /* per instruction */
    int64_t *off;           /* per slot: byte offset of its scratch (-1: none) */
    int64_t *nel;           /* per slot: elements of a block's value */
    int *direct;            /* per slot: the output whose block it is written into, or -1 */
    bool fold[TG_MAX_OUTS]; /* per output: a reduction reduce_block folds */
    double *cell;           /* per slot: a literal's value */
    size_t per_thread;      /* scratch bytes per thread, gather buffers included */
    size_t gath;            /* byte offset of the gather buffers in a thread's scratch */
    size_t ptrs;            /* and of the table of the values' addresses */
    int64_t maxel;          /* most elements of one value */
    double flops;           /* work of one block, for the pool split */
    int nslot;
};

void tg_vm_fcore_free(vm_fcore *c) {
    if (!c) return;
    size_t ns = (size_t)c->nslot + 1;
    tg_fused_free(c->q);
    tg_mem_free(c->ctx, c->ins, c->ins ? sizeof *c->ins * ns : 0);
    tg_mem_free(c->ctx, c->off, c->off ? sizeof *c->off * ns : 0);
    tg_mem_free(c->ctx, c->nel, c->nel ? sizeof *c->nel * ns : 0);
    tg_mem_free(c->ctx, c->direct, c->direct ? sizeof *c->direct * ns : 0);
    tg_mem_free(c->ctx, c->cell, c->cell ? sizeof *c->cell * ns : 0);
    tg_mem_free(c->ctx, c, sizeof *c);
}

/* Whether reduce_block implements reduction r: sum and prod in IEEE arithmetic, max and min
 * with the first NaN winning, finished by nothing or a mean. */
static bool fold_ok(const tg_reduce_def *r) {
    bool ext = r->combine == TG_RED_MAX || r->combine == TG_RED_MIN;
    bool num = r->combine == TG_RED_SUM || r->combine == TG_RED_PROD;
    return (ext ? r->nan_wins : num && !r->nan_wins) &&
           (r->fin == TG_FIN_NONE || r->fin == TG_FIN_MEAN);
}

/* Element i of the f32 or f64 array x, as a double. */
static inline double at_f(const void *x, bool dbl, int64_t i) {
    return dbl ? ((const double *)x)[i] : (double)((const float *)x)[i];
}

/* The sum (prod: the product) of the n elements of x in double: FOLD_LANES accumulators
 * over the elements in turn, combined in order at the end (the same order whatever the
 * thread count; not the reference's one-accumulator order, hence a rounding apart). */
#define FOLD_LANES 8
static inline double fold_all(const void *x, bool dbl, int64_t n, bool prod) {
    double a[FOLD_LANES];
    for (int l = 0; l < FOLD_LANES; l++) a[l] = prod ? 1.0 : 0.0;
    int64_t i = 0;
    for (; i + FOLD_LANES <= n; i += FOLD_LANES)
        for (int l = 0; l < FOLD_LANES; l++)
            a[l] = prod ? a[l] * at_f(x, dbl, i + l) : a[l] + at_f(x, dbl, i + l);
    for (int l = 0; i < n; i++, l++) a[l] = prod ? a[l] * at_f(x, dbl, i) : a[l] + at_f(x, dbl, i);
    double s = a[0];
    for (int l = 1; l < FOLD_LANES; l++) s = prod ? s * a[l] : s + a[l];
    return s;
}

/* Folds the contiguous block value x (type t, f32 or f64) over the axes `red` into the
 * contiguous output block y (of t's dtype) as r says, element by element in C order from
 * r's identity (a sum or product of the whole block: fold_all), each output element's
 * accumulator a double of acc. */
static void reduce_block(const tg_reduce_def *r, const tg_type *t, const bool *red, const void *x,
                         void *y, double *acc) {
    int64_t ostr[TG_MAX_DIMS], idx[TG_MAX_DIMS] = {0}, no = 1, n = 1, cnt = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        ostr[d] = red[d] ? 0 : no;
        if (red[d])
            cnt *= t->shape[d];
        else
            no *= t->shape[d];
        n *= t->shape[d];
    }
    for (int64_t o = 0; o < no; o++) acc[o] = r->identity;
    bool dbl = t->dtype == TG_DT_F64, num = r->combine == TG_RED_SUM || r->combine == TG_RED_PROD;
    if (no == 1 && num) { /* the whole block: from the identity (0 or 1), as the reference */
        bool prod = r->combine == TG_RED_PROD; /* constant arguments: one loop per case */
        acc[0] = dbl ? (prod ? fold_all(x, true, n, true) : fold_all(x, true, n, false))
                     : (prod ? fold_all(x, false, n, true) : fold_all(x, false, n, false));
        n = 0;
    }
    for (int64_t i = 0, at = 0; i < n; i++) {
        double v = at_f(x, dbl, i), *a = &acc[at];
        switch (r->combine) {
        case TG_RED_SUM:
            *a += v;
            break;
        case TG_RED_PROD:
            *a *= v;
            break;
        case TG_RED_MAX:
            if (!isnan(*a) && (isnan(v) || v > *a)) *a = v;
            break;
        default: /* TG_RED_MIN (fold_ok) */
            if (!isnan(*a) && (isnan(v) || v < *a)) *a = v;
            break;
        }
        if (no == 1) continue;
        for (int d = t->ndim - 1; d >= 0; d--) {
            at += ostr[d];
            if (++idx[d] < t->shape[d]) break;
            at -= ostr[d] * t->shape[d];
            idx[d] = 0;
        }
    }
    for (int64_t o = 0; o < no; o++) {
        double a = r->fin == TG_FIN_MEAN ? acc[o] / (double)cnt : acc[o];
        if (dbl)
            ((double *)y)[o] = a;
        else
            ((float *)y)[o] = (float)a;
    }
}

/* The kernel of the core instruction ins on one block of q: the op's computation of one
 * block (tg_op_def.core) when every operand and the result have exactly their core ranks,
 * else its reference kernel (which reads the signature and finds the same). */
static fc_kern_fn block_kernel(const tg_fused_prog *q, const tg_fused_instr *ins) {
    const tg_op_def *def = tg_op_table[ins->op];
    tg_bw_sig sig;
    int nd[TG_BW_MAX_OPERANDS] = {0}, cores[TG_BW_MAX_OPERANDS] = {0}, bad;
    uint32_t absent;
    for (int a = 0; a < ins->nin; a++) nd[a] = q->type[ins->in[a]].ndim;
    bool plain = def->core && tg_bw_parse(def->signature, &sig) && sig.nin == ins->nin &&
                 sig.nout == 1 && tg_bw_core_ranks(&sig, nd, cores, &absent, &bad) &&
                 q->type[q->nin + (int)(ins - q->instr)].ndim == cores[sig.nin];
    for (int a = 0; plain && a < ins->nin; a++) plain = nd[a] == cores[a];
    return plain ? def->core : def->ref;
}

vm_fcore *tg_vm_fcore_prep(tg_ctx *ctx, const tg_node *n, const tg_fused_prog *whole,
                           tg_vk_isa isa) {
    int lead[TG_MAX_OUTS], b = 0;
    if (n->nin > TG_MAX_OUTS || !tg_fused_block_plan(whole, lead, &b)) return NULL;
    tg_type tin[TG_MAX_OUTS];
    for (int s = 0; s < n->nin; s++) {
        tin[s] = n->in[s]->type;
        tin[s].ndim = (uint8_t)(tin[s].ndim - lead[s]);
        memmove(tin[s].shape, tin[s].shape + lead[s], sizeof tin[s].shape[0] * tin[s].ndim);
        for (int d = 0; d < tin[s].ndim; d++)
            if (tin[s].shape[d] < 0) return NULL; /* block extents must be static */
    }
    char msg[256];
    tg_fused_prog *q = NULL;
    if (tg_fused_node_typed(ctx, n, tin, false, &q, msg, sizeof msg) != TG_OK) return NULL;
    vm_fcore *c = tg_mem_calloc(ctx, sizeof *c);
    if (!c) {
        tg_fused_free(q);
        return NULL;
    }
    size_t ns = (size_t)q->nslot + 1;
    c->ctx = ctx;
    c->q = q;
    c->nslot = q->nslot;
    c->nbatch = b;
    memcpy(c->lead, lead, sizeof lead[0] * (size_t)n->nin);
    c->ins = tg_mem_calloc(ctx, sizeof *c->ins * ns);
    c->off = tg_mem_alloc(ctx, sizeof *c->off * ns);
    c->nel = tg_mem_alloc(ctx, sizeof *c->nel * ns);
    c->cell = tg_mem_calloc(ctx, sizeof *c->cell * ns);
    c->direct = tg_mem_alloc(ctx, sizeof *c->direct * ns);
    bool ok = c->ins && c->off && c->nel && c->cell && c->direct && q->nout == n->nout;
    for (int s = 0; ok && s < q->nslot; s++) c->direct[s] = -1;
    for (int o = q->nout - 1; ok && o >= 0; o--)
        if (q->out[o].reduce < 0) c->direct[q->out[o].slot] = o;
    size_t at = 0;
    for (int s = 0; ok && s < q->nslot; s++) {
        const tg_type *t = &q->type[s];
        ok = tg_shape_size(t->ndim, t->shape, &c->nel[s]);
        c->off[s] = -1;
        if (c->nel[s] > c->maxel) c->maxel = c->nel[s];
        if (s < q->nin) continue;
        const tg_fused_instr *ins = &q->instr[s - q->nin];
        fc_ins *z = &c->ins[s - q->nin];
        tg_dtype dt = t->dtype;
        if (ins->op == TG_FUSED_CONST) {
            if (tg_dtype_is_float(dt))
                tg_store_f64(&c->cell[s], dt, ins->cf);
            else
                tg_store_i64(&c->cell[s], dt, ins->ci);
            continue;
        }
        c->off[s] = (int64_t)at;
        at += ((size_t)c->nel[s] * tg_dtype_size(dt) + 63) / 64 * 64;
        if (tg_fused_is_core(ins->op)) {
            const tg_type *a = &q->type[ins->in[0]], *bt = &q->type[ins->in[ins->nin > 1]];
            z->mm = ins->op == TG_OP_MATMUL && ins->nin == 2 && a->ndim == 2 && bt->ndim == 2 &&
                    t->ndim == 2 && (dt == TG_DT_F32 || dt == TG_DT_F64) && a->dtype == dt &&
                    bt->dtype == dt;
            z->core = z->mm ? NULL : block_kernel(q, ins);
            if (z->mm) {
                z->m = a->shape[0], z->kk = a->shape[1], z->n = bt->shape[1];
                c->flops += 2.0 * (double)(z->m * z->n * z->kk);
            } else { /* a factorization or a solve: about m^3 (or m^2 n) */
                int64_t m = a->ndim > 0 ? a->shape[0] : 1;
                c->flops += (double)m * (double)(c->nel[ins->in[0]] + c->nel[s]);
            }
            continue;
        }
        tg_dtype idt[TG_FUSED_MAX_ARGS];
        for (int k = 0; k < ins->nin; k++) idt[k] = q->type[ins->in[k]].dtype;
        z->fn = ins->nin <= TG_VK_MAXIN
                    ? tg_vk_select(tg_op_table[ins->op], ins->nin, idt, dt, isa, &z->args)
                    : NULL;
        ok = z->fn != NULL;
        c->flops += (double)(c->nel[s] * tg_vk_cost(tg_op_table[ins->op]));
    }
    for (int o = 0; ok && o < q->nout; o++) {
        const tg_fused_out *x = &q->out[o];
        if (x->reduce < 0) continue;
        tg_dtype dt = q->type[x->slot].dtype;
        c->flops += (double)c->nel[x->slot];
        c->fold[o] = fold_ok(&tg_op_table[x->reduce]->reduce) &&
                     (dt == TG_DT_F32 || dt == TG_DT_F64) && q->out_type[o].dtype == dt;
    }
    c->gath = at;
    c->ptrs = at + (size_t)TG_FUSED_MAX_ARGS * (((size_t)c->maxel * 8 + 63) / 64 * 64);
    c->per_thread = c->ptrs + ((sizeof(char *) * (size_t)q->nslot + 63) / 64 * 64);
    if (!ok) {
        tg_vm_fcore_free(c);
        return NULL;
    }
    return c;
}

size_t tg_vm_fcore_ws(const vm_fcore *c, int nthreads) {
    return c->per_thread * (size_t)(nthreads > 0 ? nthreads : 1) + 64;
}

/* Blocks times a block's work from which the blocks are split over the pool. */
#define SPLIT_FLOPS 65536.0

bool tg_vm_fcore_splits(const vm_fcore *c, const tg_type *in, int nthreads) {
    int64_t batch[TG_MAX_DIMS], nb = 1;
    for (int d = 0; d < c->nbatch; d++) batch[d] = 1;
    for (int s = 0; s < c->q->nin; s++)
        for (int d = 0; d < c->lead[s]; d++) {
            int64_t x = in[s].shape[d], *at = &batch[c->nbatch - c->lead[s] + d];
            if (x > *at) *at = x;
        }
    for (int d = 0; d < c->nbatch; d++) nb *= batch[d];
    return nthreads > 1 && nb > 1 && (double)nb * c->flops >= SPLIT_FLOPS;
}

typedef struct fc_run {
    const vm_fcore *c;
    const tg_node *node;
    tg_tensor *const *in;
    tg_tensor *const *out;
    int64_t batch[TG_MAX_DIMS];
    int64_t nblocks;
    char *ws;
    atomic_int failed; /* a block's kernel failed: the reference kernel runs the node */
} fc_run;

/* The view of block bi of t whose first `lead` dimensions are batch ones (right-aligned
 * with the batch, an extent 1 read at 0). */
static void block_of(const tg_tensor *t, int lead, int nbatch, const int64_t *bi, tg_tensor *v) {
    *v = *t;
    v->ndim = t->ndim - lead;
    for (int d = 0; d < lead; d++)
        if (t->shape[d] != 1) v->offset += bi[nbatch - lead + d] * t->strides[d];
    for (int d = 0; d < v->ndim; d++) {
        v->shape[d] = t->shape[lead + d];
        v->strides[d] = t->strides[lead + d];
    }
}

/* Copies v (of shape t's trailing dimensions, right-aligned; extents of 1 broadcast) as a
 * contiguous value of shape (nd, S) into dst, row by row. */
static void gather_bcast(char *dst, const tg_tensor *v, int nd, const int64_t *S) {
    int64_t str[TG_MAX_DIMS], idx[TG_MAX_DIMS] = {0}, es = (int64_t)tg_dtype_size(v->dtype);
    for (int d = 0; d < nd; d++) {
        int a = d - (nd - v->ndim);
        str[d] = a >= 0 && v->shape[a] != 1 ? v->strides[a] : 0;
    }
    const char *base = tg_tensor_data(v);
    int64_t inner = nd > 0 ? S[nd - 1] : 1, rows = 1;
    for (int d = 0; d + 1 < nd; d++) rows *= S[d];
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = 0;
        for (int d = 0; d + 1 < nd; d++) o += idx[d] * str[d];
        tg_vm_gather(dst + r * inner * es, base + o * es, nd > 0 ? str[nd - 1] : 0, inner, es);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < S[d]) break;
            idx[d] = 0;
        }
    }
}

static bool contiguous_as(const tg_tensor *v, int nd, const int64_t *S) {
    if (v->ndim != nd) return false;
    int64_t expect = 1;
    for (int d = nd - 1; d >= 0; d--) {
        if (v->shape[d] != S[d]) return false;
        if (S[d] != 1 && v->strides[d] != expect) return false;
        expect *= S[d];
    }
    return true;
}

/* A matrix operand of gemm: in place (row-major, or transposed), else gathered. */
static const void *mm_operand(const tg_tensor *v, char *g, int64_t rows, int64_t cols, bool *tr,
                              int64_t *ld) {
    int64_t rs = rows > 1 ? v->strides[0] : cols, cs = cols > 1 ? v->strides[1] : 1;
    if (cs == 1 && rs >= (cols > 1 ? cols : 1)) {
        *tr = false;
        *ld = rs;
        return tg_tensor_data(v);
    }
    if (rs == 1 && cs >= (rows > 1 ? rows : 1)) {
        *tr = true;
        *ld = cs;
        return tg_tensor_data(v);
    }
    gather_bcast(g, v, 2, v->shape);
    *tr = false;
    *ld = cols > 1 ? cols : 1;
    return g;
}

/* The block value of slot u at p (a literal: its cell), as a contiguous tensor over buf. */
static void slot_tensor(const vm_fcore *c, int u, char *p, tg_buffer *buf, tg_tensor *v) {
    const tg_fused_prog *q = c->q;
    bool lit = u >= q->nin && q->instr[u - q->nin].op == TG_FUSED_CONST;
    *v = (tg_tensor){.dtype = q->type[u].dtype, .ndim = q->type[u].ndim};
    memcpy(v->shape, q->type[u].shape, sizeof v->shape[0] * (size_t)v->ndim);
    tg_contiguous_strides(v->ndim, v->shape, v->strides);
    buf->data = lit ? (void *)&c->cell[u] : p;
    v->buf = buf;
}

/* Runs the kernel fn of op (a core op or a reduction) on one block: the inputs in, the
 * output out, of the block type ot, zeroed first as reference kernels expect (a block
 * computation, tg_op_def.core, writes all of it). false when it fails. */
static bool run_kern(const vm_fcore *c, const tg_node *node, fc_kern_fn fn, int op,
                     const tg_aval *attrs, tg_tensor *const *in, int nin, tg_tensor *out,
                     const tg_type *ot) {
    tg_node fake = {.op = op,
                    .id = node->id,
                    .nin = nin,
                    .nout = 1,
                    .attrs = (tg_aval *)attrs,
                    .line = node->line,
                    .col = node->col};
    tg_tensor *o = out;
    tg_kern k = {.ctx = c->ctx,
                 .node = &fake,
                 .attrs = attrs,
                 .in = in,
                 .nin = nin,
                 .out = &o,
                 .nout = 1,
                 .out_type = ot};
    if (fn != tg_op_table[op]->core)
        memset(tg_tensor_data(out), 0, (size_t)tg_tensor_size(out) * tg_dtype_size(out->dtype));
    return fn(&k) == TG_OK;
}

/* Runs the program on block bi; false when a kernel failed. */
static bool run_block(const fc_run *R, char *scr, const int64_t *bi) {
    const vm_fcore *c = R->c;
    const tg_fused_prog *q = c->q;
    tg_tensor views[TG_MAX_OUTS];
    for (int s = 0; s < q->nin; s++) block_of(R->in[s], c->lead[s], c->nbatch, bi, &views[s]);
    size_t gstep = ((size_t)c->maxel * 8 + 63) / 64 * 64;
    char **ptr = (char **)(scr + c->ptrs); /* per slot: where its block's value lies */
    tg_tensor ov;
    for (int s = q->nin; s < q->nslot; s++) {
        ptr[s] = scr + c->off[s];
        if (c->direct[s] < 0) continue;
        block_of(R->out[c->direct[s]], c->nbatch, c->nbatch, bi, &ov);
        ptr[s] = tg_tensor_data(&ov); /* an output's value goes straight into its block */
    }
    for (int j = 0; j < q->ninstr; j++) {
        const tg_fused_instr *ins = &q->instr[j];
        const fc_ins *z = &c->ins[j];
        int s = q->nin + j;
        if (ins->op == TG_FUSED_CONST) continue;
        char *y = ptr[s];
        const tg_type *ty = &q->type[s];
        if (z->core) {
            tg_tensor tv[TG_FUSED_MAX_ARGS + 1], *tp[TG_FUSED_MAX_ARGS];
            tg_buffer buf[TG_FUSED_MAX_ARGS + 1];
            for (int k = 0; k < ins->nin; k++) {
                int u = ins->in[k];
                tp[k] = &views[u];
                if (u < q->nin) continue;
                slot_tensor(c, u, ptr[u], &buf[k], &tv[k]);
                tp[k] = &tv[k];
            }
            slot_tensor(c, s, y, &buf[ins->nin], &tv[ins->nin]);
            if (!run_kern(c, R->node, z->core, ins->op, ins->attrs, tp, ins->nin, &tv[ins->nin],
                          ty))
                return false;
            continue;
        }
        if (z->mm) {
            bool ta = false, tb = false;
            int64_t lda = z->kk > 1 ? z->kk : 1, ldb = z->n > 1 ? z->n : 1;
            const void *a = ptr[ins->in[0]], *bb = ptr[ins->in[1]];
            if (ins->in[0] < q->nin)
                a = mm_operand(&views[ins->in[0]], scr + c->gath, z->m, z->kk, &ta, &lda);
            if (ins->in[1] < q->nin)
                bb = mm_operand(&views[ins->in[1]], scr + c->gath + gstep, z->kk, z->n, &tb, &ldb);
            tg_vm_gemm(ty->dtype == TG_DT_F64, ta, tb, z->m, z->n, z->kk, 1.0, a, lda, bb, ldb, 0.0,
                       y, z->n > 1 ? z->n : 1);
            continue;
        }
        const void *x[TG_VK_MAXIN];
        int64_t st[TG_VK_MAXIN];
        for (int k = 0; k < ins->nin; k++) {
            int u = ins->in[k];
            char *g = scr + c->gath + (size_t)k * gstep;
            st[k] = c->nel[u] == 1 ? 0 : 1;
            if (u >= q->nin && q->instr[u - q->nin].op == TG_FUSED_CONST) {
                x[k] = &c->cell[u];
                st[k] = 0;
            } else if (u >= q->nin) {
                x[k] = ptr[u];
                if (st[k] && c->nel[u] != c->nel[s]) {
                    tg_tensor t = {.dtype = q->type[u].dtype, .ndim = q->type[u].ndim};
                    tg_buffer buf = {.data = ptr[u]};
                    memcpy(t.shape, q->type[u].shape, sizeof t.shape[0] * (size_t)t.ndim);
                    tg_contiguous_strides(t.ndim, t.shape, t.strides);
                    t.buf = &buf;
                    gather_bcast(g, &t, ty->ndim, ty->shape);
                    x[k] = g;
                }
            } else if (!st[k]) {
                x[k] = tg_tensor_data(&views[u]);
            } else if (contiguous_as(&views[u], ty->ndim, ty->shape)) {
                x[k] = tg_tensor_data(&views[u]);
            } else {
                gather_bcast(g, &views[u], ty->ndim, ty->shape);
                x[k] = g;
            }
        }
        z->fn(&z->args, c->nel[s], y, x, st);
    }
    for (int o = 0; o < q->nout; o++) { /* reductions; a value given twice: copied */
        const tg_fused_out *x = &q->out[o];
        int u = x->slot;
        if (x->reduce < 0 && c->direct[u] == o) continue;
        block_of(R->out[o], c->nbatch, c->nbatch, bi, &ov);
        if (x->reduce < 0) {
            memcpy(tg_tensor_data(&ov), ptr[u],
                   (size_t)c->nel[u] * tg_dtype_size(q->type[u].dtype));
            continue;
        }
        if (c->fold[o]) {
            reduce_block(&tg_op_table[x->reduce]->reduce, &q->type[u], x->red, ptr[u],
                         tg_tensor_data(&ov), (double *)(scr + c->gath));
            continue;
        }
        tg_tensor tv, *tp = &tv;
        tg_buffer buf;
        slot_tensor(c, u, ptr[u], &buf, &tv);
        if (!run_kern(c, R->node, tg_op_table[x->reduce]->ref, x->reduce, x->attrs, &tp, 1, &ov,
                      &q->out_type[o]))
            return false;
    }
    return true;
}

static void blocks_task(void *arg, int ith, int nth) {
    fc_run *R = arg;
    int64_t lo = R->nblocks * ith / nth, hi = R->nblocks * (ith + 1) / nth;
    char *scr = R->ws + (size_t)ith * R->c->per_thread;
    int64_t bi[TG_MAX_DIMS];
    for (int64_t e = lo; e < hi; e++) {
        int64_t r = e;
        for (int d = R->c->nbatch - 1; d >= 0; d--) {
            bi[d] = r % R->batch[d];
            r /= R->batch[d];
        }
        if (!run_block(R, scr, bi)) {
            atomic_store_explicit(&R->failed, 1, memory_order_relaxed);
            return;
        }
        if (atomic_load_explicit(&R->failed, memory_order_relaxed)) return;
    }
}

tg_status tg_vm_exec_fcore(const vm_fcore *c, vm_exec *e) {
    const tg_fused_prog *q = c->q;
    int b = c->nbatch;
    fc_run R = {.c = c, .node = e->node, .in = e->in, .out = e->out, .nblocks = 1};
    atomic_init(&R.failed, 0);
    for (int o = 0; o < q->nout; o++) {
        const tg_tensor *t = e->out[o];
        if (t->ndim != b + q->out_type[o].ndim || !tg_tensor_is_contiguous(t))
            return TG_EUNSUPPORTED;
        for (int d = 0; d < b; d++)
            if (t->shape[d] != e->out[0]->shape[d]) return TG_EUNSUPPORTED;
    }
    for (int d = 0; d < b; d++) R.batch[d] = e->out[0]->shape[d], R.nblocks *= R.batch[d];
    /* every input: its block shape as typed, batch extents 1 or the batch's (else the
       reference kernel reports the mismatch) */
    for (int s = 0; s < q->nin; s++) {
        const tg_tensor *t = e->in[s];
        int l = c->lead[s];
        if (t->ndim - l != q->type[s].ndim) return TG_EUNSUPPORTED;
        for (int d = 0; d < l; d++)
            if (t->shape[d] != 1 && t->shape[d] != R.batch[b - l + d]) return TG_EUNSUPPORTED;
        for (int d = 0; d < q->type[s].ndim; d++)
            if (t->shape[l + d] != q->type[s].shape[d]) return TG_EUNSUPPORTED;
    }
    if (R.nblocks == 0) return TG_OK;
    int nth = e->pool ? e->nthreads : 1;
    if (!e->ws || tg_vm_fcore_ws(c, nth) > e->ws_bytes) return TG_EUNSUPPORTED;
    R.ws = (char *)(((uintptr_t)e->ws + 63) / 64 * 64);
    if (nth > 1 && R.nblocks > 1 && (double)R.nblocks * c->flops >= SPLIT_FLOPS)
        tg_pool_run(e->pool, blocks_task, &R);
    else
        blocks_task(&R, 0, 1);
    return atomic_load(&R.failed) ? TG_EUNSUPPORTED : TG_OK;
}
