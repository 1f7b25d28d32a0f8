package serve

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/sampler"
)

func heteroOpen() ipc.Open {
	o := openReq()
	o.InputType, o.BatchSize = "paper", 48
	return o
}

// expectHetero samples what batch i of the epoch must hold, as the daemon
// does: the same mode, the plan's seeds, inputs and key.
func expectHetero(t *testing.T, m *batch.Hetero, plan *sampler.Plan, i int) *batch.HeteroBatch {
	t.Helper()
	b := m.NewBatch().(*batch.HeteroBatch)
	b.SetInputs(plan.Inputs(i))
	if err := m.Sample(plan.Batch(i), plan.Key(i), b); err != nil {
		t.Fatal(err)
	}
	return b
}

// checkHeteroBatch compares a served batch with the one sampled directly
// (counts, scalars, lists and every structure region byte for byte) and
// checks it against the dataset: each t/x row is the type's feature row
// of t/n_id, each t/y its label, each edge the CSR edge its e_id names.
func checkHeteroBatch(t *testing.T, c *client, h *datasets.Hetero, m *batch.Hetero, want *batch.HeteroBatch, b *ipc.BatchReady) {
	t.Helper()
	var meta batch.Meta
	want.Meta(&meta)
	if !slices.Equal(b.Counts, meta.Counts) || !slices.Equal(b.Scalars, meta.Scalars) {
		t.Fatalf("batch %d: counts %v scalars %v, want %v %v", b.Index, b.Counts, b.Scalars, meta.Counts, meta.Scalars)
	}
	for k := range meta.Lists {
		if !slices.Equal(b.Lists[k], meta.Lists[k]) {
			t.Fatalf("batch %d: list %s = %v, want %v", b.Index, c.opened.Lists[k], b.Lists[k], meta.Lists[k])
		}
	}
	l := m.Layout()
	structure := make([][]byte, len(l.Regions))
	want.WriteStructure(func(k int) []byte {
		structure[k] = make([]byte, l.Regions[k].DataBytes(int(meta.Counts[k])))
		return structure[k]
	}, 1)
	nids := map[string][]int64{}
	for k, reg := range l.Regions {
		got := c.region(b.Slot, reg.Name, int(reg.DataBytes(int(b.Counts[k]))))
		if reg.Table == "" && !bytes.Equal(got, structure[k]) {
			t.Fatalf("batch %d: region %s differs from the batch sampled directly", b.Index, reg.Name)
		}
		if store, attr, _ := strings.Cut(reg.Name, "/"); attr == "n_id" {
			for i := range int(b.Counts[k]) {
				nids[store] = append(nids[store], i64(got, i))
			}
		}
	}
	seeds := 0
	for _, nt := range h.NodeTypes {
		nid := nids[nt.Name]
		if nt.FeatureDim > 0 {
			rb := nt.FeatureDim * nt.FeatureDType.Size()
			x := c.region(b.Slot, nt.Name+"/x", rb*len(nid))
			for i, v := range nid {
				if !bytes.Equal(x[i*rb:(i+1)*rb], nt.Features[v*int64(rb):(v+1)*int64(rb)]) {
					t.Fatalf("batch %d: %s/x row %d is not %s %d's features", b.Index, nt.Name, i, nt.Name, v)
				}
			}
		}
		if nt.Labels != nil {
			y := c.region(b.Slot, nt.Name+"/y", 8*len(nid))
			for i, v := range nid {
				if i64(y, i) != int64(nt.Labels[v]) {
					t.Fatalf("batch %d: %s/y[%d] = %d, want %d", b.Index, nt.Name, i, i64(y, i), nt.Labels[v])
				}
			}
		}
		if nt.Name == "paper" {
			seeds = int(b.Scalars[0])
		}
	}
	if seeds == 0 {
		t.Fatalf("batch %d: batch_size 0", b.Index)
	}
	for k, r := range h.Relations {
		s := r.EdgeType.String()
		n := int(b.Counts[l.Index(s+"/e_id")])
		ei, eid := c.region(b.Slot, s+"/edge_index", 16*n), c.region(b.Slot, s+"/e_id", 8*n)
		src, dst := nids[r.Src], nids[r.Dst]
		for j := range n {
			sl, dl, id := i64(ei, j), i64(ei, n+j), i64(eid, j)
			if sl < 0 || int(sl) >= len(src) || dl < 0 || int(dl) >= len(dst) {
				t.Fatalf("batch %d: %s edge %d: local ids %d -> %d out of range", b.Index, s, j, sl, dl)
			}
			g := &h.Relations[k].Graph
			if v := dst[dl]; id < g.Indptr[v] || id >= g.Indptr[v+1] || g.Neighbor(id) != src[sl] {
				t.Fatalf("batch %d: %s edge %d: e_id %d is not the edge %d -> %d", b.Index, s, j, id, src[sl], v)
			}
		}
	}
}

