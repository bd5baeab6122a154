/* npy.c - reading and writing NumPy .npy files.
 *
 * Owns: tg_npy_load, tg_npy_load_mem, tg_npy_save.
 * Reading accepts format versions 1.0, 2.0 and 3.0; descr '|b1', '|i1'/'<i1', '|u1', '<i2',
 * '<i4', '<i8', '<f4', '<f8' and their '>' (big-endian, swapped on load) and '=' forms;
 * fortran_order True or False; shapes of 0..TG_MAX_DIMS extents. A Fortran-order file is
 * returned as a C-contiguous tensor (the data is transposed while it is read), so every
 * loaded tensor is contiguous and owns a fresh buffer. Bool bytes are normalised to 0/1.
 * Hostile input: the header (at most TG_NPY_MAX_HEADER bytes) is parsed by a small strict
 * parser of the Python dict literal NumPy writes (exactly the keys descr, fortran_order
 * and shape, in any order, optional trailing comma, whitespace); the element count is
 * overflow-checked and the data length must equal what the header promises before any
 * tensor is allocated. Every message starts with the file name (or "<memory>"); an
 * allocation refused by the context's memory cap says so, with the cap. A pipe or device
 * is read in order and never past what its header promises (plus one byte, to see that the
 * data ends there), so an endless one (/dev/zero) cannot grow memory without bound.
 * Writing produces exactly what NumPy 1.24's np.save writes: format 1.0, little-endian,
 * C order (any source strides), header padded with spaces and '\n' so the data starts at
 * a multiple of 64, including NumPy's spare space for growing the first axis. A file is
 * written whole or not at all: into a temporary file beside it (path.tmp.<pid>.<n>), then
 * renamed onto it, with SIGXFSZ held back so that a write past `ulimit -f` is an EFBIG
 * error naming the file; on any error the previous file, if any, is left untouched.
 * Devices and FIFOs (e.g. /dev/stdout) are written directly.
 */
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define TG_NPY_MAX_HEADER ((size_t)1 << 20)
#define NPY_MAGIC         "\x93NUMPY"
#define NPY_MAGIC_LEN     6
#define NPY_ALIGN         64

static bool host_is_big_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 0;
}

/* ---- header ---- */

typedef struct npy_hdr {
    tg_dtype dt;                /* element type */
    bool swap;                  /* file byte order differs from the host's */
    bool fortran;               /* fortran_order */
    int ndim;                   /* rank */
    int64_t shape[TG_MAX_DIMS]; /* extents */
    size_t nbytes;              /* data bytes the header promises */
} npy_hdr;

