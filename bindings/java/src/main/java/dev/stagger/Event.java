package dev.stagger;

import java.net.InetSocketAddress;
import java.util.List;

/**
 * What happened on the host's side, told to the session in a step's event batch (docs/abi.md,
 * "Event bodies"). Ids ({@code conn}, {@code lookup}) are the ABI's u64s held in a long.
 * No {@code toString} shows received bytes, a nonce or a token: SASL frames carry credentials.
 */
public sealed interface Event {
    /** The record's kind byte. */
    int recordKind();

    /** The TCP connection of a DIAL is up. */
    record Connected(long conn) implements Event {
        public int recordKind() { return 1; }
    }

    /** Its TLS handshake completed (sessions with {@code tls}). */
    record Secured(long conn) implements Event {
        public int recordKind() { return 2; }
    }

    /** Bytes read from a connection, raw, in whatever pieces the socket gave. */
    record Received(long conn, byte[] data) implements Event {
        public int recordKind() { return 3; }
        @Override public String toString() { return "Received[conn=" + conn + ", <" + data.length + " bytes>]"; }
    }

    /** The peer ended the connection: cleanly (end of stream) or with a reset. */
    record Closed(long conn, boolean reset) implements Event {
        public int recordKind() { return 4; }
    }

    /** Dialling, reading, writing or TLS failed; the host has dropped the connection. */
    record IoError(long conn, ErrorKind kind, int code, String detail) implements Event {
        public int recordKind() { return 5; }
    }

    /** The addresses a RESOLVE found. */
    record Resolved(long lookup, List<InetSocketAddress> addresses) implements Event {
        public Resolved { addresses = List.copyOf(addresses); }
        public int recordKind() { return 6; }
    }

    /** A RESOLVE failed (kind DNS, usually). */
    record ResolveFailed(long lookup, ErrorKind kind, int code, String detail) implements Event {
        public int recordKind() { return 7; }
    }

    /** The answer to NEED_NONCE: 18 random bytes. */
    record Nonce(long conn, byte[] nonce) implements Event {
        public int recordKind() { return 8; }
        @Override public String toString() { return "Nonce[conn=" + conn + ", <redacted>]"; }
    }

    /** The answer to NEED_TOKEN: an OAUTHBEARER token. */
    record Token(long conn, String token) implements Event {
        public int recordKind() { return 9; }
        @Override public String toString() { return "Token[conn=" + conn + ", <redacted>]"; }
    }

    /** No token for NEED_TOKEN: fails that attempt (fatal for the refresh). */
    record TokenFailed(long conn, String why) implements Event {
        public int recordKind() { return 10; }
    }

    /** Ask for fresh metadata, saying why and, optionally, which broker was in trouble ("" for none). */
    record RequestRefresh(Cause cause, String broker) implements Event {
        public int recordKind() { return 11; }
    }

    /** Any record, raw: for tests of what the session does with malformed input. */
    record Raw(int kind, byte[] body) implements Event {
        public int recordKind() { return kind; }
        @Override public String toString() { return "Raw[kind=" + kind + ", <" + body.length + " bytes>]"; }
    }
}
