//go:build cgo && !nocuda

package cudaext

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// busString is an NVML bus id (NUL-terminated C chars) as a Go string.
func busString(b [32]int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// nvmlFacts adds NVML's facts. Every NVML call is gated on a successful Init:
// without one, any other call kills the process.
func nvmlFacts(si *SystemInfo, byBus map[string]int) error {
	if r := nvml.Init(); r != nvml.SUCCESS {
		return fmt.Errorf("nvml: init: %s", nvml.ErrorString(r))
	}
	defer nvml.Shutdown()
	if v, r := nvml.SystemGetDriverVersion(); r == nvml.SUCCESS {
		si.Driver = v
	}
	n, r := nvml.DeviceGetCount()
	if r != nvml.SUCCESS {
		return fmt.Errorf("nvml: device count: %s", nvml.ErrorString(r))
	}
	for k := range n {
		h, r := nvml.DeviceGetHandleByIndex(k)
		if r != nvml.SUCCESS {
			continue
		}
		pci, r := h.GetPciInfo()
		if r != nvml.SUCCESS {
			continue
		}
		i, ok := byBus[normBus(busString(pci.BusId))]
		if !ok {
			continue // not visible to CUDA (CUDA_VISIBLE_DEVICES)
		}
		di := &si.Devices[i]
		if m, r := h.GetMemoryInfo(); r == nvml.SUCCESS {
			di.MemoryUsed = int64(m.Used)
		}
		di.PCIeGen, _ = h.GetCurrPcieLinkGeneration()
		di.PCIeWidth, _ = h.GetCurrPcieLinkWidth()
		di.PCIeMaxGen, _ = h.GetMaxPcieLinkGeneration()
		di.PCIeMaxWidth, _ = h.GetMaxPcieLinkWidth()
		peers := map[int]bool{}
		for l := range nvml.NVLINK_MAX_LINKS {
			st, r := h.GetNvLinkState(l)
			if r != nvml.SUCCESS || st != nvml.FEATURE_ENABLED {
				continue
			}
			di.NVLinksActive++
			if rp, r := h.GetNvLinkRemotePciInfo(l); r == nvml.SUCCESS {
				if j, ok := byBus[normBus(busString(rp.BusId))]; ok && !peers[j] {
					peers[j] = true
					di.NVLinkPeers = append(di.NVLinkPeers, j)
				}
			}
		}
	}
	return nil
}
