package sockio

import "errors"

// ErrNoRoom is PeekAll's refusal of more bytes than the socket can be
// counted on to hold at once.
var ErrNoRoom = errors.New("more than the socket holds at once")

// ErrNoOffset is PeekFrom's refusal where the kernel keeps no peek offset
// for TCP.
var ErrNoOffset = errors.New("no peek offset for TCP here")
