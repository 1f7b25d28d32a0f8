package serve

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
)

// timedServer serves a generated Cora-like dataset with node and edge
// times (`loaderd gen --time`).
func timedServer(t *testing.T) (*Server, *Source) {
	t.Helper()
	d, err := datasets.Generate(datasets.GenOptions{Like: "cora", Scale: 0.5, Seed: 3, Time: true})
	if err != nil {
		t.Fatal(err)
	}
	src := &Source{Data: d, Table: gather.Table{Rows: d.Features, RowBytes: d.RowBytes(), NumRows: d.Graph.NumNodes},
		Spec: "test:timed", close: func() error { return nil }, MaxDegree: d.Graph.MaxDegree()}
	return serveSource(t, src, Config{}), src
}

// sendSeedsTimes sends a Seeds message of ids followed by their times.
func (c *client) sendSeedsTimes(t *testing.T, ids, times []int64) {
	t.Helper()
	fd := seedsFD(t, append(append([]int64(nil), ids...), times...), -1)
	if err := c.conn.WriteMsg(&ipc.Seeds{Count: uint64(len(ids)), Times: times != nil}, fd); err != nil {
		t.Fatal(err)
	}
}

// disjointBatch reads a served disjoint batch and checks what every one
// satisfies: seeds first in subgraphs 0..bs-1, edges inside a subgraph and
// real (e_id), no node twice in a subgraph. It returns the batch's n_id,
// batch vector, edges (local src, dst), e_id and input_id.
func disjointBatch(t *testing.T, c *client, src *Source, b *ipc.BatchReady) (nid, sub []int64, ei [][2]int64, eid, in []int64) {
	t.Helper()
	g := &src.Data.Graph
	n, e, bs, _ := c.sizes(b)
	if k, ok := c.opened.Count(b, "batch"); !ok || int(k) != n {
		t.Fatalf("batch region count %d (%v) for %d nodes", k, ok, n)
	}
	read := func(name string, k int) []int64 {
		raw := c.region(b.Slot, name, 8*k)
		out := make([]int64, k)
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
		}
		return out
	}
	nid, sub, eid, in = read("n_id", n), read("batch", n), read("e_id", e), read("input_id", bs)
	raw := read("edge_index", 2*e)
	y := read("y", n)
	rb := src.Data.RowBytes()
	x := c.region(b.Slot, "x", rb*n)
	seen := map[[2]int64]bool{}
	for i, v := range nid {
		if !bytes.Equal(x[i*rb:(i+1)*rb], src.Data.Row(v)) || y[i] != int64(src.Data.Labels[v]) {
			t.Fatalf("x or y of node %d (n_id %d) is not its row", i, v)
		}
		if i < bs && sub[i] != int64(i) {
			t.Fatalf("seed %d in subgraph %d", i, sub[i])
		}
		if seen[[2]int64{sub[i], v}] {
			t.Fatalf("node %d twice in subgraph %d", v, sub[i])
		}
		seen[[2]int64{sub[i], v}] = true
	}
	for j := range e {
		s, d := raw[j], raw[e+j]
		if sub[s] != sub[d] {
			t.Fatalf("edge %d joins subgraphs %d and %d", j, sub[s], sub[d])
		}
		if p := eid[j]; p < g.Indptr[nid[d]] || p >= g.Indptr[nid[d]+1] || g.Neighbor(p) != nid[s] {
			t.Fatalf("edge %d: e_id %d is not %d -> %d", j, p, nid[s], nid[d])
		}
		ei = append(ei, [2]int64{s, d})
	}
	return nid, sub, ei, eid, in
}

// TestTemporalNodeTime: Open asking for temporal sampling on node_time
// over a named split: every neighbour, at every hop, is no later than its
// subgraph's seed (whose time is its own node_time).
func TestTemporalNodeTime(t *testing.T) {
	for _, strategy := range []string{ipc.TemporalUniform, ipc.TemporalLast} {
		srv, src := timedServer(t)
		nt := src.Data.NodeTime
		c := dial(t, srv)
		o := openReq()
		o.Temporal, o.TimeAttr = strategy, ipc.TimeAttrNode
		c.handshake(o)
		c.send(&ipc.StartEpoch{Epoch: 0})
		edges := 0
		for {
			m := c.recv()
			if _, ok := m.(*ipc.EpochEnd); ok {
				break
			}
			b := m.(*ipc.BatchReady)
			nid, sub, ei, _, _ := disjointBatch(t, c, src, b)
			for _, st := range ei {
				if seed := nid[sub[st[1]]]; nt[nid[st[0]]] > nt[seed] {
					t.Fatalf("%s: neighbour %d (time %d) of subgraph %d, whose seed %d has time %d", strategy,
						nid[st[0]], nt[nid[st[0]]], sub[st[1]], seed, nt[seed])
				}
			}
			edges += len(ei)
			c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
		}
		if edges < 100 {
			t.Fatalf("%s: only %d edges in an epoch", strategy, edges)
		}
	}
}

