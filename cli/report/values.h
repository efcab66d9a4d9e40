/*
 * values.h - argument and return values as text (values.c): the one place every view formats
 * the values a call carries (frp_item.vals, formats/ftr_values.h).
 */
#ifndef FTR_REPORT_VALUES_H
#define FTR_REPORT_VALUES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FRP_VALUES_TEXT_MAX 1024 /* room for any list's text */

/*! frp_values_text() : the items of the value list [v, v + len) as text into buf (cap bytes,
 *  NUL-terminated): "1, -2, \"abc\", 0x10" (a list that is no valid one reads "?"). Strings are
 *  quoted and escaped as in C, cut strings end in "...", a NULL string reads NULL and an
 *  unreadable one (bad). @return the text's length */
size_t frp_values_text(const uint8_t *v, uint32_t len, char *buf, size_t cap);

/*! frp_values_named() : frp_values_text() of a list whose items were typed from DWARF
 *  (FTR_VAL_DWARF), with ps the function's parameters (NULL: unknown): "fd=3, mode=O_RDONLY,
 *  p={0x1, 0x2}" (parameter names, enumerators by name, a struct's register parts in braces).
 *  frp_values_typed() says whether a list is one of those (then look ps up). */
struct frp_params;
size_t frp_values_named(const uint8_t *v, uint32_t len, const struct frp_params *ps, char *buf,
                        size_t cap);
int frp_values_typed(const uint8_t *v, uint32_t len);

/*! frp_value_text() : one item (struct ftr_value) the same way. @return the length */
struct ftr_value;
size_t frp_value_text(const struct ftr_value *x, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_VALUES_H */
