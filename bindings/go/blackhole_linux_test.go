package stagger

import (
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// blackhole is a loopback address whose TCP handshake never completes: a listener with
// backlog 1 that never accepts, its accept queue filled (Linux keeps backlog + 1 there) so
// the kernel drops further SYNs, as a dead host's network does. The technique of
// testing/faults/src/blackhole.rs; checked here: a connect to it really hangs.
func blackhole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 1); err != nil {
		_ = syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		t.Fatal(err)
	}
	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	file := os.NewFile(uintptr(fd), "blackhole")
	ln, err := net.FileListener(file) // a duplicate of fd: the listener stays, never accepting
	_ = file.Close()
	if err != nil {
		t.Fatal(err)
	}
	var fill []net.Conn
	t.Cleanup(func() {
		for _, c := range fill {
			_ = c.Close()
		}
		_ = ln.Close()
	})
	for i := 0; i < 8; i++ {
		c, err := net.DialTimeout("tcp", address, 200*time.Millisecond)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			break // this SYN was dropped: the queue is full
		}
		if err != nil {
			t.Fatalf("blackhole: filling the accept queue: %v", err)
		}
		fill = append(fill, c)
	}
	if c, err := net.DialTimeout("tcp", address, 500*time.Millisecond); err == nil {
		_ = c.Close()
		t.Fatalf("blackhole check: a connect to %s did not hang", address)
	}
	return address
}
