"""The one place that decides how numba compiles statemix's kernels.

Every jitted function in statemix is declared with :func:`kernel` from this module and nowhere else
(tests/test_kernel_policy.py fails the build otherwise).  The options are chosen for bit-exact decoding
on any machine (see the project's determinism notes):

- ``fastmath`` is never set: with it LLVM may contract ``a*b+c`` into FMA or reorder sums, and the
  result then depends on the CPU target.
- ``error_model="numpy"``: a division by zero gives the IEEE result (inf or nan; 0 for integers)
  instead of raising ZeroDivisionError.  The check that raising needs is a branch inside every
  division, and it kept LLVM from vectorizing any loop that divides: a loop of sigmoids ran 6 to 9
  times slower (tests/test_fmath.py).  It changes no value that is computed without a zero divisor.
- Intel SVML is disabled before numba is imported (``NUMBA_DISABLE_INTEL_SVML=1``) and checked to be
  off afterwards, since it replaces libm calls by vector code with other rounding.
- Kernels are cached on disk in a writable per-user directory (``$STATEMIX_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/statemix/numba``, else ``~/.cache/statemix/numba``), in a subdirectory named by a
  fingerprint of statemix's whole source (:func:`source_fingerprint`).  numba's own cache checks
  only the file that defines a kernel, so a kernel whose callee in another file changed (an inlined
  helper, or a kernel it calls) would otherwise be loaded stale: wrong output, or a crash.  Older
  fingerprints' subdirectories that statemix made (they hold its stamp file) are removed once
  unused for a week.  The chosen base is exported as
  ``$STATEMIX_CACHE_DIR``, so that processes started from this one share its kernels.  When no
  directory can be written, kernels are compiled without a cache rather than failing.  A kernel that
  is parallel or calls one is loaded from the cache only when asked for from Python, never while
  another kernel is compiled against it (:class:`_CacheForTopLevel`: numba's entries compiled
  against a cached parallel callee crash); serial kernels load either way, so cm's loops of
  several levels share their per-byte kernels.
- A kernel called from another is compiled once for the types of its arguments, never once per
  constant it is given (numba would type a literal argument as that value: ``mix_hash`` was
  compiled 61 times, once per salt).  Its arithmetic wraps where it must (``hashing.wrapping_add``),
  so a constant folded in or not gives the same bits.
- The first compile of each announced kernel (:func:`announce`: cm's loops, the ssm model's loop and training,
  the ones that take seconds) is an INFO message of the "statemix" logger before it starts, naming
  it with its seconds of compiling; the command line prints it on standard error, and with ``-v``
  on a terminal counts the seconds (:func:`compile_elapsed`).
- ``parallel=True`` is allowed only where a kernel's ``prange`` runs over independent outputs; the
  thread count (``-T``) therefore changes speed, never a bit of output.
- numba's reference counting of arrays (its runtime, NRT) is off unless a kernel says it allocates
  (``allocates=True``; parallel kernels always keep it).  With it on, every array a kernel passes to
  another, or unpacks from a tuple, costs an atomic increment and decrement: a third of cm's samples
  (perf, 2026-12-04); without them level 2 takes 0.58 times the time and level 1 0.33 times, with the
  same output (bench/RESULTS.md), and compiling takes about a third of the time.  A
  kernel without it cannot allocate (numba refuses to compile ``np.empty`` there: the fix is to
  declare ``allocates=True``) and must not return an array (nothing would own it; the policy tests
  check every compiled kernel).  The setting is per kernel, never inherited from the caller: an
  allocating kernel called from one that does not count frees what it allocated itself.

Importing this module imports numba (about 0.6 s), so the command line imports it only inside
commands, never for ``--help``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
import types
from pathlib import Path

os.environ["NUMBA_DISABLE_INTEL_SVML"] = "1"


def _writable_cache_dir() -> str | None:
    """Return a cache directory that can be written, or None when there is none."""
    explicit = os.environ.get("STATEMIX_CACHE_DIR") or os.environ.get("NUMBA_CACHE_DIR")
    if explicit:
        candidates = [Path(explicit)]
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg) if xdg else Path.home() / ".cache"
        candidates = [base / "statemix" / "numba"]
    for directory in candidates:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=directory):
                pass
        except OSError:
            continue
        return os.path.abspath(directory)  # absolute: exported to child processes, which may run elsewhere
    return None


def source_fingerprint() -> str:
    """16 hex digits of a hash over every Python file of the package (names and contents)."""
    root = Path(__file__).resolve().parent
    digest = hashlib.blake2b(digest_size=8)
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


STAMP = ".statemix-kernels"  # written into every fingerprint folder statemix makes


def _fingerprinted(base: str | None) -> str | None:
    """The subdirectory of ``base`` for this source; prune other fingerprints unused for a week.

    Only folders that statemix made are pruned: ``src-*`` folders holding the stamp file
    :data:`STAMP` that statemix writes into each when it creates it (``base`` may be a folder of
    the user's, given as STATEMIX_CACHE_DIR or NUMBA_CACHE_DIR, with a ``src-thesis`` of theirs).
    """
    if base is None:
        return None
    directory = Path(base) / f"src-{source_fingerprint()}"
    try:
        directory.mkdir(exist_ok=True)
        (directory / STAMP).touch()
        week_ago = time.time() - 7 * 86400
        for other in Path(base).glob("src-*"):
            if (other != directory and not other.is_symlink() and (other / STAMP).is_file()
                    and other.stat().st_mtime < week_ago):
                shutil.rmtree(other, ignore_errors=True)
        os.utime(directory)
    except OSError:
        return None
    return str(directory)


_CACHE_BASE = _writable_cache_dir()
CACHE_DIR = _fingerprinted(_CACHE_BASE)
if CACHE_DIR is not None:
    os.environ["NUMBA_CACHE_DIR"] = CACHE_DIR
    # for the processes this one starts (command lines, workers): without it they would take the
    # NUMBA_CACHE_DIR above for their base and compile every kernel again in a directory inside it
    os.environ["STATEMIX_CACHE_DIR"] = _CACHE_BASE

import numba  # noqa: E402  (the environment above must be set first)
from numba.core import event  # noqa: E402
from numba.core import types as numba_types  # noqa: E402

if getattr(numba.config, "USING_SVML", False):  # pragma: no cover - depends on the host
    raise ImportError(
        "statemix: numba was imported with Intel SVML enabled before statemix; "
        "set NUMBA_DISABLE_INTEL_SVML=1 or import statemix first"
    )

_OPTIONS = dict(nogil=True, fastmath=False, error_model="numpy", cache=CACHE_DIR is not None)

#: Every kernel compiled through :func:`kernel`, for the policy tests (FMA scan, options).
KERNELS: list = []


class _CompileDepth(threading.local):
    depth = 0  # kernels being compiled on this thread, the one asked for from Python first


_COMPILING = _CompileDepth()


class _CacheForTopLevel:
    """A kernel's numba cache that a kernel being compiled reads only if no parallel region is under it.

    numba 0.68 writes a broken cache entry for a kernel compiled against a callee that was loaded
    from the cache, if that callee contains a parallel region: the entry loads later and calls a
    null pointer.  statemix hit it as a segfault: ``--model ssm`` once (its training kernels cached),
    then cm level 2 twice (cm's loop, compiled against them, cached; then loaded).  So a kernel that
    is parallel, or calls one (directly or through others: :func:`callees`), and is compiled because
    another kernel is being compiled, is compiled again with it, never loaded: every cache entry that
    reaches a parallel region holds, self-contained, everything it calls.  Serial callees load from
    the cache like top-level kernels, so that the loops of several levels share their per-byte
    kernels' compiles across processes.  Writing is unchanged.
    """

    def __init__(self, cache, dispatcher):
        self._cache = cache
        self._dispatcher = dispatcher
        self._reaches_parallel = None  # known at the first load: callees may be defined after the kernel

    def load_overload(self, sig, target_context):
        if _COMPILING.depth > 1:
            if self._reaches_parallel is None:
                self._reaches_parallel = any(_is_parallel(d) for d in [self._dispatcher, *callees([self._dispatcher])])
            if self._reaches_parallel:
                return None
        return self._cache.load_overload(sig, target_context)

    def __getattr__(self, name):
        return getattr(self._cache, name)


def _is_parallel(dispatcher) -> bool:
    return bool(dispatcher.targetoptions.get("parallel"))


def callees(dispatchers) -> list:
    """Every kernel that ``dispatchers`` call, directly or through others, as their source names
    them (``name`` or ``module.name``, read from the globals each was compiled with)."""
    found, pending = [], list(dispatchers)
    while pending:
        function = pending.pop().py_func
        codes, names = [function.__code__], set()
        while codes:
            code = codes.pop()
            names.update(code.co_names)
            codes.extend(c for c in code.co_consts if hasattr(c, "co_names"))
        values = [function.__globals__[n] for n in names if n in function.__globals__]
        values += [getattr(v, n) for v in values if isinstance(v, types.ModuleType) for n in names if hasattr(v, n)]
        for value in values:
            if any(value is d for d in KERNELS) and not any(value is d for d in found):
                found.append(value)
                pending.append(value)
    return found


def _counting_compiles(dispatcher):
    """Make ``dispatcher`` count, in _COMPILING, the compiles it is in (see _CacheForTopLevel), and
    compile one signature per argument types for its calls from other kernels (no literal types)."""
    compile_ = dispatcher.compile

    @functools.wraps(compile_)
    def compile(sig):
        _COMPILING.depth += 1
        try:
            return compile_(sig)
        finally:
            _COMPILING.depth -= 1

    dispatcher.compile = compile
    dispatcher._cache = _CacheForTopLevel(dispatcher._cache, dispatcher)
    get_call_template = dispatcher.get_call_template

    @functools.wraps(get_call_template)
    def get_call_template_unliteral(args, kws):
        return get_call_template(tuple(numba_types.unliteral(a) for a in args),
                                 {name: numba_types.unliteral(a) for name, a in kws.items()})

    dispatcher.get_call_template = get_call_template_unliteral
    return dispatcher


def kernel(function=None, *, parallel: bool = False, inline: bool = False, allocates: bool = False):
    """Compile ``function`` with statemix's fixed numba options.

    Use as ``@kernel``, ``@kernel(parallel=True)``, ``@kernel(allocates=True)`` (it creates arrays:
    numba's reference counts kept, see the module's notes) or ``@kernel(inline=True)``: a helper that
    numba inlines into its callers before compiling them (no call, and per bit a call made cm 1.4
    times slower).  An inlined helper must never assign to one of its parameters: numba 0.6x's
    inliner then changed the caller's results (caught by the golden tests; tests/test_kernel_policy.py
    checks the rule).  An inlined helper that allocates says so too: numba types it with its own
    setting before inlining it (without, its ``np.zeros`` fails to compile).  No other numba option
    may be set by a caller.
    """

    def compile_(fn):
        extra = {"inline": "always"} if inline else {}
        counted = allocates or parallel
        dispatcher = _counting_compiles(numba.njit(parallel=parallel, _nrt=counted, **extra, **_OPTIONS)(fn))
        KERNELS.append(dispatcher)
        return dispatcher

    return compile_ if function is None else compile_(function)


def _copy(base, suffix: str, replaced: dict):
    """A copy of ``base``'s Python function named ``<name>_<suffix>``, reading ``replaced`` instead of
    those of its module's globals (the module's other globals as they are now).  numba's cache names
    its entries by the qualified name and does not record the options, so a copy of the same name
    would load the original's entry."""
    fn = base.py_func
    namespace = fn.__globals__ if not replaced else {**fn.__globals__, **replaced}
    copy = types.FunctionType(fn.__code__, namespace, f"{fn.__name__}_{suffix}", fn.__defaults__, fn.__closure__)
    copy.__qualname__ = f"{fn.__qualname__}_{suffix}"
    copy.__module__ = fn.__module__
    copy.__doc__ = fn.__doc__
    return copy


