package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Target is one bootstrap address a workload runs against.
type Target struct {
	// Name labels the target in reports and in RatioTo. If empty, the
	// address is the name.
	Name string
	// Addr is a bootstrap host:port; several may be joined by commas.
	Addr string
	// TLS, when set, makes the client dial the target with TLS. Nil is
	// plaintext.
	TLS *tls.Config
}

// clientOpts are the options every client of t needs.
func (t Target) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(splitAddrs(t.Addr)...)}
	if t.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(t.TLS))
	}
	return opts
}

// ParseTarget reads "name=host:port" or a bare "host:port".
func ParseTarget(s string) (Target, error) {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		name, addr = "", s
	}
	if addr == "" {
		return Target{}, fmt.Errorf("target %q: empty address", s)
	}
	return Target{Name: name, Addr: addr}, nil
}

func (t Target) label() string {
	if t.Name != "" {
		return t.Name
	}
	return t.Addr
}

// Options describes a workload and where to run it. Zero values are filled
// in by Default; Validate names the first bad field.
type Options struct {
	// Targets run the workload one after the other in every round. The
	// first is the subject of the run; the rest are what it is compared to.
	Targets []Target
	// RatioTo names the targets every other target's figures are divided
	// by. If empty, every target after the first is a reference.
	RatioTo []string
	// Rounds is how many times every target runs the workload. Zero
	// means 1 with a single target and 5 when comparing.
	Rounds int

	// Produce and Consume select the workload; at least one must be set.
	Produce bool
	Consume bool

	// Topic is produced to and consumed from. If empty, it is
	// "inorder-bench-p<Partitions>", so that workloads with different
	// partition counts never share a topic.
	Topic string
	// Partitions is how many partitions the topic is created with when it
	// does not exist. Zero means 1.
	Partitions int
	// CreateTopic creates the topic when it is missing.
	CreateTopic bool
	// KeepTopic keeps a topic this run created. False, the zero value,
	// deletes it from every target when the run ends, so that benchmarks
	// do not fill a broker's disk; a topic that existed before is always
	// kept.
	KeepTopic bool
	// Partitioner spreads produced records over the partitions: "sticky"
	// (kgo's default: one partition per batch) or "round-robin" (each
	// record to the next partition, so every request touches them all).
	// Empty means sticky.
	Partitioner string

	// Duration is how long each target is measured in each round, after
	// Warmup. Ignored when Records is set.
	Duration time.Duration
	// Warmup is run, unmeasured, before each measurement so that
	// connections, buffers and the heap are in their steady state. The
	// measurement also waits, at most 30 s longer, until the target has
	// moved its first record, so a slow start is never measured as a
	// target that moves nothing.
	Warmup time.Duration
	// Records, when positive, produces exactly this many records per
	// target per round, measured from the first send to the last ack,
	// instead of running for Duration.
	Records int64
	// Rate caps produce, and consume, each at this many records per
	// second. Zero means as fast as the path allows.
	Rate float64

	// RecordBytes is the size of each produced value. Zero means 1024.
	RecordBytes int
	// Compressible fills values with a repeating pattern instead of random
	// bytes. False, the default, keeps compression from hiding the cost of
	// moving bytes.
	Compressible bool
	// Compression is the codec produced batches are compressed with:
	// none, gzip, snappy, lz4 or zstd. Empty means none.
	Compression string
	// Acks is -1 (all in-sync replicas), 1 (leader) or 0 (none). The zero
	// value of the struct means acks=0; Default sets -1.
	Acks int
	// Idempotent enables idempotent writes, which kgo allows only with
	// acks=-1 and which cap in-flight requests at 5.
	Idempotent bool
	// MaxInFlight is how many produce requests kgo keeps in flight per
	// broker without idempotence. Zero means 5.
	MaxInFlight int
	// Linger is how long a partition waits for more records before a
	// batch is cut. Zero sends at once, so pipelining comes from requests
	// in flight rather than from lingering.
	Linger time.Duration

	// FetchMaxBytes bounds each fetch response. Zero means 1 MiB.
	FetchMaxBytes int32
	// FetchPartitionBytes bounds each partition in a fetch response. Zero
	// means FetchMaxBytes. franz-go's defaults, and the Java client's,
	// are 50 MiB and 1 MiB: responses reach 50 MiB from a broker leading
	// 50 partitions or more.
	FetchPartitionBytes int32

	// CPUPIDs maps target names to a process on that target's path, such
	// as the proxy, whose CPU time is measured over each window and
	// reported per gigabyte moved, and whose resident memory is sampled
	// through the window for its peak. On a shared machine throughput
	// follows whatever else runs; CPU per byte does not.
	CPUPIDs map[string]int
	// CPUPIDFiles is CPUPIDs for processes that BeforeRound starts
	// afresh: each names a file holding the process id, in decimal, read
	// at the start of every window.
	CPUPIDFiles map[string]string

	// BeforeRound, when set, runs before every round (numbered from 1)
	// and ends the run if it fails. A BeforeRound that restarts the
	// processes on each path measures every process for one round only:
	// what one process costs over another of the same build (where its
	// heap and stacks landed, what its sockets' buffers grew to) then
	// moves from round to round, where the medians read past it, instead
	// of weighing on every round of the run as one process's offset.
	BeforeRound func(ctx context.Context, round int) error

	// Progress receives a line per target every second while it runs,
	// with the round's phase (warming up, waiting for the first record,
	// measuring, done) and the rates over the time measured so far, and
	// the round's last figures once it is measured. Nil means silence.
	Progress io.Writer
	// Format is how Run writes its report: text or markdown. Empty means
	// text.
	Format string
}

