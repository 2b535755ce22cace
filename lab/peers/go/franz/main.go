// lab/peers probe for franz-go: one kgo.Client, one metadata request (kadm.BrokerMetadata).
//
//	franz [-front] BOOTSTRAP TUNED(0|1) [WARMUP_ADDRESS]
//
// With -front ("franz-go + stagger front" in the benchmark), the recipe of stagger's Go binding
// (bindings/go/examples/bootstrap) comes first: stagger.Metadata(ctx, seeds,
// stagger.WithTopics()) at its defaults, then md.Seeds() (the seed that answered, then the
// listed brokers and the seeds stagger did not see failing or silent; package front) goes to
// kgo.NewClient(kgo.SeedBrokers(seeds...)); the time covers both.
//
// Prints one JSON line: {"ok":true,"elapsed_ms":…,"brokers":N} or {"ok":false,…,"error":"…"}.
//
// Over SASL_SSL (bench.py --listener sasl_ssl) the benchmark sets PEERS_SECURITY_PROTOCOL=SASL_SSL,
// PEERS_SASL_MECHANISM (SCRAM-SHA-256 or SCRAM-SHA-512), PEERS_SASL_USERNAME, PEERS_SASL_PASSWORD
// and PEERS_CA_FILE (a PEM file; package secure); the front reads them too.
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
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"stagger.dev/lab/peers/front"
	"stagger.dev/lab/peers/secure"
)

// saslSSL returns the options that connect over SASL_SSL, or none over PLAINTEXT.
func saslSSL() ([]kgo.Opt, error) {
	sec, err := secure.FromEnv()
	if sec == nil || err != nil {
		return nil, err
	}
	auth := scram.Auth{User: sec.User, Pass: sec.Password}
	mechanism := auth.AsSha512Mechanism()
	if sec.Mechanism == "SCRAM-SHA-256" {
		mechanism = auth.AsSha256Mechanism()
	}
	return []kgo.Opt{kgo.DialTLSConfig(sec.TLS), kgo.SASL(mechanism)}, nil
}

func once(bootstrap string, tuned, withFront bool) (int, time.Time, error) {
	seeds := strings.Split(bootstrap, ",")
	if withFront {
		ordered, err := front.Seeds(seeds)
		if err != nil {
			return 0, time.Now(), fmt.Errorf("stagger front: %w", err)
		}
		seeds = ordered
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("peers-probe")}
	secured, err := saslSSL()
	if err != nil {
		return 0, time.Now(), err
	}
	opts = append(opts, secured...)
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
	args := os.Args[1:]
	withFront := len(args) > 0 && args[0] == "-front"
	if withFront {
		args = args[1:]
	}
	bootstrap, tuned := args[0], len(args) > 1 && args[1] == "1"
	if len(args) > 2 && args[2] != "" {
		if _, _, err := once(args[2], tuned, withFront); err != nil {
			fmt.Fprintln(os.Stderr, "warm-up failed:", err)
		}
		// Warm-up done: tell the benchmark, and wait for its go (a line on stdin).
		fmt.Println(`{"ready":true}`)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	}
	t0 := time.Now()
	n, at, err := once(bootstrap, tuned, withFront)
	out := map[string]any{"ok": err == nil, "elapsed_ms": float64(at.Sub(t0).Nanoseconds()) / 1e6}
	if err != nil {
		out["error"] = err.Error()
	} else {
		out["brokers"] = n
	}
	if withFront {
		out["front_ms"] = front.Last.Ms
		out["front_winner"] = front.Last.Winner
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	os.Exit(0)
}
