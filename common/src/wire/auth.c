/* zdist keys: the key directory, certificate names and roles, and a ZAP
   handler per ZeroMQ context that admits the directory's public keys. */
#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdist/auth.h"
#include "zdist/endpoint.h"

#define S_NAME_MAX 64
#define S_Z85_LEN 40 /* a 32-byte key in Z85 */
#define S_ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define S_ZAP_DOMAIN "zdist"

typedef struct {
    char name[S_NAME_MAX];
    char pub[S_Z85_LEN + 1];
} s_entry_t;

/* Which certificate serves an endpoint. A list the newest first, never
   changed in place: a place learned while the daemon runs (a worker that
   joined) is prepended under places_lock and published atomically, so
   readers on other threads walk it without the lock and the names they
   got stay valid until the keys are destroyed. */
typedef struct s_place_t {
    struct s_place_t *next;
    char endpoint[256];
    char name[S_NAME_MAX];
} s_place_t;

struct zdist_keys_t {
    char *dir;
    char self_name[S_NAME_MAX];
    char self_pub[S_Z85_LEN + 1];
    char self_secret[S_Z85_LEN + 1];
    s_entry_t *keys;
    size_t nkeys;
    s_place_t *_Atomic places;
    pthread_mutex_t places_lock;
    char default_server[S_NAME_MAX]; /* --server-key: "" none */
    bool holds_process_zap;
};

/* ---- names and roles ---- */

static bool
s_valid_name(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= S_NAME_MAX || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.'))
            return false;
    }
    return true;
}

static bool
s_prefixed(const char *name, const char *type)
{
    size_t n = strlen(type);
    return strncmp(name, type, n) == 0 && name[n] == '-';
}

unsigned
zdist_keys_role_of(const char *name)
{
    if (!name)
        return ZDIST_ROLE_CLIENT;
    if (s_prefixed(name, "ps"))
        return ZDIST_ROLE_PS;
    if (s_prefixed(name, "worker"))
        return ZDIST_ROLE_WORKER;
    if (s_prefixed(name, "chief"))
        return ZDIST_ROLE_CHIEF;
    if (s_prefixed(name, "evaluator"))
        return ZDIST_ROLE_EVALUATOR;
    return ZDIST_ROLE_CLIENT;
}

/* ---- keygen ---- */

/* Creates (or, with force, truncates) path with mode, so the secret is
   never readable by others, not even between create and chmod. */
static int
s_create(const char *path, mode_t mode, bool force, zdist_error_t *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), mode);
    if (fd < 0) {
        if (errno == EEXIST)
            return zdist_error_set(err, -EEXIST, "'%s' exists; pass --force to replace the certificate", path);
        return zdist_error_set(err, -errno, "cannot create '%s': %s", path, strerror(errno));
    }
    int rc = fchmod(fd, mode) == 0 ? 0 : -errno;
    close(fd);
    if (rc < 0)
        return zdist_error_set(err, rc, "cannot set the mode of '%s': %s", path, strerror(-rc));
    return 0;
}

int
zdist_keys_generate(const char *dir, const char *name, bool force, zdist_error_t *err)
{
    if (!s_valid_name(name))
        return zdist_error_set(err, -EINVAL,
                               "key name '%s' is not valid: use letters, digits, '-', '_' and '.' (e.g. ps-0, alice)",
                               name ? name : "");
    if (!dir || !*dir)
        dir = ".";
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return zdist_error_set(err, -errno, "cannot create key directory '%s': %s", dir, strerror(errno));
    char pub[PATH_MAX], sec[PATH_MAX];
    if ((size_t) snprintf(pub, sizeof pub, "%s/%s.key", dir, name) >= sizeof pub ||
        (size_t) snprintf(sec, sizeof sec, "%s/%s.key_secret", dir, name) >= sizeof sec)
        return zdist_error_set(err, -ENAMETOOLONG, "key directory '%s' is too long", dir);
    int rc = s_create(sec, 0600, force, err);
    if (rc < 0)
        return rc;
    if ((rc = s_create(pub, 0644, force, err)) < 0) {
        if (rc == -EEXIST && !force)
            unlink(sec);
        return rc;
    }
    zcert_t *cert = zcert_new();
    if (!cert)
        return zdist_error_set(err, -ENOMEM, "cannot create a certificate (libsodium)");
    zcert_set_meta(cert, "name", "%s", name);
    rc = zcert_save(cert, pub);
    zcert_destroy(&cert);
    if (rc != 0) {
        unlink(sec);
        unlink(pub);
        return zdist_error_set(err, -EIO, "cannot write '%s'", pub);
    }
    return 0;
}

