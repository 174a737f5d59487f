package rewrite

import (
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// notBrokerAddress lists response keys whose Host fields are not broker
// addresses, so they must pass through untouched.
var notBrokerAddress = map[int16]string{
	29: "DescribeACLs: ACL host pattern",
	31: "DeleteACLs: ACL host pattern",
	88: "StreamsGroupHeartbeat: Kafka Streams application endpoint",
	89: "StreamsGroupDescribe: Kafka Streams application endpoint",
}

// TestEveryHostIsAccountedFor walks every kmsg response type and fails when
// one carries a Host field that is neither rewritten nor known to be
// something else, so a kmsg upgrade that adds endpoints cannot slip by.
func TestEveryHostIsAccountedFor(t *testing.T) {
	for key := int16(0); key < 1000; key++ {
		resp := kmsg.ResponseForKey(key)
		if resp == nil {
			continue
		}
		paths := hostPaths(reflect.TypeOf(resp).Elem(), reflect.TypeOf(resp).Elem().Name(), nil)
		if len(paths) == 0 {
			continue
		}
		_, other := notBrokerAddress[key]
		handled := slices.Contains(rewrittenKeys, key)
		if !handled && !other {
			t.Errorf("key %d (%s) carries hosts at %v but is neither rewritten nor excluded", key, kmsg.NameForKey(key), paths)
		}
		if handled && other {
			t.Errorf("key %d is both rewritten and excluded", key)
		}
	}
}

func hostPaths(typ reflect.Type, path string, seen []reflect.Type) []string {
	if slices.Contains(seen, typ) {
		return nil
	}
	seen = append(seen, typ)
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		ft := f.Type
		for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case f.Name == "Host":
			out = append(out, path+"."+f.Name)
		case ft.Kind() == reflect.Struct:
			out = append(out, hostPaths(ft, path+"."+f.Name, seen)...)
		}
	}
	return out
}
