/* sched.c - the multi-device scheduler: runs a placed graph (src/rewrite/place.c) as steps
 * on the queues of its devices, with events between devices (docs/devices.md "Running on
 * several devices").
 *
 * Steps. A part is the nodes of one device and one stage, compiled as an ordinary function
 * (tg_driver_compile_placed, the backend of the function's mode, the device's pool); a copy
 * is one transfer that moves data. A node's stage is the largest stage among the values
 * it reads that live on its own device, and one more than that of values living on
 * another (ggml's scheduler cuts "splits" the same way). Along any edge the stage never
 * decreases, and it increases into a copy and across devices; two steps of one stage are
 * joined only by a copy feeding a part, so the steps form a DAG. A transfer with
 * copy=false (between host devices: one address space, read-only use) is no step at all:
 * its readers read the source value, after waiting for the step that made it.
 *
 * A call. The caller's thread submits every step, in a topological order of the steps, to
 * its device's queue: first a wait on the event of each step of another device it reads
 * from, then the step, then a record of its own event. Then it waits for every event.
 * Independent devices so run at the same time; one device runs its steps in order.
 *
 * Failure. A step that fails keeps the first error (with its message: tg_last_error is per
 * thread) and sets `cancel`; every later step returns at once, but its event is still
 * recorded, so no queue and no caller waits forever. The call frees what the steps made
 * and returns that error with no output; compile.c swaps state only after a success, so
 * state stays as it was.
 *
 * Values. Slot v of a call (v a variable id of the placed graph) holds the tensor of value
 * v when another step or the caller reads it: the caller's inputs and the graph's
 * constants are borrowed, what steps make is the call's until returned. Each call has its
 * own slots and events, so calls from several threads run at once; a part's function is
 * called by its device's queue thread only, one call at a time.
 *
 * Memory of a sim device (docs/devices.md): a part on it reads its inputs in its memory
 * (brought by copies), opened around the kernels (tg_device_open), and writes its outputs
 * there; in checked builds (tg_sched_checked) every value a step reads is first checked to
 * live where the step runs, so a missing transfer is an error naming the value and both
 * devices rather than a read of memory the device cannot see.
 */
#include "driver.h"

#include "../backend/interp/interp.h"
#include "../ops/ops.h"
#include "../parallel/world.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

typedef struct step {
    bool copy;            /* a transfer that moves data; else a part */
    tg_device *dev;       /* the queue it runs on: a part's device; for a copy, the device that
                             is not the host (the destination's when both or neither are) */
    tg_device *src, *dst; /* copy: where the value lives and where it goes (src NULL: the
                             caller's or a constant, host memory) */
    int stage;
    tg_graph *g; /* part: its graph (owned) */
    tg_fn *fn;   /* part: compiled */
    int nin, nout;
    int *in, *out; /* slots read and written */
    int *dep;      /* steps of other queues it reads from */
    int ndep;
    const tg_node *first; /* a node of it, for messages */
} step;

typedef struct dev_prof {
    tg_device *dev;
    double busy;       /* seconds its queue spent running steps */
    long copies;       /* copies run on its queue */
    double copy_bytes; /* their bytes */
    double copy_s;     /* their time */
} dev_prof;

struct tg_sched {
    tg_graph *g; /* the placed graph (borrowed from the function) */
    tg_ctx *ctx;
    step *steps; /* in submission (topological) order */
    int nsteps, stepcap;
    int nslots;     /* g->vars.n */
    int *home;      /* slot -> the slot it reads (copy=false transfers), itself else */
    int *maker;     /* slot -> step that writes it; -1: an input or a constant */
    dev_prof *prof; /* one per device used, for the profile */
    int nprof;
    pthread_mutex_t mu; /* guards prof and wall */
    double wall;        /* seconds in calls since the last reset */
    long calls;
    bool profile;
    bool checked; /* tg_sched_checked(), read once when built: every read is checked */
};

/* One call in flight. */
typedef struct call {
    tg_sched *s;
    tg_tensor **slot;
    bool *owned; /* slot[v] is the call's to free */
    tg_event **ev;
    double *busy; /* per step: its time */
    atomic_bool cancel;
    pthread_mutex_t mu;
    tg_status st; /* the first error */
    char msg[TG_ERRMSG_MAX];
} call;

typedef struct task {
    call *c;
    int i;
} task;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

bool tg_sched_checked(void) {
#ifndef NDEBUG
    return true;
#else
    double lat, bw;
    bool protect = false;
    return tg_device_sim_settings(&lat, &bw, &protect) == TG_OK && protect;
#endif
}

/* ---- building ---- */

static const char *value_name(const tg_var *v, char *buf, size_t cap) {
    if (v->name) {
        snprintf(buf, cap, "%s", v->name);
        return v->name;
    }
    snprintf(buf, cap, "%%%d", v->id);
    return buf;
}

