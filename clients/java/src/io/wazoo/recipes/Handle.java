package io.wazoo.recipes;

import java.time.Duration;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;

/** What the typed handles share: the caller, the module, and the bound on calls that do not wait. */
abstract class Handle {
    /** How long a call that does not wait may take (a lost connection is waited out that long). */
    static final Duration QUICK = Duration.ofSeconds(30);

    final RecipeCaller caller;
    final String module;

    Handle(RecipeCaller caller, String module) {
        if (caller == null) throw new NullPointerException("caller");
        this.caller = caller;
        this.module = module;
    }

    Object call(String method, String args, Duration timeout)
            throws KeeperException, InterruptedException, TimeoutException {
        return caller.call(module, method, args, timeout);
    }

    /** A call that does not wait: its result. */
    Object quick(String method, String args) throws KeeperException, InterruptedException {
        try {
            return caller.call(module, method, args, QUICK);
        } catch (TimeoutException e) {
            throw KeeperException.create(KeeperException.Code.OPERATIONTIMEOUT, e.getMessage());
        }
    }

    static boolean bool(Object v) {
        return Boolean.TRUE.equals(v);
    }

    static String string(Object v) {
        return (String) v;
    }

    static long number(Object v) {
        return ((Number) v).longValue();
    }
}
