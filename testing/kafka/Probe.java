// Readiness probe of scripts/kafka.sh: waits until every listed broker serves metadata that
// lists the expected number of brokers, asking each broker on its own (it is the only
// bootstrap address of its own admin client), with Kafka's own Java client.
//
// Usage: java -cp "<broker jars>/*" Probe.java <expected brokers> <deadline seconds> target...
// A target is host:port, optionally followed by client properties: host:port|key=value|...
// (how the script checks the TLS and SASL listeners). Prints the cluster id on success; exits
// 1 with the last error of each target otherwise.

import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;

public class Probe {
    public static void main(String[] args) throws Exception {
        int expected = Integer.parseInt(args[0]);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(args[1]));
        List<String> pending = new ArrayList<>(List.of(args).subList(2, args.length));
        List<String> errors = new ArrayList<>();
        String clusterId = null;
        while (!pending.isEmpty() && System.nanoTime() < deadline) {
            errors.clear();
            List<String> still = new ArrayList<>();
            for (String target : pending) {
                String[] parts = target.split("\\|");
                String address = parts[0];
                Properties props = new Properties();
                for (int i = 1; i < parts.length; i++) {
                    int eq = parts[i].indexOf('=');
                    props.put(parts[i].substring(0, eq), parts[i].substring(eq + 1));
                }
                props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, address);
                props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
                props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "3000");
                props.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
                try (Admin admin = Admin.create(props)) {
                    DescribeClusterResult cluster = admin.describeCluster();
                    int brokers = cluster.nodes().get(4, TimeUnit.SECONDS).size();
                    String id = cluster.clusterId().get(4, TimeUnit.SECONDS);
                    if (brokers != expected) {
                        throw new IllegalStateException(brokers + " of " + expected + " brokers registered");
                    }
                    if (clusterId != null && !clusterId.equals(id)) {
                        throw new IllegalStateException("cluster id " + id + ", another broker said " + clusterId);
                    }
                    clusterId = id;
                } catch (Exception e) {
                    still.add(target);
                    String how = props.getProperty("security.protocol", "PLAINTEXT")
                        + props.getProperty("sasl.mechanism", "").replaceAll("^(.)", " $1");
                    errors.add(address + " (" + how + "): " + e);
                }
            }
            pending = still;
            if (!pending.isEmpty()) {
                Thread.sleep(250);
            }
        }
        if (!pending.isEmpty()) {
            System.err.println("brokers not serving metadata in time:");
            errors.forEach(e -> System.err.println("  " + e));
            System.exit(1);
        }
        System.out.println(clusterId);
    }
}
