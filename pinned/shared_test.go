package pinned

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestAllocShared(t *testing.T) {
	SetShared(true)
	defer SetShared(false)
	const n = 3<<20 + 5
	b, err := Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	if uintptr(unsafe.Pointer(&b[0]))%HugePage != 0 || len(b) != n {
		t.Fatalf("not aligned or wrong length: %#x %d", uintptr(unsafe.Pointer(&b[0])), len(b))
	}
	for i := range b {
		b[i] = byte(i * 7)
	}
	fd, off, ok := SharedFD(b)
	if !ok || off != 0 {
		t.Fatalf("no memfd behind shared memory (%v) or offset %d", ok, off)
	}
	// A part of the allocation is in the same memfd, at its offset.
	if fd2, off2, ok := SharedFD(b[HugePage+3:]); !ok || fd2 != fd || off2 != HugePage+3 {
		t.Fatalf("part: fd %d offset %d (%v)", fd2, off2, ok)
	}
	// Another mapping of the fd (what a trainer does) sees the same bytes.
	view, err := unix.Mmap(fd, 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(view, b) {
		t.Fatal("the memfd's pages differ from the allocation")
	}
	unix.Munmap(view)
	if err := Free(b); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := SharedFD(b); ok {
		t.Fatal("fd still recorded after Free")
	}
	SetShared(false)
	c, err := Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := SharedFD(c); ok {
		t.Fatal("anonymous memory has a memfd")
	}
	Free(c)
}
