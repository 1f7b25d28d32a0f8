package datasets

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"testing"
)

// anyFeatures decodes d's features of any non-half type to float32.
func anyFeatures(d *Data) []float32 {
	n := len(d.Features) / d.FeatureDType.Size()
	x := make([]float32, n)
	le := binary.LittleEndian
	for i := range x {
		switch d.FeatureDType {
		case Float32:
			x[i] = math.Float32frombits(le.Uint32(d.Features[4*i:]))
		case Float64:
			x[i] = float32(math.Float64frombits(le.Uint64(d.Features[8*i:])))
		case Int64:
			x[i] = float32(int64(le.Uint64(d.Features[8*i:])))
		case Int32:
			x[i] = float32(int32(le.Uint32(d.Features[4*i:])))
		case UInt8, Bool:
			x[i] = float32(d.Features[i])
		}
	}
	return x
}

func TestDTypes(t *testing.T) {
	for _, dt := range DTypes {
		got, err := ParseDType(string(dt))
		if err != nil || got != dt || dt.Size() == 0 {
			t.Errorf("%s: %v %v", dt, got, err)
		}
	}
	if _, err := ParseDType("complex64"); err == nil {
		t.Error("complex64 accepted")
	}
	if !Float64.IsFloat() || !BFloat16.IsFloat() || Int64.IsFloat() || Bool.IsFloat() || UInt8.IsFloat() {
		t.Error("IsFloat")
	}
}

// TestGenIntegerDTypes: every feature type is generated, round-trips, and
// keeps the planted signal.
func TestGenIntegerDTypes(t *testing.T) {
	o := GenOptions{Like: "arxiv", Scale: 0.02, Seed: 5}
	ref := mustGenerate(t, o)
	x := float32Features(ref)
	base := nearestCentroidAccuracy(neighbourMean(x, ref.FeatureDim, &ref.Graph), ref.FeatureDim, ref)
	for _, dt := range []DType{Float64, Int64, Int32, UInt8, Bool} {
		o.FeatureDType = dt
		d := mustGenerate(t, o)
		if len(d.Features) != len(x)*dt.Size() {
			t.Fatalf("%s: %d bytes", dt, len(d.Features))
		}
		ds := writeAndOpen(t, d)
		sameData(t, d, &ds.Data)
		if ds.Manifest.FeatureDType != dt {
			t.Fatalf("manifest dtype %s", ds.Manifest.FeatureDType)
		}
		y := anyFeatures(d)
		agg := nearestCentroidAccuracy(neighbourMean(y, d.FeatureDim, &d.Graph), d.FeatureDim, d)
		t.Logf("%s: 1-hop nearest centroid %.3f (float32 %.3f)", dt, agg, base)
		if agg < base-0.1 {
			t.Errorf("%s: accuracy %.3f, float32 gives %.3f", dt, agg, base)
		}
	}
}

func TestImportNPZIntegerFeatures(t *testing.T) {
	graph := []impMember{
		{"adj_indptr", impNPY("<i8", []int64{4}, impI64(0, 1, 2, 3))},
		{"adj_indices", impNPY("<i8", []int64{3}, impI64(1, 2, 0))},
		{"adj_shape", impNPY("<i8", []int64{2}, impI64(3, 3))},
		{"labels", impNPY("<i8", []int64{3}, impI64(0, 1, 1))},
	}
	for _, c := range []struct {
		attr []impMember
		want DType
		vals string
	}{
		{[]impMember{{"attr_matrix", impNPY("<i8", []int64{3, 2}, impI64(1, -2, 3, 1<<40, 5, 6))}}, Int64, "[1 -2 3 1099511627776 5 6]"},
		{[]impMember{{"attr_matrix", impNPY("<i4", []int64{3, 2}, impI32(1, -2, 3, 4, 5, 6))}}, Int32, "[1 -2 3 4 5 6]"},
		{[]impMember{{"attr_matrix", impNPY("|u1", []int64{3, 2}, []byte{1, 2, 3, 4, 5, 255})}}, UInt8, "[1 2 3 4 5 255]"},
		{[]impMember{{"attr_matrix", impNPY("|b1", []int64{3, 2}, []byte{1, 0, 0, 1, 1, 1})}}, Bool, "[1 0 0 1 1 1]"},
		{[]impMember{{"attr_matrix", impNPY("<f8", []int64{3, 2}, impF64(1, 2, 3, 4, 5, 6.5))}}, Float32, "[1 2 3 4 5 6.5]"},
		{[]impMember{ // CSR parts, duplicates summed
			{"attr_shape", impNPY("<i8", []int64{2}, impI64(3, 2))},
			{"attr_indptr", impNPY("<i8", []int64{4}, impI64(0, 2, 3, 3))},
			{"attr_indices", impNPY("<i8", []int64{3}, impI64(1, 1, 0))},
			{"attr_data", impNPY("<i8", []int64{3}, impI64(7, 8, -1))},
		}, Int64, "[0 15 -1 0 0 0]"},
	} {
		path := filepath.Join(t.TempDir(), "x.npz")
		impWriteNPZ(t, path, false, append(append([]impMember{}, graph...), c.attr...)...)
		d, err := ImportNPZ(path, ImportOptions{SplitRatios: [3]float64{0.4, 0.3, 0.3}})
		if err != nil {
			t.Fatal(err)
		}
		if d.FeatureDType != c.want || d.FeatureDim != 2 {
			t.Fatalf("%s: got %s x %d", c.want, d.FeatureDType, d.FeatureDim)
		}
		if got := fmt.Sprint(anyFeatures(d)); got != c.vals && c.want != Int64 {
			t.Errorf("%s: %s, want %s", c.want, got, c.vals)
		}
		if c.want == Int64 {
			var v []int64
			for i := 0; i < 6; i++ {
				v = append(v, int64(binary.LittleEndian.Uint64(d.Features[8*i:])))
			}
			if got := fmt.Sprint(v); got != c.vals {
				t.Errorf("int64: %s, want %s", got, c.vals)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "bad.npz")
	impWriteNPZ(t, path, false, append(append([]impMember{}, graph...),
		impMember{"attr_matrix", impNPY("<u8", []int64{3, 2}, impI64(1, 2, 3, 4, 5, -1))})...)
	if _, err := ImportNPZ(path, ImportOptions{}); err == nil {
		t.Error("uint64 above MaxInt64 accepted")
	}
}
