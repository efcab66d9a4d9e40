/*
 * handlers.c - the traced signal handlers running on a thread, to tell a handler that switched
 * stacks under a hook it interrupted (handlers.h; docs/design.md, "A handler that switched
 * stacks by hand").
 *
 * The list (ftr_tls.sig, in the thread's record: none, sig_cap 0, while it has none) is changed
 * by the thread and by its own signal handlers only: an entry is written before the count that
 * takes it in, and a nested handler's entries come and go above the count this one read, so a
 * change it interrupts is never undone.
 */
#include "handlers.h"
#include "shadow.h"
#include "sigframe_x86_64.h"
#include "stacks.h"

static inline uintptr_t slot_of(const struct ftr_sig_frame *f)
{
    return f->slot & ~(uintptr_t)1;
}

/* The context the signal frame above slot returns to */
static inline void frame_context(uintptr_t slot, uintptr_t *sp, uintptr_t *ip)
{
    *sp = *(const volatile uintptr_t *)(slot + FTR_SIGFRAME_SP_OFF);
    *ip = *(const volatile uintptr_t *)(slot + FTR_SIGFRAME_IP_OFF);
}

static int any_interrupted(const struct ftr_tls *t, uint32_t n)
{
    for (uint32_t i = 0; i < n && i < t->sig_cap; i++)
        if (t->sig[i].slot & 1) return 1;
    return 0;
}

/* The stack class of a, where it tells stacks apart (the thread's own with known bounds, or a
 * declared one), else FTR_STACK_UNKNOWN */
static uint32_t known_class(const struct ftr_tls *t, uintptr_t a)
{
    uint32_t c = ftr_stack_class(t, a);
    return c == FTR_STACK_OWN && !t->stack_hi ? FTR_STACK_UNKNOWN : c;
}

void ftr_handler_entered(struct ftr_tls *t, uintptr_t slot, int interrupted)
{
    uint32_t i = t->sig_n;
    if (i >= t->sig_cap) {
        if (interrupted) {
            ftr_handler_switched(t);
            return;
        }
        t->sig_n = i + 1; /* counted, not kept: it interrupted no hook */
        return;
    }
    struct ftr_sig_frame f = {slot | (interrupted ? 1u : 0u), 0, 0};
    frame_context(slot, &f.sp, &f.ip);
    t->sig[i] = f;
    SIGNAL_FENCE();
    t->sig_n = i + 1;
    SIGNAL_FENCE();
    t->sig[i] = f; /* again: a handler nested between the two stores pushed and popped at i */
}

int ftr_handler_returns(struct ftr_tls *t, uintptr_t s)
{
    uint32_t n = t->sig_n;
    if (!n) return 1; /* its entry was dropped (a jump's), or it entered with the list full */
    if (n > t->sig_cap) {
        /* past what the list holds: its order cannot be told, which only matters while a
         * handler in it interrupted a hook */
        if (any_interrupted(t, t->sig_cap)) return 0;
        t->sig_n = n - 1;
        return 1;
    }
    uint32_t at = n;
    for (uint32_t i = n; i-- > 0;)
        if (slot_of(&t->sig[i]) == s) {
            at = i;
            break;
        }
    if (at < n) {
        /* Handlers above it whose frames lie below its own on one stack are gone: a jump no
         * wrapper saw (__builtin_longjmp) left them. On stacks that cannot be told apart
         * (undeclared ones) they may be other contexts' (green threads'), suspended: kept. */
        uint32_t cls = known_class(t, s), k = at + 1;
        for (uint32_t i = at + 1; i < n; i++) {
            uintptr_t o = slot_of(&t->sig[i]);
            if (!(cls != FTR_STACK_UNKNOWN && o < s && known_class(t, o) == cls))
                t->sig[k++] = t->sig[i];
        }
        n = k;
    }
    if (at + 1 == n) { /* in order: to the context it interrupted? */
        uintptr_t sp, ip;
        frame_context(s, &sp, &ip);
        int moved = sp != t->sig[at].sp || (ip != t->sig[at].ip && (t->sig[at].slot & 1));
        if (moved && any_interrupted(t, n)) return 0;
        SIGNAL_FENCE();
        t->sig_n = at;
        return 1;
    }
    /* out of order: the program switched between handlers */
    if (any_interrupted(t, n)) return 0;
    if (at < n) {
        for (uint32_t i = at; i + 1 < n; i++)
            t->sig[i] = t->sig[i + 1];
        n--;
    }
    SIGNAL_FENCE();
    t->sig_n = n;
    return 1;
}

void ftr_handlers_jump(struct ftr_tls *t, uintptr_t sp)
{
    uint32_t n = t->sig_n < t->sig_cap ? t->sig_n : t->sig_cap, k = 0;
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    uint32_t to = ftr_stack_class(t, sp), from = ftr_stack_class(t, here);
    for (uint32_t i = 0; i < n; i++) {
        uintptr_t o = slot_of(&t->sig[i]);
        uint32_t c = ftr_stack_class(t, o);
        if (!((c == to && o < sp) || (from != to && c == from))) t->sig[k++] = t->sig[i];
    }
    /* (those past what the list held go too: they interrupted no hook) */
    SIGNAL_FENCE();
    t->sig_n = k;
}
