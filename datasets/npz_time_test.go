package datasets

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportNPZTimes: the optional members node_time and edge_time (with
// and without adj_data as weights) land in node order and in CSR order,
// through the row sort, --edge-direction out and --undirected, and a wrong
// length is refused naming the member.
func TestImportNPZTimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.npz")
	// A[0,2] (time 20), A[0,1] (10, an unsorted row), A[1,2] (30), A[2,0] (40)
	members := []impMember{
		{"adj_indptr", impNPY("<i8", []int64{4}, impI64(0, 2, 3, 4))},
		{"adj_indices", impNPY("<i8", []int64{4}, impI64(2, 1, 2, 0))},
		{"adj_data", impNPY("<f4", []int64{4}, impF32(2, 1, 3, 4))},
		{"adj_shape", impNPY("<i8", []int64{2}, impI64(3, 3))},
		{"attr_matrix", impNPY("<f4", []int64{3, 1}, impF32(1, 2, 3))},
		{"labels", impNPY("<i8", []int64{3}, impI64(0, 1, 1))},
		{"node_time", impNPY("<i4", []int64{3}, impI32(7, -1, 5))},
		{"edge_time", impNPY("<i8", []int64{4}, impI64(20, 10, 30, 40))},
	}
	impWriteNPZ(t, path, false, members...)
	edges := func(d *Data) string {
		var s []string
		for v := int64(0); v < d.Graph.NumNodes; v++ {
			for p := d.Graph.Indptr[v]; p < d.Graph.Indptr[v+1]; p++ {
				s = append(s, fmt.Sprintf("%d<-%d:%d", v, d.Graph.Neighbor(p), d.EdgeTime[p]))
			}
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		o    ImportOptions
		want string
	}{
		{ImportOptions{}, "0<-1:10 0<-2:20 1<-2:30 2<-0:40"},
		{ImportOptions{EdgeWeights: true}, "0<-1:10 0<-2:20 1<-2:30 2<-0:40"},
		{ImportOptions{EdgeDirection: EdgeOut}, "0<-2:40 1<-0:10 2<-0:20 2<-1:30"},
		{ImportOptions{Undirected: true}, "0<-1:10 0<-2:20 1<-0:10 1<-2:30 2<-0:40 2<-1:30"},
	} {
		c.o.SplitRatios = [3]float64{0.4, 0.3, 0.3}
		d, err := ImportNPZ(path, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if got := edges(d); got != c.want {
			t.Errorf("%+v: %s, want %s", c.o, got, c.want)
		}
		if !slices.Equal(d.NodeTime, []int64{7, -1, 5}) {
			t.Errorf("%+v: node_time %v", c.o, d.NodeTime)
		}
		if c.o.EdgeWeights != (d.EdgeWeight != nil) {
			t.Errorf("%+v: edge weights %v", c.o, d.EdgeWeight)
		}
	}
	for i, bad := range []impMember{
		{"node_time", impNPY("<i8", []int64{2}, impI64(1, 2))},
		{"edge_time", impNPY("<i8", []int64{3}, impI64(1, 2, 3))},
		{"edge_time", impNPY("<f4", []int64{4}, impF32(1, 2, 3, 4))},
	} {
		ms := slices.Clone(members)
		for j := range ms {
			if ms[j].name == bad.name {
				ms[j] = bad
			}
		}
		impWriteNPZ(t, path, false, ms...)
		if _, err := ImportNPZ(path, ImportOptions{}); err == nil || !strings.Contains(err.Error(), bad.name) {
			t.Errorf("bad member %d (%s): %v", i, bad.name, err)
		}
	}
}
