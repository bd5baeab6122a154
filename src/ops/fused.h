/* fused.h - the `fused` op and its program, shared by the op record (fused.c), the fuse
 * pass (src/rewrite/fuse.c), the .tg parser and printer (src/text) and the backends that
 * evaluate fused nodes blockwise.
 *
 * A fused node `a, b = fused{E1; E2}(x, y)` has tensor inputs %0..%n-1 and one attribute,
 * `expr`, which holds its program (tg_fused_prog) as op data (ir.h, TG_ATTR_DATA): a
 * structure, immutable once made, reference counted, shared by the clones of the node. Text
 * is only for the edges: the .tg parser reads `fused{...}` into a program
 * (src/text/fused_expr.c) and the printer writes it back (tg_fused_format); the fuse pass
 * builds programs directly, and the backends read them. The text of a program is one
 * expression per output, separated by ';', in .tg call syntax over %k (the node's inputs),
 * weak literals and elementwise ops:
 *
 *     add(mul(exp(neg(mul(%0, %0))), sin(%0)), div(%0, 2))
 *     sum(exp(sub(%0, %1)), axis=[1]); max(%0, axis=[1])
 *
 * At the root of an output, and only there, one reduction (tg_fused_can_reduce: a plain
 * reduction of ops.h, tg_reduce_plain: sum, prod, mean, max, min) may reduce an elementwise
 * expression (or an input) with its usual attributes `axis` and `keepdims`. Every op keeps
 * its own meaning: the node computes exactly what the unfused graph computes, with the same
 * promotion (literals are weak and adopt the dtype they meet, as in .tg text), broadcasting
 * and run-time errors.
 *
 * A program is a flat list of instructions in dependency order. Slots number values: slots
 * 0..nin-1 are the node's inputs, slot nin+j is instruction j's value. Identical calls share
 * one instruction (builders find them, tg_fused_add_call), so a value used twice is computed
 * once, however it was written; literals are never shared (each has one user, so typing can
 * give it the dtype that user's promotion asks for).
 *
 * Typing (tg_fused_type) runs each instruction's op record (promote, then infer) over the
 * input types, static or run-time ones, and fills a type per slot and per output: the result
 * types are those of the unfused graph. An operand whose dtype differs from what the op's
 * promotion asks for is an error (write cast(...)), except a literal, which is converted
 * (NEP 50: an integer literal must fit the integer dtype it meets). Typing writes into the
 * program, so it types a private copy (tg_fused_copy, tg_fused_node_typed), never the
 * program a node holds.
 *
 * What a blockwise evaluator may rely on, for programs made by the fuse pass (checked by
 * `uniform` after typing; hand-written programs may lack it, run those with the op's
 * reference kernel, tg_op_fused.ref):
 *  - every instruction that is not a literal has the shape `space` (the iteration space);
 *    inputs have that shape or broadcast to it (right-aligned, static 1 extents); literals
 *    are 0-d;
 *  - either every output is elementwise (its type has shape `space`), or every output is a
 *    reduction of a slot of shape `space`, and all those reductions reduce the same axes
 *    with the same keepdims (one pass: accumulate per output element).
 * Instruction operands may have dtypes that differ from the instruction's result (where's
 * condition is bool, comparisons give bool, cast converts): use the slot types.
 *
 * Invariants: a program owns its memory (one arena from its ctx; a copy shares the attributes
 * of the program it copies and holds a reference on it); positions (`pos`) name the place in
 * the expression text for messages ("column 12") and take no part in comparisons.
 */
#ifndef TG_FUSED_H
#define TG_FUSED_H

#include "ops.h"

#define TG_FUSED_MAX_ARGS   3    /* most operands of one instruction (clip, where) */
#define TG_FUSED_MAX_INSTRS 4096 /* most instructions in one program (after sharing) */
#define TG_FUSED_MAX_DEPTH  1024 /* deepest nesting of calls in one expression text */
#define TG_FUSED_CONST      (-1) /* tg_fused_instr.op of a literal */
#define TG_FUSED_A_EXPR     0    /* index of `expr` (the program) in the op's schema */

