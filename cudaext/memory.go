package cudaext

import "unsafe"

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uint64

// CopyToHost copies device memory into a Go slice and waits (for tests and
// small reads). b may be Go heap memory.
func CopyToHost(b []byte, src DevicePtr, s *Stream) error {
	if len(b) == 0 {
		return nil
	}
	if err := MemcpyDtoHAsync(unsafe.Pointer(&b[0]), src, int64(len(b)), s); err != nil {
		return err
	}
	return s.Synchronize()
}

// CopyFromHost copies a Go slice to device memory and waits.
func CopyFromHost(dst DevicePtr, b []byte, s *Stream) error {
	if len(b) == 0 {
		return nil
	}
	if err := MemcpyHtoDAsync(dst, unsafe.Pointer(&b[0]), int64(len(b)), s); err != nil {
		return err
	}
	return s.Synchronize()
}

// HostRegisterFlags are cuMemHostRegister's flags.
type HostRegisterFlags uint

const (
	HostRegisterPortable  HostRegisterFlags = 0x1 // visible to every context
	HostRegisterDeviceMap HostRegisterFlags = 0x2 // mapped into the device address space
	HostRegisterReadOnly  HostRegisterFlags = 0x8
)

// IPCMemHandle is the 64-byte handle another process opens an allocation with.
type IPCMemHandle [64]byte
