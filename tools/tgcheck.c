/* tgcheck.c - the golden-test runner: FileCheck-style checks of the text `tgraph` prints.
 *
 * usage: tgcheck --tgraph PATH [--update] [-v] FILE.tg ...
 *
 * A test is a .tg file carrying its own directives in comments:
 *   # RUN: tgraph opt %s           a shell command (/bin/sh); %s is the file, and the word
 *                                  `tgraph` is the binary given with --tgraph. The outputs
 *                                  of all RUN lines, in order, are what the checks read. A
 *                                  command must exit 0; `# RUN: not tgraph ...` must fail
 *                                  (exit 1..127, no crash). Add 2>&1 to check stderr.
 *   # CHECK: text                  the next line holding `text`, after the previous match
 *   # CHECK-NEXT: text             the line right after the previous match holds `text`
 *   # CHECK-NOT: text              `text` is absent between the neighbouring matches
 * Texts are matched as substrings (surrounding blanks ignored), in file order.
 *
 * --update rewrites the CHECK lines of each file from the actual output, for review with
 * `git diff`: each printed function (a block ending with a line "}") becomes a run of
 * CHECK / CHECK-NEXT lines that replaces the corresponding group of consecutive CHECK
 * lines; when the groups and blocks do not pair up, all CHECK lines are replaced by the
 * blocks appended at the end. The full transcript subsumes CHECK-NOT lines, which update
 * drops (it says so). Ends with "N passed, N failed"; exit status 1 when a test failed,
 * 2 for a bad command line. Written in C so the suite needs no Python.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem, strndup, popen */
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static bool buf_add(buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

static bool buf_str(buf *b, const char *s) { return buf_add(b, s, strlen(s)); }

static bool read_all(FILE *f, buf *b) {
    char tmp[8192];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        if (!buf_add(b, tmp, n)) return false;
    if (!b->p && !buf_add(b, "", 0)) return false;
    return !ferror(f);
}

/* ---- directives ---- */

enum { D_CHECK, D_NEXT, D_NOT };

typedef struct directive {
    int kind;
    char *text; /* trimmed */
    int line;   /* 1-based line of the test file */
} directive;

typedef struct test {
    char **lines; /* the file split into lines (without '\n') */
    char **work;  /* per line: the copy directive texts point into, or NULL */
    int nlines;
    char **runs; /* RUN commands */
    int nruns;
    directive *dirs;
    int ndirs;
} test;

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

/* The text after "# KEY:" when line is that directive, else NULL. */
static char *directive_text(char *line, const char *key) {
    char *s = line;
    while (*s == ' ' || *s == '\t') s++;
    if (*s != '#') return NULL;
    s++;
    while (*s == ' ') s++;
    size_t n = strlen(key);
    if (strncmp(s, key, n) != 0 || s[n] != ':') return NULL;
    return trim(s + n + 1);
}

static bool is_check_line(char *line) {
    char *copy = strdup(line);
    bool r = copy && (directive_text(copy, "CHECK") || directive_text(copy, "CHECK-NEXT") ||
                      directive_text(copy, "CHECK-NOT"));
    free(copy);
    return r;
}

static void test_free(test *t) {
    for (int i = 0; i < t->nlines; i++) {
        free(t->lines[i]);
        if (t->work) free(t->work[i]);
    }
    free(t->lines);
    free(t->work);
    free(t->runs);
    free(t->dirs);
    memset(t, 0, sizeof *t);
}

/* Splits text into lines and collects the directives. */
static bool test_parse(const char *text, test *t) {
    size_t len = strlen(text);
    int cap = 16;
    t->lines = malloc(sizeof *t->lines * (size_t)cap);
    if (!t->lines) return false;
    for (size_t i = 0; i <= len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - text) : len;
        if (!nl && i == len) break;
        if (t->nlines == cap) {
            cap *= 2;
            char **p = realloc(t->lines, sizeof *p * (size_t)cap);
            if (!p) return false;
            t->lines = p;
        }
        char *l = strndup(text + i, end - i);
        if (!l) return false;
        t->lines[t->nlines++] = l;
        i = end + 1;
    }
    t->runs = calloc((size_t)t->nlines + 1, sizeof *t->runs);
    t->dirs = calloc((size_t)t->nlines + 1, sizeof *t->dirs);
    t->work = calloc((size_t)t->nlines + 1, sizeof *t->work);
    if (!t->runs || !t->dirs || !t->work) return false;
    for (int i = 0; i < t->nlines; i++) {
        char *w = t->work[i] = strdup(t->lines[i]), *s;
        if (!w) return false;
        if ((s = directive_text(w, "RUN")))
            t->runs[t->nruns++] = s;
        else if ((s = directive_text(w, "CHECK")))
            t->dirs[t->ndirs++] = (directive){D_CHECK, s, i + 1};
        else if ((s = directive_text(w, "CHECK-NEXT")))
            t->dirs[t->ndirs++] = (directive){D_NEXT, s, i + 1};
        else if ((s = directive_text(w, "CHECK-NOT")))
            t->dirs[t->ndirs++] = (directive){D_NOT, s, i + 1};
    }
    return true;
}

