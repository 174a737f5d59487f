// Package junit writes JUnit XML, the test report format CI systems
// (GitHub Actions, GitLab CI, Jenkins) show as test cases.
package junit

import (
	"encoding/xml"
	"fmt"
	"io"
)

// Suite is one test suite.
type Suite struct {
	XMLName    xml.Name   `xml:"testsuite"`
	Name       string     `xml:"name,attr"`
	Tests      int        `xml:"tests,attr"`
	Failures   int        `xml:"failures,attr"`
	Errors     int        `xml:"errors,attr"`
	Time       string     `xml:"time,attr,omitempty"`
	Properties []Property `xml:"properties>property,omitempty"`
	Cases      []Case     `xml:"testcase"`
	SystemOut  string     `xml:"system-out,omitempty"`
}

// Property is a name and value shown with a suite.
type Property struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// Case is one test case; it passed unless Failure or Error is set.
type Case struct {
	Name      string   `xml:"name,attr"`
	ClassName string   `xml:"classname,attr"`
	Time      string   `xml:"time,attr,omitempty"`
	Failure   *Message `xml:"failure,omitempty"`
	Error     *Message `xml:"error,omitempty"`
	SystemOut string   `xml:"system-out,omitempty"`
}

// Message explains a failure or an error.
type Message struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// Write writes s inside a testsuites element, counting its cases, failures
// and errors.
func Write(w io.Writer, s Suite) error {
	s.Tests, s.Failures, s.Errors = len(s.Cases), 0, 0
	for _, c := range s.Cases {
		if c.Failure != nil {
			s.Failures++
		}
		if c.Error != nil {
			s.Errors++
		}
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	doc := struct {
		XMLName xml.Name `xml:"testsuites"`
		Suites  []Suite  `xml:"testsuite"`
	}{Suites: []Suite{s}}
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// Read parses what Write wrote, for tests and tools that check a report.
func Read(data []byte) (Suite, error) {
	var doc struct {
		Suites []Suite `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		return Suite{}, err
	}
	if len(doc.Suites) != 1 {
		return Suite{}, fmt.Errorf("junit: %d test suites, want 1", len(doc.Suites))
	}
	return doc.Suites[0], nil
}