/* ---- loading ---- */

void
zdist_keys_destroy(zdist_keys_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_keys_t *self = *self_p;
    if (self->holds_process_zap)
        zdist_keys_zap_release(zsys_init());
    if (zdist_keys_process() == self)
        zdist_keys_set_process(NULL);
    memset(self->self_secret, 0, sizeof self->self_secret);
    free(self->keys);
    for (s_place_t *p = atomic_load(&self->places), *next; p; p = next) {
        next = p->next;
        free(p);
    }
    pthread_mutex_destroy(&self->places_lock);
    free(self->dir);
    free(self);
    *self_p = NULL;
}

static int
s_add_key(zdist_keys_t *self, const char *name, const char *pub)
{
    s_entry_t *grown = realloc(self->keys, (self->nkeys + 1) * sizeof *grown);
    if (!grown)
        return -ENOMEM;
    self->keys = grown;
    snprintf(grown[self->nkeys].name, sizeof grown->name, "%s", name);
    snprintf(grown[self->nkeys].pub, sizeof grown->pub, "%s", pub);
    self->nkeys++;
    return 0;
}

/* Reads DIR/NAME.key's public key (the public file only). */
static int
s_read_public(const char *dir, const char *name, char *pub, zdist_error_t *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.key", dir, name);
    zconfig_t *root = zconfig_load(path);
    const char *txt = root ? zconfig_get(root, "/curve/public-key", NULL) : NULL;
    int rc = 0;
    if (!txt || strlen(txt) != S_Z85_LEN)
        rc = zdist_error_set(err, -EINVAL, "'%s' is not a CURVE public certificate; recreate it with zdist keygen %s",
                             path, name);
    else
        snprintf(pub, S_Z85_LEN + 1, "%s", txt);
    zconfig_destroy(&root);
    return rc;
}

static int
s_scan(zdist_keys_t *self, zdist_error_t *err)
{
    DIR *d = opendir(self->dir);
    if (!d)
        return zdist_error_set(err, -errno, "cannot read key directory '%s': %s; create it with zdist keygen NAME --dir %s",
                               self->dir, strerror(errno), self->dir);
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n <= 4 || strcmp(e->d_name + n - 4, ".key") != 0 || n - 4 >= S_NAME_MAX)
            continue;
        char name[S_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", (int) (n - 4), e->d_name);
        if (!s_valid_name(name))
            continue;
        char pub[S_Z85_LEN + 1];
        if ((rc = s_read_public(self->dir, name, pub, err)) == 0 && (rc = s_add_key(self, name, pub)) < 0)
            zdist_error_set(err, rc, "out of memory");
    }
    closedir(d);
    return rc;
}

/* DIR/servers: "HOST:PORT NAME" lines (see auth.h); absent is fine. */
static int
s_load_servers(zdist_keys_t *self, zdist_error_t *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", self->dir, ZDIST_KEYS_SERVERS_FILE);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[512];
    int rc = 0, n = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        n++;
        char addr[300], name[S_NAME_MAX + 1], extra[2], ep[320], norm[320];
        int k = line[strspn(line, " \t")] == '#' ? 0 : sscanf(line, "%299s %64s %1s", addr, name, extra);
        if (k <= 0)
            continue;
        snprintf(ep, sizeof ep, "%s%s", strncmp(addr, "tcp://", 6) ? "tcp://" : "", addr);
        if (k != 2 || !s_valid_name(name) || zdist_endpoint_normalize(ep, norm, sizeof norm, NULL) < 0)
            rc = zdist_error_set(err, -EINVAL, "%s line %d: write 'HOST:PORT NAME' (e.g. '127.0.0.1:5000 ps-0')",
                                 path, n);
        else if (zdist_keys_add_endpoint(self, norm, name) < 0)
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
    }
    fclose(f);
    return rc;
}

