package config

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestChangedAndKeep(t *testing.T) {
	a := Default()
	b := Default()
	b.Listen = "0.0.0.0:19092"
	b.Upstreams = []string{"k1:9092", "k2:9092"}
	b.MaxInFlight = 7
	b.DialTimeout = 3 * time.Second
	got := Changed(a, b)
	want := []string{"dial-timeout", "listen", "max-in-flight", "upstream"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
	if c := Changed(b, b); len(c) != 0 {
		t.Fatalf("Changed(b, b) = %v, want none", c)
	}
	// Keep the running listen address, take the rest.
	next := b
	if err := Keep(&next, a, []string{"listen"}); err != nil {
		t.Fatal(err)
	}
	if next.Listen != a.Listen || next.MaxInFlight != 7 || !slices.Equal(next.Upstreams, b.Upstreams) {
		t.Fatalf("after Keep: %+v", next)
	}
	if err := Keep(&next, a, []string{"no-such-setting"}); err == nil {
		t.Fatal("Keep of an unknown setting succeeded")
	}
	if v, ok := Get(b, "upstream"); !ok || v != "k1:9092,k2:9092" {
		t.Fatalf("Get(upstream) = %q %v", v, ok)
	}
}

// TestKeepRoundTripsEverySetting: every setting's printed value reads back
// as the same value, which Changed and Keep rely on. A setting whose flag
// value does not round-trip fails here.
func TestKeepRoundTripsEverySetting(t *testing.T) {
	src := Default()
	fs := pflag.NewFlagSet("all", pflag.ContinueOnError)
	BindFlags(fs, &src)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	var dst Config
	if err := Keep(&dst, src, names); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(dst), normalize(src)) {
		t.Fatalf("Keep of every setting:\n got %+v\nwant %+v", dst, src)
	}
}

// normalize treats a nil and an empty list alike: flags cannot tell them
// apart and neither does the proxy.
func normalize(c Config) Config {
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); (f.Kind() == reflect.Slice || f.Kind() == reflect.Map) && f.Len() == 0 && f.CanSet() {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return c
}
