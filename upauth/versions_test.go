package upauth

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/proxyerr"
)

func versionsAnswer(version int16, maxProduce int16) *kmsg.ApiVersionsResponse {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = version
	r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MaxVersion: maxProduce}}
	return r
}

func TestVersionsKeepsTheHighestVersion(t *testing.T) {
	var v Versions
	if v.Get("a") != nil {
		t.Fatal("the zero value knows an answer")
	}
	v3 := versionsAnswer(3, 11)
	v.Keep("a", v3)
	v3.ApiKeys[0].MaxVersion = 99 // the caller clamps its own copy
	if got := v.Get("a"); got == nil || got.ApiKeys[0].MaxVersion != 11 {
		t.Fatalf("kept %+v, want a copy with Produce v11", got)
	}
	v.Keep("a", versionsAnswer(0, 7))
	if got := v.Get("a"); got.Version != 3 {
		t.Fatalf("a lower version replaced the one held: v%d", got.Version)
	}
	refused := versionsAnswer(3, 1)
	refused.ErrorCode = kerr.UnsupportedVersion.Code
	v.Keep("b", refused)
	if got := v.Get("b"); got.ApiKeys[0].MaxVersion != 11 {
		t.Fatalf("an unknown address gets the last answer of any, got %+v", got)
	}
}

func TestVersionsLearnAsksInTurn(t *testing.T) {
	var v Versions
	var asked []string
	probe := func(_ context.Context, addr string, version int16) (*kmsg.ApiVersionsResponse, error) {
		asked = append(asked, addr+"@"+string(rune('0'+version)))
		switch {
		case addr == "down":
			return nil, errors.New("refused")
		case version == 3:
			r := versionsAnswer(3, 0)
			r.ErrorCode = kerr.UnsupportedVersion.Code
			return r, nil
		}
		return versionsAnswer(version, 9), nil
	}
	if err := v.Learn(context.Background(), "down", []string{"down", "up"}, probe); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(asked, " "), "down@3 down@3 up@3 up@0"; got != want {
		t.Fatalf("asked %s, want %s", got, want)
	}
	if got := v.Get("up"); got == nil || got.ApiKeys[0].MaxVersion != 9 {
		t.Fatalf("learned %+v", got)
	}
	asked = nil
	if err := v.Learn(context.Background(), "", []string{"up"}, probe); err != nil || len(asked) != 0 {
		t.Fatalf("known versions asked again: %v %v", asked, err)
	}
	var none Versions
	err := none.Learn(context.Background(), "", []string{"down", "down"}, probe)
	if err == nil || err.Error() != "refused" {
		t.Fatalf("every upstream down: %v, want one line", err)
	}
}

// versionsPeer answers one request on a pipe with the frame answer builds
// from the request's correlation id.
func versionsPeer(t *testing.T, answer func(corr int32) []byte) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	go func() {
		var head [12]byte
		if _, err := io.ReadFull(server, head[:]); err != nil {
			return
		}
		rest := make([]byte, binary.BigEndian.Uint32(head[:4])-8)
		if _, err := io.ReadFull(server, rest); err != nil {
			return
		}
		server.Write(answer(int32(binary.BigEndian.Uint32(head[8:]))))
	}()
	client.SetDeadline(time.Now().Add(10 * time.Second))
	return client
}

func frame(corr int32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return append(b, body...)
}

func TestAskVersions(t *testing.T) {
	nc := versionsPeer(t, func(corr int32) []byte {
		return frame(corr, versionsAnswer(3, 11).AppendTo(nil))
	})
	resp, err := AskVersions(nc, "a:9092", 3)
	if err != nil || resp.ApiKeys[0].MaxVersion != 11 {
		t.Fatalf("answer %+v, %v", resp, err)
	}

	// An upstream that does not know v3 answers with its v0 body.
	nc = versionsPeer(t, func(corr int32) []byte {
		r := versionsAnswer(0, 5)
		r.ErrorCode = kerr.UnsupportedVersion.Code
		return frame(corr, r.AppendTo(nil))
	})
	resp, err = AskVersions(nc, "a:9092", 3)
	if err != nil || resp.Version != 0 || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("v0 body: %+v, %v", resp, err)
	}

	nc = versionsPeer(t, func(corr int32) []byte { return frame(corr+1, nil) })
	if _, err := AskVersions(nc, "a:9092", 0); !errors.Is(err, proxyerr.UpstreamProtocol) || !strings.Contains(err.Error(), "correlation id 2") {
		t.Fatalf("wrong correlation id: %v", err)
	}
	nc = versionsPeer(t, func(corr int32) []byte {
		r := versionsAnswer(0, 5)
		r.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return frame(corr, r.AppendTo(nil))
	})
	if _, err := AskVersions(nc, "a:9092", 0); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("error code: %v", err)
	}
}

func TestUnauthenticated(t *testing.T) {
	var asked []string
	probe := func(_ context.Context, addr string, version int16) (*kmsg.ApiVersionsResponse, error) {
		asked = append(asked, addr)
		if version != 0 {
			t.Errorf("asked %s for v%d, want v0", addr, version)
		}
		if addr == "sasl" {
			return versionsAnswer(0, 9), nil
		}
		return nil, errors.New("connection refused")
	}
	if err := Unauthenticated(context.Background(), []string{"down", "sasl", "other"}, probe); err != nil {
		t.Fatalf("one upstream answers: %v", err)
	}
	if got := strings.Join(asked, " "); got != "down sasl" {
		t.Fatalf("asked %s, want down then sasl", got)
	}
	err := Unauthenticated(context.Background(), []string{"down", "down2"}, probe)
	if err == nil || err.Error() != "connection refused" {
		t.Fatalf("none answers: %v", err)
	}
}