// Default returns the options of the reference workload: 1 KiB random
// records, acks=all, idempotent, 10 seconds per target.
func Default() Options {
	return Options{
		Produce:     true,
		CreateTopic: true,
		Duration:    10 * time.Second,
		Warmup:      time.Second,
		RecordBytes: 1024,
		Acks:        -1,
		Idempotent:  true,
		MaxInFlight: 5,
		Partitions:  1,
		Compression: "none",
		Format:      "text",
	}
}

// ErrOptions is wrapped by every error Validate returns.
var ErrOptions = errors.New("bench: bad option")

// OptionError names the field of Options that cannot work, with its value
// and what was expected, so that a command line can name its own flag
// for the field instead.
type OptionError struct {
	// Field is the Options field: "Compression", "RatioTo".
	Field string
	// Value is the field's value, or the entry at fault in a list or map;
	// empty when the field's absence is the fault.
	Value string
	// Reason follows the value: "must be -1, 0 or 1". A %s in it stands
	// for Other, the field it depends on.
	Reason string
	Other  string
}

func (e *OptionError) Error() string {
	return "bench: " + e.Describe(e.Field, e.Other)
}

// Describe words the error with field and other as the names of Field and
// Other.
func (e *OptionError) Describe(field, other string) string {
	reason := e.Reason
	if e.Other != "" {
		reason = fmt.Sprintf(reason, other)
	}
	if e.Value == "" {
		return field + " " + reason
	}
	return fmt.Sprintf("%s: %q %s", field, e.Value, reason)
}

// Unwrap lets errors.Is(err, ErrOptions) match.
func (e *OptionError) Unwrap() error { return ErrOptions }

func badOption(field string, value any, reason string) error {
	return &OptionError{Field: field, Value: fmt.Sprint(value), Reason: reason}
}

func (o *Options) fill() {
	if o.Partitions == 0 {
		o.Partitions = 1
	}
	if o.Topic == "" {
		o.Topic = fmt.Sprintf("inorder-bench-p%d", o.Partitions)
	}
	if o.RecordBytes == 0 {
		o.RecordBytes = 1024
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 5
	}
	if o.FetchMaxBytes == 0 {
		o.FetchMaxBytes = 1 << 20
	}
	if o.FetchPartitionBytes == 0 {
		o.FetchPartitionBytes = o.FetchMaxBytes
	}
	if o.Compression == "" {
		o.Compression = "none"
	}
	if o.Format == "" {
		o.Format = "text"
	}
	if o.Rounds == 0 {
		o.Rounds = 1
		if len(o.Targets) > 1 {
			o.Rounds = 5
		}
	}
	if len(o.RatioTo) == 0 {
		for _, t := range o.Targets[min(1, len(o.Targets)):] {
			o.RatioTo = append(o.RatioTo, t.label())
		}
	}
}

