package stagger

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The boundary's cost per refresh, without a network: a conformance scenario replayed through
// this package's session layer (the batch encoder of wire.go, a pooled wasm instance, the
// action decoder, and on REFRESHED the metadata and the attempts a caller gets, as the host
// reads them), many times over. docs/performance/boundary.md has the numbers and the Rust
// baseline (lab/src/bin/boundary.rs replays the same files through the native ABI).
//
//	go test -run '^$' -bench Boundary -benchtime 3s
//
// Each benchmark reports, beside ns/op (one replay), the time per refresh: the mean, and the
// median and 99th percentile over batches of boundaryBatch replays.
//
//   - one_shot_healthy/refresh: what a one-shot Metadata call pays at the boundary: a session
//     opened on a pooled instance, every step, the metadata and attempts, the session closed.
//   - one_shot_healthy/Metadata: a whole Metadata call (the host's goroutines, channels and
//     connections too) against a broker in memory (net.Pipe) that answers with the
//     scenario's bytes: the host's cost without the kernel's network.
//   - kept_connection and spare_connection (long-lived sessions, several refreshes each):
//     session, the whole replay (session opened and closed) divided by its refreshes; steps,
//     the steps alone (with the metadata and attempts of each refresh) divided by them.

// boundaryBatch is how many replays one sample of the percentiles takes.
const boundaryBatch = 20

// benchScenario is a conformance scenario with its events read once, ready to be encoded.
type benchScenario struct {
	name      string
	config    []byte
	nowNs     uint64
	seed      uint64
	steps     []benchStep
	refreshes int                 // REFRESHED and REFRESH_FAILED actions in the replay
	received  map[uint64][][]byte // the bytes of the RECEIVED events, by conn
}

type benchStep struct {
	nowNs uint64
	fills []func(*batch)
}

func loadBenchScenario(b *testing.B, name string) *benchScenario {
	b.Helper()
	s := loadConformance(b, filepath.Join(conformanceDir, name+".json"))
	if err := replayConformance(s); err != nil {
		b.Fatalf("%s does not replay: %v", name, err)
	}
	out := &benchScenario{name: s.Name, config: s.Config, nowNs: s.NowNs, seed: s.Seed, received: map[uint64][][]byte{}}
	for i, step := range s.Steps {
		bs := benchStep{nowNs: step.NowNs}
		for j, raw := range step.Events {
			fill, err := eventFiller(raw)
			if err != nil {
				b.Fatalf("%s, step %d, event %d: %v", name, i, j, err)
			}
			bs.fills = append(bs.fills, fill)
			if kind, body, _ := tagged(raw); kind == "received" {
				var f eventFields
				err := json.Unmarshal(body, &f)
				data, hexErr := hex.DecodeString(f.Hex)
				if err != nil || hexErr != nil {
					b.Fatalf("%s, step %d, event %d: %s", name, i, j, raw)
				}
				out.received[f.Conn] = append(out.received[f.Conn], data)
			}
		}
		for _, raw := range step.Expect.Actions {
			if kind, _, _ := tagged(raw); kind == "refreshed" || kind == "refresh_failed" {
				out.refreshes++
			}
		}
		out.steps = append(out.steps, bs)
	}
	if out.refreshes == 0 {
		b.Fatalf("%s: no refresh ends in it", name)
	}
	return out
}

// answers are the bytes the scenario's broker sends on conn, one RECEIVED event each.
func (s *benchScenario) answers(conn uint64) [][]byte { return s.received[conn] }

// pipeDialer connects every dial to an in-memory broker (net.Pipe) that reads one request
// frame for each of answers and writes that answer, then reads until the host closes.
type pipeDialer struct {
	b       *testing.B
	answers [][]byte
}

func (d *pipeDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	client, broker := net.Pipe()
	go func() {
		defer broker.Close()
		var size [4]byte
		for _, answer := range d.answers {
			if _, err := io.ReadFull(broker, size[:]); err != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, broker, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
				return
			}
			if _, err := broker.Write(answer); err != nil {
				return
			}
		}
		_, _ = io.Copy(io.Discard, broker)
	}()
	return client, nil
}

