/* CUnit suite: zdist keys — keygen, loading, roles, CURVE RPC and the ring. */
#include <czmq.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "zdist/auth.h"
#include "zdist/collective.h"
#include "zdist/rpc.h"

#define M_OPEN 100
#define M_WRITE 101

static int
s_ok(zdist_rpc_call_t *call, void *state)
{
    (void) call;
    atomic_fetch_add((atomic_int *) state, 1);
    return 0;
}

static const zdist_rpc_method_t s_methods[] = {
    {M_OPEN, "open", NULL, s_ok, 0, 0, 0},
    {M_WRITE, "write", NULL, s_ok, 0, 0, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
};

static char *
s_keydir(const char *const *names, size_t n)
{
    char *dir = zdist_test_tmpdir("auth");
    for (size_t i = 0; i < n; i++) {
        zdist_error_t err = {0};
        CU_ASSERT_EQUAL_FATAL(zdist_keys_generate(dir, names[i], false, &err), 0);
    }
    return dir;
}

static zdist_keys_t *
s_load(const char *dir, const char *name)
{
    zdist_keys_t *keys = NULL;
    zdist_error_t err = {0};
    int rc = zdist_keys_load(dir, name, &keys, &err);
    if (rc < 0)
        fprintf(stderr, "keys: %s\n", err.text);
    CU_ASSERT_EQUAL(rc, 0);
    return keys;
}

static void
test_keygen_files_and_modes(void)
{
    char *dir = zdist_test_tmpdir("keygen");
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_keys_generate(dir, "alice", false, &err), 0);
    char pub[512], sec[512];
    snprintf(pub, sizeof pub, "%s/alice.key", dir);
    snprintf(sec, sizeof sec, "%s/alice.key_secret", dir);
    struct stat st;
    CU_ASSERT_EQUAL_FATAL(stat(sec, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
    CU_ASSERT_EQUAL_FATAL(stat(pub, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 077, 044);
    zcert_t *cert = zcert_load(pub);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cert);
    char before[41];
    snprintf(before, sizeof before, "%s", zcert_public_txt(cert));
    zcert_destroy(&cert);

    /* no overwrite without force; the message names the path */
    CU_ASSERT_EQUAL(zdist_keys_generate(dir, "alice", false, &err), -EEXIST);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "alice.key_secret"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "--force"));
    CU_ASSERT_EQUAL(zdist_keys_generate(dir, "alice", true, &err), 0);
    cert = zcert_load(pub);
    CU_ASSERT_STRING_NOT_EQUAL(zcert_public_txt(cert), before);
    zcert_destroy(&cert);

    CU_ASSERT_EQUAL(zdist_keys_generate(dir, "../evil", false, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "'../evil'"));
    CU_ASSERT_EQUAL(zdist_keys_generate(dir, "", false, &err), -EINVAL);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_load_and_roles(void)
{
    const char *names[] = {"ps-0", "worker-1", "chief-0", "alice"};
    char *dir = s_keydir(names, 4);
    zdist_keys_t *keys = s_load(dir, "worker-1");
    CU_ASSERT_PTR_NOT_NULL_FATAL(keys);
    CU_ASSERT_STRING_EQUAL(zdist_keys_self_name(keys), "worker-1");
    CU_ASSERT_PTR_NOT_NULL(zdist_keys_public(keys, "ps-0"));
    CU_ASSERT_PTR_NOT_NULL(zdist_keys_public(keys, "alice"));
    CU_ASSERT_PTR_NULL(zdist_keys_public(keys, "bob"));
    CU_ASSERT_EQUAL(zdist_keys_role_of("ps-3"), ZDIST_ROLE_PS);
    CU_ASSERT_EQUAL(zdist_keys_role_of("worker-0"), ZDIST_ROLE_WORKER);
    CU_ASSERT_EQUAL(zdist_keys_role_of("chief-0"), ZDIST_ROLE_CHIEF);
    CU_ASSERT_EQUAL(zdist_keys_role_of("evaluator-0"), ZDIST_ROLE_EVALUATOR);
    CU_ASSERT_EQUAL(zdist_keys_role_of("workers"), ZDIST_ROLE_CLIENT);
    CU_ASSERT_EQUAL(zdist_keys_role_of("alice"), ZDIST_ROLE_CLIENT);
    CU_ASSERT_EQUAL(zdist_keys_role_of(NULL), ZDIST_ROLE_CLIENT);

    CU_ASSERT_EQUAL(zdist_keys_add_endpoint(keys, "tcp://127.0.0.1:5000", "ps-0"), 0);
    CU_ASSERT_STRING_EQUAL(zdist_keys_name_at(keys, "tcp://127.0.0.1:5000"), "ps-0");
    CU_ASSERT_PTR_NULL(zdist_keys_name_at(keys, "tcp://127.0.0.1:5001"));
    zdist_keys_destroy(&keys);
    CU_ASSERT_PTR_NULL(keys);
    zdist_keys_destroy(&keys);

    /* no certificate of our own: the message names the file and the fix */
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_keys_load(dir, "bob", &keys, &err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "bob.key_secret"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "zdist keygen bob"));
    /* a secret others can read is refused */
    char sec[512];
    snprintf(sec, sizeof sec, "%s/alice.key_secret", dir);
    chmod(sec, 0644);
    CU_ASSERT_EQUAL(zdist_keys_load(dir, "alice", &keys, &err), -EPERM);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "chmod 600"));
    /* no directory and no environment: no keys, no error */
    unsetenv(ZDIST_KEYS_ENV);
    keys = (zdist_keys_t *) 1;
    CU_ASSERT_EQUAL(zdist_keys_load(NULL, "client", &keys, &err), 0);
    CU_ASSERT_PTR_NULL(keys);
    zdist_test_rmtree(dir);
    free(dir);
}

