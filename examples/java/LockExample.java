// A lock shared by processes, from ZooKeeper's stock Java client, through
// the wazoo recipes jar (clients/java): each run acquires /examples/lock,
// holds it, releases. Start several at once: they take turns, in arrival
// order (ZooKeeper Recipes and Solutions, "Locks", run server-side by
// wazoo's built-in lock recipe). The same lock and output as
// examples/lock.rs, examples/python/lock.py, examples/go/lock.go and
// examples/c/lock.c, so they can share one lock.
//
// Against `cargo run --release -p wazoo -- dev` (127.0.0.1:2181), from the
// repository's root:
//
//   clients/java/build.sh target/java
//   CP=target/java/wazoo-recipes.jar:/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar
//   javac -cp "$CP" -d target/java/examples examples/java/LockExample.java
//   for i in 1 2 3; do java -cp "target/java/examples:$CP" LockExample & done; wait
//
// Arguments: [SERVER [PATH [HOLD_MS]]], defaults 127.0.0.1:2181,
// /examples/lock, 1000.
import io.wazoo.recipes.WazooLock;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

public class LockExample {
    public static void main(String[] args) throws Exception {
        String server = args.length > 0 ? args[0] : "127.0.0.1:2181";
        String path = args.length > 1 ? args[1] : "/examples/lock";
        long holdMs = args.length > 2 ? Long.parseLong(args[2]) : 1000;
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(server, 10000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) connected.countDown();
        });
        try {
            if (!connected.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("no session on " + server);
            String me = "pid " + ProcessHandle.current().pid();
            WazooLock lock = new WazooLock(zk, path).withId(me.getBytes(StandardCharsets.UTF_8));
            long start = System.nanoTime();
            System.out.printf("%s: waiting for %s%n", me, path);
            String node = lock.acquire(Duration.ofSeconds(60));
            System.out.printf("%s: acquired after %.1f s as %s%n", me, (System.nanoTime() - start) / 1e9, node);
            try {
                Thread.sleep(holdMs);
            } finally {
                lock.release();
            }
            System.out.printf("%s: released%n", me);
        } finally {
            zk.close();
        }
    }
}
