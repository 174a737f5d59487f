package proxy_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/internal/hostile"
	"github.com/inorder-proxy/inorder/internal/pipeprobe"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/ordering"
	"github.com/inorder-proxy/inorder/proxy"
	"github.com/inorder-proxy/inorder/wire"
)

// multiProduce is one Produce request writing one record to each of parts,
// in that order, each value of valueSize bytes starting with its label.
func multiProduce(version int16, topic string, parts []int32, labels []string, valueSize int) *kmsg.ProduceRequest {
	var req *kmsg.ProduceRequest
	for i, part := range parts {
		v := []byte(labels[i] + "|" + strings.Repeat("x", valueSize))
		one := pipeprobe.NewProduce(pipeprobe.ProduceSpec{
			Topic: topic, Partition: part, Value: v, Timestamp: time.Now().UnixMilli(),
			Version: version, Acks: -1, Timeout: 5 * time.Second,
		})
		if req == nil {
			req = one
			continue
		}
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, one.Topics[0].Partitions[0])
	}
	return req
}

// streamingMix is 90 requests to topic "s" of partitions partitions: Produce
// requests large enough to stream (each writes two or three partitions,
// consecutive ones sharing some, v7 and v9), and from request allLarge on
// small Produce requests and OffsetCommits among them. sent holds each
// partition's record labels in send order; large counts the large
// requests.
func streamingMix(partitions, allLarge int) (reqs []kmsg.Request, sent map[int32][]string, large int) {
	sent = map[int32][]string{}
	label := func(part int32) string {
		l := fmt.Sprintf("%d-%d", part, len(sent[part]))
		sent[part] = append(sent[part], l)
		return l
	}
	for i := range 90 {
		small, commit := i >= allLarge && i%10 == 9, i >= allLarge && i%15 == 7
		switch {
		case small:
			part := int32(i % partitions)
			reqs = append(reqs, multiProduce(9, "s", []int32{part}, []string{label(part)}, 10))
		case commit:
			// In none mode a write to the group's partitions,
			// sharing nothing with the produce requests.
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group, req.Generation = 8, "g", -1
			ct := kmsg.NewOffsetCommitRequestTopic()
			ct.Topic = "s"
			cp := kmsg.NewOffsetCommitRequestTopicPartition()
			cp.Partition, cp.Offset = int32(i%partitions), int64(i)
			ct.Partitions = append(ct.Partitions, cp)
			req.Topics = append(req.Topics, ct)
			reqs = append(reqs, req)
		default:
			parts := []int32{int32(i % partitions), int32((i + 1) % partitions)}
			if i%3 == 0 {
				parts = append(parts, int32((i+3)%partitions))
			}
			labels := make([]string, len(parts))
			for j, part := range parts {
				labels[j] = label(part)
			}
			version := int16(7)
			if i%2 == 0 {
				version = 9
			}
			reqs = append(reqs, multiProduce(version, "s", parts, labels, 16<<10))
			large++
		}
	}
	return reqs, sent, large
}

// partitionsHold fails t unless each partition of topic "s" on b holds the
// labels sent to it, in send order if inOrder.
func partitionsHold(t *testing.T, ctx context.Context, b *hostile.Reorderer, sent map[int32][]string, inOrder bool) {
	t.Helper()
	for part, want := range sent {
		got, err := pipeprobe.ReadPartition(ctx, b.KfakeAddr(), "s", part, pipeprobe.PinTo(b.KfakeAddr()))
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			got[i], _, _ = strings.Cut(got[i], "|")
		}
		if !inOrder {
			got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("partition %d holds %v, sent %v", part, got, want)
		}
	}
}

