/* cli_coord: the coordinator's address, STATUS calls and printing, shared by zdist submit, status and cancel. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <czmq.h>

#include "cli.h"
#include "cli_coord.h"
#include "coordinator.pb-c.h"
#include "wire/body.h"
#include "zdist/auth.h"
#include "zdist/cluster.h"
#include "zdist/endpoint.h"
#include "zdist/sys.h"

int
cli_coord_address(const char *sub, const char *addr, const char *cluster_file, char *buf, size_t size)
{
    zdist_error_t err = {0};
    if (addr) {
        if (zdist_endpoint_normalize(addr, buf, size, &err) < 0)
            return cli_usage_error(sub, "--coordinator: %s", err.text);
        return 0;
    }
    zdist_cluster_t *cluster = zdist_cluster_from_env_or_file(cluster_file, &err);
    if (!cluster)
        return cli_usage_error(sub, "%s; or pass --coordinator HOST:PORT", err.text);
    int rc = zdist_cluster_num_tasks(cluster, "chief") > 0 ? zdist_cluster_endpoint(cluster, "chief", 0, buf, size)
                                                           : -ENOENT;
    zdist_cluster_destroy(&cluster);
    if (rc < 0)
        return cli_usage_error(sub, "no chief task in %s; pass --coordinator HOST:PORT",
                               cluster_file ? cluster_file : "TF_CONFIG");
    return 0;
}

zdist_rpc_client_t *
cli_coord_connect(const char *sub, const char *endpoint)
{
    zdist_error_t err = {0};
    zdist_rpc_client_options_t o;
    zdist_rpc_client_options_default(&o);
    if (o.keys && !zdist_keys_name_at(o.keys, endpoint))
        o.server_name = "chief-0"; /* --coordinator HOST:PORT: the chief */
    if (!o.keys && strncmp(endpoint, "tcp://127.", 10) != 0 && strncmp(endpoint, "tcp://[::1]", 11) != 0)
        fprintf(stderr, "zdist %s: warning: talking to %s in plain text (no --keys): not encrypted, not "
                        "authenticated\n", sub, endpoint);
    zdist_rpc_client_t *c = zdist_rpc_client_new(endpoint, &o, &err);
    if (!c)
        fprintf(stderr, "zdist %s: %s\n", sub, err.text);
    return c;
}

static void
s_print_failure(const char *sub, zdist_rpc_client_t *c, const zdist_msg_t *reply)
{
    int st = zdist_msg_status(reply);
    fprintf(stderr, "zdist %s: coordinator %s: %s%s%s\n", sub, zdist_rpc_client_endpoint(c),
            st == ZDIST_STATUS_DEADLINE_EXCEEDED ? "no answer (is zdist-coordinator running?)" : zdist_status_name(st),
            st == ZDIST_STATUS_DEADLINE_EXCEEDED ? "" : ": ",
            st == ZDIST_STATUS_DEADLINE_EXCEEDED ? "" : zdist_msg_status_message(reply));
}

/* Sends STATUS; the call's id in *ret_id. -ENOMEM or the send error. */
static int
s_send_status(zdist_rpc_client_t *c, const char *job_id, bool follow, int64_t timeout_ms, uint64_t *ret_id)
{
    Zdist__Coordinator__StatusRequest req = ZDIST__COORDINATOR__STATUS_REQUEST__INIT;
    req.job_id = (char *)job_id;
    req.follow = follow;
    zdist_msg_t *m = zdist_msg_new(ZDIST__COORDINATOR__METHOD__COORDINATOR_STATUS);
    if (!m)
        return -ENOMEM;
    int rc = zdist_msg_set_body(m, &req.base);
    if (rc < 0) {
        zdist_msg_destroy(&m);
        return rc;
    }
    return zdist_rpc_client_send(c, &m, timeout_ms, ret_id);
}

static json_t *s_status_json(const char *sub, zdist_msg_t *reply);

