// Package front is the recipe of stagger's Go binding (bindings/go/examples/bootstrap) as the
// franz-go and sarama probes run it: ask stagger which seed answers (the brokers only), and
// return md.Seeds(), the ordered seed list for the peer's constructor. The binding decides
// what the list holds (the broker that answered first, then the listed brokers and the seeds
// it did not see failing or silent); this package adds nothing to it.
package front

import (
	"context"
	"time"

	"stagger.dev/go/stagger"
	"stagger.dev/lab/peers/secure"
)

// Last is what the last Seeds call took and which seed answered it (for the raw results).
var Last struct {
	Ms     float64
	Winner string
}

// Seeds runs stagger.Metadata at its defaults over seeds and returns md.Seeds(): the seed
// that answered, then every other broker the answer lists and every seed, less each address
// whose attempt in that refresh failed or was cancelled before the broker answered (a hung
// broker stays listed in Kafka's metadata, and franz-go and sarama start at a random seed).
// Over SASL_SSL it connects with the benchmark's settings (Options).
func Seeds(seeds []string) ([]string, error) {
	options, err := Options()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	md, err := stagger.Metadata(context.Background(), seeds, append(options, stagger.WithTopics())...)
	Last.Ms = float64(time.Since(t0).Nanoseconds()) / 1e6
	if err != nil {
		return nil, err
	}
	Last.Winner = md.AnsweredBy
	return md.Seeds(), nil
}

// Options are the binding's options for the benchmark's listener: none over PLAINTEXT (its
// defaults), TLS verified against the benchmark's CA and SCRAM over SASL_SSL.
func Options() ([]stagger.Option, error) {
	sec, err := secure.FromEnv()
	if sec == nil || err != nil {
		return nil, err
	}
	return []stagger.Option{stagger.WithTLS(sec.TLS), stagger.WithSASL(stagger.Mechanism(sec.Mechanism), sec.User, sec.Password)}, nil
}
