/*
 * park.h - the shadow entries of suspended coroutines, kept with their stack (park.c).
 *
 * A coroutine stack the program declared (makecontext) that a switch leaves (swapcontext back
 * to its resumer) takes its entries off the thread's shadow stack: they are parked with the
 * stack's range (stacks.h), in blocks of the tracer's own, until a switch resumes that stack,
 * on this thread or on any other (a scheduler that moves coroutines between workers), which
 * puts them back on its own shadow stack. So a thread's shadow stack holds only the frames of
 * the stacks it runs: any number of coroutines can be suspended, at any depth, and a switch
 * costs the depth of the stacks it leaves and resumes, not the number suspended.
 *
 * Lock-free (a tagged free list of blocks, one exchange to publish or take a park), no
 * allocation but our own mmap'ed pool; called inside a switch (FTR_T_SWITCHING, hooks.c: a
 * signal handler that lands there leaves the parks alone).
 */
#ifndef FTR_PARK_H
#define FTR_PARK_H

#include <stdint.h>

#include "tracer.h"

/* A park being built: entries appended in order (outermost first), published at once. */
struct ftr_park_build {
    uint32_t cls;        /* the declared stack's class (stacks.h: 1 + its range's index) */
    uint32_t head, tail; /* block numbers (1-based; 0: none yet) */
};
/* Appends e to b. @return 0, or -1 with no block to be had (e stays on the shadow stack). */
int ftr_park_add(struct ftr_park_build *b, const struct ftr_shadow *e) FTR_HIDDEN;
/* Publishes b as its stack's park (one left there before, never resumed, is dropped). */
void ftr_park_publish(const struct ftr_park_build *b) FTR_HIDDEN;
/* Takes the park of stack cls onto out[0..room): @return how many entries (0: none parked;
 * a park that does not fit in room is dropped: those frames are then no longer recorded). */
uint32_t ftr_unpark(uint32_t cls, struct ftr_shadow *out, uint32_t room) FTR_HIDDEN;
/* The park of stack cls is dropped (a coroutine made afresh on its memory). */
void ftr_park_drop(uint32_t cls) FTR_HIDDEN;

#endif /* FTR_PARK_H */
