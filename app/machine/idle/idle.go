// Package idle stops what has gone unused for too long: a Timer calls its
// expiry function once a time-to-live passes with no activity. The owner of
// a VM that outlives its command (a kept sandbox, the supervisor's
// machines) touches it on every use and marks it busy while a command
// runs; when it expires, the owner stops the VM. The clock is a parameter,
// so tests drive it by hand.
//
// It is plain Go over the standard library: it must not import vm, guest,
// sync, review or fyne.
package idle

import (
	"sync"
	"time"
)

// Clock schedules a function after a duration, as time.AfterFunc does.
type Clock interface {
	AfterFunc(d time.Duration, f func()) Stopper
}

// Stopper cancels a scheduled function, as *time.Timer does.
type Stopper interface {
	Stop() bool
}

// SystemClock is the real clock.
type SystemClock struct{}

// AfterFunc is time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Stopper { return time.AfterFunc(d, f) }

// Timer expires after TTL without activity. Its zero value is not usable:
// make one with New.
type Timer struct {
	ttl    time.Duration
	clock  Clock
	expire func()

	mu      sync.Mutex
	pending Stopper
	gen     uint64 // bumped on every (re)arm, so a stale firing does nothing
	busy    int    // uses in progress: no expiry while > 0
	done    bool   // expired or stopped
	expired bool   // expire was called
}

// New returns a Timer that calls expire (once, on the clock's goroutine)
// when ttl passes with no activity; a nil clock is SystemClock. A ttl of
// zero or less never expires. The timer is not armed until Start.
func New(ttl time.Duration, clock Clock, expire func()) *Timer {
	if clock == nil {
		clock = SystemClock{}
	}
	return &Timer{ttl: ttl, clock: clock, expire: expire}
}

// Start arms the timer: the TTL counts from now.
func (t *Timer) Start() { t.Touch() }

// Touch records activity: the TTL counts again from now. It does nothing
// once the timer has expired or stopped, or while it is busy.
func (t *Timer) Touch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.arm()
}

// Busy holds off expiry while a use is in progress (a command runs, a
// review reads the VM) and returns the function that ends the use, which
// counts as activity. It reports false, with a no-op function, when the
// timer has already expired: the caller must not use what it guards.
func (t *Timer) Busy() (end func(), ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return func() {}, false
	}
	t.busy++
	t.disarm()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.busy--
			t.arm()
		})
	}, true
}

// Stop disarms the timer for good, without calling expire. It reports
// whether the timer had not expired yet.
func (t *Timer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := !t.done
	t.done = true
	t.disarm()
	return was
}

// Expired reports whether expire has been called.
func (t *Timer) Expired() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.expired
}

// arm schedules expiry ttl from now; t.mu is held.
func (t *Timer) arm() {
	if t.done || t.busy > 0 || t.ttl <= 0 {
		return
	}
	t.disarm()
	t.gen++
	gen := t.gen
	t.pending = t.clock.AfterFunc(t.ttl, func() { t.fire(gen) })
}

func (t *Timer) disarm() {
	if t.pending != nil {
		t.pending.Stop()
		t.pending = nil
	}
}

func (t *Timer) fire(gen uint64) {
	t.mu.Lock()
	if t.done || t.busy > 0 || gen != t.gen {
		t.mu.Unlock()
		return
	}
	t.done, t.expired, t.pending = true, true, nil
	t.mu.Unlock()
	t.expire()
}
