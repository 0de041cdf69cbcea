"""Kernel policy: numba options come from statemix._jit only, and no kernel contains FMA."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import statemix
from statemix import _jit

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "statemix").rglob("*.py")) + sorted((ROOT / "cli").rglob("*.py"))

#: fused multiply-adds: x86 (vfmadd231ps, vfnmsub...), aarch64 scalar (fmadd, fnmsub) and vector (fmla,
#: fmls), POWER (xvmaddasp, fmadds)
FMA_PATTERN = re.compile(r"\b(v?f(n)?m(add|sub)[0-9a-z.]*|fml[as](\.[0-9a-z]+)?|xv(n)?m(add|sub)[a-z]*)\b", re.I)


def run_every_kernel():
    """Compress and decompress with every model and level, train a vocabulary, quantize: every
    kernel statemix has is compiled (or loaded from the cache) by the end."""
    from determinism_probe import probe_input
    from statemix import tokenizer
    from statemix.models import LEVELS
    from statemix.quantize import quantize_distribution

    from statemix.diagnose import diagnose

    data = probe_input()
    for level in LEVELS:
        assert statemix.decompress(statemix.compress(data, level=level)) == data
    diagnose(data[:3000], level=1, stages=True)  # the stage tracer, compiled into its own loops
    assert statemix.decompress(statemix.compress(data[:2000], model="ssm")) == data[:2000]
    vocab = tokenizer.train(data, 300, split=tokenizer.SPLIT_WORDS)
    assert tokenizer.decode(vocab, tokenizer.encode(vocab, data)) == data
    assert tokenizer.Vocabulary.from_bytes(vocab.to_bytes()).to_bytes() == vocab.to_bytes()
    quantize_distribution(np.ones(4), 16, np.zeros(4, dtype=np.int64))


def machine_code(dispatcher) -> list[str]:
    """The disassembly (objdump) of every compiled signature of ``dispatcher``, each with all it calls.

    A kernel compiled in this process keeps its object code; one loaded from the cache keeps only its
    optimized LLVM module, which is emitted again here by the same target machine numba runs."""
    listings = []
    for result in dispatcher.overloads.values():
        library = result.library
        try:
            code = library._get_compiled_object()
        except (RuntimeError, ValueError):  # loaded from the cache: numba handed the object to its JIT
            code = library._codegen._tm.emit_object(library._shared_module)
        with tempfile.NamedTemporaryFile(suffix=".o") as handle:
            handle.write(code)
            handle.flush()
            listings.append(subprocess.run(["objdump", "-d", "--no-show-raw-insn", handle.name],
                                           capture_output=True, text=True, check=True).stdout)
    return listings


def fused_kernels(dispatchers) -> list[str]:
    return sorted({d.py_func.__module__ + "." + d.py_func.__qualname__ for d in dispatchers
                   if any(FMA_PATTERN.search(listing) for listing in machine_code(d))})


def test_no_kernel_sets_its_own_numba_options():
    offenders = []
    for path in SOURCES:
        if path.name == "_jit.py":
            continue
        text = path.read_text()
        if re.search(r"^\s*(import numba|from numba)|@\s*(numba\.)?(n?jit|(gu)?vectorize)\b|"
                     r"numba\.n?jit\s*\(|\bfastmath\s*=", text, re.M):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_inlined_kernels_never_assign_to_a_parameter():
    """numba's inliner let such an assignment leak into the caller (a golden test caught it)."""
    import ast

    offenders = []
    for path in SOURCES:
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef):
                continue
            if not any("inline=True" in ast.unparse(d) for d in fn.decorator_list):
                continue
            params = {a.arg for a in fn.args.args}
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) else [])
                for target in targets:  # a name, or names in a tuple (not a subscript: that writes an array)
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    for name in names:
                        if isinstance(name, ast.Name) and name.id in params:
                            offenders.append(f"{path.name}:{fn.name}:{name.id}")
    assert offenders == []


def test_no_fastmath_anywhere():
    assert "fastmath=False" in (ROOT / "statemix" / "_jit.py").read_text()
    assert not re.search(r"fastmath\s*=\s*(True|\{)", "".join(p.read_text() for p in SOURCES))


needs_objdump = pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump (binutils)")


