/* module.c - modules: the functions of one .tg text, parsed from memory or loaded from a
 * file, looked up by index or name, printed back.
 *
 * Owns: tg_module_parse/read/load/free/func_count/func/find/print.
 * Invariants: a module owns its graphs (m->funcs, in the order of the text) and frees
 * them with itself; a failed parse or load returns no module and leaks nothing. Files
 * are read whole through the context (its memory cap applies), in chunks, up to
 * TG_TEXT_MAX_BYTES, so pipes and FIFOs work too and nothing is read without bound; a NUL
 * byte (binary data, /dev/zero) is refused as soon as it is read.
 */
#include "text.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

static tg_module *module_new(tg_ctx *ctx) {
    tg_module *m = tg_mem_calloc(ctx, sizeof *m);
    if (m) m->ctx = ctx;
    return m;
}

void tg_module_free(tg_module *m) {
    if (!m) return;
    for (int i = 0; i < m->funcs.n; i++) tg_graph_free(m->funcs.items[i]);
    tg_vec_fini(m->ctx, &m->funcs);
    tg_mem_free(m->ctx, m, sizeof *m);
}

tg_status tg_module_parse(tg_ctx *ctx, const char *src, size_t len, const char *filename,
                          tg_module **out) {
    if (!out) return tg_set_error(TG_EINVAL, "tg_module_parse: out is NULL");
    *out = NULL;
    if (!src && len > 0) return tg_set_error(TG_EINVAL, "tg_module_parse: text is NULL");
    if (!ctx) ctx = tg_ctx_default();
    tg_module *m = module_new(ctx);
    if (!m) return TG_ENOMEM;
    tg_status st = tg_txt_parse(m, src, len, filename);
    if (st != TG_OK) {
        /* freeing graphs must not replace the parse message */
        char msg[TG_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", tg_last_error());
        tg_module_free(m);
        tg_set_error(st, "%s", msg);
        return st;
    }
    *out = m;
    return TG_OK;
}

/* "cannot read 'path': <the allocator's message>", which names the memory cap. */
static tg_status read_oom(const char *name) {
    char msg[TG_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", tg_last_error());
    return tg_set_error(TG_ENOMEM, "cannot read '%s': %s", name, msg[0] ? msg : "out of memory");
}

/* Reads f to its end into a ctx buffer (*buf of *cap bytes, *len used). Every byte is
 * counted by ctx (its cap applies) and the text stops at TG_TEXT_MAX_BYTES: a regular
 * file is sized first, a pipe or device grows in chunks, so neither reads without bound.
 * A NUL byte ends the read with the lexer's error at its place: binary data (/dev/zero)
 * is not .tg text, and is not read further. */
static tg_status read_stream(tg_ctx *ctx, FILE *f, const char *name, char **buf, size_t *cap,
                             size_t *len) {
    struct stat sb;
    *buf = NULL;
    *cap = *len = 0;
    size_t first = 65536; /* first buffer: the whole file when its size is known */
    if (fstat(fileno(f), &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return tg_set_error(TG_EIO, "cannot read '%s': %s", name, strerror(EISDIR));
        if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size >= TG_TEXT_MAX_BYTES)
            return tg_set_error(TG_ELIMIT, "cannot read '%s': larger than %zu bytes", name,
                                TG_TEXT_MAX_BYTES);
        if (S_ISREG(sb.st_mode)) first = (size_t)sb.st_size + 1; /* + 1: sees the end */
    }
    tg_status st = TG_OK;
    for (;;) {
        if (*len == *cap) {
            size_t ncap = *cap ? *cap * 2 : first;
            if (ncap > TG_TEXT_MAX_BYTES) ncap = TG_TEXT_MAX_BYTES;
            if (*cap >= TG_TEXT_MAX_BYTES) {
                st = tg_set_error(TG_ELIMIT, "cannot read '%s': larger than %zu bytes", name,
                                  TG_TEXT_MAX_BYTES);
                break;
            }
            char *nb = tg_mem_realloc(ctx, *buf, *cap, ncap);
            if (!nb) {
                st = read_oom(name);
                break;
            }
            *buf = nb;
            *cap = ncap;
        }
        size_t got = fread(*buf + *len, 1, *cap - *len, f);
        const char *nul = got ? memchr(*buf + *len, '\0', got) : NULL;
        if (nul) { /* where the lexer would stop: line and byte column */
            size_t line = 1, bol = 0;
            for (size_t i = 0; *buf + i < nul; i++) {
                if ((*buf)[i] != '\n') continue;
                line++;
                bol = i + 1;
            }
            st = tg_set_error(TG_ESYNTAX,
                              "%s:%zu:%zu: unexpected character byte 0x00 (a .tg file is text; "
                              "not read further)",
                              name, line, (size_t)(nul - *buf) - bol + 1);
            break;
        }
        *len += got;
        if (got == 0) {
            if (ferror(f))
                st = tg_set_error(TG_EIO, "cannot read '%s': %s", name,
                                  errno ? strerror(errno) : "read error");
            break;
        }
    }
    if (st == TG_OK && *len >= TG_TEXT_MAX_BYTES)
        st = tg_set_error(TG_ELIMIT, "cannot read '%s': larger than %zu bytes", name,
                          TG_TEXT_MAX_BYTES);
    if (st != TG_OK) {
        tg_mem_free(ctx, *buf, *cap);
        *buf = NULL;
        *cap = *len = 0;
    }
    return st;
}

tg_status tg_module_read(tg_ctx *ctx, FILE *f, const char *name, tg_module **out) {
    if (!out) return tg_set_error(TG_EINVAL, "tg_module_read: out is NULL");
    *out = NULL;
    if (!f) return tg_set_error(TG_EINVAL, "tg_module_read: f is NULL");
    if (!name) name = "<input>";
    if (!ctx) ctx = tg_ctx_default();
    char *buf;
    size_t cap, len;
    errno = 0;
    tg_status st = read_stream(ctx, f, name, &buf, &cap, &len);
    if (st != TG_OK) return st;
    st = tg_module_parse(ctx, buf, len, name, out);
    tg_mem_free(ctx, buf, cap);
    return st;
}

tg_status tg_module_load(tg_ctx *ctx, const char *path, tg_module **out) {
    if (!out) return tg_set_error(TG_EINVAL, "tg_module_load: out is NULL");
    *out = NULL;
    if (!path) return tg_set_error(TG_EINVAL, "tg_module_load: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return tg_set_error(TG_EIO, "cannot open '%s': %s", path, strerror(errno));
    tg_status st = tg_module_read(ctx, f, path, out);
    fclose(f);
    return st;
}

int tg_module_func_count(const tg_module *m) {
    if (!m) return tg_set_error(TG_EINVAL, "tg_module_func_count: module is NULL"), -1;
    return m->funcs.n;
}

tg_graph *tg_module_func(const tg_module *m, int i) {
    if (!m || i < 0 || i >= m->funcs.n) {
        tg_set_error(m ? TG_EINDEX : TG_EINVAL, "tg_module_func: %s",
                     m ? "no function of that index" : "module is NULL");
        return NULL;
    }
    return m->funcs.items[i];
}

tg_graph *tg_module_find(const tg_module *m, const char *name) {
    if (!m || !name)
        return tg_set_error(TG_EINVAL, "tg_module_find: %s is NULL", m ? "name" : "module"), NULL;
    for (int i = 0; i < m->funcs.n; i++) {
        tg_graph *g = m->funcs.items[i];
        if (strcmp(tg_graph_name(g), name) == 0) return g;
    }
    return tg_set_error(TG_ENAME, "tg_module_find: no function '%s'", name), NULL;
}

tg_status tg_module_print(const tg_module *m, FILE *f) {
    if (!m || !f) return tg_set_error(TG_EINVAL, "tg_module_print: module or file is NULL");
    return tg_txt_print_unit((const tg_graph *const *)m->funcs.items, m->funcs.n, m->ctx, f);
}
