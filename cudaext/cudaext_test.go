package cudaext

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestKernelStamp(t *testing.T) {
	if err := CheckKernelStamp(); err != nil {
		t.Fatal(err)
	}
	st, _ := ReadKernelStamp()
	t.Logf("kernels: sources %s, built by %s", st.Sources, st.NVCC)
}

func TestKernelSourcesHashFormat(t *testing.T) {
	// The listing is sha256sum's: "<hex>  <name>\n" per file in name order.
	fsys := fstest.MapFS{"b.cu": {Data: []byte("b")}, "a.cu": {Data: []byte("a")}, "x.txt": {Data: []byte("x")}}
	h, err := KernelSourcesHash(fsys)
	if err != nil {
		t.Fatal(err)
	}
	// printf a > a.cu; printf b > b.cu; sha256sum a.cu b.cu | sha256sum
	const want = "b66af7bf0e63d03b0cf50e85e2eb27484f0c421f5e5e1b2be462d0692efc173c"
	if h != want {
		t.Fatalf("hash %s, want %s (sha256sum a.cu b.cu | sha256sum)", h, want)
	}
}

func TestErrorIs(t *testing.T) {
	e := &Error{Op: "cuMemAlloc", Code: codeOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY"}
	if !errors.Is(e, ErrOutOfMemory) || errors.Is(e, ErrNoDevice) {
		t.Fatal("out of memory does not match ErrOutOfMemory alone")
	}
	if !errors.Is(&Error{Code: codeNoDevice}, ErrNoDevice) || !errors.Is(&Error{Code: codeInsufficientDriver}, ErrNoDriver) {
		t.Fatal("sentinels")
	}
	if ns := (&Error{Code: codeNotSupported}); !errors.Is(ns, ErrNotSupported) || errors.Is(e, ErrNotSupported) {
		t.Fatal("ErrNotSupported matches code 801 alone")
	}
	if s := e.Error(); !strings.Contains(s, "cuMemAlloc") || !strings.Contains(s, "OUT_OF_MEMORY") {
		t.Fatal(s)
	}
}

func TestInfo(t *testing.T) {
	si := Info()
	b, err := json.Marshal(si)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\n%s", si, b)
	if !si.GPU {
		if !strings.HasPrefix(si.String(), "no GPU: ") {
			t.Fatal(si.String())
		}
		if os.Getenv("GNNLOADER_REQUIRE_GPU") == "1" {
			t.Fatal("no GPU")
		}
		return
	}
	if len(si.Devices) == 0 || si.Devices[0].SMs == 0 || si.Devices[0].MemoryTotal == 0 {
		t.Fatalf("incomplete: %+v", si)
	}
}

func TestNoDriverError(t *testing.T) {
	if err := Init(); err != nil {
		if !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) {
			t.Fatalf("Init without a GPU: %v, want ErrNoDriver or ErrNoDevice", err)
		}
		t.Logf("Init: %v", err)
	}
}

