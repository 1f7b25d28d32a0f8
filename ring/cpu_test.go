package ring

import (
	"bytes"
	"math"
	"math/rand"
	"testing"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/internal/half"
)

var dtypes = []DType{Float32, BFloat16, Float16}

// randBufs makes ranks buffers of n random elements of dt in [-1, 1) (a few
// larger), already rounded to dt.
func randBufs(r *rand.Rand, ranks int, n int64, dt DType) [][]byte {
	out := make([][]byte, ranks)
	for k := range out {
		b := make([]byte, n*int64(dt.Size()))
		for i := 0; i < int(n); i++ {
			v := r.Float64()*2 - 1
			if r.Intn(50) == 0 {
				v *= 300
			}
			dt.Store(b, i, v)
		}
		out[k] = b
	}
	return out
}

func cloneBufs(b [][]byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = append([]byte(nil), b[i]...)
	}
	return out
}

// checkResult checks got (every rank's result) against in: identical on every
// rank and within the dtype's rounding of the float64 reference.
func checkResult(t *testing.T, in, got [][]byte, n int64, dt DType, op Op) {
	t.Helper()
	for r := 1; r < len(got); r++ {
		if !bytes.Equal(got[0][:n*int64(dt.Size())], got[r][:n*int64(dt.Size())]) {
			t.Fatalf("rank %d result differs from rank 0", r)
		}
	}
	ref := reference64(in, n, dt, op)
	bad := 0
	for i := 0; i < int(n); i++ {
		v := dt.Load(got[0], i)
		if d := math.Abs(v - ref[i]); !(d <= tolerance(in, i, dt, op)) {
			if bad++; bad < 5 {
				t.Errorf("element %d: %g, float64 reference %g (diff %g > %g)", i, v, ref[i], d, tolerance(in, i, dt, op))
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d elements off", bad, n)
	}
}

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		ranks int
	}{{0, 3}, {1, 2}, {7, 3}, {8, 8}, {100, 3}, {1000003, 7}} {
		l := NewLayout(tc.n, tc.ranks)
		if l.Chunk%chunkAlign != 0 {
			t.Fatalf("%+v: chunk not aligned", l)
		}
		var total int64
		prev := int64(0)
		for c := 0; c < tc.ranks; c++ {
			lo, hi := l.Bounds(c)
			if lo != prev || hi < lo {
				t.Fatalf("%+v chunk %d: [%d,%d)", l, c, lo, hi)
			}
			total += hi - lo
			prev = hi
		}
		if total != tc.n {
			t.Fatalf("%+v covers %d", l, total)
		}
	}
	// Every rank's step chunks: reduce-scatter visits every chunk but its own
	// (rank r owns chunk r+1 at the end), all-gather every chunk but r+1.
	for ranks := 2; ranks <= 8; ranks++ {
		for r := 0; r < ranks; r++ {
			if c := rsChunk(r, ranks-2, ranks); NewLayout(1, ranks).Owner(c) != r {
				t.Fatalf("ranks %d: rank %d ends the reduce-scatter on chunk %d", ranks, r, c)
			}
			if agChunk(r, 0, ranks) != rsChunk((r-1+ranks)%ranks, ranks-2, ranks) {
				t.Fatalf("ranks %d rank %d: first all-gather chunk is not the previous rank's reduced chunk", ranks, r)
			}
		}
	}
}

func TestConversions(t *testing.T) {
	// Every float16 and bfloat16 value survives float32 and back.
	for h := 0; h < 1<<16; h++ {
		f := half.Float16ToFloat32(uint16(h))
		if f == f && half.Float32ToFloat16(f) != uint16(h) {
			t.Fatalf("float16 %#04x -> %g -> %#04x", h, f, half.Float32ToFloat16(f))
		}
	}
	if half.Float32ToFloat16(1+0x1p-11) != 0x3c00 || half.Float32ToFloat16(1+3*0x1p-11) != 0x3c02 {
		t.Fatal("float16 ties to even")
	}
	if half.Float32ToBFloat16(1+0x1p-8) != 0x3f80 || half.Float32ToBFloat16(1+3*0x1p-8) != 0x3f82 {
		t.Fatal("bfloat16 ties to even")
	}
}

// TestReduceCPU: the CPU ring against the float64 reference, for world sizes
// 1 to 8 and sizes not divisible by them, every dtype, sum and average.
func TestReduceCPU(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for ranks := 1; ranks <= 8; ranks++ {
		for _, n := range []int64{0, 1, 7, 8, 9, 100, 1023, 4099} {
			for _, dt := range dtypes {
				for _, op := range []Op{Sum, Avg} {
					in := randBufs(r, ranks, n, dt)
					got := cloneBufs(in)
					if err := ReduceCPU(got, n, dt, op); err != nil {
						t.Fatal(err)
					}
					checkResult(t, in, got, n, dt, op)
				}
			}
		}
	}
}

