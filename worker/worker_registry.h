/* worker_registry: models by name — the built-ins, and plugins loaded with dlopen from a plugin path. */
#ifndef WORKER_REGISTRY_H
#define WORKER_REGISTRY_H

#include "zdist/error.h"
#include "zdist/step.h"

typedef struct worker_registry_t worker_registry_t;

/* plugin_path: colon-separated directories (every "*.so" in them, in name
   order) or shared-object files, searched when a name is not built in; NULL
   or "" for none. The caller joins the job's plugin_path and
   ZDIST_PLUGIN_PATH as it likes (zdist run: the job's first). NULL on ENOMEM. */
/* where: how an unknown model's message names the origin of plugin_path
   (NULL: "the job's plugin_path and ZDIST_PLUGIN_PATH"). */
worker_registry_t *worker_registry_new(const char *plugin_path, const char *where);
/* dlcloses the plugins: models found earlier become invalid. */
void worker_registry_destroy(worker_registry_t **self_p);

/* The model called `name`: a built-in, or the first plugin on the path that
   offers it. NULL with err when there is none (-ENOENT: the message lists
   the built-ins and says where plugins were looked for), or when the plugin
   that would have offered it cannot be used: a plugin built for another ABI
   version is refused with -EPROTO naming the file and both versions. The
   model is borrowed from the registry. */
const zdist_model_t *worker_registry_find(worker_registry_t *self, const char *name, zdist_error_t *err);

/* Loads one plugin file now. 0, or -ENOENT (cannot dlopen: dlerror's text),
   -ENOEXEC (no zdist_step_plugin symbol), -EPROTO (ABI version mismatch),
   -EINVAL (a malformed model table), -EEXIST (a model name already taken by
   a built-in or an earlier plugin), all with err. */
int worker_registry_load(worker_registry_t *self, const char *file, zdist_error_t *err);

#endif
