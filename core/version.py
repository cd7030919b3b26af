"""This release's version and the data format it reads and writes: the one place either
is spelled (pyproject.toml reads `__version__` through setuptools' dynamic version;
CHANGELOG.md's newest entry names it, tests/unit/test_version.py checks both).

The data format is the layout of the keys under DURABLE_KEY_PREFIX. It changes only when
a release changes what it writes in a way the previous release cannot read; each change
has a migration step in store/format_version.py."""

from __future__ import annotations

__all__ = ["DATA_FORMAT", "__version__"]

__version__ = "0.2.0"

# 1: 0.1.0's keys (written before the format was recorded). 2: the same keys, with the
# format recorded in `<prefix>:config` (0.2.0).
DATA_FORMAT = 2
