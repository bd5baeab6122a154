/* vm_kernels.c - the VM's kernel choice (tg_plan_kernels, src/backend/plan.h), shared by
 * the VM and the C JIT's call-backs: each instruction's kernel class from its static
 * types, the workspace it needs, and whether its output may take a dying input's block.
 *
 * Invariant: the per-instruction data (vm_ins_info, pg->kinfo) is chosen once, when the
 * program is made; a class the run-time layout does not fit falls back to the op's
 * reference kernel (tg_vm_run_node).
 */
#include "vm.h"

#include "../../ops/fused.h"

/* The kernel class of instruction i, from its static types. */
static void choose_kernel(tg_plan_prog *pg, vm_ins_info *in, tg_vk_isa isa, int i) {
    tg_node *n = pg->order[i];
    const tg_op_def *op = tg_op_table[n->op];
    in->kind = VM_REF;
    in->isa = isa;
    if (n->op == TG_OP_ALLOC) { /* a broadcast copy of its value when the plan knows its
                                   extents (an output it allocates otherwise) */
        tg_dtype dt = (tg_dtype)n->in[0]->type.dtype;
        in->vk =
            tg_vk_select(&tg_op_cast, 1, &dt, (tg_dtype)n->out[0]->type.dtype, isa, &in->vargs);
        if (in->vk) in->kind = VM_EW;
        return;
    }
    if (op->views || op->self_alloc) return;
    if (op->kind == TG_KIND_ELEMWISE && n->nout == 1 && n->nin <= TG_VK_MAXIN) {
        tg_dtype idt[TG_VK_MAXIN];
        for (int k = 0; k < n->nin; k++) idt[k] = (tg_dtype)n->in[k]->type.dtype;
        in->vk = tg_vk_select(op, n->nin, idt, (tg_dtype)n->out[0]->type.dtype, isa, &in->vargs);
        if (in->vk) {
            in->kind = VM_EW;
            in->cost = tg_vk_cost(op);
        }
        return;
    }
    if (tg_vm_reduce_ok(n)) {
        in->kind = VM_REDUCE;
        return;
    }
    if (tg_vm_blas_ok(n)) {
        in->kind = VM_BLAS;
        return;
    }
    if (n->op == TG_OP_FUSED) {
        in->fused = tg_vm_fused_prep(pg->ctx, n, isa);
        if (in->fused) in->kind = VM_FUSED;
    }
}

/* A program with core ops (vm_fcore.c): its gemms are BLAS calls, and its outputs are
 * written block by block while inputs broadcast over the batch are still read. */
static bool has_core(const tg_fused_prog *fp) {
    for (int j = 0; fp && j < fp->ninstr; j++)
        if (tg_fused_is_core(fp->instr[j].op)) return true;
    return false;
}

static tg_status vk_choose(tg_plan_prog *pg) {
    vm_ins_info *info = tg_mem_calloc(pg->ctx, sizeof *info * (size_t)(pg->norder + 1));
    if (!info) return TG_ENOMEM;
    pg->kinfo = info;
    tg_vk_isa isa = tg_vk_isa_best();
    bool blas = false;
    for (int i = 0; i < pg->norder; i++) {
        choose_kernel(pg, &info[i], isa, i);
        blas = blas || info[i].kind == VM_BLAS ||
               (info[i].kind == VM_FUSED && has_core(tg_fused_node_prog(pg->order[i])));
    }
    if (blas) tg_vm_blas_single_thread();
    return TG_OK;
}

static void vk_release(tg_plan_prog *pg) {
    vm_ins_info *info = pg->kinfo;
    if (!info) return;
    for (int i = 0; i < pg->norder; i++)
        if (info[i].fused) tg_vm_fused_free(info[i].fused);
    tg_mem_free(pg->ctx, info, sizeof *info * (size_t)(pg->norder + 1));
    pg->kinfo = NULL;
}

static bool vk_reuse_ok(const tg_plan_prog *pg, int i) {
    const vm_ins_info *in = tg_vm_info(pg, i);
    if (in->kind == VM_EW) return true;
    if (in->kind != VM_FUSED) return false;
    const tg_fused_prog *fp = tg_fused_node_prog(pg->order[i]);
    return fp && !has_core(fp) && fp->nout == 1 && fp->out[0].reduce < 0;
}

static size_t vk_ws(const tg_plan_prog *pg, int i, const tg_type *in, const tg_type *out) {
    const tg_node *n = pg->order[i];
    const vm_ins_info *info = tg_vm_info(pg, i);
    switch (info->kind) {
    case VM_REDUCE:
        return tg_vm_reduce_ws(n, in, out, pg->nthreads);
    case VM_BLAS:
        return tg_vm_blas_ws(n, in, out, pg->nthreads);
    case VM_FUSED:
        return tg_vm_fused_ws(info->fused, in, out, pg->nthreads);
    default:
        return 0;
    }
}

static bool vk_library(const tg_plan_prog *pg, int i) { return tg_vm_info(pg, i)->kind != VM_REF; }

const tg_plan_kernels tg_vm_kernels = {vk_choose, vk_release, vk_reuse_ok, vk_ws, vk_library};
