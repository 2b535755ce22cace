package dev.stagger;

/**
 * Why a refresh is asked for (REQUEST_REFRESH's cause byte, docs/abi.md "Codes"): the policy is
 * gentle after a failover and quick after one client's evidence of a hung broker.
 */
public enum Cause {
    REQUESTED(0), BOOTSTRAP(1), PERIODIC(2), STALE_METADATA(3), CONNECTION_LOST(4), REQUEST_TIMED_OUT(5);

    /** The byte on the wire. */
    public final int code;

    Cause(int code) {
        this.code = code;
    }
}
