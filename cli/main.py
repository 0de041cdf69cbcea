"""The statemix command line: xz/zstd-style flags over the statemix library.

This module only translates arguments into library calls and library errors into one-line messages
and exit codes (0 success, 1 error, 2 warning).  The library (and with it numba) is imported inside the
commands, so ``statemix --help`` and ``statemix --version`` start instantly.

Output files appear only when complete (see ``statemix/_output.py``: a nameless file linked into place on
success; devices and FIFOs are written through), so an error or an interruption (SIGINT, SIGTERM)
never leaves partial output behind, an existing file is never replaced without --force, and the input
is never touched (it is deleted only with --rm, after success, and only a regular file whose output is
a regular file: :func:`_open_input`, :func:`_check_output`).  The library reports progress between
model steps of at most about 0.1 s; that is where the progress bar moves and where a signal takes
effect, but while the command waits (opening a FIFO, reading input, writing into a full pipe) a
signal interrupts the wait at once.  File names in messages are shown with control characters
escaped, so every message is one line.
"""

from __future__ import annotations

import contextlib
from decimal import Decimal
import os
import re
import signal
import stat
import sys
import time

import click

from .messages import compile_notices, escape, say


SUFFIX = ".smx"
CHUNK = 1 << 20
EXIT_OK, EXIT_ERROR, EXIT_WARNING = 0, 1, 2


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (a BaseException, so no library ``except Exception`` swallows it)."""


class Problem(Exception):
    """A per-file error (message, exit status)."""

    def __init__(self, message: str, status: int = EXIT_ERROR):
        super().__init__(message)
        self.status = status


# A signal interrupts the command at once only while it waits in a call that may never return
# (:func:`_waiting`: opening a FIFO, reading its input, writing into a full pipe).  Elsewhere it is
# recorded and acted on at the next checkpoint (the library's progress reports, at most about 0.1 s
# apart, and every write): raising inside numba's compiler callbacks can be lost, and the output's
# completion and clean-up must run whole.
_signal_seen: int | None = None
_waiting_now = False
_to_stdout = False  # output goes to standard output: an interruption leaves what was written there


def _on_signal(signum, frame):
    global _signal_seen, _waiting_now
    _signal_seen = signum
    if _waiting_now:
        _waiting_now = False
        raise Interrupted


def _interrupt_now(signum, frame):
    raise Interrupted


def _checkpoint() -> None:
    if _signal_seen is not None:
        raise Interrupted


@contextlib.contextmanager
def _waiting():
    """Wait in a call that may block for ever: a signal meanwhile interrupts it at once."""
    global _waiting_now
    _checkpoint()
    _waiting_now = True
    try:
        yield
    finally:
        _waiting_now = False


def _read(src, size: int) -> bytes:
    with _waiting():
        return src.read(size)


class _Output:
    """Write to ``stream``, reporting a failed write under the output's name (not the input's)."""

    def __init__(self, stream, name: str):
        self._stream, self._name = stream, name

    def write(self, data: bytes) -> None:
        try:
            with _waiting():
                self._stream.write(data)
        except OSError as exc:
            raise Problem(f"{self._name}: cannot write: {exc.strerror or exc}") from None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("statemix")
    except PackageNotFoundError:
        return "unknown"


def _standard(stream, name: str):
    """The binary buffer of sys.stdin or sys.stdout; a Problem if the process was started without it."""
    if stream is None:
        raise Problem(f"{name}: not open")
    return stream.buffer


def _open_input(path: str, named_output: bool = True, remove: bool = False, force: bool = False):
    """Return (binary file, stat of a regular file or None); raise Problem with a clear reason.

    A device or socket is read only into a named output (-c, -o): not into DEVICE.smx beside it.
    With ``remove`` (--rm) only a regular file is taken, and (as xz does) without ``force`` not a
    symbolic link, a file of several hard links, or one with the setuid, setgid or sticky bit:
    removing its name would not do what removing a file's only name does.
    """
    if path == "-":
        return _standard(sys.stdin, "(stdin)"), None
    try:
        info = os.stat(path)
        link = os.lstat(path)
    except FileNotFoundError:
        raise Problem(f"{path}: no such file or directory") from None
    except OSError as exc:
        raise Problem(f"{path}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise Problem(f"{path}: is a directory, skipping")
    regular = stat.S_ISREG(info.st_mode)
    if not (regular or stat.S_ISFIFO(info.st_mode) or named_output):
        raise Problem(f"{path}: not a regular file, skipping (use -c or -o)")
    if remove:
        if not regular:
            raise Problem(f"{path}: not a regular file, skipping (--rm removes regular files only)")
        reason = ("is a symbolic link" if stat.S_ISLNK(link.st_mode) else
                  f"has {info.st_nlink} hard links" if info.st_nlink > 1 else
                  "has the setuid, setgid or sticky bit" if info.st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX)
                  else None)
        if reason and not force:
            raise Problem(f"{path}: {reason}, skipping (use -f to remove it after all)")
    try:
        with _waiting():
            return open(path, "rb"), (info if regular else None)
    except OSError as exc:
        raise Problem(f"{path}: {exc.strerror}") from None


def _progress(total: int | None, name: str, enabled: bool):
    from tqdm import tqdm

    try:  # a terminal that reports no size (0 x 0) would hide the bar
        size = os.get_terminal_size(sys.stderr.fileno())
        width, height = size.columns or 80, size.lines or 24
    except (OSError, ValueError):
        width, height = 80, 24
    return tqdm(total=total, desc=escape(name), unit="B", unit_scale=True, unit_divisor=1024, ncols=width,
                nrows=height, disable=not enabled, leave=False, file=sys.stderr)


def _reporter(bar, base: int = 0):
    """The library's progress callback (``base`` + ``done`` bytes so far): move the bar, and act on
    a signal that arrived."""
    def report(done: int) -> None:
        if base + done > bar.n:
            bar.update(base + done - bar.n)
        _checkpoint()
    return report


def _compress_stream(src, dst, info, opts: dict, bar) -> tuple[int, int]:
    """Compress ``src`` (``info``: its stat if a regular file) into ``dst``; return (bytes read,
    bytes written)."""
    import statemix

    size = info.st_size if info is not None else None
    compressor = statemix.Compressor(level=opts["level"], model=opts["model"], size_hint=size,
                                     threads=opts["threads"], segment_size=opts["segment_size"],
                                     progress=_reporter(bar))
    read = written = 0
    while chunk := _read(src, CHUNK):
        out = compressor.compress(chunk)
        dst.write(out)
        read += len(chunk)
        written += len(out)
    out = compressor.flush()
    dst.write(out)
    return read, written + len(out)


def _uncompressed_size(src, info) -> int | None:
    """The total the streams of a regular file decode to (a quick scan), for the progress bar."""
    import statemix

    if info is None:
        return None
    try:
        return sum(s.uncompressed_size for s in statemix.read_info(src))
    except statemix.StatemixError:
        return None  # decoding will say what is wrong
    finally:
        src.seek(0)


def _decompress_stream(src, dst, info, opts: dict, bar) -> tuple[int, int]:
    """Decompress every stream of ``src`` (``info``: its stat if a regular file) into ``dst`` (or
    nowhere); return (bytes read, bytes written)."""
    import statemix

    if opts["threads"] > 1 and info is not None:  # a regular file: its segments in parallel
        from statemix.segments import decompress_segments

        written = 0
        for out in decompress_segments(src, threads=opts["threads"], memory_limit=opts["memory"],
                                       legacy=opts["legacy"], progress=_reporter(bar)):
            _checkpoint()
            if dst is not None:
                dst.write(out)
            written += len(out)
        return src.seek(0, 2), written
    decompressor = statemix.StreamsDecompressor(threads=opts["threads"], memory_limit=opts["memory"],
                                                 legacy=opts["legacy"], progress=_reporter(bar))
    read = written = 0
    while chunk := _read(src, CHUNK):
        read += len(chunk)
        out = decompressor.decompress(chunk)
        if dst is not None:
            dst.write(out)
        written += len(out)
    decompressor.check_end()
    return read, written


def _target_name(path: str, decompress: bool, suffix: str, output: str | None) -> str:
    if output is not None:
        return output
    if not decompress:
        if path.endswith(suffix):
            raise Problem(f"{path}: already has {suffix} suffix, skipping", EXIT_WARNING)
        return path + suffix
    if not path.endswith(suffix):
        raise Problem(f"{path}: unknown suffix, skipping (use -c or -o)")
    if os.path.basename(path) == suffix:
        raise Problem(f"{path}: no file name before the {suffix} suffix, skipping (use -c or -o)")
    return path[: -len(suffix)]


def _is_input(out, opened: os.stat_result) -> bool:
    """Whether the standard output ``out`` is the input (``opened``: its fstat), a regular file:
    `-c a >> a`, `< a >> a`."""
    try:
        there = os.fstat(out.fileno())
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(there.st_mode) and os.path.samestat(there, opened)


def _check_output(opened: os.stat_result, name: str, target: str, remove: bool) -> None:
    """Refuse an output that is the input itself (even with -f: writing it would destroy the data
    it is made from), and with --rm one that is not a regular file (a device, a FIFO: the data would
    not be kept anywhere the input's removal could rely on)."""
    try:
        there = os.stat(target)
    except OSError:
        return
    if os.path.samestat(there, opened):
        raise Problem(f"{target}: is the input file itself, skipping")
    if remove and not stat.S_ISREG(there.st_mode):
        raise Problem(f"{target}: not a regular file, skipping {name} (--rm removes an input only once its "
                      "output is a file)")


def _process(path: str, opts: dict) -> None:
    global _to_stdout
    mode = opts["mode"]
    started = time.perf_counter()
    to_stdout = mode != "test" and (opts["stdout"] or (path == "-" and opts["output"] is None))
    remove = opts["remove"] and path != "-" and mode != "test" and not opts["stdout"]
    src, info = _open_input(path, named_output=to_stdout or opts["output"] is not None or mode == "test",
                            remove=remove, force=opts["force"])
    name = "(stdin)" if path == "-" else path
    opened = os.fstat(src.fileno())  # the file read: never the output, and what --rm removes
    try:
        if path == "-" and mode != "compress" and src.isatty():
            raise Problem("compressed data not read from a terminal")
        if mode == "compress":
            total = info.st_size if info is not None else None
        else:
            total = _uncompressed_size(src, info) if opts["progress"] else None
        bar = _progress(total, os.path.basename(name), opts["progress"])
        with bar:
            work = _compress_stream if mode == "compress" else _decompress_stream
            if mode == "test":
                consumed, produced = work(src, None, info, opts, bar)
                result = f"{name}: OK ({produced} bytes)"
            else:
                if to_stdout:
                    stdout = _standard(sys.stdout, "(stdout)")
                    if mode == "compress" and stdout.isatty() and not opts["force"]:
                        raise Problem("compressed data not written to a terminal (use -f to force)")
                    if _is_input(stdout, opened):
                        raise Problem(f"(stdout): is the input file {name} itself, skipping")
                    _to_stdout = True
                    consumed, produced = work(src, _Output(stdout, "(stdout)"), info, opts, bar)
                    try:
                        with _waiting():
                            stdout.flush()
                    except OSError as exc:
                        raise Problem(f"(stdout): cannot write: {exc.strerror or exc}") from None
                else:
                    from statemix._output import OutputError, output_file

                    target = _target_name(path, mode == "decompress", opts["suffix"], opts["output"])
                    _check_output(opened, name, target, remove)
                    try:
                        with output_file(target, opts["force"], info, sync=remove, waiting=_waiting) as out:
                            consumed, produced = work(src, _Output(out, target), info, opts, bar)
                    except OutputError as exc:
                        raise Problem(str(exc)) from None
                result = f"{name}: {consumed} -> {produced} bytes"
                if mode == "compress" and consumed:
                    result += f" ({8 * produced / consumed:.3f} bits per byte)"
    finally:
        if path != "-":
            src.close()
    if opts["verbose"]:
        say(f"{result}, {time.perf_counter() - started:.2f} s")
    if remove:
        now = os.stat(path)
        if not os.path.samestat(now, opened):  # renamed, or replaced meanwhile
            raise Problem(f"{path}: not the file that was read any more, not removed")
        try:
            os.unlink(path)
        except OSError as exc:
            raise Problem(f"{path}: cannot remove the input (its output was written): "
                          f"{exc.strerror or exc}") from None


def _list(paths: list[str], verbose: bool) -> int:
    import statemix
    from statemix.models import decoding_bounded

    status = EXIT_OK
    click.echo(f"{'Strms':>5} {'Blocks':>6} {'Compressed':>12} {'Uncompressed':>12} {'Ratio':>6}  Check  Filename")
    for path in paths:
        try:
            if path == "-":
                raise Problem("--list does not read standard input")
            src, _ = _open_input(path)
            with src, _waiting():  # a FIFO may never end
                streams = statemix.read_info(src)
        except statemix.StatemixError as exc:
            say(f"{path}: {exc}")
            status = EXIT_ERROR
            continue
        except OSError as exc:
            say(f"{path}: {exc.strerror or exc}")
            status = EXIT_ERROR
            continue
        except Problem as exc:
            say(str(exc))
            status = max(status, exc.status)
            continue
        packed = sum(s.compressed_size + s.index_size for s in streams)  # the whole file, as xz -l
        unpacked = sum(s.uncompressed_size for s in streams)
        ratio = f"{packed / unpacked:.3f}" if unpacked else "---"
        blocks = sum(len(s.blocks) for s in streams)
        click.echo(f"{len(streams):>5} {blocks:>6} {packed:>12} {unpacked:>12} {ratio:>6}  CRC32  {escape(path)}")
        if verbose:
            for number, s in enumerate(streams, 1):
                kinds = ", ".join(f"{b.kind} {b.raw_length}->{b.payload_length}" for b in s.blocks)
                legacy = "" if decoding_bounded(s.model, s.version) else " (decoded only with --legacy)"
                click.echo(f"    stream {number}: format {s.version}{legacy}, {s.model.describe()}, "
                           f"crc32 {s.crc32:08x}; blocks: {kinds or 'none'}")
            if indexed := sum(s.indexed for s in streams):
                click.echo(f"    seek index: {indexed} segments, {sum(s.index_size for s in streams)} bytes")
    return status


_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(|b|k|ki|kb|kib|m|mi|mb|mib|g|gi|gb|gib)", re.IGNORECASE)


def _size_option(value: str | None, zero: int | None) -> int | None:
    """SIZE: bytes, or with a suffix K, KB, KiB, M, MB, MiB, G, GB, GiB (any case, all powers of
    1024, as xz and zstd take them), with decimals ("1.5GiB", rounded down to whole bytes);
    ``zero`` stands for 0 (None: 0 is refused)."""
    if value is None:
        return None
    match = _SIZE.fullmatch(value.strip())
    if match is None:
        raise click.BadParameter(f"{value!r} is not a size such as 800MiB, 1.5GiB or 64KB")
    number, unit = Decimal(match.group(1)), match.group(2).lower()
    size = int(number * (1 << {"": 0, "b": 0, "k": 10, "m": 20, "g": 30}[unit[:1]]))
    if number == 0:
        if zero is None:
            raise click.BadParameter("must be more than 0")
        return zero
    if size == 0:
        raise click.BadParameter(f"{value!r} is less than one byte")
    return size


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("files", nargs=-1)
@click.option("-z", "--compress", "mode", flag_value="compress", default=True, help="Compress (the default).")
@click.option("-d", "--decompress", "mode", flag_value="decompress", help="Decompress.")
@click.option("-t", "--test", "mode", flag_value="test", help="Decompress and check, writing nothing.")
@click.option("-l", "--list", "mode", flag_value="list", help="List the streams and blocks of .smx files.")
@click.option("-c", "--stdout", "to_stdout", is_flag=True, help="Write to standard output; keep input files.")
@click.option("-o", "--output", type=click.Path(), help="Write to this file (one input only).")
@click.option("-k", "--keep", is_flag=True, help="Keep input files (the default).")
@click.option("--rm", "remove", is_flag=True, help="Delete each input file after success.")
@click.option("-f", "--force", is_flag=True, help="Overwrite output files; write to a terminal.")
@click.option("-q", "--quiet", is_flag=True, help="Print no warnings and no progress.")
@click.option("-v", "--verbose", is_flag=True, help="Print sizes and times.")
@click.option("-T", "--threads", type=click.IntRange(min=0), default=0, show_default=True,
              help="Worker threads; 0 means one per core. Never changes the output.")
@click.option("-S", "--suffix", default=SUFFIX, show_default=True, help="Suffix of compressed files.")
@click.option("--level", type=click.IntRange(1, 3), help="Model preset, 1 (fastest) to 3 (strongest); default 2.")
@click.option("--model", type=click.Choice(["cm", "ssm"]),
              help="Model family: cm (default), or ssm (state-space model mixed with count models; "
                   "slow; --level 1 drops the state-space model).")
@click.option("--memory", "memory", callback=lambda ctx, param, value: _size_option(value, 1 << 62),
              metavar="SIZE",
              help="Refuse to decode streams whose model needs more memory than SIZE (e.g. 800MiB, "
                   "2GiB; 0: no limit). Default: 1.5 GiB, above every preset.")
@click.option("--legacy", is_flag=True,
              help="Also decode streams of older formats and models, whose size does not bound the "
                   "work of decoding them (a few bytes can ask minutes): only those you trust.")
@click.option("--segment-size", "segment_size", is_flag=False, flag_value="4MiB",
              callback=lambda ctx, param, value: _size_option(value, None), metavar="[SIZE]",
              help="Cut the input into independent segments of SIZE (default 4MiB), compressed in "
                   "parallel by -T workers, with a seek index (about 1% larger at 4MiB).")
@click.option("-1", "--fast", "level_flag", flag_value=1, help="Same as --level 1.")
@click.option("-3", "--best", "level_flag", flag_value=3, help="Same as --level 3.")
@click.version_option(_version(), "-V", "--version", prog_name="statemix", message="%(prog)s %(version)s")
def main(files, mode, to_stdout, output, keep, remove, force, quiet, verbose, threads, suffix, level,
         model, memory, legacy, segment_size, level_flag):
    """Compress or decompress FILES with statemix (no FILES or '-': standard input to output).

    Subcommand: 'statemix diagnose FILE' reports where the bits go (see 'statemix diagnose --help').
    """
    paths = list(files) or ["-"]
    if mode == "list":
        return _list(paths, verbose)
    if keep and remove:
        raise click.UsageError("--keep and --rm contradict each other")
    if output is not None and len(paths) != 1:
        raise click.UsageError("-o/--output takes exactly one input file")
    if output is not None and to_stdout:
        raise click.UsageError("-c/--stdout and -o/--output contradict each other")
    if output == "":
        raise click.UsageError("-o/--output: empty file name")
    if not suffix or "/" in suffix:
        raise click.UsageError("invalid suffix")
    import statemix

    try:
        statemix.codec.check_options(segment_size=segment_size)
    except ValueError as exc:
        raise click.UsageError(f"--segment-size: {exc}") from None
    opts = dict(mode=mode, stdout=to_stdout, output=output, remove=remove, force=force,
                verbose=verbose and not quiet, threads=threads or os.cpu_count() or 1, suffix=suffix,
                level=level or level_flag, model=model, memory=memory, legacy=legacy, segment_size=segment_size,
                progress=sys.stderr is not None and sys.stderr.isatty() and verbose and not quiet)
    status = EXIT_OK
    with compile_notices(quiet, opts["progress"]):
        for path in paths:
            status = max(status, _process_reported(path, opts, quiet))
    return status


def _process_reported(path: str, opts: dict, quiet: bool) -> int:
    """Process one input; report a failure in one line; return the exit status."""
    import statemix

    try:
        _process(path, opts)
    except Problem as exc:
        if exc.status == EXIT_ERROR or not quiet:
            say(str(exc))
        return exc.status
    except (statemix.StatemixError, EOFError) as exc:
        say(f"{'(stdin)' if path == '-' else path}: {exc}")
        return EXIT_ERROR
    except OSError as exc:
        say(f"{exc.filename or path}: {exc.strerror or exc}")
        return EXIT_ERROR
    return EXIT_OK


def run(argv: list[str] | None = None) -> None:
    """Console entry point: dispatch subcommands, map every failure to one line and an exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = main
    if argv and argv[0] == "diagnose":
        from .diagnose import diagnose

        command, argv = diagnose, argv[1:]
    # diagnose writes no file and has no checkpoints: a signal stops it at once
    handler = _on_signal if command is main else _interrupt_now
    previous = {number: signal.signal(number, handler) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = command.main(args=argv, prog_name="statemix", standalone_mode=False)
    except click.exceptions.Exit as exc:
        status = exc.exit_code
    except click.ClickException as exc:
        say(exc.format_message())
        status = EXIT_ERROR
    except (KeyboardInterrupt, Interrupted, click.exceptions.Abort):
        say("interrupted; what was written to standard output stays there" if _to_stdout else
             "interrupted; no output file was left behind")
        status = EXIT_ERROR
    except BrokenPipeError:
        sys.stderr.close()
        status = EXIT_ERROR
    except OSError as exc:  # writing standard output: a version, the help, a list, a report
        status = _stdout_failed(exc)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        status = EXIT_ERROR
        _drop_stdout()
    except OSError as exc:
        status = _stdout_failed(exc)
    sys.exit(status or 0)


def _drop_stdout() -> None:
    """Point standard output at /dev/null, so that what is still buffered for it cannot fail again
    when the interpreter exits (a second message, or a traceback)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _stdout_failed(exc: OSError) -> int:
    """Report that standard output could not be written (full disk, /dev/full), in one line."""
    say(f"(stdout): cannot write: {exc.strerror or exc}")
    _drop_stdout()
    return EXIT_ERROR
