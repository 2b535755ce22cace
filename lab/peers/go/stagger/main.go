// lab/peers probe for stagger's Go binding (bindings/go, module stagger.dev/go/stagger, from
// this tree through the replace in ../go.mod): one stagger.Metadata call at its defaults, the
// seeds in the order given. Over SASL_SSL (bench.py --listener sasl_ssl) it connects with TLS
// and SCRAM from the benchmark's PEERS_* variables (front.Options).
//
//	stagger BOOTSTRAP TUNED(0|1) [WARMUP_ADDRESS]
//
// TUNED is accepted for the benchmark's uniform command line and ignored (stagger runs at its
// defaults). Prints one JSON line: {"ok":true,"elapsed_ms":…,"brokers":N,"connections":C,
// "attempts":A,"winner":"…"} (connections: attempts whose TCP handshake completed) or
// {"ok":false,…,"error":"…"}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"stagger.dev/go/stagger"
	"stagger.dev/lab/peers/front"
)

func main() {
	seeds := strings.Split(os.Args[1], ",")
	options, err := front.Options()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stagger probe:", err)
		os.Exit(2)
	}
	if len(os.Args) > 3 && os.Args[3] != "" {
		// Warm-up: compiles (or loads from the cache) the wasm module and pools an instance,
		// as any process's first refresh would, against the healthy broker.
		if _, err := stagger.Metadata(context.Background(), []string{os.Args[3]}, options...); err != nil {
			fmt.Fprintln(os.Stderr, "warm-up failed:", err)
		}
		// Warm-up done: tell the benchmark, and wait for its go (a line on stdin).
		fmt.Println(`{"ready":true}`)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	}
	t0 := time.Now()
	md, err := stagger.Metadata(context.Background(), seeds, options...)
	at := time.Now()
	out := map[string]any{"ok": err == nil, "elapsed_ms": float64(at.Sub(t0).Nanoseconds()) / 1e6}
	if err != nil {
		out["error"] = err.Error()
	} else {
		conns := 0
		for _, a := range md.Attempts {
			if a.Connected >= 0 {
				conns++
			}
		}
		out["brokers"] = len(md.Brokers)
		out["connections"] = conns
		out["attempts"] = len(md.Attempts)
		out["winner"] = md.AnsweredBy
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	os.Exit(0)
}
