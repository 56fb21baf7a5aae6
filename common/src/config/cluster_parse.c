/* zdist cluster resolver: reads TF_CONFIG or a cluster file, strictly, into the cluster's structs. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster_private.h"
#include "zdist/endpoint.h"
#include "zdist/parse.h"

#define S_ENV_NAME "TF_CONFIG"
#define S_FILE_MAX (1024 * 1024) /* a cluster file is small; refuse /dev/zero */

static const char *
s_json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "a list";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number with a fraction";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "something else";
}

/* "cluster.worker[1]" or, for a sparse job, "cluster.ps[\"1\"]". */
typedef struct {
    char s[S_JOB_NAME_MAX + 40];
} s_field_t;

static s_field_t
s_task_field(const cluster_job_t *job, int index)
{
    s_field_t f;
    snprintf(f.s, sizeof f.s, job->sparse ? "cluster.%s[\"%d\"]" : "cluster.%s[%d]", job->name, index);
    return f;
}

static bool
s_valid_job_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > S_JOB_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char) name[i]) && name[i] != '_' && name[i] != '-')
            return false;
    return true;
}

/* Python's str() of a float: shortest round-trip digits, fixed notation
   for exponents -4..15 and scientific otherwise, always a '.' or 'e'. */
static void
s_python_float_str(double v, char *buf, size_t size)
{
    if (isnan(v)) {
        snprintf(buf, size, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v < 0 ? "-inf" : "inf");
        return;
    }
    char sci[40];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(sci, sizeof sci, "%.*e", p - 1, v);
        if (strtod(sci, NULL) == v)
            break;
    }
    snprintf(sci, sizeof sci, "%.*e", p - 1, v);
    const char *e = strchr(sci, 'e');
    int exp10 = e ? (int) strtol(e + 1, NULL, 10) : 0; /* our own snprintf output */
    if (exp10 >= -4 && exp10 < 16) {
        int decimals = p - 1 - exp10;
        snprintf(buf, size, "%.*f", decimals > 0 ? decimals : 0, v);
        if (!strchr(buf, '.'))
            strncat(buf, ".0", size - strlen(buf) - 1);
    } else {
        snprintf(buf, size, "%s", sci);
    }
}

static int
s_cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *) a, *(const char *const *) b);
}

static int
s_cmp_task(const void *a, const void *b)
{
    int x = ((const cluster_task_t *) a)->index, y = ((const cluster_task_t *) b)->index;
    return (x > y) - (x < y);
}

/* Validates one address and stores a copy in task. */
static int
s_set_task_address(cluster_job_t *job, cluster_task_t *task, const json_t *value, const char *source, zdist_error_t *err)
{
    s_field_t field = s_task_field(job, task->index);
    if (!json_is_string(value))
        return zdist_cluster_fail_(
            err, source, -EINVAL,
            "%s: an address must be a string \"host:port\", got %s; quote it, e.g. \"localhost:2222\"",
            field.s, s_json_type_name(value));
    const char *addr = json_string_value(value);
    zdist_error_t why = {0};
    if (zdist_endpoint_parse(addr, 0, NULL, &why) < 0)
        return zdist_cluster_fail_(err, source, -EINVAL,
                      "%s: %s is not a valid address: %s; write host:port, e.g. \"localhost:2222\" or "
                      "\"[::1]:2222\"",
                      field.s, Q(addr), why.text);
    task->address = strdup(addr);
    return task->address ? 0 : zdist_cluster_oom_(err, source);
}

