/* type.c - tensor types: dtype + static shape ('?' = -1), equality and formatting.
 * Formatting is the one used in every message: "f32[?,784]", "f64[]" for scalars. */
#include "ir.h"

#include <stdio.h>

bool tg_type_equal(const tg_type *a, const tg_type *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

bool tg_type_known(const tg_type *t) {
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] < 0) return false;
    return true;
}

char *tg_type_str(const tg_type *t, char *buf, size_t n) {
    size_t used = 0;
    int w = snprintf(buf, n, "%s[", tg_dtype_name((tg_dtype)t->dtype));
    used = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < t->ndim && used < n; i++) {
        if (t->shape[i] < 0)
            w = snprintf(buf + used, n - used, "%s?", i ? "," : "");
        else
            w = snprintf(buf + used, n - used, "%s%lld", i ? "," : "", (long long)t->shape[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

void tg_type_of_tensor(const tg_type *st, const tg_tensor *t, tg_type *rt) {
    *rt = (tg_type){.dtype = (uint8_t)t->dtype, .ndim = (uint8_t)t->ndim};
    for (int i = 0; i < t->ndim; i++) {
        rt->shape[i] = t->shape[i];
        if (t->shape[i] == 1 && (i >= st->ndim || st->shape[i] != 1)) rt->nobcast |= 1u << i;
    }
}
