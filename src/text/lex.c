/* lex.c - the .tg lexer and the small text helpers shared by the parser and printers:
 * reserved words, the string-keyed hash map, float and string formatting.
 *
 * Owns: tg_lex_*, tg_tok_*, tg_txt_reserved/is_name, tg_txt_map_*, tg_format_float,
 * tg_txt_put_string.
 * Invariants:
 *  - The lexer reads only inside [src, src+len): the text need not be NUL-terminated, and
 *    a NUL byte is an ordinary (unexpected) character.
 *  - A newline is a token only outside ( ) and [ ]; `#` starts a comment to the end of
 *    the line. `-` is a token of its own: the parser glues it to the number after it.
 *  - The expression of a fused{...} lexes with the same rules (names, numbers, strings),
 *    plus `%` INT and `;`, and without the punctuation and comments only .tg lines have.
 *  - Each token is produced in O(its length); the whole text lexes in linear time.
 */
#include "text.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- lexer ---- */

void tg_lex_init(tg_lexer *lx, const char *src, size_t len) {
    memset(lx, 0, sizeof *lx);
    lx->cur = src ? src : "";
    lx->end = lx->cur + (src ? len : 0);
    lx->line_start = lx->cur;
    lx->line = 1;
    lx->cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

void tg_lex_init_expr(tg_lexer *lx, const char *src, size_t len) {
    tg_lex_init(lx, src, len);
    lx->expr = true;
}

void tg_lex_seek(tg_lexer *lx, const tg_tok *t) {
    lx->cur = t->p;
    lx->line = t->line;
    lx->line_start = t->p - (t->col - 1);
    lx->depth = 0;
    lx->failed = lx->after_fused = lx->raw_next = false;
}

void tg_lex_fini(tg_lexer *lx) {
    if (lx->cloc != (locale_t)0) freelocale(lx->cloc);
    lx->cloc = (locale_t)0;
}

static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_alnum(int c) { return is_alpha(c) || is_digit(c); }

static int col_of(const tg_lexer *lx, const char *p) { return (int)(p - lx->line_start) + 1; }

/* Makes t an error token at p (sticky). */
static void lex_error(tg_lexer *lx, tg_tok *t, const char *p, const char *fmt, ...) TG_PRINTF(4, 5);
static void lex_error(tg_lexer *lx, tg_tok *t, const char *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lx->msg, sizeof lx->msg, fmt, ap);
    va_end(ap);
    *t = (tg_tok){.kind = TG_TK_ERROR, .p = p, .len = 0, .line = lx->line, .col = col_of(lx, p)};
    lx->err = *t;
    lx->failed = true;
}

/* Describes byte c for a message: 'x' or byte 0xHH. */
static void char_desc(int c, char *buf, size_t n) {
    if (c > 0x20 && c < 0x7f)
        snprintf(buf, n, "'%c'", c);
    else
        snprintf(buf, n, "byte 0x%02X", (unsigned)(c & 0xff));
}

static void lex_number(tg_lexer *lx, tg_tok *t, const char *s) {
    const char *p = s;
    bool is_float = false;
    while (p < lx->end && is_digit(*p)) p++;
    if (p < lx->end && *p == '.') {
        is_float = true;
        p++;
        while (p < lx->end && is_digit(*p)) p++;
    }
    if (p < lx->end && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        if (q < lx->end && (*q == '+' || *q == '-')) q++;
        if (q >= lx->end || !is_digit(*q)) /* "1e" or "1e+" */
            return lex_error(lx, t, s, "malformed number '%.*s'", (int)(q - s), s);
        is_float = true;
        while (q < lx->end && is_digit(*q)) q++;
        p = q;
    }
    if (p < lx->end && (is_alnum(*p) || *p == '.')) {
        const char *q = p;
        while (q < lx->end && (is_alnum(*q) || *q == '.') && q - s < 40) q++;
        return lex_error(lx, t, s, "malformed number '%.*s'", (int)(q - s), s);
    }
    size_t len = (size_t)(p - s);
    if (len > TG_TEXT_MAX_NUMBER)
        return lex_error(lx, t, s, "number literal longer than %d characters", TG_TEXT_MAX_NUMBER);
    *t = (tg_tok){.kind = is_float ? TG_TK_FLOAT : TG_TK_INT,
                  .p = s,
                  .len = len,
                  .line = lx->line,
                  .col = col_of(lx, s)};
    lx->cur = p;
    if (!is_float) {
        uint64_t u = 0;
        for (const char *q = s; q < p; q++) {
            unsigned d = (unsigned)(*q - '0');
            if (u > (UINT64_MAX - d) / 10) {
                u = UINT64_MAX;
                break;
            }
            u = u * 10 + d;
        }
        t->u = u;
        return;
    }
    char buf[TG_TEXT_MAX_NUMBER + 1];
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    char *endp = NULL;
    double v = lx->cloc != (locale_t)0 ? strtod_l(buf, &endp, lx->cloc) : strtod(buf, &endp);
    if (endp != buf + len) return lex_error(lx, t, s, "malformed number '%s'", buf);
    if (errno == ERANGE && isinf(v))
        return lex_error(lx, t, s, "float literal '%s' is out of range", buf);
    t->f = v;
}

