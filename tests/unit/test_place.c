/* test_place.c - placement (src/rewrite/place.c) and the transfer op: pins and their
 * errors (unknown devices listed, ops a pinned device cannot run), AUTO spreading two
 * independent branches over 2 and 4 virtual host devices while a chain stays on one, pins
 * on sim devices spreading to their neighbours, MANUAL following inputs and its conflict
 * error naming both values, transfers made once per value and destination, the graph's own
 * transfers looked through (pairs that cancel, transfers to where the value already is),
 * copy=false exactly between host devices, sim devices needing transfers for inputs,
 * constants and outputs, and the contract checker refusing a node left unplaced; a placed
 * graph computes what the graph did, and runs on the devices. Graphs are parsed from .tg
 * text and annotated by setting node->device directly. A device without kernels is sim:0
 * given a table whose supports_op refuses every op. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "device/device.h"
#include "rewrite/rewrite.h"

static int teardown(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(0, 0), TG_OK);
    return 0;
}

/* Function `name` of src, as a graph of its own. */
static tg_graph *parse_fn(const char *src, const char *name) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "test.tg", &m);
    if (st != TG_OK) print_error("parse: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_graph *g = tg_graph_clone(tg_module_find(m, name));
    assert_non_null(g);
    g->file = "test.tg"; /* the clone borrowed the module's copy of the name */
    tg_module_free(m);
    return g;
}

/* The variable called `name` (an input, or a node's output). */
static tg_var *var(const tg_graph *g, const char *name) {
    for (int i = 0; i < g->vars.n; i++) {
        tg_var *v = g->vars.items[i];
        if (v->name && strcmp(v->name, name) == 0) return v;
    }
    print_error("no variable '%s'\n", name);
    fail();
    return NULL;
}

static void annotate(tg_graph *g, const char *name, const char *dev) {
    tg_var *v = var(g, name);
    if (v->kind == TG_VAR_NODE)
        v->node->device = tg_ir_device_intern(g, dev);
    else
        v->device = tg_ir_device_intern(g, dev);
}

/* Device of the node computing `name`. */
static const char *dev_of(const tg_graph *g, const char *name) {
    const tg_var *v = var(g, name);
    assert_int_equal(v->kind, TG_VAR_NODE);
    assert_non_null(v->node->device);
    return v->node->device;
}

/* Live nodes of op `op` (-1: all). */
static int count_op(const tg_graph *g, int op) {
    int n = 0, c = 0;
    tg_node **order = tg_ir_toposort(g, &n);
    assert_non_null(order);
    for (int i = 0; i < n; i++) c += op < 0 || order[i]->op == op;
    tg_mem_free(g->ctx, order, sizeof *order * (size_t)(g->nodes.n + 1));
    return c;
}

/* Places g (replaced when compacted) and checks the contract. */
static tg_status place(tg_graph **g, tg_placement mode, tg_place_stats *stats) {
    tg_place_stats s;
    tg_status st = tg_place(g, &(tg_place_opts){.placement = mode, .stats = stats ? stats : &s});
    if (st != TG_OK) return st;
    st = tg_place_check(*g);
    if (st != TG_OK) print_error("contract: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    for (int i = 0; i < (*g)->nodes.n; i++)
        assert_non_null(((tg_node *)(*g)->nodes.items[i])->device);
    return TG_OK;
}

/* The single transfer that node `reader` reads at input k, or NULL when it reads a value
 * directly. */
static const tg_node *transfer_in(const tg_graph *g, const char *reader, int k) {
    const tg_node *n = var(g, reader)->node;
    const tg_var *v = n->in[k];
    return v->kind == TG_VAR_NODE && v->node->op == TG_OP_TRANSFER ? v->node : NULL;
}

static bool no(const tg_device *d, int op) {
    (void)d;
    (void)op;
    return false;
}

/* sim:0 claims no op (the registry's table is replaced until it is rebuilt). */
static void sim_runs_nothing(void) {
    static tg_device_iface none;
    tg_device *d = tg_device_find("sim:0");
    assert_non_null(d);
    none = *d->iface;
    none.supports_op = no;
    d->iface = &none;
}

static const char two_branches[] = "func main(a: f32[256,256], b: f32[256,256], c: f32[256,256],\n"
                                   "          d: f32[256,256]) {\n"
                                   "  p = dot(a, b)\n"
                                   "  p1 = tanh(p)\n"
                                   "  p2 = exp(p1)\n"
                                   "  q = dot(c, d)\n"
                                   "  q1 = sigmoid(q)\n"
                                   "  q2 = log1p(q1)\n"
                                   "  s = add(p2, q2)\n"
                                   "  return s\n"
                                   "}\n";

static const char chain[] = "func main(x: f64[1000]) {\n"
                            "  a = exp(x)\n"
                            "  b = tanh(a)\n"
                            "  c = mul(b, 2.0)\n"
                            "  d = sum(c)\n"
                            "  return d\n"
                            "}\n";

/* ---- one device ---- */

static void test_one_device_everything_on_cpu(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(0, 0), TG_OK);
    tg_graph *g = parse_fn(two_branches, "main");
    annotate(g, "q", "cpu");
    int before = g->nodes.n;
    tg_place_stats s;
    assert_int_equal(place(&g, TG_PLACEMENT_DEFAULT, &s), TG_OK);
    assert_int_equal(g->nodes.n, before);
    assert_int_equal(s.transfers, 0);
    for (int i = 0; i < g->nodes.n; i++)
        assert_string_equal(((tg_node *)g->nodes.items[i])->device, "cpu");
    tg_graph_free(g);
}

