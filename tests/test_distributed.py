"""statemix.distributed on a real dask LocalCluster of two worker processes, one of them killed."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import statemix

from conftest import text_sample

distributed = pytest.importorskip("distributed")
import statemix.distributed as smx_distributed  # noqa: E402

#: the module's tests share a costly module fixture: one test worker runs them all (pytest -n)
pytestmark = pytest.mark.xdist_group("distributed")

SEGMENT = 1 << 18
DATA = text_sample(6 * SEGMENT + 1234, seed=31)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       host="127.0.0.1")
    with distributed.Client(cluster) as c:
        c.run(lambda: __import__("statemix").compress(b"warm the kernels " * 100, level=1))
        yield c
    cluster.close()


def test_output_equals_the_local_segment_mode(client, tmp_path):
    source = tmp_path / "data.txt"
    source.write_bytes(DATA)
    size = smx_distributed.compress_file(client, source, segment_size=SEGMENT, level=1)
    stream = (tmp_path / "data.txt.smx").read_bytes()
    assert size == len(stream)
    assert stream == statemix.compress(DATA, level=1, segment_size=SEGMENT, threads=2)
    assert statemix.decompress(stream) == DATA
    with pytest.raises(OSError):
        smx_distributed.compress_file(client, source, segment_size=SEGMENT, level=1)  # exists: no -f


def test_a_worker_killed_in_the_middle_of_a_task(client, tmp_path):
    source = tmp_path / "data.txt"
    source.write_bytes(DATA)
    victim_address, victim = next(iter(client.run(os.getpid).items()))
    before = set(client.run_on_scheduler(scheduled_keys))

    def kill_while_busy():
        while not client.processing(workers=[victim_address]).get(victim_address):
            time.sleep(0.01)
        time.sleep(0.2)  # into the task
        os.kill(victim, signal.SIGKILL)

    killer = threading.Thread(target=kill_while_busy)
    killer.start()
    smx_distributed.compress_file(client, source, tmp_path / "out.smx", segment_size=SEGMENT // 4, level=2)
    killer.join()
    assert (tmp_path / "out.smx").read_bytes() == statemix.compress(DATA, level=2, segment_size=SEGMENT // 4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.txt", "out.smx"]  # nothing partial
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid).values()  # the victim died and a new worker took its place
    runs = client.run_on_scheduler(scheduled_keys)
    assert any(count > 1 for key, count in runs.items() if key not in before)  # a task was scheduled again


def scheduled_keys(dask_scheduler) -> dict:
    """How many times the scheduler sent each segment's task to a worker (its transition log)."""
    counts = {}
    for key, _, finish, *_ in dask_scheduler.transition_log:
        if "_compress_task" in str(key) and finish == "processing":
            counts[str(key)] = counts.get(str(key), 0) + 1
    return counts


def test_a_failed_run_leaves_no_partial_file(client, tmp_path):
    source = tmp_path / "data.txt"
    source.write_bytes(DATA)
    with pytest.raises(ValueError):
        smx_distributed.compress_file(client, source, segment_size=SEGMENT, level=9)

    def broken(data, level, model):
        raise RuntimeError("worker failure")

    original = smx_distributed._compress_task
    smx_distributed._compress_task = broken
    try:
        with pytest.raises(RuntimeError):
            smx_distributed.compress_file(client, source, segment_size=SEGMENT, level=1)
    finally:
        smx_distributed._compress_task = original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.txt"]


def test_a_directory(client, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_bytes(DATA[:5000])
    (tmp_path / "sub" / "b.txt").write_bytes(DATA[5000:400_000])
    sizes = smx_distributed.compress_directory(client, tmp_path, segment_size=SEGMENT, level=1)
    assert sorted(sizes) == [str(tmp_path / "a.txt"), str(tmp_path / "sub" / "b.txt")]
    assert statemix.decompress((tmp_path / "sub" / "b.txt.smx").read_bytes()) == DATA[5000:400_000]