static tg_status place_error(const tg_graph *g, const tg_node *n, const char *what) {
    if (n->line > 0)
        return tg_set_error(TG_EINVAL, "%s:%d:%d: %s: %s", g->file ? g->file : "<input>", n->line,
                            n->col, tg_op_table[n->op]->name, what);
    return tg_set_error(TG_EINVAL, "node %d (%s): %s", n->id, tg_op_table[n->op]->name, what);
}

/* A transfer that moves nothing: between two host devices, copy=false. */
static bool is_alias(const tg_node *n, const tg_device *src, const tg_device *dst) {
    return n->op == TG_OP_TRANSFER && !n->attrs[0].i /* copy */ && tg_device_is_host(src) &&
           tg_device_is_host(dst);
}

/* Appends step st; its index, or -1 when out of memory. */
static int step_add(tg_sched *s, step st) {
    if (s->nsteps == s->stepcap) {
        int nc = s->stepcap ? s->stepcap * 2 : 8;
        step *ns = tg_mem_realloc(s->ctx, s->steps, sizeof *ns * (size_t)s->stepcap,
                                  sizeof *ns * (size_t)nc);
        if (!ns) return -1;
        s->steps = ns;
        s->stepcap = nc;
    }
    s->steps[s->nsteps] = st;
    return s->nsteps++;
}

/* The part of device d and stage st, made when missing. */
static int part_of(tg_sched *s, tg_device *d, int stage) {
    for (int i = 0; i < s->nsteps; i++)
        if (!s->steps[i].copy && s->steps[i].dev == d && s->steps[i].stage == stage) return i;
    return step_add(s, (step){.dev = d, .stage = stage});
}

static int copy_step(tg_sched *s) { return step_add(s, (step){.copy = true}); }

/* Adds slot v to list (*list, *n), once. */
static bool add_slot(tg_ctx *ctx, int **list, int *n, int v) {
    for (int k = 0; k < *n; k++)
        if ((*list)[k] == v) return true;
    int *nl = tg_mem_realloc(ctx, *list, sizeof *nl * (size_t)*n, sizeof *nl * (size_t)(*n + 1));
    if (!nl) return false;
    nl[(*n)++] = v;
    *list = nl;
    return true;
}

/* Builds part i's graph from its nodes (order: the placed graph's topological order) and
 * its slots: inputs are the values it reads that other steps (or the caller) make, outputs
 * those it makes that others read or the caller gets. */
static tg_status part_build(tg_sched *s, int i, tg_node **order, int norder, const int *stepof,
                            const bool *external) {
    step *p = &s->steps[i];
    tg_graph *g = s->g;
    tg_graph *sub = tg_graph_new(s->ctx, g->name);
    if (!sub) return TG_ENOMEM;
    p->g = sub;
    sub->file = g->file;
    int cap = 1; /* the largest arity */
    for (int k = 0; k < norder; k++)
        if (order[k]->nin > cap) cap = order[k]->nin;
    tg_var **map = tg_mem_calloc(s->ctx, sizeof *map * (size_t)(s->nslots + 1));
    tg_var **ins = tg_mem_alloc(s->ctx, sizeof *ins * (size_t)cap);
    tg_status st = map && ins ? TG_OK : TG_ENOMEM;
    for (int k = 0; st == TG_OK && k < norder; k++) {
        tg_node *n = order[k];
        if (stepof[n->id] != i) continue;
        if (!p->first) p->first = n;
        for (int j = 0; st == TG_OK && j < n->nin; j++) {
            tg_var *u = n->in[j];
            int h = s->home[u->id];
            tg_var *hv = g->vars.items[h];
            if (!map[h]) {
                if (hv->kind == TG_VAR_CONST) {
                    tg_tensor *val = tg_tensor_dup(hv->value);
                    map[h] = val ? tg_ir_const(sub, val, hv->lit) : NULL;
                    if (map[h]) map[h]->type = hv->type;
                } else {
                    char nm[300];
                    tg_type t = hv->type;
                    value_name(hv, nm, sizeof nm);
                    for (int q = 0; q < sub->inputs.n; q++) /* one name per input */
                        if (strcmp(((tg_var *)sub->inputs.items[q])->name, nm) == 0) {
                            snprintf(nm, sizeof nm, "%.200s.%d", hv->name ? hv->name : "", hv->id);
                            break;
                        }
                    map[h] = tg_input(sub, nm, (tg_dtype)t.dtype, t.ndim, t.shape);
                    if (map[h] && !add_slot(s->ctx, &p->in, &p->nin, h)) st = TG_ENOMEM;
                }
                if (!map[h] && st == TG_OK) st = sub->status ? sub->status : TG_ENOMEM;
            }
            ins[j] = map[h];
        }
        if (st != TG_OK) break;
        sub->line = n->line;
        sub->col = n->col;
        sub->device = tg_ir_device_intern(sub, n->device);
        tg_node *m = tg_ir_node_make_norm(sub, n->op, ins, n->nin, n->attrs);
        if (!m || m->nout != n->nout) {
            st = sub->status ? sub->status : tg_set_error(TG_EINTERNAL, "part of '%s'", g->name);
            break;
        }
        for (int j = 0; j < n->nout; j++) {
            tg_var *v = n->out[j];
            map[v->id] = m->out[j];
            if (v->name) m->out[j]->name = tg_arena_strdup(&sub->arena, v->name);
            if (external[v->id] && !add_slot(s->ctx, &p->out, &p->nout, v->id)) st = TG_ENOMEM;
        }
    }
    if (st == TG_OK) {
        tg_var **outs = tg_mem_alloc(s->ctx, sizeof *outs * (size_t)(p->nout + 1));
        if (!outs) st = TG_ENOMEM;
        for (int k = 0; st == TG_OK && k < p->nout; k++) outs[k] = map[p->out[k]];
        if (st == TG_OK) st = tg_graph_set_outputs(sub, outs, p->nout);
        if (outs) tg_mem_free(s->ctx, outs, sizeof *outs * (size_t)(p->nout + 1));
    }
    if (map) tg_mem_free(s->ctx, map, sizeof *map * (size_t)(s->nslots + 1));
    if (ins) tg_mem_free(s->ctx, ins, sizeof *ins * (size_t)cap);
    return st;
}

