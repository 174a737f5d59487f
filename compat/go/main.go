// Command compat-go runs the inorder compatibility workload with one Go client.
//
//	compat-go kgo|sarama|kafkago BOOTSTRAP TOPIC_PREFIX [EXPECT]
//	compat-go create-topics BOOTSTRAP NAME:PARTITIONS...
//	compat-go move-leaders BOOTSTRAP TOPIC
//	compat-go mint-jwt DIR ISSUER AUDIENCE SUBJECT...   (a JWKS and signed tokens: jwt.go)
//
// EXPECT is a comma-separated list of host:port or host:lo-hi that every
// broker address the client learns must fall in ("-" or absent: no check).
// COMPAT_RF sets the replication factor of the created topics (default 1);
// COMPAT_TLS_*, COMPAT_SASL_* and COMPAT_OAUTH_TOKEN_FILE the security
// settings (security.go).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	mainPartitions = 6
	txnPartitions  = 3
	nMain          = 2000
	nResume        = 200
	nTxn           = 100
)

// Client is what one Kafka client library must do for the workload.
type Client interface {
	CreateTopic(ctx context.Context, topic string, partitions, rf int) error
	// GroupConsume starts `members` consumers in one group, waits until the
	// group is stable and covers every partition, calls produce, reads until
	// want records arrived in total, commits, and closes the members.
	GroupConsume(ctx context.Context, topic, group string, members, want int, produce func(context.Context) error) ([][]Got, error)
	// Produce writes recs with an idempotent producer (5 in flight if the client allows).
	Produce(ctx context.Context, topic string, recs []Rec) error
	// Resume starts one new member of group and reads want records.
	Resume(ctx context.Context, topic, group string, want int) ([]Got, error)
	// Txn commits a transaction with commit, aborts one with abort, then
	// commits one with sentinel.
	Txn(ctx context.Context, topic string, commit, abort, sentinel []Rec) error
	// ReadCommitted reads topic with isolation read_committed until every
	// sentinel seq was seen.
	ReadCommitted(ctx context.Context, topic string, sentinels map[int]bool) ([]Got, error)
	// Addresses returns every broker address the client learned.
	Addresses(ctx context.Context, group string) ([]string, error)
	Close()
}

