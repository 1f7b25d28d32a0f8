package sampler

// Chi-square tests that every neighbour, and every subset of a row, is drawn
// uniformly.

import (
	"fmt"
	"math"
	"testing"

	"github.com/gnnloader/gnnloader/datasets"
)

// chiSquareCritical is the upper alpha quantile of chi-square with df
// degrees of freedom (Wilson-Hilferty), for z the normal quantile of 1-alpha.
func chiSquareCritical(df int, z float64) float64 {
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+z*math.Sqrt(a), 3)
}

// TestUniformity draws the neighbours of one high-degree node under many
// keys and runs a chi-square test (significance level 0.001, fixed keys so
// the outcome is reproducible) on how often each neighbour is picked. Every
// neighbour must be picked with probability fanout/degree.
func TestUniformity(t *testing.T) {
	for _, c := range []struct{ deg, fanout, draws int }{
		{200, 10, 20000}, // Floyd, positions on the stack
		{300, 40, 5000},  // Floyd, position set
		{50, 49, 2000},   // almost all
		{64, 1, 64000},   // one pick
	} {
		t.Run(fmt.Sprintf("d%d_k%d", c.deg, c.fanout), func(t *testing.T) {
			n := int64(c.deg + 1)
			indptr := make([]int64, n+1)
			idx := make([]int32, 0, c.deg)
			for i := 1; i <= c.deg; i++ {
				idx = append(idx, int32(i))
			}
			for v := int64(1); v <= n; v++ {
				indptr[v] = int64(c.deg)
			}
			g := &datasets.Graph{NumNodes: n, Indptr: indptr, Indices32: idx}
			s, err := New(g, Options{Fanouts: []int{c.fanout}, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]float64, c.deg)
			var b Batch
			seeds := []int64{0}
			for key := 0; key < c.draws; key++ {
				if err := s.Sample(seeds, uint64(key)*0x1234567, &b); err != nil {
					t.Fatal(err)
				}
				for _, src := range b.Src {
					counts[b.NID[src]-1]++
				}
			}
			expect := float64(c.draws) * float64(c.fanout) / float64(c.deg)
			// One draw of a k-subset of d (p = k/d) gives indicator
			// covariance p(1-p)*d/(d-1)*(I - J/d), so the Pearson statistic
			// divided by (1-p)*d/(d-1) is chi-square with d-1 degrees of
			// freedom for many draws.
			p := float64(c.fanout) / float64(c.deg)
			scale := (1 - p) * float64(c.deg) / float64(c.deg-1)
			chi := 0.0
			for _, x := range counts {
				chi += (x - expect) * (x - expect) / (expect * scale)
			}
			crit := chiSquareCritical(c.deg-1, 3.0902) // alpha = 0.001
			t.Logf("chi2 = %.1f, df = %d, critical(0.001) = %.1f", chi, c.deg-1, crit)
			if chi > crit {
				t.Fatalf("neighbour counts not uniform: chi2 %.1f > %.1f", chi, crit)
			}
		})
	}
}

// TestSubsetUniformity checks the stronger property: every k-subset of the
// row is equally likely (d = 7, k = 3: 35 subsets; chi-square, alpha 0.001).
func TestSubsetUniformity(t *testing.T) {
	const d, k, draws = 7, 3, 35000
	idx := []int32{1, 2, 3, 4, 5, 6, 7}
	indptr := []int64{0, d, d, d, d, d, d, d, d}
	g := &datasets.Graph{NumNodes: 8, Indptr: indptr, Indices32: idx}
	s, err := New(g, Options{Fanouts: []int{k}, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int]float64{}
	var b Batch
	for key := uint64(0); key < draws; key++ {
		if err := s.Sample([]int64{0}, key, &b); err != nil {
			t.Fatal(err)
		}
		mask := 0
		for _, src := range b.Src {
			mask |= 1 << b.NID[src]
		}
		counts[mask]++
	}
	checkUniformSubsets(t, counts, draws)
}

// checkUniformSubsets: draws of 3 of 7 neighbours came out as all 35
// subsets (counts by subset mask), evenly (chi-square at p = 0.001).
func checkUniformSubsets(t *testing.T, counts map[int]float64, draws int) {
	t.Helper()
	if len(counts) != 35 {
		t.Fatalf("%d distinct subsets, want 35", len(counts))
	}
	expect := float64(draws) / 35
	chi := 0.0
	for _, x := range counts {
		chi += (x - expect) * (x - expect) / expect
	}
	crit := chiSquareCritical(34, 3.0902)
	t.Logf("chi2 = %.1f, df = 34, critical(0.001) = %.1f", chi, crit)
	if chi > crit {
		t.Fatalf("subsets not uniform: chi2 %.1f > %.1f", chi, crit)
	}
}
