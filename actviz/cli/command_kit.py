"""What the ``actviz`` commands share: common options, argument checks, progress lines; nothing
heavy imported at module level, so the commands build their parsers without torch."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

#: Writes one progress line to stderr.
Say = Callable[[str], None]
#: The CLI's model opener (prints what it opens).
Opener = Callable[[argparse.Namespace], Any]
#: What adds the model options to a command's parser: ``add_model_args(parser, required)``.
ModelArgs = Callable[[argparse.ArgumentParser, bool], None]
#: ``--layers`` as the commands with every leaf by default take it.
LAYERS_HELP = "comma-separated layer names (default: every leaf)"


def add_data_args(p: argparse.ArgumentParser, *, data: bool = True, workers: bool = True) -> None:
    """``--data``, and ``--batch-size`` and ``--workers`` (as scan and atlas take them)."""
    if data:
        p.add_argument("--data", "-d", required=True, help="folder of images, or .pt/.npy samples")
    if workers:
        p.add_argument("--batch-size", type=int, help="images per batch (default: memory budget)")
        p.add_argument("--workers", type=int, help="DataLoader worker processes (default 2)")


def add_list_input(p: argparse.ArgumentParser) -> None:
    """``--list-input`` / ``--no-list-input``, as every command running a model takes it."""
    p.add_argument(
        "--list-input",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="give the model a list of (C, H, W) images, as detection models take "
        "(default: when the model's forward is annotated to take a list)",
    )


def add_run_args(
    p: argparse.ArgumentParser, inputs: str, out: str, target: str, required: bool = True
) -> None:
    """The options of a model run and its pictures, as export and report take them: ``inputs``,
    ``out`` and ``target`` are their flags' help."""
    p.add_argument("--input", "-i", required=required, help=inputs)
    p.add_argument("--layers", "-l", help=LAYERS_HELP)
    p.add_argument("--out", "-o", required=True, help=out)
    p.add_argument("--target", "-t", help=target)
    add_list_input(p)
    p.add_argument("--gradcam-layer", help="layer for Grad-CAM (default: last spatial layer)")
    p.add_argument("--cmap", help="the feature maps' colour map (default: viridis, or a session's)")
    p.add_argument(
        "--normalize",
        choices=("channel", "shared"),
        help="feature-map mosaics: each tile its own min..max (channel, default) or one range",
    )
    p.add_argument("--no-gradients", action="store_true", help="forward only")


def layer_names(text: str | None) -> list[str] | None:
    """``"a, b,"`` -> ``["a", "b"]``; None for no ``--layers``."""
    return [s.strip() for s in text.split(",") if s.strip()] if text is not None else None


def existing(text: str) -> Path:
    """``--data``: the folder or file, which must exist."""
    if not Path(text).exists():
        from actviz.io.errors import InputError

        raise InputError(f"{text}: no such folder or file")
    return Path(text)


def target_arg(text: str | None, loaded: Any) -> int | None:
    """``--target`` read against the model's categories (and tokenizer)."""
    from actviz.core.targets import parse_target
    from actviz.io.errors import InputError

    try:
        return parse_target(text, loaded.categories, getattr(loaded, "tokenizer", None))
    except ValueError as exc:
        raise InputError(f"--target: {exc}") from None


def budget_arg(text: str, least: int = 1) -> int:
    """``--memory-budget`` in bytes, at least ``least``."""
    from actviz.io.errors import InputError
    from actviz.workspace.budget import parse_bytes

    try:
        value = parse_bytes(text)
    except ValueError as exc:
        raise InputError(f"--memory-budget: {exc}") from None
    if value < least:
        raise InputError(f"--memory-budget: at least {least >> 10}KiB, got {text!r}")
    return value


def capture_run(args: argparse.Namespace, loaded: Any, inp: Any, say: Say) -> tuple[Any, dict]:
    """Export's and report's run of ``inp`` (None: ``--input`` opened here): its capture
    (``--layers``, a text input's embedding added where its saliency is read; ``--target``,
    ``--no-gradients``) and what its pictures are drawn with (the input, names, ``args``' picture
    options and the script that runs it again)."""
    import actviz
    from actviz.io.export.capture_export import with_input_embedding
    from actviz.io.export.reproduce import args_source
    from actviz.io.input_files import open_input

    inp = inp or open_input(args.input, loaded_model=loaded, as_list=args.list_input)
    layers = layer_names(args.layers or None)
    target = target_arg(args.target, loaded)
    say(f"capturing {inp.description} ...")
    captured = with_input_embedding(loaded.model, inp.value, layers)
    gradients = not args.no_gradients
    cap = actviz.capture(loaded.model, inp.value, captured, target=target, gradients=gradients)
    say(f"captured {len(cap.names)} layers in {cap.elapsed_s:.2f} s ({cap.nbytes / 2**20:.1f} MiB)")
    say_each(say, cap.warnings)
    return cap, dict(
        image=inp.image,
        categories=loaded.categories,
        model_name=loaded.name,
        model=loaded.model,
        input_name=str(args.input),
        cmap=args.cmap or "viridis",
        normalize=args.normalize or "channel",
        gradcam_layer=args.gradcam_layer,
        layers=layers,
        source=args_source(loaded, args, str(args.input), target),
        tokens=getattr(inp, "tokens", None),
        tokenizer=getattr(loaded, "tokenizer", None),
    )


def page_progress(say: Say, verb: str = "") -> Callable[[int, int, str], None]:
    """A writer's ``progress(done, total, what)``: ``[3/10] <verb>layer1`` until done."""

    def progress(done: int, total: int, what: str) -> None:
        if done < total:
            say(f"[{done + 1}/{total}] {verb}{what or '(model)'}")

    return progress


def say_each(say: Say, lines: Iterable[Any], prefix: str = "warning: ") -> None:
    for line in lines:
        say(f"{prefix}{line}")


class Throttle:
    """Lets a progress line through once a second (and always a ``final`` one)."""

    def __init__(self, say: Say) -> None:
        self.say, self.last = say, 0.0

    def __call__(self, text: str, final: bool = False) -> None:
        now = time.perf_counter()
        if final or now - self.last >= 1.0:
            self.last = now
            self.say(text)


def scan_progress(say: Say, where: str = "") -> Callable[[int, int, float], None]:
    """A scan's ``progress(done, total, rate)``: a line a second, with the time left."""
    throttle = Throttle(say)

    def progress(done: int, total: int, rate: float) -> None:
        eta = f", {(total - done) / rate:.0f} s left" if rate > 0 and done < total else ""
        throttle(f"scanned {done}/{total} images{where} ({rate:.0f} images/s{eta})", done >= total)

    return progress


def report_scan(result: Any, say: Say) -> None:
    """Say where a scan came from, its warnings and the items it skipped."""
    if result.from_cache:
        say(f"from the cache: {result.cache_path}")
    say_each(say, result.warnings)
    say_each(say, (f"{source}: {reason}" for source, reason in result.skipped), "skipped ")
