/*
 * callgraph.c - the merged call graph under a function (--callgraph F):
 *
 *   # call graph of mid: 1 call, 1.402 us
 *   #
 *   # called from:
 *   #       Calls   Total time  Path
 *                1     1.402 us  main > mid
 *   #
 *   #  Total time       Calls  Function
 *        1.402 us           1  mid
 *        0.120 us           1  `- leaf
 *
 * Every call of F that is not inside another call of F is a root; the paths below all of them
 * are merged, each distinct path once with its calls and total time, callees in order of first
 * call. "called from" lists the distinct paths that led to F. F is a function name or a shell
 * glob; every function that matches gets its graph. As in the function graph, no line grows
 * with the depth: past DRAWN_LEVELS levels a line draws as many and says its depth.
 */
#include "callgraph.h"

#include "names.h"
#include "util.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#define DRAWN_LEVELS 64 /* levels drawn ("|  ", "+- "); deeper lines say "[depth N] " */

struct gnode {
    uint32_t func, child, sibling, last;
    uint64_t calls, total_ns;
};

struct cg {
    struct gnode *n;
    uint32_t len;
    size_t cap;
    struct frp_hmap kids;
};

static uint32_t cg_child(struct cg *g, uint32_t parent, uint32_t func)
{
    uint64_t key = (uint64_t)parent << 32 | func;
    uint32_t *v = frp_hmap_get(&g->kids, key);
    if (v) return *v;
    if (frp_grow((void **)&g->n, &g->cap, (size_t)g->len + 1, sizeof *g->n)) return 0;
    uint32_t i = g->len++;
    g->n[i] = (struct gnode){func, 0, 0, 0, 0, 0};
    if (g->n[parent].last)
        g->n[g->n[parent].last].sibling = i;
    else
        g->n[parent].child = i;
    g->n[parent].last = i;
    return frp_hmap_put(&g->kids, key, i) ? 0 : i;
}

/* Adds the subtree of tree node src below graph node dst (whose own figures are added by the
 * caller). @return 0 or -1 (out of memory) */
static int merge(struct cg *g, const struct frp_tree *t, uint32_t dst, uint32_t src)
{
    struct pair {
        uint32_t dst, src;
    } *st = NULL;
    size_t cap = 0, n = 0;
    if (frp_grow((void **)&st, &cap, 1, sizeof *st)) return -1;
    st[n++] = (struct pair){dst, src};
    while (n) {
        struct pair p = st[--n];
        for (uint32_t c = t->nodes[p.src].child; c; c = t->nodes[c].sibling) {
            uint32_t d = cg_child(g, p.dst, t->nodes[c].func);
            if (!d || frp_grow((void **)&st, &cap, n + 1, sizeof *st)) {
                free(st);
                return -1;
            }
            g->n[d].calls += t->nodes[c].calls;
            g->n[d].total_ns += t->nodes[c].total_ns;
            st[n++] = (struct pair){d, c};
        }
    }
    free(st);
    return 0;
}

static void write_name(struct frp_out *o, const struct frp_tree *t, const struct frp_opts *opt,
                       uint32_t func)
{
    const struct frp_name *nm = &t->funcs.names[func];
    frp_out_write(o, nm->s, nm->len);
    if (opt->srcline && t->funcs.rep_proc[func]) {
        const char *src = frp_srcline(t->funcs.r, t->funcs.rep_proc[func], t->funcs.rep_site[func]);
        if (src) frp_out_printf(o, " [%s]", src);
    }
}

/* The graph, depth first: "|  " / "   " for each level above (the first DRAWN_LEVELS - 1),
 * "[depth N] " past them, and "+- " / "`- ". */
static int write_graph(struct frp_out *o, const struct frp_tree *t, const struct frp_opts *opt,
                       const struct cg *g)
{
    uint32_t *path = NULL;
    size_t cap = 0;
    uint32_t depth = 0, n = g->n[0].child;
    while (n) {
        if (frp_grow((void **)&path, &cap, (size_t)depth + 1, sizeof *path)) {
            free(path);
            return -1;
        }
        path[depth++] = n;
        const struct gnode *nd = &g->n[n];
        char tm[40];
        frp_fmt_time(tm, nd->total_ns);
        frp_out_printf(o, "  %11s  %10llu  ", tm, (unsigned long long)nd->calls);
        for (uint32_t d = 1; d + 1 < depth && d < DRAWN_LEVELS; d++)
            frp_out_str(o, g->n[path[d]].sibling ? "|  " : "   ");
        if (depth > DRAWN_LEVELS) frp_out_printf(o, "[depth %u] ", depth);
        if (depth > 1) frp_out_str(o, nd->sibling ? "+- " : "`- ");
        write_name(o, t, opt, nd->func);
        frp_out_lit(o, "\n");
        if (nd->child) {
            n = nd->child;
            continue;
        }
        n = 0;
        while (depth && !n) {
            n = g->n[path[--depth]].sibling;
            if (depth == 0) n = 0; /* only one root */
        }
    }
    free(path);
    return 0;
}

