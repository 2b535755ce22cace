package dev.stagger;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.channels.UnresolvedAddressException;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * A minimal blocking host: one one-shot refresh of a plaintext cluster, driven on the calling
 * thread over java.nio (non-blocking SocketChannels and one Selector). It carries out the
 * session's actions and reports what the sockets did; it decides nothing and speaks no Kafka,
 * and adds no timeouts of its own (the session's wake-ups are its only timers). No TLS (a DIAL
 * asking for it is answered with an IO_ERROR), no SASL, no long-lived client.
 */
public final class Stagger {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final SecureRandom RANDOM = new SecureRandom();

    private Stagger() {}

    /**
     * Refreshes the metadata once from {@code seeds} ({@code host:port}, tried in an order
     * shuffled by the session's seed, as librdkafka, Kafka's Java client, franz-go and Sarama do;
     * {@link #refresh(String)} with {@code "settings": {"shuffle_seeds": "false"}} keeps the
     * order given) and returns the metadata JSON (docs/abi.md, "Metadata").
     *
     * @throws RefreshFailedException when the refresh gives up (it carries the refresh error JSON)
     */
    public static String metadata(List<String> seeds) {
        return refresh(seeds).metadataJson();
    }

    /**
     * What one refresh found: the metadata JSON, the broker that answered ({@code host:port}),
     * and the session's report JSON (its attempts, docs/abi.md "Report").
     */
    public record Refresh(String metadataJson, String answeredBy, String reportJson) {}

    /** {@link #metadata(List)} with the broker that answered and the report. */
    public static Refresh refresh(List<String> seeds) {
        ObjectNode config = JSON.createObjectNode();
        config.putArray("seeds").addAll(seeds.stream().map(JSON.getNodeFactory()::textNode).toList());
        config.put("one_shot", true);
        return refresh(config.toString());
    }

    /**
     * Refreshes once with a whole config JSON (docs/abi.md, "The config JSON"); it should say
     * {@code "one_shot": true}. Configs with {@code tls} or {@code sasl} cannot succeed here.
     *
     * @throws RefreshFailedException when the refresh gives up (it carries the refresh error JSON)
     */
    public static Refresh refresh(String configJson) {
        long t0 = System.nanoTime();
        try (Session session = new Session(configJson, 1, RANDOM.nextLong());
             Host host = new Host(session, t0)) {
            return host.run();
        } catch (IOException e) {
            throw new StaggerException("stagger: the host's selector failed: " + e.getMessage(), e);
        }
    }

    /** One connection: its channel, whether it is up, and the bytes waiting to be written. */
    private static final class Conn {
        final long id;
        final SocketChannel channel;
        final ArrayDeque<ByteBuffer> pending = new ArrayDeque<>();
        boolean connected;

        Conn(long id, SocketChannel channel) {
            this.id = id;
            this.channel = channel;
        }
    }

    /** The loop of docs/abi.md, "The host loop", for one session. */
    private static final class Host implements AutoCloseable {
        private final Session session;
        private final long t0;
        private final Selector selector;
        private final Map<Long, Conn> conns = new HashMap<>();
        private final ByteBuffer readBuf = ByteBuffer.allocate(64 << 10);
        private List<Event> events = new ArrayList<>();

        Host(Session session, long t0) throws IOException {
            this.session = session;
            this.t0 = t0;
            this.selector = Selector.open();
        }

        /** Monotonic ns since the session began (it began at 1). */
        private long now() {
            return System.nanoTime() - t0 + 1;
        }