/* Orders the steps topologically (Kahn, by stage among the ready ones) and fills dep. */
static tg_status steps_order(tg_sched *s) {
    int n = s->nsteps;
    tg_ctx *ctx = s->ctx;
    int *indeg = tg_mem_calloc(ctx, sizeof *indeg * (size_t)(n + 1));
    int *perm = tg_mem_alloc(ctx, sizeof *perm * (size_t)(n + 1));
    int *rank = tg_mem_alloc(ctx, sizeof *rank * (size_t)(n + 1));
    bool *done = tg_mem_calloc(ctx, sizeof *done * (size_t)(n + 1));
    tg_status st = indeg && perm && rank && done ? TG_OK : TG_ENOMEM;
    /* dependencies: a step reads slots made by other steps */
    for (int i = 0; st == TG_OK && i < n; i++) {
        step *p = &s->steps[i];
        for (int k = 0; k < p->nin; k++) {
            int m = s->maker[p->in[k]];
            if (m >= 0 && m != i && !add_slot(ctx, &p->dep, &p->ndep, m)) st = TG_ENOMEM;
        }
        indeg[i] = p->ndep;
    }
    for (int c = 0; st == TG_OK && c < n; c++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!done[i] && indeg[i] == 0 && (best < 0 || s->steps[i].stage < s->steps[best].stage))
                best = i;
        if (best < 0) {
            st =
                tg_set_error(TG_EINTERNAL, "placed graph '%s': the steps form a cycle", s->g->name);
            break;
        }
        done[best] = true;
        perm[c] = best;
        rank[best] = c;
        for (int i = 0; i < n; i++)
            for (int k = 0; !done[i] && k < s->steps[i].ndep; k++)
                if (s->steps[i].dep[k] == best) indeg[i]--;
    }
    if (st == TG_OK) { /* renumber: steps, makers and deps in the new order */
        step *ns = tg_mem_alloc(ctx, sizeof *ns * (size_t)(n + 1));
        if (!ns) st = TG_ENOMEM;
        for (int c = 0; st == TG_OK && c < n; c++) ns[c] = s->steps[perm[c]];
        for (int c = 0; st == TG_OK && c < n; c++)
            for (int k = 0; k < ns[c].ndep; k++) ns[c].dep[k] = rank[ns[c].dep[k]];
        for (int v = 0; st == TG_OK && v < s->nslots; v++)
            if (s->maker[v] >= 0) s->maker[v] = rank[s->maker[v]];
        if (st == TG_OK) {
            tg_mem_free(ctx, s->steps, sizeof *s->steps * (size_t)s->stepcap);
            s->steps = ns;
            s->stepcap = n + 1;
        }
    }
    if (indeg) tg_mem_free(ctx, indeg, sizeof *indeg * (size_t)(n + 1));
    if (perm) tg_mem_free(ctx, perm, sizeof *perm * (size_t)(n + 1));
    if (rank) tg_mem_free(ctx, rank, sizeof *rank * (size_t)(n + 1));
    if (done) tg_mem_free(ctx, done, sizeof *done * (size_t)(n + 1));
    return st;
}

/* In an MPI job of several processes, the steps that may run a pmap spanning them (a part
 * with a node that has effects, or a call) each wait for the previous such step: pmap
 * calls spanning processes must be made in the same order in every process (docs/mpi.md),
 * and steps on different queues would otherwise run them in whatever order the timing
 * gives. The steps are in submission order, so the edges added keep them acyclic. */
