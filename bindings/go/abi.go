package stagger

import (
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The stagger core compiled to a zero-import wasm32 module (crate stagger-abi, built by
// build-wasm.sh; scripts/test.sh checks that it rebuilds byte for byte).
//
//go:embed stagger.wasm
var wasmModule []byte

// abiVersion is the STAGGER_ABI_VERSION this host speaks (docs/abi.md).
const abiVersion = 1

// ErrABIVersion is wrapped by the error of a wasm module that speaks another ABI version than
// this package (a stagger.wasm from another checkout).
var ErrABIVersion = errors.New("stagger: ABI version mismatch")

// Statuses of the ABI's calls.
const (
	statusOK            = 0
	statusConfig        = 1
	statusMalformed     = 2
	statusUnknownHandle = 3
	statusPoisoned      = 4
	statusPanic         = 5
	statusArgument      = 6
)

// engine is a wazero runtime with the module compiled in it. Runtimes and compiled modules
// are safe for concurrent use; each session gets an instance of its own (a module instance
// is not), so a trap ends one session only.
type engine struct {
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	mu       sync.Mutex
	idle     []*instance // instances whose session ended, kept for the next one
}

// Instances are pooled: instantiating one costs about 2 ms and 3 MB of garbage, opening a
// session on a warm one a few microseconds. A pooled instance is one that never trapped and
// whose memory stayed small (wasm memory never shrinks: an instance that held a big answer
// is dropped rather than kept).
const (
	maxIdleInstances  = 4
	maxIdleMemorySize = 16 << 20
)

var (
	enginesMu sync.Mutex
	engines   = map[uint32]*engine{} // by memory limit in pages (0: wazero's default, 4 GiB)

	cacheOnce sync.Once
	cache     wazero.CompilationCache
)

// compilationCache is shared by every runtime of the process and, where the user's cache
// directory is writable, by every process: the module's compilation to machine code (a few
// hundred milliseconds) is paid once per machine and wazero version.
func compilationCache() wazero.CompilationCache {
	cacheOnce.Do(func() {
		if dir, err := os.UserCacheDir(); err == nil {
			if c, err := wazero.NewCompilationCacheWithDir(filepath.Join(dir, "stagger-go", "wazero")); err == nil {
				cache = c
				return
			}
		}
		cache = wazero.NewCompilationCache()
	})
	return cache
}

// engineFor returns the process-wide engine whose instances may grow their memory to at most
// limitPages pages of 64 KiB (0: no limit below wasm32's 4 GiB), compiling it on first use.
func engineFor(limitPages uint32) (*engine, error) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if e, ok := engines[limitPages]; ok {
		return e, nil
	}
	e, err := newEngine(wasmModule, limitPages)
	if err != nil {
		return nil, err
	}
	engines[limitPages] = e
	return e, nil
}

// newEngine compiles wasm in a runtime of its own (through the shared compilation cache).
func newEngine(wasm []byte, limitPages uint32) (*engine, error) {
	ctx := context.Background()
	config := wazero.NewRuntimeConfig().WithCompilationCache(compilationCache())
	if limitPages > 0 {
		config = config.WithMemoryLimitPages(limitPages)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, config)
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("stagger: compiling the wasm module: %w", err)
	}
	if imports := compiled.ImportedFunctions(); len(imports) != 0 {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("stagger: the wasm module imports %d functions; it must import none", len(imports))
	}
	return &engine{runtime: rt, compiled: compiled}, nil
}

// instance is one instance of the module and the one session it hosts. It is owned by one
// goroutine: nothing here locks.
type instance struct {
	engine *engine
	mod    api.Module
	mem    api.Memory
	fns    struct{ alloc, free, sessionNew, lastError, step, metadata, report, sessionFree api.Function }
	stack  [5]uint64
	handle uint64
	out    uint32 // the 8-byte StaggerBuf every answer is written to
	buf    uint32 // scratch input buffer (event batches, the config) and its capacity
	bufCap uint32
	broken error // set by a trap: the instance takes no more calls
}

// TrapError says the wasm module trapped (a bug in stagger: a panic aborts in wasm, or it ran
// out of memory). The instance and its session are gone and every connection of it is closed:
// a one-shot Metadata call returns it, a Client rebuilds its session at the next refresh.
type TrapError struct {
	// Call is the exported function that trapped.
	Call string
	// Err is wazero's error (it names the trap: unreachable, out of bounds, ...).
	Err error
}

func (e *TrapError) Error() string {
	return fmt.Sprintf("stagger: the wasm module trapped in %s (the session was dropped and is rebuilt at the next refresh): %v", e.Call, e.Err)
}

