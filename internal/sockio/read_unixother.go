//go:build unix && !linux

package sockio

// inq leaves what the socket holds unknown here: a caller that sizes a
// buffer by it grows the buffer a step at a time.
func (r *Reader) inq(uintptr) {}
