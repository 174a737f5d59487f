package junit

import (
	"bytes"
	"testing"
)

func TestWriteCountsAndReads(t *testing.T) {
	var b bytes.Buffer
	err := Write(&b, Suite{Name: "s", Tests: 99, Cases: []Case{
		{Name: "ok"},
		{Name: "bad", Failure: &Message{Message: "3 < 4 & more"}},
		{Name: "broken", Error: &Message{Message: "could not run"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Read(b.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if s.Tests != 3 || s.Failures != 1 || s.Errors != 1 || s.Cases[1].Failure.Message != "3 < 4 & more" {
		t.Fatalf("%+v\n%s", s, b.String())
	}
	if _, err := Read([]byte("<testsuites></testsuites>")); err == nil {
		t.Fatal("a document without a suite was read")
	}
}