static void write_caller(struct frp_out *o, const struct frp_tree *t, uint32_t node)
{
    uint32_t path[64], depth = 0;
    for (uint32_t n = node; n && depth < 64; n = t->nodes[n].parent)
        path[depth++] = n;
    if (depth == 64 && t->nodes[path[63]].parent) frp_out_lit(o, "... > ");
    while (depth--) {
        const struct frp_name *nm = &t->funcs.names[t->nodes[path[depth]].func];
        frp_out_write(o, nm->s, nm->len);
        if (depth) frp_out_lit(o, " > ");
    }
}

static int graph_of(struct frp_out *o, const struct frp_tree *t, const struct frp_opts *opt,
                    uint32_t func, int first)
{
    /* the roots: nodes of func without an ancestor of func (a node comes after its parent:
     * one pass in order of index marks those inside a call of func) */
    uint32_t *roots = NULL;
    size_t cap = 0, nroots = 0;
    uint8_t *inside = calloc(t->n, 1);
    if (!inside) return -1;
    for (uint32_t i = 1; i < t->n; i++) {
        uint32_t a = t->nodes[i].parent;
        inside[i] = inside[a] || (a && t->nodes[a].func == func);
        if (t->nodes[i].func != func || inside[i]) continue;
        if (frp_grow((void **)&roots, &cap, nroots + 1, sizeof *roots)) {
            free(roots);
            free(inside);
            return -1;
        }
        roots[nroots++] = i;
    }
    free(inside);
    struct cg g = {0};
    int rc = 0;
    if (frp_grow((void **)&g.n, &g.cap, 2, sizeof *g.n)) rc = -1;
    uint32_t top = 0;
    if (!rc) {
        g.n[0] = (struct gnode){0};
        g.len = 1;
        top = cg_child(&g, 0, func);
        if (!top) rc = -1;
    }
    for (size_t k = 0; k < nroots && !rc; k++) {
        g.n[top].calls += t->nodes[roots[k]].calls;
        g.n[top].total_ns += t->nodes[roots[k]].total_ns;
        rc = merge(&g, t, top, roots[k]);
    }
    if (!rc) {
        char tm[40];
        frp_fmt_time(tm, g.n[top].total_ns);
        const char *s = tm;
        while (*s == ' ')
            s++;
        if (!first) frp_out_lit(o, "\n");
        frp_out_lit(o, "# call graph of ");
        write_name(o, t, opt, func);
        frp_out_printf(o,
                       ": %llu call%s, %s\n#\n# called from:\n#       Calls   Total time  Path\n",
                       (unsigned long long)g.n[top].calls, g.n[top].calls == 1 ? "" : "s", s);
        for (size_t k = 0; k < nroots; k++) {
            const struct frp_tnode *nd = &t->nodes[roots[k]];
            frp_fmt_time(tm, nd->total_ns);
            frp_out_printf(o, "  %10llu  %11s  ", (unsigned long long)nd->calls, tm);
            write_caller(o, t, roots[k]);
            frp_out_lit(o, "\n");
        }
        frp_out_lit(o, "#\n#  Total time       Calls  Function\n");
        rc = write_graph(o, t, opt, &g);
    }
    free(roots);
    free(g.n);
    frp_hmap_free(&g.kids);
    return rc;
}

static int is_glob(const char *s)
{
    return strpbrk(s, "*?[") != NULL;
}

int frp_callgraph_write(struct frp_tree *t, const struct frp_opts *opt, FILE *out)
{
    struct frp_out o;
    if (frp_out_init(&o, out, 1 << 16)) return errno = ENOMEM, -1;
    const char *want = opt->callgraph ? opt->callgraph : "main";
    size_t wlen = strlen(want);
    int found = 0, rc = 0;
    uint8_t *called = calloc(t->funcs.n + 1, 1); /* an id can exist without calls */
    if (!called) {
        frp_out_free(&o);
        return errno = ENOMEM, -1;
    }
    for (uint32_t i = 1; i < t->n; i++)
        if (t->nodes[i].calls) called[t->nodes[i].func] = 1;
    for (uint32_t f = 1; f < t->funcs.n && !rc; f++) {
        if (!called[f]) continue;
        const struct frp_name *nm = &t->funcs.names[f];
        int match;
        if (is_glob(want)) {
            char *s = strndup(nm->s, nm->len);
            match = s && fnmatch(want, s, 0) == 0;
            free(s);
        } else {
            match = nm->len == wlen && memcmp(nm->s, want, wlen) == 0;
        }
        if (!match) continue;
        rc = graph_of(&o, t, opt, f, !found);
        found = 1;
    }
    free(called);
    if (rc) {
        frp_out_free(&o);
        return errno = ENOMEM, -1;
    }
    rc = frp_out_finish(&o);
    int e = errno;
    frp_out_free(&o);
    errno = e;
    return rc ? -1 : found ? 0 : 1;
}

/* The call graph merges every thread: no root frame per thread. */
int frp_callgraph_sink(struct frp_report *r, const struct frp_opts *o, FILE *out,
                       struct frp_sink *s)
{
    return frp_tree_sink(r, o, 0, frp_callgraph_write, out, s);
}
