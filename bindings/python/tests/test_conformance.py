"""The conformance scenarios (conformance/README.md), written by the Rust tests from the core,
replayed through the installed package: each step's events built as ``stagger`` events (by
``conformance.py``, which ``bench/boundary.py`` shares) and stepped through ``stagger.Session``
(so encoded by its codec), the actions it decodes turned into the files' JSON form and
compared; a Python host that diverges fails with the first differing step and action.

``bindings/python/test.sh`` names the checkout's ``conformance/`` directory in
``STAGGER_CONFORMANCE_DIR`` (the tests run from a copy outside the source tree).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from stagger import (
    Close,
    Dial,
    NeedNonce,
    NeedToken,
    Rebootstrapped,
    Refreshed,
    RefreshFailed,
    RefreshRequested,
    Resolve,
    Send,
    Session,
)

from conformance import ScenarioConfig, event_of

CONFORMANCE_DIR = os.environ.get("STAGGER_CONFORMANCE_DIR")
FILES = sorted(Path(CONFORMANCE_DIR).glob("*.json")) if CONFORMANCE_DIR else []
UNSET = "STAGGER_CONFORMANCE_DIR is not set (bindings/python/test.sh sets it to the checkout's conformance/)"


class Divergence(AssertionError):
    """The session through this package answered otherwise than the scenario says."""


def action_form(action) -> Dict[str, Any]:
    """A decoded action in the files' JSON form (a refresh error parsed, as the files hold it)."""
    if isinstance(action, Dial):
        return {"dial": {"conn": action.conn, "address": action.address, "tls": action.server_name}}
    if isinstance(action, Send):
        return {"send": {"conn": action.conn, "hex": action.data.hex()}}
    if isinstance(action, Close):
        return {"close": {"conn": action.conn}}
    if isinstance(action, Resolve):
        return {"resolve": {"lookup": action.lookup, "name": action.name}}
    if isinstance(action, NeedNonce):
        return {"need_nonce": {"conn": action.conn}}
    if isinstance(action, NeedToken):
        return {"need_token": {"conn": action.conn}}
    if isinstance(action, Refreshed):
        return {"refreshed": {"epoch": action.epoch, "broker": action.broker, "address": action.address}}
    if isinstance(action, RefreshFailed):
        return {"refresh_failed": {"epoch": action.epoch, "error": json.loads(action.error)}}
    if isinstance(action, Rebootstrapped):
        return {"rebootstrapped": {}}
    if isinstance(action, RefreshRequested):
        return {"refresh_requested": {"epoch": action.epoch}}
    raise TypeError(f"not an action: {action!r}")


def _show(value: Any) -> str:
    return "no action" if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True)


def subset(expected: Any, actual: Any, path: str) -> Optional[str]:
    """Where ``actual`` lacks a field of ``expected`` or differs from it (objects: the fields
    ``expected`` names; lists: the same length, each element so; anything else: equal)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(expected):
            if key not in actual:
                return f"{path}.{key}: expected {_show(expected[key])}, got nothing"
            where = subset(expected[key], actual[key], f"{path}.{key}")
            if where:
                return where
        return None
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (e, a) in enumerate(zip(expected, actual)):
            where = subset(e, a, f"{path}[{i}]")
            if where:
                return where
        return None
    if expected == actual and type(expected) is type(actual):
        return None
    return f"{path}: expected {_show(expected)}, got {_show(actual)}"


def replay(doc: Dict[str, Any]) -> None:
    """Runs a scenario through ``stagger.Session``; raises ``Divergence`` naming the first
    differing step and action."""
    if doc["format"] != 1:
        raise Divergence(f"format {doc['format']}, this replayer reads 1")
    with Session(ScenarioConfig(doc["config"]), now_ns=doc["now_ns"], seed=doc["seed"]) as session:
        for i, step in enumerate(doc["steps"]):
            at = f"step {i} (now_ns {step['now_ns']})"
            actions, wakeup = session.step(step["now_ns"], [event_of(e) for e in step["events"]])
            got: List[Dict[str, Any]] = [action_form(a) for a in actions]
            expected = step["expect"]["actions"]
            for j in range(max(len(got), len(expected))):
                e = expected[j] if j < len(expected) else None
                g = got[j] if j < len(got) else None
                if e != g:
                    raise Divergence(f"{at}, action {j}: expected {_show(e)}, got {_show(g)}")
            if wakeup != step["expect"]["next_wakeup_ns"]:
                raise Divergence(
                    f"{at}: next_wakeup_ns: expected {_show(step['expect']['next_wakeup_ns'])}, got {_show(wakeup)}"
                )
        end = doc.get("end", {})
        answers = {
            "report": session.report_json,
            # The metadata as the library writes it (Session.metadata() gives the typed view).
            "metadata": lambda: json.loads(session._handle.metadata_json()),
        }
        for part in ("report", "metadata"):
            if part in end:
                where = subset(end[part], answers[part](), part)
                if where:
                    raise Divergence(f"end: {where}")


@pytest.mark.parametrize("path", FILES or [None], ids=lambda p: p.stem if p else "none")
def test_a_conformance_scenario_replays_through_the_python_session(path):
    if path is None:
        if not CONFORMANCE_DIR:
            pytest.skip(UNSET)
        pytest.fail(f"no scenarios in {CONFORMANCE_DIR}")
    doc = json.loads(path.read_text())
    try:
        replay(doc)
    except Divergence as e:
        raise Divergence(f"conformance/{path.name} ({doc['description']}):\n{e}") from None


def test_a_conformance_replay_fails_at_the_first_differing_action():
    if not CONFORMANCE_DIR:
        pytest.skip(UNSET)
    doc = json.loads((Path(CONFORMANCE_DIR) / "one_shot_healthy.json").read_text())
    replay(doc)
    # Step 0 answers [refresh_requested, dial]; the copy's dial names another broker.
    dial = doc["steps"][0]["expect"]["actions"][1]
    assert dial["dial"]["address"] == "b1:9092", dial
    doctored = copy.deepcopy(doc)
    doctored["steps"][0]["expect"]["actions"][1]["dial"]["address"] = "b2:9093"
    with pytest.raises(Divergence) as caught:
        replay(doctored)
    message = str(caught.value)
    assert message.startswith(f"step 0 (now_ns {doc['now_ns']}), action 1: expected "), message
    assert '"address":"b2:9093"' in message and 'got {"dial":{"address":"b1:9092"' in message, message

    missing = copy.deepcopy(doc)
    del missing["steps"][0]["expect"]["actions"][1]
    with pytest.raises(Divergence, match=r'action 1: expected no action, got \{"dial"'):
        replay(missing)

    late = copy.deepcopy(doc)
    late["steps"][1]["expect"]["next_wakeup_ns"] = 0
    with pytest.raises(Divergence, match=r"^step 1 \(now_ns \d+\): next_wakeup_ns: expected 0, got \d+"):
        replay(late)

    counted = copy.deepcopy(doc)
    counted["end"]["report"]["stats"]["connections_opened"] = 2
    with pytest.raises(Divergence) as caught:
        replay(counted)
    assert str(caught.value) == "end: report.stats.connections_opened: expected 2, got 1"
