// Apache Curator (Debian's curator-framework and curator-recipes 5.4)
// against a server or ensemble, for host/tests/curator.rs: the framework's
// basic operations, InterProcessMutex, LeaderLatch, PathChildrenCache and
// CuratorCache. Usage: CuratorPins HOSTS BASE (BASE a path that does not
// exist yet). Prints one "name: result" line per check, in a fixed order;
// the test compares them with ZooKeeper 3.8's. Every wait is bounded.
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.transaction.CuratorOp;
import org.apache.curator.framework.api.transaction.CuratorTransactionResult;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.cache.PathChildrenCache;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorPins {
    static final int WAIT_S = 20;
    static String base;

    static void say(String name, Object result) {
        System.out.println(name + ": " + result);
    }

    static String s(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String rel(String path) {
        return path.startsWith(base) ? path.substring(base.length()) : path;
    }

    static CuratorFramework client(String hosts) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(hosts)
                .sessionTimeoutMs(20000)
                .connectionTimeoutMs(15000)
                .retryPolicy(new RetryNTimes(3, 500))
                .build();
        c.start();
        if (!c.blockUntilConnected(WAIT_S, TimeUnit.SECONDS)) {
            throw new IllegalStateException("Curator did not connect to " + hosts);
        }
        return c;
    }

    interface Call {
        Object run() throws Exception;
    }

    /** The result, or the KeeperException's code. */
    static Object attempt(Call f) {
        try {
            return f.run();
        } catch (KeeperException e) {
            return e.code();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    public static void main(String[] a) throws Exception {
        base = a[1];
        CuratorFramework c1 = client(a[0]);
        CuratorFramework c2 = client(a[0]);
        try {
            framework(c1);
            mutex(c1, c2);
            latch(c1, c2);
            pathChildrenCache(c1, c2);
            curatorCache(c1, c2);
        } finally {
            c2.close();
            c1.close();
        }
    }

    // ZooKeeper Programmer's Guide, "ZNodes", through Curator's fluent API.
    static void framework(CuratorFramework c) throws Exception {
        String p = base + "/fw/a/b";
        say("create with parents", rel(c.create().creatingParentsIfNeeded().forPath(p, b("x"))));
        say("create again", attempt(() -> c.create().forPath(p, b("y"))));
        Stat st = new Stat();
        say("get", s(c.getData().storingStatIn(st).forPath(p)) + " version " + st.getVersion());
        say("set stale", attempt(() -> c.setData().withVersion(5).forPath(p, b("z"))));
        say("set", c.setData().withVersion(0).forPath(p, b("z")).getVersion());
        say("exists missing", c.checkExists().forPath(base + "/fw/missing"));
        say("delete non-empty", attempt(() -> c.delete().forPath(base + "/fw/a")));
        String seq = c.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(base + "/fw/s-");
        say("ephemeral sequential", rel(seq));
        String prot = c.create().withProtection().withMode(CreateMode.EPHEMERAL)
                .forPath(base + "/fw/p");
        say("protected name", rel(prot).startsWith("/fw/_c_") && prot.endsWith("-p"));
        List<String> kids = new ArrayList<>(c.getChildren().forPath(base + "/fw"));
        Collections.sort(kids);
        kids.replaceAll(k -> k.startsWith("_c_") ? "_c_...-p" : k);
        say("children", kids);
        CuratorOp create = c.transactionOp().create().forPath(base + "/fw/t", b("t"));
        CuratorOp check = c.transactionOp().check().withVersion(3).forPath(p);
        say("transaction with a stale check", attempt(() -> c.transaction().forOperations(create, check)));
        say("nothing created", c.checkExists().forPath(base + "/fw/t"));
        CuratorOp goodCheck = c.transactionOp().check().withVersion(1).forPath(p);
        CuratorOp set = c.transactionOp().setData().forPath(p, b("w"));
        List<String> results = new ArrayList<>();
        for (CuratorTransactionResult r : c.transaction().forOperations(create, goodCheck, set)) {
            results.add(r.getType() + " " + rel(r.getForPath()) + " " + r.getError());
        }
        say("transaction", results);
        c.delete().deletingChildrenIfNeeded().forPath(base + "/fw/a");
        say("deleted with children", c.checkExists().forPath(base + "/fw/a"));
    }

    // "ZooKeeper Recipes and Solutions", "Locks", as Curator's mutex.
    static void mutex(CuratorFramework c1, CuratorFramework c2) throws Exception {
        String path = base + "/mutex";
        InterProcessMutex m1 = new InterProcessMutex(c1, path);
        InterProcessMutex m2 = new InterProcessMutex(c2, path);
        say("first acquires", m1.acquire(WAIT_S, TimeUnit.SECONDS));
        say("reentrant", m1.acquire(WAIT_S, TimeUnit.SECONDS));
        say("participants", m1.getParticipantNodes().size());
        say("second times out", m2.acquire(300, TimeUnit.MILLISECONDS));
        m1.release();
        say("still held after one release", m1.isAcquiredInThisProcess());
        // A mutex belongs to the thread that acquired it: the second client
        // waits in a thread of its own while this one releases.
        BlockingQueue<Object> acquired = new LinkedBlockingQueue<>();
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
        Thread t = new Thread(() -> {
            try {
                boolean ok = m2.acquire(WAIT_S, TimeUnit.SECONDS);
                acquired.add(ok);
                done.await(WAIT_S, TimeUnit.SECONDS);
                if (ok) {
                    m2.release();
                }
            } catch (Exception e) {
                acquired.add(e.toString());
            }
        });
        t.start();
        Thread.sleep(300);
        say("second still waits", acquired.isEmpty());
        m1.release();
        Object got = acquired.poll(WAIT_S, TimeUnit.SECONDS);
        say("second acquires once released", got);
        say("first holds", m1.isAcquiredInThisProcess());
        done.countDown();
        t.join();
        // Read through the session that released last (its member has
        // applied the delete before answering it).
        say("lock nodes left", c2.getChildren().forPath(path).size());
    }

    // "ZooKeeper Recipes and Solutions", "Leader Election", as LeaderLatch.
    static void latch(CuratorFramework c1, CuratorFramework c2) throws Exception {
        String path = base + "/latch";
        LeaderLatch a = new LeaderLatch(c1, path, "a");
        a.start();
        say("a leads", a.await(WAIT_S, TimeUnit.SECONDS));
        LeaderLatch b = new LeaderLatch(c2, path, "b");
        b.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (b.getParticipants().size() < 2 && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        say("participants", b.getParticipants().size());
        say("b leads", b.hasLeadership());
        say("leader seen by b", b.getLeader().getId());
        a.close();
        say("b leads after a closed", b.await(WAIT_S, TimeUnit.SECONDS));
        say("leader now", b.getLeader().getId());
        b.close();
    }

    static String event(String kind, ChildData d) {
        return kind + " " + rel(d.getPath()) + " " + s(d.getData());
    }

    static String next(BlockingQueue<String> q) throws InterruptedException {
        String e = q.poll(WAIT_S, TimeUnit.SECONDS);
        return e == null ? "(no event within " + WAIT_S + " s)" : e;
    }

    // Curator's PathChildrenCache: "ZooKeeper Watches" on a parent and
    // each child, kept set. (Deprecated for CuratorCache, still in wide use.)
    @SuppressWarnings("deprecation")
    static void pathChildrenCache(CuratorFramework c1, CuratorFramework c2) throws Exception {
        String path = base + "/pcc";
        c1.create().forPath(path);
        c1.create().forPath(path + "/before", b("0"));
        BlockingQueue<String> q = new LinkedBlockingQueue<>();
        PathChildrenCache cache = new PathChildrenCache(c1, path, true);
        cache.getListenable().addListener((cl, e) -> {
            switch (e.getType()) {
                case INITIALIZED -> q.add("INITIALIZED " + e.getInitialData().size());
                case CHILD_ADDED, CHILD_UPDATED, CHILD_REMOVED -> q.add(event(e.getType().toString(), e.getData()));
                default -> { }
            }
        });
        cache.start(PathChildrenCache.StartMode.POST_INITIALIZED_EVENT);
        List<String> seen = new ArrayList<>();
        seen.add(next(q));
        seen.add(next(q));
        c2.create().forPath(path + "/x", b("1"));
        seen.add(next(q));
        c2.setData().forPath(path + "/x", b("2"));
        seen.add(next(q));
        c2.delete().forPath(path + "/x");
        seen.add(next(q));
        c2.delete().forPath(path + "/before");
        seen.add(next(q));
        for (String e : seen) {
            say("path children cache", e);
        }
        say("cached children", cache.getCurrentData().size());
        cache.close();
    }

    // Curator's CuratorCache (persistent recursive watch, ZooKeeper
    // Programmer's Guide, "Persistent, Recursive Watches").
    static void curatorCache(CuratorFramework c1, CuratorFramework c2) throws Exception {
        String path = base + "/cc";
        c1.create().forPath(path, b("root"));
        BlockingQueue<String> q = new LinkedBlockingQueue<>();
        CuratorCache cache = CuratorCache.build(c1, path);
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forCreates(d -> q.add(event("created", d)))
                .forChanges((old, d) -> q.add(event("changed", d) + " was " + s(old.getData())))
                .forDeletes(d -> q.add(event("deleted", d)))
                .forInitialized(() -> q.add("initialized"))
                .build());
        cache.start();
        List<String> seen = new ArrayList<>();
        seen.add(next(q));
        seen.add(next(q));
        c2.create().forPath(path + "/a", b("1"));
        seen.add(next(q));
        c2.create().forPath(path + "/a/deep", b("2"));
        seen.add(next(q));
        c2.setData().forPath(path + "/a/deep", b("3"));
        seen.add(next(q));
        c2.delete().deletingChildrenIfNeeded().forPath(path + "/a");
        seen.add(next(q));
        seen.add(next(q));
        for (String e : seen) {
            say("curator cache", e);
        }
        say("cached nodes", cache.size());
        cache.close();
    }
}
