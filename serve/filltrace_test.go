package serve

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/ipc"
)

// TestFillTrace: with Config.FillTrace, every fill of an epoch is a line
// "fill UNIX_NS BATCHES HOST_NS HELD CONN ANNOUNCED_NS": as many lines as
// fills, their batches adding up to the batches served, starts in order and
// within the epoch, the held counts within the trainer's slots, each
// announced no sooner than it was filled and before the epoch ended.
func TestFillTrace(t *testing.T) {
	trace, err := os.Create(filepath.Join(t.TempDir(), "fills"))
	if err != nil {
		t.Fatal(err)
	}
	defer trace.Close()
	srv, src := testServer(t, Config{FillTrace: trace})
	c := dial(t, srv)
	op := c.handshake(openReq())
	conn := int64(0)
	srv.mu.Lock()
	for ss := range srv.sessions {
		conn = int64(ss.id)
	}
	srv.mu.Unlock()
	before := time.Now().UnixNano()
	c.epoch(src, 0)
	after := time.Now().UnixNano()
	c.send(&ipc.Goodbye{})
	waitFor(t, func() bool { return srv.Trainers() == 0 })
	st := srv.Stats()
	text, err := os.ReadFile(trace.Name())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(text)), "\n")
	if int64(len(lines)) != st.Fills.Load() || len(lines) == 0 {
		t.Fatalf("%d trace lines for %d fills", len(lines), st.Fills.Load())
	}
	var batches, last int64
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 7 || f[0] != "fill" {
			t.Fatalf("line %d: %q", i, l)
		}
		var v [6]int64
		for k := range v {
			n, err := strconv.ParseInt(f[k+1], 10, 64)
			if err != nil {
				t.Fatalf("line %d: %q: %v", i, l, err)
			}
			v[k] = n
		}
		if v[0] < before || v[0] > after || v[0] < last {
			t.Errorf("line %d: start %d outside the epoch [%d, %d] or before the line above (%d)", i, v[0], before, after, last)
		}
		if v[1] < 1 || v[2] < 0 || v[3] < 0 || v[3] > int64(op.Slots) {
			t.Errorf("line %d: %d batches, %d ns, %d held (of %d slots)", i, v[1], v[2], v[3], op.Slots)
		}
		if v[5] < v[2] || v[0]+v[5] > after {
			t.Errorf("line %d: announced %d ns after its start, filled in %d, the epoch ended %d ns after it", i, v[5], v[2], after-v[0])
		}
		if v[4] != conn {
			t.Errorf("line %d: connection %d, the trainer's is %d", i, v[4], conn)
		}
		last = v[0]
		batches += v[1]
	}
	if batches != st.BatchesServed.Load() {
		t.Errorf("the trace's fills hold %d batches, %d served", batches, st.BatchesServed.Load())
	}
}

// A trace whose writes fail is turned off after the first failure; the
// fills go on.
func TestFillTraceWriteFails(t *testing.T) {
	w := &failingWriter{}
	srv, src := testServer(t, Config{FillTrace: w})
	c := dial(t, srv)
	c.handshake(openReq())
	c.epoch(src, 0)
	if w.calls != 1 {
		t.Errorf("%d writes to a failing trace, want 1 (then off)", w.calls)
	}
	if srv.Stats().Fills.Load() < 2 {
		t.Errorf("%d fills: the test needs several", srv.Stats().Fills.Load())
	}
}

type failingWriter struct {
	mu    sync.Mutex
	calls int
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	return 0, errors.New("disk full")
}
