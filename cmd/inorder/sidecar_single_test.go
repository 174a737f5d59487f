package main

import (
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/config"
)

// TestSingleSidecarFootprint runs TestSidecarFootprint's load through the
// built binary in the single topology, with the sidecar's --max-memory
// 32MiB (INORDER_SINGLE_SIDECAR_MEMORY names another), in both ordering
// modes, in front of three embedded brokers and, when
// INORDER_KAFKA_CLUSTER_BOOTSTRAP names one, Apache Kafka's three-node
// cluster. Every record must arrive, in order, the consumers' Fetch
// requests must ask for 50 MiB, and the peak resident memory must stay
// below the budget plus 64 MiB: 96 MiB at 32MiB, the sidecar's memory
// limit. The single topology answers in merged fetches of its own making,
// each within a quarter of the budget and what the client asked for, so at
// 32MiB its responses stay far below the 50 MiB asked for; the test logs
// the largest.
func TestSingleSidecarFootprint(t *testing.T) {
	measuresBinary(t, "moves hundreds of MiB through the built binary")
	budget := os.Getenv("INORDER_SINGLE_SIDECAR_MEMORY")
	if budget == "" {
		budget = sidecarMemory
	}
	size, err := config.ParseSize(budget)
	if err != nil {
		t.Fatalf("INORDER_SINGLE_SIDECAR_MEMORY=%s: %v", budget, err)
	}
	for _, mode := range []string{"none", "connection"} {
		t.Run("kfake3/"+mode, func(t *testing.T) {
			kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(sidecarPartitions, "sidecar"))
			if err != nil {
				t.Fatal(err)
			}
			defer kc.Close()
			sidecarLoadWith(t, kc.ListenAddrs()[0], mode, "sidecar", size+64<<20, false,
				"--topology", "single", "--max-memory", budget)
		})
	}
	for _, mode := range []string{"none", "connection"} {
		t.Run("kafka3/"+mode, func(t *testing.T) {
			boot := os.Getenv("INORDER_KAFKA_CLUSTER_BOOTSTRAP")
			if boot == "" {
				t.Skip("no Apache Kafka cluster: run testenv/kafka/start.sh cluster and set INORDER_KAFKA_CLUSTER_BOOTSTRAP to what it prints")
			}
			sidecarLoadWith(t, boot, mode, "", size+64<<20, false,
				"--topology", "single", "--max-memory", budget)
		})
	}
}
