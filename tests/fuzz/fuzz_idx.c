/* fuzz_idx.c - fuzz target for the examples' IDX reader (examples/idx.c, idx_parse), raw
 * and gzipped.
 *
 * For any input: idx_parse never crashes, never reads outside the input, and stays within
 * a memory cap (FZ_MEM_LIMIT: a header claiming gigabytes must be refused before anything
 * is allocated, or end in TG_ENOMEM); a failure returns TG_EFORMAT, TG_ELIMIT or
 * TG_ENOMEM with *out NULL and a message. When the input parses, the tensor is contiguous
 * with as many elements as its shape says, every element can be read, nothing stays
 * allocated after it is freed, and for a raw (not gzipped) input, encoding the tensor
 * back as IDX gives exactly the input bytes (the reader accepts no slack).
 * Build with libFuzzer: cmake -DTG_FUZZ=ON with clang (docs/hardening.md); without it the
 * same file is a replay driver that ctest runs over tests/fuzz/corpus/idx.
 */
#include "../../examples/idx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_MEM_LIMIT ((size_t)64 << 20)

static void check(int ok, const char *what, const char *detail) {
    if (ok) return;
    fprintf(stderr, "fuzz_idx: property violated: %s\n%s\n", what, detail ? detail : "");
    abort();
}

static int type_code(tg_dtype dt) {
    switch (dt) {
    case TG_DT_U8:
        return 0x08;
    case TG_DT_I8:
        return 0x09;
    case TG_DT_I16:
        return 0x0B;
    case TG_DT_I32:
        return 0x0C;
    case TG_DT_F32:
        return 0x0D;
    case TG_DT_F64:
        return 0x0E;
    default:
        return -1;
    }
}

/* The input must be exactly the IDX encoding of t. */
static void check_encoding(const tg_tensor *t, const uint8_t *data, size_t size) {
    int nd = tg_tensor_ndim(t);
    size_t es = tg_dtype_size(tg_tensor_dtype(t)), n = (size_t)tg_tensor_size(t);
    check(size == 4 + 4 * (size_t)nd + n * es, "input length differs from the encoding", NULL);
    check(data[0] == 0 && data[1] == 0 && data[2] == type_code(tg_tensor_dtype(t)) && data[3] == nd,
          "header differs from the encoding", NULL);
    for (int d = 0; d < nd; d++) {
        const uint8_t *e = data + 4 + 4 * d;
        uint64_t ext = (uint64_t)e[0] << 24 | (uint64_t)e[1] << 16 | (uint64_t)e[2] << 8 | e[3];
        check(ext == (uint64_t)tg_tensor_shape(t)[d], "extent differs from the header", NULL);
    }
    const uint8_t *src = data + 4 + 4 * (size_t)nd, *dst = tg_tensor_data(t);
    for (size_t i = 0; i < n; i++)
        for (size_t b = 0; b < es; b++) /* file big-endian, memory native (little) */
            check(src[i * es + b] == dst[i * es + (es - 1 - b)], "element bytes differ", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_ctx *ctx = tg_ctx_new(NULL, NULL);
    if (!ctx) return 0;
    tg_ctx_set_mem_limit(ctx, FZ_MEM_LIMIT);
    tg_tensor *t = (tg_tensor *)1;
    char err[512] = "";
    tg_status st = idx_parse(ctx, data, size, &t, err, sizeof err);
    if (st != TG_OK) {
        check(t == NULL, "failed parse left a tensor", err);
        check(st == TG_EFORMAT || st == TG_ELIMIT || st == TG_ENOMEM, "unexpected status", err);
        check(err[0] != '\0', "failure without a message", NULL);
    } else {
        check(t != NULL, "parse succeeded without a tensor", NULL);
        check(tg_tensor_is_contiguous(t), "tensor is not contiguous", NULL);
        check(type_code(tg_tensor_dtype(t)) >= 0, "dtype outside the IDX types", NULL);
        int64_t n = 1;
        for (int d = 0; d < tg_tensor_ndim(t); d++) n *= tg_tensor_shape(t)[d];
        check(n == tg_tensor_size(t), "size differs from the product of the shape", NULL);
        double acc = 0;
        for (int64_t i = 0; i < n; i++) acc += tg_tensor_get_f64(t, i);
        (void)acc;
        if (!(size >= 2 && data[0] == 0x1f && data[1] == 0x8b)) check_encoding(t, data, size);
        tg_tensor_free(t);
    }
    char live[64];
    snprintf(live, sizeof live, "%zu bytes", tg_ctx_mem_used(ctx));
    check(tg_ctx_mem_used(ctx) == 0, "memory left live in the context", live);
    tg_ctx_free(ctx);
    return 0;
}

#include "fuzz_replay.h"