// TestReduceCPUOrder: float32 sums are exactly the ring's order for each
// chunk: x[c] + x[c+1] + ... + x[c-1], rounded after every addition.
func TestReduceCPUOrder(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for ranks := 2; ranks <= 8; ranks++ {
		n := int64(333)
		in := randBufs(r, ranks, n, Float32)
		got := cloneBufs(in)
		if err := ReduceCPU(got, n, Float32, Sum); err != nil {
			t.Fatal(err)
		}
		l := NewLayout(n, ranks)
		for c := 0; c < ranks; c++ {
			lo, hi := l.Bounds(c)
			for i := int(lo); i < int(hi); i++ {
				acc := Float32.load(in[c], i)
				for k := 1; k < ranks; k++ {
					acc += Float32.load(in[(c+k)%ranks], i)
				}
				if g := Float32.load(got[0], i); math.Float32bits(g) != math.Float32bits(acc) {
					t.Fatalf("ranks %d element %d (chunk %d): %g, ring order gives %g", ranks, i, c, g, acc)
				}
			}
		}
	}
}

func TestOrder(t *testing.T) {
	all := func(a, b int) bool { return true }
	if o := Order(4, all); o[0] != 0 || o[1] != 1 || o[3] != 3 {
		t.Fatal(o)
	}
	// 4 GPUs linked 0-2, 2-1, 1-3, 3-0 only.
	links := map[[2]int]bool{{0, 2}: true, {2, 1}: true, {1, 3}: true, {3, 0}: true}
	lk := func(a, b int) bool { return links[[2]int{a, b}] || links[[2]int{b, a}] }
	o := Order(4, lk)
	for i := range o {
		if !lk(o[i], o[(i+1)%4]) {
			t.Fatalf("order %v uses an unlinked pair", o)
		}
	}
	if o := Order(3, func(a, b int) bool { return false }); o[0] != 0 || o[1] != 1 || o[2] != 2 {
		t.Fatal(o)
	}
}

// TestPlan: pieces cover each chunk, rounds are balanced, small buckets use
// few blocks, and large ones push.
func TestPlan(t *testing.T) {
	g := &GPU{ranks: 2, sms: 132, perDev: 1, push: true}
	for _, size := range []int64{1 << 10, 1 << 20, 8 << 20, 16 << 20, 1 << 30, 1<<30 + 12} {
		p := g.Plan(size/4, Float32)
		if int64(p.Blocks)*int64(p.Rounds)*p.Piece < p.Chunk || p.Piece%chunkAlign != 0 || p.Blocks > 132 {
			t.Fatalf("size %d: %+v does not cover the chunk", size, p)
		}
		if int64(p.Blocks)*int64(p.Rounds-1)*p.Piece >= p.Chunk {
			t.Fatalf("size %d: %+v has an empty round", size, p)
		}
		if p.Push != (size >= DefaultPushMinBytes) {
			t.Fatalf("size %d: push %v", size, p.Push)
		}
		t.Logf("%d B: %d blocks x %d B x %d rounds, push %v", size, p.Blocks, p.Piece*4, p.Rounds, p.Push)
	}
	if p := g.Plan(8<<20/4, Float32); p.Rounds != 1 {
		t.Fatalf("8 MiB: %+v, want one round", p)
	}
}

func TestTopoRing(t *testing.T) {
	// 4 GPUs: NVLink 0-2, 2-1, 1-3, 3-0; all have peer access.
	nv := map[int][]int{0: {2, 3}, 1: {2, 3}, 2: {0, 1}, 3: {0, 1}}
	var si cudaext.SystemInfo
	for i := 0; i < 4; i++ {
		si.Devices = append(si.Devices, cudaext.DeviceInfo{Ordinal: i, NVLinkPeers: nv[i], PeerAccess: []int{0, 1, 2, 3}})
	}
	links := TopoRing(si)
	if len(links) != 4 {
		t.Fatal(links)
	}
	for _, l := range links {
		if l.Via != "NVLink" {
			t.Fatalf("%v: want every step over NVLink", links)
		}
	}
	// Two GPUs without peer access or NVLink: through host memory.
	si = cudaext.SystemInfo{Devices: []cudaext.DeviceInfo{{Ordinal: 0}, {Ordinal: 1}}}
	if l := TopoRing(si); len(l) != 2 || l[0].Via != "host (pinned memory)" || l[0].String() != "GPU 1 -> GPU 0: host (pinned memory)" {
		t.Fatal(l)
	}
}
