package serve

import (
	"encoding/binary"
	"slices"

	"golang.org/x/sys/unix"
)

// POSIX access ACL in the kernel's extended-attribute form
// (system.posix_acl_access): a version word, then entries of
// {u16 tag, u16 permissions, u32 id} sorted by tag, then id.
const (
	aclVersion  = 2
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
	aclNoID     = 0xffffffff
	aclRW       = 6
)

// setACL gives access.UIDs and access.GIDs read-write access to path on top
// of its mode bits (owner and group bits as in access.Mode, others none).
func setACL(path string, access socketAccess) error {
	bits := func(shift uint) uint16 { return uint16(access.Mode>>shift) & 7 }
	var b []byte
	add := func(tag, perm uint16, id uint32) {
		b = binary.LittleEndian.AppendUint16(b, tag)
		b = binary.LittleEndian.AppendUint16(b, perm)
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	b = binary.LittleEndian.AppendUint32(b, aclVersion)
	add(aclUserObj, bits(6), aclNoID)
	for _, u := range slices.Compact(slices.Sorted(slices.Values(access.UIDs))) {
		add(aclUser, aclRW, uint32(u))
	}
	add(aclGroupObj, bits(3), aclNoID)
	for _, g := range slices.Compact(slices.Sorted(slices.Values(access.GIDs))) {
		add(aclGroup, aclRW, uint32(g))
	}
	add(aclMask, aclRW|bits(3), aclNoID)
	add(aclOther, bits(0), aclNoID)
	return unix.Setxattr(path, "system.posix_acl_access", b, 0)
}
