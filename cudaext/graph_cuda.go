//go:build cgo && !nocuda

package cudaext

/*
#include "cu.h"
*/
import "C"

import "errors"

// Graph is an instantiated CUDA graph (a CUgraphExec): work captured once
// from a stream and launched again as one submission.
type Graph struct{ h C.CUgraphExec }

// captureRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED: other threads' CUDA
// calls (allocations, synchronisations) go on while a stream is captured.
const captureRelaxed = 2

// BeginCapture starts recording the work enqueued on s into a graph instead
// of running it, until EndCapture. ErrNotSupported where the driver has no
// graphs.
func (s *Stream) BeginCapture() error {
	return check("cuStreamBeginCapture", C.gnn_cuStreamBeginCapture(s.h, captureRelaxed))
}

// EndCapture ends the recording begun by BeginCapture and instantiates what
// was recorded. It always ends the capture, so s is usable again whatever
// it returns; an enqueue that failed during the capture fails it here too.
func (s *Stream) EndCapture() (*Graph, error) {
	var g C.CUgraph
	if err := check("cuStreamEndCapture", C.gnn_cuStreamEndCapture(s.h, &g)); err != nil {
		return nil, err
	}
	var e C.CUgraphExec
	err := check("cuGraphInstantiate", C.gnn_cuGraphInstantiate(&e, g))
	err = errors.Join(err, check("cuGraphDestroy", C.gnn_cuGraphDestroy(g)))
	if err != nil {
		if e != nil {
			C.gnn_cuGraphExecDestroy(e)
		}
		return nil, err
	}
	return &Graph{h: e}, nil
}

// Launch enqueues the graph's work on s, as one submission. Launches of one
// graph run one after another, never at once.
func (g *Graph) Launch(s *Stream) error {
	return check("cuGraphLaunch", C.gnn_cuGraphLaunch(g.h, s.h))
}

// Destroy frees the graph; launches already enqueued still complete.
func (g *Graph) Destroy() error {
	if g == nil || g.h == nil {
		return nil
	}
	err := check("cuGraphExecDestroy", C.gnn_cuGraphExecDestroy(g.h))
	g.h = nil
	return err
}
