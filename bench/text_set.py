"""Builds issue 12's set of text that is not enwik8: books, source code, XML and logs of about 1 MB.

Usage: python bench/text_set.py OUT_DIR [--shared ../shared/data] [--loghub PATH]
Then: python bench/corpora.py --files OUT_DIR/* --zpaq PATH (statemix against zpaq -m5 on each).

Every file is cut from a named public source, so anyone can rebuild the same bytes; the script prints
each file's source, size and SHA-256 (bench/RESULTS.md quotes them).  Nothing is downloaded:

    bible-1M.txt       the King James Bible (public domain), Canterbury large corpus bible.txt, first 1 MB
    world192-1M.txt    the CIA World Factbook 1992 (public domain), Canterbury large world192.txt, first 1 MB
    python-stdlib-1M.py  this interpreter's standard library, Lib/*.py sorted by name, joined, first 1 MB
    freedesktop-mime-1M.xml  Debian's shared-mime-info, /usr/share/mime/packages/freedesktop.org.xml, first 1 MB
    <System>_2k.log    the 2,000-line samples of loghub (github.com/logpai/loghub) named in LOGS, whole
                       (150-600 kB each; ``--loghub``: a checkout or a git directory of it)

The Python and XML files depend on the machine's versions (the script prints them); the others do not.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import sysconfig
from pathlib import Path

SIZE = 1_000_000  # bytes of each cut file
MIME_XML = Path("/usr/share/mime/packages/freedesktop.org.xml")
#: loghub's samples measured: the largest of each sort (cloud services, HPC, a mail server, a desktop)
LOGS = ("OpenStack/OpenStack_2k.log", "Hadoop/Hadoop_2k.log", "Thunderbird/Thunderbird_2k.log",
        "Mac/Mac_2k.log", "BGL/BGL_2k.log", "HDFS/HDFS_2k.log")


def python_stdlib() -> bytes:
    library = Path(sysconfig.get_paths()["stdlib"])
    return b"".join(path.read_bytes() for path in sorted(library.glob("*.py")))


def loghub_file(loghub: Path, name: str) -> bytes:
    if (loghub / name).is_file():
        return (loghub / name).read_bytes()
    return subprocess.run(["git", f"--git-dir={loghub}", "show", f"HEAD:{name}"], check=True,
                          capture_output=True).stdout


def build(shared: Path, loghub: Path | None) -> dict[str, tuple[str, bytes]]:
    """File name -> (its source in words, its bytes)."""
    large = shared / "corpora" / "canterbury_large"
    files = {
        "bible-1M.txt": ("Canterbury large bible.txt, first 1 MB", (large / "bible.txt").read_bytes()[:SIZE]),
        "world192-1M.txt": ("Canterbury large world192.txt, first 1 MB", (large / "world192.txt").read_bytes()[:SIZE]),
        "python-stdlib-1M.py": (f"Python {sys.version.split()[0]} Lib/*.py sorted, first 1 MB", python_stdlib()[:SIZE]),
    }
    if MIME_XML.is_file():
        files["freedesktop-mime-1M.xml"] = (f"{MIME_XML}, first 1 MB", MIME_XML.read_bytes()[:SIZE])
    for name in LOGS if loghub else ():
        files[Path(name).name] = (f"loghub {name}", loghub_file(loghub, name))
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--loghub", type=Path, help="a checkout (or git directory) of github.com/logpai/loghub")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print("| file | source | bytes | SHA-256 |\n| --- | --- | ---: | --- |")
    for name, (source, data) in build(args.shared, args.loghub).items():
        (args.out / name).write_bytes(data)
        print(f"| {name} | {source} | {len(data):,} | {hashlib.sha256(data).hexdigest()[:16]}... |")


if __name__ == "__main__":
    main()
