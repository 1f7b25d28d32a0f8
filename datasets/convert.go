package datasets

// Converting node features between float types (import --dtype).

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/gnnloader/gnnloader/internal/half"
)

// ConvertFeatures stores the node features as to, converting every element
// (float types only: float64, float32, float16, bfloat16; rounded to
// nearest) into new memory. "" or the type they have already changes
// nothing. Features of another type, a target that is not a float type, or
// finite values past the target's range (float16's largest is 65504) are an
// error and leave d as it was. workers <= 0 means GOMAXPROCS.
func (d *Data) ConvertFeatures(to DType, workers int) error {
	return d.convertFeatures(to, workers, false)
}

// ConvertFeaturesInPlace is ConvertFeatures, except that a conversion to a
// type no wider (float32 to float16, say) is written into the features' own
// memory: d.Features becomes its first bytes, and the table is never held
// twice (a float32 table and its float16 copy took 1.5 times the table's
// memory). Anything else sharing that memory sees it change. The checks
// run before anything is written: an error leaves d as it was.
func (d *Data) ConvertFeaturesInPlace(to DType, workers int) error {
	return d.convertFeatures(to, workers, true)
}

func (d *Data) convertFeatures(to DType, workers int, inPlace bool) error {
	c, err := planConversion(d.Features, d.FeatureDType, to, d.FeatureDim, workers, inPlace)
	if err != nil || c == nil {
		return err
	}
	d.Features, d.FeatureDType = c.apply(), to
	return nil
}

// ConvertFeatures converts the features of every node type that has float
// features (see Data.ConvertFeatures), a type of no nodes included (its
// type changes, so that every type's features end up as to); types without
// features are left alone, and nothing changes unless every conversion is
// possible.
func (h *Hetero) ConvertFeatures(to DType, workers int) error {
	return h.convertFeatures(to, workers, false)
}

// ConvertFeaturesInPlace is Hetero.ConvertFeatures with each node type's
// features converted as Data.ConvertFeaturesInPlace converts them; every
// type is checked before any is written.
func (h *Hetero) ConvertFeaturesInPlace(to DType, workers int) error {
	return h.convertFeatures(to, workers, true)
}

func (h *Hetero) convertFeatures(to DType, workers int, inPlace bool) error {
	plans := make([]*conversion, len(h.NodeTypes))
	for i, t := range h.NodeTypes {
		if t.FeatureDim == 0 {
			continue
		}
		c, err := planConversion(t.Features, t.FeatureDType, to, t.FeatureDim, workers, inPlace)
		if err != nil {
			return fmt.Errorf("node type %q: %w", t.Name, err)
		}
		plans[i] = c
	}
	for i, c := range plans {
		if c != nil {
			h.NodeTypes[i].Features, h.NodeTypes[i].FeatureDType = c.apply(), to
		}
	}
	return nil
}

// negZero is the accumulator elemCodec's add starts from to read one
// element as it is: adding to +0 would turn -0 into +0.
var negZero = math.Float64bits(math.Copysign(0, -1))

// conversion is a checked conversion of rows of features from one float
// type to another (planConversion), done by apply.
type conversion struct {
	rows      []byte
	from, to  DType
	n, fs, ts int // elements, and the bytes of one in each type
	workers   int
	inPlace   bool
}

