package datasets

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestStratifiedSplit(t *testing.T) {
	labels := make([]int32, 1000)
	for i := range labels {
		labels[i] = int32(i % 7)
		if i%13 == 0 {
			labels[i] = -1
		}
	}
	s, err := StratifiedSplit(labels, 7, [3]float64{0.6, 0.2, 0.2}, 42)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	for _, name := range SplitNames {
		if !slices.IsSorted(s[name]) {
			t.Errorf("%s not sorted", name)
		}
		for _, v := range s[name] {
			if seen[v] != "" {
				t.Fatalf("node %d in %s and %s", v, seen[v], name)
			}
			if labels[v] == -1 {
				t.Fatalf("unlabelled node %d in %s", v, name)
			}
			seen[v] = name
		}
	}
	labelled := 0
	for _, y := range labels {
		if y >= 0 {
			labelled++
		}
	}
	if len(seen) != labelled {
		t.Errorf("%d of %d labelled nodes split", len(seen), labelled)
	}
	// per class: round(0.6 n_c), round(0.8 n_c) - that
	for c := int32(0); c < 7; c++ {
		var nc, tr, va int
		for v, y := range labels {
			if y == c {
				nc++
				switch seen[int64(v)] {
				case SplitTrain:
					tr++
				case SplitValid:
					va++
				}
			}
		}
		if wantTr := int(float64(nc)*0.6 + 0.5); tr != wantTr {
			t.Errorf("class %d: %d train of %d, want %d", c, tr, nc, wantTr)
		}
		if wantVa := int(float64(nc)*0.8+0.5) - int(float64(nc)*0.6+0.5); va != wantVa {
			t.Errorf("class %d: %d valid of %d, want %d", c, va, nc, wantVa)
		}
	}
	again, _ := StratifiedSplit(labels, 7, [3]float64{0.6, 0.2, 0.2}, 42)
	other, _ := StratifiedSplit(labels, 7, [3]float64{0.6, 0.2, 0.2}, 43)
	if fmt.Sprint(again) != fmt.Sprint(s) {
		t.Error("same seed, different split")
	}
	if fmt.Sprint(other) == fmt.Sprint(s) {
		t.Error("different seed, same split")
	}
	// Pinned: the split must never change with the Go version.
	small, _ := StratifiedSplit([]int32{0, 1, 0, 1, 0, 1, 0, 1, 0, 1}, 2, [3]float64{0.4, 0.2, 0.4}, 1)
	if got := fmt.Sprint(small[SplitTrain], small[SplitValid], small[SplitTest]); got != impPinnedSplit {
		t.Errorf("split of a fixed input changed: %s, was %s", got, impPinnedSplit)
	}
	part, _ := StratifiedSplit(labels, 7, [3]float64{0.1, 0.1, 0}, 1)
	if len(part[SplitTest]) != 0 || len(part[SplitTrain]) < 80 || len(part[SplitTrain]) > 100 {
		t.Errorf("partial split sizes %d/%d/%d", len(part[SplitTrain]), len(part[SplitValid]), len(part[SplitTest]))
	}
}

const impPinnedSplit = "[2 3 6 7] [5 8] [0 1 4 9]"

func TestStratifiedSplitBad(t *testing.T) {
	for _, tc := range []struct {
		labels []int32
		c      int
		r      [3]float64
		want   string
	}{
		{[]int32{0, 1}, 2, [3]float64{0.7, 0.2, 0.2}, "at most 1"},
		{[]int32{0, 1}, 2, [3]float64{-0.1, 0.2, 0.2}, "train ratio -0.1 must be >= 0"},
		{[]int32{0, 1}, 2, [3]float64{}, "more than 0"},
		{[]int32{0, 2}, 2, [3]float64{0.5, 0.5, 0}, "node 1 has label 2 outside [0, 2)"},
		{[]int32{0, -2}, 2, [3]float64{0.5, 0.5, 0}, "node 1 has label -2"},
		{[]int32{0}, 0, [3]float64{0.5, 0.5, 0}, "num_classes 0"},
	} {
		if _, err := StratifiedSplit(tc.labels, tc.c, tc.r, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %d %v: %v, want %q", tc.labels, tc.c, tc.r, err, tc.want)
		}
	}
}
