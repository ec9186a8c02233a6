/* Null data through ZooKeeper's C client (libzookeeper-mt): a node
 * created or set with a NULL value of length -1 reads back with
 * buffer_len -1 from zoo_get, as ZooKeeper answers a null buffer; empty
 * data reads back with buffer_len 0. argv[1] is the server list, argv[2]
 * a path that does not exist yet (the test's own). Prints one line per
 * check, "what: rc len N dataLength M"; exit 0 unless a call failed to
 * run at all. */
#include <zookeeper/zookeeper.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static zhandle_t *zh;

/* zoo_get of `path` into a buffer with room for 16 bytes. */
static void show(const char *what, const char *path) {
    char buf[16];
    int len = sizeof buf;
    struct Stat st;
    memset(&st, 0, sizeof st);
    int rc = zoo_get(zh, path, 0, buf, &len, &st);
    printf("%s: %s len %d dataLength %d\n", what, zerror(rc), len, st.dataLength);
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh = zookeeper_init(argv[1], watcher, 20000, NULL, NULL, 0);
    for (int i = 0; zh && i < 300 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++) usleep(100000);
    if (!zh || zoo_state(zh) != ZOO_CONNECTED_STATE) { printf("no session\n"); return 1; }
    const char *base = argv[2];
    char null_path[256], empty_path[256], multi_path[256], created[256];
    snprintf(null_path, sizeof null_path, "%s/null", base);
    snprintf(empty_path, sizeof empty_path, "%s/empty", base);
    snprintf(multi_path, sizeof multi_path, "%s/multi", base);
    int rc = zoo_create(zh, base, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, created, sizeof created);
    printf("create base: %s\n", zerror(rc));
    rc = zoo_create(zh, null_path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, created, sizeof created);
    printf("create null: %s\n", zerror(rc));
    show("get null", null_path);
    rc = zoo_create(zh, empty_path, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, created, sizeof created);
    printf("create empty: %s\n", zerror(rc));
    show("get empty", empty_path);
    rc = zoo_set(zh, null_path, "x", 1, -1);
    printf("set x: %s\n", zerror(rc));
    show("get x", null_path);
    rc = zoo_set(zh, null_path, NULL, -1, -1);
    printf("set null: %s\n", zerror(rc));
    show("get set null", null_path);

    zoo_op_t ops[2];
    zoo_op_result_t results[2];
    struct Stat st;
    zoo_create_op_init(&ops[0], multi_path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, created, sizeof created);
    zoo_set_op_init(&ops[1], empty_path, NULL, -1, -1, &st);
    rc = zoo_multi(zh, 2, ops, results);
    printf("multi create null, set null: %s\n", zerror(rc));
    show("get multi create", multi_path);
    show("get multi set", empty_path);
    show("get /zookeeper", "/zookeeper");
    zookeeper_close(zh);
    return 0;
}
