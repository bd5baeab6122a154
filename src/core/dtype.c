/* dtype.c - the dtype table, names, and element load/store with conversion.
 *
 * Owns: tg_dtype_infos, tg_dtype_name/size/parse/is_float/is_int, tg_load_f64/i64,
 * tg_store_f64/i64.
 * Conversion rules (defined for every input, no undefined behaviour):
 *  - Loads read through memcpy (any alignment). A bool byte is true when non-zero, so a
 *    stray byte 2 in a bool buffer never becomes an invalid C bool.
 *  - Integer stores wrap modulo 2^bits (two's complement), computed through uint64_t.
 *  - float -> integer (tg_store_f64 into an integer dtype, tg_load_i64 of a float):
 *    truncation toward zero; NaN gives 0; values beyond the target's range saturate to
 *    its minimum/maximum (JAX/XLA and Rust semantics). This agrees with NumPy for every
 *    value that fits the target; NumPy's result for the others is platform-dependent.
 *  - integer -> float rounds to nearest (C conversion); double -> float32 follows IEEE
 *    (out-of-range values become +-inf).
 *  - anything -> bool is v != 0 (NaN is true, as in NumPy).
 */
#include "core.h"

#include <math.h>

const tg_dtype_info tg_dtype_infos[TG_DT_COUNT] = {
    [TG_DT_BOOL] = {"bool", "bool", 1, 'b'},  [TG_DT_I8] = {"i8", "int8", 1, 'i'},
    [TG_DT_I16] = {"i16", "int16", 2, 'i'},   [TG_DT_I32] = {"i32", "int32", 4, 'i'},
    [TG_DT_I64] = {"i64", "int64", 8, 'i'},   [TG_DT_U8] = {"u8", "uint8", 1, 'u'},
    [TG_DT_F32] = {"f32", "float32", 4, 'f'}, [TG_DT_F64] = {"f64", "float64", 8, 'f'},
};

/* The table above must agree with TG_DTYPE_LIST (names and C type sizes). */
#define TG_X_CHECK(U, ct, s, sz) _Static_assert(sizeof(ct) == (sz), "size of " #ct);
TG_DTYPE_LIST(TG_X_CHECK)
#undef TG_X_CHECK

static bool dt_valid(tg_dtype dt) { return (int)dt >= 0 && (int)dt < TG_DT_COUNT; }

const char *tg_dtype_name(tg_dtype dt) { return dt_valid(dt) ? tg_dtype_infos[dt].name : "?"; }

size_t tg_dtype_size(tg_dtype dt) { return dt_valid(dt) ? tg_dtype_infos[dt].size : 0; }

bool tg_dtype_parse(const char *name, tg_dtype *out) {
    if (!name) return false;
    for (int i = 0; i < TG_DT_COUNT; i++) {
        const tg_dtype_info *d = &tg_dtype_infos[i];
        if (strcmp(name, d->name) == 0 || strcmp(name, d->numpy) == 0) {
            if (out) *out = (tg_dtype)i;
            return true;
        }
    }
    return false;
}

bool tg_dtype_is_float(tg_dtype dt) { return dt == TG_DT_F32 || dt == TG_DT_F64; }

bool tg_dtype_is_int(tg_dtype dt) {
    return dt == TG_DT_I8 || dt == TG_DT_I16 || dt == TG_DT_I32 || dt == TG_DT_I64 ||
           dt == TG_DT_U8;
}

/* float -> int64 with truncation, NaN -> 0, saturation at the int64 range. */
static int64_t f64_to_i64(double v) {
    if (isnan(v)) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX; /* 2^63 */
    if (v < -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v; /* in range after truncation: defined */
}

/* float -> an integer range [lo, hi] with truncation, NaN -> 0, saturation. */
static int64_t f64_to_range(double v, int64_t lo, int64_t hi) {
    int64_t x = f64_to_i64(v);
    return x < lo ? lo : x > hi ? hi : x;
}

double tg_load_f64(const void *p, tg_dtype dt) {
    switch (dt) {
    case TG_DT_F32: {
        float x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    case TG_DT_F64: {
        double x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    default:
        return (double)tg_load_i64(p, dt);
    }
}

int64_t tg_load_i64(const void *p, tg_dtype dt) {
    switch (dt) {
    case TG_DT_BOOL:
        return *(const unsigned char *)p != 0;
    case TG_DT_I8: {
        int8_t x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    case TG_DT_I16: {
        int16_t x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    case TG_DT_I32: {
        int32_t x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    case TG_DT_I64: {
        int64_t x;
        memcpy(&x, p, sizeof x);
        return x;
    }
    case TG_DT_U8:
        return *(const unsigned char *)p;
    case TG_DT_F32:
    case TG_DT_F64:
        return f64_to_i64(tg_load_f64(p, dt));
    default:
        TG_ASSERT(!"tg_load_i64: invalid dtype");
        return 0;
    }
}

void tg_store_i64(void *p, tg_dtype dt, int64_t v) {
    uint64_t u = (uint64_t)v; /* two's complement bits: the wrap is a plain truncation */
    switch (dt) {
    case TG_DT_BOOL:
        *(unsigned char *)p = v != 0;
        break;
    case TG_DT_I8:
    case TG_DT_U8: {
        uint8_t x = (uint8_t)u;
        memcpy(p, &x, sizeof x);
        break;
    }
    case TG_DT_I16: {
        uint16_t x = (uint16_t)u;
        memcpy(p, &x, sizeof x);
        break;
    }
    case TG_DT_I32: {
        uint32_t x = (uint32_t)u;
        memcpy(p, &x, sizeof x);
        break;
    }
    case TG_DT_I64:
        memcpy(p, &u, sizeof u);
        break;
    case TG_DT_F32: {
        float x = (float)v;
        memcpy(p, &x, sizeof x);
        break;
    }
    case TG_DT_F64: {
        double x = (double)v;
        memcpy(p, &x, sizeof x);
        break;
    }
    default:
        TG_ASSERT(!"tg_store_i64: invalid dtype");
    }
}

void tg_store_f64(void *p, tg_dtype dt, double v) {
    switch (dt) {
    case TG_DT_BOOL:
        *(unsigned char *)p = v != 0; /* NaN != 0 */
        break;
    case TG_DT_I8:
        tg_store_i64(p, dt, f64_to_range(v, INT8_MIN, INT8_MAX));
        break;
    case TG_DT_I16:
        tg_store_i64(p, dt, f64_to_range(v, INT16_MIN, INT16_MAX));
        break;
    case TG_DT_I32:
        tg_store_i64(p, dt, f64_to_range(v, INT32_MIN, INT32_MAX));
        break;
    case TG_DT_I64:
        tg_store_i64(p, dt, f64_to_i64(v));
        break;
    case TG_DT_U8:
        tg_store_i64(p, dt, f64_to_range(v, 0, UINT8_MAX));
        break;
    case TG_DT_F32: {
        float x = (float)v;
        memcpy(p, &x, sizeof x);
        break;
    }
    case TG_DT_F64:
        memcpy(p, &v, sizeof v);
        break;
    default:
        TG_ASSERT(!"tg_store_f64: invalid dtype");
    }
}
