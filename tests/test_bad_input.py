"""Generated bad input: mutated experiment, deployment, hardware, model and trace files end in one line that
names the file (and the field), exit status 2, no traceback and no output directory; or, where the mutation
leaves a valid file, a normal run.

Each file's mutations: every field (nested ones too) deleted and set to each of a list of bad values (wrong
types, negative, zero, huge, NaN), unknown keys, and whole-file damage (empty, binary junk, a YAML list,
malformed YAML, cut in half). The default run tries a seeded sample of them per file; `-m slow` all of them.
"""

from __future__ import annotations

import contextlib
import copy
import io
import random
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import yaml

from gpusim import cli
from gpusim.specs.catalog import clear_cache

REPO = Path(__file__).resolve().parents[1]
SAMPLE = 14
"""Mutations tried per file in the default run (all of them under `-m slow`)."""
BAD_VALUES: tuple[object, ...] = (None, "abc", "", -1, 0, -1e9, 1e300, 10**30, float("nan"), True, [], {"x": 1},
                                  [1, 2, 3])
RAW: dict[str, bytes] = {
    "empty": b"",
    "whitespace": b"  \n\n",
    "binary": bytes(range(256)) * 4,
    "list": b"- 1\n- 2\n",
    "scalar": b"42\n",
    "malformed": b"key: [unclosed\n  other: {\n",
    "tabs": b"a:\n\t- b\n",
}

EXPERIMENT = {"hardware": "h100-hgx", "benchmark": "llama3.1-8b", "scenario": "server", "qps": 5.0, "samples": 8,
              "deployment": "dep.yaml", "seed": 3}
DEPLOYMENT = {"name": "small", "software": "trtllm", "weights": "fp8", "activations": "fp8", "kv_cache": "fp8",
              "tp": 2, "pp": 1, "max_batch_size": 64, "max_num_tokens": 4096, "router": "least_loaded",
              "mtp": None, "batch_wait": {"timeout_iters": 3, "max_tokens_ratio": 0.5}}
TRACE_CSV = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n0.5,2000,5\n1.25,40,1\n2.0,512,64\n"
TRACE_JSONL = "".join(f'{{"timestamp": {t}, "input_length": {i}, "output_length": {o}, "hash_ids": [{t}, 7]}}\n'
                      for t, i, o in ((0, 700, 10), (250, 1024, 3), (900, 60, 40)))


@dataclass(frozen=True)
class Case:
    """One mutated input: which file, how it was changed, its new bytes."""

    kind: str
    how: str
    content: bytes