json_t *
cli_coord_status(const char *sub, zdist_rpc_client_t *c, const char *job_id, int64_t timeout_ms, int *ret_exit)
{
    *ret_exit = CLI_EXIT_FAILED;
    Zdist__Coordinator__StatusRequest req = ZDIST__COORDINATOR__STATUS_REQUEST__INIT;
    req.job_id = (char *)job_id;
    zdist_msg_t *m = zdist_msg_new(ZDIST__COORDINATOR__METHOD__COORDINATOR_STATUS), *reply = NULL;
    if (!m || zdist_msg_set_body(m, &req.base) < 0 || zdist_rpc_client_call(c, &m, timeout_ms, &reply) < 0) {
        zdist_msg_destroy(&m);
        fprintf(stderr, "zdist %s: out of memory\n", sub);
        return NULL;
    }
    if (zdist_msg_status(reply) != ZDIST_STATUS_OK) {
        s_print_failure(sub, c, reply);
        zdist_msg_destroy(&reply);
        return NULL;
    }
    json_t *out = s_status_json(sub, reply);
    zdist_msg_destroy(&reply);
    if (out)
        *ret_exit = 0;
    return out;
}

/* A STATUS reply (status OK) as the JSON object of cli_coord_status; NULL
   after printing why. */
static json_t *
s_status_json(const char *sub, zdist_msg_t *reply)
{
    Zdist__Coordinator__StatusReply *r = NULL;
    json_t *out = NULL;
    if (zdist_msg_unpack_body(reply, &zdist__coordinator__status_reply__descriptor, (ProtobufCMessage **)&r, NULL) ==
            0 &&
        r->n_jobs == 1) {
        Zdist__Coordinator__JobStatus *j = r->jobs[0];
        json_t *detail = json_loads(j->detail_json, 0, NULL);
        out = json_is_object(detail) ? detail : json_object();
        if (out != detail)
            json_decref(detail);
        json_object_set_new(out, "job_id", json_string(j->job_id));
        json_object_set_new(out, "name", json_string(j->name));
        json_object_set_new(out, "state", json_string(j->state));
        json_object_set_new(out, "step", json_integer(j->step));
        json_object_set_new(out, "steps", json_integer(j->steps));
        json_object_set_new(out, "error", json_string(j->error));
        if (!json_object_get(out, "metrics"))
            json_object_set_new(out, "metrics", json_object());
    } else {
        fprintf(stderr, "zdist %s: the coordinator's STATUS reply does not decode\n", sub);
    }
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    return out;
}

void
cli_coord_progress(json_t *st, bool tty, cli_coord_progress_t *p)
{
    int64_t step = json_integer_value(json_object_get(st, "step"));
    int64_t steps = json_integer_value(json_object_get(st, "steps"));
    json_t *m = json_object_get(st, "metrics");
    double loss = json_number_value(json_object_get(m, "loss"));
    double eps = json_number_value(json_object_get(m, "examples_per_sec"));
    int64_t now = zdist_clock_now_ms();
    double el = (double)(now - p->t0_ms) / 1000.0;
    double eta = step > 0 && steps > step ? el * (double)(steps - step) / (double)step : 0;
    const char *state = json_string_value(json_object_get(st, "state"));
    if (tty) {
        int width = 30, fill = steps > 0 ? (int)(width * step / steps) : 0;
        char bar[64];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r[%s] %lld/%lld loss %.4f %.0f ex/s ETA %.0fs %s   ", bar, (long long)step, (long long)steps,
                loss, eps, eta, state ? state : "");
        fflush(stderr);
    } else if (now - p->last_ms >= 5000 || (steps > 0 && (step - p->last_step) * 10 >= steps)) {
        printf("step %lld/%lld loss %.4f examples/s %.0f eta %.0fs (%s)\n", (long long)step, (long long)steps, loss,
               eps, eta, state ? state : "");
        fflush(stdout);
        p->last_ms = now;
        p->last_step = step;
    }
}

