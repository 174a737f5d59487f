package audit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
)

// StdoutSink writes events to standard output as JSON lines, for a
// container platform that collects a process's output. The proxy's own
// logs go to standard error, so the two never mix.
type StdoutSink struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// NewStdoutSink returns a sink writing to os.Stdout.
func NewStdoutSink() *StdoutSink { return NewWriterSink(os.Stdout) }

// NewWriterSink returns a sink that writes to w as the stdout sink does.
func NewWriterSink(w io.Writer) *StdoutSink {
	return &StdoutSink{w: bufio.NewWriterSize(w, 64<<10)}
}

// Name is SinkStdout.
func (s *StdoutSink) Name() SinkName { return SinkStdout }

// Write writes recs and flushes them, a batch per write call on the
// output rather than one per event.
func (s *StdoutSink) Write(_ context.Context, recs []Record) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range recs {
		if _, err := s.w.Write(recs[i].Value); err != nil {
			return 0, fmt.Errorf("audit stdout: %w", err)
		}
	}
	if err := s.w.Flush(); err != nil {
		// What the buffer held is not known to be written: the batch is
		// written again, whole.
		return 0, fmt.Errorf("audit stdout: %w", err)
	}
	return len(recs), nil
}

// Close flushes; standard output stays open.
func (s *StdoutSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Flush()
}
