package gather

// Gather and Sweep on the CUDA backend: the checks, the indices staged for
// the kernels, and the kernel launches.

import (
	"context"
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
)

// shape picks the kernel family for rows of rb bytes written at addresses
// with alignment align, and its block: the 16-byte kernels with 1<<shift
// lanes a row, or the any-size kernels with 1<<shift-byte stores.
//
// The 16-byte kernels read a row of at most 32 chunks with one load a lane
// (a row of 128-byte lines then costs whole-line reads), in blocks of 1024
// threads on a capped grid. Rows of whole 128-byte lines on a capped grid
// take fewer lanes, each moving up to rowUnroll chunks a step, but at least
// 8 (one line a row per load instruction), and proportionally smaller
// blocks: as many bytes in flight from fewer threads, so the SMs the gather
// shares keep more warp slots for training. 512-byte rows: 8 lanes, blocks
// of 256 (on an H100 under MPS, training steps beside the loader measured
// 3.5% faster and the loader 2-3% faster than with 32 lanes and 1024;
// docs/benchmarks.md, 2026-11-27). Fewer than 8 lanes a row measured 2.5x
// slower on 128-byte rows, so 8 is the floor.
func (g *CUDA) shape(rb int64, align uint64) (wide bool, shift int, block int) {
	block = g.maxBlock()
	if rb%16 == 0 && align%16 == 0 && !g.opts.forceAny {
		chunks := rb / 16
		lanes := int64(1) << min(bits.Len64(uint64(chunks-1)), 5)
		if g.opts.MaxSMs > 0 && rb%128 == 0 {
			lanes = max(8, int64(1)<<bits.Len64(uint64((chunks+rowUnroll-1)/rowUnroll-1)))
			lanes = min(lanes, 32)
			per := min(rowUnroll, (chunks+lanes-1)/lanes) // chunks a lane loads a step
			block = (1024 / int(per)) &^ 31               // whole warps, so whole lane groups
		}
		return true, bits.TrailingZeros64(uint64(lanes)), block
	}
	a := uint64(rb) | align | 8
	return false, min(bits.TrailingZeros64(a), 3), block
}

// rowUnroll is UNROLL of gather.cu: the 16-byte chunks one lane of the
// 16-byte kernels loads before it stores them.
const rowUnroll = 4

// maxBlock is the largest block a kernel of g is launched with.
func (g *CUDA) maxBlock() int {
	if g.opts.MaxSMs > 0 {
		return 1024
	}
	return 256
}

func (g *CUDA) blocks(name string, n int64, shift int, wide bool, block int) uint32 {
	lanes := int64(32)
	if wide {
		lanes = 1 << shift
	}
	b := int64(block)
	need := (n*lanes + b - 1) / b
	return uint32(max(1, min(int64(g.grid[name]), need)))
}

func (g *CUDA) checkDest(dst Dest, rows int) error {
	if dst.Device == 0 {
		return fmt.Errorf("gather: the CUDA backend needs a device destination")
	}
	if dst.DeviceBytes != 0 && dst.DeviceBytes < int64(rows)*int64(g.tab.RowBytes) {
		return fmt.Errorf("gather: destination holds %d bytes, want %d rows x %d bytes", dst.DeviceBytes, rows, g.tab.RowBytes)
	}
	return nil
}

// Gather enqueues the gather of rows nid into dst.Device on the backend's
// stream (see Backend). Ids are checked on the CPU first; on an error nothing
// is enqueued.
func (g *CUDA) Gather(ctx context.Context, dst Dest, nid []int64, order []int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if order != nil && len(order) != len(nid) {
		return fmt.Errorf("gather: order has %d entries for %d rows", len(order), len(nid))
	}
	if err := g.checkDest(dst, len(nid)); err != nil {
		return err
	}
	for i, v := range nid {
		if v < 0 || v >= g.tab.NumRows {
			return fmt.Errorf("gather: row id nid[%d] = %d out of range [0, %d)", i, v, g.tab.NumRows)
		}
	}
	if len(nid) == 0 {
		return nil
	}
	return g.do(func() error {
		ix, err := g.prepareGather(nid, order)
		if err != nil {
			return err
		}
		return g.launchGather(dst, ix)
	})
}

// staged is a batch's indices on the device. With nDev set, n is a
// capacity and the kernels read the count from device memory.
type staged struct {
	rows, pos, first, extras cudaext.DevicePtr
	nDev                     cudaext.DevicePtr
	n                        int64
}

