//go:build cgo && !nocuda

package cudaext

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Monitor reads NVML counters for metrics. It holds NVML initialised until
// Close; every call is behind that successful Init (an NVML call without one
// kills the process). Safe for concurrent use.
type Monitor struct {
	mu      sync.Mutex
	devices []nvml.Device
	closed  bool
}

// NewMonitor initialises NVML; it fails (an ordinary error) without a
// driver.
func NewMonitor() (*Monitor, error) {
	if r := nvml.Init(); r != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: init: %s", nvml.ErrorString(r))
	}
	n, r := nvml.DeviceGetCount()
	if r != nvml.SUCCESS {
		nvml.Shutdown()
		return nil, fmt.Errorf("nvml: device count: %s", nvml.ErrorString(r))
	}
	m := &Monitor{}
	for i := 0; i < n; i++ {
		h, r := nvml.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			nvml.Shutdown()
			return nil, fmt.Errorf("nvml: device %d: %s", i, nvml.ErrorString(r))
		}
		m.devices = append(m.devices, h)
	}
	return m, nil
}

// Sample reads every device's counters; a counter NVML cannot read stays 0.
func (m *Monitor) Sample() []DeviceSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	out := make([]DeviceSample, len(m.devices))
	for i, h := range m.devices {
		s := DeviceSample{Index: i}
		if u, r := h.GetUtilizationRates(); r == nvml.SUCCESS {
			s.Utilization = float64(u.Gpu) / 100
		}
		if kb, r := h.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES); r == nvml.SUCCESS {
			s.PCIeRxBytesSec = float64(kb) * 1024
		}
		if kb, r := h.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES); r == nvml.SUCCESS {
			s.PCIeTxBytesSec = float64(kb) * 1024
		}
		if mi, r := h.GetMemoryInfo(); r == nvml.SUCCESS {
			s.MemUsed, s.MemTotal = mi.Used, mi.Total
		}
		out[i] = s
	}
	return out
}

// Close shuts NVML down.
func (m *Monitor) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		nvml.Shutdown()
	}
}
