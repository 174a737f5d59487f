package hostile

import (
	"net"
	"net/netip"
	"syscall"
)

// listenNoRoom listens at addr, an IPv4 address and port, with a backlog
// of 0, which Linux takes as room for one connection waiting for accept.
func listenNoRoom(addr string) (int, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return -1, &net.AddrError{Err: "not an IPv4 address and port", Addr: addr}
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if err := syscall.Listen(fd, 0); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

func closeFD(fd int) { syscall.Close(fd) }
