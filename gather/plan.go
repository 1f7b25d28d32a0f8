package gather

import (
	"context"
	"errors"
	"fmt"
	"math/bits"

	"github.com/gnnloader/gnnloader/cudaext"
)

// Sweeps planned on the GPU (cudaext/kernels/plan.cu). The batches' row ids
// are already in device memory (their slots' n_id, copied there with the
// rest of their structure), so the CPU neither sorts nor merges them: the GPU
// marks them in a bitmap over the table's rows, compacts the bitmap into the
// distinct rows in ascending order (with each row's rank), lists each row's
// deliveries (batch and position) and reads the rows once each from the
// pinned table in address order straight into every batch that wants them.
// Rows held in a device cache (CUDAOptions.Cache) are not read over PCIe at
// all: the assembly copies them from the cache, with the labels.

// DevicePart is one batch of a sweep planned on the GPU.
type DevicePart struct {
	IDs cudaext.DevicePtr // its row ids, int64, in device memory
	N   int64             // how many (at most, with NDev)
	// NDev, when not 0, is where the number of ids is in device memory
	// (int64, written by earlier work on the stream: a batch sampled on the
	// GPU); N is then its bound.
	NDev cudaext.DevicePtr
	// X receives row IDs[i] at X + i*RowBytes (0: none), within XBytes.
	X      cudaext.DevicePtr
	XBytes int64
	// Y receives the label of IDs[i] as int64 at Y + 8*i (0: none; needs
	// CUDAOptions.Labels).
	Y cudaext.DevicePtr
}

// MaxDeviceParts is the most batches one SweepOnDevice takes.
const MaxDeviceParts = MaxSweepParts

// MaxSweepIDs is the most ids (the parts' N together) one SweepOnDevice
// takes: the delivery lists' offsets share a word with the shared-row bit.
const MaxSweepIDs = 1<<30 - 1

// planKernels are plan.fatbin's entry points.
var planKernels = []string{"gnn_mark", "gnn_unmark", "gnn_word_counts", "gnn_scan_blocks", "gnn_compact",
	"gnn_count_deliveries", "gnn_place_deliveries", "gnn_deliver", "gnn_assemble", "gnn_labels"}

const (
	wordsPerBlock = 1024 // plan.cu WORDS_PER_BLOCK
	scanThreads   = 1024 // plan.cu SCAN_THREADS
)

// planBuffers are a backend's device memory for planned sweeps, grown to the
// largest sweep seen.
type planBuffers struct {
	bitmap, wordBase, blockSums, unique cudaext.DevicePtr
	stats                               cudaext.DevicePtr // plan.cu STAT_*: lookups, cache hits, rows read
	cursor                              cudaext.DevicePtr // the next free word of extras
	// Per distinct row (capRows of them): its id, its number of
	// deliveries, its only delivery or where its list is; the lists (2 *
	// capIDs words: a list is one word more than its length, which is at
	// least 2).
	rows, cnt, first, extras cudaext.DevicePtr
	words, blocks            int64
	capRows, capIDs          int64
	// Device bytes of the buffers above: the fixed ones (bitmap to
	// cursor) and rows, cnt, first and extras (PlanBytes: their sum).
	fixedBytes, perBytes int64
	// dirty: a sweep failed between marking and unmarking, so the bitmap
	// may hold its bits; the next sweep clears it first.
	dirty bool
}

func (b *planBuffers) free() error {
	var errs []error
	for _, p := range []*cudaext.DevicePtr{&b.bitmap, &b.wordBase, &b.blockSums, &b.unique, &b.stats, &b.cursor,
		&b.rows, &b.cnt, &b.first, &b.extras} {
		if *p != 0 {
			errs = append(errs, cudaext.MemFree(*p))
			*p = 0
		}
	}
	b.capRows, b.capIDs, b.fixedBytes, b.perBytes = 0, 0, 0, 0
	return errors.Join(errs...)
}