/* ---- running ---- */

static bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '/' || c == '-';
}

/* Appends s single-quoted for the shell. */
static bool add_quoted(buf *b, const char *s) {
    if (!buf_str(b, "'")) return false;
    for (; *s; s++) {
        if (*s == '\'') {
            if (!buf_str(b, "'\\''")) return false;
        } else if (!buf_add(b, s, 1)) {
            return false;
        }
    }
    return buf_str(b, "'");
}

/* The command with %s and the word `tgraph` substituted. */
static bool expand(const char *cmd, const char *file, const char *tgraph, buf *out) {
    for (size_t i = 0; cmd[i];) {
        if (cmd[i] == '%' && cmd[i + 1] == 's') {
            if (!add_quoted(out, file)) return false;
            i += 2;
        } else if (strncmp(cmd + i, "tgraph", 6) == 0 && (i == 0 || !is_word_char(cmd[i - 1])) &&
                   !is_word_char(cmd[i + 6])) {
            if (!add_quoted(out, tgraph)) return false;
            i += 6;
        } else {
            if (!buf_add(out, cmd + i, 1)) return false;
            i++;
        }
    }
    return true;
}

/* Runs every RUN line; their stdout goes to out. false with a message on failure. */
static bool run_all(const test *t, const char *file, const char *tgraph, buf *out, buf *why) {
    for (int r = 0; r < t->nruns; r++) {
        const char *cmd = t->runs[r];
        bool expect_fail = strncmp(cmd, "not ", 4) == 0;
        if (expect_fail) cmd += 4;
        buf c = {0};
        if (!expand(cmd, file, tgraph, &c)) {
            free(c.p);
            buf_str(why, "out of memory");
            return false;
        }
        fflush(NULL);
        FILE *p = popen(c.p, "r");
        if (!p) {
            buf_str(why, "cannot run: ");
            buf_str(why, c.p);
            free(c.p);
            return false;
        }
        bool ok = read_all(p, out);
        int status = pclose(p);
        char msg[256];
        if (!ok) {
            buf_str(why, "cannot read the output of the RUN line");
        } else if (status == -1 || !WIFEXITED(status)) {
            snprintf(msg, sizeof msg, "RUN line %d crashed or was killed", r + 1);
            buf_str(why, msg);
            ok = false;
        } else if (!expect_fail && WEXITSTATUS(status) != 0) {
            snprintf(msg, sizeof msg, "RUN line %d exited with %d: ", r + 1, WEXITSTATUS(status));
            buf_str(why, msg);
            buf_str(why, c.p);
            ok = false;
        } else if (expect_fail && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) >= 128)) {
            snprintf(msg, sizeof msg, "RUN line %d was expected to fail, exited with %d", r + 1,
                     WEXITSTATUS(status));
            buf_str(why, msg);
            ok = false;
        }
        free(c.p);
        if (!ok) return false;
    }
    return true;
}

/* ---- matching ---- */

/* First occurrence of needle in [from, to), or NULL. */
static const char *find_in(const char *from, const char *to, const char *needle) {
    size_t n = strlen(needle);
    if (n == 0) return from;
    if (to < from || (size_t)(to - from) < n) return NULL;
    return memmem(from, (size_t)(to - from), needle, n);
}

static int line_of(const char *text, const char *at) {
    int line = 1;
    for (const char *p = text; p < at; p++) line += *p == '\n';
    return line;
}

