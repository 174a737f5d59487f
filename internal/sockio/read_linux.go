package sockio

import "golang.org/x/sys/unix"

// inq asks the socket fd how many bytes it has received and not yet given.
func (r *Reader) inq(fd uintptr) {
	if n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil && n > 0 {
		r.q = n
	}
}
