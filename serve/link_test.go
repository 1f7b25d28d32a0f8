package serve

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
)

// TestLinkSplit: "link:train:binary:1" serves every pair of the train link
// split once per epoch, its ends at edge_label_index through n_id, with as
// many negatives; an unknown link split and a bad negative sampling are
// refused (link batches on CUDA slots: TestCUDALinkBatchesMatchCPU).
func TestLinkSplit(t *testing.T) {
	d, err := datasets.Generate(datasets.GenOptions{Like: "citation2", Scale: 0.001, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "citation2")
	if err := datasets.Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	src, err := OpenSource(dir, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sp := src.Data.LinkSplits[datasets.SplitValid]
	srv := serveSource(t, src, Config{Slots: 2})
	c := dial(t, srv)
	o := openReq()
	o.Split, o.BatchSize, o.Fanouts = "link:valid:binary:1", 16, []int32{3, 2}
	opened := c.handshake(o)
	for _, name := range []string{"n_id", "edge_index", "input_id", "edge_label_index", "edge_label"} {
		if opened.Region(name) == nil {
			t.Fatalf("regions %v lack %s", opened.Regions, name)
		}
	}
	c.send(&ipc.StartEpoch{Epoch: 0})
	seen := make([]int, sp.Len())
	for {
		m := c.recv()
		if _, ok := m.(*ipc.EpochEnd); ok {
			break
		}
		b := m.(*ipc.BatchReady)
		nodes, _ := opened.Count(b, "n_id")
		B, _ := opened.Count(b, "input_id")
		P, _ := opened.Count(b, "edge_label_index")
		if P != 2*B {
			t.Fatalf("%d pairs for %d positives", P, B)
		}
		nid := c.region(b.Slot, "n_id", 8*int(nodes))
		in := c.region(b.Slot, "input_id", 8*int(B))
		eli := c.region(b.Slot, "edge_label_index", 16*int(P))
		for i := range int(B) {
			p := i64(in, i)
			seen[p]++
			if i64(nid, int(i64(eli, i))) != sp.Src[p] || i64(nid, int(i64(eli, int(P)+i))) != sp.Dst[p] {
				t.Fatalf("positive %d (pair %d) does not map back through n_id", i, p)
			}
		}
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	if slices.ContainsFunc(seen, func(n int) bool { return n != 1 }) {
		t.Fatalf("pairs seen %v times, want once each", seen)
	}

	for _, bad := range []struct {
		split, device string
		code          ipc.Code
		text          string
	}{
		{"link:nope", "cpu", ipc.CodeNotFound, "no link split"},
		{"link:valid:triplet:1.5", "cpu", ipc.CodeBadRequest, "integer"},
		{"link:valid:ternary:1", "cpu", ipc.CodeBadRequest, "binary or triplet"},
		{"link:custom", "cpu", ipc.CodeBadRequest, "Seeds message"},
		// Hostile amounts: refused before anything is sized from them.
		{"link:valid:binary:NaN", "cpu", ipc.CodeBadRequest, "amount"},
		{"link:valid:binary:Inf", "cpu", ipc.CodeBadRequest, "amount"},
		{"link:valid:binary:1e300", "cpu", ipc.CodeBadRequest, "amount"},
		{"link:valid:binary:-1", "cpu", ipc.CodeBadRequest, "amount"},
		{"link:valid:triplet:1048577", "cpu", ipc.CodeBadRequest, "integer"},
		{"link:valid:binary:1:extra", "cpu", ipc.CodeBadRequest, "want link:"},
	} {
		c := dial(t, srv)
		c.send(&ipc.Hello{Version: ipc.Version, Name: "link test"})
		c.recv()
		o := openReq()
		o.Split, o.Device = bad.split, bad.device
		c.send(&o)
		c.expectError(bad.code, bad.text)
	}
}

// TestLinkCustomPairs: "link:custom:triplet:2" over the pairs of a Seeds
// message (sources, then destinations).
func TestLinkCustomPairs(t *testing.T) {
	srv, src := testServer(t, Config{})
	n := src.Data.Graph.NumNodes
	ids := []int64{1, 2, 3, n - 1, 10, 20, 30, 0}
	c := dial(t, srv)
	c.hello()
	c.sendSeeds(uint64(len(ids)), seedsFD(t, ids, -1))
	o := openReq()
	o.Split, o.Shuffle, o.BatchSize = "link:custom:triplet:2", false, 3
	c.send(&o)
	opened, ok := c.recv().(*ipc.Opened)
	if !ok || opened.NumBatches != 2 {
		t.Fatalf("Opened %+v", opened)
	}
	c.opened = opened
	var pos []int64
	c.eachBatch(0, func(b *ipc.BatchReady) {
		B, nid, in := c.linkInputs(b)
		si, di := c.region(b.Slot, "src_index", 8*B), c.region(b.Slot, "dst_pos_index", 8*B)
		neg := c.region(b.Slot, "dst_neg_index", 16*B)
		nodes := len(nid) / 8
		for i := range B {
			p := i64(in, i)
			pos = append(pos, p)
			if i64(nid, int(i64(si, i))) != ids[p] || i64(nid, int(i64(di, i))) != ids[4+p] {
				t.Fatalf("triplet %d does not map back", p)
			}
			for j := range 2 {
				if v := i64(neg, 2*i+j); v < 0 || v >= int64(nodes) {
					t.Fatalf("dst_neg_index %d outside the batch's %d nodes", v, nodes)
				}
			}
		}
	})
	if !slices.Equal(pos, []int64{0, 1, 2, 3}) {
		t.Fatalf("served pairs %v", pos)
	}
}

// TestLinkCustomMorePairsThanEdges: an evaluation set of link:custom pairs
// may outnumber the graph's nodes and edges together (many negatives a
// source); the memory budget bounds it, not the graph's size.
func TestLinkCustomMorePairsThanEdges(t *testing.T) {
	srv, src := testServer(t, Config{})
	n, e := src.Data.Graph.NumNodes, src.Data.Graph.NumEdges()
	pairs := int(max(n, 2*e)) + 7 // as many ids as twice that: far past the old count limit
	ids := make([]int64, 2*pairs)
	for i := range pairs {
		ids[i], ids[pairs+i] = int64(i)%n, int64(7*i+3)%n
	}
	c := dial(t, srv)
	c.hello()
	c.sendSeeds(uint64(len(ids)), seedsFD(t, ids, -1))
	o := openReq()
	o.Split, o.Shuffle, o.BatchSize, o.Fanouts = "link:custom", false, 4096, []int32{2}
	c.send(&o)
	opened, ok := c.recv().(*ipc.Opened)
	if want := (pairs + 4095) / 4096; !ok || int(opened.NumBatches) != want {
		t.Fatalf("Opened %+v, want %d batches for %d pairs", opened, want, pairs)
	}
	c.opened = opened
	next := int64(0)
	c.eachBatch(0, func(b *ipc.BatchReady) {
		B, nid, in := c.linkInputs(b)
		if P, _ := opened.Count(b, "edge_label_index"); int(P) != B {
			t.Fatalf("%d pairs in edge_label_index for %d inputs", P, B)
		}
		// [2, B], packed: the sources' indices into n_id, then the destinations'.
		eli := c.region(b.Slot, "edge_label_index", 16*B)
		for i := range B {
			p := i64(in, i)
			if p != next {
				t.Fatalf("pair %d served where %d was next", p, next)
			}
			next++
			if i64(nid, int(i64(eli, i))) != ids[p] || i64(nid, int(i64(eli, B+i))) != ids[int64(pairs)+p] {
				t.Fatalf("pair %d does not map back", p)
			}
		}
	})
	if next != int64(pairs) {
		t.Fatalf("served %d pairs of %d", next, pairs)
	}
}
