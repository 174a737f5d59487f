package devcluster

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func start(t *testing.T, o Options) *Cluster {
	t.Helper()
	c, err := Start(testContext(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// metadataFor asks for topic at Metadata version v, letting the request
// allow auto-creation where the version has the field.
func metadataFor(t *testing.T, cl *kgo.Client, v int16, topic string) kmsg.MetadataResponseTopic {
	t.Helper()
	version, got := metadataTopic(testContext(t), t, cl, topic, true)
	if version != v {
		t.Fatalf("Metadata sent at v%d, want v%d", version, v)
	}
	return got
}

// metadataTopic asks for one topic, allowing auto-creation as auto says,
// and returns the version the answer came at and the topic's entry.
func metadataTopic(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, auto bool) (int16, kmsg.MetadataResponseTopic) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = auto
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("Metadata %q: %v", topic, err)
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("Metadata %q: %d topics in the answer", topic, len(resp.Topics))
	}
	return resp.Version, resp.Topics[0]
}

// TestAutoCreateEveryMetadataVersion checks that a topic named in a
// Metadata request is created, with the configured partition count, both
// at v0-v3 (no AllowAutoTopicCreation field; Kafka creates the topic) and
// at the newest version.
func TestAutoCreateEveryMetadataVersion(t *testing.T) {
	c := start(t, Options{Brokers: 1, Partitions: 3})
	for _, tc := range []struct {
		name     string
		versions *kversion.Versions
		want     int16
	}{
		{"v1 (kafka-python)", kversion.V0_10_0(), 1},
		{"v2", kversion.V0_10_1(), 2},
		{"v0", kversion.V0_9_0(), 0},
		{"newest", nil, c.versions[int16(kmsg.Metadata)]},
	} {
		opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
		if tc.versions != nil {
			opts = append(opts, kgo.MaxVersions(tc.versions))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		topic := "auto-" + tc.name[:2]
		got := metadataFor(t, cl, tc.want, topic)
		cl.Close()
		if got.ErrorCode != 0 || len(got.Partitions) != 3 {
			t.Errorf("%s: topic %s: error code %d, %d partitions; want created with 3", tc.name, topic, got.ErrorCode, len(got.Partitions))
		}
	}
}

// TestAutoCreateOutlivesControlRenewal sends more old Metadata requests
// than one control function serves, and checks topics are still created.
func TestAutoCreateOutlivesControlRenewal(t *testing.T) {
	c := start(t, Options{Brokers: 1})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxVersions(kversion.V0_10_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < controlRenewEvery+2; i++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		if _, err := req.RequestWith(testContext(t), cl); err != nil {
			t.Fatal(err)
		}
	}
	if got := metadataFor(t, cl, 1, "after-renewal"); got.ErrorCode != 0 || len(got.Partitions) != 1 {
		t.Fatalf("after %d requests: error code %d, %d partitions", controlRenewEvery+2, got.ErrorCode, len(got.Partitions))
	}
}

// fill writes 100 records of 1KiB, one batch each, into a cluster kept in
// dir; the first 50 carry a timestamp two days old.
func fill(t *testing.T, dir string) {
	ctx := testContext(t)
	c, err := Start(ctx, Options{Brokers: 1, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("kept"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	old := time.Now().Add(-48 * time.Hour)
	value := make([]byte, 1024)
	for i := 0; i < 100; i++ {
		r := &kgo.Record{Value: value}
		if i < 50 {
			r.Timestamp = old
		}
		// One record per request, so every record is a batch of its own.
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// earliest starts a cluster on dir with o and returns where the log of
// kept/0 starts.
func earliest(t *testing.T, dir string, o Options) int64 {
	o.Brokers, o.DataDir = 1, dir
	c := start(t, o)
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "kept"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -2 // earliest
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("earliest offset: %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// TestRetentionTrimsKeptData writes records into a data directory without
// retention, restarts with an age bound or a size bound, and checks the
// oldest records are gone as soon as the cluster is up.
func TestRetentionTrimsKeptData(t *testing.T) {
	dir := t.TempDir()
	fill(t, dir)
	if got := earliest(t, dir, Options{}); got != 0 {
		t.Fatalf("without retention the log starts at %d, want 0", got)
	}
	if got := earliest(t, dir, Options{RetentionTime: 24 * time.Hour}); got != 50 {
		t.Errorf("with 24h retention the log starts at %d, want 50 (the records written 48h ago gone)", got)
	}

	dir = t.TempDir()
	fill(t, dir)
	if got := earliest(t, dir, Options{RetentionBytes: 20 << 10}); got < 75 || got > 90 {
		t.Errorf("with 20KiB retention the log starts at %d, want about 80 (about 20 1KiB batches kept)", got)
	}
}

// TestStartRefusesNegativeCounts checks that a negative broker or
// partition count is an error, not a panic inside kfake.
func TestStartRefusesNegativeCounts(t *testing.T) {
	for _, o := range []Options{{Brokers: -2}, {Partitions: -1}} {
		if c, err := Start(testContext(t), o); !errors.Is(err, ErrCount) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%+v: %v, want ErrCount", o, err)
		}
	}
}

// TestPorts checks that the brokers listen on the ports asked for, and
// that one taken is reported with its broker and address.
func TestPorts(t *testing.T) {
	var ports []int
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	c := start(t, Options{Brokers: 2, Ports: ports})
	want := []string{"127.0.0.1:" + strconv.Itoa(ports[0]), "127.0.0.1:" + strconv.Itoa(ports[1])}
	if got := c.ListenAddrs(); !slices.Equal(got, want) {
		t.Fatalf("listening at %v, want %v", got, want)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	_, err = Start(testContext(t), Options{Brokers: 2, Ports: []int{0, busy}})
	var pe *PortError
	if !errors.As(err, &pe) || pe.Node != 1 || pe.Addr != "127.0.0.1:"+strconv.Itoa(busy) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("broker 1 on a port in use: %v", err)
	}
	if _, err := Start(testContext(t), Options{Brokers: 2, Ports: []int{0}}); !errors.Is(err, ErrCount) {
		t.Fatalf("one port for two brokers: %v", err)
	}
}
