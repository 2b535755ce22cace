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
        options = stagger.Options(sasl=stagger.ScramSha512("u", "p"), topics=["orders"])
        md: stagger.Metadata = await stagger.metadata(["b1:9092"], options)
        names: list[str] = [t.name for t in md.topics]
        leader: int = md.topics[0].partitions[0].leader
        async with stagger.AsyncClient("b1:9092,b2:9092", options, settings={"retry.retries": 0}) as client:
            again = await client.refresh(stagger.Cause.STALE_METADATA, "b1:9092")
            print(again.answered_by, names, leader, client.report().stats.refreshes, client.options.topics)
        with stagger.Session(stagger.SessionConfig(seeds=["b1:9092"])) as session:
            actions, wakeup = session.step(0, [stagger.RequestRefresh(stagger.Cause.BOOTSTRAP)])
            for action in actions:
                if isinstance(action, stagger.Dial):
                    print(action.server_name)
            due: int = wakeup  # error: it may be None
        try:
            stagger.metadata_blocking("b1:9092", client_id="app")
        except stagger.RefreshError as e:
            print(e.last_error.kind if e.last_error else None, [b.story for b in e.brokers])
        stagger.Client("b1:9092", stagger.Options(max_frame_size="1MB"))  # error: not an int
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
    # Exactly the lines marked "# error:" are errors, and each for the reason it says.
    lines = [USAGE.splitlines()[int(error.split(":")[1]) - 1] for error in errors]
    marked = [line for line in USAGE.splitlines() if "# error:" in line]
    assert [line.strip() for line in lines] == [line.strip() for line in marked], done.stdout
    assert "int | None" in errors[0] or "Optional[int]" in errors[0], done.stdout
    assert '"max_frame_size"' in errors[1] and '"str"' in errors[1], done.stdout
