// Apache Curator's reconfig API (CuratorFramework.reconfig() and
// getConfig()) against a 3-member ensemble with reconfigEnabled=true and the
// super user `super:test`: removes member ARGS[1] and prints one
// `name: result` line per step, for host/tests/reconfig.rs to compare
// between Apache ZooKeeper and wazoo.
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorReconfig {
    static int servers(byte[] cfg) {
        int n = 0;
        for (String l : new String(cfg).split("\n")) if (l.startsWith("server.")) n++;
        return n;
    }
    static long version(byte[] cfg) {
        for (String l : new String(cfg).split("\n")) if (l.startsWith("version=")) return Long.parseLong(l.substring(8), 16);
        return -1;
    }
    public static void main(String[] a) throws Exception {
        String addr = a[0], leaving = a[1];
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(addr)
            .retryPolicy(new RetryOneTime(500)).authorization("digest", "super:test".getBytes()).build();
        c.start();
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) { System.out.println("connected: false"); System.exit(1); }
        Stat st = new Stat();
        byte[] cfg = c.getConfig().storingStatIn(st).forEnsemble();
        System.out.println("servers before: " + servers(cfg));
        System.out.println("version is mzxid: " + (version(cfg) == st.getMzxid()));
        try {
            c.reconfig().leaving(leaving).fromConfig(version(cfg) + 1).forEnsemble();
            System.out.println("stale version: accepted");
        } catch (KeeperException e) {
            System.out.println("stale version: " + e.code());
        }
        Stat after = new Stat();
        byte[] next = c.reconfig().leaving(leaving).storingStatIn(after).fromConfig(version(cfg)).forEnsemble();
        System.out.println("servers after: " + servers(next));
        System.out.println("left: " + !new String(next).contains("server." + leaving + "="));
        System.out.println("new version is its mzxid: " + (version(next) == after.getMzxid() && version(next) > version(cfg)));
        byte[] seen = c.getConfig().forEnsemble();
        System.out.println("getConfig agrees: " + (version(seen) == version(next)));
        c.create().forPath("/curator-after", "x".getBytes());
        System.out.println("write after: " + new String(c.getData().forPath("/curator-after")));
        c.close();
    }
}
