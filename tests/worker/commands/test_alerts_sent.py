"""The record of alerts sent (worker.commands.alerts_sent): durable, and whole after a cut line."""

from __future__ import annotations

from pathlib import Path

from worker.commands.alerts_sent import SentAlerts


def test_what_is_recorded_is_read_back_and_a_line_a_crash_cut_is_passed_over(tmp_path: Path) -> None:
    sent = SentAlerts(tmp_path)
    sent.add("r1/1/run-closed", "r1/0/dead-trials")
    sent.add(seeded=True)
    sent.close()
    with (tmp_path / "sent.jsonl").open("ab") as file:
        file.write(b'{"id": "r2/1/run-cl')  # a kill -9 in the middle of a write
    again = SentAlerts(tmp_path)
    assert again.sent == {"r1/1/run-closed", "r1/0/dead-trials"}
    assert again.seeded
    again.add("r3/1/run-closed")  # starts a line of its own
    again.close()
    assert SentAlerts(tmp_path).sent == {"r1/1/run-closed", "r1/0/dead-trials", "r3/1/run-closed"}