/* Checks magic and version; gives where the header text starts and its length. */
static tg_status parse_preamble(const char *name, const unsigned char *p, size_t len,
                                size_t *hstart, size_t *hlen) {
    if (len < NPY_MAGIC_LEN || memcmp(p, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return tg_set_error(TG_EFORMAT, "%s: not a .npy file (bad magic string)", name);
    if (len < NPY_MAGIC_LEN + 2)
        return tg_set_error(TG_EFORMAT, "%s: truncated .npy file (no version)", name);
    int major = p[6], minor = p[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return tg_set_error(TG_EUNSUPPORTED, "%s: unsupported .npy format version %d.%d", name,
                            major, minor);
    size_t lensz = major == 1 ? 2 : 4;
    if (len < NPY_MAGIC_LEN + 2 + lensz)
        return tg_set_error(TG_EFORMAT, "%s: truncated .npy file (no header length)", name);
    const unsigned char *q = p + 8;
    size_t n = major == 1
                   ? (size_t)q[0] | (size_t)q[1] << 8
                   : (size_t)q[0] | (size_t)q[1] << 8 | (size_t)q[2] << 16 | (size_t)q[3] << 24;
    if (n > TG_NPY_MAX_HEADER)
        return tg_set_error(TG_ELIMIT, "%s: .npy header of %zu bytes exceeds the limit of %zu",
                            name, n, TG_NPY_MAX_HEADER);
    *hstart = NPY_MAGIC_LEN + 2 + lensz;
    *hlen = n;
    return TG_OK;
}

typedef struct hparser {
    const char *name; /* file name for messages */
    const char *s;    /* header text (not NUL-terminated) */
    size_t n, i;      /* length, position */
} hparser;

static tg_status herr(const hparser *p, const char *what) {
    return tg_set_error(TG_EFORMAT, "%s: malformed .npy header: %s (at byte %zu of the header)",
                        p->name, what, p->i);
}

static void skip_ws(hparser *p) {
    while (p->i < p->n &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static bool accept(hparser *p, char c) {
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == c) {
        p->i++;
        return true;
    }
    return false;
}

static bool peek(hparser *p, char c) {
    skip_ws(p);
    return p->i < p->n && p->s[p->i] == c;
}

/* A quoted string without escapes: sets str and len to its contents. */
static tg_status parse_string(hparser *p, const char **str, size_t *len) {
    skip_ws(p);
    if (p->i >= p->n || (p->s[p->i] != '\'' && p->s[p->i] != '"'))
        return herr(p, "expected a quoted string");
    char q = p->s[p->i++];
    size_t start = p->i;
    while (p->i < p->n && p->s[p->i] != q) {
        char c = p->s[p->i];
        if (c == '\\') return herr(p, "escape sequences are not supported in strings");
        if (c == '\n' || c == '\r') return herr(p, "unterminated string");
        p->i++;
    }
    if (p->i >= p->n) return herr(p, "unterminated string");
    *str = p->s + start;
    *len = p->i - start;
    p->i++;
    return TG_OK;
}

static bool is_ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static bool accept_word(hparser *p, const char *w) {
    size_t n = strlen(w);
    skip_ws(p);
    if (p->n - p->i >= n && memcmp(p->s + p->i, w, n) == 0 &&
        (p->i + n == p->n || !is_ident_char(p->s[p->i + n]))) {
        p->i += n;
        return true;
    }
    return false;
}

static tg_status parse_descr(hparser *p, npy_hdr *h) {
    const char *s;
    size_t n;
    if (peek(p, '['))
        return tg_set_error(TG_EUNSUPPORTED, "%s: structured dtypes are not supported", p->name);
    tg_status st = parse_string(p, &s, &n);
    if (st != TG_OK) return st;
    static const struct {
        const char code[3];
        tg_dtype dt;
    } codes[] = {{"b1", TG_DT_BOOL}, {"i1", TG_DT_I8},  {"u1", TG_DT_U8},  {"i2", TG_DT_I16},
                 {"i4", TG_DT_I32},  {"i8", TG_DT_I64}, {"f4", TG_DT_F32}, {"f8", TG_DT_F64}};
    int found = -1;
    if (n == 3 && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '='))
        for (size_t k = 0; k < TG_COUNTOF(codes); k++)
            if (memcmp(s + 1, codes[k].code, 2) == 0) found = (int)k;
    if (found < 0)
        return tg_set_error(TG_EUNSUPPORTED,
                            "%s: dtype '%.*s' is not supported (tgraph reads bool, int8, int16, "
                            "int32, int64, uint8, float32 and float64)",
                            p->name, (int)(n > 40 ? 40 : n), s);
    h->dt = codes[found].dt;
    size_t isz = tg_dtype_infos[h->dt].size;
    if (s[0] == '|' && isz > 1)
        return tg_set_error(TG_EFORMAT, "%s: dtype '%.3s' lacks a byte order", p->name, s);
    h->swap = isz > 1 &&
              ((s[0] == '<' && host_is_big_endian()) || (s[0] == '>' && !host_is_big_endian()));
    return TG_OK;
}

static tg_status parse_shape(hparser *p, npy_hdr *h) {
    if (!accept(p, '(')) return herr(p, "shape must be a tuple");
    int nd = 0;
    bool comma = false; /* a comma followed the last extent */
    while (!accept(p, ')')) {
        if (nd > 0 && !comma) return herr(p, "expected ',' or ')' in the shape");
        skip_ws(p);
        bool neg = p->i < p->n && p->s[p->i] == '-';
        if (neg) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return herr(p, "expected an integer extent in the shape");
        int64_t v = 0;
        bool big = false;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
            int d = p->s[p->i++] - '0';
            if (v > (INT64_MAX - d) / 10)
                big = true;
            else
                v = v * 10 + d;
        }
        if (p->i < p->n && p->s[p->i] == 'L') p->i++; /* Python 2 long literal */
        if (neg && (v != 0 || big))
            return tg_set_error(TG_EFORMAT,
                                "%s: malformed .npy header: negative extent in the "
                                "shape",
                                p->name);
        if (big)
            return tg_set_error(TG_EFORMAT, "%s: malformed .npy header: extent too large", p->name);
        if (nd == TG_MAX_DIMS)
            return tg_set_error(TG_EUNSUPPORTED, "%s: shape has more than %d dimensions", p->name,
                                TG_MAX_DIMS);
        h->shape[nd++] = v;
        comma = accept(p, ',');
    }
    if (nd == 1 && !comma) return herr(p, "shape must be a tuple ('(n,)' for one dimension)");
    h->ndim = nd;
    return TG_OK;
}

/* Parses the dict literal of a header of n bytes. */
static tg_status parse_dict(const char *name, const char *s, size_t n, npy_hdr *h) {
    hparser p = {name, s, n, 0};
    enum { K_DESCR = 1, K_FORTRAN = 2, K_SHAPE = 4 };
    unsigned seen = 0;
    tg_status st;
    if (!accept(&p, '{')) return herr(&p, "expected '{'");
    while (!accept(&p, '}')) {
        const char *key;
        size_t klen;
        if ((st = parse_string(&p, &key, &klen)) != TG_OK) return st;
        unsigned k = klen == 5 && memcmp(key, "descr", 5) == 0             ? K_DESCR
                     : klen == 13 && memcmp(key, "fortran_order", 13) == 0 ? K_FORTRAN
                     : klen == 5 && memcmp(key, "shape", 5) == 0           ? K_SHAPE
                                                                           : 0;
        if (!k)
            return tg_set_error(TG_EFORMAT, "%s: malformed .npy header: unexpected key '%.*s'",
                                name, (int)(klen > 40 ? 40 : klen), key);
        if (seen & k)
            return tg_set_error(TG_EFORMAT, "%s: malformed .npy header: duplicate key '%.*s'", name,
                                (int)klen, key);
        seen |= k;
        if (!accept(&p, ':')) return herr(&p, "expected ':' after a key");
        if (k == K_DESCR) {
            st = parse_descr(&p, h);
        } else if (k == K_SHAPE) {
            st = parse_shape(&p, h);
        } else if (accept_word(&p, "True")) {
            h->fortran = true;
            st = TG_OK;
        } else if (accept_word(&p, "False")) {
            h->fortran = false;
            st = TG_OK;
        } else {
            st = herr(&p, "fortran_order must be True or False");
        }
        if (st != TG_OK) return st;
        if (!accept(&p, ',')) {
            if (!peek(&p, '}')) return herr(&p, "expected ',' or '}' after a value");
        }
    }
    skip_ws(&p);
    if (p.i != p.n) return herr(&p, "unexpected characters after the dictionary");
    static const char *const names[] = {"descr", "fortran_order", "shape"};
    for (int b = 0; b < 3; b++)
        if (!(seen & (1u << b)))
            return tg_set_error(TG_EFORMAT, "%s: malformed .npy header: missing key '%s'", name,
                                names[b]);
    int64_t size;
    if (!tg_shape_size(h->ndim, h->shape, &size))
        return tg_set_error(TG_EFORMAT, "%s: shape in the .npy header is too large", name);
    h->nbytes = (size_t)size * tg_dtype_infos[h->dt].size;
    return TG_OK;
}

static tg_status check_data_len(const char *name, const npy_hdr *h, size_t avail) {
    if (avail < h->nbytes)
        return tg_set_error(TG_EFORMAT,
                            "%s: truncated .npy data: the header promises %zu bytes, the file "
                            "has %zu",
                            name, h->nbytes, avail);
    if (avail > h->nbytes)
        return tg_set_error(TG_EFORMAT, "%s: %zu unexpected bytes after the .npy data", name,
                            avail - h->nbytes);
    return TG_OK;
}

/* ---- data ---- */

/* Byte-swaps elements and normalises bools in place. */
static void fix_elems(unsigned char *p, size_t nbytes, size_t isz, bool swap, bool isbool) {
    if (isbool) {
        for (size_t i = 0; i < nbytes; i++) p[i] = p[i] != 0;
    } else if (swap) {
        for (size_t i = 0; i < nbytes; i += isz)
            for (size_t a = 0, b = isz - 1; a < b; a++, b--) {
                unsigned char c = p[i + a];
                p[i + a] = p[i + b];
                p[i + b] = c;
            }
    }
}

/* Receives file-order data in pieces (whole elements) and places it into the tensor. */
typedef struct sink {
    tg_tensor *t;               /* destination, C-contiguous */
    tg_tensor fv;               /* Fortran files: t seen in file order (no reference held) */
    int64_t idx[TG_MAX_DIMS];   /* Fortran files: next index into fv */
    size_t pos;                 /* C-order files: next byte of t's data */
    size_t isz;                 /* element size */
    bool swap, isbool, fortran; /* what to do with each element */
} sink;

static void sink_init(sink *k, tg_tensor *t, const npy_hdr *h) {
    memset(k, 0, sizeof *k);
    k->t = t;
    k->isz = tg_dtype_infos[h->dt].size;
    k->swap = h->swap;
    k->isbool = h->dt == TG_DT_BOOL;
    k->fortran = h->fortran && h->ndim > 1;
    if (k->fortran) {
        k->fv = *t;
        for (int i = 0; i < t->ndim; i++) {
            k->fv.shape[i] = t->shape[t->ndim - 1 - i];
            k->fv.strides[i] = t->strides[t->ndim - 1 - i];
        }
    }
}

static void sink_write(sink *k, const unsigned char *src, size_t nbytes) {
    if (!k->fortran) {
        unsigned char *d = (unsigned char *)k->t->buf->data + k->pos;
        if (d != src) memcpy(d, src, nbytes);
        fix_elems(d, nbytes, k->isz, k->swap, k->isbool);
        k->pos += nbytes;
        return;
    }
    for (size_t i = 0; i < nbytes; i += k->isz) {
        unsigned char *d = (unsigned char *)tg_tensor_at(&k->fv, k->idx);
        memcpy(d, src + i, k->isz);
        fix_elems(d, k->isz, k->isz, k->swap, k->isbool);
        tg_index_next(k->fv.ndim, k->fv.shape, k->idx);
    }
}

/* "<path>: out of memory for <what>: <the allocator's message>", which names the cap. */
static tg_status load_oom(const char *path, const char *what, size_t nbytes) {
    char msg[TG_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", tg_last_error());
    return tg_set_error(TG_ENOMEM, "%s: out of memory for %s of %zu bytes: %s", path, what, nbytes,
                        msg[0] ? msg : "out of memory");
}

static tg_status load_mem(tg_ctx *ctx, const char *name, const unsigned char *p, size_t len,
                          tg_tensor **out) {
    size_t hstart = 0, hlen = 0;
    npy_hdr h = {0};
    tg_status st = parse_preamble(name, p, len, &hstart, &hlen);
    if (st != TG_OK) return st;
    if (len - hstart < hlen)
        return tg_set_error(TG_EFORMAT, "%s: truncated .npy header (%zu of %zu bytes)", name,
                            len - hstart, hlen);
    if ((st = parse_dict(name, (const char *)p + hstart, hlen, &h)) != TG_OK) return st;
    if ((st = check_data_len(name, &h, len - hstart - hlen)) != TG_OK) return st;
    tg_tensor *t = tg_tensor_empty(ctx, h.dt, h.ndim, h.shape);
    if (!t) return load_oom(name, "a tensor", h.nbytes);
    sink k;
    sink_init(&k, t, &h);
    if (h.nbytes) sink_write(&k, p + hstart + hlen, h.nbytes);
    *out = t;
    return TG_OK;
}

tg_status tg_npy_load_mem(tg_ctx *ctx, const void *data, size_t len, tg_tensor **out) {
    if (!out) return tg_set_error(TG_EINVAL, "tg_npy_load_mem: out is NULL");
    *out = NULL;
    if (!data && len) return tg_set_error(TG_EINVAL, "tg_npy_load_mem: data is NULL");
    return load_mem(ctx, "<memory>", data ? data : "", len, out);
}

/* Reads exactly n bytes or reports why not. */
static tg_status read_exact(FILE *f, const char *path, void *buf, size_t n) {
    if (n == 0 || fread(buf, 1, n, f) == n) return TG_OK;
    if (ferror(f)) return tg_set_error(TG_EIO, "%s: read error: %s", path, strerror(errno));
    return tg_set_error(TG_EFORMAT, "%s: unexpected end of file", path);
}

/* Streams that are not regular files (pipes, devices): read in order, never more than the
 * header promises. The preamble and header come first (at most TG_NPY_MAX_HEADER bytes);
 * the tensor is then allocated through ctx, so the memory cap is checked before any data
 * is read, and takes exactly the promised bytes; one more byte means trailing data. An
 * endless device (/dev/zero) thus fails at its first bytes, or after the promised ones. */
static tg_status load_stream(tg_ctx *ctx, FILE *f, const char *path, tg_tensor **out) {
    unsigned char pre[12];
    size_t npre = fread(pre, 1, 10, f), hstart = 0, hlen = 0;
    if (npre == 10 && (pre[6] == 2 || pre[6] == 3)) npre += fread(pre + 10, 1, 2, f);
    if (ferror(f)) return tg_set_error(TG_EIO, "%s: read error: %s", path, strerror(errno));
    tg_status st = parse_preamble(path, pre, npre, &hstart, &hlen);
    if (st != TG_OK) return st;
    char *htext = tg_mem_alloc(ctx, hlen);
    if (!htext) return load_oom(path, "the .npy header", hlen);
    size_t got = fread(htext, 1, hlen, f);
    npy_hdr h = {0};
    if (got < hlen)
        st = ferror(f) ? tg_set_error(TG_EIO, "%s: read error: %s", path, strerror(errno))
                       : tg_set_error(TG_EFORMAT, "%s: truncated .npy header (%zu of %zu bytes)",
                                      path, got, hlen);
    if (st == TG_OK) st = parse_dict(path, htext, hlen, &h);
    tg_mem_free(ctx, htext, hlen);
    if (st != TG_OK) return st;
    tg_tensor *t = tg_tensor_empty(ctx, h.dt, h.ndim, h.shape);
    if (!t) return load_oom(path, "a tensor", h.nbytes);
    sink k;
    sink_init(&k, t, &h);
    unsigned char chunk[8192]; /* a multiple of every element size */
    size_t done = 0;
    while (done < h.nbytes) {
        size_t want = h.nbytes - done;
        unsigned char *dst = k.fortran ? chunk : (unsigned char *)t->buf->data + done;
        if (k.fortran && want > sizeof chunk) want = sizeof chunk;
        size_t n = fread(dst, 1, want, f); /* short only at the end or on an error */
        done += n;
        if (n < want) break;
        sink_write(&k, dst, n); /* whole elements: want is a multiple of the size */
    }
    if (done < h.nbytes)
        st = ferror(f) ? tg_set_error(TG_EIO, "%s: read error: %s", path, strerror(errno))
                       : tg_set_error(TG_EFORMAT,
                                      "%s: truncated .npy data: the header promises %zu bytes, "
                                      "the file has %zu",
                                      path, h.nbytes, done);
    else if (fgetc(f) != EOF)
        st = tg_set_error(TG_EFORMAT, "%s: unexpected bytes after the %zu bytes of .npy data", path,
                          h.nbytes);
    if (st != TG_OK) {
        tg_tensor_free(t);
        return st;
    }
    *out = t;
    return TG_OK;
}

static tg_status load_file(tg_ctx *ctx, FILE *f, const char *path, size_t fsize, tg_tensor **out) {
    unsigned char pre[12];
    size_t npre = fsize < sizeof pre ? fsize : sizeof pre, hstart = 0, hlen = 0;
    tg_status st = read_exact(f, path, pre, npre);
    if (st != TG_OK) return st;
    if ((st = parse_preamble(path, pre, npre, &hstart, &hlen)) != TG_OK) return st;
    if (fsize - hstart < hlen)
        return tg_set_error(TG_EFORMAT, "%s: truncated .npy header (%zu of %zu bytes)", path,
                            fsize - hstart, hlen);
    /* The preamble may have read into the header (version 1.0): keep those bytes. */
    char *htext = tg_mem_alloc(ctx, hlen);
    if (!htext) return load_oom(path, "the .npy header", hlen);
    size_t have = npre - hstart;
    if (have > hlen) have = hlen;
    memcpy(htext, pre + hstart, have);
    npy_hdr h = {0};
    st = read_exact(f, path, htext + have, hlen - have);
    if (st == TG_OK) st = parse_dict(path, htext, hlen, &h);
    tg_mem_free(ctx, htext, hlen);
    if (st != TG_OK) return st;
    size_t consumed = hstart + have; /* header bytes that came in with the preamble */
    if (consumed < npre) {
        /* Only when the header is shorter than the preamble buffer: data bytes read too. */
        if (fseek(f, (long)(hstart + hlen), SEEK_SET) != 0)
            return tg_set_error(TG_EIO, "%s: seek error: %s", path, strerror(errno));
    }
    if ((st = check_data_len(path, &h, fsize - hstart - hlen)) != TG_OK) return st;
    tg_tensor *t = tg_tensor_empty(ctx, h.dt, h.ndim, h.shape);
    if (!t) return load_oom(path, "a tensor", h.nbytes);
    sink k;
    sink_init(&k, t, &h);
    if (!k.fortran) {
        /* Straight into the tensor, then swap/normalise in place. */
        st = read_exact(f, path, t->buf->data, h.nbytes);
        if (st == TG_OK) sink_write(&k, t->buf->data, h.nbytes);
    } else {
        unsigned char chunk[8192]; /* a multiple of every element size */
        for (size_t done = 0; done < h.nbytes && st == TG_OK;) {
            size_t n = h.nbytes - done < sizeof chunk ? h.nbytes - done : sizeof chunk;
            st = read_exact(f, path, chunk, n);
            if (st == TG_OK) sink_write(&k, chunk, n);
            done += n;
        }
    }
    if (st != TG_OK) {
        tg_tensor_free(t);
        return st;
    }
    *out = t;
    return TG_OK;
}

tg_status tg_npy_load(tg_ctx *ctx, const char *path, tg_tensor **out) {
    if (!out) return tg_set_error(TG_EINVAL, "tg_npy_load: out is NULL");
    *out = NULL;
    if (!path) return tg_set_error(TG_EINVAL, "tg_npy_load: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return tg_set_error(TG_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    tg_status st;
    if (fstat(fileno(f), &sb) != 0)
        st = tg_set_error(TG_EIO, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        st = tg_set_error(TG_EIO, "%s: is a directory", path);
    else if (S_ISREG(sb.st_mode))
        st = load_file(ctx, f, path, (size_t)sb.st_size, out);
    else
        st = load_stream(ctx, f, path, out);
    fclose(f);
    return st;
}

/* ---- saving ---- */

/* Writes the header NumPy 1.24 would write for a C-order array of t's dtype and shape.
 * Returns its length (a multiple of 64). */
static size_t make_header(const tg_tensor *t, char *buf, size_t cap) {
    static const char *const descr[TG_DT_COUNT] = {
        [TG_DT_BOOL] = "|b1", [TG_DT_I8] = "|i1", [TG_DT_I16] = "<i2", [TG_DT_I32] = "<i4",
        [TG_DT_I64] = "<i8",  [TG_DT_U8] = "|u1", [TG_DT_F32] = "<f4", [TG_DT_F64] = "<f8"};
    char shape[TG_MAX_DIMS * 24 + 4];
    size_t sl = 0;
    shape[sl++] = '(';
    for (int i = 0; i < t->ndim; i++)
        sl += (size_t)snprintf(shape + sl, sizeof shape - sl, i ? ", %lld" : "%lld",
                               (long long)t->shape[i]);
    if (t->ndim == 1) shape[sl++] = ',';
    shape[sl++] = ')';
    shape[sl] = '\0';
    const size_t pre = NPY_MAGIC_LEN + 2 + 2; /* magic, version 1.0, uint16 length */
    int n = snprintf(buf + pre, cap - pre, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr[t->dtype], shape);
    TG_ASSERT(n > 0 && (size_t)n < cap - pre);
    size_t len = (size_t)n;
    if (t->ndim > 0) {
        /* NumPy leaves room to grow the first extent to 21 digits in place. */
        char first[24];
        int fl = snprintf(first, sizeof first, "%lld", (long long)t->shape[0]);
        for (int i = fl; i < 21; i++) buf[pre + len++] = ' ';
    }
    size_t hlen = len + 1; /* the final '\n' */
    size_t pad = NPY_ALIGN - (pre + hlen) % NPY_ALIGN;
    TG_ASSERT(pre + hlen + pad <= cap && hlen + pad <= 0xffff);
    memset(buf + pre + len, ' ', pad);
    len += pad;
    buf[pre + len++] = '\n';
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)(unsigned char)(len & 0xff);
    buf[9] = (char)(unsigned char)(len >> 8);
    return pre + len;
}

static tg_status write_data(FILE *f, const tg_tensor *t) {
    const int64_t n = tg_tensor_size(t);
    const size_t isz = tg_dtype_infos[t->dtype].size;
    const bool swap = isz > 1 && host_is_big_endian();
    if (n == 0) return TG_OK;
    if (!swap && t->dtype != TG_DT_BOOL && tg_tensor_is_contiguous(t))
        return fwrite(tg_tensor_data(t), isz, (size_t)n, f) == (size_t)n ? TG_OK : TG_EIO;
    unsigned char chunk[8192];
    size_t used = 0;
    int64_t idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        memcpy(chunk + used, tg_tensor_at(t, idx), isz);
        fix_elems(chunk + used, isz, isz, swap, t->dtype == TG_DT_BOOL);
        used += isz;
        tg_index_next(t->ndim, t->shape, idx);
        if (used == sizeof chunk || i + 1 == n) {
            if (fwrite(chunk, 1, used, f) != used) return TG_EIO;
            used = 0;
        }
    }
    return TG_OK;
}

/* Where tg_npy_save writes path whole: into *tmp (beside the final file, renamed onto
 * it) with *mode kept from an existing file (-1: the default), or directly (*tmp == ""):
 * for a path that is not a regular file (a device, a FIFO) or whose directory has no room
 * for the name. A symbolic link to a file is followed: the file it names is replaced. */
static void save_target(const char *path, char *final, char *tmp, size_t n, int *mode) {
    struct stat sb, lsb;
    snprintf(final, n, "%s", path);
    tmp[0] = '\0';
    *mode = -1;
    if (stat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode)) return;
        *mode = (int)(sb.st_mode & 07777);
        if (lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode)) {
            char *real = realpath(path, NULL);
            if (!real) return;
            int w = snprintf(final, n, "%s", real);
            free(real);
            if (w < 0 || (size_t)w >= n) {
                snprintf(final, n, "%s", path);
                return;
            }
        }
    } else if (errno != ENOENT) {
        return;
    }
    if (!tg_file_tmp_name(tmp, n, final)) tmp[0] = '\0';
}

