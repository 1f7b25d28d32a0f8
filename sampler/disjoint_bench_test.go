package sampler

import (
	"testing"

	"github.com/gnnloader/gnnloader/internal/cputime"
)

// BenchmarkDisjoint samples disjoint GraphSAGE batches ([15,10,5], 1024
// seeds) on the benchmark graph, without and with a node-time filter
// ("uniform", node times uniform in [0, 100), seeds at their own times):
// serial (Workers 1) and intra (Workers GOMAXPROCS).
func BenchmarkDisjoint(b *testing.B) {
	g, seeds := benchGraph(b)
	plan := benchPlan(b, seeds)
	nodeTime := make([]int64, g.NumNodes)
	r := rng{mix64(3)}
	for v := range nodeTime {
		nodeTime[v] = int64(r.below(100))
	}
	for _, temporal := range []bool{false, true} {
		for _, w := range []int{1, 0} {
			name := map[bool]string{false: "plain", true: "node_time"}[temporal] + map[int]string{1: "/serial", 0: "/intra"}[w]
			b.Run(name, func(b *testing.B) {
				o := DisjointOptions{Fanouts: []int{15, 10, 5}, Workers: w}
				if temporal {
					o.NodeTime = nodeTime
				}
				d, err := NewDisjoint(g, o)
				if err != nil {
					b.Fatal(err)
				}
				var out DisjointBatch
				for i := 0; i < min(plan.NumBatches(), 4); i++ { // warm the buffers
					d.Sample(plan.Batch(i), nil, plan.Key(i), &out)
				}
				b.ReportAllocs()
				var edges, nodes int64
				i := 0
				cpu0 := cputime.Process()
				for b.Loop() {
					bi := i % plan.NumBatches()
					if err := d.Sample(plan.Batch(bi), nil, plan.Key(bi), &out); err != nil {
						b.Fatal(err)
					}
					edges += int64(len(out.Src))
					nodes += int64(len(out.NID))
					i++
				}
				report(b, int64(i), edges, nodes, cputime.Process()-cpu0)
			})
		}
	}
}
