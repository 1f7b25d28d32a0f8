package pingpong

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gnnloader/gnnloader/cudaext"
)

// ErrNoRoom is wrapped by NewCUDARing when the slots do not fit in the
// device's free memory (errors.Is also matches cudaext.ErrOutOfMemory when the
// allocation itself failed).
var ErrNoRoom = errors.New("pingpong: slots do not fit in GPU memory")

// CUDARing is a ring of slots in one device allocation (cuMemAlloc of
// slots*SlotBytes, the same Layout as ShmRing), shared with the trainer once
// by its CUDA IPC memory handle. Each slot has two interprocess events:
// "ready", recorded by loaderd on its gather stream after the slot is filled,
// and "released", recorded by the trainer on its own stream after its last use
// of the slot. Before a slot is written again loaderd waits until its
// "released" event is done (AwaitReleased, a wait on the host), so a trainer
// whose kernels still read the slot never sees it overwritten, whatever the
// CPU messages say.
//
// The slot lifecycle (free, filling, held) is the one of ShmRing. Methods are
// safe for concurrent use.
type CUDARing struct {
	Layout Layout
	ctx    *cudaext.Context
	base   cudaext.DevicePtr
	handle cudaext.IPCMemHandle

	mu              sync.Mutex // the events' lifetime: AwaitReleased against free
	ready, released []*cudaext.Event
	events          [][2]cudaext.IPCEventHandle // per slot: ready, released

	// words: a 32-bit ready word per slot after the last slot, in the same
	// allocation (0: the driver has no stream memory operations). Each fill
	// writes the ring's fill count into the words of its slots behind the
	// fill (RecordReady; serial[i]: slot i's latest); a trainer's stream
	// waits for the word to reach the value BatchReady names
	// (cuStreamWaitValue32 on device memory) instead
	// of on the ready event: under MPS a wait on the interprocess event slows
	// loaderd's zero-copy reads (docs/benchmarks.md, session 14), a wait on a
	// word in device memory does not.
	words  cudaext.DevicePtr
	serial []atomic.Uint32
	fills  atomic.Uint32 // the latest fill's value

	slots slotStates
}