// loadPlan loads plan.fatbin's kernels. Context current.
func (g *CUDA) loadPlan() error {
	img, err := cudaext.PlanImage()
	if err != nil {
		return err
	}
	if g.planMod, err = cudaext.LoadModule(img); err != nil {
		return err
	}
	for _, name := range planKernels {
		f, err := g.planMod.Function(name)
		if err != nil {
			return err
		}
		g.fn[name] = f
	}
	return nil
}

// ensurePlan makes the plan buffers hold a sweep of rows ids. Growing waits
// for the stream (earlier sweeps may still use the old buffers). Context
// current, g.mu held.
func (g *CUDA) ensurePlan(rows int64) error {
	b := &g.plan
	if b.bitmap == 0 {
		b.words, b.blocks = planWords(g.tab.NumRows)
		var err error
		sizes := planFixedSizes(g.tab.NumRows)
		for i, p := range []*cudaext.DevicePtr{&b.bitmap, &b.wordBase, &b.blockSums, &b.unique, &b.stats, &b.cursor} {
			n := sizes[i]
			if *p, err = cudaext.MemAlloc(n); err != nil {
				b.free()
				return fmt.Errorf("gather: sweep planning memory: %w", err)
			}
			b.fixedBytes += n
		}
		if err := cudaext.MemsetD32Async(b.bitmap, 0, b.words, g.stream); err != nil {
			return err
		}
		if err := cudaext.MemsetD32Async(b.stats, 0, 8, g.stream); err != nil {
			return err
		}
	}
	// Distinct rows are at most the ids and the table's rows; the lists'
	// words at most twice the ids.
	ids := rows
	rows = min(rows, g.tab.NumRows)
	if rows <= b.capRows && ids <= b.capIDs {
		return nil
	}
	if err := g.stream.Synchronize(); err != nil {
		return err
	}
	rows, ids = max(rows, b.capRows), max(ids, b.capIDs)
	per := []*cudaext.DevicePtr{&b.rows, &b.cnt, &b.first, &b.extras}
	for _, p := range per {
		if *p != 0 {
			cudaext.MemFree(*p)
			*p = 0
		}
	}
	b.capRows, b.capIDs, b.perBytes = 0, 0, 0
	sizes := planPerSizes(rows, ids)
	for i, p := range per {
		n := sizes[i]
		var err error
		if *p, err = cudaext.MemAlloc(n); err != nil {
			return fmt.Errorf("gather: the plan of a sweep of %d ids on the GPU: %w", ids, err)
		}
		b.perBytes += n
	}
	b.capIDs = ids
	b.capRows = rows
	return nil
}

// ReservePlan makes the buffers of sweeps planned on the GPU hold a sweep of
// ids ids now, so that no later SweepOnDevice of up to that many allocates
// device memory. A daemon reserves a trainer's largest sweep at its Open:
// memory a cache or another trainer takes afterwards can then no longer
// fail a sweep in the middle of an epoch.
func (g *CUDA) ReservePlan(ids int64) error {
	if ids <= 0 || ids > MaxSweepIDs {
		return fmt.Errorf("gather: reserving a sweep of %d ids (1 to %d)", ids, MaxSweepIDs)
	}
	return g.do(func() error { return g.planFor(ids) })
}

// PlanBytesFor is the device memory a new backend's sweep planning takes
// over a table of tableRows rows once ReservePlan(ids) has made it hold a
// sweep of ids ids (PlanBytes then): a daemon knows it before it makes the
// backend.
func PlanBytesFor(tableRows, ids int64) int64 {
	var n int64
	for _, b := range planFixedSizes(tableRows) {
		n += b
	}
	for _, b := range planPerSizes(min(ids, tableRows), ids) {
		n += b
	}
	return n
}

// planWords is the bitmap's words over a table of rows rows, and the scan
// blocks over them.
func planWords(rows int64) (words, blocks int64) {
	words = (rows + 31) / 32
	return words, (words + wordsPerBlock - 1) / wordsPerBlock
}

// planFixedSizes are the bytes of the plan buffers sized by the table
// alone, in ensurePlan's order: bitmap, wordBase, blockSums, unique, stats,
// cursor (each at least 16: cuMemAlloc refuses 0 bytes).
func planFixedSizes(tableRows int64) [6]int64 {
	words, blocks := planWords(tableRows)
	return [6]int64{max(4*words, 16), max(4*words, 16), max(4*blocks, 16), 16, 32, 16}
}

