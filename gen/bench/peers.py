"""`gen bench --peers`: llama.cpp on the same GGUF, in the same run.

llama.cpp's own `llama-bench` (tg256: one stream decoding 256 tokens; pp512: a 512-token
prompt) and `llama-server` (the mixed workload, one slot per request, continuous
batching) are built once, with `llama-quantize` (which requantises the bundled model into the
K-quant files of the speed table), from the llama.cpp that llama-cpp-python vendors, pinned below:
`python -m gen.bench.peers build` (what `make bench-peers` runs; about 10 to 20 minutes
on 2 cores) downloads its source from PyPI and builds the three programs into
`$GEN_HOME/peers/`. The build takes the instruction sets this CPU has (AVX2, AVX-512,
VNNI, BF16) and never AMX: a `-march=native` llama.cpp died with an illegal instruction
on prompt batches on this project's machines. `GEN_LLAMA_CPP_BIN` names a folder with
the three programs built elsewhere instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gen.bench.served import ServedError, Started, free_port, running, send_all

LLAMA_CPP_PYTHON = "0.3.36"  # the llama-cpp-python release whose vendored llama.cpp we build
PROGRAMS = ("llama-bench", "llama-server", "llama-quantize")
START_SECONDS = 120.0


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def cmake_options(flags: set[str]) -> list[str]:
    """llama.cpp's instruction-set switches for a CPU with these /proc/cpuinfo flags."""
    on = {
        "GGML_AVX": "avx" in flags,
        "GGML_AVX2": "avx2" in flags,
        "GGML_FMA": "fma" in flags,
        "GGML_F16C": "f16c" in flags,
        "GGML_BMI2": "bmi2" in flags,
        "GGML_AVX512": "avx512f" in flags,
        "GGML_AVX512_VNNI": "avx512_vnni" in flags,
        "GGML_AVX512_BF16": "avx512_bf16" in flags,
        "GGML_AMX_TILE": False,
        "GGML_AMX_INT8": False,
        "GGML_AMX_BF16": False,
    }
    return ["-DGGML_NATIVE=OFF", *(f"-D{k}={'ON' if v else 'OFF'}" for k, v in on.items())]


def build_dir() -> Path:
    from gen.home import gen_home

    options = " ".join(cmake_options(cpu_flags()))
    key = hashlib.sha256(f"{LLAMA_CPP_PYTHON} {options}".encode()).hexdigest()[:12]
    return gen_home() / "peers" / f"llama.cpp-{LLAMA_CPP_PYTHON}-{key}"


def find() -> Path | None:
    """The folder holding llama.cpp's programs, or None where not built."""
    given = os.environ.get("GEN_LLAMA_CPP_BIN")
    folder = Path(given) if given else build_dir() / "bin"
    return folder if all((folder / p).is_file() for p in PROGRAMS) else None


