/* place.c - placement: the device each node runs on, and the transfers between devices
 * (docs/devices.md, "Placement"). It is not a pass of the rewrite pipeline: the driver runs
 * it after the pipeline, on its rewritten clone, so that no rewrite ever sees a transfer it
 * made. ggml's ggml_backend_sched is the model. The steps:
 *
 *  a. Pins. A node's annotation (n->device) pins it (a transfer's is where it moves its
 *     value; one without is placed like any node, and disappears where it lands on its
 *     input's device). An input's annotation pins its readers' view of where its data
 *     lives: they are placed as if it lived there. Its tensor is host memory all the same
 *     (a call's tensors are), as constants are, which every host device reads directly.
 *     An annotation naming no device, and a pinned node whose device cannot run its op
 *     (supports_op; transfers are copies, which every device makes), are errors naming the
 *     node's place.
 *  b. Expansion. MANUAL: in topological order each other node follows the pinned values it
 *     reads (a pinned node or input, or a node that followed one); two of them on different
 *     devices are an error naming both and the op's place. AUTO: pins on devices the cost
 *     model never chooses (sim devices) spread to the unpinned neighbours that would otherwise
 *     move data to or from them: forward to a node whose located inputs all live there, then
 *     backward to a node whose readers all run there, each time only where no more data
 *     moves to the device than the move saves. Pins on host devices do not spread:
 *     their readers are weighed by the cost model, so that a pin never drags independent
 *     work onto its device.
 *  c. Fill. MANUAL: the rest runs on the first device (`cpu:0` when there are virtual host
 *     devices, else `cpu`). AUTO: list scheduling in topological order, each node on the
 *     device where it would finish first, among the virtual host devices `cpu:i` (or `cpu`
 *     alone when there are none; `cpu`, the whole host, and sim devices only by pins and
 *     expansion). A node's time is its work (elements read and written; m*n*k for products)
 *     over the device's compute speed, after its inputs arrive (a fixed hop between host
 *     devices, so chains stay together and only independent work spreads; latency plus
 *     bytes over bandwidth for each sim end) and after the device's earlier work. A device
 *     that cannot run the op is never chosen.
 *  d. Transfers. Every read of a value that does not live where its reader runs goes through
 *     a transfer on the reader's device D (`transfer(x, device="D")`), one per value and
 *     destination (all readers on D share it).
 *     Returned values must end in host memory: one on a sim device gets a transfer to `cpu`.
 *  e. Cancellation. Transfers already in the graph are looked through: a reader reads the
 *     original value where it can (a transfer back to the source's device, a transfer to
 *     where its input already is), and an existing transfer serves as the one of its value
 *     and device; those left unread are removed. copy=false marks every transfer between
 *     two host devices (one address space, read-only use: nothing is copied at run time),
 *     unless one of its readers overwrites it in place (gemm_inplace's accumulator: the
 *     in-place pass ran before placement), which then gets a copy of its own.
 *  Constants are no values in memory but part of the program: each device's part holds its
 *  own copy, so a node reads them wherever it runs, with no transfer.
 *
 * Contract after TG_OK (tg_place_check tests it; the multi-device scheduler relies on it):
 *  - every node of the graph has a non-NULL device (interned in the graph), naming a device
 *    of the registry that can run its op (transfers aside);
 *  - a node that is not a transfer reads only constants, values that live on its own
 *    device, and host memory (the inputs) when it runs on a host device;
 *  - a transfer (its device: where it moves the value) reads a value that lives on another
 *    device, and its copy is true when either device is not a host device (and between
 *    host devices when a reader overwrites it);
 *  - every output (returned value, new value of a state) lives in host memory.
 * With one device (`cpu`) and no transfer in the graph, every node is set to `cpu` and
 * nothing else is done.
 */
#include "../device/device.h"
#include "rewrite.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

enum { UNPLACED = -2, HOST = -1 }; /* locations besides device indices */
enum { T_COPY };                   /* the attribute of transfer (src/ops/transfer.c) */
#define UNKNOWN_EXTENT 64.0        /* what a '?' extent counts for in the cost model */
#define CPU_RATE       1e9         /* elements (or multiply-adds) per second of `cpu` */
#define HOST_HOP       5e-6        /* a read across host devices: one synchronisation */

