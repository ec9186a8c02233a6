/* A lock shared by processes, from ZooKeeper's stock C client
 * (libzookeeper-mt), calling wazoo's built-in `lock` recipe through
 * standard operations only (docs/RECIPES.md, "Calling from any client"):
 * each run acquires /examples/lock, holds it, releases. Start several at
 * once: they take turns, in arrival order (ZooKeeper Recipes and
 * Solutions, "Locks", run server-side).
 *
 * A call is an ephemeral sequential create of
 * /zookeeper/calls/<module>/<method> with JSON arguments; the created node
 * holds {"done": RESULT}, or {"waiting": TOKEN} and later {"done": ...} or
 * {"error": ...}, which fires a zoo_wget watch.
 *
 * Against `cargo run --release -p wazoo -- dev` (127.0.0.1:2181), with
 * Debian's libzookeeper-mt-dev:
 *
 *   cc -DTHREADED -o target/c-lock examples/c/lock.c -lzookeeper_mt
 *   for i in 1 2 3; do target/c-lock & done; wait
 *
 * Arguments: [SERVER [PATH [HOLD_MS]]], defaults 127.0.0.1:2181,
 * /examples/lock, 1000. */
#include <zookeeper/zookeeper.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int fired = 0;

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

/* A call node's data watch: its data changed (or the node went). */
static void data_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
    pthread_mutex_lock(&mu);
    fired = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&mu);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Calls MODULE.METHOD with the JSON ARGS and waits (at most 60 s) for its
 * result: the node's final data ({"done": ...} or {"error": ...}) in
 * RESULT. 0 on success, else a ZooKeeper error code. */
static int call(zhandle_t *zh, const char *module, const char *method, const char *args,
                char *result, int size) {
    char path[256], node[256];
    snprintf(path, sizeof path, "/zookeeper/calls/%s/%s", module, method);
    int rc = zoo_create(zh, path, args, (int)strlen(args), &ZOO_OPEN_ACL_UNSAFE,
                        ZOO_EPHEMERAL | ZOO_SEQUENCE, node, sizeof node);
    if (rc != ZOK) return rc;
    double deadline = now() + 60;
    for (;;) {
        pthread_mutex_lock(&mu);
        fired = 0;
        pthread_mutex_unlock(&mu);
        int len = size - 1;
        rc = zoo_wget(zh, node, data_watcher, NULL, result, &len, NULL);
        if (rc != ZOK) break;
        result[len < 0 ? 0 : len] = 0;
        if (strncmp(result, "{\"waiting\"", 10) != 0) break;
        /* Waiting: sleep until the watch fires, then read again. */
        pthread_mutex_lock(&mu);
        while (!fired && now() < deadline) {
            struct timespec t;
            struct timeval tv;
            gettimeofday(&tv, NULL);
            t.tv_sec = tv.tv_sec + 1;
            t.tv_nsec = tv.tv_usec * 1000;
            pthread_cond_timedwait(&cond, &mu, &t);
        }
        pthread_mutex_unlock(&mu);
        if (now() >= deadline) { rc = ZOPERATIONTIMEOUT; break; }
    }
    zoo_delete(zh, node, -1); /* the node goes with the session anyway */
    return rc;
}

int main(int argc, char **argv) {
    const char *server = argc > 1 ? argv[1] : "127.0.0.1:2181";
    const char *lock = argc > 2 ? argv[2] : "/examples/lock";
    int hold_ms = argc > 3 ? atoi(argv[3]) : 1000;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t *zh = zookeeper_init(server, session_watcher, 10000, NULL, NULL, 0);
    for (int i = 0; zh && i < 300 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++) usleep(100000);
    if (!zh || zoo_state(zh) != ZOO_CONNECTED_STATE) {
        fprintf(stderr, "no session on %s\n", server);
        return 1;
    }
    char args[512], result[1024];
    int pid = (int)getpid();
    snprintf(args, sizeof args, "{\"path\":\"%s\",\"id\":\"pid %d\"}", lock, pid);
    printf("pid %d: waiting for %s\n", pid, lock);
    fflush(stdout);
    double start = now();
    int rc = call(zh, "lock", "acquire", args, result, sizeof result);
    if (rc != ZOK || strncmp(result, "{\"done\":", 8) != 0) {
        fprintf(stderr, "pid %d: acquire: %s %s\n", pid, zerror(rc), rc == ZOK ? result : "");
        return 1;
    }
    /* {"done":"/examples/lock/<guid>__lock__<seq>"}: the lock node. */
    char *held = result + 8;
    if (*held == '"') held++;
    held[strcspn(held, "\"}")] = 0;
    printf("pid %d: acquired after %.1f s as %s\n", pid, now() - start, held);
    fflush(stdout);
    usleep(hold_ms * 1000);
    snprintf(args, sizeof args, "{\"path\":\"%s\"}", lock);
    rc = call(zh, "lock", "release", args, result, sizeof result);
    if (rc != ZOK || strncmp(result, "{\"done\":", 8) != 0) {
        fprintf(stderr, "pid %d: release: %s %s\n", pid, zerror(rc), rc == ZOK ? result : "");
        return 1;
    }
    printf("pid %d: released\n", pid);
    zookeeper_close(zh);
    return 0;
}
