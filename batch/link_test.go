package batch

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/sampler"
)

func linkData(t *testing.T) *datasets.Data {
	t.Helper()
	d, err := datasets.Generate(datasets.GenOptions{Like: "citation2", Scale: 0.002, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if d.LinkSplits[datasets.SplitTrain] == nil {
		t.Fatal("citation2-like dataset without a train link split")
	}
	return d
}

// written samples pairs and returns every structure region as int64s (or
// float32s widened, for a float32 edge_label), by name.
func written(t *testing.T, m *Link, pairs []int64, key uint64) (map[string][]float64, *LinkBatch) {
	t.Helper()
	b := m.NewBatch().(*LinkBatch)
	if err := m.Sample(pairs, key, b); err != nil {
		t.Fatal(err)
	}
	var meta Meta
	b.Meta(&meta)
	l := m.Layout()
	got := map[string][]float64{}
	bufs := make([][]byte, len(l.Regions))
	b.WriteStructure(func(r int) []byte {
		bufs[r] = make([]byte, l.Regions[r].DataBytes(int(meta.Counts[r])))
		return bufs[r]
	}, 2)
	for r, reg := range l.Regions {
		if reg.Table != "" {
			if bufs[r] != nil {
				t.Fatalf("WriteStructure asked for gathered region %s", reg.Name)
			}
			continue
		}
		var v []float64
		if reg.DType == "float32" {
			f := make([]float32, len(bufs[r])/4)
			binary.Read(bytes.NewReader(bufs[r]), binary.LittleEndian, f)
			for _, x := range f {
				v = append(v, float64(x))
			}
		} else {
			f := make([]int64, len(bufs[r])/8)
			binary.Read(bytes.NewReader(bufs[r]), binary.LittleEndian, f)
			for _, x := range f {
				v = append(v, float64(x))
			}
		}
		got[reg.Name] = v
	}
	return got, b
}

func regionNames(l *Layout) []string {
	var names []string
	for _, r := range l.Regions {
		names = append(names, r.Name)
	}
	return names
}

// TestLinkBinary: edge_label_index maps back to the split's pairs through
// n_id, negatives are ceil(B × amount) uniform pairs labelled 0 after the
// positives labelled 1, the seed nodes are the unique ends in ascending
// order, and the same key gives the same bytes.
func TestLinkBinary(t *testing.T) {
	d := linkData(t)
	sp := d.LinkSplits[datasets.SplitTrain]
	n := d.Graph.NumNodes
	m, err := NewLink(d, sp, LinkOptions{Node: NodeOptions{BatchSize: 64, Fanouts: []int{5, 5}, Workers: 2, AddressOrder: true}, Neg: NegBinary, Amount: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	if names := regionNames(m.Layout()); !slices.Equal(names, []string{"x", "y", "n_id", "edge_index", "e_id", "input_id", "edge_label_index", "edge_label"}) {
		t.Fatalf("regions %v", names)
	}
	if r := m.Layout().Regions[m.Layout().Index("edge_label")]; r.DType != "float32" || m.MaxPairs != 64+96 {
		t.Fatalf("edge_label %+v, %d pairs at most", r, m.MaxPairs)
	}
	pairs := []int64{}
	for i := range int64(50) {
		pairs = append(pairs, (i*7919)%sp.Len())
	}
	got, b := written(t, m, pairs, 42)
	B, P := 50, 50+75 // ceil(50 × 1.5)
	nid, eli, lab := got["n_id"], got["edge_label_index"], got["edge_label"]
	if len(eli) != 2*P || len(lab) != P || len(got["input_id"]) != B {
		t.Fatalf("%d edge_label_index, %d labels, %d inputs", len(eli), len(lab), len(got["input_id"]))
	}
	for i, p := range pairs {
		if int64(nid[int(eli[i])]) != sp.Src[p] || int64(nid[int(eli[P+i])]) != sp.Dst[p] || lab[i] != 1 || int64(got["input_id"][i]) != p {
			t.Fatalf("positive %d (pair %d) does not map back", i, p)
		}
	}
	for i := B; i < P; i++ {
		s, t2 := nid[int(eli[i])], nid[int(eli[P+i])]
		if lab[i] != 0 || s < 0 || int64(s) >= n || t2 < 0 || int64(t2) >= n {
			t.Fatalf("negative %d: %v -> %v label %v", i, s, t2, lab[i])
		}
	}
	// The seed nodes: unique ends, ascending, first in n_id.
	seeds := slices.Clone(b.Ends)
	slices.Sort(seeds)
	seeds = slices.Compact(seeds)
	if b.S.NumSampledNodes[0] != len(seeds) || !slices.Equal(b.S.NID[:len(seeds)], seeds) {
		t.Fatalf("seed nodes are not the sorted unique ends")
	}
	again, _ := written(t, m, pairs, 42)
	other, _ := written(t, m, pairs, 43)
	if !slices.Equal(again["edge_label_index"], eli) || !slices.Equal(again["edge_index"], got["edge_index"]) {
		t.Fatal("the same key gave another batch")
	}
	if slices.Equal(other["n_id"], nid) {
		t.Fatal("another key gave the same negatives")
	}
}

// TestLinkTriplet: k negative destinations per positive, in local ids.
func TestLinkTriplet(t *testing.T) {
	d := linkData(t)
	sp := d.LinkSplits[datasets.SplitValid]
	m, err := NewLink(d, sp, LinkOptions{Node: NodeOptions{BatchSize: 16, Fanouts: []int{3}, Workers: 1}, Neg: NegTriplet, Amount: 3})
	if err != nil {
		t.Fatal(err)
	}
	if names := regionNames(m.Layout()); !slices.Equal(names, []string{"x", "y", "n_id", "edge_index", "e_id", "input_id", "src_index", "dst_pos_index", "dst_neg_index"}) {
		t.Fatalf("regions %v", names)
	}
	pairs := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	got, b := written(t, m, pairs, 7)
	nid := got["n_id"]
	if len(got["src_index"]) != 10 || len(got["dst_pos_index"]) != 10 || len(got["dst_neg_index"]) != 30 {
		t.Fatalf("triplet shapes %d %d %d", len(got["src_index"]), len(got["dst_pos_index"]), len(got["dst_neg_index"]))
	}
	for i, p := range pairs {
		if int64(nid[int(got["src_index"][i])]) != sp.Src[p] || int64(nid[int(got["dst_pos_index"][i])]) != sp.Dst[p] {
			t.Fatalf("triplet %d does not map back", i)
		}
		for j := range 3 {
			if int64(nid[int(got["dst_neg_index"][3*i+j])]) != b.Ends[20+3*i+j] {
				t.Fatalf("negative %d of %d", j, i)
			}
		}
	}
	if _, err := NewLink(d, sp, LinkOptions{Node: NodeOptions{BatchSize: 16, Fanouts: []int{3}}, Neg: NegTriplet, Amount: 1.5}); err == nil {
		t.Fatal("a fractional triplet amount was accepted")
	}
}

// TestLinkLabels: a split's own labels are int64, plus one under binary
// negative sampling when the smallest is 0 (PyG's rule); no negatives and
// no labels means no edge_label.
func TestLinkLabels(t *testing.T) {
	d := linkData(t)
	sp := *d.LinkSplits[datasets.SplitValid]
	m, err := NewLink(d, &sp, LinkOptions{Node: NodeOptions{BatchSize: 8, Fanouts: []int{2}}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Layout().Index("edge_label") >= 0 {
		t.Fatal("edge_label without labels or negatives")
	}
	sp.Label = make([]int32, sp.Len())
	for i := range sp.Label {
		sp.Label[i] = int32(i % 3)
	}
	for _, c := range []struct {
		neg   NegMode
		shift float64
		pairs int
	}{{NegNone, 0, 4}, {NegBinary, 1, 8}} {
		m, err := NewLink(d, &sp, LinkOptions{Node: NodeOptions{BatchSize: 8, Fanouts: []int{2}}, Neg: c.neg, Amount: 1})
		if err != nil {
			t.Fatal(err)
		}
		if r := m.Layout().Regions[m.Layout().Index("edge_label")]; r.DType != "int64" {
			t.Fatalf("labels of dtype %s", r.DType)
		}
		got, _ := written(t, m, []int64{0, 1, 2, 3}, 1)
		want := []float64{0 + c.shift, 1 + c.shift, 2 + c.shift, 0 + c.shift, 0, 0, 0, 0}[:c.pairs]
		if !slices.Equal(got["edge_label"], want) {
			t.Fatalf("%v: labels %v, want %v", c.neg, got["edge_label"], want)
		}
	}
}

// TestLinkNegativesUniform: over many batches the negatives fall evenly on
// every node (each count within 6 standard deviations of its mean).
func TestLinkNegativesUniform(t *testing.T) {
	d := linkData(t)
	sp := d.LinkSplits[datasets.SplitTrain]
	m, err := NewLink(d, sp, LinkOptions{Node: NodeOptions{BatchSize: 256, Fanouts: []int{0}, Workers: 1}, Neg: NegTriplet, Amount: 8})
	if err != nil {
		t.Fatal(err)
	}
	n := int(d.Graph.NumNodes)
	hist := make([]int, n)
	b := m.NewBatch().(*LinkBatch)
	pairs := make([]int64, 256)
	draws := 0
	for key := uint64(0); draws < 60*n; key++ {
		for i := range pairs {
			pairs[i] = (int64(key)*256 + int64(i)) % sp.Len()
		}
		if err := m.Sample(pairs, key, b); err != nil {
			t.Fatal(err)
		}
		for _, v := range b.Ends[512:] {
			hist[v]++
			draws++
		}
	}
	mean := float64(draws) / float64(n)
	sd := math.Sqrt(mean)
	for v, c := range hist {
		if math.Abs(float64(c)-mean) > 6*sd {
			t.Fatalf("node %d drawn %d times, mean %.1f", v, c, mean)
		}
	}
}

// TestLinkRanksCoverTheSplit: the ranks of an epoch, planned over the
// split's positions as the daemon does, see every pair once.
func TestLinkRanksCoverTheSplit(t *testing.T) {
	d := linkData(t)
	sp := d.LinkSplits[datasets.SplitValid]
	m, err := NewLink(d, sp, LinkOptions{Node: NodeOptions{BatchSize: 7, Fanouts: []int{1}, Workers: 1}, Neg: NegBinary, Amount: 1})
	if err != nil {
		t.Fatal(err)
	}
	pos := make([]int64, sp.Len())
	for i := range pos {
		pos[i] = int64(i)
	}
	world := 3
	seen := make([]int, sp.Len())
	for rank := range world {
		plan, err := sampler.NewPlan(pos, sampler.EpochConfig{BatchSize: 7, Shuffle: true, Seed: 9, Rank: rank, WorldSize: world, DropLast: true}, 2)
		if err != nil {
			t.Fatal(err)
		}
		for i := range plan.NumBatches() {
			got, _ := written(t, m, plan.Batch(i), plan.Key(i))
			for _, p := range got["input_id"] {
				seen[int(p)]++
			}
		}
	}
	// DropLast drops the tail that does not divide evenly, each rank its
	// short last batch: what is left is seen exactly once.
	total := 0
	for p, c := range seen {
		if c > 1 {
			t.Fatalf("pair %d seen %d times", p, c)
		}
		total += c
	}
	perRank := int(sp.Len()) / world
	if total != world*(perRank/7*7) {
		t.Fatalf("%d pairs seen, want %d", total, world*(perRank/7*7))
	}
}

// BenchmarkLinkSample: binary link batches of 1024 positives (2048 pairs)
// with fanouts 10, 5 on a citation2-like graph of 29,280 nodes.
func BenchmarkLinkSample(b *testing.B) {
	d, err := datasets.Generate(datasets.GenOptions{Like: "citation2", Scale: 0.01, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	sp := d.LinkSplits[datasets.SplitTrain]
	m, err := NewLink(d, sp, LinkOptions{Node: NodeOptions{BatchSize: 1024, Fanouts: []int{10, 5}, Workers: 1, AddressOrder: true}, Neg: NegBinary, Amount: 1})
	if err != nil {
		b.Fatal(err)
	}
	pairs := make([]int64, 1024)
	lb := m.NewBatch()
	b.ResetTimer()
	for i := range b.N {
		for j := range pairs {
			pairs[j] = int64((i*1024 + j*7919) % int(sp.Len()))
		}
		if err := m.Sample(pairs, uint64(i), lb); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(pairs))/b.Elapsed().Seconds(), "positives/s")
}