typedef struct {
    zdist_rpc_server_t *server;
    pthread_t thread;
    atomic_int stop, handled;
    char last_log[512];
    pthread_mutex_t lock;
} s_server_t;

static void
s_log(void *state, const char *line)
{
    s_server_t *s = state;
    pthread_mutex_lock(&s->lock);
    snprintf(s->last_log, sizeof s->last_log, "%s", line);
    pthread_mutex_unlock(&s->lock);
}

static void *
s_loop(void *arg)
{
    s_server_t *s = arg;
    while (!atomic_load(&s->stop)) {
        zmq_pollitem_t item = {zdist_rpc_server_socket(s->server), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 20) > 0)
            zdist_rpc_server_dispatch(s->server, 64);
    }
    return NULL;
}

/* One call of `method` as certificate `name` of `dir` (NULL: plain). */
static int
s_call(const char *endpoint, zdist_keys_t *keys, uint32_t method, int64_t timeout_ms)
{
    zdist_rpc_client_options_t o;
    zdist_rpc_client_options_default(&o);
    o.keys = keys;
    o.server_name = "ps-0";
    zdist_error_t err = {0};
    zdist_rpc_client_t *c = zdist_rpc_client_new(endpoint, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    zdist_msg_t *m = zdist_msg_new(method), *reply = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &m, timeout_ms, &reply), 0);
    int status = zdist_msg_status(reply);
    zdist_msg_destroy(&reply);
    zdist_rpc_client_destroy(&c);
    return status;
}

