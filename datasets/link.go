package datasets

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// LinkSplit is one split of edges for link prediction. Pair i is the edge
// Src[i] -> Dst[i] in the stored graph's sense (PyG's edge_label_index):
// were it stored, row Dst[i] would list Src[i]. Label, Time and NegDst are
// optional (nil): Label[i] is the pair's label (1 a true edge, 0 a
// negative, or a class); Time[i] its timestamp; NegDst holds NumNeg
// negative destinations for every pair, row-major (len(Src) x NumNeg):
// candidates to rank against Dst[i] (OGB's target_node_neg).
type LinkSplit struct {
	Src, Dst []int64
	Label    []int32
	Time     []int64
	NegDst   []int64
	NumNeg   int
}

// Len is the number of pairs.
func (l *LinkSplit) Len() int64 { return int64(len(l.Src)) }

// LinkSplitInfo is a link split in the manifest; its arrays are the files
// with roles link:<split>:src, :dst, and :label, :time, :neg_dst when
// present.
type LinkSplitInfo struct {
	NumEdges int64 `json:"num_edges"`
	NumNeg   int   `json:"num_neg,omitempty"`
}

// Link split file parts.
const (
	rolePrefixLink = "link:"
	linkSrc        = "src"
	linkDst        = "dst"
	linkLabel      = "label"
	linkTime       = "time"
	linkNegDst     = "neg_dst"
)

var linkParts = []string{linkSrc, linkDst, linkLabel, linkTime, linkNegDst}

func linkRole(split, part string) string { return rolePrefixLink + split + ":" + part }

// parseLinkRole splits "link:<split>:<part>".
func parseLinkRole(role string) (split, part string, ok bool) {
	rest, ok := strings.CutPrefix(role, rolePrefixLink)
	if !ok {
		return "", "", false
	}
	split, part, ok = strings.Cut(rest, ":")
	return split, part, ok && knownSplit(split) && slices.Contains(linkParts, part)
}

// linkColumn is the column of one part of a link split.
func linkColumn(part string, info LinkSplitInfo) column {
	switch part {
	case linkLabel:
		return column{field: "label", elem: int32Type, rows: info.NumEdges}
	case linkTime:
		return column{field: "time", elem: int64Type, rows: info.NumEdges}
	case linkNegDst:
		return column{field: "neg_dst", elem: int64Type, dim: info.NumNeg, rows: info.NumEdges}
	}
	return column{field: part, elem: int64Type, rows: info.NumEdges}
}

// linkColumns are the files of d's link splits, in a fixed order.
func linkColumns(d *Data) []namedColumn {
	var cols []namedColumn
	for _, s := range SplitNames {
		l, ok := d.LinkSplits[s]
		if !ok {
			continue
		}
		info := LinkSplitInfo{NumEdges: l.Len(), NumNeg: l.NumNeg}
		add := func(part string, data []byte) {
			cols = append(cols, namedColumn{role: linkRole(s, part), column: withData(linkColumn(part, info), data)})
		}
		add(linkSrc, int64Bytes(l.Src))
		add(linkDst, int64Bytes(l.Dst))
		if l.Label != nil {
			add(linkLabel, int32Bytes(l.Label))
		}
		if l.Time != nil {
			add(linkTime, int64Bytes(l.Time))
		}
		if l.NumNeg > 0 {
			add(linkNegDst, int64Bytes(l.NegDst))
		}
	}
	return cols
}

func withData(c column, data []byte) column { c.data = data; return c }

// checkLinks checks the link splits of a manifest: every split it lists
// has its src and dst files, neg_dst exactly when num_neg > 0, and every
// count fits its file.
func (m *Manifest) checkLinks(fit func(field string, count int64, role string, width ...int64) error) error {
	for name, l := range m.LinkSplits {
		if !knownSplit(name) || l.NumEdges < 0 || l.NumNeg < 0 || l.NumNeg > math.MaxInt32 {
			return fmt.Errorf("bad link split %q of %d edges, %d negatives", name, l.NumEdges, l.NumNeg)
		}
		for _, part := range []string{linkSrc, linkDst} {
			if m.File(linkRole(name, part)) == nil {
				return fmt.Errorf("link split %q has no %s file", name, part)
			}
		}
		if (m.File(linkRole(name, linkNegDst)) != nil) != (l.NumNeg > 0) {
			return fmt.Errorf("link split %q: num_neg %d, and neg_dst file present: %v", name, l.NumNeg, l.NumNeg == 0)
		}
		for _, part := range linkParts {
			role := linkRole(name, part)
			if m.File(role) == nil {
				continue
			}
			width := []int64{8}
			switch part {
			case linkLabel:
				width = []int64{4}
			case linkNegDst:
				width = []int64{int64(l.NumNeg), 8}
			}
			if err := fit(fmt.Sprintf("link split %s of %d edges", name, l.NumEdges), l.NumEdges, role, width...); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateLinks checks d's link splits: lengths agree, ids in range.
func (d *Data) validateLinks() error {
	n := d.Graph.NumNodes
	for name, l := range d.LinkSplits {
		if !knownSplit(name) || l == nil {
			return fmt.Errorf("link splits: unknown or empty split %q", name)
		}
		e := l.Len()
		role := func(part string) string { return linkRole(name, part) }
		switch {
		case int64(len(l.Dst)) != e:
			return inArray(role(linkDst), fmt.Errorf("link split %s: %d dst for %d src", name, len(l.Dst), e))
		case l.Label != nil && int64(len(l.Label)) != e:
			return inArray(role(linkLabel), fmt.Errorf("link split %s: %d labels for %d pairs", name, len(l.Label), e))
		case l.Time != nil && int64(len(l.Time)) != e:
			return inArray(role(linkTime), fmt.Errorf("link split %s: %d times for %d pairs", name, len(l.Time), e))
		case l.NumNeg < 0 || int64(len(l.NegDst)) != e*int64(l.NumNeg):
			return inArray(role(linkNegDst), fmt.Errorf("link split %s: %d negatives for %d pairs x %d", name, len(l.NegDst), e, l.NumNeg))
		}
		for part, ids := range map[string][]int64{linkSrc: l.Src, linkDst: l.Dst, linkNegDst: l.NegDst} {
			for i, v := range ids {
				if v < 0 || v >= n {
					return inArray(role(part), fmt.Errorf("link split %s: %s[%d] = %d out of range [0, %d)", name, part, i, v, n))
				}
			}
		}
	}
	return nil
}

// linkSplitsFrom assembles the link splits of an opened dataset from its
// columns.
func linkSplitsFrom(m *Manifest, cols map[string][]byte) map[string]*LinkSplit {
	if len(m.LinkSplits) == 0 {
		return nil
	}
	out := map[string]*LinkSplit{}
	for name, info := range m.LinkSplits {
		l := &LinkSplit{NumNeg: info.NumNeg}
		l.Src = asInt64s(cols[linkRole(name, linkSrc)])
		l.Dst = asInt64s(cols[linkRole(name, linkDst)])
		if c, ok := cols[linkRole(name, linkLabel)]; ok {
			l.Label = asInt32s(c)
		}
		if c, ok := cols[linkRole(name, linkTime)]; ok {
			l.Time = asInt64s(c)
		}
		if c, ok := cols[linkRole(name, linkNegDst)]; ok {
			l.NegDst = asInt64s(c)
		}
		out[name] = l
	}
	return out
}