// undirectedMag is the generated mag-like dataset made two-way (7 edge
// types, so every node type is reached from papers), with the
// institutions' features dropped (a type without x).
func undirectedMag(t *testing.T) *Source {
	t.Helper()
	h, err := datasets.GenerateHetero(datasets.GenOptions{Like: "mag", Scale: 0.002, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if h, err = h.ToUndirected(1); err != nil {
		t.Fatal(err)
	}
	inst := h.NodeType("institution")
	inst.FeatureDim, inst.Features = 0, nil
	return heteroSource("test:mag-undirected", h, func() error { return nil }, time.Now(), nil)
}

// TestHeteroServed: a generated mag-like dataset served over the socket;
// every batch of two epochs read from the shared-memory slots is the one
// batch.Hetero samples directly, and agrees with the dataset.
func TestHeteroServed(t *testing.T) {
	src := undirectedMag(t)
	srv := serveSource(t, src, Config{})
	h := src.Hetero
	if len(h.Relations) != 7 {
		t.Fatalf("%d edge types", len(h.Relations))
	}
	for _, c := range []struct {
		name  string
		edge  []int32
		ranks uint32
	}{
		{"fanouts per hop", nil, 1},
		{"per edge type", []int32{5, -1, 0, 2, 3, 2, 1, 3, 0, 1, 4, -1, 2, 2}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := heteroOpen()
			o.Fanouts, o.EdgeFanouts, o.WorldSize, o.Rank = []int32{4, 3}, c.edge, c.ranks, c.ranks-1
			cl := dial(t, srv)
			opened := cl.handshake(o)
			fan := [][]int{slices.Repeat([]int{4}, 7), slices.Repeat([]int{3}, 7)}
			if c.edge != nil {
				fan = [][]int{{5, -1, 0, 2, 3, 2, 1}, {3, 0, 1, 4, -1, 2, 2}}
			}
			m, err := batch.NewHetero(h, batch.HeteroOptions{BatchSize: 48, InputType: "paper", Fanouts: fan, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			for k, r := range m.Layout().Regions {
				if got := opened.Regions[k]; got.Name != r.Name || got.DType != r.DType || int(got.CountAxis) != r.CountAxis {
					t.Fatalf("region %d: %+v, want %+v", k, got, r)
				}
			}
			if !slices.Equal(opened.Lists, m.Layout().Lists) {
				t.Fatalf("lists %v", opened.Lists)
			}
			seeds := h.NodeType("paper").Splits[datasets.SplitTrain]
			for epoch := uint32(0); epoch < 2; epoch++ {
				plan, err := sampler.NewPlan(seeds, sampler.EpochConfig{BatchSize: 48, Shuffle: true, Seed: 7,
					Rank: int(o.Rank), WorldSize: int(o.WorldSize)}, int(epoch))
				if err != nil {
					t.Fatal(err)
				}
				if plan.NumBatches() != int(opened.NumBatches) {
					t.Fatalf("%d batches, the plan has %d", opened.NumBatches, plan.NumBatches())
				}
				cl.send(&ipc.StartEpoch{Epoch: epoch})
				reached := map[string]bool{}
				for n := 0; ; n++ {
					msg := cl.recv()
					if end, ok := msg.(*ipc.EpochEnd); ok {
						if n != plan.NumBatches() || int(end.NumBatches) != n {
							t.Fatalf("epoch ended after %d batches (says %d), want %d", n, end.NumBatches, plan.NumBatches())
						}
						if len(reached) != 4 {
							t.Fatalf("the batches reached only %v", reached)
						}
						break
					}
					b := msg.(*ipc.BatchReady)
					for k, r := range opened.Regions {
						if strings.HasSuffix(r.Name, "/n_id") && b.Counts[k] > 0 {
							reached[r.Name] = true
						}
					}
					checkHeteroBatch(t, cl, h, m, expectHetero(t, m, plan, int(b.Index)), b)
					cl.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
				}
			}
		})
	}
}

// TestHeteroRefusals: Opens that do not fit a heterogeneous dataset get a
// clear bad_request, naming what would fit.
func TestHeteroRefusals(t *testing.T) {
	srv, _ := magServer(t, Config{})
	for name, tc := range map[string]struct {
		change func(o *ipc.Open)
		text   string
	}{
		"no input type":        {func(o *ipc.Open) { o.InputType = "" }, "dataset mag-synthetic is heterogeneous: Open needs input_type, the node type of the seeds (one of [paper author institution field_of_study])"},
		"unknown input type":   {func(o *ipc.Open) { o.InputType = "venue" }, "input_type \"venue\" is not a node type of dataset mag-synthetic (it has [paper author institution field_of_study])"},
		"split the type lacks": {func(o *ipc.Open) { o.InputType = "author" }, "node type author of dataset mag-synthetic has no split \"train\" (it has [])"},
		"unknown split":        {func(o *ipc.Open) { o.Split = "holdout" }, "node type paper of dataset mag-synthetic has no split \"holdout\" (it has [train valid test])"},
		"edge fanouts length":  {func(o *ipc.Open) { o.EdgeFanouts = []int32{1, 2, 3, 4, 5, 6} }, "6 edge_fanouts: want 2 hops x 4 edge types = 8, hop-major in Welcome's edge-type order [author__affiliated_with__institution author__writes__paper paper__cites__paper paper__has_topic__field_of_study]"},
		"link split":           {func(o *ipc.Open) { o.Split = "link:train" }, "link batches on a heterogeneous dataset are not supported"},
		"feature dtype":        {func(o *ipc.Open) { o.FeatureDType = "float16" }, "feature_dtype \"float16\": heterogeneous batches carry each node type's stored dtype"},
		"custom without seeds": {func(o *ipc.Open) { o.Split = ipc.CustomSplit }, "split \"custom\" needs a Seeds message before Open"},
		"temporal":             {func(o *ipc.Open) { o.Temporal, o.TimeAttr = ipc.TemporalUniform, ipc.TimeAttrNode }, "temporal and disjoint sampling of heterogeneous datasets is not supported yet"},
		"disjoint":             {func(o *ipc.Open) { o.Temporal = ipc.TemporalDisjoint }, "temporal and disjoint sampling of heterogeneous datasets is not supported yet"},
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, srv)
			c.hello()
			o := heteroOpen()
			tc.change(&o)
			c.send(&o)
			c.expectError(ipc.CodeBadRequest, tc.text)
		})
	}
}