static void
test_curve_rpc_roles(void)
{
    const char *names[] = {"ps-0", "worker-0", "alice"};
    char *dir = s_keydir(names, 3);
    const char *outsider_names[] = {"mallory"};
    char *outsider_dir = s_keydir(outsider_names, 1);
    /* mallory knows the server's public key, but hers is not in dir */
    char from[512], to[512];
    snprintf(from, sizeof from, "%s/ps-0.key", dir);
    snprintf(to, sizeof to, "%s/ps-0.key", outsider_dir);
    zcert_t *pc = zcert_load(from);
    CU_ASSERT_EQUAL_FATAL(zcert_save_public(pc, to), 0);
    zcert_destroy(&pc);

    zdist_keys_t *server_keys = s_load(dir, "ps-0"), *worker = s_load(dir, "worker-0"),
                 *alice = s_load(dir, "alice"), *mallory = s_load(outsider_dir, "mallory");
    CU_ASSERT_PTR_NOT_NULL_FATAL(server_keys);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mallory);
    s_server_t *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    zdist_rpc_server_options_t so;
    zdist_rpc_server_options_default(&so);
    so.keys = server_keys;
    so.log = s_log;
    so.log_state = s;
    zdist_error_t err = {0};
    s->server = zdist_rpc_server_new("tcp://127.0.0.1:*", s_methods, 2, &s->handled, &so, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s->server);
    pthread_create(&s->thread, NULL, s_loop, s);
    const char *ep = zdist_rpc_server_endpoint(s->server);

    CU_ASSERT_EQUAL(s_call(ep, worker, M_WRITE, 5000), ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(s_call(ep, worker, M_OPEN, 5000), ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(s_call(ep, alice, M_OPEN, 5000), ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(atomic_load(&s->handled), 3);
    /* a client key may not write: refused before the handler, logged with its key */
    CU_ASSERT_EQUAL(s_call(ep, alice, M_WRITE, 5000), ZDIST_STATUS_PERMISSION_DENIED);
    CU_ASSERT_EQUAL(atomic_load(&s->handled), 3);
    pthread_mutex_lock(&s->lock);
    CU_ASSERT_PTR_NOT_NULL(strstr(s->last_log, "'alice'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s->last_log, zdist_keys_public(server_keys, "alice")));
    pthread_mutex_unlock(&s->lock);
    /* a key not in the directory, and no key: the handshake fails and the
       client's monitor ends the call UNAUTHENTICATED, well before its deadline */
    int st = s_call(ep, mallory, M_OPEN, 4000);
    CU_ASSERT_EQUAL(st, ZDIST_STATUS_UNAUTHENTICATED);
    st = s_call(ep, NULL, M_OPEN, 4000);
    CU_ASSERT_EQUAL(st, ZDIST_STATUS_UNAUTHENTICATED);
    CU_ASSERT_EQUAL(atomic_load(&s->handled), 3);
    /* a server whose key the client does not have: refused up front */
    zdist_rpc_client_options_t co;
    zdist_rpc_client_options_default(&co);
    co.keys = alice;
    co.server_name = "ps-9";
    CU_ASSERT_PTR_NULL(zdist_rpc_client_new(ep, &co, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "'ps-9'"));

    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    zdist_rpc_server_destroy(&s->server);
    pthread_mutex_destroy(&s->lock);
    free(s);
    zdist_keys_destroy(&server_keys);
    zdist_keys_destroy(&worker);
    zdist_keys_destroy(&alice);
    zdist_keys_destroy(&mallory);
    zdist_test_rmtree(dir);
    zdist_test_rmtree(outsider_dir);
    free(dir);
    free(outsider_dir);
}

typedef struct {
    zdist_comm_t *comm;
    float data[4];
    int rc;
} s_rank_t;

static void *
s_reduce(void *arg)
{
    s_rank_t *r = arg;
    float *bufs[1] = {r->data};
    int64_t lens[1] = {4};
    zdist_error_t err = {0};
    r->rc = zdist_comm_all_reduce(r->comm, ZDIST_REDUCE_SUM, bufs, lens, 1, 10000, &err);
    if (r->rc < 0)
        fprintf(stderr, "ring: %s\n", err.text);
    return NULL;
}

static void
test_curve_ring(void)
{
    const char *names[] = {"worker-0", "worker-1"};
    char *dir = s_keydir(names, 2);
    zdist_keys_t *keys[2] = {s_load(dir, "worker-0"), s_load(dir, "worker-1")};
    s_rank_t ranks[2] = {{0}};
    const char *eps[2];
    for (int r = 0; r < 2; r++) {
        zdist_comm_config_t cc = {.rank = r, .size = 2, .bind = "tcp://127.0.0.1:*", .keys = keys[r]};
        zdist_error_t err = {0};
        ranks[r].comm = zdist_comm_new(&cc, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ranks[r].comm);
        eps[r] = zdist_comm_endpoint(ranks[r].comm);
        for (int i = 0; i < 4; i++)
            ranks[r].data[i] = (float) (r * 10 + i);
    }
    for (int r = 0; r < 2; r++) {
        zdist_error_t err = {0};
        CU_ASSERT_EQUAL_FATAL(zdist_comm_connect(ranks[r].comm, eps, &err), 0);
    }
    pthread_t t[2];
    for (int r = 0; r < 2; r++)
        pthread_create(&t[r], NULL, s_reduce, &ranks[r]);
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);
    for (int r = 0; r < 2; r++) {
        CU_ASSERT_EQUAL(ranks[r].rc, 0);
        CU_ASSERT_DOUBLE_EQUAL(ranks[r].data[3], 16.0, 1e-6);
        zdist_comm_destroy(&ranks[r].comm);
        zdist_keys_destroy(&keys[r]);
    }
    zdist_test_rmtree(dir);
    free(dir);
}

void
zdist_test_auth_register(void)
{
    ZDIST_SUITE("auth", {"keygen: files, modes, no overwrite, bad names", test_keygen_files_and_modes},
                {"load: own certificate, public keys, roles, endpoints", test_load_and_roles},
                {"CURVE RPC: roles, PERMISSION_DENIED, foreign and missing keys", test_curve_rpc_roles},
                {"CURVE ring between two workers", test_curve_ring});
}
