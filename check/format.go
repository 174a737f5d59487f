package check

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
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

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func writeJUnit(w io.Writer, rep Report) error {
	s := junitSuite{
		Name: "inorder check " + rep.Bootstrap,
		Properties: []junitProperty{
			{"bootstrap", rep.Bootstrap},
			{"requests_per_property", fmt.Sprint(rep.Requests)},
			{"topic", rep.Topic},
			{"group", rep.Group},
		},
	}
	var total float64
	for _, p := range rep.Properties {
		c := junitCase{Name: p.Name, ClassName: "inorder.check", Time: fmt.Sprintf("%.3f", p.Seconds)}
		total += p.Seconds
		if p.Holds {
			c.SystemOut = p.Evidence
		} else {
			s.Failures++
			c.Failure = &junitMessage{Message: p.Evidence, Type: "ordering violation", Text: countsText(p.Counts)}
		}
		s.Cases = append(s.Cases, c)
	}
	if rep.Error != "" {
		s.Errors++
		s.Cases = append(s.Cases, junitCase{Name: "run", ClassName: "inorder.check", Time: "0",
			Error: &junitMessage{Message: rep.Error, Type: "could not run"}})
	}
	s.Tests = len(s.Cases)
	s.Time = fmt.Sprintf("%.3f", total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{s}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
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
