//go:build !cgo || nocuda

package cudaext

// Graph is an instantiated CUDA graph; none can be made in this build.
type Graph struct{}

// BeginCapture fails: no CUDA in this build.
func (s *Stream) BeginCapture() error { return errNoCUDA }

// EndCapture fails: no CUDA in this build.
func (s *Stream) EndCapture() (*Graph, error) { return nil, errNoCUDA }

// Launch fails: no CUDA in this build.
func (g *Graph) Launch(s *Stream) error { return errNoCUDA }

// Destroy has nothing to destroy.
func (g *Graph) Destroy() error { return nil }
