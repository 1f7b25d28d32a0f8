package datasets

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// OGB per-edge and per-node extras, read when present:
//
//	raw/edge-feat.csv.gz   (csv layout) or data.npz edge_feat: edge_attr
//	raw/edge_weight.csv.gz (ogbl-collab):                      edge_weight
//	raw/edge_year.csv.gz   (ogbl-collab):                      edge_time
//	raw/node_year.csv.gz   (ogbn-arxiv, ogbl-citation2):        node_time
//
// The edge files are in edge.csv.gz's order; the dataset stores them in CSR
// order (stableCSR gives the permutation).

// ogbEdgeFiles are the per-edge files of the csv layout.
var ogbEdgeFiles = []string{"edge-feat.csv.gz", "edge_weight.csv.gz", "edge_year.csv.gz"}

// hasEdgeFiles reports whether the csv layout has per-edge files.
func (im *ogbImport) hasEdgeFiles() bool {
	for _, f := range ogbEdgeFiles {
		if fileExists(im.raw(f)) {
			return true
		}
	}
	return false
}

// stableCSR builds the CSR of edges given as interleaved (src, dst) pairs,
// rows sorted ascending with duplicates kept (the graph buildCSR builds),
// and the permutation: the edge at CSR position p is input edge perm[p]
// (equal entries of a row keep the input's order).
func stableCSR(n int64, pairs []int64) (Graph, []int64, error) {
	e := int64(len(pairs) / 2)
	ip := make([]int64, n+1)
	for i := int64(0); i < e; i++ {
		s, t := pairs[2*i], pairs[2*i+1]
		if s < 0 || s >= n || t < 0 || t >= n {
			return Graph{}, nil, fmt.Errorf("edge %d (%d -> %d) has a node id out of range [0, %d)", i, s, t, n)
		}
		ip[s+1]++
	}
	for v := int64(0); v < n; v++ {
		ip[v+1] += ip[v]
	}
	perm := make([]int64, e)
	cur := slices.Clone(ip[:n])
	for i := int64(0); i < e; i++ {
		s := pairs[2*i]
		perm[cur[s]] = i
		cur[s]++
	}
	g := Graph{NumNodes: n, Indptr: ip}
	if Wide(n) {
		g.Indices64 = make([]int64, e)
	} else {
		g.Indices32 = make([]int32, e)
	}
	for v := int64(0); v < n; v++ {
		row := perm[ip[v]:ip[v+1]]
		slices.SortStableFunc(row, func(a, b int64) int { return cmp.Compare(pairs[2*a+1], pairs[2*b+1]) })
		for p := ip[v]; p < ip[v+1]; p++ {
			if g.Indices64 != nil {
				g.Indices64[p] = pairs[2*perm[p]+1]
			} else {
				g.Indices32[p] = int32(pairs[2*perm[p]+1])
			}
		}
	}
	return g, perm, nil
}

// readNumberRows reads a csv.gz file of rows of comma-separated numbers
// as OGB's reader types them (csvNumbers): the values, the row width and
// the row count. want is the rows the file should have (another file's
// count, named by of, e.g. "nodes in num-node-list.csv.gz"), or -1: a file
// with more is an error at its first extra row, and the values are reserved
// from it (up to maxReserve).
func (im *ogbImport) readNumberRows(path string, want int64, of string) (csvNumbers, error) {
	var c csvNumbers
	err := streamLines(path, im.workers, im.prog, parseFeatures, func(fb featBlock, line int64) error {
		if c.dim == 0 {
			c.dim = fb.dim
			if want > 0 {
				c.hint = min(want, maxReserve/int64(fb.dim)) * int64(fb.dim)
			}
		}
		if fb.dim != c.dim {
			return fmt.Errorf("%s: line %d: row has %d values, earlier rows have %d", path, line+1, fb.dim, c.dim)
		}
		if want >= 0 && c.rows+fb.rows > want {
			return fmt.Errorf("%s: line %d: more rows than the %d %s", path, want+1, want, of)
		}
		c.add(fb)
		return nil
	})
	if err == nil && c.dim == 0 {
		err = fmt.Errorf("%s: no rows", path)
	}
	return c, err
}

