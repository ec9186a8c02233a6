package io.wazoo.recipes;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

/**
 * Recipe calls through ZooKeeper's own Java client and its standard
 * operations only (docs/RECIPES.md, "Calling from any client"): a call is
 * a create of {@code /zookeeper/calls/<module>/<method>}, EPHEMERAL_SEQUENTIAL,
 * with JSON arguments as data; the created node holds the result.
 *
 * <pre>
 * Object node = Recipes.call(zk, "lock", "acquire", Json.object("path", "/locks/x"), Duration.ofSeconds(30));
 * </pre>
 *
 * The node is named as Curator's protected mode names it,
 * {@code _c_<uuid>-<method><seq>}: wazoo takes the uuid as the call's guid,
 * and after a lost reply the call is found again by that prefix among the
 * children of {@code /zookeeper/calls/<module>} instead of being made twice.
 */
public final class Recipes {
    /** Where calls are made. */
    public static final String CALLS = "/zookeeper/calls";

    private Recipes() {}

    /**
     * Makes a call and returns its result, a JSON value ({@link Json});
     * throws the recipe's KeeperException if it fails, TimeoutException if
     * it is still waiting after {@code timeout} (its call node is deleted).
     */
    public static Object call(ZooKeeper zk, String module, String method, String jsonArgs, Duration timeout)
            throws KeeperException, InterruptedException, TimeoutException {
        return caller(zk).call(module, method, jsonArgs, timeout);
    }

    /**
     * Calls a method that changes nothing with one getData of
     * {@link #queryPath} (docs/RECIPES.md, "Calls that change nothing"): it
     * runs as a read on the member the session is on, from what that member
     * has committed ({@code zk.sync} first for the latest state), and makes
     * no node. Returns the result, a JSON value ({@link Json}); throws the
     * recipe's KeeperException if it fails, NotReadOnlyException for a
     * method that writes or waits (call it with {@link #call}).
     */
    public static Object query(ZooKeeper zk, String module, String method, String jsonArgs)
            throws KeeperException, InterruptedException {
        byte[] data = zk.getData(queryPath(module, method, jsonArgs), false, null);
        Object result = Json.parse(data);
        if (!(result instanceof java.util.Map)) {
            throw new IllegalStateException("not a call's result: " + new String(data, StandardCharsets.UTF_8));
        }
        return ((java.util.Map<?, ?>) result).get("done");
    }

    /**
     * The path whose getData makes the read call {@code module.method(jsonArgs)}:
     * {@code /zookeeper/calls/<module>/<method>/<JSON>} ({@code null} for no
     * arguments), every {@code /} of the JSON written {@code \/} (JSON's own
     * escape; outside strings JSON has none), so no name of the path is empty.
     */
    public static String queryPath(String module, String method, String jsonArgs) {
        checkName(module);
        checkName(method);
        String args = jsonArgs == null || jsonArgs.trim().isEmpty() ? "null" : jsonArgs.trim();
        return CALLS + "/" + module + "/" + method + "/" + args.replace("/", "\\/");
    }

    /** A {@link RecipeCaller} on {@code zk}'s session. */
    public static RecipeCaller caller(ZooKeeper zk) {
        return (module, method, jsonArgs, timeout) -> start(zk, module, method, jsonArgs, timeout);
    }

    private static RecipeCall start(ZooKeeper zk, String module, String method, String jsonArgs, Duration timeout)
            throws KeeperException, InterruptedException, TimeoutException {
        checkName(module);
        checkName(method);
        long deadline = System.nanoTime() + timeout.toNanos();
        String parent = CALLS + "/" + module;
        String prefix = "_c_" + UUID.randomUUID() + "-";
        byte[] data = jsonArgs == null ? new byte[0] : jsonArgs.getBytes(StandardCharsets.UTF_8);
        while (true) {
            try {
                String node = zk.create(parent + "/" + prefix + method, data, ZooDefs.Ids.OPEN_ACL_UNSAFE,
                    CreateMode.EPHEMERAL_SEQUENTIAL);
                return new ZkCall(zk, module, method, node);
            } catch (KeeperException.ConnectionLossException e) {
                // The create may have been applied: look for our node.
                while (true) {
                    if (deadline - System.nanoTime() <= 0) {
                        throw new TimeoutException(module + "." + method + ": no connection within " + timeout);
                    }
                    RecipeCall.pauseBefore(deadline);
                    try {
                        String found = findProtected(zk.getChildren(parent, false), prefix);
                        if (found != null) return new ZkCall(zk, module, method, parent + "/" + found);
                        break; // not made: create again
                    } catch (KeeperException.NoNodeException n) {
                        break;
                    } catch (KeeperException.ConnectionLossException again) {
                        // still away
                    }
                }
            }
        }
    }

    static String findProtected(List<String> children, String prefix) {
        for (String child : children) {
            if (child.startsWith(prefix)) return child;
        }
        return null;
    }

    static void checkName(String name) {
        if (name == null || name.isEmpty() || name.contains("/")) {
            throw new IllegalArgumentException("a module or method name is one path component: " + name);
        }
    }

    private static final class ZkCall extends RecipeCall {
        private final ZooKeeper zk;

        ZkCall(ZooKeeper zk, String module, String method, String node) {
            super(module, method, node);
            this.zk = zk;
        }

        @Override
        protected byte[] getData(String path, Watcher watcher) throws KeeperException, InterruptedException {
            return zk.getData(path, watcher, null);
        }

        @Override
        protected void delete(String path) throws KeeperException, InterruptedException {
            zk.delete(path, -1);
        }
    }

    /**
     * Binary data in a result as bytes: wazoo writes it as a string when it
     * is UTF-8, else as {@code 0x} and lowercase hex; an array of numbers
     * 0-255 is taken too; {@code null} stays null. (A UTF-8 string that
     * itself reads {@code 0x<hex>} of non-UTF-8 bytes is ambiguous and read
     * as those bytes.)
     */
    public static byte[] bytes(Object value) {
        if (value == null) return null;
        if (value instanceof String) {
            String s = (String) value;
            byte[] hex = hex(s);
            if (hex != null && !isUtf8(hex)) return hex;
            return s.getBytes(StandardCharsets.UTF_8);
        }
        if (value instanceof List) {
            List<?> l = (List<?>) value;
            byte[] out = new byte[l.size()];
            for (int i = 0; i < out.length; i++) {
                Object b = l.get(i);
                if (!(b instanceof Long) || (Long) b < 0 || (Long) b > 255) {
                    throw new IllegalArgumentException("not bytes: " + Json.write(value));
                }
                out[i] = (byte) (long) (Long) b;
            }
            return out;
        }
        throw new IllegalArgumentException("not bytes: " + Json.write(value));
    }

    private static byte[] hex(String s) {
        if (!s.startsWith("0x") || s.length() % 2 != 0) return null;
        byte[] out = new byte[(s.length() - 2) / 2];
        for (int i = 0; i < out.length; i++) {
            int hi = Character.digit(s.charAt(2 + 2 * i), 16);
            int lo = Character.digit(s.charAt(3 + 2 * i), 16);
            if (hi < 0 || lo < 0 || Character.isUpperCase(s.charAt(2 + 2 * i)) || Character.isUpperCase(s.charAt(3 + 2 * i))) {
                return null;
            }
            out[i] = (byte) (hi * 16 + lo);
        }
        return out;
    }

    private static boolean isUtf8(byte[] b) {
        try {
            StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b));
            return true;
        } catch (CharacterCodingException e) {
            return false;
        }
    }
}
