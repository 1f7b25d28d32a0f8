package cudaext

// DeviceSample is one reading of a GPU's NVML counters.
type DeviceSample struct {
	Index          int
	Utilization    float64 // share of the last sample period a kernel ran, 0..1
	PCIeRxBytesSec float64 // host to device, bytes/s over NVML's 20 ms window
	PCIeTxBytesSec float64 // device to host
	MemUsed        uint64
	MemTotal       uint64
}
