/* vm_fused.c - fused{...} nodes evaluated block by block (src/ops/fused.h).
 *
 * At compile time a copy of the node's program is typed with the static input types;
 * every instruction gets the vector kernel for its op and slot dtypes (vkernels.h), and
 * every value a scratch buffer of BLK elements, reused once its last reader ran (a
 * register allocation over the program). A program that is not `uniform` (fused.h), or
 * has an instruction or a reduction without a kernel here, runs its reference kernel.
 *
 * At run time the iteration space S is the broadcast of the inputs' shapes. The flat
 * C-order index of S is cut into blocks of BLK elements: for each block every instruction
 * runs once over the block, so temporaries stay in L1/L2. Inputs that are contiguous over
 * S or scalars are read in place. So is, in a block that lies in one row (the last axis
 * of S once extents of 1 are dropped and axes merged where every input allows), an input
 * whose values along the row are contiguous or one value (a [K, 1] input broadcast to
 * [K, M] is a scalar per row): blocks end at row ends when rows are long enough. Other
 * broadcast or strided inputs are gathered into a block buffer first, row by row.
 * Elementwise outputs are written straight into the output.
 * Reductions (every output reduces a value of shape S over the same axes) need S to
 * simplify to [K1, R, K2] (kept, reduced, kept axes):
 *  - K2 = 1 (rows): each row's values are reduced as they are made; a row is summed block
 *    by block (eight accumulators per block) and chunk by chunk (CH blocks), whatever the
 *    number of threads; max and min follow the reference's rule exactly (first NaN, first
 *    of equal values) and prod multiplies in order;
 *  - K2 > 1 (columns): every output element accumulates in the reference's order, in
 *    double: bit-identical to the reference.
 * What each reduction computes comes from its op record (`reduce`, ops.h): accumulators
 * start from its identity, a loop per combine (sum, prod, max, min: the first NaN wins)
 * folds values in, and a mean divides by the count at the store.
 * Work is split over the pool by blocks (elementwise), rows, chunks of a few long rows,
 * or output ranges (columns).
 *
 * Invariants: a block never crosses a row of a row reduction; each element's value is
 * computed by the same kernels whatever the blocking or the thread count.
 */
#include "vm.h"
#include "../../ops/fused.h"

#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define BLK          512               /* elements per block */
#define STREAM_BYTES ((size_t)8 << 20) /* outputs larger than this bypass the caches */
#define CH           16                /* blocks per chunk of a row reduction */
#define SPLIT_WORK   32768             /* elements x cost above which the pool is used */
#define SUB          128               /* elements per piece of a costly instruction */
#define COSTLY       8                 /* tg_vk_cost from which an instruction is cut */
/* Rows from which blocks end at row ends: shorter rows would make many small blocks, which
 * cost more than gathering (rows of 64 read in place took twice as long, of 128 a third
 * longer; from 256 on, in place was as fast or faster). */
#define ROW_MIN 256

typedef struct fz_ins {
    tg_vk_fn fn; /* NULL for a literal */
    tg_vk_args args;
    int cost; /* per element, relative to an add (tg_vk_cost) */
    int nin;
    int64_t es[TG_FUSED_MAX_ARGS]; /* bytes per element of each operand */
    int64_t ys;                    /* and of the result */
    int in[TG_FUSED_MAX_ARGS];
} fz_ins;

typedef struct fz_prog {
    tg_ctx *ctx;
    tg_fused_prog *p; /* the node's program, typed with the static types (a copy) */
    fz_ins *ins;      /* per instruction */
    int *buf;         /* per slot: scratch buffer, -1 for inputs and literals */
    int *direct;      /* per slot: the elementwise output written in place, or -1 */
    double *cell;     /* per slot: a literal's value (8 bytes, in its dtype) */
    uint8_t *sdt;     /* per slot: dtype */
    int nbuf;         /* scratch buffers per thread */
    int first_out;    /* first instruction that makes an output's value (ninstr: none) */
    int cost;         /* per-element cost of the whole program */
    int nslot;
    vm_fcore *core; /* a program with core ops (vm_fcore.c); the fields above unused */
} fz_prog;

void tg_vm_fused_free(void *prep) {
    fz_prog *f = prep;
    if (!f) return;
    tg_ctx *ctx = f->ctx;
    size_t ns = (size_t)f->nslot + 1;
    tg_fused_free(f->p);
    tg_vm_fcore_free(f->core);
    tg_mem_free(ctx, f->ins, f->ins ? sizeof *f->ins * ns : 0);
    tg_mem_free(ctx, f->buf, f->buf ? sizeof *f->buf * ns : 0);
    tg_mem_free(ctx, f->direct, f->direct ? sizeof *f->direct * ns : 0);
    tg_mem_free(ctx, f->cell, f->cell ? sizeof *f->cell * ns : 0);
    tg_mem_free(ctx, f->sdt, f->sdt ? ns : 0);
    tg_mem_free(ctx, f, sizeof *f);
}

static bool float_dt(int dt) { return dt == TG_DT_F32 || dt == TG_DT_F64; }

/* The computation of output o's reduction (its record's `reduce`, ops.h). */
static inline const tg_reduce_def *red_of(const tg_fused_prog *p, int o) {
    return &tg_op_table[p->out[o].reduce]->reduce;
}

/* Whether the kernels here implement reduction r: sum and prod in IEEE arithmetic, max and
 * min with the first NaN winning, finished by nothing or a mean. */
