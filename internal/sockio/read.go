package sockio

// Lender lends a Reader the buffer a read fills. The Reader asks for it
// only as it reads the socket, and hands it back when a read finds
// nothing (before it waits), fails, or reaches the end of the stream, so a
// socket that waits holds no buffer.
type Lender interface {
	// Lend returns the buffer to read into, taking one if none is held.
	Lend() []byte
	// Reclaim takes the buffer back, dropping whatever it holds.
	Reclaim()
}
