package cudaext

import "runtime"

// Library is the file Init opens.
const Library = "libcuda.so.1"

// DeviceAttribute is a CUdevice_attribute.
type DeviceAttribute int

// Attributes gnnloader reads.
const (
	AttrMaxThreadsPerBlock      DeviceAttribute = 1
	AttrMultiprocessorCount     DeviceAttribute = 16
	AttrCanMapHostMemory        DeviceAttribute = 19
	AttrPCIBusID                DeviceAttribute = 33
	AttrPCIDeviceID             DeviceAttribute = 34
	AttrUnifiedAddressing       DeviceAttribute = 41
	AttrComputeCapabilityMajor  DeviceAttribute = 75
	AttrComputeCapabilityMinor  DeviceAttribute = 76
	AttrL2CacheSize             DeviceAttribute = 38
	AttrMaxThreadsPerSM         DeviceAttribute = 39
	AttrCanUseHostPointerForReg DeviceAttribute = 91
)

// Do runs fn on the calling goroutine locked to its OS thread with c current.
func (c *Context) Do(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.SetCurrent(); err != nil {
		return err
	}
	return fn()
}
