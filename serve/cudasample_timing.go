package serve

// The GPU times of a ring's fills (GPUConfig.Timing): events recorded at
// each fill's marks on the sampling and ring streams, added up once all of a
// fill's marks are recorded (deviceSampling, cudasample.go).

import (
	"time"

	"github.com/gnnloader/gnnloader/cudaext"
)

// fillTimes are the GPU times of the fills timed so far (GPUConfig.Timing).
type fillTimes struct {
	sampled    time.Duration // sampling, on the sampling stream
	sampleWait time.Duration // the ring's stream waiting for a fill's sampling
	hostWait   time.Duration // the ring's stream idle before a fill was enqueued
}

// fillEvents time one fill, indexed by the marks below.
type fillEvents [5]*cudaext.Event

const (
	markSampling   = iota // sampling stream: before the fill's sampling
	markSampled           // sampling stream: after it
	markFillQueued        // ring stream: the fill's work reached it (it was idle before, if earlier work ended first)
	markFillGo            // ring stream: its wait for the sampling is over
	markFilled            // ring stream: the fill's slots are ready
)

// timeMark records mark k of the current fill on stream st (timing on).
// A fill joins the pending ones only once its last mark is recorded, so a
// reader of the times never adds up a fill still being enqueued. Context
// current.
func (d *deviceSampling) timeMark(k int, st *cudaext.Stream) error {
	if !d.timing {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if k == markSampling {
		d.harvestLocked(false)
		if len(d.freeTimes) == 0 {
			var f fillEvents
			if err := cudaext.NewEvents(f[:], cudaext.EventDefault); err != nil {
				return err
			}
			d.freeTimes = append(d.freeTimes, f)
		}
		f := d.freeTimes[len(d.freeTimes)-1]
		d.freeTimes = d.freeTimes[:len(d.freeTimes)-1]
		d.cur = &f
	}
	if d.cur == nil {
		return nil
	}
	if err := d.cur[k].Record(st); err != nil {
		return err
	}
	if k == markFilled {
		d.times = append(d.times, *d.cur)
		d.cur = nil
	}
	return nil
}

// dropLocked gives up timing the current fill (it failed or stopped): the
// fills before it are added up, waiting for them, and the next fill's idle
// time is not measured from them. d.mu held.
func (d *deviceSampling) dropLocked() {
	if d.cur != nil {
		d.freeTimes = append(d.freeTimes, *d.cur) // recorded again before any use
		d.cur = nil
	}
	d.harvestLocked(true)
	if d.last != nil {
		d.freeTimes = append(d.freeTimes, *d.last)
		d.last = nil
	}
}

// harvestLocked adds up the pending fills whose last mark has completed
// (every pending fill when wait is set). d.mu held.
func (d *deviceSampling) harvestLocked(wait bool) {
	for len(d.times) > 0 {
		f := d.times[0]
		done, err := f[markFilled].Done()
		if err != nil || !done && !wait {
			return
		}
		if !done {
			f[markFilled].Synchronize()
		}
		el := func(a, b *cudaext.Event) time.Duration { e, _ := cudaext.Elapsed(a, b); return max(e, 0) }
		d.timed.sampled += el(f[markSampling], f[markSampled])
		d.timed.sampleWait += el(f[markFillQueued], f[markFillGo])
		if d.last != nil {
			d.timed.hostWait += el(d.last[markFilled], f[markFillQueued])
			d.freeTimes = append(d.freeTimes, *d.last)
		}
		d.last = &f
		d.times = d.times[1:]
	}
}

// fillTimes are the GPU times of the fills timed so far (those complete
// on the GPU).
func (d *deviceSampling) fillTimes() fillTimes {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.harvestLocked(false)
	return d.timed
}

// fillFailed stops timing the current fill. Context current or not.
func (d *deviceSampling) fillFailed() {
	if !d.timing {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil {
		d.dropLocked()
	}
}
