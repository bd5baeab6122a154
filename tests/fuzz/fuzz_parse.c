/* fuzz_parse.c - fuzz target for the .tg parser and printers.
 *
 * For any input: parsing never crashes, and a failure leaves a "fuzz.tg:LINE:COL: ..."
 * message. When the input parses, its printed text must parse too and print the same
 * text again (print(parse(print(parse(x)))) == print(parse(x))), and the Graphviz
 * printer must succeed. A violated property aborts (that is how a fuzzer sees it).
 *
 * Build with libFuzzer: cmake -DTG_FUZZ=ON with clang (docs/hardening.md); without it the
 * same file is a replay driver (fuzz_replay.h) that ctest runs over the corpus.
 */
#include "tgraph.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_INPUT ((size_t)1 << 20)

static void check(int ok, const char *what, const char *detail) {
    if (ok) return;
    fprintf(stderr, "fuzz_parse: property violated: %s\n%s\n", what, detail ? detail : "");
    abort();
}

/* The module printed into a malloc'd string (NULL if the printer failed). */
static char *print_text(const tg_module *m, size_t *len) {
    char *buf = NULL;
    *len = 0;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    tg_status st = tg_module_print(m, f);
    fclose(f);
    if (st != TG_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void check_dot(const tg_module *m) {
    FILE *f = fopen("/dev/null", "w");
    if (!f) return;
    for (int i = 0; i < tg_module_func_count(m); i++)
        check(tg_graph_print_dot(tg_module_func(m, i), f) == TG_OK, "dot printer failed",
              tg_last_error());
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, (const char *)data, size, "fuzz.tg", &m);
    if (st != TG_OK) {
        check(m == NULL, "failed parse returned a module", NULL);
        check(st == TG_ENOMEM || strncmp(tg_last_error(), "fuzz.tg:", 8) == 0,
              "error message without a position", tg_last_error());
        return 0;
    }
    size_t len1, len2;
    char *t1 = print_text(m, &len1);
    check(t1 != NULL, "printer failed", tg_last_error());
    check_dot(m);
    tg_module *m2 = NULL;
    st = tg_module_parse(NULL, t1, len1, "printed.tg", &m2);
    if (st != TG_OK) fprintf(stderr, "%s\n", t1);
    check(st == TG_OK, "printed text does not parse", tg_last_error());
    /* the printed module may hold more functions: the backward functions that grad made
       for calls are printed (before their callers) as functions of their own */
    check(tg_module_func_count(m2) >= tg_module_func_count(m), "functions were lost", NULL);
    char *t2 = print_text(m2, &len2);
    check(t2 != NULL, "printer failed on the reparsed module", tg_last_error());
    if (len1 != len2 || memcmp(t1, t2, len1) != 0) fprintf(stderr, "%s\n----\n%s\n", t1, t2);
    check(len1 == len2 && memcmp(t1, t2, len1) == 0, "print(parse(print)) differs", NULL);
    free(t1);
    free(t2);
    tg_module_free(m2);
    tg_module_free(m);
    return 0;
}

#include "fuzz_replay.h"