tg_status tg_npy_save(const char *path, const tg_tensor *t) {
    if (!path) return tg_set_error(TG_EINVAL, "tg_npy_save: path is NULL");
    if (!t) return tg_set_error(TG_EINVAL, "%s: tg_npy_save: tensor is NULL", path);
    char hdr[1024], final[4096], tmp[4096];
    int mode;
    size_t hl = make_header(t, hdr, sizeof hdr);
    save_target(path, final, tmp, sizeof final, &mode);
    if (tmp[0] && mode >= 0 &&
        faccessat(AT_FDCWD, final, W_OK, AT_EACCESS) != 0) /* as writing in place would */
        return tg_set_error(TG_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
    tg_xfsz x;
    tg_xfsz_begin(&x); /* past ulimit -f: EFBIG, not a killed process and a partial file */
    FILE *f = NULL;
    if (tmp[0]) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode >= 0 ? mode : 0666);
        if (fd >= 0 && mode >= 0) (void)fchmod(fd, (mode_t)mode); /* the umask aside */
        f = fd >= 0 ? fdopen(fd, "wb") : NULL;
        if (fd >= 0 && !f) {
            close(fd);
            unlink(tmp);
        } else if (fd < 0 && mode >= 0 && (errno == EACCES || errno == EPERM || errno == EROFS)) {
            tmp[0] = '\0'; /* a writable file in a directory we may not write: in place */
            f = fopen(path, "wb");
        }
    } else {
        f = fopen(path, "wb");
    }
    if (!f) {
        int err = errno;
        tg_xfsz_end(&x);
        return tg_set_error(TG_EIO, "%s: cannot open for writing: %s", path, strerror(err));
    }
    tg_status st = fwrite(hdr, 1, hl, f) == hl ? TG_OK : TG_EIO;
    if (st == TG_OK) st = write_data(f, t);
    int err = st != TG_OK ? errno : 0;
    if (fclose(f) != 0 && st == TG_OK) {
        st = TG_EIO;
        err = errno;
    }
    if (st == TG_OK && tmp[0] && rename(tmp, final) != 0) {
        st = TG_EIO;
        err = errno;
    }
    /* only our temporary file is removed: never the target (a device such as /dev/full, a
       FIFO, or a file written in place) */
    if (st != TG_OK && tmp[0]) remove(tmp);
    tg_xfsz_end(&x);
    if (st != TG_OK)
        return tg_set_error(TG_EIO, "%s: write error: %s%s", path,
                            err ? strerror(err) : "short write",
                            err == EFBIG ? " (the file-size limit, ulimit -f)" : "");
    return TG_OK;
}
