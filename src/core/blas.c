/* blas.c - calling the BLAS and LAPACK library from several threads at once.
 *
 * The pool calls BLAS from several threads at once (the parts of a split product,
 * batches, concurrent runs of independent nodes). OpenBLAS takes the packing buffer of
 * every level-2 and level-3 call from a table of slots shared by the process
 * (blas_memory_alloc, blas_memory_free), which its serial build guards with a lock only
 * when made with USE_LOCKING=1. Debian's serial build is not: two calls that start at
 * once can take the same slot and pack over each other's operands, a wrong product with
 * no error (seen on the kernels OpenBLAS picks for older x86 cores, and from Python on
 * recent ones; test_blas_oldcore and python/tests/test_blas_guard.py provoke it).
 *
 * The definitions of those two functions below run OpenBLAS's own under one mutex, the
 * lock USE_LOCKING adds: only taking and giving back a slot is serialized, the products
 * run in parallel. OpenBLAS (and Debian's libblas.so.3 and liblapack.so.3, which share its
 * table) calls them through its PLT, so they are reached
 * - by interposition, when the dynamic linker binds the two symbols with libtgraph in the
 *   global lookup scope before OpenBLAS: a program linked with libtgraph;
 * - else by rebinding (rebind_all): the GOT slots of those two symbols in every loaded
 *   object that still points at OpenBLAS's definitions are pointed at ours. That is the
 *   case of a host that loaded OpenBLAS first with immediate binding: CPython loads
 *   extensions RTLD_NOW, so NumPy imported before tgraph has bound them. ELF on x86-64 and
 *   AArch64 only; a slot whose value is not OpenBLAS's definition is left alone.
 * Whether either worked is checked once per process by a probe product (at the first
 * compile of a function with BLAS work, or the first BLAS call or query): if it did not
 * reach our blas_memory_alloc, every call between tg_blas_enter and tg_blas_leave
 * takes one process-wide lock instead (serialized: correct, no parallel BLAS; also a
 * static OpenBLAS, where ours are not built). A threaded OpenBLAS locks its table itself;
 * another BLAS library is taken to be thread-safe. Objects loaded after the probe are
 * rebound when a function is compiled (tg_blas_rebind).
 */
#include "blas.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>

#include "core.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static _Thread_local bool reached; /* this thread's OpenBLAS call reached our blas_memory_alloc */
static bool serialize;             /* every call under call_lock (set once, by probe) */
static const char *guard = "thread-safe BLAS";
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;

#if defined(TG_BLAS_LOCK) && defined(OPENBLAS_VERSION)
#include <dlfcn.h>

static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;

/* OpenBLAS's definition of name (the next one after ours), found once, under a lock.
 * Only OpenBLAS calls ours (bound or rebound to them), so its definition is always there
 * to find: not finding it is a bug of ours (tg_bug), as there is no status to return to
 * OpenBLAS's caller. */
static void *blas_next(const char *name, void **cache) {
    if (!*cache) *cache = dlsym(RTLD_NEXT, name);
    TG_ASSERT(*cache != NULL);
    return *cache;
}

/* exported although the library hides all but tgraph.h (tests/abi/exports.sh lists them):
   OpenBLAS's PLT finds them through the dynamic symbol table */
__attribute__((visibility("default"))) void *blas_memory_alloc(int procpos);
__attribute__((visibility("default"))) void blas_memory_free(void *buffer);

void *blas_memory_alloc(int procpos) {
    static void *real;
    reached = true;
    pthread_mutex_lock(&slot_lock);
    void *(*fn)(int);
    *(void **)&fn = blas_next("blas_memory_alloc", &real);
    void *p = fn(procpos);
    pthread_mutex_unlock(&slot_lock);
    return p;
}

void blas_memory_free(void *buffer) {
    static void *real;
    pthread_mutex_lock(&slot_lock);
    void (*fn)(void *);
    *(void **)&fn = blas_next("blas_memory_free", &real);
    fn(buffer);
    pthread_mutex_unlock(&slot_lock);
}
#endif

