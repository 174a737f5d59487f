package config

import (
	"github.com/spf13/pflag"

	"github.com/inorder-proxy/inorder/acl"
)

// ACL is the authorization of clients at the proxy. Its zero value checks
// nothing: every request is forwarded as the client sent it.
type ACL struct {
	// ACLFile is the YAML file of ACL bindings the proxy enforces,
	// re-read when it changes and on SIGHUP; a new rule applies to the
	// next request on every open connection. With it, a request no
	// binding allows is refused (Kafka's default). Empty: nothing is
	// checked.
	ACLFile string
	// SuperUsers are the principals allowed everything, in Kafka's
	// super.users syntax: User:alice;User:bob. Empty: none.
	SuperUsers string
}

func bindACLFlags(fs *pflag.FlagSet, a *ACL) {
	fs.StringVar(&a.ACLFile, "acl-file", a.ACLFile, "YAML file of ACLs enforced on clients, re-read when it changes; with it, what no ACL allows is denied (default: nothing is checked)")
	fs.StringVar(&a.SuperUsers, "super-users", a.SuperUsers, "principals allowed everything, as Kafka's super.users: User:a;User:b (needs --acl-file)")
}

func (c *Config) validateACL() error {
	a := &c.ACL
	if a.SuperUsers != "" {
		if a.ACLFile == "" {
			return invalid("super-users", a.SuperUsers, "needs --acl-file")
		}
		if _, err := acl.ParseSuperUsers(a.SuperUsers); err != nil {
			return invalid("super-users", a.SuperUsers, err.Error())
		}
	}
	if err := checkFile("acl-file", a.ACLFile, false); err != nil {
		return err
	}
	if a.ACLFile != "" {
		if _, err := acl.Load(a.ACLFile); err != nil {
			return invalid("acl-file", a.ACLFile, err.Error())
		}
	}
	return nil
}