        Refresh run() throws IOException {
            events.add(new Event.RequestRefresh(Cause.BOOTSTRAP, ""));
            while (true) {
                List<Event> batch = events;
                events = new ArrayList<>();
                Actions answer = session.step(now(), batch);
                for (Action action : answer.actions()) {
                    if (action instanceof Action.Refreshed r) {
                        return new Refresh(session.metadataJson(), r.address(), session.reportJson());
                    }
                    if (action instanceof Action.RefreshFailed f) {
                        String message;
                        try {
                            message = JSON.readTree(f.errorJson()).path("message").asText("metadata refresh failed");
                        } catch (IOException e) {
                            message = "metadata refresh failed";
                        }
                        throw new RefreshFailedException(message, f.errorJson());
                    }
                    carryOut(action);
                }
                waitFor(answer.nextWakeupNs());
            }
        }

        private void carryOut(Action action) throws IOException {
            if (action instanceof Action.Dial d) {
                dial(d);
            } else if (action instanceof Action.Send s) {
                Conn c = conns.get(s.conn());
                if (c != null) {
                    c.pending.add(ByteBuffer.wrap(s.data()));
                    if (c.connected) flush(c);
                }
            } else if (action instanceof Action.Close c) {
                Conn conn = conns.remove(c.conn());
                if (conn != null) conn.channel.close();
            } else if (action instanceof Action.Resolve r) {
                events.add(resolve(r));
            } else if (action instanceof Action.NeedNonce n) {
                byte[] nonce = new byte[Wire.NONCE_LEN];
                RANDOM.nextBytes(nonce);
                events.add(new Event.Nonce(n.conn(), nonce));
            } else if (action instanceof Action.NeedToken t) {
                events.add(new Event.TokenFailed(t.conn(), "this host has no token source (SASL is not supported)"));
            }
            // REFRESH_REQUESTED and REBOOTSTRAPPED are news only.
        }

        private void dial(Action.Dial d) throws IOException {
            if (d.tls()) {
                events.add(new Event.IoError(d.conn(), ErrorKind.TLS, 0, "TLS is not supported by this host"));
                return;
            }
            Wire.HostPort hostPort;
            try {
                hostPort = Wire.HostPort.parse(d.address());
            } catch (NumberFormatException e) {
                events.add(new Event.IoError(d.conn(), ErrorKind.IO, 0, "not host:port: " + d.address()));
                return;
            }
            String host = hostPort.host();
            int port = hostPort.port();
            SocketChannel channel = SocketChannel.open();
            try {
                channel.configureBlocking(false);
                channel.socket().setTcpNoDelay(true);
                // The name is looked up here, on this thread (a minimal host).
                InetSocketAddress target = new InetSocketAddress(host, port);
                if (target.isUnresolved()) {
                    channel.close();
                    events.add(new Event.IoError(d.conn(), ErrorKind.DNS, 0, "cannot resolve " + host));
                    return;
                }
                Conn c = new Conn(d.conn(), channel);
                conns.put(c.id, c);
                if (channel.connect(target)) {
                    c.connected = true;
                    channel.register(selector, SelectionKey.OP_READ, c);
                    events.add(new Event.Connected(c.id));
                } else {
                    channel.register(selector, SelectionKey.OP_CONNECT, c);
                }
            } catch (IOException | IllegalArgumentException e) {
                conns.remove(d.conn());
                channel.close();
                events.add(new Event.IoError(d.conn(), connectKind(e), 0, describe(e)));
            }
        }

        private Event resolve(Action.Resolve r) {
            String name = r.name();
            try {
                Wire.HostPort hp = Wire.HostPort.parse(name);
                List<InetSocketAddress> found = new ArrayList<>();
                for (InetAddress a : InetAddress.getAllByName(hp.host())) found.add(new InetSocketAddress(a, hp.port()));
                return new Event.Resolved(r.lookup(), found);
            } catch (UnknownHostException | NumberFormatException e) {
                return new Event.ResolveFailed(r.lookup(), ErrorKind.DNS, 0, "cannot resolve " + name);
            }
        }