// createTopics creates NAME:PARTITIONS topics with franz-go's admin client.
func createTopics(bootstrap []string, specs []string) {
	cl, err := newKgo(bootstrap)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer cl.Close()
	rf := 1
	if v := os.Getenv("COMPAT_RF"); v != "" {
		rf, _ = strconv.Atoi(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range specs {
		name, parts, _ := strings.Cut(s, ":")
		n, _ := strconv.Atoi(parts)
		if err := cl.CreateTopic(ctx, name, n, rf); err != nil {
			fmt.Fprintf(os.Stderr, "create topic %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: compat-go kgo|sarama|kafkago BOOTSTRAP TOPIC_PREFIX [EXPECT]")
		os.Exit(2)
	}
	if os.Args[1] == "mint-jwt" && len(os.Args) >= 6 {
		// valid for longer than a whole matrix run
		if err := mintJWT(os.Args[2], os.Args[3], os.Args[4], os.Args[5:], 4*time.Hour); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	name, bootstrap, prefix := os.Args[1], strings.Split(os.Args[2], ","), os.Args[3]
	if err := loadSecurity(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if name == "create-topics" { // helper for clients that cannot create topics (kcat)
		createTopics(bootstrap, os.Args[3:])
		return
	}
	if name == "move-leaders" { // helper for the other languages' leader-move step
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		moved, err := moveLeaders(ctx, bootstrap, os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(moved)
		return
	}
	expectArg := ""
	if len(os.Args) > 4 {
		expectArg = os.Args[4]
	}
	expect, err := parseExpect(expectArg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rf := 1
	if v := os.Getenv("COMPAT_RF"); v != "" {
		rf, _ = strconv.Atoi(v)
	}
	var cl Client
	switch name {
	case "kgo":
		cl, err = newKgo(bootstrap)
	case "sarama":
		cl, err = newSarama(bootstrap)
	case "kafkago":
		cl, err = newKafkaGo(bootstrap)
	default:
		err = fmt.Errorf("unknown client %q", name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer cl.Close()
	r := &runner{client: name, started: time.Now()}
	fmt.Printf("START %s bootstrap=%s prefix=%s rf=%d expect=%q security=%s\n", name, os.Args[2], prefix, rf, expectArg, sec.describe())

	topic, txnTopic, group := prefix+"-main", prefix+"-txn", prefix+"-group"
	if !r.step("create-topics", 60*time.Second, func(ctx context.Context) error {
		if err := cl.CreateTopic(ctx, topic, mainPartitions, rf); err != nil {
			return err
		}
		return cl.CreateTopic(ctx, txnTopic, txnPartitions, rf)
	}) {
		r.finish()
		return
	}

	sent := genRecs(0, nMain, mainPartitions)
	var members [][]Got
	produced, producedMore := false, false
	if r.step("group-consume", 150*time.Second, func(ctx context.Context) error {
		var err error
		members, err = cl.GroupConsume(ctx, topic, group, 2, len(sent), func(ctx context.Context) error {
			t := time.Now()
			if err := cl.Produce(ctx, topic, sent); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			produced = true
			fmt.Printf("STEP produce-idempotent ok (%v)\n", time.Since(t).Round(time.Millisecond))
			return nil
		})
		if err != nil {
			return err
		}
		for i, m := range members {
			if len(m) == 0 {
				return fmt.Errorf("group member %d received no records", i)
			}
		}
		return verify(sent, members)
	}) && produced {
		more := genRecs(nMain, nMain+nResume, mainPartitions)
		r.step("resume-from-commit", 90*time.Second, func(ctx context.Context) error {
			if err := cl.Produce(ctx, topic, more); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			producedMore = true
			got, err := cl.Resume(ctx, topic, group, len(more))
			if err != nil {
				return err
			}
			return verify(more, [][]Got{got})
		})
	}

	if os.Getenv("COMPAT_LEADER_MOVE") != "" && producedMore {
		// The long-lived producer still has the old leaders: its next writes
		// get NOT_LEADER_OR_FOLLOWER (with the new leader's endpoint, KIP-951)
		// and must follow the move through the proxy.
		r.step("leader-move", 120*time.Second, func(ctx context.Context) error {
			t := time.Now()
			moved, err := moveLeaders(ctx, bootstrap, topic)
			if err != nil {
				return fmt.Errorf("moving leaders: %w", err)
			}
			fmt.Printf("INFO leaders moved in %v: %s\n", time.Since(t).Round(time.Millisecond), moved)
			t = time.Now()
			if err := cl.Produce(ctx, topic, genRecs(nMain+nResume, nMain+nResume+300, mainPartitions)); err != nil {
				return fmt.Errorf("produce after the move: %w", err)
			}
			fmt.Printf("INFO produced after the move in %v\n", time.Since(t).Round(time.Millisecond))
			all := genRecs(0, nMain+nResume+300, mainPartitions)
			got, err := cl.Resume(ctx, topic, prefix+"-after-move", len(all))
			if err != nil {
				return fmt.Errorf("read after the move: %w", err)
			}
			return verify(all, [][]Got{got})
		})
	}

	commit := genRecs(100000, 100000+nTxn, txnPartitions)
	abort := genRecs(200000, 200000+nTxn, txnPartitions)
	sentinel := genRecs(900000, 900000+txnPartitions, txnPartitions)
	txnOK := r.step("transactions", 60*time.Second, func(ctx context.Context) error {
		return cl.Txn(ctx, txnTopic, commit, abort, sentinel)
	})
	if txnOK {
		r.step("read-committed", 60*time.Second, func(ctx context.Context) error {
			sm := map[int]bool{}
			for _, s := range sentinel {
				sm[s.Seq] = true
			}
			got, err := cl.ReadCommitted(ctx, txnTopic, sm)
			if err != nil {
				return err
			}
			return verify(append(append([]Rec{}, commit...), sentinel...), [][]Got{got})
		})
	}

	if expect != nil {
		r.step("addresses", 30*time.Second, func(ctx context.Context) error {
			addrs, err := cl.Addresses(ctx, group)
			if err != nil {
				return err
			}
			fmt.Printf("INFO addresses learned: %v\n", addrs)
			return checkAddrs(expect, addrs)
		})
	} else {
		fmt.Println("INFO addresses: not checked (no EXPECT given)")
	}
	r.finish()
}
