/* zdist error reporting: status table, errno mapping, error messages. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "zdist/error.h"

const char *
zdist_status_name(int status)
{
    switch (status) {
#define ZDIST_X_(name, value, err) \
    case value:                    \
        return #name;
        ZDIST_STATUS_TABLE(ZDIST_X_)
#undef ZDIST_X_
    }
    return "UNKNOWN_STATUS";
}

int
zdist_status_from_errno(int neg_errno)
{
    int e = neg_errno < 0 ? -neg_errno : neg_errno;
    if (e == 0)
        return ZDIST_STATUS_OK;
    switch (e) {
    case EPROTO:
    case EOVERFLOW:
    case E2BIG:
    case EDOM:
        return ZDIST_STATUS_INVALID_ARGUMENT;
    case ENOMEM:
    case EMSGSIZE:
        return ZDIST_STATUS_RESOURCE_EXHAUSTED;
    case EHOSTUNREACH:
    case ECONNREFUSED:
    case ECONNRESET:
        return ZDIST_STATUS_UNAVAILABLE;
    default:
        break;
    }
#define ZDIST_X_(name, value, err) \
    if (e == (err))                \
        return value;
    ZDIST_STATUS_TABLE(ZDIST_X_)
#undef ZDIST_X_
    return ZDIST_STATUS_UNKNOWN;
}

int
zdist_status_to_errno(int status)
{
    switch (status) {
#define ZDIST_X_(name, value, err) \
    case value:                    \
        return -(err);
        ZDIST_STATUS_TABLE(ZDIST_X_)
#undef ZDIST_X_
    }
    return -EIO;
}

int
zdist_error_vset(zdist_error_t *err, int code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        vsnprintf(err->text, sizeof err->text, fmt, ap);
    }
    return code;
}

int
zdist_error_set(zdist_error_t *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    zdist_error_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void
zdist_error_prefix(zdist_error_t *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[ZDIST_ERROR_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* Built by hand: a "%s: %s" snprintf into a buffer of the same size
       trips -Wformat-truncation, and cutting the tail is intended. */
    char joined[ZDIST_ERROR_TEXT_MAX];
    size_t plen = strnlen(prefix, sizeof joined - 3);
    memcpy(joined, prefix, plen);
    memcpy(joined + plen, ": ", 2);
    size_t room = sizeof joined - plen - 3;
    size_t tlen = strnlen(err->text, room);
    memcpy(joined + plen + 2, err->text, tlen);
    joined[plen + 2 + tlen] = '\0';
    memcpy(err->text, joined, sizeof joined);
}

void
zdist_error_clear(zdist_error_t *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}
