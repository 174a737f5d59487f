package single

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/splitmerge"
	"github.com/inorder-proxy/inorder/wire"
)

// produceKey is Produce's API key, the one request counted by its entries.
const produceKey = 0

// What a request costs in the single topology beyond its frame, reserved in
// the memory budget before kmsg decodes it: the decoded request, its parts
// (split copies every entry into the part that carries it), the parts'
// answers decoded, and the merged response before it is encoded. None of
// it aliases the frames the budget already counts but byte fields (records),
// so it grows with the entries a request names, not with its bytes: a
// Produce v9 of 1,000,000 partitions is a 6 MB frame and about 600 MB of
// structs. The frames of the parts and of their answers are charged as
// they are encoded and read, and the merged response's frame at its exact
// size when it is encoded (finish).
//
// The constants are measured (TestSplitCostCoversWhatSplitAllocates checks
// them against the allocations of decode, split, answers and merge for
// several shapes, with a margin for slices grown by appending): per
// Produce partition 440-550 bytes, per topic about 500 more, and per byte
// of any other request up to about 30 (a Fetch entry of 33 bytes decodes,
// splits and is answered into about 900 bytes of structs; a ListOffsets
// or DeleteRecords entry of 13-17 bytes decodes and splits into about
// 300).
const (
	splitCostBase         = 8 << 10
	splitCostPerPartition = 768
	splitCostPerTopic     = 768
	splitCostPerByte      = 48
	// A topic name is copied by the decode, the parts share it, and the
	// answers and the merged response copy it again.
	splitCostPerNameByte = 4
)

// SplitCost returns what a request of key and version, whose body is body,
// costs beyond its frame once decoded, split, answered and merged. A
// Produce is counted by its partitions and topics, which its scanner finds
// without decoding it (its records alias the frame and cost nothing more);
// any other request, and a Produce the scanner cannot read, by its bytes.
func SplitCost(key, version int16, body []byte) int64 {
	if key == produceKey {
		var s wire.ProduceScan
		if s.Reset(body, version) == nil {
			var parts, topics, names int64
			var last wire.Partition
			for p, ok := s.Next(); ok; p, ok = s.Next() {
				parts++
				if topics == 0 || p.TopicID != last.TopicID || string(p.Topic) != string(last.Topic) {
					topics++
					names += int64(len(p.Topic))
					last = p
				}
			}
			if s.Err() == nil {
				return splitCostBase + parts*splitCostPerPartition + topics*splitCostPerTopic + names*splitCostPerNameByte
			}
		}
	}
	return splitCostBase + int64(len(body))*splitCostPerByte
}

// fetchShareOf is the fraction of the budget a Fetch's parts may ask for
// together: a merged answer encoded whole is held beside its parts'
// answers, twice its size, and other connections' answers need room too.
// One the client takes in pieces (lean) holds only its head beside them,
// and its parts may ask for twice as much.
const fetchShareOf = 4

// FetchShare lowers the maximum bytes each part of a Fetch asks for, so
// that their answers together ask for at most what the client asked for,
// and at most 1/fetchShareOf of the budget: the merged answer is then no
// larger than the client asked for (clients refuse answers far above it:
// franz-go reads 100 MiB at most), and fits beside its parts however much
// the client asked for. A broker still answers the first record batch of
// a part whatever its size (KIP-74), so a consumer always makes progress;
// it reads in more fetches what it asked to read in one, as from a broker
// with a smaller fetch.max.bytes.
func FetchShare(plan *splitmerge.Plan, b *budget.Budget, lean bool) {
	share := int64(fetchShareOf)
	if lean {
		share /= 2
	}
	if len(plan.Parts) == 0 {
		return
	}
	for i := range plan.Parts {
		fr, ok := plan.Parts[i].Request.(*kmsg.FetchRequest)
		if !ok {
			continue
		}
		// Every part carries the client's maximum.
		total := int64(fr.MaxBytes)
		if b != nil {
			total = min(total, b.Limit()/share)
		}
		if each := total / int64(len(plan.Parts)); int64(fr.MaxBytes) > each {
			fr.MaxBytes = int32(max(each, 1))
		}
	}
}

// EncodedSize returns the size of fr's frame as wire.AppendResponse
// encodes it, without copying its records: the response is encoded with
// no records (each a null), and each record set's length added back with
// its length prefix's.
func EncodedSize(fr *kmsg.FetchResponse, correlation int32, flexible bool) int {
	var saved [][]byte
	add := 0
	compact := fr.Version >= 12
	for i := range fr.Topics {
		t := &fr.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			saved = append(saved, p.RecordBatches)
			if p.RecordBatches != nil {
				n := len(p.RecordBatches)
				if compact {
					// A null is a uvarint 0; n bytes a uvarint n+1.
					add += uvarintLen(uint64(n)+1) - 1 + n
				} else {
					// An int32 either way.
					add += n
				}
				p.RecordBatches = nil
			}
		}
	}
	scratch := wire.Get(4 << 10)
	scratch.B = wire.AppendResponse(scratch.B[:0], correlation, flexible, fr.AppendTo)
	size := len(scratch.B) + add
	wire.Put(scratch)
	k := 0
	for i := range fr.Topics {
		t := &fr.Topics[i]
		for j := range t.Partitions {
			t.Partitions[j].RecordBatches = saved[k]
			k++
		}
	}
	return size
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
