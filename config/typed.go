package config

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// Every error a user reads names a setting the way it was given, with its
// value as it was written (64MiB stays 64MiB, 67108864 stays 67108864,
// 90s stays 90s): a flag `--name: "value" reason`, a config file key
// `config file x.yaml:3: name: "value" reason`. pflag keeps only parsed
// values, so KeepTyped wraps each flag's value to remember the text it
// was set from and where that text came from; Resolve (for Config's
// settings) and InvalidFlag (for a command's own flags) read it back.

// typedValue is a flag value that keeps the text it was last set from.
type typedValue struct {
	pflag.Value
	text   string // what Set last accepted; the default's rendering until then
	source string // where text came from: "" for the command line, else "config file NAME:LINE"
}

func (v *typedValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	v.text, v.source = s, ""
	return nil
}

// typedBool keeps a boolean flag usable without a value (--verify).
type typedBool struct{ typedValue }

func (*typedBool) IsBoolFlag() bool { return true }

// KeepTyped makes every flag defined on fs remember the text it is set
// from. Call it once the flags are defined and before they are parsed;
// flags of a list type (repeatable, or comma separated by pflag) are left
// as they are, since an error about one names the item at fault.
func KeepTyped(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		switch t := f.Value.Type(); {
		case strings.Contains(t, "Slice"), strings.Contains(t, "Array"), strings.HasPrefix(t, "stringTo"):
			return
		}
		if _, ok := f.Value.(typedText); ok {
			return
		}
		v := typedValue{Value: f.Value, text: f.Value.String()}
		if f.Value.Type() == "bool" {
			f.Value = &typedBool{v}
			return
		}
		f.Value = &v
		if f.DefValue == "0s" {
			// pflag leaves a zero default out of --help by the value's
			// type, which the wrapper hides; "0" it knows by its text.
			f.DefValue = "0"
		}
	})
}

// typedText is what Typed reads: both wrappers have it.
type typedText interface{ typed() (text, source string) }

func (v *typedValue) typed() (string, string) { return v.text, v.source }

// typedOf returns the text flag f was last set from and where it came
// from; for a flag KeepTyped did not wrap, its value as --help renders it.
func typedOf(f *pflag.Flag) (text, source string) {
	if t, ok := f.Value.(typedText); ok {
		return t.typed()
	}
	return f.Value.String(), ""
}

// markSource records that flag f was just set from the config file at
// place, the file's path and the key's line (x.yaml:3).
func markSource(f *pflag.Flag, place string) {
	switch v := f.Value.(type) {
	case *typedValue:
		v.source = "config file " + place
	case *typedBool:
		v.source = "config file " + place
	}
}

// InvalidFlag is the error for the value of a command's own flag name on fs
// that cannot work: `--name: "value as written" reason`, or, for a value
// from the --config file, `config file x.yaml:3: name: "value" reason`. It
// wraps ErrInvalid.
func InvalidFlag(fs *pflag.FlagSet, name, reason string) error {
	f := fs.Lookup(name)
	if f == nil {
		return &FieldError{Field: "--" + name, Reason: reason}
	}
	text, source := typedOf(f)
	if source != "" {
		return fmt.Errorf("%s: %w", source, &FieldError{Field: name, Value: text, Reason: reason})
	}
	return &FieldError{Field: "--" + name, Value: text, Reason: reason}
}
