/*
 * ftr_regex.c - the regular expressions of ftr_regex.h.
 *
 * Compiling: a recursive-descent parser that follows glibc's ERE grammar (regcomp.c's
 * parse_reg_exp / parse_branch / parse_expression: a repeat operator where an expression
 * should start is an error, which makes "^*" one too) builds a syntax tree; the tree is then
 * written out as a program for a Thompson NFA (CHAR, ANY, SET, SPLIT, JMP, ASSERT, MATCH), a
 * bounded repeat as copies of its operand: x{2,4} is x x (SPLIT x (SPLIT x)).
 *
 * Matching simulates every thread of the program in lock step over the text. The threads at
 * one position are a bitmap over the instructions (each instruction once, so empty loops end
 * and the work per byte is bounded by the program's size); a new thread starts at every
 * position, which makes the search unanchored. The first match found ends the search: with
 * REG_NOSUB there is nothing to report but whether there is one. Shortcuts: a program
 * whose every path begins with '^' stops once its threads died; one that cannot match the
 * empty string starts threads only at bytes that can begin a match; and one of at most 64
 * instructions (nearly every filter's) runs on one word, with the instructions that take each
 * byte and those that follow each one worked out at compile time (those that follow through
 * an ASSERT are found at each position, as in the general case).
 * The memory of a match is on the stack: two bitmaps and a stack of pending SPLITs, sized for
 * the largest program.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftr_regex.h"

#define DUP_MAX 32767 /* RE_DUP_MAX: the largest count of {m,n} */
#define REP_INF (-1)  /* {m,}: no upper bound */
#define MAX_SPLITS (FTR_RE_MAX_INSNS / 2)
#define NO_PC 0xffffu /* end of a chain of jumps to patch */
#define BITMAP_WORDS (FTR_RE_MAX_INSNS / 64)
#ifndef FAST_MAX
#define FAST_MAX 64 /* programs up to this size take the one-word path (0: never, for tests) */
#endif

struct byteset {
    uint64_t w[4];
};

static int in_set(const struct byteset *s, unsigned char c)
{
    return (int)((s->w[c >> 6] >> (c & 63)) & 1);
}

static void set_add(struct byteset *s, unsigned char c)
{
    s->w[c >> 6] |= 1ull << (c & 63);
}

static void set_union(struct byteset *s, const struct byteset *t)
{
    for (int i = 0; i < 4; i++)
        s->w[i] |= t->w[i];
}

/* ---- character classes (ASCII, as glibc's C locale) ---- */

static int is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int is_word(int c)
{
    return is_alpha(c) || is_digit(c) || c == '_';
}