/* Checks the directives against out; false with a message in why. */
static bool match(const test *t, const char *out, buf *why) {
    const char *end = out + strlen(out);
    const char *pos = out;       /* after the previous match */
    const char *prev_eol = NULL; /* end of the line of the previous match */
    int nots_from = 0, nnots = 0;
    char msg[512];
    for (int i = 0; i <= t->ndirs; i++) {
        const directive *d = i < t->ndirs ? &t->dirs[i] : NULL;
        if (d && d->kind == D_NOT) {
            if (nnots == 0) nots_from = i;
            nnots++;
            continue;
        }
        const char *at = end, *hit = NULL;
        if (d && d->kind == D_CHECK) {
            hit = find_in(pos, end, d->text);
            if (!hit) {
                snprintf(msg, sizeof msg, "line %d: CHECK: '%s' not found after output line %d",
                         d->line, d->text, line_of(out, pos));
                buf_str(why, msg);
                return false;
            }
            at = hit;
        } else if (d) {
            const char *ls = prev_eol ? prev_eol + 1 : out;
            const char *le = ls < end ? memchr(ls, '\n', (size_t)(end - ls)) : NULL;
            if (!le) le = end;
            hit = ls <= end ? find_in(ls, le, d->text) : NULL;
            if (!hit) {
                snprintf(msg, sizeof msg, "line %d: CHECK-NEXT: '%s' not on output line %d",
                         d->line, d->text, line_of(out, ls < end ? ls : end));
                buf_str(why, msg);
                return false;
            }
            at = hit;
        }
        for (int k = nots_from; k < nots_from + nnots; k++) {
            const char *bad = find_in(pos, at, t->dirs[k].text);
            if (bad) {
                snprintf(msg, sizeof msg, "line %d: CHECK-NOT: '%s' found on output line %d",
                         t->dirs[k].line, t->dirs[k].text, line_of(out, bad));
                buf_str(why, msg);
                return false;
            }
        }
        nnots = 0;
        if (!d) break;
        pos = hit + strlen(d->text);
        prev_eol = memchr(pos, '\n', (size_t)(end - pos));
        if (!prev_eol) prev_eol = end;
    }
    return true;
}

/* ---- update ---- */

/* Appends the CHECK lines of output lines [from, to) to b. */
static bool gen_block(buf *b, char **olines, int from, int to) {
    bool chain = false;
    for (int i = from; i < to; i++) {
        char *s = trim(olines[i]);
        if (!*s) {
            chain = false;
            continue;
        }
        if (!buf_str(b, chain ? "# CHECK-NEXT: " : "# CHECK: ") || !buf_str(b, s) ||
            !buf_str(b, "\n"))
            return false;
        chain = true;
    }
    return true;
}

static bool update(const char *file, const test *t, char *out, int *dropped_nots) {
    /* output lines */
    int no = 0, cap = 16;
    char **ol = malloc(sizeof *ol * (size_t)cap);
    if (!ol) return false;
    for (char *s = out; *s;) {
        char *nl = strchr(s, '\n');
        if (nl) *nl = '\0';
        if (no == cap) {
            cap *= 2;
            char **p = realloc(ol, sizeof *p * (size_t)cap);
            if (!p) {
                free(ol);
                return false;
            }
            ol = p;
        }
        ol[no++] = s;
        if (!nl) break;
        s = nl + 1;
    }
    /* blocks end after a line "}" (the last block takes what follows) */
    int *bstart = calloc((size_t)no + 2, sizeof *bstart), nb = 0;
    if (!bstart) {
        free(ol);
        return false;
    }
    bstart[nb++] = 0;
    for (int i = 0; i < no; i++)
        if (strcmp(trim(ol[i]), "}") == 0 && i + 1 < no) bstart[nb++] = i + 1;
    bstart[nb] = no;
    /* trailing blocks of blank lines only do not count */
    while (nb > 1) {
        bool blank = true;
        for (int i = bstart[nb - 1]; i < bstart[nb] && blank; i++) blank = !*trim(ol[i]);
        if (!blank) break;
        bstart[nb - 1] = bstart[nb];
        nb--;
    }
    /* groups of consecutive CHECK lines in the file */
    int ngroups = 0;
    *dropped_nots = 0;
    for (int i = 0; i < t->nlines; i++) {
        if (!is_check_line(t->lines[i])) continue;
        if (i == 0 || !is_check_line(t->lines[i - 1])) ngroups++;
        char *copy = strdup(t->lines[i]);
        if (copy && directive_text(copy, "CHECK-NOT")) (*dropped_nots)++;
        free(copy);
    }
    buf b = {0};
    bool ok = true;
    int g = 0;
    for (int i = 0; i < t->nlines && ok; i++) {
        if (is_check_line(t->lines[i])) {
            bool first = i == 0 || !is_check_line(t->lines[i - 1]);
            if (first && ngroups == nb) ok = gen_block(&b, ol, bstart[g], bstart[g + 1]);
            if (first) g++;
            continue;
        }
        ok = buf_str(&b, t->lines[i]) && buf_str(&b, "\n");
    }
    if (ok && ngroups != nb)
        for (int k = 0; k < nb && ok; k++) ok = gen_block(&b, ol, bstart[k], bstart[k + 1]);
    if (ok) {
        FILE *f = fopen(file, "wb");
        ok = f && fwrite(b.p ? b.p : "", 1, b.n, f) == b.n;
        if (f && fclose(f) != 0) ok = false;
    }
    free(b.p);
    free(bstart);
    free(ol);
    return ok;
}

