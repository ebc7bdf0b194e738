"""tools/timeline.py (a GPU tool) rebuilds the library's int8_fused and int8_meet kernels from their
source with timer stamps after anchor lines; here (CPU) that every anchor still occurs exactly
once in the kernels' source, so a change to a kernel that moves an anchor fails here rather than
on the device."""
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
timeline = pytest.importorskip("timeline")


@pytest.mark.parametrize("spec", [timeline.FUSED, timeline.MEET, timeline.INT8],
                         ids=["int8_fused", "int8_meet", "int8"])
def test_timeline_anchors_match_the_kernels(spec):
    kernel = timeline.traced_kernel(spec, timeline.helpers_of(spec))
    assert kernel.arg_names[-1] == "trace_ptr"  # last: the other parameters keep their PTX names
    assert kernel.arg_names[:-1] == getattr(__import__(f"mxfp4.kernels.{spec[0]}", fromlist=[spec[1]]),
                                           spec[1]).arg_names


def test_timeline_traces_both_launches_of_the_int8_path():
    from mxfp4.kernels import int8

    traced = timeline.traced_module(timeline.INT8)
    assert traced.fold_a_kernel.arg_names == [*int8.fold_a_kernel.arg_names, "trace_ptr"]
    assert traced.a4w4_int8_kernel.arg_names == [*int8.a4w4_int8_kernel.arg_names, "trace_ptr"]


def test_timeline_traces_the_k_steps_of_int8_meet():
    """int8_meet's work items (kernels/int8.py) are copied in with the K-step stamp; the other name
    of their import line (fold_rows) stays the library's own."""
    from mxfp4.kernels import a4w4, int8

    traced = timeline.traced_module(timeline.MEET, timeline.helpers_of(timeline.MEET))
    for name in ("int8_tile", "_add_segment", "_int8_sum"):
        assert getattr(traced, name).arg_names == ["trace_ptr", *getattr(int8, name).arg_names]
    assert traced.meet.arg_names == ["trace_ptr", *a4w4.meet.arg_names]  # the meeting's stamps
    assert traced.fold_rows is int8.fold_rows
