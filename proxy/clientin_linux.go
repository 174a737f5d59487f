package proxy

import "golang.org/x/sys/unix"

// inq asks the socket fd how many bytes it has received and not yet given.
func (s *socketReader) inq(fd uintptr) {
	if n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil && n > 0 {
		s.q = n
	}
}
