// Package gatherhook reaches into gather's CUDA backend for its benchmark
// (internal/bench/gatherbench) and nothing else: it times the index upload
// and the kernel of a gather or a sweep apart, and forces the any-size
// kernels, none of which belongs in gather's API. Package gather sets the
// hooks in its init; the benchmark gets them with Get.
//
// It sits below gather, so it names gather's types by type parameters.
package gatherhook

import (
	"fmt"

	"github.com/gnnloader/gnnloader/cudaext"
)

// Hooks are the CUDA backend's steps, one at a time. CUDA is *gather.CUDA,
// Options *gather.CUDAOptions, Plan *gather.SweepPlan, Part gather.SweepPart.
type Hooks[CUDA, Options, Plan, Part any] struct {
	// Lock takes the backend's lock and returns its unlock. Stage calls and
	// their launches run with it held and the backend's context current.
	Lock func(g CUDA) (unlock func())
	// StageGather uploads the rows nid (read in order's order; nil: sampled
	// order) and returns the launch of the gather kernel over them into the
	// device memory at dst, which may be called again and again.
	StageGather func(g CUDA, nid []int64, order []int32) (launch func(dst cudaext.DevicePtr) error, err error)
	// StageSweep uploads the plan's arrays and returns the launch of the
	// sweep kernel over them into parts' destinations.
	StageSweep func(g CUDA, pl Plan, parts []Part) (launch func() error, err error)
	// AnySize makes o force the any-size kernels (for rows whose size is a
	// multiple of 16 they would not run otherwise); with wholeLines they
	// read whole 128-byte lines rather than the chunks a row overlaps.
	AnySize func(o Options, wholeLines bool)
}

var hooks any

// Set is called once, by package gather's init.
func Set[CUDA, Options, Plan, Part any](h Hooks[CUDA, Options, Plan, Part]) { hooks = h }

// Get returns the hooks gather set. It panics when the type arguments are
// not gather's types (a programming error, found by the first test).
func Get[CUDA, Options, Plan, Part any]() Hooks[CUDA, Options, Plan, Part] {
	h, ok := hooks.(Hooks[CUDA, Options, Plan, Part])
	if !ok {
		panic(fmt.Sprintf("gatherhook: gather set %T, not %T", hooks, h))
	}
	return h
}
