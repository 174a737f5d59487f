package pipeprobe

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// PipelineOptions tunes Pipeline.
type PipelineOptions struct {
	// Window bounds the requests in flight. If zero, every request is
	// sent without waiting for any response.
	Window int
	// Seed shuffles the correlation ids. If zero, 1, so that a run is
	// repeatable.
	Seed uint64
	// Numbered gives the requests correlation ids counting up by one from
	// 1000 instead, as most clients number a connection's requests; Seed
	// is then unused.
	Numbered bool
	// ClientID is the request header's client id. If empty, "pipeprobe".
	ClientID string
	// Progress, if set, is called by the reading goroutine after each
	// response with the number of responses read so far.
	Progress func(answered int)
}

// Exchange is one request of a pipelined run and its answer.
type Exchange struct {
	Req    kmsg.Request
	CorrID int32
	// Resp is the parsed response; nil if none came before an error.
	Resp kmsg.Response
}

// PipelineResult records a pipelined run of requests on one connection.
type PipelineResult struct {
	// Exchanges are in send order.
	Exchanges []Exchange
	// Arrived holds send positions in the order the responses arrived.
	Arrived []int
}

// Pipeline opens one connection to addr and sends reqs in order, with at
// most opts.Window unanswered, while it reads the responses. Every request
// must expect a response (no acks=0 Produce) and have its version set;
// nothing is negotiated.
//
// The error reports a failure to run: a dial or I/O error, a malformed
// response or an unknown correlation id. Responses out of order are not
// errors; the result records the order they arrived in, with everything
// recorded before an error.
func Pipeline(ctx context.Context, addr string, reqs []kmsg.Request, opts PipelineOptions) (PipelineResult, error) {
	n := len(reqs)
	res := PipelineResult{Exchanges: make([]Exchange, n)}
	if n == 0 {
		return res, nil
	}
	if opts.Window <= 0 {
		opts.Window = n
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.ClientID == "" {
		opts.ClientID = "pipeprobe"
	}
	ids := correlationIDs(n, opts.Seed)
	if opts.Numbered {
		for i := range ids {
			ids[i] = int32(1000 + i)
		}
	}
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(opts.ClientID))
	frames := make([][]byte, n)
	for i, req := range reqs {
		res.Exchanges[i] = Exchange{Req: req, CorrID: ids[i]}
		frames[i] = f.AppendRequest(nil, req, ids[i])
	}

	c, err := dial(ctx, addr)
	if err != nil {
		return res, err
	}
	defer c.close()

	// The writer runs beside the reader so that a full window never
	// stalls on a response the reader has not yet taken.
	window := make(chan struct{}, opts.Window)
	readerDone := make(chan struct{})
	writeErr := make(chan error, 1)
	go func() {
		writeErr <- c.writeWindowed(frames, window, readerDone)
	}()
	err = c.readPipelined(&res, window, opts.Progress)
	close(readerDone)
	if err != nil {
		// Unblock a writer stuck on a full socket buffer.
		c.c.SetDeadline(time.Unix(1, 0))
		<-writeErr
		return res, err
	}
	return res, <-writeErr
}

func (c *conn) writeWindowed(frames [][]byte, window chan struct{}, readerDone <-chan struct{}) error {
	for _, frame := range frames {
		select {
		case window <- struct{}{}:
		case <-readerDone:
			return nil
		}
		if _, err := c.c.Write(frame); err != nil {
			return c.wrap(err)
		}
	}
	return nil
}

func (c *conn) readPipelined(res *PipelineResult, window <-chan struct{}, progress func(int)) error {
	n := len(res.Exchanges)
	seqOf := make(map[int32]int, n)
	for i, x := range res.Exchanges {
		seqOf[x.CorrID] = i
	}
	for len(res.Arrived) < n {
		corr, body, err := c.readResponse()
		if err != nil {
			return fmt.Errorf("pipeprobe: reading response %d of %d: %w", len(res.Arrived)+1, n, err)
		}
		seq, ok := seqOf[corr]
		if !ok {
			return fmt.Errorf("%w: response %d carries id %d", ErrUnknownCorrelation, len(res.Arrived), corr)
		}
		delete(seqOf, corr)
		<-window
		x := &res.Exchanges[seq]
		if x.Resp, err = parseResponse(x.Req, body); err != nil {
			return err
		}
		res.Arrived = append(res.Arrived, seq)
		if progress != nil {
			progress(len(res.Arrived))
		}
	}
	return nil
}

// Overtake is a response that came back while an earlier request on the
// same connection was still unanswered.
type Overtake struct {
	Seq     int // send position of the request answered
	Pending int // send position of the earliest request still unanswered
}

// Overtakers returns, in arrival order, the responses that came back while
// an earlier request on the connection was still unanswered: the responses
// out of request order. A backend that keeps Kafka's promise has none.
func (r PipelineResult) Overtakers() []Overtake {
	answered := make([]bool, len(r.Exchanges))
	lowest := 0 // earliest send position not yet answered
	var out []Overtake
	for _, seq := range r.Arrived {
		if seq > lowest {
			out = append(out, Overtake{Seq: seq, Pending: lowest})
		}
		answered[seq] = true
		for lowest < len(answered) && answered[lowest] {
			lowest++
		}
	}
	return out
}
