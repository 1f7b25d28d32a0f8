package serve

import (
	"strconv"
	"strings"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
)

// LinkPrefix starts an Open.Split that asks for link batches
// (docs/protocol.md, "Link batches"): "link:<split>" over a link split of
// the dataset, or "link:custom" over the pairs of the Seeds message (its
// ids are the sources, then the destinations), optionally followed by
// ":binary:<amount>" or ":triplet:<amount>", the negative sampling.
const LinkPrefix = "link:"

// linkRequest is what a link split name asks for.
type linkRequest struct {
	pairs  *datasets.LinkSplit
	neg    batch.NegMode
	amount float64
}

// parseLink parses a link split name against the dataset and the custom
// seeds; ok is false for a name that does not ask for link batches.
func (ss *session) parseLink(name string) (lr *linkRequest, ok bool, err error) {
	rest, ok := strings.CutPrefix(name, LinkPrefix)
	if !ok {
		return nil, false, nil
	}
	lr = &linkRequest{}
	parts := strings.Split(rest, ":")
	switch len(parts) {
	case 1:
	case 3:
		switch parts[1] {
		case "binary":
			lr.neg = batch.NegBinary
		case "triplet":
			lr.neg = batch.NegTriplet
		default:
			return nil, true, perrf(ipc.CodeBadRequest, "split %q: negative sampling %q, want binary or triplet", name, parts[1])
		}
		if lr.amount, err = strconv.ParseFloat(parts[2], 64); err != nil || !(lr.amount > 0) {
			return nil, true, perrf(ipc.CodeBadRequest, "split %q: negative sampling amount %q, want a number > 0", name, parts[2])
		}
	default:
		return nil, true, perrf(ipc.CodeBadRequest, "split %q: want link:<split>[:binary|triplet:<amount>]", name)
	}
	d := ss.srv.src.Data
	if parts[0] == ipc.CustomSplit {
		ids := ss.custom
		if ids == nil || len(ids)%2 != 0 {
			return nil, true, perrf(ipc.CodeBadRequest, "split %q needs a Seeds message of an even number of ids (the sources, then the destinations) before Open", name)
		}
		e := len(ids) / 2
		lr.pairs = &datasets.LinkSplit{Src: ids[:e:e], Dst: ids[e:]}
		return lr, true, nil
	}
	if lr.pairs = d.LinkSplits[parts[0]]; lr.pairs == nil {
		var names []string
		for _, s := range datasets.SplitNames {
			if _, ok := d.LinkSplits[s]; ok {
				names = append(names, LinkPrefix+s)
			}
		}
		return nil, true, perrf(ipc.CodeNotFound, "dataset %s has no link split %q (it has %v)", d.Name, parts[0], names)
	}
	return lr, true, nil
}

// positions are 0, 1, ..., n-1: a link request's seeds are the positions of
// its pairs, which its mode reads from the split.
func positions(n int) []int64 {
	p := make([]int64, n)
	for i := range p {
		p[i] = int64(i)
	}
	return p
}
