package dev.stagger;

/**
 * Why an attempt failed: the kind byte of IO_ERROR and RESOLVE_FAILED (docs/abi.md, "Codes").
 * The policy reads it (a refused connection moves on at once), so a host maps OS errors to it
 * faithfully.
 */
public enum ErrorKind {
    DNS(1), REFUSED(2), CONNECT_TIMEOUT(3), RESPONSE_TIMEOUT(4), CLOSED(5), PROTOCOL(6),
    FRAME_TOO_LARGE(7), BROKER(8), NO_BROKERS(9), TLS(10), AUTHENTICATION(11), AUTHORIZATION(12), IO(13);

    /** The byte on the wire. */
    public final int code;

    ErrorKind(int code) {
        this.code = code;
    }
}
