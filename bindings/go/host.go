package stagger

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The host: one goroutine (the owner) holds the wasm instance and its session, steps it,
// and carries out its actions; every connection has a goroutine that dials, secures, then
// reads and feeds the bytes to the owner over a channel, and one that writes what the owner
// queues. The owner never blocks on a socket.

// readBuffer is how much one read takes; the session reassembles frames of any size.
const readBuffer = 64 << 10

// readBuffers holds the read buffers of ended connections for the next ones (what a read
// takes is copied out of its buffer before the next read).
var readBuffers = sync.Pool{New: func() any { return new([readBuffer]byte) }}

// batchBudget bounds the bytes of RECEIVED events one step carries (more wait for the next).
const batchBudget = 1 << 20

// outcome is how a refresh ended, for the callers waiting on it.
type outcome struct {
	md  *ClusterMetadata
	err error
}

// note is what a connection's goroutine (or a lookup's, or a token's) tells the owner.
type note struct {
	kind    uint8 // an event kind
	id      uint64
	c       *conn  // the connection it is about (ids start again in a rebuilt session)
	gen     uint64 // the session generation a lookup belongs to
	data    []byte
	reset   bool
	errKind uint8
	detail  string
	addrs   []netip.AddrPort
	token   string
}

// conn is one connection as the owner holds it.
type conn struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	queue  [][]byte
	wake   chan struct{}
}

func (c *conn) push(b []byte) {
	c.mu.Lock()
	c.queue = append(c.queue, b)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) take() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queue
	c.queue = nil
	return q
}

// host runs one session. Only the owner goroutine touches its fields, except notes, done
// and wg.
type host struct {
	cfg     *config
	oneShot bool
	in      *instance
	t0      time.Time

	ctx    context.Context // ends when the host stops: every connection and token call with it
	cancel context.CancelFunc
	notes  chan note
	wg     sync.WaitGroup // every goroutine of the host
	connWG sync.WaitGroup // the connections' goroutines (they end soon after a cancel)
	conns  map[uint64]*conn

	events  batch
	pending []chan outcome            // callers whose REQUEST_REFRESH is in the batch being built
	sent    []chan outcome            // ... in the step running, until its REFRESH_REQUESTED
	waiters map[uint32][]chan outcome // by epoch
	wakeup  uint64
	gen     uint64 // the session's generation: notes of an earlier one (before a trap) are dropped

	// latest is the latest metadata and when it came (the owner writes, a Client reads).
	mu       sync.Mutex
	latest   *ClusterMetadata
	latestAt time.Time
}

func newHost(cfg *config, oneShot bool) (*host, error) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &host{
		cfg: cfg, oneShot: oneShot, t0: time.Now(), ctx: ctx, cancel: cancel,
		notes: make(chan note, 64), conns: map[uint64]*conn{},
		waiters: map[uint32][]chan outcome{}, wakeup: noWakeup,
	}
	if err := h.build(); err != nil {
		cancel()
		return nil, err
	}
	return h, nil
}

// build instantiates the module and opens the session (again, after a trap).
func (h *host) build() error {
	eng, err := engineFor(h.cfg.memoryPages)
	if err != nil {
		return err
	}
	doc, err := h.cfg.sessionJSON(h.oneShot)
	if err != nil {
		return err
	}
	in, err := newInstance(eng, doc, h.now(), h.cfg.seed)
	clear(doc) // it held the password
	if err != nil {
		return err
	}
	h.in, h.wakeup = in, noWakeup
	h.gen++
	h.cfg.seed++ // a rebuilt session does not replay the same jitter
	return nil
}

// now is the monotonic clock in ns since the host began (the session's clock).
func (h *host) now() uint64 { return uint64(time.Since(h.t0)) + 1 }

// request queues a REQUEST_REFRESH for the next step; reply gets its outcome.
func (h *host) request(cause Cause, broker string, reply chan outcome) {
	h.events.requestRefresh(cause, broker)
	h.pending = append(h.pending, reply)
}