typedef struct place {
    tg_graph *g;
    tg_device *const *devs; /* the registry */
    int ndev;
    int first;         /* MANUAL's default: cpu:0 when there are host devices, else cpu */
    int *cands;        /* AUTO's choices: the cpu:i, or cpu alone */
    int ncands;        /* their number */
    tg_node **order;   /* live nodes, inputs first */
    int norder;        /* their number */
    int nnodes, nvars; /* sizes of the arrays by id below (the graph before transfers) */
    int *dev;          /* by node id: device index or UNPLACED */
    uint8_t *derived;  /* by node id: pinned, or (MANUAL) following a pinned value */
    int *inloc;        /* by var id, inputs: HOST or the device of the annotation */
    const char **name; /* by device index: its name interned in g, or NULL before needed */
    int *memo;         /* by var id: first entry of its transfers, or -1 */
    struct entry {
        int dev;    /* destination */
        tg_var *t;  /* the transfer's output */
        int next;   /* next entry of the same value, or -1 */
        bool fresh; /* made here (else one of the graph's, adopted) */
        bool used;  /* some read resolved to it */
    } * ent;
    int nent, capent;
    const char *cached; /* the last annotation looked up, and its device */
    int cached_dev;
    tg_place_stats st;
} place;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "f.tg:3:5: exp" or "node 12 (exp)": the place of a node, for messages. */
static void where(const tg_graph *g, const tg_node *n, char *buf, size_t cap) {
    const char *op = tg_op_table[n->op]->name;
    if (n->line > 0)
        snprintf(buf, cap, "%s:%d:%d: %s", g->file ? g->file : "<input>", n->line, n->col, op);
    else
        snprintf(buf, cap, "node %d (%s)", n->id, op);
}

/* Index of the device named `name`, or -1 with the registry's error (naming it and listing
 * the devices) prefixed by `at`. */
static int find_dev(place *p, const char *name, const char *at) {
    if (name == p->cached) return p->cached_dev;
    for (int i = 0; i < p->ndev; i++)
        if (strcmp(p->devs[i]->name, name) == 0) {
            p->cached = name;
            p->cached_dev = i;
            return i;
        }
    char msg[TG_ERRMSG_MAX];
    tg_device_find(name); /* fails: its message names the devices there are */
    snprintf(msg, sizeof msg, "%s", tg_last_error());
    tg_set_error(TG_EINVAL, "%s: %s", at, msg);
    return -1;
}

static bool is_host(const place *p, int loc) {
    return loc == HOST || (loc >= 0 && tg_device_is_host(p->devs[loc]));
}

static bool supports(const place *p, int d, const tg_node *n) {
    return n->op == TG_OP_TRANSFER || p->devs[d]->iface->supports_op(p->devs[d], n->op);
}

/* Where placement sees v: a device index, HOST, or UNPLACED (a node not placed yet). An
 * annotated input is seen on its device (its readers are placed as if it lived there). */
static int loc_of(const place *p, const tg_var *v) {
    if (v->kind == TG_VAR_NODE) return p->dev[v->node->id];
    return v->kind == TG_VAR_INPUT ? p->inloc[v->id] : HOST;
}

/* Where v's memory is at run time: its node's device, or host memory for inputs (the
 * tensors given to a call, whatever their annotation) and constants. */
static int mem_of(const place *p, const tg_var *v) {
    return v->kind == TG_VAR_NODE ? p->dev[v->node->id] : HOST;
}

static double elems(const tg_type *t) {
    double e = 1;
    for (int d = 0; d < t->ndim; d++) e *= t->shape[d] < 0 ? UNKNOWN_EXTENT : (double)t->shape[d];
    return e;
}

static double bytes(const tg_var *v) {
    return elems(&v->type) * (double)tg_dtype_size((tg_dtype)v->type.dtype);
}

/* Whether v's location comes from a pin (MANUAL follows those). */
static bool derived_of(const place *p, const tg_var *v) {
    if (v->kind == TG_VAR_NODE) return p->derived[v->node->id];
    return v->kind == TG_VAR_INPUT && p->inloc[v->id] != HOST;
}