def build(say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> Path:
    """Download llama-cpp-python's source from PyPI and build its llama.cpp's programs
    for this CPU; returns the folder holding them."""
    target = build_dir()
    if (found := find()) is not None:
        return found
    with tempfile.TemporaryDirectory(prefix="gen-llama-cpp-") as tmp:
        work = Path(tmp)
        say(f"downloading llama-cpp-python {LLAMA_CPP_PYTHON}'s source ...")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
             ":all:", f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", str(work)],
            check=True,
        )  # fmt: skip
        (archive,) = work.glob("llama_cpp_python-*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
        (source,) = work.glob("llama_cpp_python-*/vendor/llama.cpp")
        options = cmake_options(cpu_flags())
        say(f"building {', '.join(PROGRAMS)} ({' '.join(options[1:])}) ...")
        build_tree = work / "build"
        subprocess.run(
            ["cmake", "-S", str(source), "-B", str(build_tree), "-DCMAKE_BUILD_TYPE=Release",
             *options, "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
             "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON", "-DBUILD_SHARED_LIBS=OFF",
             *(["-G", "Ninja"] if shutil.which("ninja") else [])],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        subprocess.run(
            ["cmake", "--build", str(build_tree), "-j", str(os.cpu_count() or 2), "--target",
             *PROGRAMS],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        (target / "bin").mkdir(parents=True, exist_ok=True)
        for program in PROGRAMS:
            shutil.copy2(build_tree / "bin" / program, target / "bin" / program)
    say(f"llama.cpp's programs are in {target / 'bin'}")
    return target / "bin"


def llama_bench(folder: Path, gguf: Path, threads: int, tokens: int = 256) -> dict[str, float]:
    """llama-bench's tg<tokens> and pp512 on the GGUF, tokens per second (mean of its
    repetitions)."""
    out = subprocess.run(
        [str(folder / "llama-bench"), "-m", str(gguf), "-t", str(threads), "-p", "512",
         "-n", str(tokens), "-r", "3", "-o", "json"],
        check=True, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    figures: dict[str, float] = {}
    for test in json.loads(out.stdout):
        name = f"tg{test['n_gen']}" if test["n_gen"] else f"pp{test['n_prompt']}"
        figures[name] = round(float(test["avg_ts"]), 2)
    return figures


@contextlib.contextmanager
def llama_server(
    folder: Path,
    gguf: Path,
    threads: int,
    slots: int,
    positions: int = 1024,
    template: str | None = None,
) -> Iterator[str]:
    """llama-server on a free loopback port with one slot per request (continuous
    batching, `positions` a slot); yields its /v1 URL. `template`: the chat template its
    chat requests are rendered with (a file without one gets ChatML from llama-server,
    where gen gives it its architecture's)."""
    with tempfile.TemporaryDirectory(prefix="gen-peers-") as tmp:
        extra: tuple[str, ...] = ()
        if template is not None:
            path = Path(tmp) / "template.jinja"
            path.write_text(template, encoding="utf-8")
            extra = ("--jinja", "--chat-template-file", str(path))
        with _llama_server(folder, gguf, threads, slots, positions, extra) as (url, _):
            yield url


@contextlib.contextmanager
def _llama_server(
    folder: Path, gguf: Path, threads: int, slots: int, positions: int, extra: tuple[str, ...] = ()
) -> Iterator[tuple[str, Started]]:
    port = free_port()
    command = [str(folder / "llama-server"), "-m", str(gguf), "--host", "127.0.0.1",
               "--port", str(port), "-t", str(threads), "-np", str(slots),
               "-c", str(positions * slots), "--cont-batching", *extra]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with running(command, url, "llama-server", START_SECONDS) as started:
        yield f"{url}/v1", started


def llama_load(folder: Path, gguf: Path, threads: int, positions: int = 1024) -> dict[str, float]:
    """How llama.cpp loads the GGUF: llama-server with one slot of `positions`, from its
    start until it answers /health (seconds), and its resident memory then and at its peak
    (MB, from /proc: the model and that one slot's KV cache)."""
    start = time.perf_counter()
    with _llama_server(folder, gguf, threads, 1, positions) as (_, started):
        seconds = time.perf_counter() - start
        memory = process_memory(started.process.pid)
    return {"load_seconds": round(seconds, 2), **memory}


def process_memory(pid: int | str = "self") -> dict[str, float]:
    """A process's resident memory now and at its peak, MB (/proc/PID/status: VmRSS, VmHWM)."""
    figures: dict[str, float] = {}
    names = {"VmRSS": "rss_mb", "VmHWM": "peak_rss_mb"}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key in names:
                figures[names[key]] = round(int(value.split()[0]) / 1024, 1)  # (kB)
    return figures


# the files the speed table reads beside the bundled model: llama-quantize's requantisations
# of it (the quantisations people download, and the two plain fallbacks inside them)
REQUANTISED = ("Q4_K_M", "Q5_K_M", "Q6_K", "Q5_0", "Q8_0")


def requantise(
    source: Path,
    kinds: tuple[str, ...] = REQUANTISED,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> list[Path]:
    """`source` requantised by llama.cpp's llama-quantize into each of `kinds`, made once
    into $GEN_HOME/peers/quantised/ (a file is written beside and renamed into place);
    returns their paths. Needs the programs built."""
    folder = find()
    if folder is None:
        raise RuntimeError("llama.cpp is not built: run `python -m gen.bench.peers build`")
    out = build_dir().parent / "quantised"
    out.mkdir(parents=True, exist_ok=True)
    made = []
    for kind in kinds:
        target = out / f"{source.stem}-{kind}.gguf"
        if not target.is_file():
            say(f"requantising {source.name} into {kind} ...")
            partial = target.with_suffix(f".{os.getpid()}.part")
            subprocess.run(
                [str(folder / "llama-quantize"), "--allow-requantize", str(source),
                 str(partial), kind],
                check=True, capture_output=True,
            )  # fmt: skip
            os.replace(partial, target)
        made.append(target)
    return made


def run_peers(
    gguf: Path,
    threads: int,
    bodies: list[dict[str, Any]],
    progress: Callable[[str], None],
    tokens: int = 256,
    template: str | None = None,
) -> dict[str, Any]:
    """llama.cpp's figures on `gguf`: llama-bench's, and the mixed workload `bodies` sent
    at once to llama-server as streaming clients (its seconds, and the texts it wrote),
    their messages rendered with `template` (gen's; None: the file's)."""
    folder = find()
    if folder is None:
        return {"available": False, "why": "not built: run `make bench-peers` once"}
    progress(f"peers: llama-bench tg{tokens} and pp512 on the same GGUF")
    figures: dict[str, Any] = {"available": True, "folder": str(folder)}
    figures.update(llama_bench(folder, gguf, threads, tokens))
    progress(f"peers: the mixed batch to llama-server with {len(bodies)} slots")
    try:
        with llama_server(folder, gguf, threads, len(bodies), template=template) as url:
            asyncio.run(send_all(url, bodies))  # warm, as gen serve is measured
            results, seconds = asyncio.run(send_all(url, bodies))
    except ServedError as exc:  # it dropped its clients mid-batch (llama-server died)
        figures["server_error"] = f"{type(exc).__name__}: {exc}"
    else:
        figures["server_mixed_seconds"] = round(seconds, 2)
        figures["server_tokens"] = sum(tokens for _, tokens in results)
        figures["server_texts"] = [text for text, _ in results]
    progress("peers: llama-server's load time and resident memory, one slot")
    figures["load"] = llama_load(folder, gguf, threads)
    return figures


USAGE = "usage: python -m gen.bench.peers build | quantise"

if __name__ == "__main__":  # `python -m gen.bench.peers build|quantise`
    if sys.argv[1:] not in (["build"], ["quantise"]):
        sys.exit(USAGE)
    if sys.argv[1] == "build":
        build()
    else:  # the bundled model's requantisations, one path a line (make bench-peers)
        from gen.models.store import bundled_gguf

        for path in requantise(bundled_gguf()):
            print(path)
