//go:build !linux

package serve

import "errors"

func setACL(path string, access socketAccess) error {
	return errors.New("POSIX ACLs on the socket need Linux")
}
