package webhook

import "context"

// Drain makes every new batch get 503 with Retry-After, so that its sender
// retries it later. Shutdown calls it while the server still answers
// /-/ready, then Wait.
func (h *Handler) Drain() {
	h.drainMu.Lock()
	defer h.drainMu.Unlock()
	h.draining = true
}

// Wait returns once the batches admitted before Drain are answered, or
// when ctx is done.
func (h *Handler) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		h.inFlight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start admits a batch unless draining; finish must follow.
func (h *Handler) start() bool {
	h.drainMu.Lock()
	defer h.drainMu.Unlock()
	if h.draining {
		return false
	}
	h.inFlight.Add(1)
	return true
}
