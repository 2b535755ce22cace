// Package stagger refreshes Kafka cluster metadata the way stagger does — start one attempt,
// and if no answer comes within a stagger delay start another, first good answer wins, the
// losers are cancelled — so a hung, killed or blackholed broker in front costs milliseconds,
// not a timeout per broker.
//
// It runs stagger's core, compiled to a zero-import WebAssembly module that is embedded in
// the package, with wazero: pure Go, no cgo. The core decides everything (which broker, when,
// the whole Kafka conversation: ApiVersions, SASL, Metadata); this package only moves bytes,
// time and TLS for it.
//
// One refresh:
//
//	md, err := stagger.Metadata(ctx, []string{"b1:9092", "b2:9092", "b3:9092"})
//	var rerr *stagger.RefreshError
//	if errors.As(err, &rerr) { /* rerr.Last, rerr.Brokers: every broker's error */ }
//
// A long-lived Client keeps a session: its metadata is cached for the refresh interval, it
// refreshes by itself, keeps the winner's connection for the next refresh, and joins
// concurrent refreshes into one.
//
// # Goroutines
//
// One goroutine owns a session and its wasm instance (an instance is not safe for
// concurrent use): the caller's, for Metadata; one started by NewClient, for a Client. Every
// connection has a goroutine that dials, secures and reads, feeding the owner over a
// channel, and a writer. Cancelling Metadata's context closes every connection; Client.Close
// closes everything and returns once every goroutine has exited. A TokenFunc that ignores
// its context delays that until it returns.
//
// # Traps
//
// A panic in the core (a bug) or memory beyond WithMemoryLimit traps the wasm instance. The
// instance is dropped with every connection of it, the callers get a *TrapError, and a Client
// builds a new instance and session at its next refresh (not at once: a refresh that traps
// every time would otherwise loop).
//
// # Secrets
//
// Passwords and tokens go to the session inside the module and to the broker, nowhere else:
// no error, String or %#v output of this package prints one.
package stagger

import (
	"context"
	"errors"
	"time"
)

// ErrClosed is returned by a Client's methods after Close.
var ErrClosed = errors.New("stagger: client closed")

// Metadata refreshes the metadata of the cluster behind seeds once: a one-shot session that
// tries the seeds in an order shuffled by its seed (as librdkafka, franz-go, Sarama and the
// Java client do; WithSetting("shuffle_seeds", "false") keeps the order given), staggered by
// the policy, and returns the first good answer, or a *RefreshError with every broker's
// error. Cancelling ctx closes every connection and returns ctx.Err(). Configuration errors
// are *ConfigError.
func Metadata(ctx context.Context, seeds []string, opts ...Option) (*ClusterMetadata, error) {
	cfg, err := newConfig(seeds, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, err := newHost(cfg, true)
	if err != nil {
		return nil, err
	}
	reply := make(chan outcome, 1)
	h.request(CauseBootstrap, "", reply)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var result outcome
	for {
		h.step()
		select {
		case result = <-reply:
		default:
			if _, ok := h.wait(timer, nil, ctx.Done()); ok {
				continue
			}
			result = outcome{err: ctx.Err()}
		}
		break
	}
	h.shutdown(ErrClosed)
	return result.md, result.err
}
