package io.wazoo.recipes;

import java.time.Duration;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;

/**
 * The built-in {@code lock} recipe: an exclusive, fair lock (ZooKeeper
 * Recipes and Solutions, "Locks"; docs/BUILTIN_RECIPES.md, "lock"). One
 * contender per session and path: a second acquire from the same session
 * returns the same node. The lock goes with the session.
 *
 * <pre>
 * WazooLock lock = new WazooLock(zk, "/locks/x");
 * lock.acquire(Duration.ofSeconds(30));
 * try { ... } finally { lock.release(); }
 * </pre>
 */
public final class WazooLock extends Handle {
    private final String path;
    private byte[] id;

    public WazooLock(ZooKeeper zk, String path) {
        this(Recipes.caller(zk), path);
    }

    public WazooLock(RecipeCaller caller, String path) {
        super(caller, "lock");
        this.path = path;
    }

    /** The lock node's data (kazoo's {@code identifier}). */
    public WazooLock withId(byte[] id) {
        this.id = id;
        return this;
    }

    /**
     * Waits at most {@code timeout} for the lock: the held lock node's path.
     * On timeout the caller withdraws (its contender node is deleted) and
     * TimeoutException is thrown.
     */
    public String acquire(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        try {
            return string(call("acquire", Json.object("path", path, "id", id), timeout));
        } catch (TimeoutException e) {
            release();
            throw e;
        }
    }

    /** Releases the lock, or withdraws a waiting contender: whether a node of the caller was deleted. */
    public boolean release() throws KeeperException, InterruptedException {
        return bool(quick("release", Json.object("path", path)));
    }

    /** The holder's lock node path, or null when nobody holds the lock. */
    public String holder() throws KeeperException, InterruptedException {
        return string(quick("holder", Json.object("path", path)));
    }
}
