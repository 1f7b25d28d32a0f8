package serve

// The watchdog of a close that waits on a trainer gone mid-step
// (unstick.go); the GPU case itself is python/tests/test_cuda.py's
// KilledMidStepTest.

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// stuckRing stands for a GPU ring whose close waits on release records that
// died with the trainer: wait returns only once Unstick was called.
type stuckRing struct {
	unstuck  chan struct{}
	once     sync.Once
	unsticks atomic.Int32
}

func (r *stuckRing) Unstick() error {
	r.unsticks.Add(1)
	r.once.Do(func() { close(r.unstuck) })
	return nil
}

func TestWatchCloseUnsticksOnlyAStuckClose(t *testing.T) {
	defer func(d time.Duration) { unstickAfter = d }(unstickAfter)
	unstickAfter = 30 * time.Millisecond
	srv, _ := testServer(t, Config{})
	ss := &session{srv: srv, log: slog.New(slog.NewTextHandler(io.Discard, nil))}

	// A close that finishes in time is left alone.
	quick := &stuckRing{unstuck: make(chan struct{})}
	ss.watchClose(quick)()
	time.Sleep(3 * unstickAfter)
	if n := quick.unsticks.Load(); n != 0 {
		t.Fatalf("a close that finished in time was unstuck %d times", n)
	}

	// A close waiting on the gone trainer's records is unstuck once, after
	// the limit, and then finishes.
	stuck := &stuckRing{unstuck: make(chan struct{})}
	start := time.Now()
	stop := ss.watchClose(stuck)
	select {
	case <-stuck.unstuck:
	case <-time.After(5 * time.Second):
		t.Fatal("a stuck close was never unstuck")
	}
	if waited := time.Since(start); waited < unstickAfter {
		t.Errorf("unstuck after %v, before the limit of %v", waited, unstickAfter)
	}
	stop()
	time.Sleep(3 * unstickAfter)
	if n := stuck.unsticks.Load(); n != 1 {
		t.Errorf("unstuck %d times, want 1", n)
	}
	var m dto.Metric
	if err := srv.metrics.unstuck.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Errorf("gnnloader_unstuck_sessions_total = %v, want 1", got)
	}
}
