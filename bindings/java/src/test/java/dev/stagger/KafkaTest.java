package dev.stagger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.TextNode;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The java.nio host against a real Kafka cluster (scripts/kafka.sh start), found through
 * $STAGGER_KAFKA_DIR/cluster.env; skipped when STAGGER_KAFKA_DIR is unset.
 */
class KafkaTest {
    private List<String> seeds;

    @BeforeEach
    void cluster() throws IOException {
        String dir = System.getenv("STAGGER_KAFKA_DIR");
        assumeTrue(dir != null && !dir.isEmpty(), "STAGGER_KAFKA_DIR is not set (scripts/kafka.sh start --dir DIR)");
        for (String line : Files.readAllLines(Path.of(dir, "cluster.env"))) {
            if (line.startsWith("KAFKA_PLAINTEXT=")) {
                seeds = Arrays.asList(line.substring("KAFKA_PLAINTEXT=".length()).trim().split(","));
            }
        }
        assertTrue(seeds != null && !seeds.isEmpty(), "no KAFKA_PLAINTEXT in " + dir + "/cluster.env");
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aHealthyClusterRefreshes() {
        Stagger.Refresh refresh = Stagger.refresh(listed(seeds));
        JsonNode metadata = Conformance.parse(refresh.metadataJson());
        assertEquals(3, metadata.get("brokers").size(), refresh.metadataJson());
        assertEquals(seeds.get(0), refresh.answeredBy());
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aClosedPortListedFirstIsPassedOver() throws IOException {
        String closed = closedPort();
        List<String> all = new ArrayList<>();
        all.add(closed);
        all.addAll(seeds);
        Stagger.Refresh refresh = Stagger.refresh(listed(all));
        JsonNode metadata = Conformance.parse(refresh.metadataJson());
        assertEquals(3, metadata.get("brokers").size(), refresh.metadataJson());
        assertTrue(seeds.contains(refresh.answeredBy()), refresh.answeredBy());
        JsonNode last = Conformance.parse(refresh.reportJson()).get("last_refresh");
        assertEquals("refreshed", last.get("outcome").asText(), last.toString());
        // The closed port was tried first and failed as refused.
        JsonNode first = last.get("attempts").get(0);
        assertEquals(closed, first.get("broker").asText(), last.toString());
        assertEquals("failed", first.get("outcome").asText(), last.toString());
        assertEquals("refused", first.path("error_kind").path("kind").asText(), last.toString());
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void onlyAClosedPortFailsWithTheErrorJson() throws IOException {
        String closed = closedPort();
        RefreshFailedException e = org.junit.jupiter.api.Assertions.assertThrows(RefreshFailedException.class,
                () -> Stagger.metadata(List.of(closed)));
        JsonNode error = Conformance.parse(e.errorJson());
        assertEquals("refused", error.get("last_error").get("kind").asText(), e.errorJson());
    }

    /**
     * A one-shot config asking {@code seeds} in the order listed ({@code shuffle_seeds} off;
     * by default a refresh shuffles them).
     */
    private static String listed(List<String> seeds) {
        ObjectNode config = Conformance.JSON.createObjectNode();
        config.putArray("seeds").addAll(seeds.stream().map(TextNode::valueOf).toList());
        config.put("one_shot", true);
        config.putObject("settings").put("shuffle_seeds", "false");
        return config.toString();
    }

    /** A loopback address nothing listens on: a port the kernel gave out, closed again. */
    private static String closedPort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            return "127.0.0.1:" + s.getLocalPort();
        }
    }
}
