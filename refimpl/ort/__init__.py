# The ORT boundary: the only package in ortmem allowed to import onnxruntime.
#
# Owns: building small models, reading external-data extents, creating
# sessions that are checked to run where asked, and the session reporter
# (transient peak + granularity, I8). Must not touch: the spec or governor
# state; everything here hands back frozen reports and holds no lease.
# The wheel check runs first: with two ORT wheels installed, `import
# onnxruntime` loads whichever was installed last (ORT-NOTES 1).

from refimpl.ort._wheels import check_single_ort_wheel

check_single_ort_wheel()

from refimpl.ort.extents import (  # noqa: E402
    ExternalDataReport,
    ExternalRange,
    LocationExtents,
    referenced_extents,
)
from refimpl.ort.models import (  # noqa: E402
    build_decoder,
    build_dynamic,
    build_external,
    empty_past,
    reference_decoder_step,
    reference_dynamic,
    reference_external,
)
from refimpl.ort.reporter import (  # noqa: E402
    GranularityReport,
    PeakMethod,
    PeakReport,
    calibrate_transient_peak,
    granularity,
    peaks_from_profile,
)
from refimpl.ort.session import ModelSource, make_session  # noqa: E402

__all__ = [
    "check_single_ort_wheel",
    "ExternalDataReport",
    "ExternalRange",
    "LocationExtents",
    "referenced_extents",
    "build_decoder",
    "build_dynamic",
    "build_external",
    "empty_past",
    "reference_decoder_step",
    "reference_dynamic",
    "reference_external",
    "GranularityReport",
    "PeakMethod",
    "PeakReport",
    "calibrate_transient_peak",
    "granularity",
    "peaks_from_profile",
    "ModelSource",
    "make_session",
]