typedef struct tg_fused_instr {
    int op;                    /* tg_op of an elementwise op, or TG_FUSED_CONST */
    int nin;                   /* operands (0 for a literal) */
    int in[TG_FUSED_MAX_ARGS]; /* their slots, each smaller than this instruction's slot */
    const tg_aval *attrs;      /* normalized to the op's schema (cast: `dtype` as an INT
                                  holding the tg_dtype); never NULL */
    /* literals: */
    char lit;      /* as written: 'i' int, 'f' float, 'b' bool */
    uint8_t dtype; /* tg_dtype it takes: set by tg_fused_type (builders may set
                      it beforehand: an f32 literal prints in its short form) */
    int64_t i;     /* value as written when `lit` is 'i' or 'b' (bool: 0, 1) */
    double f;      /* value as written when `lit` is 'f' */
    int64_t ci;    /* after typing: the value when `dtype` is an int or bool */
    double cf;     /* after typing: the value when `dtype` is a float (rounded
                      to f32 for f32) */
    int pos;       /* byte offset in the expression text (messages), -1 if built */
} tg_fused_instr;

typedef struct tg_fused_out {
    int slot;              /* the output's value, or the value a reduction reduces */
    int reduce;            /* -1: elementwise output; else the reduction's tg_op */
    tg_aval attrs[2];      /* reduction: the op's normalized `axis` (NONE: every axis,
                              or INTS as written, maybe negative) and `keepdims` (BOOL) */
    bool red[TG_MAX_DIMS]; /* after typing: the axes of the reduced slot it reduces */
} tg_fused_out;

typedef struct tg_fused_prog {
    tg_opdata base;        /* first: a node's `expr` holds &base (tg_fused_data) */
    tg_ctx *ctx;           /* allocator of the arena and the arrays */
    tg_arena arena;        /* owns the attributes and the typing arrays */
    const tg_opdata *src;  /* a copy: the program it copies (a reference) */
    int nin;               /* node inputs: slots 0..nin-1 */
    int ninstr;            /* instructions: slot nin + j is instr[j]'s value */
    int nout;              /* outputs, in the node's output order */
    int nslot;             /* nin + ninstr */
    tg_fused_instr *instr; /* ninstr of them, in dependency order */
    tg_fused_out *out;     /* nout of them */
    int capinstr, capout;  /* room in instr / out (builders) */
    int *tab;              /* builders: identical calls, open addressing over
                              instruction indices (-1 empty) */
    size_t tabcap;         /* its size, a power of two (0: none) */
    /* filled by tg_fused_type (copies): */
    tg_type *type;     /* per slot: dtype, shape, weakness */
    tg_type *out_type; /* per output: the node's output types */
    tg_type space;     /* iteration space: the broadcast shape of the values the
                          outputs read (elementwise outputs, reduced slots) */
    bool uniform;      /* the guarantees listed above hold */
    bool reduces;      /* the outputs are reductions */
    bool core;         /* an instruction is a core op (tg_fused_is_core): not uniform; the
                          reference kernel runs the program block by block of the batch */
} tg_fused_prog;

/* The table of fused programs as op data: hash and equality compare instructions, literals
 * (as written, and the dtype they print for) and outputs; positions are not compared. */
extern const tg_opdata_vt tg_fused_data;

/* Ops allowed inside expressions (elementwise ops and core ops) and at an output's root
 * (reductions whose record says they are plain, tg_reduce_plain: evaluators read the
 * record's `reduce`). */
bool tg_fused_can_inline(int op);
/* Core ops: Blockwise ops (a record with a signature, blockwise.h) of one output and at most
 * TG_FUSED_MAX_ARGS inputs. A program with one (`fused{tanh(add(matmul(%0, %1), %2))}`) is
 * a Blockwise node whose elementwise work before and after its core ops runs in its loop
 * over the batch: the reference kernel splits every value into the blocks of the batch its
 * core ops share (the batch rank of their outputs; the elementwise values are blocks of the
 * cores' output shape) and runs the whole program on each block, one block at a time, so
 * no value of the whole batch but the outputs is ever made. An output may reduce a block's
 * value over its core axes (axes written from the end: `sum(log(...), axis=[-2, -1])` gives
 * one value per block), as a log-density sums log(diag(L)) after a Cholesky factor. A
 * program whose core ops disagree on the batch, or that reduces over batch axes, runs on
 * whole values as any other. Such a program is never `uniform`: the VM runs it block by
 * block itself (src/backend/vm/vm_fcore.c: float products, the LAPACK ops and the
 * reductions), else calls the reference kernel, as the C JIT calls the VM's kernel. */
bool tg_fused_is_core(int op);
bool tg_fused_can_reduce(int op);
/* How the typed program p (a copy typed by tg_fused_type) splits into blocks of the batch:
 * *nbatch, the batch rank every core op's output has, and lead[s] (p->nin of them), the
 * leading (batch) dimensions of input s: those in front of its core where a core op reads
 * it, those in front of the core rank of the instruction where an elementwise one does (its
 * rank less its own leading dimensions, which its readers fix in turn, from the outputs
 * back: core ranks may differ, a diagonal [B,m] beside its matrix [B,m,m]); each input's
 * are right-aligned with the batch (an extent 1 is read at 0), every output is a batch of
 * blocks (of a value, or of its reduction over core axes written from the end). false when
 * p does not split (no core op, a reduction over other axes, core ops or readers that
 * disagree, no memory): p then runs on whole values. */
