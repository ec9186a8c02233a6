package io.wazoo.recipes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;

/**
 * The built-in {@code rwlock} recipe: shared (read) and exclusive (write)
 * locks on one path, with revocation (ZooKeeper Recipes and Solutions,
 * "Shared Locks", "Revocable Shared Locks"; docs/BUILTIN_RECIPES.md).
 */
public final class WazooReadWriteLock extends Handle {
    private final String path;

    public WazooReadWriteLock(ZooKeeper zk, String path) {
        this(Recipes.caller(zk), path);
    }

    public WazooReadWriteLock(RecipeCaller caller, String path) {
        super(caller, "rwlock");
        this.path = path;
    }

    /** Waits for a read lock: its node path. On timeout the caller's nodes are released. */
    public String readAcquire(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        return acquire("read_acquire", timeout);
    }

    /** Waits for the write lock: its node path. On timeout the caller's nodes are released. */
    public String writeAcquire(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        return acquire("write_acquire", timeout);
    }

    private String acquire(String method, Duration timeout)
            throws KeeperException, InterruptedException, TimeoutException {
        try {
            return string(call(method, Json.object("path", path), timeout));
        } catch (TimeoutException e) {
            release();
            throw e;
        }
    }

    /** Releases the caller's read and write nodes: how many were deleted. */
    public int release() throws KeeperException, InterruptedException {
        return (int) number(quick("release", Json.object("path", path)));
    }

    /** Asks the holder of {@code node} to release ("unlock" written): false if the node is gone. */
    public boolean revoke(String node) throws KeeperException, InterruptedException {
        return bool(quick("revoke", Json.object("node", node)));
    }

    /** The holder's side: waits until {@code node} is revoked (true) or gone (false). */
    public boolean watchRevoke(String node, Duration timeout)
            throws KeeperException, InterruptedException, TimeoutException {
        return bool(call("watch_revoke", Json.object("node", node), timeout));
    }
}
