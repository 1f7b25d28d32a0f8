package datasets

// The generated features: learnable from the graph, in every dtype, rounded
// as the float16 and bfloat16 conversions say.

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gnnloader/gnnloader/internal/half"
)

// nearestCentroidAccuracy fits one centroid per class on the train rows of x
// (n x dim) and returns the accuracy of the nearest centroid on test.
func nearestCentroidAccuracy(x []float32, dim int, d *Data) float64 {
	cent := make([]float64, d.NumClasses*dim)
	cnt := make([]float64, d.NumClasses)
	for _, v := range d.Splits[SplitTrain] {
		y := d.Labels[v]
		cnt[y]++
		for j := range dim {
			cent[int(y)*dim+j] += float64(x[v*int64(dim)+int64(j)])
		}
	}
	for c := range d.NumClasses {
		for j := range dim {
			cent[c*dim+j] /= max(cnt[c], 1)
		}
	}
	var right int
	test := d.Splits[SplitTest]
	for _, v := range test {
		best, bestC := math.Inf(1), -1
		for c := range d.NumClasses {
			if cnt[c] == 0 {
				continue
			}
			var s float64
			for j := range dim {
				e := float64(x[v*int64(dim)+int64(j)]) - cent[c*dim+j]
				s += e * e
			}
			if s < best {
				best, bestC = s, c
			}
		}
		if bestC == int(d.Labels[v]) {
			right++
		}
	}
	return float64(right) / float64(len(test))
}

func float32Features(d *Data) []float32 {
	x := make([]float32, len(d.Features)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(d.Features[4*i:]))
	}
	return x
}

// neighbourMean averages every node's features with those of its in- and
// out-neighbours: one mean-aggregation layer over the undirected graph, what
// a GraphSAGE layer sees.
func neighbourMean(x []float32, dim int, g *Graph) []float32 {
	n := g.NumNodes
	sum := make([]float64, len(x))
	cnt := make([]float64, n)
	add := func(dst, src int64) {
		cnt[dst]++
		for j := range int64(dim) {
			sum[dst*int64(dim)+j] += float64(x[src*int64(dim)+j])
		}
	}
	for v := range n {
		add(v, v)
		for i := g.Indptr[v]; i < g.Indptr[v+1]; i++ {
			u := g.Neighbor(i)
			add(v, u)
			if g.Indices32 != nil || g.Indices64 != nil {
				add(u, v)
			}
		}
	}
	out := make([]float32, len(x))
	for v := range n {
		for j := range int64(dim) {
			out[v*int64(dim)+j] = float32(sum[v*int64(dim)+j] / cnt[v])
		}
	}
	return out
}

// TestGenLearnable checks the planted labels with a nearest-centroid
// classifier (fit on train, scored on test): a deterministic proxy for a
// feature-only MLP (raw features) and for GraphSAGE (features averaged over
// the 1-hop neighbourhood).
func TestGenLearnable(t *testing.T) {
	for _, o := range []GenOptions{
		{Like: "arxiv", Scale: 0.1, Seed: 5},
		{Like: "products", Scale: 0.004, Seed: 5},
	} {
		d := mustGenerate(t, o)
		x := float32Features(d)
		raw := nearestCentroidAccuracy(x, d.FeatureDim, d)
		agg := nearestCentroidAccuracy(neighbourMean(x, d.FeatureDim, &d.Graph), d.FeatureDim, d)
		chance := 1 / float64(d.NumClasses)
		t.Logf("%s scale %g: nearest centroid on features %.3f, on 1-hop means %.3f, chance %.3f", o.Like, o.Scale, raw, agg, chance)
		if raw < 0.3 || raw > 0.7 || raw < 5*chance {
			t.Errorf("features alone give %.3f, want 0.3..0.7 (chance %.3f)", raw, chance)
		}
		if agg < 0.75 || agg < raw+0.15 {
			t.Errorf("1-hop means give %.3f, want >= 0.75 and well above features alone (%.3f)", agg, raw)
		}
	}
}

func TestGenFeatureDTypes(t *testing.T) {
	o := GenOptions{Like: "cora", Scale: 0.05, Seed: 11}
	f32 := float32Features(mustGenerate(t, o))
	for _, dt := range []DType{Float16, BFloat16} {
		o.FeatureDType = dt
		d := mustGenerate(t, o)
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		if len(d.Features) != 2*len(f32) {
			t.Fatalf("%s: %d bytes, want %d", dt, len(d.Features), 2*len(f32))
		}
		tol := map[DType]float64{Float16: 0x1p-11, BFloat16: 0x1p-8}[dt]
		for i, f := range f32 {
			h := binary.LittleEndian.Uint16(d.Features[2*i:])
			var got float64
			if dt == Float16 {
				got = float16ToFloat64(h)
			} else {
				got = float64(math.Float32frombits(uint32(h) << 16))
			}
			if err := math.Abs(got - float64(f)); err > tol*math.Abs(float64(f))+0x1p-25 {
				t.Fatalf("%s: element %d = %g, float32 %g", dt, i, got, f)
			}
		}
	}
}

func float16ToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * m * 0x1p-24
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * (1 + m/1024) * math.Ldexp(1, e-15)
}

// TestFloat16Rounding checks float32ToFloat16 against exact arithmetic:
// every half converts back to itself, and values between two neighbouring
// halves go to the nearer one, ties to the even one.
func TestFloat16Rounding(t *testing.T) {
	for h := range uint32(1 << 16) {
		x := float16ToFloat64(uint16(h))
		if math.IsNaN(x) {
			continue
		}
		if got := half.Float32ToFloat16(float32(x)); got != uint16(h) {
			t.Fatalf("half %#04x (%g) -> %#04x", h, x, got)
		}
		if h&0x7fff >= 0x7bff { // no finite upper neighbour
			continue
		}
		up := float16ToFloat64(uint16(h + 1))
		if h&0x8000 != 0 && h&0x7fff == 0 {
			continue
		}
		mid := (x + up) / 2 // exact in float32: halves have 11 bits
		even := uint16(h)
		if h&1 == 1 {
			even = uint16(h + 1)
		}
		if got := half.Float32ToFloat16(float32(mid)); got != even {
			t.Fatalf("midpoint of %#04x and %#04x -> %#04x, want %#04x", h, h+1, got, even)
		}
		below := math.Nextafter32(float32(mid), float32(x))
		above := math.Nextafter32(float32(mid), float32(up))
		if got := half.Float32ToFloat16(below); got != uint16(h) {
			t.Fatalf("just below the midpoint of %#04x -> %#04x", h, got)
		}
		if got := half.Float32ToFloat16(above); got != uint16(h+1) {
			t.Fatalf("just above the midpoint of %#04x -> %#04x", h, got)
		}
	}
	if got := half.Float32ToFloat16(70000); got != 0x7c00 {
		t.Errorf("70000 -> %#04x, want +Inf", got)
	}
	if got := half.Float32ToBFloat16(1 + 0x1p-8); got != 0x3f80 { // tie, to even
		t.Errorf("bfloat16(1+2^-8) = %#04x", got)
	}
	if got := half.Float32ToBFloat16(1 + 0x1p-8 + 0x1p-20); got != 0x3f81 {
		t.Errorf("bfloat16(1+2^-8+eps) = %#04x", got)
	}
}