static bool red_supported(const tg_reduce_def *r) {
    bool ext = r->combine == TG_RED_MAX || r->combine == TG_RED_MIN;
    bool num = r->combine == TG_RED_SUM || r->combine == TG_RED_PROD;
    return (ext ? r->nan_wins : num && !r->nan_wins) &&
           (r->fin == TG_FIN_NONE || r->fin == TG_FIN_MEAN);
}

static bool space_of(int nin, const tg_type *in, int *nd, int64_t *S);

bool tg_vm_fused_splits(const void *prep, const tg_type *in, int nthreads) {
    const fz_prog *f = prep;
    int nd;
    int64_t S[TG_MAX_DIMS], n;
    if (f && f->core) return tg_vm_fcore_splits(f->core, in, nthreads);
    if (!f || nthreads <= 1 || !space_of(f->p->nin, in, &nd, S) || !tg_shape_size(nd, S, &n))
        return false;
    /* as tg_vm_exec_fused decides: maps from SPLIT_WORK and more than a block, reductions
       from SPLIT_WORK */
    return n * f->cost >= SPLIT_WORK && (f->p->reduces || n > BLK);
}

void *tg_vm_fused_prep(tg_ctx *ctx, const tg_node *n, tg_vk_isa isa) {
    char msg[256];
    tg_fused_prog *p = NULL;
    tg_type tin[TG_MAX_OUTS];
    if (n->nin > TG_MAX_OUTS) return NULL;
    for (int k = 0; k < n->nin; k++) tin[k] = n->in[k]->type;
    if (tg_fused_node_typed(ctx, n, tin, false, &p, msg, sizeof msg) != TG_OK) return NULL;
    bool ok = p->nout == n->nout;
    if (ok && p->core) {
        fz_prog *f = tg_mem_calloc(ctx, sizeof *f);
        if (f) f->core = tg_vm_fcore_prep(ctx, n, p, isa);
        tg_fused_free(p);
        if (f && f->core) {
            f->ctx = ctx;
            return f;
        }
        tg_mem_free(ctx, f, f ? sizeof *f : 0);
        return NULL;
    }
    if (!ok || !p->uniform) {
        tg_fused_free(p);
        return NULL;
    }
    fz_prog *f = tg_mem_calloc(ctx, sizeof *f);
    size_t ns = (size_t)p->nslot + 1;
    if (!f) {
        tg_fused_free(p);
        return NULL;
    }
    f->ctx = ctx;
    f->p = p;
    f->nslot = p->nslot;
    f->ins = tg_mem_calloc(ctx, sizeof *f->ins * ns);
    f->buf = tg_mem_alloc(ctx, sizeof *f->buf * ns);
    f->direct = tg_mem_alloc(ctx, sizeof *f->direct * ns);
    f->cell = tg_mem_calloc(ctx, sizeof *f->cell * ns);
    f->sdt = tg_mem_calloc(ctx, ns);
    int *last = tg_mem_alloc(ctx, sizeof *last * ns);
    int *freeb = tg_mem_alloc(ctx, sizeof *freeb * ns);
    ok = f->ins && f->buf && f->direct && f->cell && f->sdt && last && freeb;
    for (int s = 0; ok && s < p->nslot; s++) {
        f->sdt[s] = p->type[s].dtype;
        f->buf[s] = -1;
        f->direct[s] = -1;
        last[s] = -1;
    }
    /* outputs: elementwise ones are written in place (the first output of a slot) */
    for (int o = 0; ok && o < p->nout; o++) {
        const tg_fused_out *x = &p->out[o];
        int s = x->slot;
        last[s] = p->ninstr; /* read at the end of a block */
        if (x->reduce >= 0) {
            ok = float_dt(f->sdt[s]) && p->out_type[o].dtype == f->sdt[s] &&
                 n->out[o]->type.dtype == f->sdt[s] && red_supported(red_of(p, o));
        } else if (s >= p->nin && p->instr[s - p->nin].op != TG_FUSED_CONST && f->direct[s] < 0) {
            f->direct[s] = o;
        }
    }
    /* kernels and last readers */
    f->cost = 0;
    for (int j = 0; ok && j < p->ninstr; j++) {
        const tg_fused_instr *ins = &p->instr[j];
        int s = p->nin + j;
        fz_ins *z = &f->ins[j];
        if (ins->op == TG_FUSED_CONST) {
            tg_dtype dt = (tg_dtype)ins->dtype;
            if (tg_dtype_is_float(dt))
                tg_store_f64(&f->cell[s], dt, ins->cf);
            else
                tg_store_i64(&f->cell[s], dt, ins->ci);
            continue;
        }
        tg_dtype idt[TG_FUSED_MAX_ARGS];
        z->nin = ins->nin;
        z->ys = (int64_t)tg_dtype_size((tg_dtype)f->sdt[s]);
        for (int k = 0; k < ins->nin; k++) {
            z->in[k] = ins->in[k];
            idt[k] = (tg_dtype)f->sdt[ins->in[k]];
            z->es[k] = (int64_t)tg_dtype_size(idt[k]);
            if (last[ins->in[k]] < j) last[ins->in[k]] = j;
        }
        if (ins->nin > TG_VK_MAXIN) {
            ok = false;
            break;
        }
        z->fn =
            tg_vk_select(tg_op_table[ins->op], ins->nin, idt, (tg_dtype)f->sdt[s], isa, &z->args);
        ok = z->fn != NULL;
        z->cost = tg_vk_cost(tg_op_table[ins->op]);
        f->cost += z->cost;
    }
    /* scratch buffers: a value takes a free buffer, and gives it back after its last
     * reader (outputs' values live to the end of the block) */
    int nfree = 0;
    f->nbuf = 0;
    f->first_out = p->ninstr;
    for (int j = 0; ok && j < p->ninstr; j++) {
        int s = p->nin + j;
        if (p->instr[j].op == TG_FUSED_CONST) continue; /* outputs get one too: streaming */
        /* an output's value gets a buffer of its own, which no other value of the block
         * uses: the next block may still be streaming it out (ew_task) until the first
         * instruction that makes an output */
        bool out = last[s] == p->ninstr;
        if (out && j < f->first_out) f->first_out = j;
        f->buf[s] = nfree > 0 && !out ? freeb[--nfree] : f->nbuf++;
        for (int k = 0; k < f->ins[j].nin; k++) {
            int u = f->ins[j].in[k];
            bool dup = false; /* an operand given twice is freed once */
            for (int q = 0; q < k; q++) dup = dup || f->ins[j].in[q] == u;
            if (!dup && last[u] == j && f->buf[u] >= 0) freeb[nfree++] = f->buf[u];
        }
    }
    if (last) tg_mem_free(ctx, last, sizeof *last * ns);
    if (freeb) tg_mem_free(ctx, freeb, sizeof *freeb * ns);
    if (!ok) {
        tg_vm_fused_free(f);
        return NULL;
    }
    return f;
}

