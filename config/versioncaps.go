package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// VersionCaps caps the versions the proxy advertises to clients in
// ApiVersions: API key to highest version. A nil or empty map caps nothing.
type VersionCaps map[int16]int16

// String writes the caps as the flag takes them, by Kafka name and in key
// order: "Produce=9,Fetch=15".
func (v VersionCaps) String() string {
	keys := make([]int16, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = kmsg.NameForKey(k) + "=" + strconv.Itoa(int(v[k]))
	}
	return strings.Join(parts, ",")
}

// apiKeyByName finds an API key by its Kafka name (case-insensitive).
func apiKeyByName(name string) (int16, bool) {
	for k := int16(0); k < 1024; k++ {
		if kmsg.RequestForKey(k) != nil && strings.EqualFold(kmsg.NameForKey(k), name) {
			return k, true
		}
	}
	return 0, false
}

type versionCapsValue VersionCaps

func (v *versionCapsValue) String() string { return VersionCaps(*v).String() }
func (v *versionCapsValue) Type() string   { return "KEY=VERSION,..." }
func (v *versionCapsValue) Set(s string) error {
	caps := VersionCaps{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, ver, ok := strings.Cut(part, "=")
		if !ok {
			return expectation(fmt.Sprintf("must be KEY=VERSION pairs, like Fetch=15 (%q has no =)", part))
		}
		key, ok := apiKeyByName(strings.TrimSpace(name))
		if !ok {
			return expectation(fmt.Sprintf("names no API key in %q (use Kafka's names, like Fetch or Produce)", part))
		}
		n, err := strconv.ParseInt(strings.TrimSpace(ver), 10, 16)
		if err != nil || n < 0 {
			return expectation(fmt.Sprintf("has no version in %q (a number from 0)", part))
		}
		caps[key] = int16(n)
	}
	if len(caps) == 0 {
		caps = nil
	}
	*v = versionCapsValue(caps)
	return nil
}
