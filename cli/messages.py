"""statemix's one-line messages on standard error: names escaped, and the notices of a compile.

Every message is ``statemix: TEXT`` on one line, its control characters (and undecodable file-name
bytes) escaped.  The library announces a compile of more than about a second through the
``statemix`` logger; :func:`compile_notices` turns those records into such lines, and on a terminal
(``-v``) counts the compile's seconds on one line until it ends.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading

import click


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def escape(text: str) -> str:
    """``text`` with control characters (and undecodable file name bytes) escaped: one line."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii"), text)


def say(message: str) -> None:
    click.echo(f"statemix: {escape(message)}", err=True)


class _Notices(logging.Handler):
    """The library's messages (a compile about to start) as statemix's one-line messages."""

    def emit(self, record: logging.LogRecord) -> None:
        say(record.getMessage())


@contextlib.contextmanager
def compile_notices(quiet: bool, ticking: bool):
    """Say on standard error when a compile of more than about a second starts (unless ``quiet``);
    with ``ticking`` (-v on a terminal) count its seconds on one line until it ends."""
    logger = logging.getLogger("statemix")
    handler = _Notices()
    if not quiet:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    done = threading.Event()
    ticker = threading.Thread(target=_tick, args=(done,), daemon=True) if ticking and not quiet else None
    if ticker is not None:
        ticker.start()
    try:
        yield
    finally:
        done.set()
        if ticker is not None:
            ticker.join()
        logger.removeHandler(handler)


def _tick(done: threading.Event) -> None:
    """Show the seconds of each compile under way (from the second one on), then clear the line."""
    from statemix._jit import compile_elapsed

    shown = False
    while not done.wait(0.5):
        elapsed = compile_elapsed()
        if elapsed is not None and elapsed >= 1:
            sys.stderr.write(f"\rstatemix: compiling ... {elapsed:.0f} s\x1b[K")
            sys.stderr.flush()
            shown = True
        elif shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            shown = False
    if shown:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
