/* worker_registry: models by name — the built-ins, and plugins loaded with dlopen from a plugin path. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models/models.h"
#include "worker_registry.h"

static const zdist_model_t *const s_builtins[] = {
    &worker_model_linear_regression,
    &worker_model_softmax_regression,
    &worker_model_mlp,
    &worker_model_sparse_logreg,
    &worker_model_sequential,
    &worker_model_functional,
    NULL,
};

typedef struct {
    char *file;
    void *handle;
    const zdist_step_plugin_t *plugin;
} s_plugin_t;

struct worker_registry_t {
    char *path;
    char *where;
    bool scanned;
    s_plugin_t *plugins;
    int nplugins, cap;
    /* The first problem met while scanning, reported if the model is not found. */
    zdist_error_t scan_err;
};

worker_registry_t *
worker_registry_new(const char *plugin_path, const char *where)
{
    worker_registry_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->path = strdup(plugin_path ? plugin_path : "");
    self->where = strdup(where ? where : "the job's plugin_path and ZDIST_PLUGIN_PATH");
    if (!self->path || !self->where) {
        free(self->path);
        free(self->where);
        free(self);
        return NULL;
    }
    return self;
}

void
worker_registry_destroy(worker_registry_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    worker_registry_t *self = *self_p;
    for (int i = 0; i < self->nplugins; i++) {
        dlclose(self->plugins[i].handle);
        free(self->plugins[i].file);
    }
    free(self->plugins);
    free(self->path);
    free(self->where);
    free(self);
    *self_p = NULL;
}

static const zdist_model_t *
s_lookup(worker_registry_t *self, const char *name, const char **ret_file)
{
    for (int i = 0; s_builtins[i]; i++)
        if (strcmp(s_builtins[i]->name, name) == 0) {
            *ret_file = "(built-in)";
            return s_builtins[i];
        }
    for (int p = 0; p < self->nplugins; p++)
        for (int m = 0; m < self->plugins[p].plugin->num_models; m++)
            if (strcmp(self->plugins[p].plugin->models[m]->name, name) == 0) {
                *ret_file = self->plugins[p].file;
                return self->plugins[p].plugin->models[m];
            }
    return NULL;
}

int
worker_registry_load(worker_registry_t *self, const char *file, zdist_error_t *err)
{
    for (int i = 0; i < self->nplugins; i++)
        if (strcmp(self->plugins[i].file, file) == 0)
            return 0;
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return zdist_error_set(err, -ENOENT, "plugin '%s' cannot be loaded: %s", file, why ? why : "dlopen failed");
    }
    const zdist_step_plugin_t *pl = dlsym(h, ZDIST_STEP_PLUGIN_SYMBOL);
    int rc = 0;
    if (!pl) {
        rc = zdist_error_set(err, -ENOEXEC, "'%s' is not a zdist plugin: it does not export '%s'", file,
                             ZDIST_STEP_PLUGIN_SYMBOL);
        goto fail;
    }
    if (pl->abi_version != ZDIST_STEP_ABI_VERSION) {
        rc = zdist_error_set(err, -EPROTO,
                             "plugin '%s' was built for step ABI version %u, this zdist has version %d: rebuild "
                             "it against this zdist's zdist/step.h", file, pl->abi_version, ZDIST_STEP_ABI_VERSION);
        goto fail;
    }
    if (pl->num_models < 1 || pl->num_models > 1024 || !pl->models) {
        rc = zdist_error_set(err, -EINVAL, "plugin '%s' declares %d models: it needs 1..1024", file, pl->num_models);
        goto fail;
    }
    for (int m = 0; m < pl->num_models; m++) {
        const zdist_model_t *model = pl->models[m];
        if (!model || !model->name || !*model->name || !model->build || !model->train_step || !model->eval_step) {
            rc = zdist_error_set(err, -EINVAL,
                                 "plugin '%s': model %d needs a name and build, train_step and eval_step hooks",
                                 file, m);
            goto fail;
        }
        const char *other;
        if (s_lookup(self, model->name, &other)) {
            rc = zdist_error_set(err, -EEXIST, "plugin '%s': model '%s' is already defined by %s", file,
                                 model->name, other);
            goto fail;
        }
    }
    if (self->nplugins == self->cap) {
        int cap = self->cap ? self->cap * 2 : 4;
        s_plugin_t *np = realloc(self->plugins, (size_t)cap * sizeof *np);
        if (!np) {
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
            goto fail;
        }
        self->plugins = np;
        self->cap = cap;
    }
    char *copy = strdup(file);
    if (!copy) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    self->plugins[self->nplugins++] = (s_plugin_t){.file = copy, .handle = h, .plugin = pl};
    return 0;
fail:
    dlclose(h);
    return rc;
}

static int
s_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
s_note(worker_registry_t *self, const zdist_error_t *e)
{
    if (!self->scan_err.text[0])
        self->scan_err = *e;
}

/* Loads every plugin on the path once; problems are remembered, not fatal:
   a directory may hold unrelated or broken files. */
static void
s_scan(worker_registry_t *self)
{
    if (self->scanned)
        return;
    self->scanned = true;
    char *save = NULL;
    char *path = strdup(self->path);
    if (!path)
        return;
    for (char *entry = strtok_r(path, ":", &save); entry; entry = strtok_r(NULL, ":", &save)) {
        zdist_error_t e = {0};
        struct stat st;
        if (stat(entry, &st) < 0)
            continue;
        if (!S_ISDIR(st.st_mode)) {
            if (worker_registry_load(self, entry, &e) < 0)
                s_note(self, &e);
            continue;
        }
        DIR *d = opendir(entry);
        if (!d)
            continue;
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            size_t len = strlen(de->d_name);
            if (len < 4 || strcmp(de->d_name + len - 3, ".so") != 0)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                char **nn = realloc(names, cap * sizeof *nn);
                if (!nn)
                    break;
                names = nn;
            }
            if (asprintf(&names[n], "%s/%s", entry, de->d_name) < 0)
                break;
            n++;
        }
        closedir(d);
        if (n)
            qsort(names, n, sizeof *names, s_cmp_str);
        for (size_t i = 0; i < n; i++) {
            if (worker_registry_load(self, names[i], &e) < 0)
                s_note(self, &e);
            free(names[i]);
        }
        free(names);
    }
    free(path);
}

const zdist_model_t *
worker_registry_find(worker_registry_t *self, const char *name, zdist_error_t *err)
{
    const char *file;
    if (!name || !*name) {
        zdist_error_set(err, -EINVAL, "no model name");
        return NULL;
    }
    const zdist_model_t *m = s_lookup(self, name, &file);
    if (m)
        return m;
    s_scan(self);
    m = s_lookup(self, name, &file);
    if (m)
        return m;
    if (self->scan_err.code == -EPROTO) {
        if (err)
            *err = self->scan_err;
        return NULL;
    }
    char known[256] = "";
    for (int i = 0; s_builtins[i]; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", s_builtins[i]->name);
    zdist_error_set(err, -ENOENT,
                    "unknown model '%s': built-ins are %s; plugins are looked for in %s (%s)%s%s", name, known,
                    self->where, self->path[0] ? self->path : "none given",
                    self->scan_err.text[0] ? "; note: " : "", self->scan_err.text);
    return NULL;
}
