"""Fixtures shared by every test directory."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest


@pytest.fixture(scope="session")
def kept_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``name`` -> a directory kept between test runs (pytest's cache, e.g. for mypy's caches).

    Under ``-p no:cacheprovider`` pytest has no cache: each call gets a fresh
    temporary directory, so the tests run the same, only colder.
    """
    cache = getattr(request.config, "cache", None)

    def make(name: str) -> Path:
        return Path(cache.mkdir(name)) if cache is not None else tmp_path_factory.mktemp(name)

    return make
