package config

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// FlagConfig is the name of the flag that points at a YAML file.
const FlagConfig = "config"

// BindFlags registers one flag per Config field on fs, each writing into c.
// YAML files use the same names (see Resolve), so a flag and a file key
// never disagree on spelling or parsing.
func BindFlags(fs *pflag.FlagSet, c *Config) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "bootstrap listener HOST:PORT")
	fs.Var((*listValue)(&c.Upstreams), "upstream", "upstream bootstrap addresses HOST:PORT[,HOST:PORT...]")
	fs.StringVar(&c.AdvertisedHost, "advertised-host", c.AdvertisedHost, "host written into rewritten broker addresses (default: the listen host)")
	fs.IntVar(&c.NodePortBase, "node-port-base", c.NodePortBase, "port of node 0's listener; node N listens on base+N (default: bootstrap port + 1)")
	bindTopologyFlags(fs, c)
	fs.Var((*orderingValue)(&c.UpstreamOrdering), "upstream-ordering", "what the upstream keeps: none (assume nothing) or connection (per-connection order)")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", c.MaxInFlight, "requests one connection may have in flight before the proxy stops reading it")
	fs.Var((*sizeValue)(&c.MaxBufferedBytes), "max-buffered-bytes", "bytes one connection may hold before the proxy stops reading it")
	fs.Var((*size32Value)(&c.MaxRequestSize), "max-request-size", "largest request frame accepted from a client")
	fs.Var((*size32Value)(&c.MaxResponseSize), "max-response-size", "largest response frame accepted from the upstream")
	fs.DurationVar(&c.DialTimeout, "dial-timeout", c.DialTimeout, "bound on connecting to the upstream")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", c.ShutdownGrace, "time in-flight responses may take to drain on shutdown")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.Var((*sizeValue)(&c.MaxMemory), "max-memory", "request and response bytes and request state held across all connections; past it connections stop being read")
	fs.IntVar(&c.MaxConnections, "max-connections", c.MaxConnections, "client connections open at once over all listeners; past it new connections are closed")
	bindQuotaFlags(fs, c)
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "close a client connection with nothing in flight and nothing sent for this long (0 disables)")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "time a request frame may take to arrive once its first byte has (0 disables)")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "close a client connection that accepts no byte of a response for this long (0 disables)")
	fs.BoolVar(&c.ExposeControllers, "expose-controllers", c.ExposeControllers, "open listeners relaying to the KRaft controllers named in responses")
	fs.Var((*listValue)(&c.AllowUpstream), "allow-upstream", "hosts, *.domain patterns or CIDR ranges that advertised broker addresses must match (empty: any)")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")
	fs.StringVar(&c.AdminListen, "admin-listen", c.AdminListen, "HOST:PORT of the admin endpoint (/metrics, /healthz, /readyz); empty: none")
	fs.BoolVar(&c.AdminPprof, "admin-pprof", c.AdminPprof, "serve /debug/pprof/ on the admin endpoint")
	fs.Var((*versionCapsValue)(&c.APIVersionCap), "api-version-cap", "highest versions advertised to clients, by Kafka name: KEY=VERSION[,KEY=VERSION...], e.g. Fetch=15")
	bindSecurityFlags(fs, &c.Security)
	bindAuditFlags(fs, &c.Audit)
	fs.BoolVar(&c.Verify, "verify", c.Verify, "count the ordering violations the upstream commits (responses out of order, Produce offsets out of write order, sequence errors)")
	fs.StringVar(&c.Report, "report", c.Report, "with --verify, write what it saw to this file at exit: JUnit XML if it ends in .xml, else JSON")
	fs.BoolVar(&c.FailOnViolation, "fail-on-violation", c.FailOnViolation, "with --verify, exit with status 3 at shutdown if any violation was seen")
}

// refusedKey is the pflag annotation that marks a setting a command
// refuses; its value is the reason.
const refusedKey = "inorder-refused"

// Refuse hides the settings names from fs's --help and makes Resolve refuse
// each, given as a flag or as a --config key, with reason (which follows
// the value: "is not used by dev"), for a command that binds every setting
// but takes only some.
func Refuse(fs *pflag.FlagSet, reason string, names ...string) {
	for _, n := range names {
		f := fs.Lookup(n)
		f.Hidden = true
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[refusedKey] = []string{reason}
	}
}

// refused returns why the command of fs refuses the setting name, or "".
func refused(fs *pflag.FlagSet, name string) string {
	if fs == nil {
		return ""
	}
	if f := fs.Lookup(name); f != nil && len(f.Annotations[refusedKey]) > 0 {
		return f.Annotations[refusedKey][0]
	}
	return ""
}

