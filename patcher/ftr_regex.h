/*
 * ftr_regex.h - regular expressions of our own for the filter (filter.c): POSIX extended
 * syntax as glibc's regcomp(REG_EXTENDED | REG_NOSUB) reads it, matched by a Thompson NFA
 * simulation that allocates nothing and takes time linear in the text (no backtracking).
 * glibc's regcomp/regexec would allocate with malloc, which inside libftrace.so is the program's.
 *
 * Syntax (bytes, C locale):
 *   literals; '.' (any byte); bracket expressions [abc] [^a-z] []a] [a-] with the classes
 *   [:alnum:] [:alpha:] [:blank:] [:cntrl:] [:digit:] [:graph:] [:lower:] [:print:] [:punct:]
 *   [:space:] [:upper:] [:xdigit:] (ASCII), [.c.] and [=c=] for one character, a backslash
 *   literal inside brackets; '^' and '$' (anchors wherever they stand); ( ) grouping; '|'
 *   alternation, empty branches allowed ("a|", "(|b)", "()"); * + ? {m} {m,} {,n} {m,n}
 *   (counts up to 32767, stacked repeats allowed: "a**", "a{2}{3}"); an unmatched ')' is a
 *   literal, as are '}' and ']' outside brackets; backslash escapes: \. \( \\ and every other
 *   \c is the character c, except glibc's \w \W (word characters: alnum and '_') \s \S
 *   ([:space:]) \b \B \< \> (word boundaries) \` \' (start and end of the text).
 * Rejected, as glibc rejects them: a repeat with nothing before it ("*a", "(+", "a|?b", "^*"),
 * unmatched ( [ {, bad counts ("a{}", "a{2,1}", "a{x}"), ranges out of order or with a class
 * as an end ("[z-a]", "[[:alpha:]-z]"), a '-' inside [...] that is neither first, last nor a
 * range's end ("[a-c-e]"), unknown classes, collating elements longer than one character, a
 * trailing backslash. Also rejected (glibc accepts them): back references \1..\9,
 * and expressions too big for the matcher (over FTR_RE_MAX_INSNS instructions, as
 * "(a{100}){100}" would need, or nested more than FTR_RE_MAX_DEPTH deep).
 * Where glibc departs from POSIX we do not follow (names hold no newline, and these are
 * rare): a newline is an ordinary character (glibc's regexec lets a '^' or '$' inside the
 * pattern match next to one: "x\n^a"), and a counted repeat of a group with a word anchor
 * means what it says (glibc finds "b(\>.|$){2}" in "ba").
 */
#ifndef FTR_REGEX_H
#define FTR_REGEX_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FTR_RE_MAX_INSNS 4096 /* instructions of a compiled expression (about bytes x copies) */
#define FTR_RE_MAX_DEPTH 200  /* nesting of groups and repeats */

struct ftr_re_prog;
struct ftr_re {
    struct ftr_re_prog *prog; /* NULL: not compiled (matches nothing) */
};

/*! ftr_re_compile() : compiles pattern into re (malloc'ed: in libftrace.so the tracer's own
 *  heap). @return 0, or -1 with re->prog NULL and a one-line reason in err (e.g.
 *  "unmatched (", "nothing to repeat before '*'"). */
int ftr_re_compile(struct ftr_re *re, const char *pattern, char *err, size_t errlen);

/*! ftr_re_match() : @return 1 when re matches text somewhere (an unanchored search, as
 *  regexec(); ^ and $ anchor), else 0. Allocates nothing, uses about 5 KB of stack, takes
 *  O(strlen(text) x instructions) time. Reentrant and thread-safe on a shared re. */
int ftr_re_match(const struct ftr_re *re, const char *text);

/*! ftr_re_free() : frees what compile allocated; re may be zeroed, freed or NULL. */
void ftr_re_free(struct ftr_re *re);

#ifdef __cplusplus
}
#endif
#endif /* FTR_REGEX_H */
