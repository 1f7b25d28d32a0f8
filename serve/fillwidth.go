package serve

// How wide a fill grows: while the ring is busy or the trainer is ahead,
// and how an epoch's first fills ramp up.

import "time"

// growSweep reports whether a fill that has slots free slots, of width at
// most, with left batches of the epoch still to fill, waits for more: while
// the ring is busy with earlier fills, or while the trainer is ahead
// (pipeline.trainerAhead). Waiting for the trainer keeps sweeps wide when
// the loader outruns it (a GPU cache): a row shared by a sweep's batches is
// read once, scattered rows are read faster together, and the daemon's work
// beside the trainer's steps comes in few bursts.
func growSweep(slots, width, left int, trainerAhead bool, busy func() bool) bool {
	if slots >= width || slots >= left {
		return false
	}
	return trainerAhead || busy()
}

// stalledFill reports whether a fill of slots batches, of width at most
// (rampWidth's: one cut short by the epoch's ramp is not short), with left
// batches of the epoch still to fill, went short because the trainer
// stalled: it waited for the trainer and goes short of the width although
// the trainer holds more than the floor, so the trainer stopped releasing
// (releasePace), waiting for a batch while it keeps these (a window of
// batches, release="manual"), or paused once.
func stalledFill(slots, width, left int, waited bool, held, floor int) bool {
	return waited && slots < width && slots < left && held > floor
}

// rampWidth is the width of a fill whose first batch is the done'th of
// the epoch's batches to fill: at most done/2+1, so an epoch starts with
// fills of 1, 1, 2, 3, 4, 6, 9, 14, 21, 31 ... batches, each about half of
// all the batches filled before it. The trainer gets its first batch after a one-batch
// fill instead of a whole sweep. A fill's batches are ready together, after
// its whole sweep, and the fills of a ring go one after the other, so a
// trainer waits at a fill's first batch unless the fill takes no longer
// than its steps on the batches before it: growing by half keeps that true
// for a loader 1.5 times as fast as the trainer (a cache of a fifth of the
// rows on an H200), where growing threefold (1, 3, 9, 27 until session 30)
// kept the trainer waiting 31-33 ms at each epoch's start
// (docs/benchmarks.md, "The epoch's first fills").
func rampWidth(width, done int) int { return min(width, done/2+1) }

// trainerAhead reports whether the trainer holds more than the ring's
// SweepAhead announced, unreleased batches and keeps releasing them: then
// the next fill may wait for its releases, and the trainer still has
// SweepAhead batches to train on when it goes. A trainer that has released
// nothing for a while (releasePace.stalled) may be waiting for a batch
// while it keeps the ones it has, so nothing waits for it; and once one
// has, the floor rises to what it kept (pipeline.keeps), so that this
// epoch's later fills do not wait for that stall again.
func (p *pipeline) trainerAhead() bool {
	return p.ss.ring.SweepAhead() >= 0 && p.ss.held() > p.aheadFloor() && !p.ss.releases.stalled(time.Now())
}

// aheadFloor is the held batches above which the trainer counts as ahead.
func (p *pipeline) aheadFloor() int { return max(p.ss.ring.SweepAhead(), p.keeps) }
