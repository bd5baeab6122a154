/* ir.h - private header of src/ir: types, variables, nodes, graphs, modules.
 *
 * Invariants:
 *  - A graph owns all its nodes, variables, names and attribute arrays through its arena;
 *    nothing in it is freed individually (dead nodes simply become unreachable).
 *  - g->nodes lists nodes in creation order; every builder creates a node after its
 *    inputs, so creation order is topological until tg_ir_replace runs. tg_ir_toposort
 *    gives the order from the outputs, iteratively.
 *  - A variable's type never changes after creation; replacement requires equal types.
 *  - The first error is sticky: once g->status != TG_OK every builder returns NULL.
 *  - State (docs/state.md): a state is an input with `state` set; g->outputs holds the
 *    nret returned values followed by the new value of each update (updates[j]'s at
 *    nret + j), so toposort, clone, replace and every rewrite keep update values alive
 *    and current without knowing about state. tg_graph_set_outputs replaces only the
 *    returned values.
 */
#ifndef TG_IR_H
#define TG_IR_H

#include "../core/core.h"

/* ---- types ---- */
/* dtype + static shape. shape[i] == -1 is '?'. A static 1 broadcasts. `nobcast` marks
 * axes whose extent is 1 but came from a '?' at run time: those do not broadcast. `weak`
 * marks an untyped literal (NEP 50): it adopts the dtype of the strong operand it meets. */
typedef struct tg_type {
    uint8_t dtype;              /* tg_dtype */
    uint8_t ndim;               /* rank */
    uint8_t weak;               /* weak literal */
    uint32_t nobcast;           /* bit i: extent 1 that must not broadcast */
    int64_t shape[TG_MAX_DIMS]; /* extents, -1 unknown */
} tg_type;

bool tg_type_equal(const tg_type *a, const tg_type *b); /* dtype, rank, shape (not weak) */
/* Writes "f32[?,784]" into buf (always terminated). Returns buf. */
char *tg_type_str(const tg_type *t, char *buf, size_t n);
#define TG_TYPE_STR_MAX 160
bool tg_type_known(const tg_type *t); /* every extent static */
/* Run-time type of a tensor t that fills a variable of static type st: t's extents, with
 * `nobcast` on each extent 1 that was not a static 1 (it came from a '?'). */
void tg_type_of_tensor(const tg_type *st, const tg_tensor *t, tg_type *rt);

/* ---- op data ----
 * An attribute may hold data an op keeps as a structure rather than as numbers or text (a
 * fused node's program): an immutable object, reference counted, that the IR handles
 * without knowing what it is. Every node holding it keeps a reference, released when its
 * graph is freed, so clones share the object; rewrites compare two of them (merging equal
 * nodes) through the functions of its table. Only the library makes such data: a tg_attr
 * of the public API cannot give it, and the attribute kind below is not in tg_attr_kind. */
typedef struct tg_opdata tg_opdata;
typedef struct tg_opdata_vt {
    const char *what;                     /* for messages: what the data is ("a fused program") */
    const char *origin;                   /* for messages: where such data comes from */
    uint64_t (*hash)(const tg_opdata *d); /* equal data hash alike */
    bool (*equal)(const tg_opdata *a, const tg_opdata *b); /* both of this table */
    void (*release)(tg_opdata *d);                         /* frees d (no reference left) */
} tg_opdata_vt;

struct tg_opdata {
    const tg_opdata_vt *vt; /* what it is */
    atomic_int refs;        /* references: the only part that changes once it is made */
};

#define TG_ATTR_DATA ((tg_attr_kind)(TG_ATTR_FUNC + 1)) /* tg_aval.data; never in a tg_attr */

void tg_opdata_init(tg_opdata *d, const tg_opdata_vt *vt); /* one reference: the maker's */
void tg_opdata_retain(const tg_opdata *d);
void tg_opdata_release(const tg_opdata *d); /* the last release frees; NULL is a no-op */
bool tg_opdata_equal(const tg_opdata *a, const tg_opdata *b); /* same table, equal data */
uint64_t tg_opdata_hash(const tg_opdata *d);

/* ---- attribute values (normalized to each op's schema) ---- */
typedef struct tg_aval {
    tg_attr_kind kind;     /* NONE when absent and the schema allows none */
    int64_t i;             /* INT, BOOL */
    double f;              /* FLOAT */
    const char *s;         /* STR */
    struct tg_graph *fn;   /* FUNC: the callee (a reference held by the node, tg_graph_retain) */
    const int64_t *ints;   /* INTS */
    const double *floats;  /* FLOATS */
    int n;                 /* length */
    const bool *none;      /* INTS: entry k is `none` where none[k] (ints[k] is then 0); NULL
                              when no entry is (only attributes whose spec has TG_NULL_ITEMS) */
    const tg_opdata *data; /* DATA: the op's data (a reference held by the node) */
} tg_aval;

