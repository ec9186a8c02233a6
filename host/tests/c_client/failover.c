/* A ZooKeeper C client (libzookeeper-mt) session that moves to another
 * member when the one it is on dies. Prints "connected HOST:PORT", waits
 * until the file argv[2] exists (the test kills that member first), waits
 * to be connected again, then creates three ephemeral-sequential nodes and
 * prints each result. Exit 0 only if the session survived and every create
 * succeeded. */
#include <zookeeper/zookeeper.h>
#include <stdio.h>
#include <unistd.h>

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static int wait_connected(zhandle_t *zh) {
    for (int i = 0; i < 300 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++) usleep(100000);
    return zoo_state(zh) == ZOO_CONNECTED_STATE;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t *zh = zookeeper_init(argv[1], watcher, 20000, NULL, NULL, 0);
    if (!zh || !wait_connected(zh)) { printf("no session\n"); return 1; }
    char path[256];
    int rc = zoo_create(zh, "/c-client", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, path, sizeof path);
    if (rc != ZOK && rc != ZNODEEXISTS) { printf("create parent: %s\n", zerror(rc)); return 1; }
    /* A loaded machine may time the first write out: that is not what
     * this program checks, so it tries again. */
    for (int k = 0; k < 5; k++) {
        rc = zoo_create(zh, "/c-client/n-", "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE, path, sizeof path);
        if (rc != ZOPERATIONTIMEOUT && rc != ZCONNECTIONLOSS) break;
        wait_connected(zh);
    }
    if (rc != ZOK) { printf("create before: %s\n", zerror(rc)); return 1; }
    int64_t session = zoo_client_id(zh)->client_id;
    printf("connected %s\n", zoo_get_current_server(zh));
    fflush(stdout);
    while (access(argv[2], F_OK) != 0) usleep(50000);
    usleep(300000);
    if (!wait_connected(zh)) { printf("not reconnected\n"); return 1; }
    printf("now %s\n", zoo_get_current_server(zh));
    if (zoo_client_id(zh)->client_id != session) { printf("session changed\n"); return 1; }
    int failed = 0;
    for (int k = 0; k < 3; k++) {
        rc = zoo_create(zh, "/c-client/n-", "y", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE, path, sizeof path);
        printf("create after: %s\n", zerror(rc));
        failed |= rc != ZOK;
    }
    zookeeper_close(zh);
    return failed;
}
