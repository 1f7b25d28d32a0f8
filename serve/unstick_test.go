package serve

// The watchdog of a close that waits on a trainer gone mid-step
// (unstick.go); the GPU case itself is python/tests/test_cuda.py's
// KilledMidStepTest.

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// stuckRing stands for a GPU ring whose close waits on release records that
// died with the trainer: the close waits for unstuck, which Unstick closes.
type stuckRing struct {
	unstuck  chan struct{}
	once     sync.Once
	unsticks atomic.Int32
}

func newStuckRing() *stuckRing { return &stuckRing{unstuck: make(chan struct{})} }

func (r *stuckRing) Unstick() (int, error) {
	r.unsticks.Add(1)
	r.once.Do(func() { close(r.unstuck) })
	return 4, nil
}

// deadPID is the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no child process to stand for a trainer: %v", err)
	}
	return cmd.Process.Pid
}

func counter(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestWatchCloseUnsticksOnlyAGoneTrainersStuckClose(t *testing.T) {
	defer func(d time.Duration) { unstickAfter = d }(unstickAfter)
	unstickAfter = 30 * time.Millisecond
	srv, _ := testServer(t, Config{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// A close that finishes in time is left alone.
	gone := &session{srv: srv, log: quiet, pid: deadPID(t)}
	quick := newStuckRing()
	gone.watchClose(quick)()
	time.Sleep(3 * unstickAfter)
	if n := quick.unsticks.Load(); n != 0 {
		t.Fatalf("a close that finished in time was unstuck %d times", n)
	}

	// A close waiting on a live trainer's GPU work is waited for.
	alive := &session{srv: srv, log: quiet, pid: os.Getpid()}
	waiting := newStuckRing()
	stop := alive.watchClose(waiting)
	time.Sleep(4 * unstickAfter)
	stop()
	if n := waiting.unsticks.Load(); n != 0 {
		t.Fatalf("a live trainer's slots were released by loaderd %d times", n)
	}

	// A gone trainer's stuck close is unstuck once, after the limit.
	stuck := newStuckRing()
	start := time.Now()
	stop = gone.watchClose(stuck)
	select {
	case <-stuck.unstuck:
	case <-time.After(5 * time.Second):
		t.Fatal("a gone trainer's stuck close was never unstuck")
	}
	if waited := time.Since(start); waited < unstickAfter {
		t.Errorf("unstuck after %v, before the limit of %v", waited, unstickAfter)
	}
	stop()
	time.Sleep(3 * unstickAfter)
	if n := stuck.unsticks.Load(); n != 1 {
		t.Errorf("unstuck %d times, want 1", n)
	}
	if got := counter(t, srv.metrics.unstuck); got != 1 {
		t.Errorf("gnnloader_unstuck_sessions_total = %v, want 1", got)
	}

	// A pid unknown: gone once the connection closed without a goodbye.
	unknown := &session{srv: srv, log: quiet}
	if unknown.trainerGone() {
		t.Error("a trainer of unknown pid is gone before its connection closed")
	}
	unknown.vanished.Store(true)
	if !unknown.trainerGone() {
		t.Error("a trainer of unknown pid whose connection closed without goodbye is not gone")
	}
}

// A session still stuck after the unstick gives its place in the budget
// back, so other trainers are not refused for it.
func TestWatchCloseGivesTheBudgetBackWhenStillStuck(t *testing.T) {
	defer func(d time.Duration) { unstickAfter = d }(unstickAfter)
	unstickAfter = 20 * time.Millisecond
	srv, _ := testServer(t, Config{})
	ss := &session{srv: srv, log: slog.New(slog.NewTextHandler(io.Discard, nil)), pid: deadPID(t)}
	ss.admitted = [2]int64{1 << 20, 1 << 10}
	srv.mu.Lock()
	srv.sessions[ss] = struct{}{}
	srv.budgetUsed += ss.admitted[0] + ss.admitted[1]
	srv.slotBytes += ss.admitted[0]
	srv.mu.Unlock()
	used := srv.BudgetUsed()

	neverDone := &neverRing{}
	stop := ss.watchClose(neverDone)
	defer stop()
	deadline := time.Now().Add(5 * time.Second)
	for srv.Trainers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stuck session still holds its place after twice the limit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got, want := srv.BudgetUsed(), used-ss.admitted[0]-ss.admitted[1]; got != want {
		t.Errorf("budget used %d after giving the session's back, want %d", got, want)
	}
	if neverDone.unsticks.Load() != 1 {
		t.Errorf("unstuck %d times, want 1", neverDone.unsticks.Load())
	}
}

// neverRing's unstick does not end the close's wait (the records' waits
// outlive a later record).
type neverRing struct{ unsticks atomic.Int32 }

func (r *neverRing) Unstick() (int, error) { r.unsticks.Add(1); return 4, nil }

// A zombie (exited, not reaped) is gone: its GPU context is.
func TestProcessGoneSeesZombies(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatal("an exited, unreaped child is not seen as gone")
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Error("a reaped child is not gone")
	}
	if processGone(os.Getpid()) {
		t.Error("this process is seen as gone")
	}
}
