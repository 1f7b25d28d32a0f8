package ring

// Plan is how AllReduce cuts a bucket: Blocks per rank, Piece elements per
// block and step, Rounds of Blocks pieces per chunk.
type Plan struct {
	Layout
	Blocks int
	Piece  int64
	Rounds int
	Push   bool // the push kernels (else pull)
}

// DefaultPushMinBytes is the smallest bucket the push kernels run for. On
// 2x H200 (NV18) push reached 362 GB/s bus bandwidth at 1 GiB against 322
// for pull, but pull was faster up to 16 MiB (8 MiB: 178 vs 163 GB/s).
const DefaultPushMinBytes = 32 << 20

func (g *GPU) pushMin() int64 {
	if g.opts.PushMinBytes > 0 {
		return g.opts.PushMinBytes
	}
	return DefaultPushMinBytes
}

// Plan returns the cut of n elements of dt.
func (g *GPU) Plan(n int64, dt DType) Plan {
	l := NewLayout(n, g.ranks)
	es := int64(dt.Size())
	maxB := g.opts.MaxBlocks
	if maxB <= 0 {
		maxB = max(1, g.sms/g.perDev)
	}
	maxB = min(maxB, maxFlagBlocks)
	pmax, pmin := int64(g.opts.PieceBytes), int64(g.opts.MinPieceBytes)
	if pmax <= 0 {
		pmax = 256 << 10
	}
	if pmin <= 0 {
		pmin = 16 << 10
	}
	pmin = min(pmin, pmax)
	align := func(e int64) int64 { return max(chunkAlign, (e+chunkAlign-1)/chunkAlign*chunkAlign) }
	// As few rounds as pieces of at most pmax allow, the pieces of equal
	// size (a last round of one small piece would cost two flag waits for
	// nothing), and no piece smaller than pmin (small buckets use fewer blocks).
	rounds := max(1, (l.Chunk*es+int64(maxB)*pmax-1)/(int64(maxB)*pmax))
	piece := align((l.Chunk + int64(maxB)*rounds - 1) / (int64(maxB) * rounds))
	piece = max(piece, align(pmin/es))
	pieces := (l.Chunk + piece - 1) / piece
	blocks := int(min(int64(maxB), pieces))
	rounds = (pieces + int64(blocks) - 1) / int64(blocks)
	push := g.push && n*es >= g.pushMin()
	return Plan{Layout: l, Blocks: blocks, Piece: piece, Rounds: int(rounds), Push: push}
}
