/* zdist onnx: an ONNX ModelProto built with protobuf-c (proto/onnx.proto) and written through zdist_file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "zdist/file.h"
#include "zdist/onnx.h"

#define S_MAX_GROWTH (1 << 24) /* nodes, initializers, inputs or outputs: far beyond any model */
#define S_MAX_DOMAINS 4        /* operator sets imported: the default one and a few others (ai.onnx.ml) */

struct zdist_onnx_t {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset[S_MAX_DOMAINS];
    Onnx__OperatorSetIdProto *opsets[S_MAX_DOMAINS];
    int status;
    /* Everything the messages point at, freed at destroy (the messages
       themselves never own memory: protobuf-c's free_unpacked is not used). */
    void **keep;
    size_t nkeep, keep_cap;
    size_t node_cap, init_cap, in_cap, out_cap;
};

/* p kept for destroy; NULL (and status -ENOMEM) when p is NULL or the list cannot grow. */
static void *
s_keep(zdist_onnx_t *self, void *p)
{
    if (!p) {
        self->status = -ENOMEM;
        return NULL;
    }
    if (self->nkeep == self->keep_cap) {
        size_t cap = self->keep_cap ? 2 * self->keep_cap : 256;
        void **k = realloc(self->keep, cap * sizeof *k);
        if (!k) {
            free(p);
            self->status = -ENOMEM;
            return NULL;
        }
        self->keep = k;
        self->keep_cap = cap;
    }
    return self->keep[self->nkeep++] = p;
}

static void *
s_alloc(zdist_onnx_t *self, size_t size)
{
    return s_keep(self, calloc(1, size ? size : 1));
}

static char *
s_str(zdist_onnx_t *self, const char *s)
{
    return s_keep(self, strdup(s ? s : ""));
}

/* Room for one more pointer in *arr (count n, capacity *cap); false on failure. */
static bool
s_grow(zdist_onnx_t *self, void ***arr, size_t n, size_t *cap)
{
    if (n < *cap)
        return true;
    size_t c = *cap ? 2 * *cap : 16;
    void **a = c <= S_MAX_GROWTH ? realloc(*arr, c * sizeof *a) : NULL;
    if (!a) {
        self->status = -ENOMEM;
        return false;
    }
    *arr = a;
    *cap = c;
    return true;
}

/* ONNX's TensorProto.DataType of a zdist dtype; 0 (UNDEFINED) when not written here. */
static int32_t
s_elem_type(zdist_dtype_t dtype)
{
    switch (dtype) {
    case ZDIST_DTYPE_FLOAT32:
        return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case ZDIST_DTYPE_INT32:
        return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case ZDIST_DTYPE_INT64:
        return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    default:
        return ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
    }
}

zdist_onnx_t *
zdist_onnx_new(const char *graph_name, int64_t opset, const char *doc)
{
    zdist_onnx_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    onnx__model_proto__init(&self->model);
    onnx__graph_proto__init(&self->graph);
    onnx__operator_set_id_proto__init(&self->opset[0]);
    self->opset[0].domain = "";
    self->opset[0].has_version = true;
    self->opset[0].version = opset;
    self->opsets[0] = &self->opset[0];
    self->model.has_ir_version = true;
    self->model.ir_version = ZDIST_ONNX_IR_VERSION;
    self->model.producer_name = "zdist";
    self->model.producer_version = ZDIST_VERSION_STRING;
    self->model.has_model_version = true;
    self->model.model_version = 1;
    self->model.n_opset_import = 1;
    self->model.opset_import = self->opsets;
    self->model.graph = &self->graph;
    self->graph.name = s_str(self, graph_name);
    if (doc)
        self->model.doc_string = s_str(self, doc);
    if (self->status < 0)
        zdist_onnx_destroy(&self);
    return self;
}

void
zdist_onnx_destroy(zdist_onnx_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_onnx_t *self = *self_p;
    for (size_t i = 0; i < self->nkeep; i++)
        free(self->keep[i]);
    free(self->keep);
    free(self->graph.node);
    free(self->graph.initializer);
    free(self->graph.input);
    free(self->graph.output);
    free(self);
    *self_p = NULL;
}

int
zdist_onnx_status(const zdist_onnx_t *self)
{
    return self->status;
}

