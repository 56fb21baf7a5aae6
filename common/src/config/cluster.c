/* zdist cluster resolver: parses TF_CONFIG into plain structs, answers like TFConfigClusterResolver. */
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

#include "zdist/cluster.h"
#include "zdist/endpoint.h"
#include "zdist/parse.h"

#define S_ENV_NAME "TF_CONFIG"
#define S_FILE_MAX (1024 * 1024) /* a cluster file is small; refuse /dev/zero */
#define S_JOB_NAME_MAX 64
#define S_RPC_LAYER_MAX 32
#define S_QUOTE_MAX 48 /* user values in messages are cut to this */

typedef struct {
    int index;
    char *address;
} s_task_t;

typedef struct {
    char *name;
    bool sparse;
    size_t ntasks;
    s_task_t *tasks; /* ascending index; index == position unless sparse */
} s_job_t;

struct _zdist_cluster_t {
    char *source;  /* "TF_CONFIG" or "cluster file 'x'", for messages */
    s_job_t *jobs; /* ascending name */
    size_t njobs;
    char *task_type; /* NULL: none */
    int task_id;     /* -1: none */
    char *rpc_layer; /* NULL: none */
    char *session_master;
};

static const char *s_strategy_names[] = {
    [ZDIST_STRATEGY_PARAMETER_SERVER] = "parameter_server",
    [ZDIST_STRATEGY_MULTI_WORKER_MIRRORED] = "multi_worker_mirrored",
    [ZDIST_STRATEGY_MIRRORED] = "mirrored",
    [ZDIST_STRATEGY_CENTRAL_STORAGE] = "central_storage",
    [ZDIST_STRATEGY_ONE_DEVICE] = "one_device",
    [ZDIST_STRATEGY_TPU] = "tpu",
};
#define S_NSTRATEGIES (sizeof s_strategy_names / sizeof s_strategy_names[0])

/* ---- messages ---- */

/* Sets err to "SOURCE: message" (source may be NULL), not about a position. */
__attribute__((format(printf, 4, 5))) static int
s_fail(zdist_error_t *err, const char *source, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    zdist_error_vset(err, code, fmt, ap);
    va_end(ap);
    if (source)
        zdist_error_prefix(err, "%s", source);
    /* One line whatever the input held (values are escaped by Q already;
       this also covers jansson's own texts). */
    for (char *p = err->text; *p; p++)
        if ((unsigned char) *p < 0x20 || *p == 0x7f)
            *p = '?';
    err->line = 0;
    err->column = 0;
    return code;
}

static int
s_oom(zdist_error_t *err, const char *source)
{
    return s_fail(err, source, -ENOMEM, "out of memory");
}

/* A user value for a message: 'text' with quotes, non-printables escaped
   and cut, so a message stays one line of reasonable length. */
typedef struct {
    char s[S_QUOTE_MAX * 4 + 8];
} s_quoted_t;

static s_quoted_t
s_quote(const char *text)
{
    s_quoted_t q;
    size_t o = 0;
    q.s[o++] = '\'';
    size_t limit = strnlen(text, S_QUOTE_MAX + 1);
    if (limit > S_QUOTE_MAX) {
        limit = S_QUOTE_MAX;
        while (limit > 0 && ((unsigned char) text[limit] & 0xc0) == 0x80)
            limit--; /* never cut a UTF-8 sequence */
    }
    size_t i = 0;
    for (; i < limit; i++) {
        unsigned char c = (unsigned char) text[i];
        if (c == '\'' || c == '\\') {
            q.s[o++] = '\\';
            q.s[o++] = (char) c;
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t) snprintf(q.s + o, sizeof q.s - o, "\\x%02x", c);
        } else {
            q.s[o++] = (char) c;
        }
    }
    if (text[i]) {
        memcpy(q.s + o, "...", 3);
        o += 3;
    }
    q.s[o++] = '\'';
    q.s[o] = '\0';
    return q;
}
#define Q(text) (s_quote(text).s)

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
s_task_field(const s_job_t *job, int index)
{
    s_field_t f;
    snprintf(f.s, sizeof f.s, job->sparse ? "cluster.%s[\"%d\"]" : "cluster.%s[%d]", job->name, index);
    return f;
}