@needs_objdump
def test_no_kernel_contains_fma():
    """Every kernel's machine code, as this machine runs it, is free of fused multiply-adds (which
    round once where a multiply and an add round twice).  Run in this process: the kernels other
    tests compiled, or loaded from the cache, are the ones checked; none is compiled twice."""
    run_every_kernel()
    ran = [d for d in _jit.KERNELS if d.signatures]
    checked = ran + called_by(ran)
    same_code = {d.py_func.__code__ for d in checked}  # a variant's code is its base's, callees aside
    unchecked = [qualified(d) for d in _jit.KERNELS if not any(d is c for c in checked)
                 and d.py_func.__code__ not in same_code
                 and qualified(d).startswith("statemix.")]  # not the tests' own kernels
    assert unchecked == []
    assert fused_kernels(ran) == []


def qualified(dispatcher) -> str:
    return dispatcher.py_func.__module__ + "." + dispatcher.py_func.__qualname__


def called_by(dispatchers) -> list:
    """Every kernel that ``dispatchers`` call (:func:`statemix._jit.callees`).  Such a kernel's
    machine code is linked into its callers', so the FMA scan of the callers reads it: a callee
    never asked for from Python has no compiled signature of its own when its callers were loaded
    from the cache, and an inlined helper never has one."""
    return _jit.callees(dispatchers)


def returns_an_array(dispatcher) -> bool:
    return any("array(" in str(result.signature.return_type) for result in dispatcher.overloads.values())


def test_kernels_without_reference_counts_return_no_arrays():
    """A kernel compiled without numba's reference counts (the default: see statemix._jit) must not
    hand an array to its caller, nor take one from a callee: the reference it passes is one nothing
    counted (the tokenizer's encoder corrupted the heap so, returning its pool arrays uncounted)."""
    run_every_kernel()
    returning = [d for d in _jit.KERNELS if returns_an_array(d)]
    assert returning  # the tokenizer's table builders return arrays: the check sees return types
    uncounted_returning = [d.py_func.__qualname__ for d in returning if not _jit.counts_references(d)]
    assert uncounted_returning == []
    callers = [f"{d.py_func.__qualname__} calls {callee.py_func.__qualname__}" for d in _jit.KERNELS
               if not _jit.counts_references(d) for callee in returning
               if any(d.py_func.__globals__.get(name) is callee for name in d.py_func.__code__.co_names)]
    assert callers == []


def _demangled(symbol: str) -> str:
    """``statemix.models.cm.loop.run_range`` from numba's mangled ``_ZN8statemix6models2cm4loop9run_rangeB3v1...``."""
    parts, at = [], symbol.index("_ZN") + 3
    while symbol[at].isdigit():
        digits = re.match(r"\d+", symbol[at:]).group(0)
        at += len(digits)
        parts.append(symbol[at:at + int(digits)])
        at += int(digits)
    return ".".join(parts)


def reference_counts(dispatcher) -> dict[str, int]:
    """Calls of numba's reference counting in each jitted function of ``dispatcher``'s optimized
    module (the kernel and every kernel it calls, linked in), by qualified name.  Read from the
    module numba keeps, whether it compiled the kernel here or loaded it from the cache."""
    counts: dict[str, int] = {}
    for result in dispatcher.overloads.values():
        library = result.library
        module = library._shared_module if library._shared_module is not None else library._final_module
        for function in str(module).split("\ndefine ")[1:]:
            symbol = re.match(r"[^@]*@\"?([^\"(]+)", function).group(1)
            if symbol.startswith("_ZN") and not symbol.startswith(("_ZN5numba", "_ZN7cpython")):
                name = _demangled(symbol)
                counts[name] = counts.get(name, 0) + function.count("call void @NRT_incref") + \
                    function.count("call void @NRT_decref")
    return counts


def test_cm_codes_without_reference_counts():
    """cm's coding loop (levels 1 and 2: without the SSM) and all it calls count no references (the
    stage tracer, which allocates, is compiled only into the loops of the diagnostics): with the
    counts on, a third of cm's time went to them (statemix._jit's notes)."""
    from statemix.models import cm

    data = bytes(range(256)) * 8
    assert statemix.decompress(statemix.compress(data, level=2)) == data
    counts = reference_counts(cm._CODING[cm.loop.run_range_no_ssm])
    assert {"statemix.models.cm.loop.run_range_no_ssm_coding", "statemix.models.cm.loop._end_of_byte",
            "statemix.models.tokenmix.update", "statemix.coder.enc_bit"} <= set(counts)
    counted = {name for name, n in counts.items() if n and name.startswith("statemix.")}
    assert counted == set()


