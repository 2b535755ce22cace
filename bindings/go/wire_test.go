package stagger

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

func TestEventsAreEncodedAsDocsAbiMdLaysThemOut(t *testing.T) {
	var b batch
	b.reset()
	b.closed(7, true)
	b.ioError(9, kindRefused, "no")
	b.resolved(3, []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:9092"), netip.MustParseAddrPort("[::1]:9093")})
	b.requestRefresh(CauseConnectionLost, "b1:9092")
	want := []byte{1, 0, 0, 0, 4, 0, 0, 0}                                                  // version 1, flags 0, count 4
	want = append(want, 4, 9, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1)                           // CLOSED(7, reset)
	want = append(want, 5, 13, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 'n', 'o')          // IO_ERROR(9, refused, 0, "no")
	want = append(want, 6, 34, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 10, 0, 0, 1, 0x84, 0x23) // RESOLVED(3, v4 ...
	want = append(want, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x85, 0x23)      // ... v6 ::1:9093)
	want = append(want, 11, 8, 0, 0, 0, 4, 'b', '1', ':', '9', '0', '9', '2')               // REQUEST_REFRESH(4, "b1:9092")
	if got := b.bytes(); !bytes.Equal(got, want) {
		t.Fatalf("\n got %v\nwant %v", got, want)
	}
	long := strings.Repeat("é", 1000) // 2000 bytes: cut at 1024, on a rune boundary
	if c := cut(long); len(c) != 1024 || !strings.HasPrefix(long, c) {
		t.Fatalf("cut to %d bytes", len(c))
	}
}

func actionBatch(wakeup uint64, records ...[]byte) []byte {
	b := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[4:], uint32(len(records)))
	b = binary.LittleEndian.AppendUint64(b, wakeup)
	for _, r := range records {
		b = append(b, r...)
	}
	return b
}

func record(kind byte, body ...byte) []byte {
	return append(binary.LittleEndian.AppendUint32([]byte{kind}, uint32(len(body))), body...)
}

func TestActionsAreDecodedAsDocsAbiMdLaysThemOut(t *testing.T) {
	dial := record(actionDial, append([]byte{5, 0, 0, 0, 0, 0, 0, 0, 1, 7, 0}, "b1:9093b1"...)...)
	send := record(actionSend, 5, 0, 0, 0, 0, 0, 0, 0, 0xde, 0xad)
	refreshed := record(actionRefreshed, append([]byte{2, 0, 0, 0, 1, 0, 0, 0}, "b1:9093"...)...)
	got, err := decodeActions(actionBatch(noWakeup, dial, send, refreshed))
	if err != nil {
		t.Fatal(err)
	}
	if got.wakeup != noWakeup || len(got.list) != 3 {
		t.Fatalf("%+v", got)
	}
	d, s, r := got.list[0], got.list[1], got.list[2]
	if d.kind != actionDial || d.id != 5 || !d.tls || d.address != "b1:9093" || d.server != "b1" {
		t.Fatalf("dial %+v", d)
	}
	if s.kind != actionSend || s.id != 5 || !bytes.Equal(s.data, []byte{0xde, 0xad}) {
		t.Fatalf("send %+v", s)
	}
	if r.kind != actionRefreshed || r.epoch != 2 || r.broker != 1 || r.address != "b1:9093" {
		t.Fatalf("refreshed %+v", r)
	}
	for name, bad := range map[string][]byte{
		"a short header":       {1, 0, 0},
		"another version":      append([]byte{2, 0}, actionBatch(0)[2:]...),
		"an unknown kind":      actionBatch(0, record(99)),
		"a short body":         actionBatch(0, record(actionClose, 1, 2, 3)),
		"a long body":          actionBatch(0, record(actionClose, 1, 0, 0, 0, 0, 0, 0, 0, 9)),
		"a missing record":     actionBatch(0, record(actionRebootstrapped))[:16],
		"bytes after":          append(actionBatch(0), 0),
		"a cut record":         actionBatch(0, record(actionSend, 1, 0, 0, 0, 0, 0, 0, 0, 1, 2))[:30],
		"an address not UTF-8": actionBatch(0, record(actionResolve, 1, 0, 0, 0, 0, 0, 0, 0, 0xff)),
	} {
		if _, err := decodeActions(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
