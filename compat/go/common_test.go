package main

import (
	"os"
	"strings"
	"testing"
)

// The checks must be able to fail: each case breaks one property.
func TestVerify(t *testing.T) {
	sent := genRecs(0, 60, 3)
	read := func(rs []Rec) []Got {
		var out []Got
		off := map[int32]int64{}
		for _, r := range rs {
			out = append(out, Got{Seq: r.Seq, Partition: r.Partition, Offset: off[r.Partition]})
			off[r.Partition]++
		}
		return out
	}
	good := read(sent)
	if err := verify(sent, [][]Got{good}); err != nil {
		t.Fatalf("exact read rejected: %v", err)
	}
	// two members, each owning whole partitions
	var m0, m1 []Got
	for _, g := range good {
		if g.Partition == 0 {
			m0 = append(m0, g)
		} else {
			m1 = append(m1, g)
		}
	}
	if err := verify(sent, [][]Got{m0, m1}); err != nil {
		t.Fatalf("split read rejected: %v", err)
	}
	swapped := append([]Got(nil), good...)
	// records 0 and 3 are both in partition 0 ((s%50)%3 == 0)
	swapped[0], swapped[3] = swapped[3], swapped[0]
	cases := map[string][][]Got{
		"lost":       {good[1:]},
		"duplicated": {append(append([]Got(nil), good...), good[5])},
		"unexpected": {append(append([]Got(nil), good...), Got{Seq: 999, Partition: 0, Offset: 100})},
		"reordered":  {swapped},
		"two owners": {good[:30], good[30:]},
		"wrong part": {append([]Got{{Seq: 0, Partition: 1, Offset: 0}}, good[1:]...)},
	}
	want := map[string]string{"lost": "lost", "duplicated": "duplicate", "unexpected": "unexpected", "reordered": "sent order",
		"two owners": "read by members", "wrong part": "sent to partition"}
	for name, members := range cases {
		err := verify(sent, members)
		if err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: got %v, want an error mentioning %q", name, err, want[name])
		}
	}
}

func TestExpect(t *testing.T) {
	e, err := parseExpect("127.0.0.1:21100,127.0.0.1:21102-21104")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAddrs(e, []string{"127.0.0.1:21100", "127.0.0.1:21104"}); err != nil {
		t.Errorf("proxy addresses rejected: %v", err)
	}
	for _, bad := range []string{"127.0.0.1:29092", "127.0.0.1:21101", "localhost:21100", "127.0.0.1:21105"} {
		if err := checkAddrs(e, []string{"127.0.0.1:21100", bad}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if err := checkAddrs(e, nil); err == nil {
		t.Error("no addresses accepted")
	}
	if e, _ := parseExpect("-"); e != nil {
		t.Error(`"-" should disable the check`)
	}
}

// TestReadHosts: a hosts file gives each name its address, comments and
// blank lines aside, in any case; one naming nothing is refused.
func TestReadHosts(t *testing.T) {
	dir := t.TempDir()
	f := dir + "/hosts"
	os.WriteFile(f, []byte("# names of the proxy\n127.0.0.1 bootstrap.kafka.test Broker-1.kafka.test # two\n\n::1 broker-2.kafka.test\n"), 0o600)
	h, err := readHosts(f)
	if err != nil {
		t.Fatal(err)
	}
	if h["bootstrap.kafka.test"] != "127.0.0.1" || h["broker-1.kafka.test"] != "127.0.0.1" || h["broker-2.kafka.test"] != "::1" || len(h) != 3 {
		t.Fatalf("read %v", h)
	}
	os.WriteFile(f, []byte("# nothing\n"), 0o600)
	if _, err := readHosts(f); err == nil {
		t.Fatal("a hosts file naming nothing was accepted")
	}
}
