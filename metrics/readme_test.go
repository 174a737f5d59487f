package metrics

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEDocumentsLabelValues checks that README.md names, in
// backquotes, every value each label can take, `other` included, so that
// an operator reading a series finds what it means.
func TestREADMEDocumentsLabelValues(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	sets := map[string][]string{
		"listener": strs(listeners), "close reason": strs(closeReasons), "reject reason": strs(rejectReasons),
		"pause reason": strs(pauseReasons), "write phase": strs(writePhases), "violation": strs(violations),
		"dial error": strs(dialErrors), "protocol error": strs(protocolErrors), "reload result": strs(reloadResults),
		"tls side": strs(sides), "tls failure": strs(tlsFailures), "sasl result": strs(results),
		"sasl mechanism": saslMechanisms, "streamed kind": strs(streamedKinds),
		"acl resource": ACLResources, "acl operation": append(ACLOperations, "other"),
	}
	for set, values := range sets {
		for _, v := range values {
			if !strings.Contains(readme, "`"+v+"`") {
				t.Errorf("README.md does not name the %s label value `%s`", set, v)
			}
		}
	}
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
