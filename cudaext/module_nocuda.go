//go:build !cgo || nocuda

package cudaext

// Module is a loaded kernel image; none can be loaded in this build.
type Module struct{}

// LoadModule fails: no CUDA in this build.
func LoadModule(image []byte) (*Module, error) { return nil, errNoCUDA }

// Function fails: no CUDA in this build.
func (m *Module) Function(name string) (*Function, error) { return nil, errNoCUDA }

// Unload has nothing to unload.
func (m *Module) Unload() error { return nil }

// Function is a kernel in a loaded module; none can be had in this build.
type Function struct {
	Name string
}

// Launch fails: no CUDA in this build.
func (f *Function) Launch(grid, block Dim3, sharedMem int, s *Stream, args ...any) error {
	return errNoCUDA
}

// MaxActiveBlocksPerSM fails: no CUDA in this build.
func (f *Function) MaxActiveBlocksPerSM(blockSize, sharedMem int) (int, error) { return 0, errNoCUDA }