/* Whether entry k of an int list is `none`. */
static inline bool tg_aval_none_at(const tg_aval *a, int k) { return a->none && a->none[k]; }

/* Whether two int lists of length n have `none` at the same entries. */
static inline bool tg_aval_same_nones(const tg_aval *a, const tg_aval *b, int n) {
    for (int k = 0; k < n; k++)
        if (tg_aval_none_at(a, k) != tg_aval_none_at(b, k)) return false;
    return true;
}

/* ---- variables and nodes ---- */
typedef enum { TG_VAR_INPUT, TG_VAR_CONST, TG_VAR_NODE } tg_var_kind;
typedef struct tg_node tg_node;

struct tg_var {
    tg_type type;     /* never changes */
    tg_var_kind kind; /* input, constant or node output */
    int id;           /* unique in the graph, creation order */
    const char *name; /* user's name or NULL (arena) */
    tg_node *node;    /* producer when kind == TG_VAR_NODE */
    int index;        /* which output of node */
    tg_tensor *value; /* TG_VAR_CONST: the value (owned by the graph) */
    char lit;         /* constant from a literal: 'i', 'f', 'b'; 0 otherwise */
    bool state;       /* TG_VAR_INPUT declared `mut` (tg_state) */
    int upd_line;     /* state: source position of its update (`W <- ...`) when parsed */
    int upd_col;
    const char *device; /* TG_VAR_INPUT: device annotation (as tg_node.device), else NULL */
    tg_graph *graph;    /* the graph that owns it (tg_var_set_device interns names there) */
};

struct tg_node {
    int op;             /* tg_op */
    int id;             /* unique in the graph, creation order */
    int nin, nout;      /* counts */
    tg_var **in;        /* inputs (arena) */
    tg_var **out;       /* outputs (arena) */
    tg_aval *attrs;     /* one per schema entry of the op (arena) */
    int line, col;      /* source position when parsed, else 0 */
    const char *device; /* device annotation (tg_ir_device_intern: g's arena), NULL when none;
                           stamped from g->device when made (docs/devices.md "Annotations") */
};

/* ---- graphs ---- */
typedef struct tg_vec {
    void **items;
    int n, cap;
} tg_vec; /* ctx-allocated pointer vector */
bool tg_vec_push(tg_ctx *ctx, tg_vec *v, void *item);
void tg_vec_fini(tg_ctx *ctx, tg_vec *v);

struct tg_graph {
    tg_ctx *ctx;      /* allocator */
    tg_arena arena;   /* owns nodes, vars, names, attrs */
    const char *name; /* function name (arena) */
    tg_vec nodes;     /* tg_node*, creation order */
    tg_vec vars;      /* tg_var*, creation order */
    tg_vec inputs;    /* tg_var*, parameter order */
    tg_vec outputs;   /* tg_var*: the nret returned values, then one new value
                         per update (outputs[nret + j] for updates[j]), so that
                         every pass keeps update values alive and rewritten */
    int nret;         /* values returned (tg_graph_output_count) */
    tg_vec out_names; /* const char* (arena) or NULL, one per returned value: the name
                         the output goes by (tg_graph_output_name). Positional, so it
                         stays with the output when rewrites replace its variable */
    tg_vec updates;   /* tg_var*: the state inputs updated, in update order */
    tg_status status; /* first error */
    char *error;      /* its message (arena), "" when none */
    int line, col;    /* position stamped on new nodes (parser sets it) */
    const char *file; /* for messages, may be NULL */
    int def_line;     /* position of the `func` header when parsed, else 0 */
    int def_col;
    int refs;               /* references: the creator's, plus one per node of any graph whose
                               FUNC attribute names this graph (graph.c: tg_graph_free) */
    tg_vec callees;         /* tg_graph*: the distinct graphs named by FUNC attributes of nodes
                               of this graph (each counted once in its refs) */
    tg_vec data;            /* const tg_opdata*: one reference per DATA attribute of a node
                               made in this graph, released by tg_graph_free */
    const char *device;     /* device stamped on new nodes like line/col (tg_graph_set_device,
                               the parser's `device=`, and every pass that builds nodes in
                               place of others); NULL: none */
    tg_vec devnames;        /* const char* (arena): the distinct device names of this graph */
    const tg_graph *origin; /* the graph this one is a clone of (tg_graph_clone; the first
                               of a chain of clones), else NULL. Compared, never read: it
                               may have been freed (text/print.c) */
    tg_graph *drop_next;    /* tg_graph_free's worklist of graphs to free (no allocation) */
    /* The pmap typing of a body (tg_graph_set_mapped; the parser sets it from the pmap that
       maps a function with a derivative form): the axis and, per parameter, whether it is
       mapped (varying over the axis). The gradient walk types the parameters by it; a pmap
       of this axis checks its in_axes against it. NULL axis: none declared */
    const char *spmd_axis; /* arena */
    uint8_t *spmd_mapped;  /* arena, spmd_n entries; a later parameter counts as mapped */
    int spmd_n;
};