// Resolve builds the effective configuration: base, then the YAML file named
// by the --config flag if set, then every flag set on the command line.
// Keys in the file carry the flag names; an unknown key or a bad value is an
// error naming the file, the key, the value and what was expected. The
// result is validated, then given to checks, a command's own rules for the
// settings; an error of either that is a *FieldError naming a setting by
// its key is worded with the setting as it was given (`--flag`, or the
// file, its line and its key) and its value as it was written.
func Resolve(fs *pflag.FlagSet, base Config, checks ...func(*Config) error) (Config, error) {
	cfg := base
	file := ""
	if f := fs.Lookup(FlagConfig); f != nil {
		file = f.Value.String()
	}
	// typed holds each setting given, as it was written; fromFile the
	// ones whose value the file gave.
	typed := map[string]string{}
	fromFile := map[string]bool{}
	var keys map[string]fileValue
	into := pflag.NewFlagSet("resolve", pflag.ContinueOnError)
	BindFlags(into, &cfg)
	if file != "" {
		var err error
		if keys, err = loadFile(file, into, fs, &cfg); err != nil {
			return Config{}, err
		}
		for k, v := range keys {
			typed[k], fromFile[k] = v.text, true
		}
	}
	var err error
	fs.Visit(func(f *pflag.Flag) {
		if err != nil || into.Lookup(f.Name) == nil {
			return
		}
		text, source := typedOf(f)
		if source != "" {
			return // set from the file by loadFile, already applied
		}
		if why := refused(fs, f.Name); why != "" {
			err = &FieldError{Field: "--" + f.Name, Value: text, Reason: why}
			return
		}
		typed[f.Name], fromFile[f.Name] = text, false
		if e := into.Set(f.Name, text); e != nil {
			err = flagValueError(into.Lookup(f.Name), text, e)
		}
	})
	if err != nil {
		return Config{}, err
	}
	err = cfg.Validate()
	for _, check := range checks {
		if err != nil {
			break
		}
		err = check(&cfg)
	}
	if err != nil {
		var fe *FieldError
		if !errors.As(err, &fe) {
			return Config{}, err
		}
		if f := into.Lookup(fe.Field); f != nil && f.Value.Type() != "list" {
			// A list's error names the entry at fault; any other setting's
			// names its value as written, or as --help shows it.
			fe.Value = f.Value.String()
			if t, ok := typed[fe.Field]; ok {
				fe.Value = t
			}
		}
		if fromFile[fe.Field] {
			return Config{}, fmt.Errorf("config file %s:%d: %w", file, keys[fe.Field].line, err)
		}
		fe.Field = "--" + fe.Field
		return Config{}, err
	}
	return cfg, nil
}

// fileValue is a key's value in the config file as written, and the
// line of its key.
type fileValue struct {
	text string
	line int
}

// loadFile sets the flags of into from the YAML file at path and returns
// the keys it set with their values as written. A key that is none of
// into's flags may name one of the command's own flags in cmdFlags (dev's
// data-dir, say), which it sets unless the command line already did, so
// that every flag has its key. The quotas list, a key with no flag, goes
// straight into cfg. Every error names the file and the line, as
// `path:line`, the way compilers and editors read a place in a file.
func loadFile(path string, into, cmdFlags *pflag.FlagSet, cfg *Config) (map[string]fileValue, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, &FieldError{Field: "--" + FlagConfig, Value: path, Reason: "cannot be read: " + FileReason(err)}
	}
	var doc map[string]yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, yamlError(path, raw, err)
	}
	keyLine := keyLines(raw)
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	// In the file's order, so that of two mistakes the first is reported.
	sort.Slice(keys, func(i, j int) bool {
		if keyLine[keys[i]] != keyLine[keys[j]] {
			return keyLine[keys[i]] < keyLine[keys[j]]
		}
		return keys[i] < keys[j]
	})
	set := make(map[string]fileValue, len(keys))
	for _, k := range keys {
		node := doc[k]
		line, ok := keyLine[k]
		if !ok {
			line = node.Line
		}
		place := fmt.Sprintf("%s:%d", path, line)
		at := "config file " + place
		if k == KeyQuotas {
			if err := loadQuotas(path, line, &node, cfg); err != nil {
				return nil, err
			}
			set[k] = fileValue{text: cfg.Quotas.String(), line: line}
			continue
		}
		dst := into
		f := into.Lookup(k)
		if f == nil && cmdFlags != nil && k != FlagConfig {
			dst, f = cmdFlags, cmdFlags.Lookup(k)
		}
		if f == nil {
			if near := Suggest(k, fileKeys(into, cmdFlags)); near != "" {
				return nil, fmt.Errorf("%s: unknown key %q (did you mean %q?)", at, k, near)
			}
			return nil, fmt.Errorf("%s: unknown key %q", at, k)
		}
		val, bad, err := scalarOrList(&node)
		if err != nil {
			return nil, fmt.Errorf("config file %s:%d: %s: %w", path, bad, k, err)
		}
		if why := refused(cmdFlags, k); why != "" {
			return nil, fmt.Errorf("%s: %w", at, &FieldError{Field: k, Value: val, Reason: why})
		}
		if dst == cmdFlags && f.Changed {
			continue // the command line wins
		}
		if err := dst.Set(k, val); err != nil {
			return nil, fmt.Errorf("%s: %w", at, valueError(f, k, val, err))
		}
		if dst == cmdFlags {
			markSource(f, place)
		}
		set[k] = fileValue{text: val, line: line}
	}
	return set, nil
}

