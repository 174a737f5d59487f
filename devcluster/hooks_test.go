package devcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestTopicNamesLikeKafka checks that the embedded cluster refuses the
// topic names Apache Kafka refuses, with Kafka's error, and creates the
// others (TestApacheKafkaTopicNames runs the same checks against Kafka).
func TestTopicNamesLikeKafka(t *testing.T) {
	c := start(t, Options{Brokers: 3})
	checkTopicNames(t, c.ListenAddrs())
	// Metadata v0-v3 ask for auto-creation by their version (see
	// installHooks); a name Kafka refuses is refused there too.
	old, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxVersions(kversion.V0_10_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if got := metadataFor(t, old, 1, "bad topic!"); got.ErrorCode != kerr.InvalidTopicException.Code || len(got.Partitions) != 0 {
		t.Errorf("Metadata v1 %q: %v, %d partitions; want INVALID_TOPIC_EXCEPTION", "bad topic!", kerr.ErrorForCode(got.ErrorCode), len(got.Partitions))
	}
}

// TestApacheKafkaTopicNames runs the checks of TestTopicNamesLikeKafka
// against Apache Kafka, so that they cannot drift from what Kafka does.
func TestApacheKafkaTopicNames(t *testing.T) {
	addr := os.Getenv("INORDER_KAFKA_BOOTSTRAP")
	if addr == "" {
		t.Skip("no Apache Kafka: run testenv/kafka/start.sh single and set INORDER_KAFKA_BOOTSTRAP to what it prints")
	}
	checkTopicNames(t, strings.Split(addr, ","))
}

func TestInvalidTopic(t *testing.T) {
	for name, valid := range map[string]bool{
		"": false, ".": false, "..": false, "...": true, "a b": false, "ü": false, "a/b": false, "a:b": false,
		strings.Repeat("x", 249): true, strings.Repeat("x", 250): false, "Az09._-": true,
	} {
		if got := invalidTopic(name) == ""; got != valid {
			t.Errorf("%q: valid %v, want %v (%s)", name, got, valid, invalidTopic(name))
		}
	}
}

// checkTopicNames asks the cluster at seeds to create topics under names
// Kafka refuses and names it accepts: by CreateTopics, by Metadata with
// and without auto-creation, and by a producer that lets its client ask
// for auto-creation. A refused name is answered INVALID_TOPIC_EXCEPTION
// everywhere and never created; an accepted one is created.
func checkTopicNames(t *testing.T, seeds []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.AllowAutoTopicCreation(), kgo.RecordRetries(3))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	run := fmt.Sprintf("names-%08x", rand.Uint32())
	var created []string
	defer func() {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TopicNames = created
		for _, n := range created {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
		req.RequestWith(context.Background(), cl)
	}()

	refused := []string{"bad topic!", "", ".", "..", run + "/slash", run + "-ü", run + strings.Repeat("x", 250-len(run))}
	accepted := []string{run + "...dots", run + "_Mixed-09", run + strings.Repeat("y", 249-len(run))}
	for _, name := range refused {
		if code := createTopic(ctx, t, cl, name); code != kerr.InvalidTopicException.Code {
			t.Errorf("CreateTopics %q: %v, want INVALID_TOPIC_EXCEPTION", name, kerr.ErrorForCode(code))
		}
		for _, auto := range []bool{true, false} {
			if code := metadataErr(ctx, t, cl, name, auto); code != kerr.InvalidTopicException.Code {
				t.Errorf("Metadata %q (auto-creation %v): %v, want INVALID_TOPIC_EXCEPTION", name, auto, kerr.ErrorForCode(code))
			}
		}
	}
	for _, name := range accepted {
		created = append(created, name)
		if code := createTopic(ctx, t, cl, name); code != 0 {
			t.Errorf("CreateTopics %q: %v, want created", name, kerr.ErrorForCode(code))
		}
		auto := "m" + name[1:] // same length, another name
		created = append(created, auto)
		if code := metadataErr(ctx, t, cl, auto, true); code == kerr.InvalidTopicException.Code {
			t.Errorf("Metadata %q with auto-creation: INVALID_TOPIC_EXCEPTION for a name Kafka accepts", auto)
		}
	}

	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	err = cl.ProduceSync(pctx, &kgo.Record{Topic: "bad topic!", Value: []byte("x")}).FirstErr()
	pcancel()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("producing to %q: %v, want INVALID_TOPIC_EXCEPTION", "bad topic!", err)
	}

	// A broker's metadata shows a created topic a moment later.
	var names []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		names = listTopics(ctx, t, cl)
		if time.Now().After(deadline) || !slices.ContainsFunc(accepted, func(n string) bool { return !slices.Contains(names, n) }) {
			break
		}
	}
	for _, name := range refused {
		if slices.Contains(names, name) {
			t.Errorf("topic %q exists; Kafka refuses that name", name)
		}
	}
	for _, name := range accepted {
		if !slices.Contains(names, name) {
			t.Errorf("topic %q was not created", name)
		}
	}
}

func listTopics(ctx context.Context, t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range resp.Topics {
		if tp.Topic != nil {
			names = append(names, *tp.Topic)
		}
	}
	return names
}

func createTopic(ctx context.Context, t *testing.T, cl *kgo.Client, name string) int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("CreateTopics %q: %v", name, err)
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("CreateTopics %q: %d topics in the answer", name, len(resp.Topics))
	}
	return resp.Topics[0].ErrorCode
}

// metadataErr is the error code Metadata answers for one topic.
func metadataErr(ctx context.Context, t *testing.T, cl *kgo.Client, name string, auto bool) int16 {
	t.Helper()
	_, got := metadataTopic(ctx, t, cl, name, auto)
	return got.ErrorCode
}
