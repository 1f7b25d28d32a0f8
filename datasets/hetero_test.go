package datasets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestHeteroRoundTrip(t *testing.T) {
	h, err := GenerateHetero(GenOptions{Like: "mag", Scale: 0.001, Seed: 2, Time: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mag")
	if err := WriteHetero(context.Background(), dir, h, nil); err != nil {
		t.Fatal(err)
	}
	// Open refuses it without AllowHetero, clearly.
	if _, err := Open(dir, nil); !errors.Is(err, ErrHetero) || !strings.Contains(err.Error(), "author__writes__paper") {
		t.Fatalf("got %v", err)
	}
	ds, err := Open(dir, &OpenOptions{AllowHetero: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Manifest.FormatVersion != FormatVersionHetero || len(ds.Hetero.NodeTypes) != 4 || len(ds.Hetero.Relations) != 4 {
		t.Fatalf("manifest v%d, %d node types", ds.Manifest.FormatVersion, len(ds.Hetero.NodeTypes))
	}
	for i, want := range h.NodeTypes {
		got := ds.Hetero.NodeTypes[i]
		if got.Name != want.Name || got.NumNodes != want.NumNodes || !slices.Equal(got.Features, want.Features) ||
			!slices.Equal(got.Labels, want.Labels) || !slices.Equal(got.Time, want.Time) || len(got.Splits) != len(want.Splits) {
			t.Fatalf("node type %s differs", want.Name)
		}
	}
	for i, want := range h.Relations {
		got := ds.Hetero.Relations[i]
		if got.EdgeType != want.EdgeType || !slices.Equal(got.Graph.Indptr, want.Graph.Indptr) || !slices.Equal(got.Graph.Indices32, want.Graph.Indices32) ||
			got.Graph.NumSrcNodes != want.Graph.NumSrcNodes {
			t.Fatalf("relation %s differs", want.EdgeType)
		}
	}
	if _, err := Verify(dir, 2, nil); err != nil {
		t.Fatal(err)
	}
}

// TestGenMagLearnable: paper venues are predicted far better from the
// neighbourhood (authors, citations, topics) than from the paper alone.
func TestGenMagLearnable(t *testing.T) {
	start := time.Now()
	h, err := GenerateHetero(GenOptions{Like: "mag", Scale: 0.02, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	u, err := h.ToUndirected(2)
	if err != nil {
		t.Fatal(err)
	}
	paper := u.NodeType("paper")
	dim := int64(paper.FeatureDim)
	x := func(nt *NodeType) []float32 {
		d := &Data{Features: nt.Features, FeatureDType: Float32}
		return float32Features(d)
	}
	px := x(paper)
	agg := slices.Clone(px)
	cnt := make([]float64, paper.NumNodes)
	for i := range cnt {
		cnt[i] = 1
	}
	sum := make([]float64, len(px))
	for i, v := range px {
		sum[i] = float64(v)
	}
	for _, r := range u.Relations {
		if r.Dst != "paper" {
			continue
		}
		sx := x(u.NodeType(r.Src))
		for v := int64(0); v < paper.NumNodes; v++ {
			for p := r.Graph.Indptr[v]; p < r.Graph.Indptr[v+1]; p++ {
				s := r.Graph.Neighbor(p)
				cnt[v]++
				for j := range dim {
					sum[v*dim+j] += float64(sx[s*dim+j])
				}
			}
		}
	}
	for i := range agg {
		agg[i] = float32(sum[i] / cnt[int64(i)/dim])
	}
	d := &Data{NumClasses: paper.NumClasses, Labels: paper.Labels, Splits: paper.Splits}
	raw := nearestCentroidAccuracy(px, int(dim), d)
	hop := nearestCentroidAccuracy(agg, int(dim), d)
	var sizes []string
	for _, nt := range h.NodeTypes {
		sizes = append(sizes, nt.Name+" "+strconv.FormatInt(nt.NumNodes, 10))
	}
	for _, r := range h.Relations {
		sizes = append(sizes, r.EdgeType.String()+" "+strconv.FormatInt(r.Graph.NumEdges(), 10))
	}
	t.Logf("mag scale 0.02 in %s: %s; reverse relations %d; paper venue by nearest centroid: features %.3f, 1-hop means over all relations %.3f (chance %.4f)",
		el.Round(time.Millisecond), strings.Join(sizes, ", "), len(u.Relations)-len(h.Relations), raw, hop, 1/float64(paper.NumClasses))
	if hop < raw+0.2 || hop < 0.5 {
		t.Errorf("venue not learnable from neighbours: %.3f vs %.3f", hop, raw)
	}
	if len(u.Relations) != 7 || u.Relation(EdgeType{"paper", "rev_writes", "author"}) == nil {
		t.Fatalf("ToUndirected: %d relations", len(u.Relations))
	}
	rev := u.Relation(EdgeType{"paper", "rev_writes", "author"})
	if rev.Graph.NumNodes != h.NodeType("author").NumNodes || rev.Graph.NumEdges() != h.Relation(EdgeType{"author", "writes", "paper"}).Graph.NumEdges() {
		t.Fatal("rev_writes is not the transpose of writes")
	}
}

// writeOGBHetero writes h in OGB's heterogeneous raw layout (edges in a
// shuffled order), features as text.
func writeOGBHetero(t *testing.T, dir string, h *Hetero) {
	t.Helper()
	var names, counts, trip []string
	for _, nt := range h.NodeTypes {
		names, counts = append(names, nt.Name), append(counts, strconv.FormatInt(nt.NumNodes, 10))
		x := float32Features(&Data{Features: nt.Features})
		var sb strings.Builder
		for v := int64(0); v < nt.NumNodes; v++ {
			for j := 0; j < nt.FeatureDim; j++ {
				if j > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(strconv.FormatFloat(float64(x[v*int64(nt.FeatureDim)+int64(j)]), 'g', -1, 32))
			}
			sb.WriteByte('\n')
		}
		p := filepath.Join(dir, "raw", "node-feat", nt.Name)
		os.MkdirAll(p, 0o755)
		impWriteGz(t, filepath.Join(p, "node-feat.csv.gz"), sb.String())
		if nt.Labels != nil {
			sb.Reset()
			for _, y := range nt.Labels {
				fmt.Fprintf(&sb, "%d\n", y)
			}
			p := filepath.Join(dir, "raw", "node-label", nt.Name)
			os.MkdirAll(p, 0o755)
			impWriteGz(t, filepath.Join(p, "node-label.csv.gz"), sb.String())
			for s, ids := range nt.Splits {
				sb.Reset()
				for _, v := range ids {
					fmt.Fprintf(&sb, "%d\n", v)
				}
				p := filepath.Join(dir, "split", "time", nt.Name)
				os.MkdirAll(p, 0o755)
				impWriteGz(t, filepath.Join(p, s+".csv.gz"), sb.String())
			}
		}
	}
	impWriteGz(t, filepath.Join(dir, "raw", "num-node-dict.csv.gz"), strings.Join(names, ",")+"\n"+strings.Join(counts, ",")+"\n")
	for _, r := range h.Relations {
		trip = append(trip, r.Src+","+r.Rel+","+r.Dst)
		var lines []string
		for v := int64(0); v < r.Graph.NumNodes; v++ {
			for p := r.Graph.Indptr[v]; p < r.Graph.Indptr[v+1]; p++ {
				lines = append(lines, fmt.Sprintf("%d,%d", r.Graph.Neighbor(p), v))
			}
		}
		slices.Reverse(lines)
		p := filepath.Join(dir, "raw", "relations", r.Src+"___"+r.Rel+"___"+r.Dst)
		os.MkdirAll(p, 0o755)
		impWriteGz(t, filepath.Join(p, "edge.csv.gz"), strings.Join(lines, "\n")+"\n")
	}
	impWriteGz(t, filepath.Join(dir, "raw", "triplet-type-list.csv.gz"), strings.Join(trip, "\n")+"\n")
}

func TestImportOGBHetero(t *testing.T) {
	h, err := GenerateHetero(GenOptions{Like: "mag", Scale: 0.0005, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ogbn_mag")
	writeOGBHetero(t, dir, h)
	got, err := ImportOGBHetero(dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range h.NodeTypes {
		g := got.NodeTypes[i]
		if g.Name != want.Name || g.NumNodes != want.NumNodes || !slices.Equal(g.Features, want.Features) || !slices.Equal(g.Labels, want.Labels) ||
			g.NumClasses != want.NumClasses || !slices.Equal(g.Splits[SplitTest], want.Splits[SplitTest]) {
			t.Fatalf("node type %s differs", want.Name)
		}
	}
	for i, want := range h.Relations {
		g := got.Relations[i]
		if g.EdgeType != want.EdgeType || !slices.Equal(g.Graph.Indptr, want.Graph.Indptr) || !slices.Equal(g.Graph.Indices32, want.Graph.Indices32) {
			t.Fatalf("relation %s differs", want.EdgeType)
		}
	}
	u, err := ImportOGBHetero(dir, ImportOptions{Undirected: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Relations) != 7 {
		t.Fatalf("undirected: %d relations", len(u.Relations))
	}
	if err := WriteHetero(context.Background(), filepath.Join(t.TempDir(), "out"), u, nil); err != nil {
		t.Fatal(err)
	}
}

// TestGenMagUndirected: gen --like mag --undirected true gives the reverse
// relations (PyG's ToUndirected); the default stays one-way as ogbn-mag.
func TestGenMagUndirected(t *testing.T) {
	yes := true
	h, err := GenerateHetero(GenOptions{Like: "mag", Scale: 0.001, Seed: 2, Undirected: &yes})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := GenerateHetero(GenOptions{Like: "mag", Scale: 0.001, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Relations) != 4 || len(h.Relations) != 7 {
		t.Fatalf("%d relations one-way, %d undirected; want 4 and 7", len(plain.Relations), len(h.Relations))
	}
	w, rev := h.Relation(EdgeType{"author", "writes", "paper"}), h.Relation(EdgeType{"paper", "rev_writes", "author"})
	if w == nil || rev == nil || w.Graph.NumEdges() != rev.Graph.NumEdges() {
		t.Fatalf("writes %v, rev_writes %v", w != nil, rev != nil)
	}
}

// TestHeteroOpenAllocFeatures: a heterogeneous dataset's node features go
// into the caller's memory (OpenOptions.AllocFeatures, as the GPU path
// pins them), one allocation a node type with features, rows on a
// FeatureAlign boundary, left to the caller after Close; a failed Open
// gives every allocation back.
func TestHeteroOpenAllocFeatures(t *testing.T) {
	h, err := GenerateHetero(GenOptions{Like: "mag", Scale: 0.001, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mag")
	if err := WriteHetero(context.Background(), dir, h, nil); err != nil {
		t.Fatal(err)
	}
	rec := &recordingAlloc{}
	opts := &OpenOptions{AllowHetero: true, AllocFeatures: rec.alloc, FreeFeatures: rec.free}
	ds, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	withFeatures := 0
	for i, want := range h.NodeTypes {
		got := ds.Hetero.NodeTypes[i]
		if !slices.Equal(got.Features, want.Features) {
			t.Fatalf("node type %s: features differ", want.Name)
		}
		if len(got.Features) == 0 {
			continue
		}
		withFeatures++
		p := uintptrOf(&got.Features[0])
		inside := false
		for _, mem := range rec.allocated {
			if p >= uintptrOf(&mem[0]) && p+uintptr(len(got.Features)) <= uintptrOf(&mem[0])+uintptr(len(mem)) {
				inside = true
			}
		}
		if !inside || p%FeatureAlign != 0 {
			t.Fatalf("node type %s: features at %#x, not on a FeatureAlign boundary inside an allocation", want.Name, p)
		}
	}
	if withFeatures == 0 || len(rec.allocated) != withFeatures {
		t.Fatalf("%d allocations for %d node types with features", len(rec.allocated), withFeatures)
	}
	ds.Close()
	if len(rec.freed) != 0 {
		t.Fatal("Close freed the caller's memory")
	}
	for _, mem := range rec.allocated {
		freeAnon(mem)
	}

	// A manifest (with its checksum fixed up) that claims a node type's
	// features are 1 TiB: refused before anything that size is asked for.
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	for i := range m.Files {
		if strings.HasSuffix(m.Files[i].Role, ":features") {
			m.Files[i].Bytes = 1 << 40
			break
		}
	}
	rewriteManifest(t, dir, m)
	rec.allocated, rec.freed = nil, nil
	if _, err := Open(dir, opts); err == nil {
		t.Fatal("a manifest claiming 1 TiB of features was opened")
	}
	for _, mem := range rec.allocated {
		if len(mem) >= 1<<40 {
			t.Fatalf("asked the allocator for %d bytes", len(mem))
		}
	}
	if len(rec.freed) != len(rec.allocated) {
		t.Fatalf("%d allocated, %d freed", len(rec.allocated), len(rec.freed))
	}
	writeRawManifest(t, dir, good)

	// A corrupt file: every allocation is given back.
	f := m.Files[len(m.Files)-1]
	p := filepath.Join(dir, f.Name)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o644)
	rec.allocated, rec.freed = nil, nil
	if _, err := Open(dir, opts); err == nil {
		t.Fatal("a corrupt file was opened")
	}
	if len(rec.allocated) == 0 || len(rec.freed) != len(rec.allocated) {
		t.Fatalf("%d allocated, %d freed", len(rec.allocated), len(rec.freed))
	}
}