// NewCUDARing allocates n slots of layout l on ctx's device and makes their
// events and IPC handles. Slots that do not fit the device's free memory (less
// reserve bytes kept for the trainers) fail with an error wrapping ErrNoRoom,
// and a failed allocation with one wrapping cudaext.ErrOutOfMemory.
func NewCUDARing(ctx *cudaext.Context, n int, l Layout, reserve int64) (*CUDARing, error) {
	if n < 1 {
		return nil, fmt.Errorf("pingpong: %d slots, want at least 1", n)
	}
	r := &CUDARing{Layout: l, ctx: ctx, slots: newSlotStates(n), serial: make([]atomic.Uint32, n)}
	size := CUDARingBytes(n, l)
	err := ctx.Do(func() error {
		free, total, err := cudaext.MemGetInfo()
		if err != nil {
			return err
		}
		if size > free-reserve {
			return fmt.Errorf("%w: %d slots of %d bytes = %d bytes on cuda:%d, which has %d of %d bytes free (%d kept in reserve)",
				ErrNoRoom, n, l.SlotBytes, size, ctx.Device.Ordinal, free, total, reserve)
		}
		if r.base, err = cudaext.MemAlloc(size); err != nil {
			return fmt.Errorf("pingpong: allocating %d bytes of slots on cuda:%d: %w", size, ctx.Device.Ordinal, err)
		}
		if r.handle, err = cudaext.IPCMemHandleOf(r.base); err != nil {
			return err
		}
		if err := r.initWords(l.SlotBytes * int64(n)); err != nil {
			return err
		}
		r.events = make([][2]cudaext.IPCEventHandle, n)
		for i := 0; i < n; i++ {
			for k, list := range []*[]*cudaext.Event{&r.ready, &r.released} {
				e, err := cudaext.NewEvent(cudaext.EventInterprocess | cudaext.EventDisableTiming)
				if err != nil {
					return err
				}
				*list = append(*list, e)
				if r.events[i][k], err = e.IPCHandle(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		r.free()
		return nil, err
	}
	return r, nil
}

// wordsBytes is the room after n slots for their ready words.
func wordsBytes(n int) int64 { return (4*int64(n) + 255) / 256 * 256 }

// CUDARingBytes is the device memory a ring of n slots of layout l takes:
// the slots and their ready words.
func CUDARingBytes(n int, l Layout) int64 { return l.SlotBytes*int64(n) + wordsBytes(n) }

// initWords zeroes the ready words at off and writes one through the
// stream memory operation the fills use; where that write fails (a driver
// without stream memory operations), the ring runs without words and the
// trainers wait on the ready events.
func (r *CUDARing) initWords(off int64) error {
	s, err := cudaext.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	words := r.base + cudaext.DevicePtr(off)
	if err := cudaext.MemsetD32Async(words, 0, int64(len(r.serial)), s); err != nil {
		return err
	}
	if err := s.WriteValue32(words, 0); err != nil {
		return s.Synchronize() // no words; the events still work
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	r.words = words
	return nil
}

// ReadyWords is the offset of the slots' ready words from the start of the
// allocation (word i, a uint32, at ReadyWords()+4*i), or 0 when the ring has
// none.
func (r *CUDARing) ReadyWords() int64 {
	if r.words == 0 {
		return 0
	}
	return int64(r.words - r.base)
}

// ReadyValue is the value slot i's ready word takes when its latest fill is
// done (that fill's count on the ring; 0 when the ring has no words).
func (r *CUDARing) ReadyValue(i int) uint32 {
	if r.words == 0 {
		return 0
	}
	return r.serial[i].Load()
}

// Context is the context the ring's memory and events live in.
func (r *CUDARing) Context() *cudaext.Context { return r.ctx }

// MemHandle is the IPC handle of the whole ring (slot i at i*SlotBytes).
func (r *CUDARing) MemHandle() cudaext.IPCMemHandle { return r.handle }

// EventHandles are the IPC handles of each slot's ready and released events.
func (r *CUDARing) EventHandles() [][2]cudaext.IPCEventHandle { return r.events }

// Len is the number of slots.
func (r *CUDARing) Len() int { return r.slots.len() }

// Bytes is the size of the allocation.
func (r *CUDARing) Bytes() int64 { return CUDARingBytes(r.Len(), r.Layout) }

// Slot is the device address of slot i.
func (r *CUDARing) Slot(i int) cudaext.DevicePtr {
	return r.base + cudaext.DevicePtr(int64(i)*r.Layout.SlotBytes)
}

// Region is the device address and capacity of the named region of slot i.
func (r *CUDARing) Region(i int, name string) (cudaext.DevicePtr, int64) {
	g := r.Layout.Region(name)
	return r.Slot(i) + cudaext.DevicePtr(g.Offset), g.Bytes
}

// RegionAt is the device address and capacity of region k (of
// Layout.Regions) of slot i.
func (r *CUDARing) RegionAt(i, k int) (cudaext.DevicePtr, int64) {
	g := r.Layout.Regions[k]
	return r.Slot(i) + cudaext.DevicePtr(g.Offset), g.Bytes
}

// AwaitReleased waits, on the host, until the trainer's last use of each
// of slots is done on the GPU (its released event complete; one never
// recorded is done), or until ctx ends, or the ring closes (ErrClosed).
//
// The wait is on the host, never a stream's wait on the event: a trainer
// killed mid-step (SIGKILL, the OOM killer) takes the release records still
// queued behind its kernels down with its context, and they never complete.
// A stream of loaderd's waiting on one would wait forever, and with it every
// call that synchronises loaderd's context (module loads, frees, stream
// creation: measured on an H100, the next trainer's Open hung in
// cuModuleLoadData), so that one killed trainer would stop the GPU for all.
// A host wait ends with the session's context instead.
func (r *CUDARing) AwaitReleased(ctx context.Context, slots []int) error {
	pending := slots
	return cudaext.PollUntil(ctx, func() (bool, error) {
		var err error
		pending, err = r.notReleased(pending)
		return len(pending) == 0, err
	})
}

// notReleased returns those of slots whose released event is not done yet,
// querying each in one context switch (a new slice: slots stays as it is).
func (r *CUDARing) notReleased(slots []int) (left []int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released == nil {
		return nil, ErrClosed
	}
	err = r.ctx.Do(func() error {
		for _, i := range slots {
			done, err := r.released[r.slots.coverOf(i)].Done()
			if err != nil {
				return err
			}
			if !done {
				left = append(left, i)
			}
		}
		return nil
	})
	return left, err
}

// RecordReady marks the slots of one fill filled behind the work queued on
// s so far (context current): when the ring has words, it writes the fill's
// value into each slot's word (ReadyValue then returns it), then records
// each slot's ready event, so an event seen done implies the word written.
// The trainer's stream waits on either before reading a slot.
//
// The value is the ring's fill count (0 skipped when it wraps: 0 means "no
// word" to the trainer), the same for every slot of the fill and rising
// fill by fill; all fills of a ring run on one stream, so each fill's words
// are written after its data and after every earlier fill's words (a
// trainer whose stream waited for value v need not wait for any value at or
// below it: ipc.BatchReady). One goroutine at a time fills the ring (the
// session's fill loop), so the count's load and store need not be one
// atomic step; the atomics let other goroutines read the slots' values.
func (r *CUDARing) RecordReady(s *cudaext.Stream, slots ...int) error {
	var v uint32
	if r.words != 0 {
		if v = r.fills.Load() + 1; v == 0 {
			v = 1
		}
		r.fills.Store(v)
	}
	for _, i := range slots {
		if v != 0 {
			if err := s.WriteValue32(r.words+cudaext.DevicePtr(4*i), v); err != nil {
				return err
			}
			r.serial[i].Store(v)
		}
		if err := r.ready[i].Record(s); err != nil {
			return err
		}
	}
	return nil
}

// ReadyEvent is slot i's ready event (for tests and in-process readers).
func (r *CUDARing) ReadyEvent(i int) *cudaext.Event { return r.ready[i] }

// ReleasedEvent is slot i's released event (for in-process trainers: tests).
func (r *CUDARing) ReleasedEvent(i int) *cudaext.Event { return r.released[i] }

// Acquire waits for a free slot, marks it filling and returns it.
func (r *CUDARing) Acquire(ctx context.Context) (int, error) { return r.slots.acquire(ctx) }

// Publish marks a filling slot as held by the trainer.
func (r *CUDARing) Publish(i int, tag Tag) { r.slots.publish(i, tag) }

// Abandon returns a filling slot to free without publishing it.
func (r *CUDARing) Abandon(i int) { r.slots.abandon(i) }

// Release returns a held slot to free; the tag must match. The trainer has
// recorded the slot's released event before asking, so the next fill's
// AwaitReleased orders after the trainer's last use. Deferred (the trainer
// recorded no event for it), the slot stays out of use until the next
// release that is not deferred: that one frees it too, and its released
// event is what AwaitReleased waits for on the slot's behalf (the trainer
// recorded it after its work on both, on the same stream).
func (r *CUDARing) Release(i int, tag Tag, deferred bool) error {
	return r.slots.release(i, tag, deferred)
}

// ReleaseAll frees every held slot.
func (r *CUDARing) ReleaseAll() { r.slots.releaseAll() }

// Held is the number of slots the trainer holds.
func (r *CUDARing) Held() int { return r.slots.held() }

// Close frees the events and the memory; waiting Acquires return ErrClosed.
// The caller must have finished (synchronised) its own work on the slots. A
// trainer that still has the memory open keeps its mapping until it closes it.
func (r *CUDARing) Close() error {
	if !r.slots.close() {
		return nil
	}
	return r.free()
}

func (r *CUDARing) free() error {
	return r.ctx.Do(func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		var errs []error
		for _, e := range r.ready {
			errs = append(errs, e.Destroy())
		}
		for _, e := range r.released {
			errs = append(errs, e.Destroy())
		}
		r.ready, r.released = nil, nil
		if r.base != 0 {
			errs = append(errs, cudaext.MemFree(r.base))
			r.base = 0
		}
		return errors.Join(errs...)
	})
}
