package serve

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
)

// MemcpyRate measures the pinned host-to-device copy rate of GPU dev, in
// bytes a second: the median of five copies of up to 1 GiB of the pinned
// feature table (the ceiling a gather's delivered bytes are measured
// against). It needs the GPU path (EnableGPU).
func (s *Server) MemcpyRate(dev int) (float64, error) {
	if s.gpu == nil || s.gpu.ctx[dev] == nil {
		return 0, fmt.Errorf("serve: no GPU path on cuda:%d", dev)
	}
	rows := s.gpu.store.Rows // the node features, or another pinned table
	n := min(int64(len(rows)), 1<<30)
	if n == 0 {
		return 0, fmt.Errorf("serve: an empty feature table")
	}
	var rate float64
	err := s.gpu.ctx[dev].Do(func() error {
		dst, err := cudaext.MemAlloc(n)
		if err != nil {
			return err
		}
		defer cudaext.MemFree(dst)
		st, err := cudaext.NewStream()
		if err != nil {
			return err
		}
		defer st.Destroy()
		a, err := cudaext.NewEvent(cudaext.EventDefault)
		if err != nil {
			return err
		}
		defer a.Destroy()
		b, err := cudaext.NewEvent(cudaext.EventDefault)
		if err != nil {
			return err
		}
		defer b.Destroy()
		var ds []time.Duration
		for range 6 {
			if err := a.Record(st); err != nil {
				return err
			}
			if err := cudaext.MemcpyHtoDAsync(dst, unsafe.Pointer(&rows[0]), n, st); err != nil {
				return err
			}
			if err := b.Record(st); err != nil {
				return err
			}
			if err := b.Synchronize(); err != nil {
				return err
			}
			d, err := cudaext.Elapsed(a, b)
			if err != nil {
				return err
			}
			ds = append(ds, d)
		}
		ds = ds[1:] // the first is a warm-up
		slices.Sort(ds)
		rate = float64(n) / ds[len(ds)/2].Seconds()
		return nil
	})
	return rate, err
}
