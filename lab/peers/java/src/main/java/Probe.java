// lab/peers probe for the Java client (kafka-clients): one Admin, one describeCluster().
//
//   java -cp 'jar:lib/*' Probe BOOTSTRAP TUNED(0|1) [WARMUP_ADDRESS]
//
// Prints one JSON line: {"ok":true,"elapsed_ms":…,"brokers":N} (time from Admin.create to the
// answer) or {"ok":false,"elapsed_ms":…,"error":"…"}. With WARMUP_ADDRESS a first Admin asks
// that (healthy, uncounted) broker once, so class loading and the JIT's first compilations are
// not billed to the measured round; the probe then prints {"ready":true} and waits for a line on
// stdin (the benchmark makes its faults in between).
//
// Over SASL_SSL (bench.py --listener sasl_ssl) the benchmark sets PEERS_SECURITY_PROTOCOL=SASL_SSL,
// PEERS_SASL_MECHANISM, PEERS_SASL_USERNAME, PEERS_SASL_PASSWORD and PEERS_CA_FILE (a PEM file).
import java.time.Duration;
import java.util.Collection;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.Node;

public final class Probe {
  static Properties props(String bootstrap, boolean tuned) {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.CLIENT_ID_CONFIG, "peers-probe");
    if ("SASL_SSL".equals(System.getenv("PEERS_SECURITY_PROTOCOL"))) {
      String login = "username=\"" + System.getenv("PEERS_SASL_USERNAME") + "\" password=\""
          + System.getenv("PEERS_SASL_PASSWORD") + "\";";
      p.put("security.protocol", "SASL_SSL");
      p.put("sasl.mechanism", System.getenv("PEERS_SASL_MECHANISM"));
      p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required " + login);
      p.put("ssl.truststore.type", "PEM");
      p.put("ssl.truststore.location", System.getenv("PEERS_CA_FILE"));
    }
    if (tuned) {
      // Per-request and per-connect timeouts 2 s (defaults 30 s and 10 s / 30 s max); the
      // backoffs' defaults (retry 100 ms..1 s, reconnect 50 ms..1 s) are already below 2 s.
      // default.api.timeout.ms (the whole call's deadline, 60 s) is not a per-broker timeout.
      p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "2000");
      p.put(AdminClientConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MS_CONFIG, "2000");
      p.put(AdminClientConfig.SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS_CONFIG, "2000");
    }
    return p;
  }

  /** One round; returns the brokers listed, and sets `answered` to the nanoTime of the answer. */
  static long answered;

  static int once(String bootstrap, boolean tuned) throws Exception {
    Admin admin = Admin.create(props(bootstrap, tuned));
    try {
      Collection<Node> nodes = admin.describeCluster().nodes().get();
      answered = System.nanoTime();
      return nodes.size();
    } finally {
      admin.close(Duration.ZERO);
    }
  }

  static String quote(String s) {
    return "\"" + String.valueOf(s).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
  }

  /** Tells the benchmark the warm-up is done, then waits for its go (a line on stdin). */
  static void ready() {
    System.out.println("{\"ready\":true}");
    System.out.flush();
    try {
      int c;
      while ((c = System.in.read()) != -1 && c != '\n') {}
    } catch (java.io.IOException e) {
      // no go line: measure at once
    }
  }

  public static void main(String[] args) {
    String bootstrap = args[0];
    boolean tuned = args.length > 1 && args[1].equals("1");
    if (args.length > 2 && !args[2].isEmpty()) {
      try {
        once(args[2], tuned);
      } catch (Exception e) {
        System.err.println("warm-up failed: " + e);
      }
      ready();
    }
    long t0 = System.nanoTime();
    try {
      int brokers = once(bootstrap, tuned);
      double ms = (answered - t0) / 1e6;
      System.out.println("{\"ok\":true,\"elapsed_ms\":" + ms + ",\"brokers\":" + brokers + "}");
    } catch (Exception e) {
      double ms = (System.nanoTime() - t0) / 1e6;
      System.out.println("{\"ok\":false,\"elapsed_ms\":" + ms + ",\"error\":" + quote(e.toString()) + "}");
    }
    System.out.flush();
    Runtime.getRuntime().halt(0);
  }
}
