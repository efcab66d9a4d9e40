/* graph-fold: ftrace-report's function-graph text (stdin) folded into per-thread call paths,
 * checking the nesting as it goes: what parse_graph in tests/integration/run_integration.py
 * computes, done in C because the tests parse millions of lines.
 *
 *   graph-fold              the whole input is one graph
 *   graph-fold --sections   one graph per process section, each starting with its
 *                           "# ftrace-run: ...  pid N  M threads  ..." header line; a non-blank
 *                           line that is not a comment before the first header is an error
 *
 * Graph lines are "TID) DURATION|  INDENT BODY"; other lines must be blank or start with '#'.
 * The indentation is two spaces a level up to 64 levels; a deeper line has the indentation of 64
 * and then "[depth N] " (N counted from 1) before its body.
 * Lines end at '\n' only (Python's splitlines also ends them at '\r', '\v', '\f' and the like:
 * the report writes none, as it turns control characters in names into '?').
 * Output (paths and names never hold a newline):
 *
 *   S PID HEADER            (--sections) a section, its header line as it was
 *   C                       (--sections) one of the section's lines is a call: it matches
 *                           r"\|  .*\(\)( \{|;)$"; then the section's threads, each:
 *   T TID N M               a thread with N call paths and M frames still open (the threads in
 *                           the order they first called something), followed by
 *   PATH                      N lines: the call paths (names joined with ';'), first seen first
 *   COUNT COUNT ...           one line: the calls of each path (0: only resumed frames)
 *   NAME                      M lines: the open frames, outermost first
 *
 * On an error, "E MESSAGE" is the last line and the exit status is 1.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INHERITED " /* inherited from the parent */"
#define RESUMED " /* resumed */"
#define HEADER "# ftrace-run: "

struct entry {
    const char *name; /* into the input */
    uint32_t len;
    uint32_t thread;
    int32_t parent; /* entry of the enclosing frame, -1 at the root */
    int64_t count;
    uint64_t hash;
};

struct thread {
    uint64_t tid;
    int32_t *stack; /* the entry of each open frame */
    size_t depth, cap;
    uint32_t *order; /* this thread's entries, first seen first */
    size_t n, ocap;
};

struct state {
    struct entry *entries;
    size_t n_entries, cap_entries;
    uint32_t *slots; /* entry index + 1, 0: empty */
    size_t n_slots;
    struct thread *threads;
    size_t n_threads, cap_threads;
    uint32_t *tslots; /* thread index + 1 */
    size_t n_tslots;
    bool semicolon; /* a name holds ';': two entries may fold to the same path */
};

static struct state st;
static char *input;   /* the whole input: names point into it */
static char *message; /* a message's list of open frames */
static char *scratch;
static size_t scratch_cap;

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fputs("E graph-fold: out of memory\n", stdout);
        exit(1);
    }
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        fputs("E graph-fold: out of memory\n", stdout);
        exit(1);
    }
    return p;
}

#define GROW(arr, n, cap)                                                                          \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            (cap) = (cap) ? 2 * (cap) : 16;                                                        \
            (arr) = xrealloc((arr), (cap) * sizeof(*(arr)));                                       \
        }                                                                                          \
    } while (0)

/* Output: one big buffer through stdio */
static void put(const char *s, size_t n)
{
    fwrite(s, 1, n, stdout);
}

/* An error: "E " and the message, then exit status 1 */
__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("E ", stdout);
    vfprintf(stdout, fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
    exit(1);
}

static bool is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static bool starts(const char *s, size_t n, const char *pre)
{
    size_t k = strlen(pre);
    return n >= k && memcmp(s, pre, k) == 0;
}