/* ---- checks on single values ---- */

static bool
s_all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char) *s))
            return false;
    return true;
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

static bool
s_valid_rpc_layer(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > S_RPC_LAYER_MAX || !isalpha((unsigned char) name[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!isalnum((unsigned char) name[i]) && !strchr("+.-", name[i]))
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

/* ---- building ---- */

static void
s_job_free(s_job_t *job)
{
    for (size_t i = 0; i < job->ntasks; i++)
        free(job->tasks[i].address);
    free(job->tasks);
    free(job->name);
}

void
zdist_cluster_destroy(zdist_cluster_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_cluster_t *self = *self_p;
    for (size_t i = 0; i < self->njobs; i++)
        s_job_free(&self->jobs[i]);
    free(self->jobs);
    free(self->source);
    free(self->task_type);
    free(self->rpc_layer);
    free(self->session_master);
    free(self);
    *self_p = NULL;
}

static zdist_cluster_t *
s_new(const char *source)
{
    zdist_cluster_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->task_id = -1;
    self->source = strdup(source);
    if (!self->source)
        zdist_cluster_destroy(&self);
    return self;
}

static const s_job_t *
s_find_job(const zdist_cluster_t *self, const char *name)
{
    if (!self || !name)
        return NULL;
    size_t lo = 0, hi = self->njobs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(self->jobs[mid].name, name);
        if (c == 0)
            return &self->jobs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static const s_task_t *
s_find_task(const s_job_t *job, int index)
{
    if (!job || index < 0)
        return NULL;
    if (!job->sparse)
        return (size_t) index < job->ntasks ? &job->tasks[index] : NULL;
    size_t lo = 0, hi = job->ntasks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (job->tasks[mid].index == index)
            return &job->tasks[mid];
        if (job->tasks[mid].index < index)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int
s_cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *) a, *(const char *const *) b);
}

static int
s_cmp_task(const void *a, const void *b)
{
    int x = ((const s_task_t *) a)->index, y = ((const s_task_t *) b)->index;
    return (x > y) - (x < y);
}

/* Validates one address and stores a copy in task. */
static int
s_set_task_address(s_job_t *job, s_task_t *task, const json_t *value, const char *source, zdist_error_t *err)
{
    s_field_t field = s_task_field(job, task->index);
    if (!json_is_string(value))
        return s_fail(
            err, source, -EINVAL,
            "%s: an address must be a string \"host:port\", got %s; quote it, e.g. \"localhost:2222\"",
            field.s, s_json_type_name(value));
    const char *addr = json_string_value(value);
    zdist_error_t why = {0};
    if (zdist_endpoint_parse(addr, 0, NULL, &why) < 0)
        return s_fail(err, source, -EINVAL,
                      "%s: %s is not a valid address: %s; write host:port, e.g. \"localhost:2222\" or "
                      "\"[::1]:2222\"",
                      field.s, Q(addr), why.text);
    task->address = strdup(addr);
    return task->address ? 0 : s_oom(err, source);
}

static int
s_parse_job(s_job_t *job, const json_t *value, const char *source, zdist_error_t *err)
{
    if (json_is_array(value)) {
        size_t n = json_array_size(value);
        if (n > (size_t) INT_MAX)
            return s_fail(err, source, -EINVAL, "cluster.%s: too many tasks", job->name);
        job->tasks = calloc(n ? n : 1, sizeof *job->tasks);
        if (!job->tasks)
            return s_oom(err, source);
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
        return s_fail(err, source, -EINVAL,
                      "cluster.%s: a job must be a list of addresses [\"host:port\", ...] or an object "
                      "{\"INDEX\": \"host:port\"}, got %s",
                      job->name, s_json_type_name(value));
    job->sparse = true;
    size_t n = json_object_size(value);
    job->tasks = calloc(n ? n : 1, sizeof *job->tasks);
    if (!job->tasks)
        return s_oom(err, source);
    /* Keys in sorted text order first, so the first error is deterministic. */
    const char **keys = calloc(n ? n : 1, sizeof *keys);
    if (!keys)
        return s_oom(err, source);
    size_t k = 0;
    for (void *it = json_object_iter((json_t *) value); it; it = json_object_iter_next((json_t *) value, it))
        keys[k++] = json_object_iter_key(it);
    qsort(keys, n, sizeof *keys, s_cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        int64_t index;
        if (!s_all_digits(keys[i]) || zdist_parse_int64(keys[i], 0, INT_MAX, &index) != 0) {
            rc = s_fail(err, source, -EINVAL,
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
            return s_fail(err, source, -EINVAL,
                          "cluster.%s: task index %d is given twice (keys with leading zeros); keep one key "
                          "per index",
                          job->name, job->tasks[i].index);
    return 0;
}

typedef struct {
    const char *address;
    const s_job_t *job;
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
        return s_oom(err, self->source);
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
            rc = s_fail(err, self->source, -EINVAL,
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
        return s_fail(err, self->source, -EINVAL,
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
        return s_oom(err, self->source);
    }
    size_t k = 0;
    for (void *it = json_object_iter((json_t *) cluster); it;
         it = json_object_iter_next((json_t *) cluster, it))
        names[k++] = json_object_iter_key(it);
    qsort(names, n, sizeof *names, s_cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!s_valid_job_name(names[i])) {
            rc = s_fail(err, self->source, -EINVAL,
                        "cluster: job name %s is not valid; use 1 to %d letters, digits, '_' or '-', like "
                        "\"worker\"",
                        Q(names[i]), S_JOB_NAME_MAX);
            break;
        }
        s_job_t *job = &self->jobs[i];
        self->njobs = i + 1;
        job->name = strdup(names[i]);
        rc = job->name ? s_parse_job(job, json_object_get(cluster, names[i]), self->source, err)
                       : s_oom(err, self->source);
    }
    free(names);
    return rc < 0 ? rc : s_check_unique_addresses(self, err);
}

static int
s_parse_task(zdist_cluster_t *self, const json_t *task, zdist_error_t *err)
{
    if (!json_is_object(task))
        return s_fail(err, self->source, -EINVAL,
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
            return s_fail(err, self->source, -EINVAL, "task.type: must be a job name like \"worker\", got %s",
                          s_json_type_name(type));
        }
        if (!*text)
            return s_fail(err, self->source, -EINVAL,
                          "task.type: is empty; name the job of this task, like \"worker\"");
        self->task_type = strdup(text);
        if (!self->task_type)
            return s_oom(err, self->source);
    }
    const json_t *index = json_object_get(task, "index");
    if (index) {
        int64_t v = -1;
        if (json_is_integer(index)) {
            v = json_integer_value(index);
            if (v < 0 || v > INT_MAX)
                return s_fail(err, self->source, -EINVAL,
                              "task.index: %" JSON_INTEGER_FORMAT
                              " is out of range; use 0 for the first task "
                              "of the job",
                              json_integer_value(index));
        } else if (json_is_string(index)) {
            const char *text = json_string_value(index);
            if (!s_all_digits(text) || zdist_parse_int64(text, 0, INT_MAX, &v) != 0)
                return s_fail(err, self->source, -EINVAL,
                              "task.index: %s is not a task index; use an integer >= 0 like 0", Q(text));
        } else {
            return s_fail(err, self->source, -EINVAL,
                          "task.index: must be an integer >= 0 like 0 (or a string of digits), got %s",
                          s_json_type_name(index));
        }
        self->task_id = (int) v;
    }
    return 0;
}

/* Lists the job names for a message: "'chief', 'worker'" or "none". */
static void
s_job_list(const zdist_cluster_t *self, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < self->njobs && o + 1 < size; i++) {
        int n = snprintf(buf + o, size - o, "%s'%s'", i ? ", " : "", self->jobs[i].name);
        if (n < 0)
            break;
        o += (size_t) n;
    }
    if (self->njobs == 0)
        snprintf(buf, size, "none, the cluster is empty");
}

/* Lists a job's indices for a message: "0..2" or "0, 2, 5". */
static void
s_index_list(const s_job_t *job, char *buf, size_t size)
{
    if (job->ntasks == 0) {
        snprintf(buf, size, "none");
    } else if (!job->sparse) {
        snprintf(buf, size, "0..%zu", job->ntasks - 1);
    } else {
        size_t o = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < job->ntasks && o + 16 < size; i++) {
            if (i == 8) {
                snprintf(buf + o, size - o, ", ...");
                break;
            }
            o += (size_t) snprintf(buf + o, size - o, "%s%d", i ? ", " : "", job->tasks[i].index);
        }
    }
}

/* The task (type, index) must be in the cluster; an evaluator may be
   outside it. index -1 = not given. what: "task.type"/"task.index" fields
   or the "task 'worker:1'" label of an override. */
static int
s_check_task(const zdist_cluster_t *self, const char *type, int index, const char *type_what,
             const char *index_what, zdist_error_t *err)
{
    if (!type)
        return 0;
    const s_job_t *job = s_find_job(self, type);
    if (!job) {
        if (strcmp(type, "evaluator") == 0)
            return 0;
        char jobs[256];
        s_job_list(self, jobs, sizeof jobs);
        return s_fail(err, self->source, -EINVAL,
                      "%s: %s is not a job of the cluster (jobs: %s); add a %s job to cluster or fix the "
                      "task type",
                      type_what, Q(type), jobs, Q(type));
    }
    if (index < 0 || s_find_task(job, index))
        return 0;
    char indices[128];
    s_index_list(job, indices, sizeof indices);
    return s_fail(err, self->source, -EINVAL,
                  "%s: job '%s' has no task %d (its task indices: %s); use one of those or add the "
                  "address to cluster.%s",
                  index_what, job->name, index, indices, job->name);
}

static int
s_parse_root(zdist_cluster_t *self, const json_t *root, bool check_task, zdist_error_t *err)
{
    if (!json_is_object(root))
        return s_fail(err, self->source, -EINVAL,
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
            return s_fail(err, self->source, -EINVAL, "rpc_layer: must be a string like \"grpc\", got %s",
                          s_json_type_name(v));
        const char *name = json_string_value(v);
        if (*name && !s_valid_rpc_layer(name))
            return s_fail(err, self->source, -EINVAL,
                          "rpc_layer: %s is not a protocol name; use letters, digits, '+', '.', '-', like "
                          "\"grpc\"",
                          Q(name));
        if (*name && !(self->rpc_layer = strdup(name)))
            return s_oom(err, self->source);
    }
    if ((v = json_object_get(root, "session_master")) && !json_is_null(v)) {
        if (!json_is_string(v))
            return s_fail(err, self->source, -EINVAL,
                          "session_master: must be a string like \"grpc://host:port\", got %s",
                          s_json_type_name(v));
        if (!(self->session_master = strdup(json_string_value(v))))
            return s_oom(err, self->source);
    }
    if (check_task)
        return s_check_task(self, self->task_type, self->task_id, "task.type", "task.index", err);
    return 0;
}

static int
s_parse_text(const char *text, size_t len, const char *source, bool check_task, zdist_cluster_t **ret,
             zdist_error_t *err)
{
    zdist_cluster_t *self = s_new(source);
    if (!self)
        return s_oom(err, source);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        int rc = s_fail(err, source, -EINVAL, "invalid JSON at line %d, column %d: %s", jerr.line,
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
        s_fail(err, source, -EINVAL, "no JSON text");
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
        return s_fail(err, source, -e, "cannot open: %s; check the path", strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return s_fail(err, source, -EISDIR, "is a directory; give the path of a JSON file");
    }
    char *text = malloc(S_FILE_MAX + 1);
    if (!text) {
        close(fd);
        return s_oom(err, source);
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
            return s_fail(err, source, -e, "cannot read: %s", strerror(e));
        }
        if (n == 0)
            break;
        len += (size_t) n;
    }
    close(fd);
    if (len > S_FILE_MAX) {
        free(text);
        return s_fail(err, source, -EFBIG, "is larger than %d bytes; a cluster file is a small JSON object",
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
    char source[sizeof(s_quoted_t) + 16];
    snprintf(source, sizeof source, "cluster file %s", Q(cluster_file));
    char *text = NULL;
    size_t len = 0;
    int rc = s_read_file(cluster_file, source, &text, &len, err);
    if (rc < 0)
        return rc;
    if (s_blank(text, len))
        rc =
            s_fail(err, source, -EINVAL, "is empty; write a TF_CONFIG JSON object like {\"cluster\": {...}}");
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

/* ---- getters ---- */

size_t
zdist_cluster_num_jobs(const zdist_cluster_t *self)
{
    return self ? self->njobs : 0;
}

const char *
zdist_cluster_job_name(const zdist_cluster_t *self, size_t i)
{
    return self && i < self->njobs ? self->jobs[i].name : NULL;
}

bool
zdist_cluster_has_job(const zdist_cluster_t *self, const char *job)
{
    return s_find_job(self, job) != NULL;
}

bool
zdist_cluster_job_is_sparse(const zdist_cluster_t *self, const char *job)
{
    const s_job_t *j = s_find_job(self, job);
    return j && j->sparse;
}

size_t
zdist_cluster_num_tasks(const zdist_cluster_t *self, const char *job)
{
    const s_job_t *j = s_find_job(self, job);
    return j ? j->ntasks : 0;
}

int
zdist_cluster_job_task(const zdist_cluster_t *self, const char *job, size_t i, int *ret_index,
                       const char **ret_address)
{
    const s_job_t *j = s_find_job(self, job);
    if (!j || i >= j->ntasks)
        return -ENOENT;
    if (ret_index)
        *ret_index = j->tasks[i].index;
    if (ret_address)
        *ret_address = j->tasks[i].address;
    return 0;
}

const char *
zdist_cluster_task_address(const zdist_cluster_t *self, const char *job, int index)
{
    const s_task_t *t = s_find_task(s_find_job(self, job), index);
    return t ? t->address : NULL;
}

static int s_write(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int
s_write(char *buf, size_t size, const char *fmt, ...)
{
    if (!buf || size == 0)
        return -ENOSPC;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t) n >= size) {
        buf[0] = '\0';
        return -ENOSPC;
    }
    return 0;
}

int
zdist_cluster_endpoint(const zdist_cluster_t *self, const char *job, int index, char *buf, size_t size)
{
    const char *address = zdist_cluster_task_address(self, job, index);
    if (!address) {
        if (buf && size)
            buf[0] = '\0';
        return -ENOENT;
    }
    return s_write(buf, size, "tcp://%s", address);
}

int
zdist_cluster_bind_endpoint(const zdist_cluster_t *self, char *buf, size_t size)
{
    const char *address = self ? zdist_cluster_task_address(self, self->task_type, self->task_id) : NULL;
    zdist_endpoint_t ep;
    if (!address || zdist_endpoint_parse(address, 0, &ep, NULL) < 0) {
        if (buf && size)
            buf[0] = '\0';
        return -ENOENT;
    }
    if (ep.kind == ZDIST_HOST_NAME) {
        bool local = strcasecmp(ep.host, "localhost") == 0;
        ep.kind = local ? ZDIST_HOST_IPV4 : ZDIST_HOST_ANY;
        snprintf(ep.host, sizeof ep.host, "%s", local ? "127.0.0.1" : "*");
    }
    return zdist_endpoint_format(&ep, buf, size);
}

const char *
zdist_cluster_task_type(const zdist_cluster_t *self)
{
    return self ? self->task_type : NULL;
}

int
zdist_cluster_task_id(const zdist_cluster_t *self)
{
    return self ? self->task_id : -1;
}

bool
zdist_cluster_has_task(const zdist_cluster_t *self)
{
    return self && self->task_type && self->task_id >= 0;
}

int
zdist_cluster_set_task(zdist_cluster_t *self, const char *type, int index, zdist_error_t *err)
{
    if (!self || !type || !*type || index < 0)
        return s_fail(err, NULL, -EINVAL, "task: give a task type and an index >= 0, like worker:0");
    char label[sizeof(s_quoted_t) + 32];
    char spec[S_JOB_NAME_MAX + 16];
    snprintf(spec, sizeof spec, "%.*s:%d", S_JOB_NAME_MAX, type, index);
    snprintf(label, sizeof label, "task %s", Q(spec));
    int rc = s_check_task(self, type, index, label, label, err);
    if (rc < 0)
        return rc;
    char *copy = strdup(type);
    if (!copy)
        return s_oom(err, self->source);
    free(self->task_type);
    self->task_type = copy;
    self->task_id = index;
    return 0;
}

int
zdist_cluster_set_task_spec(zdist_cluster_t *self, const char *task_spec, zdist_error_t *err)
{
    const char *colon = task_spec ? strrchr(task_spec, ':') : NULL;
    if (!colon || colon == task_spec)
        return s_fail(err, NULL, -EINVAL, "task %s: write TYPE:INDEX, like worker:0",
                      Q(task_spec ? task_spec : ""));
    int64_t index;
    if (!s_all_digits(colon + 1) || zdist_parse_int64(colon + 1, 0, INT_MAX, &index) != 0)
        return s_fail(err, NULL, -EINVAL,
                      "task %s: the index %s is not an integer >= 0; write TYPE:INDEX, like worker:0",
                      Q(task_spec), Q(colon + 1));
    size_t type_len = (size_t) (colon - task_spec);
    char *type = strndup(task_spec, type_len);
    if (!type)
        return s_oom(err, NULL);
    int rc = zdist_cluster_set_task(self, type, (int) index, err);
    free(type);
    return rc;
}

const char *
zdist_cluster_rpc_layer(const zdist_cluster_t *self)
{
    return self ? self->rpc_layer : NULL;
}

int
zdist_cluster_set_rpc_layer(zdist_cluster_t *self, const char *rpc_layer, zdist_error_t *err)
{
    if (!self)
        return -EINVAL;
    char *copy = NULL;
    if (rpc_layer && *rpc_layer) {
        if (!s_valid_rpc_layer(rpc_layer))
            return s_fail(
                err, NULL, -EINVAL,
                "rpc layer %s is not a protocol name; use letters, digits, '+', '.', '-', like grpc",
                Q(rpc_layer));
        if (!(copy = strdup(rpc_layer)))
            return s_oom(err, NULL);
    }
    free(self->rpc_layer);
    self->rpc_layer = copy;
    return 0;
}

const char *
zdist_cluster_session_master(const zdist_cluster_t *self)
{
    return self ? self->session_master : NULL;
}

char *
zdist_cluster_master(const zdist_cluster_t *self)
{
    if (!self)
        return strdup("");
    if (self->session_master)
        return strdup(self->session_master);
    if (self->njobs == 0 || (self->njobs == 1 && self->jobs[0].ntasks == 1))
        return strdup("");
    const char *address = zdist_cluster_task_address(self, self->task_type, self->task_id);
    if (!address)
        return strdup("");
    if (!self->rpc_layer)
        return strdup(address);
    char *url = NULL;
    if (asprintf(&url, "%s://%s", self->rpc_layer, address) < 0)
        return NULL;
    return url;
}

/* ---- roles ---- */

static bool
s_is(const zdist_cluster_t *self, const char *type)
{
    return self && self->task_type && strcmp(self->task_type, type) == 0;
}

bool
zdist_cluster_is_chief(const zdist_cluster_t *self)
{
    if (!zdist_cluster_has_task(self))
        return false;
    if (s_is(self, "chief") || s_is(self, "evaluator"))
        return true;
    return s_is(self, "worker") && self->task_id == 0 && !s_find_job(self, "chief");
}

int
zdist_cluster_id_in_cluster(const zdist_cluster_t *self)
{
    if (!zdist_cluster_has_task(self))
        return -1;
    if (s_is(self, "chief"))
        return 0;
    if (s_is(self, "worker")) {
        size_t chiefs = zdist_cluster_num_tasks(self, "chief");
        return (int64_t) self->task_id + (int64_t) chiefs > INT_MAX ? -1 : self->task_id + (int) chiefs;
    }
    if (s_is(self, "evaluator"))
        return self->task_id;
    return -1;
}

bool
zdist_cluster_has_id_in_cluster(const zdist_cluster_t *self)
{
    return zdist_cluster_id_in_cluster(self) != -1;
}

int
zdist_cluster_worker_count(const zdist_cluster_t *self)
{
    size_t n = s_is(self, "evaluator")
                   ? zdist_cluster_num_tasks(self, "evaluator")
                   : zdist_cluster_num_tasks(self, "chief") + zdist_cluster_num_tasks(self, "worker");
    return n > INT_MAX ? INT_MAX : (int) n;
}

/* ---- strategies ---- */

const char *
zdist_strategy_name(zdist_strategy_t strategy)
{
    if ((int) strategy < 0 || (size_t) strategy >= S_NSTRATEGIES)
        return NULL;
    return s_strategy_names[strategy];
}

bool
zdist_strategy_syncs_workers(zdist_strategy_t strategy)
{
    return strategy == ZDIST_STRATEGY_MULTI_WORKER_MIRRORED || strategy == ZDIST_STRATEGY_TPU;
}

zdist_strategy_t
zdist_strategy_from_name(const char *name)
{
    if (!name)
        return ZDIST_STRATEGY_INVALID;
    for (size_t i = 0; i < S_NSTRATEGIES; i++)
        if (strcmp(name, s_strategy_names[i]) == 0)
            return (zdist_strategy_t) i;
    return ZDIST_STRATEGY_INVALID;
}

static void
s_strategy_list(char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < S_NSTRATEGIES && o < size; i++)
        o += (size_t) snprintf(buf + o, size - o, "%s%s", i ? ", " : "", s_strategy_names[i]);
}

int
zdist_strategy_parse(const char *name, zdist_strategy_t *ret, zdist_error_t *err)
{
    zdist_strategy_t s = zdist_strategy_from_name(name);
    if (s == ZDIST_STRATEGY_INVALID) {
        char list[128];
        s_strategy_list(list, sizeof list);
        return s_fail(err, NULL, -EINVAL, "unknown strategy %s; use one of %s", Q(name ? name : ""), list);
    }
    *ret = s;
    return 0;
}

int
zdist_cluster_validate(const zdist_cluster_t *self, zdist_strategy_t strategy, zdist_error_t *err)
{
    if (!self)
        return s_fail(err, NULL, -EINVAL, "no cluster");
    const char *sname = zdist_strategy_name(strategy);
    if (!sname) {
        char list[128];
        s_strategy_list(list, sizeof list);
        return s_fail(err, self->source, -EINVAL, "unknown strategy %d; use one of %s", (int) strategy, list);
    }
    if (strategy == ZDIST_STRATEGY_PARAMETER_SERVER) {
        static const char *allowed[] = {"chief", "worker", "ps", "evaluator"};
        for (size_t j = 0; j < self->njobs; j++) {
            bool ok = false;
            for (size_t a = 0; a < sizeof allowed / sizeof allowed[0]; a++)
                ok = ok || strcmp(self->jobs[j].name, allowed[a]) == 0;
            if (!ok) {
                char jobs[256];
                s_job_list(self, jobs, sizeof jobs);
                return s_fail(
                    err, self->source, -EINVAL,
                    "cluster.%s: Disallowed task type found in cluster spec: '%s'. Allowed types are "
                    "'chief', 'worker', 'ps' and 'evaluator' and the cluster spec has jobs %s; "
                    "remove or rename job '%s' for the %s strategy",
                    self->jobs[j].name, self->jobs[j].name, jobs, self->jobs[j].name, sname);
            }
        }
    }
    size_t chiefs = zdist_cluster_num_tasks(self, "chief");
    if (chiefs > 1)
        return s_fail(err, self->source, -EINVAL,
                      "cluster.chief: There must be at most one 'chief' job (it has %zu tasks); keep one "
                      "address there and move the others to \"worker\"",
                      chiefs);
    size_t evaluators = zdist_cluster_num_tasks(self, "evaluator");
    if (evaluators > 1)
        return s_fail(err, self->source, -EINVAL,
                      "cluster.evaluator: There must be at most one 'evaluator' job (it has %zu tasks); keep "
                      "one address there",
                      evaluators);
    if (strategy == ZDIST_STRATEGY_PARAMETER_SERVER && zdist_cluster_num_tasks(self, "ps") < 1)
        return s_fail(err, self->source, -EINVAL,
                      "cluster.ps: There must be at least one ps. Add a \"ps\" job with at least one address "
                      "for the %s strategy",
                      sname);
    if ((strategy == ZDIST_STRATEGY_PARAMETER_SERVER || strategy == ZDIST_STRATEGY_MULTI_WORKER_MIRRORED) &&
        zdist_cluster_num_tasks(self, "worker") < 1)
        return s_fail(err, self->source, -EINVAL,
                      "cluster.worker: There must be at least one worker. Add a \"worker\" job with at least "
                      "one address for the %s strategy",
                      sname);
    return 0;
}

/* ---- output ---- */

static json_t *
s_string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *
s_cluster_json(const zdist_cluster_t *self)
{
    json_t *cluster = json_object();
    for (size_t j = 0; cluster && j < self->njobs; j++) {
        const s_job_t *job = &self->jobs[j];
        json_t *tasks = job->sparse ? json_object() : json_array();
        for (size_t t = 0; tasks && t < job->ntasks; t++) {
            int rc;
            if (job->sparse) {
                char key[16];
                snprintf(key, sizeof key, "%d", job->tasks[t].index);
                rc = json_object_set_new(tasks, key, json_string(job->tasks[t].address));
            } else {
                rc = json_array_append_new(tasks, json_string(job->tasks[t].address));
            }
            if (rc < 0) {
                json_decref(tasks);
                tasks = NULL;
            }
        }
        if (!tasks || json_object_set_new(cluster, job->name, tasks) < 0) {
            json_decref(cluster);
            cluster = NULL;
        }
    }
    return cluster;
}

char *
zdist_cluster_to_json(const zdist_cluster_t *self)
{
    if (!self)
        return NULL;
    char *master = zdist_cluster_master(self);
    if (!master)
        return NULL;
    int id = zdist_cluster_id_in_cluster(self);
    /* jansson (>= 2.8) keeps insertion order, which is the documented order. */
    json_t *root = json_object();
    int rc = root ? 0 : -1;
    rc |= json_object_set_new(root, "task_type", s_string_or_null(self->task_type));
    rc |=
        json_object_set_new(root, "task_id", self->task_id >= 0 ? json_integer(self->task_id) : json_null());
    rc |= json_object_set_new(root, "rpc_layer", s_string_or_null(self->rpc_layer));
    rc |= json_object_set_new(root, "master", json_string(master));
    rc |= json_object_set_new(root, "cluster", s_cluster_json(self));
    rc |= json_object_set_new(root, "is_chief", json_boolean(zdist_cluster_is_chief(self)));
    rc |= json_object_set_new(root, "id_in_cluster", id >= 0 ? json_integer(id) : json_null());
    rc |= json_object_set_new(root, "worker_count", json_integer(zdist_cluster_worker_count(self)));
    free(master);
    char *text = rc == 0 ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    return text;
}
