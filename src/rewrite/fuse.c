/* fuse.c - the fuse phase: groups of elementwise ops (and a reduction they feed) become one
 * `fused{...}` node (src/ops/fused.h), so that a backend computes them in one pass.
 *
 * This pass is a global partition of the graph rather than a set of local rules, so it does
 * not run through the rule engine. It works in four steps over the live nodes:
 *  0. Cheap values (comparisons and predicates, whose bool masks only feed selects and
 *     arithmetic, and casts) read by several elementwise nodes of their own shape are
 *     recomputed by each reader: every reader after the first gets a copy of the node, so
 *     that the value joins each reader's group instead of being written out and read back
 *     (relu's mask `gt(z, 0)` feeds the forward `where` and, much later, the gradient's).
 *     Copies that end up in one group with their original are computed once: a fused
 *     program gives identical calls one slot (tg_fused_add_call, src/ops/fused.h).
 *  1. Producers into consumers, last node first (reverse topological order). An elementwise
 *     node, or a small batched product (core_ok), joins the group of its users when every
 *     user is a member of one group whose values have the same static shape as the node's
 *     output; a graph output may also read it (it becomes an extra output of the fused
 *     node). Otherwise it starts a group. A group with a product runs block by block of
 *     its batch (fused.h, core ops) and takes no reduction in step 2. A small batched
 *     LAPACK op (lapack_batch; diag counts as one) makes a LAPACK group, whose members need
 *     only share the batch (a factor [B,m,m], a solution [B,m,1], a diagonal [B,m]); a
 *     LAPACK op whose users lie in several such groups joins them all into one when no
 *     path leads from one to another (linked).
 *  2. Reductions (sum prod mean max min) join the group that feeds them when each of that
 *     group's values leaving it is read only by one such reduction, all reducing the same
 *     axes with the same keepdims: the elementwise values are then never materialised. A
 *     LAPACK group takes in, one by one, the reductions over a block's core axes that are
 *     the only readers of its values (each reduces its block; other values leave as such).
 *  3. Siblings: groups of the same kind and shape that read a common input merge into one
 *     multi-output node, when no path leads from one to the other (searched through the
 *     groups, with a bounded budget: a group with more nodes after it than a search may
 *     visit is "big" and merges with nothing; one search per group of a batch of readers).
 * Groups of one node stay as they are. Each remaining group becomes one fused node, whose
 * program the pass builds instruction by instruction from the members; the values it
 * provides are replaced by the node's outputs.
 *
 * Choices and invariants:
 *  - A value that a node outside the group needs is a boundary: its producer ends a group
 *    (it is not recomputed, except for the cheap values of step 0, and it is not an extra
 *    output feeding other nodes). Only graph outputs become extra outputs; they feed
 *    nothing, so no cycle can arise. A copy reads the same values as its original, so it
 *    adds no path between groups.
 *  - Convexity: step 1 only adds a node whose users are all in the group, so no path leaves
 *    the group and comes back; the quotient graph of groups stays acyclic (a node added in
 *    step 1 has no edge leaving the group; step 2 adds a consumer whose only input is in the
 *    group; step 3 checks both directions).
 *  - Every member's value has the group's static shape S; inputs of smaller shape broadcast
 *    inside. Run-time extents agree too: members linked by a value of shape S have equal
 *    extents (a '?' extent that is 1 at run time does not broadcast), and siblings merge
 *    only over an input of shape S, or when S is fully static.
 *  - Devices (docs/devices.md, "Annotations"): a group's members are all on one device,
 *    which the fused node takes; a value made on one device and read on another is a
 *    boundary as any value read outside its group is (steps 1 and 2 join only nodes of the
 *    group's device, step 3 merges only groups of one device, step 0 copies a cheap value
 *    only for readers on its own device).
 *  - Literals (0-d weak-origin constants) are written into the program; every other value
 *    becomes an input of the fused node.
 *  - A group's expression, as printed, is bounded (FUSE_MAX_EXPANDED calls, counted with
 *    repetitions of shared values): a longer chain is cut into several fused nodes.
 *  - Before a group is replaced, a copy of its program is typed and each output type
 *    compared with the value it replaces (dtype, shape, weakness): a mismatch is a bug of
 *    this pass; checked builds stop with an error, others keep the group unfused.
 *  - Every walk is a loop over arrays or an explicit stack.
 */
#include "../ops/blockwise.h"
#include "../ops/fused.h"
#include "rewrite.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>

#define FUSE_MAX_EXPANDED 1000     /* calls in one expression, shared values counted per use */
#define FUSE_REACH_BUDGET 4096     /* nodes one sibling path search may visit */
#define FUSE_SEARCH_TOTAL 4000000L /* nodes all of them may visit, plus 64 per node */
#define FUSE_MAX_COPIES   4        /* reader nodes a cheap value is recomputed for (step 0) */

enum { K_EW, K_RED };

typedef struct fgroup {
    int rep;               /* union-find parent (itself when a representative) */
    int head, tail;        /* member node ids, linked by fuser.next */
    int nmem;              /* members: elementwise nodes and reductions */
    int esize;             /* calls in its expression, counted per use */
    int kind;              /* K_EW or K_RED */
    tg_type shape;         /* S: the shape of the elementwise values (or reduced values) */
    bool red[TG_MAX_DIMS]; /* K_RED: axes of S the reductions reduce */
    int64_t keep;          /* K_RED: keepdims */
    int nout;              /* outputs the fused node will have */
    const char *device;    /* every member's device annotation (NULL: none) */
    bool core;             /* a member is a core op: the group takes no reduction */
    bool lapack;           /* a member is a core op other than matmul (lapack_batch):
                              members need only share the batch; reductions over core axes
                              join */
    int nbatch;            /* lapack: the batch rank (the leading dimensions of `shape`) */
} fgroup;

typedef struct fuser {
    tg_graph *g;
    tg_ctx *ctx;
    tg_node **order; /* live nodes, inputs before users */
    int norder;
    int nn, nv;      /* g->nodes.n and g->vars.n when the pass started */
    int *pos;        /* per node id: position in order, -1 when dead */
    int *ustart;     /* per var id: users are unode[ustart[v] .. ustart[v + 1]) */
    tg_node **unode; /* users (one entry per input slot) */
    int *outuse;     /* per var id: graph output slots holding it */
    int *grp;        /* per node id: group, -1 none */
    int *next;       /* per node id: next member of its group, -1 */
    int *mult;       /* per node id: uses of its value inside its group's text */
    fgroup *gs;      /* groups */
    int ngs;
    int *vis;     /* per node id: search stamp */
    int *gvis;    /* per group: search stamp */
    int *cvis;    /* per group: 1 + id of the var whose readers it was listed for */
    int *first;   /* per group (step 3): position of its first member when step 3 began */
    uint8_t *big; /* per group (step 3): FUSE_REACH_BUDGET nodes or more lie after it */
    int *slot;    /* per group: its slot in the batch being searched (when sstamp) */
    int *sstamp;  /* per group: the search stamp slot[] belongs to */
    int stamp;
    int *stack;       /* node ids, for searches */
    int made;         /* fused nodes made */
    long search_left; /* node visits left to sibling searches (the pass stays linear) */
    long work;        /* steps of the pass's loops (tg_pass_stats.work) */
} fuser;