static void lex_string(tg_lexer *lx, tg_tok *t, const char *s) {
    const char *p = s + 1;
    while (p < lx->end && *p != '"') {
        unsigned char c = (unsigned char)*p;
        if (c == '\n') break;
        if (c < 0x20 && c != '\t') {
            char d[16];
            char_desc(c, d, sizeof d);
            return lex_error(lx, t, p, "%s is not allowed in a string (write an escape)", d);
        }
        if (c != '\\') {
            p++;
            continue;
        }
        if (p + 1 >= lx->end) break;
        char e = p[1];
        if (e == '"' || e == '\\' || e == 'n' || e == 't' || e == 'r') {
            p += 2;
        } else if (e == 'x') {
            int v = 0;
            for (int k = 2; k < 4; k++) {
                char h = p + k < lx->end ? p[k] : '\0';
                int d = is_digit(h)              ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
                if (d < 0) return lex_error(lx, t, p, "'\\x' needs two hex digits");
                v = v * 16 + d;
            }
            if (v == 0) return lex_error(lx, t, p, "'\\x00' is not allowed in a string");
            p += 4;
        } else {
            char d[16];
            char_desc((unsigned char)e, d, sizeof d);
            return lex_error(lx, t, p, "unknown escape '\\' followed by %s in a string", d);
        }
    }
    if (p >= lx->end || *p != '"') return lex_error(lx, t, s, "unterminated string");
    p++;
    *t = (tg_tok){.kind = TG_TK_STRING,
                  .p = s,
                  .len = (size_t)(p - s),
                  .line = lx->line,
                  .col = col_of(lx, s)};
    lx->cur = p;
}

/* The expression of `fused{...}`: the text up to the next `}` on the same line (strings
 * skipped), as one TG_TK_RAW token; the `}` is the next token. */
static void lex_raw(tg_lexer *lx, tg_tok *t) {
    const char *p = lx->cur;
    bool in_str = false;
    for (; p < lx->end && *p != '\n' && (in_str || *p != '}'); p++) {
        if (*p == '"')
            in_str = !in_str;
        else if (in_str && *p == '\\' && p + 1 < lx->end && p[1] != '\n')
            p++;
    }
    if (p >= lx->end || *p != '}') {
        lex_error(lx, t, lx->cur - 1,
                  "'fused{' is not closed: its expression must end with '}' on the same line");
        return;
    }
    *t = (tg_tok){.kind = TG_TK_RAW,
                  .p = lx->cur,
                  .len = (size_t)(p - lx->cur),
                  .line = lx->line,
                  .col = col_of(lx, lx->cur)};
    lx->cur = p;
}

/* %INT in an expression: input INT of the fused node. */
static void lex_input(tg_lexer *lx, tg_tok *t, const char *s) {
    const char *p = s + 1;
    uint64_t u = 0;
    while (p < lx->end && is_digit(*p)) {
        unsigned d = (unsigned)(*p++ - '0');
        u = u > (UINT64_MAX - d) / 10 ? UINT64_MAX : u * 10 + d;
    }
    if (p == s + 1)
        return lex_error(lx, t, s, "expected an input number after '%%' (%%0, %%1, ...)");
    if (p < lx->end && (is_alnum(*p) || *p == '.'))
        return lex_error(lx, t, s, "malformed number '%.*s'", (int)(p + 1 - s), s);
    *t = (tg_tok){.kind = TG_TK_INPUT,
                  .p = s,
                  .len = (size_t)(p - s),
                  .line = lx->line,
                  .col = col_of(lx, s),
                  .u = u};
    lx->cur = p;
}

static void lex_token(tg_lexer *lx, tg_tok *t);

