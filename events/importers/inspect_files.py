"""Inspect AI eval logs on disk, read as plain JSON with the standard library and cramjam.

Two formats (Inspect's `--log-format`):
- `.eval`: a zip archive; `header.json` holds the spec, status and results once the eval
  ended, `_journal/start.json` the spec while it runs (or after it died); one member
  `samples/<id>_epoch_<n>.json` per sample, a re-logged sample superseding the earlier
  member of that name (the last one wins, as in Inspect's own reader). Members are zstd
  (Inspect >= 0.3.1xx; cramjam, since Python < 3.14's zipfile cannot), deflate (older
  versions) or stored.
- `.json`: one object with `eval`, `status` and `samples` (sorted by epoch, then id).
Samples are handed out in the order they finished (`completed_at`), so that both formats
of one log give one order; a log whose samples lack it (old versions) keeps file order.
"""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import cramjam

from events.importers.source import SourceError, json_value

ZIP_MAGIC = b"PK\x03\x04"
HEADER = "header.json"
START = "_journal/start.json"
SAMPLES = "samples/"
_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_STORED, _DEFLATED, _ZSTD = 0, 8, 93


@dataclass(frozen=True)
class InspectLog:
    spec: dict[str, Any]
    """The log's `eval` object: task, model, dataset, scorers, config, ids."""
    status: str
    """started, success, cancelled or error."""
    samples: list[dict[str, Any]]
    """Every sample (one per sample id and epoch), in the order they finished."""


def load(path: Path) -> InspectLog:
    try:
        with path.open("rb") as file:
            first = file.read(len(ZIP_MAGIC))
    except IsADirectoryError:
        raise SourceError(f"{path} is a directory; give one log file (.eval or .json) of it") from None
    except OSError as error:
        raise SourceError(f"{path}: cannot read it: {error.strerror}") from None
    if first == ZIP_MAGIC:
        return _ordered(path, _load_eval(path))
    if first.lstrip()[:1] == b"{":
        return _ordered(path, _load_json(path))
    raise SourceError(f"{path} is not an Inspect AI eval log: expected a .eval (zip) or .json log file")


def _load_json(path: Path) -> InspectLog:
    data = _parse(path.read_bytes(), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("eval"), dict):
        raise SourceError(f"{path}: a JSON file without an 'eval' object is not an Inspect AI eval log")
    return InspectLog(data["eval"], str(data.get("status", "started")), list(data.get("samples") or []))


def _load_eval(path: Path) -> InspectLog:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as error:
        raise SourceError(
            f"{path}: not a readable zip archive ({error}); the .eval log is corrupt or truncated"
        ) from None
    with archive, path.open("rb") as file:
        members: dict[str, zipfile.ZipInfo] = {}
        for info in archive.infolist():
            members.pop(info.filename, None)  # a later member of the same name supersedes it
            members[info.filename] = info
        if HEADER in members:
            header = _member(file, members[HEADER], path)
            status = str(header.get("status", "started"))
        elif START in members:
            header, status = _member(file, members[START], path), "started"
        else:
            raise SourceError(f"{path}: a zip without {HEADER} or {START} is not an Inspect AI .eval log")
        if not isinstance(header.get("eval"), dict):
            raise SourceError(f"{path}: its header has no 'eval' object; is this an Inspect AI .eval log?")
        samples = [
            _member(file, info, path)
            for name, info in members.items()
            if name.startswith(SAMPLES) and name.endswith(".json")
        ]
    return InspectLog(header["eval"], status, samples)


def _member(file: IO[bytes], info: zipfile.ZipInfo, path: Path) -> Any:
    """One member's JSON, decompressed from its raw bytes (zipfile cannot read zstd)."""
    where = f"{path}: member {info.filename}"
    if info.flag_bits & 0x1:
        raise SourceError(f"{where} is encrypted; Inspect never writes encrypted logs")
    file.seek(info.header_offset)
    local = file.read(_LOCAL_HEADER.size)
    if len(local) < _LOCAL_HEADER.size or local[:4] != ZIP_MAGIC:
        raise SourceError(f"{where}: no local header at offset {info.header_offset}; the file is corrupt")
    name_length, extra_length = _LOCAL_HEADER.unpack(local)[-2:]
    file.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
    raw = file.read(info.compress_size)
    try:
        if info.compress_type == _ZSTD:
            data = bytes(cramjam.zstd.decompress(raw))
        elif info.compress_type == _DEFLATED:
            data = zlib.decompress(raw, -zlib.MAX_WBITS)
        elif info.compress_type == _STORED:
            data = raw
        else:
            raise SourceError(f"{where}: compression method {info.compress_type} is not zstd, deflate or stored")
    except (cramjam.DecompressionError, zlib.error) as error:
        raise SourceError(f"{where}: cannot decompress it ({error}); the file is corrupt") from None
    if zlib.crc32(data) != info.CRC:
        raise SourceError(f"{where}: its checksum does not match; the file is corrupt")
    return _parse(data, where)


def _parse(data: bytes, where: str) -> Any:
    try:
        return json_value(data, where)  # NaN and Infinity, as Inspect writes them, are read as floats
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        at = f" at line {error.lineno} column {error.colno}" if isinstance(error, json.JSONDecodeError) else ""
        reason = error.msg if isinstance(error, json.JSONDecodeError) else "not UTF-8"
        raise SourceError(f"{where}: not valid JSON{at}: {reason}") from None


def _ordered(path: Path, log: InspectLog) -> InspectLog:
    for index, sample in enumerate(log.samples):
        if not isinstance(sample, dict):
            raise SourceError(f"{path}: sample {index + 1} is not a JSON object; is this an Inspect AI eval log?")
    try:
        finished = [datetime.fromisoformat(sample["completed_at"]) for sample in log.samples]
        order = sorted(range(len(log.samples)), key=finished.__getitem__)
    except (KeyError, TypeError, ValueError):  # none, or not comparable: file order
        return log
    return InspectLog(log.spec, log.status, [log.samples[i] for i in order])
