package proxy_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/inorder-proxy/inorder/config"
)

// TestSCRAMClosedByBrokerSaysWhy: a broker that refuses SCRAM credentials
// by closing the connection (kfake does, as some Kafka-compatible brokers
// do) leaves the proxy a failed dial on every bootstrap address. The log
// and the client's close reason say what happened, as whom, the usual
// causes and the settings to check, each event on one line, and never the
// password.
func TestSCRAMClosedByBrokerSaysWhy(t *testing.T) {
	const secret = "not-the-password-4f1c"
	kc := newCluster(t, kfake.EnableSASL(), kfake.Superuser(config.MechanismScramSHA256, "admin", "the-password"))
	addrs := kc.ListenAddrs()
	p := startProxy(t, config.OrderingNone, addrs, func(c *config.Config) {
		c.UpstreamSASLMechanism = config.MechanismScramSHA256
		c.UpstreamSASLUsername = "admin"
		c.UpstreamSASLPasswordFile = writeSecret(t, secret)
	})
	if err := pingThrough(t, p); err == nil {
		t.Fatal("a client was served with the wrong password")
	}
	p.log.waitFor(t, `msg="connection closed"`)
	log := p.log.String()

	// The text handler quotes a value holding a line break as \n: none
	// may appear, whatever the attribute.
	if strings.Contains(log, `\n`) || strings.Contains(log, `\r`) || strings.Contains(log, secret) {
		t.Errorf("a log attribute holds a line break or the password:\n%s", log)
	}
	const why = `the upstream closed the connection during SCRAM-SHA-256 authentication as user \"admin\" (SaslAuthenticate: EOF): ` +
		`usually a wrong password or user, or the mechanism not enabled on the broker's listener (some brokers close instead of answering a refusal); ` +
		`check --upstream-sasl-username, the password (--upstream-sasl-password-file or $INORDER_UPSTREAM_SASL_PASSWORD) and --upstream-sasl-mechanism`
	// Each bootstrap address was tried, and each failure is a connection
	// failure saying why, not "unreachable" and not a refusal.
	for _, addr := range addrs {
		want := `level=WARN msg="upstream closed the connection during SASL authentication; client connections to it are closed" upstream=` + addr +
			` failures=1 failures_total=1 err="` + why + `"`
		if !strings.Contains(log, want) {
			t.Errorf("no line\n\t%s\nin the log:\n%s", want, log)
		}
	}
	if strings.Contains(log, "upstream unreachable") || strings.Contains(log, "upstream authentication failed") {
		t.Errorf("the closed connection was logged as unreachable or as a refusal:\n%s", log)
	}
	// The client's close reason says it once, however many addresses
	// failed alike.
	// So does the start-up discovery, where kgo would otherwise read the
	// closed connection as a TLS mismatch.
	err := p.Discover(testContext(t, 20*time.Second))
	if plain := strings.ReplaceAll(why, `\"`, `"`); err == nil || !strings.Contains(err.Error(), plain) || strings.Contains(err.Error(), "TLS") || strings.ContainsAny(err.Error(), "\r\n") {
		t.Errorf("discovery: %v\nwant it to say\n\t%s", err, plain)
	}
	reason := regexp.MustCompile(`msg="connection closed" .* reason=("(?:[^"\\]|\\.)*")`).FindStringSubmatch(log)
	if reason == nil || reason[1] != `"upstream failed: `+why+`"` {
		t.Errorf("close reason %q, want\n\t%q\nlog:\n%s", reason, `"upstream failed: `+why+`"`, log)
	}
}
