package serve

import (
	"slices"
	"strings"

	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
)

// checkV3 refuses what protocol 3 asks for that this daemon does not serve
// (yet), and what does not fit the dataset: per-type fields on a
// homogeneous dataset; seed times an Open would drop. parseTemporal
// (temporal.go) checks temporal requests.
func (ss *session) checkV3(m *ipc.Open) error {
	src := ss.srv.src
	switch {
	case ss.times != nil && m.Split != ipc.CustomSplit:
		return perrf(ipc.CodeBadRequest, "the Seeds message carried seed times, which go with split %q (the seeds they time), not %q", ipc.CustomSplit, m.Split)
	case ss.times != nil && m.Temporal == "":
		return perrf(ipc.CodeBadRequest, "the Seeds message carried seed times, which only temporal sampling uses: set temporal, or send the seeds without times")
	case src.Hetero != nil && m.Temporal != "":
		return perrf(ipc.CodeBadRequest, "temporal %q: temporal and disjoint sampling of heterogeneous datasets is not supported yet", m.Temporal)
	case src.Hetero == nil && m.InputType != "":
		return perrf(ipc.CodeBadRequest, "input_type %q: dataset %s is homogeneous (it has no node types); leave input_type empty", m.InputType, src.Data.Name)
	}
	return nil
}

// heteroRequest is what an Open on a heterogeneous dataset asks for.
type heteroRequest struct {
	input   string  // the seeds' node type
	fanouts [][]int // [hop][edge type]
}

// parseHetero checks an Open on a heterogeneous dataset: an input type of
// the dataset, a split of that type (or custom seeds of it), edge fanouts
// of hops x edge types, the CPU path, the stored feature dtypes.
func (ss *session) parseHetero(m *ipc.Open, dev int) (*request, error) {
	h := ss.srv.src.Hetero
	var types []string
	for _, t := range h.NodeTypes {
		types = append(types, t.Name)
	}
	var edgeTypes []string
	for _, r := range h.Relations {
		edgeTypes = append(edgeTypes, r.EdgeType.String())
	}
	nt := h.NodeType(m.InputType)
	switch {
	case m.InputType == "":
		return nil, perrf(ipc.CodeBadRequest, "dataset %s is heterogeneous: Open needs input_type, the node type of the seeds (one of %v)", h.Name, types)
	case nt == nil:
		return nil, perrf(ipc.CodeBadRequest, "input_type %q is not a node type of dataset %s (it has %v)", m.InputType, h.Name, types)
	case strings.HasPrefix(m.Split, LinkPrefix):
		return nil, perrf(ipc.CodeBadRequest, "split %q: link batches on a heterogeneous dataset are not supported", m.Split)
	case m.FeatureDType != "":
		return nil, perrf(ipc.CodeBadRequest, "feature_dtype %q: heterogeneous batches carry each node type's stored dtype (leave feature_dtype empty)", m.FeatureDType)
	case len(m.EdgeFanouts) != 0 && len(m.EdgeFanouts) != len(m.Fanouts)*len(h.Relations):
		return nil, perrf(ipc.CodeBadRequest, "%d edge_fanouts: want %d hops x %d edge types = %d, hop-major in Welcome's edge-type order %v",
			len(m.EdgeFanouts), len(m.Fanouts), len(h.Relations), len(m.Fanouts)*len(h.Relations), edgeTypes)
	}
	var seeds []int64
	if m.Split == ipc.CustomSplit {
		if seeds = ss.custom; seeds == nil {
			return nil, perrf(ipc.CodeBadRequest, "split %q needs a Seeds message before Open", ipc.CustomSplit)
		}
		for i, v := range seeds {
			if v >= nt.NumNodes {
				return nil, perrf(ipc.CodeBadRequest, "Seeds: id %d at position %d is outside [0, %d), the %s nodes", v, i, nt.NumNodes, nt.Name)
			}
		}
	} else {
		var ok bool
		if seeds, ok = nt.Splits[m.Split]; !ok {
			var names []string
			for _, s := range datasets.SplitNames {
				if _, ok := nt.Splits[s]; ok {
					names = append(names, s)
				}
			}
			return nil, perrf(ipc.CodeBadRequest, "node type %s of dataset %s has no split %q (it has %v)", nt.Name, h.Name, m.Split, names)
		}
	}
	if len(seeds) == 0 {
		return nil, perrf(ipc.CodeBadRequest, "split %q of node type %s is empty", m.Split, nt.Name)
	}
	r, err := ss.newRequest(m, dev, seeds)
	if err != nil {
		return nil, err
	}
	r.hetero = &heteroRequest{input: nt.Name}
	for hop, f := range r.fanouts {
		per := slices.Repeat([]int{f}, len(h.Relations))
		if len(m.EdgeFanouts) > 0 {
			for e := range per {
				per[e] = int(m.EdgeFanouts[hop*len(h.Relations)+e])
			}
		}
		r.hetero.fanouts = append(r.hetero.fanouts, per)
	}
	return r, nil
}