func TestMemoryStreamsEvents(t *testing.T) {
	c := primary(t)
	err := c.Do(func() error {
		s, err := NewStream()
		if err != nil {
			return err
		}
		defer s.Destroy()
		const n = 1 << 20
		p, err := MemAlloc(n)
		if err != nil {
			return err
		}
		defer MemFree(p)
		if err := MemsetD8Async(p, 0x5a, n, s); err != nil {
			return err
		}
		got := make([]byte, n)
		if err := CopyToHost(got, p, s); err != nil {
			return err
		}
		if !bytes.Equal(got, bytes.Repeat([]byte{0x5a}, n)) {
			t.Error("memset")
		}
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i * 7)
		}
		if err := CopyFromHost(p, src, s); err != nil {
			return err
		}
		p2, err := MemAlloc(n)
		if err != nil {
			return err
		}
		defer MemFree(p2)
		a, _ := NewEvent(EventDefault)
		b, _ := NewEvent(EventDefault)
		defer a.Destroy()
		defer b.Destroy()
		a.Record(s)
		if err := MemcpyDtoDAsync(p2, p, n, s); err != nil {
			return err
		}
		b.Record(s)
		if err := b.Synchronize(); err != nil {
			return err
		}
		if d, err := Elapsed(a, b); err != nil || d <= 0 || d > time.Second {
			t.Errorf("elapsed %v %v", d, err)
		}
		if err := CopyToHost(got, p2, s); err != nil {
			return err
		}
		if !bytes.Equal(got, src) {
			t.Error("copy round trip")
		}
		if done, err := s.Done(); !done || err != nil {
			t.Errorf("stream done %v %v", done, err)
		}
		free, total, err := MemGetInfo()
		if err != nil || free <= 0 || total < free {
			t.Errorf("mem info %d %d %v", free, total, err)
		}
		// An allocation far beyond the device is ErrOutOfMemory.
		if _, err := MemAlloc(1 << 50); !errors.Is(err, ErrOutOfMemory) {
			t.Errorf("huge alloc: %v", err)
		}
		// IPC handles can be taken (opening them needs another process).
		if _, err := IPCMemHandleOf(p); err != nil {
			t.Errorf("ipc mem handle: %v", err)
		}
		ie, err := NewEvent(EventInterprocess | EventDisableTiming)
		if err != nil {
			return err
		}
		defer ie.Destroy()
		if _, err := ie.IPCHandle(); err != nil {
			t.Errorf("ipc event handle: %v", err)
		}
		if err := s.WaitEvent(ie); err != nil {
			t.Errorf("wait event: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestHostRegisterZeroCopy(t *testing.T) {
	c := primary(t)
	mem, err := unix.Mmap(-1, 0, 1<<21, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := range mem {
		mem[i] = byte(i)
	}
	err = c.Do(func() error {
		if err := HostRegister(mem, HostRegisterPortable|HostRegisterDeviceMap); err != nil {
			return err
		}
		defer HostUnregister(mem)
		d, err := HostDevicePointer(mem)
		if err != nil {
			return err
		}
		if uintptr(d) != uintptr(unsafe.Pointer(&mem[0])) {
			t.Logf("device pointer %#x differs from host %p", d, &mem[0])
		}
		s, _ := NewStream()
		defer s.Destroy()
		got := make([]byte, 4096)
		if err := CopyToHost(got, d+4096, s); err != nil {
			return err
		}
		if !bytes.Equal(got, mem[4096:8192]) {
			t.Error("read through the device pointer")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestModuleLoad(t *testing.T) {
	c := primary(t)
	img, err := GatherImage()
	if err != nil {
		t.Fatal(err)
	}
	err = c.Do(func() error {
		t0 := time.Now()
		m, err := LoadModule(img)
		if err != nil {
			return err
		}
		defer m.Unload()
		t.Logf("module load %v", time.Since(t0))
		for _, n := range []string{"gnn_gather16", "gnn_gather_any", "gnn_sweep16", "gnn_sweep_any"} {
			f, err := m.Function(n)
			if err != nil {
				return err
			}
			occ, err := f.MaxActiveBlocksPerSM(256, 4096)
			if err != nil || occ < 1 {
				t.Errorf("%s occupancy %d %v", n, occ, err)
			}
		}
		if _, err := m.Function("no_such_kernel"); err == nil {
			t.Error("missing kernel found")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// NewEvents makes every event in a context (the nocuda build's test checks
// its failure path).
func TestNewEvents(t *testing.T) {
	c := primary(t)
	err := c.Do(func() error {
		var evs [5]*Event
		if err := NewEvents(evs[:], EventDisableTiming); err != nil {
			return err
		}
		for i, e := range evs {
			if e == nil || slices.Contains(evs[:i], e) {
				t.Errorf("event %d: %v", i, e)
			}
			e.Destroy()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
