from pathlib import Path

import pytest

ROLLOUTS = Path(__file__).resolve().parents[2] / "fixtures" / "rollouts"


@pytest.fixture
def read_rollout():
    """Lines of a fixture rollout, as bytes, the way an upload or a file on disk arrives."""

    def read(name: str) -> list[bytes]:
        return (ROLLOUTS / name).read_bytes().splitlines(keepends=True)

    return read