/* "'a'", "the result of exp at f.tg:3:5" or "a constant": a value, for messages. */
static void describe(const tg_graph *g, const tg_var *v, char *buf, size_t cap) {
    if (v->name) {
        snprintf(buf, cap, "'%s'", v->name);
    } else if (v->kind == TG_VAR_NODE && v->node->line > 0) {
        snprintf(buf, cap, "the result of %s at %s:%d:%d", tg_op_table[v->node->op]->name,
                 g->file ? g->file : "<input>", v->node->line, v->node->col);
    } else if (v->kind == TG_VAR_NODE) {
        snprintf(buf, cap, "the result of node %d (%s)", v->node->id,
                 tg_op_table[v->node->op]->name);
    } else {
        snprintf(buf, cap, "a constant");
    }
}

/* ---- a: pins ---- */

static tg_status pin(place *p) {
    tg_graph *g = p->g;
    char at[512];
    for (int i = 0; i < p->norder; i++) {
        tg_node *n = p->order[i];
        const char *name = n->device;
        if (!name) continue;
        where(g, n, at, sizeof at);
        int d = find_dev(p, name, at);
        if (d < 0) return TG_EINVAL;
        if (!supports(p, d, n))
            return tg_set_error(TG_EINVAL, "%s: annotated to run on %s, which cannot run it", at,
                                p->devs[d]->name);
        p->dev[n->id] = d;
        p->derived[n->id] = 1;
    }
    for (int i = 0; i < g->inputs.n; i++) {
        const tg_var *v = g->inputs.items[i];
        p->inloc[v->id] = HOST;
        if (!v->device) continue;
        snprintf(at, sizeof at, "input '%s'", v->name ? v->name : "?");
        if ((p->inloc[v->id] = find_dev(p, v->device, at)) < 0) return TG_EINVAL;
    }
    return TG_OK;
}

/* ---- b, c: MANUAL ---- */

static tg_status place_manual(place *p) {
    for (int i = 0; i < p->norder; i++) {
        tg_node *n = p->order[i];
        if (p->dev[n->id] != UNPLACED) continue;
        int d1 = -1;
        const tg_var *v1 = NULL;
        for (int k = 0; k < n->nin; k++) {
            const tg_var *v = n->in[k];
            int l = loc_of(p, v);
            if (l < 0 || !derived_of(p, v) || l == d1) continue;
            if (d1 < 0) {
                d1 = l;
                v1 = v;
                continue;
            }
            char at[512], a[600], b[600];
            where(p->g, n, at, sizeof at);
            describe(p->g, v1, a, sizeof a);
            describe(p->g, v, b, sizeof b);
            return tg_set_error(TG_EINVAL,
                                "%s: manual placement: it reads %s on %s and %s on %s (annotate "
                                "it with the device to run on, or place automatically)",
                                at, a, p->devs[d1]->name, b, p->devs[l]->name);
        }
        bool follow = d1 >= 0 && supports(p, d1, n);
        p->dev[n->id] = follow ? d1 : p->first;
        p->derived[n->id] = follow;
        if (!follow && !supports(p, p->first, n)) {
            char at[512];
            where(p->g, n, at, sizeof at);
            return tg_set_error(TG_EINVAL, "%s: %s cannot run it (annotate it with a device)", at,
                                p->devs[p->first]->name);
        }
    }
    return TG_OK;
}

/* ---- b: AUTO's expansion of pins on devices the cost model does not choose ---- */

/* Whether n may go to device d, which it would read `saved` bytes on without moving them:
 * d runs its op, and what n's inputs elsewhere would bring to d is no more than that. */
static bool worth(const place *p, const tg_node *n, int d, double saved) {
    if (is_host(p, d) || !supports(p, d, n)) return false;
    double moved = 0;
    for (int k = 0; k < n->nin; k++)
        if (loc_of(p, n->in[k]) != d) moved += bytes(n->in[k]);
    return moved <= saved;
}

/* Forward: a node whose inputs are all placed and whose located ones all live on one such
 * device (host memory aside) runs there, unless that moves more host memory there than it
 * reads there. */
static void expand_forward(place *p) {
    for (int i = 0; i < p->norder; i++) {
        tg_node *n = p->order[i];
        if (p->dev[n->id] != UNPLACED) continue;
        int d1 = -1;
        bool one = true;
        double there = 0;
        for (int k = 0; k < n->nin && one; k++) {
            int l = loc_of(p, n->in[k]);
            if (l == HOST) continue;
            one = l != UNPLACED && (d1 < 0 || l == d1);
            d1 = l;
            there += bytes(n->in[k]);
        }
        if (one && d1 >= 0 && worth(p, n, d1, there)) p->dev[n->id] = d1;
    }
}

