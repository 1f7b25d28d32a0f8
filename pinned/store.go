package pinned

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/gnnloader/gnnloader/cudaext"
)

// Store is a feature table in pinned host memory: NumRows rows of RowBytes
// bytes, row-major in Rows, which starts on a 2 MiB boundary. When registered
// with the CUDA driver, DevicePtr is the device address of Rows[0] in every
// context (the registration is portable), so GPU kernels read it zero-copy.
// Rows may be read concurrently; Close must not race with any use.
type Store struct {
	Rows     []byte
	RowBytes int
	NumRows  int64
	// DevicePtr is 0 when the store is not registered (no GPU).
	DevicePtr cudaext.DevicePtr

	// LoadTime is how long copying the table in took (0 for FromAlloc);
	// RegisterTime how long cuMemHostRegister took.
	LoadTime, RegisterTime time.Duration

	mem        []byte // the whole mapping (Rows at off, then padding to 2 MiB)
	off        int
	registered bool
	ctx        *cudaext.Context
	closeOnce  sync.Once
	closeErr   error
}

// Options control how a Store is made. The zero value (or nil) copies with
// GOMAXPROCS goroutines and registers with device 0 when a driver is present.
type Options struct {
	// Context registers the memory in this context (the registration is
	// portable: every context sees it). Nil means device 0's primary context,
	// retained for the store's lifetime.
	Context *cudaext.Context
	// NoRegister keeps the memory unregistered even when a GPU is present.
	NoRegister bool
	// Workers is the number of copying goroutines; 0 means GOMAXPROCS.
	Workers int
}

// Load copies src (numRows rows of rowBytes) once into memory from Alloc and
// registers it (see Options). Without a CUDA driver it returns an
// unregistered store and no error; a driver that fails to register is an error.
func Load(src []byte, rowBytes int, numRows int64, o *Options) (*Store, error) {
	n := int64(rowBytes) * numRows
	if rowBytes <= 0 || numRows < 0 || int64(len(src)) != n {
		return nil, fmt.Errorf("pinned: %d source bytes for %d rows x %d bytes", len(src), numRows, rowBytes)
	}
	mem, err := Alloc(max(n, 1))
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	workers := 0
	if o != nil {
		workers = o.Workers
	}
	ParallelCopy(mem[:n], src, workers)
	load := time.Since(t0)
	s, err := FromAlloc(mem, rowBytes, numRows, o)
	if err != nil {
		Free(mem)
		return nil, err
	}
	s.LoadTime = load
	return s, nil
}

// ParallelCopy copies src into dst (len(dst) >= len(src)) with several
// goroutines, in 2 MiB-aligned pieces; workers 0 means GOMAXPROCS.
func ParallelCopy(dst, src []byte, workers int) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	const piece = 64 << 20
	var wg sync.WaitGroup
	next := make(chan int64, workers)
	go func() {
		for off := int64(0); off < int64(len(src)); off += piece {
			next <- off
		}
		close(next)
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range next {
				end := min(off+piece, int64(len(src)))
				copy(dst[off:end], src[off:end])
			}
		}()
	}
	wg.Wait()
}

// FromAlloc makes a store over memory from Alloc that already holds the table
// (a generator wrote it there, or a dataset file was read into it), without
// copying, and registers it (see Options). mem is the slice Alloc returned
// or a part of it that starts on a 2 MiB boundary (a dataset's rows follow
// its file's header). The store owns the whole mapping from then on: Close
// frees it. On error mem is still the caller's.
func FromAlloc(mem []byte, rowBytes int, numRows int64, o *Options) (*Store, error) {
	n := int64(rowBytes) * numRows
	full, off := mappingOf(mem)
	if full == nil {
		return nil, fmt.Errorf("pinned: FromAlloc needs memory from Alloc")
	}
	if off%HugePage != 0 {
		return nil, fmt.Errorf("pinned: FromAlloc of memory %d bytes into its mapping, not on a 2 MiB boundary", off)
	}
	if rowBytes <= 0 || numRows < 0 || int64(len(mem)) < n {
		return nil, fmt.Errorf("pinned: %d bytes for %d rows x %d bytes", len(mem), numRows, rowBytes)
	}
	s := &Store{Rows: mem[:n:n], RowBytes: rowBytes, NumRows: numRows, mem: full, off: off}
	if o != nil && o.NoRegister {
		return s, nil
	}
	var ctx *cudaext.Context
	if o != nil {
		ctx = o.Context
	}
	if err := s.register(ctx); err != nil {
		if errors.Is(err, cudaext.ErrNoDriver) || errors.Is(err, cudaext.ErrNoDevice) {
			return s, nil // no GPU: plain aligned memory
		}
		return nil, err
	}
	return s, nil
}

// register pins the whole mapping with cuMemHostRegister(PORTABLE|DEVICEMAP).
func (s *Store) register(ctx *cudaext.Context) error {
	if err := cudaext.Init(); err != nil {
		return err
	}
	owned := false
	if ctx == nil {
		d, err := cudaext.GetDevice(0)
		if err != nil {
			return err
		}
		if ctx, err = d.RetainPrimaryContext(); err != nil {
			return err
		}
		owned = true
	}
	err := ctx.Do(func() error {
		t0 := time.Now()
		if err := cudaext.HostRegister(s.mem, cudaext.HostRegisterPortable|cudaext.HostRegisterDeviceMap); err != nil {
			return fmt.Errorf("pinned: register %d bytes: %w", len(s.mem), err)
		}
		s.RegisterTime = time.Since(t0)
		p, err := cudaext.HostDevicePointer(s.mem)
		if err != nil {
			cudaext.HostUnregister(s.mem)
			return err
		}
		s.DevicePtr = p + cudaext.DevicePtr(s.off)
		return nil
	})
	if err != nil {
		if owned {
			ctx.Release()
		}
		return err
	}
	s.registered = true
	if owned {
		s.ctx = ctx
	}
	return nil
}

// Registered reports whether the store is registered with the CUDA driver.
func (s *Store) Registered() bool { return s.registered }

// Padded is the mapping from Rows on: Rows followed by padding up to the next
// 2 MiB (zeros, or the rest of the file the rows were read from). Kernels
// may read past the last row within it.
func (s *Store) Padded() []byte { return s.mem[s.off:] }

// Close unregisters and unmaps the memory. The store and Rows must not be
// used afterwards. Later calls return the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.registered {
			do := func(f func() error) error { return f() }
			if s.ctx != nil {
				do = s.ctx.Do
			} else if d, err := cudaext.GetDevice(0); err == nil {
				if c, err := d.RetainPrimaryContext(); err == nil {
					do = c.Do
					defer c.Release()
				}
			}
			errs = append(errs, do(func() error { return cudaext.HostUnregister(s.mem) }))
			s.registered = false
		}
		if s.ctx != nil {
			errs = append(errs, s.ctx.Release())
		}
		errs = append(errs, Free(s.mem))
		s.Rows, s.mem = nil, nil
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
