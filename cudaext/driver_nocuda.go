//go:build !cgo || nocuda

package cudaext

import "fmt"

// errNoCUDA is what every driver call returns in a build without CUDA
// (CGO_ENABLED=0, or -tags nocuda): it wraps ErrNoDriver, so callers take
// their CPU path as they do on a machine without a driver, and it says why.
var errNoCUDA = fmt.Errorf("cudaext: this binary was built without CUDA (nocuda): %w", ErrNoDriver)

// Init reports that this build has no CUDA: an error wrapping ErrNoDriver.
func Init() error { return errNoCUDA }

// DriverVersion fails: no CUDA in this build.
func DriverVersion() (int, error) { return 0, errNoCUDA }

// DeviceCount fails: no CUDA in this build.
func DeviceCount() (int, error) { return 0, errNoCUDA }

// Device is a CUDA device handle; none can be had in this build.
type Device struct {
	Ordinal int
}

// GetDevice fails: no CUDA in this build.
func GetDevice(ordinal int) (Device, error) { return Device{}, errNoCUDA }

// Attribute fails: no CUDA in this build.
func (d Device) Attribute(a DeviceAttribute) (int, error) { return 0, errNoCUDA }

// Name fails: no CUDA in this build.
func (d Device) Name() (string, error) { return "", errNoCUDA }

// PCIBusID fails: no CUDA in this build.
func (d Device) PCIBusID() (string, error) { return "", errNoCUDA }

// TotalMem fails: no CUDA in this build.
func (d Device) TotalMem() (int64, error) { return 0, errNoCUDA }

// CanAccessPeer fails: no CUDA in this build.
func (d Device) CanAccessPeer(peer Device) (bool, error) { return false, errNoCUDA }

// Context is a retained primary context; none can be had in this build.
type Context struct {
	Device Device
}

// RetainPrimaryContext fails: no CUDA in this build.
func (d Device) RetainPrimaryContext() (*Context, error) { return nil, errNoCUDA }

// Release has nothing to release.
func (c *Context) Release() error { return nil }

// SetCurrent fails: no CUDA in this build.
func (c *Context) SetCurrent() error { return errNoCUDA }

// Synchronize fails: no CUDA in this build.
func Synchronize() error { return errNoCUDA }

// EnablePeerAccess fails: no CUDA in this build.
func EnablePeerAccess(peer *Context) error { return errNoCUDA }
