/*
 * ftr_values.c - reading the items of a value list (ftr_values.h).
 */
#include "ftr_values.h"

int ftr_values_next(const uint8_t **p, const uint8_t *end, struct ftr_value *v)
{
    const uint8_t *q = *p;
    if (q >= end || *q == 0) return 0;
    if (end - q < 2 || !(*q & 0x80) || (*q & 0x40)) return -1;
    unsigned fmt = *q & 15, size = 1u << (*q >> 4 & 3);
    *v = (struct ftr_value){.fmt = (uint8_t)fmt, .size = (uint8_t)size, .index = q[1]};
    q += 2;
    if (fmt >= FTR_VF__COUNT) return -1;
    if (fmt == FTR_VF_STR) {
        if (end - q < 2 || q[0] > FTR_STR_BAD || (size_t)(end - q - 2) < q[1]) return -1;
        v->str_state = q[0];
        v->str_len = q[1];
        v->str = (const char *)q + 2;
        if (v->str_state >= FTR_STR_NULL && v->str_len) return -1;
        *p = q + 2 + v->str_len;
        return 1;
    }
    if (fmt == FTR_VF_FLOAT && size != 4 && size != 8) return -1;
    if ((size_t)(end - q) < size) return -1;
    for (unsigned i = 0; i < size; i++)
        v->bits |= (uint64_t)q[i] << (8 * i);
    *p = q + size;
    return 1;
}

int64_t ftr_value_signed(const struct ftr_value *v)
{
    unsigned shift = 64 - 8u * v->size;
    return shift >= 64 ? 0 : (int64_t)(v->bits << shift) >> shift;
}
