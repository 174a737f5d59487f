package hostile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/internal/hostile"
)

// TestKafkaSASLAnswersRefusals: through KafkaSASL a client with a wrong
// password reads SASL_AUTHENTICATION_FAILED, as from Kafka, where kfake
// alone closes the connection; the right password is served.
func TestKafkaSASLAnswersRefusals(t *testing.T) {
	k, err := hostile.NewKafkaSASL(kfake.EnableSASL(), kfake.Superuser("PLAIN", "user", "right"), kfake.Superuser("SCRAM-SHA-256", "user", "right"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ping := func(opt kgo.Opt) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), opt, kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	for name, opt := range map[string]func(pass string) kgo.Opt{
		"PLAIN": func(pass string) kgo.Opt { return kgo.SASL(plain.Auth{User: "user", Pass: pass}.AsMechanism()) },
		"SCRAM": func(pass string) kgo.Opt { return kgo.SASL(scram.Auth{User: "user", Pass: pass}.AsSha256Mechanism()) },
	} {
		before := k.Refusals()
		if err := ping(opt("wrong")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s, wrong password: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
		if k.Refusals() == before {
			t.Errorf("%s, wrong password: no refusal counted", name)
		}
		if err := ping(opt("right")); err != nil {
			t.Errorf("%s, right password: %v", name, err)
		}
	}
}
