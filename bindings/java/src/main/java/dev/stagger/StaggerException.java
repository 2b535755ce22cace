package dev.stagger;

/**
 * An error of the binding or of an ABI call: the status and error name of the ABI's error JSON
 * (docs/abi.md, "Errors and panics"), the config field for a refused config. The core's
 * messages never quote a password or a token, and neither do this binding's.
 */
public class StaggerException extends RuntimeException {
    /** The status of a wasm trap (not an ABI status): the instance is unusable. */
    public static final int TRAPPED = -1;
    /** The status of an error of this binding or its host (not an ABI status). */
    public static final int HOST = -2;

    private final int status;
    private final String error;
    private final String field;

    public StaggerException(int status, String error, String field, String message, Throwable cause) {
        super(message, cause);
        this.status = status;
        this.error = error;
        this.field = field;
    }

    public StaggerException(String message, Throwable cause) {
        this(HOST, "host", null, message, cause);
    }

    /** The ABI status (1 config, 2 malformed batch, ...), or TRAPPED, or HOST. */
    public int status() { return status; }

    /** The ABI's error name ({@code config}, {@code malformed_batch}, ...), {@code trap} or {@code host}. */
    public String error() { return error; }

    /** For a config error, the refused field as a dotted path; null otherwise. */
    public String field() { return field; }
}
