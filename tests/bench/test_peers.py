"""`gen bench --peers`' plumbing: the llama.cpp build's instruction sets (never AMX),
finding the programs, reading llama-bench's JSON, and the figure when llama.cpp is not
built, and our ratios against its figures. The real programs run in `make bench-peers` (a
10-20 minute build), not here."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gen.bench import engine as bench
from gen.bench import peers as bench_peers
from gen.bench import report


def test_the_build_takes_the_cpus_instruction_sets_but_never_amx() -> None:
    avx2 = bench_peers.cmake_options({"avx", "avx2", "fma", "f16c", "bmi2"})
    assert "-DGGML_NATIVE=OFF" in avx2 and "-DGGML_AVX2=ON" in avx2
    assert "-DGGML_AVX512=OFF" in avx2
    xeon = bench_peers.cmake_options(
        {"avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8"}
    )
    assert {"-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_BF16=ON"} <= set(xeon)
    assert {"-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"} <= set(xeon)


def fake_programs(folder: Path, tests: list[dict[str, object]]) -> Path:
    """Stand-ins for llama-bench (prints `tests` as its JSON), llama-server (dies) and
    llama-quantize (writes the type asked for, then the source's bytes)."""
    folder.mkdir(parents=True)
    bench = folder / "llama-bench"
    bench.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(tests)}\nEOF\n", encoding="utf-8")
    (folder / "llama-server").write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    # llama-quantize --allow-requantize IN OUT TYPE: OUT holds TYPE and IN's bytes
    (folder / "llama-quantize").write_text(
        '#!/bin/sh\n{ printf "%s:" "$4"; cat "$2"; } > "$3"\n', encoding="utf-8"
    )
    for p in folder.iterdir():
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return folder


def test_programs_are_found_where_named_and_llama_bench_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GEN_LLAMA_CPP_BIN", raising=False)
    assert bench_peers.find() is None  # nothing built in a new home
    folder = fake_programs(
        tmp_path / "bin",
        [
            {"n_prompt": 512, "n_gen": 0, "avg_ts": 379.123},
            {"n_prompt": 0, "n_gen": 256, "avg_ts": 166.456},
        ],
    )
    monkeypatch.setenv("GEN_LLAMA_CPP_BIN", str(folder))
    assert bench_peers.find() == folder
    figures = bench_peers.llama_bench(folder, tmp_path / "m.gguf", threads=2)
    assert figures == {"pp512": 379.12, "tg256": 166.46}


def test_without_llama_cpp_the_figure_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GEN_LLAMA_CPP_BIN", raising=False)
    figures = bench_peers.run_peers(tmp_path / "m.gguf", 2, [], lambda _: None)
    assert figures == {"available": False, "why": "not built: run `make bench-peers` once"}


def test_make_bench_peers_builds_through_the_modules_entry_point(tmp_path: Path) -> None:
    """`make bench-peers` runs `python -m gen.bench.peers build`: with the programs already
    there (GEN_LLAMA_CPP_BIN) it returns at once, building nothing; anything but build or
    quantise is refused with the usage."""
    root = Path(__file__).resolve().parents[2]
    recipe = (root / "Makefile").read_text("utf-8").split("\nbench-peers:", 1)[1]
    assert "\t$(BIN)/python -m gen.bench.peers build\n" in recipe.split("\n\n", 1)[0]
    folder = fake_programs(tmp_path / "bin", [])
    env = {**os.environ, "GEN_LLAMA_CPP_BIN": str(folder), "GEN_HOME": str(tmp_path / "home")}
    command = [sys.executable, "-m", "gen.bench.peers"]
    built = subprocess.run([*command, "build"], cwd=root, env=env, capture_output=True, text=True)
    assert (built.returncode, built.stderr) == (0, "")
    assert not (tmp_path / "home").exists()  # nothing downloaded or built
    wrong = subprocess.run([*command, "--help"], cwd=root, env=env, capture_output=True, text=True)
    assert (wrong.returncode, wrong.stderr) == (1, f"{bench_peers.USAGE}\n")


def test_a_server_that_dies_at_start_is_an_error_with_its_output(tmp_path: Path) -> None:
    folder = fake_programs(tmp_path / "bin", [])
    with (
        pytest.raises(RuntimeError, match="llama-server exited"),
        bench_peers.llama_server(folder, tmp_path / "m.gguf", threads=2, slots=2),
    ):
        pass


def test_llama_server_renders_chats_with_the_template_gen_ran(tmp_path: Path) -> None:
    """A file without a chat template gets ChatML from llama-server and its architecture's
    from gen: the bench hands llama-server gen's, so both decode the same prompt."""
    folder = fake_programs(tmp_path / "bin", [])
    seen = tmp_path / "seen.txt"
    (folder / "llama-server").write_text(
        f'#!/bin/sh\necho "$@" > {seen}\nfor a in "$@"; do case "$prev" in '
        f'--chat-template-file) cat "$a" >> {seen};; esac; prev="$a"; done\nexit 1\n',
        encoding="utf-8",
    )
    template = "{{ bos_token }}<start_of_turn>user 春天 🌸"
    with (
        pytest.raises(RuntimeError, match="llama-server exited"),
        bench_peers.llama_server(folder, tmp_path / "m.gguf", 2, 2, template=template),
    ):
        pass
    args, written = seen.read_text(encoding="utf-8").split("\n", 1)
    assert "--jinja --chat-template-file" in args and written == template


