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


def test_faust_keeps_no_table_so_nothing_but_the_worker_writes_its_local_copy(tmp_path: Path) -> None:
    """faust's recovery and standbys would write the copy from the changelog on their own
    account (a standby's reading left holes behind its offset); the worker restores it itself."""
    app = build_app(Settings(data_dir=tmp_path))
    assert not app.tables
    assert not (tmp_path / "evalstream").exists(), "nothing is opened before a partition is claimed"