def _sum_of_ones(n):
    return np.ones(n).sum()


def _sum_of(values):
    return values.sum()


def test_the_reference_count_scan_sees_counts():
    """The scan above, on a kernel that allocates (its array freed by a count) and one that does not."""
    allocating = _jit.kernel(_sum_of_ones, allocates=True)
    plain = _jit.kernel(_sum_of)
    assert allocating(4) == plain(np.ones(4)) == 4.0
    assert reference_counts(allocating)[f"{__name__}._sum_of_ones"] > 0
    assert reference_counts(plain) == {f"{__name__}._sum_of": 0}


@needs_objdump
def test_the_fma_scan_finds_a_fused_multiply_add():
    """The scan itself, on a kernel compiled with fastmath (contraction allowed) on purpose."""
    import numba
    from numba.core.codegen import get_host_cpu_features

    def contracted(a, b, c):
        return a * b + c

    contracted = numba.njit(fastmath=True)(contracted)
    x = np.arange(64, dtype=np.float64)
    contracted(x, x, x)
    found = fused_kernels([contracted])
    if not found and "+fma" not in get_host_cpu_features():
        pytest.skip("this CPU has no fused multiply-add")
    assert found == [f"{__name__}.test_the_fma_scan_finds_a_fused_multiply_add.<locals>.contracted"]


def test_the_fma_pattern_knows_every_fused_instruction():
    for line in ("vfmadd231ps %ymm1, %ymm2, %ymm0", "vfnmsub213sd %xmm1, %xmm2, %xmm3", "fmadd s0, s1, s2, s3",
                 "fnmsub d0, d1, d2, d3", "fmla v0.4s, v1.4s, v2.4s", "fmls v0.2d, v1.2d, v2.2d",
                 "xvmaddasp 0, 1, 2", "fmadds 1, 2, 3, 4"):
        assert FMA_PATTERN.search(line), line
    for line in ("vmulps %ymm1, %ymm2, %ymm0", "vaddss %xmm0, %xmm1, %xmm1", "fmul s0, s1, s2", "fadd v0.4s, v1.4s"):
        assert not FMA_PATTERN.search(line), line


def test_svml_is_disabled():
    import numba

    from statemix import _jit  # noqa: F401

    assert os.environ["NUMBA_DISABLE_INTEL_SVML"] == "1"
    assert not getattr(numba.config, "USING_SVML", False)


