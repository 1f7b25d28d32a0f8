package ring

import (
	"fmt"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
)

// AllReduce enqueues the all-reduce of bufs (bufs[i]: n elements of dt in
// rank i's context, 16-byte aligned) on the ranks' streams and returns. Every
// rank's buffer holds the same result once its stream reaches that point; a
// buffer may be reused then (the kernel ends after the next rank has read it).
// Calls must not overlap from several goroutines on one GPU (it serialises).
func (g *GPU) AllReduce(bufs []cudaext.DevicePtr, n int64, dt DType, op Op) error {
	if len(bufs) != g.ranks {
		return fmt.Errorf("ring: %d buffers for %d ranks", len(bufs), g.ranks)
	}
	if dt < Float32 || dt > Float16 {
		return fmt.Errorf("ring: bad dtype %d", dt)
	}
	for i, b := range bufs {
		if b%16 != 0 {
			return fmt.Errorf("ring: rank %d buffer %#x is not 16-byte aligned", i, b)
		}
	}
	if g.ranks == 1 || n == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.Plan(n, dt)
	if uint64(p.Rounds)*uint64(2*(g.ranks-1))+2 >= 1<<32 {
		return fmt.Errorf("ring: %d elements is too many", n)
	}
	size := n * int64(dt.Size())
	for i := range bufs {
		// Growing a staging buffer or mirror: earlier operations, on any
		// rank, may still use the old one.
		if p.Push && g.stageN[i] < size && g.stage[i] != 0 || g.needMir[i] && g.mirror[i] != nil && int64(len(g.mirror[i])) < size {
			if err := g.Sync(); err != nil {
				return err
			}
			break
		}
	}
	for i := range bufs {
		if p.Push && g.stageN[i] < size {
			err := g.ctxs[i].Do(func() error {
				if g.stage[i] != 0 {
					cudaext.MemFree(g.stage[i])
					g.stage[i], g.stageN[i] = 0, 0
				}
				p, err := cudaext.MemAlloc(size)
				if err != nil {
					return err
				}
				g.stage[i], g.stageN[i] = p, size
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	for i := range bufs {
		if g.needMir[i] && int64(len(g.mirror[i])) < size {
			err := g.ctxs[i].Do(func() error {
				hostFree(g.mirror[i])
				g.mirror[i] = nil
				b, _, err := hostAlloc(int(size))
				g.mirror[i] = b
				return err
			})
			if err != nil {
				return err
			}
		}
	}
	base := g.op << 32
	g.op++
	avg := int32(0)
	if op == Avg {
		avg = 1
	}
	nr := g.ranks
	for i := 0; i < nr; i++ {
		prev, next := (i-1+nr)%nr, (i+1)%nr
		src := bufs[prev]
		if g.mirror[prev] != nil && g.links[i].Via == "host" {
			src = cudaext.DevicePtr(uintptr(unsafe.Pointer(&g.mirror[prev][0])))
		}
		var mir cudaext.DevicePtr
		if g.needMir[i] {
			mir = cudaext.DevicePtr(uintptr(unsafe.Pointer(&g.mirror[i][0])))
		}
		err := g.ctxs[i].Do(func() error {
			if p.Push {
				return g.pfns[i][dt].Launch(cudaext.Dim3{X: uint32(p.Blocks)}, cudaext.Dim3{X: threads}, 0, g.streams[i],
					bufs[i], bufs[next], g.stage[i], g.stage[next], g.flags[i], g.flags[prev], g.flags[next],
					n, p.Chunk, p.Piece, int32(i), int32(nr), base, avg, int32(p.Rounds))
			}
			return g.fns[i][dt].Launch(cudaext.Dim3{X: uint32(p.Blocks)}, cudaext.Dim3{X: threads}, 0, g.streams[i],
				bufs[i], src, mir, g.flags[i], g.flags[prev], g.flags[next],
				n, p.Chunk, p.Piece, int32(i), int32(nr), base, avg, int32(p.Rounds))
		})
		if err != nil {
			return fmt.Errorf("ring: rank %d: %w", i, err)
		}
	}
	return nil
}