/* ---- pins and their errors ---- */

static void test_unknown_device_lists_devices(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(2, 0), TG_OK);
    tg_graph *g = parse_fn(two_branches, "main");
    annotate(g, "q1", "gpu:0");
    assert_int_equal(tg_place(&g, NULL), TG_EINVAL);
    const char *m = tg_last_error();
    assert_non_null(strstr(m, "test.tg:7:"));
    assert_non_null(strstr(m, "sigmoid"));
    assert_non_null(strstr(m, "no device \"gpu:0\" (the devices are: cpu, cpu:0, cpu:1)"));
    tg_graph_free(g);
    /* the same for an input, named; and with the host alone */
    assert_int_equal(tg_device_configure(0, 0), TG_OK);
    g = parse_fn(two_branches, "main");
    annotate(g, "c", "cpu:3");
    assert_int_equal(tg_place(&g, NULL), TG_EINVAL);
    assert_non_null(
        strstr(tg_last_error(), "input 'c': no device \"cpu:3\" (the devices are: cpu)"));
    tg_graph_free(g);
}

static void test_pinned_device_must_run_the_op(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(1, 1), TG_OK);
    sim_runs_nothing();
    tg_graph *g = parse_fn(chain, "main");
    annotate(g, "b", "sim:0");
    assert_int_equal(tg_place(&g, NULL), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "test.tg:3:"));
    assert_non_null(
        strstr(tg_last_error(), "tanh: annotated to run on sim:0, which cannot run it"));
    tg_graph_free(g);
}

static void test_pins_stay(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(2, 0), TG_OK);
    tg_graph *g = parse_fn(two_branches, "main");
    annotate(g, "p1", "cpu:1");
    annotate(g, "q1", "cpu"); /* the whole host: only by a pin */
    assert_int_equal(place(&g, TG_PLACEMENT_AUTO, NULL), TG_OK);
    assert_string_equal(dev_of(g, "p1"), "cpu:1");
    assert_string_equal(dev_of(g, "q1"), "cpu");
    const char *others[] = {"p", "p2", "q", "q2", "s"};
    for (size_t k = 0; k < TG_COUNTOF(others); k++)
        assert_string_not_equal(dev_of(g, others[k]), "cpu");
    tg_graph_free(g);
}

/* ---- AUTO ---- */

/* Each branch on a device of its own, the join reading the other branch through one
 * transfer with copy=false; `cpu` unused. */