// maxReserve caps the values readNumberRows reserves from another file's
// count (1 GiB of float32): a count is only a claim until the rows come, and
// past it the values grow as they are read.
const maxReserve = 1 << 28

// readIntRows reads a csv.gz file of one non-negative integer per row.
func (im *ogbImport) readIntRows(path string) ([]int64, error) {
	var vals []int64
	err := streamLines(path, im.workers, im.prog, func(b []byte) ([]int64, int64, *parseError) {
		return parseIDs(b, math.MaxInt64)
	}, func(v []int64, _ int64) error { vals = append(vals, v...); return nil })
	return vals, err
}

// csvEdgeArrays reads the per-edge files of the csv layout (e edges, in
// edge.csv.gz order) into d, in CSR order by perm.
func (im *ogbImport) csvEdgeArrays(e int64, perm []int64) error {
	d := im.d
	if p := im.raw("edge-feat.csv.gz"); fileExists(p) {
		c, err := im.readNumberRows(p, e, "edges")
		if err != nil {
			return err
		}
		if c.rows != e {
			return fmt.Errorf("%s: %d rows for %d edges", p, c.rows, e)
		}
		vals, dt := c.result()
		d.EdgeDim, d.EdgeDType = c.dim, dt
		d.EdgeAttr = PermuteRows(vals, dt.Size()*c.dim, perm)
	}
	if p := im.raw("edge_weight.csv.gz"); fileExists(p) {
		c, err := im.readNumberRows(p, e, "edges")
		if err != nil {
			return err
		}
		if c.dim != 1 || c.rows != e {
			return fmt.Errorf("%s: %d rows of %d values, want %d rows of 1", p, c.rows, c.dim, e)
		}
		d.EdgeWeight = permute(asFloat32s(c.asFloat32()), perm) // weights are float32 whatever the file holds
	}
	if p := im.raw("edge_year.csv.gz"); fileExists(p) {
		vals, err := im.readIntRows(p)
		if err != nil {
			return err
		}
		if int64(len(vals)) != e {
			return fmt.Errorf("%s: %d rows for %d edges", p, len(vals), e)
		}
		d.EdgeTime = permute(vals, perm)
	}
	return nil
}

// nodeYears reads raw/node_year.csv.gz into d.NodeTime when present.
func (im *ogbImport) nodeYears(n int64) error {
	p := im.raw("node_year.csv.gz")
	if !fileExists(p) {
		return nil
	}
	vals, err := im.readIntRows(p)
	if err != nil {
		return err
	}
	if int64(len(vals)) != n {
		return fmt.Errorf("%s: %d rows for %d nodes", p, len(vals), n)
	}
	im.d.NodeTime = vals
	return nil
}

// npzEdgeAttr reads data.npz's edge_feat [E, F] (floats become float32,
// integers keep an integer type as npz node features do) in CSR order.
func (im *ogbImport) npzEdgeAttr(z *npzFile, e int64, perm []int64) error {
	a, err := z.array("edge_feat")
	if err != nil {
		return err
	}
	if err := a.wantShape(e, -1); err != nil {
		return err
	}
	dim := int(a.shape[1])
	if dim <= 0 {
		return a.errorf("edge_feat has no columns")
	}
	vals, dt, ok, err := npzIntBytes(a)
	if !ok {
		dt = Float32
		vals, err = npzFloat32Bytes(a)
	}
	if err != nil {
		return err
	}
	d := im.d
	d.EdgeDim, d.EdgeDType = dim, dt
	d.EdgeAttr = PermuteRows(vals, dim*dt.Size(), perm)
	return nil
}
