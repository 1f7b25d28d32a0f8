package serve

// A trainer's release pace (pipeline.trainerAhead in epoch.go): whether it
// still releases at its usual rate, or has stalled.

import (
	"sync/atomic"
	"time"
)

// releasePace follows the gaps between a trainer's releases.
type releasePace struct {
	last atomic.Int64 // unix ns of the last release; 0: none yet
	gap  atomic.Int64 // moving average of the gaps, ns
}

// stallFloor and stallCeiling bound the time without a release that counts
// as a stall. Releases less than burstGap apart are one burst: a client may
// send several at once (the Python client holds up to slots/16 and sends
// them together), and the gap that tells a trainer's pace is the one between
// bursts. Counting the gaps inside a burst made the average a few
// microseconds, so every pause between two bursts (four steps) read as a
// stall, and a fill then stopped waiting for the trainer.
const (
	stallFloor   = 5 * time.Millisecond
	stallCeiling = 100 * time.Millisecond
	burstGap     = 250 * time.Microsecond
)

// released records a release at now. A gap inside a burst (under burstGap)
// is not a gap; one longer than the stall limit (a stall, an evaluation
// between epochs) is left out of the average, so that neither makes the
// next stall take longer to see.
func (r *releasePace) released(now time.Time) {
	t := now.UnixNano()
	prev := r.last.Swap(t)
	if prev == 0 || t <= prev {
		return
	}
	g, d := r.gap.Load(), t-prev
	switch {
	case time.Duration(d) < burstGap: // inside a burst: not a gap
	case g == 0:
		r.gap.Store(d)
	case time.Duration(d) <= r.limit():
		r.gap.Store(g - g/8 + d/8)
	}
}

// limit is four of the average gaps, within [stallFloor, stallCeiling].
func (r *releasePace) limit() time.Duration {
	return min(max(4*time.Duration(r.gap.Load()), stallFloor), stallCeiling)
}

// stalled reports whether the trainer has released nothing for four of its
// average gaps (within [stallFloor, stallCeiling]), or never has.
func (r *releasePace) stalled(now time.Time) bool {
	last := r.last.Load()
	if last == 0 {
		return true
	}
	return now.Sub(time.Unix(0, last)) > r.limit()
}
