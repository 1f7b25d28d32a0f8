package datasets

// Per-edge and per-node arrays of an npz file: adj_data as edge_weight
// (--edge-weights), and the optional members node_time and edge_time.

import "fmt"

// Optional npz members: int64 times, one per node and one per entry of
// adj_indices (in the file's CSR order).
const (
	npzNodeTimeMember = "node_time"
	npzEdgeTimeMember = "edge_time"
)

// npzEdgeArrays builds d's graph from the CSR parts with rows sorted and
// the per-edge members carried along into CSR order: adj_data as
// edge_weight (float32) when weights, and edge_time when the file has it.
func npzEdgeArrays(z *npzFile, d *Data, n int64, indptr, indices []int64, weights bool) error {
	var w []float64
	if weights {
		a, err := z.array("adj_data")
		if err != nil {
			return err
		}
		if err := a.wantShape(int64(len(indices))); err != nil {
			return err
		}
		if w, err = a.floats(); err != nil {
			return err
		}
	}
	var times []int64
	if z.has(npzEdgeTimeMember) {
		a, err := z.array(npzEdgeTimeMember)
		if err != nil {
			return err
		}
		if err := a.wantShape(int64(len(indices))); err != nil {
			return err
		}
		if times, err = a.ints(); err != nil {
			return err
		}
	}
	pairs := make([]int64, 0, 2*len(indices))
	for v := int64(0); v < n; v++ {
		for k := indptr[v]; k < indptr[v+1]; k++ {
			pairs = append(pairs, v, indices[k])
		}
	}
	g, perm, err := stableCSR(n, pairs)
	if err != nil {
		return fmt.Errorf("%s: %w", z.path, err)
	}
	d.Graph = g
	if weights {
		d.EdgeWeight = make([]float32, len(perm))
		for p, q := range perm {
			d.EdgeWeight[p] = float32(w[q])
		}
		d.Source += " --edge-weights"
	}
	if times != nil {
		d.EdgeTime = make([]int64, len(perm))
		for p, q := range perm {
			d.EdgeTime[p] = times[q]
		}
	}
	return nil
}

// npzNodeTime reads the optional member node_time (one integer per node).
func npzNodeTime(z *npzFile, d *Data, n int64) error {
	if !z.has(npzNodeTimeMember) {
		return nil
	}
	a, err := z.array(npzNodeTimeMember)
	if err != nil {
		return err
	}
	if err := a.wantShape(n); err != nil {
		return err
	}
	d.NodeTime, err = a.ints()
	return err
}
