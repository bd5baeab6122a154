/* text.h - private header of the .tg text format: the lexer (lex.c), the parser
 * (parse.c, parse_expr.c, parse_attr.c; their shared header parse.h), the expressions of
 * fused nodes (fused_expr.c), the printers (print.c, dot.c) and modules (module.c).
 *
 * Invariants:
 *  - Tokens point into the source text (never copied); the source outlives the lexer.
 *  - Lines and columns are 1-based; a column counts bytes (a tab is one column).
 *  - Numbers are read and written in the "C" numeric locale whatever the process's
 *    locale is (strtod_l / uselocale), so a German LC_NUMERIC never turns 0.5 into 0,5.
 *  - The lexer is sticky: after an error token it returns the same error token again.
 */
#ifndef TG_TEXT_H
#define TG_TEXT_H

#include "../ir/ir.h"

#include <locale.h>

/* ---- modules ---- */
struct tg_module {
    tg_ctx *ctx;
    tg_vec funcs; /* tg_graph* */
};

/* ---- printing helpers shared by print.c and dot.c ---- */
/* Formats a literal constant (scalar) for the .tg text: "2", "-0.5", "true", "inf". */
void tg_ir_format_scalar(const tg_var *v, char *buf, size_t n);

#define TG_TEXT_MAX_BYTES  ((size_t)1 << 30) /* largest .tg text parsed or loaded (1 GiB) */
#define TG_TEXT_MAX_NUMBER 128               /* longest number literal, in bytes */

/* ---- tokens ---- */
typedef enum {
    TG_TK_EOF,      /* end of the text */
    TG_TK_NEWLINE,  /* end of a line outside ( ) and [ ] */
    TG_TK_NAME,     /* [A-Za-z_][A-Za-z0-9_]* (keywords are names too) */
    TG_TK_INT,      /* decimal digits; magnitude in u */
    TG_TK_FLOAT,    /* 1.5  1.  .5  1e-3  2.5E+4; value in f */
    TG_TK_STRING,   /* "..." with escapes; the span includes the quotes */
    TG_TK_LPAREN,   /* ( */
    TG_TK_RPAREN,   /* ) */
    TG_TK_LBRACKET, /* [ */
    TG_TK_RBRACKET, /* ] */
    TG_TK_LBRACE,   /* { */
    TG_TK_RBRACE,   /* } */
    TG_TK_COMMA,    /* , */
    TG_TK_COLON,    /* : */
    TG_TK_EQUAL,    /* = */
    TG_TK_AT,       /* @ */
    TG_TK_ARROW,    /* -> (reserved for return types) */
    TG_TK_LARROW,   /* <- (an update of a state: `W <- expr`) */
    TG_TK_MINUS,    /* - (only meaningful before a number) */
    TG_TK_QUESTION, /* ? */
    TG_TK_ELLIPSIS, /* ... (inside x[...]) */
    TG_TK_RAW,      /* the text between `fused{` and its `}` (one line, taken as is) */
    TG_TK_INPUT,    /* expressions only: %INT, a fused node's input; its number in u */
    TG_TK_SEMI,     /* expressions only: ; */
    TG_TK_ERROR,    /* lexical error: message in the lexer's msg */
} tg_tok_kind;

typedef struct tg_tok {
    tg_tok_kind kind; /* what it is */
    const char *p;    /* first byte in the source */
    size_t len;       /* length in bytes */
    int line, col;    /* position of the first byte, 1-based */
    uint64_t u;       /* INT, INPUT: magnitude, saturated at UINT64_MAX */
    double f;         /* FLOAT: value */
} tg_tok;

typedef struct tg_lexer {
    const char *cur, *end;  /* next byte, end of the text */
    const char *line_start; /* first byte of the current line */
    int line;               /* current line, 1-based */
    long depth;             /* open ( and [ : newlines inside them are not tokens */
    bool failed;            /* an error token was returned */
    bool after_fused;       /* the last token was the name `fused` */
    bool raw_next;          /* the last token was the `{` of `fused{`: a RAW token follows */
    bool expr;              /* lexing the expression of a fused{...} (tg_lex_init_expr) */
    tg_tok err;             /* that token (returned again) */
    char msg[256];          /* its message, without the position */
    locale_t cloc;          /* "C" numeric locale for strtod_l, or (locale_t)0 */
} tg_lexer;