def test_every_package_is_installed():
    """pyproject lists packages by hand: a subpackage missing there is missing from a real install."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "statemix").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)


def test_the_kernel_cache_is_keyed_by_the_whole_source(tmp_path):
    # numba checks only the defining file of a cached kernel; the fingerprint covers every file, so
    # changing a helper in another file (an inlined one, say) moves the cache to a new directory
    package = tmp_path / "statemix"
    shutil.copytree(ROOT / "statemix", package, ignore=shutil.ignore_patterns("__pycache__"))
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import statemix._jit as j; "
              "print(j.source_fingerprint(), j.CACHE_DIR)")
    env = {**os.environ, "STATEMIX_CACHE_DIR": str(tmp_path / "cache")}

    def fingerprint_and_dir():
        out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, check=True,
                             capture_output=True, text=True).stdout.split()
        return out[0], out[1]

    first, first_dir = fingerprint_and_dir()
    assert first_dir == str(tmp_path / "cache" / f"src-{first}")
    helper = package / "models" / "bit" / "tables.py"
    helper.write_text(helper.read_text() + "\n# a changed helper\n")
    second, second_dir = fingerprint_and_dir()
    assert second != first and second_dir != first_dir


KERNELS_CALLING_A_PARALLEL_ONE = '''
import sys
import numpy as np
from statemix._jit import kernel, prange


@kernel(parallel=True)
def leaf(a, i):
    for k in prange(a.shape[0]):
        a[k] += 1.0
    return a.sum()


@kernel
def middle(a, i):
    return leaf(a, i) * 2.0


@kernel
def first_caller(a, n):
    s = 0.0
    for i in range(n):
        s += middle(a, i)
    return s


@kernel
def second_caller(a, n):
    s = 1.0
    for i in range(n):
        s += middle(a, i)
    return s


caller = first_caller if sys.argv[1] == "first" else second_caller
print(caller(np.zeros(8), 10))
'''


def test_a_kernel_compiled_against_a_cached_parallel_callee_loads_from_the_cache(tmp_path):
    """numba 0.68 caches a broken kernel when it was compiled against a parallel callee loaded from
    the cache (a null call when loaded: statemix crashed after `--model ssm`, then cm twice).  Here
    the first caller caches the callees; the second is compiled against them, then loaded."""
    script = tmp_path / "kernels.py"
    script.write_text(KERNELS_CALLING_A_PARALLEL_ONE)
    env = {**os.environ, "STATEMIX_CACHE_DIR": str(tmp_path / "cache")}
    outputs = []
    for caller in ("first", "second", "second", "first"):
        done = subprocess.run([sys.executable, str(script), caller], capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0, (caller, done.returncode, done.stderr[-500:])
        outputs.append(float(done.stdout))
    assert outputs == [880.0, 881.0, 881.0, 880.0]


KERNELS_CALLING_A_SERIAL_ONE = '''
import sys
import numpy as np
from numba.core import event
from statemix._jit import kernel


@kernel
def leaf(a, i):
    return a[i % a.shape[0]] * 3.0


@kernel
def first_caller(a, n):
    s = 0.0
    for i in range(n):
        s += leaf(a, i)
    return s


@kernel
def second_caller(a, n):
    s = 1.0
    for i in range(n):
        s += leaf(a, i)
    return s


compiled = []


class Listener(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__name__)

    def on_end(self, ev):
        pass


event.register("numba:compile", Listener())
caller = first_caller if sys.argv[1] == "first" else second_caller
print(caller(np.arange(4.0), 10), ",".join(compiled))
'''


def test_a_kernel_compiled_against_a_cached_serial_callee_loads_it(tmp_path):
    """A serial kernel compiled because another is being compiled is loaded from the cache when it
    is there (so levels share their per-byte kernels' compiles across processes): here the second
    caller, in a second process, compiles only itself."""
    script = tmp_path / "kernels.py"
    script.write_text(KERNELS_CALLING_A_SERIAL_ONE)
    env = {**os.environ, "STATEMIX_CACHE_DIR": str(tmp_path / "cache")}
    outputs = []
    for caller in ("first", "second"):
        done = subprocess.run([sys.executable, str(script), caller], capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0, (caller, done.returncode, done.stderr[-500:])
        outputs.append(done.stdout.split())
    assert outputs == [["39.0", "first_caller,leaf"], ["40.0", "second_caller"]]


def test_cm_without_the_ssm_compiles_stubs_in_place_of_the_ssm():
    """cm's loop for models without the SSM (levels 1 and 2) is a variant whose SSM calls are stubs
    (half its compile time): given an SSM source anyway, it must stop at the first one, not train."""
    from statemix.coder import enc_init
    from statemix.models import cm

    assert cm.loop.run_range_no_ssm.py_func.__code__ is cm.loop.run_range.py_func.__code__
    model = cm.Model(cm.Config(12, 16, contexts=2, mixers=1, apms=1, kinds=(0, 1), source=2))
    assert model.source.uses_ssm
    data = np.frombuffer(b"an SSM source", dtype=np.uint8).copy()
    coded = np.zeros(64, dtype=np.uint8)
    tables = model.tables()
    enc_init(model.rc)
    with pytest.raises(RuntimeError, match="without the SSM"):
        cm.loop.run_range_no_ssm(cm.loop.ENCODE, data, coded, model.rc, model.state, tables, model.source.arrays(),
                                 cm._NO_TRACE, cm._NO_STAGES, 0, len(data))


def test_subprocesses_run_the_statemix_this_process_runs(tmp_path):
    """numba caches kernels per source path: a test process running the checkout's copy while the
    command lines it starts run the installed one compiles every kernel twice (CI ran over its 90
    minutes so).  The README's test command, ``python -P -m pytest``, keeps the checkout off sys.path."""
    script = "import statemix; print(statemix.__file__)"
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert Path(out).resolve() == Path(statemix.__file__).resolve()


def test_processes_started_from_statemix_share_its_kernel_cache(tmp_path):
    """statemix points numba at its cache directory through the environment, which the processes it
    starts inherit: they must read the same directory, not one nested in it (the command-line tests
    compiled levels 2 and 3 again so, about 590 s of CI's run)."""
    if _jit.CACHE_DIR is None:
        pytest.skip("no writable cache directory here")
    script = "import statemix._jit as j; print(j.CACHE_DIR)"
    child = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                           check=True).stdout.strip()
    assert child == _jit.CACHE_DIR
