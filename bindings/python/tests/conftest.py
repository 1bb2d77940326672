"""Shared fixtures: the repository's paths, and a real `countersign serve` on loopback.

The service tests need the `countersign` binary (`cargo build -p countersign-cli` at the
repository root; .ci/steps/python.sh builds it) and the package built with the `testing` feature
(`maturin develop --features testing`), whose `countersign._native.testing` module holds the
software authenticator that approves.
"""

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def repo() -> pathlib.Path:
    return REPO


@pytest.fixture(scope="session")
def countersign_bin() -> str:
    path = os.environ.get("COUNTERSIGN_BIN") or str(REPO / "target" / "debug" / "countersign")
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"{path} is missing: run `cargo build -p countersign-cli` at the repository root "
            "or set COUNTERSIGN_BIN"
        )
    return path