def _leaves(data: object, prefix: tuple = ()) -> Iterator[tuple]:
    """Paths of every key (nested mappings too)."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield (*prefix, k)
            yield from _leaves(v, (*prefix, k))


def _set(data: dict, path: tuple, value: object, delete: bool = False) -> dict:
    out = copy.deepcopy(data)
    node = out
    for k in path[:-1]:
        node = node[k]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def _mutations(kind: str, data: dict) -> list[Case]:
    cases = [Case(kind, f"raw {name}", raw) for name, raw in RAW.items()]
    text = yaml.safe_dump(data, sort_keys=False).encode()
    cases.append(Case(kind, "cut in half", text[: len(text) // 2]))
    cases.append(Case(kind, "unknown key", yaml.safe_dump({**data, "bogus_field": 1}).encode()))
    for path in _leaves(data):
        where = ".".join(map(str, path))
        cases.append(Case(kind, f"delete {where}", yaml.safe_dump(_set(data, path, None, delete=True)).encode()))
        for v in BAD_VALUES:
            cases.append(Case(kind, f"{where} = {v!r}", yaml.safe_dump(_set(data, path, v)).encode()))
        if isinstance(_get(data, path), dict):
            cases.append(Case(kind, f"unknown key in {where}",
                              yaml.safe_dump(_set(data, (*path, "bogus_field"), 1)).encode()))
    return cases


def _get(data: dict, path: tuple) -> object:
    for k in path:
        data = data[k]
    return data


def _trace_mutations(kind: str, text: str) -> list[Case]:
    cases = [Case(kind, f"raw {name}", raw) for name, raw in RAW.items() if name != "list"]
    lines = text.splitlines()
    cases.append(Case(kind, "header only", (lines[0] + "\n").encode()))
    cases.append(Case(kind, "cut mid-line", text[: len(text) * 2 // 3].encode()))
    cases.append(Case(kind, "times decreasing", "\n".join([lines[0], *reversed(lines[1:])]).encode()))
    for bad in ("-5", "abc", "", "1e400", "nan", "3.5", "99999999999999999999", "[1]", "null"):
        for row in range(1, len(lines)):
            for col in range(3):
                cases.append(Case(kind, f"line {row + 1} column {col} = {bad}", _replace_field(lines, row, col, bad)))
    return cases


def _replace_field(lines: list[str], row: int, col: int, bad: str) -> bytes:
    out = list(lines)
    if out[row].startswith("{"):
        import json

        rec = json.loads(out[row])
        key = list(rec)[col]
        rec[key] = json.loads(bad) if bad in ("null", "[1]") else bad
        out[row] = json.dumps(rec)
    else:
        cells = out[row].split(",")
        cells[col] = bad
        out[row] = ",".join(cells)
    return ("\n".join(out) + "\n").encode()


def _system() -> dict:
    return yaml.safe_load((REPO / "hardware_profiles" / "systems" / "h100-hgx.yaml").read_text())


def _gpu() -> dict:
    return yaml.safe_load((REPO / "hardware_profiles" / "gpus" / "h100-sxm.yaml").read_text())


def _model() -> dict:
    return yaml.safe_load((REPO / "workloads" / "models" / "llama3.1-8b.yaml").read_text())


@cache
def all_cases() -> tuple[Case, ...]:
    return tuple(_mutations("experiment", EXPERIMENT) + _mutations("deployment", DEPLOYMENT)
            + _mutations("system", _system()) + _mutations("gpu", _gpu()) + _mutations("model", _model())
            + _trace_mutations("trace.csv", TRACE_CSV) + _trace_mutations("trace.jsonl", TRACE_JSONL))


def sampled(cases: tuple[Case, ...], k: int = SAMPLE, seed: int = 31) -> list[Case]:
    by_kind: dict[str, list[Case]] = {}
    for c in cases:
        by_kind.setdefault(c.kind, []).append(c)
    rng = random.Random(seed)
    return [c for group in by_kind.values() for c in rng.sample(group, min(k, len(group)))]


# ---- running one ----------------------------------------------------------------------------------------------
@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `GPUSIM_PATH` folder holding copies of the profiles the mutations target (they shadow the shipped
    ones of the same name), and the experiment's files."""
    for kind in ("systems", "gpus"):
        (tmp_path / "profiles" / kind).mkdir(parents=True)
    (tmp_path / "profiles" / "models").mkdir()
    monkeypatch.setenv("GPUSIM_PATH", str(tmp_path / "profiles"))
    return tmp_path


def _clear_caches() -> None:
    clear_cache()


def _targets(root: Path) -> dict[str, Path]:
    return {"experiment": root / "exp.yaml", "deployment": root / "dep.yaml",
            "system": root / "profiles" / "systems" / "h100-hgx.yaml",
            "gpu": root / "profiles" / "gpus" / "h100-sxm.yaml",
            "model": root / "profiles" / "models" / "llama3.1-8b.yaml", "trace.csv": root / "trace.csv",
            "trace.jsonl": root / "trace.jsonl"}


def _timeout(*_: object) -> None:
    raise TimeoutError("a mutated input ran for more than 60 s")


def run_case(root: Path, case: Case) -> tuple[int, str]:
    """Write the case's file over a valid setup and run `gpusim run` on it in this process (a traceback
    here is an exception); (exit status, stderr)."""
    targets = _targets(root)
    originals = {"system": REPO / "hardware_profiles" / "systems" / "h100-hgx.yaml",
                 "gpu": REPO / "hardware_profiles" / "gpus" / "h100-sxm.yaml",
                 "model": REPO / "workloads" / "models" / "llama3.1-8b.yaml"}
    for kind, src in originals.items():
        shutil.copy(src, targets[kind])
    targets["experiment"].write_text(yaml.safe_dump(EXPERIMENT))
    targets["deployment"].write_text(yaml.safe_dump(DEPLOYMENT))
    targets["trace.csv"].write_text(TRACE_CSV)
    targets["trace.jsonl"].write_text(TRACE_JSONL)
    targets[case.kind].write_bytes(case.content)
    argv = ["run", str(targets["experiment"]), "--out", str(root / "out")]
    if case.kind.startswith("trace"):
        argv += ["--scenario", "trace", "--trace", str(targets[case.kind]), "--model", "llama3.1-8b"]
    _clear_caches()
    err = io.StringIO()
    old = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(60)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = cli.main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        _clear_caches()
    return rc, err.getvalue()