/* ---- run time ---- */

/* How a block reads an input: in place over the flat index of S (contiguous), one value,
 * in place along one row of the simplified space when the block lies in one (a row's
 * values contiguous, or one value per row), else gathered. */
typedef enum { IN_CONTIG, IN_SCALAR, IN_ROW, IN_GATHER } in_kind;

typedef struct fz_run {
    const fz_prog *f;
    const tg_fused_prog *p;
    tg_tensor *const *in;
    tg_tensor *const *out;
    int nd;                                 /* rank of S */
    int64_t S[TG_MAX_DIMS];                 /* the iteration space */
    int64_t n;                              /* its elements */
    in_kind ik[TG_MAX_OUTS];                /* per input */
    int nax;                                /* axes of S simplified (space_simplify) */
    int64_t ax[TG_MAX_DIMS];                /* their extents; the last one is a row */
    int64_t astr[TG_MAX_OUTS][TG_MAX_DIMS]; /* per input: strides along them (0: broadcast) */
    bool rowblk;                            /* blocks of the elementwise loop end at row
                                               ends (IN_ROW inputs read in place) */
    bool stream;                            /* elementwise outputs too large for the caches:
                                               made in scratch, written with streaming stores */
    char *ws;                               /* per-thread scratch, then accumulators */
    size_t per_thread;                      /* bytes of scratch per thread */
    /* reductions */
    int64_t K1, R, K2;
    double *acc;          /* columns: per output, K1 * K2 */
    double *part;         /* rows: per output, chunk partials */
    int64_t row, nchunks; /* rows: the row being chunked */
} fz_run;

/* The element offset in input k of the start of row r of the simplified space. */
static int64_t row_offset(const fz_run *F, int k, int64_t r) {
    int64_t off = 0;
    for (int d = F->nax - 2; d >= 0 && r > 0; d--) {
        off += r % F->ax[d] * F->astr[k][d];
        r /= F->ax[d];
    }
    return off;
}

/* Gathers elements [f0, f0 + m) of input k broadcast over S into dst, row by row. */
static void gather_in(const fz_run *F, int k, int64_t f0, int64_t m, char *dst) {
    const tg_tensor *t = F->in[k];
    const int64_t *ax = F->ax, *st = F->astr[k];
    int nax = F->nax;
    int64_t es = (int64_t)tg_dtype_size(t->dtype), inner = ax[nax - 1], s1 = st[nax - 1];
    int64_t idx[TG_MAX_DIMS], r = f0 / inner, col = f0 % inner, off = 0;
    for (int d = nax - 2; d >= 0; d--) {
        idx[d] = r % ax[d];
        r /= ax[d];
        off += idx[d] * st[d];
    }
    const char *base = tg_tensor_data(t);
    for (int64_t done = 0; done < m; col = 0) {
        int64_t len = inner - col < m - done ? inner - col : m - done;
        tg_vm_gather(dst + done * es, base + (off + col * s1) * es, s1, len, es);
        done += len;
        for (int d = nax - 2; d >= 0; d--) { /* the next row */
            off += st[d];
            if (++idx[d] < ax[d]) break;
            off -= idx[d] * st[d];
            idx[d] = 0;
        }
    }
}

/* Copies n bytes to dst (16-byte aligned, n a multiple of 16) with streaming stores,
 * which skip reading the destination's lines first. */
static void stream_copy(char *dst, const char *src, size_t n) {
#if defined(__SSE2__)
    for (size_t i = 0; i < n; i += 16)
        _mm_stream_si128((__m128i *)(void *)(dst + i),
                         _mm_loadu_si128((const __m128i *)(const void *)(src + i)));
#else
    memcpy(dst, src, n);
#endif
}

