package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/inorder-proxy/inorder/internal/junit"
)

// WriteJSON writes r as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteJUnit writes r as JUnit XML: one test case per kind of violation,
// failed when the kind was seen, so that CI systems show each kind.
func (r Report) WriteJUnit(w io.Writer) error {
	s := junit.Suite{Name: "inorder verify", SystemOut: r.requestsText()}
	for _, k := range r.Violations {
		c := junit.Case{Name: string(k.Kind), ClassName: "inorder.verify"}
		if k.Count == 0 {
			c.SystemOut = "none seen"
		} else {
			var text strings.Builder
			for _, e := range k.Examples {
				fmt.Fprintf(&text, "%s\n", e)
			}
			first := ""
			if len(k.Examples) > 0 {
				first = "; first: " + k.Examples[0].String()
			}
			c.Failure = &junit.Message{Message: fmt.Sprintf("%d seen%s", k.Count, first), Type: "ordering violation", Text: text.String()}
		}
		s.Cases = append(s.Cases, c)
	}
	return junit.Write(w, s)
}

// Write writes r as JUnit XML if name ends in .xml, as JSON otherwise.
func (r Report) Write(w io.Writer, name string) error {
	if strings.HasSuffix(strings.ToLower(name), ".xml") {
		return r.WriteJUnit(w)
	}
	return r.WriteJSON(w)
}

func (r Report) requestsText() string {
	names := make([]string, 0, len(r.Requests))
	for n := range r.Requests {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("requests forwarded upstream:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %s: %d\n", n, r.Requests[n])
	}
	return b.String()
}

// String describes one violation in a line.
func (e Example) String() string {
	where := ""
	if p := e.Partition; p != nil {
		where = fmt.Sprintf(" %s/%d", p.Topic, p.Partition)
	}
	return fmt.Sprintf("%s %s -> %s, %s correlation id %d (upstream %d)%s: %s",
		e.Kind, e.Client, e.Upstream, e.API, e.ClientCorrelation, e.UpstreamCorrelation, where, e.Detail)
}
