//go:build !linux

package sockio

import "net"

// Pipe cannot be had here: GetPipe fails, and the caller reads.
type Pipe struct{}

func GetPipe() (*Pipe, error)                               { return nil, errNoSplice }
func (p *Pipe) Put()                                        {}
func (p *Pipe) Held() int                                   { return 0 }
func (p *Pipe) From(src *net.TCPConn, n int) (int, error)   { return 0, errNoSplice }
func (p *Pipe) To(dst *net.TCPConn, n int, more bool) error { return errNoSplice }
func (p *Pipe) Read(b []byte) error                         { return errNoSplice }

// PipesOut is how many pipes are given out: none here.
func PipesOut() int64 { return 0 }

// WritePiped writes bufs; no pipe is ever given here.
func WritePiped(dst *net.TCPConn, bufs [][]byte, from []*Pipe) error {
	v := net.Buffers(bufs)
	_, err := v.WriteTo(dst)
	return err
}
