package io.wazoo.recipes;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;

/**
 * A recipe call in progress: its call node, created under
 * {@code /zookeeper/calls/<module>/} (docs/RECIPES.md, "Calling from any
 * client"). {@link #await} reads the node with a getData watch until it
 * holds a final result, then deletes it.
 */
public abstract class RecipeCall {
    /** How long to pause before retrying after a lost connection. */
    static final long RETRY_PAUSE_MS = 100;

    private final String module;
    private final String method;
    private final String node;
    private boolean finished;

    protected RecipeCall(String module, String method, String node) {
        this.module = module;
        this.method = method;
        this.node = node;
    }

    /** The call node's path (as the client addresses it: below its chroot). */
    public String node() {
        return node;
    }

    /** The node's data, with {@code watcher} set as a data watch on it. */
    protected abstract byte[] getData(String path, Watcher watcher) throws KeeperException, InterruptedException;

    /** Deletes the node; a node already gone is no error. */
    protected abstract void delete(String path) throws KeeperException, InterruptedException;

    /**
     * Waits at most {@code timeout} for the call's final result and returns
     * it as a JSON value (see {@link Json}); the call node is deleted. A
     * recipe error ({@code {"error": {"code": C, "message": M}}}) is thrown
     * as the {@link KeeperException} of code C, the message in its text.
     * On timeout the node is left: {@code await} again, or {@link #abandon}.
     * A lost connection is waited out (the client sets the watch again on
     * reconnect); an expired session ends the call with SessionExpired.
     */
    public Object await(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            CountDownLatch fired = new CountDownLatch(1);
            Watcher watcher = (WatchedEvent e) -> fired.countDown();
            byte[] data;
            try {
                data = getData(node, watcher);
            } catch (KeeperException.ConnectionLossException e) {
                if (deadline - System.nanoTime() <= 0) {
                    throw new TimeoutException(module + "." + method + ": no connection within " + timeout);
                }
                pauseBefore(deadline);
                continue;
            }
            Object parsed;
            try {
                parsed = Json.parse(data == null ? new byte[0] : data);
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException(node + " holds no call result: " + e.getMessage(), e);
            }
            if (!(parsed instanceof Map) || ((Map<?, ?>) parsed).size() != 1) {
                throw new IllegalStateException(node + " holds no call result: " + Json.write(parsed));
            }
            Map<?, ?> result = (Map<?, ?>) parsed;
            if (result.containsKey("done")) {
                finish();
                return result.get("done");
            }
            if (result.containsKey("error")) {
                finish();
                throw error(result.get("error"));
            }
            if (!result.containsKey("waiting")) {
                throw new IllegalStateException(node + " holds no call result: " + Json.write(parsed));
            }
            long left = deadline - System.nanoTime();
            if (left <= 0 || !fired.await(left, TimeUnit.NANOSECONDS)) {
                if (fired.getCount() == 0) continue; // fired just as time ran out: read once more
                throw new TimeoutException(module + "." + method + " still waiting after " + timeout
                    + " (" + result.get("waiting") + ")");
            }
        }
    }

    /**
     * Stops waiting: deletes the call node. The recipe's wait itself goes
     * on until it fires (then its result has nowhere to go) or the session
     * ends; handles withdraw where the recipe has a way (a lock's release).
     */
    public void abandon() throws InterruptedException {
        try {
            finish();
        } catch (KeeperException e) {
            // The node is ephemeral: it goes with the session.
        }
    }

    private void finish() throws KeeperException, InterruptedException {
        if (finished) return;
        for (int attempt = 0; ; attempt++) {
            try {
                delete(node);
                finished = true;
                return;
            } catch (KeeperException.NoNodeException e) {
                finished = true;
                return;
            } catch (KeeperException.ConnectionLossException e) {
                if (attempt >= 50) throw e;
                Thread.sleep(RETRY_PAUSE_MS);
            }
        }
    }

    private KeeperException error(Object error) {
        int code = KeeperException.Code.SYSTEMERROR.intValue();
        String message = "";
        if (error instanceof Map) {
            Object c = ((Map<?, ?>) error).get("code");
            Object m = ((Map<?, ?>) error).get("message");
            if (c instanceof Long) code = ((Long) c).intValue();
            if (m instanceof String) message = (String) m;
        }
        return exception(code, module + "." + method + ": " + message);
    }

    /** The KeeperException of {@code code} (SystemError for a code the client does not know). */
    static KeeperException exception(int code, String text) {
        KeeperException.Code c = KeeperException.Code.get(code);
        if (c == null || c == KeeperException.Code.OK) {
            return KeeperException.create(KeeperException.Code.SYSTEMERROR, text + " (code " + code + ")");
        }
        return KeeperException.create(c, text);
    }

    static void pauseBefore(long deadline) throws InterruptedException {
        long left = deadline - System.nanoTime();
        if (left <= 0) return; // the caller reads once more, then times out
        Thread.sleep(Math.min(RETRY_PAUSE_MS, TimeUnit.NANOSECONDS.toMillis(left) + 1));
    }
}