/* A thread's streamed outputs of the previous block, still to be written: eval_block
 * writes them piece by piece between the instructions of the next block (all of them
 * before the first instruction that makes an output value, whose buffer they are), so
 * the stores drain while the kernels compute instead of stalling in one burst. */
typedef struct fz_pend {
    int n; /* outputs pending */
    const char *src[TG_MAX_OUTS];
    char *dst[TG_MAX_OUTS];    /* 16-byte aligned */
    size_t bytes[TG_MAX_OUTS]; /* multiples of 16 */
    size_t done[TG_MAX_OUTS];
} fz_pend;

/* Writes the first num/den of every pending output (all of them when num >= den). */
static void pend_pump(fz_pend *q, int num, int den) {
    for (int i = 0; i < q->n; i++) {
        size_t upto = num >= den ? q->bytes[i] : q->bytes[i] / (size_t)den * (size_t)num / 64 * 64;
        if (upto <= q->done[i]) continue;
        stream_copy(q->dst[i] + q->done[i], q->src[i] + q->done[i], upto - q->done[i]);
        q->done[i] = upto;
    }
    if (num >= den) q->n = 0;
}

/* The next block's lines of the contiguous inputs, prefetched a piece before each
 * instruction: a blockwise kernel reads its inputs in short bursts that the hardware
 * prefetcher does not run ahead of, and one burst of prefetches stalls as much. They are
 * asked into every cache level (a non-temporal hint made W1 about 25% slower on Sapphire
 * Rapids). */
typedef struct fz_pf {
    int n;
    const char *p[TG_MAX_OUTS];
    int64_t len[TG_MAX_OUTS], done[TG_MAX_OUTS]; /* bytes */
} fz_pf;

static inline void pf_pump(fz_pf *pf, int num, int den) {
    for (int i = 0; i < pf->n; i++) {
        int64_t upto = num >= den ? pf->len[i] : pf->len[i] * num / den;
        for (; pf->done[i] < upto; pf->done[i] += 64)
            __builtin_prefetch(pf->p[i] + pf->done[i], 0, 3);
    }
}

/* Evaluates the program on elements [f0, f0 + m) of S with thread scratch `scr`: on
 * return ptr[s] / str[s] give each slot's values (str 0: one value for all). q: the
 * previous block's pending streamed outputs, or NULL. */
static void eval_block(const fz_run *F, char *scr, int64_t f0, int64_t m, const char **ptr,
                       int64_t *str, fz_pend *q) {
    const fz_prog *f = F->f;
    const tg_fused_prog *p = F->p;
    char *bufs = scr, *gat = scr + (size_t)f->nbuf * BLK * 8;
    fz_pf pf;
    pf.n = 0;
    int64_t inner = F->ax[F->nax - 1];
    for (int k = 0; k < p->nin; k++) {
        const tg_tensor *t = F->in[k];
        size_t es = tg_dtype_size(t->dtype);
        in_kind ik = F->ik[k];
        if (ik == IN_ROW && f0 % inner + m > inner) ik = IN_GATHER; /* the block crosses a row */
        switch (ik) {
        case IN_CONTIG: {
            ptr[k] = (const char *)tg_tensor_data(t) + f0 * (int64_t)es;
            str[k] = 1;
            int64_t next = F->n - (f0 + m) < BLK ? F->n - (f0 + m) : BLK;
            if (next <= 0) break; /* the last block, or the only one */
            pf.p[pf.n] = ptr[k] + m * (int64_t)es;
            pf.len[pf.n] = next * (int64_t)es;
            pf.done[pf.n++] = 0;
            break;
        }
        case IN_SCALAR:
            ptr[k] = tg_tensor_data(t);
            str[k] = 0;
            break;
        case IN_ROW: {
            int64_t col = f0 % inner, s1 = F->astr[k][F->nax - 1];
            ptr[k] = (const char *)tg_tensor_data(t) +
                     (row_offset(F, k, f0 / inner) + col * s1) * (int64_t)es;
            str[k] = s1;
            int64_t next = inner - (col + m) < BLK ? inner - (col + m) : BLK;
            if (s1 == 0 || next <= 0) break; /* the row's next block */
            pf.p[pf.n] = ptr[k] + m * (int64_t)es;
            pf.len[pf.n] = next * (int64_t)es;
            pf.done[pf.n++] = 0;
            break;
        }
        default:
            gather_in(F, k, f0, m, gat + (size_t)k * BLK * 8);
            ptr[k] = gat + (size_t)k * BLK * 8;
            str[k] = 1;
            break;
        }
    }
    /* Memory work besides the kernels (prefetching the next block, streaming out the
     * previous one) is spread over the block in pieces: costly instructions run SUB
     * elements at a time (a kernel's results do not depend on how an array is cut) and
     * every piece first issues its share, so the loads and stores overlap the math. */
    bool side = pf.n > 0 || (q && q->n > 0);
    int64_t npiece = 0, nbefore = 0, done = 0; /* nbefore: pieces before first_out */
    for (int j = 0; side && j < p->ninstr; j++) {
        int64_t k = !f->ins[j].fn ? 0 : f->ins[j].cost >= COSTLY ? (m + SUB - 1) / SUB : 1;
        npiece += k;
        if (j < f->first_out) nbefore += k;
    }
    for (int j = 0; j < p->ninstr; j++) {
        int s = p->nin + j;
        const fz_ins *z = &f->ins[j];
        if (!z->fn) { /* a literal */
            ptr[s] = (const char *)&f->cell[s];
            str[s] = 0;
            continue;
        }
        char *y;
        if (f->direct[s] >= 0 && !F->stream) {
            const tg_tensor *o = F->out[f->direct[s]];
            y = (char *)tg_tensor_data(o) + f0 * (int64_t)tg_dtype_size(o->dtype);
        } else {
            y = bufs + (size_t)f->buf[s] * BLK * 8;
        }
        const void *xs[TG_VK_MAXIN];
        int64_t ss[TG_VK_MAXIN];
        for (int k = 0; k < z->nin; k++) {
            xs[k] = ptr[z->in[k]];
            ss[k] = str[z->in[k]];
        }
        if (!side) {
            z->fn(&z->args, m, y, xs, ss);
        } else {
            int64_t step = z->cost >= COSTLY ? SUB : m;
            for (int64_t i0 = 0; i0 < m; i0 += step) {
                done++;
                pf_pump(&pf, (int)done, (int)npiece);
                if (q && q->n) pend_pump(q, (int)done, (int)nbefore);
                const void *xp[TG_VK_MAXIN];
                for (int k = 0; k < z->nin; k++)
                    xp[k] = (const char *)xs[k] + i0 * ss[k] * z->es[k];
                z->fn(&z->args, m - i0 < step ? m - i0 : step, y + i0 * z->ys, xp, ss);
            }
        }
        ptr[s] = y;
        str[s] = 1;
    }
    if (side) pf_pump(&pf, 1, 1);
}

