package datasets

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// StratifiedSplit splits the labelled nodes into train, valid and test so
// that every class is divided in the given ratios. Within class c the nodes
// are shuffled (Fisher-Yates driven by PCG(seed, c)) and cut at
// round(r0*n_c) and round((r0+r1)*n_c) and round((r0+r1+r2)*n_c); each
// split is returned sorted ascending. Unlabelled nodes (-1) are in no split.
// The result depends only on the arguments (no Go-version-dependent
// shuffling). Ratios must be >= 0, not all zero, and sum to at most 1.
func StratifiedSplit(labels []int32, numClasses int, ratios [3]float64, seed uint64) (map[string][]int64, error) {
	sum := 0.0
	for i, r := range ratios {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("split: %s ratio %g must be >= 0", SplitNames[i], r)
		}
		sum += r
	}
	if sum <= 0 || sum > 1+1e-9 {
		return nil, fmt.Errorf("split: ratios %g,%g,%g must sum to more than 0 and at most 1", ratios[0], ratios[1], ratios[2])
	}
	if numClasses <= 0 {
		return nil, fmt.Errorf("split: num_classes %d must be positive", numClasses)
	}
	byClass := make([][]int64, numClasses)
	for v, y := range labels {
		switch {
		case y == -1:
			continue
		case y < 0 || int(y) >= numClasses:
			return nil, fmt.Errorf("split: node %d has label %d outside [0, %d)", v, y, numClasses)
		}
		byClass[y] = append(byClass[y], int64(v))
	}
	splits := map[string][]int64{SplitTrain: {}, SplitValid: {}, SplitTest: {}}
	cum := [3]float64{ratios[0], ratios[0] + ratios[1], min(sum, 1)}
	for c, nodes := range byClass {
		rng := rand.NewPCG(seed, uint64(c))
		for i := len(nodes) - 1; i > 0; i-- {
			j := boundedRand(rng, uint64(i+1))
			nodes[i], nodes[j] = nodes[j], nodes[i]
		}
		n := float64(len(nodes))
		cut0 := int(math.Round(cum[0] * n))
		cut1 := max(cut0, int(math.Round(cum[1]*n)))
		cut2 := min(len(nodes), max(cut1, int(math.Round(cum[2]*n))))
		splits[SplitTrain] = append(splits[SplitTrain], nodes[:cut0]...)
		splits[SplitValid] = append(splits[SplitValid], nodes[cut0:cut1]...)
		splits[SplitTest] = append(splits[SplitTest], nodes[cut1:cut2]...)
	}
	for _, s := range splits {
		slices.Sort(s)
	}
	return splits, nil
}

// boundedRand returns a uniform value in [0, n) (Lemire's method with
// rejection), fixed here so splits never change with the Go version.
func boundedRand(r *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}
