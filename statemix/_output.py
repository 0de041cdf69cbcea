"""Output files that appear only when complete, and special files that are written through.

:func:`output_file` yields a binary file for the output ``path``:

- If ``path`` exists and is not a regular file (a character device such as /dev/null, a FIFO, a
  socket), the data is written through to it, as xz and zstd do: the node is never replaced.  A block
  device needs --force (it holds data).  A directory is an error.
- Otherwise the data goes into a file with no name (Linux O_TMPFILE in the target's directory), linked
  into place only after the whole output was written.  An error, an interruption or even SIGKILL
  leaves nothing behind.  An existing regular file is replaced only with ``force`` (atomically: the
  complete output is linked under a hidden name and renamed over it).
- Where O_TMPFILE is not available (another OS, some file systems), a hidden temporary file
  ``.NAME.HOST.PID.RANDOM.smxtmp`` beside the target takes its place.  Only SIGKILL or a power cut can
  leave one behind; any later run that writes into the same folder removes such files of this host
  whose process is gone.

- An output named through a symbolic link to a regular file replaces that file (the link stays),
  as writing through the link would.
- While a process writes an output file, it holds the output's name (Linux: an abstract unix
  socket named after its full path, which vanishes with the process, even after SIGKILL, and leaves
  nothing in any folder): a second process writing the same output is refused before it starts its
  work, not after it.  The hidden temporary name is shortened to fit a file name's 255 bytes.

The output's permissions: those of the input when it is a regular file (its read, write and execute
bits, never setuid, setgid or sticky; and its times), else 0666 minus the umask, as for any new
file.  Its owner and group: the input's where this process may give them (as root, or a group of
the user's); where the group cannot be given, group and others both get only what the input gave
both (as xz does), so that a file meant for one group is not opened to another.  With ``sync``
(before the input is removed) the output is flushed to the disk, and its directory after it is
linked.
"""

from __future__ import annotations

import errno
import os
import secrets
import socket
import stat
from contextlib import contextmanager, nullcontext

TEMP_SUFFIX = ".smxtmp"


class OutputError(OSError):
    """The output cannot be created or completed (the message names the path)."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _host() -> str:
    return socket.gethostname().replace("/", "_") or "localhost"


NAME_MAX = 255  # bytes of one file name on Linux's file systems


def _temporary_name(path: str) -> str:
    """A hidden name beside ``path`` for its output while it is written, at most NAME_MAX bytes: the
    target's name is shortened to fit (the host, process and random parts stay whole)."""
    directory, base = os.path.split(path)
    tail = f".{_host()}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    room = NAME_MAX - 1 - len(os.fsencode(tail))
    name = os.fsencode(base)
    if len(name) > room:
        base = os.fsdecode(name[:max(room, 1)])
    return os.path.join(directory, f".{base}{tail}")


@contextmanager
def _reserved(path: str):
    """Hold the output name ``path`` while this process writes it, so that a second statemix writing
    the same output is refused before it starts its work, not after.  Linux: an abstract unix
    socket named after the output's full path, which vanishes with the process (even after SIGKILL),
    so nothing is left behind; elsewhere nothing is held."""
    family = getattr(socket, "AF_UNIX", None)
    if family is None or not os.path.exists("/proc/self"):
        yield
        return
    import hashlib

    where = os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path))
    key = hashlib.sha256(os.fsencode(where)).hexdigest()[:40]
    holder = socket.socket(family, socket.SOCK_STREAM)
    try:
        try:
            holder.bind(f"\0statemix-output-{key}")
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise OutputError(f"{path}: another statemix is writing this output now") from None
            # no abstract sockets here (another OS, a sandbox): nothing is held
        yield
    finally:
        holder.close()


def _owner_is_gone(name: str) -> bool:
    """True if ``name`` is a temporary file of ours whose process on this host has ended."""
    if not (name.startswith(".") and name.endswith(TEMP_SUFFIX)):
        return False
    parts = name[: -len(TEMP_SUFFIX)].rsplit(".", 2)  # ".NAME.HOST", PID, RANDOM
    if len(parts) != 3 or not parts[0].endswith("." + _host()) or not parts[1].isdigit():
        return False
    pid = parts[1]
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, but another user's
        return False
    return False


def remove_stale_temporaries(directory: str) -> None:
    """Remove the temporary files that interrupted runs of this host left in ``directory``."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if _owner_is_gone(name):
            full = os.path.join(directory, name)
            try:
                info = os.lstat(full)
                if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
                    os.unlink(full)
            except OSError:
                pass


def _anonymous_file(directory: str) -> int | None:
    """An O_TMPFILE descriptor in ``directory`` that can be linked later, or None if unsupported."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        fd = os.open(directory, flag | os.O_WRONLY | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT) and os.path.isdir(directory):
            return None
        raise
    if not os.path.exists(f"/proc/self/fd/{fd}"):  # linking it needs /proc
        os.close(fd)
        return None
    return fd


