// The Java helper jar (io.wazoo.recipes) against wazoo, for
// host/tests/java_recipes.rs. Modes:
//   json                       the JSON reader/writer's checks (no server)
//   handles HOSTS              each typed handle once, one line per check
//   failover HOSTS LOCK GO [curator]
//                              a holder and a waiter (through Curator with
//                              "curator"); prints "waiting" while the
//                              waiter's acquire waits, then waits for the
//                              file GO (the test kills the leader first),
//                              releases, and the waiter must get the lock.
// Any failed check exits 1 with what went wrong.
import io.wazoo.recipes.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;

public class JavaRecipes {
    static final Duration LONG = Duration.ofSeconds(60);

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAILED: " + what);
            System.out.flush();
            System.exit(1);
        }
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String s(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static ZooKeeper connect(String hosts) throws Exception {
        CountDownLatch up = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(hosts, 20000, e -> {
            if (e.getState() == org.apache.zookeeper.Watcher.Event.KeeperState.SyncConnected) up.countDown();
        });
        check(up.await(60, TimeUnit.SECONDS), "connected to " + hosts);
        return zk;
    }

    /** A connect string naming only member i (sessions spread over members). */
    static String member(String hosts, int i) {
        String[] all = hosts.split(",");
        return all[i % all.length];
    }

    public static void main(String[] a) throws Exception {
        switch (a[0]) {
            case "json": json(); break;
            case "handles": handles(a[1]); break;
            case "failover": failover(a[1], a[2], a[3], a.length > 4 && a[4].equals("curator")); break;
            default: check(false, "mode " + a[0]);
        }
        System.exit(0);
    }

    static void refused(String text) {
        try {
            Json.parse(text);
        } catch (IllegalArgumentException e) {
            return;
        }
        check(false, "refused: " + text);
    }

    static void json() {
        // Values of each kind, read and written back.
        Object v = Json.parse(" {\"a\": [1, -2, 3.5, 1e3, true, false, null], \"s\": \"x\\\"y\\\\z\\n\\t\\u00e9\\ud83d\\ude00/\\/\", \"o\": {}} ");
        check(v instanceof Map, "an object is a Map");
        Map<?, ?> m = (Map<?, ?>) v;
        check(new ArrayList<>(m.keySet()).equals(List.of("a", "s", "o")), "field order kept");
        List<?> arr = (List<?>) m.get("a");
        check(arr.get(0).equals(1L) && arr.get(1).equals(-2L), "integers are Long");
        check(arr.get(2).equals(3.5) && arr.get(3).equals(1000.0), "fractions and exponents are Double");
        check(arr.get(4).equals(true) && arr.get(5).equals(false) && arr.get(6) == null, "literals");
        check(m.get("s").equals("x\"y\\z\n\t\u00e9\ud83d\ude00//"), "escapes, a surrogate pair: " + m.get("s"));
        check(Json.write(v).equals("{\"a\":[1,-2,3.5,1000,true,false,null],\"s\":\"x\\\"y\\\\z\\n\\t\u00e9\ud83d\ude00//\",\"o\":{}}"),
            "written back: " + Json.write(v));
        check(Json.write(Json.parse(Json.write(v))).equals(Json.write(v)), "round trip");
        // Numbers past 64 bits, the edges of Long.
        check(Json.parse("9223372036854775807").equals(Long.MAX_VALUE), "Long.MAX_VALUE");
        check(Json.parse("-9223372036854775808").equals(Long.MIN_VALUE), "Long.MIN_VALUE");
        check(Json.parse("18446744073709551616").equals(new java.math.BigInteger("18446744073709551616")), "2^64");
        check(Json.parse("-0").equals(0L) && Json.parse("0.5e-1").equals(0.05), "-0, 0.5e-1");
        // Control characters and lone surrogates are escaped on writing.
        check(Json.write("\u0001\u001f\ud800").equals("\"\\u0001\\u001f\\ud800\""), "escaped: " + Json.write("\u0001\u001f\ud800"));
        check(Json.parse(Json.write("\u0000\u007f")).equals("\u0000\u007f"), "NUL round trip");
        // Bytes are written as numbers; an object helper skips nulls.
        check(Json.write(new byte[] {0, 1, (byte) 255}).equals("[0,1,255]"), "bytes");
        check(Json.object("path", "/x", "id", null, "n", 3).equals("{\"path\":\"/x\",\"n\":3}"), "object()");
        check(Json.write(List.of(1, 2.0, "x")).equals("[1,2,\"x\"]"), "collections");
        // UTF-8 bytes; malformed UTF-8 refused.
        check(Json.parse("\"\u00e9\"".getBytes(StandardCharsets.UTF_8)).equals("\u00e9"), "UTF-8 bytes");
        try {
            Json.parse(new byte[] {'"', (byte) 0xff, '"'});
            check(false, "malformed UTF-8 refused");
        } catch (IllegalArgumentException e) {
            // refused
        }
        // Result bytes: UTF-8 text, or 0x and hex for other bytes.
        check(Arrays.equals(Recipes.bytes("abc"), b("abc")), "bytes of text");
        check(Arrays.equals(Recipes.bytes("0xff00"), new byte[] {(byte) 0xff, 0}), "bytes of hex");
        check(Arrays.equals(Recipes.bytes("0x41"), b("0x41")), "0x41 is text (0x41 would be UTF-8)");
        check(Arrays.equals(Recipes.bytes(List.of(1L, 2L)), new byte[] {1, 2}), "bytes of numbers");
        // Malformed text.
        for (String bad : new String[] {"", " ", "{", "}", "[1,]", "[1 2]", "{\"a\" 1}", "{\"a\":1,}", "{a:1}",
                "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"a\u0001\"", "01", "1.", ".5", "-", "1e", "+1",
                "tru", "nul", "NaN", "[1] x", "{\"a\":1,\"a\":2}", "'a'"}) {
            refused(bad);
        }
        StringBuilder deep = new StringBuilder();
        for (int i = 0; i < 10000; i++) deep.append('[');
        refused(deep.toString());
        try {
            Json.write(Double.NaN);
            check(false, "NaN refused");
        } catch (IllegalArgumentException e) {
            // refused
        }
        System.out.println("json: ok");
    }

    /** How many call nodes there are under /zookeeper/calls/MODULE (a container: maybe reaped). */
    static int callNodes(ZooKeeper zk, String module) throws Exception {
        try {
            return zk.getChildren("/zookeeper/calls/" + module, false).size();
        } catch (KeeperException.NoNodeException e) {
            return 0;
        }
    }

    static void handles(String hosts) throws Exception {
        ZooKeeper one = connect(member(hosts, 0));
        ZooKeeper two = connect(member(hosts, 1));
        ZooKeeper three = connect(member(hosts, 2));
        String run = "/java-" + UUID.randomUUID();
        ExecutorService pool = Executors.newCachedThreadPool();

        // The generic call, a done result; a failing call fails with its code.
        Object held = Recipes.call(one, "lock", "acquire", Json.object("path", run + "/generic"), LONG);
        check(held instanceof String && ((String) held).startsWith(run + "/generic/"), "acquire: " + held);
        check(callNodes(one, "lock") == 0, "the call node is deleted");
        check(Recipes.call(one, "lock", "release", Json.object("path", run + "/generic"), LONG).equals(true), "release");
        System.out.println("call: done");
        try {
            Recipes.call(one, "lock", "acquire", Json.object("path", "relative"), LONG);
            check(false, "a relative path is refused");
        } catch (KeeperException e) {
            System.out.println("call failing: " + e.code());
        }
        // Curator: protected mode.
        CuratorFramework curator = CuratorFrameworkFactory.newClient(member(hosts, 1), new ExponentialBackoffRetry(200, 10));
        curator.start();
        check(curator.blockUntilConnected(60, TimeUnit.SECONDS), "Curator connected");
        Object c = CuratorRecipes.call(curator, "lock", "acquire", Json.object("path", run + "/curator"), LONG);
        check(c instanceof String && ((String) c).contains("__lock__"), "Curator acquire: " + c);
        check(Recipes.call(one, "lock", "holder", Json.object("path", run + "/curator"), LONG).equals(c), "holder");
        check(CuratorRecipes.call(curator, "lock", "release", Json.object("path", run + "/curator"), LONG).equals(true),
            "Curator release");
        System.out.println("curator call: done");
        // A method that changes nothing, with one getData.
        Object q = Recipes.call(one, "lock", "acquire", Json.object("path", run + "/query"), LONG);
        check(Recipes.query(one, "lock", "holder", Json.object("path", run + "/query")).equals(q), "query: " + q);
        try {
            Recipes.query(one, "lock", "acquire", Json.object("path", run + "/query-other"));
            check(false, "a method that writes is refused");
        } catch (KeeperException.NotReadOnlyException e) {
            System.out.println("query: done, writes refused");
        }

        // Locks: the holder holds, a waiter waits until it releases.
        WazooLock l1 = new WazooLock(one, run + "/lock");
        WazooLock l2 = new WazooLock(CuratorRecipes.caller(curator), run + "/lock");
        String n1 = l1.acquire(LONG);
        Future<String> w = pool.submit(() -> l2.acquire(LONG));
        Thread.sleep(500);
        check(!w.isDone(), "the waiter waits");
        check(n1.equals(l1.holder()), "holder is the first");
        check(l1.release(), "released");
        String n2 = w.get(60, TimeUnit.SECONDS);
        check(!n2.equals(n1) && n2.equals(l1.holder()), "the waiter holds: " + n2);
        System.out.println("lock: held, waiter waits, gets it after release");
        WazooLock l3 = new WazooLock(three, run + "/lock");
        try {
            l3.acquire(Duration.ofMillis(700));
            check(false, "a held lock times out");
        } catch (TimeoutException e) {
            check(three.getChildren(run + "/lock", false).size() == 1, "the timed-out contender withdrew");
        }
        check(l2.release(), "second release");
        System.out.println("lock timeout: withdrawn");

        // Shared locks: readers together, a writer after them; revocation.
        WazooReadWriteLock r1 = new WazooReadWriteLock(one, run + "/rw");
        WazooReadWriteLock r2 = new WazooReadWriteLock(two, run + "/rw");
        WazooReadWriteLock wr = new WazooReadWriteLock(three, run + "/rw");
        String rn1 = r1.readAcquire(LONG);
        r2.readAcquire(LONG);
        Future<String> wf = pool.submit(() -> wr.writeAcquire(LONG));
        Thread.sleep(500);
        check(!wf.isDone(), "the writer waits for the readers");
        Future<Boolean> revoked = pool.submit(() -> r1.watchRevoke(rn1, LONG));
        Thread.sleep(300);
        check(wr.revoke(rn1), "revoke written");
        check(revoked.get(60, TimeUnit.SECONDS), "the holder sees the revocation");
        check(r1.release() == 1 && r2.release() == 1, "readers release");
        check(wf.get(60, TimeUnit.SECONDS).contains("__lock__"), "the writer holds");
        check(wr.release() == 1, "writer releases");
        System.out.println("rwlock: readers share, writer waits");
        System.out.println("rwlock revoke: seen");

        // Semaphore: two leases, a third acquirer waits.
        WazooSemaphore s1 = new WazooSemaphore(one, run + "/sem", 2).withId(b("one"));
        WazooSemaphore s2 = new WazooSemaphore(two, run + "/sem", 2).withId(b("two"));
        WazooSemaphore s3 = new WazooSemaphore(three, run + "/sem", 2).withId(b("three"));
        s1.acquire(LONG);
        s2.acquire(LONG);
        Future<String> sf = pool.submit(() -> s3.acquire(LONG));
        Thread.sleep(500);
        check(!sf.isDone(), "the third waits");
        List<String> holders = new ArrayList<>();
        for (byte[] h : s1.holders()) holders.add(s(h));
        Collections.sort(holders);
        check(holders.equals(List.of("one", "two")), "holders: " + holders);
        check(s1.release(), "lease released");
        sf.get(60, TimeUnit.SECONDS);
        check(s2.release() && s3.release(), "leases released");
        System.out.println("semaphore: 2 leases, third waits");

        // Queue: priority order, a take that waits for a put.
        WazooQueue q1 = new WazooQueue(one, run + "/q");
        WazooQueue q2 = new WazooQueue(two, run + "/q");
        q1.put(b("later"), 500);
        q1.put(b("first"), 1);
        q1.put(new byte[] {(byte) 0xff, 0});
        check(q2.size() == 3, "three queued");
        check(s(q2.take(LONG)).equals("first"), "priority 1 first");
        check(Arrays.equals(q2.take(LONG), new byte[] {(byte) 0xff, 0}), "binary item, priority 100");
        check(s(q2.take(LONG)).equals("later"), "priority 500 last");
        try {
            q2.take(Duration.ofMillis(500));
            check(false, "an empty queue's take times out");
        } catch (TimeoutException e) {
            // still waiting server-side
        }
        q1.put(b("arrived"));
        check(s(q2.take(LONG)).equals("arrived"), "the timed-out take picks up the item");
        check(q2.size() == 0, "empty");
        System.out.println("queue: priority order, take waits for put");

        // Barrier.
        WazooBarrier b1 = new WazooBarrier(one, run + "/barrier");
        WazooBarrier b2 = new WazooBarrier(two, run + "/barrier");
        check(b1.set(), "barrier up");
        Future<?> bw = pool.submit(() -> {
            b2.await(LONG);
            return null;
        });
        Thread.sleep(500);
        check(!bw.isDone(), "waits while up");
        check(b1.remove(), "removed");
        bw.get(60, TimeUnit.SECONDS);
        System.out.println("barrier: waits until removed");

        // Double barrier: three enter together and leave together.
        List<Future<?>> ds = new ArrayList<>();
        ZooKeeper[] zks = {one, two, three};
        for (int i = 0; i < 3; i++) {
            WazooDoubleBarrier d = new WazooDoubleBarrier(zks[i], run + "/double", "p" + i, 3);
            ds.add(pool.submit(() -> {
                d.enter(LONG);
                d.leave(LONG);
                return null;
            }));
        }
        for (Future<?> f : ds) f.get(90, TimeUnit.SECONDS);
        System.out.println("double_barrier: entered and left");

        // Two-phase commit: all commit; then one aborts.
        WazooTwoPhase coord = new WazooTwoPhase(one, run + "/tx1");
        coord.begin(List.of("a", "b"), b("payload"));
        Future<String> outcome = pool.submit(() -> coord.decision(LONG));
        WazooTwoPhase.Site sa = new WazooTwoPhase.Site(two, run + "/tx1", "a");
        WazooTwoPhase.Site sb = new WazooTwoPhase.Site(three, run + "/tx1", "b");
        check(s(sa.join()).equals("payload") && s(sb.join()).equals("payload"), "sites read the transaction");
        check(sa.vote(true) == null, "undecided after one vote");
        check("commit".equals(sb.vote(true)), "the last commit vote decides");
        check(outcome.get(60, TimeUnit.SECONDS).equals("commit") && sa.decision(LONG).equals("commit"), "commit");
        System.out.println("twophase: commit");
        WazooTwoPhase coord2 = new WazooTwoPhase(one, run + "/tx2");
        coord2.begin(List.of("a", "b"), null);
        new WazooTwoPhase.Site(two, run + "/tx2", "a").join();
        check("abort".equals(new WazooTwoPhase.Site(two, run + "/tx2", "a").vote(false)), "an abort vote decides");
        check(coord2.decision(LONG).equals("abort"), "abort");
        System.out.println("twophase: abort");

        // Election: the first leads and acks; when it resigns the next leads.
        WazooElection e1 = new WazooElection(one, run + "/election", b("one"));
        WazooElection e2 = new WazooElection(two, run + "/election", b("two"));
        e1.campaign(LONG);
        Future<String> next = pool.submit(() -> e2.campaign(LONG));
        Thread.sleep(500);
        check(!next.isDone(), "the second waits");
        check(s(e2.leader()).equals("one"), "leader one");
        try {
            e2.ack();
            check(false, "only the leader acks");
        } catch (KeeperException.APIErrorException expected) {
            // APIError
        }
        e1.ack();
        check(s(e2.waitAck(LONG)).equals("one"), "acknowledged by one");
        check(e1.resign(), "resigned");
        next.get(60, TimeUnit.SECONDS);
        check(s(e1.leader()).equals("two"), "leader two");
        System.out.println("election: leader, ack, failover to the next");

        // Group membership and its watch.
        WazooGroup g1 = new WazooGroup(one, run + "/group");
        WazooGroup g2 = new WazooGroup(two, run + "/group");
        g1.join("alpha", b("a-data"));
        WazooGroup.Members now = g2.members();
        check(now.members.keySet().equals(Set.of("alpha")) && s(now.members.get("alpha")).equals("a-data"),
            "members: " + now.members.keySet());
        Future<WazooGroup.Members> changed = pool.submit(() -> g2.watch(now.version, LONG));
        Thread.sleep(500);
        check(!changed.isDone(), "the watch waits");
        g2.join("beta", null);
        WazooGroup.Members after = changed.get(60, TimeUnit.SECONDS);
        check(after.version != now.version && after.members.keySet().equals(Set.of("alpha", "beta")),
            "changed: " + after.members.keySet());
        check(g1.leave("alpha"), "left");
        System.out.println("group: members and watch");

        pool.shutdownNow();
        curator.close();
        one.close();
        two.close();
        three.close();
    }

    static void failover(String hosts, String lock, String go, boolean viaCurator) throws Exception {
        ZooKeeper holder = connect(hosts);
        ZooKeeper waiter;
        RecipeCaller waiterCalls;
        CuratorFramework curator = null;
        if (viaCurator) {
            curator = CuratorFrameworkFactory.newClient(hosts, 20000, 15000, new ExponentialBackoffRetry(200, 20));
            curator.start();
            check(curator.blockUntilConnected(60, TimeUnit.SECONDS), "Curator connected");
            waiter = curator.getZookeeperClient().getZooKeeper();
            waiterCalls = CuratorRecipes.caller(curator);
        } else {
            waiter = connect(hosts);
            waiterCalls = Recipes.caller(waiter);
        }
        long session = waiter.getSessionId();
        System.out.println("holder " + new WazooLock(holder, lock).acquire(LONG));
        System.out.flush();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        Future<String> held = pool.submit(() -> new WazooLock(waiterCalls, lock).acquire(Duration.ofSeconds(120)));
        // Until the waiter's call node says it waits.
        String data = null;
        for (int i = 0; i < 600 && data == null; i++) {
            try {
                for (String child : waiter.getChildren("/zookeeper/calls/lock", false)) {
                    String d = s(waiter.getData("/zookeeper/calls/lock/" + child, false, null));
                    if (d.startsWith("{\"waiting\"")) data = d;
                }
            } catch (KeeperException.NoNodeException e) {
                // not yet
            }
            if (data == null) Thread.sleep(100);
        }
        check(data != null, "the waiter's call waits");
        System.out.println("waiting " + data);
        System.out.flush();
        for (int i = 0; i < 1200 && !Files.exists(Paths.get(go)); i++) Thread.sleep(50);
        check(Files.exists(Paths.get(go)), "the go file");
        WazooLock holderLock = new WazooLock(holder, lock);
        check(holderLock.release(), "the holder releases");
        String node = held.get(120, TimeUnit.SECONDS);
        System.out.println("held " + node);
        check(node.equals(holderLock.holder()), "the waiter is the holder");
        if (waiter.getSessionId() == session) System.out.println("same session");
        pool.shutdownNow();
        holder.close();
        if (curator != null) curator.close();
        else waiter.close();
    }
}
