package acl

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRulesCoverEveryKey holds the table to every key kmsg knows, in key
// order, so that a kmsg upgrade with a new key fails here until the key
// has its row.
func TestRulesCoverEveryKey(t *testing.T) {
	if len(rules) != kmsg.MaxKey+1 {
		t.Fatalf("%d rules for keys 0 to %d", len(rules), kmsg.MaxKey)
	}
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		r, ok := RuleFor(k)
		if !ok || int16(r.Key) != k {
			t.Fatalf("key %d (%s): rule for %d", k, kmsg.NameForKey(k), r.Key)
		}
		if kmsg.RequestForKey(k) == nil {
			t.Fatalf("key %d unknown to kmsg", k)
		}
		for _, n := range r.Needs {
			for _, x := range append([]Need{n}, n.Or...) {
				if !Supported(x.Resource, x.Operation) {
					t.Errorf("%s: %s on %s is no operation Kafka's tools grant on that type", r.Key.Name(), x.Operation, x.Resource)
				}
				if (x.Scope == TheCluster) != (x.Resource == Cluster) {
					t.Errorf("%s: scope of %v", r.Key.Name(), x)
				}
			}
		}
	}
	if _, ok := RuleFor(kmsg.MaxKey + 1); ok {
		t.Fatal("a rule past the last key")
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b strings.Builder
	if err := WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| Produce (0) | Write on each Topic; Write on the TransactionalId (the records are transactional) |",
		"| InitProducerID (22) | Write on the TransactionalId (a transactional producer); TwoPhaseCommit on the TransactionalId (a transactional producer enabling two-phase commit, v6+); IdempotentWrite on the cluster (an idempotent producer), or Write on any Topic |",
		"| CreateTopics (19) | Create on each Topic, or Create on the cluster;",
		"| ApiVersions (18) | nothing |",
		"LeaderAndISR (4)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
