//go:build !linux

package stagger

import "testing"

func blackhole(t *testing.T) string {
	t.Skip("the loopback blackhole needs Linux's accept queue")
	return ""
}
