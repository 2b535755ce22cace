package stagger

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ClusterMetadata is a cluster's metadata as one broker answered it, with how the refresh went.
// A Client hands the same value to every caller: treat it as read-only.
type ClusterMetadata struct {
	// ClusterID is the cluster's id ("" when the broker sent none).
	ClusterID string `json:"cluster_id"`
	// ControllerID is the node id of the controller (-1 when unknown).
	ControllerID int32 `json:"controller_id"`
	// ErrorCode is the answer's top-level Kafka error code (0: none).
	ErrorCode int16 `json:"error_code"`
	// Brokers are the brokers the cluster lists (alive and registered), by node id.
	Brokers []Broker `json:"brokers"`
	// Topics are the topics described (all, or those of WithTopics).
	Topics []Topic `json:"topics"`

	// AnsweredBy is the host:port of the broker whose answer this is, as the session named
	// it (a seed as given, or a discovered broker's advertised address).
	AnsweredBy string `json:"-"`
	// GivenSeeds are the seeds the session was built with (Metadata's or NewClient's), as
	// given.
	GivenSeeds []string `json:"-"`
	// Attempts are the refresh's attempts, one per connection it started, in start order:
	// which brokers answered, failed (and why) or were cancelled when another one won.
	Attempts []Attempt `json:"-"`
	// Elapsed is how long the refresh took, from the request to the answer.
	Elapsed time.Duration `json:"-"`
}

// Broker is one broker of the cluster.
type Broker struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	// Rack is "" when the broker has none.
	Rack string `json:"rack"`
}

// Address is the broker's host:port.
func (b Broker) Address() string { return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) }

// Topic is one topic and its partitions.
type Topic struct {
	Name       string      `json:"name"`
	ErrorCode  int16       `json:"error_code"`
	IsInternal bool        `json:"is_internal"`
	Partitions []Partition `json:"partitions"`
}

// Partition is one partition: its leader and replicas by node id.
type Partition struct {
	ID        int32   `json:"id"`
	ErrorCode int16   `json:"error_code"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
}

// Attempt is one attempt of a refresh (the core's report row, as the CLI's --json writes it).
type Attempt struct {
	// Broker is the host:port it went to.
	Broker string
	// Outcome is "won", "failed", "cancelled", "resolved" or "in_flight".
	Outcome string
	// Error says why it failed ("" unless Outcome is "failed"); ErrorKind is its kind
	// ("refused", "connect_timeout", ... as in AttemptError.Kind), ErrorCode the Kafka
	// error code of a "broker_error".
	Error, ErrorKind string
	ErrorCode        int16
	// Reason says why the policy cancelled it ("" unless Outcome is "cancelled").
	Reason string
	// Started is when it started, since the refresh began; Connected and Answered (the
	// broker's first answer: TLS or its first Kafka frame) are -1 when it did not get there.
	Started, Connected, Answered, Ended time.Duration
}

// Seeds returns the addresses to bootstrap another Kafka client with (sarama.NewClient,
// kgo.SeedBrokers, a bootstrap.servers list), best first and without duplicates:
//
//   - AnsweredBy, the broker that answered first;
//   - then every other broker the cluster lists (its advertised address, in Brokers' order)
//     and every seed of GivenSeeds (as given), leaving out each address stagger saw failing
//     in this refresh: an address with an attempt (Attempts, matched on Attempt.Broker
//     exactly) that ended "failed", or "cancelled" before the broker answered anything
//     (Answered < 0) though it started no later than the winning attempt: it had at least
//     the winner's whole time and stayed silent (hung or blackholed).
//
// A broker whose attempt was cancelled after it answered (it was only slower than the one
// that answered first) stays, and so does every broker and seed stagger did not try. So does
// a broker whose attempt started after the winning one: it had less time than the winner
// took, so its silence says nothing of it.
//
// Why leave them out rather than put them last: Kafka's metadata still lists a hung broker
// (a stopped process stays registered until its session times out), and franz-go, sarama and
// aiokafka start at a random seed of the list they are given, so a hung broker anywhere in it
// would still cost them a whole timeout now and then. The list is what stagger saw during
// this one refresh: a broker it left out may be well again, and one it did not try may not be.
func (m *ClusterMetadata) Seeds() []string {
	won := time.Duration(-1)
	for _, a := range m.Attempts {
		if a.Outcome == "won" {
			won = a.Started
		}
	}
	failing := map[string]bool{}
	for _, a := range m.Attempts {
		silent := a.Outcome == "cancelled" && a.Answered < 0 && (won < 0 || a.Started <= won)
		if a.Outcome == "failed" || silent {
			failing[a.Broker] = true
		}
	}
	seen := map[string]bool{}
	var out []string
	add := func(a string) {
		if a != "" && !seen[a] && !failing[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if m.AnsweredBy != "" {
		// It answered: first, whatever an earlier attempt to it in the refresh did.
		seen[m.AnsweredBy] = true
		out = append(out, m.AnsweredBy)
	}
	for _, b := range m.Brokers {
		add(b.Address())
	}
	for _, s := range m.GivenSeeds {
		add(s)
	}
	return out
}

// Broker returns the broker with this node id.
func (m *ClusterMetadata) Broker(nodeID int32) (Broker, bool) {
	for _, b := range m.Brokers {
		if b.NodeID == nodeID {
			return b, true
		}
	}
	return Broker{}, false
}

// Topic returns the topic of this name.
func (m *ClusterMetadata) Topic(name string) (Topic, bool) {
	for _, t := range m.Topics {
		if t.Name == name {
			return t, true
		}
	}
	return Topic{}, false
}

// decodeMetadata decodes the session's metadata JSON: with the fast reader of jsonread.go,
// or, for a document beyond it, with encoding/json.
func decodeMetadata(b []byte) (*ClusterMetadata, error) {
	if m, err := readMetadata(b); err == nil {
		return m, nil
	}
	return decodeMetadataJSON(b)
}

// decodeMetadataJSON is decodeMetadata through encoding/json.
func decodeMetadataJSON(b []byte) (*ClusterMetadata, error) {
	var raw struct {
		ClusterID    *string `json:"cluster_id"`
		ControllerID int32   `json:"controller_id"`
		ErrorCode    int16   `json:"error_code"`
		Brokers      []struct {
			NodeID int32   `json:"node_id"`
			Host   string  `json:"host"`
			Port   int32   `json:"port"`
			Rack   *string `json:"rack"`
		} `json:"brokers"`
		Topics []Topic `json:"topics"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("stagger: the session's metadata JSON: %w", err)
	}
	m := &ClusterMetadata{ControllerID: raw.ControllerID, ErrorCode: raw.ErrorCode, Topics: raw.Topics}
	if raw.ClusterID != nil {
		m.ClusterID = *raw.ClusterID
	}
	m.Brokers = make([]Broker, len(raw.Brokers))
	for i, b := range raw.Brokers {
		m.Brokers[i] = Broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			m.Brokers[i].Rack = *b.Rack
		}
	}
	return m, nil
}

