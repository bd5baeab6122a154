/* idx.c - the IDX reader (idx.h): raw or gzipped buffers, parsed into a tgraph tensor.
 *
 * Invariants: nothing is allocated before the header's sizes have been checked against
 * what the buffer can hold; a gzip stream is inflated straight into the tensor's memory
 * (no second copy of the data); every failure leaves *out NULL and a message in err.
 */
#include "idx.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define GZIP_MAX_RATIO 1032u /* deflate never expands more than this (RFC 1951 limits) */

static tg_status fail(char *err, size_t errsz, tg_status st, const char *fmt, ...) {
    if (err && errsz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errsz, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* A source of bytes: the raw buffer, or a zlib stream over it. */
typedef struct reader {
    const unsigned char *buf; /* raw: the whole buffer */
    size_t len, pos;          /* raw: its size and the read position */
    z_stream z;               /* gzip: the inflater */
    int gz;                   /* 1 when the buffer is gzip */
    int ended;                /* gzip: Z_STREAM_END seen */
    int zerr;                 /* gzip: a zlib error code other than Z_OK/Z_BUF_ERROR, or 0 */
} reader;

/* Reads up to n bytes into dst; returns how many it got (fewer: end of data or error). */
static size_t rd_read(reader *r, void *dst, size_t n) {
    if (!r->gz) {
        size_t k = r->len - r->pos < n ? r->len - r->pos : n;
        if (k) memcpy(dst, r->buf + r->pos, k);
        r->pos += k;
        return k;
    }
    size_t got = 0;
    unsigned char *d = dst;
    while (got < n && !r->ended && !r->zerr) {
        size_t chunk = n - got > UINT_MAX ? UINT_MAX : n - got;
        r->z.next_out = d + got;
        r->z.avail_out = (uInt)chunk;
        int zs = inflate(&r->z, Z_NO_FLUSH);
        got += chunk - r->z.avail_out;
        if (zs == Z_STREAM_END)
            r->ended = 1;
        else if (zs == Z_BUF_ERROR)
            break; /* no progress possible: the input ended before the stream did */
        else if (zs != Z_OK)
            r->zerr = zs;
    }
    return got;
}

/* The message for a short read of `what`. */
static tg_status short_read(const reader *r, char *err, size_t errsz, const char *what, size_t want,
                            size_t got) {
    if (r->zerr)
        return fail(err, errsz, TG_EFORMAT, "corrupt gzip data while reading the %s (%s)", what,
                    r->z.msg ? r->z.msg : zError(r->zerr));
    return fail(err, errsz, TG_EFORMAT, "truncated: the %s needs %zu bytes, only %zu remain", what,
                want, got);
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int dtype_of(unsigned code, tg_dtype *dt) {
    switch (code) {
    case 0x08:
        *dt = TG_DT_U8;
        return 1;
    case 0x09:
        *dt = TG_DT_I8;
        return 1;
    case 0x0B:
        *dt = TG_DT_I16;
        return 1;
    case 0x0C:
        *dt = TG_DT_I32;
        return 1;
    case 0x0D:
        *dt = TG_DT_F32;
        return 1;
    case 0x0E:
        *dt = TG_DT_F64;
        return 1;
    default:
        return 0;
    }
}

/* Big-endian elements of `size` bytes to the host's order, in place. */
static void to_host(unsigned char *p, int64_t n, size_t size) {
    const uint16_t one = 1;
    if (size == 1 || *(const unsigned char *)&one == 0) return; /* big-endian host */
    for (int64_t i = 0; i < n; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

static tg_status parse(tg_ctx *ctx, reader *r, size_t len, tg_tensor **out, char *err,
                       size_t errsz) {
    unsigned char head[4 + 4 * IDX_MAX_DIMS];
    size_t got = rd_read(r, head, 4);
    if (got < 4) return short_read(r, err, errsz, "magic number", 4, got);
    tg_dtype dt;
    if (head[0] != 0 || head[1] != 0)
        return fail(err, errsz, TG_EFORMAT,
                    "bad magic number %02x %02x %02x %02x: not an IDX file (it starts "
                    "with two zero bytes)",
                    head[0], head[1], head[2], head[3]);
    if (!dtype_of(head[2], &dt))
        return fail(err, errsz, TG_EFORMAT, "bad magic number: unknown IDX type code 0x%02x",
                    head[2]);
    int ndim = head[3];
    if (ndim > IDX_MAX_DIMS)
        return fail(err, errsz, TG_ELIMIT, "%d dimensions: at most %d are supported", ndim,
                    IDX_MAX_DIMS);
    got = rd_read(r, head + 4, 4 * (size_t)ndim);
    if (got < 4 * (size_t)ndim) return short_read(r, err, errsz, "extents", 4 * (size_t)ndim, got);

    int64_t shape[IDX_MAX_DIMS];
    uint64_t count = 1;
    size_t esize = tg_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        shape[i] = (int64_t)be32(head + 4 + 4 * i);
        if (shape[i] && count > (uint64_t)INT64_MAX / 16 / (uint64_t)shape[i])
            return fail(err, errsz, TG_ELIMIT,
                        "extents overflow: the header claims more than "
                        "2^59 elements");
        count *= (uint64_t)shape[i];
    }
    uint64_t need = count * esize; /* fits: count < 2^59, esize <= 8 */
    uint64_t header = 4 + 4 * (uint64_t)ndim;
    if (!r->gz) {
        uint64_t have = len - header;
        if (need > have)
            return fail(err, errsz, TG_EFORMAT,
                        "truncated: the header claims %llu bytes of "
                        "data, the file holds %llu",
                        (unsigned long long)need, (unsigned long long)have);
        if (need < have)
            return fail(err, errsz, TG_EFORMAT,
                        "%llu bytes after the %llu bytes of data the "
                        "header claims",
                        (unsigned long long)(have - need), (unsigned long long)need);
    } else {
        /* the trailer's ISIZE is the inflated size modulo 2^32 */
        const unsigned char *t = r->buf + len - 4;
        uint32_t isize =
            (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
        if (need > (uint64_t)len * GZIP_MAX_RATIO)
            return fail(err, errsz, TG_ELIMIT,
                        "the header claims %llu bytes of data, more than "
                        "a gzip stream of %zu bytes can hold",
                        (unsigned long long)need, len);
        if ((uint32_t)(header + need) != isize)
            return fail(err, errsz, TG_EFORMAT,
                        "the header claims %llu bytes of data, the gzip "
                        "trailer says the file has %lu bytes in all",
                        (unsigned long long)need, (unsigned long)isize);
    }
    if (need > SIZE_MAX / 2)
        return fail(err, errsz, TG_ELIMIT, "%llu bytes of data: too large for this machine",
                    (unsigned long long)need);

    tg_tensor *t = tg_tensor_new(ctx, dt, ndim, ndim ? shape : NULL);
    if (!t)
        return fail(err, errsz, TG_ENOMEM, "cannot allocate %llu bytes for the data (%s)",
                    (unsigned long long)need, tg_last_error());
    unsigned char *data = tg_tensor_data(t);
    got = need ? rd_read(r, data, (size_t)need) : 0;
    if (got < need) {
        tg_tensor_free(t);
        return short_read(r, err, errsz, "data", (size_t)need, got);
    }
    if (r->gz) { /* the stream must end here, with nothing after it */
        unsigned char extra;
        size_t more = rd_read(r, &extra, 1);
        const char *why = more            ? "data past what the header claims"
                          : r->zerr       ? "corrupt gzip data after the elements"
                          : !r->ended     ? "the gzip stream is truncated"
                          : r->z.avail_in ? "bytes after the end of the gzip stream"
                                          : NULL;
        if (why) {
            tg_tensor_free(t);
            return fail(err, errsz, TG_EFORMAT, "%s", why);
        }
    }
    to_host(data, (int64_t)count, esize);
    *out = t;
    return TG_OK;
}

tg_status idx_parse(tg_ctx *ctx, const void *buf, size_t len, tg_tensor **out, char *err,
                    size_t errsz) {
    if (err && errsz) err[0] = '\0';
    if (!out) return fail(err, errsz, TG_EINVAL, "idx_parse: out is NULL");
    *out = NULL;
    if (!buf && len) return fail(err, errsz, TG_EINVAL, "idx_parse: buf is NULL");
    reader r = {.buf = buf, .len = len};
    const unsigned char *b = buf;
    r.gz = len >= 2 && b[0] == 0x1f && b[1] == 0x8b;
    if (!r.gz) return parse(ctx, &r, len, out, err, errsz);
    if (len < 18) /* 10-byte header + 8-byte trailer */
        return fail(err, errsz, TG_EFORMAT, "truncated gzip file (%zu bytes)", len);
    if (len > UINT_MAX)
        return fail(err, errsz, TG_ELIMIT, "gzip file of %zu bytes: too large", len);
    r.z.next_in = (Bytef *)(uintptr_t)buf; /* zlib does not write through next_in */
    r.z.avail_in = (uInt)len;
    int zs = inflateInit2(&r.z, 16 + MAX_WBITS); /* gzip wrapper only */
    if (zs != Z_OK)
        return fail(err, errsz, zs == Z_MEM_ERROR ? TG_ENOMEM : TG_EINTERNAL,
                    "cannot start zlib: %s", zError(zs));
    tg_status st = parse(ctx, &r, len, out, err, errsz);
    inflateEnd(&r.z);
    return st;
}

tg_status idx_load(tg_ctx *ctx, const char *path, tg_tensor **out, char *err, size_t errsz) {
    if (err && errsz) err[0] = '\0';
    if (!out) return fail(err, errsz, TG_EINVAL, "idx_load: out is NULL");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errsz, TG_EIO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return fail(err, errsz, TG_EIO, "%s: not a regular file", path);
    }
    /* the file's bytes live in a u8 tensor, so they come from ctx's allocator too */
    int64_t n = (int64_t)sb.st_size;
    tg_tensor *raw = tg_tensor_new(ctx, TG_DT_U8, 1, &n);
    if (!raw) {
        fclose(f);
        return fail(err, errsz, TG_ENOMEM, "%s: cannot allocate %lld bytes", path, (long long)n);
    }
    size_t got = n ? fread(tg_tensor_data(raw), 1, (size_t)n, f) : 0;
    int rerr = ferror(f);
    fclose(f);
    if (rerr || got != (size_t)n) {
        tg_tensor_free(raw);
        return fail(err, errsz, TG_EIO, "%s: read error", path);
    }
    char msg[256];
    tg_status st = idx_parse(ctx, tg_tensor_data(raw), (size_t)n, out, msg, sizeof msg);
    tg_tensor_free(raw);
    if (st != TG_OK) return fail(err, errsz, st, "%s: %s", path, msg);
    return TG_OK;
}
