/* zdist checked number parsing. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "zdist/parse.h"

int
zdist_parse_int64(const char *text, int64_t min, int64_t max, int64_t *ret)
{
    if (!text || !*text || isspace((unsigned char) *text))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0')
        return -EINVAL;
    if (errno == ERANGE || v < min || v > max)
        return -ERANGE;
    *ret = (int64_t) v;
    return 0;
}

int
zdist_parse_double(const char *text, double *ret)
{
    if (!text || !*text || isspace((unsigned char) *text))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0')
        return -EINVAL;
    if (errno == ERANGE || !isfinite(v))
        return -ERANGE;
    *ret = v;
    return 0;
}
