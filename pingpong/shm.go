package pingpong

import (
	"context"
	"errors"
	"fmt"

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

	slots slotStates
}

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
		slots: newSlotStates(n),
	}, nil
}

// FD is the memfd to pass to the trainer. It stays owned by the ring.
func (r *ShmRing) FD() int { return r.fd }

// Len is the number of slots.
func (r *ShmRing) Len() int { return r.slots.len() }

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

// RegionAt returns region k (of Layout.Regions) of slot i.
func (r *ShmRing) RegionAt(i, k int) []byte {
	g := r.Layout.Regions[k]
	return r.Slot(i)[g.Offset : g.Offset+g.Bytes]
}

// Acquire waits for a free slot, marks it filling and returns it. Slots are
// taken in turn (the one after the last taken that is free).
func (r *ShmRing) Acquire(ctx context.Context) (int, error) { return r.slots.acquire(ctx) }

// Publish marks a filling slot as held by the trainer with the given tag.
func (r *ShmRing) Publish(i int, tag Tag) { r.slots.publish(i, tag) }

// Abandon returns a filling slot to free without publishing it.
func (r *ShmRing) Abandon(i int) { r.slots.abandon(i) }

// Release returns a held slot to free. The tag must match the one it was
// published with: a trainer cannot release a slot it was not given.
func (r *ShmRing) Release(i int, tag Tag, deferred bool) error {
	return r.slots.release(i, tag, deferred)
}

// ReleaseAll frees every held slot (the trainer dropped its batches, e.g. at
// an epoch restart). Filling slots are left to their filler.
func (r *ShmRing) ReleaseAll() { r.slots.releaseAll() }

// Held is the number of slots the trainer holds.
func (r *ShmRing) Held() int { return r.slots.held() }

// Close unmaps and closes the shared memory; waiting Acquires return
// ErrClosed. The trainer's own mapping stays valid until it unmaps it.
func (r *ShmRing) Close() error {
	if !r.slots.close() {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return errors.Join(err, unix.Close(r.fd))
}
