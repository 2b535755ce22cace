package dev.stagger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Replays every conformance scenario (the checkout's conformance/*.json, named by the
 * stagger.conformance.dir system property that the pom sets) through this binding, and checks
 * that the replayer itself fails at the first differing action.
 */
class ConformanceTest {
    static Path dir() {
        String dir = System.getProperty("stagger.conformance.dir", "../../conformance");
        return Path.of(dir);
    }

    static List<Path> files() throws IOException {
        try (Stream<Path> s = Files.list(dir())) {
            return s.filter(p -> p.toString().endsWith(".json")).sorted().collect(Collectors.toList());
        }
    }

    @TestFactory
    Stream<DynamicTest> everyConformanceScenarioReplaysThroughTheJavaSession() throws IOException {
        List<Path> files = files();
        assertFalse(files.isEmpty(), "no scenarios in " + dir());
        return files.stream().map(path -> DynamicTest.dynamicTest(path.getFileName().toString(), () -> {
            JsonNode doc = Conformance.JSON.readTree(path.toFile());
            try {
                Conformance.replay(doc);
            } catch (Conformance.Divergence e) {
                throw new Conformance.Divergence("conformance/" + path.getFileName() + " (" + doc.get("description").asText() + "):\n" + e.getMessage());
            }
        }));
    }

    @Test
    void aConformanceReplayFailsAtTheFirstDifferingAction() throws IOException {
        JsonNode doc = Conformance.JSON.readTree(dir().resolve("one_shot_healthy.json").toFile());
        Conformance.replay(doc);
        // Step 0 answers [refresh_requested, dial]; the copy's dial names another broker.
        JsonNode dial = doc.get("steps").get(0).get("expect").get("actions").get(1);
        assertEquals("b1:9092", dial.get("dial").get("address").asText());

        JsonNode doctored = doc.deepCopy();
        ((ObjectNode) doctored.get("steps").get(0).get("expect").get("actions").get(1).get("dial")).put("address", "b2:9093");
        String message = assertThrows(Conformance.Divergence.class, () -> Conformance.replay(doctored)).getMessage();
        assertTrue(message.startsWith("step 0 (now_ns " + doc.get("now_ns").asText() + "), action 1: expected "), message);
        assertTrue(message.contains("\"address\":\"b2:9093\"") && message.contains("got {\"dial\":{\"address\":\"b1:9092\""), message);

        JsonNode missing = doc.deepCopy();
        ((ArrayNode) missing.get("steps").get(0).get("expect").get("actions")).remove(1);
        message = assertThrows(Conformance.Divergence.class, () -> Conformance.replay(missing)).getMessage();
        assertTrue(message.contains("action 1: expected no action, got {\"dial\""), message);

        JsonNode late = doc.deepCopy();
        ((ObjectNode) late.get("steps").get(1).get("expect")).put("next_wakeup_ns", 0);
        message = assertThrows(Conformance.Divergence.class, () -> Conformance.replay(late)).getMessage();
        assertTrue(message.matches("^step 1 \\(now_ns \\d+\\): next_wakeup_ns: expected 0, got \\d+$"), message);

        JsonNode counted = doc.deepCopy();
        ((ObjectNode) counted.get("end").get("report").get("stats")).put("connections_opened", 2);
        message = assertThrows(Conformance.Divergence.class, () -> Conformance.replay(counted)).getMessage();
        assertEquals("end: report.stats.connections_opened: expected 2, got 1", message);
    }

    @Test
    void aRefusedConfigNamesItsField() {
        StaggerException e = assertThrows(StaggerException.class,
                () -> new Session("{\"seeds\": [\"b1:9092\"], \"sasl\": {\"mechanism\": \"PLAIN\", \"username\": \"u\"}}", 1, 1));
        assertEquals(1, e.status());
        assertTrue(e.field() != null && e.field().startsWith("sasl"), String.valueOf(e.field()));
    }

    @Test
    void aMalformedBatchIsRefusedWhole() {
        try (Session s = new Session("{\"seeds\": [\"b1:9092\"], \"one_shot\": true}", 1, 1)) {
            StaggerException e = assertThrows(StaggerException.class,
                    () -> s.step(2, List.of(new Event.Raw(1, new byte[3]))));
            assertEquals(2, e.status());
            assertEquals("malformed_batch", e.error());
            // Nothing of it was applied: the session still answers.
            assertEquals("null", s.metadataJson());
        }
    }
}