static int
s_load_self(zdist_keys_t *self, const char *name, zdist_error_t *err)
{
    if (!s_valid_name(name))
        return zdist_error_set(err, -EINVAL, "key name '%s' is not valid (--key NAME: e.g. client, alice, worker-0)",
                               name ? name : "");
    char sec[PATH_MAX];
    snprintf(sec, sizeof sec, "%s/%s.key_secret", self->dir, name);
    struct stat st;
    if (stat(sec, &st) != 0)
        return zdist_error_set(err, -ENOENT, "no certificate '%s': create it with zdist keygen %s --dir %s", sec, name,
                               self->dir);
    if (st.st_mode & 077)
        return zdist_error_set(err, -EPERM, "'%s' is readable by others (mode %04o): chmod 600 it", sec,
                               (unsigned) (st.st_mode & 07777));
    zconfig_t *root = zconfig_load(sec);
    const char *pub = root ? zconfig_get(root, "/curve/public-key", NULL) : NULL;
    const char *secret = root ? zconfig_get(root, "/curve/secret-key", NULL) : NULL;
    int rc = 0;
    if (!pub || !secret || strlen(pub) != S_Z85_LEN || strlen(secret) != S_Z85_LEN)
        rc = zdist_error_set(err, -EINVAL, "'%s' is not a CURVE secret certificate; recreate it with zdist keygen %s",
                             sec, name);
    else {
        snprintf(self->self_name, sizeof self->self_name, "%s", name);
        snprintf(self->self_pub, sizeof self->self_pub, "%s", pub);
        snprintf(self->self_secret, sizeof self->self_secret, "%s", secret);
    }
    zconfig_destroy(&root);
    return rc;
}

int
zdist_keys_load(const char *dir, const char *self_name, zdist_keys_t **ret_keys, zdist_error_t *err)
{
    if (!dir || !*dir)
        dir = getenv(ZDIST_KEYS_ENV);
    if (!dir || !*dir) {
        *ret_keys = NULL;
        return 0;
    }
    zdist_keys_t *self = calloc(1, sizeof *self);
    if (!self || !(self->dir = strdup(dir))) {
        free(self);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&self->places_lock, NULL);
    int rc = s_scan(self, err);
    if (rc == 0)
        rc = s_load_servers(self, err);
    if (rc == 0)
        rc = s_load_self(self, self_name, err);
    if (rc == 0 && !zdist_keys_public(self, self_name))
        rc = zdist_error_set(err, -ENOENT, "no public certificate '%s/%s.key' next to the secret one; recreate it with "
                             "zdist keygen %s --force", dir, self_name, self_name);
    if (rc < 0) {
        zdist_keys_destroy(&self);
        return rc;
    }
    *ret_keys = self;
    return 0;
}

const char *
zdist_keys_dir(const zdist_keys_t *self)
{
    return self->dir;
}

const char *
zdist_keys_self_name(const zdist_keys_t *self)
{
    return self->self_name;
}

const char *
zdist_keys_public(const zdist_keys_t *self, const char *name)
{
    for (size_t i = 0; name && i < self->nkeys; i++)
        if (strcmp(self->keys[i].name, name) == 0)
            return self->keys[i].pub;
    return NULL;
}

/* ---- endpoints ---- */

int
zdist_keys_add_endpoint(zdist_keys_t *self, const char *endpoint, const char *name)
{
    char norm[256];
    if (zdist_endpoint_normalize(endpoint, norm, sizeof norm, NULL) < 0)
        snprintf(norm, sizeof norm, "%s", endpoint);
    const char *now = zdist_keys_name_at(self, norm);
    if (now && now != self->default_server && strcmp(now, name) == 0)
        return 0;
    s_place_t *place = calloc(1, sizeof *place);
    if (!place)
        return -ENOMEM;
    snprintf(place->endpoint, sizeof place->endpoint, "%s", norm);
    snprintf(place->name, sizeof place->name, "%s", name);
    pthread_mutex_lock(&self->places_lock);
    place->next = atomic_load(&self->places);
    atomic_store(&self->places, place);
    pthread_mutex_unlock(&self->places_lock);
    return 0;
}

