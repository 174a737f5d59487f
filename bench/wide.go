package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// WideOptions describes the wide produce workload: one connection
// pipelining Requests Produce requests that each name Partitions partitions
// of Topic with no records. Few bytes name many partitions, so it is the
// request that costs a path the most per byte where it must find every
// partition, as inorder's none mode must; what a path spends on it shows
// whether its work follows the bytes or the partitions.
type WideOptions struct {
	// Targets each run the workload once per round, in turn.
	Targets []Target
	// CPUPIDs names, by target, a process whose CPU time is read over
	// each run (a proxy on that target's path).
	CPUPIDs map[string]int
	// Rounds is how many times each target runs. Zero means 3.
	Rounds int
	// Partitions each request names. Zero means 100,000.
	Partitions int
	// Requests are pipelined on the connection. Zero means 20.
	Requests int
	// Topic the requests write to; it need not exist, the broker answers
	// every partition either way. Empty means "inorder-bench-wide".
	Topic string
	// Timeout bounds each run. Zero means 2 minutes.
	Timeout time.Duration
}

// WideResult is a target's medians over the rounds.
type WideResult struct {
	Target Target
	Wall   time.Duration
	CPU    time.Duration // zero without a CPU process
	HasCPU bool
}

func (o *WideOptions) fill() {
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if o.Partitions <= 0 {
		o.Partitions = 100_000
	}
	if o.Requests <= 0 {
		o.Requests = 20
	}
	if o.Topic == "" {
		o.Topic = "inorder-bench-wide"
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
}

// wideFrames returns the workload's requests, framed, correlation ids 1
// on.
func wideFrames(o WideOptions) [][]byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = o.Topic
	rt.Partitions = make([]kmsg.ProduceRequestTopicPartition, o.Partitions)
	for i := range rt.Partitions {
		rt.Partitions[i] = kmsg.NewProduceRequestTopicPartition()
		rt.Partitions[i].Partition = int32(i)
	}
	req.Topics = append(req.Topics, rt)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("inorder-bench"))
	frames := make([][]byte, o.Requests)
	for i := range frames {
		frames[i] = f.AppendRequest(nil, req, int32(i+1))
	}
	return frames
}

// WideProduce writes frames, pipelined, on one connection to addr and
// reads a response to each, in order, checking correlation ids 1 on.
func WideProduce(ctx context.Context, addr string, frames [][]byte) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	werr := make(chan error, 1)
	go func() {
		for _, f := range frames {
			if _, err := c.Write(f); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	var head [8]byte
	buf := make([]byte, 64<<10)
	for i := range frames {
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return fmt.Errorf("bench: response %d of %d: %w", i+1, len(frames), err)
		}
		if got := int32(binary.BigEndian.Uint32(head[4:])); got != int32(i+1) {
			return fmt.Errorf("%w: %d, want %d", errBadResponse, got, i+1)
		}
		size := int64(binary.BigEndian.Uint32(head[:4])) - 4
		if _, err := io.CopyBuffer(io.Discard, io.LimitReader(c, size), buf); err != nil {
			return err
		}
	}
	return <-werr
}

// RunWide runs the wide produce workload on every target, Rounds times,
// starting each round with the next target, and returns each target's
// medians.
func RunWide(ctx context.Context, o WideOptions, progress io.Writer) ([]WideResult, error) {
	o.fill()
	if len(o.Targets) == 0 {
		return nil, badOption("Targets", "", "must name at least one target")
	}
	frames := wideFrames(o)
	walls := make([][]float64, len(o.Targets))
	cpus := make([][]float64, len(o.Targets))
	for round := range o.Rounds {
		for k := range o.Targets {
			i := (k + round) % len(o.Targets)
			t := o.Targets[i]
			pid := o.CPUPIDs[t.label()]
			before, err := cpuOf(pid)
			if err != nil {
				return nil, err
			}
			rctx, cancel := context.WithTimeout(ctx, o.Timeout)
			start := time.Now()
			err = WideProduce(rctx, t.Addr, frames)
			wall := time.Since(start)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("bench: %s: %w", t.label(), err)
			}
			after, err := cpuOf(pid)
			if err != nil {
				return nil, err
			}
			walls[i] = append(walls[i], wall.Seconds())
			cpus[i] = append(cpus[i], (after - before).Seconds())
			if progress != nil {
				fmt.Fprintf(progress, "round %d %s: %v, CPU %v\n", round+1, t.label(), wall.Round(time.Millisecond), after-before)
			}
		}
	}
	res := make([]WideResult, len(o.Targets))
	for i, t := range o.Targets {
		_, has := o.CPUPIDs[t.label()]
		res[i] = WideResult{
			Target: t, HasCPU: has,
			Wall: time.Duration(median(walls[i]) * float64(time.Second)),
			CPU:  time.Duration(median(cpus[i]) * float64(time.Second)),
		}
	}
	return res, nil
}

// WriteWide writes results as aligned text or as a Markdown table.
func WriteWide(w io.Writer, format string, res []WideResult) error {
	rows := [][]string{{"path", "wall s", "path CPU s"}}
	for _, r := range res {
		cpu := ""
		if r.HasCPU {
			cpu = fmt.Sprintf("%.2f", r.CPU.Seconds())
		}
		rows = append(rows, []string{r.Target.label(), fmt.Sprintf("%.2f", r.Wall.Seconds()), cpu})
	}
	if format == "markdown" {
		var b strings.Builder
		for i, row := range rows {
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
			if i == 0 {
				b.WriteString("| " + strings.Join(slices.Repeat([]string{"---"}, len(row)), " | ") + " |\n")
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}