// TestTemporalSeedTimes: custom seeds with times (Seeds.Times), shuffled,
// on edge_time: every edge is no later than the time sent for its seed,
// found through input_id.
func TestTemporalSeedTimes(t *testing.T) {
	srv, src := timedServer(t)
	et := src.Data.EdgeTime
	ids := []int64{5, 17, 17, 3, 250, 9, 1, 42, 600, 700}
	times := []int64{10, 49, 0, 25, 30, 5, 40, 45, 20, 35}
	c := dial(t, srv)
	c.hello()
	c.sendSeedsTimes(t, ids, times)
	o := customOpen()
	o.Shuffle, o.Fanouts, o.Temporal, o.TimeAttr = true, []int32{-1, 3}, ipc.TemporalUniform, ipc.TimeAttrEdge
	c.send(&o)
	opened, ok := c.recv().(*ipc.Opened)
	if !ok {
		t.Fatal("no Opened")
	}
	c.opened = opened
	c.send(&ipc.StartEpoch{Epoch: 0})
	served := 0
	for {
		m := c.recv()
		if _, ok := m.(*ipc.EpochEnd); ok {
			break
		}
		b := m.(*ipc.BatchReady)
		nid, sub, ei, eid, in := disjointBatch(t, c, src, b)
		for i, p := range in {
			if nid[i] != ids[p] {
				t.Fatalf("seed %d is node %d, input_id %d names %d", i, nid[i], p, ids[p])
			}
		}
		for j, st := range ei {
			if tm := times[in[sub[st[1]]]]; et[eid[j]] > tm {
				t.Fatalf("edge %d has time %d after its seed's %d", eid[j], et[eid[j]], tm)
			}
		}
		served += len(in)
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	if served != len(ids) {
		t.Fatalf("%d seeds served of %d", served, len(ids))
	}
}

// TestDisjoint: temporal "disjoint" on a dataset without times: one
// subgraph per seed, a node reached by several.
func TestDisjoint(t *testing.T) {
	srv, src := testServer(t, Config{})
	c := dial(t, srv)
	o := openReq()
	o.Temporal, o.BatchSize, o.Fanouts = "disjoint", 64, []int32{5, 5}
	c.handshake(o)
	c.send(&ipc.StartEpoch{Epoch: 0})
	repeats := 0
	for {
		m := c.recv()
		if _, ok := m.(*ipc.EpochEnd); ok {
			break
		}
		b := m.(*ipc.BatchReady)
		nid, _, _, _, _ := disjointBatch(t, c, src, b)
		seen := map[int64]bool{}
		for _, v := range nid {
			if seen[v] {
				repeats++
			}
			seen[v] = true
		}
		c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
	}
	if repeats == 0 {
		t.Fatal("no node in two subgraphs in a whole epoch")
	}
}

// TestTemporalRefused: what the daemon refuses, with the reason.
func TestTemporalRefused(t *testing.T) {
	timed, _ := timedServer(t)
	plain, _ := testServer(t, Config{})
	for _, c := range []struct {
		name  string
		srv   *Server
		ids   []int64 // custom seeds (nil: the train split)
		times []int64
		open  func(o *ipc.Open)
		want  string
	}{
		{"link split", timed, []int64{1, 2}, nil, func(o *ipc.Open) {
			o.Temporal, o.TimeAttr, o.Split = ipc.TemporalUniform, ipc.TimeAttrNode, "link:custom"
		}, "not supported yet"},
		{"no node_time", plain, nil, nil, func(o *ipc.Open) { o.Temporal, o.TimeAttr = ipc.TemporalLast, ipc.TimeAttrNode }, "has no node_time"},
		{"no edge_time", plain, []int64{1}, []int64{3}, func(o *ipc.Open) { o.Temporal, o.TimeAttr = ipc.TemporalLast, ipc.TimeAttrEdge }, "has no edge_time"},
		{"edge_time without times", timed, nil, nil, func(o *ipc.Open) { o.Temporal, o.TimeAttr = ipc.TemporalUniform, ipc.TimeAttrEdge }, "needs the seeds' times"},
		{"times without temporal", timed, []int64{1, 2}, []int64{3, 4}, func(o *ipc.Open) {}, "the Seeds message carried seed times"},
		{"times with disjoint", timed, []int64{1, 2}, []int64{3, 4}, func(o *ipc.Open) { o.Temporal = "disjoint" }, "no time_attr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "times with disjoint" {
			}
			cl := dial(t, c.srv)
			cl.hello()
			o := openReq()
			if c.ids != nil {
				cl.sendSeedsTimes(t, c.ids, c.times)
				o = customOpen()
			}
			c.open(&o)
			cl.send(&o)
			cl.expectError(ipc.CodeBadRequest, c.want)
		})
	}
	// A memfd too short for the times after the ids.
	cl := dial(t, timed)
	cl.hello()
	if err := cl.conn.WriteMsg(&ipc.Seeds{Count: 3, Times: true}, seedsFD(t, []int64{1, 2, 3, 4}, -1)); err != nil {
		t.Fatal(err)
	}
	cl.expectError(ipc.CodeBadRequest, "cannot read 3 times")
}
