// Null data through ZooKeeper's Java client (zookeeper.jar): a node
// created or set with null data reads back as null from getData (and from
// a multi's getData), empty data as byte[0]. Arguments: the connect string
// and a path that does not exist yet (the test's own). Prints one line per
// check, "what: null|bytes N, dataLength M".

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Stat;

public class NullData {
    static String shown(byte[] data, Stat stat) {
        return (data == null ? "null" : "bytes " + data.length) + ", dataLength " + stat.getDataLength();
    }

    static void show(ZooKeeper zk, String what, String path) throws Exception {
        Stat stat = new Stat();
        byte[] data = zk.getData(path, false, stat);
        System.out.println(what + ": " + shown(data, stat));
    }

    public static void main(String[] args) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(args[0], 20000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(30, TimeUnit.SECONDS)) {
            System.out.println("no session");
            System.exit(1);
        }
        List<ACL> open = ZooDefs.Ids.OPEN_ACL_UNSAFE;
        String base = args[1];
        String nul = base + "/null", empty = base + "/empty", multi = base + "/multi";
        zk.create(base, new byte[0], open, CreateMode.PERSISTENT);
        Stat created = new Stat();
        zk.create(nul, null, open, CreateMode.PERSISTENT, created);
        System.out.println("create2 null: dataLength " + created.getDataLength());
        show(zk, "get null", nul);
        zk.create(empty, new byte[0], open, CreateMode.PERSISTENT);
        show(zk, "get empty", empty);
        zk.setData(nul, "x".getBytes(), -1);
        show(zk, "get x", nul);
        Stat set = zk.setData(nul, null, -1);
        System.out.println("set null: dataLength " + set.getDataLength());
        show(zk, "get set null", nul);
        zk.multi(Arrays.asList(
                Op.create(multi, null, open, CreateMode.PERSISTENT),
                Op.setData(empty, null, -1)));
        show(zk, "get multi create", multi);
        show(zk, "get multi set", empty);
        for (OpResult r : zk.multi(Arrays.asList(Op.getData(nul), Op.getData(base)))) {
            OpResult.GetDataResult g = (OpResult.GetDataResult) r;
            System.out.println("multi read: " + shown(g.getData(), g.getStat()));
        }
        show(zk, "get /zookeeper", "/zookeeper");
        zk.close();
    }
}