json_t *
cli_coord_follow(const char *sub, zdist_rpc_client_t *c, const char *job_id, bool show, bool tty, int *ret_exit)
{
    cli_coord_progress_t prog = {.t0_ms = zdist_clock_now_ms()};
    char job[64];
    snprintf(job, sizeof job, "%s", job_id);
    json_t *status = NULL;
    bool follow = true;      /* false: the coordinator cannot stream to us; poll */
    bool told_lost = false;
    int64_t lost_since = 0;  /* the coordinator unreachable since then (ms), 0: it answers */
    *ret_exit = CLI_EXIT_FAILED;
    for (;;) {
        /* One call: a stream (no deadline) or, polling, one snapshot. */
        uint64_t id = 0;
        int rc = s_send_status(c, job, follow, follow ? 0 : 2000, &id);
        if (rc < 0) {
            fprintf(stderr, "zdist %s: cannot send STATUS: %s\n", sub, strerror(-rc));
            break;
        }
        bool ended = false, lost = false;
        while (!ended) {
            zdist_msg_t *reply = NULL;
            rc = zdist_rpc_client_recv(c, 1000, &reply);
            if (rc == -EAGAIN || rc == -EINTR) {
                /* A stream sent while the coordinator is down waits for it; up to 3 minutes. */
                if (lost_since && zdist_clock_now_ms() - lost_since > 180000)
                    break;
                continue;
            }
            if (rc < 0) {
                fprintf(stderr, "zdist %s: %s\n", sub, strerror(-rc));
                break;
            }
            if (zdist_msg_request_id(reply) != id) {
                zdist_msg_destroy(&reply);
                continue;
            }
            bool more = zdist_msg_more(reply);
            int st = zdist_msg_status(reply);
            if (st == ZDIST_STATUS_UNAVAILABLE || st == ZDIST_STATUS_DEADLINE_EXCEEDED) {
                /* The coordinator stopped or restarts: it resumes the job; subscribe again. */
                if (!lost_since)
                    lost_since = zdist_clock_now_ms();
                if (!told_lost && !tty)
                    fprintf(stderr, "zdist %s: coordinator %s: %s; waiting for it (up to 3 minutes)\n", sub,
                            zdist_rpc_client_endpoint(c), *zdist_msg_status_message(reply)
                                                              ? zdist_msg_status_message(reply)
                                                              : zdist_status_name(st));
                told_lost = true;
                lost = true;
                ended = true;
            } else if (st == ZDIST_STATUS_RESOURCE_EXHAUSTED && follow) {
                follow = false; /* too many streams: fall back to polling */
                ended = true;
            } else if (st != ZDIST_STATUS_OK) {
                s_print_failure(sub, c, reply);
                zdist_msg_destroy(&reply);
                json_decref(status);
                return NULL;
            } else {
                json_t *s = s_status_json(sub, reply);
                if (s) {
                    lost_since = 0;
                    told_lost = false;
                    json_decref(status);
                    status = s;
                    /* Stay with this job across restarts, also when asked for the latest. */
                    snprintf(job, sizeof job, "%s", json_string_value(json_object_get(s, "job_id")));
                    if (show)
                        cli_coord_progress(status, tty, &prog);
                    int f = cli_coord_final(status);
                    if (f >= 0) {
                        zdist_msg_destroy(&reply);
                        *ret_exit = f ? CLI_EXIT_FAILED : CLI_EXIT_OK;
                        return status;
                    }
                }
                ended = !more;
            }
            zdist_msg_destroy(&reply);
        }
        if (!ended)
            break; /* gave up or a socket error */
        if (lost && zdist_clock_now_ms() - lost_since > 180000)
            break;
        /* Resubscribing after a loss, or polling (too many streams, or a
           coordinator that answers a stream with one snapshot): not faster
           than twice a second. */
        zclock_sleep(500);
    }
    if (lost_since)
        fprintf(stderr, "zdist %s: coordinator %s: unreachable for 3 minutes, giving up\n", sub,
                zdist_rpc_client_endpoint(c));
    return status;
}