/* Backward: a node whose readers are all placed on one such device runs there, unless its
 * inputs are more to move there than its outputs (a product of two matrices stays where
 * they are). */
static tg_status expand_backward(place *p) {
    tg_ctx *ctx = p->g->ctx;
    size_t nv = (size_t)p->nvars + 1, ne = 1;
    int *start = tg_mem_calloc(ctx, sizeof *start * (nv + 1));
    for (int i = 0; start && i < p->norder; i++) {
        const tg_node *n = p->order[i];
        for (int k = 0; k < n->nin; k++) start[n->in[k]->id + 1]++;
        ne += (size_t)n->nin;
    }
    for (size_t v = 0; start && v < nv; v++) start[v + 1] += start[v];
    int *fill = start ? tg_mem_alloc(ctx, sizeof *fill * nv) : NULL;
    tg_node **rd = fill ? tg_mem_alloc(ctx, sizeof *rd * ne) : NULL;
    if (!rd) {
        tg_mem_free(ctx, start, sizeof *start * (nv + 1));
        tg_mem_free(ctx, fill, sizeof *fill * nv);
        return tg_set_error(TG_ENOMEM, "placement: out of memory");
    }
    memcpy(fill, start, sizeof *fill * nv);
    for (int i = 0; i < p->norder; i++) {
        tg_node *n = p->order[i];
        for (int k = 0; k < n->nin; k++) rd[fill[n->in[k]->id]++] = n;
    }
    for (int i = p->norder - 1; i >= 0; i--) {
        tg_node *n = p->order[i];
        if (p->dev[n->id] != UNPLACED) continue;
        int d1 = -1;
        bool one = true;
        double out = 0;
        for (int o = 0; o < n->nout && one; o++) {
            out += bytes(n->out[o]);
            for (int r = start[n->out[o]->id]; r < start[n->out[o]->id + 1] && one; r++) {
                int l = p->dev[rd[r]->id];
                one = l != UNPLACED && (d1 < 0 || l == d1);
                d1 = l;
            }
        }
        if (one && d1 >= 0 && worth(p, n, d1, out)) p->dev[n->id] = d1;
    }
    tg_mem_free(ctx, start, sizeof *start * (nv + 1));
    tg_mem_free(ctx, fill, sizeof *fill * nv);
    tg_mem_free(ctx, rd, sizeof *rd * ne);
    return TG_OK;
}

/* ---- c: AUTO's cost model ---- */

/* Work of a node in elements: what it reads and writes; for a product (a linear-algebra
 * record, or a lowered BLAS form whose operands follow the accumulator) m*n*k, with the
 * contracted extent k from the operands' sizes (k^2 = |A| |B| / |C|). A transfer's cost is
 * on its edge. */
static double work(const tg_node *n) {
    const tg_op_def *op = tg_op_table[n->op];
    if (n->op == TG_OP_TRANSFER) return 0;
    int a = op->blas != TG_BLAS_NONE;
    if (op->kind == TG_KIND_LINALG && n->nout == 1 && n->nin >= a + 2) {
        double c = elems(&n->out[0]->type);
        double k2 = elems(&n->in[a]->type) * elems(&n->in[a + 1]->type) / (c > 1 ? c : 1);
        return c * sqrt(k2 > 1 ? k2 : 1);
    }
    double w = 0;
    for (int k = 0; k < n->nin; k++) w += elems(&n->in[k]->type);
    for (int k = 0; k < n->nout; k++) w += elems(&n->out[k]->type);
    return w;
}

/* Time to move `size` bytes from location `from` to device `to`. */
static double move_time(const place *p, int from, int to, double size) {
    if (from == to || (from == HOST && is_host(p, to))) return 0;
    if (is_host(p, from) && is_host(p, to)) return HOST_HOP;
    double t = 0;
    const int ends[2] = {from, to};
    for (int e = 0; e < 2; e++) {
        if (is_host(p, ends[e])) continue;
        const tg_device_cost *c = &p->devs[ends[e]]->cost;
        t += c->latency_s + (c->bytes_per_s > 0 ? size / c->bytes_per_s : 0);
    }
    return t;
}