static bool ends(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && memcmp(s + n - k, suf, k) == 0;
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static void state_init(void)
{
    memset(&st, 0, sizeof(st));
    st.n_slots = 1024;
    st.slots = xcalloc(st.n_slots, sizeof(*st.slots));
    st.n_tslots = 64;
    st.tslots = xcalloc(st.n_tslots, sizeof(*st.tslots));
}

static void state_free(void)
{
    for (size_t i = 0; i < st.n_threads; i++) {
        free(st.threads[i].stack);
        free(st.threads[i].order);
    }
    free(st.threads);
    free(st.tslots);
    free(st.entries);
    free(st.slots);
}

static struct thread *thread_get(uint64_t tid)
{
    size_t mask = st.n_tslots - 1, i;
    for (i = mix(tid) & mask; st.tslots[i]; i = (i + 1) & mask)
        if (st.threads[st.tslots[i] - 1].tid == tid) return &st.threads[st.tslots[i] - 1];
    GROW(st.threads, st.n_threads, st.cap_threads);
    struct thread *t = &st.threads[st.n_threads++];
    memset(t, 0, sizeof(*t));
    t->tid = tid;
    st.tslots[i] = (uint32_t)st.n_threads;
    if (2 * st.n_threads > st.n_tslots) {
        free(st.tslots);
        st.n_tslots *= 2;
        st.tslots = xcalloc(st.n_tslots, sizeof(*st.tslots));
        mask = st.n_tslots - 1;
        for (size_t k = 0; k < st.n_threads; k++) {
            for (i = mix(st.threads[k].tid) & mask; st.tslots[i]; i = (i + 1) & mask)
                ;
            st.tslots[i] = (uint32_t)(k + 1);
        }
    }
    return t;
}

static void rehash(void)
{
    free(st.slots);
    st.n_slots *= 2;
    st.slots = xcalloc(st.n_slots, sizeof(*st.slots));
    size_t mask = st.n_slots - 1;
    for (size_t k = 0; k < st.n_entries; k++) {
        size_t i = st.entries[k].hash & mask;
        while (st.slots[i])
            i = (i + 1) & mask;
        st.slots[i] = (uint32_t)(k + 1);
    }
}

/* The entry of the call path (the thread's open frames, then name): counted calls more */
static int32_t count(struct thread *t, const char *name, size_t len, int calls)
{
    uint32_t ti = (uint32_t)(t - st.threads);
    int32_t parent = t->depth ? t->stack[t->depth - 1] : -1;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t k = 0; k < len; k++)
        h = (h ^ (unsigned char)name[k]) * 0x100000001b3ULL;
    h = mix(h ^ mix((uint64_t)(parent + 1) << 32 | ti));
    size_t mask = st.n_slots - 1, i;
    for (i = h & mask; st.slots[i]; i = (i + 1) & mask) {
        struct entry *e = &st.entries[st.slots[i] - 1];
        if (e->hash == h && e->thread == ti && e->parent == parent && e->len == len &&
            memcmp(e->name, name, len) == 0) {
            e->count += calls;
            return (int32_t)(st.slots[i] - 1);
        }
    }
    if (memchr(name, ';', len)) st.semicolon = true;
    GROW(st.entries, st.n_entries, st.cap_entries);
    int32_t idx = (int32_t)st.n_entries++;
    st.entries[idx] = (struct entry){name, (uint32_t)len, ti, parent, calls, h};
    st.slots[i] = (uint32_t)idx + 1;
    GROW(t->order, t->n, t->ocap);
    t->order[t->n++] = (uint32_t)idx;
    if (2 * st.n_entries > st.n_slots) rehash();
    return idx;
}

/* The call path of entry e in scratch; returns its length */
static size_t path_of(int32_t e)
{
    size_t n = 0;
    for (int32_t k = e; k >= 0; k = st.entries[k].parent)
        n += st.entries[k].len + 1;
    n--;
    if (n + 1 > scratch_cap) {
        scratch_cap = 2 * (n + 1);
        scratch = xrealloc(scratch, scratch_cap);
    }
    size_t end = n;
    for (int32_t k = e; k >= 0; k = st.entries[k].parent) {
        end -= st.entries[k].len;
        memcpy(scratch + end, st.entries[k].name, st.entries[k].len);
        if (end) scratch[--end] = ';';
    }
    return n;
}

struct path {
    char *s;
    size_t len;
    int64_t count;
};

/* With ';' in names, entries of different frames may fold to one path: one line each path,
 * where it was first seen, with the calls of all */
static void emit_merged(struct thread *t, size_t *n_paths, struct path **paths)
{
    size_t cap = 16;
    while (cap < 2 * t->n)
        cap *= 2;
    uint32_t *slots = xcalloc(cap, sizeof(*slots));
    struct path *out = xcalloc(t->n ? t->n : 1, sizeof(*out));
    size_t n = 0;
    for (size_t k = 0; k < t->n; k++) {
        struct entry *e = &st.entries[t->order[k]];
        size_t len = path_of((int32_t)t->order[k]);
        uint64_t h = 0xcbf29ce484222325ULL;
        for (size_t j = 0; j < len; j++)
            h = (h ^ (unsigned char)scratch[j]) * 0x100000001b3ULL;
        size_t i = mix(h) & (cap - 1);
        for (; slots[i]; i = (i + 1) & (cap - 1)) {
            struct path *p = &out[slots[i] - 1];
            if (p->len == len && memcmp(p->s, scratch, len) == 0) break;
        }
        if (slots[i]) {
            out[slots[i] - 1].count += e->count;
            continue;
        }
        out[n].s = xrealloc(NULL, len + 1);
        memcpy(out[n].s, scratch, len);
        out[n].len = len;
        out[n].count = e->count;
        slots[i] = (uint32_t)++n;
    }
    free(slots);
    *n_paths = n;
    *paths = out;
}

