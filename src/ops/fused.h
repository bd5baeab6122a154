/* fused.h - the `fused` op and its compiled program, shared by the op record (fused.c),
 * the fuse pass (src/rewrite/fuse.c) and the backends that evaluate fused nodes blockwise.
 *
 * A fused node `a, b = fused{E1; E2}(x, y)` has tensor inputs %0..%n-1 and one attribute,
 * `expr` (a string): one expression per output, separated by ';', in .tg call syntax over
 * %k (the node's inputs), weak literals and elementwise ops:
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
 * The compiled program (tg_fused_prog) is a flat list of instructions in dependency order.
 * Slots number values: slots 0..nin-1 are the node's inputs, slot nin+j is instruction j's
 * value. Identical subexpressions share one instruction (the text of a DAG repeats shared
 * parts; parsing merges them again), so a value used twice is computed once.
 *
 * Typing (tg_fused_type) runs each instruction's op record (promote, then infer) over the
 * input types, static or run-time ones, and fills a type per slot and per output: the result
 * types are those of the unfused graph. An operand whose dtype differs from what the op's
 * promotion asks for is an error (write cast(...)), except a literal, which is converted
 * (NEP 50: an integer literal must fit the integer dtype it meets).
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
 * Invariants: a program owns all its memory (one arena from its ctx); parsing is iterative
 * (an explicit stack, nesting limited to TG_FUSED_MAX_DEPTH) and linear in the text; every
 * error names the position inside the expression ("column 12").
 */
#ifndef TG_FUSED_H
#define TG_FUSED_H

#include "ops.h"

#define TG_FUSED_MAX_ARGS   3    /* most operands of one instruction (clip, where) */
#define TG_FUSED_MAX_INSTRS 4096 /* most instructions in one program (after sharing) */
#define TG_FUSED_MAX_DEPTH  1024 /* deepest nesting of calls in one expression */
#define TG_FUSED_CONST      (-1) /* tg_fused_instr.op of a literal */
#define TG_FUSED_A_EXPR     0    /* index of `expr` in the op's attribute schema */

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
    int pos;       /* byte offset in the expression (messages), -1 if built */
} tg_fused_instr;

typedef struct tg_fused_out {
    int slot;              /* the output's value, or the value a reduction reduces */
    int reduce;            /* -1: elementwise output; else the reduction's tg_op */
    tg_aval attrs[2];      /* reduction: the op's normalized `axis` (NONE: every axis,
                              or INTS as written, maybe negative) and `keepdims` (BOOL) */
    bool red[TG_MAX_DIMS]; /* after typing: the axes of the reduced slot it reduces */
} tg_fused_out;

typedef struct tg_fused_prog {
    tg_ctx *ctx;           /* allocator of the arena */
    tg_arena arena;        /* owns the program and every array below */
    int nin;               /* node inputs: slots 0..nin-1 */
    int ninstr;            /* instructions: slot nin + j is instr[j]'s value */
    int nout;              /* outputs, in the node's output order */
    int nslot;             /* nin + ninstr */
    tg_fused_instr *instr; /* ninstr of them, in dependency order */
    tg_fused_out *out;     /* nout of them */
    int capinstr, capout;  /* room in instr / out (builders) */
    /* filled by tg_fused_type: */
    tg_type *type;     /* per slot: dtype, shape, weakness */
    tg_type *out_type; /* per output: the node's output types */
    tg_type space;     /* iteration space: the broadcast shape of the values the
                          outputs read (elementwise outputs, reduced slots) */
    bool uniform;      /* the guarantees listed above hold */
    bool reduces;      /* the outputs are reductions */
} tg_fused_prog;

/* Parses `expr` (len bytes, need not be NUL-terminated) for a node with nin inputs. On
 * error returns the status with a message naming the column in msg (n bytes), *out NULL. */
tg_status tg_fused_parse(tg_ctx *ctx, const char *expr, size_t len, int nin, tg_fused_prog **out,
                         char *msg, size_t n);
/* The program of a fused node (parses its `expr`). */
tg_status tg_fused_node_prog(tg_ctx *ctx, const tg_node *node, tg_fused_prog **out, char *msg,
                             size_t n);
void tg_fused_free(tg_fused_prog *p); /* NULL is a no-op */

/* Types the program for inputs of types in[0..p->nin): fills p->type, p->out_type,
 * p->space, p->uniform, p->reduces, out[].red and the literals' dtype and value. `runtime`:
 * the types are concrete (every extent known; `nobcast` marks '?' extents that are 1), as
 * in tg_infer. Errors name the instruction's column in msg. May be called again with other
 * types. */
tg_status tg_fused_type(tg_fused_prog *p, const tg_type *in, bool runtime, char *msg, size_t n);

/* Ops allowed inside expressions (elementwise ops) and at an output's root (reductions whose
 * record says they are plain, tg_reduce_plain: evaluators read the record's `reduce`). */
bool tg_fused_can_inline(int op);
bool tg_fused_can_reduce(int op);

/* ---- building programs (the fuse pass) ----
 * tg_fused_new makes an empty program with nin inputs; instructions are appended in
 * dependency order and return their slot (-1 when out of memory or over the limits; the
 * error is set). attrs are copied (NULL: the op's defaults). */
tg_fused_prog *tg_fused_new(tg_ctx *ctx, int nin);
int tg_fused_add_op(tg_fused_prog *p, int op, const int *in, int nin, const tg_aval *attrs);
int tg_fused_add_const(tg_fused_prog *p, char lit, int64_t i, double f, tg_dtype dtype);
bool tg_fused_add_out(tg_fused_prog *p, int slot, int reduce, const tg_aval *reduce_attrs);
/* The expression text of p (outputs joined by "; "; shared values are written out where
 * each is used), NUL-terminated, allocated from ctx (free with tg_mem_free(ctx, s, len + 1)).
 * NULL when out of memory or when the text would exceed max_len bytes (max_len 0: no limit). */
char *tg_fused_format(const tg_fused_prog *p, size_t max_len, size_t *len);

#endif