int
zdist_keys_learn_cluster(zdist_keys_t *self, const zdist_cluster_t *cluster)
{
    for (size_t j = 0; cluster && j < zdist_cluster_num_jobs(cluster); j++) {
        const char *job = zdist_cluster_job_name(cluster, j);
        for (size_t t = 0; t < zdist_cluster_num_tasks(cluster, job); t++) {
            int index = 0;
            char endpoint[256], name[S_NAME_MAX];
            if (zdist_cluster_job_task(cluster, job, t, &index, NULL) < 0 ||
                zdist_cluster_endpoint(cluster, job, index, endpoint, sizeof endpoint) < 0)
                continue;
            snprintf(name, sizeof name, "%s-%d", job, index);
            int rc = zdist_keys_add_endpoint(self, endpoint, name);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

const char *
zdist_keys_name_at(const zdist_keys_t *self, const char *endpoint)
{
    char norm[256];
    if (!endpoint)
        return NULL;
    if (zdist_endpoint_normalize(endpoint, norm, sizeof norm, NULL) < 0)
        snprintf(norm, sizeof norm, "%s", endpoint);
    for (const s_place_t *p = atomic_load(&self->places); p; p = p->next)
        if (strcmp(p->endpoint, norm) == 0)
            return p->name;
    return self->default_server[0] ? self->default_server : NULL;
}

int
zdist_keys_set_default_server(zdist_keys_t *self, const char *name, zdist_error_t *err)
{
    if (!s_valid_name(name))
        return zdist_error_set(err, -EINVAL, "--server-key '%s': not a certificate name (e.g. ps-0, chief-0)",
                               name ? name : "");
    if (!zdist_keys_public(self, name))
        return zdist_error_set(err, -ENOENT, "--server-key %s: no '%s/%s.key'; copy the server's public key there",
                               name, self->dir, name);
    snprintf(self->default_server, sizeof self->default_server, "%s", name);
    return 0;
}

/* ---- the ZAP handler: one thread per context ---- */

typedef struct s_zap_t {
    struct s_zap_t *next;
    void *ctx;
    int refs;
    void *rep;      /* bound to inproc://zeromq.zap.01 in ctx */
    void *ctl_main; /* our end of the stop pipe */
    void *ctl_thread;
    pthread_t thread;
    s_entry_t *keys; /* a copy: the handler may outlive the keys object */
    size_t nkeys;
} s_zap_t;

static pthread_mutex_t s_zap_lock = PTHREAD_MUTEX_INITIALIZER;
static s_zap_t *s_zaps;

static void
s_zap_reply(void *rep, zmq_msg_t *frames, int n, const char *code, const char *text, const char *user)
{
    const char *parts[6] = {"1.0", "", code, text, user, ""};
    for (int i = 0; i < 6; i++) {
        int more = i < 5 ? ZMQ_SNDMORE : 0;
        if (i == 1 && n > 1)
            zmq_send(rep, zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]), more);
        else
            zmq_send(rep, parts[i], strlen(parts[i]), more);
    }
}

/* One ZAP request (RFC 27): version, request id, domain, address,
   identity, mechanism, credentials. CURVE keys of the directory get 200
   with the certificate's name as User-Id; anything else 400. */
static void
s_zap_handle(s_zap_t *zap)
{
    zmq_msg_t frames[8];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, zap->rep, 0) < 0) {
            zmq_msg_close(&f);
            break;
        }
        more = zmq_msg_more(&f);
        if (n < 8) {
            zmq_msg_init(&frames[n]);
            zmq_msg_move(&frames[n++], &f);
        }
        zmq_msg_close(&f);
    }
    const char *name = NULL;
    if (n >= 7 && zmq_msg_size(&frames[5]) == 5 && memcmp(zmq_msg_data(&frames[5]), "CURVE", 5) == 0 &&
        zmq_msg_size(&frames[6]) == 32) {
        char pub[S_Z85_LEN + 1];
        if (zmq_z85_encode(pub, zmq_msg_data(&frames[6]), 32))
            for (size_t i = 0; i < zap->nkeys && !name; i++)
                if (strcmp(zap->keys[i].pub, pub) == 0)
                    name = zap->keys[i].name;
    }
    if (name)
        s_zap_reply(zap->rep, frames, n, "200", "OK", name);
    else
        s_zap_reply(zap->rep, frames, n, "400", "key not in the key directory", "");
    for (int i = 0; i < n; i++)
        zmq_msg_close(&frames[i]);
}

