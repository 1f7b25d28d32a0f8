package gatherbench

// The benchmark's inputs: a pinned table filled on every core, and sampled
// batches.

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/pinned"
)

// FillTable allocates rows x rowBytes of pinned memory, fills it with
// non-zero pseudo-random bytes using every core, and registers it through
// pinned.FromAlloc (no copy). It reports the fill time in LoadTime.
func FillTable(c *cudaext.Context, rows int64, rowBytes int) (*pinned.Store, error) {
	n := rows * int64(rowBytes)
	mem, err := pinned.Alloc(n)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	const piece = 16 << 20
	var wg sync.WaitGroup
	next := make(chan int64, 64)
	go func() {
		for off := int64(0); off < n; off += piece {
			next <- off
		}
		close(next)
	}()
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range next {
				end := min(off+piece, n)
				b := mem[off:end]
				x := uint64(off)*0x9E3779B97F4A7C15 + 1
				w := unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
				for i := range w {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					w[i] = x | 0x0101010101010101
				}
				for i := len(w) * 8; i < len(b); i++ {
					b[i] = 0x5a
				}
			}
		}()
	}
	wg.Wait()
	fill := time.Since(t0)
	st, err := pinned.FromAlloc(mem, rowBytes, rows, &pinned.Options{Context: c})
	if err != nil {
		pinned.Free(mem)
		return nil, err
	}
	st.LoadTime = fill
	return st, nil
}

// SampleBatch draws n distinct row ids uniformly from [0, rows), in random
// (sampled) order, as the unique nodes of one sampled batch.
func SampleBatch(r *rand.Rand, n int, rows int64) []int64 {
	seen := make([]uint64, (rows+63)/64)
	nid := make([]int64, 0, n)
	for len(nid) < n {
		v := r.Int64N(rows)
		if seen[v/64]&(1<<(v%64)) != 0 {
			continue
		}
		seen[v/64] |= 1 << (v % 64)
		nid = append(nid, v)
	}
	return nid
}