/* When n could finish on device d: after its inputs arrive there and after d's earlier work. */
static double finish_on(const place *p, const tg_node *n, int d, double w, const double *fin,
                        const double *busy) {
    double ready = busy[d];
    for (int k = 0; k < n->nin; k++) {
        const tg_var *v = n->in[k];
        double t = (v->kind == TG_VAR_NODE ? fin[v->node->id] : 0) +
                   move_time(p, loc_of(p, v), d, bytes(v));
        if (t > ready) ready = t;
    }
    double speed = p->devs[d]->cost.compute_speed;
    return ready + w / (CPU_RATE * (speed > 0 ? speed : 1));
}

static tg_status place_auto(place *p) {
    tg_ctx *ctx = p->g->ctx;
    double *fin = tg_mem_calloc(ctx, sizeof *fin * ((size_t)p->nnodes + 1));
    double *busy = tg_mem_calloc(ctx, sizeof *busy * ((size_t)p->ndev + 1));
    tg_status st = fin && busy ? TG_OK : tg_set_error(TG_ENOMEM, "placement: out of memory");
    for (int i = 0; st == TG_OK && i < p->norder; i++) {
        tg_node *n = p->order[i];
        double w = work(n), best = 0;
        int d = p->dev[n->id];
        if (d != UNPLACED) {
            best = finish_on(p, n, d, w, fin, busy);
        } else {
            for (int c = 0; c < p->ncands; c++) {
                int e = p->cands[c];
                if (!supports(p, e, n)) continue;
                double t = finish_on(p, n, e, w, fin, busy);
                if (d < 0 || t < best) {
                    d = e;
                    best = t;
                }
            }
            for (int e = 0; d < 0 && e < p->ndev; e++) /* none of the choices runs it */
                if (supports(p, e, n)) {
                    d = e;
                    best = finish_on(p, n, e, w, fin, busy);
                }
            if (d < 0) {
                char at[512];
                where(p->g, n, at, sizeof at);
                st = tg_set_error(TG_EUNSUPPORTED, "%s: no device can run it", at);
                break;
            }
            p->dev[n->id] = d;
        }
        fin[n->id] = best;
        busy[d] = best;
    }
    tg_mem_free(ctx, fin, sizeof *fin * ((size_t)p->nnodes + 1));
    tg_mem_free(ctx, busy, sizeof *busy * ((size_t)p->ndev + 1));
    return st;
}

/* ---- d, e: transfers ---- */

/* Device d's name interned in the graph. */
static const char *dev_name(place *p, int d) {
    if (!p->name[d]) p->name[d] = tg_ir_device_intern(p->g, p->devs[d]->name);
    return p->name[d];
}

static bool memo_add(place *p, tg_var *o, int d, tg_var *t, bool fresh) {
    if (p->nent == p->capent) {
        int cap = p->capent ? 2 * p->capent : 16;
        struct entry *e = tg_mem_realloc(p->g->ctx, p->ent, sizeof *e * (size_t)p->capent,
                                         sizeof *e * (size_t)cap);
        if (!e) return false;
        p->ent = e;
        p->capent = cap;
    }
    p->ent[p->nent] =
        (struct entry){.dev = d, .t = t, .next = p->memo[o->id], .fresh = fresh, .used = fresh};
    p->memo[o->id] = p->nent++;
    return true;
}

/* The value that v is behind its transfers. */
static tg_var *original(tg_var *v) {
    while (v->kind == TG_VAR_NODE && v->node->op == TG_OP_TRANSFER) v = v->node->in[0];
    return v;
}

/* What a reader on device d (HOST: a returned value, which must be in host memory) reads in
 * place of v: v's original where it lives there, else its transfer to d, made once. NULL on
 * failure (the error set). */
