"""`hf:ORG/REPO/FILE.gguf` specs: found in a Hugging Face cache written here (HF_HUB_CACHE),
a clear error when absent and offline, downloaded only when allowed (the download stands in
for the network: no test goes online)."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub
import pytest

from gen.cli import main
from gen.errors import ModelError
from gen.models import check, resolve
from tests.models.ggufs import write_gguf

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def cache_file(cache: Path, repo: str, filename: str) -> Path:
    """A file as huggingface_hub caches it: refs/main names the snapshot that holds it."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(COMMIT)
    path = folder / "snapshots" / COMMIT / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(path)


def no_download(*args: object, **kwargs: object) -> str:
    raise AssertionError("downloaded")


def test_an_hf_spec_resolves_from_the_local_cache(
    hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_download)
    cached = cache_file(hub, "org/repo", "tiny-Q4_K_M.gguf")
    ms = resolve("hf:org/repo/tiny-Q4_K_M.gguf")
    assert (ms.name, ms.kind, ms.path) == ("tiny-Q4_K_M", "gguf", cached)
    check(ms)
    nested = cache_file(hub, "org/repo", "quants/small.gguf")
    assert resolve("hf:org/repo/quants/small.gguf").path == nested


def test_an_hf_spec_absent_offline_is_a_clear_error(
    hub: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_download)
    with pytest.raises(ModelError) as info:
        resolve("hf:org/repo/absent.gguf")
    assert str(info.value) == (
        f"hf:org/repo/absent.gguf: not in the local Hugging Face cache ({hub}) and "
        "HF_HUB_OFFLINE is set; fetch it once online (`hf download org/repo absent.gguf`) or "
        "unset HF_HUB_OFFLINE"
    )
    assert main(["generate", "-m", "hf:org/repo/absent.gguf", "你好"]) == 2
    assert "not in the local Hugging Face cache" in capsys.readouterr().err


def test_an_hf_spec_absent_online_is_downloaded_into_the_cache(
    hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    asked: list[tuple[str, str, str | None]] = []

    def download(repo: str, filename: str, cache_dir: str | None = None) -> str:
        asked.append((repo, filename, cache_dir))
        return str(cache_file(hub, repo, filename))

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    ms = resolve("hf:org/repo/new.gguf")
    assert asked == [("org/repo", "new.gguf", str(hub))] and ms.name == "new"
    assert resolve("hf:org/repo/new.gguf").path == ms.path and len(asked) == 1  # cached now

    def unreachable(*args: object, **kwargs: object) -> str:
        raise OSError("network is unreachable")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", unreachable)
    with pytest.raises(ModelError, match=r"the download failed: OSError: network is unreachable"):
        resolve("hf:org/repo/other.gguf")


@pytest.mark.parametrize(
    ("spec", "reason"),
    [("hf:org/repo", "named hf:ORG/REPO/FILE.gguf"), ("hf:org//x.gguf", "named hf:ORG/REPO"),
     ("hf:org/repo/weights.safetensors", "runs .gguf files")],
)  # fmt: skip
def test_a_malformed_hf_spec_says_what_is_expected(hub: Path, spec: str, reason: str) -> None:
    with pytest.raises(ModelError, match=reason):
        resolve(spec)


def test_gen_models_show_reads_an_hf_spec(hub: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache_file(hub, "org/repo", "tiny.gguf")
    assert main(["models", "show", "hf:org/repo/tiny.gguf"]) == 0
    out = capsys.readouterr().out
    assert "architecture   llama" in out and out.rstrip().endswith("runs           yes")