/* The text must hold fewer than TG_TEXT_MAX_BYTES bytes (callers check). */
void tg_lex_init(tg_lexer *lx, const char *src, size_t len);
/* Lexes the expression of a fused{...} (one line: columns are 1 + byte offsets): `%` INT
 * is an INPUT and `;` a SEMI; punctuation is only ( ) [ ] , = - ; and `#` starts no
 * comment. */
void tg_lex_init_expr(tg_lexer *lx, const char *src, size_t len);
void tg_lex_fini(tg_lexer *lx);
/* Restarts lexing at token t (of the same text), which must start outside any ( or [:
 * the parser reads the functions of a file in the order their calls need. */
void tg_lex_seek(tg_lexer *lx, const tg_tok *t);
void tg_lex_next(tg_lexer *lx, tg_tok *t);
/* Writes what a token is for messages: "','", "'foo'", "end of line", "end of file". */
void tg_tok_describe(const tg_tok *t, char *buf, size_t n);
/* Decodes a STRING token's escapes into out, which must hold t->len bytes. */
void tg_tok_string(const tg_tok *t, char *out);
bool tg_tok_is(const tg_tok *t, const char *name); /* a NAME spelled `name` */

/* ---- names ---- */
/* Words that cannot be bound as names: func return true false none inf nan. */
bool tg_txt_reserved(const char *s, size_t n);
/* A name that prints and parses back as itself: an identifier, not reserved. */
bool tg_txt_is_name(const char *s);
/* Prints the functions roots[0..n) in order, preceded by the functions they call that are
 * not among them (backward functions made by grad, graphs built in C), each under a name
 * no other printed function or op has: the text parses back as one module. */
tg_status tg_txt_print_unit(const tg_graph *const *roots, int n, tg_ctx *ctx, FILE *f);

/* ---- a string-keyed hash map (open addressing; keys are borrowed spans) ---- */
typedef struct tg_txt_entry {
    const char *key; /* NULL: empty slot */
    size_t len;      /* key length */
    uint64_t hash;   /* of the key */
    void *val;       /* payload */
    int line, col;   /* where the key was defined */
} tg_txt_entry;

typedef struct tg_txt_map {
    tg_ctx *ctx;         /* allocator */
    tg_txt_entry *slots; /* cap entries, cap a power of two (or 0) */
    size_t cap, n;       /* slots, used */
} tg_txt_map;

void tg_txt_map_init(tg_txt_map *m, tg_ctx *ctx);
void tg_txt_map_fini(tg_txt_map *m);
tg_txt_entry *tg_txt_map_find(const tg_txt_map *m, const char *key, size_t len);
/* Adds a key that is not present; NULL when out of memory (error set). */
tg_txt_entry *tg_txt_map_add(tg_txt_map *m, const char *key, size_t len);

/* ---- string output ---- */
/* Writes s as a "..." literal with escapes. */
void tg_txt_put_string(FILE *f, const char *s);

/* ---- fused programs (fused_expr.c) ---- */
/* Parses the expression of fused{EXPR} (len bytes, need not be NUL-terminated) for a node
 * with nin inputs into a new program from ctx (fused.h), *out. On error returns the status
 * with a message naming the column in the expression in msg (n bytes), *out NULL. Iterative
 * (calls nest at most TG_FUSED_MAX_DEPTH deep) and linear in the text. */
struct tg_fused_prog;
tg_status tg_txt_fused_parse(tg_ctx *ctx, const char *expr, size_t len, int nin,
                             struct tg_fused_prog **out, char *msg, size_t n);

/* ---- the parser (parse.c) ---- */
/* Parses `len` bytes of .tg text into m (whose funcs receive the functions).
 * On error returns the status with "file:line:col: message" in tg_last_error(). */
tg_status tg_txt_parse(tg_module *m, const char *src, size_t len, const char *filename);

#endif