// decodeReport reads how the last refresh went from the session's report JSON (false when
// the report does not decode): with the fast reader of jsonread.go, or, for a document beyond
// it, with encoding/json.
func decodeReport(b []byte) (refreshReport, bool) {
	if r, err := readReport(b); err == nil {
		return r, true
	}
	return decodeReportJSON(b)
}

// decodeReportJSON is decodeReport through encoding/json.
func decodeReportJSON(b []byte) (refreshReport, bool) {
	var r report
	if json.Unmarshal(b, &r) != nil {
		return refreshReport{}, false
	}
	if r.LastRefresh == nil {
		return refreshReport{}, true
	}
	out := refreshReport{epoch: r.LastRefresh.Epoch, last: true}
	if r.LastRefresh.EndedNs != nil && *r.LastRefresh.EndedNs > r.LastRefresh.StartedNs {
		out.elapsed = time.Duration(*r.LastRefresh.EndedNs - r.LastRefresh.StartedNs)
	}
	for _, raw := range r.LastRefresh.Attempts {
		out.attempts = append(out.attempts, raw.attempt())
	}
	return out, true
}

// report is the part of stagger_report this host reads.
type report struct {
	Stats struct {
		ConnectionsOpened uint64 `json:"connections_opened"`
	} `json:"stats"`
	LastRefresh *struct {
		Epoch     uint32       `json:"epoch"`
		StartedNs uint64       `json:"started_ns"`
		EndedNs   *uint64      `json:"ended_ns"`
		Attempts  []rawAttempt `json:"attempts"`
	} `json:"last_refresh"`
	OpenConnections []uint64 `json:"open_connections"`
}

type rawAttempt struct {
	Broker      string          `json:"broker"`
	StartedMs   float64         `json:"started_ms"`
	ConnectedMs *float64        `json:"connected_ms"`
	AnsweredMs  *float64        `json:"answered_ms"`
	EndedMs     *float64        `json:"ended_ms"`
	Outcome     string          `json:"outcome"`
	Error       string          `json:"error"`
	ErrorKind   *rawErrorKind   `json:"error_kind"`
	Reason      json.RawMessage `json:"reason"`
}

type rawErrorKind struct {
	Kind string `json:"kind"`
	Code *int16 `json:"code"`
}

func ms(v *float64) time.Duration {
	if v == nil {
		return -1
	}
	return time.Duration(*v * float64(time.Millisecond))
}

