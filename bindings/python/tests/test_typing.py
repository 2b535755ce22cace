"""The installed package is typed (``py.typed``): mypy reads its hints, in strict mode."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

USAGE = textwrap.dedent(
    """
    import asyncio
    import stagger

    async def main() -> None:
        md: stagger.Metadata = await stagger.metadata(["b1:9092"], sasl=stagger.ScramSha512("u", "p"))
        names: list[str] = [t.name for t in md.topics]
        leader: int = md.topics[0].partitions[0].leader
        async with stagger.AsyncClient("b1:9092,b2:9092", settings={"retry.retries": 0}) as client:
            again = await client.refresh(stagger.Cause.STALE_METADATA, "b1:9092")
            print(again.answered_by, names, leader, client.report().stats.refreshes)
        with stagger.Session(stagger.SessionConfig(seeds=["b1:9092"])) as session:
            actions, wakeup = session.step(0, [stagger.RequestRefresh(stagger.Cause.BOOTSTRAP)])
            for action in actions:
                if isinstance(action, stagger.Dial):
                    print(action.server_name)
            due: int = wakeup  # the one error: it may be None
        try:
            stagger.metadata_blocking("b1:9092")
        except stagger.RefreshError as e:
            print(e.last_error.kind if e.last_error else None, [b.story for b in e.brokers])
    """
)


def test_mypy_strict_reads_the_installed_packages_hints(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (bindings/python/test.sh installs it)")
    (tmp_path / "usage.py").write_text(USAGE)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "usage.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, done.stdout
    line = USAGE.splitlines()[int(errors[0].split(":")[1]) - 1]
    assert "due: int = wakeup" in line, done.stdout
    assert "int | None" in errors[0] or "Optional[int]" in errors[0], done.stdout
