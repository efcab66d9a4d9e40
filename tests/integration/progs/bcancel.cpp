/* bcancel.cpp: bcancel.c built as C++ (the mutex and c3's cleanup are released by
 * destructors, run by the forced unwind). */
#include "bcancel.c"