static tg_var *resolve(place *p, tg_var *v, int d) {
    tg_var *o = original(v);
    int l = mem_of(p, o);
    if (o->kind == TG_VAR_CONST) return o; /* constants travel with the program */
    if (d == HOST) {
        if (is_host(p, l)) return o;
        d = 0; /* `cpu` */
    }
    if (l == d || (l == HOST && is_host(p, d))) return o;
    for (int e = p->memo[o->id]; e >= 0; e = p->ent[e].next)
        if (p->ent[e].dev == d) {
            p->ent[e].used = true;
            return p->ent[e].t;
        }
    tg_graph *g = p->g;
    const char *name = dev_name(p, d);
    tg_aval attrs[1] = {[T_COPY] = {.kind = TG_ATTR_BOOL, .i = !(is_host(p, l) && is_host(p, d))}};
    /* placed on d, at the position of what it moves */
    const char *stamp = g->device;
    int line = g->line, col = g->col;
    g->device = name;
    g->line = o->kind == TG_VAR_NODE ? o->node->line : 0;
    g->col = o->kind == TG_VAR_NODE ? o->node->col : 0;
    tg_node *t = name ? tg_ir_node_make_norm(g, TG_OP_TRANSFER, &o, 1, attrs) : NULL;
    g->device = stamp;
    g->line = line;
    g->col = col;
    if (!t || !memo_add(p, o, d, t->out[0], true)) {
        tg_set_error(g->status != TG_OK ? g->status : TG_ENOMEM, "placement: %s",
                     g->status != TG_OK ? g->error : "out of memory");
        return NULL;
    }
    p->st.transfers++;
    return t->out[0];
}

/* The graph's own transfers whose input is the original value and lives elsewhere serve as
 * the transfers of their value and device (the first of equal ones); copy is set as for a
 * new one. Returns how many transfers the graph has. */
static int adopt_transfers(place *p, bool *oom) {
    int nt = 0;
    for (int i = 0; i < p->norder; i++) {
        tg_node *n = p->order[i];
        if (n->op != TG_OP_TRANSFER) continue;
        nt++;
        tg_var *o = n->in[0];
        int l = mem_of(p, o), d = p->dev[n->id];
        if (original(o) != o || l == d || (l == HOST && is_host(p, d))) continue;
        bool dup = false;
        for (int e = p->memo[o->id]; e >= 0 && !dup; e = p->ent[e].next) dup = p->ent[e].dev == d;
        if (dup) continue;
        n->attrs[T_COPY] = (tg_aval){.kind = TG_ATTR_BOOL, .i = !(is_host(p, l) && is_host(p, d))};
        if (!memo_add(p, o, d, n->out[0], false)) *oom = true;
    }
    return nt;
}

/* Every read resolved (step d): node inputs where their readers run, outputs to host
 * memory. */
static tg_status insert_transfers(place *p) {
    tg_graph *g = p->g;
    for (int i = 0; i < p->norder; i++) {
        tg_node *n = p->order[i];
        if (n->op == TG_OP_TRANSFER) continue; /* an adopted one reads its original */
        for (int k = 0; k < n->nin; k++) {
            tg_var *r = resolve(p, n->in[k], p->dev[n->id]);
            if (!r) return tg_rw_error_status();
            n->in[k] = r;
            /* a reader that overwrites its input (in place) gets memory of its own */
            if (r->kind == TG_VAR_NODE && r->node->op == TG_OP_TRANSFER &&
                (tg_op_table[n->op]->destroys & (1u << k)))
                r->node->attrs[T_COPY] = (tg_aval){.kind = TG_ATTR_BOOL, .i = 1};
        }
    }
    for (int i = 0; i < g->outputs.n; i++) {
        tg_var *r = resolve(p, g->outputs.items[i], HOST);
        if (!r) return tg_rw_error_status();
        g->outputs.items[i] = r;
    }
    return TG_OK;
}

/* ---- the pass ---- */

static void place_free(place *p) {
    tg_ctx *ctx = p->g->ctx;
    size_t nn = (size_t)p->nnodes + 1, nv = (size_t)p->nvars + 1;
    if (p->order) tg_mem_free(ctx, p->order, sizeof *p->order * nn);
    tg_mem_free(ctx, p->dev, sizeof *p->dev * nn);
    tg_mem_free(ctx, p->derived, nn);
    tg_mem_free(ctx, p->inloc, sizeof *p->inloc * nv);
    tg_mem_free(ctx, p->memo, sizeof *p->memo * nv);
    tg_mem_free(ctx, p->cands, sizeof *p->cands * ((size_t)p->ndev + 1));
    tg_mem_free(ctx, p->name, sizeof *p->name * ((size_t)p->ndev + 1));
    tg_mem_free(ctx, p->ent, sizeof *p->ent * (size_t)p->capent);
}

