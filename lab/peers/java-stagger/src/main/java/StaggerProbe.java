// lab/peers probe for stagger's JVM binding (bindings/java): one one-shot refresh at the
// binding's defaults, the seeds tried in the order given.
//
//   java -cp 'jar:lib/*' StaggerProbe BOOTSTRAP TUNED(0|1) [WARMUP_ADDRESS]
//
// Prints one JSON line: {"ok":true,"elapsed_ms":…,"brokers":N,"attempts":A} (time from the
// call to the answer) or {"ok":false,"elapsed_ms":…,"error":"…"}. TUNED is accepted for the
// benchmark's uniform command line and ignored. With WARMUP_ADDRESS a first refresh asks that
// (healthy, uncounted) broker once, so class loading and Chicory's compilation of the module
// are not billed to the measured round; the probe then prints {"ready":true} and waits for a
// line on stdin (the benchmark makes its faults in between).
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.stagger.Stagger;
import java.util.Arrays;
import java.util.List;

public final class StaggerProbe {
  static final ObjectMapper JSON = new ObjectMapper();

  static List<String> seeds(String bootstrap) {
    return Arrays.asList(bootstrap.split(","));
  }

  static String quote(String s) {
    return "\"" + String.valueOf(s).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    if (args.length > 2 && !args[2].isEmpty()) {
      try {
        Stagger.metadata(seeds(args[2]));
      } catch (Exception e) {
        System.err.println("warm-up failed: " + e);
      }
      System.out.println("{\"ready\":true}");
      System.out.flush();
      int c;
      while ((c = System.in.read()) != -1 && c != '\n') {}
    }
    long t0 = System.nanoTime();
    try {
      Stagger.Refresh refresh = Stagger.refresh(seeds(bootstrap));
      double ms = (System.nanoTime() - t0) / 1e6;
      int brokers = JSON.readTree(refresh.metadataJson()).get("brokers").size();
      JsonNode last = JSON.readTree(refresh.reportJson()).path("last_refresh");
      int attempts = last.path("attempts").size();
      System.out.println("{\"ok\":true,\"elapsed_ms\":" + ms + ",\"brokers\":" + brokers + ",\"attempts\":" + attempts + "}");
    } catch (Exception e) {
      double ms = (System.nanoTime() - t0) / 1e6;
      System.out.println("{\"ok\":false,\"elapsed_ms\":" + ms + ",\"error\":" + quote(e.toString()) + "}");
    }
    System.out.flush();
    Runtime.getRuntime().halt(0);
  }
}
