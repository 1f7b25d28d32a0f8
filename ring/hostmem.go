package ring

import (
	"syscall"

	"github.com/gnnloader/gnnloader/cudaext"
)

// hostAlloc maps n bytes of zeroed memory and registers it (portable, mapped):
// under unified addressing its device address is its host address.
func hostAlloc(n int) ([]byte, cudaext.DevicePtr, error) {
	n = (n + 4095) &^ 4095
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, 0, err
	}
	if err := cudaext.HostRegister(b, cudaext.HostRegisterPortable|cudaext.HostRegisterDeviceMap); err != nil {
		syscall.Munmap(b)
		return nil, 0, err
	}
	p, err := cudaext.HostDevicePointer(b)
	if err != nil {
		cudaext.HostUnregister(b)
		syscall.Munmap(b)
		return nil, 0, err
	}
	return b, p, nil
}

func hostFree(b []byte) {
	if b != nil {
		cudaext.HostUnregister(b)
		syscall.Munmap(b)
	}
}