static tg_status place_run(place *p, tg_placement mode, bool *compact) {
    tg_graph *g = p->g;
    tg_ctx *ctx = g->ctx;
    size_t nn = (size_t)p->nnodes + 1, nv = (size_t)p->nvars + 1;
    p->order = tg_ir_toposort(g, &p->norder);
    p->dev = tg_mem_alloc(ctx, sizeof *p->dev * nn);
    p->derived = tg_mem_calloc(ctx, nn);
    p->inloc = tg_mem_alloc(ctx, sizeof *p->inloc * nv);
    p->cands = tg_mem_alloc(ctx, sizeof *p->cands * ((size_t)p->ndev + 1));
    p->name = tg_mem_calloc(ctx, sizeof *p->name * ((size_t)p->ndev + 1));
    if (!p->order) return tg_rw_error_status();
    if (!p->dev || !p->derived || !p->inloc || !p->cands || !p->name)
        return tg_set_error(TG_ENOMEM, "placement: out of memory");
    for (int i = 0; i < p->nnodes; i++) p->dev[i] = UNPLACED;
    for (int d = 0; d < p->ndev; d++)
        if (p->devs[d]->kind == TG_DEVICE_HOST) p->cands[p->ncands++] = d;
    p->first = p->ncands > 0 ? p->cands[0] : 0;
    if (p->ncands == 0) p->cands[p->ncands++] = 0; /* `cpu` */
    tg_status st = pin(p);
    if (st != TG_OK) return st;
    bool transfers = false;
    for (int i = 0; i < p->norder && !transfers; i++) transfers = p->order[i]->op == TG_OP_TRANSFER;
    if (p->ndev == 1 && !transfers) { /* the host alone: everything on `cpu`, nothing to move */
        const char *cpu = dev_name(p, 0);
        if (!cpu) return tg_set_error(TG_ENOMEM, "placement: out of memory");
        for (int i = 0; i < g->nodes.n; i++) ((tg_node *)g->nodes.items[i])->device = cpu;
        return TG_OK;
    }
    if (mode == TG_PLACEMENT_MANUAL) {
        st = place_manual(p);
    } else {
        bool spread = false; /* a pin on a device the cost model does not choose */
        for (int i = 0; i < p->norder && !spread; i++)
            spread = p->dev[p->order[i]->id] >= 0 && !is_host(p, p->dev[p->order[i]->id]);
        for (int i = 0; i < g->inputs.n && !spread; i++)
            spread = !is_host(p, p->inloc[((tg_var *)g->inputs.items[i])->id]);
        if (spread) {
            expand_forward(p);
            st = expand_backward(p);
        }
        if (st == TG_OK) st = place_auto(p);
    }
    if (st != TG_OK) return st;
    /* every node named by its device; dead ones (not in the order) on the first */
    for (int i = 0; i < g->nodes.n; i++) {
        tg_node *n = g->nodes.items[i];
        int d = p->dev[n->id] >= 0 ? p->dev[n->id] : p->first;
        if (!(n->device = dev_name(p, d)))
            return tg_set_error(TG_ENOMEM, "placement: out of memory");
    }
    p->memo = tg_mem_alloc(ctx, sizeof *p->memo * nv);
    if (!p->memo) return tg_set_error(TG_ENOMEM, "placement: out of memory");
    for (int v = 0; v < p->nvars; v++) p->memo[v] = -1;
    bool oom = false;
    int existing = adopt_transfers(p, &oom);
    if (oom) return tg_set_error(TG_ENOMEM, "placement: out of memory");
    if ((st = insert_transfers(p)) != TG_OK) return st;
    /* the graph's transfers that no read resolved to are dead now */
    p->st.removed = existing;
    for (int e = 0; e < p->nent; e++) p->st.removed -= !p->ent[e].fresh && p->ent[e].used;
    *compact = p->st.removed > 0;
    return TG_OK;
}

static bool checked(void) {
#ifndef NDEBUG
    return true;
#else
    return false;
#endif
}