static void check_branches(tg_graph *g) {
    const char *bp = dev_of(g, "p"), *bq = dev_of(g, "q");
    assert_string_not_equal(bp, bq);
    assert_true(strncmp(bp, "cpu:", 4) == 0 && strncmp(bq, "cpu:", 4) == 0);
    assert_string_equal(dev_of(g, "p1"), bp);
    assert_string_equal(dev_of(g, "p2"), bp);
    assert_string_equal(dev_of(g, "q1"), bq);
    assert_string_equal(dev_of(g, "q2"), bq);
    assert_int_equal(count_op(g, TG_OP_TRANSFER), 1);
    const tg_node *t0 = transfer_in(g, "s", 0), *t1 = transfer_in(g, "s", 1);
    const tg_node *t = t0 ? t0 : t1;
    assert_non_null(t);
    assert_true(!t0 || !t1);
    assert_string_equal(t->device, dev_of(g, "s"));
    assert_int_equal(t->attrs[0].i, 0); /* copy=false */
}

static void test_auto_balances_two_branches(void **state) {
    (void)state;
    const int counts[] = {2, 4};
    for (size_t k = 0; k < TG_COUNTOF(counts); k++) {
        assert_int_equal(tg_device_configure(counts[k], 0), TG_OK);
        tg_graph *g = parse_fn(two_branches, "main");
        tg_place_stats s;
        assert_int_equal(place(&g, TG_PLACEMENT_AUTO, &s), TG_OK);
        check_branches(g);
        assert_int_equal(s.transfers, 1);
        tg_graph_free(g);
    }
    /* DEFAULT is AUTO when there are several devices */
    assert_int_equal(tg_device_configure(2, 0), TG_OK);
    tg_graph *g = parse_fn(two_branches, "main");
    assert_int_equal(place(&g, TG_PLACEMENT_DEFAULT, NULL), TG_OK);
    check_branches(g);
    tg_graph_free(g);
}

static void test_auto_chain_stays_on_one_device(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(4, 0), TG_OK);
    tg_graph *g = parse_fn(chain, "main");
    int before = g->nodes.n;
    assert_int_equal(place(&g, TG_PLACEMENT_AUTO, NULL), TG_OK);
    assert_int_equal(g->nodes.n, before); /* no transfer */
    const char *d = dev_of(g, "a");
    assert_true(strncmp(d, "cpu:", 4) == 0);
    const char *rest[] = {"b", "c", "d"};
    for (size_t k = 0; k < TG_COUNTOF(rest); k++) assert_string_equal(dev_of(g, rest[k]), d);
    tg_graph_free(g);
}

/* An input annotated cpu:1: its reader is placed there (MANUAL follows it, AUTO finds it
 * there first) and reads the caller's tensor, host memory, directly; a value pinned on
 * cpu:1 read by a node pinned on cpu:0 goes through a transfer with copy=false. */
static void test_annotated_input(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(2, 0), TG_OK);
    for (int manual = 0; manual < 2; manual++) {
        tg_graph *g = parse_fn(chain, "main");
        annotate(g, "x", "cpu:1");
        annotate(g, "b", "cpu:0");
        assert_int_equal(place(&g, manual ? TG_PLACEMENT_MANUAL : TG_PLACEMENT_AUTO, NULL), TG_OK);
        assert_string_equal(dev_of(g, "a"), "cpu:1");
        assert_null(transfer_in(g, "a", 0));
        assert_string_equal(dev_of(g, "b"), "cpu:0");
        const tg_node *t = transfer_in(g, "b", 0);
        assert_non_null(t);
        assert_string_equal(t->device, "cpu:0");
        assert_int_equal(t->attrs[0].i, 0);
        tg_graph_free(g);
    }
}

/* ---- sim devices: expansion, and transfers for inputs and outputs ---- */

static const char sim_src[] = "func main(x: f32[64], w: f32[64]) {\n"
                              "  e = exp(x)\n"
                              "  m = mul(e, w)\n"
                              "  k = add(m, 1.5)\n"
                              "  r = sum(k)\n"
                              "  h = tanh(w)\n"
                              "  return r, h\n"
                              "}\n";

