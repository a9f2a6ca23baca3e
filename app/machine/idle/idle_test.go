package idle

import (
	"sort"
	"sync"
	"testing"
	"time"
)

// fakeClock runs scheduled functions when the test advances it.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Duration
	timer []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Duration
	f       func()
	stopped bool
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	ft := &fakeTimer{c: c, at: c.now + d, f: f}
	c.timer = append(c.timer, ft)
	return ft
}

func (ft *fakeTimer) Stop() bool {
	ft.c.mu.Lock()
	defer ft.c.mu.Unlock()
	was := !ft.stopped
	ft.stopped = true
	return was
}

// Advance moves the clock on by d, running what falls due in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now + d
	for {
		sort.Slice(c.timer, func(i, j int) bool { return c.timer[i].at < c.timer[j].at })
		var due *fakeTimer
		for i, ft := range c.timer {
			if !ft.stopped && ft.at <= end {
				due = ft
				c.timer = append(c.timer[:i], c.timer[i+1:]...)
				break
			}
		}
		if due == nil {
			break
		}
		c.now = due.at
		due.stopped = true
		c.mu.Unlock()
		due.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

func TestTimer(t *testing.T) {
	const ttl = 10 * time.Minute
	tests := []struct {
		name string
		run  func(c *fakeClock, tm *Timer)
		want int // expiries
	}{
		{"expires after the ttl", func(c *fakeClock, tm *Timer) { c.Advance(ttl) }, 1},
		{"not before", func(c *fakeClock, tm *Timer) { c.Advance(ttl - time.Second) }, 0},
		{"touch restarts the ttl", func(c *fakeClock, tm *Timer) {
			c.Advance(ttl - time.Second)
			tm.Touch()
			c.Advance(ttl - time.Second)
		}, 0},
		{"expires once", func(c *fakeClock, tm *Timer) { c.Advance(ttl); tm.Touch(); c.Advance(3 * ttl) }, 1},
		{"busy holds it off", func(c *fakeClock, tm *Timer) {
			end, ok := tm.Busy()
			if !ok {
				panic("busy refused")
			}
			c.Advance(5 * ttl)
			end()
			c.Advance(ttl - time.Second)
		}, 0},
		{"the end of a use counts as activity", func(c *fakeClock, tm *Timer) {
			end, _ := tm.Busy()
			c.Advance(ttl)
			end()
			end() // idempotent
			c.Advance(ttl)
		}, 1},
		{"stop", func(c *fakeClock, tm *Timer) { tm.Stop(); c.Advance(2 * ttl) }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fakeClock{}
			n := 0
			tm := New(ttl, c, func() { n++ })
			tm.Start()
			tt.run(c, tm)
			if n != tt.want {
				t.Errorf("expired %d times, want %d", n, tt.want)
			}
			if tm.Expired() != (tt.want > 0) {
				t.Errorf("Expired() = %v", tm.Expired())
			}
		})
	}
}

func TestTimerAfterExpiry(t *testing.T) {
	c := &fakeClock{}
	tm := New(time.Minute, c, func() {})
	tm.Start()
	c.Advance(time.Minute)
	if _, ok := tm.Busy(); ok {
		t.Error("Busy on an expired timer: ok")
	}
	if tm.Stop() {
		t.Error("Stop after expiry reported it had not expired")
	}
}

func TestTimerNoTTL(t *testing.T) {
	c := &fakeClock{}
	n := 0
	tm := New(0, c, func() { n++ })
	tm.Start()
	c.Advance(1000 * time.Hour)
	if n != 0 {
		t.Errorf("a timer without a ttl expired")
	}
}

func TestSystemClock(t *testing.T) {
	done := make(chan struct{})
	tm := New(time.Millisecond, nil, func() { close(done) })
	tm.Start()
	<-done
	if !tm.Expired() {
		t.Error("not expired after its expiry ran")
	}
}
