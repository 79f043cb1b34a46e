"""Every long phase talks and keeps its work (issue 55): progress lines (done/total, rate, time left) at least every
30 s, and a pass-rate filter that keeps its samples and verdicts as they come and resumes where it stopped with the
same result as an uninterrupted one. A fake sampler and verifier stand in for the model and cargo."""

from __future__ import annotations

import functools
import json
import time

import pytest
from conftest import ROOT

from rust_rewards.data.importers import load_file
from rust_rewards.layout import PASS_RATE_SAMPLES_FILE, PASS_RATES_FILE
from rust_rewards.report import Report
from rust_rewards.sampling.engines import Generation
from rust_rewards.train import pass_rates
from rust_rewards.train.config import params_from_mapping
from rust_rewards.train.pass_rates import sample_pass_rates
from rust_rewards.train.progress import ProgressLine, duration

TASKS = load_file(ROOT / "qwen3-rust-finetune" / "easy_tasks.jsonl")[:6]
K = 2


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeSampler:
    """Answers drawn from torch's RNG (so a chunk's seed decides them), ``seconds`` of fake time per call; raises
    KeyboardInterrupt at call number ``stop_at``."""

    def __init__(self, stop_at: int | None = None, clock: FakeClock | None = None, seconds: float = 0.0) -> None:
        self.calls: list[list[str]] = []
        self.stop_at, self.clock, self.seconds = stop_at, clock, seconds

    def render(self, prompt: str) -> str:
        return prompt

    def generate(self, prompts, params) -> list[Generation]:
        import torch

        if self.stop_at is not None and len(self.calls) + 1 == self.stop_at:
            raise KeyboardInterrupt
        self.calls.append(sorted(set(prompts)))
        if self.clock is not None:
            self.clock.now += self.seconds
        return [Generation(text="builds" if d < 0.5 else "breaks", tokens=1, truncated=False)
                for d in torch.rand(len(prompts)).tolist()]


