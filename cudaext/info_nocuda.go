//go:build !cgo || nocuda

package cudaext

// nvmlFacts has no NVML in this build (Info never gets this far: it stops
// at DeviceCount's error).
func nvmlFacts(si *SystemInfo, byBus map[string]int) error { return errNoCUDA }
