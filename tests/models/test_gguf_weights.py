"""Loading a GGUF file's blocks without a second copy of the model: a tensor used as stored
is a view of the map, the pages read are handed back as the load goes on, and the bundled
model's load peaks near its file's size, in well under a second of work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType

from gen.models.gguf_weights import GGUFWeights
from gen.models.loader import one_thread
from tests.models.ggufs import write_gguf


def mapped_kb(path: Path) -> int:
    """Resident kilobytes of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
            inside = len(fields) >= 6 and fields[-1] == str(path)
        elif inside and fields[:1] == ["Rss:"]:
            total += int(fields[1])
    return total


def test_a_tensor_as_stored_is_a_view_of_the_map_and_read_pages_are_handed_back(
    tmp_path: Path,
) -> None:
    q8 = GGMLQuantizationType.Q8_0
    path = write_gguf(tmp_path / "m.gguf", layers=2,
                      types={f"blk.{i}.ffn_up.weight": q8 for i in range(2)})  # fmt: skip
    weights = GGUFWeights(path)
    up = weights.get("blk.0.ffn_up.weight")
    stored = weights.blocks([(up, None)])
    assert stored.data_ptr() == up.data.ctypes.data  # no copy
    both = weights.blocks([(up, None), (weights.get("blk.1.ffn_up.weight"), None)])
    assert both.data_ptr() != up.data.ctypes.data and both.shape[0] == 2 * up.data.shape[0]
    before = stored.clone()
    assert mapped_kb(path) > 0
    weights.release()
    assert mapped_kb(path) == 0  # handed back ...
    assert np.array_equal(stored.numpy(), before.numpy())  # ... and read again as it was
    assert not stored.numpy().flags.owndata and stored.numpy().flags.writeable


SCRIPT = """
import json, sys
from pathlib import Path
from gen.engine import kernels
from gen.models import loader, resolve, store
from tests.models.test_gguf_weights import mapped_kb

def status_kb(field):
    lines = Path("/proc/self/status").read_text().splitlines()
    return int(next(x for x in lines if x.startswith(field)).split()[1])

ms = resolve("smollm2-135m")
folder = store.prepare(ms, weights=False)
cfg = loader.read_config(folder, loader.load_tokenizer(folder))
compiled = kernels.load()
if compiled is None:
    print(json.dumps(None)); sys.exit()
Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from here
before = status_kb("VmRSS:")
model, _ = loader.load_gguf_model(ms.path, cfg, compiled)
print(json.dumps({"file_kb": ms.path.stat().st_size // 1024,
                  "peak_kb": status_kb("VmHWM:") - before, "grown_kb": status_kb("VmRSS:") - before,
                  "mapped_kb": mapped_kb(ms.path)}))
"""


def test_the_bundled_models_load_holds_no_second_copy() -> None:
    """The load's peak within 1.3x the file (before: 2x, the map's pages and the packed
    copy both resident), the map's pages handed back at the end."""
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", SCRIPT], cwd=root, capture_output=True,
                         text=True, check=True, timeout=300)  # fmt: skip
    found = json.loads(run.stdout.strip().splitlines()[-1])
    if found is None:
        return  # no kernels on this machine: dtype gguf runs float32 (test_quantised)
    file_kb = found["file_kb"]
    assert found["peak_kb"] < 1.3 * file_kb, found
    assert found["grown_kb"] < 1.1 * file_kb, found
    assert found["mapped_kb"] < 0.02 * file_kb, found  # the embedding's rows: none read yet


def test_packing_runs_on_one_thread_and_gives_the_threads_back() -> None:
    threads = torch.get_num_threads()
    with pytest.raises(RuntimeError), one_thread():
        assert torch.get_num_threads() == 1
        raise RuntimeError("a load that fails")
    assert torch.get_num_threads() == threads
