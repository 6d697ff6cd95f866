# Referenced extents of a model's external data: the bytes a model actually
# uses, as opposed to the size of the files that contain them (I8, #853/#856).
#
# Owns: reading external-data entries from the graph proto and checking them
# against the files they point into. The byte count comes from the entries
# (offset, length), never from a file size: a blob padded with dead space must
# report the same referenced bytes (I8). File sizes appear only as
# `file_bytes`, and to check that every range lies inside its file.
# Must not touch: onnxruntime (nothing here needs a session), nor load the
# blob itself (`load_external_data=False`).

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from types import MappingProxyType

import attrs
import onnx
from onnx import TensorProto, helper

from spec.errors import (
    ExternalDataMalformed,
    ExternalDataMissing,
    ExternalDataOutOfRange,
    ExternalDataOverlap,
)

__all__ = [
    "ExternalRange",
    "LocationExtents",
    "ExternalDataReport",
    "referenced_extents",
]

_SUB_BYTE_BITS = MappingProxyType({TensorProto.INT4: 4, TensorProto.UINT4: 4, TensorProto.FLOAT4E2M1: 4,
                                   TensorProto.INT2: 2, TensorProto.UINT2: 2})
# XXX: FLOAT6* packing is not pinned down here; such tensors skip the geometry check.
_UNCHECKED = frozenset({TensorProto.UNDEFINED, TensorProto.STRING, TensorProto.FLOAT6E2M3, TensorProto.FLOAT6E3M2})


@attrs.frozen
class ExternalRange:
    tensor: str
    offset: int
    length: int

    @property
    def end(self) -> int:
        return self.offset + self.length

    def __repr__(self) -> str:
        return f"{self.tensor}@[{self.offset},{self.end})"


@attrs.frozen
class LocationExtents:
    # Invariant: ranges sorted by offset, pairwise disjoint, all inside the file.
    location: str
    file_bytes: int
    ranges: tuple[ExternalRange, ...]

    @property
    def referenced_bytes(self) -> int:
        return sum(r.length for r in self.ranges)

    @property
    def orphan_bytes(self) -> int:
        return self.file_bytes - self.referenced_bytes


@attrs.frozen
class ExternalDataReport:
    model_path: str
    locations: tuple[LocationExtents, ...]  # sorted by location
    embedded_bytes: int  # tensors stored inside the .onnx proto itself

    @property
    def referenced_bytes(self) -> int:
        return sum(loc.referenced_bytes for loc in self.locations)

    @property
    def file_bytes(self) -> int:
        return sum(loc.file_bytes for loc in self.locations)

    def location(self, name: str) -> LocationExtents:
        for loc in self.locations:
            if loc.location == name:
                return loc
        raise KeyError(f"{self.model_path} has no external data in {name!r}")


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        yield from _attribute_tensors(node.attribute)


def _attribute_tensors(attributes) -> Iterator[TensorProto]:
    for a in attributes:
        if a.HasField("t"):
            yield a.t
        yield from a.tensors
        for sparse in (*([a.sparse_tensor] if a.HasField("sparse_tensor") else []), *a.sparse_tensors):
            yield from (sparse.values, sparse.indices)
        if a.HasField("g"):
            yield from _graph_tensors(a.g)
        for g in a.graphs:
            yield from _graph_tensors(g)


def _model_tensors(model: onnx.ModelProto) -> Iterator[TensorProto]:
    # Initializers, Constant/attribute tensors and subgraphs all may point at
    # external data (the same set onnx's own external-data helper walks).
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        for node in function.node:
            yield from _attribute_tensors(node.attribute)


def _geometry_bytes(t: TensorProto) -> int | None:
    if t.data_type in _UNCHECKED:
        return None
    count = math.prod(t.dims)
    if t.data_type in _SUB_BYTE_BITS:
        return (count * _SUB_BYTE_BITS[t.data_type] + 7) // 8
    return count * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize


def _embedded_bytes(t: TensorProto) -> int:
    if t.raw_data:
        return len(t.raw_data)
    if t.data_type == TensorProto.STRING:
        return sum(len(s) for s in t.string_data)
    return _geometry_bytes(t) or 0


def _entry_int(t: TensorProto, entries: dict[str, str], key: str) -> int:
    # Verify the entry exists and is a non-negative integer. ONNX lets `length`
    # default to "the rest of the file"; we refuse, because then the extent
    # would grow with dead padding, the #853 defect (I8).
    if key not in entries:
        raise ExternalDataMalformed(f"tensor {t.name!r}: external-data entry has no {key!r}")
    try:
        value = int(entries[key])
    except ValueError:
        raise ExternalDataMalformed(
            f"tensor {t.name!r}: external-data {key!r} is not an integer: {entries[key]!r}"
        ) from None
    if value < 0:
        raise ExternalDataMalformed(f"tensor {t.name!r}: external-data {key!r} is negative: {value}")
    return value


def _external_range(t: TensorProto) -> tuple[str, ExternalRange]:
    entries = {e.key: e.value for e in t.external_data}
    location = entries.get("location", "")
    # Verify the location is a relative path that stays beside the model.
    if not location or os.path.isabs(location) or os.path.normpath(location).split(os.sep)[0] == os.pardir:
        raise ExternalDataMalformed(f"tensor {t.name!r}: external-data location {location!r} is empty or escapes the model directory")
    rng = ExternalRange(t.name, _entry_int(t, entries, "offset"), _entry_int(t, entries, "length"))
    # Verify the declared length is what the tensor's dims and dtype need (I8: bytes from geometry).
    expected = _geometry_bytes(t)
    if expected is not None and rng.length != expected:
        raise ExternalDataMalformed(
            f"tensor {t.name!r}: external-data length {rng.length} != {expected} bytes for dims {list(t.dims)}"
        )
    return os.path.normpath(location), rng  # "./w.bin" and "w.bin" are one file


def _location_extents(base: str, location: str, ranges: list[ExternalRange]) -> LocationExtents:
    path = os.path.join(base, location)
    # Verify the file exists.
    if not os.path.isfile(path):
        raise ExternalDataMissing(f"tensor {ranges[0].tensor!r}: external-data file {location!r} not found at {path}")
    size = os.path.getsize(path)
    ranges = sorted(ranges, key=lambda r: (r.offset, r.end, r.tensor))
    # Verify every range ends inside the file.
    for r in ranges:
        if r.end > size:
            raise ExternalDataOutOfRange(
                f"tensor {r.tensor!r}: range [{r.offset},{r.end}) ends past {location!r} ({size} bytes)"
            )
    # Verify no two ranges share a byte; shared bytes would be counted twice (I8).
    occupied = [r for r in ranges if r.length]
    for a, b in zip(occupied, occupied[1:]):
        if a.end > b.offset:
            raise ExternalDataOverlap(f"tensors {a.tensor!r} and {b.tensor!r} overlap in {location!r}: {a!r} vs {b!r}")
    return LocationExtents(location=location, file_bytes=size, ranges=tuple(ranges))


def referenced_extents(model_path: str | os.PathLike[str]) -> ExternalDataReport:
    path = os.fspath(model_path)
    model = onnx.load(path, load_external_data=False)
    base = os.path.dirname(os.path.abspath(path))
    by_location: dict[str, list[ExternalRange]] = {}
    embedded = 0
    for t in _model_tensors(model):
        if t.data_location == TensorProto.EXTERNAL:
            location, rng = _external_range(t)
            by_location.setdefault(location, []).append(rng)
        else:
            embedded += _embedded_bytes(t)
    return ExternalDataReport(
        model_path=path,
        locations=tuple(_location_extents(base, loc, rs) for loc, rs in sorted(by_location.items())),
        embedded_bytes=embedded,
    )