void tg_lex_next(tg_lexer *lx, tg_tok *t) {
    if (lx->raw_next && !lx->failed) {
        lx->raw_next = lx->after_fused = false;
        lex_raw(lx, t);
        return;
    }
    lex_token(lx, t);
    if (t->kind == TG_TK_LBRACE && lx->after_fused) lx->raw_next = true;
    lx->after_fused = tg_tok_is(t, "fused");
}

static void lex_token(tg_lexer *lx, tg_tok *t) {
    if (lx->failed) {
        *t = lx->err;
        return;
    }
    for (;;) {
        const char *p = lx->cur;
        if (p >= lx->end) {
            *t = (tg_tok){.kind = TG_TK_EOF, .p = p, .line = lx->line, .col = col_of(lx, p)};
            return;
        }
        char c = *p;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            lx->cur++;
            continue;
        }
        if (c == '#' && !lx->expr) {
            while (lx->cur < lx->end && *lx->cur != '\n') lx->cur++;
            continue;
        }
        if (c == '\n') {
            lx->cur++;
            bool tok = lx->depth == 0;
            if (tok)
                *t = (tg_tok){.kind = TG_TK_NEWLINE,
                              .p = p,
                              .len = 1,
                              .line = lx->line,
                              .col = col_of(lx, p)};
            if (lx->line == INT32_MAX) return lex_error(lx, t, p, "too many lines");
            lx->line++;
            lx->line_start = lx->cur;
            if (tok) return;
            continue;
        }
        if (is_alpha(c)) {
            const char *q = p;
            while (q < lx->end && is_alnum(*q)) q++;
            *t = (tg_tok){.kind = TG_TK_NAME,
                          .p = p,
                          .len = (size_t)(q - p),
                          .line = lx->line,
                          .col = col_of(lx, p)};
            lx->cur = q;
            return;
        }
        if (c == '.' && !lx->expr && lx->end - p >= 3 && p[1] == '.' && p[2] == '.') {
            *t = (tg_tok){
                .kind = TG_TK_ELLIPSIS, .p = p, .len = 3, .line = lx->line, .col = col_of(lx, p)};
            lx->cur = p + 3;
            return;
        }
        if (is_digit(c) || (c == '.' && p + 1 < lx->end && is_digit(p[1])))
            return lex_number(lx, t, p);
        if (c == '"') return lex_string(lx, t, p);
        if (lx->expr && c == '%') return lex_input(lx, t, p);
        if (c == '<' && !lx->expr && p + 1 < lx->end && p[1] == '-') {
            *t = (tg_tok){
                .kind = TG_TK_LARROW, .p = p, .len = 2, .line = lx->line, .col = col_of(lx, p)};
            lx->cur = p + 2;
            return;
        }
        static const char punct[] = "()[]{},:=@?-;";
        static const tg_tok_kind punct_kind[] = {
            TG_TK_LPAREN,   TG_TK_RPAREN, TG_TK_LBRACKET, TG_TK_RBRACKET, TG_TK_LBRACE,
            TG_TK_RBRACE,   TG_TK_COMMA,  TG_TK_COLON,    TG_TK_EQUAL,    TG_TK_AT,
            TG_TK_QUESTION, TG_TK_MINUS,  TG_TK_SEMI};
        const char *hit = c ? strchr(lx->expr ? "()[],=-;" : "()[]{},:=@?-", c) : NULL;
        if (hit) hit = strchr(punct, c);
        if (!hit) {
            char d[16];
            char_desc((unsigned char)c, d, sizeof d);
            return lex_error(lx, t, p, "unexpected character %s", d);
        }
        tg_tok_kind k = punct_kind[hit - punct];
        size_t len = 1;
        if (k == TG_TK_LPAREN || k == TG_TK_LBRACKET) lx->depth++;
        if ((k == TG_TK_RPAREN || k == TG_TK_RBRACKET) && lx->depth > 0) lx->depth--;
        if (k == TG_TK_MINUS && !lx->expr && p + 1 < lx->end && p[1] == '>') {
            k = TG_TK_ARROW;
            len = 2;
        }
        *t = (tg_tok){.kind = k, .p = p, .len = len, .line = lx->line, .col = col_of(lx, p)};
        lx->cur = p + len;
        return;
    }
}