// TestStreamedProduceKeepsPartitionOrder pipelines, on one connection
// through the proxy in none mode, Produce requests large enough to stream
// (each writes two or three partitions, consecutive ones sharing some),
// flexible and not, with small produce requests and OffsetCommits among
// them, to a backend that handles requests concurrently and answers in
// completion order. The large ones stream, their partitions found on the
// way: each partition's log must still hold its records in send order, and
// the responses come back in request order. With correlation ids that
// count up by one, heads go upstream unread; with shuffled ids none can.
func TestStreamedProduceKeepsPartitionOrder(t *testing.T) {
	const partitions = 4
	const allLarge = 20 // requests before the first small one or commit
	for _, numbered := range []bool{true, false} {
		name := "shuffled ids"
		if numbered {
			name = "numbered ids"
		}
		t.Run(name, func(t *testing.T) {
			m, large := pipelineStreamingMix(t, config.OrderingNone, partitions, allLarge, numbered)
			// Every large request streamed: one that arrives while
			// a request before it waits to be forwarded waits its
			// turn with its body in the socket, none is read whole.
			scanned, unread := noneStreamed(t, m, float64(large))
			if n := scanned + unread; n != float64(large) {
				t.Fatalf("%v of %d large requests streamed, want all", n, large)
			}
			if numbered && unread == 0 {
				t.Fatal("no request went upstream unread")
			}
			if !numbered && unread != 0 {
				t.Fatalf("%v requests with shuffled ids went upstream unread", unread)
			}
		})
	}
}

// pipelineStreamingMix pipelines streamingMix(partitions, allLarge) on one
// connection through a proxy in mode in front of a backend that answers
// in completion order (after checking that the backend does reorder them
// when reached directly), and checks that the responses come back in
// order without errors and that every partition holds every record sent
// to it: in send order in none mode, in the order the backend chose in
// connection mode, where the proxy trusts the backend to process a
// connection's requests in the order written. It returns the proxy's
// metrics and how many requests were large.
func pipelineStreamingMix(t *testing.T, mode config.Ordering, partitions, allLarge int, numbered bool) (*metrics.Metrics, int) {
	t.Helper()
	reqs, sent, large := streamingMix(partitions, allLarge)
	newBackend := func() *hostile.Reorderer { return newReorderer(t, 0, 2*time.Millisecond, "s", int32(partitions)) }
	ctx := testContext(t, 60*time.Second)
	reordersDirectly(t, ctx, newBackend, reqs)

	b := newBackend()
	m := metrics.New()
	p := startProxy(t, mode, []string{b.Addr()}, nil, proxy.WithMetrics(m))
	res, err := pipeprobe.Pipeline(ctx, p.Addr(), reqs, pipeprobe.PipelineOptions{Numbered: numbered})
	if err != nil {
		t.Fatal(err)
	}
	inOrderNoErrors(t, res)
	partitionsHold(t, ctx, b, sent, mode == config.OrderingNone)
	return m, large
}

// noneStreamed waits until at least least requests have streamed in none
// mode, or 5 s have passed, and returns how many did with their heads read
// (scanned) and unread.
func noneStreamed(t *testing.T, m *metrics.Metrics, least float64) (scanned, unread float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		scanned = counter(t, m, metrics.NameStreamed, "kind", string(metrics.StreamedRequestScanned))
		unread = counter(t, m, metrics.NameStreamed, "kind", string(metrics.StreamedRequestUnread))
		if scanned+unread >= least || time.Now().After(deadline) {
			return scanned, unread
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStreamedRequestMalformed sends, in none mode, a large Produce
// request whose topic count promises a topic its body does not hold. The
// proxy finds out only after streaming the rest: it closes that connection
// with a log line naming the reason, and a well-formed request on another
// connection succeeds.
func TestStreamedRequestMalformed(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "big"))
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil)
	good := multiProduce(9, "big", []int32{0, 1}, []string{"a", "b"}, 40<<10)
	good.Topics = append(good.Topics, good.Topics[0])
	good.Topics[1].Partitions = good.Topics[1].Partitions[1:]
	good.Topics[0].Partitions = good.Topics[0].Partitions[:1]
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, good, 5)
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	// Body: null transactional id (1 byte), acks, timeout, then the
	// compact topic count, n+1.
	at := h.Body + 1 + 2 + 4
	if frame[at] != 3 {
		t.Fatalf("topic count byte %d, want 3 (two topics)", frame[at])
	}
	bad := slices.Clone(frame)
	bad[at] = 4

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	local := c.LocalAddr().String()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(bad)
	if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
		t.Fatalf("read %d bytes (%v); want a close with no response", n, err)
	}
	c.Close()
	p.log.waitFor(t, "client="+local)
	if line := logLine(p.log.String(), "client="+local); !strings.Contains(line, "bad request") || !strings.Contains(line, "Produce") {
		t.Fatalf("log line %q does not name the malformed request", line)
	}

	produceOn(t, p.Addr(), frame, 5)
}

