package datasets

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func mustGenerate(t testing.TB, o GenOptions) *Data {
	t.Helper()
	d, err := Generate(o)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", o, err)
	}
	return d
}

func TestGenPresetShapes(t *testing.T) {
	for _, tc := range []struct {
		like  string
		scale float64
	}{
		{"papers100M", 1e-4}, {"PRODUCTS", 0.005}, {"arxiv", 0.05}, {"cora", 1}, {"cora", 0.01},
		// tiny: more classes than nodes; dense: degrees capped, rows
		// selected uniformly
		{"papers100M", 1e-9}, {"products", 1e-5}, {"arxiv", 2e-4},
	} {
		t.Run(fmt.Sprintf("%s-%g", tc.like, tc.scale), func(t *testing.T) {
			p, err := LookupPreset(tc.like)
			if err != nil {
				t.Fatal(err)
			}
			d := mustGenerate(t, GenOptions{Like: tc.like, Scale: tc.scale, Seed: 1})
			if err := d.Validate(); err != nil {
				t.Fatal(err)
			}
			sz := scaledSizes(p, tc.scale)
			round := func(x int64) int64 { return max(int64(math.Round(float64(x)*tc.scale)), 1) }
			if want := max(round(p.Nodes), minGenNodes); d.Graph.NumNodes != want || sz.nodes != want {
				t.Errorf("nodes = %d, want %d", d.Graph.NumNodes, want)
			}
			if d.Directed == p.Undirected {
				t.Errorf("Directed = %v for preset undirected = %v", d.Directed, p.Undirected)
			}
			e := d.Graph.NumEdges()
			if d.Directed {
				if want := min(round(p.Edges), sz.nodes*(sz.nodes-1)/2); e != want {
					t.Errorf("edges = %d, want %d", e, want)
				}
			} else if e > 2*sz.edges || e < sz.edges {
				t.Errorf("undirected edges = %d, want in [%d, %d]", e, sz.edges, 2*sz.edges)
			}
			if d.FeatureDim != p.FeatureDim || d.NumClasses != p.Classes || d.FeatureDType != Float32 {
				t.Errorf("dim %d classes %d dtype %s", d.FeatureDim, d.NumClasses, d.FeatureDType)
			}
			var sum int64
			for i, name := range SplitNames {
				got := int64(len(d.Splits[name]))
				want := []int64{sz.train, sz.valid, sz.test}[i]
				if got != want {
					t.Errorf("split %s has %d nodes, want %d", name, got, want)
				}
				sum += got
			}
			if p.Train+p.Valid+p.Test == p.Nodes && sum != sz.nodes {
				t.Errorf("splits cover %d of %d nodes", sum, sz.nodes)
			}
			if tc.scale >= 0.005 && tc.like != "cora" {
				if sz.train != round(p.Train) || sz.valid != round(p.Valid) {
					t.Errorf("train/valid %d/%d, want %d/%d", sz.train, sz.valid, round(p.Train), round(p.Valid))
				}
			}
			checkSimpleSortedRows(t, &d.Graph)
			checkSplitsDisjoint(t, d)
			if !strings.Contains(d.Source, "--like "+p.Name) {
				t.Errorf("Source = %q", d.Source)
			}
		})
	}
}

// TestGenWideIndices checks the 64-bit index path (used from 2^31 nodes, too
// big to test directly) against the 32-bit one on the same small graph.
func TestGenWideIndices(t *testing.T) {
	for _, like := range []string{"arxiv", "cora"} {
		p, _ := LookupPreset(like)
		g := &generator{preset: p, sz: scaledSizes(p, 0.02), seed: 9, workers: 3, prog: nopProgress{}}
		labels := g.classes()
		g32, err := buildGraph[int32](g, labels)
		if err != nil {
			t.Fatal(err)
		}
		g64, err := buildGraph[int64](g, labels)
		if err != nil {
			t.Fatal(err)
		}
		if g64.Indices32 != nil || g32.Indices64 != nil || !slices.Equal(g32.Indptr, g64.Indptr) {
			t.Fatalf("%s: index widths or indptr differ", like)
		}
		for i, v := range g32.Indices32 {
			if int64(v) != g64.Indices64[i] {
				t.Fatalf("%s: entry %d: %d (32-bit) vs %d (64-bit)", like, i, v, g64.Indices64[i])
			}
		}
	}
}