int
cli_coord_final(json_t *st)
{
    const char *s = json_string_value(json_object_get(st, "state"));
    if (!s)
        return 1;
    if (strcmp(s, "done") == 0)
        return 0;
    if (strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0)
        return 1;
    return -1;
}

static double
s_num(json_t *o, const char *key, double dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

void
cli_coord_print(FILE *out, json_t *st, bool tasks)
{
    json_t *m = json_object_get(st, "metrics");
    fprintf(out, "job %s (%s): %s, step %lld/%lld", json_string_value(json_object_get(st, "job_id")),
            json_string_value(json_object_get(st, "name")), json_string_value(json_object_get(st, "state")),
            (long long)json_integer_value(json_object_get(st, "step")),
            (long long)json_integer_value(json_object_get(st, "steps")));
    if (json_object_get(m, "loss"))
        fprintf(out, ", loss %.4f", s_num(m, "loss", 0));
    if (json_object_get(m, "examples_per_sec"))
        fprintf(out, ", %.0f examples/s", s_num(m, "examples_per_sec", 0));
    if (json_object_get(m, "test_accuracy"))
        fprintf(out, ", test accuracy %.4f", s_num(m, "test_accuracy", 0));
    fputc('\n', out);
    const char *e = json_string_value(json_object_get(st, "error"));
    if (e && *e)
        fprintf(out, "  error: %s\n", e);
    const char *rf = json_string_value(json_object_get(st, "ring_reformed_because"));
    if (rf && *rf && tasks)
        fprintf(out, "  ring last re-formed: %s\n", rf);
    if (!tasks)
        return;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w) {
        if (json_object_get(w, "in_ring")) { /* multi_worker_mirrored */
            fprintf(out, "  worker %lld %s: %s, ", (long long)json_integer_value(json_object_get(w, "task")),
                    json_string_value(json_object_get(w, "endpoint")),
                    json_is_true(json_object_get(w, "up")) ? "up" : "down");
            if (json_is_true(json_object_get(w, "in_ring")))
                fprintf(out, "rank %lld of the ring at %s", (long long)json_integer_value(json_object_get(w, "rank")),
                        json_string_value(json_object_get(w, "ring_endpoint")));
            else
                fprintf(out, "not in the ring");
            fprintf(out, ", %lld restarts\n", (long long)json_integer_value(json_object_get(w, "restarts")));
            continue;
        }
        long long ago = (long long)json_integer_value(json_object_get(w, "last_heartbeat_ms_ago"));
        char heard[64];
        if (ago < 0)
            snprintf(heard, sizeof heard, "never");
        else
            snprintf(heard, sizeof heard, "%lld ms ago", ago);
        fprintf(out,
                "  worker %lld %s: %s, %lld closures done, %lld in flight (oldest %lld ms), last heard %s, %lld "
                "rejoins\n",
                (long long)json_integer_value(json_object_get(w, "task")),
                json_string_value(json_object_get(w, "endpoint")),
                json_is_true(json_object_get(w, "up")) ? "up" : "down",
                (long long)json_integer_value(json_object_get(w, "closures_done")),
                (long long)json_integer_value(json_object_get(w, "in_flight")),
                (long long)json_integer_value(json_object_get(w, "in_flight_ms")), heard,
                (long long)json_integer_value(json_object_get(w, "restarts")));
    }
    json_array_foreach(json_object_get(st, "ps"), i, w) {
        fprintf(out, "  ps %lld %s: %lld bytes, %lld requests\n", (long long)json_integer_value(json_object_get(w, "task")),
                json_string_value(json_object_get(w, "endpoint")),
                (long long)json_integer_value(json_object_get(w, "bytes")),
                (long long)json_integer_value(json_object_get(w, "requests")));
    }
}