def check(root: Path, case: Case) -> str:
    """'ok' (a valid file ran) or 'clean' (one line naming the file, exit 2, no output directory)."""
    out = root / "out"
    shutil.rmtree(out, ignore_errors=True)
    try:
        rc, err = run_case(root, case)
    except SystemExit as exc:  # argparse's own errors are exit 2 with usage: not a file's
        raise AssertionError(f"{case.kind} {case.how}: SystemExit {exc.code}") from None
    except Exception as exc:
        raise AssertionError(f"{case.kind} {case.how}: {type(exc).__name__}: {exc}") from exc
    if rc == 0:
        return "ok"
    lines = err.strip().splitlines()
    path = _targets(root)[case.kind]
    assert rc == 2, f"{case.kind} {case.how}: exit {rc}: {err}"
    assert len(lines) == 1 and lines[0].startswith("gpusim: error: "), f"{case.kind} {case.how}: {err!r}"
    named = (path.name, f"{path.stem}: ")
    if case.how.startswith("delete") or case.how.endswith("= True"):  # still valid: what then cannot run is named
        named += ("dep.yaml: ", "deployment: ")
    assert any(n in lines[0] for n in named), f"{case.kind} {case.how}: the error names none of {named}: {lines[0]}"
    assert "Traceback" not in err
    assert not out.exists(), f"{case.kind} {case.how}: left {out}"
    return "clean"


def test_every_sampled_mutation_ends_in_one_clean_line(scratch: Path) -> None:
    cases = sampled(all_cases())
    outcomes = [check(scratch, c) for c in cases]
    assert outcomes.count("clean") > len(cases) // 2  # most mutations are errors: the harness sees them


@pytest.mark.slow
def test_every_mutation_ends_in_one_clean_line(scratch: Path) -> None:
    cases = all_cases()
    outcomes = [check(scratch, c) for c in cases]
    print(f"{len(cases)} mutated inputs: {outcomes.count('clean')} clean errors, {outcomes.count('ok')} valid runs")


def test_the_unmutated_files_run(scratch: Path) -> None:
    assert check(scratch, Case("experiment", "unchanged", yaml.safe_dump(EXPERIMENT).encode())) == "ok"
    assert check(scratch, Case("trace.jsonl", "unchanged", TRACE_JSONL.encode())) == "ok"


FOUND = (  # what the generated inputs found before the loaders were fixed: a traceback, a hang, or the wrong name
    ("experiment", "raw binary"), ("experiment", "deployment = ''"), ("experiment", "seed = -1"),
    ("experiment", "samples = 1000000000000000000000000000000"), ("experiment", "hardware = 'abc'"),
    ("experiment", "benchmark = 'abc'"), ("deployment", "software = 'abc'"),
    ("deployment", "max_batch_size = 1000000000000000000000000000000"), ("system", "id = 'abc'"),
    ("system", "gpu = 'abc'"), ("system", "nvlink = 'abc'"), ("system", "gpus = 0"),
    ("system", "gpus = 1000000000000000000000000000000"), ("gpu", "dense_tflops.fp8.value = 0"),
    ("gpu", "hbm_capacity_gib.value = 1e+300"), ("gpu", "hbm_capacity_gib.value = nan"),
    ("gpu", "hbm_bandwidth_tbps.value = 0"), ("model", "num_layers = 0"), ("model", "hidden_size = -1000000000.0"),
    ("model", "vocab_size = 1000000000000000000000000000000"), ("trace.csv", "line 2 column 0 = 1e400"),
    ("trace.csv", "line 3 column 1 = 99999999999999999999"), ("trace.jsonl", "line 2 column 2 = 99999999999999999999"),
)


@pytest.mark.parametrize(("kind", "how"), FOUND)
def test_inputs_that_once_failed_uncleanly(scratch: Path, kind: str, how: str) -> None:
    case = next(c for c in all_cases() if (c.kind, c.how) == (kind, how))
    assert check(scratch, case) == "clean"
