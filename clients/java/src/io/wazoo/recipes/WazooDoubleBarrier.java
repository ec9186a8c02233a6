package io.wazoo.recipes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;

/**
 * The built-in {@code double_barrier} recipe (ZooKeeper Recipes and
 * Solutions, "Double Barriers"): {@code count} processes enter together and
 * leave together; each process's node is ephemeral.
 */
public final class WazooDoubleBarrier extends Handle {
    private final String path;
    private final String name;
    private final int count;

    public WazooDoubleBarrier(ZooKeeper zk, String path, String name, int count) {
        this(Recipes.caller(zk), path, name, count);
    }

    public WazooDoubleBarrier(RecipeCaller caller, String path, String name, int count) {
        super(caller, "double_barrier");
        this.path = path;
        this.name = name;
        this.count = count;
    }

    /** Waits until {@code count} processes have entered. */
    public void enter(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        call("enter", Json.object("path", path, "name", name, "count", count), timeout);
    }

    /** Leaves, waiting until every process has left. */
    public void leave(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        call("leave", Json.object("path", path, "name", name), timeout);
    }
}