/* Elementwise outputs of elements [f0, f0 + m) that were not written in place; streamed
 * ones are left pending in q (written during the next block or by pend_pump). */
static void store_outputs(const fz_run *F, int64_t f0, int64_t m, const char *const *ptr,
                          const int64_t *str, fz_pend *q) {
    const tg_fused_prog *p = F->p;
    if (q->n) pend_pump(q, 1, 1); /* a program without instructions */
    for (int o = 0; o < p->nout; o++) {
        int s = p->out[o].slot;
        if (F->f->direct[s] == o && !F->stream) continue;
        const tg_tensor *t = F->out[o];
        size_t es = tg_dtype_size(t->dtype), bytes = (size_t)m * es;
        char *y = (char *)tg_tensor_data(t) + f0 * (int64_t)es;
        if (str[s] == 1 && F->stream && (uintptr_t)y % 16 == 0 && bytes % 16 == 0) {
            q->src[q->n] = ptr[s];
            q->dst[q->n] = y;
            q->bytes[q->n] = bytes;
            q->done[q->n++] = 0;
        } else if (str[s] == 1) {
            memmove(y, ptr[s], bytes);
        } else {
            for (int64_t i = 0; i < m; i++) memcpy(y + i * (int64_t)es, ptr[s], es);
        }
    }
}

static void ew_task(void *arg, int ith, int nth) {
    const fz_run *F = arg;
    const char *ptr[TG_FUSED_MAX_INSTRS + TG_MAX_OUTS];
    int64_t str[TG_FUSED_MAX_INSTRS + TG_MAX_OUTS];
    char *scr = F->ws + (size_t)ith * F->per_thread;
    int64_t lo, hi;
    fz_pend q;
    q.n = 0;
    tg_pool_share(F->n, ith, nth, BLK, &lo, &hi);
    int64_t inner = F->ax[F->nax - 1];
    for (int64_t f0 = lo, m; f0 < hi; f0 += m) {
        int64_t end = (f0 / BLK + 1) * BLK; /* blocks stay on BLK's grid (streamed stores) */
        if (F->rowblk && (f0 / inner + 1) * inner < end) end = (f0 / inner + 1) * inner;
        m = (end < hi ? end : hi) - f0;
        eval_block(F, scr, f0, m, ptr, str, &q);
        store_outputs(F, f0, m, ptr, str, &q);
    }
    pend_pump(&q, 1, 1);
#if defined(__SSE2__)
    if (F->stream) _mm_sfence(); /* streaming stores are visible before the task ends */
#endif
}

/* ---- reductions ---- */

static inline double ldv(const char *p, int dt, int64_t i, int64_t s) {
    return dt == TG_DT_F64 ? ((const double *)p)[i * s] : (double)((const float *)p)[i * s];
}

/* The reference's max/min step: a NaN seen first stays, a strictly larger (smaller) value
 * replaces, ties keep the first. */
static inline double ext_step(double a, double v, bool mx) {
    if (a != a) return a;
    if (v != v) return v;
    return (mx ? v > a : v < a) ? v : a;
}

/* Folds m values of one output into the row accumulator *a (rows layout): a loop per
 * combine of the record's data. */
static void row_fold(int comb, double *a, const char *p, int dt, int64_t s, int64_t m) {
    switch (comb) {
    case TG_RED_SUM: {
        double b[8] = {0};
        int64_t i = 0;
        if (s == 1 && dt == TG_DT_F64) { /* the common case, in a loop the compiler
                                            vectorizes (lane k sums elements k mod 8: the
                                            same order as the general loop) */
            const double *q = (const double *)p;
            for (; i + 8 <= m; i += 8)
                for (int k = 0; k < 8; k++) b[k] += q[i + k];
        } else if (s == 1 && dt == TG_DT_F32) {
            const float *q = (const float *)p;
            for (; i + 8 <= m; i += 8)
                for (int k = 0; k < 8; k++) b[k] += (double)q[i + k];
        }
        for (; i + 8 <= m; i += 8)
            for (int k = 0; k < 8; k++) b[k] += ldv(p, dt, i + k, s);
        for (; i < m; i++) b[i & 7] += ldv(p, dt, i, s);
        *a += ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7]));
        break;
    }
    case TG_RED_PROD:
        for (int64_t i = 0; i < m; i++) *a *= ldv(p, dt, i, s);
        break;
    default: {
        bool mx = comb == TG_RED_MAX;
        for (int64_t i = 0; i < m; i++) *a = ext_step(*a, ldv(p, dt, i, s), mx);
        break;
    }
    }
}