// step steps the session with the batch built so far and carries out the actions, until
// nothing more is to be fed at once (nonces). A trap ends the instance: every connection is
// closed and every caller gets the *TrapError.
func (h *host) step() {
	for {
		if h.in == nil {
			// After a trap: a new instance and session, only when a caller asks (a refresh
			// that traps every time must not loop on its own).
			if len(h.pending) == 0 {
				h.events.reset()
				return
			}
			if err := h.build(); err != nil {
				h.sent, h.pending = append(h.sent, h.pending...), nil
				h.failAll(err)
				h.events.reset()
				return
			}
		}
		events := h.events.bytes()
		h.sent, h.pending = append(h.sent, h.pending...), nil
		raw, err := h.in.step(h.now(), events)
		h.events.reset()
		var acts actions
		if err == nil {
			acts, err = decodeActions(raw)
		}
		if err != nil {
			h.broke(err)
			return
		}
		h.wakeup = acts.wakeup
		for _, a := range acts.list {
			h.act(a)
		}
		if h.in == nil || h.events.empty() {
			return
		}
	}
}

// broke ends an instance that trapped (or answered what this host cannot read): every
// connection is closed before the callers hear of it.
func (h *host) broke(err error) {
	h.closeConns()
	h.connWG.Wait()
	h.failAll(err)
	if h.in != nil {
		h.in.close()
		h.in = nil
	}
	h.wakeup = noWakeup
}

func (h *host) failAll(err error) {
	for _, reply := range h.sent {
		reply <- outcome{err: err}
	}
	h.sent = nil
	for epoch, replies := range h.waiters {
		for _, reply := range replies {
			reply <- outcome{err: err}
		}
		delete(h.waiters, epoch)
	}
}

func (h *host) act(a action) {
	switch a.kind {
	case actionDial:
		h.dial(a.id, a.address, a.tls, a.server)
	case actionSend:
		if c := h.conns[a.id]; c != nil {
			c.push(a.data)
		}
	case actionClose:
		if c := h.conns[a.id]; c != nil {
			c.cancel()
			delete(h.conns, a.id)
		}
	case actionResolve:
		h.resolve(a.id, a.address)
	case actionNeedNonce:
		var nonce [18]byte
		if _, err := rand.Read(nonce[:]); err != nil {
			if c := h.conns[a.id]; c != nil {
				c.cancel()
				delete(h.conns, a.id)
			}
			h.events.ioError(a.id, kindIO, "no nonce: "+err.Error())
			return
		}
		h.events.nonce(a.id, nonce)
	case actionNeedToken:
		h.fetchToken(a.id)
	case actionRefreshRequested:
		if len(h.sent) > 0 {
			h.waiters[a.epoch] = append(h.waiters[a.epoch], h.sent[0])
			h.sent = h.sent[1:]
		}
	case actionRefreshed:
		md, err := h.metadata(a)
		if err == nil {
			h.mu.Lock()
			h.latest, h.latestAt = md, time.Now()
			h.mu.Unlock()
		}
		h.answer(a.epoch, outcome{md: md, err: err})
	case actionRefreshFailed:
		h.answer(a.epoch, outcome{err: decodeRefreshError(a.error)})
	case actionRebootstrapped:
	}
}

// metadata reads the metadata the session holds after REFRESHED, and the refresh's report.
// Both are decoded where the module wrote them (the decoders copy what they keep).
func (h *host) metadata(a action) (*ClusterMetadata, error) {
	doc, err := h.in.jsonView("stagger_metadata", h.in.fns.metadata)
	if err != nil {
		return nil, err
	}
	md, err := decodeMetadata(doc)
	if err != nil {
		return nil, err
	}
	md.AnsweredBy = a.address
	md.GivenSeeds = append([]string(nil), h.cfg.seeds...)
	if doc, err := h.in.jsonView("stagger_report", h.in.fns.report); err == nil {
		if r, ok := decodeReport(doc); ok && r.last && r.epoch == a.epoch {
			md.Elapsed = r.elapsed
			md.Attempts = append(md.Attempts, r.attempts...)
		}
	}
	return md, nil
}

func (h *host) answer(epoch uint32, o outcome) {
	for _, reply := range h.waiters[epoch] {
		reply <- o
	}
	delete(h.waiters, epoch)
}

// send hands a note to the owner, unless ctx (the connection's, or the host's) has ended.
func (h *host) send(ctx context.Context, n note) bool {
	select {
	case h.notes <- n:
		return true
	case <-ctx.Done():
		return false
	}
}

