package proxy_test

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
)

// TestSingleApiVersionsSurvivesResets: a client's first request, an
// ApiVersions, goes to every broker through the single endpoint; every
// broker's connection is reset while it is on its way. Each broker is
// asked again on a new connection, and the client gets its answer and
// goes on, where a client connection whose every part failed is closed.
func TestSingleApiVersionsSurvivesResets(t *testing.T) {
	kc, relays := relayedCluster(t)
	p := startSingle(t, config.OrderingConnection, kc.ListenAddrs(), nil)
	// The proxy learns the cluster on its first client's request; this
	// one's parts are what the resets are for.
	warm := dialProxy(t, p.Addr())
	roundTripAs(t, warm, "warm", kmsg.NewPtrMetadataRequest(), 1)

	accepted := make([]int64, len(relays))
	var releases []func()
	for i, r := range relays {
		accepted[i] = r.Stats().Accepted
		releases = append(releases, r.Hold())
	}
	nc := dialProxy(t, p.Addr())
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
	if _, err := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("t")).AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	// The parts are on their way once every broker's relay carries a
	// connection the client's request opened.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < len(relays); {
		if relays[i].Stats().Accepted > accepted[i] {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d was never dialled for the ApiVersions", i)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i, r := range relays {
		if r.Cut() == 0 {
			t.Fatalf("broker %d's relay carried nothing to reset", i)
		}
		accepted[i] = r.Stats().Accepted
	}
	for _, release := range releases {
		release()
	}

	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatalf("no answer to the ApiVersions whose parts were reset: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, frame); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = req.Version
	if corr := int32(binary.BigEndian.Uint32(frame)); corr != 1 {
		t.Fatalf("correlation id %d, want 1", corr)
	}
	if err := resp.ReadFrom(frame[4:]); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("the ApiVersions answer: error code %d, %d keys, %v", resp.ErrorCode, len(resp.ApiKeys), err)
	}
	for i, r := range relays {
		if r.Stats().Accepted <= accepted[i] {
			t.Fatalf("broker %d was not asked again on a new connection", i)
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	if got := roundTripAs(t, nc, "t", md, 2).(*kmsg.MetadataResponse); len(got.Brokers) != 1 {
		t.Fatalf("Metadata after the resets names %d brokers, want the proxy alone", len(got.Brokers))
	}
}
