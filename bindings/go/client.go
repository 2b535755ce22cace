package stagger

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Client is a long-lived stagger session: it bootstraps from its seeds, keeps the seeds apart
// from the brokers it discovers, refreshes by itself every refresh interval (the
// "refresh_interval" setting, 5 minutes by default), keeps the winner's connection for the
// next refresh, and joins concurrent refreshes into one. Safe for concurrent use.
type Client struct {
	seeds    []string
	interval time.Duration
	h        *host // owned by the run goroutine, except h.latest (under h.mu)
	requests chan request
	closing  chan struct{}
	stopped  chan struct{}
	once     sync.Once
}

// NewClient builds a Client and starts its first refresh in the background. The
// configuration is checked here: a refused one is a *ConfigError, and nothing was dialled.
func NewClient(seeds []string, opts ...Option) (*Client, error) {
	cfg, err := newConfig(seeds, opts)
	if err != nil {
		return nil, err
	}
	h, err := newHost(cfg, false)
	if err != nil {
		return nil, err
	}
	c := &Client{
		seeds: cfg.seeds, interval: cfg.refreshInterval(), h: h,
		requests: make(chan request), closing: make(chan struct{}), stopped: make(chan struct{}),
	}
	h.request(CauseBootstrap, "", make(chan outcome, 1))
	go c.run()
	return c, nil
}

func (c *Client) run() {
	defer close(c.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		c.h.step()
		r, ok := c.h.wait(timer, c.requests, c.closing)
		if !ok {
			break
		}
		for r.reply != nil {
			c.h.request(r.cause, r.broker, r.reply)
			select {
			case r = <-c.requests:
			default:
				r = request{}
			}
		}
	}
	c.h.shutdown(ErrClosed)
}

// Metadata returns the cluster's metadata: the cached answer while it is younger than the
// refresh interval, else a fresh one (joining a refresh already running). A caller whose ctx
// ends stops waiting; the refresh goes on for the others and for the cache.
func (c *Client) Metadata(ctx context.Context) (*ClusterMetadata, error) {
	c.h.mu.Lock()
	md, at := c.h.latest, c.h.latestAt
	c.h.mu.Unlock()
	if md != nil && time.Since(at) < c.interval {
		return md, nil
	}
	return c.Refresh(ctx)
}

// Refresh asks for fresh metadata now and waits for it (it joins a refresh already running).
func (c *Client) Refresh(ctx context.Context) (*ClusterMetadata, error) {
	return c.RefreshBecause(ctx, CauseRequested, "")
}

// RefreshBecause is Refresh saying why, and optionally which broker (host:port, as the
// metadata names it) was in trouble: the policy reads both. A broker that reset connections
// (CauseConnectionLost) means every client sees a failover at once, so the refresh is
// gentle; a request that timed out on one broker (CauseRequestTimedOut) is evidence of a hung
// broker, which is tried last.
func (c *Client) RefreshBecause(ctx context.Context, cause Cause, broker string) (*ClusterMetadata, error) {
	reply := make(chan outcome, 1)
	select {
	case c.requests <- request{cause: cause, broker: broker, reply: reply}:
	case <-c.closing:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case o := <-reply:
		return o.md, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.stopped:
		select {
		case o := <-reply:
			return o.md, o.err
		default:
			return nil, ErrClosed
		}
	}
}

// Close closes every connection, ends the session and returns once every goroutine of the
// Client has exited. Waiting callers get ErrClosed. Safe to call more than once.
func (c *Client) Close() error {
	c.once.Do(func() { close(c.closing) })
	<-c.stopped
	return nil
}

// String describes the Client without its credentials.
func (c *Client) String() string {
	return fmt.Sprintf("stagger.Client{seeds: %v, refresh interval: %v}", c.seeds, c.interval)
}

// GoString is String: %#v prints no credentials either.
func (c *Client) GoString() string { return c.String() }
