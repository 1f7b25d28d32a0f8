package sampler

import "testing"

// FuzzDisjoint checks Disjoint against refDisjoint on small random graphs
// with random node and edge times: identical bytes for any fanouts, seeds,
// seed times, strategy, time kind and worker count.
func FuzzDisjoint(f *testing.F) {
	f.Add(uint64(1), uint16(300), uint8(8), uint8(3), uint8(2), uint16(40), uint64(9), uint8(0), false)
	f.Add(uint64(2), uint16(3000), uint8(30), uint8(40), uint8(16), uint16(200), uint64(1), uint8(5), true)
	f.Add(uint64(3), uint16(2), uint8(1), uint8(0), uint8(3), uint16(5), uint64(0), uint8(3), false)
	f.Fuzz(func(t *testing.T, gseed uint64, n uint16, avg, fan, workers uint8, batch uint16, key uint64, kind uint8, wide bool) {
		nodes := int64(n%3000) + 1
		g := powerLawGraph(nodes, float64(avg%30)+0.5, 300, gseed, wide)
		hops := int(fan%3) + 1
		fanouts := make([]int, hops)
		for h := range fanouts {
			fanouts[h] = int((fan>>2)+uint8(3*h))%25 - 1 // -1 (all), 0 (none) .. 23
		}
		seeds := testSeeds(g, int(batch%300)+1, key)
		r := rng{mix64(gseed ^ 0xABCDEF)}
		o := DisjointOptions{Fanouts: fanouts, Workers: int(workers%9) + 1, EdgeIDs: true}
		var times []int64
		switch kind % 6 { // 0: no time; 1, 2: node time (own, given); 3: edge time; then "last"
		case 1, 2, 4:
			o.NodeTime = make([]int64, nodes)
			for v := range o.NodeTime {
				o.NodeTime[v] = int64(r.below(20))
			}
		case 3, 5:
			o.EdgeTime = make([]int64, g.NumEdges())
			for p := range o.EdgeTime {
				o.EdgeTime[p] = int64(r.below(20))
			}
		}
		if kind%6 >= 4 {
			o.Strategy = Last
		}
		if kind%6 == 2 || o.EdgeTime != nil {
			times = make([]int64, len(seeds))
			for i := range times {
				times[i] = int64(r.below(22)) - 1
			}
		}
		d, err := NewDisjoint(g, o)
		if err != nil {
			t.Fatal(err)
		}
		var b DisjointBatch
		if err := d.Sample(seeds, times, key, &b); err != nil {
			t.Fatal(err)
		}
		if err := disjointEqual(&b, refDisjoint(g, o, seeds, times, key)); err != nil {
			t.Fatalf("fanouts %v workers %d kind %d: %v", fanouts, o.Workers, kind%6, err)
		}
	})
}
