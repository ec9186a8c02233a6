package io.wazoo.recipes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;

/**
 * The built-in {@code semaphore} recipe: at most {@code maxLeases} holders,
 * first come first served (kazoo's and Curator's semaphore design;
 * docs/BUILTIN_RECIPES.md, "semaphore"). One lease per session and path.
 */
public final class WazooSemaphore extends Handle {
    private final String path;
    private final int maxLeases;
    private byte[] id;

    public WazooSemaphore(ZooKeeper zk, String path, int maxLeases) {
        this(Recipes.caller(zk), path, maxLeases);
    }

    public WazooSemaphore(RecipeCaller caller, String path, int maxLeases) {
        super(caller, "semaphore");
        this.path = path;
        this.maxLeases = maxLeases;
    }

    /** The lease node's data. */
    public WazooSemaphore withId(byte[] id) {
        this.id = id;
        return this;
    }

    /** Waits for a lease: its path. On timeout the caller leaves the queue (release). */
    public String acquire(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        try {
            return string(call("acquire", Json.object("path", path, "max_leases", maxLeases, "id", id), timeout));
        } catch (TimeoutException e) {
            release();
            throw e;
        }
    }

    /** Releases the caller's lease (or leaves the queue): whether a lease was deleted. */
    public boolean release() throws KeeperException, InterruptedException {
        return bool(quick("release", Json.object("path", path)));
    }

    /** Every lease's data. */
    public List<byte[]> holders() throws KeeperException, InterruptedException {
        List<byte[]> out = new ArrayList<>();
        for (Object h : (List<?>) quick("holders", Json.object("path", path))) out.add(Recipes.bytes(h));
        return out;
    }
}
