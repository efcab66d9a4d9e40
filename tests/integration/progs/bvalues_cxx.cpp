// bvalues_cxx.cpp - a member function's arguments (values_tests.py): `this` comes first, in
// rdi, then the declared parameters.
#include <cstdio>

#ifdef __clang__
#define KEEP __attribute__((noinline, used))
#else
#define KEEP __attribute__((noinline, noipa, used))
#endif

struct Counter {
    long n; /* no constructor: at -O0 clang would call one, traced */
    KEEP long add(long k);
    KEEP int get() const;
};

long Counter::add(long k)
{
    n += k;
    return n;
}

int Counter::get() const
{
    return (int)n;
}

int main()
{
    Counter c;
    c.n = 0;
    c.add(5);
    c.add(-2);
    std::printf("bvalues_cxx %d\n", c.get());
    return 0;
}