static void *fz_calloc(fuser *f, size_t n, size_t elem) {
    size_t bytes;
    if (!tg_size_mul(n + 1, elem, &bytes)) return NULL;
    return tg_mem_calloc(f->ctx, bytes);
}

static void fz_free(fuser *f, void *p, size_t n, size_t elem) {
    if (p) tg_mem_free(f->ctx, p, (n + 1) * elem);
}

/* ---- predicates ---- */

static bool is_literal(const tg_var *v) {
    return v->kind == TG_VAR_CONST && v->lit && v->value && v->value->ndim == 0;
}

/* Most elements of a block (a core op's output less its batch) in a group: a block's values
 * are the VM's per-thread scratch, which should stay in cache. */
#define FUSE_CORE_BLOCK 16384

/* A core op (tg_fused_is_core) that may be a member: a matmul of f32 or f64 matrices whose
 * operands have its rank (no batch rank to broadcast), whose batch is static and more than
 * one block, and whose blocks are small. The VM runs such a group block by block, a gemm and
 * the vector kernels per block into scratch that stays in cache (vm_fcore.c), faster than a
 * batched gemm and a fused elementwise node (docs/fusion.md has the figures). Other core
 * ops stay out: their groups would run through the reference kernel, one kernel per
 * instruction per block, which costs more than the fusion saves. */
static bool core_ok(const tg_node *n) {
    const tg_type *t = &n->out[0]->type;
    if (n->op != TG_OP_MATMUL || n->nin != 2 || n->nout != 1 || t->weak || t->ndim < 3 ||
        (t->dtype != TG_DT_F32 && t->dtype != TG_DT_F64))
        return false;
    int64_t nb = 1, blk = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0) return false;
        if (d < t->ndim - 2)
            nb *= t->shape[d];
        else
            blk *= t->shape[d];
    }
    for (int k = 0; k < 2; k++)
        if (n->in[k]->type.ndim != t->ndim || n->in[k]->type.dtype != t->dtype) return false;
    return nb >= 2 && blk <= FUSE_CORE_BLOCK;
}

/* Most core dimensions of the values of a LAPACK group: each member's value is a batch of
 * matrices or of vectors (diag's result) behind the group's batch dimensions. */
#define FUSE_CORE_RANK 2

/* A static batch of at least two blocks of at most FUSE_CORE_BLOCK elements: t's first nb
 * dimensions are the batch, and one or two more (a vector or a matrix) a block. */
static bool small_blocks(const tg_type *t, int nb) {
    int64_t nblk = 1, blk = 1;
    if (nb < 1 || t->ndim <= nb || t->ndim > nb + FUSE_CORE_RANK) return false;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0) return false;
        if (d < nb)
            nblk *= t->shape[d];
        else
            blk *= t->shape[d];
    }
    return nblk >= 2 && blk <= FUSE_CORE_BLOCK;
}

/* A core op other than matmul (the LAPACK ops of one output whose result is a batch of
 * matrices: cholesky, solve_triangular, solve, cho_solve, inv; diag, whose result is a batch
 * of vectors) that may be a member: f32 or f64, every operand with the batch rank of its
 * result (no batch to broadcast), small blocks of a static batch. Returns that batch rank,
 * or -1 when n may not be a member so. The VM runs its group block by block, the op's
 * kernel on each block (vm_fcore.c): the elementwise work and the reductions around a
 * batched factorization or solve run in the same pass over the batch, each block in cache,
 * instead of one op at a time over the whole batch. Its group's members need only share the
 * batch (a factor [B,m,m], a solution [B,m,1] and a diagonal [B,m] are blocks of one batch),
 * and a value leaving the group into a reduction over its core axes takes the reduction in
 * (a log-density's sum of log(diag(L)) per block). */
static int lapack_batch(const tg_node *n) {
    const tg_type *t = &n->out[0]->type;
    tg_bw_sig sig;
    int nd[TG_BW_MAX_OPERANDS] = {0}, cores[TG_BW_MAX_OPERANDS] = {0}, bad;
    uint32_t absent;
    if (!tg_fused_is_core(n->op) || n->op == TG_OP_MATMUL || n->nout != 1 || t->weak ||
        (t->dtype != TG_DT_F32 && t->dtype != TG_DT_F64) ||
        !tg_bw_parse(tg_op_table[n->op]->signature, &sig) || sig.nin != n->nin)
        return -1;
    for (int k = 0; k < n->nin; k++) nd[k] = n->in[k]->type.ndim;
    if (!tg_bw_core_ranks(&sig, nd, cores, &absent, &bad)) return -1;
    int nb = t->ndim - cores[sig.nin];
    if (!small_blocks(t, nb)) return -1;
    for (int k = 0; k < n->nin; k++)
        if (nd[k] - cores[k] != nb || n->in[k]->type.dtype != t->dtype) return -1;
    return nb;
}

/* A node that may be a member: an elementwise op, or a core op as core_ok or lapack_batch
 * say. */
static bool ew_ok(const tg_node *n) {
    if (!tg_fused_can_inline(n->op) || n->nout != 1 || n->nin > TG_FUSED_MAX_ARGS ||
        n->out[0]->type.weak)
        return false;
    return !tg_fused_is_core(n->op) || core_ok(n) || lapack_batch(n) >= 0;
}

static bool red_ok(const tg_node *n) {
    return tg_fused_can_reduce(n->op) && n->nout == 1 && n->nin == 1 && !n->out[0]->type.weak;
}