func checkSimpleSortedRows(t *testing.T, g *Graph) {
	t.Helper()
	for v := range g.NumNodes {
		for i := g.Indptr[v]; i < g.Indptr[v+1]; i++ {
			u := g.Neighbor(i)
			if u == v {
				t.Fatalf("self loop at node %d", v)
			}
			if i > g.Indptr[v] && u <= g.Neighbor(i-1) {
				t.Fatalf("row %d not strictly ascending at entry %d", v, i)
			}
		}
	}
}

func checkSplitsDisjoint(t *testing.T, d *Data) {
	t.Helper()
	seen := make([]bool, d.Graph.NumNodes)
	for _, name := range SplitNames {
		ids := d.Splits[name]
		if !slices.IsSorted(ids) {
			t.Errorf("split %s not sorted", name)
		}
		for _, v := range ids {
			if seen[v] {
				t.Fatalf("node %d in two splits (or twice)", v)
			}
			seen[v] = true
		}
	}
}

// genDigest hashes every array of d.
func genDigest(d *Data) string {
	h := sha256.New()
	w := func(x any) { binary.Write(h, binary.LittleEndian, x) }
	w(d.Graph.NumNodes)
	w(d.Graph.Indptr)
	w(d.Graph.Indices32)
	w(d.Graph.Indices64)
	w(d.Labels)
	for _, name := range SplitNames {
		w(d.Splits[name])
	}
	h.Write(d.Features)
	fmt.Fprint(h, d.Name, d.Directed, d.FeatureDim, d.FeatureDType, d.NumClasses, d.Source)
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestGenDeterministic(t *testing.T) {
	for _, o := range []GenOptions{
		{Like: "arxiv", Scale: 0.03, Seed: 7},
		{Like: "products", Scale: 0.003, Seed: 7}, // undirected
		{Like: "cora", Scale: 0.01, Seed: 7, FeatureDType: Float16},
	} {
		var want string
		for _, w := range []int{1, 2, 7} {
			o.Workers = w
			got := genDigest(mustGenerate(t, o))
			if want == "" {
				want = got
			} else if got != want {
				t.Errorf("%s: Workers %d gives different bytes", o.Like, w)
			}
		}
		for _, procs := range []int{1, 2} {
			old := runtime.GOMAXPROCS(procs)
			o.Workers = 0
			got := genDigest(mustGenerate(t, o))
			runtime.GOMAXPROCS(old)
			if got != want {
				t.Errorf("%s: GOMAXPROCS %d gives different bytes", o.Like, procs)
			}
		}
		o.Seed++
		if genDigest(mustGenerate(t, o)) == want {
			t.Errorf("%s: seeds %d and %d give the same bytes", o.Like, o.Seed-1, o.Seed)
		}
	}
}

// TestGenGolden pins the bytes: a change of algorithm or constants shows up
// here (and must be deliberate: it changes every generated dataset).
func TestGenGolden(t *testing.T) {
	d := mustGenerate(t, GenOptions{Like: "cora", Scale: 0.1, Seed: 1})
	got := genDigest(d)[:16]
	const want = "75de08fa544f320f"
	if got != want {
		t.Errorf("digest %s, want %s", got, want)
	}
}

type genStats struct {
	meanIn, maxIn      float64
	sameClass, chance  float64
	maxOut             int64
	zeroIn, zeroDegree int64
}

func graphStats(d *Data) genStats {
	g := &d.Graph
	n := g.NumNodes
	in := make([]int64, n)
	var same int64
	var s genStats
	for v := range n {
		s.maxOut = max(s.maxOut, g.Degree(v))
		for i := g.Indptr[v]; i < g.Indptr[v+1]; i++ {
			u := g.Neighbor(i)
			in[u]++
			if d.Labels[u] == d.Labels[v] {
				same++
			}
		}
	}
	for v, k := range in {
		s.maxIn = max(s.maxIn, float64(k))
		if k == 0 {
			s.zeroIn++
			if g.Degree(int64(v)) == 0 {
				s.zeroDegree++
			}
		}
	}
	s.meanIn = float64(g.NumEdges()) / float64(n)
	s.sameClass = float64(same) / float64(g.NumEdges())
	cnt := make([]float64, d.NumClasses)
	for _, y := range d.Labels {
		cnt[y]++
	}
	for _, c := range cnt {
		s.chance += (c / float64(n)) * (c / float64(n))
	}
	return s
}

func TestGenStructure(t *testing.T) {
	for _, o := range []GenOptions{
		{Like: "arxiv", Scale: 0.1, Seed: 3, NoFeatures: true},
		{Like: "papers100M", Scale: 2e-4, Seed: 3, NoFeatures: true},
		{Like: "products", Scale: 0.01, Seed: 3, NoFeatures: true},
	} {
		d := mustGenerate(t, o)
		if err := d.Graph.Validate(); err != nil {
			t.Fatal(err)
		}
		if d.Features != nil {
			t.Errorf("NoFeatures: got %d feature bytes", len(d.Features))
		}
		s := graphStats(d)
		t.Logf("%s scale %g: %d nodes, %d edges; in-degree mean %.1f max %.0f (%.0fx); max out-degree %d; same-class edges %.3f vs chance %.3f (%.1fx); nodes without in-edges %d, isolated %d",
			o.Like, o.Scale, d.Graph.NumNodes, d.Graph.NumEdges(), s.meanIn, s.maxIn, s.maxIn/s.meanIn, s.maxOut,
			s.sameClass, s.chance, s.sameClass/s.chance, s.zeroIn, s.zeroDegree)
		if s.maxIn < 20*s.meanIn {
			t.Errorf("max in-degree %.0f < 20x mean %.1f: not heavy-tailed", s.maxIn, s.meanIn)
		}
		if s.sameClass < 3*s.chance {
			t.Errorf("same-class edge fraction %.3f < 3x chance %.3f", s.sameClass, s.chance)
		}
		checkSimpleSortedRows(t, &d.Graph)
		checkSplitsDisjoint(t, d)
	}
}

func TestGenOptionsErrors(t *testing.T) {
	for _, o := range []GenOptions{
		{Like: "nope", Scale: 1},
		{Like: "cora", Scale: 0},
		{Like: "cora", Scale: math.NaN()},
		{Like: "cora", Scale: math.Inf(1)},
		{Like: "cora", Scale: 1, FeatureDType: "int8"},
		{Like: "cora", Scale: 1, AllocFeatures: func(n int64) ([]byte, error) { return make([]byte, n-1), nil }},
		{Like: "cora", Scale: 1, AllocFeatures: func(n int64) ([]byte, error) { return nil, fmt.Errorf("no huge pages") }},
	} {
		if _, err := Generate(o); err == nil {
			t.Errorf("Generate(%+v) succeeded", o)
		}
	}
}

func TestGenOptionsHonoured(t *testing.T) {
	yes, no := true, false
	d := mustGenerate(t, GenOptions{Like: "arxiv", Scale: 0.01, Seed: 1, Undirected: &yes})
	if d.Directed {
		t.Error("Undirected: true gave a directed graph")
	}
	checkSymmetric(t, &d.Graph)
	d = mustGenerate(t, GenOptions{Like: "products", Scale: 0.001, Seed: 1, Undirected: &no})
	if !d.Directed {
		t.Error("Undirected: false gave an undirected graph")
	}
	var allocated int64
	d = mustGenerate(t, GenOptions{Like: "cora", Scale: 0.1, Seed: 1, AllocFeatures: func(n int64) ([]byte, error) {
		allocated = n
		b := make([]byte, n)
		for i := range b {
			b[i] = 0xAA // garbage: every byte must be overwritten
		}
		return b, nil
	}})
	if allocated != int64(len(d.Features)) {
		t.Errorf("AllocFeatures asked for %d bytes, features have %d", allocated, len(d.Features))
	}
	if genDigest(d) != genDigest(mustGenerate(t, GenOptions{Like: "cora", Scale: 0.1, Seed: 1})) {
		t.Error("AllocFeatures changed the bytes")
	}
	var stages []string
	var mu sync.Mutex
	var done int64
	mustGenerate(t, GenOptions{Like: "products", Scale: 0.002, Seed: 1, Progress: progressFunc{
		begin: func(s string, total int64) { stages = append(stages, fmt.Sprintf("%s:%d", s, total)); done = 0 },
		add:   func(n int64) { mu.Lock(); done += n; mu.Unlock() },
	}})
	if len(stages) != 4 || !strings.HasPrefix(stages[3], "features") {
		t.Errorf("stages %v", stages)
	}
	if want, _ := strconv.ParseInt(stages[3][strings.IndexByte(stages[3], ':')+1:], 10, 64); done != want {
		t.Errorf("features progress %d of %d", done, want)
	}
}

func TestParallelSortInt64(t *testing.T) {
	for _, n := range []int{0, 1, 1000, 1 << 17, 3<<17 + 5} {
		for _, w := range []int{1, 2, 3, 5, 8} {
			s := make([]int64, n)
			rng := wyrand(uint64(n*10 + w))
			for i := range s {
				s[i] = int64(rng.next() % uint64(n+1))
			}
			want := slices.Clone(s)
			slices.Sort(want)
			parallelSortInt64(s, w)
			if !slices.Equal(s, want) {
				t.Fatalf("n=%d workers=%d: not sorted like slices.Sort", n, w)
			}
		}
	}
}

func TestFeistelPermutes(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 4, 5, 17, 1000, 1 << 12, 1<<12 + 1, 12345} {
		f := newFeistel(n, uint64(n))
		seen := make([]bool, n)
		var fixed uint64
		for i := range n {
			v := f.at(i)
			if v >= n || seen[v] {
				t.Fatalf("n=%d: at(%d) = %d repeats or is out of range", n, i, v)
			}
			seen[v] = true
			if v == i {
				fixed++
			}
		}
		if n >= 1000 && fixed > 10 {
			t.Errorf("n=%d: %d fixed points: hardly a random permutation", n, fixed)
		}
	}
}

func TestGenScaledSizesAtScale1(t *testing.T) {
	for _, p := range Presets() {
		got := scaledSizes(p, 1)
		want := genSizes{p.Nodes, p.Edges, p.Train, p.Valid, p.Test}
		if got != want {
			t.Errorf("%s at scale 1: %+v, want %+v", p.Name, got, want)
		}
	}
	p, _ := LookupPreset("papers100M")
	if got := scaledSizes(p, 0.5); got != (genSizes{55_529_978, 807_842_936, 603_590, 62_633, 107_169}) {
		t.Errorf("papers100M at scale 0.5: %+v", got)
	}
}

func TestPresets(t *testing.T) {
	ps := Presets()
	ps[0].Nodes = 1
	if Presets()[0].Nodes == 1 {
		t.Error("Presets returns the package's own slice")
	}
	for _, p := range Presets() {
		if p.Train+p.Valid+p.Test > p.Nodes || p.Edges <= 0 || p.FeatureDim <= 0 || p.Classes <= 1 {
			t.Errorf("preset %+v inconsistent", p)
		}
	}
}
