package cmd

import (
	"context"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeSaysWhenNoUpstreamAnswers starts serve in front of an address
// that refuses connections: it still serves, and says at start-up, at
// WARN, that no upstream could be reached; a stop then ends with the
// "stopped" line.
func TestServeSaysWhenNoUpstreamAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	root := newRootCommand()
	root.SetArgs([]string{"serve", "--listen", "127.0.0.1:0", "--upstream", dead, "--dial-timeout", "2s"})
	root.SetOut(out)
	root.SetErr(errOut)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "clients connect to") {
		if time.Now().After(deadline) {
			t.Fatalf("serve printed no address:\n%s", errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !regexp.MustCompile(`level=WARN msg="no upstream could be reached[^\n]*upstream=\[` + regexp.QuoteMeta(dead) + `\]`).MatchString(errOut.String()) {
		t.Errorf("no start-up warning naming the upstream:\n%s", errOut.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "msg=stopped") {
		t.Errorf("no stopped line:\n%s", errOut.String())
	}
}
