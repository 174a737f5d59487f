// Package audit owns the proxy's audit trail: the events (who did what to
// which resource, with which outcome), their JSON encoding, the bounded
// queue they wait in, the sinks that write them (a file of JSON lines,
// standard output, a Kafka topic) and the per-connection summaries of the
// data path.
//
// The proxy sees only Recorder. The connection's reader that records an
// event copies it into the queue, charged at an upper bound of its
// encoded size; the queue encodes the events waiting for its sinks
// together, just before they are written, and charges each its encoded
// size from then on. The queue holds them within a bound of its own,
// inside the process's memory budget, and a full queue either stops the
// recording connection (block, the default) or drops the event and counts
// it (drop). Nothing is lost silently: a clean Close writes every queued
// event.
package audit

import (
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kind is what an event records; its CloudEvents type is "io.inorder.audit."
// followed by it.
type Kind uint8

const (
	// KindRequest is one request: denied, administrative, or on the data
	// path with per-request auditing.
	KindRequest Kind = iota
	// KindAuthentication is one authentication, successful or not.
	KindAuthentication
	// KindSummary is the data path of one connection over one interval.
	KindSummary
)

var kindNames = [...]string{KindRequest: "request", KindAuthentication: "authentication", KindSummary: "summary"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "request"
}

// Decision is what the proxy or the broker decided about a request.
type Decision uint8

const (
	// Allow: the request was let through (its error code may still be an
	// error the broker returned).
	Allow Decision = iota
	// Deny: the request was refused for its principal (an authorization
	// or authentication failure).
	Deny
)

func (d Decision) String() string {
	if d == Deny {
		return "deny"
	}
	return "allow"
}

// NoAPIKey is the APIKey of an event that belongs to no request (an
// authentication by a client certificate alone): api_key is written empty.
const NoAPIKey int16 = -1

// Resource is one resource a request named, with what was done to it.
type Resource struct {
	// Type is Kafka's resource type: Topic, Group, Cluster,
	// TransactionalId, DelegationToken, User. Empty for none.
	Type string
	// Name is the resource's name; "kafka-cluster" for the Cluster, as
	// Kafka names it.
	Name string
	// Operation is Kafka's ACL operation: Read, Write, Create, Delete,
	// Alter, Describe, DescribeConfigs, AlterConfigs, IdempotentWrite, ...
	Operation string
	// Decision for this resource.
	Decision Decision
	// ErrorCode is what the client got for this resource; 0 for none.
	ErrorCode int16
	// APIKey is the request's key in a summary, whose resources may come
	// from several APIs; ignored in any other event.
	APIKey int16
	// Requests is the number of requests a summary counts for this
	// resource; ignored in any other event.
	Requests int64
	// Partitions are the partitions written, read or committed, with
	// their offsets. Nil for a resource without partitions.
	Partitions []Partition
}

// Partition is what happened to one partition.
type Partition struct {
	Partition int32
	// ErrorCode is the partition's error in the response; 0 for none.
	ErrorCode int16
	// FirstOffset and LastOffset are the offsets of the first and last
	// record written (the broker's base offset and base + count - 1) or
	// read. NoOffset when unknown (acks=0, an error).
	FirstOffset, LastOffset int64
	// Committed is the offset committed (OffsetCommit, TxnOffsetCommit);
	// NoOffset for anything else.
	Committed int64
	// FetchOffset is the offset a Fetch asked to read from; NoOffset for
	// anything else, and in a summary.
	FetchOffset int64
	// Records and Bytes are the records and record bytes written or read;
	// zero is not written.
	Records, Bytes int64
}

// NoOffset marks an offset that is not known or does not apply.
const NoOffset int64 = -1

// Event is one audit event. The fixed fields (time, principal,
// client_address, api_key, resource_type, resource_name, operation,
// decision, error_code) are always written; the others only when set.
//
// A request naming several resources is one event: Resources lists them
// all, and the fixed resource_type, resource_name and operation are those
// of the first. decision is deny if any resource was denied (or Decision
// says so), and error_code is ErrorCode if not zero, else the first
// resource's error that is not zero. One event per request keeps the cost
// of a Produce to many topics to one encoding and one line.
type Event struct {
	Kind Kind
	// Time is when the request was answered (the authentication ended, the
	// summary's interval ended). Zero means the time of Encode.
	Time time.Time
	// Listener is the listener the connection came in on: bootstrap,
	// node, controller, sni; or an operator's name for it.
	Listener      string
	Principal     string // Kafka's form, User:name; User:ANONYMOUS when none
	ClientAddress string // IP:port
	ClientID      string
	// Connection identifies the client connection within the proxy's
	// instance, so that a summary and its requests can be joined; zero is
	// not written.
	Connection uint64
	APIKey     int16 // NoAPIKey for none
	APIVersion int16
	Decision   Decision
	ErrorCode  int16
	Resources  []Resource

	// Authentication only.
	Mechanism  string // PLAIN, SCRAM-SHA-256, ..., or TLS for a client certificate
	TLSSubject string // the client certificate's subject, as Kafka prints it
	Reason     string // why it failed; empty on success
	// ClaimedPrincipal is, for a failed authentication, whom the client
	// named as itself, unverified; Principal stays who the connection
	// had proven to be.
	ClaimedPrincipal string

	// Summary only: the interval's start (Time is its end).
	Since time.Time
	// PartitionsOmitted and ResourcesOmitted count what the event leaves
	// out of Resources: the partitions a summary did not track, those an
	// answer or a streamed request named past what one event holds, and
	// what an event too large for the trail had to shed (see
	// Trail.MaxEventBytes). Zero is not written.
	PartitionsOmitted, ResourcesOmitted int64
}

// first returns the fixed resource fields, from the first resource.
func (e *Event) first() (typ, name, op string) {
	if len(e.Resources) == 0 {
		return "", "", ""
	}
	r := &e.Resources[0]
	return r.Type, r.Name, r.Operation
}

// decision returns the event's overall decision: deny if it or any
// resource was denied.
func (e *Event) decision() Decision {
	if e.Decision == Deny {
		return Deny
	}
	for i := range e.Resources {
		if e.Resources[i].Decision == Deny {
			return Deny
		}
	}
	return Allow
}

// errorCode returns the event's overall error code: its own, else the
// first that is not zero of the resources and their partitions, in order.
func (e *Event) errorCode() int16 {
	if e.ErrorCode != 0 {
		return e.ErrorCode
	}
	for i := range e.Resources {
		r := &e.Resources[i]
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for j := range r.Partitions {
			if c := r.Partitions[j].ErrorCode; c != 0 {
				return c
			}
		}
	}
	return 0
}

// APIName returns the name of an API key as kmsg.NameForKey gives it and
// the proxy's metrics label it ("Produce", "SASLAuthenticate"), or "" for
// NoAPIKey. A key kmsg does not know is written by number, so that a name
// never comes from what a client sent.
func APIName(key int16) string {
	if key < 0 {
		return ""
	}
	if n := kmsg.NameForKey(key); n != "Unknown" {
		return n
	}
	return strconv.Itoa(int(key))
}

// Encoder writes events as JSON objects: CloudEvents' attribute names for
// the envelope (specversion, id, source, type, time, datacontenttype) and
// the audit fields beside them at the top level (see README, "Audit
// trail"). It is hand-written, appending into a buffer it reuses, because
// a per-request trail encodes an event per Produce and Fetch: no
// reflection, no allocation per event. An Encoder is not safe for
// concurrent use; the id's sequence is shared through Source.
type Encoder struct {
	src *Source
	buf []byte
}

// Source gives the events of one proxy instance their ids: the instance
// and a sequence number, unique while the instance runs.
type Source struct {
	instance string
	seq      atomic.Uint64
}

// NewSource returns a source whose ids start with instance (a random
// string, say, or the host name and the start time).
func NewSource(instance string) *Source { return &Source{instance: instance} }

// NewEncoder returns an encoder drawing ids from src.
func NewEncoder(src *Source) *Encoder { return &Encoder{src: src, buf: make([]byte, 0, 512)} }

// Encode returns e as one JSON object followed by a newline. The bytes are
// the Encoder's until the next call; copy them to keep them.
func (en *Encoder) Encode(e *Event) []byte {
	en.buf = AppendEvent(en.buf[:0], en.src, e)
	return en.buf
}

// AppendEvent appends e to b as one JSON object and a newline, with the
// next id of src.
func AppendEvent(b []byte, src *Source, e *Event) []byte {
	return appendEvent(b, src.instance, src.seq.Add(1), e)
}

// appendEvent appends e with the id instance-seq.
func appendEvent(b []byte, instance string, seq uint64, e *Event) []byte {
	t := e.Time
	if t.IsZero() {
		t = time.Now()
	}
	b = append(b, `{"specversion":"1.0","id":`...)
	b = append(b, '"')
	b = appendStringBody(b, instance)
	b = append(b, '-')
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `","source":"inorder/`...)
	b = appendStringBody(b, e.Listener)
	b = append(b, `","type":"io.inorder.audit.`...)
	b = append(b, e.Kind.String()...)
	b = append(b, `","datacontenttype":"application/json","time":"`...)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","principal":`...)
	b = appendString(b, e.Principal)
	b = append(b, `,"client_address":`...)
	b = appendString(b, e.ClientAddress)
	b = append(b, `,"api_key":`...)
	b = appendString(b, APIName(e.APIKey))
	typ, name, op := e.first()
	b = append(b, `,"resource_type":`...)
	b = appendString(b, typ)
	b = append(b, `,"resource_name":`...)
	b = appendString(b, name)
	b = append(b, `,"operation":`...)
	b = appendString(b, op)
	b = append(b, `,"decision":"`...)
	b = append(b, e.decision().String()...)
	b = append(b, `","error_code":`...)
	b = strconv.AppendInt(b, int64(e.errorCode()), 10)
	if e.Listener != "" {
		b = append(b, `,"listener":`...)
		b = appendString(b, e.Listener)
	}
	if e.ClientID != "" {
		b = append(b, `,"client_id":`...)
		b = appendString(b, e.ClientID)
	}
	if e.Connection != 0 {
		b = append(b, `,"connection":`...)
		b = strconv.AppendUint(b, e.Connection, 10)
	}
	if e.APIKey >= 0 && e.Kind != KindSummary {
		b = append(b, `,"api_version":`...)
		b = strconv.AppendInt(b, int64(e.APIVersion), 10)
	}
	if e.Mechanism != "" {
		b = append(b, `,"mechanism":`...)
		b = appendString(b, e.Mechanism)
	}
	if e.ClaimedPrincipal != "" {
		b = append(b, `,"claimed_principal":`...)
		b = appendString(b, e.ClaimedPrincipal)
	}
	if e.TLSSubject != "" {
		b = append(b, `,"tls_subject":`...)
		b = appendString(b, e.TLSSubject)
	}
	if e.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, e.Reason)
	}
	if e.Kind == KindSummary {
		b = append(b, `,"since":"`...)
		b = e.Since.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if e.PartitionsOmitted != 0 {
		b = append(b, `,"partitions_omitted":`...)
		b = strconv.AppendInt(b, e.PartitionsOmitted, 10)
	}
	if e.ResourcesOmitted != 0 {
		b = append(b, `,"resources_omitted":`...)
		b = strconv.AppendInt(b, e.ResourcesOmitted, 10)
	}
	if len(e.Resources) > 0 {
		b = append(b, `,"resources":[`...)
		for i := range e.Resources {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendResource(b, e, &e.Resources[i])
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

func appendResource(b []byte, e *Event, r *Resource) []byte {
	b = append(b, `{"resource_type":`...)
	b = appendString(b, r.Type)
	b = append(b, `,"resource_name":`...)
	b = appendString(b, r.Name)
	b = append(b, `,"operation":`...)
	b = appendString(b, r.Operation)
	b = append(b, `,"decision":"`...)
	b = append(b, r.Decision.String()...)
	b = append(b, `","error_code":`...)
	b = strconv.AppendInt(b, int64(r.ErrorCode), 10)
	if e.Kind == KindSummary {
		b = append(b, `,"api_key":`...)
		b = appendString(b, APIName(r.APIKey))
		b = append(b, `,"requests":`...)
		b = strconv.AppendInt(b, r.Requests, 10)
	}
	if len(r.Partitions) > 0 {
		b = append(b, `,"partitions":[`...)
		for i := range r.Partitions {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPartition(b, &r.Partitions[i])
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendPartition(b []byte, p *Partition) []byte {
	b = append(b, `{"partition":`...)
	b = strconv.AppendInt(b, int64(p.Partition), 10)
	if p.ErrorCode != 0 {
		b = append(b, `,"error_code":`...)
		b = strconv.AppendInt(b, int64(p.ErrorCode), 10)
	}
	if p.FirstOffset != NoOffset {
		b = append(b, `,"first_offset":`...)
		b = strconv.AppendInt(b, p.FirstOffset, 10)
	}
	if p.LastOffset != NoOffset {
		b = append(b, `,"last_offset":`...)
		b = strconv.AppendInt(b, p.LastOffset, 10)
	}
	if p.Committed != NoOffset {
		b = append(b, `,"committed_offset":`...)
		b = strconv.AppendInt(b, p.Committed, 10)
	}
	if p.FetchOffset != NoOffset {
		b = append(b, `,"fetch_offset":`...)
		b = strconv.AppendInt(b, p.FetchOffset, 10)
	}
	if p.Records != 0 {
		b = append(b, `,"records":`...)
		b = strconv.AppendInt(b, p.Records, 10)
	}
	if p.Bytes != 0 {
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, p.Bytes, 10)
	}
	return append(b, '}')
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendStringBody(b, s)
	return append(b, '"')
}

// appendStringBody appends s escaped for a JSON string, without quotes:
// control characters, quotes and backslashes escaped, ill-formed UTF-8
// replaced by U+FFFD, and U+2028 and U+2029 escaped as encoding/json does
// (a client id or topic name is the client's text, and a line must stay
// one valid JSON object whatever it holds).
func appendStringBody(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}
