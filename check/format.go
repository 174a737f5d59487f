package check

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/inorder-proxy/inorder/internal/junit"
)

// Formats Write accepts.
const (
	FormatText  = "text"
	FormatJSON  = "json"
	FormatJUnit = "junit"
)

// Write writes rep to w in format: text (one line per property), json, or
// junit (JUnit XML, one test case per property).
func Write(w io.Writer, rep Report, format string) error {
	switch format {
	case FormatText, "":
		return writeText(w, rep)
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case FormatJUnit:
		return writeJUnit(w, rep)
	}
	return fmt.Errorf("%w: format %q is not text, json or junit", ErrOptions, format)
}

func writeText(w io.Writer, rep Report) error {
	var b strings.Builder
	width := 0
	for _, p := range rep.Properties {
		width = max(width, len(p.Name))
	}
	for _, p := range rep.Properties {
		verdict := "ok  "
		if !p.Holds {
			verdict = "FAIL"
		}
		fmt.Fprintf(&b, "%s %-*s  %s\n", verdict, width, p.Name, p.Evidence)
	}
	switch v := rep.Violations(); {
	case rep.Error != "":
		fmt.Fprintf(&b, "error: %s\n", rep.Error)
	case v > 0:
		fmt.Fprintf(&b, "ordering violated: %d of %d properties (%s)\n", v, len(rep.Properties), rep.Bootstrap)
	default:
		fmt.Fprintf(&b, "ordering holds: %d properties, %d requests each (%s)\n", len(rep.Properties), rep.Requests, rep.Bootstrap)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeJUnit(w io.Writer, rep Report) error {
	s := junit.Suite{
		Name: "inorder check " + rep.Bootstrap,
		Properties: []junit.Property{
			{Name: "bootstrap", Value: rep.Bootstrap},
			{Name: "requests_per_property", Value: fmt.Sprint(rep.Requests)},
			{Name: "topic", Value: rep.Topic},
			{Name: "group", Value: rep.Group},
		},
	}
	var total float64
	for _, p := range rep.Properties {
		c := junit.Case{Name: p.Name, ClassName: "inorder.check", Time: fmt.Sprintf("%.3f", p.Seconds)}
		total += p.Seconds
		if p.Holds {
			c.SystemOut = p.Evidence
		} else {
			c.Failure = &junit.Message{Message: p.Evidence, Type: "ordering violation", Text: countsText(p.Counts)}
		}
		s.Cases = append(s.Cases, c)
	}
	if rep.Error != "" {
		s.Cases = append(s.Cases, junit.Case{Name: "run", ClassName: "inorder.check",
			Error: &junit.Message{Message: rep.Error, Type: "could not run"}})
	}
	s.Time = fmt.Sprintf("%.3f", total)
	return junit.Write(w, s)
}

func countsText(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %d\n", k, counts[k])
	}
	return b.String()
}
