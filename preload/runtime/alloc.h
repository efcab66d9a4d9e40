/*
 * alloc.h - the tracer's own heap (alloc.c).
 *
 * libftrace.so defines malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign,
 * reallocarray, strdup and strndup with hidden visibility, on memory it maps itself: its own
 * objects and the static libraries linked into it call these, never the program's. Memory that
 * came from elsewhere (the process's C++ demangler) must go back with the process's free(),
 * never with ours. Nothing here may be called from a hook.
 */
#ifndef FTR_ALLOC_H
#define FTR_ALLOC_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define FTR_ALLOC_API __attribute__((visibility("hidden")))

#endif
