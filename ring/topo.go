package ring

// Order chooses the ring order of n devices: a cycle in which consecutive
// devices are linked (linked(a, b): an NVLink, or at least peer access, from
// the topology NVML reports), preferring the ordinal order when it is one.
// Where no such cycle exists it returns the ordinal order (the links without
// peer access then go through pinned host memory). Order[i] is the device at
// ring position i; position 0 is always device 0.
func Order(n int, linked func(a, b int) bool) []int {
	ord := make([]int, n)
	for i := range ord {
		ord[i] = i
	}
	if n <= 2 {
		return ord
	}
	ok := func(p []int) bool {
		for i := range p {
			if !linked(p[i], p[(i+1)%len(p)]) {
				return false
			}
		}
		return true
	}
	if ok(ord) {
		return ord
	}
	// Depth-first search for a Hamiltonian cycle (n <= 8: at most 7! paths).
	path := []int{0}
	used := make([]bool, n)
	used[0] = true
	var dfs func() bool
	dfs = func() bool {
		if len(path) == n {
			return linked(path[n-1], path[0])
		}
		last := path[len(path)-1]
		for d := 1; d < n; d++ {
			if !used[d] && linked(last, d) {
				used[d] = true
				path = append(path, d)
				if dfs() {
					return true
				}
				path = path[:len(path)-1]
				used[d] = false
			}
		}
		return false
	}
	if n <= 12 && dfs() {
		return path
	}
	return ord
}
