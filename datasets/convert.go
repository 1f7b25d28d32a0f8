package datasets

// Converting node features between float types (import --dtype).

import (
	"fmt"
	"math"
	"sync"
)

// ConvertFeatures stores the node features as to, converting every element
// (float types only: float64, float32, float16, bfloat16; rounded to
// nearest). "" or the type they have already changes nothing. Features of
// another type, a target that is not a float type, or finite values past
// the target's range (float16's largest is 65504) are an error and leave d
// as it was. workers <= 0 means GOMAXPROCS.
func (d *Data) ConvertFeatures(to DType, workers int) error {
	out, err := convertRows(d.Features, d.FeatureDType, to, d.FeatureDim, workers)
	if err != nil {
		return err
	}
	if out != nil {
		d.Features, d.FeatureDType = out, to
	}
	return nil
}

// ConvertFeatures converts the features of every node type that has float
// features (see Data.ConvertFeatures), a type of no nodes included (its
// type changes, so that every type's features end up as to); types without
// features are left alone, and nothing changes unless every conversion is
// possible.
func (h *Hetero) ConvertFeatures(to DType, workers int) error {
	outs := make([][]byte, len(h.NodeTypes))
	for i, t := range h.NodeTypes {
		if t.FeatureDim == 0 {
			continue
		}
		out, err := convertRows(t.Features, t.FeatureDType, to, t.FeatureDim, workers)
		if err != nil {
			return fmt.Errorf("node type %q: %w", t.Name, err)
		}
		outs[i] = out
	}
	for i := range h.NodeTypes {
		if outs[i] != nil {
			h.NodeTypes[i].Features, h.NodeTypes[i].FeatureDType = outs[i], to
		}
	}
	return nil
}

// negZero is the accumulator elemCodec's add starts from to read one
// element as it is: adding to +0 would turn -0 into +0.
var negZero = math.Float64bits(math.Copysign(0, -1))

// convertRows returns rows of dim elements of type from as type to, or nil
// when nothing is to change.
func convertRows(rows []byte, from, to DType, dim, workers int) ([]byte, error) {
	if to == "" || to == from {
		return nil, nil
	}
	if !to.IsFloat() || !from.IsFloat() {
		return nil, fmt.Errorf("converting %s features to %s: only float types convert (float64, float32, float16, bfloat16)", from, to)
	}
	get, _, _ := elemCodec(from)
	back, put, _ := elemCodec(to)
	fs, ts := from.Size(), to.Size()
	n := len(rows) / fs
	if n*fs != len(rows) || (dim > 0 && n%dim != 0) {
		return nil, fmt.Errorf("converting features: %d bytes are not whole rows of %d %s elements", len(rows), dim, from)
	}
	out := make([]byte, n*ts)
	w := workerCount(workers)
	chunk := max((n+w-1)/w, 1<<16)
	// Per chunk: how many finite values became infinite (past the new
	// type's range: refused below, nothing lost), and the first of them.
	type overflow struct{ count, first int }
	over := make([]overflow, (n+chunk-1)/chunk)
	var wg sync.WaitGroup
	for c := range over {
		lo, hi := c*chunk, min((c+1)*chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &over[c]
			for i := lo; i < hi; i++ {
				v := get(rows[i*fs:], negZero) // -0 + x is x, -0 included
				put(out[i*ts:], v)
				if !math.IsInf(math.Float64frombits(v), 0) && math.IsInf(math.Float64frombits(back(out[i*ts:], 0)), 0) {
					if o.count++; o.count == 1 {
						o.first = i
					}
				}
			}
		}()
	}
	wg.Wait()
	total, first := 0, -1
	for _, o := range over {
		if o.count > 0 && first < 0 {
			first = o.first // chunks are in row order: the lowest
		}
		total += o.count
	}
	if total > 0 {
		return nil, fmt.Errorf("converting %s features to %s: %d values are past %s's range (the first at row %d, element %d: %g); they would become infinite: choose a wider type (bfloat16 keeps float32's range)",
			from, to, total, to, first/max(dim, 1), first%max(dim, 1), math.Float64frombits(get(rows[first*fs:], negZero)))
	}
	return out, nil
}
