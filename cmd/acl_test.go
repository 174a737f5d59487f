package cmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// aclFile lets User:ANONYMOUS write the topics named.
func aclFile(topics ...string) string {
	s := "acls:\n"
	for _, topic := range topics {
		s += "  - {principal: User:ANONYMOUS, resourceType: TOPIC, resourceName: " + topic + ", operation: WRITE}\n"
	}
	return s
}

// TestServeEnforcesACLFile runs serve with acl-file from its --config
// file: a topic the file does not grant is refused, and granted once the
// file is rewritten while serve runs, on the client's open connections.
func TestServeEnforcesACLFile(t *testing.T) {
	kc := newBroker(t, kfake.SeedTopics(1, "a", "b"))
	dir := t.TempDir()
	acls := filepath.Join(dir, "acls.yaml")
	if err := os.WriteFile(acls, []byte(aclFile("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "inorder.yaml")
	if err := os.WriteFile(cfg, []byte("acl-file: "+acls+"\nsuper-users: User:admin;User:ops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, _, errOut, stop := startStreams(t, "serve", "--listen", "127.0.0.1:0", "--upstream", kc.ListenAddrs()[0], "--config", cfg)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "a", Value: []byte("1")}).FirstErr(); err != nil {
		t.Fatalf("produce to a: %v\n%s", err, errOut.String())
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("1")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	waitText(t, errOut, "request denied by the ACL file")
	if err := os.WriteFile(acls+".new", []byte(aclFile("a", "b")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(acls+".new", acls); err != nil {
		t.Fatal(err)
	}
	waitText(t, errOut, "ACLs loaded")
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("2")}).FirstErr(); err != nil {
		t.Fatalf("produce to b once granted: %v\n%s", err, errOut.String())
	}
	// A file that no longer parses keeps the rules loaded.
	if err := os.WriteFile(acls, []byte("acls: [{principal: nobody}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitText(t, errOut, "ACLs not reloaded")
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("3")}).FirstErr(); err != nil {
		t.Fatalf("produce to b after a bad file: %v", err)
	}
}

// TestServeACLFlagsValidated: the ACL flags are checked as usage errors.
func TestServeACLFlagsValidated(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "acls.yaml")
	if err := os.WriteFile(good, []byte(aclFile("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("acls: [{principal: alice}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--super-users", "User:admin"}, "--super-users: \"User:admin\" needs --acl-file"},
		{[]string{"--acl-file", good, "--super-users", "admin"}, "--super-users"},
		{[]string{"--acl-file", filepath.Join(dir, "missing.yaml")}, "--acl-file"},
		{[]string{"--acl-file", bad}, "--acl-file"},
	} {
		root, _, errOut := newCLI(append([]string{"serve", "--upstream", "127.0.0.1:1", "--listen", "127.0.0.1:0"}, tc.args...)...)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error()+errOut.String(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %T is not a usage error", tc.args, err)
		}
	}
}
