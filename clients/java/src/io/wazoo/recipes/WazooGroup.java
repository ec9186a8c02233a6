package io.wazoo.recipes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;

/**
 * The built-in {@code group} recipe: group membership, members as
 * ephemeral nodes under the group node (ZooKeeper Recipes and Solutions,
 * "Out of the Box Applications", group membership).
 */
public final class WazooGroup extends Handle {
    private final String path;

    public WazooGroup(ZooKeeper zk, String path) {
        this(Recipes.caller(zk), path);
    }

    public WazooGroup(RecipeCaller caller, String path) {
        super(caller, "group");
        this.path = path;
    }

    /** A view of the group: its node's cversion (-1 without one) and the members by name. */
    public static final class Members {
        public final int version;
        /** Member name to data, by name. */
        public final Map<String, byte[]> members;

        Members(Object v) {
            Map<?, ?> m = (Map<?, ?>) v;
            version = (int) number(m.get("version"));
            Map<String, byte[]> out = new java.util.LinkedHashMap<>();
            for (Object member : (List<?>) m.get("members")) {
                Map<?, ?> e = (Map<?, ?>) member;
                out.put((String) e.get("name"), Recipes.bytes(e.get("data")));
            }
            members = java.util.Collections.unmodifiableMap(out);
        }
    }

    /** Joins as {@code member} (an ephemeral node; updates its data if the caller is that member already). */
    public void join(String member, byte[] data) throws KeeperException, InterruptedException {
        quick("join", Json.object("path", path, "member", member, "data", data));
    }

    /** Leaves: whether the member was there. */
    public boolean leave(String member) throws KeeperException, InterruptedException {
        return bool(quick("leave", Json.object("path", path, "member", member)));
    }

    /** The group now. */
    public Members members() throws KeeperException, InterruptedException {
        return new Members(quick("members", Json.object("path", path)));
    }

    /** Waits until the group's version differs from {@code version}: the group then. */
    public Members watch(int version, Duration timeout)
            throws KeeperException, InterruptedException, TimeoutException {
        return new Members(call("watch_members", Json.object("path", path, "version", version), timeout));
    }
}
