/* zdist model spec (internal): what model_spec.c (sequential's parser, the
   layer table and fields) shares with model_graph.c (functional models) and
   model_summary.c (Keras's summary). */
#ifndef ZDIST_MODEL_SPEC_PRIVATE_H
#define ZDIST_MODEL_SPEC_PRIVATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/model_spec.h"

/* The job's key of l's type ("dense"), Keras's class ("Dense"). */
const char *model_spec_type_key(const zdist_layer_spec_t *l);
const char *model_spec_keras_type(const zdist_layer_spec_t *l);
/* True when key names a layer type. */
bool model_spec_type_known(const char *key);
/* Layer type `key`'s fields (an object) into *l, its defaults first;
   `where` ("model.layers[3].dense") names it in messages; graph: a
   functional model's layer. -ENOENT (err untouched) for an unknown key,
   else 0 or -EINVAL with err. */
int model_spec_layer_fields(const char *key, json_t *fields, const char *where, bool graph, zdist_layer_spec_t *l,
                            zdist_error_t *err);
/* The model's "loss" (missing or unknown: -EINVAL naming it). */
int model_spec_loss(json_t *root, zdist_loss_t *ret, zdist_error_t *err);
/* The last layer (the output) fits the loss. -EINVAL naming it. */
int model_spec_check_loss(const zdist_model_spec_t *spec, zdist_error_t *err);
/* "(None, 26, 26, 32)"; "(26, 26, 32)" (a shape in messages). */
const char *model_spec_keras_shape(const zdist_shape_t *s, char *buf, size_t size);
const char *model_spec_shape_text(const zdist_shape_t *s, char *buf, size_t size);
/* The value as JSON text for "got ..." (at most 60 characters). */
const char *model_spec_shown(json_t *v, char *buf, size_t size);
/* Elements of a shape, INT64_MAX when the product does not fit. */
int64_t model_spec_elements(const zdist_shape_t *s);
/* A layer's name: 1..40 characters of [A-Za-z0-9_.-]. */
bool model_spec_name_ok(const char *s);

#endif
