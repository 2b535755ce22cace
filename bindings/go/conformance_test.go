package stagger

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The conformance scenarios (../../conformance/README.md), written by the Rust tests from the
// core, replayed here through this package's own wasm instance and codec: each step's events
// encoded by the batch encoder of wire.go, stepped through instance.step, the actions decoded
// by decodeActions and compared with the file's in the JSON form, so a Go host that diverges
// fails with the first differing action.

// conformanceDir is where the scenarios are, from this package's directory.
const conformanceDir = "../../conformance"

type conformanceScenario struct {
	Format      int                        `json:"format"`
	Name        string                     `json:"name"`
	Description string                     `json:"description"`
	Config      json.RawMessage            `json:"config"`
	NowNs       uint64                     `json:"now_ns"`
	Seed        uint64                     `json:"seed"`
	Steps       []conformanceStep          `json:"steps"`
	End         map[string]json.RawMessage `json:"end"`
}

type conformanceStep struct {
	NowNs  uint64            `json:"now_ns"`
	Events []json.RawMessage `json:"events"`
	Expect struct {
		Actions      []json.RawMessage `json:"actions"`
		NextWakeupNs *uint64           `json:"next_wakeup_ns"`
	} `json:"expect"`
}

// eventFields holds the fields of any event of the files.
type eventFields struct {
	Conn      uint64   `json:"conn"`
	Lookup    uint64   `json:"lookup"`
	Hex       string   `json:"hex"`
	Reset     bool     `json:"reset"`
	Kind      string   `json:"kind"`
	Code      int16    `json:"code"`
	Detail    string   `json:"detail"`
	Addresses []string `json:"addresses"`
	Token     string   `json:"token"`
	Why       string   `json:"why"`
	Cause     string   `json:"cause"`
	Broker    string   `json:"broker"`
}

// The error kinds and causes by their names in docs/abi.md ("Codes").
var (
	conformanceErrorKinds = map[string]uint8{
		"dns": kindDNS, "refused": kindRefused, "connect_timeout": kindConnectTimeout, "response_timeout": 4,
		"closed": kindClosed, "protocol": 6, "frame_too_large": 7, "broker": 8, "no_brokers": 9, "tls": kindTLS,
		"authentication": 11, "authorization": 12, "io": kindIO,
	}
	conformanceCauses = map[string]Cause{
		"requested": CauseRequested, "bootstrap": CauseBootstrap, "periodic": CausePeriodic,
		"stale_metadata": CauseStaleMetadata, "connection_lost": CauseConnectionLost,
		"request_timed_out": CauseRequestTimedOut,
	}
)

// tagged splits a `{"kind": {fields}}` object.
func tagged(raw json.RawMessage) (string, json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", nil, err
	}
	if len(m) != 1 {
		return "", nil, fmt.Errorf("not an object with one key: %s", raw)
	}
	for k, v := range m {
		return k, v, nil
	}
	panic("unreachable")
}

// encodeEvent adds one event of a file to b with the batch encoder of wire.go.
func encodeEvent(b *batch, raw json.RawMessage) error {
	fill, err := eventFiller(raw)
	if err != nil {
		return err
	}
	fill(b)
	return nil
}

// eventFiller reads one event of a file and returns what adds it to a batch with the batch
// encoder of wire.go.
func eventFiller(raw json.RawMessage) (func(*batch), error) {
	kind, body, err := tagged(raw)
	if err != nil {
		return nil, err
	}
	var f eventFields
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	errKind := func() (uint8, error) {
		k, ok := conformanceErrorKinds[f.Kind]
		if !ok {
			return 0, fmt.Errorf("%s: unknown error kind %q", kind, f.Kind)
		}
		return k, nil
	}
	switch kind {
	case "connected":
		return func(b *batch) { b.connected(f.Conn) }, nil
	case "secured":
		return func(b *batch) { b.secured(f.Conn) }, nil
	case "received":
		data, err := hex.DecodeString(f.Hex)
		if err != nil {
			return nil, err
		}
		return func(b *batch) { b.received(f.Conn, data) }, nil
	case "closed":
		return func(b *batch) { b.closed(f.Conn, f.Reset) }, nil
	case "io_error", "resolve_failed":
		k, err := errKind()
		if err != nil {
			return nil, err
		}
		if kind == "io_error" {
			return func(b *batch) { b.failure(eventIOError, f.Conn, k, f.Code, f.Detail) }, nil
		}
		return func(b *batch) { b.failure(eventResolveFailed, f.Lookup, k, f.Code, f.Detail) }, nil
	case "resolved":
		addrs := make([]netip.AddrPort, 0, len(f.Addresses))
		for _, a := range f.Addresses {
			ap, err := netip.ParseAddrPort(a)
			if err != nil {
				return nil, err
			}
			addrs = append(addrs, ap)
		}
		return func(b *batch) { b.resolved(f.Lookup, addrs) }, nil
	case "nonce":
		data, err := hex.DecodeString(f.Hex)
		if err != nil || len(data) != 18 {
			return nil, fmt.Errorf("nonce: 18 bytes of hex, not %q", f.Hex)
		}
		return func(b *batch) { b.nonce(f.Conn, [18]byte(data)) }, nil
	case "token":
		return func(b *batch) { b.token(f.Conn, f.Token) }, nil
	case "token_failed":
		return func(b *batch) { b.tokenFailed(f.Conn, f.Why) }, nil
	case "request_refresh":
		cause, ok := conformanceCauses[f.Cause]
		if !ok {
			return nil, fmt.Errorf("request_refresh: unknown cause %q", f.Cause)
		}
		return func(b *batch) { b.requestRefresh(cause, f.Broker) }, nil
	}
	return nil, fmt.Errorf("unknown event %q", kind)
}