// word reads a JSON string, or any other JSON as its text.
func word(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func (r rawAttempt) attempt() Attempt {
	a := Attempt{
		Broker: r.Broker, Outcome: r.Outcome, Error: r.Error, Reason: word(r.Reason),
		Started: ms(&r.StartedMs), Connected: ms(r.ConnectedMs), Answered: ms(r.AnsweredMs), Ended: ms(r.EndedMs),
	}
	if r.ErrorKind != nil {
		a.ErrorKind = r.ErrorKind.Kind
		if r.ErrorKind.Code != nil {
			a.ErrorCode = *r.ErrorKind.Code
		}
	}
	return a
}

// RefreshError is a refresh that gave up: every broker failed on every pass, the deadline
// passed, or a broker refused the credentials (fatal: no other broker would differ). It
// carries the last error and every broker's.
type RefreshError struct {
	// Message is the core's account, the last error and one line per broker.
	Message string
	// Reason is "all_failed", "deadline_exceeded" or "fatal".
	Reason string
	// Passes is how many passes over the brokers ran (for "all_failed").
	Passes int
	// Last is the last attempt's error, with its broker's address (nil if none ran).
	Last *AttemptError
	// Brokers is every broker tried, in attempt order.
	Brokers []BrokerError
}

// AttemptError is why one attempt failed.
type AttemptError struct {
	// Address is the broker's host:port (set on RefreshError.Last).
	Address string
	// Kind is "dns", "refused", "connect_timeout", "response_timeout", "closed", "protocol",
	// "frame_too_large", "broker_error" (Code is the Kafka error code), "no_brokers", "tls",
	// "authentication", "authorization" or "io".
	Kind string
	// Code is the Kafka error code when Kind is "broker_error".
	Code int16
	// Detail is what the host or the broker said.
	Detail string
	// Message is the whole in words.
	Message string
}

func (e *AttemptError) Error() string {
	if e.Address != "" {
		return e.Address + ": " + e.Message
	}
	return e.Message
}

// BrokerError is one broker's part in a failed refresh.
type BrokerError struct {
	// Address is its host:port.
	Address string
	// Attempts is how many attempts went to it.
	Attempts int
	// Err is its latest attempt's error (nil if it had none: it was cancelled).
	Err *AttemptError
	// Cancelled says why the policy closed its latest attempt ("lost", "timed_out",
	// "deadline", "fatal", "superseded", "rejected", "overtaken", "outrun"), or "".
	Cancelled string
	// Story is the broker's line in words.
	Story string
}

func (e *RefreshError) Error() string { return "stagger: " + e.Message }

// Unwrap returns the last attempt's error, so errors.As finds an *AttemptError too.
func (e *RefreshError) Unwrap() error {
	if e.Last == nil {
		return nil
	}
	return e.Last
}

// Fatal says the refresh gave up because a broker refused the credentials or the access:
// asking again with the same configuration would fail the same way.
func (e *RefreshError) Fatal() bool { return e.Reason == "fatal" }

type rawAttemptError struct {
	Address *string `json:"address"`
	Kind    string  `json:"kind"`
	Code    *int16  `json:"code"`
	Detail  string  `json:"detail"`
	Message string  `json:"message"`
}

func (r *rawAttemptError) err() *AttemptError {
	if r == nil {
		return nil
	}
	e := &AttemptError{Kind: r.Kind, Detail: r.Detail, Message: r.Message}
	if r.Address != nil {
		e.Address = *r.Address
	}
	if r.Code != nil {
		e.Code = *r.Code
	}
	return e
}

func decodeRefreshError(text string) *RefreshError {
	var raw struct {
		Message   string           `json:"message"`
		Reason    string           `json:"reason"`
		Passes    *int             `json:"passes"`
		LastError *rawAttemptError `json:"last_error"`
		Brokers   []struct {
			Address   string           `json:"address"`
			Attempts  int              `json:"attempts"`
			Error     *rawAttemptError `json:"error"`
			Cancelled *string          `json:"cancelled"`
			Story     string           `json:"story"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return &RefreshError{Message: "metadata refresh failed (its error JSON does not decode: " + err.Error() + ")", Reason: "unknown"}
	}
	e := &RefreshError{Message: strings.TrimSpace(raw.Message), Reason: raw.Reason, Last: raw.LastError.err()}
	if raw.Passes != nil {
		e.Passes = *raw.Passes
	}
	for _, b := range raw.Brokers {
		be := BrokerError{Address: b.Address, Attempts: b.Attempts, Err: b.Error.err(), Story: b.Story}
		if b.Cancelled != nil {
			be.Cancelled = *b.Cancelled
		}
		if be.Err != nil && be.Err.Address == "" {
			be.Err.Address = b.Address
		}
		e.Brokers = append(e.Brokers, be)
	}
	return e
}