static void emit(void)
{
    for (size_t ti = 0; ti < st.n_threads; ti++) {
        struct thread *t = &st.threads[ti];
        if (!t->n) continue;
        if (st.semicolon) {
            size_t n;
            struct path *paths;
            emit_merged(t, &n, &paths);
            printf("T %llu %zu %zu\n", (unsigned long long)t->tid, n, t->depth);
            for (size_t k = 0; k < n; k++) {
                put(paths[k].s, paths[k].len);
                putchar('\n');
            }
            for (size_t k = 0; k < n; k++) {
                printf(k ? " %lld" : "%lld", (long long)paths[k].count);
                free(paths[k].s);
            }
            free(paths);
        } else {
            printf("T %llu %zu %zu\n", (unsigned long long)t->tid, t->n, t->depth);
            for (size_t k = 0; k < t->n; k++) {
                put(scratch, path_of((int32_t)t->order[k]));
                putchar('\n');
            }
            for (size_t k = 0; k < t->n; k++)
                printf(k ? " %lld" : "%lld", (long long)st.entries[t->order[k]].count);
        }
        putchar('\n');
        for (size_t k = 0; k < t->depth; k++) {
            struct entry *e = &st.entries[t->stack[k]];
            put(e->name, e->len);
            putchar('\n');
        }
    }
}

/* The open frames as a Python list, for messages */
static char *open_list(struct thread *t)
{
    size_t n = 3;
    for (size_t k = 0; k < t->depth; k++)
        n += st.entries[t->stack[k]].len + 4;
    char *s = message = xrealloc(message, n), *p = s;
    *p++ = '[';
    for (size_t k = 0; k < t->depth; k++) {
        struct entry *e = &st.entries[t->stack[k]];
        if (k) p += sprintf(p, ", ");
        *p++ = '\'';
        memcpy(p, e->name, e->len);
        p += e->len;
        *p++ = '\'';
    }
    *p++ = ']';
    *p = 0;
    return s;
}

#define INDENT_LEVELS 64 /* graph.c's: deeper lines say their depth */

/* Parses "TID) DURATION|  INDENT BODY" (INDENT possibly ending with "[depth N] "), the depth in
 * *levels: false when the line is not one */
static bool split_line(const char *s, size_t n, uint64_t *tid, size_t *levels, const char **body,
                       size_t *body_len)
{
    const char *p = s, *end = s + n;
    while (p < end && is_space((unsigned char)*p))
        p++;
    const char *digits = p;
    uint64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (v > (UINT64_MAX - 9) / 10) fail("graph-fold: tid too large: '%.*s'", (int)n, s);
        v = v * 10 + (uint64_t)(*p++ - '0');
    }
    if (p == digits || end - p < 2 || p[0] != ')' || p[1] != ' ') return false;
    p += 2;
    const char *bar = memchr(p, '|', (size_t)(end - p));
    if (!bar || end - bar < 3 || bar[1] != ' ' || bar[2] != ' ') return false;
    p = bar + 3;
    const char *ind = p;
    while (p < end && *p == ' ')
        p++;
    *tid = v;
    *levels = (size_t)(p - ind) / 2;
    if (end - p > 7 && memcmp(p, "[depth ", 7) == 0) {
        uint64_t d = 0;
        const char *q = p + 7;
        while (q < end && *q >= '0' && *q <= '9' && d < UINT32_MAX)
            d = d * 10 + (uint64_t)(*q++ - '0');
        if (end - q < 2 || q[0] != ']' || q[1] != ' ' || d <= INDENT_LEVELS ||
            p - ind != 2 * INDENT_LEVELS)
            fail("graph-fold: bad depth mark: '%.*s'", (int)n, s);
        *levels = (size_t)d - 1;
        p = q + 2;
    }
    *body = p;
    *body_len = (size_t)(end - p);
    return true;
}

static bool blank(const char *s, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!is_space((unsigned char)s[k])) return false;
    return true;
}

