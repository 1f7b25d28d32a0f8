package main

import (
	"slices"
	"strings"
	"testing"
)

// bench sample --gpu-lanes takes lane counts of 1 to 32 (or none) and
// refuses anything else, naming the flag, before it loads a dataset.
func TestBenchSampleGPULanes(t *testing.T) {
	for _, v := range []string{"0", "33", "8,x", ""} {
		code, _, errOut := runCmd(t, "bench", "sample", "--gpu-lanes", v)
		if code != 2 || !strings.Contains(errOut, "--gpu-lanes") {
			t.Errorf("bench sample --gpu-lanes %q: exit %d, want 2 naming the flag\n%s", v, code, errOut)
		}
	}
	for _, tc := range []struct {
		v    string
		want []int
	}{{"none", []int{}}, {"8,32", []int{8, 32}}, {"1", []int{1}}} {
		if got, err := parseLanes(tc.v); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseLanes(%q) = %v, %v; want %v", tc.v, got, err, tc.want)
		}
	}
}
