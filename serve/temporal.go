package serve

import (
	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/sampler"
)

// temporalRequest is what Open.Temporal and Open.TimeAttr ask for: disjoint
// subgraphs (PyG's disjoint=True), with a time filter for "uniform" and
// "last" (PyG's temporal sampling, which is always disjoint).
type temporalRequest struct {
	timeAttr  string // "" (disjoint only), batch.NodeTime or batch.EdgeTime
	strategy  sampler.Strategy
	seedTimes []int64 // the custom seeds' times (Seeds.Times), by position; nil: none
}

// parseTemporal checks Open.Temporal and Open.TimeAttr (their grammar
// checked by Open.Validate) against the dataset, the device, the split and
// the custom seeds; nil for a request of ordinary (non-disjoint) batches.
func (ss *session) parseTemporal(m *ipc.Open, isLink bool) (*temporalRequest, error) {
	if m.Temporal == "" {
		return nil, nil // checkV3 refused seed times this Open would drop
	}
	d := ss.srv.src.Data
	switch {
	case isLink:
		return nil, perrf(ipc.CodeBadRequest, "temporal %q with link split %q is not supported yet: link batches are sampled without disjoint subgraphs or times", m.Temporal, m.Split)
	case m.InputType != "":
		return nil, perrf(ipc.CodeBadRequest, "temporal %q for node type %q: temporal and disjoint sampling of heterogeneous datasets is not supported yet", m.Temporal, m.InputType)
	}
	tr := &temporalRequest{timeAttr: m.TimeAttr}
	if m.Temporal == ipc.TemporalLast {
		tr.strategy = sampler.Last
	}
	switch m.TimeAttr {
	case batch.NodeTime:
		if d.NodeTime == nil {
			return nil, perrf(ipc.CodeBadRequest, "time_attr %q: dataset %s has no node_time (import it with one, or `loaderd gen --time`)", m.TimeAttr, d.Name)
		}
	case batch.EdgeTime:
		if d.EdgeTime == nil {
			return nil, perrf(ipc.CodeBadRequest, "time_attr %q: dataset %s has no edge_time (import it with one, or `loaderd gen --time`)", m.TimeAttr, d.Name)
		}
	}
	if m.Split == ipc.CustomSplit {
		tr.seedTimes = ss.times
	}
	switch {
	case tr.seedTimes != nil && m.TimeAttr == "":
		return nil, perrf(ipc.CodeBadRequest, "the Seeds message carried the seeds' times (input_time), but temporal %q has no time_attr to compare them with", m.Temporal)
	case tr.seedTimes == nil && m.TimeAttr == batch.EdgeTime:
		return nil, perrf(ipc.CodeBadRequest, "time_attr %q needs the seeds' times (input_time: custom seeds sent with times), as in PyG: a seed has no edge time of its own", m.TimeAttr)
	}
	return tr, nil
}

// newDisjointMode makes the mode of a temporal request.
func newDisjointMode(src *Source, tr *temporalRequest, no batch.NodeOptions) (batch.Mode, error) {
	return batch.NewDisjoint(src.Data, batch.DisjointOptions{Node: no, TimeAttr: tr.timeAttr, Strategy: tr.strategy, SeedTimes: tr.seedTimes})
}
