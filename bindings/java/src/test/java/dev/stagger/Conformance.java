package dev.stagger;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * The conformance files (conformance/README.md) replayed through this binding: each step's
 * events built as {@link Event}s, stepped through {@link Session} (so encoded by {@link Wire}),
 * the actions it decodes turned into the files' JSON form and compared. A port of
 * bindings/python/tests/conformance.py and test_conformance.py's replay.
 */
final class Conformance {
    static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS);
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final HexFormat HEX = HexFormat.of();

    private Conformance() {}

    /** The session through this binding answered otherwise than the scenario says. */
    static final class Divergence extends AssertionError {
        Divergence(String message) {
            super(message);
        }
    }

    /** A u64 of the file (numbers may exceed Long.MAX_VALUE) as the long the ABI carries. */
    static long u64(JsonNode n) {
        return n.bigIntegerValue().longValue();
    }

    /** A file's event as an {@link Event}. */
    static Event eventOf(JsonNode obj) {
        Map.Entry<String, JsonNode> only = obj.fields().next();
        String kind = only.getKey();
        JsonNode f = only.getValue();
        switch (kind) {
            case "connected": return new Event.Connected(u64(f.get("conn")));
            case "secured": return new Event.Secured(u64(f.get("conn")));
            case "received": return new Event.Received(u64(f.get("conn")), HEX.parseHex(f.get("hex").asText()));
            case "closed": return new Event.Closed(u64(f.get("conn")), f.get("reset").asBoolean());
            case "io_error": return new Event.IoError(u64(f.get("conn")), kindOf(f), f.get("code").asInt(), f.get("detail").asText());
            case "resolved": {
                List<InetSocketAddress> addresses = new ArrayList<>();
                for (JsonNode a : f.get("addresses")) addresses.add(Wire.literal(a.asText()));
                return new Event.Resolved(u64(f.get("lookup")), addresses);
            }
            case "resolve_failed": return new Event.ResolveFailed(u64(f.get("lookup")), kindOf(f), f.get("code").asInt(), f.get("detail").asText());
            case "nonce": return new Event.Nonce(u64(f.get("conn")), HEX.parseHex(f.get("hex").asText()));
            case "token": return new Event.Token(u64(f.get("conn")), f.get("token").asText());
            case "token_failed": return new Event.TokenFailed(u64(f.get("conn")), f.get("why").asText());
            case "request_refresh":
                return new Event.RequestRefresh(Cause.valueOf(f.get("cause").asText().toUpperCase(Locale.ROOT)), f.get("broker").asText());
            default: throw new IllegalArgumentException("unknown event " + kind);
        }
    }

    private static ErrorKind kindOf(JsonNode f) {
        return ErrorKind.valueOf(f.get("kind").asText().toUpperCase(Locale.ROOT));
    }

    private static JsonNode u64Node(long v) {
        return v >= 0 ? NODES.numberNode(v) : NODES.numberNode(new BigInteger(Long.toUnsignedString(v)));
    }

    /** A decoded action in the files' JSON form (a refresh error parsed, as the files hold it). */
    static JsonNode actionForm(Action action) {
        ObjectNode f = NODES.objectNode();
        String name;
        if (action instanceof Action.Dial a) {
            name = "dial";
            f.set("conn", u64Node(a.conn()));
            f.put("address", a.address());
            f.put("tls", a.serverName());
        } else if (action instanceof Action.Send a) {
            name = "send";
            f.set("conn", u64Node(a.conn()));
            f.put("hex", HEX.formatHex(a.data()));
        } else if (action instanceof Action.Close a) {
            name = "close";
            f.set("conn", u64Node(a.conn()));
        } else if (action instanceof Action.Resolve a) {
            name = "resolve";
            f.set("lookup", u64Node(a.lookup()));
            f.put("name", a.name());
        } else if (action instanceof Action.NeedNonce a) {
            name = "need_nonce";
            f.set("conn", u64Node(a.conn()));
        } else if (action instanceof Action.NeedToken a) {
            name = "need_token";
            f.set("conn", u64Node(a.conn()));
        } else if (action instanceof Action.Refreshed a) {
            name = "refreshed";
            f.put("epoch", a.epoch());
            f.put("broker", a.broker());
            f.put("address", a.address());
        } else if (action instanceof Action.RefreshFailed a) {
            name = "refresh_failed";
            f.put("epoch", a.epoch());
            f.set("error", parse(a.errorJson()));
        } else if (action instanceof Action.Rebootstrapped) {
            name = "rebootstrapped";
        } else if (action instanceof Action.RefreshRequested a) {
            name = "refresh_requested";
            f.put("epoch", a.epoch());
        } else {
            throw new IllegalArgumentException("not an action: " + action);
        }
        ObjectNode form = NODES.objectNode();
        form.set(name, f);
        // Through text and back, so numbers take the node types the file's did.
        return parse(form.toString());
    }

    static JsonNode parse(String text) {
        try {
            return JSON.readTree(text);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Compact JSON with sorted keys, as Python's {@code json.dumps(sort_keys=True)}; "no action" for none. */
    static String show(JsonNode value) {
        if (value == null) return "no action";
        try {
            return JSON.writeValueAsString(JSON.treeToValue(value, Object.class));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Where {@code actual} lacks a field of {@code expected} or differs from it (objects: the
     * fields expected names; arrays: the same length, each element so; anything else: equal).
     */
    static String subset(JsonNode expected, JsonNode actual, String path) {
        if (expected.isObject() && actual.isObject()) {
            TreeMap<String, JsonNode> sorted = new TreeMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = expected.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                sorted.put(e.getKey(), e.getValue());
            }
            for (Map.Entry<String, JsonNode> e : sorted.entrySet()) {
                if (!actual.has(e.getKey())) return path + "." + e.getKey() + ": expected " + show(e.getValue()) + ", got nothing";
                String where = subset(e.getValue(), actual.get(e.getKey()), path + "." + e.getKey());
                if (where != null) return where;
            }
            return null;
        }
        if (expected.isArray() && actual.isArray() && expected.size() == actual.size()) {
            for (int i = 0; i < expected.size(); i++) {
                String where = subset(expected.get(i), actual.get(i), path + "[" + i + "]");
                if (where != null) return where;
            }
            return null;
        }
        if (expected.equals(actual)) return null;
        return path + ": expected " + show(expected) + ", got " + show(actual);
    }

    /** Runs a scenario through {@link Session}; throws {@link Divergence} naming the first differing step and action. */
    static void replay(JsonNode doc) {
        if (doc.get("format").asInt() != 1) throw new Divergence("format " + doc.get("format") + ", this replayer reads 1");
        byte[] config;
        try {
            config = JSON.writeValueAsBytes(doc.get("config"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        try (Session session = new Session(config, u64(doc.get("now_ns")), u64(doc.get("seed")))) {
            JsonNode steps = doc.get("steps");
            for (int i = 0; i < steps.size(); i++) {
                JsonNode step = steps.get(i);
                String at = "step " + i + " (now_ns " + step.get("now_ns").asText() + ")";
                List<Event> events = new ArrayList<>();
                for (JsonNode e : step.get("events")) events.add(eventOf(e));
                Actions answer = session.step(u64(step.get("now_ns")), events);
                List<JsonNode> got = new ArrayList<>();
                for (Action a : answer.actions()) got.add(actionForm(a));
                JsonNode expected = step.get("expect").get("actions");
                for (int j = 0; j < Math.max(got.size(), expected.size()); j++) {
                    JsonNode e = j < expected.size() ? expected.get(j) : null;
                    JsonNode g = j < got.size() ? got.get(j) : null;
                    if (e == null || !e.equals(g)) {
                        throw new Divergence(at + ", action " + j + ": expected " + show(e) + ", got " + show(g));
                    }
                }
                JsonNode wantWakeup = step.get("expect").get("next_wakeup_ns");
                JsonNode gotWakeup = answer.nextWakeupNs() == null ? NODES.nullNode() : parse(u64Node(answer.nextWakeupNs()).toString());
                if (!wantWakeup.equals(gotWakeup)) {
                    throw new Divergence(at + ": next_wakeup_ns: expected " + show(wantWakeup) + ", got " + show(gotWakeup));
                }
            }
            JsonNode end = doc.path("end");
            for (String part : List.of("report", "metadata")) {
                if (!end.has(part)) continue;
                JsonNode actual = parse(part.equals("report") ? session.reportJson() : session.metadataJson());
                String where = subset(end.get(part), actual, part);
                if (where != null) throw new Divergence("end: " + where);
            }
        }
    }
}
