package ci

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkStartup measures what a CI job waits for before its tests can
// start: the time from launching a broker until a client's first produce
// is acknowledged, polled every 50 ms. "inorder-dev" launches `inorder dev`
// (in memory); "apache-kafka" launches testenv/kafka/start.sh single (a
// fresh KRaft node: storage format, JVM start), and runs only with
// INORDER_KAFKA_STARTUP=1, since it needs Java and the fixed port 19092.
// One op is one start-up; run with -benchtime 5x.
func BenchmarkStartup(b *testing.B) {
	b.Run("inorder-dev", func(b *testing.B) {
		bin := filepath.Join(inorderBin(b), "inorder")
		var times []time.Duration
		defer reportTimes(b, &times)
		for b.Loop() {
			start := time.Now()
			cmd := exec.Command(bin, "dev", "--listen", "127.0.0.1:0", "--data-dir", "", "--admin-listen", "", "--shutdown-grace", "1s")
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			addr := printedAddr(b, out)
			took := firstProduce(b, addr, start, 30*time.Second)
			b.StopTimer()
			cmd.Process.Signal(os.Interrupt)
			io.Copy(io.Discard, out)
			cmd.Wait()
			times = append(times, took)
			b.StartTimer()
		}
	})
	b.Run("apache-kafka", func(b *testing.B) {
		if os.Getenv("INORDER_KAFKA_STARTUP") != "1" {
			b.Skip("set INORDER_KAFKA_STARTUP=1 (and KAFKA_RUN_DIR) to measure testenv/kafka's single node")
		}
		script := "../../testenv/kafka/"
		var times []time.Duration
		defer reportTimes(b, &times)
		for b.Loop() {
			start := time.Now()
			cmd := exec.Command("bash", script+"start.sh", "single")
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			took := firstProduce(b, "127.0.0.1:19092", start, 3*time.Minute)
			b.StopTimer()
			if err := cmd.Wait(); err != nil {
				b.Fatalf("start.sh: %v", err)
			}
			exec.Command("bash", script+"stop.sh", "single").Run()
			times = append(times, took)
			b.StartTimer()
		}
	})
}

// reportTimes reports the median and the slowest start-up.
func reportTimes(b *testing.B, times *[]time.Duration) {
	t := slices.Clone(*times)
	if len(t) == 0 {
		return
	}
	slices.Sort(t)
	b.ReportMetric(float64(t[len(t)/2].Milliseconds()), "median-ms-to-produce")
	b.ReportMetric(float64(t[len(t)-1].Milliseconds()), "max-ms-to-produce")
}

// printedAddr returns the address inorder prints for clients.
func printedAddr(b *testing.B, out io.Reader) string {
	b.Helper()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "inorder: clients connect to "); ok {
			return addr
		}
	}
	b.Fatalf("inorder dev printed no address: %v", sc.Err())
	return ""
}

// firstProduce produces one record to addr every 50 ms until one is
// acknowledged, and returns the time since start.
func firstProduce(b *testing.B, addr string, start time.Time, limit time.Duration) time.Duration {
	b.Helper()
	var err error
	for time.Since(start) < limit {
		if err = tryProduce(addr); err == nil {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("no produce to %s acknowledged within %v: %v", addr, limit, err)
	return 0
}

func tryProduce(addr string) error {
	// A short metadata age lets the client see the topic its first
	// request created without waiting out kgo's default 5s.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DialTimeout(time.Second),
		kgo.MetadataMinAge(10*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: "startup", Value: []byte("first")}).FirstErr()
}
