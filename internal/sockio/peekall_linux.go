package sockio

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// PeekAll copies the socket's next len(buf) bytes into buf without taking
// them from it, waiting until the kernel holds them all (the connection's
// read deadline applies, as to a read). It fails with ErrNoRoom, having
// waited for nothing, when the socket's receive buffer, whose room is
// also the window the peer may send into, cannot grow to twice their
// size (past a quarter of the kernel's largest, tcp_rmem): a peek must
// not wait for bytes the window keeps out. The window may still open
// late, or not at all, on a path whose packets cost the kernel more than
// twice their bytes: the caller bounds the wait (the read deadline) and
// reads instead when it ends. io.ErrUnexpectedEOF: the peer closed
// first.
//
// Where the kernel keeps a peek offset for TCP (SO_PEEK_OFF, Linux 6.10),
// the bytes are copied as they arrive (PeekOffset.Fill); elsewhere the
// socket is asked to wake the peek only once they are all in
// (SO_RCVLOWAT), and one peek copies them.
func (p *Peeker) PeekAll(buf []byte) error {
	o, err := p.start(len(buf))
	if err != nil {
		return err
	}
	defer o.Close()
	if o.st.offset {
		return o.Fill(buf)
	}
	var werr error
	whole := func(fd uintptr) bool {
		werr = peekWhole(int(fd), buf)
		return werr != errWait
	}
	if err := p.rc.Read(whole); err != nil {
		return err
	}
	return werr
}

// errWait: the socket does not hold the bytes yet.
var errWait = syscall.EAGAIN

// peekState is what a peek set on the socket, which reset undoes.
type peekState struct {
	n      int  // the bytes peeked at
	offset bool // SO_PEEK_OFF is on: each peek goes on where the last ended
	lowat  bool // SO_RCVLOWAT is n
}

// begin makes sure the receive buffer is at least twice n, so that the
// window the peer may send into can hold n bytes at once whatever the
// kernel's overhead per byte, and turns the peek offset on where the
// kernel has one, else the wake-up at n.
func (st *peekState) begin(fd int) error {
	n := st.n
	rcv, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if err != nil {
		return os.NewSyscallError("getsockopt", err)
	}
	if 2*n > rcv {
		// Setting the low mark grows the buffer to hold that much
		// (never shrinks it), up to the kernel's cap. The mark itself
		// is capped lower (half tcp_rmem's maximum) than the buffer
		// it grows, which the buffer's size read back shows: that,
		// not the mark, says whether the bytes fit.
		st.lowat = true
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, 2*n); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
		if rcv, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err != nil || 2*n > rcv {
			return ErrNoRoom
		}
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEEK_OFF, 0) == nil {
		st.offset = true
		if st.lowat {
			// The buffer has grown; every arrival wakes the peek.
			st.lowat = false
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, 1); err != nil {
				return os.NewSyscallError("setsockopt", err)
			}
		}
		return nil
	}
	st.lowat = true
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, n); err != nil {
		return os.NewSyscallError("setsockopt", err)
	}
	return nil
}

// peekWhole copies buf at once when the socket holds all of it.
func peekWhole(fd int, buf []byte) error {
	queued, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
	if err != nil {
		return os.NewSyscallError("ioctl", err)
	}
	if queued < len(buf) {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil && (info.State == tcpClose || info.State == tcpCloseWait) {
			return io.ErrUnexpectedEOF
		}
		return errWait
	}
	for {
		n, _, err := syscall.Recvfrom(fd, buf, syscall.MSG_PEEK)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return os.NewSyscallError("recvfrom", err)
		case n < len(buf):
			return io.ErrUnexpectedEOF
		}
		return nil
	}
}

// reset undoes what begin set: the next read or peek starts at the
// queue's head and wakes at its first byte.
func (st *peekState) reset(fd int) {
	if st.offset {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEEK_OFF, -1)
	}
	if st.lowat {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, 1)
	}
}

