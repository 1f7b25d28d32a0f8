package pinned

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Shared memory: with SetShared(true), Alloc takes its memory from a memfd
// (memfd_create, mapped MAP_SHARED) instead of anonymous private memory, so
// the daemon can hand the feature table to a trainer read-only (SharedFD,
// passed with SCM_RIGHTS) without a second copy of it. The memory is the
// same for the CUDA driver (it registers and reads it as before).

var (
	shareAllocs atomic.Bool
	sharedMu    sync.Mutex
	sharedFDs   = map[uintptr]int{} // start of an Alloc'd mapping -> its memfd
)

// SetShared makes later Allocs come from memfds (true) or anonymous memory
// (false, the default).
func SetShared(on bool) { shareAllocs.Store(on) }

// Shared reports whether Alloc takes memory from memfds.
func Shared() bool { return shareAllocs.Load() }

// SharedFD returns the memfd behind memory from Alloc made while SetShared
// was on (b may be any part of it), b's offset in it, and whether there is
// one. The fd stays owned by this package (Free closes it); a caller sending
// it to another process keeps it open only for the send.
func SharedFD(b []byte) (fd int, off int64, ok bool) {
	mem, o := mappingOf(b)
	if mem == nil {
		return -1, 0, false
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	fd, ok = sharedFDs[uintptr(unsafe.Pointer(&mem[0]))]
	if !ok {
		return -1, 0, false
	}
	return fd, int64(o), true
}

// allocShared maps size bytes (a multiple of HugePage) of a new memfd at a
// 2 MiB-aligned address: reserve an anonymous range one huge page larger,
// then map the memfd over its aligned part with MAP_FIXED.
func allocShared(size int64) ([]byte, error) {
	fd, err := unix.MemfdCreate("gnnloader-features", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("pinned: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pinned: ftruncate memfd to %d bytes: %w", size, err)
	}
	res, err := mmapAnon(uintptr(size+HugePage), unix.PROT_NONE)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pinned: reserve %d bytes: %w", size+HugePage, err)
	}
	base := uintptr(unsafe.Pointer(&res[0]))
	head := (HugePage - base%HugePage) % HugePage
	addr := base + head
	p, _, e := unix.Syscall6(unix.SYS_MMAP, addr, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_SHARED|unix.MAP_FIXED, uintptr(fd), 0)
	if e != 0 || p != addr {
		munmap(base, uintptr(size+HugePage))
		unix.Close(fd)
		return nil, fmt.Errorf("pinned: mmap memfd of %d bytes: %v", size, e)
	}
	if head > 0 {
		munmap(base, head)
	}
	if tail := HugePage - head; tail > 0 {
		munmap(addr+uintptr(size), tail)
	}
	mem := res[head : head+uintptr(size) : head+uintptr(size)] // now the memfd's pages
	sharedMu.Lock()
	sharedFDs[addr] = fd
	sharedMu.Unlock()
	return mem, nil
}

// closeShared closes the memfd of the mapping starting at p, if any.
func closeShared(p uintptr) {
	sharedMu.Lock()
	fd, ok := sharedFDs[p]
	delete(sharedFDs, p)
	sharedMu.Unlock()
	if ok {
		unix.Close(fd)
	}
}
