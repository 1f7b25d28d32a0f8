package gather

import (
	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/internal/gatherhook"
)

// The CUDA backend's steps one at a time, for its benchmark only
// (internal/bench/gatherbench, through internal/gatherhook): the index
// upload apart from the kernel, and the any-size kernels forced.
func init() {
	gatherhook.Set(gatherhook.Hooks[*CUDA, *CUDAOptions, *SweepPlan, SweepPart]{
		Lock: func(g *CUDA) func() {
			g.mu.Lock()
			return g.mu.Unlock
		},
		StageGather: func(g *CUDA, nid []int64, order []int32) (func(cudaext.DevicePtr) error, error) {
			ix, err := g.prepareGather(nid, order)
			if err != nil {
				return nil, err
			}
			return func(dst cudaext.DevicePtr) error { return g.launchGather(Dest{Device: dst}, ix) }, nil
		},
		StageSweep: func(g *CUDA, pl *SweepPlan, parts []SweepPart) (func() error, error) {
			align := uint64(0)
			for _, p := range parts {
				align |= uint64(p.Dst.Device)
			}
			ix, err := g.prepareSweep(pl)
			if err != nil {
				return nil, err
			}
			return func() error { return g.launchSweep(parts, align, ix) }, nil
		},
		AnySize: func(o *CUDAOptions, wholeLines bool) { o.forceAny, o.fullLines = true, wholeLines },
	})
}