static void test_sim_pin_expands_and_transfers(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(2, 1), TG_OK);
    tg_graph *g = parse_fn(sim_src, "main");
    annotate(g, "m", "sim:0");
    tg_place_stats s;
    assert_int_equal(place(&g, TG_PLACEMENT_AUTO, &s), TG_OK);
    /* forward (k, r read only sim:0 and a constant) and backward (e is read only there) */
    const char *on_sim[] = {"e", "m", "k", "r"};
    for (size_t i = 0; i < TG_COUNTOF(on_sim); i++)
        assert_string_equal(dev_of(g, on_sim[i]), "sim:0");
    assert_true(strncmp(dev_of(g, "h"), "cpu:", 4) == 0); /* independent of the pin */
    /* inputs reach sim:0 through transfers, copied; the constant is read as it is (constants
       are part of the program: every device's part holds its own copy) */
    const char *readers[][2] = {{"e", "x"}, {"m", "w"}};
    for (size_t i = 0; i < TG_COUNTOF(readers); i++) {
        int k = strcmp(readers[i][0], "m") == 0 ? 1 : 0;
        const tg_node *t = transfer_in(g, readers[i][0], k);
        assert_non_null(t);
        assert_string_equal(t->device, "sim:0");
        assert_int_equal(t->attrs[0].i, 1);
        assert_ptr_equal(t->in[0], var(g, readers[i][1]));
    }
    assert_null(transfer_in(g, "k", 1));
    assert_int_equal(var(g, "k")->node->in[1]->kind, TG_VAR_CONST);
    assert_null(transfer_in(g, "h", 0)); /* a host device reads host memory */
    /* r, returned, comes back to the host */
    const tg_var *out = g->outputs.items[0];
    assert_int_equal(out->node->op, TG_OP_TRANSFER);
    assert_string_equal(out->node->device, "cpu");
    assert_ptr_equal(out->node->in[0], var(g, "r"));
    assert_ptr_equal(g->outputs.items[1], var(g, "h"));
    assert_int_equal(s.transfers, 3);
    tg_graph_free(g);
}

/* An input annotated sim:0, returned as it is and read: its reader goes there and reads it
 * through a transfer (a call's tensors are host memory), the result comes back, the input
 * is returned as it is; a device that cannot run the reader is avoided. */
static void test_sim_input(void **state) {
    (void)state;
    static const char src[] = "func main(x: f32[8]) {\n  y = exp(x)\n  return x, y\n}\n";
    for (int runs = 1; runs >= 0; runs--) {
        assert_int_equal(tg_device_configure(1, 1), TG_OK);
        if (!runs) sim_runs_nothing();
        tg_graph *g = parse_fn(src, "main");
        annotate(g, "x", "sim:0");
        tg_place_stats s;
        assert_int_equal(place(&g, TG_PLACEMENT_AUTO, &s), TG_OK);
        assert_string_equal(dev_of(g, "y"), runs ? "sim:0" : "cpu:0");
        assert_ptr_equal(g->outputs.items[0], var(g, "x"));
        const tg_node *t = transfer_in(g, "y", 0);
        if (runs) {
            assert_non_null(t);
            assert_string_equal(t->device, "sim:0");
            assert_int_equal(t->attrs[0].i, 1);
            const tg_var *o = g->outputs.items[1];
            assert_int_equal(o->node->op, TG_OP_TRANSFER);
            assert_string_equal(o->node->device, "cpu");
            assert_int_equal(o->node->attrs[0].i, 1);
        } else {
            assert_null(t);
            assert_ptr_equal(g->outputs.items[1], var(g, "y"));
        }
        assert_int_equal(s.transfers, 2 * runs);
        tg_graph_free(g);
    }
}

/* ---- MANUAL ---- */

static void test_manual_follows_inputs(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(2, 0), TG_OK);
    tg_graph *g = parse_fn(two_branches, "main");
    annotate(g, "q", "cpu:1");
    assert_int_equal(place(&g, TG_PLACEMENT_MANUAL, NULL), TG_OK);
    assert_string_equal(dev_of(g, "q1"), "cpu:1");
    assert_string_equal(dev_of(g, "q2"), "cpu:1");
    assert_string_equal(dev_of(g, "p"), "cpu:0"); /* the first device */
    assert_string_equal(dev_of(g, "p2"), "cpu:0");
    assert_string_equal(dev_of(g, "s"), "cpu:1"); /* follows the pinned value */
    assert_int_equal(count_op(g, TG_OP_TRANSFER), 1);
    tg_graph_free(g);
    /* nothing pinned: everything on the first device */
    g = parse_fn(two_branches, "main");
    assert_int_equal(place(&g, TG_PLACEMENT_MANUAL, NULL), TG_OK);
    for (int i = 0; i < g->nodes.n; i++)
        assert_string_equal(((tg_node *)g->nodes.items[i])->device, "cpu:0");
    assert_int_equal(count_op(g, TG_OP_TRANSFER), 0);
    tg_graph_free(g);
}

