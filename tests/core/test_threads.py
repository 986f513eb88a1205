"""torch's thread count: held for a block, or tried on a loop's first batches, always restored."""

from __future__ import annotations

import sys
import threading

import pytest
import torch

from actviz.core.threads import ThreadTuner, available_cores, torch_threads

CPU = torch.device("cpu")


class FakeClock:
    """A clock the test moves: each batch takes ``per_image[threads] * images`` seconds."""

    def __init__(self, per_image: dict[int, float]) -> None:
        self.per_image = per_image
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def batch(self, tuner: ThreadTuner, images: int = 8) -> None:
        self.now += self.per_image[torch.get_num_threads()] * images
        tuner.batch_done(images)


def run_batches(tuner: ThreadTuner, clock: FakeClock, count: int) -> list[int]:
    """Thread counts each batch ran at."""
    seen = []
    for _ in range(count):
        seen.append(torch.get_num_threads())
        clock.batch(tuner)
    return seen


def test_fewer_threads_kept_when_faster_and_restored_after(four_threads):
    clock = FakeClock({4: 0.010, 2: 0.008})
    tuner = ThreadTuner(workers=2, batches=40, device=CPU, cores=4, clock=clock)
    assert tuner.active and tuner.candidate == 2
    seen = run_batches(tuner, clock, 20)
    w, t = ThreadTuner.WARMUP, ThreadTuner.TRIAL
    # Warm-up and the first trial at 4; the second trial and everything after at 2.
    assert seen == [4] * (w + t) + [2] * (20 - w - t)
    assert not tuner.active and tuner.threads == 2
    assert tuner.rates == {4: pytest.approx(100.0), 2: pytest.approx(125.0)}
    assert tuner.restore() == 2
    assert torch.get_num_threads() == 4


def test_a_far_slower_candidate_is_given_up_after_one_batch(four_threads):
    clock = FakeClock({4: 0.010, 2: 0.020})  # half as fast: the forward-bound case
    tuner = ThreadTuner(workers=2, batches=40, device=CPU, cores=4, clock=clock)
    seen = run_batches(tuner, clock, 15)
    w, t = ThreadTuner.WARMUP, ThreadTuner.TRIAL
    assert seen == [4] * (w + t) + [2] + [4] * (15 - w - t - 1)
    assert tuner.threads == 4 and tuner.rates[2] == pytest.approx(50.0)


def test_a_slightly_slower_candidate_gets_its_full_trial_then_loses(four_threads):
    clock = FakeClock({4: 0.010, 2: 0.011})
    tuner = ThreadTuner(workers=2, batches=40, device=CPU, cores=4, clock=clock)
    seen = run_batches(tuner, clock, 15)
    w, t = ThreadTuner.WARMUP, ThreadTuner.TRIAL
    assert seen == [4] * (w + t) + [2] * t + [4] * (15 - w - 2 * t)
    assert tuner.threads == 4


def test_one_slow_batch_does_not_decide(four_threads):
    clock = FakeClock({4: 0.010, 2: 0.008})
    tuner = ThreadTuner(workers=2, batches=40, device=CPU, cores=4, clock=clock)
    w, t = ThreadTuner.WARMUP, ThreadTuner.TRIAL
    clock.per_image[4] = 0.001  # one batch at 4 threads looks 10 times faster
    run_batches(tuner, clock, w + 1)
    clock.per_image[4] = 0.010
    run_batches(tuner, clock, t)  # ... and on at 2 threads
    clock.per_image[2] = 0.5  # the second batch at 2 held up by something else
    run_batches(tuner, clock, 1)
    clock.per_image[2] = 0.008
    run_batches(tuner, clock, t)
    assert tuner.threads == 2  # the median batch decides
    assert tuner.rates == {4: pytest.approx(100.0), 2: pytest.approx(125.0)}


def test_batches_of_unreadable_files_only_are_not_timed(four_threads):
    clock = FakeClock({4: 0.010, 2: 0.008})
    tuner = ThreadTuner(workers=2, batches=40, device=CPU, cores=4, clock=clock)
    w, t = ThreadTuner.WARMUP, ThreadTuner.TRIAL
    run_batches(tuner, clock, w + t - 1)
    # A batch of bad files where the first trial would end: no images, a long time.
    clock.now += 5.0
    tuner.batch_done(0)
    assert torch.get_num_threads() == 4  # the trial at 4 threads is not over
    seen = run_batches(tuner, clock, t + 1)
    assert seen == [4] + [2] * t
    assert tuner.rates == {4: pytest.approx(100.0), 2: pytest.approx(125.0)}
    assert tuner.threads == 2 and not tuner.active


@pytest.mark.parametrize(
    ("workers", "batches", "device", "cores"),
    [
        (0, 40, CPU, 4),  # no loader processes to make room for
        (2, 40, torch.device("meta"), 4),  # not a CPU model
        (2, 40, CPU, 8),  # 4 threads + 2 workers fit 8 cores
        (2, 2 * ThreadTuner.TRIAL + ThreadTuner.WARMUP, CPU, 4),  # too short to try
    ],
)
def test_no_trial_where_it_cannot_help(four_threads, workers, batches, device, cores):
    clock = FakeClock({4: 0.010, 2: 0.001})
    tuner = ThreadTuner(workers=workers, batches=batches, device=device, cores=cores, clock=clock)
    assert not tuner.active
    assert set(run_batches(tuner, clock, 20)) == {4}
    assert tuner.restore() == 4 and torch.get_num_threads() == 4


def test_the_count_is_per_thread():
    """A scan on a worker thread (the window's) leaves the calling thread's count alone."""
    before = torch.get_num_threads()
    seen = []

    def work():
        torch.set_num_threads(1)
        seen.append(torch.get_num_threads())
        # The last count set anywhere is also what threads that start parallel work later
        # begin with (torch's lazy per-thread init): put it back, as every user here does.
        torch.set_num_threads(before)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [1] and torch.get_num_threads() == before
    assert available_cores() >= 1


def test_torch_threads_holds_a_count_for_a_block_and_puts_it_back(four_threads):
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 4
    with torch_threads(None):
        assert torch.get_num_threads() == 4
    with pytest.raises(RuntimeError), torch_threads(2):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == 4


def _nice_of_this_thread() -> int:
    import os

    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority: Linux")
def test_a_thread_lowers_its_own_priority_once_and_the_caller_keeps_its_own():
    from actviz.core.threads import BACKGROUND_NICE, lower_thread_priority

    caller = _nice_of_this_thread()
    seen = []

    def work():
        before = _nice_of_this_thread()
        seen.append(lower_thread_priority())
        once = _nice_of_this_thread()
        seen.append(lower_thread_priority())  # already lowered: not again
        seen.append((before, once, _nice_of_this_thread()))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    first, second, (before, once, twice) = seen
    assert first is True and second is True
    assert once == twice == min(19, before + BACKGROUND_NICE)
    assert _nice_of_this_thread() == caller