        /** Waits until there are events to tell or the wake-up is due. */
        private void waitFor(Long wakeupNs) throws IOException {
            if (!events.isEmpty()) {
                selector.selectNow();
                handleSelected();
                return;
            }
            while (events.isEmpty()) {
                long timeoutMs = 0; // 0: until I/O happens
                if (wakeupNs != null) {
                    long left = wakeupNs - now();
                    if (left <= 0) return;
                    timeoutMs = Math.max(1, (left + 999_999) / 1_000_000);
                } else if (conns.isEmpty()) {
                    throw new StaggerException("stagger: the session is waiting for nothing (no wake-up, no connection)", null);
                }
                selector.select(timeoutMs);
                handleSelected();
            }
        }

        private void handleSelected() {
            Iterator<SelectionKey> it = selector.selectedKeys().iterator();
            while (it.hasNext()) {
                SelectionKey key = it.next();
                it.remove();
                Conn c = (Conn) key.attachment();
                if (!key.isValid() || conns.get(c.id) != c) continue;
                try {
                    if (key.isConnectable()) {
                        try {
                            c.channel.finishConnect();
                        } catch (IOException e) {
                            drop(c, new Event.IoError(c.id, connectKind(e), 0, describe(e)));
                            continue;
                        }
                        c.connected = true;
                        events.add(new Event.Connected(c.id));
                        key.interestOps(SelectionKey.OP_READ);
                        flush(c);
                        continue;
                    }
                    if (key.isWritable()) flush(c);
                    if (key.isValid() && key.isReadable()) read(c);
                } catch (IOException e) {
                    drop(c, lost(c.id, e));
                }
            }
        }

        private void read(Conn c) throws IOException {
            while (true) {
                readBuf.clear();
                int n = c.channel.read(readBuf);
                if (n > 0) {
                    byte[] data = new byte[n];
                    readBuf.flip().get(data);
                    events.add(new Event.Received(c.id, data));
                    if (n < readBuf.capacity()) return;
                } else if (n < 0) {
                    drop(c, new Event.Closed(c.id, false));
                    return;
                } else {
                    return;
                }
            }
        }

        /** Writes what is queued; asks for OP_WRITE while something is left. */
        private void flush(Conn c) throws IOException {
            try {
                while (!c.pending.isEmpty()) {
                    ByteBuffer head = c.pending.peek();
                    c.channel.write(head);
                    if (head.hasRemaining()) break;
                    c.pending.poll();
                }
            } catch (IOException e) {
                drop(c, lost(c.id, e));
                return;
            }
            SelectionKey key = c.channel.keyFor(selector);
            if (key != null && key.isValid()) {
                key.interestOps(SelectionKey.OP_READ | (c.pending.isEmpty() ? 0 : SelectionKey.OP_WRITE));
            }
        }

        private void drop(Conn c, Event why) {
            if (conns.remove(c.id) == null) return;
            try {
                c.channel.close();
            } catch (IOException ignored) {
                // Closing is all that is left to do.
            }
            events.add(why);
        }

        @Override
        public void close() throws IOException {
            for (Conn c : conns.values()) c.channel.close();
            conns.clear();
            selector.close();
        }
    }

    private static Event lost(long conn, IOException e) {
        String text = String.valueOf(e.getMessage()).toLowerCase();
        if (text.contains("reset") || text.contains("broken pipe")) return new Event.Closed(conn, true);
        return new Event.IoError(conn, ErrorKind.IO, 0, describe(e));
    }

    private static ErrorKind connectKind(Exception e) {
        if (e instanceof ConnectException) return ErrorKind.REFUSED;
        if (e instanceof UnresolvedAddressException || e instanceof UnknownHostException) return ErrorKind.DNS;
        if (e instanceof IllegalArgumentException) return ErrorKind.IO; // a port out of range
        if (e instanceof SocketException && String.valueOf(e.getMessage()).toLowerCase().contains("refused")) return ErrorKind.REFUSED;
        return ErrorKind.IO;
    }

    private static String describe(Exception e) {
        String text = e.getMessage();
        return text == null || text.isEmpty() ? e.getClass().getSimpleName() : text;
    }
}
