# I8: bytes are counted over referenced extents, never the containing file.
# Padding the blob with dead space changes nothing; entries that do not
# describe real, disjoint bytes are rejected with a typed error naming the
# tensor (#853/#856).

from __future__ import annotations

import os

import onnx
import pytest

from refimpl.ort import (
    ExternalRange,
    build_external,
    referenced_extents,
)
from refimpl.ort.models import EXTERNAL_BLOB_FILE
from spec.errors import (
    CallerError,
    ExternalDataMalformed,
    ExternalDataMissing,
    ExternalDataOutOfRange,
    ExternalDataOverlap,
    ModelDataError,
)

N = 256
WEIGHT_BYTES = N * N * 4  # one float32 [N, N] weight


def test_external_file_is_exactly_twice_referenced(external_path):  # I8, the 2.00x figure
    report = referenced_extents(external_path)
    blob = report.location(EXTERNAL_BLOB_FILE)
    assert blob.referenced_bytes == 2 * WEIGHT_BYTES
    assert blob.file_bytes == os.path.getsize(os.path.join(os.path.dirname(external_path), EXTERNAL_BLOB_FILE))
    assert blob.file_bytes == 2 * blob.referenced_bytes
    assert blob.orphan_bytes == blob.referenced_bytes
    assert blob.ranges == (ExternalRange("W1", 0, WEIGHT_BYTES), ExternalRange("W2", 2 * WEIGHT_BYTES, WEIGHT_BYTES))
    assert report.referenced_bytes == 2 * WEIGHT_BYTES
    assert report.embedded_bytes == 0


def test_embedded_initializers_are_counted_separately(tmp_path, decoder):
    path = tmp_path / "decoder.onnx"
    onnx.save_model(decoder, path)
    report = referenced_extents(path)
    assert report.locations == ()
    assert report.referenced_bytes == 0
    assert report.embedded_bytes == sum(onnx.numpy_helper.to_array(t).nbytes for t in decoder.graph.initializer)


@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0, 3.0])
def test_orphan_ratio_changes_file_bytes_not_referenced_bytes(tmp_path, ratio):  # I8
    report = referenced_extents(build_external(tmp_path, n=N, orphan_ratio=ratio))
    blob = report.location(EXTERNAL_BLOB_FILE)
    assert blob.referenced_bytes == 2 * WEIGHT_BYTES
    assert [(r.tensor, r.length) for r in blob.ranges] == [("W1", WEIGHT_BYTES), ("W2", WEIGHT_BYTES)]
    assert blob.file_bytes == round((1 + ratio) * 2 * WEIGHT_BYTES)


@pytest.mark.parametrize("padding", [1, 4096, 3 * WEIGHT_BYTES])
def test_dead_padding_changes_nothing_referenced(external_path, padding):  # I8 "padding changes nothing"
    before = referenced_extents(external_path)
    with open(os.path.join(os.path.dirname(external_path), EXTERNAL_BLOB_FILE), "ab") as blob:
        blob.write(b"\0" * padding)
    after = referenced_extents(external_path)
    assert after.location(EXTERNAL_BLOB_FILE).ranges == before.location(EXTERNAL_BLOB_FILE).ranges
    assert after.referenced_bytes == before.referenced_bytes
    assert after.file_bytes == before.file_bytes + padding


def test_invalid_location_lookup(external_path):
    with pytest.raises(KeyError, match="no external data in 'other.bin'"):
        referenced_extents(external_path).location("other.bin")


def _rewrite(model_path: str, tensor: str, **changes: str | None) -> str:
    # Hand-edit one tensor's external_data entries; None deletes the key.
    model = onnx.load(model_path, load_external_data=False)
    (t,) = [t for t in model.graph.initializer if t.name == tensor]
    entries = {e.key: e.value for e in t.external_data} | changes
    del t.external_data[:]
    for key, value in entries.items():
        if value is not None:
            t.external_data.add(key=key, value=value)
    bad = os.path.join(os.path.dirname(model_path), "bad.onnx")
    with open(bad, "wb") as f:
        f.write(model.SerializeToString())
    return bad


BLOB = 4 * WEIGHT_BYTES  # file size at orphan_ratio 1.0

BAD_ENTRIES = {
    "missing-file": ("W2", {"location": "nope.bin"}, ExternalDataMissing, r"'W2'.*'nope\.bin' not found"),
    "past-eof": ("W2", {"offset": str(BLOB - WEIGHT_BYTES + 4)}, ExternalDataOutOfRange, r"'W2'.*ends past 'weights\.bin'"),
    "offset-beyond-eof": ("W1", {"offset": str(BLOB)}, ExternalDataOutOfRange, r"'W1'.*ends past"),
    "overlap": ("W2", {"offset": "4"}, ExternalDataOverlap, r"'W1' and 'W2' overlap in 'weights\.bin'"),
    "same-range": ("W2", {"offset": "0"}, ExternalDataOverlap, r"'W1' and 'W2' overlap"),
    "missing-offset": ("W1", {"offset": None}, ExternalDataMalformed, r"'W1'.*has no 'offset'"),
    "missing-length": ("W1", {"length": None}, ExternalDataMalformed, r"'W1'.*has no 'length'"),
    "negative-offset": ("W2", {"offset": "-8"}, ExternalDataMalformed, r"'W2'.*'offset' is negative: -8"),
    "negative-length": ("W2", {"length": "-1"}, ExternalDataMalformed, r"'W2'.*'length' is negative"),
    "non-integer-length": ("W1", {"length": "1e3"}, ExternalDataMalformed, r"'W1'.*'length' is not an integer"),
    "length-vs-geometry": ("W1", {"length": str(WEIGHT_BYTES - 4)}, ExternalDataMalformed, r"'W1'.*!= 262144 bytes"),
    "missing-location": ("W1", {"location": None}, ExternalDataMalformed, r"'W1'.*location '' is empty"),
    "escaping-location": ("W1", {"location": "../weights.bin"}, ExternalDataMalformed, r"'W1'.*escapes"),
    "absolute-location": ("W1", {"location": "/etc/passwd"}, ExternalDataMalformed, r"'W1'.*escapes"),
}


@pytest.mark.parametrize(("tensor", "changes", "error", "match"), BAD_ENTRIES.values(), ids=BAD_ENTRIES.keys())
def test_invalid_external_data_entry(external_path, tensor, changes, error, match):
    bad = _rewrite(external_path, tensor, **changes)
    with pytest.raises(error, match=match) as caught:
        referenced_extents(bad)
    assert isinstance(caught.value, ModelDataError)
    assert isinstance(caught.value, CallerError)
    assert isinstance(caught.value, ValueError)


def test_invalid_entry_leaves_files_untouched(external_path):
    blob = os.path.join(os.path.dirname(external_path), EXTERNAL_BLOB_FILE)
    before = (os.path.getsize(blob), os.path.getsize(external_path))
    with pytest.raises(ExternalDataOverlap):
        referenced_extents(_rewrite(external_path, "W2", offset="4"))
    assert (os.path.getsize(blob), os.path.getsize(external_path)) == before
    assert referenced_extents(external_path).referenced_bytes == 2 * WEIGHT_BYTES


def test_equivalent_location_spellings_are_one_file(external_path):
    # "./weights.bin" and "weights.bin" name the same bytes, so overlap is still caught.
    with pytest.raises(ExternalDataOverlap, match="'W1' and 'W2'"):
        referenced_extents(_rewrite(external_path, "W2", location="./weights.bin", offset="8"))
