package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSingleHostileRequests sends the built binary, in the single topology
// with --max-memory 16MiB in front of three embedded brokers, a Produce v9
// of 1,000,000 partitions (a 6 MB frame that would take hundreds of MiB
// decoded, split and merged) and a Produce of one 50 MiB record batch. The
// proxy may refuse either, but its peak resident memory stays below the
// budget plus 64 MiB, and it serves a client after them.
func TestSingleHostileRequests(t *testing.T) {
	measuresBinary(t, "sends the built binary requests of hundreds of MiB decoded")
	const budget = 16 << 20
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	addr, pid := startBinary(t, "serve", "--listen", "127.0.0.1:0", "--upstream", kc.ListenAddrs()[0],
		"--topology", "single", "--max-memory", "16MiB", "--log-level", "error")
	probe := startProbe(t, addr)

	send := func(t *testing.T, frame []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		done := make(chan string, 1)
		go func() {
			r := bufio.NewReader(c)
			var lb [4]byte
			if _, err := io.ReadFull(r, lb[:]); err != nil {
				done <- "connection closed: " + err.Error()
				return
			}
			io.CopyN(io.Discard, r, int64(binary.BigEndian.Uint32(lb[:])))
			done <- "answered"
		}()
		// A refusal may close the connection before the frame is
		// written whole.
		c.Write(frame)
		select {
		case how := <-done:
			t.Logf("a frame of %d bytes: %s", len(frame), how)
		case <-time.After(30 * time.Second):
			t.Fatalf("a frame of %d bytes: neither answered nor closed in 30 s", len(frame))
		}
	}
	check := func(t *testing.T, phase string) {
		t.Helper()
		// The probe asks every 50 ms: a second gives it the answers
		// probe.check needs to judge the phase.
		time.Sleep(time.Second)
		peak, err := peakResident(pid)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: peak resident memory so far %.1f MiB", phase, float64(peak)/(1<<20))
		if peak >= budget+rssConstant {
			t.Errorf("%s: peak resident memory %.1f MiB, above --max-memory 16 MiB plus %d MiB", phase, float64(peak)/(1<<20), rssConstant>>20)
		}
		probe.check(t, phase)
	}

	t.Run("produce of 1,000,000 partitions", func(t *testing.T) {
		send(t, wideProduce(1_000_000))
		check(t, "produce of 1,000,000 partitions")
	})
	t.Run("produce of 50 MiB", func(t *testing.T) {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rec := kmsg.NewRecord()
		rec.Value = make([]byte, 50<<20)
		batch := kmsg.NewRecordBatch()
		batch.Magic, batch.NumRecords = 2, 1
		batch.Records = rec.AppendTo(nil)
		batch.Length = int32(len(batch.AppendTo(nil)) - 12)
		rp.Records = batch.AppendTo(nil)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		send(t, kmsg.NewRequestFormatter(kmsg.FormatterClientID("large")).AppendRequest(nil, req, 0))
		check(t, "produce of 50 MiB")
	})
}
