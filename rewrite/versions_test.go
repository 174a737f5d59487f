package rewrite

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func apiKeys(resp *kmsg.ApiVersionsResponse) [][3]int16 {
	var out [][3]int16
	for _, k := range resp.ApiKeys {
		out = append(out, [3]int16{k.ApiKey, k.MinVersion, k.MaxVersion})
	}
	return out
}

func upstreamVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	for _, k := range [][3]int16{
		{0, 3, 12},     // Produce: below kmsg's max, kept as is
		{9999, 0, 4},   // unknown to kmsg: dropped
		{1, 4, 99},     // Fetch: clamped to kmsg's max
		{3, 0, 13},     // Metadata
		{82, 1, 3},     // UpdateRaftVoter: kmsg parses only v0, range empty
		{18, 0, 5},     // ApiVersions
		{-1, 0, 0},     // nonsense key
		{60, 0, 2},     // DescribeCluster
		{11, 2, 1},     // JoinGroup: upstream sent an empty range
		{78, 1, 2},     // ShareFetch
		{10, 0, 32767}, // FindCoordinator
	} {
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k[0], k[1], k[2]
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}

func TestClampVersions(t *testing.T) {
	resp := upstreamVersions()
	ClampVersions(resp, nil)
	want := [][3]int16{{0, 3, 12}, {1, 4, 18}, {3, 0, 13}, {18, 0, 5}, {60, 0, 2}, {78, 1, 2}, {10, 0, 6}}
	if got := apiKeys(resp); !slices.Equal(got, want) {
		t.Errorf("ClampVersions:\n got %v\nwant %v", got, want)
	}
}

func TestClampVersionsAllow(t *testing.T) {
	resp := upstreamVersions()
	var asked []int16
	ClampVersions(resp, func(key int16) bool {
		asked = append(asked, key)
		return key != 78 && key != 3
	})
	want := [][3]int16{{0, 3, 12}, {1, 4, 18}, {18, 0, 5}, {60, 0, 2}, {10, 0, 6}}
	if got := apiKeys(resp); !slices.Equal(got, want) {
		t.Errorf("ClampVersions with allow:\n got %v\nwant %v", got, want)
	}
	if slices.Contains(asked, 9999) || slices.Contains(asked, -1) {
		t.Errorf("allow asked about keys kmsg cannot parse: %v", asked)
	}
}

// TestClampVersionsUnsupportedVersion clamps the v0 body a broker sends
// with UNSUPPORTED_VERSION, which lists only ApiVersions itself.
func TestClampVersionsUnsupportedVersion(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = 35
	ak := kmsg.NewApiVersionsResponseApiKey()
	ak.ApiKey, ak.MaxVersion = 18, 7
	resp.ApiKeys = append(resp.ApiKeys, ak)
	ClampVersions(resp, nil)
	if got, want := apiKeys(resp), [][3]int16{{18, 0, 5}}; !slices.Equal(got, want) || resp.ErrorCode != 35 {
		t.Errorf("got %v error %d, want %v error 35", got, resp.ErrorCode, want)
	}
}

func TestClampVersionsEmpty(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	ClampVersions(resp, func(int16) bool { return false })
	if len(resp.ApiKeys) != 0 {
		t.Errorf("got %v", apiKeys(resp))
	}
}

func TestCapVersions(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MinVersion: 3, MaxVersion: 12},
		{ApiKey: 1, MinVersion: 4, MaxVersion: 17},
		{ApiKey: 3, MinVersion: 0, MaxVersion: 12},
		{ApiKey: 18, MinVersion: 0, MaxVersion: 4},
	}
	CapVersions(resp, map[int16]int16{1: 15, 0: 2, 18: 9})
	want := [][3]int16{{1, 4, 15}, {3, 0, 12}, {18, 0, 4}}
	if got := apiKeys(resp); !slices.Equal(got, want) {
		t.Fatalf("capped to %v, want %v", got, want)
	}
}