// run steps in through the scenario as a host does: each step's events encoded into one
// batch, the actions decoded, and each refresh's end read as a caller gets it.
func (s *benchScenario) run(b *testing.B, in *instance, ev *batch) {
	h := host{in: in, cfg: &config{}}
	for _, step := range s.steps {
		ev.reset()
		for _, fill := range step.fills {
			fill(ev)
		}
		raw, err := in.step(step.nowNs, ev.bytes())
		if err != nil {
			b.Fatal(err)
		}
		acts, err := decodeActions(raw)
		if err != nil {
			b.Fatal(err)
		}
		for _, a := range acts.list {
			switch a.kind {
			case actionRefreshed:
				md, err := h.metadata(a)
				if err != nil || md == nil {
					b.Fatal(err)
				}
			case actionRefreshFailed:
				if decodeRefreshError(a.error) == nil {
					b.Fatal("no refresh error")
				}
			}
		}
	}
}

// perRefresh calls replay b.N times; replay returns the time of the part measured, which
// covers s.refreshes refreshes. It reports the mean, median and p99 per refresh over
// batches of boundaryBatch replays.
func perRefresh(b *testing.B, s *benchScenario, replay func() time.Duration) {
	b.ReportAllocs()
	b.ResetTimer()
	var samples []float64
	var total, batch time.Duration
	n := 0
	for i := 0; i < b.N; i++ {
		d := replay()
		total += d
		batch += d
		if n++; n == boundaryBatch {
			samples = append(samples, float64(batch.Nanoseconds())/float64(n*s.refreshes)/1e3)
			batch, n = 0, 0
		}
	}
	b.StopTimer()
	if n > 0 {
		samples = append(samples, float64(batch.Nanoseconds())/float64(n*s.refreshes)/1e3)
	}
	slices.Sort(samples)
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*s.refreshes)/1e3, "µs/refresh")
	b.ReportMetric(nearestRank(samples, 0.5), "p50-µs/refresh")
	b.ReportMetric(nearestRank(samples, 0.99), "p99-µs/refresh")
}

// nearestRank is the nearest-rank q-quantile of sorted, as the lab's programs take it.
func nearestRank(sorted []float64, q float64) float64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func BenchmarkBoundary(b *testing.B) {
	eng, err := engineFor(0)
	if err != nil {
		b.Fatal(err)
	}
	var ev batch
	open := func(s *benchScenario) *instance {
		in, err := newInstance(eng, s.config, s.nowNs, s.seed)
		if err != nil {
			b.Fatal(err)
		}
		return in
	}
	b.Run("one_shot_healthy/refresh", func(b *testing.B) {
		s := loadBenchScenario(b, "one_shot_healthy")
		perRefresh(b, s, func() time.Duration {
			start := time.Now()
			in := open(s)
			s.run(b, in, &ev)
			in.close()
			return time.Since(start)
		})
	})
	b.Run("one_shot_healthy/Metadata", func(b *testing.B) {
		s := loadBenchScenario(b, "one_shot_healthy")
		d := &pipeDialer{b: b, answers: s.answers(1)}
		ctx := context.Background()
		perRefresh(b, s, func() time.Duration {
			start := time.Now()
			// A stagger that never fires: a loaded machine's slow step must not hedge.
			md, err := Metadata(ctx, []string{"b1:9092", "b2:9093"}, WithDialer(d), WithSeed(s.seed),
				WithSetting("fanout.stagger", "fixed:60s"))
			if err != nil || len(md.Brokers) != 2 || len(md.Attempts) != 1 {
				b.Fatalf("%+v, %v", md, err)
			}
			return time.Since(start)
		})
	})
	for _, name := range []string{"kept_connection", "spare_connection"} {
		b.Run(name+"/session", func(b *testing.B) {
			s := loadBenchScenario(b, name)
			perRefresh(b, s, func() time.Duration {
				start := time.Now()
				in := open(s)
				s.run(b, in, &ev)
				in.close()
				return time.Since(start)
			})
		})
		b.Run(name+"/steps", func(b *testing.B) {
			s := loadBenchScenario(b, name)
			perRefresh(b, s, func() time.Duration {
				in := open(s)
				start := time.Now()
				s.run(b, in, &ev)
				d := time.Since(start)
				in.close()
				return d
			})
		})
	}
}