static int is_space(int c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static int is_graph(int c)
{
    return c > ' ' && c < 0x7f;
}

static const char *const class_names[] = {"alnum", "alpha", "blank", "cntrl", "digit", "graph",
                                          "lower", "print", "punct", "space", "upper", "xdigit"};

static int class_has(int k, int c)
{
    switch (k) {
    case 0:
        return is_alpha(c) || is_digit(c);
    case 1:
        return is_alpha(c);
    case 2:
        return c == ' ' || c == '\t';
    case 3:
        return c < ' ' || c == 0x7f;
    case 4:
        return is_digit(c);
    case 5:
        return is_graph(c);
    case 6:
        return c >= 'a' && c <= 'z';
    case 7:
        return is_graph(c) || c == ' ';
    case 8:
        return is_graph(c) && !is_alpha(c) && !is_digit(c);
    case 9:
        return is_space(c);
    case 10:
        return c >= 'A' && c <= 'Z';
    default:
        return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    }
}

/* @return the class index of name[0..len), or -1 */
static int class_index(const char *name, size_t len)
{
    for (size_t k = 0; k < sizeof class_names / sizeof class_names[0]; k++)
        if (strlen(class_names[k]) == len && memcmp(class_names[k], name, len) == 0) return (int)k;
    return -1;
}

static void set_add_class(struct byteset *s, int k)
{
    for (int c = 1; c < 256; c++)
        if (class_has(k, c)) set_add(s, (unsigned char)c);
}

/* ---- the syntax tree ---- */

enum node_kind { N_EMPTY, N_CHAR, N_ANY, N_SET, N_ASSERT, N_CAT, N_ALT, N_REPEAT };
enum assert_kind { A_BOL, A_EOL, A_WORD_START, A_WORD_END, A_WORD_EDGE, A_NOT_WORD_EDGE };

struct node {
    uint8_t kind, c; /* c: the byte of N_CHAR, the assert_kind of N_ASSERT */
    int height;      /* of the subtree: bounds the recursion of code generation */
    int set;         /* N_SET: index into the parser's sets */
    int min, max;    /* N_REPEAT: the counts (max REP_INF: none) */
    int child, last; /* N_CAT, N_ALT: first and last child; N_REPEAT: the operand */
    int next;        /* the next sibling, -1: none */
    size_t size;     /* code_size(), SIZE_MAX: not known yet */
};

struct parser {
    const char *p; /* the next character of the pattern */
    struct node *nodes;
    size_t nnodes, capnodes;
    struct byteset *sets;
    size_t nsets, capsets;
    int nest; /* open groups */
    char *err;
    size_t errlen;
};

static int fail(struct parser *ps, const char *fmt, ...)
{
    if (ps->err && ps->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err, ps->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int new_node(struct parser *ps, int kind)
{
    if (ps->nnodes == ps->capnodes) {
        size_t cap = ps->capnodes ? 2 * ps->capnodes : 32;
        struct node *n = realloc(ps->nodes, cap * sizeof *n);
        if (!n) return fail(ps, "out of memory");
        ps->nodes = n, ps->capnodes = cap;
    }
    struct node *n = &ps->nodes[ps->nnodes];
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->height = 1;
    n->child = n->last = n->next = -1;
    n->size = SIZE_MAX;
    return (int)ps->nnodes++;
}

static int new_set(struct parser *ps, const struct byteset *s)
{
    if (ps->nsets == ps->capsets) {
        size_t cap = ps->capsets ? 2 * ps->capsets : 8;
        struct byteset *n = realloc(ps->sets, cap * sizeof *n);
        if (!n) return fail(ps, "out of memory");
        ps->sets = n, ps->capsets = cap;
    }
    ps->sets[ps->nsets] = *s;
    int x = new_node(ps, N_SET);
    if (x >= 0) ps->nodes[x].set = (int)ps->nsets++;
    return x;
}

/* Makes node x the last child (or the operand) of parent. @return -1 when too deep. */
static int adopt(struct parser *ps, int parent, int x)
{
    struct node *p = &ps->nodes[parent];
    if (p->last < 0)
        p->child = x;
    else
        ps->nodes[p->last].next = x;
    p->last = x;
    if (ps->nodes[x].height + 1 > p->height) p->height = ps->nodes[x].height + 1;
    if (p->height > FTR_RE_MAX_DEPTH)
        return fail(ps, "regular expression nested too deeply (over %d)", FTR_RE_MAX_DEPTH);
    return 0;
}

/* A list node with one child is that child, one without children the empty expression. */
static int unwrap(struct parser *ps, int list)
{
    struct node *n = &ps->nodes[list];
    if (n->child < 0) {
        n->kind = N_EMPTY;
        return list;
    }
    return n->child == n->last ? n->child : list;
}

/* ---- parsing ---- */

static int parse_alt(struct parser *ps);

/* One element of a bracket expression at *pp: a byte, [.c.], [=c=] or [:class:]. */
struct belem {
    enum { B_CHAR, B_EQUIV, B_CLASS } kind;
    int c; /* the byte, or the class index */
};

static int bracket_elem(struct parser *ps, const char **pp, struct belem *e, int hyphen_ok)
{
    const char *p = *pp;
    if (*p == '\0') return fail(ps, "unmatched [");
    if (p[0] == '[' && (p[1] == '.' || p[1] == '=' || p[1] == ':')) {
        char delim = p[1];
        const char *name = p + 2, *q = name;
        while (*q && !(q[0] == delim && q[1] == ']'))
            q++;
        if (*q == '\0') return fail(ps, "unmatched [");
        size_t len = (size_t)(q - name);
        *pp = q + 2;
        if (delim == ':') {
            e->kind = B_CLASS;
            if ((e->c = class_index(name, len)) < 0)
                return fail(ps, "unknown character class [:%.*s:]", (int)(len > 20 ? 20 : len),
                            name);
            return 0;
        }
        if (len != 1)
            return fail(ps, "invalid collating element [%c%.*s%c]", delim,
                        (int)(len > 20 ? 20 : len), name, delim);
        e->kind = delim == '=' ? B_EQUIV : B_CHAR;
        e->c = (unsigned char)*name;
        return 0;
    }
    /* glibc: a '-' that is neither first, last nor a range's end is an error */
    if (*p == '-' && !hyphen_ok && p[1] != ']') return fail(ps, "invalid use of - in [...]");
    e->kind = B_CHAR;
    e->c = (unsigned char)*p;
    *pp = p + 1;
    return 0;
}

/* ps->p at '['. A backslash is literal inside; a ']' first is literal. */
static int parse_bracket(struct parser *ps)
{
    const char *p = ps->p + 1;
    struct byteset s = {{0}};
    int neg = 0;
    if (*p == '^') neg = 1, p++;
    for (int first = 1;; first = 0) {
        struct belem lo, hi;
        if (bracket_elem(ps, &p, &lo, first) != 0) return -1;
        if (lo.kind == B_CLASS) {
            set_add_class(&s, lo.c);
        } else if (lo.kind == B_EQUIV) {
            set_add(&s, (unsigned char)lo.c);
        } else if (p[0] == '-' && p[1] != ']') {
            if (p[1] == '\0') return fail(ps, "unmatched [");
            p++;
            if (bracket_elem(ps, &p, &hi, 1) != 0) return -1;
            if (hi.kind != B_CHAR) return fail(ps, "invalid range end in [...]");
            if (lo.c > hi.c) return fail(ps, "invalid range %c-%c", lo.c, hi.c);
            for (int c = lo.c; c <= hi.c; c++)
                set_add(&s, (unsigned char)c);
        } else {
            set_add(&s, (unsigned char)lo.c);
        }
        if (*p == '\0') return fail(ps, "unmatched [");
        if (*p == ']') break;
    }
    ps->p = p + 1;
    if (neg)
        for (int i = 0; i < 4; i++)
            s.w[i] = ~s.w[i];
    s.w[0] &= ~1ull; /* NUL ends the text */
    return new_set(ps, &s);
}

/* One count of {m,n} at *pp, up to ',' or '}': -1 none, -2 not a number, -3 the pattern
 * ends, else the number (DUP_MAX + 1 at most). As glibc reads it, "\," is a ',' and "\0" a
 * digit (an escaped character other than a back reference). */
static long read_count(const char **pp)
{
    const char *p = *pp;
    long n = -1;
    for (;;) {
        if (*p == '\0') return -3;
        if (*p == '}' || *p == ',' || (p[0] == '\\' && p[1] == ',')) break;
        char c = *p;
        if (p[0] == '\\' && p[1] != '\0') c = *++p == '0' ? '0' : 'x';
        p++;
        if (n == -2 || !is_digit(c))
            n = -2;
        else
            n = n == -1 ? c - '0' : (n * 10 + c - '0' > DUP_MAX ? DUP_MAX + 1 : n * 10 + c - '0');
    }
    *pp = p;
    return n;
}

/* ps->p at '{': reads {m}, {m,}, {,n}, {m,n}. */
static int parse_interval(struct parser *ps, int *min, int *max)
{
    const char *p = ps->p + 1;
    long lo = read_count(&p), hi;
    if (lo == -3) return fail(ps, "unmatched {");
    int comma = *p == ',' || *p == '\\';
    p += *p == '\\' ? 2 : 1;
    if (lo == -1 && comma) lo = 0; /* {,n} */
    if (lo < 0) return fail(ps, "invalid repetition count in {...}");
    if (comma) {
        hi = read_count(&p);
        if (hi == -3) return fail(ps, "unmatched {");
        if (hi == -2 || *p != '}') return fail(ps, "invalid repetition count in {...}");
        p++;
    } else {
        hi = lo;
    }
    if (hi >= 0 && lo > hi) return fail(ps, "invalid repetition count {%ld,%ld}", lo, hi);
    if ((hi >= 0 ? hi : lo) > DUP_MAX) return fail(ps, "repetition count over %d", DUP_MAX);
    *min = (int)lo, *max = hi >= 0 ? (int)hi : REP_INF;
    ps->p = p;
    return 0;
}

static int is_repeat_op(char c)
{
    return c == '*' || c == '+' || c == '?' || c == '{';
}

/* The anchor at ps->p ('^', '$', \< \> \b \B \` \'), or -1 (not an anchor, nothing read). */
static int anchor_kind(const char *p)
{
    if (*p == '^') return A_BOL;
    if (*p == '$') return A_EOL;
    if (*p != '\\') return -1;
    switch (p[1]) {
    case '`':
        return A_BOL;
    case '\'':
        return A_EOL;
    case '<':
        return A_WORD_START;
    case '>':
        return A_WORD_END;
    case 'b':
        return A_WORD_EDGE;
    case 'B':
        return A_NOT_WORD_EDGE;
    default:
        return -1;
    }
}

static int char_node(struct parser *ps, unsigned char c)
{
    int x = new_node(ps, N_CHAR);
    if (x >= 0) ps->nodes[x].c = c;
    return x;
}

/* \w \W \s \S */
static int class_escape(struct parser *ps, char e)
{
    struct byteset s = {{0}};
    for (int c = 1; c < 256; c++) {
        int in = e == 'w' || e == 'W' ? is_word(c) : is_space(c);
        if (in == (e == 'w' || e == 's')) set_add(&s, (unsigned char)c);
    }
    return new_set(ps, &s);
}

/* An atom: a character, '.', [...], (...) or an escape. */
static int parse_atom(struct parser *ps)
{
    const char *p = ps->p;
    int x;
    switch (*p) {
    case '(':
        if (ps->nest >= FTR_RE_MAX_DEPTH)
            return fail(ps, "regular expression nested too deeply (over %d)", FTR_RE_MAX_DEPTH);
        ps->nest++, ps->p++;
        x = parse_alt(ps);
        ps->nest--;
        if (x < 0) return -1;
        if (*ps->p != ')') return fail(ps, "unmatched (");
        ps->p++;
        return x;
    case '[':
        return parse_bracket(ps);
    case '.':
        ps->p++;
        return new_node(ps, N_ANY);
    case '\\':
        if (p[1] == '\0') return fail(ps, "trailing backslash");
        if (p[1] >= '1' && p[1] <= '9')
            return fail(ps, "back reference \\%c is not supported", p[1]);
        ps->p += 2;
        if (strchr("wWsS", p[1])) return class_escape(ps, p[1]);
        return char_node(ps, (unsigned char)p[1]);
    default:
        ps->p++;
        return char_node(ps, (unsigned char)*p);
    }
}

/* The repeat operators after atom x. */
static int parse_repeats(struct parser *ps, int x)
{
    while (is_repeat_op(*ps->p)) {
        int min = 0, max = REP_INF;
        char op = *ps->p;
        if (op == '{') {
            if (parse_interval(ps, &min, &max) != 0) return -1;
        } else {
            ps->p++;
            min = op == '+';
            max = op == '?' ? 1 : REP_INF;
        }
        int r = new_node(ps, N_REPEAT);
        if (r < 0) return -1;
        ps->nodes[r].min = min, ps->nodes[r].max = max;
        if (adopt(ps, r, x) != 0) return -1;
        x = r;
    }
    return x;
}

/* A branch: a possibly empty sequence of anchors and repeated atoms, up to '|', ')' of an
 * open group or the end. */
static int parse_branch(struct parser *ps)
{
    int cat = new_node(ps, N_CAT);
    if (cat < 0) return -1;
    for (;;) {
        char c = *ps->p;
        if (c == '\0' || c == '|' || (c == ')' && ps->nest > 0)) break;
        if (is_repeat_op(c)) return fail(ps, "nothing to repeat before '%c'", c);
        int kind = anchor_kind(ps->p), x;
        if (kind >= 0) { /* an anchor takes no repeat operator: "^*" is an error */
            ps->p += *ps->p == '\\' ? 2 : 1;
            if ((x = new_node(ps, N_ASSERT)) >= 0) ps->nodes[x].c = (uint8_t)kind;
        } else if ((x = parse_atom(ps)) >= 0) {
            x = parse_repeats(ps, x);
        }
        if (x < 0 || adopt(ps, cat, x) != 0) return -1;
    }
    return unwrap(ps, cat);
}

static int parse_alt(struct parser *ps)
{
    int alt = new_node(ps, N_ALT);
    if (alt < 0) return -1;
    for (;;) {
        int x = parse_branch(ps);
        if (x < 0 || adopt(ps, alt, x) != 0) return -1;
        if (*ps->p != '|') break;
        ps->p++;
    }
    return unwrap(ps, alt);
}

/* ---- code generation ---- */

enum op { OP_CHAR, OP_ANY, OP_SET, OP_SPLIT, OP_JMP, OP_ASSERT, OP_MATCH };

struct insn {
    uint8_t op, c; /* c: OP_CHAR's byte, OP_ASSERT's assert_kind */
    uint16_t x, y; /* OP_JMP: x; OP_SPLIT: x and y; OP_SET: x is the set */
};

/* A program of at most 64 instructions, as one-word sets of the byte-consuming instructions
 * (and MATCH) with their successors worked out beforehand. */
struct fast {
    uint64_t accept[256]; /* the consuming instructions that take byte c */
    uint64_t follow[64];  /* after consuming at pc: the instructions reached without ASSERT */
    uint64_t dyn;         /* consuming instructions whose successors pass an ASSERT */
    uint64_t start;       /* the instructions reached from the start, unless start_dyn */
    uint64_t keep;        /* the consuming instructions and MATCH */
    uint64_t match;       /* MATCH */
    int start_dyn;
};

struct ftr_re_prog {
    uint16_t n;       /* instructions */
    uint8_t anchored; /* every path from the start passes an A_BOL */
    uint8_t skip;     /* no empty match: a match begins with a byte of first */
    struct byteset first;
    const struct byteset *sets; /* inside this allocation, after insn[] */
    struct fast *fast;          /* inside this allocation too, or NULL: n > FAST_MAX */
    struct insn insn[];
};

#define SIZE_CAP ((size_t)FTR_RE_MAX_INSNS + 1)

static size_t sat_add(size_t a, size_t b)
{
    return a + b > SIZE_CAP ? SIZE_CAP : a + b;
}

static size_t sat_mul(size_t a, size_t b)
{
    return a && b > SIZE_CAP / a ? SIZE_CAP : (a * b > SIZE_CAP ? SIZE_CAP : a * b);
}

static size_t code_size(struct parser *ps, int x);

static size_t code_size_of(struct parser *ps, const struct node *n)
{
    size_t s = 0;
    switch (n->kind) {
    case N_EMPTY:
        return 0;
    case N_CAT:
    case N_ALT:
        for (int k = n->child; k >= 0; k = ps->nodes[k].next)
            s = sat_add(s, sat_add(code_size(ps, k), n->kind == N_ALT && ps->nodes[k].next >= 0
                                                         ? 2 /* SPLIT, JMP */
                                                         : 0));
        return s;
    case N_REPEAT:
        s = code_size(ps, n->child);
        if (s == 0) return 0;
        if (n->max == REP_INF)
            return n->min == 0 ? sat_add(s, 2) : sat_add(sat_mul(s, (size_t)n->min), 1);
        return sat_add(sat_mul(s, (size_t)n->min), sat_mul(s + 1, (size_t)(n->max - n->min)));
    default:
        return 1;
    }
}

/* Instructions that node x compiles to (SIZE_CAP: too many), computed once. */
static size_t code_size(struct parser *ps, int x)
{
    if (ps->nodes[x].size == SIZE_MAX) ps->nodes[x].size = code_size_of(ps, &ps->nodes[x]);
    return ps->nodes[x].size;
}

struct gen {
    struct parser *ps;
    struct insn *code;
    size_t pc, nsplit;
};

static size_t put(struct gen *g, int op, unsigned x, unsigned y)
{
    struct insn *in = &g->code[g->pc];
    in->op = (uint8_t)op, in->c = 0, in->x = (uint16_t)x, in->y = (uint16_t)y;
    g->nsplit += op == OP_SPLIT;
    return g->pc++;
}

static void emit(struct gen *g, int x)
{
    const struct node *n = &g->ps->nodes[x];
    unsigned holes = NO_PC; /* jumps to the end, chained through x (JMP) or y (SPLIT) */
    size_t at;
    switch (n->kind) {
    case N_EMPTY:
        return;
    case N_CHAR:
        g->code[put(g, OP_CHAR, 0, 0)].c = n->c;
        return;
    case N_ANY:
        put(g, OP_ANY, 0, 0);
        return;
    case N_SET:
        put(g, OP_SET, (unsigned)n->set, 0);
        return;
    case N_ASSERT:
        g->code[put(g, OP_ASSERT, 0, 0)].c = n->c;
        return;
    case N_CAT:
        for (int k = n->child; k >= 0; k = g->ps->nodes[k].next)
            emit(g, k);
        return;
    case N_ALT:
        for (int k = n->child; k >= 0; k = g->ps->nodes[k].next) {
            if (g->ps->nodes[k].next < 0) {
                emit(g, k);
                break;
            }
            at = put(g, OP_SPLIT, (unsigned)g->pc + 1, 0);
            emit(g, k);
            holes = (unsigned)put(g, OP_JMP, holes, 0);
            g->code[at].y = (uint16_t)g->pc;
        }
        while (holes != NO_PC) {
            unsigned next = g->code[holes].x;
            g->code[holes].x = (uint16_t)g->pc;
            holes = next;
        }
        return;
    case N_REPEAT:
        if (code_size(g->ps, n->child) == 0) return;
        for (int i = n->max == REP_INF && n->min > 0 ? 1 : 0; i < n->min; i++)
            emit(g, n->child);
        if (n->max == REP_INF) {
            at = g->pc;
            if (n->min == 0) { /* L: SPLIT body, out; body; JMP L */
                put(g, OP_SPLIT, (unsigned)at + 1, 0);
                emit(g, n->child);
                put(g, OP_JMP, (unsigned)at, 0);
                g->code[at].y = (uint16_t)g->pc;
            } else { /* L: body; SPLIT L, out */
                emit(g, n->child);
                put(g, OP_SPLIT, (unsigned)at, (unsigned)g->pc + 1);
            }
            return;
        }
        for (int i = n->min; i < n->max; i++) { /* SPLIT body, out; body; ... out: */
            holes = (unsigned)put(g, OP_SPLIT, (unsigned)g->pc + 1, holes);
            emit(g, n->child);
        }
        while (holes != NO_PC) {
            unsigned next = g->code[holes].y;
            g->code[holes].y = (uint16_t)g->pc;
            holes = next;
        }
        return;
    }
}

/* The bytes that can begin a match and whether the program can match without one, from the
 * start through SPLIT, JMP and every ASSERT (as if it held); and whether every path from
 * the start passes an A_BOL. work has room for 2 * n + 2 uint16_t. */
static void analyse(struct ftr_re_prog *p, uint16_t *work)
{
    int nullable = 0, unanchored = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint16_t *stack = work, *seen = work + p->n + 1;
        size_t sp = 0;
        memset(seen, 0, (p->n + 1) * sizeof *seen);
        stack[sp++] = 0;
        seen[0] = 1;
        while (sp > 0) {
            const struct insn *in = &p->insn[stack[--sp]];
            unsigned to[2] = {NO_PC, NO_PC};
            switch (in->op) {
            case OP_SPLIT:
                to[0] = in->x, to[1] = in->y;
                break;
            case OP_JMP:
                to[0] = in->x;
                break;
            case OP_ASSERT:
                if (pass == 0 || in->c != A_BOL) to[0] = (unsigned)(in - p->insn) + 1;
                break;
            case OP_MATCH:
                nullable |= pass == 0, unanchored = 1;
                break;
            case OP_CHAR:
                if (pass == 0) set_add(&p->first, in->c);
                unanchored = 1;
                break;
            case OP_ANY:
                if (pass == 0) memset(&p->first, 0xff, sizeof p->first);
                unanchored = 1;
                break;
            default:
                if (pass == 0) set_union(&p->first, &p->sets[in->x]);
                unanchored = 1;
                break;
            }
            for (int k = 0; k < 2; k++)
                if (to[k] != NO_PC && !seen[to[k]]) seen[to[k]] = 1, stack[sp++] = (uint16_t)to[k];
        }
    }
    struct byteset all;
    memset(&all, 0xff, sizeof all);
    p->skip = !nullable && memcmp(&p->first, &all, sizeof all) != 0;
    p->anchored = !unanchored;
}

static int is_consuming(int op)
{
    return op == OP_CHAR || op == OP_ANY || op == OP_SET;
}

/* The consuming instructions and MATCH reached from pc through SPLIT and JMP; *dyn is set
 * when an ASSERT is on the way (then the result depends on the position). */
static uint64_t closure(const struct ftr_re_prog *p, unsigned pc, int *dyn)
{
    uint64_t seen = 1ull << pc, out = 0;
    unsigned stack[64]; /* each instruction once */
    size_t sp = 0;
    stack[sp++] = pc;
    while (sp > 0) {
        const struct insn *in = &p->insn[stack[--sp]];
        unsigned to[2] = {in->x, in->op == OP_SPLIT ? in->y : in->x};
        if (in->op == OP_ASSERT) *dyn = 1;
        if (in->op != OP_SPLIT && in->op != OP_JMP) {
            if (in->op != OP_ASSERT) out |= 1ull << (in - p->insn);
            continue;
        }
        for (int k = 0; k < 2; k++)
            if (!(seen & (1ull << to[k]))) seen |= 1ull << to[k], stack[sp++] = to[k];
    }
    return out;
}

static void make_fast(struct ftr_re_prog *p)
{
    struct fast *f = p->fast;
    for (unsigned pc = 0; pc < p->n; pc++) {
        const struct insn *in = &p->insn[pc];
        uint64_t bit = 1ull << pc;
        if (in->op == OP_MATCH) f->match = bit, f->keep |= bit;
        if (!is_consuming(in->op)) continue;
        f->keep |= bit;
        for (int c = 1; c < 256; c++)
            if (in->op == OP_ANY ||
                (in->op == OP_CHAR ? in->c == c : in_set(&p->sets[in->x], (unsigned char)c)))
                f->accept[c] |= bit;
        int dyn = 0;
        f->follow[pc] = closure(p, pc + 1, &dyn);
        if (dyn) f->dyn |= bit;
    }
    f->start = closure(p, 0, &f->start_dyn);
}

int ftr_re_compile(struct ftr_re *re, const char *pattern, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    struct parser ps = {.p = pattern, .err = err, .errlen = errlen};
    struct ftr_re_prog *p = NULL;
    uint16_t *work = NULL;
    int rc = -1;
    re->prog = NULL;
    if (!pattern) return fail(&ps, "no regular expression");
    int root = parse_alt(&ps);
    if (root < 0) goto out;
    /* at the top level, parse_branch stops only at '|' (taken) or the end */
    size_t n = sat_add(code_size(&ps, root), 1);
    if (n > FTR_RE_MAX_INSNS) {
        fail(&ps, "regular expression too big (over %d instructions)", FTR_RE_MAX_INSNS);
        goto out;
    }
    size_t sets_at = (sizeof *p + n * sizeof p->insn[0] + 7) & ~(size_t)7;
    size_t fast_at = sets_at + ps.nsets * sizeof(struct byteset);
    p = calloc(1, fast_at + (n <= FAST_MAX ? sizeof(struct fast) : 0));
    work = malloc((2 * n + 2) * sizeof *work);
    if (!p || !work) {
        fail(&ps, "out of memory");
        goto out;
    }
    if (ps.nsets) memcpy((char *)p + sets_at, ps.sets, ps.nsets * sizeof(struct byteset));
    p->sets = (const struct byteset *)(void *)((char *)p + sets_at);
    struct gen g = {.ps = &ps, .code = p->insn};
    emit(&g, root);
    put(&g, OP_MATCH, 0, 0);
    /* cannot happen (code_size() counts; each SPLIT comes with another instruction), but
     * the matchers' stacks rely on it */
    if (g.pc != n || g.nsplit > MAX_SPLITS) {
        fail(&ps, "regular expression too big");
        goto out;
    }
    p->n = (uint16_t)n;
    analyse(p, work);
    if (n <= FAST_MAX) {
        p->fast = (struct fast *)(void *)((char *)p + fast_at);
        make_fast(p);
    }
    re->prog = p, p = NULL, rc = 0;
out:
    free(p);
    free(work);
    free(ps.nodes);
    free(ps.sets);
    return rc;
}

void ftr_re_free(struct ftr_re *re)
{
    if (!re) return;
    free(re->prog);
    re->prog = NULL;
}

/* ---- matching ---- */

static int assert_holds(int kind, const unsigned char *text, size_t i)
{
    int before = i > 0 && is_word(text[i - 1]), after = is_word(text[i]);
    switch (kind) {
    case A_BOL:
        return i == 0;
    case A_EOL:
        return text[i] == '\0';
    case A_WORD_START:
        return !before && after;
    case A_WORD_END:
        return before && !after;
    case A_WORD_EDGE:
        return before != after;
    default:
        return before == after;
    }
}

/* Adds the thread at pc for position i to set, following SPLIT, JMP and ASSERT (each
 * instruction once per set, so stack never holds more than the program's SPLITs).
 * @return 1 when it reaches MATCH; *live is set when a byte-consuming thread was added. */
static int add_thread(const struct ftr_re_prog *p, uint64_t *set, unsigned pc,
                      const unsigned char *text, size_t i, uint16_t *stack, int *live)
{
    size_t sp = 0;
    for (;;) {
        uint64_t bit = 1ull << (pc & 63);
        if (!(set[pc >> 6] & bit)) {
            set[pc >> 6] |= bit;
            const struct insn *in = &p->insn[pc];
            switch (in->op) {
            case OP_JMP:
                pc = in->x;
                continue;
            case OP_SPLIT:
                stack[sp++] = in->y;
                pc = in->x;
                continue;
            case OP_ASSERT:
                if (assert_holds(in->c, text, i)) {
                    pc++;
                    continue;
                }
                break;
            case OP_MATCH:
                return 1;
            default:
                *live = 1;
                break;
            }
        }
        if (sp == 0) return 0;
        pc = stack[--sp];
    }
}

/* The threads of pc at position i of a small program, as add_thread() finds them. */
static uint64_t threads_at(const struct ftr_re_prog *p, unsigned pc, const unsigned char *text,
                           size_t i, uint16_t *stack)
{
    uint64_t set = 0;
    int live = 0;
    if (add_thread(p, &set, pc, text, i, stack, &live)) return p->fast->match;
    return set & p->fast->keep;
}

/* ftr_re_match() for a program of at most 64 instructions: the same simulation on one word. */
static int match_fast(const struct ftr_re_prog *p, const unsigned char *text)
{
    const struct fast *f = p->fast;
    uint16_t stack[FAST_MAX ? FAST_MAX : 1];
    uint64_t cur = 0;
    for (size_t i = 0;; i++) {
        if (!cur) {
            if (p->anchored && i > 0) return 0;
            while (p->skip && !p->anchored && text[i] && !in_set(&p->first, text[i]))
                i++;
        }
        if ((!p->anchored || i == 0) && (!p->skip || in_set(&p->first, text[i]))) {
            cur |= f->start_dyn ? threads_at(p, 0, text, i, stack) : f->start;
            if (cur & f->match) return 1;
        }
        unsigned char c = text[i];
        if (c == '\0') return 0;
        uint64_t take = cur & f->accept[c], next = 0;
        for (uint64_t d = take & f->dyn; d; d &= d - 1)
            next |= threads_at(p, (unsigned)__builtin_ctzll(d) + 1, text, i + 1, stack);
        for (take &= ~f->dyn; take; take &= take - 1)
            next |= f->follow[__builtin_ctzll(take)];
        if (next & f->match) return 1;
        cur = next;
    }
}

int ftr_re_match(const struct ftr_re *re, const char *s)
{
    const struct ftr_re_prog *p = re ? re->prog : NULL;
    if (!p || !s) return 0;
    const unsigned char *text = (const unsigned char *)s;
    if (p->fast) return match_fast(p, text);
    uint64_t a[BITMAP_WORDS], b[BITMAP_WORDS], *cur = a, *next = b;
    uint16_t stack[MAX_SPLITS];
    size_t words = (p->n + 63u) / 64u;
    int live = 0;
    memset(cur, 0, words * sizeof *cur);
    for (size_t i = 0;; i++) {
        if (!live) { /* no thread runs: a match can only start here or further on */
            if (p->anchored && i > 0) return 0;
            size_t j = i;
            while (p->skip && !p->anchored && text[j] && !in_set(&p->first, text[j]))
                j++;
            if (j != i) memset(cur, 0, words * sizeof *cur), i = j;
        }
        if ((!p->anchored || i == 0) && (!p->skip || in_set(&p->first, text[i])) &&
            add_thread(p, cur, 0, text, i, stack, &live))
            return 1;
        if (text[i] == '\0') return 0;
        if (!live) { /* cur holds no thread, only what was tried at i */
            memset(cur, 0, words * sizeof *cur);
            continue;
        }
        memset(next, 0, words * sizeof *next);
        live = 0;
        for (size_t w = 0; w < words; w++) {
            for (uint64_t bits = cur[w]; bits; bits &= bits - 1) {
                unsigned pc = (unsigned)(w * 64 + (unsigned)__builtin_ctzll(bits));
                const struct insn *in = &p->insn[pc];
                int ok = in->op == OP_CHAR  ? in->c == text[i]
                         : in->op == OP_ANY ? 1
                         : in->op == OP_SET ? in_set(&p->sets[in->x], text[i])
                                            : 0;
                if (ok && add_thread(p, next, pc + 1, text, i + 1, stack, &live)) return 1;
            }
        }
        uint64_t *t = cur;
        cur = next, next = t;
    }
}
