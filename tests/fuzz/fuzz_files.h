/* Helpers for fuzz targets whose decoder reads files: one private temporary
   directory per process (removed at exit), and a container format that packs
   several named files into one fuzz input:

       <first file's bytes>\n--file NAME\n<bytes>\n--file NAME\n<bytes>...

   The first part gets the caller's default name. NAME must be a plain file
   name ([A-Za-z0-9._%-], not starting with '.', at most 200 bytes); parts
   with another name are dropped. Header-only: each target is one .c file. */
#ifndef ZDIST_FUZZ_FILES_H
#define ZDIST_FUZZ_FILES_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FZ_SEP "\n--file "
#define FZ_MAX_PARTS 16

static char fz_dir_path[256];

static __attribute__((unused)) void
fz_clear(void)
{
    if (!fz_dir_path[0])
        return;
    DIR *d = opendir(fz_dir_path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", fz_dir_path, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
}

static __attribute__((unused)) void
fz_remove_dir(void)
{
    fz_clear();
    if (fz_dir_path[0])
        rmdir(fz_dir_path);
}

/* The directory, created on first use; aborts when it cannot be. */
static __attribute__((unused)) const char *
fz_dir(void)
{
    if (!fz_dir_path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(fz_dir_path, sizeof fz_dir_path, "%s/zdist-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(fz_dir_path))
            abort();
        atexit(fz_remove_dir);
    }
    return fz_dir_path;
}

/* Writes name in the directory; fills path (size >= 512). 0, or -1. */
static __attribute__((unused)) int
fz_write(const char *name, const void *data, size_t len, char *path)
{
    snprintf(path, 512, "%s/%s", fz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = len ? fwrite(data, 1, len, f) : 0;
    int rc = fclose(f);
    return put == len && rc == 0 ? 0 : -1;
}

static __attribute__((unused)) int
fz_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 200 || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-' || c == '%'))
            return 0;
    }
    return 1;
}

/* Empties the directory, then writes the parts of the input (the first
   under first_name). Returns the number of files written. */
static __attribute__((unused)) int
fz_unpack(const uint8_t *data, size_t size, const char *first_name)
{
    fz_clear();
    const char *p = (const char *) data, *end = p + size;
    const size_t seplen = sizeof FZ_SEP - 1;
    char name[256], path[512];
    snprintf(name, sizeof name, "%s", first_name);
    int parts = 0, written = 0;
    int named = 1;
    while (parts < FZ_MAX_PARTS) {
        const char *next = NULL;
        for (const char *q = p; q + seplen <= end; q++)
            if (memcmp(q, FZ_SEP, seplen) == 0) {
                next = q;
                break;
            }
        const char *stop = next ? next : end;
        if (named && fz_write(name, p, (size_t) (stop - p), path) == 0)
            written++;
        parts++;
        if (!next)
            break;
        const char *n0 = next + seplen, *nl = memchr(n0, '\n', (size_t) (end - n0));
        if (!nl)
            break;
        named = fz_name_ok(n0, (size_t) (nl - n0));
        if (named)
            snprintf(name, sizeof name, "%.*s", (int) (nl - n0), n0);
        p = nl + 1;
    }
    return written;
}

/* With ZDIST_FUZZ_VERBOSE set (replaying a corpus by hand), says what the
   decoder made of the input: "ok", or its refusal. */
static __attribute__((unused)) void
fz_report(int rc, const char *why)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("ZDIST_FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "%s\n", rc == 0 ? "ok" : why);
}

#endif
