"""The operator setting: the design's operator by default, either of the two by name, nothing else; and the
state store it runs on."""

from __future__ import annotations

import pytest

from coordinator_job.settings import (
    APPLY_IN_PANDAS_WITH_STATE,
    DEFAULT_STATE_STORES,
    DEFAULTS,
    STATE_STORE_PROVIDERS,
    STATEFUL_OPERATORS,
    TRANSFORM_WITH_STATE,
    SettingsError,
    load_settings,
    state_store_provider,
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


def test_the_state_store_is_chosen_by_name_for_the_design_operator() -> None:
    settings = load_settings(overrides=["coordinator.state.store=hdfs"], environ={})
    assert state_store_provider(settings) == STATE_STORE_PROVIDERS["hdfs"]


def test_each_operator_has_a_default_state_store_and_transform_with_state_runs_on_rocksdb() -> None:
    for operator in STATEFUL_OPERATORS:
        settings = load_settings(overrides=[f"coordinator.stateful.operator={operator}"], environ={})
        assert state_store_provider(settings) == STATE_STORE_PROVIDERS[DEFAULT_STATE_STORES[operator]]
    assert DEFAULT_STATE_STORES[TRANSFORM_WITH_STATE] == "rocksdb"


def test_transform_with_state_on_the_hdfs_store_is_refused_saying_what_to_set() -> None:
    with pytest.raises(SettingsError, match=r"RocksDB only: set coordinator\.state\.store to rocksdb"):
        load_settings(overrides=["coordinator.state.store=hdfs",
                                 f"coordinator.stateful.operator={TRANSFORM_WITH_STATE}"], environ={})


def test_an_unknown_state_store_is_refused_naming_the_two() -> None:
    with pytest.raises(SettingsError, match=r"rocksdb, hdfs or empty, got 'memory'"):
        load_settings(overrides=["coordinator.state.store=memory"], environ={})