// planConversion checks a conversion of rows (dim elements each) from
// `from` to `to`, reading them only: nil when nothing is to change; an
// error for a type that is not a float, bytes that are not whole rows, or
// a finite value that would become infinite (only a type no wider can
// overflow: float64 to float32 or float16, float32 or bfloat16 to float16).
// inPlace: apply writes a conversion to a type no wider over rows.
func planConversion(rows []byte, from, to DType, dim, workers int, inPlace bool) (*conversion, error) {
	if to == "" || to == from {
		return nil, nil
	}
	if !to.IsFloat() || !from.IsFloat() {
		return nil, fmt.Errorf("converting %s features to %s: only float types convert (float64, float32, float16, bfloat16)", from, to)
	}
	fs, ts := from.Size(), to.Size()
	n := len(rows) / fs
	if n*fs != len(rows) || (dim > 0 && n%dim != 0) {
		return nil, fmt.Errorf("converting features: %d bytes are not whole rows of %d %s elements", len(rows), dim, from)
	}
	c := &conversion{rows: rows, from: from, to: to, n: n, fs: fs, ts: ts, workers: workerCount(workers), inPlace: inPlace && ts <= fs}
	if ts <= fs {
		// Before anything is written: an error leaves rows as they were.
		if err := c.check(dim); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// apply converts, as planConversion checked: in place (the first n*ts bytes
// of rows) or into new memory.
func (c *conversion) apply() []byte {
	if c.inPlace {
		c.narrowInPlace()
		return c.rows[: c.n*c.ts : c.n*c.ts]
	}
	out := make([]byte, c.n*c.ts)
	parallelRange(c.n, c.workers, func(_, lo, hi int) { c.convertRange(out, lo, hi) })
	return out
}

// convertRange writes elements [lo, hi) of rows, converted, at their
// places in dst (element i at byte i*ts): float32 to a 16-bit float by
// internal/half directly, any other pair through the element codecs.
func (c *conversion) convertRange(dst []byte, lo, hi int) {
	if narrow, _ := halfOf(c.from, c.to); narrow != nil {
		le := binary.LittleEndian
		for i := lo; i < hi; i++ {
			le.PutUint16(dst[i*2:], narrow(math.Float32frombits(le.Uint32(c.rows[i*4:]))))
		}
		return
	}
	get, _, _ := elemCodec(c.from)
	_, put, _ := elemCodec(c.to)
	for i := lo; i < hi; i++ {
		put(dst[i*c.ts:], get(c.rows[i*c.fs:], negZero))
	}
}

// check finds finite values that the conversion would make infinite (past
// the new type's range): an error naming how many and the first.
func (c *conversion) check(dim int) error {
	// Per range: how many finite values became infinite, and the first.
	type overflow struct{ count, first int }
	chunk := rangeChunk(c.n, c.workers)
	over := make([]overflow, (c.n+chunk-1)/chunk)
	parallelRange(c.n, c.workers, func(k, lo, hi int) { over[k].count, over[k].first = c.overflows(lo, hi) })
	total, first := 0, -1
	for _, o := range over {
		if o.count > 0 && first < 0 {
			first = o.first // ranges are in row order: the lowest
		}
		total += o.count
	}
	if total > 0 {
		get, _, _ := elemCodec(c.from)
		return fmt.Errorf("converting %s features to %s: %d values are past %s's range (the first at row %d, element %d: %g); they would become infinite: choose a wider type (bfloat16 keeps float32's range)",
			c.from, c.to, total, c.to, first/max(dim, 1), first%max(dim, 1), math.Float64frombits(get(c.rows[first*c.fs:], negZero)))
	}
	return nil
}

// overflows counts the elements of [lo, hi) that are finite and become
// infinite in the new type, and returns the first of them: float32 to a
// 16-bit float by internal/half directly, any other pair through the
// element codecs (as convertRange converts).
func (c *conversion) overflows(lo, hi int) (count, first int) {
	over := func(i int) {
		if count++; count == 1 {
			first = i
		}
	}
	if narrow, inf := halfOf(c.from, c.to); narrow != nil {
		le := binary.LittleEndian
		for i := lo; i < hi; i++ {
			if f := le.Uint32(c.rows[i*4:]); f&0x7fffffff < 0x7f800000 && narrow(math.Float32frombits(f))&0x7fff == inf {
				over(i)
			}
		}
		return count, first
	}
	get, _, _ := elemCodec(c.from)
	back, put, _ := elemCodec(c.to)
	var tmp [8]byte
	for i := lo; i < hi; i++ {
		v := get(c.rows[i*c.fs:], negZero) // -0 + x is x, -0 included
		put(tmp[:], v)
		if !math.IsInf(math.Float64frombits(v), 0) && math.IsInf(math.Float64frombits(back(tmp[:], 0)), 0) {
			over(i)
		}
	}
	return count, first
}

// narrowInPlace writes element i as the new type at byte i*ts of rows, over
// the old elements (ts <= fs). Element i's new bytes cover old bytes of
// elements at most i, so going up in order never overwrites an element
// not yet read; and once the first lo elements are done, the elements
// [lo, lo*fs/ts) write only over old bytes of elements below lo (done)
// and read none of each other's, so each such wave runs on every worker.
// Of the same size (float16 and bfloat16) an element overwrites only
// itself: all at once.
func (c *conversion) narrowInPlace() {
	if c.ts == c.fs {
		parallelRange(c.n, c.workers, func(_, lo, hi int) { c.convertRange(c.rows, lo, hi) })
		return
	}
	lo := min(c.n, 1<<16) // the first elements in order, on one goroutine
	c.convertRange(c.rows, 0, lo)
	for lo < c.n {
		hi := min(c.n, lo*(c.fs/c.ts))
		parallelRange(hi-lo, c.workers, func(_, a, b int) { c.convertRange(c.rows, lo+a, lo+b) })
		lo = hi
	}
}

// rangeChunk is the length of parallelRange's ranges over n elements.
func rangeChunk(n, workers int) int { return max((n+workers-1)/workers, 1<<16) }

// parallelRange runs f(k, lo, hi) over [0, n) cut into up to workers
// ranges of at least 1<<16 elements (range k from k*rangeChunk), each on
// its own goroutine, and waits for them.
func parallelRange(n, workers int, f func(k, lo, hi int)) {
	chunk := rangeChunk(n, workers)
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		wg.Go(func() { f(lo/chunk, lo, min(lo+chunk, n)) })
	}
	wg.Wait()
}

// halfOf is, for float32 to float16 or bfloat16, the rounding the element
// codecs apply (elemCodec: float32 to float64 is exact, and a float64
// rounded once to a 16-bit type, half.Float64ToFloat16, is the float32
// rounded once) and the bits of its infinity (sign cleared); nil for any
// other pair.
func halfOf(from, to DType) (func(float32) uint16, uint16) {
	if from != Float32 {
		return nil, 0
	}
	switch to {
	case Float16:
		return half.Float32ToFloat16, 0x7c00
	case BFloat16:
		return half.Float32ToBFloat16, 0x7f80
	}
	return nil, 0
}
