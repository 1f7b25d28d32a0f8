package datasets

import (
	"fmt"
	"path/filepath"
)

// OGB link-property datasets (ogbl-collab, ogbl-citation2) have no node
// labels: the nodes are imported unlabelled (label -1, num_classes 1),
// without node splits, and the edge splits become LinkSplits. OGB ships
// those splits as torch files (split/<scheme>/{train,valid,test}.pt, a dict
// of tensors), which Go cannot read: each must be exported once to an .npz
// beside it with the same keys (linkExportHint). The keys read are
//
//	source_node, target_node [E], target_node_neg [E, K]  (ogbl-citation2)
//	edge [E, 2], edge_neg [M, 2], year [E]                 (ogbl-collab)
//
// A pair (s, t) is the edge s -> t, read as PyG reads OGB's edge_index:
// link datasets are imported with EdgeOut (the default for them), so that
// row t of the stored graph lists s and LinkSplit's Src, Dst and NegDst
// mean what they say. collab's negative pairs follow the positives with
// Label 0 (positives 1); weight is not kept.

// linkExportHint is the error for a split that is only a .pt file.
func linkExportHint(dir, scheme, pt string) error {
	return fmt.Errorf(`%s: OGB ships this link split as a torch file, which gnnloader cannot read; export the splits to .npz once (same keys), e.g.:

  import torch, numpy as np
  for s in ["train", "valid", "test"]:
      np.savez(f"%s/split/%s/{s}.npz", **{k: v.numpy() for k, v in torch.load(f"%s/split/%s/{s}.pt").items()})

then import again`, pt, dir, scheme, dir, scheme)
}

// isLinkDataset reports whether dir holds an OGB link dataset: one
// without node labels.
func (im *ogbImport) isLinkDataset() bool {
	return !fileExists(im.raw("node-label.csv.gz")) && !fileExists(im.raw("node-label.npz"))
}

// unlabelled labels every node -1 (link datasets).
func (im *ogbImport) unlabelled(n int64) {
	im.d.Labels = make([]int32, n)
	for i := range im.d.Labels {
		im.d.Labels[i] = -1
	}
	im.d.NumClasses = 1
}

// linkSplits reads split/<scheme>/{train,valid,test}.npz.
func (im *ogbImport) linkSplits(root, scheme string) error {
	n := im.d.Graph.NumNodes
	im.d.Splits = map[string][]int64{}
	im.d.LinkSplits = map[string]*LinkSplit{}
	for _, s := range SplitNames {
		path := filepath.Join(root, scheme, s+".npz")
		if !fileExists(path) {
			if pt := filepath.Join(root, scheme, s+".pt"); fileExists(pt) {
				return linkExportHint(im.dir, scheme, pt)
			}
			continue
		}
		l, err := readLinkNPZ(path, n)
		if err != nil {
			return err
		}
		im.d.LinkSplits[s] = l
	}
	if len(im.d.LinkSplits) == 0 {
		label := im.raw("node-label.csv.gz")
		if fileExists(im.raw("data.npz")) {
			label = im.raw("node-label.npz")
		}
		return fmt.Errorf("%s: no such file, and no link splits in %s (train.npz, valid.npz, test.npz): neither a node- nor a link-property dataset",
			label, filepath.Join(root, scheme))
	}
	im.d.Source += " --split " + scheme
	return nil
}

// readLinkNPZ reads one exported link split.
func readLinkNPZ(path string, n int64) (*LinkSplit, error) {
	z, err := openNPZ(path)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	pairs := func(name string) (src, dst []int64, err error) {
		a, err := z.array(name)
		if err != nil {
			return nil, nil, err
		}
		if err := a.wantShape(-1, 2); err != nil {
			return nil, nil, err
		}
		v, err := a.ints()
		if err != nil {
			return nil, nil, err
		}
		for i := 0; i < len(v); i += 2 {
			src, dst = append(src, v[i]), append(dst, v[i+1])
		}
		return src, dst, nil
	}
	l := &LinkSplit{}
	switch {
	case z.has("source_node"):
		if l.Src, err = npzInts(z, "source_node"); err == nil {
			l.Dst, err = npzInts(z, "target_node")
		}
		if err == nil && int64(len(l.Dst)) != l.Len() {
			err = fmt.Errorf("%s: %d source nodes, %d target nodes", path, len(l.Src), len(l.Dst))
		}
		if err == nil && z.has("target_node_neg") {
			var a *npyArray
			if a, err = z.array("target_node_neg"); err == nil {
				if err = a.wantShape(l.Len(), -1); err == nil {
					l.NumNeg = int(a.shape[1])
					l.NegDst, err = a.ints()
				}
			}
		}
	case z.has("edge"):
		l.Src, l.Dst, err = pairs("edge")
		if err == nil && z.has("year") {
			l.Time, err = npzInts(z, "year")
		}
		if err == nil && z.has("edge_neg") {
			var ns, nd []int64
			if ns, nd, err = pairs("edge_neg"); err == nil {
				l.Label = make([]int32, l.Len()+int64(len(ns)))
				for i := range l.Src {
					l.Label[i] = 1
				}
				l.Src, l.Dst, l.Time = append(l.Src, ns...), append(l.Dst, nd...), nil
			}
		}
	default:
		return nil, fmt.Errorf("%s: neither source_node/target_node nor edge (members: %v)", path, z.names())
	}
	if err != nil {
		return nil, err
	}
	if l.Src == nil {
		l.Src, l.Dst = []int64{}, []int64{}
	}
	if l.Time != nil && int64(len(l.Time)) != l.Len() {
		return nil, fmt.Errorf("%s: %d years for %d edges", path, len(l.Time), l.Len())
	}
	for _, ids := range [][]int64{l.Src, l.Dst, l.NegDst} {
		for i, v := range ids {
			if v < 0 || v >= n {
				return nil, fmt.Errorf("%s: node id %d (entry %d) out of range [0, %d)", path, v, i, n)
			}
		}
	}
	return l, nil
}