class FakeVerifier:
    """``build_ok`` for the answers that say so; raises KeyboardInterrupt at call number ``stop_at``."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.calls, self.stop_at = 0, stop_at

    def verify_many(self, completions, hidden=None, progress=None) -> list[Report]:
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        if progress:
            progress(len(completions), len(completions))
        return [Report(has_code=True, build_ok=c == "builds") for c in completions]


def params(out):
    return params_from_mapping({"preset": "smollm2-cpu", "output-dir": str(out), "pass-rate-k": K})


def run(out, sampler, verifier=None):
    """The filter over ``TASKS`` in chunks of one task (``batch_size`` K)."""
    return sample_pass_rates(params(out), TASKS, verifier or FakeVerifier(), batch_size=K, generator=sampler)


def prompts_of(calls: list[list[str]]) -> list[str]:
    return [p for call in calls for p in call]


def test_progress_line_says_done_rate_and_time_left_at_most_every_30_s():
    clock, said = FakeClock(), []
    line = ProgressLine("pass-rate filter", 480, "samples", clock=clock, say=said.append)
    clock.now += 10
    line.update(64)
    assert said == []  # nothing due yet
    clock.now += 20
    line.update(64)
    assert said == ["pass-rate filter: 64/480 samples, 2.13 samples/s, 30 s so far, about 3 min 15 s left"]
    clock.now += 29
    line.update(100, "tasks 9-16 of 60: sampling")
    line.update(say=False)  # the caller printed a line of its own: the silence starts again
    clock.now += 29
    line.update()
    assert len(said) == 1
    clock.now += 1
    line.update()
    assert said[-1].startswith("pass-rate filter: 100/480 samples (tasks 9-16 of 60: sampling), 1.12 samples/s, "
                               "1 min 29 s so far, about 5 min 38 s left")
    clock.now += 1000
    line.update(480, "", say=True)
    assert said[-1] == "pass-rate filter: 480/480 samples, 26.4 samples/min, took 18 min 9 s"
    assert duration(16 * 60 + 44) == "16 min 44 s" and duration(3 * 3600 + 300) == "3 h 5 min"


def test_a_resumed_line_rates_only_its_own_work_and_a_first_step_has_no_rate_yet():
    clock, said = FakeClock(), []
    line = ProgressLine("training", 80, "steps", done=40, note="step 41 under way", clock=clock, say=said.append)
    clock.now += 30
    line.update()
    assert said == ["training: 40/80 steps (step 41 under way), 30 s so far"]
    clock.now += 30
    line.update(41, "step 42 under way")
    assert said[-1] == "training: 41/80 steps (step 42 under way), 1 steps/min, 1 min 0 s so far, about 39 min 0 s left"


def test_the_heartbeat_speaks_while_the_work_does_not_and_stops():
    said: list[str] = []
    with ProgressLine("building", 10, "steps", every=0.05, say=said.append):
        time.sleep(0.4)
    assert len(said) >= 2 and all(s.startswith("building: 0/10 steps, 0 s so far") for s in said)
    count = len(said)
    time.sleep(0.2)
    assert len(said) == count  # stopped


def test_an_interrupted_filter_keeps_its_work_and_resumes_to_the_same_result(tmp_path, capsys):
    whole = run(tmp_path / "whole", FakeSampler())
    assert set(whole.totals) == {t.task_id for t in TASKS} and whole.mixed()  # some tasks mixed, so it tells apart
    out = tmp_path / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run(out, FakeSampler(stop_at=3))  # Ctrl-C while sampling the third task
    err = capsys.readouterr().err
    assert f"pass-rate filter interrupted: 2 of 6 tasks judged, kept in {out / PASS_RATE_SAMPLES_FILE}" in err
    assert "the same command resumes the filter with the rest" in err
    assert not (out / PASS_RATES_FILE).exists()
    with pytest.raises(KeyboardInterrupt):
        run(out, FakeSampler(), FakeVerifier(stop_at=2))  # Ctrl-C while verifying the fourth task
    assert "3 of 6 tasks judged and 1 more sampled" in capsys.readouterr().err
    with open(out / PASS_RATE_SAMPLES_FILE, "a") as handle:
        handle.write('{"task_id": "cut short by a cra')  # a crash mid-line
    resumed = FakeSampler()
    again = run(out, resumed)
    assert prompts_of(resumed.calls) == [t.prompt for t in TASKS[4:]]  # the fourth task's samples were kept
    assert again.totals == whole.totals and again.passed == whole.passed and again.mixed() == whole.mixed()
    assert json.loads((out / PASS_RATES_FILE).read_text())["totals"] == whole.totals
    reread = FakeSampler()
    assert run(out, reread).totals == whole.totals and reread.calls == []  # done: read back, nothing sampled


def test_samples_of_other_settings_are_not_reused(tmp_path, capsys):
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, FakeSampler(stop_at=2))
    other = params_from_mapping({"preset": "smollm2-cpu", "output-dir": str(tmp_path), "pass-rate-k": K,
                                 "temperature": 0.5})
    sampler = FakeSampler()
    sample_pass_rates(other, TASKS, FakeVerifier(), batch_size=K, generator=sampler)
    assert len(sampler.calls) == len(TASKS)
    assert "holds the samples of other settings; sampling anew" in capsys.readouterr().out


def test_the_filter_says_what_it_does_and_how_far_it_is(tmp_path, monkeypatch, capsys):
    clock, said = FakeClock(), []
    monkeypatch.setattr(pass_rates, "ProgressLine", functools.partial(ProgressLine, clock=clock, say=said.append))
    run(tmp_path, FakeSampler(clock=clock, seconds=40))
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (f"pass-rate filter, before step 1: 6 training tasks x {K} samples from the starting policy, "
                     f"verified (--pass-rate-k 0 skips it); kept as they come in {tmp_path / PASS_RATE_SAMPLES_FILE}")
    assert len(said) == len(TASKS)  # 40 s a task: a line each, as its answers are verified
    assert said[0] == "pass-rate filter: 0/12 samples (task 1 of 6: verified 2/2), 40 s so far"
    assert said[1] == ("pass-rate filter: 2/12 samples (task 2 of 6: verified 2/2), 1.5 samples/min, 1 min 20 s so "
                       "far, about 6 min 40 s left")
    assert said[-1].startswith("pass-rate filter: 10/12 samples (task 6 of 6: verified 2/2), ")
