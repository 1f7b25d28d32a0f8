package serve

// The fill trace (Config.FillTrace): a line per slot fill.

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

type fillTrace struct {
	mu  sync.Mutex
	w   io.Writer // nil once a write failed
	log *slog.Logger
}

// fill records one fill: its start, batches, host time, the batches the
// trainer held as it began, the trainer's connection (the logs' conn) and
// the time from its start until its last batch was announced (on a GPU
// that samples, after the sampling's counts came back). Called once the
// fill's batches are announced: a fill whose announcement failed (a
// connection going down) leaves no line. Nil-safe.
func (t *fillTrace) fill(start time.Time, batches int, took, announced time.Duration, held int, conn uint64) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w == nil {
		return
	}
	if _, err := fmt.Fprintf(t.w, "fill %d %d %d %d %d %d\n", start.UnixNano(), batches, took.Nanoseconds(), held, conn, announced.Nanoseconds()); err != nil {
		t.log.Warn("fill trace off: a write failed", "err", err)
		t.w = nil
	}
}
