package stagger

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The fake broker's answers are frames that kafka-protocol encoded (abi/tests/go_fixtures.rs
// writes them to testdata/ and fails when they are stale); the fake only patches each
// answer's correlation id.

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatalf("%v (regenerate with STAGGER_BLESS=1 cargo test -p stagger-abi --test go_fixtures)", err)
	}
	if len(name) > 3 && name[len(name)-3:] == ".gz" {
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(r); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

const (
	apiKeyMetadata    = 3
	apiKeyApiVersions = 18
)

// fakeBroker answers ApiVersions v3 and Metadata v12 with fixture frames, or, hung, accepts
// and reads but never answers (a stopped broker).
type fakeBroker struct {
	t           testing.TB
	ln          net.Listener
	apiVersions []byte
	metadata    atomic.Pointer[[]byte]
	hung        bool
	accepted    atomic.Int32
	requests    atomic.Int32
	metadatas   atomic.Int32 // Metadata requests
	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       []net.Conn
}

func startFake(t testing.TB, metadata []byte, hung bool) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBroker{t: t, ln: ln, apiVersions: fixture(t, "api_versions_v3.bin"), hung: hung}
	f.metadata.Store(&metadata)
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.stop)
	return f
}

func (f *fakeBroker) addr() string { return f.ln.Addr().String() }

func (f *fakeBroker) stop() {
	_ = f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeBroker) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.accepted.Add(1)
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		f.wg.Add(1)
		go f.serve(c)
	}
}

func (f *fakeBroker) serve(c net.Conn) {
	defer f.wg.Done()
	defer c.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, body); err != nil || len(body) < 8 {
			return
		}
		f.requests.Add(1)
		if f.hung {
			continue
		}
		key, version := int16(binary.BigEndian.Uint16(body)), int16(binary.BigEndian.Uint16(body[2:]))
		var frame []byte
		switch {
		case key == apiKeyApiVersions && version == 3:
			frame = f.apiVersions
		case key == apiKeyMetadata && version == 12:
			frame = *f.metadata.Load()
			f.metadatas.Add(1)
		default:
			f.t.Errorf("the fake broker answers ApiVersions v3 and Metadata v12 only, not key %d v%d", key, version)
			return
		}
		answer := append([]byte(nil), frame...)
		copy(answer[4:8], body[4:8]) // the request's correlation id
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

// countingDialer counts the connections opened and those still open. Routes send the names
// the fixtures' metadata advertises (b1:9092, b2:9093) to loopback addresses, as a hosts file
// would: no name is looked up.
type countingDialer struct {
	d      net.Dialer
	routes map[string]string
	opened atomic.Int32
	open   atomic.Int32
}

type countedConn struct {
	net.Conn
	once sync.Once
	d    *countingDialer
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.d.open.Add(-1) })
	return c.Conn.Close()
}

func (d *countingDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if to, ok := d.routes[address]; ok {
		address = to
	}
	c, err := d.d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	d.opened.Add(1)
	d.open.Add(1)
	return &countedConn{Conn: c, d: d}, nil
}

