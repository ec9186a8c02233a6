/* ZooKeeper's C client (libzookeeper-mt) through a session of basic
 * operations and watches: create (plain, sequential, ephemeral), get, set
 * and delete with versions, exists and children, multi, digest ACLs and
 * the watch events those changes fire, for host/tests/c_client_basics.rs.
 * argv[1] is the server list, argv[2] a path that does not exist yet (the
 * test's own). Prints one line per step, paths relative to argv[2], and
 * one "event: TYPE PATH" line per watch event, in the order the client
 * delivered them; every step waits (bounded) for the events it expects,
 * and a step that expects none proves it with a sentinel node's event.
 * Exits 0 unless a session could not be opened. */
#include <zookeeper/zookeeper.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *base;
static size_t base_len;

#define MAX_EVENTS 64
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char events[MAX_EVENTS][160];
static int recorded, printed;

static const char *rel(const char *path) {
    if (path && strncmp(path, base, base_len) == 0)
        return path[base_len] ? path + base_len : "(base)";
    return path ? path : "(null)";
}

static const char *type_name(int type) {
    if (type == ZOO_CREATED_EVENT) return "created";
    if (type == ZOO_DELETED_EVENT) return "deleted";
    if (type == ZOO_CHANGED_EVENT) return "changed";
    if (type == ZOO_CHILD_EVENT) return "child";
    if (type == ZOO_NOTWATCHING_EVENT) return "notwatching";
    return "other";
}

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)state; (void)ctx;
    if (type == ZOO_SESSION_EVENT) return;
    pthread_mutex_lock(&lock);
    if (recorded < MAX_EVENTS)
        snprintf(events[recorded++], sizeof events[0], "event: %s %s", type_name(type), rel(path));
    pthread_mutex_unlock(&lock);
}

/* Waits (at most 10 s) until `n` more events than printed arrived, then
 * prints every event not printed yet. */
static void events_after(int n) {
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&lock);
        int have = recorded - printed;
        pthread_mutex_unlock(&lock);
        if (have >= n) break;
        usleep(10000);
    }
    pthread_mutex_lock(&lock);
    while (printed < recorded) printf("%s\n", events[printed++]);
    pthread_mutex_unlock(&lock);
}

static zhandle_t *open_session(const char *hosts) {
    zhandle_t *zh = zookeeper_init(hosts, session_watcher, 20000, NULL, NULL, 0);
    for (int i = 0; zh && i < 300 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++) usleep(100000);
    if (!zh || zoo_state(zh) != ZOO_CONNECTED_STATE) {
        printf("no session\n");
        exit(1);
    }
    return zh;
}

static char *at(const char *name) {
    static char paths[8][256];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 256, "%s%s", base, name);
    return p;
}

/* No event is pending: an exists watch on a fresh node, then its creation;
 * the server sends a session's events in the order of the changes. */