// TestStreamedRequestTooWide streams, in none mode, Produce requests that
// write more partitions than the sequencer keeps keys for: each becomes a
// barrier on the way, once the writes before it are answered, and the
// requests after it wait for it. Every record lands in order.
func TestStreamedRequestTooWide(t *testing.T) {
	const partitions = ordering.MaxWriteKeys + 24
	b, err := hostile.NewReorderer(hostile.ReordererConfig{
		MaxDelay:  time.Millisecond,
		KfakeOpts: []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, "w")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, []string{b.Addr()}, nil, proxy.WithMetrics(m))
	var reqs []kmsg.Request
	for round := range 4 {
		// A narrow write to partition 7, then one to every partition,
		// then narrow again: the wide one must land between them.
		reqs = append(reqs, multiProduce(9, "w", []int32{7}, []string{fmt.Sprint(3 * round)}, 40<<10))
		parts := make([]int32, partitions)
		labels := make([]string, partitions)
		for i := range parts {
			parts[i] = int32(i)
			labels[i] = fmt.Sprint(3*round + 1)
		}
		reqs = append(reqs, multiProduce(7, "w", parts, labels, 8))
		reqs = append(reqs, multiProduce(9, "w", []int32{7}, []string{fmt.Sprint(3*round + 2)}, 40<<10))
	}
	ctx := testContext(t, 60*time.Second)
	res, err := pipeprobe.Pipeline(ctx, p.Addr(), reqs, pipeprobe.PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inOrderNoErrors(t, res)
	got, err := pipeprobe.ReadPartition(ctx, b.KfakeAddr(), "w", 7, pipeprobe.PinTo(b.KfakeAddr()))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range got {
		got[i], _, _ = strings.Cut(got[i], "|")
		want = append(want, fmt.Sprint(i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("partition 7 holds %v, want %v", got, want)
	}
	if n := streamedCounter(t, m, metrics.StreamedRequestScanned, 1); n < 1 {
		t.Fatal("no request streamed")
	}
}

// TestStreamedRequestLargeTags streams, in none mode, a Produce request
// whose partitions carry tagged fields larger than the window that holds
// the bytes between records: the window grows, and the request lands whole.
func TestStreamedRequestLargeTags(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(3, "tags"))
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil, proxy.WithMetrics(m))
	req := multiProduce(9, "tags", []int32{0, 1, 2}, []string{"a", "b", "c"}, 20<<10)
	for i := range req.Topics[0].Partitions {
		req.Topics[0].Partitions[i].UnknownTags.Set(40, []byte(strings.Repeat("t", 9000)))
	}
	req.Topics[0].UnknownTags.Set(41, []byte(strings.Repeat("u", 5000)))
	resp := produceOn(t, p.Addr(), kmsg.NewRequestFormatter().AppendRequest(nil, req, 11), 11)
	if n := len(resp.Topics[0].Partitions); n != 3 {
		t.Fatalf("%d partitions answered, want 3", n)
	}
	if n := streamedCounter(t, m, metrics.StreamedRequestScanned, 1); n != 1 {
		t.Fatalf("%v requests streamed, want 1", n)
	}
	ctx := testContext(t, 20*time.Second)
	for part, want := range []string{"a", "b", "c"} {
		got, err := pipeprobe.ReadPartition(ctx, kc.ListenAddrs()[0], "tags", int32(part))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], want+"|") || len(got[0]) != len(want)+1+20<<10 {
			t.Fatalf("partition %d holds %d records", part, len(got))
		}
	}
}

