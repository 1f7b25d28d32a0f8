package sampler

import "testing"

// FuzzSample checks the sampler against refSample on small random graphs:
// identical bytes for any fanouts, seeds, key and worker count.
func FuzzSample(f *testing.F) {
	f.Add(uint64(1), uint16(300), uint8(8), uint8(3), uint8(2), uint16(40), uint64(9), false)
	f.Add(uint64(2), uint16(5000), uint8(30), uint8(40), uint8(16), uint16(900), uint64(1), true)
	f.Add(uint64(3), uint16(2), uint8(1), uint8(0), uint8(3), uint16(5), uint64(0), false)
	f.Fuzz(func(t *testing.T, gseed uint64, n uint16, avg, fan, workers uint8, batch uint16, key uint64, wide bool) {
		nodes := int64(n%6000) + 1
		g := powerLawGraph(nodes, float64(avg%40)+0.5, 400, gseed, wide)
		hops := int(fan%4) + 1
		fanouts := make([]int, hops)
		for h := range fanouts {
			fanouts[h] = int((fan>>2)+uint8(3*h))%45 - 1 // -1 (all), 0 (none) .. 43
		}
		seeds := testSeeds(g, int(batch%1200)+1, key)
		s, err := New(g, Options{Fanouts: fanouts, Workers: int(workers%17) + 1})
		if err != nil {
			t.Fatal(err)
		}
		var b Batch
		if err := s.Sample(seeds, key, &b); err != nil {
			t.Fatal(err)
		}
		if err := batchesEqual(&b, refSample(g, fanouts, seeds, key)); err != nil {
			t.Fatalf("fanouts %v workers %d: %v", fanouts, s.Workers(), err)
		}
	})
}
