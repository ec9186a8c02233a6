package io.wazoo.recipes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;

/**
 * The built-in {@code barrier} recipe (ZooKeeper Recipes and Solutions,
 * "Barriers"): the barrier is up while its node exists.
 */
public final class WazooBarrier extends Handle {
    private final String path;

    public WazooBarrier(ZooKeeper zk, String path) {
        this(Recipes.caller(zk), path);
    }

    public WazooBarrier(RecipeCaller caller, String path) {
        super(caller, "barrier");
        this.path = path;
    }

    /** Raises the barrier: false if it was up. */
    public boolean set() throws KeeperException, InterruptedException {
        return bool(quick("set", Json.object("path", path)));
    }

    /** Removes the barrier: false if it was down. */
    public boolean remove() throws KeeperException, InterruptedException {
        return bool(quick("remove", Json.object("path", path)));
    }

    /** Waits until the barrier is down. */
    public void await(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        call("wait", Json.object("path", path), timeout);
    }
}
