"""A region's own op graph: the region's nodes with its boundary tensors as inputs, so the
template recognizer judges a region as it would judge the region's extracted task."""

from __future__ import annotations

from agent.regions.partition import Region, _key
from agent.templates.graph import InputInfo, OpGraph, OpNode, ParamInfo, Ref


def region_graph(graph: OpGraph, region: Region) -> OpGraph:
    inputs = {v.key: i for i, v in enumerate(region.inputs)}
    renumber = {node_id: i for i, node_id in enumerate(region.nodes)}

    def remap(ref: Ref) -> Ref:
        if ref.t == "list":
            return ref.model_copy(update={"items": [remap(item) for item in ref.items or []]})
        if ref.t in ("input", "node", "constant") and _key(ref) in inputs:
            return Ref(t="input", index=inputs[_key(ref)])
        if ref.t == "node":
            return Ref(t="node", id=renumber[ref.id or 0], out=ref.out)
        return ref

    nodes = []
    for node_id in region.nodes:
        node = graph.nodes[node_id]  # a node's id is its position in the trace
        nodes.append(
            OpNode(
                id=renumber[node_id],
                op=node.op,
                args=[remap(a) for a in node.args],
                kwargs={k: remap(v) for k, v in node.kwargs.items()},
                outputs=node.outputs,
                view_of=node.view_of,
                writes=node.writes,
                mutates=node.mutates,
            )
        )
    return OpGraph(
        path=f"{graph.path}#region{region.index}",
        device=graph.device,
        inputs=[
            InputInfo(
                index=i,
                kind="tensor",
                shape=v.meta.shape,
                stride=v.meta.stride,
                offset=v.meta.offset,
                dtype=v.meta.dtype,
            )
            for i, v in enumerate(region.inputs)
        ],
        params=[ParamInfo.model_validate(graph.param(p).model_dump()) for p in region.params],
        nodes=nodes,
        outputs=[remap(v.ref) for v in region.outputs],
        output_is_tuple=len(region.outputs) != 1,
        training=graph.training,
    )