static void red_store(const fz_run *F, int o, int64_t at, double a) {
    const tg_tensor *t = F->out[o];
    if (red_of(F->p, o)->fin == TG_FIN_MEAN) a /= (double)F->R;
    if (t->dtype == TG_DT_F64)
        ((double *)tg_tensor_data(t))[at] = a;
    else
        ((float *)tg_tensor_data(t))[at] = (float)a;
}

/* Results of blocks [b0, b1) of row k (rows layout), one per output in acc: each starts
 * from its identity, products from carry[o] (the product of the row so far: products run
 * in order) when given. */
static void row_range(const fz_run *F, char *scr, int64_t k, int64_t b0, int64_t b1, double *acc,
                      const double *carry, const char **ptr, int64_t *str) {
    const tg_fused_prog *p = F->p;
    for (int64_t b = b0; b < b1; b++) {
        int64_t off = b * BLK, m = F->R - off < BLK ? F->R - off : BLK;
        eval_block(F, scr, k * F->R + off, m, ptr, str, NULL);
        for (int o = 0; o < p->nout; o++) {
            const tg_reduce_def *r = red_of(p, o);
            int s = p->out[o].slot, dt = F->f->sdt[s];
            if (b == b0) acc[o] = r->combine == TG_RED_PROD && carry ? carry[o] : r->identity;
            row_fold(r->combine, &acc[o], ptr[s], dt, str[s], m);
        }
    }
}

/* Combines the partial v of the next chunk into the row's running result *a. */
static void chunk_combine(int comb, double *a, double v, bool first) {
    if (first || comb == TG_RED_PROD) /* products already carry the row so far */
        *a = v;
    else if (comb == TG_RED_SUM)
        *a += v;
    else
        *a = ext_step(*a, v, comb == TG_RED_MAX);
}

/* A whole row, chunk by chunk, on one thread. */
static void row_whole(const fz_run *F, char *scr, int64_t k, const char **ptr, int64_t *str) {
    const tg_fused_prog *p = F->p;
    double acc[TG_MAX_OUTS], part[TG_MAX_OUTS];
    int64_t nb = (F->R + BLK - 1) / BLK;
    for (int64_t c = 0; c * CH < nb; c++) {
        int64_t b0 = c * CH, b1 = b0 + CH < nb ? b0 + CH : nb;
        row_range(F, scr, k, b0, b1, part, c > 0 ? acc : NULL, ptr, str);
        for (int o = 0; o < p->nout; o++)
            chunk_combine(red_of(p, o)->combine, &acc[o], part[o], c == 0);
    }
    for (int o = 0; o < p->nout; o++) red_store(F, o, k, acc[o]);
}

static void rows_task(void *arg, int ith, int nth) {
    const fz_run *F = arg;
    const char *ptr[TG_FUSED_MAX_INSTRS + TG_MAX_OUTS];
    int64_t str[TG_FUSED_MAX_INSTRS + TG_MAX_OUTS];
    char *scr = F->ws + (size_t)ith * F->per_thread;
    int64_t lo, hi;
    tg_pool_share(F->K1, ith, nth, 1, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) row_whole(F, scr, k, ptr, str);
}

static void chunks_task(void *arg, int ith, int nth) {
    const fz_run *F = arg;
    const char *ptr[TG_FUSED_MAX_INSTRS + TG_MAX_OUTS];
    int64_t str[TG_FUSED_MAX_INSTRS + TG_MAX_OUTS];
    char *scr = F->ws + (size_t)ith * F->per_thread;
    int64_t lo, hi, nb = (F->R + BLK - 1) / BLK;
    tg_pool_share(F->nchunks, ith, nth, 1, &lo, &hi);
    for (int64_t c = lo; c < hi; c++) {
        int64_t b0 = c * CH, b1 = b0 + CH < nb ? b0 + CH : nb;
        row_range(F, scr, F->row, b0, b1, F->part + c * F->p->nout, NULL, ptr, str);
    }
}

