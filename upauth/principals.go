package upauth

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"gopkg.in/yaml.v3"

	"github.com/inorder-proxy/inorder/config"
)

// Principals maps the principals the proxy authenticates (User:alice) to
// the credentials each reaches the upstream with, read from the YAML file
// of --upstream-principal-credentials:
//
//	principals:
//	  User:alice:
//	    mechanism: SCRAM-SHA-512
//	    username: app-alice
//	    passwordFile: /run/secrets/alice
//	  User:bob:
//	    mechanism: PLAIN
//	    username: app-bob
//	    passwordEnv: BOB_UPSTREAM_PASSWORD
//	  User:reports:
//	    mechanism: OAUTHBEARER
//	    tokenFile: /run/secrets/reports-token
//
// A secret is named, never written: the file is read by more people and
// tools than a secret should be. The mapping is swapped whole by Reload, so
// a connection sees one version of it; a connection keeps the credentials
// it was dialled with, and secrets are read at each authentication as the
// proxy's own are.
type Principals struct {
	path   string
	getenv func(string) string
	m      atomic.Pointer[map[string]*Authenticator]
	mu     sync.Mutex // one Reload at a time, so that the last file read wins
}

// LoadPrincipals reads path; every entry's secret must read now. getenv
// reads the environment; nil means os.Getenv.
func LoadPrincipals(path string, getenv func(string) string) (*Principals, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	p := &Principals{path: path, getenv: getenv}
	if err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// File is the file the mapping is read from.
func (p *Principals) File() string { return p.path }

// Len is the number of principals mapped.
func (p *Principals) Len() int { return len(*p.m.Load()) }

// For returns the credentials mapped to principal, nil when there are none.
func (p *Principals) For(principal string) *Authenticator {
	return (*p.m.Load())[principal]
}

// Reload re-reads the file. On an error the mapping read before is kept:
// a file caught half-edited changes nobody's credentials.
func (p *Principals) Reload() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	data, err := os.ReadFile(p.path)
	if err != nil {
		return err
	}
	m, err := parsePrincipals(p.path, data, p.getenv)
	if err != nil {
		return err
	}
	p.m.Store(&m)
	return nil
}

// entryKeys are the keys of one principal's entry.
var entryKeys = []string{"mechanism", "username", "passwordFile", "passwordEnv", "tokenFile"}

var mechanisms = []string{config.MechanismPlain, config.MechanismScramSHA256, config.MechanismScramSHA512, config.MechanismOAuthBearer}

// inlineSecrets are keys that would put a secret in the file itself.
var inlineSecrets = []string{"password", "token", "secret"}

func parsePrincipals(name string, data []byte, getenv func(string) string) (map[string]*Authenticator, error) {
	fail := func(n *yaml.Node, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", name, n.Line, fmt.Sprintf(format, args...))
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: not YAML: %v", name, redact(err))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a mapping with the key principals", name)
	}
	top := doc.Content[0]
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if k := top.Content[i]; k.Value != "principals" {
			return nil, fail(k, "unknown key %q: want principals", trim(k.Value))
		}
		list = top.Content[i+1]
	}
	out := make(map[string]*Authenticator)
	if list == nil || list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
		return out, nil
	}
	if list.Kind != yaml.MappingNode {
		return nil, fail(list, "principals: want a mapping of principal to credentials")
	}
	for i := 0; i+1 < len(list.Content); i += 2 {
		k, v := list.Content[i], list.Content[i+1]
		principal := k.Value
		typ, user, ok := strings.Cut(principal, ":")
		if !ok || typ == "" || user == "" {
			return nil, fail(k, "principal %q: want Type:name, as User:alice", trim(principal))
		}
		if _, dup := out[principal]; dup {
			return nil, fail(k, "principal %s is mapped twice", principal)
		}
		a, err := parseEntry(v, getenv, name+" entry "+principal, func(n *yaml.Node, format string, args ...any) error {
			return fail(n, "%s: %s", principal, fmt.Sprintf(format, args...))
		})
		if err != nil {
			return nil, err
		}
		out[principal] = a
	}
	return out, nil
}

func parseEntry(v *yaml.Node, getenv func(string) string, source string, fail func(*yaml.Node, string, ...any) error) (*Authenticator, error) {
	if v.Kind != yaml.MappingNode {
		return nil, fail(v, "want a mapping with mechanism, username and passwordFile, passwordEnv or tokenFile")
	}
	f := make(map[string]string)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if slices.Contains(inlineSecrets, k.Value) {
			return nil, fail(k, "%s: secrets are not written in this file; name one with passwordFile, passwordEnv or tokenFile", k.Value)
		}
		if !slices.Contains(entryKeys, k.Value) {
			return nil, fail(k, "unknown key %q: want one of %s", trim(k.Value), strings.Join(entryKeys, ", "))
		}
		if val.Kind != yaml.ScalarNode {
			return nil, fail(val, "%s: want a string", k.Value)
		}
		if _, dup := f[k.Value]; dup {
			return nil, fail(k, "%s is given twice", k.Value)
		}
		f[k.Value] = val.Value
	}
	o := Options{Mechanism: f["mechanism"], Username: f["username"], PasswordFile: f["passwordFile"],
		PasswordEnv: f["passwordEnv"], TokenFile: f["tokenFile"], Getenv: getenv, Source: source}
	oauth := o.Mechanism == config.MechanismOAuthBearer
	switch {
	case !slices.Contains(mechanisms, o.Mechanism):
		return nil, fail(v, "mechanism %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", trim(o.Mechanism))
	case oauth && (o.Username != "" || o.PasswordFile != "" || o.PasswordEnv != ""):
		return nil, fail(v, "OAUTHBEARER takes tokenFile only")
	case oauth && o.TokenFile == "":
		return nil, fail(v, "OAUTHBEARER needs tokenFile")
	case !oauth && o.TokenFile != "":
		return nil, fail(v, "tokenFile is for OAUTHBEARER; %s takes passwordFile or passwordEnv", trim(o.Mechanism))
	case !oauth && o.Username == "":
		return nil, fail(v, "username is required")
	case !oauth && (o.PasswordFile == "") == (o.PasswordEnv == ""):
		return nil, fail(v, "give exactly one of passwordFile and passwordEnv")
	}
	a, err := New(o)
	if err != nil {
		return nil, fail(v, "%v", err)
	}
	return a, nil
}

// trim bounds a value from the file quoted in an error.
func trim(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// redact keeps a YAML error's line and drops the text it quotes, which
// could be a secret written where it should not be.
func redact(err error) string {
	msg := err.Error()
	if i := strings.IndexAny(msg, "`'\""); i >= 0 {
		msg = strings.TrimSpace(msg[:i]) + " ..."
	}
	return msg
}