// decodeJSON reads JSON keeping numbers as their text (u64 ids stay exact).
func decodeJSON(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// actionForm is a decoded action in the files' JSON form (a refresh error parsed, as the
// files hold it).
func actionForm(a action) (any, error) {
	var kind string
	var fields map[string]any
	switch a.kind {
	case actionDial:
		var tls any
		if a.tls {
			tls = a.server
		}
		kind, fields = "dial", map[string]any{"conn": a.id, "address": a.address, "tls": tls}
	case actionSend:
		kind, fields = "send", map[string]any{"conn": a.id, "hex": hex.EncodeToString(a.data)}
	case actionClose:
		kind, fields = "close", map[string]any{"conn": a.id}
	case actionResolve:
		kind, fields = "resolve", map[string]any{"lookup": a.id, "name": a.address}
	case actionNeedNonce:
		kind, fields = "need_nonce", map[string]any{"conn": a.id}
	case actionNeedToken:
		kind, fields = "need_token", map[string]any{"conn": a.id}
	case actionRefreshed:
		kind, fields = "refreshed", map[string]any{"epoch": a.epoch, "broker": a.broker, "address": a.address}
	case actionRefreshFailed:
		parsed, err := decodeJSON([]byte(a.error))
		if err != nil {
			return nil, fmt.Errorf("the refresh error is not JSON: %w", err)
		}
		kind, fields = "refresh_failed", map[string]any{"epoch": a.epoch, "error": parsed}
	case actionRebootstrapped:
		kind, fields = "rebootstrapped", map[string]any{}
	case actionRefreshRequested:
		kind, fields = "refresh_requested", map[string]any{"epoch": a.epoch}
	default:
		return nil, fmt.Errorf("action kind %d", a.kind)
	}
	// Through JSON and back, so that it compares with what a file holds.
	text, err := json.Marshal(map[string]any{kind: fields})
	if err != nil {
		return nil, err
	}
	return decodeJSON(text)
}

func compact(v any) string {
	if v == nil {
		return "no action"
	}
	text, _ := json.Marshal(v)
	return string(text)
}

// subset says where actual lacks a field of expected or differs from it (objects: the fields
// expected names; arrays: the same length, each element so; anything else: equal).
func subset(expected, actual any, path string) error {
	switch e := expected.(type) {
	case map[string]any:
		a, ok := actual.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: expected %s, got %s", path, compact(expected), compact(actual))
		}
		keys := make([]string, 0, len(e))
		for k := range e {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			got, ok := a[k]
			if !ok {
				return fmt.Errorf("%s.%s: expected %s, got nothing", path, k, compact(e[k]))
			}
			if err := subset(e[k], got, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		a, ok := actual.([]any)
		if !ok || len(a) != len(e) {
			return fmt.Errorf("%s: expected %s, got %s", path, compact(expected), compact(actual))
		}
		for i := range e {
			if err := subset(e[i], a[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	default:
		if !reflect.DeepEqual(expected, actual) {
			return fmt.Errorf("%s: expected %s, got %s", path, compact(expected), compact(actual))
		}
		return nil
	}
}

// replayConformance runs a scenario through a wasm instance of this package; the first
// difference, named by step and action, is the error.
func replayConformance(s conformanceScenario) error {
	if s.Format != 1 {
		return fmt.Errorf("format %d, this replayer reads 1", s.Format)
	}
	eng, err := engineFor(0)
	if err != nil {
		return err
	}
	in, err := newInstance(eng, s.Config, s.NowNs, s.Seed)
	if err != nil {
		return fmt.Errorf("the session was refused: %w", err)
	}
	defer in.close()
	var b batch
	for i, step := range s.Steps {
		at := fmt.Sprintf("step %d (now_ns %d)", i, step.NowNs)
		b.reset()
		for j, e := range step.Events {
			if err := encodeEvent(&b, e); err != nil {
				return fmt.Errorf("%s, event %d: %w", at, j, err)
			}
		}
		raw, err := in.step(step.NowNs, b.bytes())
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		got, err := decodeActions(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		for j := 0; j < max(len(got.list), len(step.Expect.Actions)); j++ {
			var want, have any
			if j < len(step.Expect.Actions) {
				if want, err = decodeJSON(step.Expect.Actions[j]); err != nil {
					return fmt.Errorf("%s, action %d: %w", at, j, err)
				}
			}
			if j < len(got.list) {
				if have, err = actionForm(got.list[j]); err != nil {
					return fmt.Errorf("%s, action %d: %w", at, j, err)
				}
			}
			if !reflect.DeepEqual(want, have) {
				return fmt.Errorf("%s, action %d: expected %s, got %s", at, j, compact(want), compact(have))
			}
		}
		wakeup := "null"
		if got.wakeup != noWakeup {
			wakeup = fmt.Sprint(got.wakeup)
		}
		expected := "null"
		if step.Expect.NextWakeupNs != nil {
			expected = fmt.Sprint(*step.Expect.NextWakeupNs)
		}
		if wakeup != expected {
			return fmt.Errorf("%s: next_wakeup_ns: expected %s, got %s", at, expected, wakeup)
		}
	}
	for _, part := range []struct {
		name string
		read func() ([]byte, error)
	}{{"report", in.reportJSON}, {"metadata", in.metadataJSON}} {
		want, ok := s.End[part.name]
		if !ok {
			continue
		}
		expected, err := decodeJSON(want)
		if err != nil {
			return err
		}
		answer, err := part.read()
		if err != nil {
			return err
		}
		actual, err := decodeJSON(answer)
		if err != nil {
			return err
		}
		if err := subset(expected, actual, part.name); err != nil {
			return fmt.Errorf("end: %w", err)
		}
	}
	return nil
}

func loadConformance(t testing.TB, path string) conformanceScenario {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s conformanceScenario
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

func TestConformanceScenariosReplayThroughTheGoCodecAndTheWasmModule(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(conformanceDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no scenarios in %s", conformanceDir)
	}
	for _, path := range files {
		s := loadConformance(t, path)
		t.Run(s.Name, func(t *testing.T) {
			if err := replayConformance(s); err != nil {
				t.Fatalf("conformance/%s (%s):\n%v", filepath.Base(path), s.Description, err)
			}
		})
	}
}

// doctor returns a copy of s whose action j of step i is replaced by the JSON text action.
func doctor(s conformanceScenario, i, j int, action string) conformanceScenario {
	steps := append([]conformanceStep(nil), s.Steps...)
	steps[i].Expect.Actions = append([]json.RawMessage(nil), steps[i].Expect.Actions...)
	if action == "" {
		steps[i].Expect.Actions = steps[i].Expect.Actions[:j]
	} else {
		steps[i].Expect.Actions[j] = json.RawMessage(action)
	}
	s.Steps = steps
	return s
}

func TestConformanceReplayFailsAtTheFirstDifferingAction(t *testing.T) {
	s := loadConformance(t, filepath.Join(conformanceDir, "one_shot_healthy.json"))
	if err := replayConformance(s); err != nil {
		t.Fatal(err)
	}
	// Step 0 answers [refresh_requested, dial]; the dial names another broker in the copy.
	dial := string(s.Steps[0].Expect.Actions[1])
	if !strings.Contains(dial, `"b1:9092"`) {
		t.Fatalf("step 0, action 1: %s", dial)
	}
	other := strings.Replace(dial, `"b1:9092"`, `"b2:9093"`, 1)
	err := replayConformance(doctor(s, 0, 1, other))
	prefix := fmt.Sprintf("step 0 (now_ns %d), action 1: expected ", s.Steps[0].NowNs)
	if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), `"b2:9093"`) ||
		!strings.Contains(err.Error(), `got {"dial":{"address":"b1:9092"`) {
		t.Fatalf("a doctored dial: %v", err)
	}
	err = replayConformance(doctor(s, 0, 1, ""))
	if err == nil || !strings.Contains(err.Error(), `action 1: expected no action, got {"dial"`) {
		t.Fatalf("a missing action: %v", err)
	}
	late := doctor(s, 0, 1, dial)
	late.Steps[1].Expect.NextWakeupNs = new(uint64)
	err = replayConformance(late)
	if err == nil || !strings.Contains(err.Error(), "step 1 (now_ns ") || !strings.Contains(err.Error(), "next_wakeup_ns: expected 0, got ") {
		t.Fatalf("a doctored wake-up: %v", err)
	}
	counted := doctor(s, 0, 1, dial)
	counted.End = map[string]json.RawMessage{"report": json.RawMessage(`{"stats": {"connections_opened": 2}}`)}
	err = replayConformance(counted)
	if err == nil || err.Error() != "end: report.stats.connections_opened: expected 2, got 1" {
		t.Fatalf("a doctored report: %v", err)
	}
}
