package audit

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("closed pipe") }

func TestStdoutSink(t *testing.T) {
	var out bytes.Buffer
	s := NewWriterSink(&out)
	if n, err := s.Write(context.Background(), []Record{rec(0), rec(1)}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	// Flushed at the end of each batch: nothing waits in the buffer.
	if out.String() != "event-0000\nevent-0001\n" {
		t.Errorf("%q", out.String())
	}
	s.Close()
	if n, err := NewWriterSink(failWriter{}).Write(context.Background(), []Record{rec(0)}); n != 0 || err == nil {
		t.Errorf("a failing output: %d, %v", n, err)
	}
}
