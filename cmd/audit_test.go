package cmd

import (
	"strings"
	"testing"
)

// TestAuditRefusedUntilServed checks that asking for an audit sink is
// refused at start, naming the setting, while the proxy records no events.
func TestAuditRefusedUntilServed(t *testing.T) {
	file := t.TempDir() + "/audit.log"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--upstream", "127.0.0.1:1", "--audit-file", file}, `--audit-file: "` + file + `" is not served yet`},
		{[]string{"serve", "--upstream", "127.0.0.1:1", "--audit-stdout"}, `--audit-stdout: "true" is not served yet`},
		{[]string{"dev", "--data-dir", "", "--audit-kafka-topic", "audit"}, `--audit-kafka-topic: "audit" is not served yet`},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "does not record audit events") {
			t.Errorf("%v: exit %d, %s", tc.args, code, stderr)
		}
	}
}
