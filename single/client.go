package single

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/internal/budget"
	"github.com/inorder-proxy/inorder/internal/ratelog"
	"github.com/inorder-proxy/inorder/internal/sockio"
	"github.com/inorder-proxy/inorder/wire"
)

// Client is the client connection a Conn serves, as the proxy holds it
// (proxy's singleClient): the seam between a client connection and its
// upstream connections in the single topology. The proxy reads the
// client, sequences its requests and writes their answers; the Conn
// splits each request, sends its parts and merges their answers, and
// hands the merged answer back through Complete, in the order the
// sequencer set.
type Client interface {
	// Die ends the client connection with err as its reason: its one
	// teardown path, which closes the Conn too.
	Die(err error)
	// Who names the client connection in a log line.
	Who() []any
	// Dial connects to the broker at addr as the client connection's
	// upstream identity (TLS, and SASL as its principal maps to), and
	// says when its session must be renewed (zero: never); own: the
	// identity is the client's principal's, not the proxy's.
	Dial(ctx context.Context, addr string) (nc net.Conn, reauthAt time.Time, own bool, err error)
	// Account is the client reader's memory account for a frame of n
	// bytes, UpAccount the upstream readers'; TimedOut names a wait for
	// memory that gave up as the client reader's errors do.
	Account(n int) Account
	UpAccount(n int) Account
	TimedOut(err error) error
	// Fixup patches an answer of key at version when the proxy's Fixup
	// asks for it.
	Fixup(key, version int16, resp kmsg.Response)
	// Forwarded counts a request with writes sent upstream at since.
	Forwarded(since time.Time)
	// DropFrame lets r's frame go once nothing reads it any more.
	DropFrame(r Request)
	// Release lets r go: no answer comes for it. failed is nil when
	// every part of r was sent; else the answer r would have got had it
	// asked for one, what was not sent answered with its error.
	Release(r Request, failed kmsg.Response)
	// Versions limits a merged ApiVersions answer to what the proxy
	// may forward and tell.
	Versions(av *kmsg.ApiVersionsResponse)
	// Quota applies the client's quotas to the merged answer of r;
	// size is a Fetch answer's frame size when it was measured for
	// them, else 0.
	Quota(r Request, resp kmsg.Response) (_ kmsg.Response, size int)
	// Complete delivers r's merged answer, out, which holds ch, in
	// sequence order, once its request is done with.
	Complete(r Request, out *wire.Buf, ch budget.Charge) error
	// PiecesHold is the memory writing an answer in pieces holds beside
	// them: none on a socket that takes a vector, a chunk they are
	// joined into on one that does not (TLS).
	PiecesHold() int
	// Splices reports whether the client's socket takes bytes spliced
	// into it (plaintext TCP): a Fetch answer's record sets may then go
	// from the brokers' sockets to it in the kernel (fetchpark.go).
	Splices() bool
}

// Request is a client request a Conn splits, as the proxy holds it: its
// header and frame, read by the split, the fixes its authorization
// asks of its answer, and whether it was forced to be answered (acks=0
// sent as acks=1) and what failed then.
type Request interface {
	Header() *wire.RequestHeader
	// Frame is the client's frame; nil once dropped (DropFrame).
	Frame() *wire.Buf
	// FixResponse completes an answer as the request's authorization
	// asks.
	FixResponse(resp kmsg.Response)
	ForcedAck() bool
	SetFailed(err error)
	// Pieces reports whether its answer may be written in pieces: not
	// when the proxy reads the answer's body whole after it is made
	// (its audit event).
	Pieces() bool
	// SetPieces makes its answer the n bytes of pieces, in order: the
	// frame Complete is given, then slices of buffers it does not own,
	// which done gives back once the answer is written or dropped. A
	// piece whose from entry is set (from may be nil) is not in memory:
	// its bytes are that pipe's next ones, spliced to the client's socket
	// (sockio.WritePiped), which then Splices.
	SetPieces(pieces [][]byte, from []*sockio.Pipe, n int, done func())
	// Merging is told that its parts' answers are all in and their merge
	// begins: the proxy's own time on its answer starts here (a client's
	// request_percentage counts it).
	Merging()
	// Unread is its frame's bytes as they still wait in the client
	// socket, when the frame was peeked at rather than read and the
	// caller is the client reader, the one goroutine that may take them;
	// else nil. The split takes them all before Forward returns.
	Unread() Unread
}

// ErrPartWrite is Unread.SpliceTo's failure of the part's socket alone.
var ErrPartWrite = errors.New("a part's write failed")

// ErrNoPark is Unread.ParkTo's refusal, having taken nothing: the client
// socket cannot be spliced from (it is not TCP).
var ErrNoPark = errors.New("the client socket cannot be spliced from")