static void test_manual_conflict_names_both(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(2, 0), TG_OK);
    tg_graph *g = parse_fn(two_branches, "main");
    annotate(g, "p", "cpu:0");
    annotate(g, "q", "cpu:1");
    assert_int_equal(tg_place(&g, &(tg_place_opts){.placement = TG_PLACEMENT_MANUAL}), TG_EINVAL);
    const char *m = tg_last_error();
    assert_non_null(strstr(m, "test.tg:9:"));
    assert_non_null(strstr(m, "add: manual placement: it reads 'p2' on cpu:0 and 'q2' on cpu:1"));
    tg_graph_free(g);
    /* annotating the op settles it */
    g = parse_fn(two_branches, "main");
    annotate(g, "p", "cpu:0");
    annotate(g, "q", "cpu:1");
    annotate(g, "s", "cpu:1");
    assert_int_equal(place(&g, TG_PLACEMENT_MANUAL, NULL), TG_OK);
    assert_non_null(transfer_in(g, "s", 0));
    assert_null(transfer_in(g, "s", 1));
    tg_graph_free(g);
    /* AUTO accepts the conflict */
    g = parse_fn(two_branches, "main");
    annotate(g, "p", "cpu:0");
    annotate(g, "q", "cpu:1");
    assert_int_equal(place(&g, TG_PLACEMENT_AUTO, NULL), TG_OK);
    tg_graph_free(g);
}

/* ---- transfers ---- */

static void test_one_transfer_per_value_and_device(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(2, 1), TG_OK);
    tg_graph *g = parse_fn("func main(x: f32[16]) {\n"
                           "  v = exp(x)\n"
                           "  a = sin(v)\n"
                           "  b = cos(v)\n"
                           "  c = mul(v, v)\n"
                           "  d = tanh(v)\n"
                           "  e = abs(v)\n"
                           "  return a, b, c, d, e\n"
                           "}\n",
                           "main");
    annotate(g, "v", "cpu:0");
    annotate(g, "a", "cpu:1");
    annotate(g, "b", "cpu:1");
    annotate(g, "c", "cpu:1");
    annotate(g, "d", "sim:0");
    annotate(g, "e", "sim:0");
    tg_place_stats s;
    assert_int_equal(place(&g, TG_PLACEMENT_MANUAL, &s), TG_OK);
    const tg_node *ta = transfer_in(g, "a", 0), *tb = transfer_in(g, "b", 0);
    assert_non_null(ta);
    assert_ptr_equal(ta, tb);
    assert_ptr_equal(transfer_in(g, "c", 0), ta);
    assert_ptr_equal(transfer_in(g, "c", 1), ta);
    assert_int_equal(ta->attrs[0].i, 0);
    const tg_node *td = transfer_in(g, "d", 0);
    assert_non_null(td);
    assert_ptr_equal(transfer_in(g, "e", 0), td);
    assert_string_equal(td->device, "sim:0");
    assert_int_equal(td->attrs[0].i, 1);
    /* d and e come back to the host: one transfer each */
    assert_int_equal(s.transfers, 4);
    assert_int_equal(count_op(g, TG_OP_TRANSFER), 4);
    tg_graph_free(g);
}

/* The graph's own transfers: a pair that cancels, one to where its input already is, one of
 * a value to the device its reader runs on (kept, made copy=false), two equal ones. */
