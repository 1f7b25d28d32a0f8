package serve

import "testing"

// TestRepeats: custom seeds that name a node twice are told apart from
// distinct ones (they are sampled on the CPU even for GPU slots).
func TestRepeats(t *testing.T) {
	for _, c := range []struct {
		ids  []int64
		n    int64
		want bool
	}{
		{nil, 10, false},
		{[]int64{0, 1, 2, 9}, 10, false},
		{[]int64{3, 64, 3}, 100, true},
		{[]int64{63, 64, 127, 128, 64}, 200, true},
		{[]int64{5, -1, 12, -1}, 10, false}, // out of range: refused elsewhere, not a repeat here
	} {
		if got := repeats(c.ids, c.n); got != c.want {
			t.Errorf("repeats(%v, %d) = %v, want %v", c.ids, c.n, got, c.want)
		}
	}
}
