"""Writing output files so that nobody ever sees half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """A temporary path beside `path` to write to; it becomes `path` (by a rename) only if the block
    ends without an error, and is removed otherwise. The file gets the usual permissions (umask)."""
    target = Path(path).expanduser()
    fd, tmp = tempfile.mkstemp(dir=target.resolve().parent, prefix=f".{target.name}.", suffix=suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private (0600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