static void test_transfers_cancel(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(2, 0), TG_OK);
    tg_graph *g = parse_fn("func main(x: f32[16]) {\n"
                           "  v = exp(x)\n"
                           "  t1 = transfer(v, device=\"cpu:1\")\n"
                           "  t2 = transfer(t1, device=\"cpu:0\")\n"
                           "  a = sin(t2)\n"
                           "  t3 = transfer(v, device=\"cpu:0\")\n"
                           "  b = cos(t3)\n"
                           "  t4 = transfer(v, device=\"cpu:1\", copy=true)\n"
                           "  c = tanh(t4)\n"
                           "  t5 = transfer(v, device=\"cpu:1\")\n"
                           "  d = abs(t5)\n"
                           "  return a, b, c, d\n"
                           "}\n",
                           "main");
    annotate(g, "v", "cpu:0");
    annotate(g, "a", "cpu:0");
    annotate(g, "b", "cpu:0");
    annotate(g, "c", "cpu:1");
    annotate(g, "d", "cpu:1");
    tg_place_stats s;
    assert_int_equal(place(&g, TG_PLACEMENT_MANUAL, &s), TG_OK);
    assert_null(transfer_in(g, "a", 0)); /* reads v itself */
    assert_ptr_equal(var(g, "a")->node->in[0], var(g, "v"));
    assert_null(transfer_in(g, "b", 0));
    const tg_node *tc = transfer_in(g, "c", 0);
    assert_non_null(tc);
    assert_ptr_equal(transfer_in(g, "d", 0), tc);
    assert_ptr_equal(tc->in[0], var(g, "v"));
    assert_int_equal(tc->attrs[0].i, 0);
    assert_int_equal(count_op(g, TG_OP_TRANSFER), 1);
    assert_int_equal(s.transfers, 0);
    assert_int_equal(s.removed, 4);
    assert_int_equal(g->nodes.n, count_op(g, -1)); /* compacted */
    tg_graph_free(g);
}

/* A transfer to sim and back to the host around host work: the host reads the original. */
static void test_round_trip_cancels(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(0, 1), TG_OK);
    tg_graph *g = parse_fn("func main(x: f32[16]) {\n"
                           "  s = transfer(x, device=\"sim:0\")\n"
                           "  h = transfer(s, device=\"cpu\")\n"
                           "  return exp(h), s\n"
                           "}\n",
                           "main");
    assert_int_equal(place(&g, TG_PLACEMENT_AUTO, NULL), TG_OK);
    const tg_node *e = ((tg_var *)g->outputs.items[0])->node;
    assert_string_equal(e->device, "cpu");
    assert_ptr_equal(e->in[0], g->inputs.items[0]);
    /* s is returned: on the host, the input itself */
    assert_ptr_equal(g->outputs.items[1], g->inputs.items[0]);
    assert_int_equal(count_op(g, TG_OP_TRANSFER), 0);
    tg_graph_free(g);
}

/* ---- the contract ---- */

static void test_contract_checker(void **state) {
    (void)state;
    assert_int_equal(tg_device_configure(2, 0), TG_OK);
    tg_graph *g = parse_fn(two_branches, "main");
    assert_int_equal(place(&g, TG_PLACEMENT_AUTO, NULL), TG_OK);
    tg_node *n = var(g, "q1")->node;
    const char *d = n->device;
    n->device = NULL; /* a node left unplaced */
    assert_int_equal(tg_place_check(g), TG_EINTERNAL);
    assert_non_null(strstr(tg_last_error(), "sigmoid is on no device"));
    /* a read across devices without a transfer */
    n->device =
        strcmp(d, "cpu:0") == 0 ? tg_ir_device_intern(g, "cpu:1") : tg_ir_device_intern(g, "cpu:0");
    assert_int_equal(tg_place_check(g), TG_EINTERNAL);
    assert_non_null(strstr(tg_last_error(), "reads input 0 from"));
    tg_graph_free(g);
}

/* ---- the op ---- */

/* Inputs of two_branches. */
static void branch_inputs(tg_tensor **in) {
    for (int i = 0; i < 4; i++) {
        in[i] = tg_tensor_new(NULL, TG_DT_F32, 2, (int64_t[]){256, 256});
        float *p = tg_tensor_data(in[i]);
        for (int k = 0; k < 256 * 256; k++) p[k] = (float)((k * (i + 3)) % 17) / 170.0f;
    }
}

