/* transfer.c - `transfer(x, copy=true)` with a device annotation, written
 * `transfer(x, device="cpu:1")`: the value x, made on the device the node is annotated with
 * (docs/devices.md, "Placement").
 *
 * Where a transfer moves its value is its node's device, as for any node the device its
 * output is made on (tg_node.device, `device="..."` in .tg: docs/devices.md,
 * "Annotations"); the op's one attribute is `copy`. Placement (src/rewrite/place.c) inserts
 * transfers after every rewrite, once per value and destination, so that no rewrite has to
 * see through one; a transfer may also be written by hand (one without a device is placed
 * like any node, and disappears where it lands on its input's device). `copy=false` says
 * that the destination reads the source's memory (the virtual host devices share one
 * address space): nothing is copied at run time, and the output is a view of the input.
 * The reference kernel, which runs on the host, copies (or views); the multi-device
 * scheduler runs a transfer as a copy between its devices' memories instead.
 *
 * Invariants:
 *  - The output has exactly the input's type (dtype, shape, weakness).
 *  - Never constant-folded (TG_EFFECT_NOFOLD): a transfer says where a value lives at run
 *    time, which a folded constant (host memory) would lose. Two equal transfers (same input,
 *    same attribute, same device) are one value and may merge.
 *  - Its gradient is the cotangent itself: moving the cotangent back is placement's
 *    business, as for any other value.
 */
#include "ops.h"

enum { A_COPY };
static const tg_attr_spec transfer_attrs[] = {
    [A_COPY] = {"copy", TG_AS_BOOL, 0, 0, {.kind = TG_ATTR_BOOL, .i = 1}},
};

static tg_status infer_transfer(tg_infer *ic) {
    ic->out[0] = ic->in[0];
    return TG_OK;
}

/* A contiguous copy, or with copy=false a view of the input (the same memory). */
static tg_status ref_transfer(tg_kern *k) {
    const tg_tensor *x = k->in[0];
    tg_tensor *y = k->attrs[A_COPY].i ? tg_tensor_dup(x)
                                      : tg_tensor_view(x, x->ndim, x->shape, x->strides, x->offset);
    if (!y) return tg_kern_fail(k, TG_ENOMEM, "cannot make the output: %s", tg_last_error());
    k->out[0] = y;
    return TG_OK;
}

static tg_status vjp_transfer(tg_graph *g, const tg_node *n, tg_var *const *gout, tg_var **gin) {
    (void)g;
    (void)n;
    gin[0] = gout[0];
    return TG_OK;
}

const tg_op_def tg_op_transfer = {
    .name = "transfer",
    .min_in = 1,
    .max_in = 1,
    .nout = 1,
    .kind = TG_KIND_OTHER,
    .attrs = transfer_attrs,
    .nattrs = (int)TG_COUNTOF(transfer_attrs),
    .infer = infer_transfer,
    .ref = ref_transfer,
    .views = 1u << 0, /* copy=false: the output is the input's memory */
    .grad = TG_GRAD_VJP,
    .vjp = vjp_transfer,
    .effects = TG_EFFECT_NOFOLD,
};
