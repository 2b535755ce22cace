// lab/peers probe for franz-go: one kgo.Client, one metadata request (kadm.BrokerMetadata).
//
//	franz BOOTSTRAP TUNED(0|1) [WARMUP_ADDRESS]
//
// Prints one JSON line: {"ok":true,"elapsed_ms":…,"brokers":N} or {"ok":false,…,"error":"…"}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func once(bootstrap string, tuned bool) (int, time.Time, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ClientID("peers-probe")}
	if tuned {
		// Dial and per-request read/write overhead 2 s (defaults 10 s and 10 s); the retry
		// backoff (default exponential 250 ms..2.5 s, jittered) capped at 2 s.
		opts = append(opts,
			kgo.DialTimeout(2*time.Second),
			kgo.RequestTimeoutOverhead(2*time.Second),
			kgo.RetryBackoffFn(func(tries int) time.Duration {
				d := 250 * time.Millisecond << uint(min(tries, 8))
				return min(d, 2*time.Second)
			}),
		)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, time.Now(), err
	}
	defer cl.Close()
	m, err := kadm.NewClient(cl).BrokerMetadata(context.Background())
	at := time.Now()
	if err != nil {
		return 0, at, err
	}
	return len(m.Brokers), at, nil
}

func main() {
	bootstrap, tuned := os.Args[1], len(os.Args) > 2 && os.Args[2] == "1"
	if len(os.Args) > 3 && os.Args[3] != "" {
		if _, _, err := once(os.Args[3], tuned); err != nil {
			fmt.Fprintln(os.Stderr, "warm-up failed:", err)
		}
		// Warm-up done: tell the benchmark, and wait for its go (a line on stdin).
		fmt.Println(`{"ready":true}`)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	}
	t0 := time.Now()
	n, at, err := once(bootstrap, tuned)
	out := map[string]any{"ok": err == nil, "elapsed_ms": float64(at.Sub(t0).Nanoseconds()) / 1e6}
	if err != nil {
		out["error"] = err.Error()
	} else {
		out["brokers"] = n
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	os.Exit(0)
}
