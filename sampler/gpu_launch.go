package sampler

import (
	"fmt"

	"github.com/gnnloader/gnnloader/cudaext"
)

// How a GPU sampler's call is launched: its widths, grids, the kernels in
// order, the scans and the tables' emptying (sample.cu's header lists the
// kernels and what each does).

// widths are the numbers of lanes a call's kernels are launched for: powers
// of two up to the sampler's lanes, and its lanes. A call of n batches runs
// at the least width of at least n.
func (s *GPU) widths() []int {
	var w []int
	for x := 1; x < s.lanes; x *= 2 {
		w = append(w, x)
	}
	return append(w, s.lanes)
}

// width is the width a call of n batches runs at: the least power of two
// of at least n, or the lanes (one of widths).
func (s *GPU) width(n int) int {
	w := 1
	for w < n {
		w *= 2
	}
	return min(w, s.lanes)
}

// grid is the launch grid of a kernel over n elements a lane, for w lanes:
// a block of 256 threads for each 256 elements, at most 8 a multiprocessor
// over all the lanes (the kernels stride over the rest), lane y in blocks
// of blockIdx.y = y.
func (s *GPU) grid(n int64, w int) cudaext.Dim3 {
	return cudaext.Dim3{X: uint32(max(1, min((n+255)/256, int64(8*s.sms/w)))), Y: uint32(w), Z: 1}
}

// enqueue enqueues every kernel of a call after gnn_set_args, for w lanes:
// the same launches for every call of that width (grids sized for the
// largest batches), which read each lane's batch from s.args. Captured once
// per width into s.graphs where the driver can.
func (s *GPU) enqueue(st *cudaext.Stream, w int) error {
	H := len(s.fanouts)
	scratch := int32(2*H + 3) // the flags' scan total: the hop's new nodes
	threads := cudaext.Dim3{X: 256, Y: 1, Z: 1}
	launch := func(name string, g cudaext.Dim3, b cudaext.Dim3, args ...any) error {
		if err := s.fn[name].Launch(g, b, 0, st, args...); err != nil {
			return fmt.Errorf("sampler: %s: %w", name, err)
		}
		return nil
	}
	if err := launch("gnn_seeds", s.grid(int64(s.maxBatch), w), threads, s.args, s.mask()); err != nil {
		return err
	}
	if err := launch("gnn_seed_ids", s.grid(int64(s.maxBatch), w), threads, s.args, s.mask()); err != nil {
		return err
	}
	draw := "gnn_draw32"
	if s.g.Wide {
		draw = "gnn_draw64"
	}
	for h, k := range s.fanouts {
		hop := int32(h + 1)
		edgesAt := int32(3 + H + h) // counts: the hop's edges
		fc, ec := s.frontierCap[h], s.hopEdgeCap[h]
		if err := launch("gnn_degrees", s.grid(fc, w), threads, s.g.Indptr, s.args, hop, int32(k)); err != nil {
			return err
		}
		if err := s.scan(st, w, scanDegrees, int32(2+h), fc, edgesAt); err != nil {
			return err
		}
		if err := launch(draw, s.grid(fc, w), threads, s.g.Indptr, s.g.Indices, s.args, hop, int32(k)); err != nil {
			return err
		}
		if err := launch("gnn_first", s.grid(ec, w), threads, s.args, hop, int32(H), s.mask()); err != nil {
			return err
		}
		if err := launch("gnn_flag_first", s.grid(ec, w), threads, s.args, hop, int32(H)); err != nil {
			return err
		}
		if err := s.scan(st, w, scanFlags, edgesAt, ec, scratch); err != nil {
			return err
		}
		if err := launch("gnn_assign", s.grid(ec, w), threads, s.args, hop, int32(H)); err != nil {
			return err
		}
		if err := launch("gnn_resolve", s.grid(ec, w), threads, s.args, hop, int32(H)); err != nil {
			return err
		}
		if err := launch("gnn_end_hop", cudaext.Dim3{X: 1, Y: uint32(w), Z: 1}, cudaext.Dim3{X: 1, Y: 1, Z: 1}, s.args, hop, int32(H), scratch); err != nil {
			return err
		}
	}
	if err := launch("gnn_pack", s.grid(s.edgeCap, w), threads, s.args); err != nil {
		return err
	}
	if s.clearWhole {
		return s.clearTables(st, w)
	}
	if err := launch("gnn_reset_find", s.grid(s.nodeCap, w), threads, s.args, s.mask()); err != nil {
		return err
	}
	return launch("gnn_reset", s.grid(s.nodeCap, w), threads, s.args)
}

// clearTables enqueues the emptying of the first w lanes' hash tables on
// st: every bit of every entry set (key -1, local id -1, first position
// NOT_SEEN), one memset for them all.
func (s *GPU) clearTables(st *cudaext.Stream, w int) error {
	if err := cudaext.MemsetD32Async(s.table, 0xffffffff, int64(w)*s.entries*entryBytes/4, st); err != nil {
		return fmt.Errorf("sampler: emptying the GPU sampler's tables: %w", err)
	}
	return nil
}

// scan enqueues, in each of w lanes, the exclusive prefix of an int32
// array (which: scanDegrees, cnt into off; scanFlags, flag into newid) of
// counts[nAt] (at most capN) elements, with the total into counts[totalAt]
// (the lane's counts): two launches over the same grid.
func (s *GPU) scan(st *cudaext.Stream, w int, which int32, nAt int32, capN int64, totalAt int32) error {
	nb := max((capN+scanBlock-1)/scanBlock, 1)
	if nb > s.scanBlocks {
		return fmt.Errorf("sampler: a scan of %d elements, room for %d", capN, s.scanBlocks*scanBlock)
	}
	grid, threads := cudaext.Dim3{X: uint32(nb), Y: uint32(w), Z: 1}, cudaext.Dim3{X: 256, Y: 1, Z: 1}
	if err := s.fn["gnn_scan_block"].Launch(grid, threads, 0, st, s.args, which, nAt); err != nil {
		return err
	}
	return s.fn["gnn_scan_sum_add"].Launch(grid, threads, 0, st, s.args, which, nAt, totalAt)
}
