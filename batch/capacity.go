package batch

// How large a batch can get: the slots' capacity.

import "github.com/gnnloader/gnnloader/datasets"

// maxDegree is deg, or when 0 the largest degree of g.
func maxDegree(g *datasets.Graph, deg int64) int64 {
	if deg == 0 {
		deg = g.MaxDegree()
	}
	return deg
}

// Capacity bounds the nodes and edges of one sampled batch: batchSize seeds
// and fanouts per hop (-1 = all neighbours, bounded by maxDegree), and never
// more than the graph's nodes and edges plus what repeated seeds add (each
// copy of a seed is a node and samples its first hop; every later node is
// distinct and samples once).
func Capacity(batchSize int, fanouts []int, maxDegree, numNodes, numEdges int64) (maxNodes, maxEdges int64) {
	frontier := int64(batchSize)
	maxNodes = frontier
	var firstHop int64
	for i, f := range fanouts {
		k := int64(f)
		if f < 0 || k > maxDegree {
			k = maxDegree
		}
		e := satMul(frontier, k)
		if i == 0 {
			firstHop = e
		}
		maxEdges = satAdd(maxEdges, e)
		frontier = e
		maxNodes = satAdd(maxNodes, e)
	}
	// Seeds may repeat (custom seeds): every copy is a node of the batch
	// and samples its own first hop. The nodes after the seeds are distinct
	// and none of them a seed, and each later hop's edges come from distinct
	// nodes, so a batch never exceeds these whatever the graph.
	return min(maxNodes, satAdd(numNodes, int64(batchSize))), min(maxEdges, satAdd(numEdges, firstHop))
}

const satLimit = int64(1) << 62

func satMul(a, b int64) int64 {
	if a != 0 && b > satLimit/a {
		return satLimit
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if a > satLimit-b {
		return satLimit
	}
	return a + b
}

// DisjointCapacity bounds the nodes and edges of one disjoint batch
// (sampler.Disjoint): batchSize subgraphs, each one seed's neighbourhood
// sampled with fanouts (-1 = all neighbours, bounded by maxDegree), and
// never more than the graph's nodes (a subgraph holds a node once) and
// edges (each node of a subgraph samples once, distinct edges).
func DisjointCapacity(batchSize int, fanouts []int, maxDegree, numNodes, numEdges int64) (maxNodes, maxEdges int64) {
	n, e := Capacity(1, fanouts, maxDegree, satLimit, satLimit)
	return satMul(int64(batchSize), min(n, numNodes)), satMul(int64(batchSize), min(e, numEdges))
}