func (e *TrapError) Unwrap() error { return e.Err }

// ConfigError is a configuration the core refused: Field names it as a dotted path in the
// session's config (settings.fanout.jitter, sasl.password, seeds[1]). Messages never quote a
// password or a token.
type ConfigError struct {
	Field   string
	Message string
}

func (e *ConfigError) Error() string {
	if e.Field == "" {
		return "stagger: config: " + e.Message
	}
	return fmt.Sprintf("stagger: config: %s: %s", e.Field, e.Message)
}

// abiError is the ABI's error JSON (docs/abi.md, "Errors and panics").
type abiError struct {
	Status  int     `json:"status"`
	Error   string  `json:"error"`
	Field   *string `json:"field"`
	Message string  `json:"message"`
}

func (e abiError) err(call string) error {
	if e.Status == statusConfig {
		field := ""
		if e.Field != nil {
			field = *e.Field
		}
		return &ConfigError{Field: field, Message: e.Message}
	}
	return fmt.Errorf("stagger: %s: %s (%s, status %d)", call, e.Message, e.Error, e.Status)
}

// newInstance opens a session on an instance of e (a pooled one, or a new one).
func newInstance(e *engine, configJSON []byte, nowNs, seed uint64) (*instance, error) {
	in, err := e.instance()
	if err != nil {
		return nil, err
	}
	if err := in.open(configJSON, nowNs, seed); err != nil {
		in.close()
		return nil, err
	}
	return in, nil
}

// instance takes an idle instance of e, or instantiates the module and checks its ABI
// version and exports.
func (e *engine) instance() (*instance, error) {
	e.mu.Lock()
	if n := len(e.idle); n > 0 {
		in := e.idle[n-1]
		e.idle = e.idle[:n-1]
		e.mu.Unlock()
		return in, nil
	}
	e.mu.Unlock()
	ctx := context.Background()
	mod, err := e.runtime.InstantiateModule(ctx, e.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("stagger: instantiating the wasm module: %w", err)
	}
	in := &instance{engine: e, mod: mod, mem: mod.Memory()}
	fail := func(err error) (*instance, error) {
		_ = mod.Close(ctx)
		return nil, err
	}
	version := mod.ExportedFunction("stagger_abi_version")
	if version == nil {
		return fail(errors.New("stagger: the wasm module does not export stagger_abi_version"))
	}
	got, err := version.Call(ctx)
	if err != nil {
		return fail(&TrapError{Call: "stagger_abi_version", Err: err})
	}
	if got[0] != abiVersion {
		return fail(fmt.Errorf("%w: the wasm module speaks version %d, this Go package %d (rebuild stagger.wasm with bindings/go/build-wasm.sh from the same checkout)", ErrABIVersion, got[0], abiVersion))
	}
	if in.mem == nil {
		return fail(errors.New("stagger: the wasm module exports no memory"))
	}
	for name, fn := range map[string]*api.Function{
		"stagger_alloc": &in.fns.alloc, "stagger_free": &in.fns.free, "stagger_session_new": &in.fns.sessionNew,
		"stagger_last_error": &in.fns.lastError, "stagger_step": &in.fns.step, "stagger_metadata": &in.fns.metadata,
		"stagger_report": &in.fns.report, "stagger_session_free": &in.fns.sessionFree,
	} {
		if *fn = mod.ExportedFunction(name); *fn == nil {
			return fail(fmt.Errorf("stagger: the wasm module does not export %s", name))
		}
	}
	if in.out, err = in.alloc(8); err != nil {
		return fail(err)
	}
	return in, nil
}

// open opens a session on in.
func (in *instance) open(configJSON []byte, nowNs, seed uint64) error {
	ptr, err := in.input(configJSON)
	if err != nil {
		return err
	}
	in.stack[0], in.stack[1], in.stack[2], in.stack[3] = uint64(ptr), uint64(len(configJSON)), nowNs, seed
	err = in.call("stagger_session_new", in.fns.sessionNew)
	// The config may hold a password: it does not stay in the scratch buffer.
	in.mem.Write(ptr, make([]byte, len(configJSON)))
	if err != nil {
		return err
	}
	if in.handle = in.stack[0]; in.handle == 0 {
		in.stack[0] = uint64(in.out)
		if err := in.call("stagger_last_error", in.fns.lastError); err != nil {
			return err
		}
		var e abiError
		if err := json.Unmarshal(in.answer(), &e); err != nil {
			return fmt.Errorf("stagger: session refused, and its error does not decode: %w", err)
		}
		return e.err("stagger_session_new")
	}
	return nil
}

