package datasets

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime/debug"
	"strings"

	"github.com/gnnloader/gnnloader/internal/half"
)

// Random streams of the optional arrays (after those of gen.go).
const (
	streamEdgeAttr uint64 = iota + 64
	streamEdgeCentroid
	streamEdgeWeight
	streamTime
)

// genTimeSpan is the range of generated node times: [0, genTimeSpan).
const genTimeSpan = 50

// genOptional adds the optional arrays opts asks for to d, whose graph,
// labels and splits are final: edge_attr, edge_weight, node_time and
// edge_time. Every value is a pure function of the seed and the edge's
// position (or the node), like the rest of Generate.
//
//   - edge_attr: a centroid for "same class" and its opposite for
//     "different classes" (±genMuL2/sqrt(dim) per element) plus N(0, 1)
//     noise, in opts.EdgeDType as node features are (putValue): an edge's
//     attributes tell whether its two ends share a class.
//   - edge_weight: uniform in [0.5, 1) between nodes of one class, in
//     [0, 0.5) otherwise, so a weighted mean favours same-class neighbours.
//   - node_time: uniform in [0, genTimeSpan); edge_time: the later of its
//     two ends' times (an edge exists from when both ends do).
func (g *generator) genOptional(d *Data, opts GenOptions) error {
	e := d.Graph.NumEdges()
	if opts.EdgeDim < 0 || opts.EdgeDim > math.MaxInt32 {
		return fmt.Errorf("gen: edge dim %d is out of range", opts.EdgeDim)
	}
	if opts.EdgeDim == 0 && opts.EdgeDType != "" {
		return fmt.Errorf("gen: edge dtype %s without an edge dim", opts.EdgeDType)
	}
	if opts.EdgeDim == 0 && !opts.EdgeWeights && !opts.Time {
		// Nothing to add: no per-edge temporaries (src alone is 8 bytes an
		// edge, 13 GB at papers100M size, which the runtime would keep
		// resident beside the dataset).
		return nil
	}
	src := make([]int64, e) // the row of every edge position
	genParallel(g.workers, d.Graph.NumNodes, 1<<14, func(lo, hi int64) {
		for v := lo; v < hi; v++ {
			for p := d.Graph.Indptr[v]; p < d.Graph.Indptr[v+1]; p++ {
				src[p] = v
			}
		}
	})
	same := func(p int64) bool { return d.Labels[src[p]] == d.Labels[d.Graph.Neighbor(p)] }
	if opts.EdgeDim > 0 {
		dt := opts.EdgeDType
		if dt == "" {
			dt = Float32
		}
		if !dt.Valid() {
			return fmt.Errorf("gen: unknown edge dtype %q", dt)
		}
		dim := opts.EdgeDim
		mu := float32(genMuL2 / math.Sqrt(float64(dim)))
		cent := make([]float32, 2*dim) // "same class", then its opposite
		ck := streamKey(g.seed, streamEdgeCentroid)
		for i := range dim {
			cent[i], cent[dim+i] = mu, -mu
			if hashAt(ck, uint64(i))&1 == 0 {
				cent[i], cent[dim+i] = -mu, mu
			}
		}
		rb := int64(dim * dt.Size())
		d.EdgeDim, d.EdgeDType = dim, dt
		d.EdgeAttr = make([]byte, e*rb)
		key := streamKey(g.seed, streamEdgeAttr)
		scale := float32(math.Sqrt(3) / 65536)
		g.prog.Begin("edge_attr", e*rb)
		genParallel(g.workers, e, max(1, (1<<20)/rb), func(lo, hi int64) {
			for p := lo; p < hi; p++ {
				rng := wyrand(hashAt(key, uint64(p)))
				c := cent[:dim]
				if !same(p) {
					c = cent[dim:]
				}
				row := d.EdgeAttr[p*rb : (p+1)*rb]
				for j := range c {
					putValue(row, j, dt, c[j]+noise(&rng, scale))
				}
			}
			g.prog.Add((hi - lo) * rb)
		})
	}
	if opts.EdgeWeights {
		d.EdgeWeight = make([]float32, e)
		key := streamKey(g.seed, streamEdgeWeight)
		genParallel(g.workers, e, 1<<16, func(lo, hi int64) {
			for p := lo; p < hi; p++ {
				w := float32(hashAt(key, uint64(p))>>40) * 0x1p-25 // [0, 0.5)
				if same(p) {
					w += 0.5
				}
				d.EdgeWeight[p] = w
			}
		})
	}
	if opts.Time {
		n := d.Graph.NumNodes
		d.NodeTime = make([]int64, n)
		key := streamKey(g.seed, streamTime)
		for v := range d.NodeTime {
			d.NodeTime[v] = below(hashAt(key, uint64(v)), genTimeSpan)
		}
		d.EdgeTime = make([]int64, e)
		for p := range d.EdgeTime {
			d.EdgeTime[p] = max(d.NodeTime[src[p]], d.NodeTime[d.Graph.Neighbor(int64(p))])
		}
	}
	if src = nil; 8*e > 1<<28 {
		debug.FreeOSMemory() // src back to the OS, as gen.go does with its temporaries
	}
	return nil
}

// putValue stores x as element j of row in type dt: the float types
// rounded to nearest even, the integer ones as putQuantized says.
func putValue(row []byte, j int, dt DType, x float32) {
	switch dt {
	case Float32:
		binary.LittleEndian.PutUint32(row[4*j:], math.Float32bits(x))
	case Float16:
		binary.LittleEndian.PutUint16(row[2*j:], half.Float32ToFloat16(x))
	case BFloat16:
		binary.LittleEndian.PutUint16(row[2*j:], half.Float32ToBFloat16(x))
	default:
		putQuantized(row, j, dt, x)
	}
}

// optionalSource is what the optional arrays add to a gen command line.
func optionalSource(o GenOptions) string {
	var b strings.Builder
	if o.EdgeDim > 0 {
		fmt.Fprintf(&b, " --edge-dim %d", o.EdgeDim)
		if o.EdgeDType != "" && o.EdgeDType != Float32 {
			fmt.Fprintf(&b, " --edge-dtype %s", o.EdgeDType)
		}
	}
	if o.EdgeWeights {
		b.WriteString(" --edge-weights")
	}
	if o.Time {
		b.WriteString(" --time")
	}
	return b.String()
}