void tg_tok_describe(const tg_tok *t, char *buf, size_t n) {
    switch (t->kind) {
    case TG_TK_EOF:
        snprintf(buf, n, "end of file");
        return;
    case TG_TK_NEWLINE:
        snprintf(buf, n, "end of line");
        return;
    case TG_TK_ERROR:
        snprintf(buf, n, "an invalid token");
        return;
    case TG_TK_STRING:
        if (t->len > 34)
            snprintf(buf, n, "string %.30s...\"", t->p);
        else
            snprintf(buf, n, "string %.*s", (int)t->len, t->p);
        return;
    default:
        if (t->len > 32)
            snprintf(buf, n, "'%.29s...'", t->p);
        else
            snprintf(buf, n, "'%.*s'", (int)t->len, t->p);
        return;
    }
}

static int hex_val(char h) {
    return is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : h - 'A' + 10;
}

void tg_tok_string(const tg_tok *t, char *out) {
    const char *p = t->p + 1, *end = t->p + t->len - 1;
    while (p < end) {
        if (*p != '\\') {
            *out++ = *p++;
            continue;
        }
        char e = p[1];
        switch (e) {
        case 'n':
            *out++ = '\n';
            p += 2;
            break;
        case 't':
            *out++ = '\t';
            p += 2;
            break;
        case 'r':
            *out++ = '\r';
            p += 2;
            break;
        case 'x':
            *out++ = (char)(hex_val(p[2]) * 16 + hex_val(p[3]));
            p += 4;
            break;
        default:
            *out++ = e;
            p += 2;
            break; /* \" and \\ (validated by the lexer) */
        }
    }
    *out = '\0';
}

bool tg_tok_is(const tg_tok *t, const char *name) {
    size_t n = strlen(name);
    return t->kind == TG_TK_NAME && t->len == n && memcmp(t->p, name, n) == 0;
}

/* ---- names ---- */

bool tg_txt_reserved(const char *s, size_t n) {
    static const char *const words[] = {"func", "return", "true", "false", "none", "inf", "nan"};
    for (size_t i = 0; i < TG_COUNTOF(words); i++)
        if (strlen(words[i]) == n && memcmp(words[i], s, n) == 0) return true;
    return false;
}

bool tg_txt_is_name(const char *s) {
    if (!s || !is_alpha((unsigned char)s[0])) return false;
    size_t n = 1;
    while (s[n]) {
        if (!is_alnum((unsigned char)s[n])) return false;
        n++;
    }
    return !tg_txt_reserved(s, n);
}

/* ---- hash map ---- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    /* FNV's low bits are weak for keys that differ in a digit or two ("t1".."t99999");
     * a final mix (MurmurHash3's fmix64) spreads them over the whole table */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

void tg_txt_map_init(tg_txt_map *m, tg_ctx *ctx) {
    m->ctx = ctx ? ctx : tg_ctx_default();
    m->slots = NULL;
    m->cap = m->n = 0;
}

void tg_txt_map_fini(tg_txt_map *m) {
    if (m->slots) tg_mem_free(m->ctx, m->slots, m->cap * sizeof *m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

static tg_txt_entry *probe(tg_txt_entry *slots, size_t cap, const char *key, size_t len,
                           uint64_t h) {
    size_t i = (size_t)h & (cap - 1);
    for (;;) {
        tg_txt_entry *e = &slots[i];
        if (!e->key || (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)) return e;
        i = (i + 1) & (cap - 1);
    }
}

tg_txt_entry *tg_txt_map_find(const tg_txt_map *m, const char *key, size_t len) {
    if (m->cap == 0) return NULL;
    tg_txt_entry *e = probe(m->slots, m->cap, key, len, hash_bytes(key, len));
    return e->key ? e : NULL;
}

tg_txt_entry *tg_txt_map_add(tg_txt_map *m, const char *key, size_t len) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 64, bytes;
        if (!tg_size_mul(ncap, sizeof *m->slots, &bytes)) {
            tg_set_error(TG_ENOMEM, "out of memory");
            return NULL;
        }
        tg_txt_entry *ns = tg_mem_calloc(m->ctx, bytes);
        if (!ns) return NULL;
        for (size_t i = 0; i < m->cap; i++) {
            tg_txt_entry *o = &m->slots[i];
            if (o->key) *probe(ns, ncap, o->key, o->len, o->hash) = *o;
        }
        size_t n = m->n;
        tg_txt_map_fini(m);
        m->slots = ns;
        m->cap = ncap;
        m->n = n;
    }
    uint64_t h = hash_bytes(key, len);
    tg_txt_entry *e = probe(m->slots, m->cap, key, len, h);
    TG_ASSERT(!e->key);
    *e = (tg_txt_entry){.key = key, .len = len, .hash = h};
    m->n++;
    return e;
}

/* ---- output of strings ---- */

void tg_txt_put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\x%02x", (unsigned)*p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}
