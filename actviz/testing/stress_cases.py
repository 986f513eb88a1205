"""Stress cases, each in a process of its own (a segfault is a crash, a silent GUI thread a hang);
a failure is shrunk to its shortest action list::

    python -m actviz.testing.stress_cases --case resnet18 --seed 3 --actions 300 --shrink"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import importlib
import importlib.util
import json
import math
import os
import pkgutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from actviz.core.openmp import use_app_openmp
from actviz.testing.stress_report import Failure, StressReport

CASES = ("demo", "resnet18", "gpt2", "checkpoint")  #: The cases, in the order the bench runs them.
HANG_S = 30.0  #: A GUI thread that serves no event for this long is a hang (s).
Step = tuple[str, dict[str, Any]]


def _resnet18() -> Any:
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval()


def save_checkpoint(folder: Path) -> Path:
    """A random ResNet-18's ``state_dict`` saved as a user's checkpoint (``.pt``)."""
    path = folder / "my_resnet18.pt"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(_resnet18().state_dict(), path)
    return path


def save_tiny_gpt2(folder: Path) -> Path:
    """A 2-layer GPT-2 (width 16, random weights) and a word-level tokenizer, written with
    ``save_pretrained``: a Hugging Face model folder."""
    if (folder / "config.json").exists():
        return folder
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    words = "the cat sat on a mat and a dog ran in the park with red ball".split()
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]"])
    tok.train_from_iterator([" ".join(words)], trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]"
    )
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(fast), n_positions=32, n_embd=16, n_layer=2, n_head=2,
        bos_token_id=None, eos_token_id=None,
    )  # fmt: skip
    transformers.GPT2LMHeadModel(config).eval().save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def first_use_modules() -> list[str]:
    """What the window imports when a feature is first used: every actviz module but the
    benchmarks, and timm (the architecture guess) when installed."""
    import actviz

    found = (info.name for info in pkgutil.walk_packages(actviz.__path__, "actviz."))
    names = [n for n in found if not n.startswith("actviz.bench") and not n.endswith("__main__")]
    return names + (["timm"] if importlib.util.find_spec("timm") is not None else [])


def case_setups(case: str, folder: Path) -> tuple[Any, dict[str, Any], Any]:
    """The model ``case`` opens with, the models a switch opens (by name) and the
    checkpoint the Open model dialog is given (a dropped model's setup: its file)."""
    from actviz.testing.stress import demo_model, dropped_model, module_model

    models = folder / "models"
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    gpt2, checkpoint = models / "tiny-gpt2", models / "my_resnet18.pt"
    # Files and models are made when first opened (ModelSetup.prepare), not all up front.
    made = {
        "demo": demo_model(),
        "resnet18": module_model("resnet18", _resnet18, x),
        "gpt2": dropped_model("gpt2", gpt2, lambda: save_tiny_gpt2(gpt2)),
        "checkpoint": dropped_model("checkpoint", checkpoint, lambda: save_checkpoint(models)),
    }
    if case not in made:
        raise ValueError(f"unknown stress case {case!r} ({', '.join(CASES)})")
    return made[case], made, made["checkpoint"]


def child(spec: dict[str, Any]) -> int:
    """Run one case in this process as :func:`run_case` wrote ``spec``; write its report."""
    faulthandler.enable(all_threads=True)
    os.environ.setdefault("ACTVIZ_OFFLINE", "1")
    torch.set_num_threads(spec["threads"])
    from actviz.bench.ui_bench import ensure_qt_app
    from actviz.core.allocator import tune_allocator
    from actviz.core.threads import parallel_in_workers_only
    from actviz.ui.worker import keep_collector_off_clicks

    # The process as ui/explore.py's run_app sets up its own: allocator, threads, idle collections.
    tune_allocator()
    parallel_in_workers_only()
    keep_collector_off_clicks()
    import PIL.Image

    from actviz.testing.stress import StressDriver
    from actviz.testing.stress_report import WARM_UP_ACTIONS

    ensure_qt_app()
    folder = Path(spec["folder"])
    setup, switches, checkpoint = case_setups(spec["case"], folder)
    driver = StressDriver(
        setup, folder=folder / "scratch", switches=switches, checkpoint=checkpoint, **spec["driver"]
    )
    if spec["actions"] > WARM_UP_ACTIONS:  # memory figures count after it: nothing made later
        for made in (*switches.values(), checkpoint):
            driver.ready(made)
        # And what a first use imports (Pillow's plugins too): later it would read as growth.
        PIL.Image.init()
        for name in first_use_modules():
            importlib.import_module(name)
    inject = {int(step): {"kind": kind} for step, kind in spec["inject"].items()}
    report = driver.run(spec["actions"], steps=spec["steps"], inject=inject)
    Path(spec["out"]).write_text(json.dumps(report.to_json()))
    return 0


def run_case(
    case: str,
    seed: int = 0,
    actions: int = 100,
    *,
    steps: Sequence[Step] | None = None,
    inject: dict[int, str] | None = None,
    hang_s: float = HANG_S,
    block_limit_ms: float = 100.0,
    timeout_s: float | None = None,
    sample_every: int | None = None,
    threads: int = 2,
    folder: str | Path | None = None,
    memory: bool = True,
) -> StressReport:
    """Run a case (or replay ``steps``) in a child process and return its report; a crash or
    a hang is in its ``crashes`` / ``hangs`` with the stack and the steps logged before it.
    ``memory=False``: no memory figures at the checkpoints (a replay looking for a finding)."""
    n = len(steps) if steps is not None else actions
    with tempfile.TemporaryDirectory(prefix="actviz-stress-") as tmp:
        work = Path(folder) if folder is not None else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=tmp))
        out, log, err = run_dir / "report.json", run_dir / "steps.jsonl", run_dir / "stderr.txt"
        every = sample_every or max(10, min(250, n // 10 or 1))
        spec = {
            "case": case,
            "actions": n,
            "folder": str(work),
            "out": str(out),
            "threads": threads,
            "steps": None if steps is None else [list(s) for s in steps],
            "inject": inject or {},
            "driver": {
                "seed": seed,
                "sample_every": every,
                "block_limit_ms": block_limit_ms,
                "hang_s": hang_s,
                "log_path": str(log),
                "memory": memory,
            },
        }
        (case_file := run_dir / "case.json").write_text(json.dumps(spec))
        cmd = [sys.executable, "-m", "actviz.testing.stress_cases", "--child", str(case_file)]
        # The child imports this very actviz (a checkout need not be the one installed).
        root = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "ACTVIZ_OFFLINE": "1", "PYTHONPATH": path}
        use_app_openmp(env)  # as the app's process, before torch loads (core/openmp.py)
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
        limit = timeout_s if timeout_s is not None else 120 + 10.0 * n + hang_s
        started = time.perf_counter()
        killed = False
        with err.open("w") as stderr:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
            try:
                code = proc.wait(limit)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
                killed = True
        if code == 0 and out.exists():
            return StressReport.from_json(json.loads(out.read_text()))
        return _died(case, seed, code, killed, err.read_text(), _logged(log), started)


def _logged(log: Path) -> list[tuple[str, dict[str, Any], str]]:
    """The steps a child logged: per step its last entry (name, params, text)."""
    by_step: dict[int, tuple[str, dict[str, Any], str]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:  # the line being written when it died
                continue
            by_step[entry["i"]] = (entry["name"], entry["params"], entry.get("text", ""))
    return [by_step[i] for i in sorted(by_step)]


def _died(
    case: str, seed: int, code: int, killed: bool, stderr: str, logged: list, started: float
) -> StressReport:
    """The report of a child that did not finish: a crash, a hang or an error."""
    steps = tuple((name, params) for name, params, _ in logged)
    recent = tuple(
        f"{i}:{text or name + ' (in flight)'}" for i, (name, _p, text) in enumerate(logged, start=1)
    )[-12:]
    if killed or "Timeout (" in stderr:
        field, kind, what = "hangs", "hang", "the GUI did not return"
    elif code < 0 or "Fatal Python error" in stderr:
        field, kind, what = "crashes", "crash", "the process died"
    else:
        field, kind, what = "exceptions", "exception", "the case failed"
    failure = Failure(len(logged), kind, f"{what} (exit {code})\n{_stack(stderr)}", recent)
    return StressReport(
        case, seed, len(logged), seconds=time.perf_counter() - started, steps=steps,
        **{field: (failure,)},
    )  # fmt: skip


def _stack(stderr: str, limit: int = 6000) -> str:
    """A child's stderr from faulthandler's report (or last traceback) on, cut to ``limit``."""
    for marker in ("Fatal Python error", "Timeout (", "Traceback (most recent call last)"):
        at = stderr.rfind(marker) if marker.startswith("Traceback") else stderr.find(marker)
        if at >= 0:
            return stderr[at : at + limit]
    return stderr[-limit:]


def finding_key(f: Failure) -> str:
    """What makes two findings the same failure: the kind, and an exception's type."""
    if f.kind == "exception":
        lines = [ln for ln in f.text.strip().splitlines() if ln.strip()]
        last = next((ln for ln in reversed(lines) if not ln.startswith(" ")), "")
        return f"exception {last.split(':')[0]}"
    return f.kind


def shrink(
    steps: Sequence[Step], fails: Callable[[list[Step]], bool], *, max_runs: int = 40
) -> tuple[list[Step], int]:
    """The shortest sub-list of ``steps`` found for which ``fails`` still holds (delta
    debugging: drop chunks of halving size, keep a shorter list whenever it still fails);
    returns it and how many lists were tried (at most ``max_runs``)."""
    steps = list(steps)
    n, runs = 2, 0
    while len(steps) >= 2 and runs < max_runs:
        size = math.ceil(len(steps) / n)
        reduced = False
        for start in range(0, len(steps), size):
            if not (rest := steps[:start] + steps[start + size :]):
                continue
            runs += 1
            if fails(rest):
                steps, n, reduced = rest, max(n - 1, 2), True
                break
            if runs >= max_runs:
                break
        if not reduced:
            if n >= len(steps):
                break
            n = min(len(steps), 2 * n)
    return steps, runs


def shrink_failure(
    report: StressReport,
    failure: Failure,
    replay: Callable[[list[Step]], StressReport],
    *,
    max_runs: int = 40,
) -> tuple[list[Step], int]:
    """Shrink the steps of ``report`` to the shortest list whose replay still shows a
    finding like ``failure`` (:func:`finding_key`); the steps after it are dropped first."""
    key = finding_key(failure)
    steps = list(report.steps[: max(1, failure.action)])

    def fails(candidate: list[Step]) -> bool:
        return any(finding_key(f) == key for f in replay(candidate).findings())

    return shrink(steps, fails, max_runs=max_runs)


def main(argv: list[str] | None = None) -> int:
    """``python -m actviz.testing.stress_cases --case NAME [--seed S] [--actions N] [--shrink]``:
    run a case in a child process, print what it found, and shrink the first failure."""
    parser = argparse.ArgumentParser(prog="python -m actviz.testing.stress_cases")
    parser.add_argument("--case", default="demo", choices=CASES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--actions", type=int, default=300)
    parser.add_argument("--hang-s", type=float, default=HANG_S)
    parser.add_argument("--block-limit-ms", type=float, default=100.0)
    parser.add_argument("--sample-every", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--replay", help="a JSON list of [name, params] steps to replay")
    parser.add_argument("--inject", action="append", help="STEP:KIND (exception, crash, hang)")
    parser.add_argument("--shrink", action="store_true", help="shrink the first failure")
    parser.add_argument("--shrink-runs", type=int, default=30)
    parser.add_argument("--no-memory", action="store_true", help="no memory figures (replays)")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # the case file run_case wrote
    args = parser.parse_args(argv)
    if args.child:
        return child(json.loads(Path(args.child).read_text()))
    steps = [(n, p) for n, p in json.loads(Path(args.replay).read_text())] if args.replay else None
    inject = {int(k): v for k, v in (item.split(":") for item in args.inject or [])}
    with tempfile.TemporaryDirectory(prefix="actviz-stress-") as folder:
        case = functools.partial(
            run_case, args.case, args.seed, hang_s=args.hang_s, folder=folder,
            block_limit_ms=args.block_limit_ms, threads=args.threads,
        )  # fmt: skip
        report = case(
            args.actions, steps=steps, inject=inject, sample_every=args.sample_every,
            memory=not args.no_memory,
        )  # fmt: skip
        print(report.describe())
        print(
            f"rss growth per 1k actions: {report.rss_growth_per_1k_mib:.1f} MiB (median slope; "
            f"least squares {report.rss_growth_per_1k_ls_mib:.1f})"
        )
        ratio = report.samples[-1].rss_anon_over_heap if report.samples else None
        if ratio is not None:
            print(f"RssAnon over heaps in use at the end: {ratio:.2f}")
        found = [f for f in report.findings() if f.kind not in ("block",)] or report.findings()
        if args.shrink and found:
            shrunk, runs = shrink_failure(
                report, found[0], lambda c: case(steps=c, memory=False), max_runs=args.shrink_runs
            )
            print(f"shrunk {found[0].kind} to {len(shrunk)} steps in {runs} replays:")
            print(json.dumps([list(s) for s in shrunk], indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
