/*
 * tree.h - function ids (display names interned to dense ids) and the merged call tree
 * (tree.c), which the folded stacks, the call graph and the flame graph are written from.
 */
#ifndef FTR_REPORT_TREE_H
#define FTR_REPORT_TREE_H

#include <stdint.h>
#include <stdio.h>

#include "sink.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- function ids (tree.c): display names interned to dense ids, 1.. ---- */
struct frp_funcs {
    struct frp_report *r;
    struct frp_name *names;              /* by id; [0] unused */
    const struct frp_process **rep_proc; /* by id: a process and site of it (source lines) */
    uint32_t *rep_site;
    uint32_t *chain; /* by id: the next id whose name has the same hash slot */
    uint32_t n;      /* ids in use + 1 */
    size_t cap;
    struct frp_hmap by_name; /* name hash -> first id */
    uint32_t **site_ids;     /* by process idx: site -> id (0: not seen yet) */
    uint32_t *site_ids_n;
    uint32_t nprocs;
};
void frp_funcs_init(struct frp_funcs *fs, struct frp_report *r);
void frp_funcs_free(struct frp_funcs *fs);
/*! frp_funcs_intern() : the id of a name (p, site: where it was met, or NULL). @return 0 when
 *  out of memory */
uint32_t frp_funcs_intern(struct frp_funcs *fs, struct frp_name name, const struct frp_process *p,
                          uint32_t site);
uint32_t frp_funcs_slow(struct frp_funcs *fs, const struct frp_item *it);
/*! frp_funcs_id() : the id of the function an ENTRY item enters. @return 0: out of memory */
static inline uint32_t frp_funcs_id(struct frp_funcs *fs, const struct frp_item *it)
{
    uint32_t pi = it->thread->proc->idx, site = it->ev.site;
    if (__builtin_expect(pi < fs->nprocs && site < fs->site_ids_n[pi], 1)) {
        uint32_t id = fs->site_ids[pi][site];
        if (__builtin_expect(id != 0, 1)) return id;
    }
    return frp_funcs_slow(fs, it);
}

/* ---- the merged call tree (tree.c) ---- */
/* A node comes after its parent in nodes[] (index above its parent's). */
struct frp_tnode {
    uint32_t func;    /* function id; node 0 (the root) has 0 */
    uint32_t parent;  /* node index */
    uint32_t child;   /* first child, 0: none (in order of first call) */
    uint32_t sibling; /* next sibling, 0: none */
    uint32_t last;    /* last child (appending) */
    uint32_t hint;    /* the child looked up last */
    uint32_t depth;
    uint64_t calls;
    uint64_t total_ns; /* inclusive time of its calls (open calls end at their thread's end) */
    uint64_t self_ns;  /* total_ns minus the callees' */
};
struct frp_tree {
    struct frp_funcs funcs;
    struct frp_tnode *nodes;
    uint32_t n;
    size_t cap;
    struct frp_hmap kids;  /* parent << 32 | func -> child node */
    struct frp_tstack *ts; /* per thread */
    uint32_t nts;
    int per_thread; /* a root frame per thread: "name-tid" */
    struct frp_stats stats;
    int nomem;
};
int frp_tree_init(struct frp_tree *t, struct frp_report *r, int per_thread); /* FTR_OK/NOMEM */
void frp_tree_event(struct frp_tree *t, const struct frp_item *it);
void frp_tree_free(struct frp_tree *t);
/* What a view of the tree writes at the end: @return 0, 1 (nothing to show), -1 (errno) */
typedef int frp_tree_writer(struct frp_tree *t, const struct frp_opts *o, FILE *out);
/*! frp_tree_sink() : a tree (a root frame per thread when per_thread) as a sink; its end()
 *  completes the tree (the root's time) and hands it to write (1: FTR_E_EMPTY). */
int frp_tree_sink(struct frp_report *r, const struct frp_opts *o, int per_thread,
                  frp_tree_writer *write, FILE *out, struct frp_sink *s);

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_TREE_H */
