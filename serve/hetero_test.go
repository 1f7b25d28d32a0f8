package serve

import (
	"fmt"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
)

// magSpec is a small generated ogbn-mag-like dataset: 4 node types, 4 edge
// types, labels and splits on papers.
const magSpec = "synthetic:mag:0.002:1"

func magServer(t *testing.T, cfg Config) (*Server, *Source) {
	t.Helper()
	src, err := OpenSource(magSpec, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if src.Hetero == nil {
		t.Fatalf("%s opened as a homogeneous dataset", magSpec)
	}
	return serveSource(t, src, cfg), src
}

func TestWelcomeHetero(t *testing.T) {
	srv, src := magServer(t, Config{})
	h := src.Hetero
	c := dial(t, srv)
	c.send(&ipc.Hello{Version: ipc.Version, Name: "hetero"})
	w, ok := c.recv().(*ipc.Welcome)
	if !ok {
		t.Fatal("no Welcome")
	}
	d := w.Dataset
	if d.Name != h.Name || d.FeatureDim != 0 || d.FeatureDType != "" || d.NumClasses != 0 || len(d.Splits) != 0 {
		t.Fatalf("hetero Welcome's homogeneous fields: %+v", d)
	}
	if len(d.NodeTypes) != len(h.NodeTypes) || len(d.EdgeTypes) != len(h.Relations) {
		t.Fatalf("%d node types and %d edge types, want %d and %d", len(d.NodeTypes), len(d.EdgeTypes), len(h.NodeTypes), len(h.Relations))
	}
	var nodes, edges uint64
	for i, nt := range h.NodeTypes {
		got := d.NodeTypes[i]
		want := ipc.NodeTypeInfo{Name: nt.Name, NumNodes: uint64(nt.NumNodes), FeatureDim: uint32(nt.FeatureDim),
			FeatureDType: string(nt.FeatureDType), NumClasses: uint32(nt.NumClasses)}
		for _, s := range datasets.SplitNames {
			if ids, ok := nt.Splits[s]; ok {
				want.Splits = append(want.Splits, ipc.Split{Name: s, Size: uint64(len(ids))})
			}
		}
		if got.Name != want.Name || got.NumNodes != want.NumNodes || got.FeatureDim != want.FeatureDim ||
			got.FeatureDType != want.FeatureDType || got.NumClasses != want.NumClasses || !slices.Equal(got.Splits, want.Splits) {
			t.Errorf("node type %d: %+v, want %+v", i, got, want)
		}
		nodes += uint64(nt.NumNodes)
	}
	if len(d.NodeTypes[0].Splits) != 3 || d.NodeTypes[0].NumClasses != 349 {
		t.Errorf("paper: %+v, want 3 splits and 349 classes", d.NodeTypes[0])
	}
	for i, r := range h.Relations {
		want := ipc.EdgeTypeInfo{Src: r.Src, Rel: r.Rel, Dst: r.Dst, NumEdges: uint64(r.Graph.NumEdges())}
		if d.EdgeTypes[i] != want {
			t.Errorf("edge type %d: %+v, want %+v", i, d.EdgeTypes[i], want)
		}
		edges += uint64(r.Graph.NumEdges())
	}
	if d.NumNodes != nodes || d.NumEdges != edges || d.NodeTime || d.EdgeTime {
		t.Errorf("totals %d nodes %d edges, times %v %v; want %d %d, no times", d.NumNodes, d.NumEdges, d.NodeTime, d.EdgeTime, nodes, edges)
	}
}

// TestWelcomeTimes: node_time and edge_time say whether the dataset has them.
func TestWelcomeTimes(t *testing.T) {
	src, err := OpenSource("synthetic:cora:0.5:3", false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	src.Data.NodeTime = make([]int64, src.Data.Graph.NumNodes)
	srv := serveSource(t, src, Config{})
	c := dial(t, srv)
	c.send(&ipc.Hello{Version: ipc.Version})
	w := c.recv().(*ipc.Welcome)
	if !w.Dataset.NodeTime || w.Dataset.EdgeTime || len(w.Dataset.NodeTypes) != 0 {
		t.Fatalf("node_time %v edge_time %v node types %v; want true, false, none", w.Dataset.NodeTime, w.Dataset.EdgeTime, w.Dataset.NodeTypes)
	}
}

// TestOlderVersionsRefused: a client of version 2, 3 or 4 gets the
// version error, naming both.
func TestOlderVersionsRefused(t *testing.T) {
	srv, _ := testServer(t, Config{})
	for _, v := range []uint16{2, 3, 4} {
		c := dial(t, srv)
		c.send(&ipc.Hello{Version: v})
		c.expectError(ipc.CodeUnsupportedVersion, fmt.Sprintf("client speaks protocol version %d, daemon speaks 5", v))
	}
}

// TestV3Refusals: what this daemon does not serve yet, or what does not fit
// the dataset, is refused with a clear error.
func TestV3Refusals(t *testing.T) {
	srv, _ := testServer(t, Config{})
	for name, tc := range map[string]struct {
		change func(o *ipc.Open)
		text   string
	}{
		"temporal":                {func(o *ipc.Open) { o.Temporal, o.TimeAttr = "uniform", "node_time" }, "time_attr \"node_time\": dataset cora-synthetic has no node_time"},
		"input type, homogeneous": {func(o *ipc.Open) { o.InputType = "paper" }, "input_type \"paper\": dataset cora-synthetic is homogeneous"},
		"edge fanouts alone":      {func(o *ipc.Open) { o.EdgeFanouts = []int32{1, 1} }, "edge_fanouts without input_type"},
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, srv)
			c.hello()
			o := openReq()
			tc.change(&o)
			c.send(&o)
			c.expectError(ipc.CodeBadRequest, tc.text)
		})
	}
}

