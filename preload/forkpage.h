/*
 * forkpage.h - the state a fork() writes, kept on one page.
 *
 * After fork() every private page is shared copy-on-write by parent and child: the first write
 * to one, on either side, is a page fault that copies it (~35 µs each on a paravirtualised
 * host, where an untraced fork child takes ~20 faults in all). Our fork handlers take and release
 * the preload's locks in the parent and re-make them and reset flags in the child; spread over
 * the .data and .bss of a dozen modules, that was ~10 pages, each copied twice (perf record -e
 * minor-faults -d). A variable written there is declared FTR_FORK_PAGE: the linker gathers
 * every such variable of every module into the one section "ftr_fork_page", which starts on a
 * page of its own (runtime/alloc.c) and stays under one page (a build check there). Nothing on the
 * hot path writes there: the hooks only read ftr_hot.
 */
#ifndef FTR_FORKPAGE_H
#define FTR_FORKPAGE_H

#define FTR_FORK_PAGE __attribute__((section("ftr_fork_page")))

#endif /* FTR_FORKPAGE_H */
