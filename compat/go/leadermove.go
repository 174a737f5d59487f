package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// moveLeaders moves the leader of every partition of topic to another
// broker with franz-go's admin client: each replica id is replaced by the
// next broker id (a rotation of the replica list on a 3-node cluster with
// RF 3, a move to the next broker with RF 1), then preferred leaders are
// elected. It returns "partition:old->new" pairs.
func moveLeaders(ctx context.Context, seeds []string, topic string) (string, error) {
	cl, err := kgo.NewClient(append(sec.kgoOpts(), kgo.SeedBrokers(seeds...), kgo.ClientID("inorder-compat-admin"))...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return "", err
	}
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, b.NodeID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) < 2 {
		return "", fmt.Errorf("leader move needs 2+ brokers, have %v", ids)
	}
	idx := map[int32]int{}
	for i, id := range ids {
		idx[id] = i
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return "", fmt.Errorf("topic %s metadata: %v", topic, td.Err)
	}
	req := kadm.AlterPartitionAssignmentsReq{}
	want, old := map[int32]int32{}, map[int32]int32{}
	ts := kadm.TopicsSet{}
	for p, pd := range td.Partitions {
		var next []int32
		for _, r := range pd.Replicas {
			next = append(next, ids[(idx[r]+1)%len(ids)])
		}
		req.Assign(topic, p, next)
		want[p], old[p] = next[0], pd.Leader
		ts.Add(topic, p)
	}
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return "", err
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			return "", fmt.Errorf("reassign %s/%d: %w", r.Topic, r.Partition, r.Err)
		}
	}
	for {
		lr, err := adm.ListPartitionReassignments(ctx, ts)
		if err == nil && len(lr.Sorted()) == 0 {
			er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, ts)
			if err != nil {
				return "", fmt.Errorf("elect leaders: %w", err)
			}
			for _, ps := range er {
				for _, r := range ps {
					if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
						return "", fmt.Errorf("elect %s/%d: %w", r.Topic, r.Partition, r.Err)
					}
				}
			}
			now, err := adm.Metadata(ctx, topic)
			if err == nil {
				done := true
				for p, pd := range now.Topics[topic].Partitions {
					done = done && pd.Leader == want[p]
				}
				if done {
					break
				}
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("leaders did not move (want %v)", want)
		case <-time.After(250 * time.Millisecond):
		}
	}
	var parts []string
	for p := int32(0); p < int32(len(want)); p++ {
		parts = append(parts, fmt.Sprintf("%d:%d->%d", p, old[p], want[p]))
	}
	return strings.Join(parts, " "), nil
}
