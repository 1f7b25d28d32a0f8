package serve

import (
	"strings"

	"github.com/gnnloader/gnnloader/ipc"
)

// checkV3 refuses what protocol 3 asks for that this daemon does not serve
// (yet), and what does not fit the dataset: per-type fields on a
// homogeneous dataset; seed times an Open would drop. parseTemporal
// (temporal.go) checks temporal requests.
func (ss *session) checkV3(m *ipc.Open) error {
	src := ss.srv.src
	switch {
	case ss.times != nil && m.Temporal == "" && (m.Split == ipc.CustomSplit || strings.HasPrefix(m.Split, LinkPrefix)):
		return perrf(ipc.CodeBadRequest, "the Seeds message carried seed times, which only temporal sampling uses: set temporal, or send the seeds without times")
	case src.Hetero == nil && m.InputType != "":
		return perrf(ipc.CodeBadRequest, "input_type %q: dataset %s is homogeneous (it has no node types); leave input_type empty", m.InputType, src.Data.Name)
	case src.Hetero != nil:
		return perrf(ipc.CodeBadRequest, "dataset %s is heterogeneous, and this daemon does not serve heterogeneous batches yet", src.Data.Name)
	}
	return nil
}
