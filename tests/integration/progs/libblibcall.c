/* libblibcall: a dlopen()ed traced library that calls libc (blibcall.c) */
#include <string.h>

#include "progs.h"

NOINLINE size_t plug_len(const char *s)
{
    return strlen(s) + 1;
}