/* g compiled with opts and called on in: its output. */
static tg_tensor *run(tg_graph *g, const tg_compile_opts *opts, tg_tensor **in, int nin) {
    tg_fn *f = NULL;
    tg_status st = tg_graph_compile(g, opts, &f);
    if (st != TG_OK) print_error("compile: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_tensor *out = NULL;
    st = tg_fn_call(f, in, nin, &out, 1);
    if (st != TG_OK) print_error("call: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_fn_free(f);
    return out;
}

/* A placed graph computes what the graph did: run by the reference kernels (transfers copy
 * or view) bit for bit, and compiled (pipeline, placement, the devices' scheduler) on two
 * host devices, and with a node pinned on a sim device (protected memory: a missing
 * transfer would fail), within rounding. */
static void test_placed_graph_runs(void **state) {
    (void)state;
    tg_tensor *in[4];
    branch_inputs(in);
    tg_graph *g = parse_fn(two_branches, "main");
    tg_compile_opts ref = TG_COMPILE_OPTS(.mode = TG_MODE_REFERENCE);
    tg_tensor *want = run(g, &ref, in, 4); /* the host alone */
    setenv("TGRAPH_SIM_PROTECT", "1", 1);
    assert_int_equal(tg_device_configure(2, 1), TG_OK);
    tg_graph *pg = tg_graph_clone(g);
    assert_int_equal(place(&pg, TG_PLACEMENT_AUTO, NULL), TG_OK);
    tg_tensor *got = run(pg, &ref, in, 4);
    assert_memory_equal(tg_tensor_data(want), tg_tensor_data(got), 256 * 256 * sizeof(float));
    tg_tensor_free(got);
    tg_graph_free(pg);
    for (int pin = 0; pin < 2; pin++) {
        if (pin) annotate(g, "q1", "sim:0");
        got = run(g, &TG_COMPILE_OPTS(.mode = TG_MODE_VM), in, 4);
        const float *a = tg_tensor_data(want), *b = tg_tensor_data(got);
        for (int k = 0; k < 256 * 256; k++) assert_true(fabsf(a[k] - b[k]) <= 1e-5f * fabsf(a[k]));
        tg_tensor_free(got);
    }
    tg_tensor_free(want);
    for (int i = 0; i < 4; i++) tg_tensor_free(in[i]);
    tg_graph_free(g);
    unsetenv("TGRAPH_SIM_PROTECT");
}

/* The gradient through a transfer is the cotangent. */
static void test_transfer_gradient(void **state) {
    (void)state;
    tg_graph *g = parse_fn("func main(x: f64[3]) {\n"
                           "  y = transfer(x, device=\"cpu:1\", copy=false)\n"
                           "  return sum(mul(y, 3.0))\n"
                           "}\n",
                           "main");
    tg_var *x = g->inputs.items[0], *dx = NULL;
    assert_int_equal(tg_grad(g, g->outputs.items[0], &x, 1, TG_DISCONNECTED_ERROR, &dx), TG_OK);
    assert_int_equal(tg_graph_set_outputs(g, &dx, 1), TG_OK);
    tg_tensor *xv = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){3});
    tg_tensor *gv = run(g, &TG_COMPILE_OPTS(.mode = TG_MODE_REFERENCE), &xv, 1);
    const double *gd = tg_tensor_data(gv);
    for (int i = 0; i < 3; i++) assert_true(gd[i] == 3.0);
    tg_tensor_free(xv);
    tg_tensor_free(gv);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_one_device_everything_on_cpu, teardown),
        cmocka_unit_test_teardown(test_unknown_device_lists_devices, teardown),
        cmocka_unit_test_teardown(test_pinned_device_must_run_the_op, teardown),
        cmocka_unit_test_teardown(test_pins_stay, teardown),
        cmocka_unit_test_teardown(test_auto_balances_two_branches, teardown),
        cmocka_unit_test_teardown(test_auto_chain_stays_on_one_device, teardown),
        cmocka_unit_test_teardown(test_annotated_input, teardown),
        cmocka_unit_test_teardown(test_sim_pin_expands_and_transfers, teardown),
        cmocka_unit_test_teardown(test_sim_input, teardown),
        cmocka_unit_test_teardown(test_manual_follows_inputs, teardown),
        cmocka_unit_test_teardown(test_manual_conflict_names_both, teardown),
        cmocka_unit_test_teardown(test_one_transfer_per_value_and_device, teardown),
        cmocka_unit_test_teardown(test_transfers_cancel, teardown),
        cmocka_unit_test_teardown(test_round_trip_cancels, teardown),
        cmocka_unit_test_teardown(test_contract_checker, teardown),
        cmocka_unit_test_teardown(test_placed_graph_runs, teardown),
        cmocka_unit_test_teardown(test_transfer_gradient, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
