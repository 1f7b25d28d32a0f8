package datasets

import (
	"encoding/binary"
	"math"

	"github.com/gnnloader/gnnloader/internal/half"
)

// features fills out with centroid[class] + noise, one row per node. Each
// centroid is ±genMuL2/sqrt(dim) per dimension (random signs); the noise is
// an Irwin-Hall(4) approximation of N(0, 1) built from one random word per
// element. Every product is rounded to float32 explicitly (no fused
// multiply-add), so the bytes are the same on every platform.
func (g *generator) features(out []byte, labels []int32, dt DType) {
	dim, C := g.preset.FeatureDim, g.preset.Classes
	mu := float32(genMuL2 / math.Sqrt(float64(dim)))
	cent := make([]float32, C*dim)
	ck := streamKey(g.seed, streamCentroid)
	for i := range cent {
		if hashAt(ck, uint64(i))&1 == 1 {
			cent[i] = mu
		} else {
			cent[i] = -mu
		}
	}
	// The sum of four uniform 16-bit values has mean 131070 and standard
	// deviation 65536/sqrt(3) (to 1e-5).
	scale := float32(math.Sqrt(3) / 65536)
	rb := int64(dim * dt.Size())
	key := streamKey(g.seed, streamFeatures)
	chunkRows := max(1, (1<<20)/rb)
	genParallel(g.workers, g.sz.nodes, chunkRows, func(lo, hi int64) {
		for v := lo; v < hi; v++ {
			rng := wyrand(hashAt(key, uint64(v)))
			c := cent[int(labels[v])*dim:][:dim]
			row := out[v*rb : (v+1)*rb]
			switch dt {
			case Float32:
				row = row[:4*len(c)]
				for j := range c {
					binary.LittleEndian.PutUint32(row[4*j:], math.Float32bits(c[j]+noise(&rng, scale)))
				}
			case Float16:
				row = row[:2*len(c)]
				for j := range c {
					binary.LittleEndian.PutUint16(row[2*j:], half.Float32ToFloat16(c[j]+noise(&rng, scale)))
				}
			case BFloat16:
				row = row[:2*len(c)]
				for j := range c {
					binary.LittleEndian.PutUint16(row[2*j:], half.Float32ToBFloat16(c[j]+noise(&rng, scale)))
				}
			default:
				for j := range c {
					putQuantized(row, j, dt, c[j]+noise(&rng, scale))
				}
			}
		}
		g.prog.Add((hi - lo) * rb)
	})
}

// putQuantized stores x as element j of row in one of the integer types:
// int64 and int32 hold round(x*genIntScale), uint8 holds
// round(x*genU8Scale)+128 clamped to [0, 255], bool holds x > 0.
func putQuantized(row []byte, j int, dt DType, x float32) {
	switch dt {
	case Float64:
		binary.LittleEndian.PutUint64(row[8*j:], math.Float64bits(float64(x)))
	case Int64:
		binary.LittleEndian.PutUint64(row[8*j:], uint64(int64(math.RoundToEven(float64(x)*genIntScale))))
	case Int32:
		binary.LittleEndian.PutUint32(row[4*j:], uint32(int32(math.RoundToEven(float64(x)*genIntScale))))
	case UInt8:
		row[j] = byte(min(max(math.RoundToEven(float64(x)*genU8Scale)+128, 0), 255))
	case Bool:
		if x > 0 {
			row[j] = 1
		} else {
			row[j] = 0
		}
	}
}

// Scales of the integer feature types (putQuantized).
const (
	genIntScale = 16
	genU8Scale  = 32
)

// noise is one approximately N(0, 1) sample.
func noise(rng *wyrand, scale float32) float32 {
	x := rng.next()
	s := int32(x&0xffff) + int32(x>>16&0xffff) + int32(x>>32&0xffff) + int32(x>>48)
	return float32(float32(s-131070) * scale)
}
