package dev.stagger;

/**
 * What the session asks of its host, read from a step's action batch (docs/abi.md, "Action
 * bodies"), to be carried out in order. No {@code toString} shows the bytes of a SEND: SASL
 * requests carry credentials.
 */
public sealed interface Action {
    /** Open a connection to {@code address} ({@code host:port}) named {@code conn}; TLS with {@code serverName} unless null. */
    record Dial(long conn, String address, String serverName) implements Action {
        public boolean tls() { return serverName != null; }
    }

    /** Write {@code data} on {@code conn} after everything sent before (queued until it is up). */
    record Send(long conn, byte[] data) implements Action {
        @Override public String toString() { return "Send[conn=" + conn + ", <" + data.length + " bytes>]"; }
    }

    /** Close {@code conn} and forget it. */
    record Close(long conn) implements Action {}

    /** Look {@code name} ({@code host:port}) up; answer RESOLVED or RESOLVE_FAILED. */
    record Resolve(long lookup, String name) implements Action {}

    /** Answer a NONCE of 18 random bytes. */
    record NeedNonce(long conn) implements Action {}

    /** Answer TOKEN or TOKEN_FAILED. */
    record NeedToken(long conn) implements Action {}

    /** The refresh {@code epoch} succeeded; the session's metadata has its answer. */
    record Refreshed(long epoch, long broker, String address) implements Action {}

    /** The refresh {@code epoch} gave up; {@code errorJson} is the refresh error JSON. */
    record RefreshFailed(long epoch, String errorJson) implements Action {}

    /** News: the session went back to the seeds. */
    record Rebootstrapped() implements Action {}

    /** The epoch a REQUEST_REFRESH joined or started. */
    record RefreshRequested(long epoch) implements Action {}
}
