// Readiness check: connects to the bootstrap address and sends a metadata
// request (Admin.describeCluster) until the expected number of brokers is
// registered, or the deadline passes. An optional fourth argument names a
// client properties file (security settings of the secure modes). Run with
// Kafka's classpath:
//   java -cp "$KAFKA_LIBS/*" KafkaReady.java 127.0.0.1:19092 1 60 [client.properties]
import java.io.FileReader;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.Node;

public class KafkaReady {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int expected = Integer.parseInt(args[1]);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(args[2]));
        Properties p = new Properties();
        if (args.length > 3) {
            try (FileReader r = new FileReader(args[3])) { p.load(r); }
        }
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        String last = "no answer";
        try (Admin admin = Admin.create(p)) {
            while (System.nanoTime() < deadline) {
                try {
                    var nodes = admin.describeCluster().nodes().get(5, TimeUnit.SECONDS);
                    var ctrl = admin.describeCluster().controller().get(5, TimeUnit.SECONDS);
                    if (nodes.size() >= expected) {
                        StringBuilder sb = new StringBuilder();
                        for (Node n : nodes) sb.append(' ').append(n.id()).append('@').append(n.host()).append(':').append(n.port());
                        System.out.println("ready: " + nodes.size() + " broker(s):" + sb + " controller " + (ctrl == null ? "?" : ctrl.id()));
                        return;
                    }
                    last = nodes.size() + " of " + expected + " brokers registered";
                } catch (Exception e) {
                    last = e.toString();
                }
                Thread.sleep(500);
            }
        }
        System.err.println("not ready: " + last);
        System.exit(1);
    }
}
