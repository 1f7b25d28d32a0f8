package gather

// The launch shapes of the gather kernels: which family, how many lanes a
// row and how many threads a block, by row size, alignment and SM cap.

import "testing"

func TestKernelShape(t *testing.T) {
	capped := &CUDA{opts: CUDAOptions{MaxSMs: 16}}
	all := &CUDA{opts: CUDAOptions{MaxSMs: -1}}
	for _, c := range []struct {
		g        *CUDA
		rb       int64
		align    uint64
		wide     bool
		lanes    int
		block    int
		whatItIs string
	}{
		{capped, 512, 16, true, 8, 256, "papers100M rows: 8 lanes of 4 chunks, a quarter of the threads"},
		{capped, 1024, 16, true, 16, 256, "16 lanes of 4 chunks"},
		{capped, 4096, 16, true, 32, 256, "at most 32 lanes"},
		{capped, 256, 16, true, 8, 512, "8 lanes of 2 chunks: one whole line a row per load"},
		{capped, 128, 16, true, 8, 1024, "8 lanes of 1 chunk, as before"},
		{capped, 384, 16, true, 8, 320, "8 lanes of 3 chunks: 341 threads rounded down to whole warps"},
		{capped, 640, 16, true, 16, 320, "16 lanes of up to 3 chunks"},
		{capped, 400, 16, true, 32, 1024, "rows off the 128-byte lines keep one load a lane"},
		{capped, 96, 16, true, 8, 1024, "6 chunks on 8 lanes"},
		{capped, 16, 16, true, 1, 1024, "one chunk"},
		{capped, 512, 8, false, 0, 1024, "8-byte aligned destination: any-size kernel"},
		{capped, 510, 16, false, 0, 1024, "any-size kernel"},
		{all, 512, 16, true, 32, 256, "uncapped: full occupancy, one load a lane"},
		{all, 128, 16, true, 8, 256, "uncapped"},
	} {
		wide, shift, block := c.g.shape(c.rb, c.align)
		if wide != c.wide || block != c.block || (wide && 1<<shift != c.lanes) {
			t.Errorf("%d-byte rows, align %d, MaxSMs %d: wide %v, %d lanes, block %d; want %v, %d, %d (%s)",
				c.rb, c.align, c.g.opts.MaxSMs, wide, 1<<shift, block, c.wide, c.lanes, c.block, c.whatItIs)
		}
	}
}
