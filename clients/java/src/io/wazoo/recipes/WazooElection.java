package io.wazoo.recipes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;

/**
 * The built-in {@code election} recipe (ZooKeeper Recipes and Solutions,
 * "Leader Election", with the acknowledgement node the seed suggests).
 */
public final class WazooElection extends Handle {
    private final String path;
    private final byte[] id;

    public WazooElection(ZooKeeper zk, String path, byte[] id) {
        this(Recipes.caller(zk), path, id);
    }

    public WazooElection(RecipeCaller caller, String path, byte[] id) {
        super(caller, "election");
        this.path = path;
        this.id = id;
    }

    /** Waits until the caller leads: its candidate node. On timeout the caller resigns. */
    public String campaign(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        try {
            return string(call("campaign", Json.object("path", path, "id", id), timeout));
        } catch (TimeoutException e) {
            resign();
            throw e;
        }
    }

    /** The leader's id, or null without one. */
    public byte[] leader() throws KeeperException, InterruptedException {
        return Recipes.bytes(quick("leader", Json.object("path", path)));
    }

    /** Leaves the election (or stops leading): whether the caller was a candidate. */
    public boolean resign() throws KeeperException, InterruptedException {
        return bool(quick("resign", Json.object("path", path)));
    }

    /** The leader acknowledges that it leads (APIError unless the caller leads). */
    public void ack() throws KeeperException, InterruptedException {
        quick("ack", Json.object("path", path));
    }

    /** Waits until the current leader acknowledged: its id. */
    public byte[] waitAck(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        return Recipes.bytes(call("wait_ack", Json.object("path", path), timeout));
    }
}