// TestStreamedRequestWaitIsNotTheClients pipelines large Produce requests
// to one partition, in none mode, to a backend that takes longer to answer
// than the read timeout: each request streams, pauses for the one before
// it, and must not be shed for a read timeout the upstream spent.
func TestStreamedRequestWaitIsNotTheClients(t *testing.T) {
	const delay = 600 * time.Millisecond
	b, err := hostile.NewReorderer(hostile.ReordererConfig{
		MinDelay: delay, MaxDelay: delay,
		KfakeOpts: []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "slow")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, []string{b.Addr()}, func(cfg *config.Config) {
		cfg.ReadTimeout = 200 * time.Millisecond
	}, proxy.WithMetrics(m))
	var reqs []kmsg.Request
	for i := range 3 {
		reqs = append(reqs, multiProduce(9, "slow", []int32{0}, []string{fmt.Sprint(i)}, 64<<10))
	}
	ctx := testContext(t, 30*time.Second)
	res, err := pipeprobe.Pipeline(ctx, p.Addr(), reqs, pipeprobe.PipelineOptions{})
	if err != nil {
		t.Fatalf("%v (proxy log: %s)", err, p.log.String())
	}
	inOrderNoErrors(t, res)
	if n := streamedCounter(t, m, metrics.StreamedRequestScanned, 3); n != 3 {
		t.Fatalf("%v of 3 requests streamed", n)
	}
}

// TestStreamedRequestTrickles streams, in none mode, Produce requests whose
// bytes arrive in small pieces with pauses between them, so that the
// proxy's look at the next partition often finds its header cut short:
// every record lands whole in its partition, with topic names up to Kafka's
// longest, flexible and not.
func TestStreamedRequestTrickles(t *testing.T) {
	long := strings.Repeat("t", 249)
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(3, "short", long))
	m := metrics.New()
	p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), nil, proxy.WithMetrics(m))
	rng := rand.New(rand.NewPCG(1, 2))
	streamed := 0
	for i, version := range []int16{7, 9, 11} {
		req := multiProduce(version, "short", []int32{0, 1, 2}, []string{"a", "b", "c"}, 12<<10)
		more := multiProduce(version, long, []int32{2, 0}, []string{"d", "e"}, 12<<10)
		req.Topics = append(req.Topics, more.Topics...)
		frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, int32(i))
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		for rest := frame; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(700))
			if _, err := c.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = version
		body := readResponse(t, c, int32(i))
		if version >= 9 {
			body = body[1:] // the flexible header's tags
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		c.Close()
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("v%d: produce to %.10s/%d: error %d", version, rt.Topic, rp.Partition, rp.ErrorCode)
				}
			}
		}
		streamed++
		if n := streamedCounter(t, m, metrics.StreamedRequestScanned, float64(streamed)); n != float64(streamed) {
			t.Fatalf("v%d: %v requests streamed, want %d", version, n, streamed)
		}
	}
	ctx := testContext(t, 20*time.Second)
	for _, tc := range []struct {
		topic string
		part  int32
		want  string
	}{{"short", 0, "a"}, {"short", 1, "b"}, {"short", 2, "c"}, {long, 2, "d"}, {long, 0, "e"}} {
		got, err := pipeprobe.ReadPartition(ctx, kc.ListenAddrs()[0], tc.topic, tc.part)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("%.10s/%d holds %d records, want 3", tc.topic, tc.part, len(got))
		}
		for _, r := range got {
			if !strings.HasPrefix(r, tc.want+"|") || len(r) != len(tc.want)+1+12<<10 {
				t.Fatalf("%.10s/%d holds a record of %d bytes starting %.8q", tc.topic, tc.part, len(r), r)
			}
		}
	}
}