// prepareGather uploads the batch's rows in reading order (uint32) and, with
// an order, their positions. Context current, g.mu held.
func (g *CUDA) prepareGather(nid []int64, order []int32) (staged, error) {
	n := int64(len(nid))
	sizes := []int64{4 * n}
	if order != nil {
		sizes = append(sizes, 4*n)
	}
	host, dev, total, err := g.reserve(true, sizes...)
	if err != nil {
		return staged{}, err
	}
	rows := unsafe.Slice((*uint32)(unsafe.Pointer(&host[0][0])), n)
	ix := staged{rows: dev[0], n: n}
	if order != nil {
		for k, i := range order {
			rows[k] = uint32(nid[i])
		}
		copy(host[1], bytesOf(order))
		ix.pos = dev[1]
	} else {
		for k, v := range nid {
			rows[k] = uint32(v)
		}
	}
	return ix, g.upload(total)
}

func (g *CUDA) mode() int32 {
	if g.opts.fullLines {
		return 1
	}
	return 0
}

// launchGather enqueues the gather kernel over staged indices.
func (g *CUDA) launchGather(dst Dest, ix staged) error {
	rb := int64(g.tab.RowBytes)
	wide, shift, block := g.shape(rb, uint64(dst.Device))
	dim := cudaext.Dim3{X: uint32(block)}
	if wide {
		const name = "gnn_gather16"
		return g.fn[name].Launch(cudaext.Dim3{X: g.blocks(name, ix.n, shift, wide, block)}, dim, 0, g.stream,
			g.dev, rb, ix.rows, ix.pos, ix.n, ix.nDev, dst.Device, int32(shift))
	}
	const name = "gnn_gather_any"
	return g.fn[name].Launch(cudaext.Dim3{X: g.blocks(name, ix.n, shift, wide, block)}, dim, g.shared(block), g.stream,
		g.dev, rb, ix.rows, ix.pos, ix.n, ix.nDev, dst.Device, int32(shift), g.mode())
}

// Sweep enqueues one sorted pass over the union of the parts' rows: each
// distinct row is read once and written to every part and position that needs
// it. It returns the plan it ran (its Unique and Delivered counts).
func (g *CUDA) Sweep(ctx context.Context, parts []SweepPart) (*SweepPlan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pl, err := PlanSweep(parts, g.tab.NumRows)
	if err != nil {
		return nil, err
	}
	return pl, g.SweepPlanned(ctx, parts, pl)
}

// SweepPlanned is Sweep with a plan made beforehand by PlanSweep (in the
// sampler stage, say), so only the upload and the kernel are left.
func (g *CUDA) SweepPlanned(ctx context.Context, parts []SweepPart, pl *SweepPlan) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	align := uint64(0)
	for k, p := range parts {
		if err := g.checkDest(p.Dst, len(p.Nid)); err != nil {
			return fmt.Errorf("sweep part %d: %w", k, err)
		}
		align |= uint64(p.Dst.Device)
	}
	if pl.Unique() == 0 {
		return nil
	}
	if len(parts) > MaxSweepParts {
		return fmt.Errorf("gather: a sweep covers at most %d batches", MaxSweepParts)
	}
	return g.do(func() error {
		ix, err := g.prepareSweep(pl)
		if err != nil {
			return err
		}
		return g.launchSweep(parts, align, ix)
	})
}

// prepareSweep uploads the plan's compact arrays. Context current, g.mu held.
func (g *CUDA) prepareSweep(pl *SweepPlan) (staged, error) {
	n := pl.Unique()
	host, dev, total, err := g.reserve(true, 4*n, 4*n, 4*pl.extras())
	if err != nil {
		return staged{}, err
	}
	pl.compact(uint32s(host[0]), uint32s(host[1]), uint32s(host[2]))
	return staged{rows: dev[0], first: dev[1], extras: dev[2], n: n}, g.upload(total)
}

// launchSweep enqueues the sweep kernel over staged indices.
func (g *CUDA) launchSweep(parts []SweepPart, align uint64, ix staged) error {
	var bases [MaxSweepParts]uint64
	for k, p := range parts {
		bases[k] = uint64(p.Dst.Device)
	}
	return g.launchSweepTo(bases, align, ix)
}

// launchSweepTo enqueues the sweep kernel over ix (rows, their count or
// nDev, first and extras) delivering to the parts at bases.
func (g *CUDA) launchSweepTo(bases [MaxSweepParts]uint64, align uint64, ix staged) error {
	rb := int64(g.tab.RowBytes)
	wide, shift, block := g.shape(rb, align)
	dim := cudaext.Dim3{X: uint32(block)}
	if wide {
		const name = "gnn_sweep16"
		return g.fn[name].Launch(cudaext.Dim3{X: g.blocks(name, ix.n, shift, wide, block)}, dim, 0, g.stream,
			g.dev, rb, ix.rows, ix.n, ix.nDev, ix.first, ix.extras, bases, int32(shift))
	}
	const name = "gnn_sweep_any"
	return g.fn[name].Launch(cudaext.Dim3{X: g.blocks(name, ix.n, shift, wide, block)}, dim, g.shared(block), g.stream,
		g.dev, rb, ix.rows, ix.n, ix.nDev, ix.first, ix.extras, bases, int32(shift), g.mode())
}
