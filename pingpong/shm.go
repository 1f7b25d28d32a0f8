package pingpong

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// ShmRing is a ring of slots in one shared-memory file (memfd) that the
// trainer maps once. Slot i occupies [i*SlotBytes, (i+1)*SlotBytes).
//
// A slot is free, filling (acquired by the gather stage) or held (announced
// to the trainer, which still reads it). Only Release by the trainer returns a
// held slot to free; a slot is never handed out for filling while held.
// Methods are safe for concurrent use.
type ShmRing struct {
	Layout Layout
	fd     int
	mem    []byte

	mu     sync.Mutex
	state  []slotState
	tags   []Tag
	freed  chan struct{} // signalled (non-blocking) when a slot becomes free
	done   chan struct{} // closed by Close
	closed bool
}

type slotState uint8

const (
	slotFree slotState = iota
	slotFilling
	slotHeld
)

// Tag names the batch a held slot carries.
type Tag struct{ Epoch, Index uint32 }

// ErrClosed is returned by a closed ring.
var ErrClosed = errors.New("pingpong: ring closed")

// NewShmRing creates a ring of n slots in a new memfd named name. The pages
// are allocated lazily: a slot's untouched capacity costs no memory.
func NewShmRing(name string, n int, l Layout) (*ShmRing, error) {
	if n < 1 {
		return nil, fmt.Errorf("pingpong: %d slots, want at least 1", n)
	}
	size := l.SlotBytes * int64(n)
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("pingpong: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pingpong: sizing %d-byte shared memory: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pingpong: mmap of %d-byte shared memory: %w", size, err)
	}
	return &ShmRing{
		Layout: l, fd: fd, mem: mem,
		state: make([]slotState, n), tags: make([]Tag, n),
		freed: make(chan struct{}, 1), done: make(chan struct{}),
	}, nil
}

// FD is the memfd to pass to the trainer. It stays owned by the ring.
func (r *ShmRing) FD() int { return r.fd }

// Len is the number of slots.
func (r *ShmRing) Len() int { return len(r.state) }

// Bytes is the size of the whole shared-memory file.
func (r *ShmRing) Bytes() int64 { return int64(len(r.mem)) }

// Slot returns the memory of slot i. The caller may write it only between
// Acquire and Publish.
func (r *ShmRing) Slot(i int) []byte {
	s := r.Layout.SlotBytes
	return r.mem[int64(i)*s : int64(i+1)*s]
}

// Region returns the named region of slot i.
func (r *ShmRing) Region(i int, name string) []byte {
	g := r.Layout.Region(name)
	return r.Slot(i)[g.Offset : g.Offset+g.Bytes]
}

// Acquire waits for a free slot, marks it filling and returns it. Slots are
// taken lowest index first.
func (r *ShmRing) Acquire(ctx context.Context) (int, error) {
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return -1, ErrClosed
		}
		for i, s := range r.state {
			if s == slotFree {
				r.state[i] = slotFilling
				r.mu.Unlock()
				return i, nil
			}
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-r.freed:
		case <-r.done:
		}
	}
}

// Publish marks a filling slot as held by the trainer with the given tag.
func (r *ShmRing) Publish(i int, tag Tag) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state[i] != slotFilling {
		panic(fmt.Sprintf("pingpong: publish of slot %d in state %d", i, r.state[i]))
	}
	r.state[i], r.tags[i] = slotHeld, tag
}

// Abandon returns a filling slot to free without publishing it.
func (r *ShmRing) Abandon(i int) {
	r.mu.Lock()
	if r.state[i] == slotFilling {
		r.state[i] = slotFree
	}
	r.mu.Unlock()
	r.signal()
}

// Release returns a held slot to free. The tag must match the one it was
// published with: a trainer cannot release a slot it was not given.
func (r *ShmRing) Release(i int, tag Tag) error {
	r.mu.Lock()
	if i < 0 || i >= len(r.state) {
		r.mu.Unlock()
		return fmt.Errorf("release of slot %d: there are %d slots", i, len(r.state))
	}
	if r.state[i] != slotHeld || r.tags[i] != tag {
		st, tg := r.state[i], r.tags[i]
		r.mu.Unlock()
		if st != slotHeld {
			return fmt.Errorf("release of slot %d, which is not held by the trainer", i)
		}
		return fmt.Errorf("release of slot %d for batch %d of epoch %d, but it holds batch %d of epoch %d", i, tag.Index, tag.Epoch, tg.Index, tg.Epoch)
	}
	r.state[i] = slotFree
	r.mu.Unlock()
	r.signal()
	return nil
}

// ReleaseAll frees every held slot (the trainer dropped its batches, e.g. at
// an epoch restart). Filling slots are left to their filler.
func (r *ShmRing) ReleaseAll() {
	r.mu.Lock()
	for i, s := range r.state {
		if s == slotHeld {
			r.state[i] = slotFree
		}
	}
	r.mu.Unlock()
	r.signal()
}

// Held is the number of slots the trainer holds.
func (r *ShmRing) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.state {
		if s == slotHeld {
			n++
		}
	}
	return n
}

func (r *ShmRing) signal() {
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// Close unmaps and closes the shared memory; waiting Acquires return
// ErrClosed. The trainer's own mapping stays valid until it unmaps it.
func (r *ShmRing) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	close(r.done)
	err := unix.Munmap(r.mem)
	r.mem = nil
	return errors.Join(err, unix.Close(r.fd))
}