// TestStreamedRequestStrandedByReauthentication: in none mode a large
// Produce request has been set up to stream when the proxy, re-authenticating
// the upstream connection before forwarding it, is refused. The connection
// ends before the request is forwarded, and the window taken for it goes
// back to the memory budget (startProxy checks that every byte is back
// after Close), with a correlation id that breaks the numbering (the head
// is read) and with one that follows it (the head may go unread).
func TestStreamedRequestStrandedByReauthentication(t *testing.T) {
	for _, numbered := range []bool{false, true} {
		t.Run(fmt.Sprintf("numbered=%v", numbered), func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(config.MechanismPlain, "inorder", "right"),
				kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "1500"}), kfake.SeedTopics(1, "big"))
			pwFile := writeSecret(t, "right")
			p := startProxy(t, config.OrderingNone, kc.ListenAddrs(), func(c *config.Config) {
				c.UpstreamSASLMechanism = config.MechanismPlain
				c.UpstreamSASLUsername = "inorder"
				c.UpstreamSASLPasswordFile = pwFile
			})
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			frame := kmsg.NewRequestFormatter().AppendRequest(nil, multiProduce(9, "big", []int32{0}, []string{"a"}, 40<<10), 5)
			if _, err := c.Write(frame); err != nil {
				t.Fatal(err)
			}
			readResponse(t, c, 5)
			if err := os.WriteFile(pwFile, []byte("wrong"), 0o600); err != nil {
				t.Fatal(err)
			}
			// The session is renewed 1 s before it expires, after 0.5 s.
			time.Sleep(time.Second)
			corr := int32(9)
			if numbered {
				corr = 6
			}
			binary.BigEndian.PutUint32(frame[8:], uint32(corr))
			c.Write(frame)
			if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Fatalf("read %d bytes (%v); want the connection closed", n, err)
			}
			p.log.waitFor(t, "re-authentication")
		})
	}
}

// TestStreamedProduceManyPartitionsWork pipelines, on one connection
// through the proxy in none mode in front of kfake, 20 Produce requests
// each writing many partitions, with no records or with a small batch
// each: requests large enough to stream, whose partitions the proxy finds
// on the way. What streaming them costs the proxy is counted, not timed:
// the calls on the sockets that may each be a system call must stay
// within one per KiB of the requests, as reading them whole would, and
// the partitions handed to the sequencer within what a write may hold
// before it is a barrier, per request.
func TestStreamedProduceManyPartitionsWork(t *testing.T) {
	for _, tc := range []struct {
		name       string
		partitions int
		value      int // 0: no records
	}{
		{"no records", 100_000, 0},
		{"small batches", 5_000, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const requests = 20
			c := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "w"))
			m := metrics.New()
			p := startProxy(t, config.OrderingNone, c.ListenAddrs(), nil, proxy.WithMetrics(m))
			var batch []byte
			if tc.value > 0 {
				batch = pipeprobe.NewProduce(pipeprobe.ProduceSpec{
					Topic: "w", Value: make([]byte, tc.value), Version: 9,
				}).Topics[0].Partitions[0].Records
			}
			reqs := make([]kmsg.Request, requests)
			bytes := 0
			for i := range reqs {
				req := kmsg.NewPtrProduceRequest()
				req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "w"
				rt.Partitions = make([]kmsg.ProduceRequestTopicPartition, tc.partitions)
				for j := range rt.Partitions {
					rt.Partitions[j] = kmsg.NewProduceRequestTopicPartition()
					rt.Partitions[j].Partition = int32(j)
					rt.Partitions[j].Records = batch
				}
				req.Topics = append(req.Topics, rt)
				reqs[i] = req
				bytes += len(req.AppendTo(nil))
			}
			res, err := pipeprobe.Pipeline(testContext(t, 120*time.Second), p.Addr(), reqs, pipeprobe.PipelineOptions{Numbered: true})
			if err != nil {
				t.Fatal(err)
			}
			for i, at := range res.Arrived {
				if at != i {
					t.Fatalf("responses arrived in the order %v", res.Arrived)
				}
			}
			for i, ex := range res.Exchanges {
				resp := ex.Resp.(*kmsg.ProduceResponse)
				if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != tc.partitions {
					t.Fatalf("response %d does not answer the %d partitions written", i, tc.partitions)
				}
			}
			if scanned, unread := noneStreamed(t, m, requests); scanned+unread != requests {
				t.Fatalf("%v of %d requests streamed, want all", scanned+unread, requests)
			}
			calls, extends := p.StreamWork()
			t.Logf("%d requests of %d bytes: %d socket calls, %d partitions to the sequencer", requests, bytes/requests, calls, extends)
			if limit := int64(bytes / 1024); calls > limit {
				t.Errorf("streaming cost %d socket calls, want at most %d, one per KiB", calls, limit)
			}
			if limit := int64(requests * (ordering.MaxWriteKeys + 1)); extends > limit {
				t.Errorf("%d partitions handed to the sequencer, want at most %d, %d per request", extends, limit, ordering.MaxWriteKeys+1)
			}
		})
	}
}

