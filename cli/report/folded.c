/*
 * folded.c - folded stacks (--folded): one line per call path with self time,
 *
 *   main;mid;leaf 120
 *
 * the weight being the path's self time in nanoseconds. The input format of flamegraph.pl,
 * inferno-flamegraph and speedscope. Paths come in depth-first order of the call tree
 * (callees in order of first call). With --per-thread every path starts with its thread
 * ("name-tid"). Frames never contain ';' (a ';' in a name is written ':').
 */
#include "folded.h"

#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Writes the path from the root's child down to node n, joined by ';'. */
static void write_path(struct frp_out *o, const struct frp_tree *t, const uint32_t *path,
                       uint32_t depth)
{
    for (uint32_t d = 0; d < depth; d++) {
        const struct frp_name *nm = &t->funcs.names[t->nodes[path[d]].func];
        if (d) frp_out_lit(o, ";");
        const char *s = nm->s, *end = s + nm->len;
        for (;;) {
            const char *semi = memchr(s, ';', (size_t)(end - s));
            if (!semi) break;
            frp_out_write(o, s, (size_t)(semi - s));
            frp_out_lit(o, ":");
            s = semi + 1;
        }
        frp_out_write(o, s, (size_t)(end - s));
    }
}

int frp_folded_write(struct frp_tree *t, FILE *out)
{
    struct frp_out o;
    if (frp_out_init(&o, out, 1 << 20)) return errno = ENOMEM, -1;
    uint32_t *path = NULL;
    size_t cap = 0;
    uint32_t depth = 0, n = t->nodes[0].child;
    while (n) {
        const struct frp_tnode *nd = &t->nodes[n];
        if (frp_grow((void **)&path, &cap, (size_t)depth + 1, sizeof *path)) {
            free(path);
            frp_out_free(&o);
            return errno = ENOMEM, -1;
        }
        path[depth++] = n;
        if (nd->self_ns) {
            write_path(&o, t, path, depth);
            char num[24];
            num[0] = ' ';
            char *e = frp_fmt_u64(num + 1, nd->self_ns);
            *e++ = '\n';
            frp_out_write(&o, num, (size_t)(e - num));
        }
        /* next in depth-first order: the first child, else the next sibling of the nearest
         * node on the path that has one */
        if (nd->child) {
            n = nd->child;
            continue;
        }
        n = 0;
        while (depth && !n) {
            n = t->nodes[path[--depth]].sibling;
        }
    }
    free(path);
    int rc = frp_out_finish(&o);
    int e = errno;
    frp_out_free(&o);
    errno = e;
    return rc;
}

static int write_tree(struct frp_tree *t, const struct frp_opts *o, FILE *out)
{
    (void)o;
    return frp_folded_write(t, out);
}

int frp_folded_sink(struct frp_report *r, const struct frp_opts *o, FILE *out, struct frp_sink *s)
{
    return frp_tree_sink(r, o, o->per_thread, write_tree, out, s);
}