def serial_twin(parallel_kernel):
    """``parallel_kernel`` compiled once more without parallel regions (every ``prange`` a plain loop).

    For code that itself runs inside a ``prange`` body: a parallel kernel called there is a nested
    launch, which numba's workqueue threading layer refuses by ending the process.  The twin computes
    every output with the same code in the same order (a ``prange`` runs over independent outputs),
    so it gives the same bits.
    """
    return kernel(_copy(parallel_kernel, "serial", {}), allocates=counts_references(parallel_kernel))


def variant(base, suffix: str, *, inline: bool | None = None, **replaced):
    """``base`` compiled once more with some of the kernels it calls replaced (by keyword: the name
    it calls, the kernel to call instead), or some of the constants it reads, with ``base``'s own
    options (``inline``: inlined into its callers or not, if that differs).

    For a path that a runtime flag never takes in some callers but that numba compiles anyway: cm's
    loop without the SSM compiles no SSM training (about 190 of its 380 s of compiling), by calling
    variants down to the one call that trains.  Every name a variant replaces must be defined when
    the variant is made (its module's globals are read then).  cm's loop for one model shape
    (``cm.loop.fixed_loop``) reads the shape's counts as constants, and numba unrolls what they bound.
    """
    missing = [name for name in replaced if name not in base.py_func.__globals__]
    if missing:
        raise NameError(f"{base.py_func.__qualname__} reads no global {missing}")
    if inline is None:
        inline = base.targetoptions.get("inline") == "always"
    return kernel(_copy(base, suffix, replaced), parallel=bool(base.targetoptions.get("parallel")),
                  inline=inline, allocates=counts_references(base))


