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
	fd, ok := SharedFD(b)
	if !ok {
		t.Fatal("no memfd behind shared memory")
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
	if _, ok := SharedFD(b); ok {
		t.Fatal("fd still recorded after Free")
	}
	SetShared(false)
	c, err := Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := SharedFD(c); ok {
		t.Fatal("anonymous memory has a memfd")
	}
	Free(c)
}
