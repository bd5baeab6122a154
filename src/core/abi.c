/* abi.c - the versioned structs of the public API (tgraph.h, docs/c-api.md "ABI").
 *
 * An option or report struct passed by pointer starts with `size_t size`, the sizeof of
 * the struct its caller was compiled with; fields are only ever added at the end. The
 * library copies the caller's struct into its own version before reading it (a field the
 * caller does not have is zero, its default) and writes a report back only as far as the
 * caller's size reaches, so a program keeps working with a later library. A program built
 * with a newer header may pass a larger struct: accepted when the fields this library
 * does not know are all zero (left at their defaults), refused when one is set.
 *
 * Invariants: nothing is read or written past the caller's size; a size of 0 (a struct
 * set up without its TG_..._OPTS macro) is an error, never taken for a default.
 */
#include "core.h"

#include <ctype.h>

/* Above this a size is taken for garbage (a struct left uninitialized), not a newer
 * version: no version of these structs comes near it. */
#define STRUCT_SIZE_MAX 4096

/* Checks a caller's size against this library's version (own bytes, `first` the least). */
static tg_status size_check(const void *p, size_t own, size_t first, const char *fn,
                            const char *type) {
    size_t size = *(const size_t *)p;
    if (size >= first && size <= STRUCT_SIZE_MAX) return TG_OK;
    char macro[64];
    size_t i = 0;
    for (; type[i] && i + 1 < sizeof macro; i++) macro[i] = (char)toupper((unsigned char)type[i]);
    macro[i] = '\0';
    if (size == 0)
        return tg_set_error(TG_EINVAL,
                            "%s: %s.size is 0: set it to sizeof(%s), as %s(...) does "
                            "(docs/c-api.md, \"ABI\")",
                            fn, type, type, macro);
    return tg_set_error(TG_EINVAL,
                        "%s: %s.size is %zu, not the size of a %s (%zu bytes in this "
                        "version): set it to sizeof(%s), as %s(...) does",
                        fn, type, size, type, own, type, macro);
}

tg_status tg_struct_in(void *dst, size_t dst_size, const void *src, size_t first, const char *fn,
                       const char *type) {
    memset(dst, 0, dst_size);
    if (src) {
        tg_status st = size_check(src, dst_size, first, fn, type);
        if (st != TG_OK) return st;
        size_t size = *(const size_t *)src;
        const unsigned char *tail = (const unsigned char *)src;
        for (size_t i = dst_size; i < size; i++)
            if (tail[i])
                return tg_set_error(TG_EUNSUPPORTED,
                                    "%s: %s sets a field this version of tgraph (%s) does not "
                                    "know: byte %zu of %zu, past its %zu (a program built with "
                                    "a newer tgraph.h)",
                                    fn, type, TG_VERSION, i, size, dst_size);
        memcpy(dst, src, size < dst_size ? size : dst_size);
    }
    *(size_t *)dst = dst_size;
    return TG_OK;
}

tg_status tg_struct_out_check(const void *p, size_t own, size_t first, const char *fn,
                              const char *type) {
    /* a larger struct than the library's is fine: the fields it does not know stay as set */
    return p ? size_check(p, own, first, fn, type) : TG_OK;
}

void tg_struct_out(void *dst, const void *src, size_t src_size) {
    size_t size = *(const size_t *)dst, n = size < src_size ? size : src_size;
    if (n > sizeof(size_t))
        memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
               n - sizeof(size_t));
}