static void no_more_events(zhandle_t *zh, const char *sentinel) {
    struct Stat st;
    int rc = zoo_wexists(zh, at(sentinel), watcher, NULL, &st);
    rc = zoo_create(zh, at(sentinel), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    printf("sentinel %s: %s\n", sentinel, zerror(rc));
    events_after(1);
}

static void show_get(zhandle_t *zh, const char *what, const char *name, int watch) {
    char buf[64];
    int len = sizeof buf - 1;
    struct Stat st;
    memset(&st, 0, sizeof st);
    int rc = watch ? zoo_wget(zh, at(name), watcher, NULL, buf, &len, &st)
                   : zoo_get(zh, at(name), 0, buf, &len, &st);
    if (rc != ZOK) {
        printf("%s: %s\n", what, zerror(rc));
        return;
    }
    buf[len < 0 ? 0 : len] = 0;
    printf("%s: ok data '%s' version %d dataLength %d numChildren %d ephemeral %s\n", what, buf,
           st.version, st.dataLength, st.numChildren, st.ephemeralOwner ? "yes" : "no");
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void show_children(zhandle_t *zh, const char *what, const char *name, int watch) {
    struct String_vector kids;
    int rc = watch ? zoo_wget_children(zh, at(name), watcher, NULL, &kids)
                   : zoo_get_children(zh, at(name), 0, &kids);
    printf("%s: %s [", what, zerror(rc));
    if (rc == ZOK) {
        qsort(kids.data, kids.count, sizeof kids.data[0], by_name);
        for (int i = 0; i < kids.count; i++) printf("%s%s", i ? " " : "", kids.data[i]);
        deallocate_String_vector(&kids);
    }
    printf("]\n");
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    base = argv[2];
    base_len = strlen(base);
    zhandle_t *zh = open_session(argv[1]);
    zhandle_t *other = open_session(argv[1]);
    char created[256];
    struct Stat st;
    int rc;

    rc = zoo_create(zh, base, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    printf("create base: %s\n", zerror(rc));
    rc = zoo_create(zh, at("/a"), "v0", 2, &ZOO_OPEN_ACL_UNSAFE, 0, created, sizeof created);
    printf("create a: %s %s\n", zerror(rc), rel(created));
    rc = zoo_create(zh, at("/a"), "again", 5, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    printf("create a again: %s\n", zerror(rc));
    rc = zoo_create(zh, at("/missing/child"), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    printf("create under a missing parent: %s\n", zerror(rc));

    /* A data watch fires once, on the next change by anyone. */
    show_get(zh, "get a (watch)", "/a", 1);
    rc = zoo_set(other, at("/a"), "v1", 2, 0);
    printf("other sets a at version 0: %s\n", zerror(rc));
    events_after(1);
    rc = zoo_set(zh, at("/a"), "stale", 5, 0);
    printf("set a at version 0 again: %s\n", zerror(rc));
    rc = zoo_set(zh, at("/a"), "v2", 2, -1);
    printf("set a at any version: %s\n", zerror(rc));
    show_get(zh, "get a", "/a", 0);
    no_more_events(zh, "/sentinel-1");

    /* An exists watch on a missing node fires on its creation. */
    rc = zoo_wexists(zh, at("/b"), watcher, NULL, &st);
    printf("exists b (watch): %s\n", zerror(rc));
    rc = zoo_create(other, at("/b"), NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    printf("other creates b with null data: %s\n", zerror(rc));
    events_after(1);
    show_get(zh, "get b", "/b", 0);

    /* A child watch fires on a child's creation and deletion. */
    show_children(zh, "children of base (watch)", "", 1);
    rc = zoo_create(other, at("/s-"), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE | ZOO_EPHEMERAL,
                    created, sizeof created);
    printf("other creates an ephemeral sequential s-: %s %s\n", zerror(rc), rel(created));
    events_after(1);
    show_children(zh, "children of base (watch)", "", 1);
    rc = zoo_wexists(zh, created, watcher, NULL, &st);
    printf("exists the sequential (watch): %s ephemeral %s\n", zerror(rc),
           st.ephemeralOwner ? "yes" : "no");
    zookeeper_close(other);
    printf("other closed its session\n");
    events_after(2);
    show_children(zh, "children of base", "", 0);

    /* Deletes with versions; a parent with children stays. */
    rc = zoo_delete(zh, at("/a"), 5);
    printf("delete a at version 5: %s\n", zerror(rc));
    rc = zoo_delete(zh, base, -1);
    printf("delete base with children: %s\n", zerror(rc));
    rc = zoo_create(zh, at("/e"), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0);
    printf("create ephemeral e: %s\n", zerror(rc));
    rc = zoo_create(zh, at("/e/child"), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    printf("create a child of an ephemeral: %s\n", zerror(rc));

    /* multi: all or nothing, one result per op. */
    zoo_op_t ops[3];
    zoo_op_result_t results[3];
    zoo_create_op_init(&ops[0], at("/c"), "c", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_set_op_init(&ops[1], at("/b"), "b1", 2, -1, NULL);
    zoo_check_op_init(&ops[2], at("/a"), 7);
    rc = zoo_multi(zh, 3, ops, results);
    printf("multi create c, set b, check a at 7: %s results %s %s %s\n", zerror(rc),
           zerror(results[0].err), zerror(results[1].err), zerror(results[2].err));
    rc = zoo_exists(zh, at("/c"), 0, &st);
    printf("exists c: %s\n", zerror(rc));
    zoo_check_op_init(&ops[2], at("/a"), 2);
    rc = zoo_multi(zh, 3, ops, results);
    printf("multi create c, set b, check a at 2: %s results %s %s %s\n", zerror(rc),
           zerror(results[0].err), zerror(results[1].err), zerror(results[2].err));
    show_get(zh, "get c", "/c", 0);
    show_get(zh, "get b", "/b", 0);

    /* Digest ACLs: the creator's credentials, nobody else. */
    rc = zoo_add_auth(zh, "digest", "alice:pw", 8, NULL, NULL);
    printf("add auth digest alice: %s\n", zerror(rc));
    rc = zoo_create(zh, at("/private"), "secret", 6, &ZOO_CREATOR_ALL_ACL, 0, NULL, 0);
    printf("create private with the creator's ACL: %s\n", zerror(rc));
    show_get(zh, "alice gets private", "/private", 0);
    zhandle_t *anyone = open_session(argv[1]);
    char buf[16];
    int len = sizeof buf;
    rc = zoo_get(anyone, at("/private"), 0, buf, &len, &st);
    printf("anyone gets private: %s\n", zerror(rc));
    struct ACL_vector acl;
    rc = zoo_get_acl(anyone, at("/private"), &acl, &st);
    printf("anyone reads private's ACL: %s", zerror(rc));
    if (rc == ZOK) {
        for (int i = 0; i < acl.count; i++)
            printf(" %s:%s perms %d", acl.data[i].id.scheme, acl.data[i].id.id, acl.data[i].perms);
        deallocate_ACL_vector(&acl);
    }
    printf("\n");
    rc = zoo_delete(anyone, at("/private"), -1);
    printf("anyone deletes private: %s\n", zerror(rc));
    zookeeper_close(anyone);

    no_more_events(zh, "/sentinel-2");
    zookeeper_close(zh);
    printf("done\n");
    return 0;
}
