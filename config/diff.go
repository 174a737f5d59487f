package config

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Changed returns, in flag order, the names of the settings whose values
// differ between a and b, then the file-only keys that differ. It compares
// through the same flag bindings that read them, so every setting is
// covered, including ones added later.
func Changed(a, b Config) []string {
	fa, fb := pflag.NewFlagSet("a", pflag.ContinueOnError), pflag.NewFlagSet("b", pflag.ContinueOnError)
	BindFlags(fa, &a)
	BindFlags(fb, &b)
	var out []string
	fa.VisitAll(func(f *pflag.Flag) {
		if f.Value.String() != fb.Lookup(f.Name).Value.String() {
			out = append(out, f.Name)
		}
	})
	if a.Quotas.String() != b.Quotas.String() {
		out = append(out, KeyQuotas)
	}
	return out
}

// Keep sets each named setting of dst to its value in src. An unknown name
// is an error.
func Keep(dst *Config, src Config, names []string) error {
	fd, fs := pflag.NewFlagSet("dst", pflag.ContinueOnError), pflag.NewFlagSet("src", pflag.ContinueOnError)
	BindFlags(fd, dst)
	BindFlags(fs, &src)
	for _, n := range names {
		if n == KeyQuotas {
			dst.Quotas = src.Quotas
			continue
		}
		f := fs.Lookup(n)
		if f == nil {
			return fmt.Errorf("no setting %q", n)
		}
		if err := fd.Set(n, f.Value.String()); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	return nil
}

// Get returns the value of the named setting of c as its flag prints it,
// and false for an unknown name.
func Get(c Config, name string) (string, bool) {
	if name == KeyQuotas {
		return c.Quotas.String(), true
	}
	fs := pflag.NewFlagSet("get", pflag.ContinueOnError)
	BindFlags(fs, &c)
	f := fs.Lookup(name)
	if f == nil {
		return "", false
	}
	return f.Value.String(), true
}
