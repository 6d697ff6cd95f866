"""Arena pressure answered at Run boundaries inside the governed runtime (issue #11 item 4; C5, I8b).

A `Pressure` during a generation leaves the arena's share pending; nothing
is answered until the next decode Run, which carries ORT's arena shrinkage
and answers when it ends: 0 B credited (a measured peak cannot shrink),
VmRSS around the Run recorded as residency. Outputs stay identical.
"""

from __future__ import annotations

import onnxruntime as ort
from ort_harness import assert_identical, runtime

from refimpl.ort.arena import SHRINK_KEY
from refimpl.verify.sessions_checker import ENV_ARENA_CAP
from spec import sessions as S


def test_pressure_mid_generation_is_answered_at_the_next_run_boundary(world, monkeypatch) -> None:
    rt = runtime(world, models={"a": "dec"}, prefetch=True)  # the world's arena: ENV_ARENA_CAP
    rid = rt.execute(S.Open("a"))
    rt.execute(S.Decode(rid))
    seen: list[str] = []
    real = ort.InferenceSession.run_with_iobinding

    def spy(self, io, run_options=None):
        seen.append("" if run_options is None else run_options.get_run_config_entry(SHRINK_KEY))
        return real(self, io, run_options)

    monkeypatch.setattr(ort.InferenceSession, "run_with_iobinding", spy)
    used = rt.used()
    released = rt.execute(S.Pressure(4096))
    assert released == 4096 and rt.used() == used - 4096  # the weight cache answered at once
    assert (rt.arena_pending, rt.arena_shrinks, rt.arena_answers) == (1, 0, [])  # the arena waits for a Run
    rt.execute(S.Decode(rid))
    assert seen == ["cpu:0"]  # that Run carried the shrinkage
    assert (rt.arena_pending, rt.arena_shrinks) == (0, 1)
    [answer] = rt.arena_answers
    assert answer.released == 0 and "/proc/self/status" in answer.source
    assert isinstance(answer.rss_before, int) and isinstance(answer.rss_after, int)
    rt.execute(S.Decode(rid))
    assert seen == ["cpu:0", ""]  # answered once: the next Run is an ordinary one
    assert_identical(world, rt, rid, 3)
    rt.close()
    assert rt.used() == ENV_ARENA_CAP  # the env arena's one lease outlives the runtime (ORT's cap does)
