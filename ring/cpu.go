package ring

import (
	"fmt"
	"sync"
)

// ReduceCPU all-reduces bufs in place with the ring algorithm the GPU runs:
// bufs[r] is rank r's bucket of n elements of dt (little-endian bytes). It runs
// the same reduce-scatter steps (rank r adds the previous rank's partial chunk
// into its own, rounding to dt after every addition, dividing by the number of
// ranks at the last step for Avg) and all-gather steps (copying the previous
// rank's reduced chunk), with the same Layout, so for every dtype the result is
// bit-identical to the GPU ring's, and identical on every rank.
// It is the no-GPU path and the reference the GPU tests check against.
func ReduceCPU(bufs [][]byte, n int64, dt DType, op Op) error {
	ranks := len(bufs)
	if ranks == 0 {
		return fmt.Errorf("ring: no buffers")
	}
	need := n * int64(dt.Size())
	for r, b := range bufs {
		if int64(len(b)) < need {
			return fmt.Errorf("ring: rank %d buffer has %d bytes, need %d (%d x %s)", r, len(b), need, n, dt)
		}
	}
	if ranks == 1 || n == 0 {
		return nil // an average over one rank divides by 1: nothing changes
	}
	l := NewLayout(n, ranks)
	steps := func(fn func(r int)) {
		// Within one step the ranks touch different chunks of their own
		// buffers and read chunks the previous rank wrote in the step before.
		var wg sync.WaitGroup
		for r := 0; r < ranks; r++ {
			wg.Add(1)
			go func() { defer wg.Done(); fn(r) }()
		}
		wg.Wait()
	}
	div := float32(ranks)
	for s := 0; s < ranks-1; s++ {
		last := s == ranks-2 && op == Avg
		steps(func(r int) {
			prev := bufs[(r-1+ranks)%ranks]
			own := bufs[r]
			lo, hi := l.Bounds(rsChunk(r, s, ranks))
			for i := int(lo); i < int(hi); i++ {
				v := dt.load(prev, i) + dt.load(own, i)
				if last {
					v = v / div
				}
				dt.store(own, i, v)
			}
		})
	}
	es := int64(dt.Size())
	for t := 0; t < ranks-1; t++ {
		steps(func(r int) {
			prev := bufs[(r-1+ranks)%ranks]
			lo, hi := l.Bounds(agChunk(r, t, ranks))
			copy(bufs[r][lo*es:hi*es], prev[lo*es:hi*es])
		})
	}
	return nil
}