def _give_attributes(fd: int, like: os.stat_result | None) -> None:
    """The output's permissions, owner and times from the input's stat ``like`` (see the module's notes)."""
    if like is None:
        os.fchmod(fd, 0o666 & ~_umask())
        return
    mode = stat.S_IMODE(like.st_mode) & 0o777
    try:
        os.fchown(fd, like.st_uid, like.st_gid)
    except OSError:
        try:
            os.fchown(fd, -1, like.st_gid)
        except OSError:
            shared = (mode >> 3) & mode & 0o7  # what group and others may both do
            mode = (mode & 0o700) | (shared << 3) | shared
    os.fchmod(fd, mode)
    os.utime(fd, ns=(like.st_atime_ns, like.st_mtime_ns))


def _sync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def output_file(path: str, force: bool, like: os.stat_result | None, sync: bool = False,
                waiting=nullcontext):
    """Yield a binary file that becomes ``path`` only if the block finishes without an exception.

    ``like``: the input's stat when it is a regular file (its mode, owner and times are given to
    the output); ``sync``: flush the output to the disk (the caller removes the input next);
    ``waiting``: a context manager around the one call that may wait for ever (opening a FIFO until
    it has a reader), for a caller that lets signals interrupt such waits.
    """
    if os.path.islink(path) and os.path.isfile(path):
        path = os.path.realpath(path)
    try:
        target = os.stat(path)
    except FileNotFoundError:
        target = None
    except OSError as exc:
        raise OutputError(f"{path}: cannot create output: {exc.strerror}") from None
    if target is not None and not stat.S_ISREG(target.st_mode):
        yield from _write_through(path, target, force, waiting)
        return
    if (target is not None or os.path.islink(path)) and not force:
        raise OutputError(f"{path}: output file exists (use -f to overwrite)")
    directory = os.path.dirname(path) or "."
    with _reserved(path):
        yield from _write_new(path, directory, force, like, sync)


def _write_new(path: str, directory: str, force: bool, like, sync: bool):
    remove_stale_temporaries(directory)
    try:
        fd = _anonymous_file(directory)
        temporary = None
        if fd is None:
            temporary = _temporary_name(path)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise OutputError(f"{path}: cannot create output: {exc.strerror}") from None
    out = os.fdopen(fd, "wb")
    try:
        yield out
        try:
            out.flush()
            _give_attributes(fd, like)
            if sync:
                os.fsync(fd)
            if temporary is None:
                _link_into_place(f"/proc/self/fd/{fd}", path, force, linked_name=_temporary_name(path))
            else:
                _link_into_place(temporary, path, force, linked_name=None)
            if sync:
                _sync_directory(directory)
        except OutputError:
            raise
        except OSError as exc:
            raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        out.close()
        if temporary is not None:
            try:
                os.unlink(temporary)
            except FileNotFoundError:
                pass


def _link(source: str, path: str) -> None:
    """Hard-link ``source`` as ``path``, following a /proc/self/fd link to the file it stands for.

    (os.link calls link(2), which links the /proc symlink itself and fails with EXDEV; with a
    directory descriptor it calls linkat(2), which follows it.  ``source`` is absolute or relative to
    the working directory, so the descriptor of the working directory changes nothing else.)
    """
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(source, path, src_dir_fd=here, dst_dir_fd=here, follow_symlinks=True)
    finally:
        os.close(here)


def _link_into_place(source: str, path: str, force: bool, linked_name: str | None) -> None:
    """Give the complete output the name ``path`` (replacing a file there only with ``force``)."""
    if not force:
        try:
            _link(source, path)  # fails if path appeared meanwhile: never clobber
        except FileExistsError:
            raise OutputError(f"{path}: output file exists (use -f to overwrite)") from None
        return
    if linked_name is None:
        os.replace(source, path)
        return
    _link(source, linked_name)
    try:
        os.replace(linked_name, path)
    except BaseException:
        os.unlink(linked_name)
        raise


def _write_through(path: str, target: os.stat_result, force: bool, waiting):
    if stat.S_ISDIR(target.st_mode):
        raise OutputError(f"{path}: is a directory")
    if stat.S_ISBLK(target.st_mode) and not force:
        raise OutputError(f"{path}: is a block device (use -f to write to it)")
    try:  # no O_TRUNC, and checked again once open: the node may have been replaced since it was seen
        with waiting():
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc.strerror}") from None
    if stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OutputError(f"{path}: became a regular file while it was opened, not written")
    out = os.fdopen(fd, "wb")
    try:
        yield out
    finally:
        try:
            out.close()
        except OSError as exc:
            raise OutputError(f"{path}: cannot write: {exc.strerror}") from None