/* Columns: output elements [lo, hi) of K1 x K2. */
static void cols_range(const fz_run *F, char *scr, int64_t lo, int64_t hi, const char **ptr,
                       int64_t *str) {
    const tg_fused_prog *p = F->p;
    int64_t nout = F->K1 * F->K2;
    while (lo < hi) {
        int64_t k1 = lo / F->K2, k2 = lo % F->K2;
        int64_t len = F->K2 - k2 < hi - lo ? F->K2 - k2 : hi - lo;
        for (int64_t c = 0; c < len; c += BLK) {
            int64_t m = len - c < BLK ? len - c : BLK;
            for (int64_t r = 0; r < F->R; r++) {
                eval_block(F, scr, (k1 * F->R + r) * F->K2 + k2 + c, m, ptr, str, NULL);
                for (int o = 0; o < p->nout; o++) {
                    const tg_reduce_def *rd = red_of(p, o);
                    int s = p->out[o].slot, dt = F->f->sdt[s], comb = rd->combine;
                    double *a = F->acc + (size_t)o * (size_t)nout + (size_t)(lo + c);
                    for (int64_t i = 0; i < m; i++) {
                        double v = ldv(ptr[s], dt, i, str[s]), prev = r == 0 ? rd->identity : a[i];
                        if (comb == TG_RED_SUM)
                            a[i] = prev + v;
                        else if (comb == TG_RED_PROD)
                            a[i] = prev * v;
                        else
                            a[i] = ext_step(prev, v, comb == TG_RED_MAX);
                    }
                }
            }
            for (int o = 0; o < p->nout; o++)
                for (int64_t i = 0; i < m; i++)
                    red_store(F, o, lo + c + i,
                              F->acc[(size_t)o * (size_t)nout + (size_t)(lo + c + i)]);
        }
        lo += len;
    }
}

static void cols_task(void *arg, int ith, int nth) {
    const fz_run *F = arg;
    const char *ptr[TG_FUSED_MAX_INSTRS + TG_MAX_OUTS];
    int64_t str[TG_FUSED_MAX_INSTRS + TG_MAX_OUTS];
    char *scr = F->ws + (size_t)ith * F->per_thread;
    int64_t lo, hi;
    tg_pool_share(F->K1 * F->K2, ith, nth, 16, &lo, &hi);
    cols_range(F, scr, lo, hi, ptr, str);
}

/* ---- entry points ---- */

/* The iteration space: the broadcast of the input shapes (false when they do not). */
static bool space_of(int nin, const tg_type *in, int *nd, int64_t *S) {
    *nd = 0;
    for (int k = 0; k < nin; k++)
        if (in[k].ndim > *nd) *nd = in[k].ndim;
    for (int d = 0; d < *nd; d++) S[d] = 1;
    for (int k = 0; k < nin; k++)
        for (int d = 0; d < in[k].ndim; d++) {
            int64_t e = in[k].shape[d], *x = &S[d + *nd - in[k].ndim];
            if (e == *x || e == 1) continue;
            if (*x != 1) return false;
            *x = e;
        }
    return true;
}

/* F->ax and F->astr: the axes of S without its extents of 1, neighbours merged where the
 * strides of every input allow (bstr: per input, its strides along S; outputs are
 * contiguous, so the flat C-order index is the same). At least one axis. */
static void space_simplify(fz_run *F, const int64_t (*bstr)[TG_MAX_DIMS]) {
    int m = 0;
    for (int d = 0; d < F->nd; d++) {
        if (F->S[d] == 1) continue;
        bool merge = m > 0;
        for (int k = 0; k < F->p->nin && merge; k++)
            merge = F->astr[k][m - 1] == bstr[k][d] * F->S[d];
        if (merge) {
            F->ax[m - 1] *= F->S[d];
            for (int k = 0; k < F->p->nin; k++) F->astr[k][m - 1] = bstr[k][d];
            continue;
        }
        F->ax[m] = F->S[d];
        for (int k = 0; k < F->p->nin; k++) F->astr[k][m] = bstr[k][d];
        m++;
    }
    if (m == 0) { /* one element */
        F->ax[0] = 1;
        for (int k = 0; k < F->p->nin; k++) F->astr[k][0] = 0;
        m = 1;
    }
    F->nax = m;
}

size_t tg_vm_fused_ws(void *prep, const tg_type *in, const tg_type *out, int nthreads) {
    const fz_prog *f = prep;
    if (f->core) return tg_vm_fcore_ws(f->core, nthreads);
    const tg_fused_prog *p = f->p;
    int nd;
    int64_t S[TG_MAX_DIMS], n = 0, nred = 0;
    if (!space_of(p->nin, in, &nd, S) || !tg_shape_size(nd, S, &n)) return 0;
    if (p->reduces && !tg_shape_size(out[0].ndim, out[0].shape, &nred)) return 0;
    size_t per = ((size_t)f->nbuf + (size_t)p->nin) * BLK * 8 + 64;
    size_t acc = p->reduces ? ((size_t)nred + (size_t)(n / ((int64_t)BLK * CH)) + 2) *
                                  (size_t)p->nout * sizeof(double)
                            : 0;
    return per * (size_t)(nthreads > 0 ? nthreads : 1) + acc + 64;
}

