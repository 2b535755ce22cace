package stagger

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Option configures a refresh (Metadata) or a Client.
type Option func(*config) error

// Presets of the policy (docs: the core's src/config/). Settings given with WithSetting are
// applied after the preset.
const (
	// PresetAdaptive is the default: stagger by what the brokers show (outage or overload).
	PresetAdaptive = "adaptive"
	// PresetSequential asks one broker at a time, like most Kafka clients.
	PresetSequential = "sequential"
	// PresetAllAtOnce asks every broker at once.
	PresetAllAtOnce = "all-at-once"
	// PresetStaggered starts another attempt every 500 ms.
	PresetStaggered = "staggered"
)

// Mechanism is a SASL mechanism with a username and a password.
type Mechanism string

const (
	// Plain is SASL/PLAIN (use it over TLS only).
	Plain Mechanism = "PLAIN"
	// ScramSHA256 is SCRAM-SHA-256 (RFC 7677); the nonce comes from crypto/rand.
	ScramSHA256 Mechanism = "SCRAM-SHA-256"
	// ScramSHA512 is SCRAM-SHA-512.
	ScramSHA512 Mechanism = "SCRAM-SHA-512"
)

// TokenFunc returns an OAUTHBEARER token. It is called for every new connection (tokens
// expire), on its own goroutine, with a context that ends when the refresh's session does.
type TokenFunc func(ctx context.Context) (string, error)

// Dialer opens TCP connections; *net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// config is what the options build. It holds credentials: it has a String method that
// prints none, and is never put in an error.
type config struct {
	seeds        []string
	preset       string
	settings     map[string]string
	clientID     string
	topics       []string
	topicsSet    bool
	maxFrameSize int
	resolveNames bool
	tls          *tls.Config
	mechanism    Mechanism
	username     string
	password     string
	token        TokenFunc
	seed         uint64
	seedSet      bool
	dialer       Dialer
	memoryPages  uint32
}

// String prints the configuration without credentials.
func (c *config) String() string {
	sasl := "none"
	switch {
	case c.token != nil:
		sasl = "OAUTHBEARER (token func)"
	case c.mechanism != "":
		sasl = fmt.Sprintf("%s user %q, password <redacted>", c.mechanism, c.username)
	}
	return fmt.Sprintf("seeds %v, preset %q, settings %v, tls %t, sasl %s", c.seeds, c.preset, c.settings, c.tls != nil, sasl)
}

// GoString is String: %#v must not print the password either.
func (c *config) GoString() string { return "stagger.config{" + c.String() + "}" }

// WithTLS speaks TLS to every broker with this configuration (crypto/tls). Each connection
// verifies the name the session gives for its broker (the host of its address) unless
// ServerName is set here. The configuration is cloned, never modified.
func WithTLS(c *tls.Config) Option {
	return func(cfg *config) error {
		if c == nil {
			c = &tls.Config{}
		}
		cfg.tls = c.Clone()
		return nil
	}
}

// WithSASL authenticates every connection with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
// The password goes to the session inside the wasm module and to the broker, nowhere else.
func WithSASL(mechanism Mechanism, username, password string) Option {
	return func(cfg *config) error {
		switch Mechanism(strings.ToUpper(string(mechanism))) {
		case Plain, ScramSHA256, ScramSHA512:
		default:
			return &ConfigError{Field: "sasl.mechanism", Message: fmt.Sprintf("%q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (OAUTHBEARER: WithOAuthBearer)", string(mechanism))}
		}
		cfg.mechanism, cfg.username, cfg.password, cfg.token = Mechanism(strings.ToUpper(string(mechanism))), username, password, nil
		return nil
	}
}

// WithOAuthBearer authenticates every connection with SASL/OAUTHBEARER; token is called for
// each new connection and its answer goes to the session as a TOKEN event. An error from it
// fails that attempt as an authentication error (fatal for the refresh).
func WithOAuthBearer(token TokenFunc) Option {
	return func(cfg *config) error {
		if token == nil {
			return &ConfigError{Field: "sasl", Message: "WithOAuthBearer needs a token func"}
		}
		cfg.mechanism, cfg.username, cfg.password, cfg.token = "", "", "", token
		return nil
	}
}

// WithPreset starts from a preset policy: PresetAdaptive (the default), PresetSequential,
// PresetAllAtOnce or PresetStaggered.
func WithPreset(name string) Option {
	return func(cfg *config) error {
		cfg.preset = name
		return nil
	}
}

// WithSetting sets one policy knob by its schema path, with the text the core reads
// (`stagger knobs` lists them): WithSetting("fanout.stagger.adaptive.silent_tls", "20ms"),
// WithSetting("retry.retries", "0"), WithSetting("refresh_interval", "60s"). The session
// validates every setting when it is built: a bad one is a *ConfigError naming it.
func WithSetting(path, value string) Option {
	return func(cfg *config) error {
		if cfg.settings == nil {
			cfg.settings = map[string]string{}
		}
		cfg.settings[path] = value
		return nil
	}
}

