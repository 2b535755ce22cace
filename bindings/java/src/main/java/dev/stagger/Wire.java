package dev.stagger;

import java.io.ByteArrayOutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The two batch encodings of the ABI (docs/abi.md, "Event batch" and "Action batch"), the
 * host's side: events as a host writes them, actions as a host reads them. A port of the
 * Python codec ({@code bindings/python/python/stagger/_wire.py}), kept apart from the wasm
 * calls so it can be read and tested on its own.
 */
public final class Wire {
    /** {@code STAGGER_ABI_VERSION}: the functions, signatures and byte layouts this package speaks. */
    public static final int ABI_VERSION = 1;
    /** {@code STAGGER_NO_WAKEUP}: an action batch's next wake-up when nothing is ever due. */
    public static final long NO_WAKEUP = -1L; // u64::MAX
    /** The longest error detail a session keeps (longer ones are cut there). */
    public static final int MAX_DETAIL = 1024;
    /** The bytes of a SCRAM nonce. */
    public static final int NONCE_LEN = 18;

    private Wire() {}

    /** One event batch (docs/abi.md, "Event batch"). */
    public static byte[] encodeEvents(List<? extends Event> events) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(64);
        ByteBuffer header = le(8).putShort((short) ABI_VERSION).putShort((short) 0).putInt(events.size());
        out.writeBytes(header.array());
        for (Event event : events) {
            byte[] body = body(event);
            out.writeBytes(le(5).put((byte) event.recordKind()).putInt(body.length).array());
            out.writeBytes(body);
        }
        return out.toByteArray();
    }

    private static byte[] body(Event event) {
        if (event instanceof Event.Connected e) return le(8).putLong(e.conn()).array();
        if (event instanceof Event.Secured e) return le(8).putLong(e.conn()).array();
        if (event instanceof Event.Received e) return le(8 + e.data().length).putLong(e.conn()).put(e.data()).array();
        if (event instanceof Event.Closed e) return le(9).putLong(e.conn()).put((byte) (e.reset() ? 1 : 0)).array();
        if (event instanceof Event.IoError e) return error(e.conn(), e.kind(), e.code(), e.detail());
        if (event instanceof Event.ResolveFailed e) return error(e.lookup(), e.kind(), e.code(), e.detail());
        if (event instanceof Event.Resolved e) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            out.writeBytes(le(8).putLong(e.lookup()).array());
            for (InetSocketAddress a : e.addresses()) {
                byte[] ip = a.getAddress().getAddress();
                out.write(ip.length == 4 ? 4 : 6);
                out.writeBytes(ip);
                out.writeBytes(le(2).putShort((short) a.getPort()).array());
            }
            return out.toByteArray();
        }
        if (event instanceof Event.Nonce e) {
            if (e.nonce().length != NONCE_LEN) {
                throw new IllegalArgumentException("a nonce is " + NONCE_LEN + " bytes, not " + e.nonce().length);
            }
            return le(8 + NONCE_LEN).putLong(e.conn()).put(e.nonce()).array();
        }
        if (event instanceof Event.Token e) {
            byte[] token = e.token().getBytes(StandardCharsets.UTF_8);
            return le(8 + token.length).putLong(e.conn()).put(token).array();
        }
        if (event instanceof Event.TokenFailed e) {
            byte[] why = detail(e.why());
            return le(8 + why.length).putLong(e.conn()).put(why).array();
        }
        if (event instanceof Event.RequestRefresh e) {
            byte[] broker = e.broker().getBytes(StandardCharsets.UTF_8);
            return le(1 + broker.length).put((byte) e.cause().code).put(broker).array();
        }
        if (event instanceof Event.Raw e) return e.body().clone();
        throw new IllegalArgumentException("not a stagger event: " + event.getClass().getName());
    }

    private static byte[] error(long id, ErrorKind kind, int code, String detail) {
        byte[] text = detail(detail);
        return le(11 + text.length).putLong(id).put((byte) kind.code).putShort((short) code).put(text).array();
    }

    /** UTF-8, cut at MAX_DETAIL bytes on a character boundary (the session would cut it too). */
    static byte[] detail(String text) {
        byte[] raw = text.getBytes(StandardCharsets.UTF_8);
        if (raw.length <= MAX_DETAIL) return raw;
        int end = MAX_DETAIL;
        while (end > 0 && (raw[end] & 0xC0) == 0x80) end--; // back to a character's first byte
        byte[] cut = new byte[end];
        System.arraycopy(raw, 0, cut, 0, end);
        return cut;
    }

    /** A parsed {@code host:port} ({@code [v6]:port}) as an address and port, for RESOLVED events of literals. */
    public static InetSocketAddress literal(String hostPort) {
        HostPort hp = HostPort.parse(hostPort);
        String host = hp.host();
        int zone = host.indexOf('%');
        if (zone >= 0) host = host.substring(0, zone);
        try {
            // A literal address: no lookup happens.
            return new InetSocketAddress(InetAddress.getByName(host), hp.port());
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("not an IP address: " + host, e);
        }
    }

    /** A {@code host:port} split in two, an IPv6 host without its brackets. */
    record HostPort(String host, int port) {
        /** @throws NumberFormatException when what follows the last colon is not a port number */
        static HostPort parse(String hostPort) {
            int colon = hostPort.lastIndexOf(':');
            String host = hostPort.substring(0, Math.max(colon, 0));
            if (host.startsWith("[") && host.endsWith("]")) host = host.substring(1, host.length() - 1);
            return new HostPort(host, Integer.parseInt(hostPort.substring(colon + 1)));
        }
    }

    /**
     * Reads an action batch (docs/abi.md, "Action batch"); refuses one that does not follow it
     * with an {@link IllegalArgumentException} saying which record and field.
     */
    public static Actions decodeActions(byte[] data) {
        ByteBuffer b = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        if (data.length < 16) throw new IllegalArgumentException("action batch: the header needs 16 bytes, " + data.length + " there");
        int version = Short.toUnsignedInt(b.getShort());
        int flags = Short.toUnsignedInt(b.getShort());
        long count = Integer.toUnsignedLong(b.getInt());
        long wakeup = b.getLong();
        if (version != ABI_VERSION) throw new IllegalArgumentException("action batch: version " + version + ", this package speaks " + ABI_VERSION);
        if (flags != 0) throw new IllegalArgumentException("action batch: flags " + flags + ", none are defined");
        List<Action> actions = new ArrayList<>();
        for (long index = 0; index < count; index++) {
            int start = b.position();
            if (b.remaining() < 5) throw new IllegalArgumentException("action " + index + " at byte " + start + ": the record header needs 5 bytes, " + b.remaining() + " left");
            int kind = Byte.toUnsignedInt(b.get());
            long length = Integer.toUnsignedLong(b.getInt());
            if (length > b.remaining()) throw new IllegalArgumentException("action " + index + " at byte " + start + ": the body needs " + length + " bytes, " + b.remaining() + " left");
            ByteBuffer body = b.slice(b.position(), (int) length).order(ByteOrder.LITTLE_ENDIAN);
            b.position(b.position() + (int) length);
            String where = "action " + index + " (kind " + kind + ") at byte " + start;
            try {
                actions.add(action(kind, body, where));
            } catch (java.nio.BufferUnderflowException e) {
                throw new IllegalArgumentException(where + ": the body is too short", e);
            }
            if (body.hasRemaining()) throw new IllegalArgumentException(where + ": " + body.remaining() + " bytes after the body's last field");
        }
        if (b.hasRemaining()) throw new IllegalArgumentException("action batch: " + b.remaining() + " bytes after the last action");
        return new Actions(actions, wakeup == NO_WAKEUP ? null : wakeup);
    }

    private static Action action(int kind, ByteBuffer b, String where) {
        switch (kind) {
            case 1: {
                long conn = b.getLong();
                int tls = Byte.toUnsignedInt(b.get());
                if (tls > 1) throw new IllegalArgumentException(where + ": tls is " + tls + ", not 0 or 1");
                int n = Short.toUnsignedInt(b.getShort());
                String address = text(b, n, where);
                String name = text(b, b.remaining(), where);
                return new Action.Dial(conn, address, tls == 1 ? name : null);
            }
            case 2: {
                long conn = b.getLong();
                byte[] data = new byte[b.remaining()];
                b.get(data);
                return new Action.Send(conn, data);
            }
            case 3: return new Action.Close(b.getLong());
            case 4: { long lookup = b.getLong(); return new Action.Resolve(lookup, text(b, b.remaining(), where)); }
            case 5: return new Action.NeedNonce(b.getLong());
            case 6: return new Action.NeedToken(b.getLong());
            case 7: {
                long epoch = Integer.toUnsignedLong(b.getInt());
                long broker = Integer.toUnsignedLong(b.getInt());
                return new Action.Refreshed(epoch, broker, text(b, b.remaining(), where));
            }
            case 8: { long epoch = Integer.toUnsignedLong(b.getInt()); return new Action.RefreshFailed(epoch, text(b, b.remaining(), where)); }
            case 9: return new Action.Rebootstrapped();
            case 10: return new Action.RefreshRequested(Integer.toUnsignedLong(b.getInt()));
            default: throw new IllegalArgumentException(where + ": unknown action kind " + kind);
        }
    }

    private static String text(ByteBuffer b, int n, String where) {
        ByteBuffer piece = b.slice(b.position(), n);
        b.position(b.position() + n);
        try {
            return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(piece).toString();
        } catch (CharacterCodingException e) {
            throw new IllegalArgumentException(where + ": a text field is not UTF-8", e);
        }
    }

    private static ByteBuffer le(int n) {
        return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    }
}
