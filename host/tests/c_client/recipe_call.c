/* Recipe calls from ZooKeeper's stock C client (libzookeeper-mt), through
 * its public API only (docs/RECIPES.md, "Calling from any client"): a call
 * is an ephemeral sequential create under /zookeeper/calls/<module>/, with
 * JSON arguments; the node holds the result, and a waiting call finishes
 * by changing the node's data, which fires a zoo_wget watch.
 *
 * argv: HOSTS LOCK_PATH GO_FILE. A holder session takes the lock, a waiter
 * session's acquire waits (its node says "waiting") with a data watch on
 * its call node; prints "waiting", then waits until GO_FILE exists (the
 * test kills the leader first). The holder then releases (a call too), and
 * the waiter's watch must fire and its node hold the lock: prints
 * "held <data>". Exit 0 only if all of that happened, with the waiter's
 * session unchanged. */
#include <zookeeper/zookeeper.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile int changed = 0;

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static void data_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)state; (void)path; (void)ctx;
    if (type == ZOO_CHANGED_EVENT) changed = 1;
}

static int wait_connected(zhandle_t *zh) {
    for (int i = 0; i < 600 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++) usleep(100000);
    return zoo_state(zh) == ZOO_CONNECTED_STATE;
}

/* Makes a call; its node's path goes to `path`. Tries again on a lost
 * connection (the calls made here are safe to repeat). */
static int call(zhandle_t *zh, const char *method, const char *args, char *path, int len) {
    char node[128];
    snprintf(node, sizeof node, "/zookeeper/calls/lock/%s", method);
    int rc = ZCONNECTIONLOSS;
    for (int k = 0; k < 10 && (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT); k++) {
        if (k > 0) wait_connected(zh);
        rc = zoo_create(zh, node, args, (int)strlen(args), &ZOO_OPEN_ACL_UNSAFE,
                        ZOO_EPHEMERAL | ZOO_SEQUENCE, path, len);
    }
    return rc;
}

static int get(zhandle_t *zh, const char *path, watcher_fn w, char *data, int *len) {
    int rc = ZCONNECTIONLOSS;
    for (int k = 0; k < 10 && (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT); k++) {
        if (k > 0) wait_connected(zh);
        rc = zoo_wget(zh, path, w, NULL, data, len, NULL);
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t *holder = zookeeper_init(argv[1], session_watcher, 20000, NULL, NULL, 0);
    zhandle_t *waiter = zookeeper_init(argv[1], session_watcher, 20000, NULL, NULL, 0);
    if (!holder || !waiter || !wait_connected(holder) || !wait_connected(waiter)) {
        printf("no session\n");
        return 1;
    }
    char args[256], path[256], wpath[256], data[1024];
    int len;
    snprintf(args, sizeof args, "{\"path\":\"%s\"}", argv[2]);
    int rc = call(holder, "acquire", args, path, sizeof path);
    len = sizeof data - 1;
    if (rc == ZOK) rc = get(holder, path, NULL, data, &len);
    if (rc != ZOK) { printf("holder's acquire: %s\n", zerror(rc)); return 1; }
    data[len] = 0;
    printf("holder %s\n", data);
    rc = call(waiter, "acquire", args, wpath, sizeof wpath);
    len = sizeof data - 1;
    if (rc == ZOK) rc = get(waiter, wpath, data_watcher, data, &len);
    if (rc != ZOK) { printf("waiter's acquire: %s\n", zerror(rc)); return 1; }
    data[len] = 0;
    int64_t session = zoo_client_id(waiter)->client_id;
    printf("waiting %s %s\n", wpath, data);
    fflush(stdout);
    while (access(argv[3], F_OK) != 0) usleep(50000);
    rc = call(holder, "release", args, path, sizeof path);
    if (rc != ZOK) { printf("release: %s\n", zerror(rc)); return 1; }
    for (int i = 0; i < 600 && !changed; i++) usleep(100000);
    if (!changed) { printf("the waiter's watch never fired\n"); return 1; }
    len = sizeof data - 1;
    rc = get(waiter, wpath, NULL, data, &len);
    if (rc != ZOK) { printf("waiter's get: %s\n", zerror(rc)); return 1; }
    data[len] = 0;
    if (zoo_client_id(waiter)->client_id != session) { printf("session changed\n"); return 1; }
    printf("held %s\n", data);
    zookeeper_close(holder);
    zookeeper_close(waiter);
    return 0;
}