static int
s_parse_job(cluster_job_t *job, const json_t *value, const char *source, zdist_error_t *err)
{
    if (json_is_array(value)) {
        size_t n = json_array_size(value);
        if (n > (size_t) INT_MAX)
            return zdist_cluster_fail_(err, source, -EINVAL, "cluster.%s: too many tasks", job->name);
        job->tasks = calloc(n ? n : 1, sizeof *job->tasks);
        if (!job->tasks)
            return zdist_cluster_oom_(err, source);
        for (size_t i = 0; i < n; i++) {
            job->tasks[i].index = (int) i;
            job->ntasks = i + 1;
            int rc = s_set_task_address(job, &job->tasks[i], json_array_get(value, i), source, err);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    if (!json_is_object(value))
        return zdist_cluster_fail_(err, source, -EINVAL,
                      "cluster.%s: a job must be a list of addresses [\"host:port\", ...] or an object "
                      "{\"INDEX\": \"host:port\"}, got %s",
                      job->name, s_json_type_name(value));
    job->sparse = true;
    size_t n = json_object_size(value);
    job->tasks = calloc(n ? n : 1, sizeof *job->tasks);
    if (!job->tasks)
        return zdist_cluster_oom_(err, source);
    /* Keys in sorted text order first, so the first error is deterministic. */
    const char **keys = calloc(n ? n : 1, sizeof *keys);
    if (!keys)
        return zdist_cluster_oom_(err, source);
    size_t k = 0;
    for (void *it = json_object_iter((json_t *) value); it; it = json_object_iter_next((json_t *) value, it))
        keys[k++] = json_object_iter_key(it);
    qsort(keys, n, sizeof *keys, s_cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        int64_t index;
        if (!zdist_cluster_all_digits_(keys[i]) || zdist_parse_int64(keys[i], 0, INT_MAX, &index) != 0) {
            rc = zdist_cluster_fail_(err, source, -EINVAL,
                        "cluster.%s: key %s is not a task index; a sparse job maps index strings like \"0\" "
                        "to addresses",
                        job->name, Q(keys[i]));
            break;
        }
        job->tasks[i].index = (int) index;
        job->ntasks = i + 1;
        rc = s_set_task_address(job, &job->tasks[i], json_object_get(value, keys[i]), source, err);
    }
    free(keys);
    if (rc < 0)
        return rc;
    qsort(job->tasks, job->ntasks, sizeof *job->tasks, s_cmp_task);
    for (size_t i = 1; i < job->ntasks; i++)
        if (job->tasks[i].index == job->tasks[i - 1].index)
            return zdist_cluster_fail_(err, source, -EINVAL,
                          "cluster.%s: task index %d is given twice (keys with leading zeros); keep one key "
                          "per index",
                          job->name, job->tasks[i].index);
    return 0;
}

typedef struct {
    const char *address;
    const cluster_job_t *job;
    size_t pos;
} s_addr_ref_t;

static int
s_cmp_addr_ref(const void *a, const void *b)
{
    const s_addr_ref_t *x = a, *y = b;
    int c = strcasecmp(x->address, y->address);
    if (c)
        return c;
    if (x->job != y->job)
        return x->job < y->job ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int
s_check_unique_addresses(const zdist_cluster_t *self, zdist_error_t *err)
{
    size_t total = 0;
    for (size_t j = 0; j < self->njobs; j++)
        total += self->jobs[j].ntasks;
    if (total < 2)
        return 0;
    s_addr_ref_t *refs = calloc(total, sizeof *refs);
    if (!refs)
        return zdist_cluster_oom_(err, self->source);
    size_t r = 0;
    for (size_t j = 0; j < self->njobs; j++)
        for (size_t t = 0; t < self->jobs[j].ntasks; t++)
            refs[r++] = (s_addr_ref_t){self->jobs[j].tasks[t].address, &self->jobs[j], t};
    qsort(refs, total, sizeof *refs, s_cmp_addr_ref);
    int rc = 0;
    for (size_t i = 1; i < total; i++) {
        if (strcasecmp(refs[i].address, refs[i - 1].address) == 0) {
            s_field_t first = s_task_field(refs[i - 1].job, refs[i - 1].job->tasks[refs[i - 1].pos].index);
            s_field_t again = s_task_field(refs[i].job, refs[i].job->tasks[refs[i].pos].index);
            rc = zdist_cluster_fail_(err, self->source, -EINVAL,
                        "%s: address %s is already used by %s; give every task its own host:port", again.s,
                        Q(refs[i].address), first.s);
            break;
        }
    }
    free(refs);
    return rc;
}

static int
s_parse_cluster(zdist_cluster_t *self, const json_t *cluster, zdist_error_t *err)
{
    if (!json_is_object(cluster))
        return zdist_cluster_fail_(err, self->source, -EINVAL,
                      "cluster: must be an object mapping job names to lists of addresses, like "
                      "{\"worker\": [\"host:port\"]}, got %s",
                      s_json_type_name(cluster));
    size_t n = json_object_size(cluster);
    if (n == 0)
        return 0;
    const char **names = calloc(n, sizeof *names);
    self->jobs = calloc(n, sizeof *self->jobs);
    if (!names || !self->jobs) {
        free(names);
        return zdist_cluster_oom_(err, self->source);
    }
    size_t k = 0;
    for (void *it = json_object_iter((json_t *) cluster); it;
         it = json_object_iter_next((json_t *) cluster, it))
        names[k++] = json_object_iter_key(it);
    qsort(names, n, sizeof *names, s_cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!s_valid_job_name(names[i])) {
            rc = zdist_cluster_fail_(err, self->source, -EINVAL,
                        "cluster: job name %s is not valid; use 1 to %d letters, digits, '_' or '-', like "
                        "\"worker\"",
                        Q(names[i]), S_JOB_NAME_MAX);
            break;
        }
        cluster_job_t *job = &self->jobs[i];
        self->njobs = i + 1;
        job->name = strdup(names[i]);
        rc = job->name ? s_parse_job(job, json_object_get(cluster, names[i]), self->source, err)
                       : zdist_cluster_oom_(err, self->source);
    }
    free(names);
    return rc < 0 ? rc : s_check_unique_addresses(self, err);
}

static int
s_parse_task(zdist_cluster_t *self, const json_t *task, zdist_error_t *err)
{
    if (!json_is_object(task))
        return zdist_cluster_fail_(err, self->source, -EINVAL,
                      "task: must be an object like {\"type\": \"worker\", \"index\": 0}, got %s",
                      s_json_type_name(task));
    const json_t *type = json_object_get(task, "type");
    if (type) {
        char buf[64];
        const char *text;
        if (json_is_string(type)) {
            text = json_string_value(type);
        } else if (json_is_integer(type)) {
            snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(type));
            text = buf;
        } else if (json_is_real(type)) {
            s_python_float_str(json_real_value(type), buf, sizeof buf);
            text = buf;
        } else {
            return zdist_cluster_fail_(err, self->source, -EINVAL, "task.type: must be a job name like \"worker\", got %s",
                          s_json_type_name(type));
        }
        if (!*text)
            return zdist_cluster_fail_(err, self->source, -EINVAL,
                          "task.type: is empty; name the job of this task, like \"worker\"");
        self->task_type = strdup(text);
        if (!self->task_type)
            return zdist_cluster_oom_(err, self->source);
    }
    const json_t *index = json_object_get(task, "index");
    if (index) {
        int64_t v = -1;
        if (json_is_integer(index)) {
            v = json_integer_value(index);
            if (v < 0 || v > INT_MAX)
                return zdist_cluster_fail_(err, self->source, -EINVAL,
                              "task.index: %" JSON_INTEGER_FORMAT
                              " is out of range; use 0 for the first task "
                              "of the job",
                              json_integer_value(index));
        } else if (json_is_string(index)) {
            const char *text = json_string_value(index);
            if (!zdist_cluster_all_digits_(text) || zdist_parse_int64(text, 0, INT_MAX, &v) != 0)
                return zdist_cluster_fail_(err, self->source, -EINVAL,
                              "task.index: %s is not a task index; use an integer >= 0 like 0", Q(text));
        } else {
            return zdist_cluster_fail_(err, self->source, -EINVAL,
                          "task.index: must be an integer >= 0 like 0 (or a string of digits), got %s",
                          s_json_type_name(index));
        }
        self->task_id = (int) v;
    }
    return 0;
}

static int
s_parse_root(zdist_cluster_t *self, const json_t *root, bool check_task, zdist_error_t *err)
{
    if (!json_is_object(root))
        return zdist_cluster_fail_(err, self->source, -EINVAL,
                      "the top level must be an object like {\"cluster\": {...}, \"task\": {...}}, got %s",
                      s_json_type_name(root));
    const json_t *v;
    int rc;
    if ((v = json_object_get(root, "cluster")) && (rc = s_parse_cluster(self, v, err)) < 0)
        return rc;
    if ((v = json_object_get(root, "task")) && (rc = s_parse_task(self, v, err)) < 0)
        return rc;
    if ((v = json_object_get(root, "rpc_layer")) && !json_is_null(v)) {
        if (!json_is_string(v))
            return zdist_cluster_fail_(err, self->source, -EINVAL, "rpc_layer: must be a string like \"grpc\", got %s",
                          s_json_type_name(v));
        const char *name = json_string_value(v);
        if (*name && !zdist_cluster_valid_rpc_layer_(name))
            return zdist_cluster_fail_(err, self->source, -EINVAL,
                          "rpc_layer: %s is not a protocol name; use letters, digits, '+', '.', '-', like "
                          "\"grpc\"",
                          Q(name));
        if (*name && !(self->rpc_layer = strdup(name)))
            return zdist_cluster_oom_(err, self->source);
    }
    if ((v = json_object_get(root, "session_master")) && !json_is_null(v)) {
        if (!json_is_string(v))
            return zdist_cluster_fail_(err, self->source, -EINVAL,
                          "session_master: must be a string like \"grpc://host:port\", got %s",
                          s_json_type_name(v));
        if (!(self->session_master = strdup(json_string_value(v))))
            return zdist_cluster_oom_(err, self->source);
    }
    if (check_task)
        return zdist_cluster_check_task_(self, self->task_type, self->task_id, "task.type", "task.index", err);
    return 0;
}

static int
s_parse_text(const char *text, size_t len, const char *source, bool check_task, zdist_cluster_t **ret,
             zdist_error_t *err)
{
    zdist_cluster_t *self = zdist_cluster_new_(source);
    if (!self)
        return zdist_cluster_oom_(err, source);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        int rc = zdist_cluster_fail_(err, source, -EINVAL, "invalid JSON at line %d, column %d: %s", jerr.line,
                        jerr.column, jerr.text);
        if (err) {
            err->line = jerr.line;
            err->column = jerr.column;
        }
        zdist_cluster_destroy(&self);
        return rc;
    }
    int rc = s_parse_root(self, root, check_task, err);
    json_decref(root);
    if (rc < 0) {
        zdist_cluster_destroy(&self);
        return rc;
    }
    *ret = self;
    return 0;
}