def counts_references(dispatcher) -> bool:
    """Whether ``dispatcher`` (a :func:`kernel`) keeps numba's reference counts (it allocates)."""
    return bool(dispatcher.targetoptions["_nrt"])


prange = numba.prange

#: the library's logger; the first compile of an announced kernel (:func:`announce`) is an INFO message
log = logging.getLogger("statemix")


class _CompileWatch(event.Listener):
    """Follows numba's compiles (its events come only for a real compile, never for a cache load):
    announces an announced kernel's compile as it starts and records when the compile under way
    began (:func:`compile_elapsed`)."""

    def __init__(self):
        self.announced = {}  # id(dispatcher): (what, seconds)
        self.depth = threading.local()
        self.started = None  # time.monotonic() at the start of the outermost compile under way
        self.told_no_cache = False

    def on_start(self, ev):
        depth = getattr(self.depth, "n", 0)
        self.depth.n = depth + 1
        if depth:
            return
        self.started = time.monotonic()
        what = self.announced.pop(id(ev.data["dispatcher"]), None)
        if what is None:
            return
        name, seconds = what
        if CACHE_DIR is not None:
            log.info(f"compiling {name} for this machine: about {seconds} s, once (later runs load it from "
                     f"{_CACHE_BASE})")
        elif not self.told_no_cache:
            self.told_no_cache = True
            log.info(f"compiling {name}: about {seconds} s, on every run: no cache directory can be written "
                     "(set STATEMIX_CACHE_DIR to one that can)")
        else:
            log.info(f"compiling {name}: about {seconds} s")

    def on_end(self, ev):
        self.depth.n -= 1
        if not self.depth.n:
            self.started = None