static tg_status steps_chain_spanning(tg_sched *s) {
    if (tg_world_size() <= 1) return TG_OK;
    int prev = -1;
    for (int i = 0; i < s->nsteps; i++) {
        step *p = &s->steps[i];
        bool spans = false;
        for (int k = 0; !p->copy && k < p->g->nodes.n && !spans; k++) {
            const tg_node *n = p->g->nodes.items[k];
            spans = n && (n->op == TG_OP_CALL || tg_op_table[n->op]->effects);
        }
        if (!spans) continue;
        bool has = false;
        for (int k = 0; k < p->ndep && !has; k++) has = p->dep[k] == prev;
        if (prev >= 0 && !has && s->steps[prev].dev != p->dev &&
            !add_slot(s->ctx, &p->dep, &p->ndep, prev))
            return tg_set_error(TG_ENOMEM, "out of memory: the steps of '%s'", s->g->name);
        prev = i;
    }
    return TG_OK;
}

/* Where value h lives, for messages. */
static const char *where(const tg_device *d) { return d ? d->name : "the host"; }

tg_status tg_sched_new(tg_graph *g, const tg_compile_opts *opts, tg_sched **out) {
    *out = NULL;
    tg_ctx *ctx = g->ctx;
    tg_sched *s = tg_mem_calloc(ctx, sizeof *s);
    if (!s) return TG_ENOMEM;
    s->g = g;
    s->ctx = ctx;
    s->nslots = g->vars.n;
    s->profile = opts->profile;
    s->checked = tg_sched_checked();
    pthread_mutex_init(&s->mu, NULL);
    size_t nv = (size_t)g->vars.n + 1, nn = (size_t)g->nodes.n + 1;
    s->home = tg_mem_alloc(ctx, sizeof *s->home * nv);
    s->maker = tg_mem_alloc(ctx, sizeof *s->maker * nv);
    int *vstage = tg_mem_calloc(ctx, sizeof *vstage * nv);
    tg_device **vdev = tg_mem_calloc(ctx, sizeof *vdev * nv);
    int *stepof = tg_mem_alloc(ctx, sizeof *stepof * nn);
    bool *external = tg_mem_calloc(ctx, sizeof *external * nv);
    int norder = 0;
    tg_node **order = tg_ir_toposort(g, &norder);
    tg_status st =
        s->home && s->maker && vstage && vdev && stepof && external && order ? TG_OK : TG_ENOMEM;
    for (size_t v = 0; st == TG_OK && v < nv; v++) {
        s->home[v] = (int)v;
        s->maker[v] = -1;
    }
    /* steps: a part per (device, stage), a copy per transfer that moves data */
    for (int k = 0; st == TG_OK && k < norder; k++) {
        tg_node *n = order[k];
        char nm[32];
        if (!n->device) {
            st = place_error(g, n, "has no device: the graph is not placed");
            break;
        }
        tg_device *dev = tg_device_find(n->device);
        if (!dev) {
            st = place_error(g, n, tg_last_error());
            break;
        }
        stepof[n->id] = -1;
        if (n->op == TG_OP_TRANSFER) {
            int h = s->home[n->in[0]->id], o = n->out[0]->id;
            tg_device *src = vdev[h];
            if (is_alias(n, src, dev)) { /* its readers read the source */
                s->home[o] = h;
                continue;
            }
            int i = copy_step(s);
            if (i < 0) {
                st = TG_ENOMEM;
                break;
            }
            step *c = &s->steps[i];
            c->src = src;
            c->dst = dev;
            c->dev = !tg_device_is_host(dev) ? dev : src && !tg_device_is_host(src) ? src : dev;
            c->stage = s->maker[h] >= 0 ? vstage[h] + 1 : 0;
            c->first = n;
            if (!add_slot(ctx, &c->in, &c->nin, h) || !add_slot(ctx, &c->out, &c->nout, o)) {
                st = TG_ENOMEM;
                break;
            }
            s->maker[o] = i;
            vdev[o] = dev;
            vstage[o] = c->stage;
            stepof[n->id] = i;
            continue;
        }
        int stage = 0;
        for (int j = 0; j < n->nin; j++) {
            int h = s->home[n->in[j]->id];
            tg_var *hv = g->vars.items[h];
            /* memory the device cannot read: only a transfer brings it (place.c); constants
               are part of the program, copied into each part */
            bool readable =
                hv->kind == TG_VAR_CONST ||
                (s->maker[h] >= 0
                     ? (tg_device_is_host(vdev[h]) && tg_device_is_host(dev)) || vdev[h] == dev
                     : tg_device_is_host(dev));
            if (!readable) {
                char msg[300];
                snprintf(msg, sizeof msg, "missing transfer: '%s' lives on %s and is read on %s",
                         value_name(hv, nm, sizeof nm),
                         s->maker[h] >= 0 ? where(vdev[h]) : "the host", dev->name);
                st = place_error(g, n, msg);
                break;
            }
            if (s->maker[h] >= 0) {
                int sh = vstage[h] + (vdev[h] == dev ? 0 : 1);
                if (sh > stage) stage = sh;
            }
        }
        if (st != TG_OK) break;
        int i = part_of(s, dev, stage);
        if (i < 0) {
            st = TG_ENOMEM;
            break;
        }
        stepof[n->id] = i;
        for (int j = 0; j < n->nout; j++) {
            s->maker[n->out[j]->id] = i;
            vdev[n->out[j]->id] = dev;
            vstage[n->out[j]->id] = stage;
        }
    }
    /* the values other steps or the caller read */
    for (int k = 0; st == TG_OK && k < norder; k++) {
        tg_node *n = order[k];
        if (stepof[n->id] < 0) continue; /* copy=false: its readers count */
        for (int j = 0; j < n->nin; j++) {
            int h = s->home[n->in[j]->id];
            if (s->maker[h] >= 0 && s->maker[h] != stepof[n->id]) external[h] = true;
        }
    }
    for (int i = 0; st == TG_OK && i < g->outputs.n; i++) {
        const tg_var *o = g->outputs.items[i];
        int h = s->home[o->id];
        if (s->maker[h] >= 0 && !tg_device_is_host(vdev[h])) {
            char nm[32];
            st = tg_set_error(TG_EINVAL,
                              "placed graph '%s': output %d ('%s') lives on %s: "
                              "missing transfer to the host",
                              g->name, i, value_name(g->vars.items[h], nm, sizeof nm),
                              where(vdev[h]));
        }
        external[h] = true;
    }
    for (int i = 0; st == TG_OK && i < s->nsteps; i++)
        if (!s->steps[i].copy) st = part_build(s, i, order, norder, stepof, external);
    if (st == TG_OK) st = steps_order(s);
    if (st == TG_OK) st = steps_chain_spanning(s);
    /* each part compiled for its device: the backend of the mode, the device's pool */
    for (int i = 0; st == TG_OK && i < s->nsteps; i++) {
        step *p = &s->steps[i];
        bool seen = false;
        for (int k = 0; k < s->nprof && !seen; k++) seen = s->prof[k].dev == p->dev;
        if (!seen) {
            dev_prof *np = tg_mem_realloc(ctx, s->prof, sizeof *np * (size_t)s->nprof,
                                          sizeof *np * (size_t)(s->nprof + 1));
            if (!np) {
                st = TG_ENOMEM;
                break;
            }
            s->prof = np;
            s->prof[s->nprof++] = (dev_prof){.dev = p->dev};
        }
        if (p->copy) continue;
        tg_compile_opts o = *opts;
        o.pool = p->dev->pool;
        o.nthreads = 0;
        st = tg_driver_compile_placed(p->g, &o, &p->fn);
        if (st != TG_OK)
            st = tg_set_error(st, "compiling the part of '%s' on %s: %s", g->name, p->dev->name,
                              tg_last_error());
    }
    if (order) tg_mem_free(ctx, order, sizeof *order * nn);
    if (vstage) tg_mem_free(ctx, vstage, sizeof *vstage * nv);
    if (vdev) tg_mem_free(ctx, vdev, sizeof *vdev * nv);
    if (stepof) tg_mem_free(ctx, stepof, sizeof *stepof * nn);
    if (external) tg_mem_free(ctx, external, sizeof *external * nv);
    if (st != TG_OK) {
        tg_sched_free(s);
        return st;
    }
    *out = s;
    return TG_OK;
}

