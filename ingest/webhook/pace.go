package webhook

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/kube-sunset/sunset/internal/httpjson"
)

// Slow senders.
//
// A batch holds one of the max-inflight-batches slots while its body is
// read and decoded, since decoding reads the body as it arrives. Were a
// slot taken on arrival and held for as long as the sender cared to drip
// its body, a few connections sending a byte now and then would hold
// every slot for the server's whole read timeout, and real apiservers
// would get 429 all that time.
//
// So, two rules:
//
//   - a slot is taken only once the body's first byte has arrived: a
//     request whose body does not start holds no slot, only its
//     connection, and is answered 408 after DefaultBodyStartTimeout;
//   - once it holds a slot, the body must keep up a minimum average rate
//     (MinBodyBytesPerSecond) after a short slack (DefaultBodySlack),
//     counting only the time Sunset waits for it: the read deadline is
//     set afresh before each read for what is left of the body's
//     allowance. A slower sender gets 408 and its slot back, and the
//     apiserver's client retries. Time spent decoding between reads never
//     counts against the sender: a body that is all here but decodes
//     slowly (a gzip body of junk, a loaded machine) is not "slow".
//
// A slot therefore costs a sender the bandwidth of a real batch, for as
// long as it holds it.
//
// Fair shares.
//
// Even at full rate, one apiserver (a busy one, or one whose credential
// leaked) could hold every slot while its batches commit, and the others
// would get 429 all that time. So one credential holds at most
// max-inflight-batches-per-credential slots at once (half of them by
// default); past that, its batches get 429 with Retry-After while the
// others still get slots. The bound is per credential, not per address:
// apiservers can share an address behind NAT, and who a sender is is what
// authentication decides. A bound token counts for its apiserver, a client
// certificate for its subject; with one token for all apiservers, or none,
// each apiserver the path names has its own share.

// DefaultMinBodyBytesPerSecond is the slowest average rate a body may
// arrive at once its first byte has: 1 MiB/s sends kube-apiserver's
// largest batch at the default body limit in about a minute, far below
// what any network between an apiserver and Sunset carries.
const DefaultMinBodyBytesPerSecond = 1 << 20

// DefaultBodyStartTimeout is how long after its headers a body's first
// byte may come; the same as the server's header timeout.
const DefaultBodyStartTimeout = 10 * time.Second

// DefaultBodySlack is how far behind the minimum rate a body may fall: a
// pause of a network or a sender's garbage collector.
const DefaultBodySlack = 2 * time.Second

// errBodyTooSlow says the body did not start, or came slower than the
// minimum rate.
var errBodyTooSlow = errors.New("body too slow")

// awaitBody waits, holding no slot, until the body's first byte has come
// (or the body is empty), and returns a reader of the whole body.
func (h *Handler) awaitBody(w http.ResponseWriter, r *http.Request) (io.Reader, error) {
	rc := http.NewResponseController(w)
	if h.bodyStart > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(h.bodyStart)) // unsupported only by test recorders
	}
	if h.onBodyWait != nil {
		h.onBodyWait()
	}
	br := bufio.NewReaderSize(r.Body, 512)
	if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
		return nil, slowOr(err)
	}
	return br, nil
}

// pace makes body keep up the minimum rate from now on; with no minimum
// it lifts the start deadline.
func (h *Handler) pace(w http.ResponseWriter, body io.Reader) io.Reader {
	rc := http.NewResponseController(w)
	if h.minRate <= 0 {
		_ = rc.SetReadDeadline(time.Time{})
		return body
	}
	return &pacedReader{r: body, rc: rc, slack: h.slack, rate: h.minRate}
}

// pacedReader gives the sender slack + n/rate of waiting for its first n
// bytes: before each read it sets the connection's read deadline to what
// is left of that, and it adds the time the read took to waited.
type pacedReader struct {
	r     io.Reader
	rc    *http.ResponseController
	slack time.Duration
	rate  int64
	// read is how many bytes came; waited how long reads took.
	read   int64
	waited time.Duration
}

func (p *pacedReader) Read(b []byte) (int, error) {
	allowed := p.slack + time.Duration(float64(p.read+int64(len(b)))/float64(p.rate)*float64(time.Second))
	before := time.Now()
	_ = p.rc.SetReadDeadline(before.Add(allowed - p.waited))
	n, err := p.r.Read(b)
	p.waited += time.Since(before)
	p.read += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		// The whole body is here. A deadline left behind would cut the
		// server's watch for a closed connection, which cancels the
		// request's context, while the batch commits.
		_ = p.rc.SetReadDeadline(time.Time{})
	case err != nil:
		err = slowOr(err)
	}
	return n, err
}

// slowOr turns a passed read deadline into errBodyTooSlow.
func slowOr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errBodyTooSlow
	}
	return err
}

// shares counts the slots each credential holds.
type shares struct {
	// max is how many slots one credential may hold.
	max  int
	mu   sync.Mutex
	held map[string]int
}

// newShares bounds each credential to perCredential of total slots; zero
// means half of them, at least one.
func newShares(perCredential, total int) *shares {
	if perCredential <= 0 {
		perCredential = max(1, total/2)
	}
	return &shares{max: perCredential, held: map[string]int{}}
}

// take counts a slot for key, unless key holds its share already.
func (s *shares) take(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key] >= s.max {
		return false
	}
	s.held[key]++
	return true
}

// give returns a slot of key's.
func (s *shares) give(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key]--; s.held[key] <= 0 {
		delete(s.held, key)
	}
}

// takeSlot takes one of the batch slots for the credential named share,
// or refuses with 429 when every slot is taken or that credential holds
// its share already. The returned function gives the slot back.
func (h *Handler) takeSlot(share string) (func(), error) {
	select {
	case h.slots <- struct{}{}:
	default:
		h.metrics.overloaded.Inc()
		return nil, fail(http.StatusTooManyRequests, httpjson.ReasonTooManyRequests,
			fmt.Sprintf("sunset is handling %d batches already; retry after 1s", cap(h.slots))).with("Retry-After", "1")
	}
	if !h.shares.take(share) {
		<-h.slots
		h.metrics.overShare.Inc()
		return nil, fail(http.StatusTooManyRequests, httpjson.ReasonTooManyRequests,
			fmt.Sprintf("these credentials hold %d of the %d batch slots already (max-inflight-batches-per-credential), so that other apiservers get the rest; retry after 1s",
				h.shares.max, cap(h.slots))).with("Retry-After", "1")
	}
	if h.onSlot != nil {
		h.onSlot()
	}
	return func() {
		h.shares.give(share)
		<-h.slots
	}, nil
}
