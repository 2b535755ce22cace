// lab/peers probe for IBM/sarama: sarama.NewClient, which fetches the cluster's metadata
// before it returns (its normal way to learn the cluster).
//
//	sarama BOOTSTRAP TUNED(0|1) [WARMUP_ADDRESS]
//
// Prints one JSON line: {"ok":true,"elapsed_ms":…,"brokers":N} or {"ok":false,…,"error":"…"}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

func once(bootstrap string, tuned bool) (int, time.Time, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "peers-probe"
	if tuned {
		// Dial, read and write timeouts 2 s (defaults 30 s each); the metadata retry
		// backoff (250 ms) is already below 2 s.
		cfg.Net.DialTimeout = 2 * time.Second
		cfg.Net.ReadTimeout = 2 * time.Second
		cfg.Net.WriteTimeout = 2 * time.Second
	}
	cl, err := sarama.NewClient(strings.Split(bootstrap, ","), cfg)
	at := time.Now()
	if err != nil {
		return 0, at, err
	}
	n := len(cl.Brokers())
	go cl.Close()
	return n, at, nil
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
