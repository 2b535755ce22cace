package dev.stagger;

import com.dylibso.chicory.compiler.InterpreterFallback;
import com.dylibso.chicory.compiler.MachineFactoryCompiler;
import com.dylibso.chicory.runtime.ExportFunction;
import com.dylibso.chicory.runtime.Instance;
import com.dylibso.chicory.runtime.Machine;
import com.dylibso.chicory.runtime.Memory;
import com.dylibso.chicory.wasm.Parser;
import com.dylibso.chicory.wasm.WasmModule;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.Function;

/**
 * One stagger session in its own instance of the wasm core: a thin wrapper over the module's
 * C ABI (docs/abi.md, "Functions"), calling it the way the Go host does (bindings/go/abi.go):
 * inputs written into one scratch buffer from {@code stagger_alloc}, answers read through one
 * 8-byte StaggerBuf. The module is parsed and compiled to JVM bytecode by Chicory's compiler
 * once per process; each session instantiates it. Not thread-safe: one thread drives a session.
 */
public final class Session implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** The module and its compiled machine factory, built on first use. */
    private static final class Module {
        static final WasmModule WASM;
        static final Function<Instance, Machine> MACHINE;

        static {
            try (InputStream in = Session.class.getResourceAsStream("/stagger.wasm")) {
                if (in == null) throw new IllegalStateException("stagger.wasm is not on the class path");
                WASM = Parser.parse(in.readAllBytes());
            } catch (IOException e) {
                throw new IllegalStateException("reading stagger.wasm", e);
            }
            if (WASM.importSection().importCount() != 0) {
                throw new IllegalStateException("the wasm module imports " + WASM.importSection().importCount() + " things; it must import none");
            }
            // Every function compiled to JVM bytecode: a function the compiler cannot take is an
            // error here rather than a silent fall back to the (much slower) interpreter.
            MACHINE = MachineFactoryCompiler.builder(WASM).withInterpreterFallback(InterpreterFallback.FAIL).compile();
        }
    }

    private final Instance instance;
    private final Memory memory;
    private final ExportFunction alloc, free, sessionNew, lastError, step, metadata, report, sessionFree;
    private final int out; // the 8-byte StaggerBuf every answer is written to
    private int buf; // scratch input buffer and its capacity
    private int bufCap;
    private long handle;
    private StaggerException broken;

    /**
     * A session from the config JSON (docs/abi.md, "The config JSON"), its clock starting at
     * {@code nowNs} (monotonic, any origin), its PRNG seeded by {@code seed}.
     *
     * @throws StaggerException with status 1 and the field when the config is refused
     */
    public Session(String configJson, long nowNs, long seed) {
        this(configJson.getBytes(StandardCharsets.UTF_8), nowNs, seed);
    }

    public Session(byte[] configJson, long nowNs, long seed) {
        instance = Instance.builder(Module.WASM).withMachineFactory(Module.MACHINE).build();
        memory = instance.memory();
        ExportFunction version = instance.export("stagger_abi_version");
        long got = call("stagger_abi_version", version)[0] & 0xFFFFFFFFL;
        if (got != Wire.ABI_VERSION) {
            throw new StaggerException("the wasm module speaks ABI version " + got + ", this binding " + Wire.ABI_VERSION, null);
        }
        alloc = instance.export("stagger_alloc");
        free = instance.export("stagger_free");
        sessionNew = instance.export("stagger_session_new");
        lastError = instance.export("stagger_last_error");
        step = instance.export("stagger_step");
        metadata = instance.export("stagger_metadata");
        report = instance.export("stagger_report");
        sessionFree = instance.export("stagger_session_free");
        out = alloc(8);

        int ptr = input(configJson);
        long[] r;
        try {
            r = call("stagger_session_new", sessionNew, ptr, configJson.length, nowNs, seed);
        } finally {
            // The config may hold a password: it does not stay in the scratch buffer.
            if (configJson.length > 0) memory.write(ptr, new byte[configJson.length]);
        }
        handle = r[0];
        if (handle == 0) {
            call("stagger_last_error", lastError, out);
            throw abiError("stagger_session_new", answer());
        }
    }

    /** The handle the module gave this session (≥ 1). */
    public long handle() { return handle; }

    /**
     * One wake-up: the time and the events since the last step in; every action, in order, and
     * the next wake-up out. An empty list is a timer's wake-up.
     */
    public Actions step(long nowNs, List<? extends Event> events) {
        byte[] batch = Wire.encodeEvents(events);
        int ptr = input(batch);
        long[] r = call("stagger_step", step, open(), nowNs, ptr, batch.length, out);
        check("stagger_step", r);
        return Wire.decodeActions(answer());
    }

    /** The latest metadata JSON ({@code null} before the first success). */
    public String metadataJson() {
        return json("stagger_metadata", metadata);
    }

    /** The report JSON: counters, the running refresh, the last refresh's attempts. */
    public String reportJson() {
        return json("stagger_report", report);
    }

    /** Frees the session (the host closes its own sockets). Idempotent. */
    @Override
    public void close() {
        if (handle != 0 && broken == null) {
            long h = handle;
            handle = 0;
            call("stagger_session_free", sessionFree, h);
        }
        handle = 0;
    }

    @Override
    public String toString() {
        return "Session[handle=" + handle + (broken != null ? ", trapped" : "") + "]";
    }

    private String json(String name, ExportFunction fn) {
        long[] r = call(name, fn, open(), out);
        check(name, r);
        return new String(answer(), StandardCharsets.UTF_8);
    }

    private long open() {
        if (handle == 0) throw new StaggerException(3, "unknown_handle", null, "the session is closed", null);
        return handle;
    }

    private long[] call(String name, ExportFunction fn, long... args) {
        if (broken != null) throw broken;
        try {
            long[] r = fn.apply(args);
            return r == null ? new long[0] : r;
        } catch (RuntimeException | StackOverflowError e) {
            broken = new StaggerException(StaggerException.TRAPPED, "trap", null,
                    "the wasm module trapped in " + name + " (the session is gone): " + e, e);
            throw broken;
        }
    }

    private int alloc(int n) {
        int ptr = (int) call("stagger_alloc", alloc, n)[0];
        if (ptr == 0 && n > 0) throw new StaggerException("the wasm module has no memory left for " + n + " bytes", null);
        return ptr;
    }

    /** Copies data into the scratch buffer (grown as needed) and returns its address. */
    private int input(byte[] data) {
        if (data.length == 0) return 0;
        if (Integer.compareUnsigned(data.length, bufCap) > 0) {
            if (buf != 0) {
                call("stagger_free", free, buf, bufCap);
                buf = 0;
                bufCap = 0;
            }
            int size = Math.max(data.length, 64 << 10);
            buf = alloc(size);
            bufCap = size;
        }
        memory.write(buf, data);
        return buf;
    }

    /** A copy of the buffer *out points at. */
    private byte[] answer() {
        int ptr = memory.readInt(out);
        int len = memory.readInt(out + 4);
        if (len == 0) return new byte[0];
        return memory.readBytes(ptr, len);
    }

    private void check(String call, long[] r) {
        int status = (int) r[0];
        if (status != 0) throw abiError(call, answer());
    }

    private static StaggerException abiError(String call, byte[] errorJson) {
        try {
            JsonNode e = JSON.readTree(errorJson);
            int status = e.path("status").asInt();
            String error = e.path("error").asText();
            String field = e.path("field").isTextual() ? e.path("field").asText() : null;
            String message = e.path("message").asText();
            String text = status == 1
                    ? "stagger: config: " + (field != null ? field + ": " : "") + message
                    : "stagger: " + call + ": " + message + " (" + error + ", status " + status + ")";
            return new StaggerException(status, error, field, text, null);
        } catch (IOException ex) {
            return new StaggerException("stagger: " + call + " failed, and its error JSON does not decode", ex);
        }
    }
}