// Validate reports the first field that cannot work, as an *OptionError.
func (o Options) Validate() error {
	if len(o.Targets) == 0 {
		return &OptionError{Field: "Targets", Reason: "is empty: give at least one address"}
	}
	names := make(map[string]bool)
	for _, t := range o.Targets {
		if t.Addr == "" {
			return badOption("Targets", t.Name, "has an empty address")
		}
		if names[t.label()] {
			return badOption("Targets", t.label(), "names two targets: give each its own NAME=")
		}
		names[t.label()] = true
	}
	for _, n := range o.RatioTo {
		if !names[n] {
			return badOption("RatioTo", n, "names no target")
		}
	}
	for n, pid := range o.CPUPIDs {
		if !names[n] {
			return badOption("CPUPIDs", fmt.Sprintf("%s=%d", n, pid), "names no target")
		}
		if pid <= 0 {
			return badOption("CPUPIDs", fmt.Sprintf("%s=%d", n, pid), "needs a process id above 0")
		}
	}
	for n, f := range o.CPUPIDFiles {
		if !names[n] {
			return badOption("CPUPIDFiles", n+"="+f, "names no target")
		}
		if _, twice := o.CPUPIDs[n]; twice {
			return badOption("CPUPIDFiles", n+"="+f, "names a target whose process is also given by its id")
		}
		if f == "" {
			return badOption("CPUPIDFiles", n+"=", "needs a file")
		}
	}
	if !o.Produce && !o.Consume {
		return &OptionError{Field: "Produce", Value: "false", Reason: "and %s false leave nothing to measure", Other: "Consume"}
	}
	switch {
	case o.Rounds < 0:
		return badOption("Rounds", o.Rounds, "must not be negative")
	case o.Partitions < 0:
		return badOption("Partitions", o.Partitions, "must not be negative")
	case o.Records < 0:
		return badOption("Records", o.Records, "must not be negative")
	case o.Records == 0 && o.Duration <= 0:
		return &OptionError{Field: "Duration", Value: o.Duration.String(), Reason: "must be positive unless %s is set", Other: "Records"}
	case o.Records > 0 && o.Consume && !o.Produce:
		return &OptionError{Field: "Records", Value: fmt.Sprint(o.Records), Reason: "counts produced records; a consume-only run needs %s", Other: "Duration"}
	case o.Warmup < 0:
		return badOption("Warmup", o.Warmup, "must not be negative")
	case o.Rate < 0:
		return badOption("Rate", o.Rate, "must not be negative (0: as fast as possible)")
	case o.RecordBytes < 0 || o.RecordBytes > 1<<20:
		return badOption("RecordBytes", o.RecordBytes, "must be between 0 and 1048576 (1MiB)")
	case o.Acks != -1 && o.Acks != 0 && o.Acks != 1:
		return badOption("Acks", o.Acks, "must be -1 (all), 1 or 0")
	case o.Idempotent && o.Acks != -1:
		return &OptionError{Field: "Idempotent", Value: "true", Reason: "needs %s -1", Other: "Acks"}
	case o.MaxInFlight < 0:
		return badOption("MaxInFlight", o.MaxInFlight, "must not be negative")
	case o.Linger < 0:
		return badOption("Linger", o.Linger, "must not be negative")
	case o.FetchMaxBytes < 0:
		return badOption("FetchMaxBytes", o.FetchMaxBytes, "must not be negative")
	case o.FetchPartitionBytes < 0:
		return badOption("FetchPartitionBytes", o.FetchPartitionBytes, "must not be negative")
	case o.Partitioner != "" && o.Partitioner != "sticky" && o.Partitioner != "round-robin":
		return badOption("Partitioner", o.Partitioner, "must be sticky or round-robin")
	case o.Format != "" && o.Format != "text" && o.Format != "markdown":
		return badOption("Format", o.Format, "must be text or markdown")
	}
	if _, err := codec(o.Compression); err != nil {
		return err
	}
	return nil
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, badOption("Compression", name, "must be none, gzip, snappy, lz4 or zstd")
}

// measured reports whether the process on the path of the target named
// name is measured, by its id or by its file.
func (o Options) measured(name string) bool {
	_, byID := o.CPUPIDs[name]
	_, byFile := o.CPUPIDFiles[name]
	return byID || byFile
}

// measuresAny reports whether any target's process is measured.
func (o Options) measuresAny() bool {
	return len(o.CPUPIDs)+len(o.CPUPIDFiles) > 0
}

// pidOf returns the id of the measured process on the path of the target
// named name, 0 for none: from CPUPIDs, or read from its CPUPIDFiles file
// now, as a BeforeRound that restarted it left it.
func (o Options) pidOf(name string) (int, error) {
	if pid, ok := o.CPUPIDs[name]; ok {
		return pid, nil
	}
	f, ok := o.CPUPIDFiles[name]
	if !ok {
		return 0, nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return 0, fmt.Errorf("bench: the process id of %s: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("bench: the process id of %s: %s holds %q, not a process id", name, f, strings.TrimSpace(string(b)))
	}
	return pid, nil
}
