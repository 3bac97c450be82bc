"""The shell imports the engine from the package top level only: every name it exported stays there."""

from __future__ import annotations

import coordinator_state

# Exported before issue 8's restructure (engine.py, records.py and model.GroupState have new names since).
EXPORTED_BEFORE = [
    "DEFAULTS", "ConfigError", "EngineConfig", "Error", "Group", "GroupOutcome", "GroupState", "Invalid",
    "LocalCoordinator", "Request", "StateFormatError", "Tick", "dead_letter", "decode_group", "decode_record",
    "encode_group", "handle_in_group", "invalid_response", "parse_raw", "parse_request", "run_group", "to_json",
]


def test_every_name_exported_before_is_still_exported() -> None:
    missing = [name for name in EXPORTED_BEFORE
               if name not in coordinator_state.__all__ or not hasattr(coordinator_state, name)]
    assert missing == []


def test_group_state_is_the_engine_enum_under_its_old_name() -> None:
    assert coordinator_state.GroupState is coordinator_state.ClassicGroupState
    assert coordinator_state.GroupState("Stable") is coordinator_state.ClassicGroupState.STABLE
