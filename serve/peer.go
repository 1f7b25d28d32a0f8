package serve

// Who is at the other end of a connection, and whether they may use the
// daemon.

import (
	"fmt"
	"net"
	"os"
	"slices"

	"github.com/gnnloader/gnnloader/ipc"
)

// peer is who is at the other end of a connection.
type peer struct {
	pid, uid, gid int
	groups        []int // supplementary groups
}

type peerCredFunc func(*net.UnixConn) (peer, error)

func readPeer(uc *net.UnixConn) (peer, error) {
	pid, uid, gid, err := ipc.PeerCred(uc)
	if err != nil {
		return peer{}, err
	}
	groups, err := ipc.PeerGroups(uc)
	if err != nil {
		return peer{}, fmt.Errorf("supplementary groups: %w", err)
	}
	return peer{pid: pid, uid: uid, gid: gid, groups: groups}, nil
}

// allowed reports whether p may use the daemon: the daemon's own uid, an
// allowed uid, or an allowed gid as its primary or a supplementary group.
func (s *Server) allowed(p peer) bool {
	if p.uid == os.Getuid() || slices.Contains(s.cfg.AllowUIDs, p.uid) || slices.Contains(s.cfg.AllowGIDs, p.gid) {
		return true
	}
	for _, g := range p.groups {
		if slices.Contains(s.cfg.AllowGIDs, g) {
			return true
		}
	}
	return false
}
