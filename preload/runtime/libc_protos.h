/*
 * libc_protos.h - what --auto-args records for the common library functions (libc_protos.c).
 * Private to preload/.
 */
#ifndef FTR_LIBC_PROTOS_H
#define FTR_LIBC_PROTOS_H

/* ';'-separated -A specs (patcher/ftr_argspec.h), arguments and return values together */
const char *ftr_libc_protos(void) __attribute__((visibility("hidden")));

#endif
