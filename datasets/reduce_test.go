package datasets

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gnnloader/gnnloader/internal/half"
)

// TestUndirectedReduceSum: on random graphs with repeated edges, edges
// stored both ways and self loops, ReduceSum gives every edge v<-u the sum
// of the edge_attr rows and weights of all the input edges v<-u and u<-v
// (for each summable dtype), its first copy's time, and the graph of
// MakeUndirected; bool attributes are refused, and ReduceFirst is the
// first copy's values.
func TestUndirectedReduceSum(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int64, Int32, UInt8} {
		for seed := uint64(0); seed < 6; seed++ {
			g := randomGraph(3+int(seed)*4, 4, seed)
			e := g.NumEdges()
			const dim = 3
			es := dt.Size()
			r := rand.New(rand.NewPCG(seed, 9))
			d := &Data{Graph: g, EdgeDim: dim, EdgeDType: dt, EdgeAttr: make([]byte, int(e)*dim*es),
				EdgeWeight: make([]float32, e), EdgeTime: make([]int64, e)}
			vals := make([][]float64, e) // what each input row holds, as numbers
			for p := range e {
				vals[p] = make([]float64, dim)
				for j := range dim {
					v := float64(r.IntN(8)) // small integers: exact in every dtype, sums too
					vals[p][j] = v
					setElem(d.EdgeAttr[(int(p)*dim+j)*es:], dt, v)
				}
				d.EdgeWeight[p] = float32(r.IntN(100)) / 4
				d.EdgeTime[p] = int64(r.IntN(1000))
			}
			origW, origT := slices.Clone(d.EdgeWeight), slices.Clone(d.EdgeTime)
			want, origin, err := MakeUndirectedEdges(&g, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.makeUndirected(2, ReduceSum); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(d.Graph.Indptr, want.Indptr) || !slices.Equal(d.Graph.Indices32, want.Indices32) {
				t.Fatalf("%s seed %d: the graph differs from MakeUndirected's", dt, seed)
			}
			for v := int64(0); v < d.Graph.NumNodes; v++ {
				for p := d.Graph.Indptr[v]; p < d.Graph.Indptr[v+1]; p++ {
					u := d.Graph.Neighbor(p)
					sum, w := make([]float64, dim), float32(0)
					for a := int64(0); a < g.NumNodes; a++ {
						for q := g.Indptr[a]; q < g.Indptr[a+1]; q++ {
							if b := g.Neighbor(q); a == v && b == u || a == u && b == v {
								for j := range dim {
									sum[j] += vals[q][j]
								}
								w += origW[q]
							}
						}
					}
					for j := range dim {
						if got := getElem(d.EdgeAttr[(int(p)*dim+j)*es:], dt); got != wrap(sum[j], dt) {
							t.Fatalf("%s seed %d: edge %d<-%d value %d is %g, want %g", dt, seed, v, u, j, got, wrap(sum[j], dt))
						}
					}
					if d.EdgeWeight[p] != w {
						t.Fatalf("%s seed %d: edge %d<-%d weight %g, want %g", dt, seed, v, u, d.EdgeWeight[p], w)
					}
					if d.EdgeTime[p] != origT[origin[p]] {
						t.Fatalf("%s seed %d: edge %d<-%d time is not its first copy's", dt, seed, v, u)
					}
				}
			}
		}
	}
	g := randomGraph(10, 3, 1)
	b := &Data{Graph: g, EdgeDim: 1, EdgeDType: Bool, EdgeAttr: make([]byte, g.NumEdges())}
	if err := b.makeUndirected(1, ReduceSum); err == nil || !strings.Contains(err.Error(), "cannot be summed") {
		t.Fatalf("bool edge_attr summed: %v", err)
	}
	if err := b.makeUndirected(1, "max"); err == nil {
		t.Fatal("an unknown reduce was taken")
	}
	if err := b.makeUndirected(1, ReduceFirst); err != nil {
		t.Fatalf("bool edge_attr, first copy: %v", err)
	}
}

// setElem and getElem write and read one value of dtype t.
func setElem(b []byte, t DType, v float64) {
	switch t {
	case Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	case Float16:
		binary.LittleEndian.PutUint16(b, half.Float32ToFloat16(float32(v)))
	case BFloat16:
		binary.LittleEndian.PutUint16(b, half.Float32ToBFloat16(float32(v)))
	case Int64:
		binary.LittleEndian.PutUint64(b, uint64(int64(v)))
	case Int32:
		binary.LittleEndian.PutUint32(b, uint32(int32(v)))
	case UInt8:
		b[0] = byte(v)
	}
}

func getElem(b []byte, t DType) float64 {
	switch t {
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case Float16:
		return float64(half.Float16ToFloat32(binary.LittleEndian.Uint16(b)))
	case BFloat16:
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
	case Int64:
		return float64(int64(binary.LittleEndian.Uint64(b)))
	case Int32:
		return float64(int32(binary.LittleEndian.Uint32(b)))
	}
	return float64(b[0])
}

// wrap is v as dtype t holds it (uint8 wraps).
func wrap(v float64, t DType) float64 {
	if t == UInt8 {
		return float64(byte(int64(v)))
	}
	return v
}

// TestReorderingRefusesShortEdgeArrays: per-edge arrays that do not match
// the graph (a malformed file that got past its reader) give an error from
// the steps that reorder edges by position, never an index panic.
func TestReorderingRefusesShortEdgeArrays(t *testing.T) {
	g := randomGraph(30, 4, 3)
	e := g.NumEdges()
	for name, d := range map[string]*Data{
		"edge_weight": {EdgeWeight: make([]float32, e-1)},
		"edge_time":   {EdgeTime: make([]int64, e+5)},
		"edge_attr":   {EdgeDim: 2, EdgeDType: Float32, EdgeAttr: make([]byte, 8*e-4)},
	} {
		for _, reduce := range []EdgeReduce{ReduceFirst, ReduceSum} {
			c := *d
			c.Graph = g
			if err := c.makeUndirected(2, reduce); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s, reduce %s: undirected gave %v", name, reduce, err)
			}
		}
		c := *d
		c.Graph = g
		if err := c.orient(EdgeOut, 2); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: edge direction out gave %v", name, err)
		}
	}
}
