package ring

// Layout is how a bucket of N elements is cut for a ring of Ranks: chunk c
// holds elements [c*Chunk, min(N, (c+1)*Chunk)). Chunk is ceil(N/Ranks)
// rounded up to a multiple of 8 elements, so every chunk starts on a 16-byte
// boundary (the last chunks may be short or empty). The GPU ring and the CPU
// reference use the same layout, so they add in the same order.
type Layout struct {
	N     int64
	Ranks int
	Chunk int64
}

// chunkAlign is the element granularity of chunks and pieces.
const chunkAlign = 8

// NewLayout cuts n elements for ranks ranks.
func NewLayout(n int64, ranks int) Layout {
	c := (n + int64(ranks) - 1) / int64(ranks)
	c = (c + chunkAlign - 1) / chunkAlign * chunkAlign
	if c == 0 {
		c = chunkAlign
	}
	return Layout{N: n, Ranks: ranks, Chunk: c}
}

// Bounds is the element range [lo, hi) of chunk c (empty where c is past the end).
func (l Layout) Bounds(c int) (lo, hi int64) {
	lo = min(l.N, int64(c)*l.Chunk)
	hi = min(l.N, lo+l.Chunk)
	return lo, hi
}

// Owner is the rank that holds the fully reduced chunk c after the
// reduce-scatter: rank c-1 (mod Ranks). Chunk c is reduced in the order
// x[c], x[c+1], ..., x[c-1].
func (l Layout) Owner(c int) int { return (c - 1 + l.Ranks) % l.Ranks }

// rsChunk is the chunk rank r works on at reduce-scatter step s, agChunk at
// all-gather step t; both read the previous rank's copy of it.
func rsChunk(r, s, ranks int) int { return ((r-1-s)%ranks + ranks) % ranks }
func agChunk(r, t, ranks int) int { return ((r-t)%ranks + ranks) % ranks }
