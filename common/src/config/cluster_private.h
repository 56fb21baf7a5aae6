/* zdist cluster resolver (internal): the cluster's layout and the helpers
   cluster.c (the class: its queries, setters, roles, output) shares with
   cluster_parse.c (reading TF_CONFIG or a cluster file into it). */
#ifndef ZDIST_CLUSTER_PRIVATE_H
#define ZDIST_CLUSTER_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>

#include "zdist/cluster.h"

#define S_JOB_NAME_MAX 64
#define S_RPC_LAYER_MAX 32
#define S_QUOTE_MAX 48 /* user values in messages are cut to this */

typedef struct {
    int index;
    char *address;
} cluster_task_t;

typedef struct {
    char *name;
    bool sparse;
    size_t ntasks;
    cluster_task_t *tasks; /* ascending index; index == position unless sparse */
} cluster_job_t;

struct _zdist_cluster_t {
    char *source;  /* "TF_CONFIG" or "cluster file 'x'", for messages */
    cluster_job_t *jobs; /* ascending name */
    size_t njobs;
    char *task_type; /* NULL: none */
    int task_id;     /* -1: none */
    char *rpc_layer; /* NULL: none */
    char *session_master;
};

/* A user value for a message: 'text' with quotes, non-printables escaped
   and cut, so a message stays one line of reasonable length. */
typedef struct {
    char s[S_QUOTE_MAX * 4 + 8];
} zdist_cluster_quoted_t;
#define Q(text) (zdist_cluster_quote_(text).s)

/* Sets err to "SOURCE: message" (source may be NULL), not about a
   position, on one line whatever the input held; returns code. */
__attribute__((format(printf, 4, 5))) int zdist_cluster_fail_(zdist_error_t *err, const char *source, int code,
                                                               const char *fmt, ...);
int zdist_cluster_oom_(zdist_error_t *err, const char *source);
zdist_cluster_quoted_t zdist_cluster_quote_(const char *text);
bool zdist_cluster_all_digits_(const char *s);
/* A protocol name: a letter, then letters, digits, '+', '.', '-'. */
bool zdist_cluster_valid_rpc_layer_(const char *name);
/* An empty cluster read from `source` (for messages); NULL on ENOMEM. */
zdist_cluster_t *zdist_cluster_new_(const char *source);
/* The task (type, index) must be in the cluster; an evaluator may be
   outside it. index -1 = not given. what: "task.type"/"task.index" fields
   or the "task 'worker:1'" label of an override. */
int zdist_cluster_check_task_(const zdist_cluster_t *self, const char *type, int index, const char *type_what,
                              const char *index_what, zdist_error_t *err);

#endif