// refusedAddress is a loopback port nobody listens on.
func refusedAddress(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestOneRefreshAgainstAFakeBrokerDecodesTheMetadataAndClosesItsConnection(t *testing.T) {
	fake := startFake(t, fixture(t, "metadata_v12_small.bin"), false)
	dialer := &countingDialer{}
	md, err := Metadata(testContext(t), []string{fake.addr()}, WithDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	if md.ClusterID != "kafka-cluster-1" || md.ControllerID != 2 || md.AnsweredBy != fake.addr() {
		t.Fatalf("%+v", md)
	}
	if len(md.Brokers) != 2 || md.Brokers[1].Address() != "b2:9093" || md.Brokers[0].Rack != "" {
		t.Fatalf("brokers %+v", md.Brokers)
	}
	if len(md.Topics) != 2 || md.Topics[0].Name != "topic-000000" || len(md.Topics[1].Partitions) != 2 {
		t.Fatalf("topics %+v", md.Topics)
	}
	if p := md.Topics[1].Partitions[1]; p.ID != 1 || p.Leader != 2 || len(p.ISR) != 3 || len(p.Replicas) != 3 {
		t.Fatalf("partition %+v", p)
	}
	if len(md.Attempts) != 1 || md.Attempts[0].Outcome != "won" || md.Attempts[0].Connected < 0 {
		t.Fatalf("attempts %+v", md.Attempts)
	}
	if len(md.GivenSeeds) != 1 || md.GivenSeeds[0] != fake.addr() {
		t.Fatalf("given seeds %v", md.GivenSeeds)
	}
	if got := md.Seeds(); len(got) != 3 || got[0] != fake.addr() || got[1] != "b1:9092" {
		t.Fatalf("seeds %v", got)
	}
	if dialer.opened.Load() != 1 || dialer.open.Load() != 0 {
		t.Fatalf("opened %d, still open %d", dialer.opened.Load(), dialer.open.Load())
	}
}

func TestAMultiMegabyteMetadataAnswerIsTakenWhole(t *testing.T) {
	frame := fixture(t, "metadata_v12_big.bin.gz")
	if len(frame) < 5<<20 {
		t.Fatalf("the fixture is %d bytes, not multi-megabyte", len(frame))
	}
	fake := startFake(t, frame, false)
	started := time.Now()
	md, err := Metadata(testContext(t), []string{fake.addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a %.1f MiB Metadata answer: refreshed and decoded in %v", float64(len(frame))/(1<<20), time.Since(started))
	if len(md.Topics) != 20000 {
		t.Fatalf("%d topics", len(md.Topics))
	}
	last := md.Topics[19999]
	if last.Name != "topic-019999" || len(last.Partitions) != 6 || len(last.Partitions[5].ISR) != 3 || last.Partitions[5].ISR[2] != 3 {
		t.Fatalf("%+v", last)
	}
}

func TestAnAnswerAboveTheFrameLimitFailsTheAttemptNotTheHost(t *testing.T) {
	fake := startFake(t, fixture(t, "metadata_v12_big.bin.gz"), false)
	_, err := Metadata(testContext(t), []string{fake.addr()}, WithMaxFrameSize(1<<20), WithSetting("retry.retries", "0"))
	var rerr *RefreshError
	if !errorsAs(err, &rerr) || rerr.Last == nil || rerr.Last.Kind != "frame_too_large" {
		t.Fatalf("%v", err)
	}
}

func TestAHungSeedFirstIsOvertakenAndEveryConnectionIsClosed(t *testing.T) {
	hung := startFake(t, nil, true)
	good := startFake(t, fixture(t, "metadata_v12_small.bin"), false)
	dialer := &countingDialer{}
	// The hung seed first, as listed.
	md, err := Metadata(testContext(t), []string{hung.addr(), good.addr()}, WithDialer(dialer), WithSetting("shuffle_seeds", "false"))
	if err != nil {
		t.Fatal(err)
	}
	if md.AnsweredBy != good.addr() {
		t.Fatalf("answered by %s", md.AnsweredBy)
	}
	if md.Elapsed > 2500*time.Millisecond {
		t.Fatalf("took %v: the hung seed was waited out", md.Elapsed)
	}
	first := md.Attempts[0]
	if first.Broker != hung.addr() || first.Connected < 0 || first.Answered >= 0 || first.Outcome != "cancelled" {
		t.Fatalf("the hung seed's attempt: %+v", first)
	}
	if dialer.open.Load() != 0 {
		t.Fatalf("%d connections still open", dialer.open.Load())
	}
	t.Logf("past a hung seed in %v: %+v", md.Elapsed, md.Attempts)
}

func TestARefusedSeedFirstMovesOnAtOnce(t *testing.T) {
	good := startFake(t, fixture(t, "metadata_v12_small.bin"), false)
	refused := refusedAddress(t)
	md, err := Metadata(testContext(t), []string{refused, good.addr()}, WithSetting("shuffle_seeds", "false"))
	if err != nil {
		t.Fatal(err)
	}
	if md.AnsweredBy != good.addr() || md.Attempts[0].Outcome != "failed" || md.Attempts[0].ErrorKind != "refused" {
		t.Fatalf("%s %+v", md.AnsweredBy, md.Attempts)
	}
	if md.Elapsed > time.Second {
		t.Fatalf("took %v", md.Elapsed)
	}
}

func TestEveryBrokerRefusingGivesEveryBrokersError(t *testing.T) {
	seeds := []string{refusedAddress(t), refusedAddress(t)}
	// Brokers are in attempt order: the seeds asked as listed.
	_, err := Metadata(testContext(t), seeds, WithSetting("retry.retries", "0"), WithSetting("shuffle_seeds", "false"))
	var rerr *RefreshError
	if !errorsAs(err, &rerr) {
		t.Fatalf("%T %v", err, err)
	}
	if rerr.Reason != "all_failed" || rerr.Passes != 1 || rerr.Fatal() || len(rerr.Brokers) != 2 {
		t.Fatalf("%+v", rerr)
	}
	for i, b := range rerr.Brokers {
		if b.Address != seeds[i] || b.Err == nil || b.Err.Kind != "refused" || b.Attempts != 1 {
			t.Fatalf("broker %d: %+v", i, b)
		}
	}
	var last *AttemptError
	if !errorsAs(err, &last) || last.Kind != "refused" || last.Address == "" {
		t.Fatalf("errors.As(*AttemptError): %+v", last)
	}
	t.Logf("%v", err)
}

// A broker that hangs up on the ClientHello (one restarting, or a plaintext port) fails its
// attempt as "closed", not "tls": every pass runs, as the next may find it back. Only the
// TLS layer's refusals (a certificate, an alert) end a refresh after one pass
// (TestSSLRefreshVerifiesTheBrokersCertificates).
func TestABrokerHangingUpDuringTheTLSHandshakeIsAClosedConnectionRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	_, err = Metadata(testContext(t), []string{ln.Addr().String()}, WithTLS(&tls.Config{}),
		WithSetting("retry.retries", "2"), WithSetting("retry.initial", "1ms"))
	var rerr *RefreshError
	if !errorsAs(err, &rerr) || rerr.Reason != "all_failed" || rerr.Passes != 3 || rerr.Last == nil ||
		rerr.Last.Kind != "closed" || accepted.Load() != 3 {
		t.Fatalf("accepted %d: %v", accepted.Load(), err)
	}
}

func TestCancellingTheContextClosesEveryConnection(t *testing.T) {
	a, b := startFake(t, nil, true), startFake(t, nil, true)
	dialer := &countingDialer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Metadata(ctx, []string{a.addr(), b.addr()}, WithDialer(dialer), WithSetting("fanout.stagger", "fixed:1ms"))
		done <- err
	}()
	// Both hung brokers have been asked (each read a request): every attempt is in flight.
	for a.requests.Load() == 0 || b.requests.Load() == 0 {
		select {
		case err := <-done:
			t.Fatalf("returned before the cancel: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("%v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Metadata did not return after its context was cancelled")
	}
	if dialer.opened.Load() != 2 || dialer.open.Load() != 0 {
		t.Fatalf("opened %d, still open %d", dialer.opened.Load(), dialer.open.Load())
	}
}

func TestAClientCachesItsMetadataAndRefreshesOverTheKeptConnection(t *testing.T) {
	fake := startFake(t, fixture(t, "metadata_v12_small.bin"), false)
	dialer := &countingDialer{routes: map[string]string{"b1:9092": fake.addr(), "b2:9093": refusedAddress(t)}}
	c, err := NewClient([]string{"b1:9092"}, WithDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	first, err := c.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Metadata(ctx)
	if err != nil || again != first {
		t.Fatalf("not the cached answer: %v", err)
	}
	requests, metadatas := fake.requests.Load(), fake.metadatas.Load()
	fresh, err := c.Refresh(ctx)
	if err != nil || fresh == first {
		t.Fatalf("not a fresh answer: %v", err)
	}
	if got := fake.metadatas.Load() - metadatas; got != 1 || dialer.opened.Load() != 1 {
		t.Fatalf("the refresh sent %d requests (%d Metadata, %d connections); one Metadata request on the kept connection expected: %+v", fake.requests.Load()-requests, got, dialer.opened.Load(), fresh.Attempts)
	}
	if dialer.opened.Load() != 1 || dialer.open.Load() != 1 {
		t.Fatalf("opened %d, open %d: one kept connection expected", dialer.opened.Load(), dialer.open.Load())
	}
	// Concurrent callers join one refresh.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Refresh(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if dialer.open.Load() != 0 {
		t.Fatalf("%d connections open after Close", dialer.open.Load())
	}
	if _, err := c.Refresh(ctx); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
	_ = c.Close()
}

func TestClosingAClientEndsItsWaitingCallers(t *testing.T) {
	hung := startFake(t, nil, true)
	dialer := &countingDialer{routes: map[string]string{"b1:9092": hung.addr()}}
	c, err := NewClient([]string{"b1:9092"}, WithDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Metadata(context.Background())
		done <- err
	}()
	for hung.requests.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != ErrClosed {
		t.Fatalf("%v", err)
	}
	if dialer.open.Load() != 0 {
		t.Fatalf("%d connections open after Close", dialer.open.Load())
	}
}

func TestAModuleThatTrapsDropsTheSessionAndAClientRebuildsIt(t *testing.T) {
	// 4 MiB of wasm memory hold a small answer, not a 5.5 MiB one: the allocation fails
	// inside the module, which aborts (a trap in wasm).
	fake := startFake(t, fixture(t, "metadata_v12_big.bin.gz"), false)
	dialer := &countingDialer{routes: map[string]string{"b1:9092": fake.addr(), "b2:9093": refusedAddress(t)}}
	_, err := Metadata(testContext(t), []string{"b1:9092"}, WithMemoryLimit(4<<20), WithDialer(dialer))
	var trap *TrapError
	if !errorsAs(err, &trap) {
		t.Fatalf("one-shot: %T %v", err, err)
	}
	if dialer.open.Load() != 0 {
		t.Fatalf("%d connections open after the trap", dialer.open.Load())
	}
	t.Logf("%v", err)

	c, err := NewClient([]string{"b1:9092"}, WithMemoryLimit(4<<20), WithDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testContext(t)
	if _, err := c.Refresh(ctx); !errorsAs(err, &trap) {
		t.Fatalf("client: %T %v", err, err)
	}
	if dialer.open.Load() != 0 {
		t.Fatalf("%d connections open after the trap", dialer.open.Load())
	}
	small := fixture(t, "metadata_v12_small.bin")
	fake.metadata.Store(&small)
	md, err := c.Refresh(ctx)
	if err != nil {
		t.Fatalf("after the trap, the client did not rebuild its session: %v", err)
	}
	if len(md.Topics) != 2 {
		t.Fatalf("%+v", md.Topics)
	}
}

// tinyModule is a wasm module exporting stagger_abi_version only: returning version, or
// trapping (unreachable) when trap is set.
func tinyModule(version byte, trap bool) []byte {
	section := func(id byte, body ...byte) []byte { return append([]byte{id, byte(len(body))}, body...) }
	name := []byte("stagger_abi_version")
	code := []byte{0x00, 0x41, version, 0x0b} // no locals; i32.const version; end
	if trap {
		code = []byte{0x00, 0x00, 0x0b} // no locals; unreachable; end
	}
	m := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	m = append(m, section(1, 0x01, 0x60, 0x00, 0x01, 0x7f)...) // one type: () -> i32
	m = append(m, section(3, 0x01, 0x00)...)                   // one function of type 0
	m = append(m, section(7, append(append([]byte{0x01, byte(len(name))}, name...), 0x00, 0x00)...)...)
	m = append(m, section(10, append([]byte{0x01, byte(len(code))}, code...)...)...)
	return m
}

func TestAModuleOfAnotherABIVersionIsRefusedOnLoad(t *testing.T) {
	eng, err := newEngine(tinyModule(2, false), 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newInstance(eng, []byte(`{"seeds": ["b1:9092"]}`), 1, 1)
	if !errorsIs(err, ErrABIVersion) {
		t.Fatalf("%v", err)
	}
	t.Logf("%v", err)
	eng, err = newEngine(tinyModule(1, true), 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newInstance(eng, []byte(`{}`), 1, 1)
	var trap *TrapError
	if !errorsAs(err, &trap) || trap.Call != "stagger_abi_version" {
		t.Fatalf("%v", err)
	}
}