// Unread is the rest of a request's frame in the client socket, which
// Frame holds a copy of, but for record sets of SpliceFrom bytes or more,
// which it may lack: its parts' record sets are moved from there to the
// upstream sockets in the kernel (producesplice.go) rather than written
// from the copy.
type Unread interface {
	// Len is how many of its bytes are still in the socket.
	Len() int
	// Take takes the rest of them, where the parts are written from
	// frame, the copy: frame then holds the frame whole (the copy may
	// lack record sets of SpliceFrom bytes or more, which Take reads
	// into it).
	Take(frame []byte) error
	// Discard takes its next n bytes and drops them.
	Discard(n int) error
	// SpliceTo moves its next n bytes to nc, a TCP socket. An error
	// that wraps ErrPartWrite is nc's: the n bytes are taken from the
	// client socket all the same, and the part's connection must end;
	// any other error, and any from Discard or Take, leaves the client
	// stream at an unknown place: the client connection must end.
	SpliceTo(nc net.Conn, n int) error
	// ParkTo moves its next n bytes into p, in the kernel, as far as p
	// takes them (sockio.Pipe.From): got < n and a nil error when p
	// filled. ErrNoPark: nothing taken, the bytes cannot be spliced; any
	// other error leaves the client stream at an unknown place.
	ParkTo(p *sockio.Pipe, n int) (got int, err error)
}

// Account is a class of the memory budget as a client connection
// charges it, with its waits: the charge of n bytes reserved in it, and
// whether it is the bulk class.
type Account interface {
	wire.Account
	Charge(n int) budget.Charge
	Bulk() bool
}

// Env is what the Conns of one proxy share: the memory budget, the rooms
// its Fetches reserved together (memory.go), the pool of upstream
// readers' buffers, its log, and its bounds.
type Env struct {
	Budget     *budget.Budget
	FetchRooms *atomic.Int64
	Readers    *sync.Pool
	Log        *slog.Logger
	// ResponseWait bounds a Fetch's wait for its room, as it bounds each
	// wait of an upstream reader for memory; read at each wait.
	ResponseWait *time.Duration
	// ProbeTimeout bounds a lookup the proxy's own client makes for a
	// request; ReaderLinger is how long an upstream reader with nothing
	// in flight waits for the next answer before it ends.
	ProbeTimeout, ReaderLinger time.Duration
	// IdleClosed reports whether a broker closed a connection that has
	// nothing in flight; NotKafka says what a broker answered that is
	// another protocol (a *wire.NotKafkaError wrapped in err).
	IdleClosed func(net.Conn) bool
	NotKafka   func(err error) error
	// FetchVectors, if set, counts the merged Fetch answers written in
	// pieces (fetchmerge.go).
	FetchVectors *atomic.Int64
	// FetchParks, if set, counts the Fetch parts' answers read with
	// record sets parked in pipes, FetchPiped the merged answers that
	// went to the client with pieces spliced from them, FetchParkCuts
	// the answers whose read failed with record sets parked
	// (fetchpark.go), FetchParkDrops the parts' answers whose parked
	// record sets were dropped unread, the merged answer emptied
	// (memory.go).
	FetchParks, FetchPiped, FetchParkCuts, FetchParkDrops *atomic.Int64
	// FetchCuts, if set, counts the Fetch parts' answers cut short
	// (fetchcut.go).
	FetchCuts *atomic.Int64
	// FetchEarly, if set, counts the Fetch requests answered before
	// every part was in, FetchKept the parts' answers kept for the
	// next Fetch, FetchKeptTaken those the next Fetch took
	// (fetchkeep.go).
	FetchEarly, FetchKept, FetchKeptTaken *atomic.Int64
	// FetchLate, if set, counts the Fetch parts still out when their
	// Fetch's wait ended (fetchlate.go).
	FetchLate *atomic.Int64
	// BrokerStalls, if set, counts the upstream connections failed
	// because their broker left a part unanswered past its deadline
	// (stall.go).
	BrokerStalls *atomic.Int64
	// FetchTrimmed, if set, counts the Fetch parts sent with only the
	// partitions their maximum holds (fetchtrim.go).
	FetchTrimmed *atomic.Int64
	// ProduceSplices, if set, counts the Produce requests whose parts
	// took their records from the client socket (producesplice.go).
	ProduceSplices *atomic.Int64

	cutLog ratelog.Log // the log lines of answers cut
}

// charge is memory reserved in the budget for one buffer or state.
type charge = budget.Charge

// API keys a Conn treats specially.
const (
	keyProduce     = 0
	keyFetch       = 1
	keyApiVersions = wire.ApiVersionsKey
)

// noCorrelation is the correlation id of a part that expects no answer;
// corrMask keeps an upstream connection's correlation ids positive.
const (
	noCorrelation = -1
	corrMask      = 1<<31 - 1
)
