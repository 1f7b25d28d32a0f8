package ring

import (
	"fmt"

	"github.com/gnnloader/gnnloader/cudaext"
)

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

// TopoLink is one step of the ring over a host's GPUs, as the topology
// describes it: the GPU a rank reads from (From) and the one that reads (To).
type TopoLink struct {
	From, To int    // device ordinals
	Via      string // "NVLink", "peer (PCIe)", "host (pinned memory)" or "same device"
}

func (l TopoLink) String() string { return fmt.Sprintf("GPU %d -> GPU %d: %s", l.From, l.To, l.Via) }

// Linked is the `linked` of Order for a host described by si: two GPUs are
// linked when NVML reports an active NVLink between them, or (where the host
// has no NVLink at all) when they have peer access.
func Linked(si cudaext.SystemInfo) func(a, b int) bool {
	nv, peer := map[[2]int]bool{}, map[[2]int]bool{}
	anyNV := false
	for _, d := range si.Devices {
		for _, p := range d.NVLinkPeers {
			nv[[2]int{d.Ordinal, p}], anyNV = true, true
		}
		for _, p := range d.PeerAccess {
			peer[[2]int{d.Ordinal, p}] = true
		}
	}
	return func(a, b int) bool {
		if a == b {
			return true
		}
		if anyNV {
			return nv[[2]int{a, b}] || nv[[2]int{b, a}]
		}
		return peer[[2]int{a, b}] && peer[[2]int{b, a}]
	}
}

// TopoRing is the ring the daemon would run over every GPU of si (one rank
// per GPU, in Order), and how each step moves data: what `loaderd info`
// prints.
func TopoRing(si cudaext.SystemInfo) []TopoLink {
	n := len(si.Devices)
	if n < 2 {
		return nil
	}
	ord := Order(n, Linked(si))
	has := func(list []int, x int) bool {
		for _, v := range list {
			if v == x {
				return true
			}
		}
		return false
	}
	var out []TopoLink
	for i := range ord {
		from, to := ord[(i-1+n)%n], ord[i]
		via := "host (pinned memory)"
		switch {
		case has(si.Devices[to].NVLinkPeers, from):
			via = "NVLink"
		case has(si.Devices[to].PeerAccess, from):
			via = "peer (PCIe)"
		}
		out = append(out, TopoLink{From: from, To: to, Via: via})
	}
	return out
}