// planPerSizes are the bytes of the plan buffers sized by a sweep of ids
// ids over rows distinct rows at most, in ensurePlan's order: rows, cnt,
// first (a word a row) and extras (two words an id).
func planPerSizes(rows, ids int64) [4]int64 {
	return [4]int64{max(4*rows, 16), max(4*rows, 16), max(4*rows, 16), max(8*ids, 16)}
}

// PlanBytes is the device memory the backend's sweep planning holds now
// (ReservePlan, SweepOnDevice): a daemon counts it against a GPU's slot
// memory.
func (g *CUDA) PlanBytes() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.plan.fixedBytes + g.plan.perBytes
}

// planFor loads the plan kernels the first time and makes the plan buffers
// hold a sweep of ids ids. Context current, g.mu held.
func (g *CUDA) planFor(ids int64) error {
	if g.planMod == nil {
		if err := g.loadPlan(); err != nil {
			return err
		}
	}
	return g.ensurePlan(ids)
}

// SweepOnDevice enqueues a sweep over parts planned on the GPU (see the
// comment at the top of this file): every part's rows, read once each from
// the pinned table in address order (or from the cache), land in its X, and
// its labels in its Y. The parts' ids must be valid row ids and in device
// memory before the sweep (earlier work on the stream may write them).
func (g *CUDA) SweepOnDevice(ctx context.Context, parts []DevicePart) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(parts) == 0 || len(parts) > MaxDeviceParts {
		return fmt.Errorf("gather: a sweep of %d parts (1 to %d)", len(parts), MaxDeviceParts)
	}
	rb := int64(g.tab.RowBytes)
	var total int64
	withX := 0
	for j, p := range parts {
		if p.N < 0 || p.N > 0 && p.IDs == 0 || p.N > MaxPartRows {
			return fmt.Errorf("gather: part %d: %d ids at %#x", j, p.N, p.IDs)
		}
		if p.X != 0 {
			withX++
		}
		if p.X != 0 && p.XBytes != 0 && p.XBytes < p.N*rb {
			return fmt.Errorf("gather: part %d: destination holds %d bytes, want %d rows x %d bytes", j, p.XBytes, p.N, rb)
		}
		if p.Y != 0 && g.opts.Labels == 0 {
			return fmt.Errorf("gather: part %d asks for labels, and the backend has none (CUDAOptions.Labels)", j)
		}
		total += p.N
	}
	if withX != 0 && withX != len(parts) {
		return fmt.Errorf("gather: %d of a sweep's %d parts want rows: all or none", withX, len(parts))
	}
	if total > MaxSweepIDs {
		return fmt.Errorf("gather: a sweep of %d ids (at most %d)", total, MaxSweepIDs)
	}
	if total == 0 {
		return nil
	}
	return g.do(func() error {
		if err := g.planFor(total); err != nil {
			return err
		}
		return g.launchPlanned(parts, total)
	})
}

