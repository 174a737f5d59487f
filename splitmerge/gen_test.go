package splitmerge

import (
	"math/rand/v2"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// source hands out choices: from fuzz bytes while they last (zero after),
// or from a random generator.
type source struct {
	b   []byte
	rng *rand.Rand
}

func (s *source) byte() byte {
	if s.rng != nil {
		return byte(s.rng.Uint32())
	}
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *source) intn(n int) int { return int(s.byte()) % n }

// The names, ids and numbers requests and views draw from: few, so that
// entries collide, repeat and share leaders.
var (
	names      = []string{"a", "b", "c", ""}
	topicIDs   = [][16]byte{{1}, {2}, {3}, {}}
	partitions = []int32{0, 1, 2, 3, -1}
	brokerIDs  = []int32{1, 2, 3}
)

// fill sets every field of v (a pointer to a kmsg request struct) from s:
// lists of up to three entries, names and ids from the small sets above,
// config resources of the types the split tells apart. Fields a version
// does not have are set too; a kmsg round trip at the version drops them.
func fill(s *source, v reflect.Value, name string) {
	switch v.Kind() {
	case reflect.Pointer:
		if s.intn(4) == 0 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(s, v.Elem(), name)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Name == "Version" || f.Name == "UnknownTags" {
				continue
			}
			fill(s, v.Field(i), f.Name)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			// Records and other bytes: short, distinct.
			b := make([]byte, s.intn(4))
			for i := range b {
				b[i] = s.byte()
			}
			v.SetBytes(b)
			return
		}
		n := s.intn(5) - 1 // -1: nil
		if n < 0 {
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(s, v.Index(i), name)
		}
	case reflect.Array:
		if v.Type() == reflect.TypeFor[[16]byte]() {
			v.Set(reflect.ValueOf(topicIDs[s.intn(len(topicIDs))]))
		}
	case reflect.String:
		switch name {
		case "ResourceName":
			v.SetString([]string{"", "1", "2", "9", "a", "x"}[s.intn(6)])
		default:
			v.SetString(names[s.intn(len(names))])
		}
	case reflect.Bool:
		v.SetBool(s.intn(2) == 1)
	case reflect.Int8:
		switch name {
		case "ResourceType":
			v.SetInt([]int64{2, 4, 8, 16, 32}[s.intn(5)])
		case "CoordinatorType", "EndpointType":
			v.SetInt(int64(s.intn(3)))
		default:
			v.SetInt(int64(s.intn(4)) - 1)
		}
	case reflect.Int16:
		v.SetInt(int64(s.intn(4)) - 1)
	case reflect.Int32:
		switch name {
		case "Partition", "Partitions":
			v.SetInt(int64(partitions[s.intn(len(partitions))]))
		default:
			v.SetInt(int64(s.intn(4)) - 1)
		}
	case reflect.Int64:
		v.SetInt(int64(s.intn(1000)) - 1)
	}
}

// genRequest builds a request of key at version from s and returns it as
// a broker would read it: encoded and decoded with kmsg at that version.
func genRequest(s *source, key, version int16) kmsg.Request {
	req := kmsg.RequestForKey(key)
	fill(s, reflect.ValueOf(req).Elem(), "")
	req.SetVersion(version)
	return roundTripRequest(req)
}

func roundTripRequest(req kmsg.Request) kmsg.Request {
	out := kmsg.RequestForKey(req.Key())
	out.SetVersion(req.GetVersion())
	if err := out.ReadFrom(req.AppendTo(nil)); err != nil {
		panic(err)
	}
	return out
}

func roundTripResponse(resp kmsg.Response) kmsg.Response {
	out := resp.RequestKind().ResponseKind()
	out.SetVersion(resp.GetVersion())
	if err := out.ReadFrom(resp.AppendTo(nil)); err != nil {
		panic(err)
	}
	return out
}

// genView builds a Table from s: brokers 1-3 (none, now and then), each
// partition of each topic led by one of them, by nobody or unknown, and
// the coordinators of every name.
func genView(s *source) *Table {
	m := kmsg.NewPtrMetadataResponse()
	none := s.intn(16) == 0 // no broker known, so no leader or coordinator
	if !none {
		for _, b := range brokerIDs {
			m.Brokers = append(m.Brokers, kmsg.MetadataResponseBroker{NodeID: b})
		}
	}
	for i, name := range names[:3] {
		if s.intn(8) == 0 {
			continue // a topic the view does not know
		}
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID = kmsg.StringPtr(name), topicIDs[i]
		n := 1 + s.intn(4)
		for p := range int32(n) {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader = p, NoLeader
			if s.intn(6) != 0 && !none {
				mp.Leader = brokerIDs[s.intn(len(brokerIDs))]
			}
			t.Partitions = append(t.Partitions, mp)
		}
		m.Topics = append(m.Topics, t)
	}
	tb := new(Table)
	tb.ApplyMetadata(m, true)
	for _, typ := range []int8{CoordinatorGroup, CoordinatorTransaction} {
		for _, name := range names {
			if s.intn(6) != 0 && !none {
				tb.SetCoordinator(typ, name, brokerIDs[s.intn(len(brokerIDs))])
			}
		}
	}
	return tb
}
