package cudaext

import (
	"fmt"
	"strings"
)

// SystemInfo describes the GPUs of this host, for `loaderd info`. It is a
// plain value: JSON-encode it or print it with String.
type SystemInfo struct {
	// GPU is false when no CUDA device can be used; Reason then says why.
	GPU         bool         `json:"gpu"`
	Reason      string       `json:"reason,omitempty"`
	CUDAVersion string       `json:"cuda_version,omitempty"` // what the driver supports, e.g. "13.0"
	Driver      string       `json:"driver,omitempty"`       // NVML's driver version, e.g. "580.159.04"
	NVMLError   string       `json:"nvml_error,omitempty"`   // why NVML facts are missing, if they are
	Devices     []DeviceInfo `json:"devices,omitempty"`
}

// DeviceInfo is one CUDA device. PCIe and NVLink fields come from NVML and
// are zero when NVML is unavailable.
type DeviceInfo struct {
	Ordinal           int    `json:"ordinal"`
	Name              string `json:"name"`
	PCIBusID          string `json:"pci_bus_id"`
	ComputeCapability string `json:"compute_capability"`
	SMs               int    `json:"sms"`
	MemoryTotal       int64  `json:"memory_total"`
	MemoryUsed        int64  `json:"memory_used,omitempty"`
	PCIeGen           int    `json:"pcie_gen,omitempty"`
	PCIeWidth         int    `json:"pcie_width,omitempty"`
	PCIeMaxGen        int    `json:"pcie_max_gen,omitempty"`
	PCIeMaxWidth      int    `json:"pcie_max_width,omitempty"`
	NVLinksActive     int    `json:"nvlinks_active"`
	// PeerAccess lists the ordinals this device can access directly (cuDeviceCanAccessPeer).
	PeerAccess []int `json:"peer_access"`
	// NVLinkPeers lists the ordinals reached over an active NVLink.
	NVLinkPeers []int `json:"nvlink_peers,omitempty"`
}

// Info gathers what the CUDA driver and NVML say about this host's GPUs. It
// never fails: without a driver it returns GPU false and the reason.
func Info() SystemInfo {
	var si SystemInfo
	n, err := DeviceCount()
	if err == nil && n == 0 {
		err = ErrNoDevice
	}
	if err != nil {
		si.Reason = err.Error()
		return si
	}
	if v, err := DriverVersion(); err == nil {
		si.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	devs := make([]Device, n)
	byBus := map[string]int{}
	for i := range n {
		d, err := GetDevice(i)
		if err != nil {
			si.Reason = err.Error()
			return si
		}
		devs[i] = d
		di := DeviceInfo{Ordinal: i}
		di.Name, _ = d.Name()
		di.PCIBusID, _ = d.PCIBusID()
		byBus[normBus(di.PCIBusID)] = i
		maj, _ := d.Attribute(AttrComputeCapabilityMajor)
		mnr, _ := d.Attribute(AttrComputeCapabilityMinor)
		di.ComputeCapability = fmt.Sprintf("%d.%d", maj, mnr)
		di.SMs, _ = d.Attribute(AttrMultiprocessorCount)
		di.MemoryTotal, _ = d.TotalMem()
		di.PeerAccess = []int{}
		si.Devices = append(si.Devices, di)
	}
	for i := range devs {
		for j := range devs {
			if i != j {
				if ok, _ := devs[i].CanAccessPeer(devs[j]); ok {
					si.Devices[i].PeerAccess = append(si.Devices[i].PeerAccess, j)
				}
			}
		}
	}
	si.GPU = true
	if err := nvmlFacts(&si, byBus); err != nil {
		si.NVMLError = err.Error()
	}
	return si
}

// normBus reduces "00000000:18:00.0" and "0000:18:00.0" to "18:00.0".
func normBus(s string) string {
	s = strings.ToLower(strings.TrimRight(s, "\x00"))
	if i := strings.Index(s, ":"); i >= 0 && strings.Count(s, ":") == 2 {
		s = s[i+1:]
	}
	return s
}

// String prints the facts for people: "no GPU: <reason>" without one.
func (si SystemInfo) String() string {
	if !si.GPU {
		return "no GPU: " + si.Reason
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CUDA %s, driver %s, %d GPU(s)\n", si.CUDAVersion, si.Driver, len(si.Devices))
	if si.NVMLError != "" {
		fmt.Fprintf(&b, "  (no NVML facts: %s)\n", si.NVMLError)
	}
	for _, d := range si.Devices {
		fmt.Fprintf(&b, "GPU %d: %s, sm_%s, %d SMs, %.1f GiB (%.1f used), PCI %s, PCIe gen %d x%d (max gen %d x%d), NVLinks %d, peers %v",
			d.Ordinal, d.Name, strings.ReplaceAll(d.ComputeCapability, ".", ""), d.SMs,
			float64(d.MemoryTotal)/(1<<30), float64(d.MemoryUsed)/(1<<30), d.PCIBusID,
			d.PCIeGen, d.PCIeWidth, d.PCIeMaxGen, d.PCIeMaxWidth, d.NVLinksActive, d.PeerAccess)
		if len(d.NVLinkPeers) > 0 {
			fmt.Fprintf(&b, " (NVLink to %v)", d.NVLinkPeers)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
