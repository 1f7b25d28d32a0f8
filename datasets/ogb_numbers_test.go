package datasets

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// OGB's reader (read_csv_graph_raw) types a csv of numbers as pandas reads
// it: int64 when every value is an integer, else float32. So does ours,
// within a block and across blocks.
func TestParseFeaturesTypes(t *testing.T) {
	f32 := func(vs ...float32) []byte { return appendF32(nil, vs...) }
	for _, c := range []struct {
		in    string
		ints  []int64 // nil: a float block
		float []byte
	}{
		{in: "1,-2\n+3, 4 \n", ints: []int64{1, -2, 3, 4}},
		{in: "9223372036854775807,-9223372036854775808\n", ints: []int64{math.MaxInt64, math.MinInt64}},
		// Leading zeros and "-0" are integers, as pandas reads them.
		{in: "000000000000000000000042,-0\n", ints: []int64{42, 0}},
		// A "-0" read as an integer is -0.0 once its block turns float.
		{in: "-0,1\n0.5,2\n", float: f32(float32(math.Copysign(0, -1)), 1, 0.5, 2)},
		// Integers past 2^53 round as pandas rounds them: to float64, then
		// float32.
		{in: "9007199254740993,0.5\n", float: f32(float32(float64(9007199254740993)), 0.5)},
		{in: "1,2\n3,0.5\n", float: f32(1, 2, 3, 0.5)},
		// Integers before the first float convert as parsing them as
		// float32 would: 2^24+1 rounds to 2^24.
		{in: "16777217,5\n1e3,7\n", float: f32(16777216, 5, 1000, 7)},
		// Too large for int64: a float, as in pandas.
		{in: "99999999999999999999\n", float: f32(1e20)},
		{in: "9223372036854775808\n", float: f32(9223372036854775808)},
		{in: "-0.0,nan\n", float: f32(float32(math.Copysign(0, -1)), float32(math.NaN()))},
	} {
		fb, lines, pe := parseFeatures([]byte(c.in))
		if pe != nil {
			t.Fatalf("%q: %v", c.in, pe.msg)
		}
		if lines != int64(strings.Count(c.in, "\n")) || fb.rows != lines {
			t.Errorf("%q: %d lines, %d rows", c.in, lines, fb.rows)
		}
		if c.ints != nil {
			if fb.float || !slices.Equal(fb.ints, c.ints) {
				t.Errorf("%q: ints %v (float %v), want %v", c.in, fb.ints, fb.float, c.ints)
			}
			continue
		}
		if !fb.float || !sameBits(fb.floats, c.float) {
			t.Errorf("%q: float bytes %v (float %v), want %v", c.in, fb.floats, fb.float, c.float)
		}
	}
	for _, bad := range []string{"1,x\n", "1,\n", "1,2\n3\n"} {
		if _, _, pe := parseFeatures([]byte(bad)); pe == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// sameBits compares float32 bytes bit for bit (NaN equals NaN, -0 is not 0).
func sameBits(a, b []byte) bool { return string(a) == string(b) }

func appendF32(b []byte, vs ...float32) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// A float in a later block turns the integers gathered so far into
// float32s; an integer block after a float one is converted as it comes.
func TestCSVNumbersAcrossBlocks(t *testing.T) {
	block := func(s string) featBlock {
		fb, _, pe := parseFeatures([]byte(s))
		if pe != nil {
			t.Fatal(pe.msg)
		}
		return fb
	}
	var c csvNumbers
	c.hint = 8
	c.add(block("16777217,-3\n"))
	if b, dt := c.result(); dt != Int64 || !slices.Equal(asInt64s(b), []int64{16777217, -3}) {
		t.Fatalf("ints only: %s %v", dt, b)
	}
	if got := c.asFloat32(); !sameBits(got, appendF32(nil, 16777216, -3)) {
		t.Errorf("ints as float32: %v", got)
	}
	c.add(block("-0,4\n"))
	c.add(block("0.5,1\n"))
	c.add(block("7,-0\n"))
	negZero := float32(math.Copysign(0, -1))
	b, dt := c.result()
	if dt != Float32 || c.rows != 4 || !sameBits(b, appendF32(nil, 16777216, -3, negZero, 4, 0.5, 1, 7, negZero)) {
		t.Errorf("mixed: %s, %d rows, %v", dt, c.rows, b)
	}
	if cap(b) < 4*8 {
		t.Errorf("the hint of 8 values was not reserved: capacity %d bytes", cap(b))
	}
}

// An OGB csv dataset whose node features are integers imports them as
// int64, as OGB's loader gives them; one float anywhere makes them float32.
func TestImportOGBIntegerFeatures(t *testing.T) {
	src, dst := []int64{0, 1, 2, 3}, []int64{1, 2, 3, 0}
	for _, float := range []bool{false, true} {
		t.Run(fmt.Sprint("float=", float), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ogbn-x")
			writeTinyOGB(t, dir, src, dst, nil)
			var fb strings.Builder
			for v := range 30 {
				fmt.Fprintf(&fb, "%d,%d\n", v, 1<<40+v)
			}
			if float {
				s := strings.Replace(fb.String(), "29,", "29.5,", 1)
				fb.Reset()
				fb.WriteString(s)
			}
			impWriteGz(t, filepath.Join(dir, "raw", "node-feat.csv.gz"), fb.String())
			d, err := ImportOGB(dir, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d.FeatureDim != 2 {
				t.Fatalf("feature dim %d", d.FeatureDim)
			}
			for v := range 30 {
				want := [2]float64{float64(v), float64(1<<40 + v)}
				if float && v == 29 {
					want[0] = 29.5
				}
				var got [2]float64
				switch d.FeatureDType {
				case Int64:
					for j := range 2 {
						got[j] = float64(int64(binary.LittleEndian.Uint64(d.Features[16*v+8*j:])))
					}
				case Float32:
					for j := range 2 {
						got[j] = float64(getFloat32(d.Features[8*v+4*j:]))
					}
					want[1] = float64(float32(want[1]))
				}
				if wantDT := map[bool]DType{false: Int64, true: Float32}[float]; d.FeatureDType != wantDT || got != want {
					t.Fatalf("node %d: %v as %s, want %v as %s", v, got, d.FeatureDType, want, wantDT)
				}
			}
			// Written and opened again, the dtype stays.
			out := filepath.Join(t.TempDir(), "ds")
			if err := Write(out, d, nil); err != nil {
				t.Fatal(err)
			}
			back, err := Open(out, nil)
			if err != nil {
				t.Fatal(err)
			}
			if back.FeatureDType != d.FeatureDType || string(back.Features) != string(d.Features) {
				t.Errorf("reopened: %s, features equal %v", back.FeatureDType, string(back.Features) == string(d.Features))
			}
			back.Close()
			os.RemoveAll(out)
		})
	}
}

// OGB's npz layout keeps integer node features integer too (typed as
// import npz types them: int32 stays int32).
func TestImportOGBNPZIntegerFeatures(t *testing.T) {
	src, dst := []int64{0, 1, 2, 3}, []int64{1, 2, 3, 0}
	const n = 30 // writeTinyOGB's nodes
	vals := make([]int64, 2*n)
	for v := range n {
		vals[2*v], vals[2*v+1] = int64(v), -int64(v)<<20
	}
	dir := filepath.Join(t.TempDir(), "ogbn-x")
	writeTinyOGB(t, dir, src, dst, &impMember{"edge_feat", impNPY("<f4", []int64{4, 1}, impF32(0, 1, 2, 3))})
	// writeTinyOGB's data.npz again, with integer node features.
	impWriteNPZ(t, filepath.Join(dir, "raw", "data.npz"), false,
		impMember{"edge_index", impNPY("<i8", []int64{2, 4}, impI64(append(slices.Clone(src), dst...)...))},
		impMember{"node_feat", impNPY("<i4", []int64{n, 2}, impI32(vals...))})
	d, err := ImportOGB(dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.FeatureDim != 2 || d.FeatureDType != Int32 || len(d.Features) != 4*2*n {
		t.Fatalf("features %d x %s, %d bytes", d.FeatureDim, d.FeatureDType, len(d.Features))
	}
	for i, want := range vals {
		if got := int64(int32(binary.LittleEndian.Uint32(d.Features[4*i:]))); got != want {
			t.Fatalf("value %d: %d, want %d", i, got, want)
		}
	}
}
