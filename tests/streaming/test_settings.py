"""The operator setting: the design's operator by default, either of the two by name, nothing else."""

from __future__ import annotations

import pytest

from coordinator_job.settings import (
    APPLY_IN_PANDAS_WITH_STATE,
    DEFAULTS,
    TRANSFORM_WITH_STATE,
    SettingsError,
    load_settings,
    stateful_operator,
)


def test_the_design_operator_is_the_default_in_the_code_and_in_the_conf_file() -> None:
    assert DEFAULTS["coordinator.stateful.operator"] == APPLY_IN_PANDAS_WITH_STATE
    assert stateful_operator(load_settings(environ={})) == APPLY_IN_PANDAS_WITH_STATE


def test_transform_with_state_is_chosen_by_name_from_the_environment() -> None:
    settings = load_settings(environ={"COORDINATOR__COORDINATOR_STATEFUL_OPERATOR": TRANSFORM_WITH_STATE})
    assert stateful_operator(settings) == TRANSFORM_WITH_STATE


def test_another_operator_is_refused_naming_the_two() -> None:
    with pytest.raises(SettingsError, match=r"applyInPandasWithState, transformWithState.*'flatMapGroupsWithState'"):
        load_settings(overrides=["coordinator.stateful.operator=flatMapGroupsWithState"], environ={})
