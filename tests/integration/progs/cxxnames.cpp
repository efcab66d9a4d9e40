// cxxnames.cpp - C++ names for the filter tests (cxx_filter_tests.py): namespaces, a class
// with overloads and a const method, function and class templates, a free operator, a call
// operator, a nested namespace and a free function.
//
//   cxxnames once          every function a fixed number of times (see the counts below), exit 0
//   cxxnames loop DIR      call them until DIR/stop exists; DIR/markN makes it call mark_N()
//                          once and answer with DIR/ackN (ftrace-ctl tests)
//   cxxnames exit          shop::step() 5 times (each >= 1 ms), then a 6th step() calls exit()
//                          from inside: step() and main() are still open at the end
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

#ifdef __clang__
#define NI __attribute__((noinline))
#else
#define NI __attribute__((noinline, noclone))
#endif

static volatile long sink;
static const char *dir;

static void nap(long us)
{
    struct timespec d = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&d, nullptr);
}

static bool exists(const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static void touch(const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) fclose(f);
}

namespace shop {
struct Item {
    int price;
};

namespace detail {
NI int helper(int x)
{
    sink = x;
    return x + 1;
}
} // namespace detail

class Cart {
public:
    NI int add(int x);
    NI int add(int x, int y);
    NI int add(const Item &it);
    NI int total() const;
    long sum = 0;
};

int Cart::add(int x)
{
    sum += x;
    return (int)sum;
}
int Cart::add(int x, int y)
{
    sum += x * y;
    return (int)sum;
}
int Cart::add(const Item &it)
{
    sum += it.price;
    return (int)sum;
}
int Cart::total() const
{
    return detail::helper((int)sum);
}

template <typename T> NI T biggest(T a, T b)
{
    sink = (long)a;
    return a > b ? a : b;
}

template <typename T> struct Box {
    T v;
    NI T get() const
    {
        sink = (long)v;
        return v;
    }
};

NI bool operator<(const Item &a, const Item &b)
{
    sink = a.price;
    return a.price < b.price;
}

struct Fun {
    NI int operator()(int x) const
    {
        sink = x;
        return x * 2;
    }
};

NI void step(int i)
{
    if (i == 5) exit(0); // from inside: this call and main's stay open
    nap(1000);
}
} // namespace shop

NI int free_fn(int x)
{
    return shop::detail::helper(x) + 1;
}

extern "C" NI void mark_1(void)
{
    nap(1000);
}
extern "C" NI void mark_2(void)
{
    nap(1000);
}
extern "C" NI void mark_3(void)
{
    nap(1000);
}

// once: add(int) x3, add(int, int) x2, add(Item const&) x1, total x1 (helper x1 under it),
// biggest<int> x1, biggest<double> x1, Box<int>::get x1, Box<long>::get x1, operator< x1,
// Fun::operator() x1, free_fn x2 (helper x1 under each)
NI static long one_round(void)
{
    shop::Cart c;
    shop::Item a{3}, b{4};
    c.add(1);
    c.add(2);
    c.add(3);
    c.add(4, 5);
    c.add(6, 7);
    c.add(a);
    long r = c.total();
    r += shop::biggest(1, 2);
    r += (long)shop::biggest(1.5, 0.5);
    shop::Box<int> bi{7};
    shop::Box<long> bl{8};
    r += bi.get() + bl.get();
    r += a < b;
    shop::Fun f;
    r += f(21);
    r += free_fn(1) + free_fn(2);
    return r;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "once";
    if (!strcmp(mode, "once")) {
        printf("%ld\n", one_round());
        return 0;
    }
    if (!strcmp(mode, "exit")) {
        for (int i = 0; i < 6; i++)
            shop::step(i);
        return 1; // not reached
    }
    if (!strcmp(mode, "loop") && argc > 2) {
        dir = argv[2];
        void (*const marks[])(void) = {mark_1, mark_2, mark_3};
        unsigned next = 0;
        touch("ready");
        while (!exists("stop")) {
            sink = one_round();
            char name[32];
            if (next < 3) {
                snprintf(name, sizeof name, "mark%u", next + 1);
                if (exists(name)) {
                    marks[next]();
                    snprintf(name, sizeof name, "ack%u", ++next);
                    touch(name);
                }
            }
            nap(500);
        }
        printf("loop done\n");
        return 0;
    }
    return 2;
}