// PeekOffset is a peek at a frame in the socket that goes on where the
// last one ended (SO_PEEK_OFF): Fill copies the next bytes, Skip passes
// the next bytes uncopied (recv with MSG_PEEK|MSG_TRUNC), both waiting
// for them as a read does; Close turns the offset off again. Nothing is
// taken from the socket. One goroutine uses it, and reads nothing from
// the socket until Close.
type PeekOffset struct {
	p    *Peeker
	st   peekState
	dst  []byte
	skip int
	err  error
	cb   func(fd uintptr) bool
}

// PeekFrom starts a PeekOffset over the socket's next n bytes, which the
// receive buffer is made to hold at once, as PeekAll's. It fails with
// ErrNoRoom where it cannot hold them, and with ErrNoOffset where the
// kernel keeps no peek offset for TCP (before Linux 6.10); the caller
// then reads them, or peeks at all of them (PeekAll).
func (p *Peeker) PeekFrom(n int) (*PeekOffset, error) {
	o, err := p.start(n)
	if err == nil && !o.st.offset {
		o.Close()
		err = ErrNoOffset
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// start begins a peek at the socket's next n bytes.
func (p *Peeker) start(n int) (*PeekOffset, error) {
	o := &PeekOffset{p: p, st: peekState{n: n}}
	o.cb = o.once
	var err error
	if cerr := p.rc.Control(func(fd uintptr) { err = o.st.begin(int(fd)) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// Fill copies the next len(dst) bytes into dst.
func (o *PeekOffset) Fill(dst []byte) error {
	o.dst, o.skip = dst, 0
	return o.run()
}

// Skip passes the next n bytes without copying them.
func (o *PeekOffset) Skip(n int) error {
	o.dst, o.skip = nil, n
	return o.run()
}

// Close turns the peek offset off: the next read or peek starts at the
// queue's head.
func (o *PeekOffset) Close() {
	if o.st.offset || o.st.lowat {
		o.p.rc.Control(func(fd uintptr) { o.st.reset(int(fd)) })
		o.st.offset, o.st.lowat = false, false
	}
}

func (o *PeekOffset) run() error {
	o.err = nil
	if err := o.p.rc.Read(o.cb); err != nil {
		return err
	}
	return o.err
}

func (o *PeekOffset) once(fd uintptr) bool {
	for len(o.dst) > 0 || o.skip > 0 {
		var n int
		var err error
		if o.skip > 0 {
			r, _, e := syscall.Syscall6(syscall.SYS_RECVFROM, fd, 0, uintptr(o.skip), syscall.MSG_PEEK|syscall.MSG_TRUNC|syscall.MSG_DONTWAIT, 0, 0)
			n = int(r)
			if e != 0 {
				err = e
			}
		} else {
			n, _, err = syscall.Recvfrom(int(fd), o.dst, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		}
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			o.err = os.NewSyscallError("recvfrom", err)
			return true
		case n <= 0:
			o.err = io.ErrUnexpectedEOF
			return true
		}
		if o.skip > 0 {
			o.skip -= n
		} else {
			o.dst = o.dst[n:]
		}
	}
	return true
}

// CanDiscard says whether Discard drops bytes here.
const CanDiscard = true

// Discard takes the socket's next n bytes and drops them, in the kernel
// (recv with MSG_TRUNC, which TCP reads as "drop"), waiting for them as
// a read does. It returns how many it dropped; io.EOF: the peer closed
// first.
func (p *Peeker) Discard(n int) (int, error) {
	done := 0
	var err error
	drop := func(fd uintptr) bool {
		for done < n {
			k, _, e := syscall.Syscall6(syscall.SYS_RECVFROM, fd, 0, uintptr(n-done), syscall.MSG_TRUNC|syscall.MSG_DONTWAIT, 0, 0)
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return false
			case e != 0:
				err = os.NewSyscallError("recvfrom", e)
				return true
			case k == 0:
				err = io.EOF
				return true
			}
			done += int(k)
		}
		return true
	}
	if rerr := p.rc.Read(drop); rerr != nil {
		return done, rerr
	}
	return done, err
}