#if defined(TG_BLAS_LOCK) && defined(OPENBLAS_VERSION) && defined(__linux__) &&                    \
    (defined(__x86_64__) || defined(__aarch64__))
#define TG_BLAS_REBIND 1
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define R_SLOT R_X86_64_JUMP_SLOT
#define R_DATA R_X86_64_GLOB_DAT
#else
#define R_SLOT R_AARCH64_JUMP_SLOT
#define R_DATA R_AARCH64_GLOB_DAT
#endif

static pthread_mutex_t rebind_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long rebind_adds; /* dl_iterate_phdr's count of loads at the last scan */

typedef struct {
    void *real[2], *ours[2]; /* OpenBLAS's and our blas_memory_alloc, blas_memory_free */
    uintptr_t self;          /* libtgraph's load address: its own slots are left alone */
} rebind_ctx;

/* An address of the object from a .dynamic entry: glibc relocates some entries in place,
 * so one below the load address is still an offset. */
static uintptr_t dyn_addr(uintptr_t base, ElfW(Addr) v) { return v < base ? base + v : v; }

/* Points *slot at ours. The loader made read-only the pages of the object's RELRO range
 * that lie wholly below its end (its end rounded down to a page); a slot there is made
 * writable for the store and read-only again, any other is written as it is. */
static void set_slot(const struct dl_phdr_info *info, void **slot, void *ours) {
    uintptr_t a = (uintptr_t)slot, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
        uintptr_t hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(page - 1);
        if (ph->p_type == PT_GNU_RELRO && a >= lo && a < hi) {
            void *pg = (void *)(a & ~(page - 1));
            if (mprotect(pg, page, PROT_READ | PROT_WRITE) != 0) return;
            __atomic_store_n(slot, ours, __ATOMIC_RELEASE);
            mprotect(pg, page, PROT_READ);
            return;
        }
    }
    __atomic_store_n(slot, ours, __ATOMIC_RELEASE);
}

static void rebind_relocs(const struct dl_phdr_info *info, const rebind_ctx *c,
                          const ElfW(Rela) * r, size_t bytes, const ElfW(Sym) * sym,
                          const char *str) {
    for (size_t i = 0; i < bytes / sizeof *r; i++) {
        unsigned long type = ELF64_R_TYPE(r[i].r_info);
        if (type != R_SLOT && type != R_DATA) continue;
        const char *name = str + sym[ELF64_R_SYM(r[i].r_info)].st_name;
        int k = strcmp(name, "blas_memory_alloc") == 0  ? 0
                : strcmp(name, "blas_memory_free") == 0 ? 1
                                                        : -1;
        void **slot = (void **)(info->dlpi_addr + r[i].r_offset);
        if (k >= 0 && __atomic_load_n(slot, __ATOMIC_ACQUIRE) == c->real[k])
            set_slot(info, slot, c->ours[k]);
    }
}

static int rebind_object(struct dl_phdr_info *info, size_t size, void *ud) {
    (void)size;
    const rebind_ctx *c = ud;
    if (info->dlpi_addr == c->self) return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return 0;
    uintptr_t b = info->dlpi_addr, jmprel = 0, rela = 0, symtab = 0, strtab = 0;
    size_t pltsz = 0, relasz = 0;
    long pltrel = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_JMPREL:
            jmprel = dyn_addr(b, dyn->d_un.d_ptr);
            break;
        case DT_PLTRELSZ:
            pltsz = dyn->d_un.d_val;
            break;
        case DT_PLTREL:
            pltrel = (long)dyn->d_un.d_val;
            break;
        case DT_RELA:
            rela = dyn_addr(b, dyn->d_un.d_ptr);
            break;
        case DT_RELASZ:
            relasz = dyn->d_un.d_val;
            break;
        case DT_SYMTAB:
            symtab = dyn_addr(b, dyn->d_un.d_ptr);
            break;
        case DT_STRTAB:
            strtab = dyn_addr(b, dyn->d_un.d_ptr);
            break;
        default:
            break;
        }
    }
    if (!symtab || !strtab) return 0;
    const ElfW(Sym) *sym = (const ElfW(Sym) *)symtab;
    if (jmprel && pltrel == DT_RELA)
        rebind_relocs(info, c, (const ElfW(Rela) *)jmprel, pltsz, sym, (const char *)strtab);
    if (rela) rebind_relocs(info, c, (const ElfW(Rela) *)rela, relasz, sym, (const char *)strtab);
    return 0;
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *ud) {
    (void)size;
    *(unsigned long long *)ud = info->dlpi_adds;
    return 1;
}

