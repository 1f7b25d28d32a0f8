//go:build !cgo || nocuda

package cudaext

// Monitor reads NVML counters; none can be made in this build.
type Monitor struct{}

// NewMonitor fails: no NVML in this build.
func NewMonitor() (*Monitor, error) { return nil, errNoCUDA }

// Sample reads nothing.
func (m *Monitor) Sample() []DeviceSample { return nil }

// Close does nothing.
func (m *Monitor) Close() {}
