package authz

import (
	"bytes"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/acl"
)

// The parts of the differential that need no Kafka, checked wherever
// go test runs.

// TestACLFile: the file both authorizers get parses, and every binding
// names an operation Kafka accepts on its resource type, so that Kafka's
// CreateAcls takes them all.
func TestACLFile(t *testing.T) {
	set, err := acl.Load(aclFile)
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() == 0 {
		t.Fatal("no ACLs")
	}
	for _, b := range set.Bindings() {
		if !acl.Supported(b.ResourceType, b.Operation) {
			t.Errorf("%v: Kafka does not take %v on %v", b, b.Operation, b.ResourceType)
		}
	}
	if n := len(creations(set)); n != set.Len() {
		t.Errorf("%d creations for %d bindings", n, set.Len())
	}
}

// TestBatch: the record batch the cases produce decodes, and its length
// and CRC are what a broker checks.
func TestBatch(t *testing.T) {
	for _, txn := range []bool{false, true} {
		raw := batch(7, 1, 0, txn)
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		if int(b.Length) != len(raw)-12 {
			t.Errorf("length %d, batch of %d bytes", b.Length, len(raw))
		}
		if got := int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))); got != b.CRC {
			t.Errorf("CRC %x, want %x", b.CRC, got)
		}
		if b.NumRecords != 1 || (b.Attributes&0x10 != 0) != txn {
			t.Errorf("records %d, attributes %x (transactional %v)", b.NumRecords, b.Attributes, txn)
		}
		var r kmsg.Record
		if err := r.ReadFrom(b.Records); err != nil || !bytes.Equal(r.Value, []byte("v")) {
			t.Errorf("record %+v: %v", r, err)
		}
	}
}

// TestTable: every case names a principal of the authz node and expects
// something; names are unique per principal, so that a difference names
// one case.
func TestTable(t *testing.T) {
	users := map[string]bool{"admin": true, "alice": true, "bob": true, "carol": true, "dave": true}
	seen := map[string]bool{}
	for i, c := range cases() {
		if !users[c.user] && c.password == "" {
			t.Errorf("case %d %q: unknown principal %q", i, c.name, c.user)
		}
		if len(c.want) == 0 || c.do == nil {
			t.Errorf("case %d %q: nothing to run or to expect", i, c.name)
		}
		if k := c.user + " " + c.name; seen[k] {
			t.Errorf("case %d: %q as %s twice", i, c.name, c.user)
		} else {
			seen[k] = true
		}
		for k := range c.want {
			if strings.TrimSpace(k) == "" {
				t.Errorf("case %d %q: an empty key", i, c.name)
			}
		}
	}
}
