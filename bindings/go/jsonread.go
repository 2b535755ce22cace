package stagger

import (
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A reader for the two JSON documents a host reads at every refresh, the metadata and the
// report, in the plain form the session writes them: strings without escapes, numbers that
// fit their fields, each key once. It decodes those without encoding/json's reflection.
// Anything else (an escape, a null or a number its field cannot take, a key twice, a key that
// encoding/json would match to a field by its case-insensitive rule, invalid JSON) makes it
// stop with errSlowPath, and the caller decodes the document with encoding/json instead,
// which then decides. So wherever this reader answers, its answer is encoding/json's for the
// same bytes: jsonread_test.go checks both on the session's documents, on variants of them
// and, under go test -fuzz, on anything.

var errSlowPath = errors.New("stagger: JSON for encoding/json")

// maxDepth bounds the nesting skip follows (deeper documents go to encoding/json).
const maxDepth = 64

type jsonReader struct {
	b []byte
	i int
}

// ws skips JSON whitespace and returns the next byte (0 at the end).
func (r *jsonReader) ws() byte {
	for r.i < len(r.b) {
		switch c := r.b[r.i]; c {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return c
		}
	}
	return 0
}

func (r *jsonReader) byte(c byte) error {
	if r.ws() != c {
		return errSlowPath
	}
	r.i++
	return nil
}

// literal consumes word (null, true, false) if it comes next.
func (r *jsonReader) literal(word string) bool {
	if r.ws() == word[0] && len(r.b)-r.i >= len(word) && string(r.b[r.i:r.i+len(word)]) == word {
		r.i += len(word)
		return true
	}
	return false
}

// raw reads a string without escapes and returns its bytes.
func (r *jsonReader) raw() ([]byte, error) {
	if err := r.byte('"'); err != nil {
		return nil, err
	}
	start, ascii := r.i, true
	for ; r.i < len(r.b); r.i++ {
		switch c := r.b[r.i]; {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			if !ascii && !utf8.Valid(s) {
				return nil, errSlowPath
			}
			return s, nil
		case c == '\\' || c < 0x20:
			return nil, errSlowPath
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, errSlowPath
}

func (r *jsonReader) string() (string, error) {
	s, err := r.raw()
	return string(s), err
}

// optString reads a string or null (nil).
func (r *jsonReader) optString() (*string, error) {
	if r.literal("null") {
		return nil, nil
	}
	s, err := r.string()
	return &s, err
}

// number reads a number token, checked against JSON's grammar.
func (r *jsonReader) number() (tok []byte, integer bool, err error) {
	r.ws()
	start, b := r.i, r.b
	digits := func() int {
		n := 0
		for r.i < len(b) && b[r.i] >= '0' && b[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	if r.i < len(b) && b[r.i] == '-' {
		r.i++
	}
	first := r.i
	if n := digits(); n == 0 || (n > 1 && b[first] == '0') {
		return nil, false, errSlowPath
	}
	integer = true
	if r.i < len(b) && b[r.i] == '.' {
		r.i++
		if digits() == 0 {
			return nil, false, errSlowPath
		}
		integer = false
	}
	if r.i < len(b) && (b[r.i] == 'e' || b[r.i] == 'E') {
		r.i++
		if r.i < len(b) && (b[r.i] == '+' || b[r.i] == '-') {
			r.i++
		}
		if digits() == 0 {
			return nil, false, errSlowPath
		}
		integer = false
	}
	return b[start:r.i], integer, nil
}

// int reads an integer that fits in bits bits (encoding/json refuses anything else for an
// integer field).
func (r *jsonReader) int(bits int) (int64, error) {
	tok, integer, err := r.number()
	if err != nil || !integer {
		return 0, errSlowPath
	}
	n, err := strconv.ParseInt(string(tok), 10, bits)
	if err != nil {
		return 0, errSlowPath
	}
	return n, nil
}

func (r *jsonReader) int16() (int16, error) {
	n, err := r.int(16)
	return int16(n), err
}

func (r *jsonReader) int32() (int32, error) {
	n, err := r.int(32)
	return int32(n), err
}

// uint reads an unsigned integer that fits in bits bits.
func (r *jsonReader) uint(bits int) (uint64, error) {
	tok, integer, err := r.number()
	if err != nil || !integer {
		return 0, errSlowPath
	}
	n, err := strconv.ParseUint(string(tok), 10, bits)
	if err != nil {
		return 0, errSlowPath
	}
	return n, nil
}

func (r *jsonReader) float() (float64, error) {
	tok, _, err := r.number()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return 0, errSlowPath
	}
	return f, nil
}

// optFloat reads a number or null (nil).
func (r *jsonReader) optFloat() (*float64, error) {
	if r.literal("null") {
		return nil, nil
	}
	f, err := r.float()
	return &f, err
}

func (r *jsonReader) bool() (bool, error) {
	switch {
	case r.literal("true"):
		return true, nil
	case r.literal("false"):
		return false, nil
	}
	return false, errSlowPath
}

// next reads what follows an item: a comma (true: another item follows) or close (false,
// nil: the end); anything else is errSlowPath.
func (r *jsonReader) next(close byte) (bool, error) {
	if c := r.ws(); c == ',' || c == close {
		r.i++
		return c == ',', nil
	}
	return false, errSlowPath
}

// maybe consumes c if it comes next.
func (r *jsonReader) maybe(c byte) bool {
	if r.ws() == c {
		r.i++
		return true
	}
	return false
}

// array reads an array, each element by elem.
func (r *jsonReader) array(elem func() error) error {
	if err := r.byte('['); err != nil {
		return err
	}
	if r.maybe(']') {
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if more, err := r.next(']'); !more {
			return err
		}
	}
}

// int32s reads an array of int32 (empty, not nil, for [], as encoding/json gives it).
func (r *jsonReader) int32s() ([]int32, error) {
	out := []int32{}
	err := r.array(func() error {
		n, err := r.int32()
		out = append(out, n)
		return err
	})
	return out, err
}

// object reads an object whose keys are among known (field reads the value of known[i]);
// other keys are skipped, unless encoding/json would match them to a known field all the
// same, and a key twice stops the reader.
func (r *jsonReader) object(known []string, field func(i int) error) error {
	if err := r.byte('{'); err != nil {
		return err
	}
	if r.maybe('}') {
		return nil
	}
	var seen uint64
	for {
		key, err := r.raw()
		if err != nil {
			return err
		}
		if err := r.byte(':'); err != nil {
			return err
		}
		at := -1
		for i, k := range known {
			if string(key) == k {
				at = i
				break
			}
		}
		if at >= 0 {
			if seen&(1<<at) != 0 {
				return errSlowPath
			}
			seen |= 1 << at
			if err := field(at); err != nil {
				return err
			}
		} else {
			if !isASCII(key) {
				return errSlowPath
			}
			for _, k := range known {
				if strings.EqualFold(string(key), k) {
					return errSlowPath
				}
			}
			if err := r.skip(0); err != nil {
				return err
			}
		}
		if more, err := r.next('}'); !more {
			return err
		}
	}
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// skip reads any JSON value and drops it.
func (r *jsonReader) skip(depth int) error {
	if depth > maxDepth {
		return errSlowPath
	}
	switch r.ws() {
	case '{':
		r.i++
		if r.maybe('}') {
			return nil
		}
		for {
			// Keys may have escapes here: skipString, not raw.
			if err := r.skipString(); err != nil {
				return err
			}
			if err := r.byte(':'); err != nil {
				return err
			}
			if err := r.skip(depth + 1); err != nil {
				return err
			}
			if more, err := r.next('}'); !more {
				return err
			}
		}
	case '[':
		return r.array(func() error { return r.skip(depth + 1) })
	case '"':
		return r.skipString()
	case 't':
		if r.literal("true") {
			return nil
		}
	case 'f':
		if r.literal("false") {
			return nil
		}
	case 'n':
		if r.literal("null") {
			return nil
		}
	default:
		_, _, err := r.number()
		return err
	}
	return errSlowPath
}

// skipString reads a string, escapes and all, and drops it.
func (r *jsonReader) skipString() error {
	if err := r.byte('"'); err != nil {
		return err
	}
	for r.i < len(r.b) {
		c := r.b[r.i]
		r.i++
		switch {
		case c == '"':
			return nil
		case c < 0x20:
			return errSlowPath
		case c == '\\':
			if r.i >= len(r.b) {
				return errSlowPath
			}
			e := r.b[r.i]
			r.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if r.i+4 > len(r.b) {
					return errSlowPath
				}
				for _, h := range r.b[r.i : r.i+4] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return errSlowPath
					}
				}
				r.i += 4
			default:
				return errSlowPath
			}
		}
	}
	return errSlowPath
}

// end checks that nothing but whitespace follows the document.
func (r *jsonReader) end() error {
	if r.ws() != 0 || r.i != len(r.b) {
		return errSlowPath
	}
	return nil
}

// readMetadata is decodeMetadata's reader (errSlowPath: decode with encoding/json).
func readMetadata(b []byte) (*ClusterMetadata, error) {
	r := &jsonReader{b: b}
	m := &ClusterMetadata{Brokers: []Broker{}}
	var topics []Topic
	err := r.object([]string{"cluster_id", "controller_id", "error_code", "brokers", "topics"}, func(i int) error {
		switch i {
		case 0:
			id, err := r.optString()
			if id != nil {
				m.ClusterID = *id
			}
			return err
		case 1:
			var err error
			m.ControllerID, err = r.int32()
			return err
		case 2:
			var err error
			m.ErrorCode, err = r.int16()
			return err
		case 3:
			return r.array(func() error {
				var b Broker
				err := r.object([]string{"node_id", "host", "port", "rack"}, func(i int) error {
					var err error
					switch i {
					case 0:
						b.NodeID, err = r.int32()
					case 1:
						b.Host, err = r.string()
					case 2:
						b.Port, err = r.int32()
					case 3:
						var rack *string
						if rack, err = r.optString(); rack != nil {
							b.Rack = *rack
						}
					}
					return err
				})
				m.Brokers = append(m.Brokers, b)
				return err
			})
		default:
			topics = []Topic{}
			return r.array(func() error {
				t, err := r.topic()
				topics = append(topics, t)
				return err
			})
		}
	})
	if err != nil {
		return nil, err
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	m.Topics = topics
	return m, nil
}

func (r *jsonReader) topic() (Topic, error) {
	var t Topic
	err := r.object([]string{"name", "error_code", "is_internal", "partitions"}, func(i int) error {
		var err error
		switch i {
		case 0:
			t.Name, err = r.string()
		case 1:
			t.ErrorCode, err = r.int16()
		case 2:
			t.IsInternal, err = r.bool()
		case 3:
			t.Partitions = []Partition{}
			err = r.array(func() error {
				var p Partition
				err := r.object([]string{"id", "error_code", "leader", "replicas", "isr"}, func(i int) error {
					var err error
					switch i {
					case 0:
						p.ID, err = r.int32()
					case 1:
						p.ErrorCode, err = r.int16()
					case 2:
						p.Leader, err = r.int32()
					case 3:
						p.Replicas, err = r.int32s()
					case 4:
						p.ISR, err = r.int32s()
					}
					return err
				})
				t.Partitions = append(t.Partitions, p)
				return err
			})
		}
		return err
	})
	return t, err
}

// refreshReport is what a host takes from the report when a refresh ends: how long the last
// refresh took and its attempts.
type refreshReport struct {
	epoch    uint32
	last     bool // the report has a last refresh
	elapsed  time.Duration
	attempts []Attempt
}

// readReport is decodeReport's reader (errSlowPath: decode with encoding/json). It checks
// the fields of the report type that decodeReport's encoding/json path reads, so that the
// two fail on the same documents.
func readReport(b []byte) (refreshReport, error) {
	r := &jsonReader{b: b}
	var out refreshReport
	err := r.object([]string{"stats", "last_refresh", "open_connections"}, func(i int) error {
		// Each may be null (and comes once: out is still empty when last_refresh is null).
		if r.literal("null") {
			return nil
		}
		switch i {
		case 0:
			return r.object([]string{"connections_opened"}, func(int) error {
				_, err := r.uint(64)
				return err
			})
		case 1:
			out.last = true
			var started uint64
			var ended *uint64
			err := r.object([]string{"epoch", "started_ns", "ended_ns", "attempts"}, func(i int) error {
				var err error
				switch i {
				case 0:
					var n uint64
					n, err = r.uint(32)
					out.epoch = uint32(n)
				case 1:
					started, err = r.uint(64)
				case 2:
					ended = nil
					if !r.literal("null") {
						var n uint64
						n, err = r.uint(64)
						ended = &n
					}
				case 3:
					err = r.array(func() error {
						a, err := r.attempt()
						out.attempts = append(out.attempts, a)
						return err
					})
				}
				return err
			})
			if ended != nil && *ended > started {
				out.elapsed = time.Duration(*ended - started)
			}
			return err
		default:
			return r.array(func() error {
				_, err := r.uint(64)
				return err
			})
		}
	})
	if err != nil {
		return refreshReport{}, err
	}
	return out, r.end()
}

func (r *jsonReader) attempt() (Attempt, error) {
	var raw rawAttempt
	var reason string
	err := r.object([]string{"broker", "started_ms", "connected_ms", "answered_ms", "ended_ms", "outcome", "error", "error_kind", "reason"}, func(i int) error {
		var err error
		switch i {
		case 0:
			raw.Broker, err = r.string()
		case 1:
			raw.StartedMs, err = r.float()
		case 2:
			raw.ConnectedMs, err = r.optFloat()
		case 3:
			raw.AnsweredMs, err = r.optFloat()
		case 4:
			raw.EndedMs, err = r.optFloat()
		case 5:
			raw.Outcome, err = r.string()
		case 6:
			raw.Error, err = r.string()
		case 7:
			if r.literal("null") {
				return nil
			}
			raw.ErrorKind = &rawErrorKind{}
			err = r.object([]string{"kind", "code"}, func(i int) error {
				var err error
				if i == 0 {
					raw.ErrorKind.Kind, err = r.string()
				} else if !r.literal("null") {
					var code int16
					code, err = r.int16()
					raw.ErrorKind.Code = &code
				}
				return err
			})
		case 8:
			// word() of a string or null: the string, or "".
			if !r.literal("null") {
				reason, err = r.string()
			}
		}
		return err
	})
	a := raw.attempt()
	a.Reason = reason
	return a, err
}