/* Records the first error of g (later ones are ignored) and sets tg_last_error.
 * Messages get "file:line:col: " when g->line is set. Returns NULL for chaining. */
void *tg_ir_fail(tg_graph *g, tg_status st, const char *fmt, ...) TG_PRINTF(3, 4);
tg_status tg_ir_failv(tg_graph *g, tg_status st, const char *fmt, va_list ap);

/* Creates a node of `op` after promotion, attribute normalization and inference.
 * attrs are keyword attributes as the user gave them. Returns NULL on error (sticky). */
tg_node *tg_ir_node_make(tg_graph *g, int op, tg_var *const *in, int nin, const tg_attr *attrs,
                         int nattrs);
/* Same, with attributes already normalized to the schema (clone, rewrites). */
tg_node *tg_ir_node_make_norm(tg_graph *g, int op, tg_var *const *in, int nin,
                              const tg_aval *attrs);
tg_var *tg_ir_const(tg_graph *g, tg_tensor *value /* ownership taken */, char lit);

/* The copy in g's arena of device name `name` (one per distinct name: pointers compare
 * equal exactly when names do). NULL for NULL, and on failure (recorded in g). */
const char *tg_ir_device_intern(tg_graph *g, const char *name);
/* Whether two annotations name the same device (both NULL: yes). */
static inline bool tg_ir_same_device(const char *a, const char *b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}
/* The annotation that says where v is made: its producing node's, an input's own, NULL for
 * a constant (constants have no device: placement puts them where they are read). */
static inline const char *tg_ir_var_device(const tg_var *v) {
    return v->kind == TG_VAR_NODE ? v->node->device : v->kind == TG_VAR_INPUT ? v->device : NULL;
}
/* Whether `name` is a well-formed device name: `cpu` or `sim`, optionally followed by `:N`
 * with N a decimal integer of at most 9 digits and no leading zero. Whether such a device
 * exists is for placement to say. */
bool tg_ir_device_valid(const char *name);
#define TG_DEVICE_FORMS                                                                            \
    "cpu or sim, optionally followed by :N, N an integer >= 0 without a leading zero (cpu, "       \
    "cpu:1, sim:0)"

/* Names returned value i (a copy of name[0..len) in g's arena). TG_OK, or an error
 * (index out of range, out of memory) recorded in g. */
tg_status tg_ir_output_name_set(tg_graph *g, int i, const char *name, size_t len);

/* Nodes reachable from the outputs, inputs before users. Iterative; caller frees
 * with tg_mem_free(g->ctx, p, (g->nodes.n + 1) * sizeof *p) (the array has room for every
 * node). Returns NULL on failure (error set). */
tg_node **tg_ir_toposort(const tg_graph *g, int *n);
/* Reorders order[0..n), a topological order of g's nodes (tg_ir_toposort's), so that split
 * collectives overlap what runs between their halves (op.h, "scheduling"; schedule.c).
 * TG_OK or TG_ENOMEM; the order is unchanged without such nodes. */
tg_status tg_ir_schedule(const tg_graph *g, tg_node **order, int n);
/* Points every use of `old` (node inputs and graph outputs) at `new`, which must have
 * the same type and must not depend on old. */
tg_status tg_ir_replace(tg_graph *g, tg_var *old, tg_var *new);

/* ---- functions as values ----
 * A FUNC attribute holds a graph: a node keeps a reference on it, so a callee lives as
 * long as any graph that calls it (freeing is iterative). Calls never form a cycle: the
 * node builder refuses a FUNC attribute whose graph reaches the graph being built, and
 * one whose calls nest deeper than TG_CALL_MAX_DEPTH. */
void tg_graph_retain(tg_graph *g);
/* Copies the body of fn into g, as a call inlined: fn's inputs become args (one per input
 * of fn, of fitting types; a weak argument is made strong, as a parameter is), each node
 * reachable from fn's returned values is made again in g (so re-inferred on the
 * arguments' types, keeping its position in fn's text), and outs[0..nret) receive the
 * copies of fn's returned values. Calls inside fn are copied as calls. Returns TG_OK or
 * g's (sticky) error. */
tg_status tg_ir_copy_body(tg_graph *g, const tg_graph *fn, tg_var *const *args, tg_var **outs);
/* Depth of the calls below g: 0 when g calls nothing. */
int tg_graph_call_depth(const tg_graph *g);

#endif