void tg_sched_free(tg_sched *s) {
    if (!s) return;
    tg_ctx *ctx = s->ctx;
    for (int i = 0; i < s->nsteps; i++) {
        step *p = &s->steps[i];
        tg_fn_free(p->fn);
        tg_graph_free(p->g);
        if (p->in) tg_mem_free(ctx, p->in, sizeof *p->in * (size_t)p->nin);
        if (p->out) tg_mem_free(ctx, p->out, sizeof *p->out * (size_t)p->nout);
        if (p->dep) tg_mem_free(ctx, p->dep, sizeof *p->dep * (size_t)p->ndep);
    }
    size_t nv = (size_t)s->nslots + 1;
    if (s->steps) tg_mem_free(ctx, s->steps, sizeof *s->steps * (size_t)s->stepcap);
    if (s->home) tg_mem_free(ctx, s->home, sizeof *s->home * nv);
    if (s->maker) tg_mem_free(ctx, s->maker, sizeof *s->maker * nv);
    if (s->prof) tg_mem_free(ctx, s->prof, sizeof *s->prof * (size_t)s->nprof);
    pthread_mutex_destroy(&s->mu);
    tg_mem_free(ctx, s, sizeof *s);
}

/* ---- running ---- */

static void call_fail(call *c, tg_status st, const char *msg) {
    pthread_mutex_lock(&c->mu);
    if (c->st == TG_OK) {
        c->st = st;
        snprintf(c->msg, sizeof c->msg, "%s", msg);
    }
    pthread_mutex_unlock(&c->mu);
    atomic_store(&c->cancel, true);
}

