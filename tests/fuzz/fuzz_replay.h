/* fuzz_replay.h - the main() of a fuzz target built without libFuzzer.
 *
 * Each target defines LLVMFuzzerTestOneInput and includes this header last. Built with
 * -DTG_LIBFUZZER (cmake -DTG_FUZZ=ON, clang), libFuzzer provides main() and the header
 * adds nothing. Otherwise main() replays the files named on the command line, one call
 * each (a corpus, a crash reproducer), and exits non-zero if a file cannot be read; a
 * violated property aborts, so ctest sees the failure. Directories are read file by file.
 */
#ifndef TG_FUZZ_REPLAY_H
#define TG_FUZZ_REPLAY_H

#ifndef TG_LIBFUZZER
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef FUZZ_MAX_INPUT
#define FUZZ_MAX_INPUT ((size_t)1 << 20)
#endif

static int fuzz_replay_file(const char *path, int *count) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t cap = 4096, len = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            if (cap > FUZZ_MAX_INPUT) break;
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
    }
    int bad = ferror(f) != 0;
    fclose(f);
    if (!buf) return 1;
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    (*count)++;
    return bad;
}

static int fuzz_replay(const char *path, int *count) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return fuzz_replay_file(path, count);
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return 1;
    }
    int bad = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        size_t n = strlen(path) + strlen(e->d_name) + 2;
        char *sub = malloc(n);
        if (!sub) {
            bad = 1;
            break;
        }
        snprintf(sub, n, "%s/%s", path, e->d_name);
        bad |= fuzz_replay(sub, count);
        free(sub);
    }
    closedir(d);
    return bad;
}

int main(int argc, char **argv) {
    int bad = 0, count = 0;
    for (int i = 1; i < argc; i++) bad |= fuzz_replay(argv[i], &count);
    printf("%s: replayed %d input%s\n", argv[0], count, count == 1 ? "" : "s");
    return bad || count == 0;
}
#endif /* !TG_LIBFUZZER */
#endif
