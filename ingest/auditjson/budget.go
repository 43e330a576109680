package auditjson

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/kube-sunset/sunset/classify"
)

// Budget is the memory, in bytes, that the bodies being decoded at once
// may hold between them: the buffers a body is read into, the request
// objects kept for field rules and the decoded events. Each body draws on
// it through its own Account as it grows, and gives everything back when
// the Account is closed; a body that would pass it is refused, never
// waited for, so that two bodies each holding half can never wait on each
// other.
type Budget struct {
	mu    sync.Mutex
	total int64
	left  int64
	// peak is the most the accounts held at once.
	peak int64
}

// NewBudget is a Budget of total bytes.
func NewBudget(total int64) *Budget {
	return &Budget{total: total, left: total}
}

// Total is the budget's size.
func (b *Budget) Total() int64 { return b.total }

// InUse is what the open accounts hold.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - b.left
}

// Open starts an account for one body. A nil Budget gives a nil Account,
// which limits nothing.
func (b *Budget) Open() *Account {
	if b == nil {
		return nil
	}
	return &Account{budget: b}
}

// Account is what one body holds of a Budget.
type Account struct {
	budget *Budget
	held   int64
}

// ErrOverBudget means a body needed more of the Budget than the other
// bodies being decoded left; the decode stopped, and the same body may
// succeed later.
var ErrOverBudget = errors.New("auditjson: the bodies being decoded at once hold the whole decode budget; send the body again later")

// ErrBodyOverBudget means a body alone needs more than the whole Budget.
var ErrBodyOverBudget = errors.New("auditjson: the body needs more memory to decode than the whole decode budget")

// take draws n bytes for the body, or says why not.
func (a *Account) take(n int64) error {
	if a == nil || n <= 0 {
		return nil
	}
	b := a.budget
	if a.held+n > b.total {
		return ErrBodyOverBudget
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.left {
		return ErrOverBudget
	}
	b.left -= n
	a.held += n
	b.peak = max(b.peak, b.total-b.left)
	return nil
}

// Peak is the most the open accounts held at once.
func (b *Budget) Peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// Held is what the account holds now.
func (a *Account) Held() int64 {
	if a == nil {
		return 0
	}
	return a.held
}

// Close gives back all that the account holds; the events decoded through
// it must no longer be in use.
func (a *Account) Close() {
	if a == nil || a.held == 0 {
		return
	}
	a.budget.mu.Lock()
	a.budget.left += a.held
	a.budget.mu.Unlock()
	a.held = 0
}

// eventBytes is the struct of an event; eventCost adds what it points to.
const eventBytes = int64(unsafe.Sizeof(classify.Event{}))

// admissionBytes stands for an event's admission facts: at most 256 calls
// and 64 hosts (admission.Parse), of bounded names.
const admissionBytes = 64 << 10

// eventCost is about what a decoded event holds: its struct (twice, for
// the slice it is appended to) and the strings and lists it points to.
// Interned strings are counted too: an estimate from above.
func eventCost(ev *classify.Event) int64 {
	n := 2*eventBytes + int64(len(ev.ID)+len(ev.Stage)+len(ev.Verb)+len(ev.Username)+len(ev.ImpersonatedBy)+
		len(ev.UserAgent)+len(ev.RemovedRelease)+len(ev.PodName)+len(ev.PodNode)+len(ev.RequestObject))
	if ev.ObjectRef != nil {
		r := ev.ObjectRef
		n += int64(unsafe.Sizeof(*r)) + int64(len(r.Group)+len(r.Version)+len(r.Resource)+len(r.Subresource))
	}
	for _, ip := range ev.SourceIPs {
		n += int64(unsafe.Sizeof(ip)) + int64(len(ip))
	}
	if ev.Admission != nil {
		n += admissionBytes
	}
	return n
}
