package io.wazoo.recipes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;

/**
 * The built-in {@code queue} recipe: a FIFO queue with priorities 0-999,
 * lower first (ZooKeeper Recipes and Solutions, "Queues", "Priority
 * Queues"; docs/BUILTIN_RECIPES.md, "queue"). Items are persistent nodes;
 * a take reads and deletes its item in one step (exactly once).
 */
public final class WazooQueue extends Handle {
    private final String path;
    /** A take that timed out: its call stays, so an item it takes later is not lost. */
    private RecipeCall pendingTake;

    public WazooQueue(ZooKeeper zk, String path) {
        this(Recipes.caller(zk), path);
    }

    public WazooQueue(RecipeCaller caller, String path) {
        super(caller, "queue");
        this.path = path;
    }

    /** Adds an item (priority 100): its node name. */
    public String put(byte[] data) throws KeeperException, InterruptedException {
        return string(quick("put", Json.object("path", path, "data", data)));
    }

    /** Adds an item with a priority, 0-999 (lower is taken first): its node name. */
    public String put(byte[] data, int priority) throws KeeperException, InterruptedException {
        return string(quick("put_priority", Json.object("path", path, "data", data, "priority", priority)));
    }

    /**
     * Takes the first item, waiting at most {@code timeout} while the queue
     * is empty. A take that timed out keeps waiting server-side: the next
     * {@code take} of this handle picks up its item first, so none is lost
     * while the session lives.
     */
    public byte[] take(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        long start = System.nanoTime();
        if (pendingTake == null) pendingTake = caller.start(module, "take", Json.object("path", path), timeout);
        Duration left = timeout.minusNanos(System.nanoTime() - start);
        Object item;
        try {
            item = pendingTake.await(left.isNegative() ? Duration.ZERO : left);
        } catch (KeeperException | RuntimeException e) {
            pendingTake = null; // the call ended (failed, or its session did)
            throw e;
        }
        pendingTake = null;
        return Recipes.bytes(item);
    }

    /** How many items are queued. */
    public int size() throws KeeperException, InterruptedException {
        return (int) number(quick("len", Json.object("path", path)));
    }
}