def test_the_single_stream_ratio_is_decoding_against_tg(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-bench's tg256 runs no prompt: ours is compared after the first token."""

    def peers(
        path: Path, threads: int, bodies: list[Any], progress: Any, tokens: int, template: str
    ) -> Any:
        assert tokens == 256 and len(bodies) == 2 and template == "{{ messages }}"
        return {"available": True, "tg256": 100.0, "server_mixed_seconds": 30.0,
                "server_texts": ["春天来了 🌸", "สวัสดี ครับ"]}  # fmt: skip

    monkeypatch.setattr(bench_peers, "run_peers", peers)
    results = {
        "single_stream": {"new_tokens": 256, "tokens_per_second": 90.0,
                          "decode_tokens_per_second": 95.0},
        "mixed_batch": {"seconds": 15.0},
    }  # fmt: skip
    loaded: Any = SimpleNamespace(
        name="smollm2-135m", tokenizer=SimpleNamespace(chat_template="{{ messages }}")
    )
    ours = ["春天来了 🌸\ufffd", "สวัสดี ค่ะ"]  # (a cut character at the end is not text)
    figures = bench.peer_figures(loaded, "smollm2-135m", results, [16, 256], ours, lambda _: None)
    assert (figures["single_ratio"], figures["mixed_ratio"]) == (0.95, 2.0)
    # the second parts after its 8th character of 10; the texts stay out of the figures
    assert figures["texts"] == {"requests": 2, "identical": 1, "agreeing_share": 0.9}
    assert "server_texts" not in figures
    line = report.peers_line(figures, results["single_stream"])
    assert "llama-server's beside ours: equal for 1 of 2; on average 90% of a text" in line


def test_requantising_makes_each_file_once_with_llama_quantize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GEN_LLAMA_CPP_BIN", str(fake_programs(tmp_path / "bin", [])))
    source = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    source.write_bytes(b"GGUF model")
    said: list[str] = []
    made = bench_peers.requantise(source, ("Q4_K_M", "Q8_0"), said.append)
    assert [p.name for p in made] == [
        "SmolLM2-135M-Instruct.Q4_1-Q4_K_M.gguf",
        "SmolLM2-135M-Instruct.Q4_1-Q8_0.gguf",
    ]
    assert [p.read_bytes() for p in made] == [b"Q4_K_M:GGUF model", b"Q8_0:GGUF model"]
    assert len(said) == 2 and not list(made[0].parent.glob("*.part"))
    assert bench_peers.requantise(source, ("Q4_K_M",), said.append) == made[:1]
    assert len(said) == 2  # made once: the second call finds the file


def test_requantising_without_llama_cpp_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GEN_LLAMA_CPP_BIN", raising=False)
    with pytest.raises(RuntimeError, match=r"gen\.bench\.peers build"):
        bench_peers.requantise(tmp_path / "m.gguf")


def test_a_processs_memory_is_read_from_proc() -> None:
    ours = bench_peers.process_memory()
    assert 0 < ours["rss_mb"] <= ours["peak_rss_mb"]
    assert bench_peers.process_memory(2**22 + 12345) == {}  # no such process: nothing


def test_a_llama_server_that_drops_its_clients_is_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama-server died mid-batch on one requantised file: the figure says so, the other
    figures stay, and the report's line names it."""
    folder = fake_programs(tmp_path / "bin", [{"n_prompt": 0, "n_gen": 256, "avg_ts": 150.0}])
    monkeypatch.setenv("GEN_LLAMA_CPP_BIN", str(folder))

    @contextlib.contextmanager
    def server(*args: Any, **kwargs: Any) -> Iterator[str]:
        """A server that reads a request's head and hangs up without an answer."""
        listener = socket.create_server(("127.0.0.1", 0))

        def hang_up() -> None:
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = listener.accept()
                    conn.recv(65536)
                    conn.close()

        threading.Thread(target=hang_up, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        finally:
            listener.close()

    monkeypatch.setattr(bench_peers, "llama_server", server)
    monkeypatch.setattr(bench_peers, "llama_load", lambda *a: {"load_seconds": 0.3})
    bodies = [{"model": "m", "messages": [{"role": "user", "content": "春天 🌸"}]}]
    figures = bench_peers.run_peers(tmp_path / "m.gguf", 2, bodies, lambda _: None)
    assert figures["tg256"] == 150.0 and "server_mixed_seconds" not in figures
    assert figures["server_error"].startswith("ServedError: the stream from http://127.0.0.1:")
    figures["single_ratio"] = 1.2
    line = report.peers_line(figures, {"new_tokens": 256, "decode_tokens_per_second": 180.0})
    assert "the mixed batch on llama-server failed (ServedError: the stream" in line
    assert "mixed batch 1" not in line  # no ratio without its figure
