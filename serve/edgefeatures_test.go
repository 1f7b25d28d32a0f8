package serve

// Edge features (edge_attr, edge_weight) in node batches: rows of e_id.

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
)

// edgeData writes a small dataset with int64 edge_attr (3 columns), edge
// weights and link splits, and returns it and its directory.
func edgeData(t *testing.T) (*datasets.Data, string) {
	t.Helper()
	d, err := datasets.Generate(datasets.GenOptions{Like: "cora", Scale: 0.3, Seed: 5, EdgeDim: 3, EdgeDType: datasets.Int64, EdgeWeights: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cora-edges")
	if err := datasets.Write(dir, d, nil); err != nil {
		t.Fatal(err)
	}
	return d, dir
}

// edgeDataset is edgeData's directory.
func edgeDataset(t *testing.T) string {
	t.Helper()
	_, dir := edgeData(t)
	return dir
}

// TestEdgeFeaturesFollowEID: a dataset with edge_attr (int64, 3 columns)
// and edge_weight serves both on the CPU path, row j of each being edge
// e_id[j]'s; a dataset without them has neither region.
func TestEdgeFeaturesFollowEID(t *testing.T) {
	d, dir := edgeData(t)
	src, err := OpenSource(dir, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveSource(t, src, Config{Slots: 2})
	c := dial(t, srv)
	o := c.handshake(openReq())
	ea, ew := o.Region("edge_attr"), o.Region("edge_weight")
	if ea == nil || ew == nil {
		t.Fatalf("regions %v lack edge_attr or edge_weight", o.Regions)
	}
	if ea.DType != "int64" || len(ea.Shape) != 2 || ea.Shape[1] != 3 || ew.DType != "float32" {
		t.Fatalf("edge_attr %+v, edge_weight %+v", *ea, *ew)
	}
	rb := d.EdgeRowBytes()
	c.send(&ipc.StartEpoch{Epoch: 0})
	checked := 0
	for checked < 3 {
		b, ok := c.recv().(*ipc.BatchReady)
		if !ok {
			break
		}
		checkBatch(t, c, src, b)
		_, e, _, _ := c.sizes(b)
		if n, _ := o.Count(b, "edge_attr"); int(n) != e {
			t.Fatalf("edge_attr counts %d rows for %d edges", n, e)
		}
		eid := c.region(b.Slot, "e_id", 8*e)
		attr := c.region(b.Slot, "edge_attr", rb*e)
		w := c.region(b.Slot, "edge_weight", 4*e)
		for j := 0; j < e; j++ {
			id := i64(eid, j)
			if !bytes.Equal(attr[j*rb:(j+1)*rb], d.EdgeAttr[id*int64(rb):(id+1)*int64(rb)]) {
				t.Fatalf("edge_attr row %d is not edge %d's", j, id)
			}
			if got := math.Float32frombits(binary.LittleEndian.Uint32(w[4*j:])); got != d.EdgeWeight[id] {
				t.Fatalf("edge_weight[%d] = %g, want edge %d's %g", j, got, id, d.EdgeWeight[id])
			}
		}
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
		checked++
	}
	if checked < 3 {
		t.Fatalf("only %d batches", checked)
	}

	// Without edge features, or served with them dropped
	// (--no-edge-features): no such regions.
	plain, _ := testServer(t, Config{})
	dropped, err := OpenSource(dir, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dropped.DropEdgeFeatures()
	for _, srv := range []*Server{plain, serveSource(t, dropped, Config{})} {
		c2 := dial(t, srv)
		if o2 := c2.handshake(openReq()); o2.Region("edge_attr") != nil || o2.Region("edge_weight") != nil {
			t.Fatal("edge regions announced without edge features")
		}
	}
}