/* The tensor of slot v: the call's, else the graph's constant. */
static tg_tensor *value(const call *c, int v) {
    if (c->slot[v]) return c->slot[v];
    const tg_var *var = c->s->g->vars.items[v];
    return var->kind == TG_VAR_CONST ? var->value : NULL;
}

/* The device whose memory holds t: NULL for the host's (whatever host device made it). */
static tg_device *home_of(const tg_tensor *t) {
    tg_device *d = t->buf->device;
    return d && t->buf->release ? d : NULL;
}

/* A read of slot v on dev, checked where tg_sched_checked says. */
static tg_status check_read(const call *c, const step *p, int v, const tg_tensor *t) {
    tg_device *h = home_of(t);
    bool ok = !h ? tg_device_is_host(p->dev) || p->copy : h == p->dev || p->copy;
    if (ok) return TG_OK;
    char nm[32];
    return tg_set_error(TG_ECHECK, "missing transfer: '%s' lives on %s and is read on %s",
                        value_name(c->s->g->vars.items[v], nm, sizeof nm), h->name, p->dev->name);
}

static tg_status run_part(call *c, const step *p, tg_tensor **ins, tg_tensor **outs) {
    bool checked = c->s->checked;
    for (int k = 0; k < p->nin; k++) {
        ins[k] = value(c, p->in[k]);
        if (!ins[k])
            return tg_set_error(TG_EINTERNAL, "part on %s: an input is missing", p->dev->name);
        if (checked && check_read(c, p, p->in[k], ins[k]) != TG_OK) return TG_ECHECK;
    }
    bool sim = !tg_device_is_host(p->dev);
    for (int k = 0; sim && k < p->nin; k++)
        if (home_of(ins[k]) == p->dev)
            tg_device_open(p->dev, ins[k]->buf->data, ins[k]->buf->nbytes);
    tg_status st = tg_fn_call(p->fn, ins, p->nin, outs, p->nout);
    for (int k = 0; st == TG_OK && sim && k < p->nout; k++) { /* into the device's memory */
        tg_tensor *d = tg_device_tensor_new(p->dev, outs[k]->dtype, outs[k]->ndim, outs[k]->shape);
        if (!d) {
            st = TG_ENOMEM;
            for (int j = k; j < p->nout; j++) tg_tensor_free(outs[j]);
            for (int j = 0; j < k; j++) tg_tensor_free(outs[j]);
            break;
        }
        tg_device_open(p->dev, d->buf->data, d->buf->nbytes);
        tg_tensor_copy_into(d, outs[k]);
        tg_device_close(p->dev, d->buf->data, d->buf->nbytes);
        tg_tensor_free(outs[k]);
        outs[k] = d;
    }
    for (int k = 0; sim && k < p->nin; k++)
        if (home_of(ins[k]) == p->dev)
            tg_device_close(p->dev, ins[k]->buf->data, ins[k]->buf->nbytes);
    if (st != TG_OK) return st;
    for (int k = 0; k < p->nout; k++) {
        c->slot[p->out[k]] = outs[k];
        c->owned[p->out[k]] = true;
    }
    return TG_OK;
}

static tg_status run_copy(call *c, const step *p, dev_prof *pr) {
    tg_tensor *x = value(c, p->in[0]);
    if (!x) return tg_set_error(TG_EINTERNAL, "copy to %s: the value is missing", p->dst->name);
    tg_tensor *tmp = NULL;
    if (!tg_tensor_is_contiguous(x)) {
        if (!tg_device_is_host(home_of(x)))
            return tg_set_error(TG_EINTERNAL, "copy from %s: a strided value", home_of(x)->name);
        x = tmp = tg_tensor_dup(x);
        if (!x) return TG_ENOMEM;
    }
    /* host memory carries no device (a buffer may outlive the registry: the caller's) */
    tg_tensor *y = tg_device_is_host(p->dst)
                       ? tg_tensor_empty(NULL, x->dtype, x->ndim, x->shape)
                       : tg_device_tensor_new(p->dst, x->dtype, x->ndim, x->shape);
    if (!y) {
        tg_tensor_free(tmp);
        return TG_ENOMEM;
    }
    size_t es = tg_dtype_infos[x->dtype].size, n = y->buf->nbytes;
    const char *from = (const char *)x->buf->data + x->offset * (int64_t)es;
    tg_device *src = home_of(x), *dst = p->dst;
    double t0 = now();
    if (!tg_device_is_host(dst) && !tg_device_is_host(src))
        dst->iface->copy_peer(dst, y->buf->data, src, from, n);
    else if (!tg_device_is_host(dst))
        dst->iface->copy_in(dst, y->buf->data, from, n);
    else if (!tg_device_is_host(src))
        src->iface->copy_out(src, y->buf->data, from, n);
    else
        memcpy(y->buf->data, from, n);
    if (pr) {
        pthread_mutex_lock(&c->s->mu);
        pr->copies++;
        pr->copy_bytes += (double)n;
        pr->copy_s += now() - t0;
        pthread_mutex_unlock(&c->s->mu);
    }
    tg_tensor_free(tmp);
    c->slot[p->out[0]] = y;
    c->owned[p->out[0]] = true;
    return TG_OK;
}

