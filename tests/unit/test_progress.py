"""Progress lines: what they say, how often they come, and that short work stays quiet."""

from __future__ import annotations

import threading
import time

from mem_resources.progress import Progress, format_duration, listening, tracked


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_line_reports_done_total_rate_and_eta():
    clock = FakeClock()
    progress = Progress("ingest alice/a.jsonl", total=100_000, unit="lines", clock=clock)
    clock.now += 20
    progress.advance(40_000)
    assert progress.line() == ("ingest alice/a.jsonl: 40,000/100,000 lines (40%), 2,000.0 lines/s, "
                               "20 s elapsed, ETA 30 s")


def test_line_without_total_has_no_eta():
    clock = FakeClock()
    progress = Progress("fuse t", unit="groups", clock=clock)
    clock.now += 4
    progress.advance(2)
    assert progress.line() == "fuse t: 2 groups, 0.5 groups/s, 4 s elapsed"


def test_durations_read_naturally():
    assert [format_duration(s) for s in (0.4, 59, 61, 3725)] == ["0 s", "59 s", "1 min 01 s",
                                                                 "1 h 02 min"]


def test_long_work_reports_every_interval_even_while_one_step_blocks_and_then_its_total():
    lines: list[str] = []
    with tracked("judge t", lines.append, total=3, unit="pairs", interval_s=0.05) as progress:
        progress.advance()
        time.sleep(0.3)
        progress.advance(2)
    assert len(lines) >= 4
    assert lines[0].startswith("judge t: 1/3 pairs (33%)")
    assert lines[-1].startswith("judge t: 3/3 pairs (100%)") and lines[-1].endswith("(done)")


def test_short_work_emits_nothing_and_no_sink_means_no_thread():
    lines: list[str] = []
    with tracked("resolve t", lines.append, total=5, interval_s=5) as progress:
        progress.advance(5)
    assert lines == []
    threads = threading.active_count()
    with tracked("resolve t", None, total=5) as progress:
        assert threading.active_count() == threads
        progress.advance(5)
    assert progress.done == 5


def test_a_listener_sees_the_lines_of_work_running_in_its_process_while_it_listens():
    """How `memtend tend` puts a run's progress next to its bar."""
    sunk: list[str] = []
    heard: list[str] = []
    with listening(heard.append), tracked("ingest t/a.jsonl", sunk.append, total=2, unit="lines",
                                          interval_s=0.05) as progress:
        progress.advance()
        time.sleep(0.2)
        progress.advance()
    assert heard == sunk and heard[-1].endswith("(done)")
    with tracked("ingest t/b.jsonl", sunk.append, total=1, unit="lines", interval_s=0.05) as progress:
        time.sleep(0.2)
        progress.advance()
    assert len(sunk) > len(heard) and not any("b.jsonl" in line for line in heard)