_WATCH = _CompileWatch()
event.register("numba:compile", _WATCH)


def announce(dispatcher, what: str, seconds: int) -> None:
    """Announce ``dispatcher``'s first compile in this process, when it starts, as an INFO message of
    the "statemix" logger: ``what`` it is and about how many ``seconds`` it takes (measured on this
    project's 2-core test machine).  Every kernel asked for from Python whose first compile takes
    more than about a second is announced (bench/compile_profile.py lists them)."""
    _WATCH.announced[id(dispatcher)] = (what, seconds)


def compile_elapsed() -> float | None:
    """Seconds since the compile under way started (None when nothing compiles)."""
    started = _WATCH.started
    return None if started is None else time.monotonic() - started


def set_threads(threads: int) -> None:
    """Use up to ``threads`` worker threads in parallel kernels (never changes any output)."""
    numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))


def beside(first, second) -> None:
    """Call ``first()`` on this thread while ``second()`` runs on another, when this thread may use
    two (its numba thread count, :func:`set_threads`); else ``first()`` then ``second()``.  For two
    kernel calls that write no array in common, so that both orders give the same bits (kernels
    release the GIL); ``second`` must reach no parallel region (the other thread does not follow
    this thread's count, and two parallel launches at once may end the process under numba's
    workqueue layer).  Returns when both have; an exception of either is raised here."""
    if numba.get_num_threads() < 2:
        first()
        second()
        return
    running = _side_threads().submit(second)
    try:
        first()
    finally:
        running.result()


@functools.cache
def _side_threads() -> concurrent.futures.ThreadPoolExecutor:
    """The threads :func:`beside` runs its second calls on (one per possible numba thread)."""
    return concurrent.futures.ThreadPoolExecutor(numba.config.NUMBA_NUM_THREADS, thread_name_prefix="statemix-beside")


@contextlib.contextmanager
def threads_at_most(threads: int):
    """Run the block with at most ``threads`` worker threads (this thread's setting; restored after)."""
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(before, threads)))
    try:
        yield
    finally:
        numba.set_num_threads(before)
