package io.wazoo.recipes;

import java.time.Duration;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;

/**
 * Makes recipe calls through one client session: {@link Recipes#caller}
 * (ZooKeeper's client) or {@link CuratorRecipes#caller} (Curator). The
 * typed handles ({@link WazooLock}, ...) take one.
 */
public interface RecipeCaller {
    /**
     * Starts a call: creates its node {@code /zookeeper/calls/<module>/<method>}
     * (ephemeral sequential, in Curator's protected mode, data {@code jsonArgs}).
     * A call that fails at once fails here with the recipe's KeeperException
     * (BadArguments, NoNode, NoAuth, Unimplemented for a module or method the
     * server does not serve, ...). A lost reply is recovered: the node is
     * found again by its protected-mode prefix, or the create is retried.
     */
    RecipeCall start(String module, String method, String jsonArgs, Duration timeout)
        throws KeeperException, InterruptedException, TimeoutException;

    /**
     * Makes the call and waits at most {@code timeout} for its result (a JSON
     * value, see {@link Json}); the call node is deleted. On timeout the
     * call node is deleted and TimeoutException thrown.
     */
    default Object call(String module, String method, String jsonArgs, Duration timeout)
            throws KeeperException, InterruptedException, TimeoutException {
        long start = System.nanoTime();
        RecipeCall call = start(module, method, jsonArgs, timeout);
        Duration left = timeout.minusNanos(System.nanoTime() - start);
        try {
            return call.await(left.isNegative() ? Duration.ZERO : left);
        } catch (TimeoutException e) {
            call.abandon();
            throw e;
        }
    }
}