static void *
s_zap_thread(void *arg)
{
    s_zap_t *zap = arg;
    for (;;) {
        zmq_pollitem_t items[] = {{zap->rep, 0, ZMQ_POLLIN, 0}, {zap->ctl_thread, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, 2, -1) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            break;
        }
        if (items[1].revents & ZMQ_POLLIN)
            break;
        if (items[0].revents & ZMQ_POLLIN)
            s_zap_handle(zap);
    }
    zmq_close(zap->rep);
    zmq_close(zap->ctl_thread);
    return NULL;
}

static void
s_zap_free(s_zap_t *zap)
{
    if (zap->rep)
        zmq_close(zap->rep);
    if (zap->ctl_thread)
        zmq_close(zap->ctl_thread);
    if (zap->ctl_main)
        zmq_close(zap->ctl_main);
    free(zap->keys);
    free(zap);
}

static int
s_zap_start(const zdist_keys_t *keys, void *ctx, zdist_error_t *err)
{
    pthread_mutex_lock(&s_zap_lock);
    for (s_zap_t *z = s_zaps; z; z = z->next)
        if (z->ctx == ctx) {
            z->refs++;
            pthread_mutex_unlock(&s_zap_lock);
            return 0;
        }
    s_zap_t *zap = calloc(1, sizeof *zap);
    int rc = -ENOMEM;
    if (!zap || !(zap->keys = malloc((keys->nkeys ? keys->nkeys : 1) * sizeof *zap->keys)))
        goto fail;
    memcpy(zap->keys, keys->keys, keys->nkeys * sizeof *zap->keys);
    zap->nkeys = keys->nkeys;
    zap->ctx = ctx;
    zap->refs = 1;
    char ctl[64];
    snprintf(ctl, sizeof ctl, "inproc://zdist-zap-ctl-%p", (void *) zap);
    zap->rep = zmq_socket(ctx, ZMQ_REP);
    zap->ctl_main = zmq_socket(ctx, ZMQ_PAIR);
    zap->ctl_thread = zmq_socket(ctx, ZMQ_PAIR);
    int linger = 0;
    if (!zap->rep || !zap->ctl_main || !zap->ctl_thread ||
        zmq_setsockopt(zap->rep, ZMQ_LINGER, &linger, sizeof linger) != 0 || zmq_bind(zap->rep, S_ZAP_ENDPOINT) != 0 ||
        zmq_bind(zap->ctl_thread, ctl) != 0 || zmq_connect(zap->ctl_main, ctl) != 0) {
        rc = -zmq_errno();
        goto fail;
    }
    if ((rc = -pthread_create(&zap->thread, NULL, s_zap_thread, zap)) < 0)
        goto fail;
    zap->next = s_zaps;
    s_zaps = zap;
    pthread_mutex_unlock(&s_zap_lock);
    return 0;
fail:
    pthread_mutex_unlock(&s_zap_lock);
    if (zap)
        s_zap_free(zap);
    return zdist_error_set(err, rc, "cannot start the ZAP handler: %s", zmq_strerror(-rc));
}

void
zdist_keys_zap_release(void *ctx)
{
    pthread_mutex_lock(&s_zap_lock);
    s_zap_t **p = &s_zaps;
    while (*p && (*p)->ctx != ctx)
        p = &(*p)->next;
    s_zap_t *zap = *p;
    if (!zap || --zap->refs > 0) {
        pthread_mutex_unlock(&s_zap_lock);
        return;
    }
    *p = zap->next;
    pthread_mutex_unlock(&s_zap_lock);
    zmq_send(zap->ctl_main, "", 0, 0);
    pthread_join(zap->thread, NULL);
    zap->rep = zap->ctl_thread = NULL; /* closed by the thread */
    s_zap_free(zap);
}

