package dev.stagger;

/**
 * A refresh that gave up (the REFRESH_FAILED action): carries the refresh error JSON, which
 * names the last error and every broker's (docs/abi.md, "Refresh error"). It holds no secret.
 */
public final class RefreshFailedException extends StaggerException {
    private final String errorJson;

    public RefreshFailedException(String message, String errorJson) {
        super(HOST, "refresh_failed", null, message, null);
        this.errorJson = errorJson;
    }

    /** The refresh error JSON, as the session wrote it. */
    public String errorJson() { return errorJson; }
}
