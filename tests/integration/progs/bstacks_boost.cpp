/* bstacks_boost: boost.context stack switches (issue 28), run by
 * tests/integration/stacks_tests.py. usage: bstacks_boost MODE. Like bstacks.c, each mode
 * prints a deterministic answer, then "count FUNC N" per traced function (extern "C": plain
 * names in the report) from its own atomic counters: the traced run must print the same, and
 * ftrace-report --summary must count each FUNC N times, none left open.
 *   callcc         8 generators (boost::context::callcc), each yielding 50 values from inside
 *                  g_body -> g_outer -> g_inner -> g_emit (g_emit resumes the consumer);
 *                  main pulls them round robin and passes each value to g_take.
 *   fiber-migrate  32 boost::context::fiber objects in a mutex-protected queue, resumed in
 *                  turn by 4 worker threads (b_worker), never twice in a row by the same one;
 *                  each fiber runs 4 rounds of b_step -> b_inner -> b_leaf, yielding from
 *                  b_leaf and from b_inner.
 *   unwind         20 times: a continuation (callcc) suspended inside u_outer -> u_mid ->
 *                  u_inner is dropped by main after one value: boost unwinds its stack with
 *                  forced_unwind through the traced frames (u_mid's local object's destructor
 *                  counts the unwinds, printed); nothing may end in std::terminate. */
#include <boost/context/continuation.hpp>
#include <boost/context/fiber.hpp>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>
#include "behave.h"

namespace ctx = boost::context;

#define CNT(f) static std::atomic<long> n_##f
#define HIT(f) n_##f.fetch_add(1, std::memory_order_relaxed)
#define SHOW(f) std::printf("count %s %ld\n", #f, n_##f.load())

CNT(main);

/* ---- callcc ---- */
struct gen {
    ctx::continuation sink, self;
    int id;
    long val;
    bool done;
};
CNT(g_body);
CNT(g_outer);
CNT(g_inner);
CNT(g_emit);
CNT(g_take);

extern "C" NOINLINE void g_emit(gen *g, long v)
{
    HIT(g_emit);
    g->val = v;
    g->sink = std::move(g->sink).resume();
}
extern "C" NOINLINE void g_inner(gen *g, long k)
{
    HIT(g_inner);
    g_emit(g, g->id * 1000 + k);
    NOTAIL();
}
extern "C" NOINLINE void g_outer(gen *g, long k)
{
    HIT(g_outer);
    g_inner(g, k * 2);
    NOTAIL();
}
extern "C" NOINLINE void g_body(gen *g)
{
    HIT(g_body);
    for (long k = 0; k < 50; k++)
        g_outer(g, k);
}
extern "C" NOINLINE long g_take(long sum, long v)
{
    HIT(g_take);
    return sum + v;
}
static void run_callcc()
{
    std::vector<gen> gens(8);
    for (int i = 0; i < 8; i++) {
        gen *g = &gens[i];
        g->id = i;
        g->done = false;
        g->self = ctx::callcc([g](ctx::continuation &&sink) {
            g->sink = std::move(sink);
            g->sink = std::move(g->sink).resume(); /* started: back to main */
            g_body(g);
            g->done = true;
            return std::move(g->sink);
        });
    }
    long sum = 0;
    for (bool any = true; any;) {
        any = false;
        for (gen &g : gens)
            if (!g.done) {
                g.self = std::move(g.self).resume();
                if (!g.done) sum = g_take(sum, g.val);
                any = true;
            }
    }
    std::printf("callcc: %ld\n", sum);
    SHOW(g_body);
    SHOW(g_outer);
    SHOW(g_inner);
    SHOW(g_emit);
    SHOW(g_take);
}

/* ---- fiber-migrate ---- */
#define FB_N 32
#define FB_WORKERS 4
struct fib {
    ctx::fiber self, caller;
    int id, last; /* last: the worker that resumed it last (1..), 0: none yet */
    long val;
};
static std::mutex fb_lock;
static std::condition_variable fb_cond;
static std::deque<fib *> fb_queue;
static int fb_finished;
CNT(b_worker);
CNT(b_body);
CNT(b_step);
CNT(b_inner);
CNT(b_leaf);