// keyLines returns the line of each top-level key of a YAML mapping: the
// values' nodes give their own lines, which for a list on the lines below
// its key is not where the key is.
func keyLines(raw []byte) map[string]int {
	lines := map[string]int{}
	var root yaml.Node
	if yaml.Unmarshal(raw, &root) != nil || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return lines
	}
	m := root.Content[0].Content
	for i := 0; i+1 < len(m); i += 2 {
		if _, dup := lines[m[i].Value]; !dup {
			lines[m[i].Value] = m[i].Line
		}
	}
	return lines
}

// fileKeys are the keys a config file may hold for the command of
// cmdFlags: every setting into binds and the command's own flags, less
// those the command refuses or hides and the file's own flag.
func fileKeys(into, cmdFlags *pflag.FlagSet) []string {
	var names []string
	into.VisitAll(func(f *pflag.Flag) {
		if refused(cmdFlags, f.Name) == "" {
			names = append(names, f.Name)
		}
	})
	names = append(names, fileOnly...)
	if cmdFlags != nil {
		cmdFlags.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != FlagConfig && into.Lookup(f.Name) == nil {
				names = append(names, f.Name)
			}
		})
	}
	return names
}

// scalarOrList returns a plain value, or a list's items joined by commas;
// else the line of the node at fault and what is wrong with it.
func scalarOrList(n *yaml.Node) (string, int, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, 0, nil
	case yaml.SequenceNode:
		parts := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return "", c.Line, errors.New("list items must be plain values")
			}
			parts = append(parts, c.Value)
		}
		return strings.Join(parts, ","), 0, nil
	default:
		return "", n.Line, errors.New("expected a value or a list")
	}
}

type listValue []string

func (v *listValue) String() string { return strings.Join(*v, ",") }
func (v *listValue) Type() string   { return "list" }
func (v *listValue) Set(s string) error {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	*v = out
	return nil
}

type orderingValue Ordering

func (v *orderingValue) String() string { return string(*v) }
func (v *orderingValue) Type() string   { return "mode" }
func (v *orderingValue) Set(s string) error {
	switch o := Ordering(s); o {
	case OrderingNone, OrderingConnection:
		*v = orderingValue(o)
		return nil
	}
	return expectation("must be none or connection")
}

// sizeUnits are the suffixes a size may carry, largest first. They are
// binary (1KiB is 1024 bytes), the way Kafka's own limits are usually
// written down.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// ParseSize reads a byte count: a plain integer or one with a B, KiB, MiB
// or GiB suffix. KB, MB and GB are refused, since some read them as powers
// of 1000 and others as powers of 1024; the error names the binary suffix
// to use instead. An error says what was expected and leaves naming the
// value to the caller.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	for _, amb := range []string{"KB", "MB", "GB"} {
		if strings.HasSuffix(strings.ToUpper(t), amb) {
			bin := amb[:1] + "iB"
			return 0, expectation(fmt.Sprintf("is ambiguous: write %s%s (powers of 1024) or the number of bytes",
				strings.TrimSpace(t[:len(t)-2]), bin))
		}
	}
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, expectation("is not a size (a number of bytes, or one with a B, KiB, MiB or GiB suffix, like 128MiB)")
	}
	return n * mult, nil
}

// FormatSize writes n the way ParseSize reads it, with the largest
// suffix that divides it exactly: 134217728 is 128MiB.
func FormatSize(n int64) string {
	for _, u := range sizeUnits[:3] {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// SizeVar defines a size flag on fs, read by ParseSize and shown in
// --help the way it is written (128MiB, not 134217728).
func SizeVar(fs *pflag.FlagSet, p *int64, name string, value int64, usage string) {
	*p = value
	fs.Var((*sizeValue)(p), name, usage)
}

type sizeValue int64

func (v *sizeValue) String() string { return FormatSize(int64(*v)) }
func (v *sizeValue) Type() string   { return "size" }
func (v *sizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

type size32Value int32

func (v *size32Value) String() string { return FormatSize(int64(*v)) }
func (v *size32Value) Type() string   { return "size" }
func (v *size32Value) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	if n > 1<<31-1 {
		return expectation("is too large: the most is 2147483647 bytes (2GiB less one byte)")
	}
	*v = size32Value(n)
	return nil
}
