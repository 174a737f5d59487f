package main

import (
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/config"
)

// TestSingleSidecarFootprint runs TestSidecarFootprint's load through the
// built binary in the single topology, in front of three embedded brokers,
// in both ordering modes, with the budget INORDER_SINGLE_SIDECAR_MEMORY
// names (32MiB, the sidecar's, or more). Every record must arrive, in
// order, and the peak resident memory must stay below the budget plus the
// 64 MiB it may exceed it by, the memory limit deploy/assetcheck requires.
// It is a measurement, run on demand: deploy/README.md gives what it
// measured.
func TestSingleSidecarFootprint(t *testing.T) {
	measuresBinary(t, "moves hundreds of MiB through the built binary")
	budget := os.Getenv("INORDER_SINGLE_SIDECAR_MEMORY")
	if budget == "" {
		t.Skip("a measurement: set INORDER_SINGLE_SIDECAR_MEMORY to the --max-memory to run it with (32MiB for the sidecar's)")
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
			sidecarLoadWith(t, kc.ListenAddrs()[0], mode, "sidecar", size+64<<20,
				"--topology", "single", "--max-memory", budget)
		})
	}
}
