package headtail

import "sync"

// Head keeps the first Max bytes written to it and drops the rest: a
// command's output where only a message is wanted (a guest's stderr in
// an error). It never fails a write, and is safe for concurrent use.
type Head struct {
	Max int

	mu  sync.Mutex
	buf []byte
}

func (h *Head) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.Max - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// String returns what was kept.
func (h *Head) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.buf)
}