/* A ValueInfoProto: a tensor's name, element type and shape. */
static Onnx__ValueInfoProto *
s_value_info(zdist_onnx_t *self, const char *name, zdist_dtype_t dtype, const int64_t *dims, int rank)
{
    if (s_elem_type(dtype) == 0 || rank < 0 || rank > ZDIST_MAX_RANK) {
        self->status = -EINVAL;
        return NULL;
    }
    Onnx__ValueInfoProto *vi = s_alloc(self, sizeof *vi);
    Onnx__TypeProto *tp = s_alloc(self, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = s_alloc(self, sizeof *tt);
    Onnx__TensorShapeProto *sh = s_alloc(self, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dv = s_alloc(self, (size_t)rank * sizeof *dv);
    if (!vi || !tp || !tt || !sh || !dv)
        return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int k = 0; k < rank; k++) {
        if (!(dv[k] = s_alloc(self, sizeof *dv[k])))
            return NULL;
        onnx__tensor_shape_proto__dimension__init(dv[k]);
        if (dims[k] == ZDIST_ONNX_BATCH || dims[k] == ZDIST_ONNX_WIDTH) {
            dv[k]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dv[k]->dim_param = dims[k] == ZDIST_ONNX_BATCH ? "N" : "K";
        } else if (dims[k] < 0) {
            self->status = -EINVAL;
            return NULL;
        } else {
            dv[k]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dv[k]->dim_value = dims[k];
        }
    }
    sh->n_dim = (size_t)rank;
    sh->dim = dv;
    tt->has_elem_type = true;
    tt->elem_type = s_elem_type(dtype);
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = s_str(self, name);
    vi->type = tp;
    return vi->name ? vi : NULL;
}

int
zdist_onnx_input(zdist_onnx_t *self, const char *name, zdist_dtype_t dtype, const int64_t *dims, int rank)
{
    if (self->status < 0)
        return self->status;
    Onnx__ValueInfoProto *vi = s_value_info(self, name, dtype, dims, rank);
    if (!vi || !s_grow(self, (void ***)&self->graph.input, self->graph.n_input, &self->in_cap))
        return self->status;
    self->graph.input[self->graph.n_input++] = vi;
    return 0;
}

int
zdist_onnx_output(zdist_onnx_t *self, const char *name, zdist_dtype_t dtype, const int64_t *dims, int rank)
{
    if (self->status < 0)
        return self->status;
    Onnx__ValueInfoProto *vi = s_value_info(self, name, dtype, dims, rank);
    if (!vi || !s_grow(self, (void ***)&self->graph.output, self->graph.n_output, &self->out_cap))
        return self->status;
    self->graph.output[self->graph.n_output++] = vi;
    return 0;
}

int
zdist_onnx_initializer(zdist_onnx_t *self, const char *name, zdist_dtype_t dtype, const int64_t *dims, int rank,
                       const void *data)
{
    if (self->status < 0)
        return self->status;
    zdist_shape_t shape;
    int64_t n = 0;
    size_t esize = zdist_dtype_size(dtype);
    if (s_elem_type(dtype) == 0 || zdist_shape_init(&shape, rank, dims) < 0 ||
        zdist_shape_num_elements(&shape, &n) < 0 || (uint64_t)n > SIZE_MAX / esize)
        return self->status = -EINVAL;
    Onnx__TensorProto *t = s_alloc(self, sizeof *t);
    int64_t *d = s_alloc(self, (size_t)rank * sizeof *d);
    void *bytes = s_alloc(self, (size_t)n * esize);
    if (!t || !d || !bytes || !s_grow(self, (void ***)&self->graph.initializer, self->graph.n_initializer,
                                      &self->init_cap))
        return self->status;
    onnx__tensor_proto__init(t);
    memcpy(d, dims, (size_t)rank * sizeof *d);
    memcpy(bytes, data, (size_t)n * esize); /* the host is little-endian, as raw_data is */
    t->n_dims = (size_t)rank;
    t->dims = d;
    t->has_data_type = true;
    t->data_type = s_elem_type(dtype);
    t->name = s_str(self, name);
    t->has_raw_data = true;
    t->raw_data.len = (size_t)n * esize;
    t->raw_data.data = bytes;
    self->graph.initializer[self->graph.n_initializer++] = t;
    return self->status;
}

/* An AttributeProto of a. */
static Onnx__AttributeProto *
s_attr(zdist_onnx_t *self, const zdist_onnx_attr_t *a)
{
    Onnx__AttributeProto *p = s_alloc(self, sizeof *p);
    if (!p)
        return NULL;
    onnx__attribute_proto__init(p);
    p->name = s_str(self, a->name);
    p->has_type = true;
    switch (a->kind) {
    case ZDIST_ONNX_ATTR_INT:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        p->has_i = true;
        p->i = a->i;
        break;
    case ZDIST_ONNX_ATTR_FLOAT:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        p->has_f = true;
        p->f = a->f;
        break;
    case ZDIST_ONNX_ATTR_INTS:
        if (a->n < 0 || (a->n > 0 && !a->ints)) {
            self->status = -EINVAL;
            return NULL;
        }
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        if (!(p->ints = s_alloc(self, (size_t)a->n * sizeof *p->ints)))
            return NULL;
        memcpy(p->ints, a->ints, (size_t)a->n * sizeof *p->ints);
        p->n_ints = (size_t)a->n;
        break;
    default:
        self->status = -EINVAL;
        return NULL;
    }
    return p->name ? p : NULL;
}

/* n names copied into a new array. */
static char **
s_names(zdist_onnx_t *self, const char *const *names, int n)
{
    char **v = s_alloc(self, (size_t)n * sizeof *v);
    for (int i = 0; v && i < n; i++)
        if (!(v[i] = s_str(self, names[i])))
            return NULL;
    return v;
}

int
zdist_onnx_import(zdist_onnx_t *self, const char *domain, int64_t version)
{
    if (self->status < 0)
        return self->status;
    if (!domain || !*domain || version < 1)
        return self->status = -EINVAL;
    for (size_t i = 0; i < self->model.n_opset_import; i++)
        if (strcmp(self->opset[i].domain, domain) == 0) {
            if (self->opset[i].version != version)
                return self->status = -EINVAL; /* one version per domain */
            return 0;
        }
    if (self->model.n_opset_import == S_MAX_DOMAINS)
        return self->status = -ENOSPC;
    Onnx__OperatorSetIdProto *o = &self->opset[self->model.n_opset_import];
    onnx__operator_set_id_proto__init(o);
    if (!(o->domain = s_str(self, domain)))
        return self->status;
    o->has_version = true;
    o->version = version;
    self->opsets[self->model.n_opset_import++] = o;
    return 0;
}

/* Whether the model imports domain ("" always). */
static bool
s_imported(const zdist_onnx_t *self, const char *domain)
{
    for (size_t i = 0; i < self->model.n_opset_import; i++)
        if (strcmp(self->opset[i].domain, domain) == 0)
            return true;
    return false;
}

int
zdist_onnx_node(zdist_onnx_t *self, const char *op_type, const char *const *inputs, int nin,
                const char *const *outputs, int nout, const zdist_onnx_attr_t *attrs, int nattrs)
{
    return zdist_onnx_node_domain(self, "", op_type, inputs, nin, outputs, nout, attrs, nattrs);
}

int
zdist_onnx_node_domain(zdist_onnx_t *self, const char *domain, const char *op_type, const char *const *inputs,
                       int nin, const char *const *outputs, int nout, const zdist_onnx_attr_t *attrs, int nattrs)
{
    if (self->status < 0)
        return self->status;
    if (!op_type || !domain || nin < 0 || nout < 1 || nattrs < 0 || !s_imported(self, domain))
        return self->status = -EINVAL;
    Onnx__NodeProto *node = s_alloc(self, sizeof *node);
    Onnx__AttributeProto **av = s_alloc(self, (size_t)nattrs * sizeof *av);
    if (!node || !av)
        return self->status;
    onnx__node_proto__init(node);
    for (int i = 0; i < nattrs; i++)
        if (!(av[i] = s_attr(self, &attrs[i])))
            return self->status;
    char name[32];
    snprintf(name, sizeof name, "node_%zu", self->graph.n_node);
    node->op_type = s_str(self, op_type);
    node->name = s_str(self, name);
    node->domain = *domain ? s_str(self, domain) : "";
    node->input = s_names(self, inputs, nin);
    node->output = s_names(self, outputs, nout);
    node->n_input = (size_t)nin;
    node->n_output = (size_t)nout;
    node->attribute = av;
    node->n_attribute = (size_t)nattrs;
    if (self->status < 0 || !s_grow(self, (void ***)&self->graph.node, self->graph.n_node, &self->node_cap))
        return self->status;
    self->graph.node[self->graph.n_node++] = node;
    return 0;
}

int
zdist_onnx_encode(zdist_onnx_t *self, uint8_t **ret_buf, size_t *ret_len, zdist_error_t *err)
{
    if (self->status < 0)
        return zdist_error_set(err, self->status, "building the ONNX graph failed: %s", strerror(-self->status));
    size_t len = onnx__model_proto__get_packed_size(&self->model);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return zdist_error_set(err, -ENOMEM, "out of memory for the %zu-byte ONNX model", len);
    size_t packed = onnx__model_proto__pack(&self->model, buf);
    if (packed != len) {
        free(buf);
        return zdist_error_set(err, -EIO, "packing the ONNX model gave %zu bytes, %zu expected", packed, len);
    }
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}

int
zdist_onnx_write(zdist_onnx_t *self, const char *path, zdist_error_t *err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = zdist_onnx_encode(self, &buf, &len, err);
    if (rc < 0)
        return rc;
    zdist_file_piece_t piece = {buf, len};
    rc = zdist_file_write(path, &piece, 1, 0644, NULL, err);
    free(buf);
    return rc;
}