static void graph_line(const char *line, size_t n)
{
    uint64_t tid;
    size_t levels, len;
    const char *body;
    if (!split_line(line, n, &tid, &levels, &body, &len)) {
        if ((n && line[0] == '#') || blank(line, n)) return;
        fail("unparsable graph line: '%.*s'", (int)n, line);
    }
    if (starts(body, len, "/*")) return; /* a comment line (lost events and the like) */
    struct thread *t = thread_get(tid);
    if (ends(body, len, INHERITED)) len -= strlen(INHERITED);
    bool resumed = ends(body, len, RESUMED);
    if (resumed) len -= strlen(RESUMED);
    bool closing = len && body[0] == '}';
    if (levels + (closing ? 1 : 0) != t->depth)
        fail("tid %llu: depth %zu but %zu open: '%.*s'", (unsigned long long)tid, levels, t->depth,
             (int)n, line);
    if (ends(body, len, "();")) {
        count(t, body, len - 3, !resumed);
    } else if (ends(body, len, "() {")) {
        int32_t e = count(t, body, len - 4, !resumed);
        GROW(t->stack, t->depth, t->cap);
        t->stack[t->depth++] = e;
    } else if (starts(body, len, "} /* ")) {
        const char *name = body + 5;
        size_t nlen = len - 5;
        if (ends(body, len, " */")) nlen = len >= 8 ? len - 8 : 0; /* names may hold spaces */
        if (ends(name, nlen, " (unwound)")) nlen -= strlen(" (unwound)");
        if (ends(name, nlen, " (suspended)")) nlen -= strlen(" (suspended)");
        struct entry *top = t->depth ? &st.entries[t->stack[t->depth - 1]] : NULL;
        if (!top || top->len != nlen || memcmp(top->name, name, nlen) != 0)
            fail("tid %llu: closing %.*s but open is %s", (unsigned long long)tid, (int)nlen, name,
                 open_list(t));
        t->depth--;
    } else {
        fail("unknown graph line: '%.*s'", (int)n, line);
    }
}

/* r"\|  .*\(\)( \{|;)$": a line of a call (OWN_CALL of behaviours.py) */
static bool own_call(const char *s, size_t n)
{
    const char *bar = memmem(s, n, "|  ", 3);
    if (!bar) return false;
    size_t from = (size_t)(bar - s) + 3;
    return (ends(s, n, "() {") && n - 4 >= from) || (ends(s, n, "();") && n - 3 >= from);
}

/* r"^# ftrace-run: .*  pid (\d+)  \d+ threads?  " (HEADER of behaviours.py): the
 * pid (the last match, as the greedy .* takes it), or false */
static bool header_pid(const char *s, size_t n, uint64_t *pid)
{
    bool found = false;
    for (size_t i = strlen(HEADER); i + 6 <= n; i++) {
        if (memcmp(s + i, "  pid ", 6) != 0) continue;
        size_t p = i + 6, d = p;
        uint64_t v = 0;
        while (p < n && s[p] >= '0' && s[p] <= '9')
            v = v * 10 + (uint64_t)(s[p++] - '0');
        if (p == d || !starts(s + p, n - p, "  ")) continue;
        p += 2;
        size_t d2 = p;
        while (p < n && s[p] >= '0' && s[p] <= '9')
            p++;
        if (p == d2 || !starts(s + p, n - p, " thread")) continue;
        p += 7;
        if (p < n && s[p] == 's') p++;
        if (!starts(s + p, n - p, "  ")) continue;
        *pid = v;
        found = true;
    }
    return found;
}

static char *read_all(size_t *len)
{
    size_t n = 0, cap = 1 << 20;
    char *buf = xrealloc(NULL, cap);
    for (;;) {
        if (n == cap) buf = xrealloc(buf, cap *= 2);
        size_t k = fread(buf + n, 1, cap - n, stdin);
        if (!k) break;
        n += k;
    }
    if (ferror(stdin)) fail("graph-fold: reading stdin failed");
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    bool sections = argc == 2 && strcmp(argv[1], "--sections") == 0;
    if (argc > 2 || (argc == 2 && !sections)) {
        fprintf(stderr, "usage: graph-fold [--sections] < GRAPH\n");
        return 2;
    }
    static char obuf[1 << 16];
    setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));
    size_t len;
    char *text = input = read_all(&len);
    bool in_section = !sections, own = false;
    state_init();
    for (size_t pos = 0; pos < len;) {
        const char *line = text + pos, *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + 1;
        uint64_t pid;
        if (sections && starts(line, n, HEADER) && header_pid(line, n, &pid)) {
            if (in_section) emit();
            state_free();
            state_init();
            in_section = true;
            own = false;
            printf("S %llu ", (unsigned long long)pid);
            put(line, n);
            putchar('\n');
            continue;
        }
        if (!in_section) {
            if (!blank(line, n) && line[0] != '#')
                fail("graph line before any header: '%.*s'", (int)n, line);
            continue;
        }
        if (sections && !own && own_call(line, n)) {
            own = true;
            fputs("C\n", stdout);
        }
        graph_line(line, n);
    }
    if (in_section) emit();
    state_free();
    free(input);
    free(scratch);
    fflush(stdout);
    return ferror(stdout) ? 1 : 0;
}