/* ---- main ---- */

static int run_test(const char *file, const char *tgraph, bool do_update, bool verbose) {
    FILE *f = fopen(file, "rb");
    buf src = {0}, out = {0}, why = {0};
    test t = {0};
    int rc = 1;
    if (!f) {
        printf("FAIL %s: cannot read: %s\n", file, strerror(errno));
        return 1;
    }
    bool ok = read_all(f, &src);
    fclose(f);
    if (!ok || !test_parse(src.p, &t)) {
        printf("FAIL %s: cannot read (out of memory)\n", file);
        goto done;
    }
    if (t.nruns == 0) {
        printf("FAIL %s: no '# RUN:' line\n", file);
        goto done;
    }
    if (!run_all(&t, file, tgraph, &out, &why)) {
        printf("FAIL %s: %s\n", file, why.p ? why.p : "?");
        goto done;
    }
    if (do_update) {
        int dropped = 0;
        if (!update(file, &t, out.p, &dropped)) {
            printf("FAIL %s: cannot rewrite the file\n", file);
            goto done;
        }
        printf("UPDATED %s%s\n", file,
               dropped ? " (CHECK-NOT lines dropped: review the diff)" : "");
        rc = 0;
        goto done;
    }
    if (t.ndirs == 0) {
        printf("FAIL %s: no '# CHECK:' line\n", file);
        goto done;
    }
    if (!match(&t, out.p, &why)) {
        printf("FAIL %s: %s\n", file, why.p ? why.p : "?");
        printf("---- output ----\n%s%s----\n", out.p,
               out.n && out.p[out.n - 1] != '\n' ? "\n" : "");
        goto done;
    }
    if (verbose) printf("PASS %s\n", file);
    rc = 0;
done:
    test_free(&t);
    free(src.p);
    free(out.p);
    free(why.p);
    return rc;
}

int main(int argc, char **argv) {
    const char *tgraph = NULL;
    bool do_update = false, verbose = false;
    int first = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tgraph") == 0 && i + 1 < argc) {
            tgraph = argv[++i];
        } else if (strncmp(argv[i], "--tgraph=", 9) == 0) {
            tgraph = argv[i] + 9;
        } else if (strcmp(argv[i], "--update") == 0) {
            do_update = true;
        } else if (strcmp(argv[i], "-v") == 0) {
            verbose = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: tgcheck --tgraph PATH [--update] [-v] FILE.tg ...\n");
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "tgcheck: unknown option '%s'\n", argv[i]);
            return 2;
        } else {
            first = i;
            break;
        }
    }
    if (!tgraph || first >= argc) {
        fprintf(stderr, "usage: tgcheck --tgraph PATH [--update] [-v] FILE.tg ...\n");
        return 2;
    }
    int passed = 0, failed = 0;
    for (int i = first; i < argc; i++) {
        if (run_test(argv[i], tgraph, do_update, verbose) == 0)
            passed++;
        else
            failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
