/*
 * libelf_error.c - the error state of the libelf linked statically into libftrace.so.
 *
 * libelf.a is linked into libftrace.so (so that its allocations bind to ours: alloc.c), all but
 * its elf_error.o, whose thread-local error number is local-exec TLS, which a shared object
 * cannot have. These three functions stand in for it, the linker then leaves that member out.
 * The messages are terse: the patcher reports libelf's errors only when elf_version() fails.
 */
#include <stdio.h>

#include "tracer.h"

static __thread int last_error __attribute__((tls_model("initial-exec")));

/* libelf's internal setter, called on every error */
FTR_HIDDEN void __libelf_seterrno(int value)
{
    last_error = value;
}

FTR_HIDDEN int elf_errno(void)
{
    int e = last_error;
    last_error = 0;
    return e;
}

/* error 0: the last error or NULL when there was none; -1: the last error; else that one. */
FTR_HIDDEN const char *elf_errmsg(int error)
{
    static __thread char text[40] __attribute__((tls_model("initial-exec")));
    int e = error <= 0 ? last_error : error;
    if (e == 0) return error == 0 ? NULL : "no error";
    snprintf(text, sizeof text, "libelf error %d", e);
    return text;
}