// take turns a note into an event of the batch being built. News about a connection the
// session closed is dropped here.
func (h *host) take(n note) {
	switch n.kind {
	case eventResolved, eventResolveFailed:
		if n.gen != h.gen || h.in == nil {
			return
		}
		if n.kind == eventResolved {
			h.events.resolved(n.id, n.addrs)
		} else {
			h.events.resolveFailed(n.id, n.detail)
		}
		return
	}
	if c := h.conns[n.id]; c == nil || c != n.c {
		return
	}
	switch n.kind {
	case eventConnected:
		h.events.connected(n.id)
	case eventSecured:
		h.events.secured(n.id)
	case eventReceived:
		h.events.received(n.id, n.data)
	case eventClosed:
		h.events.closed(n.id, n.reset)
		h.forget(n.id)
	case eventIOError:
		h.events.ioError(n.id, n.errKind, n.detail)
		h.forget(n.id)
	case eventToken:
		h.events.token(n.id, n.token)
	case eventTokenFailed:
		h.events.tokenFailed(n.id, n.detail)
	}
}

func (h *host) forget(id uint64) {
	if c := h.conns[id]; c != nil {
		c.cancel()
		delete(h.conns, id)
	}
}

// wait blocks until a note, a request (from requests, nil for none), the session's next
// wake-up or stop; it gathers every note already there into the batch.
func (h *host) wait(timer *time.Timer, requests <-chan request, stop <-chan struct{}) (request, bool) {
	var due <-chan time.Time
	if h.wakeup != noWakeup {
		now := h.now()
		if h.wakeup <= now {
			return request{}, true
		}
		timer.Reset(time.Duration(h.wakeup - now))
		due = timer.C
		defer timer.Stop()
	}
	select {
	case n := <-h.notes:
		h.take(n)
		h.drain()
	case r := <-requests:
		return r, true
	case <-due:
	case <-stop:
		return request{}, false
	}
	return request{}, true
}

// drain takes the notes already waiting, up to the batch budget.
func (h *host) drain() {
	for len(h.events.buf) < batchBudget {
		select {
		case n := <-h.notes:
			h.take(n)
		default:
			return
		}
	}
}

// shutdown closes every connection, waits for every goroutine, and frees the session.
func (h *host) shutdown(err error) {
	h.failAll(err)
	for _, reply := range h.pending {
		reply <- outcome{err: err}
	}
	h.pending = nil
	h.closeConns()
	h.cancel()
	h.wg.Wait()
	if h.in != nil {
		h.in.close()
		h.in = nil
	}
}

func (h *host) closeConns() {
	for id, c := range h.conns {
		c.cancel()
		delete(h.conns, id)
	}
}

// dial starts a connection's goroutines.
func (h *host) dial(id uint64, address string, useTLS bool, server string) {
	ctx, cancel := context.WithCancel(h.ctx)
	c := &conn{ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
	h.conns[id] = c
	h.wg.Add(1)
	h.connWG.Add(1)
	go h.converse(id, c, address, useTLS, server)
}

// converse is one connection's life: dial, TLS, then read until it ends; a writer goroutine
// beside it writes what the owner queues. Cancelling c.ctx (CLOSE, a failure, the host's
// end) closes the socket, and both goroutines return.
func (h *host) converse(id uint64, c *conn, address string, useTLS bool, server string) {
	defer h.wg.Done()
	defer h.connWG.Done()
	defer c.cancel()
	raw, err := h.cfg.dialer.DialContext(c.ctx, "tcp", address)
	if err != nil {
		if c.ctx.Err() == nil {
			h.send(c.ctx, note{kind: eventIOError, id: id, c: c, errKind: dialKind(err), detail: err.Error()})
		}
		return
	}
	stop := context.AfterFunc(c.ctx, func() { _ = raw.Close() })
	defer func() {
		stop()
		_ = raw.Close()
	}()
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
	if !h.send(c.ctx, note{kind: eventConnected, id: id, c: c}) {
		return
	}
	var nc net.Conn = raw
	if useTLS {
		tc := h.cfg.tls.Clone()
		if tc.ServerName == "" {
			tc.ServerName = server
			if tc.ServerName == "" {
				tc.ServerName, _, _ = net.SplitHostPort(address)
			}
		}
		secure := tls.Client(raw, tc)
		if err := secure.HandshakeContext(c.ctx); err != nil {
			if c.ctx.Err() == nil {
				h.send(c.ctx, note{kind: eventIOError, id: id, c: c, errKind: handshakeFailure(err), detail: "TLS handshake: " + err.Error()})
			}
			return
		}
		nc = secure
		if !h.send(c.ctx, note{kind: eventSecured, id: id, c: c}) {
			return
		}
	}
	h.wg.Add(1)
	h.connWG.Add(1)
	go h.write(id, c, nc)
	pooled := readBuffers.Get().(*[readBuffer]byte)
	defer readBuffers.Put(pooled)
	buf := pooled[:]
	for {
		n, err := nc.Read(buf)
		if n > 0 {
			if !h.send(c.ctx, note{kind: eventReceived, id: id, c: c, data: append([]byte(nil), buf[:n]...)}) {
				return
			}
		}
		if err != nil {
			if c.ctx.Err() == nil {
				n := readFailure(id, err, useTLS)
				n.c = c
				h.send(c.ctx, n)
			}
			return
		}
	}
}

// write writes what the owner queues on c, in order, until c ends.
func (h *host) write(id uint64, c *conn, nc net.Conn) {
	defer h.wg.Done()
	defer h.connWG.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		}
		for _, b := range c.take() {
			if _, err := nc.Write(b); err != nil {
				if c.ctx.Err() == nil {
					kind := uint8(kindIO)
					if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
						kind = kindClosed
					}
					h.send(c.ctx, note{kind: eventIOError, id: id, c: c, errKind: kind, detail: "write: " + err.Error()})
				}
				c.cancel()
				return
			}
		}
	}
}