zdist_cluster_t *
zdist_cluster_parse(const char *json_text, const char *source_name, zdist_error_t *err)
{
    const char *source = source_name ? source_name : S_ENV_NAME;
    if (!json_text) {
        zdist_cluster_fail_(err, source, -EINVAL, "no JSON text");
        return NULL;
    }
    zdist_cluster_t *self = NULL;
    s_parse_text(json_text, strlen(json_text), source, true, &self, err);
    return self;
}

static bool
s_blank(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!isspace((unsigned char) text[i]))
            return false;
    return true;
}

static int
s_read_file(const char *path, const char *source, char **ret_text, size_t *ret_len, zdist_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return zdist_cluster_fail_(err, source, -e, "cannot open: %s; check the path", strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return zdist_cluster_fail_(err, source, -EISDIR, "is a directory; give the path of a JSON file");
    }
    char *text = malloc(S_FILE_MAX + 1);
    if (!text) {
        close(fd);
        return zdist_cluster_oom_(err, source);
    }
    size_t len = 0;
    while (len <= S_FILE_MAX) {
        ssize_t n = read(fd, text + len, S_FILE_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(text);
            close(fd);
            return zdist_cluster_fail_(err, source, -e, "cannot read: %s", strerror(e));
        }
        if (n == 0)
            break;
        len += (size_t) n;
    }
    close(fd);
    if (len > S_FILE_MAX) {
        free(text);
        return zdist_cluster_fail_(err, source, -EFBIG, "is larger than %d bytes; a cluster file is a small JSON object",
                      S_FILE_MAX);
    }
    *ret_text = text;
    *ret_len = len;
    return 0;
}

