#!/usr/bin/env bash
# GPU-machine step: dataset figures that need its cores and memory.
# - papers100M at scale 1 generated in memory (directed as OGB ships it, then
#   made undirected), with per-stage times and peak RSS;
# - pyarrow (installed there, not here) reads a dataset written by loaderd.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${GPU_BIN:-.gpu/bin}
echo "== cores: $(nproc), memory: $(free -g | awk '/Mem:/{print $2}') GiB"
if [ -x $bin/datasets.test ]; then
	(cd datasets && GNNLOADER_GEN_SCALE1=1 ../$bin/datasets.test -test.run 'GenPapersScale1' -test.v -test.timeout 9m)
	(cd datasets && GNNLOADER_GEN_SCALE1=1 GNNLOADER_GEN_UNDIRECTED=1 ../$bin/datasets.test -test.run 'GenPapersScale1' -test.v -test.timeout 9m)
fi
tmp=$(mktemp -d)
$bin/loaderd import npz testdata/cora.npz --out $tmp/cora 2>/dev/null
$bin/loaderd gen --like products --scale 0.01 --seed 1 --dtype bfloat16 --out $tmp/p 2>/dev/null
python3 - "$tmp" <<'PY'
import sys, json, numpy as np, pyarrow as pa
root = sys.argv[1]
for name in ("cora", "p"):
    d = f"{root}/{name}"
    m = json.load(open(f"{d}/manifest.json"))
    for f in m["files"]:
        t = pa.ipc.open_file(f"{d}/{f['name']}").read_all()
        assert t.num_columns == 1, f
    x = pa.ipc.open_file(f"{d}/features.arrow").read_all().column("x").combine_chunks()
    feats = np.asarray(x.flatten()).reshape(len(x), -1)
    indptr = pa.ipc.open_file(f"{d}/indptr.arrow").read_all().column("indptr").to_numpy()
    y = pa.ipc.open_file(f"{d}/labels.arrow").read_all().column("y").to_numpy()
    assert feats.shape == (m["num_nodes"], m["feature_dim"]) and len(indptr) == m["num_nodes"] + 1
    assert indptr[-1] == m["num_edges"] and y.max() < m["num_classes"]
    print(f"pyarrow {pa.__version__} read {name}: x {feats.shape} {x.type.value_type}, indptr {indptr.shape}, "
          f"labels {y.shape}, schema field metadata {x.type.value_field.metadata or pa.ipc.open_file(f'{d}/features.arrow').schema.field('x').metadata}")
PY
rm -rf "$tmp"
