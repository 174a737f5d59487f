package wire

import (
	"errors"
	"testing"
)

// TestCheckLengthNamesStrangers: a length prefix above the limit that is
// the start of an HTTP message or a TLS record is said to be one, and
// matches ErrNotKafka, not ErrFrameTooLarge; any other stays
// ErrFrameTooLarge, and a prefix within the limit is a length whatever
// its bytes.
func TestCheckLengthNamesStrangers(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   string // "" for ErrFrameTooLarge
	}{
		{"GET ", "an HTTP request (GET), not a Kafka frame"},
		{"HEAD", "an HTTP request (HEAD), not a Kafka frame"},
		{"POST", "an HTTP request (POST), not a Kafka frame"},
		{"PUT ", "an HTTP request (PUT), not a Kafka frame"},
		{"DELE", "an HTTP request (DELETE), not a Kafka frame"},
		{"OPTI", "an HTTP request (OPTIONS), not a Kafka frame"},
		{"PATC", "an HTTP request (PATCH), not a Kafka frame"},
		{"CONN", "an HTTP request (CONNECT), not a Kafka frame"},
		{"PRI ", "an HTTP request (HTTP/2), not a Kafka frame"},
		{"HTTP", "an HTTP response, not a Kafka frame"},
		{"\x16\x03\x01\x02", "a TLS handshake record, not a Kafka frame"},
		{"\x16\x03\x03\x00", "a TLS handshake record, not a Kafka frame"},
		{"\x15\x03\x03\x00", "a TLS alert, not a Kafka frame"},
		{"GETX", ""},
		{"\x16\x05\x01\x00", ""},
		{"\x7f\xff\xff\xff", ""},
		{"\xff\xff\xff\xff", ""},
	} {
		b := [4]byte([]byte(tc.prefix))
		_, err := CheckLength(&b, MinRequestFrame, 100<<20)
		var nk *NotKafkaError
		switch {
		case tc.want == "" && (!errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrNotKafka)):
			t.Errorf("%q: %v, want ErrFrameTooLarge", tc.prefix, err)
		case tc.want != "" && (!errors.As(err, &nk) || !errors.Is(err, ErrNotKafka) || errors.Is(err, ErrFrameTooLarge) || err.Error() != tc.want):
			t.Errorf("%q: %v, want a *NotKafkaError %q", tc.prefix, err, tc.want)
		}
	}
	// Within the limit it is a length: a frame is never refused for its
	// size's bytes.
	b := [4]byte([]byte("\x16\x03\x01\x02"))
	if size, err := CheckLength(&b, MinRequestFrame, 1<<30); err != nil || size != 0x16030102 {
		t.Errorf("a length within the limit: %d, %v", size, err)
	}
}