static bool same_shape(const tg_type *a, const tg_type *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* Blocks of one batch of rank nb: a (static) and b have small blocks behind nb batch
 * dimensions, and the same batch extents. */
static bool same_batch(const tg_type *a, const tg_type *b, int nb) {
    if (!small_blocks(a, nb) || b->ndim <= nb || b->ndim > nb + FUSE_CORE_RANK) return false;
    for (int d = 0; d < nb; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* ---- groups ---- */

static int gfind(fuser *f, int a) {
    int r = a;
    while (f->gs[r].rep != r) r = f->gs[r].rep;
    while (f->gs[a].rep != r) {
        int up = f->gs[a].rep;
        f->gs[a].rep = r;
        a = up;
    }
    return r;
}

static int node_group(fuser *f, const tg_node *n) {
    if (n->id >= f->nn || f->grp[n->id] < 0) return -1;
    return gfind(f, f->grp[n->id]);
}

static void add_member(fuser *f, int gi, tg_node *n) {
    fgroup *g = &f->gs[gi];
    f->grp[n->id] = gi;
    f->next[n->id] = -1;
    if (g->tail >= 0)
        f->next[g->tail] = n->id;
    else
        g->head = n->id;
    g->tail = n->id;
    g->nmem++;
}

static int new_group(fuser *f, tg_node *n, int kind, const tg_type *shape) {
    int gi = f->ngs++;
    f->gs[gi] = (fgroup){
        .rep = gi, .head = -1, .tail = -1, .kind = kind, .shape = *shape, .device = n->device};
    add_member(f, gi, n);
    return gi;
}

static void merge_into(fuser *f, int b, int a) {
    fgroup *gb = &f->gs[b], *ga = &f->gs[a];
    ga->rep = b;
    if (ga->head >= 0) {
        if (gb->tail >= 0)
            f->next[gb->tail] = ga->head;
        else
            gb->head = ga->head;
        gb->tail = ga->tail;
    }
    gb->nmem += ga->nmem;
    gb->esize += ga->esize;
    gb->nout += ga->nout;
    gb->core = gb->core || ga->core;
    if (ga->lapack && !gb->lapack) gb->nbatch = ga->nbatch;
    gb->lapack = gb->lapack || ga->lapack;
}

/* True when some user of v is not a member of group gi (or v is a graph output). */
static bool leaves(fuser *f, const tg_var *v, int gi) {
    if (f->outuse[v->id] > 0) return true;
    f->work += 1 + f->ustart[v->id + 1] - f->ustart[v->id];
    for (int k = f->ustart[v->id]; k < f->ustart[v->id + 1]; k++)
        if (node_group(f, f->unode[k]) != gi) return true;
    return false;
}

/* Axes a reduction node reduces of its input, and its keepdims; false when malformed. */
static bool red_mask(const tg_node *r, bool *red, int64_t *keep) {
    tg_axes ax;
    if (!tg_reduce_axes(r->attrs, tg_op_table[r->op]->nattrs, r->in[0]->type.ndim, &ax, NULL, 0))
        return false;
    memcpy(red, ax.red, sizeof ax.red);
    *keep = ax.keep;
    return true;
}

/* ---- setup ---- */

static tg_status setup(fuser *f) {
    tg_graph *g = f->g;
    f->nn = g->nodes.n;
    f->nv = g->vars.n;
    size_t nn = (size_t)f->nn, nv = (size_t)f->nv;
    if (!f->order) f->order = tg_ir_toposort(g, &f->norder); /* copy_cheap made copies */
    if (!f->order) return strstr(tg_last_error(), "cycle") ? TG_EINTERNAL : TG_ENOMEM;
    size_t ng = (size_t)f->norder; /* groups (and nodes on a search stack): live nodes at most */
    f->pos = fz_calloc(f, nn, sizeof *f->pos);
    f->ustart = fz_calloc(f, nv + 1, sizeof *f->ustart);
    f->outuse = fz_calloc(f, nv, sizeof *f->outuse);
    f->grp = fz_calloc(f, nn, sizeof *f->grp);
    f->next = fz_calloc(f, nn, sizeof *f->next);
    f->mult = fz_calloc(f, nn, sizeof *f->mult);
    f->gs = fz_calloc(f, ng, sizeof *f->gs);
    f->vis = fz_calloc(f, nn, sizeof *f->vis);
    f->gvis = fz_calloc(f, ng, sizeof *f->gvis);
    f->cvis = fz_calloc(f, ng, sizeof *f->cvis);
    f->first = fz_calloc(f, ng, sizeof *f->first);
    f->big = fz_calloc(f, ng, sizeof *f->big);
    f->slot = fz_calloc(f, ng, sizeof *f->slot);
    f->sstamp = fz_calloc(f, ng, sizeof *f->sstamp);
    f->stack = fz_calloc(f, ng, sizeof *f->stack);
    if (!f->pos || !f->ustart || !f->outuse || !f->grp || !f->next || !f->mult || !f->gs ||
        !f->vis || !f->gvis || !f->cvis || !f->first || !f->big || !f->slot || !f->sstamp ||
        !f->stack)
        return TG_ENOMEM;
    for (size_t i = 0; i < nn; i++) f->pos[i] = f->grp[i] = f->next[i] = -1;
    size_t nuse = 0;
    for (int i = 0; i < f->norder; i++) {
        tg_node *n = f->order[i];
        f->pos[n->id] = i;
        for (int k = 0; k < n->nin; k++) f->ustart[n->in[k]->id + 1]++;
        nuse += (size_t)n->nin;
        f->work += 1 + n->nin;
    }
    for (size_t v = 0; v < nv; v++) f->ustart[v + 1] += f->ustart[v];
    f->unode = fz_calloc(f, nuse, sizeof *f->unode);
    int *fill = fz_calloc(f, nv, sizeof *fill);
    if (!f->unode || !fill) {
        fz_free(f, fill, nv, sizeof *fill);
        return TG_ENOMEM;
    }
    for (int i = 0; i < f->norder; i++) {
        tg_node *n = f->order[i];
        for (int k = 0; k < n->nin; k++) {
            int v = n->in[k]->id;
            f->unode[f->ustart[v] + fill[v]++] = n;
        }
    }
    fz_free(f, fill, nv, sizeof *fill);
    for (int i = 0; i < g->outputs.n; i++) f->outuse[((tg_var *)g->outputs.items[i])->id]++;
    return TG_OK;
}

static void teardown(fuser *f) {
    size_t nn = (size_t)f->nn, nv = (size_t)f->nv, ng = (size_t)f->norder;
    if (f->order) tg_mem_free(f->ctx, f->order, sizeof *f->order * (nn + 1));
    size_t nuse = f->ustart ? (size_t)f->ustart[nv] : 0;
    fz_free(f, f->unode, nuse, sizeof *f->unode);
    fz_free(f, f->pos, nn, sizeof *f->pos);
    fz_free(f, f->ustart, nv + 1, sizeof *f->ustart);
    fz_free(f, f->outuse, nv, sizeof *f->outuse);
    fz_free(f, f->grp, nn, sizeof *f->grp);
    fz_free(f, f->next, nn, sizeof *f->next);
    fz_free(f, f->mult, nn, sizeof *f->mult);
    fz_free(f, f->gs, ng, sizeof *f->gs);
    fz_free(f, f->vis, nn, sizeof *f->vis);
    fz_free(f, f->gvis, ng, sizeof *f->gvis);
    fz_free(f, f->cvis, ng, sizeof *f->cvis);
    fz_free(f, f->first, ng, sizeof *f->first);
    fz_free(f, f->big, ng, sizeof *f->big);
    fz_free(f, f->slot, ng, sizeof *f->slot);
    fz_free(f, f->sstamp, ng, sizeof *f->sstamp);
    fz_free(f, f->stack, ng, sizeof *f->stack);
}

/* ---- step 0: cheap values recomputed by their readers ---- */

/* A value cheaper to recompute in each reader's group than to write out and read back: a
 * comparison or predicate (a bool mask) or a cast, of at least one value that is not a
 * literal. */
static bool cheap(const tg_node *n) {
    if (!ew_ok(n) || (n->op != TG_OP_CAST && !(tg_op_table[n->op]->ew.flags & TG_EW_CMP)))
        return false;
    for (int k = 0; k < n->nin; k++)
        if (!is_literal(n->in[k])) return true;
    return false;
}

/* Gives every reader node of a cheap value, after the first, a copy of its producer, when
 * each reader is an elementwise member candidate of the value's own shape (so that the
 * copy joins the reader's group in step 1) and the value is not a graph output. */
static tg_status copy_cheap(fuser *f) {
    tg_graph *g = f->g;
    int norder = 0;
    tg_node **order = tg_ir_toposort(g, &norder);
    if (!order) return strstr(tg_last_error(), "cycle") ? TG_EINTERNAL : TG_ENOMEM;
    size_t nn = (size_t)g->nodes.n, nv = (size_t)g->vars.n;
    int *nrd = NULL, *seen = NULL, *first = NULL;
    tg_var **copy = NULL;
    tg_status st = TG_OK;
    bool any = false; /* a cheap node to copy, maybe */
    for (int i = 0; i < norder && !any; i++) any = cheap(order[i]);
    if (!any) goto done;
    nrd = fz_calloc(f, nv, sizeof *nrd);     /* reader nodes; -1: a reader cannot copy */
    seen = fz_calloc(f, nv, sizeof *seen);   /* 1 + id of the last reader counted */
    first = fz_calloc(f, nv, sizeof *first); /* 1 + id of the reader keeping the value */
    copy = fz_calloc(f, nv, sizeof *copy);   /* the copy made for reader seen[v] */
    if (!nrd || !seen || !first || !copy) {
        st = TG_ENOMEM;
        goto done;
    }
    for (int i = 0; i < g->outputs.n; i++) nrd[((tg_var *)g->outputs.items[i])->id] = -1;
    for (int i = 0; i < norder; i++) {
        const tg_node *u = order[i];
        for (int k = 0; k < u->nin; k++) {
            const tg_var *v = u->in[k];
            if (nrd[v->id] < 0) continue;
            if (!ew_ok(u) || !same_shape(&u->out[0]->type, &v->type) ||
                (v->kind == TG_VAR_NODE && !tg_ir_same_device(u->device, v->node->device)))
                nrd[v->id] = -1; /* a reader on another device could not take a copy in */
            else if (seen[v->id] != u->id + 1)
                nrd[v->id]++;
            seen[v->id] = u->id + 1;
        }
    }
    for (size_t v = 0; v < nv; v++) {
        const tg_var *x = g->vars.items[v];
        bool want = x->kind == TG_VAR_NODE && x->node->nout == 1 && nrd[v] >= 2 &&
                    nrd[v] <= FUSE_MAX_COPIES && cheap(x->node);
        nrd[v] = want ? 1 : 0; /* from here: 1 marks the values to copy */
        seen[v] = 0;
    }
    for (int i = 0; i < norder && st == TG_OK; i++) {
        tg_node *u = order[i];
        for (int k = 0; k < u->nin && st == TG_OK; k++) {
            tg_var *v = u->in[k];
            if ((size_t)v->id >= nv || nrd[v->id] != 1) continue;
            if (first[v->id] == 0) first[v->id] = u->id + 1;
            if (first[v->id] == u->id + 1) continue;
            if (seen[v->id] != u->id + 1) { /* a reader reading v twice shares one copy */
                const tg_node *n = v->node;
                int line = g->line, col = g->col;
                const char *device = g->device;
                g->line = n->line; /* messages name the original's place */
                g->col = n->col;
                g->device = n->device; /* and the copy computes where the original did */
                tg_node *c = tg_ir_node_make_norm(g, n->op, n->in, n->nin, n->attrs);
                g->line = line;
                g->col = col;
                g->device = device;
                if (!c) {
                    st = g->status != TG_OK ? g->status : TG_ENOMEM;
                    break;
                }
                bool same = c->nout == 1 && tg_type_equal(&c->out[0]->type, &v->type) &&
                            c->out[0]->type.weak == v->type.weak;
                seen[v->id] = u->id + 1;
                copy[v->id] = same ? c->out[0] : NULL; /* else left dead: the reader keeps v */
            }
            if (copy[v->id]) u->in[k] = copy[v->id];
        }
    }
done:
    if (st == TG_OK && (size_t)g->nodes.n == nn) { /* no copy: setup takes the order */
        f->order = order;
        f->norder = norder;
    } else {
        tg_mem_free(g->ctx, order, sizeof *order * (nn + 1));
    }
    fz_free(f, nrd, nv, sizeof *nrd);
    fz_free(f, seen, nv, sizeof *seen);
    fz_free(f, first, nv, sizeof *first);
    fz_free(f, copy, nv, sizeof *copy);
    return st;
}

/* ---- step 1: producers into consumers ---- */

/* Pushes the users of n's values not yet visited (this search's stamp) on the stack. */
static void push_users(fuser *f, const tg_node *n, int *sp) {
    for (int o = 0; o < n->nout; o++) {
        int v = n->out[o]->id;
        for (int k = f->ustart[v]; k < f->ustart[v + 1]; k++) {
            const tg_node *u = f->unode[k];
            if (f->vis[u->id] == f->stamp) continue;
            f->vis[u->id] = f->stamp;
            f->stack[(*sp)++] = u->id;
        }
    }
}

/* Groups a LAPACK op's users may lie in, all merged when it joins them. */
#define FUSE_MAX_JOIN 8

/* Whether node n may join group gu (n's users lie in it): an elementwise group of n's
 * device whose values have n's shape, or, where n (a LAPACK op of batch rank nb >= 0) or
 * the group is a LAPACK one, n's batch. */
static bool joins(const fuser *f, const tg_node *n, int gu, int nb) {
    const fgroup *g = &f->gs[gu];
    const tg_type *t = &n->out[0]->type;
    if (g->kind != K_EW || !tg_ir_same_device(n->device, g->device)) return false;
    if (nb >= 0 && g->lapack && nb != g->nbatch) return false;
    if (same_shape(t, &g->shape)) return true;
    return (nb >= 0 || g->lapack) && same_batch(t, &g->shape, g->lapack ? g->nbatch : nb);
}

/* True when a path leads from one of the groups gs[0..ng) to another (through any nodes),
 * or when the searches, FUSE_REACH_BUDGET nodes each, could not tell: merging them would
 * then risk a cycle. */
static bool linked(fuser *f, const int *gs, int ng) {
    for (int i = 0; i < ng; i++) {
        int sp = 0;
        long budget = FUSE_REACH_BUDGET;
        f->stamp++;
        for (int m = f->gs[gs[i]].head; m >= 0; m = f->next[m]) f->vis[m] = f->stamp;
        for (int m = f->gs[gs[i]].head; m >= 0; m = f->next[m])
            push_users(f, f->g->nodes.items[m], &sp);
        while (sp > 0) {
            f->work++;
            if (--budget < 0 || --f->search_left < 0) return true;
            const tg_node *u = f->g->nodes.items[f->stack[--sp]];
            int gu = node_group(f, u);
            for (int j = 0; j < ng; j++)
                if (j != i && gu == gs[j]) return true;
            push_users(f, u, &sp);
        }
    }
    return false;
}

static void absorb_producers(fuser *f) {
    int gset[FUSE_MAX_JOIN];
    for (int i = f->norder - 1; i >= 0; i--) {
        tg_node *n = f->order[i];
        if (!ew_ok(n)) continue;
        const tg_var *v = n->out[0];
        int nb = lapack_batch(n);
        bool lap = nb >= 0, join = true;
        int ng = 0, gi = -1;
        long m = f->outuse[v->id] > 0 ? 1 : 0;
        for (int k = f->ustart[v->id]; k < f->ustart[v->id + 1] && join; k++) {
            f->work++;
            const tg_node *u = f->unode[k];
            int gu = node_group(f, u), j = 0;
            if (gu < 0 || !joins(f, n, gu, nb)) join = false;
            while (join && j < ng && gset[j] != gu) j++;
            /* users in several groups: only a LAPACK op joins them all (its factor read by
               the solve and by log(diag(L)), each in a group of its own shape) */
            if (join && j == ng && (ng == FUSE_MAX_JOIN || (ng > 0 && !lap))) join = false;
            if (join && j == ng) gset[ng++] = gu;
            m += f->mult[u->id];
            if (m > FUSE_MAX_EXPANDED) join = false;
        }
        long esize = m;
        for (int j = 0; j < ng; j++) esize += f->gs[gset[j]].esize;
        if (join && ng > 1) join = !linked(f, gset, ng);
        if (join && ng > 0 && esize <= FUSE_MAX_EXPANDED) {
            gi = gset[0];
            for (int j = 1; j < ng; j++) merge_into(f, gi, gset[j]);
            add_member(f, gi, n);
            f->gs[gi].core = f->gs[gi].core || tg_fused_is_core(n->op);
            if (lap) f->gs[gi].nbatch = nb;
            f->gs[gi].lapack = f->gs[gi].lapack || lap;
            f->mult[n->id] = (int)m;
            f->gs[gi].esize = (int)esize;
        } else {
            gi = new_group(f, n, K_EW, &v->type);
            f->gs[gi].core = tg_fused_is_core(n->op);
            f->gs[gi].lapack = lap;
            f->gs[gi].nbatch = nb;
            f->mult[n->id] = 1;
            f->gs[gi].esize = 1;
        }
    }
    /* outputs of each group: its values that leave it (groups merged into others count
       no more) */
    for (int gi = 0; gi < f->ngs; gi++)
        for (int m = gfind(f, gi) == gi ? f->gs[gi].head : -1; m >= 0; m = f->next[m])
            if (leaves(f, ((tg_node *)f->g->nodes.items[m])->out[0], gi)) f->gs[gi].nout++;
}

/* ---- step 2: reductions into the group that feeds them ---- */

/* A LAPACK group takes in each reduction over core axes alone that is the only reader of a
 * value leaving it (the group stays K_EW: other values may leave as they are). The program
 * reduces each block (fused.h, core ops). */
static void absorb_core_reductions(fuser *f, int gi) {
    fgroup *gr = &f->gs[gi];
    int tail = gr->tail;
    for (int m = gr->head; m >= 0; m = m == tail ? -1 : f->next[m]) {
        const tg_var *v = ((tg_node *)f->g->nodes.items[m])->out[0];
        f->work++;
        if (f->outuse[v->id] > 0 || f->ustart[v->id + 1] - f->ustart[v->id] != 1) continue;
        tg_node *r = f->unode[f->ustart[v->id]];
        bool rm[TG_MAX_DIMS], batch_axis = false;
        int64_t rk;
        if (!red_ok(r) || node_group(f, r) >= 0 || !red_mask(r, rm, &rk) ||
            !tg_ir_same_device(r->device, gr->device) || gr->esize >= FUSE_MAX_EXPANDED)
            continue;
        for (int d = 0; d < gr->nbatch; d++) batch_axis = batch_axis || rm[d];
        if (batch_axis) continue;
        add_member(f, gi, r);
        f->mult[r->id] = 1;
        gr->esize++;
    }
}

static void absorb_reductions(fuser *f) {
    int ng = f->ngs;
    for (int gi = 0; gi < ng; gi++) {
        fgroup *gr = &f->gs[gi];
        if (gfind(f, gi) != gi) continue; /* merged into another in step 1 */
        if (gr->kind == K_EW && gr->lapack) {
            absorb_core_reductions(f, gi);
            continue;
        }
        if (gr->kind != K_EW || gr->core || gr->nout < 1 || gr->nout > TG_MAX_OUTS ||
            gr->esize + gr->nout > FUSE_MAX_EXPANDED)
            continue;
        bool ok = true, first = true;
        bool red[TG_MAX_DIMS];
        int64_t keep = 0;
        for (int m = gr->head; m >= 0 && ok; m = f->next[m]) {
            const tg_var *v = ((tg_node *)f->g->nodes.items[m])->out[0];
            if (!leaves(f, v, gi)) continue;
            if (f->outuse[v->id] > 0 || f->ustart[v->id + 1] - f->ustart[v->id] != 1) {
                ok = false;
                break;
            }
            const tg_node *r = f->unode[f->ustart[v->id]];
            bool rm[TG_MAX_DIMS];
            int64_t rk;
            if (!red_ok(r) || node_group(f, r) >= 0 || !red_mask(r, rm, &rk) ||
                !tg_ir_same_device(r->device, gr->device)) {
                ok = false;
                break;
            }
            if (first) {
                memcpy(red, rm, sizeof red);
                keep = rk;
                first = false;
            } else if (memcmp(red, rm, sizeof red) != 0 || rk != keep) {
                ok = false;
            }
        }
        if (!ok || first) continue;
        /* every value leaving the group feeds one reduction: take them in */
        int tail = gr->tail;
        for (int m = gr->head; m >= 0; m = m == tail ? -1 : f->next[m]) {
            const tg_var *v = ((tg_node *)f->g->nodes.items[m])->out[0];
            if (!leaves(f, v, gi)) continue;
            tg_node *r = f->unode[f->ustart[v->id]];
            add_member(f, gi, r);
            f->mult[r->id] = 1;
            gr->esize++;
        }
        gr->kind = K_RED;
        memcpy(gr->red, red, sizeof red);
        gr->keep = keep;
    }
    /* a reduction of an input alone: a group of its own, fused only with siblings */
    for (int i = 0; i < f->norder; i++) {
        tg_node *r = f->order[i];
        bool rm[TG_MAX_DIMS];
        int64_t rk;
        if (!red_ok(r) || node_group(f, r) >= 0 || !red_mask(r, rm, &rk)) continue;
        int gi = new_group(f, r, K_RED, &r->in[0]->type);
        memcpy(f->gs[gi].red, rm, sizeof rm);
        f->gs[gi].keep = rk;
        f->gs[gi].esize = 1;
        f->gs[gi].nout = 1;
        f->mult[r->id] = 1;
    }
}

/* ---- step 3: siblings ---- */

/* Whether two groups may merge is a question of paths: a path from one to the other (through
 * any nodes and groups, a group counting as one vertex) would make the merged node a cycle.
 * A search from a group walks everything after it, FUSE_REACH_BUDGET nodes at most: a group
 * with more nodes after it is "big", and a big group merges with nothing (the search could
 * not prove the merge safe). Two facts keep the searches few:
 *  - The readers of a value are taken MAXC at a time (a batch). One search per group of the
 *    batch finds the batch's groups it reaches (a bit mask), rather than one search per pair;
 *    the groups that start last are searched first.
 *  - Big is for good: merges only add paths. A group that reaches a big group is big too, so
 *    a search that meets one stops there.
 * After a merge the masks are exact still (kept so below) but a group that reaches the
 * merged one may have become big: the batch's masks are searched again when next needed. */
enum { MAXC = 32 };

typedef struct batch {
    int cand[MAXC];       /* the groups, as readers() listed them (gfind gives the current) */
    int nc;               /* how many */
    uint32_t reach[MAXC]; /* per slot, when known: the slots whose groups its group reaches */
    uint32_t known;       /* slots whose reach (and whether their group is big) is known */
    int order[MAXC];      /* slots, the group starting last first (the order of searches) */
} batch;

/* Slots of the batch whose group is g. */
static uint32_t slots_of(fuser *f, const batch *bt, int g) {
    uint32_t m = 0;
    for (int t = 0; t < bt->nc; t++)
        if (gfind(f, bt->cand[t]) == g) m |= (uint32_t)1 << t;
    return m;
}

/* Searches from slot s's group: the slots it reaches, for every slot of that group, or
 * marks the group big (past the budget, the pass's budget spent, or a big group met). */
static void search_reach(fuser *f, batch *bt, int s) {
    int a = gfind(f, bt->cand[s]);
    uint32_t res = 0, mine = slots_of(f, bt, a);
    f->stamp++;
    for (int t = 0; t < bt->nc; t++) {
        int gt = gfind(f, bt->cand[t]);
        f->slot[gt] = t; /* valid while sstamp matches */
        f->sstamp[gt] = f->stamp;
    }
    int sp = 0;
    long budget = FUSE_REACH_BUDGET;
    f->gvis[a] = f->stamp;
    for (int m = f->gs[a].head; m >= 0 && !f->big[a]; m = f->next[m]) f->vis[m] = f->stamp;
    for (int m = f->gs[a].head; m >= 0 && !f->big[a]; m = f->next[m])
        push_users(f, f->g->nodes.items[m], &sp);
    while (sp > 0 && !f->big[a]) {
        f->work++;
        if (--budget < 0 || --f->search_left < 0) {
            f->big[a] = 1;
            break;
        }
        const tg_node *u = f->g->nodes.items[f->stack[--sp]];
        int gu = node_group(f, u);
        if (gu >= 0 && f->big[gu]) {
            f->big[a] = 1;
            break;
        }
        if (gu >= 0 && f->gvis[gu] != f->stamp) {
            f->gvis[gu] = f->stamp;
            if (f->sstamp[gu] == f->stamp) res |= slots_of(f, bt, gu);
            for (int m = f->gs[gu].head; m >= 0; m = f->next[m]) {
                if (f->vis[m] == f->stamp) continue;
                f->vis[m] = f->stamp;
                f->stack[sp++] = m;
            }
        }
        push_users(f, u, &sp);
    }
    for (int t = 0; t < bt->nc; t++)
        if (mine >> t & 1) bt->reach[t] = res & ~mine;
    bt->known |= mine;
}

/* Makes slot s known, searching first from the groups that start later, so that a search
 * meets the big groups after it. */
static void know(fuser *f, batch *bt, int s) {
    for (int i = 0; i < bt->nc && !(bt->known >> s & 1); i++) {
        int t = bt->order[i];
        if (!(bt->known >> t & 1)) search_reach(f, bt, t);
    }
}

/* Merges group a into group b (b stays the representative). The masks stay exact: the
 * merged group reaches what either reached, and whatever reached either now reaches the
 * merged group and all it reaches. Whether a group is big is searched again. */
static void merge_pair(fuser *f, batch *bt, int b, int a) {
    uint32_t both = slots_of(f, bt, a) | slots_of(f, bt, b), rm = 0;
    for (int t = 0; t < bt->nc; t++)
        if (both >> t & 1) rm |= bt->reach[t];
    rm &= ~both;
    merge_into(f, b, a);
    for (int t = 0; t < bt->nc; t++) {
        if (both >> t & 1)
            bt->reach[t] = rm;
        else if (bt->reach[t] & both)
            bt->reach[t] |= rm | both;
    }
    bt->known = 0;
}

static bool static_shape(const tg_type *t) {
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0) return false;
    return true;
}

static bool siblings_fit(const fuser *f, int a, int b, const tg_var *x) {
    const fgroup *ga = &f->gs[a], *gb = &f->gs[b];
    if (ga->kind != gb->kind || !same_shape(&ga->shape, &gb->shape) ||
        !tg_ir_same_device(ga->device, gb->device))
        return false;
    /* a LAPACK op alone has no work around it to keep in cache: sharing a batch loop with
       a sibling measured no faster than its own (W12's cholesky(A) and solve(A, B)) */
    if ((ga->lapack && ga->nmem == 1) || (gb->lapack && gb->nmem == 1)) return false;
    if (!static_shape(&ga->shape) && !same_shape(&x->type, &ga->shape)) return false;
    if (ga->kind == K_RED &&
        (memcmp(ga->red, gb->red, sizeof ga->red) != 0 || ga->keep != gb->keep))
        return false;
    return ga->esize + gb->esize <= FUSE_MAX_EXPANDED && ga->nout + gb->nout <= TG_MAX_OUTS;
}

/* Groups reading x (not made by x's own group), MAXC at a time from reader k on, into cand;
 * returns how many and moves *k past them. */
static int readers(fuser *f, const tg_var *x, int *k, int *cand, int maxc) {
    int xg = x->kind == TG_VAR_NODE ? node_group(f, x->node) : -1, nc = 0;
    for (; *k < f->ustart[x->id + 1] && nc < maxc; (*k)++) {
        f->work++;
        int gu = node_group(f, f->unode[*k]);
        if (gu < 0 || gu == xg || f->cvis[gu] == x->id + 1) continue;
        f->cvis[gu] = x->id + 1;
        cand[nc++] = gu;
    }
    return nc;
}

static void merge_siblings(fuser *f) {
    batch bt;
    for (int gi = 0; gi < f->ngs; gi++) f->first[gi] = -1;
    for (int i = 0; i < f->norder; i++) {
        int gi = node_group(f, f->order[i]);
        if (gi >= 0 && f->first[gi] < 0) f->first[gi] = i;
    }
    /* A group is big from the start when a path of more than FUSE_REACH_BUDGET nodes leaves
     * one of its members (all of them lie after the group: no path comes back into it). The
     * longest paths are counted in reverse order, per position, on the search stack. */
    int *depth = f->stack;
    for (int i = f->norder - 1; i >= 0; i--) {
        const tg_node *n = f->order[i];
        int d = 0;
        for (int o = 0; o < n->nout; o++) {
            int v = n->out[o]->id;
            f->work += 1 + f->ustart[v + 1] - f->ustart[v];
            for (int k = f->ustart[v]; k < f->ustart[v + 1]; k++) {
                int du = 1 + depth[f->pos[f->unode[k]->id]];
                if (du > d) d = du;
            }
        }
        depth[i] = d > FUSE_REACH_BUDGET ? FUSE_REACH_BUDGET + 1 : d;
        int gi = node_group(f, n);
        if (gi >= 0 && depth[i] > FUSE_REACH_BUDGET) f->big[gi] = 1;
    }
    for (int v = 0; v < f->nv; v++) {
        const tg_var *x = f->g->vars.items[v];
        if (f->ustart[v + 1] - f->ustart[v] < 2 || is_literal(x)) continue;
        for (int k = f->ustart[v]; k < f->ustart[v + 1];) {
            bt.nc = readers(f, x, &k, bt.cand, MAXC);
            bt.known = 0;
            for (int i = 0; i < bt.nc; i++) { /* by first position, the last first */
                int j = i, p = f->first[gfind(f, bt.cand[i])];
                for (; j > 0 && f->first[gfind(f, bt.cand[bt.order[j - 1]])] < p; j--)
                    bt.order[j] = bt.order[j - 1];
                bt.order[j] = i;
            }
            for (int i = 1; i < bt.nc; i++) {
                for (int j = 0; j < i; j++) {
                    f->work++;
                    int a = gfind(f, bt.cand[i]), b = gfind(f, bt.cand[j]);
                    if (a == b || !siblings_fit(f, b, a, x)) continue;
                    know(f, &bt, i);
                    know(f, &bt, j);
                    if (f->big[a] || f->big[b] || (bt.reach[i] >> j & 1) || (bt.reach[j] >> i & 1))
                        continue;
                    merge_pair(f, &bt, b, a);
                    break;
                }
            }
        }
    }
}

/* ---- building the fused nodes ---- */

/* How a literal constant is written: false when it cannot be (it becomes an input). */
static bool literal_of(const tg_var *v, char *lit, int64_t *i, double *x) {
    if (!is_literal(v)) return false;
    tg_dtype dt = (tg_dtype)v->type.dtype;
    const void *p = tg_tensor_data(v->value);
    if (dt == TG_DT_BOOL) {
        *lit = 'b';
        *i = tg_load_i64(p, dt) != 0;
    } else if (!tg_dtype_is_float(dt)) {
        *lit = 'i';
        *i = tg_load_i64(p, dt);
    } else {
        double d = tg_load_f64(p, dt);
        /* an integer literal that met a float prints as an integer: the same weak value */
        bool integral = v->lit != 'f' && d == d && fabs(d) < 9007199254740992.0 && d == floor(d);
        *lit = integral ? 'i' : 'f';
        *i = integral ? (int64_t)d : 0;
        *x = d;
    }
    return true;
}

/* The attributes of the reduction r with its axes written from the end (`axis=[-2, -1]`):
 * a LAPACK group's program reduces each block, whose axes are the value's last ones. */
static const tg_aval *axes_from_end(const tg_node *r, tg_aval *ra, int64_t *ax) {
    bool rm[TG_MAX_DIMS];
    int64_t keep;
    int nd = r->in[0]->type.ndim, n = 0;
    if (tg_op_table[r->op]->nattrs != 2 || !red_mask(r, rm, &keep)) return r->attrs;
    for (int d = 0; d < nd; d++)
        if (rm[d]) ax[n++] = d - nd;
    ra[0] = (tg_aval){.kind = TG_ATTR_INTS, .ints = ax, .n = n};
    ra[1] = r->attrs[1];
    return ra;
}

typedef struct builder {
    int *slot;  /* per node id: its slot in the program being built */
    int *islot; /* per var id: input slot (valid when istamp matches) */
    int *istamp;
    int stamp;
    tg_var **ins;   /* inputs of the fused node */
    tg_var **exits; /* values it replaces, in output order */
    tg_var **map;   /* per var id (original vars): the replacement, or NULL */
    bool *built;    /* per group: replaced by a fused node */
} builder;

/* Memory ran out fusing the group that ends at node n: the message names that node and
 * keeps the allocator's reason (the memory cap, docs/hardening.md). */
static tg_status oom_at(const tg_graph *g, const tg_node *n) {
    char why[TG_ERRMSG_MAX];
    const char *m = tg_last_error();
    snprintf(why, sizeof why, "%s", m && strstr(m, "memory") ? m : "out of memory");
    if (n->line > 0)
        return tg_set_error(TG_ENOMEM, "%s:%d:%d: %s: fusing: %s", g->file ? g->file : "<input>",
                            n->line, n->col, tg_op_table[n->op]->name, why);
    return tg_set_error(TG_ENOMEM, "node %d (%s): fusing: %s", n->id, tg_op_table[n->op]->name,
                        why);
}

/* Builds the fused node of group gi from its members (topological order); false when the
 * group is left unfused, with *st set on errors that must stop the pass. */
static bool build_group(fuser *f, builder *b, int gi, tg_node *const *mem, int nm, tg_status *st) {
    tg_graph *g = f->g;
    int nin = 0, ne = 0;
    b->stamp++;
    for (int j = 0; j < nm; j++) {
        const tg_node *m = mem[j];
        for (int k = 0; k < m->nin; k++) {
            tg_var *x = m->in[k];
            char lit;
            int64_t li;
            double lf;
            if (x->kind == TG_VAR_NODE && node_group(f, x->node) == gi) continue;
            if (!tg_fused_can_reduce(m->op) && literal_of(x, &lit, &li, &lf)) continue;
            if (b->istamp[x->id] == b->stamp) continue;
            b->istamp[x->id] = b->stamp;
            b->islot[x->id] = nin;
            b->ins[nin++] = x;
        }
    }
    if (nin == 0) return false; /* only literals: nothing to read (folding's business) */
    tg_fused_prog *p = tg_fused_new(g->ctx, nin), *q = NULL;
    tg_status err = p ? TG_OK : TG_ENOMEM; /* allocation failures and limits */
    bool ok = true;                        /* the group can be fused */
    for (int j = 0; err == TG_OK && ok && j < nm; j++) {
        const tg_node *m = mem[j];
        tg_fused_arg args[TG_FUSED_MAX_ARGS];
        for (int k = 0; k < m->nin && k < TG_FUSED_MAX_ARGS; k++) {
            tg_var *x = m->in[k];
            char lit;
            int64_t li = 0;
            double lf = 0.0;
            if (x->kind == TG_VAR_NODE && node_group(f, x->node) == gi)
                args[k] = (tg_fused_arg){.slot = b->slot[x->node->id]};
            else if (!tg_fused_can_reduce(m->op) && literal_of(x, &lit, &li, &lf))
                args[k] = (tg_fused_arg){
                    .slot = -1, .lit = lit, .dtype = x->type.dtype, .i = li, .f = lf, .pos = -1};
            else
                args[k] = (tg_fused_arg){.slot = b->islot[x->id]};
        }
        if (tg_fused_can_reduce(m->op)) {
            tg_aval ra[2];
            int64_t ax[TG_MAX_DIMS];
            err = tg_fused_add_out(p, args[0].slot, m->op,
                                   f->gs[gi].lapack ? axes_from_end(m, ra, ax) : m->attrs);
            b->exits[ne++] = m->out[0];
            continue;
        }
        err = tg_fused_add_call(p, m->op, args, m->nin, m->attrs, -1, &b->slot[m->id]);
        if (err != TG_OK || !leaves(f, m->out[0], gi)) continue;
        if (f->gs[gi].kind != K_EW)
            ok = false; /* a reduction group never lets an elementwise value out */
        else if ((err = tg_fused_add_out(p, b->slot[m->id], -1, NULL)) == TG_OK)
            b->exits[ne++] = m->out[0];
    }
    /* messages about the node name columns of its printed text */
    if (err == TG_OK && ok && ne > 0) err = tg_fused_place(p);
    /* the program must give back exactly the types of the values it replaces */
    tg_type *tin = NULL;
    char msg[256] = "";
    if (err == TG_OK && ok && ne > 0) {
        tin = tg_mem_alloc(g->ctx, sizeof *tin * (size_t)(nin + 1));
        q = tin ? tg_fused_copy(g->ctx, p) : NULL;
        if (!q) err = TG_ENOMEM;
        for (int k = 0; tin && k < nin; k++) tin[k] = b->ins[k]->type;
    }
    if (err == TG_OK && ok && ne > 0) {
        tg_status ts = tg_fused_type(q, tin, false, msg, sizeof msg);
        if (ts == TG_ENOMEM) err = ts;
        ok = ts == TG_OK && q->nout == ne;
        for (int k = 0; ok && k < ne; k++)
            ok = tg_type_equal(&q->out_type[k], &b->exits[k]->type) &&
                 q->out_type[k].weak == b->exits[k]->type.weak;
#ifndef NDEBUG
        if (!ok && err == TG_OK)
            err = tg_set_error(TG_EINTERNAL,
                               "fuse: the program fusing the group that ends at node %d (%s) "
                               "does not give the types it replaces%s%s",
                               mem[nm - 1]->id, tg_op_table[mem[nm - 1]->op]->name,
                               msg[0] ? ": " : "", msg);
#endif
    }
    if (tin) tg_mem_free(g->ctx, tin, sizeof *tin * (size_t)(nin + 1));
    tg_fused_free(q);
    if (err == TG_ENOMEM) err = oom_at(g, mem[nm - 1]);
    if (err != TG_OK || !ok || ne == 0) {
        if (err == TG_ELIMIT) err = TG_OK; /* too large: leave the group unfused */
        *st = err;
        tg_fused_free(p);
        return false;
    }
    const tg_node *last = mem[nm - 1];
    int line = g->line, col = g->col;
    const char *device = g->device;
    g->line = last->line;
    g->col = last->col;
    g->device = f->gs[gi].device; /* the device of every member */
    tg_aval a = tg_fused_aval(p);
    tg_node *n = tg_ir_node_make_norm(g, TG_OP_FUSED, b->ins, nin, &a);
    g->line = line;
    g->col = col;
    g->device = device;
    tg_fused_free(p); /* the node holds its own reference */
    if (!n || n->nout != ne) {
        *st =
            n ? tg_set_error(TG_EINTERNAL, "fuse: a fused node has %d outputs, not %d", n->nout, ne)
              : g->status;
        return false;
    }
    for (int k = 0; k < ne; k++) {
        b->map[b->exits[k]->id] = n->out[k];
        n->out[k]->name = b->exits[k]->name; /* same graph, same arena: the name is kept */
    }
    return true;
}

/* Replaces the groups of two nodes or more by fused nodes, then points every use of a
 * value they replace at the fused node's output. */
static tg_status build_all(fuser *f) {
    tg_graph *g = f->g;
    size_t nn = (size_t)f->nn, nv = (size_t)f->nv, ng = (size_t)f->norder;
    builder b = {0};
    int *start = fz_calloc(f, ng + 1, sizeof *start); /* per group */
    tg_node **mem = fz_calloc(f, ng, sizeof *mem);
    b.slot = fz_calloc(f, nn, sizeof *b.slot);
    b.islot = fz_calloc(f, nv, sizeof *b.islot);
    b.istamp = fz_calloc(f, nv, sizeof *b.istamp);
    b.ins = fz_calloc(f, nv, sizeof *b.ins);
    b.exits = fz_calloc(f, nv, sizeof *b.exits);
    b.map = fz_calloc(f, nv, sizeof *b.map);
    b.built = fz_calloc(f, ng, sizeof *b.built);
    tg_status st = TG_OK;
    if (!start || !mem || !b.slot || !b.islot || !b.istamp || !b.ins || !b.exits || !b.map ||
        !b.built) {
        st = TG_ENOMEM;
        goto done;
    }
    /* members of each representative, in topological order (a counting sort) */
    for (int i = 0; i < f->norder; i++) {
        int gi = node_group(f, f->order[i]);
        if (gi >= 0) start[gi + 1]++;
    }
    for (size_t gi = 0; gi < ng; gi++) start[gi + 1] += start[gi];
    {
        int *fill = fz_calloc(f, ng, sizeof *fill);
        if (!fill) {
            st = TG_ENOMEM;
            goto done;
        }
        for (int i = 0; i < f->norder; i++) {
            int gi = node_group(f, f->order[i]);
            if (gi >= 0) mem[start[gi] + fill[gi]++] = f->order[i];
        }
        fz_free(f, fill, ng, sizeof *fill);
    }
    for (int gi = 0; gi < f->ngs && st == TG_OK; gi++) {
        int nm = start[gi + 1] - start[gi];
        if (gfind(f, gi) != gi || nm < 2) continue;
        b.built[gi] = build_group(f, &b, gi, mem + start[gi], nm, &st);
        if (b.built[gi]) f->made++;
    }
    if (st != TG_OK || f->made == 0) goto done;
    /* redirect: live nodes outside the replaced groups, the new nodes, the outputs */
    for (int i = 0; i < g->nodes.n; i++) {
        tg_node *n = g->nodes.items[i];
        if (i < f->nn) {
            int gi = node_group(f, n);
            if (f->pos[i] < 0 || (gi >= 0 && b.built[gi])) continue;
        }
        for (int k = 0; k < n->nin; k++) {
            int v = n->in[k]->id;
            if (v < f->nv && b.map[v]) n->in[k] = b.map[v];
        }
    }
    for (int i = 0; i < g->outputs.n; i++) {
        int v = ((tg_var *)g->outputs.items[i])->id;
        if (v < f->nv && b.map[v]) g->outputs.items[i] = b.map[v];
    }
done:
    fz_free(f, start, ng + 1, sizeof *start);
    fz_free(f, mem, ng, sizeof *mem);
    fz_free(f, b.slot, nn, sizeof *b.slot);
    fz_free(f, b.islot, nv, sizeof *b.islot);
    fz_free(f, b.istamp, nv, sizeof *b.istamp);
    fz_free(f, b.ins, nv, sizeof *b.ins);
    fz_free(f, b.exits, nv, sizeof *b.exits);
    fz_free(f, b.map, nv, sizeof *b.map);
    fz_free(f, b.built, ng, sizeof *b.built);
    return st;
}

/* ---- the pass ---- */

tg_status tg_fuse(tg_graph *g, const tg_rw_opts *opts, tg_rw_report *report) {
    (void)opts;
    if (!g) return tg_set_error(TG_EINVAL, "fuse: graph is NULL");
    if (g->status != TG_OK) return tg_set_error(g->status, "%s", g->error);
    if (g->outputs.n == 0) return TG_OK;
    fuser f = {.g = g, .ctx = g->ctx, .search_left = FUSE_SEARCH_TOTAL + 64L * g->nodes.n};
    tg_status st = copy_cheap(&f);
    if (st == TG_OK) st = setup(&f);
    if (st == TG_OK) {
        absorb_producers(&f);
        absorb_reductions(&f);
        merge_siblings(&f);
        st = build_all(&f);
    }
    if (st == TG_ENOMEM && !strstr(tg_last_error(), "memory"))
        tg_set_error(TG_ENOMEM, "fuse: out of memory");
    if (report && st == TG_OK)
        for (int i = report->npasses - 1; i >= 0; i--) {
            if (strcmp(report->passes[i].name, "fuse") != 0) continue;
            report->passes[i].visits += f.norder;
            report->passes[i].work += f.work;
            report->passes[i].applied += f.made;
            break;
        }
    teardown(&f);
    return st;
}