NOTRACE static void fb_yield(fib *f)
{
    f->caller = std::move(f->caller).resume();
}
extern "C" NOINLINE long b_leaf(fib *f, long r)
{
    HIT(b_leaf);
    long v = f->id * 100 + r;
    fb_yield(f);
    return v;
}
extern "C" NOINLINE long b_inner(fib *f, long r)
{
    HIT(b_inner);
    long v = b_leaf(f, r) * 3;
    fb_yield(f);
    return v + 1;
}
extern "C" NOINLINE long b_step(fib *f, long r)
{
    HIT(b_step);
    long v = b_inner(f, r);
    KEEP(v);
    return v + r;
}
extern "C" NOINLINE void b_body(fib *f)
{
    HIT(b_body);
    for (int r = 0; r < 4; r++)
        f->val += b_step(f, r);
}
extern "C" NOINLINE void b_worker(int me)
{
    HIT(b_worker);
    std::unique_lock<std::mutex> lk(fb_lock);
    for (;;) {
        fb_cond.wait(lk, [me] {
            return fb_finished == FB_N || (!fb_queue.empty() && fb_queue.front()->last != me);
        });
        if (fb_finished == FB_N) break;
        fib *f = fb_queue.front();
        fb_queue.pop_front();
        fb_cond.notify_all(); /* a new head */
        lk.unlock();
        f->last = me;
        f->self = std::move(f->self).resume();
        lk.lock();
        if (!f->self)
            fb_finished++;
        else
            fb_queue.push_back(f);
        fb_cond.notify_all();
    }
}
static void run_fiber_migrate()
{
    std::vector<fib> fibs(FB_N);
    for (int i = 0; i < FB_N; i++) {
        fib *f = &fibs[i];
        f->id = i;
        f->last = 0;
        f->val = 0;
        f->self = ctx::fiber([f](ctx::fiber &&caller) {
            f->caller = std::move(caller);
            b_body(f);
            return std::move(f->caller);
        });
        fb_queue.push_back(f);
    }
    std::vector<std::thread> t;
    for (int i = 0; i < FB_WORKERS; i++)
        t.emplace_back(b_worker, i + 1);
    for (auto &th : t)
        th.join();
    long sum = 0;
    for (fib &f : fibs)
        sum += f.val;
    std::printf("fiber-migrate: %ld\n", sum);
    SHOW(b_worker);
    SHOW(b_body);
    SHOW(b_step);
    SHOW(b_inner);
    SHOW(b_leaf);
}

/* ---- unwind ---- */
static long uw_cleanups;
static ctx::continuation *uw_sink;
CNT(u_outer);
CNT(u_mid);
CNT(u_inner);
struct cleanup {
    ~cleanup() { uw_cleanups++; }
};
extern "C" NOINLINE void u_inner(long *v)
{
    HIT(u_inner);
    for (;;) { /* a generator never finished: dropped while suspended here */
        (*v)++;
        *uw_sink = std::move(*uw_sink).resume();
    }
}
extern "C" NOINLINE void u_mid(long *v)
{
    HIT(u_mid);
    cleanup c;
    u_inner(v);
}
extern "C" NOINLINE void u_outer(long *v)
{
    HIT(u_outer);
    u_mid(v);
    NOTAIL();
}
static void run_unwind()
{
    long total = 0;
    for (int i = 0; i < 20; i++) {
        long v = i;
        ctx::continuation sink;
        ctx::continuation c = ctx::callcc([&v, &sink](ctx::continuation &&s) {
            sink = std::move(s);
            uw_sink = &sink;
            u_outer(&v);
            return std::move(sink);
        });
        total += v;
        /* c goes out of scope suspended in u_inner: forced_unwind through its frames */
    }
    std::printf("unwind: %ld, %ld cleanups\n", total, uw_cleanups);
    SHOW(u_outer);
    SHOW(u_mid);
    SHOW(u_inner);
}

int main(int argc, char **argv)
{
    HIT(main);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!std::strcmp(mode, "callcc")) {
        run_callcc();
    } else if (!std::strcmp(mode, "fiber-migrate")) {
        run_fiber_migrate();
    } else if (!std::strcmp(mode, "unwind")) {
        run_unwind();
    } else {
        std::fprintf(stderr, "usage: bstacks_boost callcc|fiber-migrate|unwind\n");
        return 2;
    }
    SHOW(main);
    return 0;
}