tg_status tg_place(tg_graph **gp, const tg_place_opts *opts) {
    static const tg_place_opts none = {0};
    if (!opts) opts = &none;
    if (!gp || !*gp) return tg_set_error(TG_EINVAL, "placement: graph is NULL");
    tg_graph *g = *gp;
    if (g->status != TG_OK) return tg_set_error(g->status, "%s", g->error);
    double t0 = now();
    place p = {.g = g, .nnodes = g->nodes.n, .nvars = g->vars.n, .cached_dev = -1};
    tg_status st = tg_device_list(&p.devs, &p.ndev);
    bool compact = false;
    if (st == TG_OK) st = place_run(&p, opts->placement, &compact);
    place_free(&p);
    if (st == TG_OK && compact) { /* the graph's transfers nothing reads any more */
        tg_graph *c = tg_graph_clone(g);
        if (!c) return tg_set_error(tg_rw_error_status(), "placement: %s", tg_last_error());
        tg_graph_free(g);
        *gp = g = c;
    }
    if (st == TG_OK && checked()) {
        st = tg_graph_verify(g);
        if (st == TG_OK) st = tg_place_check(g);
        if (st != TG_OK) st = tg_set_error(st, "after placement: %s", tg_last_error());
    }
    p.st.seconds = now() - t0;
    if (opts->stats) *opts->stats = p.st;
    return st;
}

/* ---- the contract ---- */

/* The device an annotation or a value's location names; HOST for NULL (host memory). */
static int check_dev(tg_device *const *devs, int ndev, const char *name) {
    if (!name) return HOST;
    for (int i = 0; i < ndev; i++)
        if (strcmp(devs[i]->name, name) == 0) return i;
    return UNPLACED;
}

/* Where v's memory is: its node's device, else host memory (inputs, constants). */
static int check_loc(tg_device *const *devs, int ndev, const tg_var *v) {
    return v->kind == TG_VAR_NODE ? check_dev(devs, ndev, v->node->device) : HOST;
}

tg_status tg_place_check(const tg_graph *g) {
    tg_device *const *devs;
    int ndev, norder;
    tg_status st = tg_device_list(&devs, &ndev);
    if (st != TG_OK) return st;
    tg_node **order = tg_ir_toposort(g, &norder);
    if (!order) return tg_rw_error_status();
    place p = {.devs = devs, .ndev = ndev};
    char at[512];
    for (int i = 0; i < norder && st == TG_OK; i++) {
        const tg_node *n = order[i];
        where(g, n, at, sizeof at);
        int d = check_dev(devs, ndev, n->device);
        if (d < 0) {
            st = tg_set_error(TG_EINTERNAL, "placement: %s is on %s%s%s", at,
                              n->device ? "no device \"" : "no device", n->device ? n->device : "",
                              n->device ? "\"" : "");
            break;
        }
        if (!supports(&p, d, n)) {
            st = tg_set_error(TG_EINTERNAL, "placement: %s is on %s, which cannot run it", at,
                              devs[d]->name);
            break;
        }
        if (n->op == TG_OP_TRANSFER) {
            int l = check_loc(devs, ndev, n->in[0]);
            bool copy = !(is_host(&p, l) && is_host(&p, d));
            if (l == d || (l == HOST && is_host(&p, d)) || (copy && !n->attrs[T_COPY].i))
                st = tg_set_error(TG_EINTERNAL, "placement: %s moves a value of %s to %s (copy=%s)",
                                  at, l >= 0 ? devs[l]->name : "host memory", n->device,
                                  n->attrs[T_COPY].i ? "true" : "false");
            continue;
        }
        for (int k = 0; k < n->nin && st == TG_OK; k++) {
            int l = check_loc(devs, ndev, n->in[k]);
            if (n->in[k]->kind == TG_VAR_CONST) continue; /* read where the program runs */
            if (l != d && !(l == HOST && is_host(&p, d)))
                st = tg_set_error(TG_EINTERNAL, "placement: %s on %s reads input %d from %s", at,
                                  devs[d]->name, k,
                                  l >= 0      ? devs[l]->name
                                  : l == HOST ? "host memory"
                                              : "nowhere");
        }
    }
    for (int i = 0; i < g->outputs.n && st == TG_OK; i++) {
        int l = check_loc(devs, ndev, g->outputs.items[i]);
        if (!is_host(&p, l))
            st = tg_set_error(TG_EINTERNAL, "placement: output %d lives on %s", i,
                              l >= 0 ? devs[l]->name : "no device");
    }
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return st;
}
