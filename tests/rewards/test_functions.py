"""The reward table (``rust_rewards.rewards.functions.REWARDS``): one row per reward, every table derived from it."""

from __future__ import annotations

from rust_rewards.report import Report, SourceFacts
from rust_rewards.rewards import functions
from rust_rewards.rewards.functions import (
    BY_NAME,
    DEFAULT_WEIGHTS,
    MAX_TOTAL,
    MAX_VALUES,
    OWN_TEST_REWARDS,
    REWARD_FUNCS,
    REWARDS,
    SCORES,
    Reward,
    VerifiedReward,
    rewards_from_report,
)
from rust_rewards.train.config import TrainParams, preset_params


def test_every_table_is_the_rows_own():
    names = [row.name for row in REWARDS]
    assert list(SCORES) == list(MAX_VALUES) == list(BY_NAME) == [f.__name__ for f in REWARD_FUNCS] == names
    assert MAX_VALUES == {"build_reward": 1.0, "clippy_reward": 1.0, "test_reward": 2.0, "non_empty_reward": 1.0,
                          "test_block_reward": 0.5, "format_reward": 1.0, "assertion_reward": 1.0,
                          "hidden_test_reward": 2.0}
    assert OWN_TEST_REWARDS == ("test_reward", "non_empty_reward", "test_block_reward", "assertion_reward")
    assert list(DEFAULT_WEIGHTS) == [n for n in names if n != "format_reward"] and MAX_TOTAL == 8.5
    assert all(f.__doc__ == BY_NAME[f.__name__].doc and ">>>" in f.__doc__ for f in REWARD_FUNCS)
    assert [functions.build_reward, functions.hidden_test_reward] == [REWARD_FUNCS[0], REWARD_FUNCS[-1]]


def test_a_row_pays_its_top_times_its_score_only_for_an_answer_to_the_task():
    half = Reward("half_reward", lambda r: 0.5 if r.build_ok else None, 4.0, "")
    built = Report(has_code=True, build_ok=True, source=SourceFacts(code_lines=3))
    assert half.value(built) == 2.0
    assert half.value(Report(has_code=True)) is None  # the score does not apply
    assert half.value(Report(has_code=True, build_ok=True, off_task=("fn f",))) == 0.0
    assert half.value(Report(has_code=True, build_ok=True, internal_error="cargo died")) is None  # never 0
    assert rewards_from_report(built)["build_reward"] == 1.0 and rewards_from_report(built)["test_reward"] == 0.0


def test_the_rewards_flag_offers_every_row():
    from rust_rewards.train.resolve import select_rewards

    for row in REWARDS:
        params = preset_params("tiny")
        params = TrainParams(**{**params.__dict__, "rewards": (row.name,), "answer_format": "solution+tests"})
        funcs, weights = select_rewards(params)
        assert [f.__name__ for f in funcs] == [row.name] and weights == {row.name: 1.0}
    assert VerifiedReward("format_reward").__doc__ == BY_NAME["format_reward"].doc
