/*
 * ftr_filter.h - which functions to trace: the filter grammar shared by the preload (which sites
 * to patch), ftrace-ctl and ftrace-report (--filter), so that one expression means the same
 * everywhere. Pure but for finding the process's C++ demangler: no I/O, unit-tested on strings.
 *
 * Grammar (FTRACE_FILTER, ftrace-run -F/--filter, ftrace-ctl PID filter, ftrace-report --filter):
 *   EXPR := TERM { ',' TERM }
 *   TERM := [ '-' ] [ MODULE ':' ] PATTERN
 *   PATTERN := GLOB            shell glob on the function name: * ? [...] (fnmatch)
 *            | '@' REGEX       POSIX extended regular expression, unanchored (use ^ $), as
 *                              glibc's regcomp reads it but without back references
 *                              (ftr_regex.h: our own matcher, which allocates nothing)
 *   MODULE := GLOB             matched against the module's file name (basename), e.g.
 *                              libfoo.so* ; the main executable also matches the name "exe"
 *                              (callers say which module is the main one: ftr_filter_match_ex)
 * A leading '-' excludes. Terms are read left to right and the last term that matches a function
 * decides; a function that no term matches is traced when the expression has no including term
 * (only exclusions, or empty), and not traced otherwise. Whitespace around terms, after '-' and
 * around the module's ':' is ignored.
 * Commas inside a regular expression must be written as \, ("\," always stands for a comma and
 * never splits; other backslash pairs are passed on as written, so "\\," ends a term).
 * The module separator is the first ':' outside [...] that is not part of "::", so C++ names
 * such as ns::f need no module; a term that starts with '@' (after '-') has no module.
 * A comma inside (...) or <...> does not split ("ns::f(int, int)", "std::map<int, int>::find"),
 * unless the bracket is still open at the end of the expression.
 * C++ names (a mangled name _Z...): a term matches the mangled name or the demangled one:
 * without return type and parameter list ("ns::Cls::f": every overload) for a pattern without
 * '(' (a regex: without "\("), else also with them ("ns::Cls::f(int, char const*) const",
 * "int ns::g<int>(int)"), every space left out of both sides for a glob; and for a glob
 * without '<', also without template arguments ("ns::Box::get" for ns::Box<int>::get).
 * Globs match across "::" ('*' matches any text).
 * Errors name the term: an empty term ("a,,b"), a lone '-', an empty module before ':', an
 * empty pattern, an unmatched '[' / unknown [:class:] / trailing '\' in a glob, a regular
 * expression that ftr_re_compile() rejects (its reason follows: "unmatched (").
 * See docs/filters.md.
 */
#ifndef FTR_FILTER_H
#define FTR_FILTER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ftr_filter;

/*! ftr_filter_parse() : @return the compiled filter, or NULL with a one-line message in err
 *  (e.g. "bad filter term 3 '@a(': unmatched ( in regular expression"). An empty or NULL
 *  expression gives a filter that selects everything. */
struct ftr_filter *ftr_filter_parse(const char *expr, char *err, size_t errlen);
void ftr_filter_free(struct ftr_filter *f);

/*! ftr_filter_match() : @return 1 when the function name of module (a path or a file name; NULL
 *  means unknown, then module-limited terms do not match) is selected, else 0. A NULL filter
 *  selects everything; a NULL name is read as "". Same as ftr_filter_match_ex(is_main = 0).
 *  A C++ name is demangled here (ftr_demangle) when the filter has terms: malloc, not for a
 *  path that must not allocate. */
int ftr_filter_match(const struct ftr_filter *f, const char *module, const char *name);

/*! ftr_filter_match_ex() : ftr_filter_match() for a function of the main executable when
 *  is_main is nonzero: a module glob then also matches when it matches the name "exe" (module
 *  may be the executable's path, or NULL). Thread-safe on a shared filter. */
int ftr_filter_match_ex(const struct ftr_filter *f, const char *module, int is_main,
                        const char *name);

/*! ftr_filter_match_dem() : ftr_filter_match_ex() for a name whose demangled form the caller
 *  has (ftr_demangle(name, FTR_DEMANGLE_FULL)), to demangle once for several filters; NULL: not
 *  a C++ name, only name itself is matched. */
int ftr_filter_match_dem(const struct ftr_filter *f, const char *module, int is_main,
                         const char *name, const char *demangled);

/*! ftr_filter_includes() : @return the number of including terms (0: "everything but ...") */
size_t ftr_filter_includes(const struct ftr_filter *f);
/*! ftr_filter_terms() : @return the number of terms (0: an empty expression, everything) */
size_t ftr_filter_terms(const struct ftr_filter *f);

/*! ftr_filter_waits_for_module() : @return 1 when an including term of f is limited to modules
 *  none of which is loaded: loaded[0..n) are the loaded modules' paths or file names (the main
 *  executable, always loaded, also matches "exe"). Such a filter may select functions of a
 *  library that a later dlopen() brings, so selecting nothing now is no mistake. */
int ftr_filter_waits_for_module(const struct ftr_filter *f, const char *const *loaded, size_t n);

/*! ftr_filter_nearest() : for a filter that matched nothing, picks up to k names from names[]
 *  closest to the filter's including patterns (edit distance on the literal part), best first,
 *  into out[]. @return how many were written.
 *  The literal part is the pattern without metacharacters (glob: *?[]\ ; regex: ^$.*+?()[]{}|\ ).
 *  A name qualifies when its Levenshtein distance to some including term's literal is at most
 *  max(3, strlen(literal) / 2); its score is the smallest such distance. A C++ name is compared
 *  by its mangled and its demangled name (and its signature, for a pattern with a parameter
 *  list). Ties are broken by strcmp order of the (demangled) names; duplicate names (and the
 *  overloads of a C++ function: the same demangled name) are written once; out[] points into
 *  names[]. Module parts and exclusions are ignored. */
size_t ftr_filter_nearest(const struct ftr_filter *f, const char *const *names, size_t n,
                          const char **out, size_t k);

/* ---- C++ names: the one demangler of the preload and the tools ---- */
enum ftr_demangle_form {
    FTR_DEMANGLE_NAME,      /* ns::Box<int>::get, Op::operator(), f.isra.0: no return type, no
                               parameters, clone suffixes as a C symbol's */
    FTR_DEMANGLE_SIGNATURE, /* ns::Box<int>::get() const, ns::f(int) [clone .isra.0]: no return
                               type */
    FTR_DEMANGLE_FULL,      /* as the demangler writes it: int ns::g<int>(int) */
};
/*! ftr_demangle() : the demangled form of a mangled C++ name (malloc'ed; free() it), NULL when
 *  sym is no mangled name. The demangler is libsupc++'s, linked in (it allocates nothing of its
 *  own; the result is built with this module's malloc: in libftrace.so, the tracer's own). Patch
 *  and report time only, never in a hook. Thread-safe. */
char *ftr_demangle(const char *sym, enum ftr_demangle_form form);

#ifdef __cplusplus
}
#endif
#endif /* FTR_FILTER_H */
