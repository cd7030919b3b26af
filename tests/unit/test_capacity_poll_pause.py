"""How long a capacity poller sleeps when told to wait (worker/capacity.py): never less
than advised, and at most POLL_JITTER more: a poller that comes late finds the request
bucket full and idle, and that goodput is lost for good."""

from __future__ import annotations

import pytest

from strands_durable.worker.capacity import POLL_JITTER, poll_pause_s


def test_a_poller_sleeps_what_it_was_told_and_at_most_a_little_more() -> None:
    assert poll_pause_s(100, 0.0) == pytest.approx(0.1)
    assert poll_pause_s(100, 0.999) == pytest.approx(0.1 * (1 + POLL_JITTER * 0.999))
    assert POLL_JITTER <= 0.05  # 100 ms told: never 5 ms late


def test_a_draw_out_of_bounds_neither_shortens_nor_stretches_the_wait() -> None:
    assert poll_pause_s(1_000, -3.0) == pytest.approx(1.0)
    assert poll_pause_s(1_000, 7.0) == pytest.approx(1.0 + POLL_JITTER)
