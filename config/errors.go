package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// expectation is the error a value type's Set returns: what the value
// should have been, phrased to follow the quoted value ("must be none or
// connection"), so that the caller can say where the value came from.
type expectation string

func (e expectation) Error() string { return string(e) }

// valueError describes a value of flag f that did not parse, under key:
// the key, the value as written and what was expected, with no flag
// syntax or parser internals.
func valueError(f *pflag.Flag, key, value string, err error) error {
	return &FieldError{Field: key, Value: value, Reason: expected(f, err)}
}

// flagValueError is valueError for a value given on the command line.
func flagValueError(f *pflag.Flag, value string, err error) error {
	return valueError(f, "--"+f.Name, value, err)
}

// FlagError rewrites pflag's error for a flag value that did not parse
// ("invalid argument ... for ... flag: strconv.ParseInt: ...") into
// `--name: "value" expectation`; other errors pass through unchanged.
// Commands install it with cobra's SetFlagErrorFunc.
func FlagError(err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		return flagValueError(iv.GetFlag(), iv.GetValue(), iv.Unwrap())
	}
	return err
}

// expected says what a value of f's type looks like. The value types of
// this package say it themselves; pflag's built-in types are described by
// their type name.
func expected(f *pflag.Flag, err error) string {
	var e expectation
	if errors.As(err, &e) {
		return string(e)
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	switch t := f.Value.Type(); {
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		if errors.Is(err, strconv.ErrRange) {
			return "is out of range for a " + t
		}
		if strings.HasPrefix(t, "uint") {
			return "is not a whole number of zero or more"
		}
		return "is not a whole number"
	case strings.HasPrefix(t, "float"):
		return "is not a number"
	case t == "bool":
		return "is not true or false"
	case t == "duration":
		return "is not a duration (like 500ms, 30s, 5m or 1h)"
	}
	return err.Error()
}

// yamlLine finds the line number in yaml.v3's messages ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError rewrites a YAML syntax error in the file at path to name the
// line where the mistake is, as `config file path:line ("text"): what`.
// yaml.v3 reports the line where the enclosing block starts (a
// misindented list item on line 4 is reported on line 3), so the first
// prefix of the document that fails with the same complaint gives the
// offending line. Long documents and other errors are reported as they are.
func yamlError(path string, raw []byte, err error) error {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("config file %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	reported, _ := strconv.Atoi(m[1])
	line := reported
	lines := strings.SplitAfter(string(raw), "\n")
	if len(lines) <= 1000 {
		var n yaml.Node
		for k := reported; k <= len(lines); k++ {
			perr := yaml.Unmarshal([]byte(strings.Join(lines[:k], "")), &n)
			if pm := yamlLine.FindStringSubmatch(fmt.Sprint(perr)); pm != nil && pm[2] == m[2] {
				line = k
				break
			}
		}
	}
	text := ""
	if line >= 1 && line <= len(lines) {
		text = fmt.Sprintf(" (%q)", strings.TrimRight(lines[line-1], "\r\n"))
	}
	return fmt.Errorf("config file %s:%d%s: %s", path, line, text, m[2])
}

// FileReason says why a file could not be opened or created, without the
// operation and path Go's *fs.PathError repeats: the caller names the file
// as the user gave it.
func FileReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ListenError describes a listener that could not open on addr, the value
// of flag: `--listen 127.0.0.1:9092: address already in use (is inorder
// dev running? choose another --listen)`. The address is as the user wrote
// it, the reason without Go's "listen tcp ...: bind:" wording; ask, when
// not empty, is the question put before the way out. errors.Is still sees
// err and its system error.
func ListenError(flag, addr string, err error, ask string) error {
	next := "choose another " + flag
	if errors.Is(err, syscall.EACCES) {
		ask = "ports below 1024 need privileges;"
	}
	if ask != "" {
		next = ask + " " + next
	}
	return Explain(err, fmt.Sprintf("%s %s: %s (%s)", flag, addr, ListenReason(err), next))
}

// ListenReason says why a listener could not open, without Go's
// "listen tcp ADDR: bind:" wording around the system's reason.
func ListenReason(err error) string {
	var se *os.SyscallError
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return "address already in use"
	case errors.Is(err, syscall.EACCES):
		return "permission denied"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no interface of this machine has that address"
	case errors.As(err, &dns):
		return "host " + dns.Name + " not found"
	case errors.As(err, &se):
		return se.Err.Error()
	}
	return err.Error()
}

// Explain returns an error that reads msg, written for the user, while
// errors.Is and errors.As still see err.
func Explain(err error, msg string) error {
	return &explained{msg: msg, err: err}
}

type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }
