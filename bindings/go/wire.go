package stagger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"unicode/utf8"
)

// The byte tables of docs/abi.md: events as the host writes them, actions as it reads them.
// The Rust twin is abi/src/host.rs.

// Event kinds (host → session).
const (
	eventConnected      = 1
	eventSecured        = 2
	eventReceived       = 3
	eventClosed         = 4
	eventIOError        = 5
	eventResolved       = 6
	eventResolveFailed  = 7
	eventNonce          = 8
	eventToken          = 9
	eventTokenFailed    = 10
	eventRequestRefresh = 11
)

// Action kinds (session → host).
const (
	actionDial             = 1
	actionSend             = 2
	actionClose            = 3
	actionResolve          = 4
	actionNeedNonce        = 5
	actionNeedToken        = 6
	actionRefreshed        = 7
	actionRefreshFailed    = 8
	actionRebootstrapped   = 9
	actionRefreshRequested = 10
)

// Error kinds of IO_ERROR and RESOLVE_FAILED.
const (
	kindDNS            = 1
	kindRefused        = 2
	kindConnectTimeout = 3
	kindClosed         = 5
	kindTLS            = 10
	kindIO             = 13
)

// Cause is why a refresh is asked for; the policy reads it (docs/abi.md, "Codes"): a refused
// or reset connection is seen by every client at once (be gentle), a timed-out request is
// one client's evidence of a hung broker (be quick).
type Cause uint8

const (
	// CauseRequested: no reason the policy can read.
	CauseRequested Cause = 0
	// CauseBootstrap: there is no metadata yet.
	CauseBootstrap Cause = 1
	// CausePeriodic: the application's own schedule.
	CausePeriodic Cause = 2
	// CauseStaleMetadata: a broker said the metadata is stale (NOT_LEADER_OR_FOLLOWER, ...).
	CauseStaleMetadata Cause = 3
	// CauseConnectionLost: a broker refused or reset a connection.
	CauseConnectionLost Cause = 4
	// CauseRequestTimedOut: a request to a broker timed out (that broker is tried last).
	CauseRequestTimedOut Cause = 5
)

// noWakeup is the next wake-up of an action batch when nothing is due.
const noWakeup = math.MaxUint64

// maxDetail is where the session cuts an error's detail; the host cuts it there too.
const maxDetail = 1024

// batch builds one event batch.
type batch struct {
	buf   []byte
	count uint32
}

func (b *batch) reset() {
	b.buf = append(b.buf[:0], abiVersion, 0, 0, 0, 0, 0, 0, 0)
	b.count = 0
}

func (b *batch) empty() bool { return b.count == 0 }

// bytes returns the batch with its count written.
func (b *batch) bytes() []byte {
	if len(b.buf) < 8 {
		b.reset()
	}
	binary.LittleEndian.PutUint32(b.buf[4:], b.count)
	return b.buf
}

// record starts a record of kind with a body of n bytes and returns the body to fill.
func (b *batch) record(kind uint8, n int) []byte {
	if len(b.buf) < 8 {
		b.reset()
	}
	b.count++
	b.buf = append(b.buf, kind, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b.buf[len(b.buf)-4:], uint32(n))
	start := len(b.buf)
	b.buf = append(b.buf, make([]byte, n)...)
	return b.buf[start:]
}

func (b *batch) conn(kind uint8, conn uint64) {
	binary.LittleEndian.PutUint64(b.record(kind, 8), conn)
}

func (b *batch) connected(conn uint64) { b.conn(eventConnected, conn) }
func (b *batch) secured(conn uint64)   { b.conn(eventSecured, conn) }

func (b *batch) received(conn uint64, data []byte) {
	body := b.record(eventReceived, 8+len(data))
	binary.LittleEndian.PutUint64(body, conn)
	copy(body[8:], data)
}

func (b *batch) closed(conn uint64, reset bool) {
	body := b.record(eventClosed, 9)
	binary.LittleEndian.PutUint64(body, conn)
	if reset {
		body[8] = 1
	}
}

// cut shortens text to the session's limit at a rune boundary.
func cut(text string) string {
	if len(text) <= maxDetail {
		return text
	}
	text = text[:maxDetail]
	for !utf8.ValidString(text) {
		text = text[:len(text)-1]
	}
	return text
}

func (b *batch) failure(kind uint8, id uint64, errKind uint8, code int16, detail string) {
	detail = cut(detail)
	body := b.record(kind, 11+len(detail))
	binary.LittleEndian.PutUint64(body, id)
	body[8] = errKind
	binary.LittleEndian.PutUint16(body[9:], uint16(code))
	copy(body[11:], detail)
}

func (b *batch) ioError(conn uint64, errKind uint8, detail string) {
	b.failure(eventIOError, conn, errKind, 0, detail)
}

func (b *batch) resolveFailed(lookup uint64, detail string) {
	b.failure(eventResolveFailed, lookup, kindDNS, 0, detail)
}

func (b *batch) resolved(lookup uint64, addrs []netip.AddrPort) {
	n := 8
	for _, a := range addrs {
		if a.Addr().Unmap().Is4() {
			n += 1 + 4 + 2
		} else {
			n += 1 + 16 + 2
		}
	}
	body := b.record(eventResolved, n)
	binary.LittleEndian.PutUint64(body, lookup)
	at := 8
	for _, a := range addrs {
		ip := a.Addr().Unmap()
		if ip.Is4() {
			body[at] = 4
			v4 := ip.As4()
			at += 1 + copy(body[at+1:], v4[:])
		} else {
			body[at] = 6
			v6 := ip.As16()
			at += 1 + copy(body[at+1:], v6[:])
		}
		binary.LittleEndian.PutUint16(body[at:], a.Port())
		at += 2
	}
}

