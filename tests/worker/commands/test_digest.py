"""`evalstream digest`: output events made readable."""

from __future__ import annotations

import io

from events.codec import encode_payload
from projections.progress import progress
from projections.summary import summary
from tests.builders import closed, fold
from tests.projections.examples import section_2_example
from worker.commands.digest import digest


def test_a_summary_and_a_progress_event_read_as_lines_for_people() -> None:
    run = fold(section_2_example())
    open_progress = encode_payload(progress(run, 9))
    out = io.StringIO()
    digest([open_progress, b"", encode_payload(summary(fold([*section_2_example(), closed()])))], out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "  progress run #9 [open] trials 0 reward.score pass@1 0.778"
    assert lines[1].startswith("summary  run rev 1 (completed): 5 tasks, 9 trials, 9 scores, 0 trial errors")
    assert lines[2:] == [
        "    reward.score.pass@1                  0.7778  (n=3, unmeasured=2)",
        "    reward.score.pass@2                  0.8333  (n=2, unmeasured=2)",
        "    reward.score.pass@3                  1.0000  (n=2, unmeasured=2)",
    ]