// timesFD is a memfd with ids then times, little-endian int64.
func timesFD(t *testing.T, ids, times []int64) int {
	t.Helper()
	return seedsFD(t, append(slices.Clone(ids), times...), -1)
}

// TestSeedsTimes: Seeds with times reads the times after the ids and keeps
// both; a file too short for the times is refused; an Open that would drop
// them is refused.
func TestSeedsTimes(t *testing.T) {
	srv, _ := testServer(t, Config{})
	ids, times := []int64{4, 0, 9, 4}, []int64{-5, 1 << 40, 0, 7}

	// What the session keeps.
	ss := &session{srv: srv}
	ss.state.Next(ipc.FromClient, ipc.TypeHello)
	ss.state.Next(ipc.FromDaemon, ipc.TypeWelcome)
	fd := timesFD(t, ids, times)
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.takeSeeds(&ipc.Seeds{Count: 4, Times: true}, []int{dup}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ss.custom, ids) || !slices.Equal(ss.times, times) {
		t.Fatalf("kept ids %v times %v, want %v %v", ss.custom, ss.times, ids, times)
	}
	if ss.seedBytes != 16*4 {
		t.Fatalf("budget took %d bytes for 4 ids and times, want 64", ss.seedBytes)
	}
	srv.unreserve(ss.seedBytes)

	// Times missing from the file.
	c := dial(t, srv)
	c.hello()
	if err := c.conn.WriteMsg(&ipc.Seeds{Count: 4, Times: true}, seedsFD(t, append(ids, times[:3]...), -1)); err != nil {
		t.Fatal(err)
	}
	c.expectError(ipc.CodeBadRequest, "cannot read 4 times")

	// An Open without temporal, or of another split, would drop the times.
	for _, split := range []string{ipc.CustomSplit, "link:custom", "train"} {
		c = dial(t, srv)
		c.hello()
		if err := c.conn.WriteMsg(&ipc.Seeds{Count: 4, Times: true}, fd); err != nil {
			t.Fatal(err)
		}
		o := customOpen()
		o.Split = split
		c.send(&o)
		c.expectError(ipc.CodeBadRequest, "the Seeds message carried seed times")
	}
	// Without times the same ids are served.
	c = dial(t, srv)
	c.hello()
	if err := c.conn.WriteMsg(&ipc.Seeds{Count: 4}, fd); err != nil {
		t.Fatal(err)
	}
	o := customOpen()
	c.send(&o)
	if m, ok := c.recv().(*ipc.Opened); !ok {
		t.Fatalf("got %#v, want Opened", m)
	}
}