// launchPlanned enqueues the planned sweep's kernels for parts of total ids
// at most. Context current, g.mu held, buffers large enough.
func (g *CUDA) launchPlanned(parts []DevicePart, total int64) error {
	b := &g.plan
	rb := int64(g.tab.RowBytes)
	needRows := parts[0].X != 0 // all parts or none (SweepOnDevice checks)
	cache := g.opts.Cache
	var slot, rowsOf cudaext.DevicePtr
	if cache != nil {
		slot, rowsOf = cache.Slot, cache.Rows
	}
	wide := cudaext.Dim3{X: 256}
	flat := func(n int64) cudaext.Dim3 { return cudaext.Dim3{X: uint32(max(1, min((n+255)/256, int64(8*g.sms))))} }
	// The kernels take every part in one launch, by value (plan.cu Parts,
	// gather.cu Bases): the parts' ids, counts and device counts, the read's
	// destinations, and the assembly's (x for the cached rows only, y).
	var ids, ns, nDevs, bases, xs, ys [MaxSweepParts]uint64
	align, labels := uint64(0), false
	for j, p := range parts {
		ids[j], ns[j], nDevs[j], bases[j], ys[j] = uint64(p.IDs), uint64(p.N), uint64(p.NDev), uint64(p.X), uint64(p.Y)
		align |= bases[j]
		labels = labels || p.Y != 0
	}
	withX := needRows && cache != nil
	if withX {
		xs = bases
	}
	np := int32(len(parts))
	if err := g.timeSweep(0); err != nil {
		return err
	}
	if b.dirty {
		if err := cudaext.MemsetD32Async(b.bitmap, 0, b.words, g.stream); err != nil {
			return err
		}
		b.dirty = false
	}
	if needRows {
		b.dirty = true // until the unmark below is enqueued
		if err := g.fn["gnn_mark"].Launch(flat(total), wide, 0, g.stream, ids, ns, nDevs, np, b.bitmap, slot, b.stats); err != nil {
			return err
		}
		nb := cudaext.Dim3{X: uint32(b.blocks)}
		if err := g.fn["gnn_word_counts"].Launch(nb, wide, 0, g.stream, b.bitmap, b.words, b.blockSums); err != nil {
			return err
		}
		if err := g.fn["gnn_scan_blocks"].Launch(cudaext.Dim3{X: 1}, cudaext.Dim3{X: scanThreads}, 0, g.stream, b.blockSums, b.blocks, b.unique, b.stats); err != nil {
			return err
		}
		if err := g.fn["gnn_compact"].Launch(nb, wide, 0, g.stream, b.bitmap, b.words, b.blockSums, b.wordBase, b.rows); err != nil {
			return err
		}
		// Each distinct row's deliveries.
		if err := cudaext.MemsetD32Async(b.cnt, 0, b.capRows, g.stream); err != nil {
			return err
		}
		if err := cudaext.MemsetD32Async(b.cursor, 0, 1, g.stream); err != nil {
			return err
		}
		if err := g.fn["gnn_count_deliveries"].Launch(flat(total), wide, 0, g.stream, ids, ns, nDevs, np, b.bitmap, b.wordBase,
			slot, b.cnt); err != nil {
			return err
		}
		if err := g.fn["gnn_place_deliveries"].Launch(flat(b.capRows), wide, 0, g.stream, b.unique, b.cnt, b.first, b.extras,
			b.cursor); err != nil {
			return err
		}
		if err := g.fn["gnn_deliver"].Launch(flat(total), wide, 0, g.stream, ids, ns, nDevs, np, b.bitmap, b.wordBase, slot,
			b.cnt, b.first, b.extras); err != nil {
			return err
		}
	}
	if err := g.timeSweep(1); err != nil {
		return err
	}
	if needRows {
		if err := g.launchSweepTo(bases, align, staged{rows: b.rows, n: b.capRows, nDev: b.unique, first: b.first, extras: b.extras}); err != nil {
			return err
		}
	}
	if err := g.timeSweep(2); err != nil {
		return err
	}
	// The cached rows and the labels, in one launch. One group of G lanes
	// a row (G a power of two, at most a warp, no more than the row's
	// 16-byte chunks); one lane an id when only labels are left.
	if withX || labels {
		gshift := 0
		if withX {
			gshift = min(5, bits.Len64(uint64(max((rb+15)/16, 1))-1))
		}
		grid := cudaext.Dim3{X: uint32(max(1, min((total<<gshift+255)/256, int64(8*g.sms))))}
		if err := g.fn["gnn_assemble"].Launch(grid, wide, 0, g.stream, ids, ns, nDevs, xs, ys, np, b.bitmap, b.wordBase,
			cudaext.DevicePtr(0), slot, rowsOf, rb, g.opts.Labels, int32(gshift)); err != nil {
			return err
		}
	}
	if needRows {
		if err := g.fn["gnn_unmark"].Launch(flat(total), wide, 0, g.stream, ids, ns, nDevs, np, b.bitmap); err != nil {
			return err
		}
		b.dirty = false
	}
	return g.timeSweep(3)
}