static dev_prof *prof_of(tg_sched *s, const tg_device *d) {
    for (int k = 0; k < s->nprof; k++)
        if (s->prof[k].dev == d) return &s->prof[k];
    return NULL;
}

/* A step, on its device's queue thread. */
static void step_task(void *arg, tg_device *dev) {
    (void)dev;
    task *t = arg;
    call *c = t->c;
    const step *p = &c->s->steps[t->i];
    if (atomic_load(&c->cancel)) return;
    double t0 = now();
    tg_status st = TG_OK;
    if (p->copy) {
        st = run_copy(c, p, prof_of(c->s, p->dev));
    } else { /* the part's argument arrays */
        size_t n = (size_t)p->nin + (size_t)p->nout + 1;
        tg_tensor **args = tg_mem_alloc(c->s->ctx, sizeof *args * n);
        st = args ? run_part(c, p, args, args + p->nin) : TG_ENOMEM;
        if (args) tg_mem_free(c->s->ctx, args, sizeof *args * n);
    }
    c->busy[t->i] = now() - t0;
    if (st != TG_OK) call_fail(c, st, tg_last_error());
}

/* The caller's outputs from the slots: into the given tensors, else handed over (a value
 * the call made, the first time) or copied (the caller's inputs, constants, a value
 * returned twice). */
static tg_status collect(call *c, tg_tensor **out, int nout, bool into) {
    tg_sched *s = c->s;
    tg_graph *g = s->g;
    bool *made = tg_mem_calloc(s->ctx, (size_t)nout + 1); /* out[i] is a tensor made here */
    tg_status st = made ? TG_OK : TG_ENOMEM;
    for (int i = 0; st == TG_OK && i < nout; i++) {
        const tg_var *o = g->outputs.items[i];
        int h = s->home[o->id];
        tg_tensor *t = value(c, h);
        if (into && out[i]) {
            bool same = t->dtype == out[i]->dtype && t->ndim == out[i]->ndim;
            for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == out[i]->shape[d];
            if (!same) {
                char a[TG_TYPE_STR_MAX], b[TG_TYPE_STR_MAX];
                tg_type got, want;
                tg_interp_runtime_type(&o->type, out[i], &got);
                tg_interp_runtime_type(&o->type, t, &want);
                st = tg_set_error(t->dtype != out[i]->dtype ? TG_ETYPE : TG_ESHAPE,
                                  "output %d%s%s%s: the tensor given is %s, the result is %s", i,
                                  o->name ? " ('" : "", o->name ? o->name : "", o->name ? "')" : "",
                                  tg_type_str(&got, a, sizeof a), tg_type_str(&want, b, sizeof b));
                break;
            }
            tg_tensor_copy_into(out[i], t);
        } else if (c->owned[h]) {
            made[i] = true;
            out[i] = t;
            c->owned[h] = false;
            c->slot[h] = NULL; /* a second return of it copies from out[i] below */
            for (int j = i + 1; j < nout; j++)
                if (s->home[((const tg_var *)g->outputs.items[j])->id] == h) c->slot[h] = t;
        } else {
            out[i] = tg_tensor_dup(t);
            made[i] = out[i] != NULL;
            if (!out[i]) st = TG_ENOMEM;
        }
    }
    /* a failed call makes no output (the caller's own tensors stay the caller's) */
    for (int i = 0; st != TG_OK && made && i < nout; i++)
        if (made[i]) {
            tg_tensor_free(out[i]);
            out[i] = NULL;
        }
    if (made) tg_mem_free(s->ctx, made, (size_t)nout + 1);
    return st;
}

