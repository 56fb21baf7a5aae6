/* zdist cluster resolver: the cluster as plain structs, answering like TFConfigClusterResolver (parsing: cluster_parse.c). */
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
int
zdist_cluster_fail_(zdist_error_t *err, const char *source, int code, const char *fmt, ...)
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

int
zdist_cluster_oom_(zdist_error_t *err, const char *source)
{
    return zdist_cluster_fail_(err, source, -ENOMEM, "out of memory");
}


zdist_cluster_quoted_t
zdist_cluster_quote_(const char *text)
{
    zdist_cluster_quoted_t q;
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

/* ---- checks on single values ---- */

bool
zdist_cluster_all_digits_(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char) *s))
            return false;
    return true;
}

bool
zdist_cluster_valid_rpc_layer_(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > S_RPC_LAYER_MAX || !isalpha((unsigned char) name[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!isalnum((unsigned char) name[i]) && !strchr("+.-", name[i]))
            return false;
    return true;
}

/* ---- building ---- */

static void
s_job_free(cluster_job_t *job)
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

zdist_cluster_t *
zdist_cluster_new_(const char *source)
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

static const cluster_job_t *
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

static const cluster_task_t *
s_find_task(const cluster_job_t *job, int index)
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
s_index_list(const cluster_job_t *job, char *buf, size_t size)
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
int
zdist_cluster_check_task_(const zdist_cluster_t *self, const char *type, int index, const char *type_what,
             const char *index_what, zdist_error_t *err)
{
    if (!type)
        return 0;
    const cluster_job_t *job = s_find_job(self, type);
    if (!job) {
        if (strcmp(type, "evaluator") == 0)
            return 0;
        char jobs[256];
        s_job_list(self, jobs, sizeof jobs);
        return zdist_cluster_fail_(err, self->source, -EINVAL,
                      "%s: %s is not a job of the cluster (jobs: %s); add a %s job to cluster or fix the "
                      "task type",
                      type_what, Q(type), jobs, Q(type));
    }
    if (index < 0 || s_find_task(job, index))
        return 0;
    char indices[128];
    s_index_list(job, indices, sizeof indices);
    return zdist_cluster_fail_(err, self->source, -EINVAL,
                  "%s: job '%s' has no task %d (its task indices: %s); use one of those or add the "
                  "address to cluster.%s",
                  index_what, job->name, index, indices, job->name);
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
    const cluster_job_t *j = s_find_job(self, job);
    return j && j->sparse;
}

size_t
zdist_cluster_num_tasks(const zdist_cluster_t *self, const char *job)
{
    const cluster_job_t *j = s_find_job(self, job);
    return j ? j->ntasks : 0;
}

int
zdist_cluster_job_task(const zdist_cluster_t *self, const char *job, size_t i, int *ret_index,
                       const char **ret_address)
{
    const cluster_job_t *j = s_find_job(self, job);
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
    const cluster_task_t *t = s_find_task(s_find_job(self, job), index);
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
        return zdist_cluster_fail_(err, NULL, -EINVAL, "task: give a task type and an index >= 0, like worker:0");
    char label[sizeof(zdist_cluster_quoted_t) + 32];
    char spec[S_JOB_NAME_MAX + 16];
    snprintf(spec, sizeof spec, "%.*s:%d", S_JOB_NAME_MAX, type, index);
    snprintf(label, sizeof label, "task %s", Q(spec));
    int rc = zdist_cluster_check_task_(self, type, index, label, label, err);
    if (rc < 0)
        return rc;
    char *copy = strdup(type);
    if (!copy)
        return zdist_cluster_oom_(err, self->source);
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
        return zdist_cluster_fail_(err, NULL, -EINVAL, "task %s: write TYPE:INDEX, like worker:0",
                      Q(task_spec ? task_spec : ""));
    int64_t index;
    if (!zdist_cluster_all_digits_(colon + 1) || zdist_parse_int64(colon + 1, 0, INT_MAX, &index) != 0)
        return zdist_cluster_fail_(err, NULL, -EINVAL,
                      "task %s: the index %s is not an integer >= 0; write TYPE:INDEX, like worker:0",
                      Q(task_spec), Q(colon + 1));
    size_t type_len = (size_t) (colon - task_spec);
    char *type = strndup(task_spec, type_len);
    if (!type)
        return zdist_cluster_oom_(err, NULL);
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
        if (!zdist_cluster_valid_rpc_layer_(rpc_layer))
            return zdist_cluster_fail_(
                err, NULL, -EINVAL,
                "rpc layer %s is not a protocol name; use letters, digits, '+', '.', '-', like grpc",
                Q(rpc_layer));
        if (!(copy = strdup(rpc_layer)))
            return zdist_cluster_oom_(err, NULL);
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
        return zdist_cluster_fail_(err, NULL, -EINVAL, "unknown strategy %s; use one of %s", Q(name ? name : ""), list);
    }
    *ret = s;
    return 0;
}

int
zdist_cluster_validate(const zdist_cluster_t *self, zdist_strategy_t strategy, zdist_error_t *err)
{
    if (!self)
        return zdist_cluster_fail_(err, NULL, -EINVAL, "no cluster");
    const char *sname = zdist_strategy_name(strategy);
    if (!sname) {
        char list[128];
        s_strategy_list(list, sizeof list);
        return zdist_cluster_fail_(err, self->source, -EINVAL, "unknown strategy %d; use one of %s", (int) strategy, list);
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
                return zdist_cluster_fail_(
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
        return zdist_cluster_fail_(err, self->source, -EINVAL,
                      "cluster.chief: There must be at most one 'chief' job (it has %zu tasks); keep one "
                      "address there and move the others to \"worker\"",
                      chiefs);
    size_t evaluators = zdist_cluster_num_tasks(self, "evaluator");
    if (evaluators > 1)
        return zdist_cluster_fail_(err, self->source, -EINVAL,
                      "cluster.evaluator: There must be at most one 'evaluator' job (it has %zu tasks); keep "
                      "one address there",
                      evaluators);
    if (strategy == ZDIST_STRATEGY_PARAMETER_SERVER && zdist_cluster_num_tasks(self, "ps") < 1)
        return zdist_cluster_fail_(err, self->source, -EINVAL,
                      "cluster.ps: There must be at least one ps. Add a \"ps\" job with at least one address "
                      "for the %s strategy",
                      sname);
    if ((strategy == ZDIST_STRATEGY_PARAMETER_SERVER || strategy == ZDIST_STRATEGY_MULTI_WORKER_MIRRORED) &&
        zdist_cluster_num_tasks(self, "worker") < 1)
        return zdist_cluster_fail_(err, self->source, -EINVAL,
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
        const cluster_job_t *job = &self->jobs[j];
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
