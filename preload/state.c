/*
 * state.c - the global state of libftrace.so (state.h says what each part is).
 */
#include "forkpage.h"
#include "state.h"

/* the thread's: every hook's */
__thread struct ftr_tls ftr_tls __attribute__((tls_model("initial-exec")));

/* the process's: written by the fork handlers, hence on the fork page */
struct ftr_hot ftr_hot FTR_FORK_PAGE;
struct ftr_global ftr_g FTR_FORK_PAGE = {.fd = -1};
struct ftr_config ftr_cfg;
uint8_t *ftr_site_flags;  /* settings.c */
uintptr_t *ftr_site_body; /* through.c */