/* ---- sockets ---- */

static int
s_setopt(void *socket, int option, const void *value, size_t len, const char *what, zdist_error_t *err)
{
    if (zmq_setsockopt(socket, option, value, len) == 0)
        return 0;
    int rc = -zmq_errno();
    return zdist_error_set(err, rc, "cannot set %s: %s (is libzmq built with CURVE?)", what, zmq_strerror(-rc));
}

static void s_zap_atexit(void);

static void
s_register_atexit(void)
{
    atexit(s_zap_atexit);
}

/* czmq terminates its context at exit and would wait forever for the
   handler's socket when main returns early without destroying its keys;
   registered after zsys_init's handler, this runs before it. */
static void
s_zap_atexit(void)
{
    void *process_ctx = zsys_init();
    for (;;) {
        pthread_mutex_lock(&s_zap_lock);
        s_zap_t *z = s_zaps;
        while (z && z->ctx != process_ctx)
            z = z->next;
        if (z)
            z->refs = 1;
        pthread_mutex_unlock(&s_zap_lock);
        if (!z)
            return;
        zdist_keys_zap_release(process_ctx);
    }
}

int
zdist_keys_apply_server(zdist_keys_t *self, void *ctx, void *socket, zdist_error_t *err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    void *process_ctx = zsys_init();
    if (!ctx)
        ctx = process_ctx;
    if (ctx == process_ctx)
        pthread_once(&once, s_register_atexit);
    if (ctx != process_ctx || !self->holds_process_zap) {
        int rc = s_zap_start(self, ctx, err);
        if (rc < 0)
            return rc;
        if (ctx == process_ctx)
            self->holds_process_zap = true;
    }
    int one = 1;
    int rc = s_setopt(socket, ZMQ_ZAP_DOMAIN, S_ZAP_DOMAIN, strlen(S_ZAP_DOMAIN), "the ZAP domain", err);
    if (rc == 0)
        rc = s_setopt(socket, ZMQ_CURVE_SERVER, &one, sizeof one, "CURVE server", err);
    if (rc == 0)
        rc = s_setopt(socket, ZMQ_CURVE_SECRETKEY, self->self_secret, S_Z85_LEN + 1, "the CURVE secret key", err);
    return rc;
}

int
zdist_keys_apply_client(const zdist_keys_t *self, void *socket, const char *server_name, zdist_error_t *err)
{
    const char *server = zdist_keys_public(self, server_name);
    if (!server)
        return server_name ? zdist_error_set(err, -ENOENT, "no public key for '%s' in '%s': copy %s.key there",
                                             server_name, self->dir, server_name)
                           : zdist_error_set(err, -ENOENT, "which server's key to trust at this address is not "
                                             "known: give --server-key NAME (e.g. ps-0), TF_CONFIG (or --cluster), "
                                             "or a line 'HOST:PORT NAME' in %s/%s", self->dir,
                                             ZDIST_KEYS_SERVERS_FILE);
    int rc = s_setopt(socket, ZMQ_CURVE_SERVERKEY, server, S_Z85_LEN + 1, "the CURVE server key", err);
    if (rc == 0)
        rc = s_setopt(socket, ZMQ_CURVE_PUBLICKEY, self->self_pub, S_Z85_LEN + 1, "the CURVE public key", err);
    if (rc == 0)
        rc = s_setopt(socket, ZMQ_CURVE_SECRETKEY, self->self_secret, S_Z85_LEN + 1, "the CURVE secret key", err);
    return rc;
}

/* ---- the process's keys ---- */

static zdist_keys_t *s_process_keys;

void
zdist_keys_set_process(zdist_keys_t *keys)
{
    s_process_keys = keys;
}

zdist_keys_t *
zdist_keys_process(void)
{
    return s_process_keys;
}