bool tg_fused_block_plan(const tg_fused_prog *p, int *lead, int *nbatch);

/* ---- building programs (the fuse pass, the .tg parser) ----
 * tg_fused_new makes an empty program with nin inputs, holding one reference (the
 * caller's). Calls are appended in dependency order; each gives its slot. A node takes the
 * program through its attribute value (tg_fused_aval) and tg_ir_node_make_norm, which keeps
 * a reference of its own; from then on nobody changes the program. */
tg_fused_prog *tg_fused_new(tg_ctx *ctx, int nin);

/* An operand of a call being appended: a value, or a literal written into the program. */
typedef struct tg_fused_arg {
    int slot;      /* >= 0: the value in that slot; < 0: the literal below */
    char lit;      /* 'i', 'f' or 'b' */
    uint8_t dtype; /* the dtype it prints for (tg_fused_instr.dtype) */
    int64_t i;     /* 'i', 'b' (0 or 1) */
    double f;      /* 'f' */
    int pos;       /* byte offset in the expression text, -1 if built */
} tg_fused_arg;

/* Appends op(args; attrs), or finds the identical call already in p (same op, operand slots,
 * literal values and attributes); *slot receives its slot. New literals become instructions
 * first, then the call. attrs are normalized to op's schema and copied (NULL: its defaults);
 * pos is where the call starts in the text (-1 if built). TG_EINVAL (an op that cannot be an
 * instruction, an operand that does not exist), TG_ELIMIT (TG_FUSED_MAX_INSTRS) or TG_ENOMEM,
 * with the error set. */
tg_status tg_fused_add_call(tg_fused_prog *p, int op, const tg_fused_arg *args, int nargs,
                            const tg_aval *attrs, int pos, int *slot);
/* Appends an output: the value in `slot` (reduce < 0: not an input), or its reduction by the
 * op `reduce` with reduce_attrs (`axis`, `keepdims`, normalized; copied; NULL: defaults). */
tg_status tg_fused_add_out(tg_fused_prog *p, int slot, int reduce, const tg_aval *reduce_attrs);
/* Gives every instruction built without a position (pos -1) the column of the text of p
 * (tg_fused_format) where it is first written, so that messages about built programs name a
 * column of the printed node, as for programs parsed from text. */
tg_status tg_fused_place(tg_fused_prog *p);
/* The attribute value holding p (for tg_ir_node_make_norm). */
tg_aval tg_fused_aval(const tg_fused_prog *p);
/* Releases the caller's reference (the last one frees p). NULL is a no-op. */
void tg_fused_free(tg_fused_prog *p);

/* ---- reading programs ---- */
/* The expression text of p (outputs joined by "; "; shared values are written out where
 * each is used; attributes at their defaults are left out; an f32 literal in its short
 * form), NUL-terminated, allocated from p's ctx (free with tg_mem_free(p->ctx, s, len + 1)).
 * NULL when out of memory. The .tg printer writes it between the braces of fused{...}. */
char *tg_fused_format(const tg_fused_prog *p, size_t *len);
/* The program of a fused node, borrowed from it; NULL when node is not a fused node. */
const tg_fused_prog *tg_fused_node_prog(const tg_node *node);
/* A private copy of p to type (from ctx, NULL: the default), or NULL when out of memory. */
tg_fused_prog *tg_fused_copy(tg_ctx *ctx, const tg_fused_prog *p);

/* Types p, a program no node holds (a copy, tg_fused_copy), for inputs of types
 * in[0..p->nin): fills p->type, p->out_type, p->space, p->uniform, p->reduces, out[].red
 * and the literals' dtype and value. `runtime`: the types are concrete (every extent known;
 * `nobcast` marks '?' extents that are 1), as in tg_infer. Errors name the instruction's
 * column in msg. May be called again with other types. */
tg_status tg_fused_type(tg_fused_prog *p, const tg_type *in, bool runtime, char *msg, size_t n);
/* A copy of node's program typed for inputs of types in (node->nin of them): *out, which
 * the caller frees; NULL on error, with the message in msg. */
tg_status tg_fused_node_typed(tg_ctx *ctx, const tg_node *node, const tg_type *in, bool runtime,
                              tg_fused_prog **out, char *msg, size_t n);

#endif