// TestHeteroCustomSeeds: custom seeds are ids of the input type, checked
// against it (authors outnumber papers), and served as given.
func TestHeteroCustomSeeds(t *testing.T) {
	srv, src := magServer(t, Config{})
	h := src.Hetero
	papers, authors := h.NodeType("paper").NumNodes, h.NodeType("author").NumNodes
	if authors <= papers {
		t.Fatalf("%d authors, %d papers: the test needs more authors", authors, papers)
	}
	c := dial(t, srv)
	c.hello()
	c.sendSeeds(2, seedsFD(t, []int64{3, papers}, -1))
	o := heteroOpen()
	o.Split = ipc.CustomSplit
	c.send(&o)
	c.expectError(ipc.CodeBadRequest, "Seeds: id "+itoa(papers)+" at position 1 is outside [0, "+itoa(papers)+"), the paper nodes")

	ids := []int64{authors - 1, 0, 5, 5, 17}
	c = dial(t, srv)
	c.hello()
	c.sendSeeds(uint64(len(ids)), seedsFD(t, ids, -1))
	o.InputType, o.Shuffle, o.BatchSize = "author", false, 2
	c.send(&o)
	opened, ok := c.recv().(*ipc.Opened)
	if !ok || opened.NumBatches != 3 {
		t.Fatalf("Opened %+v", opened)
	}
	c.opened = opened
	c.send(&ipc.StartEpoch{})
	var served []int64
	for {
		m := c.recv()
		if _, ok := m.(*ipc.EpochEnd); ok {
			break
		}
		b := m.(*ipc.BatchReady)
		k := slices.IndexFunc(opened.Regions, func(r ipc.Region) bool { return r.Name == "author/n_id" })
		nid := c.region(b.Slot, "author/n_id", 8*int(b.Counts[k]))
		for i := range int(b.Scalars[0]) {
			served = append(served, i64(nid, i))
		}
		in := c.region(b.Slot, "author/input_id", 8*int(b.Scalars[0]))
		for i := range int(b.Scalars[0]) {
			if i64(in, i) != int64(2*int(b.Index)+i) {
				t.Fatalf("batch %d: input_id[%d] = %d", b.Index, i, i64(in, i))
			}
		}
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	if !slices.Equal(served, ids) {
		t.Fatalf("served seeds %v, want %v", served, ids)
	}
	for _, r := range opened.Regions {
		if r.Name == "author/y" {
			t.Fatal("authors have no labels, yet a region author/y")
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestHeteroBudget: a heterogeneous request takes from the memory budget
// what a node request would: its slots, the batches in flight and its
// epoch plan; one byte less is refused.
func TestHeteroBudget(t *testing.T) {
	src := undirectedMag(t)
	srv := serveSource(t, src, Config{})
	o := heteroOpen()
	c := dial(t, srv)
	opened := c.handshake(o)
	cfg := srv.cfg
	m, err := batch.NewHetero(src.Hetero, batch.HeteroOptions{BatchSize: 48, InputType: "paper",
		Fanouts: [][]int{slices.Repeat([]int{5}, 7), slices.Repeat([]int{3}, 7)}})
	if err != nil {
		t.Fatal(err)
	}
	seeds := len(src.Hetero.NodeType("paper").Splits[datasets.SplitTrain])
	want := int64(opened.SlotBytes)*int64(opened.Slots) +
		int64(2*cfg.Prefetch+1)*m.BatchBytes() + 2*24*int64(seeds) // CPU slots: one batch a fill; two epoch plans (the next made ahead)
	srv.mu.Lock()
	used := srv.budgetUsed
	srv.mu.Unlock()
	if used != want {
		t.Fatalf("budget used %d, want %d", used, want)
	}
	srv2 := serveSource(t, undirectedMag(t), Config{MemoryBudget: want - 1})
	c2 := dial(t, srv2)
	c2.hello()
	c2.send(&o)
	c2.expectError(ipc.CodeLimit, "exceed the whole memory budget")
}

// TestHeteroHostileFanouts: edge_fanouts a client sizes to hurt (every
// edge type at 2^31-1 or -1 over the most hops, batch_size at its limit)
// size nothing from the numbers themselves: the batch capacity is bounded
// by the graph and the seeds, and the memory budget refuses what exceeds
// it before anything is allocated. With a budget of 1 MiB both are
// refused; with 256 MiB they are served within it; the daemon serves an
// ordinary request either way.
func TestHeteroHostileFanouts(t *testing.T) {
	for _, budget := range []int64{1 << 20, 256 << 20} {
		srv, src := magServer(t, Config{MemoryBudget: budget})
		E := len(src.Hetero.Relations)
		for _, f := range []int32{1<<31 - 1, -1} {
			c := dial(t, srv)
			c.hello()
			o := heteroOpen()
			o.BatchSize = uint32(ipc.DefaultLimits.MaxBatchSize)
			o.Fanouts = slices.Repeat([]int32{1}, ipc.DefaultLimits.MaxFanouts)
			o.EdgeFanouts = slices.Repeat([]int32{f}, E*ipc.DefaultLimits.MaxFanouts)
			c.send(&o)
			if budget == 1<<20 {
				c.expectError(ipc.CodeLimit, "memory budget")
				continue
			}
			if _, ok := c.recv().(*ipc.Opened); !ok {
				t.Fatalf("fanouts %d: no Opened under a %d-byte budget", f, budget)
			}
			srv.mu.Lock()
			used := srv.budgetUsed
			srv.mu.Unlock()
			if used > budget {
				t.Fatalf("fanouts %d: %d bytes charged over a budget of %d", f, used, budget)
			}
			c.conn.Close()
			waitFor(t, func() bool { return srv.Trainers() == 0 })
		}
		if budget == 1<<20 {
			continue // an ordinary request does not fit 1 MiB either
		}
		c := dial(t, srv)
		c.handshake(heteroOpen())
		c.send(&ipc.StartEpoch{Epoch: 0})
		if _, ok := c.recv().(*ipc.BatchReady); !ok {
			t.Fatal("no batch after the hostile requests")
		}
	}
}
