/* fuzz_npy.c - fuzz target for the .npy reader (tg_npy_load_mem).
 *
 * For any input: loading never crashes and never reads outside the input; a failure
 * returns a status other than TG_OK, leaves *out NULL and a message naming "<memory>".
 * When the input loads, the tensor is C-contiguous with as many elements as its shape
 * says, every element can be read and printed, and saving it and loading the file back
 * gives the same dtype, shape and bytes (the writer and reader agree).
 * Build with libFuzzer: cmake -DTG_FUZZ=ON with clang (docs/hardening.md); without it
 * the same file is a replay driver that ctest runs over tests/fuzz/corpus/npy.
 */
#include "tgraph.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void check(int ok, const char *what, const char *detail) {
    if (ok) return;
    fprintf(stderr, "fuzz_npy: property violated: %s\n%s\n", what, detail ? detail : "");
    abort();
}

static FILE *devnull(void) {
    static FILE *f;
    if (!f) f = fopen("/dev/null", "w");
    return f;
}

static void roundtrip(const tg_tensor *t) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/tg_fuzz_npy.%ld.npy", (long)getpid());
    check(tg_npy_save(path, t) == TG_OK, "tg_npy_save failed", tg_last_error());
    tg_tensor *u = NULL;
    tg_status st = tg_npy_load(NULL, path, &u);
    unlink(path);
    check(st == TG_OK, "saved tensor does not load back", tg_last_error());
    check(tg_tensor_dtype(u) == tg_tensor_dtype(t), "dtype changed on a round trip", NULL);
    check(tg_tensor_ndim(u) == tg_tensor_ndim(t), "rank changed on a round trip", NULL);
    for (int i = 0; i < tg_tensor_ndim(t); i++)
        check(tg_tensor_shape(u)[i] == tg_tensor_shape(t)[i], "shape changed on a round trip",
              NULL);
    size_t nb = (size_t)tg_tensor_size(t) * tg_dtype_size(tg_tensor_dtype(t));
    check(nb == 0 || memcmp(tg_tensor_data(u), tg_tensor_data(t), nb) == 0,
          "data changed on a round trip", NULL);
    tg_tensor_free(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_tensor *t = (tg_tensor *)1;
    tg_status st = tg_npy_load_mem(NULL, data, size, &t);
    if (st != TG_OK) {
        check(t == NULL, "failed load left a tensor", NULL);
        check(strncmp(tg_last_error(), "<memory>", 8) == 0 ||
                  strstr(tg_last_error(), "out of memory") != NULL,
              "error message without the input's name", tg_last_error());
        return 0;
    }
    check(t != NULL, "load succeeded without a tensor", NULL);
    check(tg_tensor_is_contiguous(t), "loaded tensor is not contiguous", NULL);
    int nd = tg_tensor_ndim(t);
    check(nd >= 0 && nd <= TG_MAX_DIMS, "rank out of range", NULL);
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        check(tg_tensor_shape(t)[i] >= 0, "negative extent", NULL);
        n *= tg_tensor_shape(t)[i];
    }
    check(n == tg_tensor_size(t), "size differs from the product of the shape", NULL);
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += tg_tensor_get_f64(t, i);
    (void)acc;
    if (devnull()) check(tg_tensor_print(t, devnull()) == TG_OK, "print failed", tg_last_error());
    roundtrip(t);
    tg_tensor_free(t);
    return 0;
}

#include "fuzz_replay.h"
