/*
 * nosites.c - the files a session found without sites, so that its other images need not look.
 *
 * Every program a session runs loads us, most of them uninstrumented (a shell, `true`, the tools
 * a build runs), and each looks for sites in the files of its modules. A module that defines a
 * hook itself (libc defines mcount) can only be cleared by a pass over its whole text for calls
 * to it (patcher/elf_sites.c): over libc, 1.4 MiB read and the page faults of reading it, in
 * every process that starts. A file found without sites, and with none skipped, is named in
 * FTRACE_NOSITES (device, inode, size and modification time: a file changed since is another
 * file), which the session's later images inherit (process.c) and consult before a scan.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ftr_env.h"
#include "tracer.h"

#define NOSITES_MAX 32

static struct ftr_file_id known[NOSITES_MAX];
static size_t nknown;
static int changed;

static int same(const struct ftr_file_id *a, const struct ftr_file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime == b->mtime;
}

void ftr_nosites_init(void)
{
    const char *v = getenv(ftr_env_name(FTR_ENV_NOSITES));
    while (v && *v && nknown < NOSITES_MAX) {
        struct ftr_file_id id;
        int used = 0;
        if (sscanf(v, "%lx:%lx:%lx:%lx%n", &id.dev, &id.ino, &id.size, &id.mtime, &used) != 4)
            break;
        known[nknown++] = id;
        v += used;
        if (*v == ',') v++;
    }
}

int ftr_nosites_known(const char *path, struct ftr_file_id *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    id->dev = (unsigned long)st.st_dev;
    id->ino = (unsigned long)st.st_ino;
    id->size = (unsigned long)st.st_size;
    id->mtime = (unsigned long)st.st_mtim.tv_sec * 1000000000ul + (unsigned long)st.st_mtim.tv_nsec;
    for (size_t i = 0; i < nknown; i++)
        if (same(&known[i], id)) return 1;
    return 0;
}

void ftr_nosites_add(const struct ftr_file_id *id)
{
    if (!id->ino || nknown == NOSITES_MAX) return;
    for (size_t i = 0; i < nknown; i++)
        if (same(&known[i], id)) return;
    known[nknown++] = *id;
    changed = 1;
}

void ftr_nosites_publish(void)
{
    char v[NOSITES_MAX * 72 + 1];
    size_t n = 0;
    if (!changed) return;
    v[0] = 0;
    for (size_t i = 0; i < nknown && n < sizeof v; i++)
        n += (size_t)snprintf(v + n, sizeof v - n, "%s%lx:%lx:%lx:%lx", i ? "," : "", known[i].dev,
                              known[i].ino, known[i].size, known[i].mtime);
    if (n < sizeof v) ftr_env_session_set(FTR_ENV_NOSITES, v);
    changed = 0;
}
