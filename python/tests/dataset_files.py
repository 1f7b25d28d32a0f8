"""Reads a gnnloader dataset directory (docs/datasets.md) independently of
loaderd: manifest.json and the Arrow IPC files, with numpy only (no
pyarrow). Each file holds one column in one record batch, uncompressed, so
the column's values are the record batch's last buffer: this module walks
the file's footer and the record batch's flatbuffer to find it."""

import json
import os
import struct

import numpy as np
import torch

_NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int64": np.int64,
       "int32": np.int32, "uint8": np.uint8, "bool": np.uint8, "bfloat16": np.uint16}


class _Table:
    """A flatbuffer table at `pos` of `buf`."""

    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        self.vt = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vt_len = struct.unpack_from("<H", buf, self.vt)[0]

    def _field(self, i):
        at = 4 + 2 * i
        if at >= self.vt_len:
            return 0
        return struct.unpack_from("<H", self.buf, self.vt + at)[0]

    def table(self, i):
        off = self._field(i)
        p = self.pos + off
        return _Table(self.buf, p + struct.unpack_from("<I", self.buf, p)[0])

    def vector(self, i):
        """(start, length) of a vector field."""
        off = self._field(i)
        p = self.pos + off
        p += struct.unpack_from("<I", self.buf, p)[0]
        return p + 4, struct.unpack_from("<I", self.buf, p)[0]


