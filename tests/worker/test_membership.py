"""Static membership: a named worker is a static member whose URL is its name's."""

from __future__ import annotations

from pathlib import Path

from worker.runtime.app import build_app
from worker.settings import Settings


def test_a_named_worker_is_a_static_member_whose_url_does_not_follow_its_web_port(tmp_path: Path) -> None:
    urls = set()
    for port in (6066, 7077):
        app = build_app(Settings(data_dir=tmp_path, instance_id="worker-a", web_port=port))
        assert app.conf.consumer_group_instance_id == "worker-a"
        urls.add(str(app.conf.canonical_url))
    # faust asserts that the assignment a static member gets back names this URL
    assert urls == {"http://worker-a"}
    assert build_app(Settings(data_dir=tmp_path)).conf.consumer_group_instance_id is None


def test_standby_replicas_are_off(tmp_path: Path) -> None:
    """A standby's copy has holes behind its offset; the local copy must only ever be written
    by the partition's owner and by faust's recovery."""
    assert build_app(Settings(data_dir=tmp_path)).conf.table_standby_replicas == 0
