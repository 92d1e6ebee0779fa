"""The alerts already sent, on disk: what makes `evalstream alerts` send each alert once across
restarts, a kill -9 included.

Format: `sent.jsonl` in the state folder, one JSON object a line, appended and fsynced before
the next alert is sent: `{"id": "run/revision/rule"}` per alert the webhook took, and once
`{"seeded": true}`, written when the alerts of what the topics held at the first start were
recorded as sent without sending them. A last line cut short by a crash is ignored (its alert
was not recorded, so it is sent again: the webhook's `Idempotency-Key` lets a receiver drop it).
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson


class SentAlerts:
    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "sent.jsonl"
        self.sent: set[str] = set()
        self.seeded = False
        if self.path.exists():
            for line in self.path.read_bytes().splitlines():
                try:
                    entry = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a line a crash cut short
                if entry.get("seeded"):
                    self.seeded = True
                elif isinstance(entry.get("id"), str):
                    self.sent.add(entry["id"])
        self._file = self.path.open("ab")
        if self.path.stat().st_size and not self.path.read_bytes().endswith(b"\n"):
            self._file.write(b"\n")  # end the cut line, so that the next record starts a line of its own

    def __contains__(self, key: str) -> bool:
        return key in self.sent

    def add(self, *keys: str, seeded: bool = False) -> None:
        """Record `keys` as sent (and the seeding as done), durably, before returning."""
        lines = [orjson.dumps({"id": key}) for key in keys if key not in self.sent]
        if seeded:
            lines.append(orjson.dumps({"seeded": True}))
        if not lines:
            return
        self._file.write(b"".join(line + b"\n" for line in lines))
        self._file.flush()
        os.fsync(self._file.fileno())
        self.sent.update(keys)
        self.seeded = self.seeded or seeded

    def close(self) -> None:
        self._file.close()