def read_column(path, dtype, rows, width=1):
    """The values of the single column of an Arrow IPC file: `rows` x `width`
    elements of `dtype` (a manifest dtype name), as a numpy array."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:6] != b"ARROW1" or buf[-6:] != b"ARROW1":
        raise ValueError(f"{path}: not an Arrow IPC file")
    footer_len = struct.unpack_from("<i", buf, len(buf) - 10)[0]
    footer = _Table(buf, (len(buf) - 10 - footer_len) + struct.unpack_from("<I", buf, len(buf) - 10 - footer_len)[0])
    start, n = footer.vector(3)  # recordBatches: Block{offset i64, metaDataLength i32, pad, bodyLength i64}
    if n != 1:
        raise ValueError(f"{path}: {n} record batches, want 1")
    offset, meta_len, _body_len = struct.unpack_from("<qi4xq", buf, start)
    m = offset + 8 if struct.unpack_from("<I", buf, offset)[0] == 0xFFFFFFFF else offset + 4
    message = _Table(buf, m + struct.unpack_from("<I", buf, m)[0])
    batch = message.table(2)  # Message.header: RecordBatch
    bstart, nbuf = batch.vector(2)  # RecordBatch.buffers: Buffer{offset i64, length i64}
    boff, blen = struct.unpack_from("<qq", buf, bstart + 16 * (nbuf - 1))
    count = rows * width
    body = offset + meta_len
    itemsize = np.dtype(_NP[dtype]).itemsize
    if blen < count * itemsize:
        raise ValueError(f"{path}: values buffer of {blen} bytes for {count} {dtype} values")
    a = np.frombuffer(buf, dtype=_NP[dtype], count=count, offset=body + boff)
    return a.reshape(rows, width) if width > 1 else a


class HeteroFiles:
    """A heterogeneous dataset read from its directory: per node type x, y,
    splits; per edge type its CSR (indptr over dst nodes, indices = src
    ids) as torch tensors."""

    def __init__(self, root):
        with open(os.path.join(root, "manifest.json")) as f:
            self.manifest = m = json.load(f)
        if m["format_version"] != 2:
            raise ValueError(f"{root}: format_version {m['format_version']}, want 2 (heterogeneous)")
        self.node_types = [t["name"] for t in m["node_types"]]
        self.edge_types = [(e["src"], e["rel"], e["dst"]) for e in m["edge_types"]]
        self.num_nodes, self.x, self.y, self.splits = {}, {}, {}, {}
        for t in m["node_types"]:
            name, n = t["name"], t["num_nodes"]
            self.num_nodes[name] = n
            if t.get("feature_dim", 0):
                x = read_column(os.path.join(root, f"node_{name}_features.arrow"), t["feature_dtype"], n,
                                t["feature_dim"])
                self.x[name] = torch.from_numpy(x.copy())
            if t.get("num_classes", 0):
                y = read_column(os.path.join(root, f"node_{name}_labels.arrow"), "int32", n)
                self.y[name] = torch.from_numpy(y.astype(np.int64))
            for s, size in (t.get("splits") or {}).items():
                ids = read_column(os.path.join(root, f"node_{name}_split_{s}.arrow"), "int64", size)
                self.splits[(name, s)] = torch.from_numpy(ids.copy())
        self.indptr, self.indices = {}, {}
        for e in m["edge_types"]:
            et = (e["src"], e["rel"], e["dst"])
            stem = os.path.join(root, "edge_" + "__".join(et))
            ip = read_column(stem + "_indptr.arrow", "int64", self.num_nodes[et[2]] + 1)
            wide = self.num_nodes[et[0]] >= 2 ** 31
            idx = read_column(stem + "_indices.arrow", "int64" if wide else "int32", e["num_edges"])
            self.indptr[et] = torch.from_numpy(ip.copy())
            self.indices[et] = torch.from_numpy(idx.astype(np.int64))

    def edge_index(self, et):
        """The full edge_index [2, E] of an edge type (row 0 src, row 1 dst),
        column p the CSR's edge p (so e_id indexes it)."""
        ip = self.indptr[et]
        dst = torch.repeat_interleave(torch.arange(ip.numel() - 1), ip[1:] - ip[:-1])
        return torch.stack([self.indices[et], dst])

    def full_batch(self, input_type, seeds, fanouts):
        """The batch loaderd must serve for distinct `seeds` of `input_type`
        when every fanout is -1 (all in-neighbours) or 0 (none): PyG's
        heterogeneous sampling (docs/protocol.md), which then draws nothing
        at random. `fanouts` maps each edge type to its per-hop list. Per
        node type {"n_id", "x", "y", "num_sampled_nodes"}, per edge type
        {"edge_index", "e_id", "num_sampled_edges"}."""
        types = self.node_types
        local = {t: torch.full((self.num_nodes[t],), -1, dtype=torch.int64) for t in types}
        nodes = {t: [] for t in types}
        size = {t: 0 for t in types}

        def join(t, ids):  # the ids not yet in t's set, in order of first appearance; their local ids
            ids = ids[local[t][ids] < 0]
            if ids.numel():
                sv, order = torch.sort(ids, stable=True)
                firsts = order[torch.cat([torch.ones(1, dtype=torch.bool), sv[1:] != sv[:-1]])]
                ids = ids[torch.sort(firsts).values]
            local[t][ids] = torch.arange(size[t], size[t] + ids.numel())
            nodes[t].append(ids)
            size[t] += ids.numel()
            return torch.arange(size[t] - ids.numel(), size[t])

        empty = torch.empty(0, dtype=torch.int64)
        frontier = {t: empty for t in types}
        frontier[input_type] = join(input_type, torch.as_tensor(seeds, dtype=torch.int64))
        out = {t: {"num_sampled_nodes": [frontier[t].numel()]} for t in types}
        edges = {e: [] for e in self.edge_types}
        for e in self.edge_types:
            out[e] = {"num_sampled_edges": []}
        for hop in range(len(next(iter(fanouts.values())))):
            joined = {t: [] for t in types}
            for e in self.edge_types:
                s, _, d = e
                f = fanouts[e][hop]
                if f not in (-1, 0):
                    raise ValueError("full_batch knows fanouts -1 and 0 only: others draw at random")
                rows = torch.cat(nodes[d])[frontier[d]] if f and frontier[d].numel() else empty
                start, deg = self.indptr[e][rows], self.indptr[e][rows + 1] - self.indptr[e][rows]
                owner = torch.repeat_interleave(torch.arange(rows.numel()), deg)
                pos = start[owner] + torch.arange(owner.numel()) - (torch.cumsum(deg, 0) - deg)[owner]
                src = self.indices[e][pos]
                joined[s].append(join(s, src))
                edges[e].append(torch.stack([local[s][src], frontier[d][owner], pos]))
                out[e]["num_sampled_edges"].append(pos.numel())
            frontier = {t: torch.cat(v) if v else empty for t, v in joined.items()}
            for t in types:
                out[t]["num_sampled_nodes"].append(frontier[t].numel())
        for t in types:
            n_id = torch.cat(nodes[t]) if nodes[t] else empty
            out[t]["n_id"] = n_id
            if t in self.x:
                out[t]["x"] = self.x[t][n_id]
            if t in self.y:
                out[t]["y"] = self.y[t][n_id]
        for e in self.edge_types:
            a = torch.cat(edges[e], 1) if edges[e] else torch.empty(3, 0, dtype=torch.int64)
            out[e].update(edge_index=a[:2], e_id=a[2])
        return out
