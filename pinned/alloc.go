package pinned

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HugePage is the alignment and size granule of memory from Alloc.
const HugePage = 2 << 20

var (
	allocMu sync.Mutex
	// mappings maps the address of a slice from Alloc to its whole mapping.
	mappings = map[uintptr][]byte{}
)

// Alloc returns n bytes of zeroed, 2 MiB-aligned anonymous memory, advised for
// transparent huge pages (MADV_HUGEPAGE). It is not on the Go heap, so the
// CUDA driver may register it and DMA from it. The mapping is rounded up to a
// whole number of huge pages, so reading past len up to the next 2 MiB is
// safe. Release it with Free (or hand it, or a part of it starting on a
// 2 MiB boundary, to FromAlloc, whose Close frees it).
// A generator may write a table straight into it. Safe for concurrent use.
func Alloc(n int64) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("pinned: Alloc(%d): size must be positive", n)
	}
	size := (n + HugePage - 1) &^ (HugePage - 1)
	if shareAllocs.Load() {
		mem, err := allocShared(size)
		if err != nil {
			return nil, err
		}
		_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
		allocMu.Lock()
		mappings[uintptr(unsafe.Pointer(&mem[0]))] = mem
		allocMu.Unlock()
		return mem[:n:n], nil
	}
	// Over-map by one huge page, then trim the head and tail so the start is aligned.
	raw, err := mmapAnon(uintptr(size+HugePage), unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return nil, fmt.Errorf("pinned: mmap %d bytes: %w", size+HugePage, err)
	}
	base := uintptr(unsafe.Pointer(&raw[0]))
	head := int((HugePage - base%HugePage) % HugePage)
	// The head and tail go back at once: only the aligned middle is kept.
	if head > 0 {
		if err := munmap(base, uintptr(head)); err != nil {
			return nil, fmt.Errorf("pinned: munmap head: %w", err)
		}
	}
	if tail := uintptr(HugePage - head); tail > 0 {
		if err := munmap(base+uintptr(head)+uintptr(size), tail); err != nil {
			return nil, fmt.Errorf("pinned: munmap tail: %w", err)
		}
	}
	mem := raw[head : head+int(size) : head+int(size)]
	// Huge pages are advice: without THP the memory still works, in 4 KiB pages.
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	allocMu.Lock()
	mappings[uintptr(unsafe.Pointer(&mem[0]))] = mem
	allocMu.Unlock()
	return mem[:n:n], nil
}

// mappingOf returns the whole mapping from Alloc that b lies in and b's
// offset in it, or nil.
func mappingOf(b []byte) (mem []byte, off int) {
	if len(b) == 0 {
		return nil, 0
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	allocMu.Lock()
	defer allocMu.Unlock()
	for start, m := range mappings {
		if p >= start && p-start+uintptr(len(b)) <= uintptr(len(m)) {
			return m, int(p - start)
		}
	}
	return nil, 0
}

// Free unmaps memory from Alloc: the whole mapping b lies in (b may be the
// slice Alloc returned or any part of it). It must not be used afterwards.
func Free(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	mem, _ := mappingOf(b)
	if mem == nil {
		return fmt.Errorf("pinned: Free of memory not from Alloc")
	}
	p := uintptr(unsafe.Pointer(&mem[0]))
	allocMu.Lock()
	_, ok := mappings[p]
	delete(mappings, p)
	allocMu.Unlock()
	if !ok {
		return fmt.Errorf("pinned: Free of memory freed meanwhile")
	}
	defer closeShared(p)
	return munmap(p, uintptr(len(mem)))
}

// mmapAnon maps n bytes of private anonymous memory (MAP_NORESERVE) with
// the mmap system call itself. Not unix.Mmap: x/sys/unix keeps every
// mapping it made in a table until its own Munmap, which only takes whole
// mappings, so a mapping trimmed or freed here would stay referenced there
// after munmap, and the garbage collector would find that stale slice
// pointing into the Go heap once the heap reuses the address range ("found
// bad pointer in Go heap").
func mmapAnon(n uintptr, prot uintptr) ([]byte, error) {
	p, _, e := unix.Syscall6(unix.SYS_MMAP, 0, n, prot, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE, ^uintptr(0), 0)
	if e != 0 {
		return nil, e
	}
	// Not Go memory: convert the address without vet's uintptr-to-pointer
	// pattern, which is meant for Go memory.
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n), nil
}

func munmap(addr, n uintptr) error {
	if _, _, e := unix.Syscall(unix.SYS_MUNMAP, addr, n, 0); e != 0 {
		return e
	}
	return nil
}
