package rewrite

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestNeeds(t *testing.T) {
	for _, c := range []struct {
		name     string
		key, ver int16
		want     bool
	}{
		{"Produce before KIP-951", 0, 9, false},
		{"Produce KIP-951", 0, 10, true},
		{"Produce max", 0, 13, true},
		{"Fetch before KIP-951", 1, 15, false},
		{"Fetch KIP-951", 1, 16, true},
		{"Fetch max", 1, 18, true},
		{"Fetch v0", 1, 0, false},
		{"ListOffsets", 2, 0, false},
		{"Metadata v0", 3, 0, true},
		{"Metadata v13", 3, 13, true},
		{"OffsetCommit", 8, 9, false},
		{"FindCoordinator v0", 10, 0, true},
		{"FindCoordinator v6", 10, 6, true},
		{"JoinGroup", 11, 9, false},
		{"ApiVersions v0", 18, 0, true},
		{"ApiVersions v5", 18, 5, true},
		{"DescribeConfigs v0", 32, 0, true},
		{"DescribeConfigs v4", 32, 4, true},
		{"DescribeACLs hosts are ACL patterns", 29, 3, false},
		{"DeleteACLs hosts are ACL patterns", 31, 3, false},
		{"Vote v0", 52, 0, false},
		{"Vote v1", 52, 1, true},
		{"BeginQuorumEpoch v0", 53, 0, false},
		{"BeginQuorumEpoch v1", 53, 1, true},
		{"EndQuorumEpoch v1", 54, 1, true},
		{"DescribeQuorum v1", 55, 1, false},
		{"DescribeQuorum v2", 55, 2, true},
		{"FetchSnapshot v0", 59, 0, false},
		{"FetchSnapshot v1", 59, 1, true},
		{"DescribeCluster v0", 60, 0, true},
		{"DescribeCluster v2", 60, 2, true},
		{"ShareFetch v0", 78, 0, true},
		{"ShareAcknowledge v2", 79, 2, true},
		{"UpdateRaftVoter v0", 82, 0, true},
		{"StreamsGroupHeartbeat", 88, 0, false},
		{"StreamsGroupDescribe", 89, 0, false},
		{"negative version", 3, -1, false},
		{"negative key", -1, 0, false},
		{"unknown key", 9999, 0, false},
	} {
		if got := Needs(c.key, c.ver); got != c.want {
			t.Errorf("%s: Needs(%d, %d) = %v, want %v", c.name, c.key, c.ver, got, c.want)
		}
	}
}

// TestNeedsOnlyRewrittenKeys checks Needs against every key kmsg knows:
// true only for the rewritten keys and ApiVersions.
func TestNeedsOnlyRewrittenKeys(t *testing.T) {
	known := map[int16]bool{18: true}
	for _, k := range rewrittenKeys {
		known[k] = true
	}
	for key := int16(0); key < 1000; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		some := false
		for v := int16(0); v <= req.MaxVersion(); v++ {
			some = some || Needs(key, v)
		}
		if some != known[key] {
			t.Errorf("key %d (%s): Needs true for some version = %v, want %v", key, kmsg.NameForKey(key), some, known[key])
		}
	}
}

func TestNeedsDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { Needs(1, 17) }); n != 0 {
		t.Errorf("Needs allocates %v times", n)
	}
}
