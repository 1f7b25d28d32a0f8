package pinned

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/cudaext/cudatest"
)

func TestAllocAligned(t *testing.T) {
	for _, n := range []int64{1, 4096, HugePage, HugePage + 1, 5 << 20} {
		b, err := Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) != n || uintptr(unsafe.Pointer(&b[0]))%HugePage != 0 {
			t.Fatalf("Alloc(%d): len %d at %p", n, len(b), &b[0])
		}
		b[0], b[n-1] = 1, 2
		if m, _ := mappingOf(b); len(m)%HugePage != 0 {
			t.Fatal("mapping not whole huge pages")
		}
		if err := Free(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := Free(make([]byte, 10)); err == nil {
		t.Fatal("Free of Go memory succeeded")
	}
}

func TestLoad(t *testing.T) {
	const rb, rows = 400, 10001
	src := make([]byte, rb*rows)
	for i := range src {
		src[i] = byte(i*31 + i>>8)
	}
	gpu := cudatest.Available(t)
	s, err := Load(src, rb, rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Rows, src) || uintptr(unsafe.Pointer(&s.Rows[0]))%HugePage != 0 {
		t.Fatal("rows differ or are misaligned")
	}
	if s.Registered() != gpu || (s.DevicePtr != 0) != gpu {
		t.Fatalf("registered %v, device pointer %#x, gpu %v", s.Registered(), s.DevicePtr, gpu)
	}
	t.Logf("load %v, register %v, device pointer %#x", s.LoadTime, s.RegisterTime, s.DevicePtr)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := Load(src[:10], rb, rows, nil); err == nil {
		t.Fatal("size mismatch accepted")
	}
}

func TestFromAllocNoRegister(t *testing.T) {
	mem, err := Alloc(1000 * 64)
	if err != nil {
		t.Fatal(err)
	}
	mem[5] = 9
	s, err := FromAlloc(mem, 64, 1000, &Options{NoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Registered() || s.Rows[5] != 9 || len(s.Padded()) != HugePage {
		t.Fatal("FromAlloc")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := FromAlloc(make([]byte, 64), 64, 1, nil); err == nil {
		t.Fatal("FromAlloc of Go memory accepted")
	}
}

// TestFromAllocPart: a store over a part of an allocation that starts on a
// 2 MiB boundary (a dataset's rows after its file's header) owns the whole
// allocation; a part off the boundary is refused.
func TestFromAllocPart(t *testing.T) {
	mem, err := Alloc(3*HugePage + 100)
	if err != nil {
		t.Fatal(err)
	}
	rows := mem[HugePage : HugePage+64*1000]
	rows[5] = 7
	if _, err := FromAlloc(mem[HugePage/2:], 64, 1000, &Options{NoRegister: true}); err == nil {
		t.Fatal("a part off the 2 MiB boundary accepted")
	}
	s, err := FromAlloc(rows, 64, 1000, &Options{NoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Rows[5] != 7 || &s.Rows[0] != &mem[HugePage] || len(s.Padded()) != 3*HugePage {
		t.Fatalf("rows or padding wrong: %d padded bytes", len(s.Padded()))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Free(mem); err == nil {
		t.Fatal("the allocation was not freed with the store")
	}
}

func TestRegisterTwiceContexts(t *testing.T) {
	c := cudatest.Context(t)
	mem, _ := Alloc(HugePage)
	s, err := FromAlloc(mem, 128, HugePage/128, &Options{Context: c})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Registering the same memory again is the driver's "already registered".
	err = c.Do(func() error { return cudaext.HostRegister(s.Padded(), cudaext.HostRegisterPortable) })
	var ce *cudaext.Error
	if !errors.As(err, &ce) {
		t.Fatalf("second register: %v", err)
	}
}