static int
s_load_source(const char *cluster_file, bool check_task, zdist_cluster_t **ret, zdist_error_t *err)
{
    if (!cluster_file) {
        const char *env = getenv(S_ENV_NAME);
        if (!env || s_blank(env, strlen(env)))
            env = "{}";
        return s_parse_text(env, strlen(env), S_ENV_NAME, check_task, ret, err);
    }
    /* "cluster file 'PATH'" with the path quoted like any user value. */
    char source[sizeof(zdist_cluster_quoted_t) + 16];
    snprintf(source, sizeof source, "cluster file %s", Q(cluster_file));
    char *text = NULL;
    size_t len = 0;
    int rc = s_read_file(cluster_file, source, &text, &len, err);
    if (rc < 0)
        return rc;
    if (s_blank(text, len))
        rc =
            zdist_cluster_fail_(err, source, -EINVAL, "is empty; write a TF_CONFIG JSON object like {\"cluster\": {...}}");
    else
        rc = s_parse_text(text, len, source, check_task, ret, err);
    free(text);
    return rc;
}

zdist_cluster_t *
zdist_cluster_from_env_or_file(const char *cluster_file, zdist_error_t *err)
{
    zdist_cluster_t *self = NULL;
    s_load_source(cluster_file, true, &self, err);
    return self;
}

int
zdist_cluster_load(const char *cluster_file, const char *task_spec, zdist_cluster_t **ret, zdist_error_t *err)
{
    zdist_cluster_t *self = NULL;
    int rc = s_load_source(cluster_file, task_spec == NULL, &self, err);
    if (rc < 0)
        return rc;
    if (task_spec && (rc = zdist_cluster_set_task_spec(self, task_spec, err)) < 0) {
        zdist_cluster_destroy(&self);
        return rc;
    }
    *ret = self;
    return 0;
}
