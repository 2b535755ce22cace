// lab/peers probe for IBM/sarama: sarama.NewClient, which fetches the cluster's metadata
// before it returns (its normal way to learn the cluster).
//
//	sarama [-front] BOOTSTRAP TUNED(0|1) [WARMUP_ADDRESS]
//
// With -front ("sarama + stagger front" in the benchmark), the recipe of stagger's Go binding
// (bindings/go/examples/bootstrap) comes first: stagger.Metadata(ctx, seeds,
// stagger.WithTopics()) at its defaults, then md.Seeds() (the seed that answered, then the
// listed brokers and the seeds stagger did not see failing or silent; package front) goes to
// sarama.NewClient(seeds, cfg); the time covers both.
//
// Prints one JSON line: {"ok":true,"elapsed_ms":…,"brokers":N} or {"ok":false,…,"error":"…"}.
//
// Over SASL_SSL (bench.py --listener sasl_ssl) it connects with TLS and SCRAM from the
// benchmark's PEERS_* variables (package secure), with xdg-go/scram for the SCRAM client, as
// sarama's documentation does; the front reads them too.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
	"stagger.dev/lab/peers/front"
	"stagger.dev/lab/peers/secure"
)

// scramClient is sarama's SCRAMClient over xdg-go/scram.
type scramClient struct {
	hash         scram.HashGeneratorFcn
	conversation *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conversation = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conversation.Step(challenge) }
func (c *scramClient) Done() bool                            { return c.conversation.Done() }

// saslSSL sets cfg to connect over SASL_SSL, when the benchmark runs over it.
func saslSSL(cfg *sarama.Config) error {
	sec, err := secure.FromEnv()
	if sec == nil || err != nil {
		return err
	}
	cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, sec.TLS
	cfg.Net.SASL.Enable, cfg.Net.SASL.Handshake = true, true
	cfg.Net.SASL.User, cfg.Net.SASL.Password = sec.User, sec.Password
	hash, mechanism := scram.SHA512, sarama.SASLMechanism(sarama.SASLTypeSCRAMSHA512)
	if sec.Mechanism == "SCRAM-SHA-256" {
		hash, mechanism = scram.SHA256, sarama.SASLTypeSCRAMSHA256
	}
	cfg.Net.SASL.Mechanism = mechanism
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: hash} }
	return nil
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
	cfg := sarama.NewConfig()
	cfg.ClientID = "peers-probe"
	if err := saslSSL(cfg); err != nil {
		return 0, time.Now(), err
	}
	if tuned {
		// Dial, read and write timeouts 2 s (defaults 30 s each); the metadata retry
		// backoff (250 ms) is already below 2 s.
		cfg.Net.DialTimeout = 2 * time.Second
		cfg.Net.ReadTimeout = 2 * time.Second
		cfg.Net.WriteTimeout = 2 * time.Second
	}
	cl, err := sarama.NewClient(seeds, cfg)
	at := time.Now()
	if err != nil {
		return 0, at, err
	}
	n := len(cl.Brokers())
	go cl.Close()
	return n, at, nil
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