/* Points every loaded object's slots of the two functions that hold OpenBLAS's
 * definitions at ours (a no-op when nothing was loaded since the last scan, or with
 * TGRAPH_BLAS_REBIND=0). */
static void rebind_all(void) {
    const char *env = getenv("TGRAPH_BLAS_REBIND");
    if (env && strcmp(env, "0") == 0) return;
    unsigned long long adds = 0;
    dl_iterate_phdr(count_adds, &adds);
    pthread_mutex_lock(&rebind_lock);
    if (adds != rebind_adds) {
        rebind_ctx c = {.ours = {(void *)blas_memory_alloc, (void *)blas_memory_free}};
        static void *ra, *rf;
        c.real[0] = blas_next("blas_memory_alloc", &ra);
        c.real[1] = blas_next("blas_memory_free", &rf);
        Dl_info self;
        if (dladdr((void *)blas_memory_alloc, &self) && self.dli_fbase) {
            c.self = (uintptr_t)self.dli_fbase;
            dl_iterate_phdr(rebind_object, &c);
        }
        rebind_adds = adds;
    }
    pthread_mutex_unlock(&rebind_lock);
}
#endif

/* A product OpenBLAS packs (its small-matrix path, which takes no buffer, ends well below
 * 160^3 multiply-adds), made through the path tgraph's own calls take: whether it reached
 * our blas_memory_alloc (on this thread, in this product). */
static bool probe_reaches(void) {
#if defined(OPENBLAS_VERSION)
    enum { n = 160 };
    double *m = calloc((size_t)3 * n * n, sizeof *m);
    if (!m) return false; /* cannot tell: serialized */
    reached = false;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, m, n, m + n * n, n, 0.0,
                m + 2 * n * n, n);
    free(m);
#endif
    return reached;
}

static void probe(void) {
#if defined(OPENBLAS_VERSION)
    if (openblas_get_parallel() != 0) {
        guard = "OpenBLAS (threaded build): its own lock";
        return;
    }
    if (probe_reaches()) {
        guard = "OpenBLAS (serial build): buffer table locked by libtgraph";
        return;
    }
#if defined(TG_BLAS_REBIND)
    rebind_all();
    if (probe_reaches()) {
        guard = "OpenBLAS (serial build): buffer table locked by libtgraph (rebound)";
        return;
    }
#endif
    serialize = true;
    guard = "OpenBLAS (serial build): calls serialized (its buffer functions could not be "
            "locked)";
#endif
}

void tg_blas_rebind(void) {
    if (!tg_blas_serialized()) {
#if defined(TG_BLAS_REBIND)
        rebind_all();
#endif
    }
}

void tg_blas_enter(void) {
    pthread_once(&probe_once, probe);
    if (serialize) pthread_mutex_lock(&call_lock);
}

void tg_blas_leave(void) {
    if (serialize) pthread_mutex_unlock(&call_lock);
}

bool tg_blas_serialized(void) {
    pthread_once(&probe_once, probe);
    return serialize;
}

const char *tg_blas_guard(void) {
    pthread_once(&probe_once, probe);
    return guard;
}
