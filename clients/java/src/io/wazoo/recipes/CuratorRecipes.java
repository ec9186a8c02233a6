package io.wazoo.recipes;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeoutException;
import org.apache.curator.framework.CuratorFramework;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;

/**
 * Recipe calls through Apache Curator (docs/RECIPES.md, "Calling from any
 * client"): {@code create().withProtection().withMode(EPHEMERAL_SEQUENTIAL)}
 * of {@code /zookeeper/calls/<module>/<method>}, so a lost reply is
 * recovered as Curator does (it finds the node by its protected-mode
 * prefix, whose uuid wazoo takes as the call's guid); Curator's retry
 * policy covers the reads. Kept apart from {@link Recipes} so that a
 * program on ZooKeeper's client alone needs no Curator jars.
 */
public final class CuratorRecipes {
    private CuratorRecipes() {}

    /** {@link Recipes#call}, through {@code client}. */
    public static Object call(CuratorFramework client, String module, String method, String jsonArgs,
            Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        return caller(client).call(module, method, jsonArgs, timeout);
    }

    /** A {@link RecipeCaller} on {@code client}'s session. */
    public static RecipeCaller caller(CuratorFramework client) {
        return (module, method, jsonArgs, timeout) -> {
            Recipes.checkName(module);
            Recipes.checkName(method);
            byte[] data = jsonArgs == null ? new byte[0] : jsonArgs.getBytes(StandardCharsets.UTF_8);
            String node = curator(() -> client.create().withProtection().withMode(CreateMode.EPHEMERAL_SEQUENTIAL)
                .forPath(Recipes.CALLS + "/" + module + "/" + method, data));
            return new CuratorCall(client, module, method, node);
        };
    }

    private static final class CuratorCall extends RecipeCall {
        private final CuratorFramework client;

        CuratorCall(CuratorFramework client, String module, String method, String node) {
            super(module, method, node);
            this.client = client;
        }

        @Override
        protected byte[] getData(String path, Watcher watcher) throws KeeperException, InterruptedException {
            return curator(() -> client.getData().usingWatcher(watcher).forPath(path));
        }

        @Override
        protected void delete(String path) throws KeeperException, InterruptedException {
            curator(() -> {
                client.delete().guaranteed().forPath(path);
                return null;
            });
        }
    }

    private interface CuratorOp<T> {
        T run() throws Exception;
    }

    /** Curator's {@code forPath} throws Exception: ZooKeeper's kinds pass, others are wrapped. */
    private static <T> T curator(CuratorOp<T> op) throws KeeperException, InterruptedException {
        try {
            return op.run();
        } catch (KeeperException | InterruptedException | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
