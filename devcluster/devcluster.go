// Package devcluster runs the embedded Kafka-compatible backend of
// `inorder dev`: a franz-go kfake cluster whose data lives in a directory,
// so a restart keeps the records, and the API versions it serves, which
// the proxy uses to forward nothing the fake would fail on.
package devcluster

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Options configure the embedded cluster. The zero value runs three
// in-memory brokers.
type Options struct {
	// Brokers is the number of brokers; zero means 3.
	Brokers int
	// DataDir keeps the cluster's state across restarts; empty keeps it in
	// memory only.
	DataDir string
	// Extra options passed to kfake after ours.
	Extra []kfake.Opt
}

// Cluster is a running embedded backend.
type Cluster struct {
	*kfake.Cluster
	versions map[int16]int16
}

// Start starts the cluster and learns the versions it serves.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	n := o.Brokers
	if n == 0 {
		n = 3
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(n),
		kfake.AllowAutoTopicCreation(),
	}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	opts = append(opts, o.Extra...)
	kc, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded cluster: %w", err)
	}
	versions, err := servedVersions(ctx, kc.ListenAddrs())
	if err != nil {
		kc.Close()
		return nil, err
	}
	return &Cluster{Cluster: kc, versions: versions}, nil
}

// Versions reports the highest version of key the cluster serves.
func (c *Cluster) Versions(key int16) (int16, bool) {
	v, ok := c.versions[key]
	return v, ok
}

func servedVersions(ctx context.Context, seeds []string) (map[int16]int16, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("embedded cluster versions: %w", err)
	}
	out := make(map[int16]int16, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = k.MaxVersion
	}
	return out, nil
}

// Fixup patches kfake's answers where they differ from Kafka's in a way
// that breaks a mainstream client. It implements proxy.Fixup.
type Fixup struct{}

// Needs reports the responses Fix patches: CreateTopics v5+, whose
// per-topic Configs kfake leaves null when a topic has no explicit configs;
// Kafka always sends a list and the Java admin client dereferences it.
func (Fixup) Needs(key, version int16) bool {
	return key == 19 && version >= 5
}

// Fix replaces null config lists of created topics with empty ones.
func (Fixup) Fix(resp kmsg.Response) bool {
	r, ok := resp.(*kmsg.CreateTopicsResponse)
	if !ok {
		return false
	}
	changed := false
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.ErrorCode == 0 && t.Configs == nil {
			t.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
			changed = true
		}
	}
	return changed
}
