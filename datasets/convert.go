package datasets

// Converting node features between float types (import --dtype).

import (
	"fmt"
	"sync"
)

// ConvertFeatures stores the node features as to, converting every element
// (float types only: float64, float32, float16, bfloat16; rounded to
// nearest). "" or the type they have already changes nothing. Features of
// another type, or a target that is not a float type, are an error and
// leave d as it was. workers <= 0 means GOMAXPROCS.
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
// features (see Data.ConvertFeatures); types without features are left
// alone, and nothing changes unless every conversion is possible.
func (h *Hetero) ConvertFeatures(to DType, workers int) error {
	outs := make([][]byte, len(h.NodeTypes))
	for i, t := range h.NodeTypes {
		if t.FeatureDim == 0 || len(t.Features) == 0 {
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
	_, put, _ := elemCodec(to)
	fs, ts := from.Size(), to.Size()
	n := len(rows) / fs
	if n*fs != len(rows) || (dim > 0 && n%dim != 0) {
		return nil, fmt.Errorf("converting features: %d bytes are not whole rows of %d %s elements", len(rows), dim, from)
	}
	out := make([]byte, n*ts)
	w := workerCount(workers)
	chunk := max((n+w-1)/w, 1<<16)
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				put(out[i*ts:], get(rows[i*fs:], 0))
			}
		}()
	}
	wg.Wait()
	return out, nil
}
