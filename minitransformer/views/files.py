"""Output destinations: what a path points at is decided once, before any work, and then written so
that nobody ever sees half of a file and nothing that is not a file is ever replaced.

`check_destination(path)` classifies the destination or refuses it with a one-line `UserError`;
`open_destination(destination)` / `write_text(destination, chunks)` then write it as its kind asks:

- "file": a regular file, new or existing (also through a symlink, which stays a symlink: the file
  it points at is written). Written whole or not at all: into a temporary file beside it, then a
  rename. An existing file keeps its permissions (and its owner, where the system allows); a new one
  gets the umask's.
- "stdout" / "stderr": `-`, or a path that is the very file or pipe stdout (or stderr) already is,
  such as /dev/stdout in a pipe or the file stdout is redirected to. Written through the stream the
  process holds, so it lands after what was printed before instead of over it.
- "special": anything else that can be opened for writing (a device, a named pipe, a terminal) is
  written in place, never replaced. A named pipe waits for its reader, as the shell's `>` does.

`write_together(outputs)` writes several outputs of one command (--json, --csv, --plot, --html) as one: every file
is made whole in its temporary first, and none replaces its target unless all were made, so an output that cannot
be drawn leaves none of them written, not half of them.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import UserError

STREAM_FDS = {"stdout": 1, "stderr": 2}
# Text from the file system (a directory's name that is not UTF-8) holds surrogate escapes: a document
# shows them as the escape "\udce9", which JSON reads back as the same character, instead of failing.
TEXT_ERRORS = "backslashreplace"


@dataclass(frozen=True)
class Destination:
    """Where one output goes, as `check_destination` found it before any work was done."""

    name: str  # as the user gave it: messages say this
    kind: str  # "file", "stdout", "stderr" or "special" (see the module docstring)
    path: Path | None = None  # "file": the regular file itself, symlinks followed; "special": the path as given

    @property
    def is_stdout(self) -> bool:
        return self.kind == "stdout"

    @property
    def is_stream(self) -> bool:
        return self.kind in STREAM_FDS


def check_destination(path: str | os.PathLike) -> Destination:
    """What `path` points at, or a `UserError` that says why it cannot be written and what to do.

    Call it before any work. A file's directory is tried for real (a temporary file is created there
    and removed at once), since permission bits alone do not tell: root may write where the bits say
    no, and /proc, /sys or a read-only mount refuse whatever the bits say."""
    name = os.fspath(path)
    if name == "-":
        return Destination(name, "stdout")
    if not name:
        raise UserError("cannot write to an empty path; give the path of a file, or - for stdout")
    if "\x00" in name:
        raise UserError(f"cannot write {name!r}: a path cannot hold a NUL byte; give the path of a file")
    try:
        os.fsencode(name)
    except UnicodeEncodeError as err:
        raise UserError(
            f"cannot write {name!r}: {name[err.start]!r} at character {err.start} cannot be a file name "
            f"here (the file system takes {sys.getfilesystemencoding()}); give another path"
        ) from None
    if os.path.basename(name) in (".", ".."):
        raise UserError(
            f"cannot write {name}: a path ending in {os.path.basename(name)} names a directory; give the path of a file"
        )
    given = Path(name).expanduser()
    try:
        st = os.stat(given)  # follows symlinks, /dev/stdout's included
    except FileNotFoundError:
        return _new_file(name, given)
    except NotADirectoryError:
        raise UserError(f"cannot write {name}: {_not_a_directory(given)}") from None
    except OSError as err:
        raise UserError(f"cannot write {name}: {_reason(err)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"cannot write {name}: it is a directory; give the path of a file")
    if not stat.S_ISCHR(st.st_mode):  # a terminal or /dev/null is as good written in place
        for kind, fd in STREAM_FDS.items():
            if _same_file(st, fd):
                return Destination(name, kind)
    if stat.S_ISREG(st.st_mode):
        if not os.access(given, os.W_OK):  # what the shell's `>` would refuse (root may, as with `>`)
            raise UserError(f"cannot write {name}: it is read-only; make it writable (chmod u+w) or choose another")
        target = Path(os.path.realpath(given))
        _try_creating_a_file_in(name, target)
        return Destination(name, "file", target)
    if stat.S_ISSOCK(st.st_mode):
        raise UserError(f"cannot write {name}: it is a socket, which cannot be opened as a file; give a file or a pipe")
    if not os.access(given, os.W_OK):
        raise UserError(f"cannot write {name}: permission denied")
    return Destination(name, "special", given)


def check_destinations(paths: dict[str, str | os.PathLike | None]) -> dict[str, Destination | None]:
    """`check_destination` for several outputs at once ({option: path or None}), refusing two that
    would write to the same place: one would be lost, or they would be interleaved."""
    checked = {option: None if path is None else check_destination(path) for option, path in paths.items()}
    seen: dict[object, Destination] = {}
    for option, dest in checked.items():
        if dest is None or dest.kind == "special":
            continue
        where = dest.kind if dest.is_stream else dest.path
        if where in seen:
            first = seen[where]
            given = next(o for o, d in checked.items() if d is first)
            raise UserError(
                f"{given} {first.name} and {option} {dest.name} would both write to {where}; "
                f"send one of them {'to a file' if dest.is_stream else 'elsewhere'}"
            )
        seen[where] = dest
    return checked


@contextmanager
def open_destination(destination: Destination | str | os.PathLike, binary: bool = False) -> Iterator[IO]:
    """A file object to write the output to (text in UTF-8, or bytes); see the module docstring for
    what happens on exit. A write that fails (a full disk, a device that refuses) is a `UserError`;
    a file being replaced is then left as it was, and no temporary is left behind."""
    dest = destination if isinstance(destination, Destination) else check_destination(destination)
    try:
        if dest.is_stream:
            stream = getattr(sys, dest.kind)
            stream.flush()
            f = stream.buffer if binary else stream
            yield f
            f.flush()
        elif dest.kind == "special":
            with _in_place(dest, binary) as f:
                yield f
        else:
            with _replaced(dest, binary) as f:
                yield f
    except BrokenPipeError:  # the reader went away (e.g. `| head`): the CLI ends quietly
        raise
    except OSError as err:
        raise UserError(f"cannot write {dest.name}: {_reason(err)}") from None


def write_text(destination: Destination | str | os.PathLike, chunks: Iterable[str]) -> None:
    """Write a document, given as pieces of text, to a destination (see `open_destination`)."""
    with open_destination(destination) as f:
        for chunk in chunks:
            f.write(chunk)


def write_together(outputs: Iterable[tuple[Destination | None, Callable[[IO], None], bool]]) -> None:
    """Several outputs, (destination or None where not asked for, write(file object), binary), written as one (see
    the module docstring): the files first, each into its temporary, then what is written in place (a stream, a
    device); the files replace their targets only once every output was written, and a failure anywhere removes
    every temporary."""
    asked = [(destination, write, binary) for destination, write, binary in outputs if destination is not None]
    with ExitStack() as stack:
        for destination, write, binary in sorted(asked, key=lambda output: output[0].kind != "file"):
            write(stack.enter_context(open_destination(destination, binary=binary)))


@contextmanager
def _replaced(dest: Destination, binary: bool) -> Iterator[IO]:
    target = dest.path
    assert target is not None  # a regular file's destination has its path
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with _opened(fd, binary) as f:
            yield f
        try:
            old = os.stat(target)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private (0600)
        else:
            try:
                os.chown(tmp, old.st_uid, old.st_gid)  # before chmod: chown may clear set-id bits
            except PermissionError:
                pass  # only root may give a file away; the file is then ours, as any new file
            os.chmod(tmp, stat.S_IMODE(old.st_mode))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def _in_place(dest: Destination, binary: bool) -> Iterator[IO]:
    # No O_CREAT and no O_TRUNC: a device or a pipe is written as it is; if it is gone, nothing is made.
    assert dest.path is not None  # a special file's destination has its path
    fd = os.open(dest.path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    if stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"cannot write {dest.name}: it became a regular file after it was checked; run again")
    with _opened(fd, binary) as f:
        yield f


def _opened(fd: int, binary: bool) -> IO:
    return os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", errors=TEXT_ERRORS, newline="")


def _new_file(name: str, given: Path) -> Destination:
    if name.endswith(("/", os.sep)):
        raise UserError(f"cannot write {name}: a path ending in / names a directory; give the path of a file")
    # The directory as the system resolves it ("missing/../x" does not exist, whatever realpath says),
    # then as realpath does: a dangling symlink's file is created where the link points.
    directory = os.path.dirname(os.path.expanduser(name)) or "."
    target = Path(os.path.realpath(given))
    for parent in (directory, str(target.parent)):
        if not os.path.isdir(parent):
            raise UserError(f"cannot write {name}: directory {_first_missing(parent)} does not exist; create it first")
    _try_creating_a_file_in(name, target)
    return Destination(name, "file", target)


def _try_creating_a_file_in(name: str, target: Path) -> None:
    directory = target.parent
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.")
    except OSError as err:
        if err.errno in (errno.EACCES, errno.EPERM):
            why = f"no permission to create files in {directory}"
        elif err.errno == errno.EROFS:
            why = f"{directory} is on a read-only file system"
        elif err.errno == errno.ENOENT:  # /proc's answer
            why = f"{directory} does not take new files"
        else:
            why = f"cannot create a file in {directory} ({_reason(err)})"
        raise UserError(f"cannot write {name}: {why}; choose another path") from None
    os.close(fd)
    os.unlink(tmp)


def _first_missing(directory: str) -> str:
    """The first directory on the way to `directory` that is not there, as the system walks it."""
    parts = directory.split(os.sep)
    for n in range(1, len(parts) + 1):
        walked = os.sep.join(parts[:n]) or os.sep
        if not os.path.isdir(walked):
            return walked
    return directory


def _not_a_directory(given: Path) -> str:
    """Which ancestor of `given` is in the way, walking down from the root."""
    for ancestor in reversed(Path(os.path.abspath(given)).parents):
        try:
            st = os.stat(ancestor)
        except OSError:
            break
        if not stat.S_ISDIR(st.st_mode):
            return f"{ancestor} is {_what(st)}, not a directory"
    return "a part of the path that should be a directory is not one"


def _what(st: os.stat_result) -> str:
    if stat.S_ISREG(st.st_mode):
        return "a file"
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return "a device"
    return "a named pipe" if stat.S_ISFIFO(st.st_mode) else "a socket"


def _same_file(st: os.stat_result, fd: int) -> bool:
    try:
        other = os.fstat(fd)
    except OSError:  # closed
        return False
    return (st.st_dev, st.st_ino) == (other.st_dev, other.st_ino)


def _reason(err: OSError) -> str:
    text = err.strerror or str(err)
    return text[:1].lower() + text[1:]