// dialKind maps a dial error to the ABI's error kind (refused moves on at once).
func dialKind(err error) uint8 {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return kindRefused
	case errors.As(err, &dns):
		return kindDNS
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT):
		return kindConnectTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return kindConnectTimeout
	}
	return kindIO
}

// handshakeFailure is the kind of a failed TLS handshake: TLS when crypto/tls refused the
// peer (its certificate, an alert, bytes that are not TLS), which the next pass would meet
// again and so ends the refresh when every broker of a pass does it; CLOSED when the broker
// closed or reset the connection under it, and IO when the socket failed otherwise, which a
// next pass may not meet.
func handshakeFailure(err error) byte {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return kindClosed
	}
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "read" || op.Op == "write") {
		return kindIO
	}
	return kindTLS
}

// readFailure maps the end of a read to CLOSED (clean or reset) or IO_ERROR.
func readFailure(id uint64, err error, secure bool) note {
	switch {
	case errors.Is(err, io.EOF):
		return note{kind: eventClosed, id: id}
	case errors.Is(err, syscall.ECONNRESET):
		return note{kind: eventClosed, id: id, reset: true}
	}
	var alert tls.AlertError
	var header tls.RecordHeaderError
	var verify *tls.CertificateVerificationError
	if secure && (errors.As(err, &alert) || errors.As(err, &header) || errors.As(err, &verify)) {
		return note{kind: eventIOError, id: id, errKind: kindTLS, detail: err.Error()}
	}
	return note{kind: eventIOError, id: id, errKind: kindIO, detail: err.Error()}
}

// resolve looks a seed name up (WithResolveNames): every address a candidate.
func (h *host) resolve(lookup uint64, name string) {
	gen := h.gen
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		host, portText, err := net.SplitHostPort(name)
		var port uint64
		if err == nil {
			port, err = strconv.ParseUint(portText, 10, 16)
		}
		if err != nil {
			h.send(h.ctx, note{kind: eventResolveFailed, id: lookup, gen: gen, detail: name + ": " + err.Error()})
			return
		}
		ips, err := net.DefaultResolver.LookupNetIP(h.ctx, "ip", host)
		if err != nil {
			if h.ctx.Err() == nil {
				h.send(h.ctx, note{kind: eventResolveFailed, id: lookup, gen: gen, detail: err.Error()})
			}
			return
		}
		addrs := make([]netip.AddrPort, len(ips))
		for i, ip := range ips {
			addrs[i] = netip.AddrPortFrom(ip.Unmap(), uint16(port))
		}
		h.send(h.ctx, note{kind: eventResolved, id: lookup, gen: gen, addrs: addrs})
	}()
}

// fetchToken calls the token func on its own goroutine (it may block on the network).
func (h *host) fetchToken(id uint64) {
	c := h.conns[id]
	if c == nil {
		return
	}
	if h.cfg.token == nil {
		h.events.tokenFailed(id, "no token func (WithOAuthBearer)")
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		token, err := h.cfg.token(c.ctx)
		if c.ctx.Err() != nil {
			return
		}
		if err != nil {
			h.send(c.ctx, note{kind: eventTokenFailed, id: id, c: c, detail: "token func: " + err.Error()})
			return
		}
		h.send(c.ctx, note{kind: eventToken, id: id, c: c, token: token})
	}()
}

// request is a caller's ask, carried to a Client's owner goroutine.
type request struct {
	cause  Cause
	broker string
	reply  chan outcome
}