tg_status tg_sched_call(tg_sched *s, tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                        bool into) {
    tg_ctx *ctx = s->ctx;
    size_t nv = (size_t)s->nslots + 1, ns = (size_t)s->nsteps + 1;
    call c = {.s = s};
    pthread_mutex_init(&c.mu, NULL);
    atomic_init(&c.cancel, false);
    c.slot = tg_mem_calloc(ctx, sizeof *c.slot * nv);
    c.owned = tg_mem_calloc(ctx, sizeof *c.owned * nv);
    c.ev = tg_mem_calloc(ctx, sizeof *c.ev * ns);
    c.busy = tg_mem_calloc(ctx, sizeof *c.busy * ns);
    task *tasks = tg_mem_alloc(ctx, sizeof *tasks * ns);
    tg_status st = c.slot && c.owned && c.ev && c.busy && tasks ? TG_OK : TG_ENOMEM;
    if (!into)
        for (int i = 0; i < nout; i++) out[i] = NULL;
    for (int i = 0; st == TG_OK && i < nin; i++)
        c.slot[((const tg_var *)s->g->inputs.items[i])->id] = in[i];
    for (int i = 0; st == TG_OK && i < s->nsteps; i++)
        if (!(c.ev[i] = tg_event_new())) st = TG_ENOMEM;
    double t0 = now();
    int submitted = 0;
    for (int i = 0; st == TG_OK && i < s->nsteps; i++) {
        const step *p = &s->steps[i];
        for (int k = 0; st == TG_OK && k < p->ndep; k++)
            if (s->steps[p->dep[k]].dev != p->dev) st = tg_device_wait(p->dev, c.ev[p->dep[k]]);
        tasks[i] = (task){&c, i};
        if (st == TG_OK) st = tg_device_submit(p->dev, step_task, &tasks[i]);
        if (st == TG_OK) {
            submitted = i + 1;
            st = tg_device_record(p->dev, c.ev[i]);
        }
    }
    if (st != TG_OK) { /* a wait or record that failed: the queues may still run steps */
        call_fail(&c, st, tg_last_error());
        for (int k = 0; k < s->nprof; k++) tg_device_synchronize(s->prof[k].dev);
    }
    for (int i = 0; i < submitted; i++) tg_event_synchronize(c.ev[i]);
    double wall = now() - t0;
    if (c.st == TG_OK)
        st = collect(&c, out, nout, into);
    else
        st = tg_set_error(c.st, "%s", c.msg);
    pthread_mutex_lock(&s->mu);
    s->wall += wall;
    s->calls++;
    for (int i = 0; i < submitted; i++) {
        dev_prof *pr = prof_of(s, s->steps[i].dev);
        if (pr) pr->busy += c.busy[i];
    }
    pthread_mutex_unlock(&s->mu);
    for (size_t v = 0; c.owned && v < nv; v++)
        if (c.owned[v]) tg_tensor_free(c.slot[v]);
    for (size_t i = 0; c.ev && i < ns; i++) tg_event_free(c.ev[i]);
    if (c.slot) tg_mem_free(ctx, c.slot, sizeof *c.slot * nv);
    if (c.owned) tg_mem_free(ctx, c.owned, sizeof *c.owned * nv);
    if (c.ev) tg_mem_free(ctx, c.ev, sizeof *c.ev * ns);
    if (c.busy) tg_mem_free(ctx, c.busy, sizeof *c.busy * ns);
    if (tasks) tg_mem_free(ctx, tasks, sizeof *tasks * ns);
    pthread_mutex_destroy(&c.mu);
    return st;
}

/* ---- profile ---- */

void tg_sched_profile_reset(tg_sched *s) {
    pthread_mutex_lock(&s->mu);
    s->wall = 0;
    s->calls = 0;
    for (int k = 0; k < s->nprof; k++) s->prof[k] = (dev_prof){.dev = s->prof[k].dev};
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->nsteps; i++)
        if (s->steps[i].fn) tg_fn_profile_reset(s->steps[i].fn);
}

tg_status tg_sched_profile_print(tg_sched *s, FILE *f) {
    pthread_mutex_lock(&s->mu);
    fprintf(f, "devices: %d, steps: %d, calls: %ld, wall %.3f ms per call\n", s->nprof, s->nsteps,
            s->calls, s->calls ? s->wall * 1e3 / (double)s->calls : 0.0);
    fprintf(f, "%-8s %12s %12s %8s %10s %12s %12s\n", "device", "busy ms", "idle ms", "busy %",
            "transfers", "MB", "transfer ms");
    for (int k = 0; k < s->nprof; k++) {
        const dev_prof *p = &s->prof[k];
        double per = s->calls ? 1.0 / (double)s->calls : 0.0;
        double idle = s->wall - p->busy;
        fprintf(f, "%-8s %12.3f %12.3f %7.1f%% %10.1f %12.3f %12.3f\n", p->dev->name,
                p->busy * 1e3 * per, (idle > 0 ? idle : 0) * 1e3 * per,
                s->wall > 0 ? 100.0 * p->busy / s->wall : 0.0, (double)p->copies * per,
                p->copy_bytes * 1e-6 * per, p->copy_s * 1e3 * per);
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->nsteps; i++) {
        const step *p = &s->steps[i];
        if (p->copy || !p->fn) continue;
        fprintf(f, "\npart %d on %s (stage %d, %d inputs, %d outputs):\n", i, p->dev->name,
                p->stage, p->nin, p->nout);
        tg_status st = tg_fn_profile_print(p->fn, f);
        if (st != TG_OK) fprintf(f, "  (no per-node profile: %s)\n", tg_last_error());
    }
    return TG_OK;
}