// call runs fn with in.stack; a trap breaks the instance for good.
func (in *instance) call(name string, fn api.Function) error {
	if in.broken != nil {
		return in.broken
	}
	if err := fn.CallWithStack(context.Background(), in.stack[:]); err != nil {
		in.broken = &TrapError{Call: name, Err: err}
		return in.broken
	}
	return nil
}

func (in *instance) alloc(n uint32) (uint32, error) {
	in.stack[0] = uint64(n)
	if err := in.call("stagger_alloc", in.fns.alloc); err != nil {
		return 0, err
	}
	ptr := uint32(in.stack[0])
	if ptr == 0 && n > 0 {
		return 0, fmt.Errorf("stagger: the wasm module has no memory left for %d bytes", n)
	}
	return ptr, nil
}

// input copies data into the scratch buffer (grown as needed) and returns its address.
func (in *instance) input(data []byte) (uint32, error) {
	if len(data) == 0 {
		return 0, nil
	}
	if uint32(len(data)) > in.bufCap {
		if in.buf != 0 {
			in.stack[0], in.stack[1] = uint64(in.buf), uint64(in.bufCap)
			if err := in.call("stagger_free", in.fns.free); err != nil {
				return 0, err
			}
			in.buf, in.bufCap = 0, 0
		}
		size := uint32(len(data))
		if size < 64<<10 {
			size = 64 << 10
		}
		ptr, err := in.alloc(size)
		if err != nil {
			return 0, err
		}
		in.buf, in.bufCap = ptr, size
	}
	if !in.mem.Write(in.buf, data) {
		return 0, errors.New("stagger: the scratch buffer is outside the wasm memory")
	}
	return in.buf, nil
}

// answer is a view of the buffer *out points at, valid until the next call.
func (in *instance) answer() []byte {
	header, ok := in.mem.Read(in.out, 8)
	if !ok {
		return nil
	}
	ptr, n := binary.LittleEndian.Uint32(header), binary.LittleEndian.Uint32(header[4:])
	if n == 0 {
		return nil
	}
	view, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil
	}
	return view
}

// result turns a call's status into an error (the error JSON in *out) or nil.
func (in *instance) result(call string) error {
	status := int32(uint32(in.stack[0]))
	if status == statusOK {
		return nil
	}
	var e abiError
	if err := json.Unmarshal(in.answer(), &e); err != nil {
		return fmt.Errorf("stagger: %s returned status %d", call, status)
	}
	return e.err(call)
}

// step runs one wake-up: the time and an event batch in; the action batch out (a view into
// the module's memory, valid until the next call).
func (in *instance) step(nowNs uint64, events []byte) ([]byte, error) {
	ptr, err := in.input(events)
	if err != nil {
		return nil, err
	}
	in.stack[0], in.stack[1], in.stack[2], in.stack[3], in.stack[4] = in.handle, nowNs, uint64(ptr), uint64(len(events)), uint64(in.out)
	if err := in.call("stagger_step", in.fns.step); err != nil {
		return nil, err
	}
	if err := in.result("stagger_step"); err != nil {
		return nil, err
	}
	return in.answer(), nil
}

// jsonView runs stagger_metadata or stagger_report and returns a view of the JSON in the
// module's memory, valid until the next call.
func (in *instance) jsonView(name string, fn api.Function) ([]byte, error) {
	in.stack[0], in.stack[1] = in.handle, uint64(in.out)
	if err := in.call(name, fn); err != nil {
		return nil, err
	}
	if err := in.result(name); err != nil {
		return nil, err
	}
	return in.answer(), nil
}

// json is jsonView's answer, copied.
func (in *instance) json(name string, fn api.Function) ([]byte, error) {
	view, err := in.jsonView(name, fn)
	return append([]byte(nil), view...), err
}

func (in *instance) metadataJSON() ([]byte, error) {
	return in.json("stagger_metadata", in.fns.metadata)
}
func (in *instance) reportJSON() ([]byte, error) { return in.json("stagger_report", in.fns.report) }

// close frees the session and gives the instance back to its engine's pool, or drops it
// (trapped, grown big, or the pool full).
func (in *instance) close() {
	if in.broken == nil && in.handle != 0 {
		in.stack[0] = in.handle
		_ = in.call("stagger_session_free", in.fns.sessionFree)
		in.handle = 0
	}
	if e := in.engine; e != nil && in.broken == nil && in.mem.Size() <= maxIdleMemorySize {
		e.mu.Lock()
		if len(e.idle) < maxIdleInstances {
			e.idle = append(e.idle, in)
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
	}
	_ = in.mod.Close(context.Background())
}