// TestStreamedRequestCrossesWhileHeld pipelines, in none mode, two large
// Produce requests to an upstream that does not answer the first until
// told: the second writes a partition of its own, then the two the first
// holds. All of the second but its last byte must reach the upstream
// while the first is unanswered, and that byte only after the answer:
// the upstream cannot act on a request before its last byte, so the bytes
// before it need not wait in the client socket.
func TestStreamedRequestCrossesWhileHeld(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	answerFirst := make(chan struct{})
	failed := make(chan string, 1)
	go func() {
		fail := func(format string, a ...any) { failed <- fmt.Sprintf(format, a...) }
		up, err := ln.Accept()
		if err != nil {
			fail("accept: %v", err)
			return
		}
		// Open until the test ends, or the proxy may end the client's
		// connection before it has the responses.
		t.Cleanup(func() { up.Close() })
		up.SetDeadline(time.Now().Add(20 * time.Second))
		reply := func(frame []byte) error {
			out, ok := answer(frame)
			if !ok || out == nil {
				return fmt.Errorf("no answer to %d bytes", len(frame))
			}
			_, err := up.Write(out)
			return err
		}
		var lb [4]byte
		first, err := wire.ReadFrame(up, &lb, wire.MinRequestFrame, 1<<20)
		if err != nil {
			fail("first request: %v", err)
			return
		}
		if _, err := io.ReadFull(up, lb[:]); err != nil {
			fail("second request's length: %v", err)
			return
		}
		second := make([]byte, 4+binary.BigEndian.Uint32(lb[:]))
		copy(second, lb[:])
		up.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := io.ReadFull(up, second[4:len(second)-1]); err != nil {
			fail("%d of the second request's %d bytes reached the upstream before the first was answered: %v", 4+n, len(second), err)
			return
		}
		up.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := up.Read(second[len(second)-1:]); err == nil {
			fail("the second request's last byte reached the upstream before the first was answered")
			return
		}
		<-answerFirst
		if err := reply(first.B); err != nil {
			fail("answering the first: %v", err)
			return
		}
		up.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(up, second[len(second)-1:]); err != nil {
			fail("the second request's last byte: %v", err)
			return
		}
		if err := reply(second); err != nil {
			fail("answering the second: %v", err)
			return
		}
		failed <- ""
	}()

	p := startProxy(t, config.OrderingNone, []string{ln.Addr().String()}, nil)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	f := kmsg.NewRequestFormatter()
	first := f.AppendRequest(nil, multiProduce(9, "t", []int32{0, 1}, []string{"a", "b"}, 40<<10), 0)
	second := f.AppendRequest(nil, multiProduce(9, "t", []int32{2, 0, 1}, []string{"c", "d", "e"}, 40<<10), 1)
	if _, err := c.Write(append(first, second...)); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-failed:
		t.Fatalf("before the first was answered: %s (proxy log: %s)", msg, p.log.String())
	case <-time.After(time.Second):
	}
	close(answerFirst)
	if msg := <-failed; msg != "" {
		t.Fatalf("%s (proxy log: %s)", msg, p.log.String())
	}
	for corr := range int32(2) {
		readResponse(t, c, corr)
	}
	if log := p.log.String(); log != "" {
		t.Logf("proxy log: %s", log)
	}
}
