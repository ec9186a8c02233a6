package io.wazoo.recipes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;

/**
 * The built-in {@code twophase} recipe, the coordinator's side (ZooKeeper
 * Recipes and Solutions, "Two-phased Commit", with both of its fixes);
 * {@link Site} is a site's side. Outcomes are "commit" or "abort".
 */
public final class WazooTwoPhase extends Handle {
    private final String tx;

    public WazooTwoPhase(ZooKeeper zk, String tx) {
        this(Recipes.caller(zk), tx);
    }

    public WazooTwoPhase(RecipeCaller caller, String tx) {
        super(caller, "twophase");
        this.tx = tx;
    }

    /** Creates the transaction node (data: the transaction) and a node per site. */
    public void begin(List<String> sites, byte[] data) throws KeeperException, InterruptedException {
        quick("begin", Json.object("tx", tx, "sites", sites, "data", data));
    }

    /** Waits for the outcome, following the sites (a site that dies before voting aborts). */
    public String decision(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
        return string(call("decision", Json.object("tx", tx), timeout));
    }

    /** Decides abort unless decided already: the outcome. */
    public String abort() throws KeeperException, InterruptedException {
        return string(quick("abort", Json.object("tx", tx)));
    }

    /** A site of the transaction. */
    public static final class Site extends Handle {
        private final String tx;
        private final String site;

        public Site(ZooKeeper zk, String tx, String site) {
            this(Recipes.caller(zk), tx, site);
        }

        public Site(RecipeCaller caller, String tx, String site) {
            super(caller, "twophase");
            this.tx = tx;
            this.site = site;
        }

        /** Joins (creates the site's ephemeral {@code alive} node): the transaction's data. */
        public byte[] join() throws KeeperException, InterruptedException {
            return Recipes.bytes(quick("join", Json.object("tx", tx, "site", site)));
        }

        /** Votes: the outcome if this vote decided it (or it was decided), else null. */
        public String vote(boolean commit) throws KeeperException, InterruptedException {
            return string(quick("vote", Json.object("tx", tx, "site", site, "commit", commit)));
        }

        /** Waits for the outcome. */
        public String decision(Duration timeout) throws KeeperException, InterruptedException, TimeoutException {
            return string(call("decision", Json.object("tx", tx), timeout));
        }
    }
}