// WithClientID sets the client.id of every request ("stagger" by default).
func WithClientID(id string) Option {
	return func(cfg *config) error {
		cfg.clientID = id
		return nil
	}
}

// WithTopics describes only these topics; with none, the answer lists the brokers only.
// Without this option every topic is described.
func WithTopics(topics ...string) Option {
	return func(cfg *config) error {
		cfg.topics, cfg.topicsSet = append([]string{}, topics...), true
		return nil
	}
}

// WithMaxFrameSize sets the largest response accepted, in bytes (32 MiB by default), which
// is also what decoding one may reserve inside the module (docs/abi.md).
func WithMaxFrameSize(n int) Option {
	return func(cfg *config) error {
		cfg.maxFrameSize = n
		return nil
	}
}

// WithResolveNames looks seed names up here and makes each of their addresses a candidate
// of its own (Happy Eyeballs); otherwise the dialer resolves each name when it connects.
func WithResolveNames() Option {
	return func(cfg *config) error {
		cfg.resolveNames = true
		return nil
	}
}

// WithSeed seeds the session's PRNG (jitter, the shuffled order of the seeds); the same seed
// and the same network give the same decisions. By default it comes from crypto/rand.
func WithSeed(seed uint64) Option {
	return func(cfg *config) error {
		cfg.seed, cfg.seedSet = seed, true
		return nil
	}
}

// WithDialer opens the TCP connections through d (a *net.Dialer with a local address, a
// proxy dialer, ...). The session decides when to give up on a connection: d needs no
// timeout of its own.
func WithDialer(d Dialer) Option {
	return func(cfg *config) error {
		if d == nil {
			return errors.New("stagger: WithDialer(nil)")
		}
		cfg.dialer = d
		return nil
	}
}

// WithMemoryLimit caps the wasm module's memory (rounded down to 64 KiB pages); by default
// it may grow to 4 GiB. A refresh that needs more traps: see TrapError.
func WithMemoryLimit(bytes int) Option {
	return func(cfg *config) error {
		pages := bytes / 65536
		if pages < 1 || pages > 65536 {
			return &ConfigError{Field: "memory limit", Message: "must be between 64 KiB and 4 GiB"}
		}
		cfg.memoryPages = uint32(pages)
		return nil
	}
}

func newConfig(seeds []string, opts []Option) (*config, error) {
	cfg := &config{seeds: append([]string{}, seeds...), dialer: &net.Dialer{KeepAlive: 30 * time.Second}}
	for _, opt := range opts {
		if err := opt(cfg); err != nil {
			return nil, err
		}
	}
	if !cfg.seedSet {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("stagger: no random seed: %w", err)
		}
		cfg.seed = binary.LittleEndian.Uint64(b[:])
	}
	return cfg, nil
}

// sessionJSON is the config JSON of docs/abi.md. It carries the password: it is written to
// the module's memory and dropped.
func (c *config) sessionJSON(oneShot bool) ([]byte, error) {
	type sasl struct {
		Mechanism string `json:"mechanism"`
		Username  string `json:"username,omitempty"`
		Password  string `json:"password,omitempty"`
	}
	doc := struct {
		Seeds        []string          `json:"seeds"`
		ResolveNames bool              `json:"resolve_names,omitempty"`
		Preset       string            `json:"preset,omitempty"`
		Settings     map[string]string `json:"settings,omitempty"`
		ClientID     string            `json:"client_id,omitempty"`
		Topics       *[]string         `json:"topics,omitempty"`
		MaxFrameSize int               `json:"max_frame_size,omitempty"`
		TLS          bool              `json:"tls"`
		SASL         *sasl             `json:"sasl,omitempty"`
		FreshTokens  bool              `json:"fresh_tokens,omitempty"`
		OneShot      bool              `json:"one_shot"`
	}{
		Seeds: c.seeds, ResolveNames: c.resolveNames, Preset: c.preset, Settings: c.settings,
		ClientID: c.clientID, MaxFrameSize: c.maxFrameSize, TLS: c.tls != nil, OneShot: oneShot,
	}
	if doc.Seeds == nil {
		doc.Seeds = []string{}
	}
	if c.topicsSet {
		doc.Topics = &c.topics
	}
	switch {
	case c.token != nil:
		doc.SASL, doc.FreshTokens = &sasl{Mechanism: "OAUTHBEARER"}, true
	case c.mechanism != "":
		doc.SASL = &sasl{Mechanism: string(c.mechanism), Username: c.username, Password: c.password}
	}
	return json.Marshal(doc)
}

// refreshInterval is how long a Client's metadata stays fresh: the refresh_interval setting
// (the session refreshes by itself that often), 5 minutes by default.
func (c *config) refreshInterval() time.Duration {
	text, ok := c.settings["refresh_interval"]
	if !ok {
		return 5 * time.Minute
	}
	if text == "0" {
		return 0
	}
	d, err := time.ParseDuration(strings.ReplaceAll(text, "min", "m"))
	if err != nil {
		return 5 * time.Minute // the session refuses what it cannot read
	}
	return d
}