tg_status tg_vm_exec_fused(vm_exec *e) {
    const fz_prog *f = e->info ? ((const vm_ins_info *)e->info)->fused : NULL;
    if (!f) return TG_EUNSUPPORTED;
    if (f->core) return tg_vm_exec_fcore(f->core, e);
    const tg_fused_prog *p = f->p;
    fz_run F; /* not zeroed as a whole: per-input arrays are set for p->nin inputs */
    F.acc = F.part = NULL;
    F.stream = F.rowblk = false;
    F.row = F.nchunks = 0;
    F.K1 = F.R = F.K2 = 0;
    F.f = f;
    F.p = p;
    F.in = e->in;
    F.out = e->out;
    if (!space_of(p->nin, e->in_type, &F.nd, F.S) || !tg_shape_size(F.nd, F.S, &F.n))
        return TG_EUNSUPPORTED;
    for (int o = 0; o < p->nout; o++)
        if (!tg_tensor_is_contiguous(e->out[o])) return TG_EUNSUPPORTED;
    /* inputs: contiguous over S, one value, or read row by row */
    int64_t bstr[TG_MAX_OUTS][TG_MAX_DIMS];
    for (int k = 0; k < p->nin; k++) {
        const tg_tensor *t = e->in[k];
        int lead = F.nd - t->ndim;
        bool contig = t->ndim == F.nd, scalar = true;
        int64_t expect = 1;
        for (int d = F.nd - 1; d >= 0; d--) {
            int a = d - lead;
            int64_t ext = a >= 0 ? t->shape[a] : 1;
            bstr[k][d] = a >= 0 && ext != 1 ? t->strides[a] : 0;
            scalar = scalar && bstr[k][d] == 0;
            contig = contig && ext == F.S[d] && (F.S[d] == 1 || t->strides[a] == expect);
            expect *= F.S[d];
        }
        F.ik[k] = scalar ? IN_SCALAR : contig ? IN_CONTIG : IN_GATHER;
    }
    space_simplify(&F, bstr);
    for (int k = 0; k < p->nin; k++) {
        int64_t s1 = F.astr[k][F.nax - 1];
        if (F.ik[k] == IN_GATHER && (s1 == 0 || s1 == 1)) F.ik[k] = IN_ROW;
        F.rowblk = F.rowblk || (F.ik[k] == IN_ROW && F.ax[F.nax - 1] >= ROW_MIN);
    }
    int nth = e->pool ? e->nthreads : 1;
    F.per_thread = ((size_t)f->nbuf + (size_t)p->nin) * BLK * 8 + 64;
    size_t need = F.per_thread * (size_t)nth;
    char *ws = (char *)(((uintptr_t)e->ws + 63) / 64 * 64);
    F.ws = ws;
    if (!p->reduces) {
        for (int o = 0; o < p->nout; o++) {
            const tg_tensor *t = e->out[o];
            bool same = t->ndim == F.nd;
            for (int d = 0; same && d < F.nd; d++) same = t->shape[d] == F.S[d];
            if (!same) return TG_EUNSUPPORTED;
        }
        if (F.n == 0) return TG_OK;
        if (!e->ws || need + 64 > e->ws_bytes) return TG_EUNSUPPORTED;
        size_t obytes = 0;
        for (int o = 0; o < p->nout; o++) obytes += (size_t)F.n * tg_dtype_size(e->out[o]->dtype);
        F.stream = obytes > STREAM_BYTES;
        if (nth > 1 && F.n * f->cost >= SPLIT_WORK && F.n > BLK)
            tg_pool_run(e->pool, ew_task, &F);
        else
            ew_task(&F, 0, 1);
        return TG_OK;
    }
    /* reductions: S as [K1, R, K2] */
    const bool *red = p->out[0].red;
    int64_t part[3] = {1, 1, 1};
    int stage = 0; /* 0: leading kept axes, 1: reduced axes, 2: trailing kept axes */
    for (int d = 0; d < F.nd; d++) {
        if (F.S[d] == 1) continue;
        int want = red[d] ? 1 : stage == 0 ? 0 : 2;
        if (want < stage) return TG_EUNSUPPORTED;
        stage = want;
        part[want] *= F.S[d];
    }
    F.K1 = part[0];
    F.R = part[1];
    F.K2 = part[2];
    if (F.R == 0 || F.K1 * F.K2 == 0) return TG_EUNSUPPORTED;
    for (int o = 0; o < p->nout; o++)
        if (tg_tensor_size(e->out[o]) != F.K1 * F.K2) return TG_EUNSUPPORTED;
    size_t nred = (size_t)(F.K1 * F.K2);
    int64_t nb = (F.R + BLK - 1) / BLK;
    size_t accn = (nred + (size_t)(F.n / ((int64_t)BLK * CH)) + 2) * (size_t)p->nout;
    if (!e->ws || need + accn * sizeof(double) + 64 > e->ws_bytes) return TG_EUNSUPPORTED;
    F.acc = (double *)(ws + need);
    F.part = F.acc;
    bool has_prod = false;
    for (int o = 0; o < p->nout; o++) has_prod = has_prod || red_of(p, o)->combine == TG_RED_PROD;
    bool big = nth > 1 && F.n * f->cost >= SPLIT_WORK;
    if (F.K2 > 1) {
        if (big && nred >= 64)
            tg_pool_run(e->pool, cols_task, &F);
        else
            cols_task(&F, 0, 1);
        return TG_OK;
    }
    if (!big || F.K1 >= 2 * nth || has_prod || nb <= CH) {
        if (big)
            tg_pool_run(e->pool, rows_task, &F);
        else
            rows_task(&F, 0, 1);
        return TG_OK;
    }
    /* few long rows: chunks of each row over the pool, combined in order */
    F.nchunks = (nb + CH - 1) / CH;
    for (int64_t k = 0; k < F.K1; k++) {
        F.row = k;
        tg_pool_run(e->pool, chunks_task, &F);
        double acc[TG_MAX_OUTS];
        for (int64_t c = 0; c < F.nchunks; c++)
            for (int o = 0; o < p->nout; o++)
                chunk_combine(red_of(p, o)->combine, &acc[o], F.part[c * p->nout + o], c == 0);
        for (int o = 0; o < p->nout; o++) red_store(&F, o, k, acc[o]);
    }
    return TG_OK;
}
