// A lock shared by processes, from ZooKeeper's stock Java client, through
// the wazoo recipes jar (clients/java): each run acquires /locks/java-demo,
// holds it 1 s, releases. Start several at once: they take turns, in
// arrival order (ZooKeeper Recipes and Solutions, "Locks", run server-side
// by wazoo's built-in lock recipe).
//
// Against `cargo run --release -p wazoo -- dev` (127.0.0.1:2181), from the
// repository's root:
//
//   clients/java/build.sh target/java
//   CP=target/java/wazoo-recipes.jar:/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar
//   javac -cp "$CP" -d target/java/examples examples/java/LockExample.java
//   java -cp "target/java/examples:$CP" LockExample [SERVER]
import io.wazoo.recipes.WazooLock;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

public class LockExample {
    public static void main(String[] args) throws Exception {
        String server = args.length > 0 ? args[0] : "127.0.0.1:2181";
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(server, 10000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) connected.countDown();
        });
        if (!connected.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + server);
        WazooLock lock = new WazooLock(zk, "/locks/java-demo");
        long start = System.nanoTime();
        String node = lock.acquire(Duration.ofSeconds(60));
        System.out.printf("held %s after %d ms%n", node, (System.nanoTime() - start) / 1_000_000);
        try {
            Thread.sleep(1000);
        } finally {
            lock.release();
            System.out.println("released");
        }
        zk.close();
    }
}