func (b *batch) nonce(conn uint64, nonce [18]byte) {
	body := b.record(eventNonce, 8+len(nonce))
	binary.LittleEndian.PutUint64(body, conn)
	copy(body[8:], nonce[:])
}

func (b *batch) text(kind uint8, conn uint64, text string) {
	body := b.record(kind, 8+len(text))
	binary.LittleEndian.PutUint64(body, conn)
	copy(body[8:], text)
}

func (b *batch) token(conn uint64, token string)     { b.text(eventToken, conn, token) }
func (b *batch) tokenFailed(conn uint64, why string) { b.text(eventTokenFailed, conn, cut(why)) }

func (b *batch) requestRefresh(cause Cause, broker string) {
	body := b.record(eventRequestRefresh, 1+len(broker))
	body[0] = uint8(cause)
	copy(body[1:], broker)
}

// action is one decoded action; bytes are copies (the batch lives in the module's memory
// only until the next call).
type action struct {
	kind    uint8
	id      uint64 // conn or lookup
	epoch   uint32
	broker  uint32 // REFRESHED: the broker's index in the session's book
	tls     bool
	address string // DIAL and REFRESHED: host:port; RESOLVE: the name
	server  string // DIAL: the TLS server name
	data    []byte // SEND: the request (may carry credentials: never log it)
	error   string // REFRESH_FAILED: the error JSON
}

// actions is a decoded action batch.
type actions struct {
	wakeup uint64 // host ns, or noWakeup
	list   []action
}

// reader reads little-endian fields and says what was missing where.
type reader struct {
	b  []byte
	at int
}

var errShort = errors.New("short")

func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || len(r.b)-r.at < n {
		return nil, errShort
	}
	out := r.b[r.at : r.at+n]
	r.at += n
	return out, nil
}

func (r *reader) u8() (uint8, error) {
	b, err := r.take(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (r *reader) u16() (uint16, error) {
	b, err := r.take(2)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (r *reader) u32() (uint32, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64() (uint64, error) {
	b, err := r.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r *reader) rest() []byte {
	out := r.b[r.at:]
	r.at = len(r.b)
	return out
}

func (r *reader) text() (string, error) {
	b := r.rest()
	if !utf8.Valid(b) {
		return "", errors.New("not UTF-8")
	}
	return string(b), nil
}

// decodeActions decodes an action batch, copying everything it keeps.
func decodeActions(b []byte) (actions, error) {
	r := reader{b: b}
	fail := func(what string, err error) (actions, error) {
		return actions{}, fmt.Errorf("stagger: action batch: %s: %v", what, err)
	}
	version, err := r.u16()
	if err != nil {
		return fail("version", err)
	}
	if version != abiVersion {
		return fail("version", fmt.Errorf("%d, this host speaks %d", version, abiVersion))
	}
	if _, err := r.u16(); err != nil {
		return fail("flags", err)
	}
	count, err := r.u32()
	if err != nil {
		return fail("count", err)
	}
	var out actions
	if out.wakeup, err = r.u64(); err != nil {
		return fail("next wake-up", err)
	}
	out.list = make([]action, 0, min(int(count), len(b)/5))
	for i := uint32(0); i < count; i++ {
		kind, err := r.u8()
		if err != nil {
			return fail(fmt.Sprintf("action %d kind", i), err)
		}
		n, err := r.u32()
		if err != nil {
			return fail(fmt.Sprintf("action %d length", i), err)
		}
		body, err := r.take(int(n))
		if err != nil {
			return fail(fmt.Sprintf("action %d body", i), err)
		}
		a, err := decodeAction(kind, body)
		if err != nil {
			return fail(fmt.Sprintf("action %d (kind %d)", i, kind), err)
		}
		out.list = append(out.list, a)
	}
	if r.at != len(b) {
		return fail("end", errors.New("bytes after the last action"))
	}
	return out, nil
}

func decodeAction(kind uint8, body []byte) (action, error) {
	r := reader{b: body}
	a := action{kind: kind}
	var err error
	switch kind {
	case actionDial:
		if a.id, err = r.u64(); err != nil {
			return a, err
		}
		tls, err := r.u8()
		if err != nil {
			return a, err
		}
		a.tls = tls == 1
		n, err := r.u16()
		if err != nil {
			return a, err
		}
		address, err := r.take(int(n))
		if err != nil {
			return a, err
		}
		if !utf8.Valid(address) {
			return a, errors.New("the address is not UTF-8")
		}
		a.address = string(address)
		if a.server, err = r.text(); err != nil {
			return a, err
		}
	case actionSend:
		if a.id, err = r.u64(); err != nil {
			return a, err
		}
		a.data = append([]byte(nil), r.rest()...)
	case actionClose, actionNeedNonce, actionNeedToken:
		if a.id, err = r.u64(); err != nil {
			return a, err
		}
	case actionResolve:
		if a.id, err = r.u64(); err != nil {
			return a, err
		}
		if a.address, err = r.text(); err != nil {
			return a, err
		}
	case actionRefreshed:
		if a.epoch, err = r.u32(); err != nil {
			return a, err
		}
		if a.broker, err = r.u32(); err != nil {
			return a, err
		}
		if a.address, err = r.text(); err != nil {
			return a, err
		}
	case actionRefreshFailed:
		if a.epoch, err = r.u32(); err != nil {
			return a, err
		}
		if a.error, err = r.text(); err != nil {
			return a, err
		}
	case actionRebootstrapped:
	case actionRefreshRequested:
		if a.epoch, err = r.u32(); err != nil {
			return a, err
		}
	default:
		return a, errors.New("unknown action kind")
	}
	if r.at != len(body) {
		return a, errors.New("bytes after the body's last field")
	}
	return a, nil
}
