"""The ``actviz`` command: ``gui`` (default), ``info``, ``export``, ``scan``, ``bench``, ...
Errors print one line and exit non-zero (``--debug``: the traceback); progress goes to stderr."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from actviz.cli import command_kit as kit
from actviz.display.text import format_count

EXIT_ERROR = 2
_BUILTIN_COMMANDS = ("gui", "info", "export", "compare", "bench")
#: Commands in ``actviz.cli.<name>_command``: ``add_parser(sub, add_model_args)``, ``run(args,
#: open_model, progress) -> int``; imported to build the parser, so torch is imported in ``run``.
_FEATURE_COMMANDS = {
    name: f"actviz.cli.{name}_command"
    for name in ("scan", "visualize", "effects", "atlas", "report", "concepts")
}
_COMMANDS = (*_BUILTIN_COMMANDS, *_FEATURE_COMMANDS)


def _add_model_args(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument(
        "--model",
        "-m",
        required=required,
        help="torchvision name (resnet18), timm:NAME, Hugging Face model folder (or a hub id "
        "already in the local cache), checkpoint / TorchScript / .pt2 / .safetensors file, "
        "file.py:Class, package.module:factory, or 'demo'",
    )
    p.add_argument(
        "--arch",
        help="architecture for a bare state_dict (torchvision name, timm:NAME or file.py:Class)",
    )
    p.add_argument(
        "--weights",
        default="DEFAULT",
        help="torchvision weights: DEFAULT (pretrained when cached or downloadable), none, or a "
        "weights name",
    )
    p.add_argument(
        "--trust",
        action="store_true",
        help="allow opening a full pickle or a model folder's own code (runs code stored with "
        "it: only for files you trust)",
    )
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, mps")
    p.add_argument(
        "--device-map",
        help="place a model larger than one device with accelerate (pip install "
        "'actviz[big]'): auto, balanced or sequential",
    )
    p.add_argument("--max-memory", help="with --device-map: per device, e.g. 0:10GiB,cpu:30GiB")
    p.add_argument("--offload-folder", help="with --device-map: folder for weights sent to disk")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actviz",
        description="Desktop activation explorer for PyTorch. With no command, opens the window "
        "(on the bundled demo model when no --model is given).",
    )
    parser.add_argument("--debug", action="store_true", help="show full tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command")

    gui = sub.add_parser("gui", help="open the explorer window (default)")
    _add_model_args(gui, required=False)
    gui.add_argument(
        "--input", "-i", help="image, tensor file (.pt/.npy/.npz) or random:1x3x224x224"
    )
    gui.add_argument("session", nargs="?", help="a session file (.actviz), else a model or input")
    gui.add_argument(
        "--no-plugins", action="store_true", help="start without the installed plugins"
    )

    info = sub.add_parser("info", help="print the module tree")
    _add_model_args(info, required=True)
    info.add_argument(
        "--input", "-i", help="also run it (any --input of export) and print each output shape"
    )
    kit.add_list_input(info)

    exp = sub.add_parser("export", help="write feature maps, gradients, saliency, Grad-CAM, arrays")
    _add_model_args(exp, required=True)
    kit.add_run_args(
        exp,
        "image, tensor file, random:NxCxHxW, or text:WORDS for a model with a tokenizer",
        "output folder",
        "class index or class name; for a detector, a detection index ('detection 2'); for "
        "a language model, a token id or text (default: top-1 class, top detection, a "
        "segmenter's top class, or the next token)",
    )
    exp.add_argument(
        "--plugin-views",
        help="comma-separated layer views of plugins to write (default: every installed one)",
    )
    exp.add_argument("--no-plugins", action="store_true", help="use no installed plugin")

    cmp = sub.add_parser("compare", help="compare two runs layer by layer: compare.json, PNGs")
    _add_model_args(cmp, required=True)
    cmp.add_argument("--model-b", help="run B's model (default: --model), same architecture")
    cmp.add_argument("--input", "-i", required=True, help="image, tensor file or random:NxCxHxW")
    cmp.add_argument("--input-b", help="run B's input (default: --input)")
    cmp.add_argument("--layers", "-l", help=kit.LAYERS_HELP)
    cmp.add_argument("--out", "-o", required=True, help="output folder")
    cmp.add_argument("--tol", type=float, default=1e-4, help="first divergence: rel. L2 above")
    cmp.add_argument("--target", "-t", help="class index or name for the predictions' row")
    cmp.add_argument("--normalize", choices=("channel", "shared"), default="channel")
    kit.add_list_input(cmp)
    for module in _feature_modules().values():
        module.add_parser(sub, _add_model_args)

    bench = sub.add_parser("bench", help="run the benchmark suite (python -m actviz.bench)")
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    return parser


def _feature_modules() -> dict[str, Any]:
    """The feature command modules that exist in this install, by command name."""
    found = {}
    for name, module in _FEATURE_COMMANDS.items():
        try:
            found[name] = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    return found


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _open(args: argparse.Namespace, plugins: Any = None) -> Any:
    from actviz.core.threads import reporting
    from actviz.io.errors import ArchitectureNeededError
    from actviz.io.models.big import parse_max_memory
    from actviz.io.models.loading import open_model

    t0 = time.perf_counter()
    _progress(f"opening {args.model} ...")
    # A plugin's model opener first (export): None when none opens this source.
    loaded = plugins.open_model(args.model, trust=args.trust) if plugins is not None else None
    guessing: list[str] = []  # said once: a first guess builds some fifty architectures

    def guess_said(_text: str) -> None:
        if not guessing:
            guessing.append(_text)
            _progress("guessing the architecture from the weights (kept for next time) ...")

    try:
        with reporting(guess_said):
            loaded = loaded or open_model(
                args.model,
                arch=args.arch,
                weights=args.weights,  # none/random: random init
                trust=args.trust,
                device=args.device,
                device_map=getattr(args, "device_map", None),
                max_memory=parse_max_memory(getattr(args, "max_memory", None)),
                offload_folder=getattr(args, "offload_folder", None),
            )
    except ArchitectureNeededError as exc:
        _print_arch_guesses(exc.candidates)
        raise
    if loaded.arch_guesses:
        _print_arch_guesses(loaded.arch_guesses)
        name = loaded.arch_guesses[0].name
        _progress(f"architecture guessed: {name}; pass --arch to choose another")
    _progress(f"opened {loaded.name} ({loaded.kind}) in {time.perf_counter() - t0:.1f} s")
    kit.say_each(_progress, loaded.warnings)
    return loaded


def _print_arch_guesses(guesses: Sequence[Any]) -> None:
    if guesses:
        _progress("architectures matching the weights:")
    kit.say_each(_progress, [guess.describe() for guess in guesses], "  ")


def cmd_info(args: argparse.Namespace) -> int:
    import actviz

    loaded = _open(args)
    cap = None
    if args.input:
        from actviz.io.input_files import open_input

        inp = open_input(args.input, loaded_model=loaded, as_list=args.list_input)
        _progress(f"running {inp.description} ...")
        every = [name for name, _ in loaded.model.named_modules()]
        cap = actviz.capture(loaded.model, inp.value, every, gradients=False, keep_inputs=False)
        kit.say_each(_progress, cap.warnings)
    tree = actviz.module_tree(loaded.model, cap)
    rows = []
    for node in tree:
        label = "  " * node.depth + (node.short_name if node.name else loaded.name)
        shape = "" if node.output_shape is None else "x".join(str(s) for s in node.output_shape)
        if node.calls > 1:
            shape += f" ({node.calls} calls)"
        params = format_count(node.total_params) if not node.is_leaf or node.own_params else "-"
        rows.append((label, node.type_name, params, node.name or "(model)", shape))
    header = ("module", "type", "params", "qualified name", "output" if cap is not None else "")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for row in [header, *rows]:
        cells = [f"{c:{a}{w}}" for c, a, w in zip(row, "<<><<", widths, strict=True)]
        print("  ".join(cells).rstrip())
    total = tree.root.total_params
    trainable = sum(p.numel() for p in loaded.model.parameters() if p.requires_grad)
    print(
        f"{len(tree)} modules, {len(tree.leaves())} leaves, {total:,} parameters ({trainable:,} trainable)"
    )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from actviz.io.export.capture_export import export_capture
    from actviz.io.files import check_out_folder
    from actviz.workspace.plugin_registry import installed_plugins

    check_out_folder(args.out)  # before the model runs
    # Plugins: their model and input openers, and their layer views' pictures.
    plugins = installed_plugins(off=args.no_plugins)
    kit.say_each(_progress, [r.error for r in plugins.records if r.status in ("failed", "refused")])
    loaded = _open(args, plugins)
    views = args.plugin_views.split(",") if args.plugin_views else None
    cap, pictures = kit.capture_run(args, loaded, plugins.open_input(args.input), _progress)
    files = export_capture(
        cap,
        args.out,
        progress=kit.page_progress(_progress, "writing "),
        layer_writers=plugins.export_writers(only=views),
        **pictures,
    )
    print(f"wrote {len(files)} files to {args.out}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """``actviz compare``: two runs layer by layer, ``compare.json``, PNGs, ``reproduce.py``."""
    import actviz
    from actviz.core.compare import compare
    from actviz.io.errors import ActvizError
    from actviz.io.export.capture_export import write_comparison
    from actviz.io.export.reproduce import args_source, write_compare_reproduce
    from actviz.io.input_files import open_input

    if not args.model_b and not args.input_b:
        raise ActvizError(
            "nothing to compare: give --model-b (a second checkpoint) and/or --input-b "
            "(a second input)"
        )
    if not 0 <= args.tol:
        raise ActvizError(f"--tol must be >= 0, not {args.tol}")
    loaded_a = _open(args)
    loaded_b = loaded_a
    if args.model_b:
        loaded_b = _open(argparse.Namespace(**{**vars(args), "model": args.model_b}))
    inp_a = open_input(args.input, loaded_model=loaded_a, as_list=args.list_input)
    inp_b = inp_a
    if args.input_b:
        inp_b = open_input(args.input_b, loaded_model=loaded_b, as_list=args.list_input)
    layers = kit.layer_names(args.layers or None)
    target = kit.target_arg(args.target, loaded_a)
    caps = []
    for tag, loaded, inp in (("A", loaded_a, inp_a), ("B", loaded_b, inp_b)):
        _progress(f"run {tag}: {loaded.name} on {inp.description} ...")
        try:
            cap = actviz.capture(
                loaded.model, inp.value, layers, target=target, gradients=False, keep_inputs=False
            )
        except ValueError as exc:
            raise ActvizError(f"run {tag}: {exc}") from None
        kit.say_each(_progress, cap.warnings, f"warning (run {tag}): ")
        caps.append(cap)
    comparison = compare(caps[0], caps[1], tol=args.tol)
    if not comparison.layers:
        raise ActvizError(
            "the runs share no layer with outputs of one shape: compare checkpoints of one "
            "architecture, inputs of one size"
        )
    runs = {
        "a": {"model": args.model, "input": args.input},
        "b": {"model": args.model_b or args.model, "input": args.input_b or args.input},
    }
    files = write_comparison(
        caps[0],
        caps[1],
        args.out,
        comparison=comparison,
        normalize=args.normalize,
        categories=loaded_a.categories,
        runs=runs,
    )
    sources = [
        args_source(loaded, args, inp_src)
        for loaded, inp_src in ((loaded_a, args.input), (loaded_b, args.input_b or args.input))
    ]
    if loaded_b is loaded_a:  # one model: opened once by the script
        sources[1] = dataclasses.replace(sources[1], state=sources[0].state)
    files += write_compare_reproduce(args.out, sources[0], sources[1], layers, args.tol)
    first = comparison.first_divergence
    where = "none" if first is None else f"{first.name} (rel. L2 {first.rel_l2:.3g})"
    print(
        f"compared {len(comparison.layers)} layer calls; first divergence > {args.tol:g}: {where}"
    )
    print(f"wrote {len(files)} files to {args.out}")
    return 0


def cmd_gui(args: argparse.Namespace) -> int:
    from actviz.core.openmp import use_app_openmp

    use_app_openmp()  # before torch loads (with the window below)
    from actviz.ui.explore import run_app

    given = {k: getattr(args, k, None) for k in ("model", "arch", "input", "session")}
    trust, plugins = getattr(args, "trust", False), not getattr(args, "no_plugins", False)
    return run_app(**given, trust=trust, plugins=plugins)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``actviz`` console script and ``python -m actviz``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Bare options (`actviz --model x`) mean the GUI, the default command.
    first_cmd = next((a for a in argv if not a.startswith("-")), None)
    if first_cmd not in _COMMANDS and not {"-h", "--help"} & set(argv):
        argv.insert(1 if argv[:1] == ["--debug"] else 0, "gui")
    if first_cmd == "bench" and not {"-h", "--help"} & set(argv[: argv.index("bench")]):
        # The rest is the suite's own (REMAINDER would not take a leading --quick).
        from actviz.bench.cli import main as bench_main

        return bench_main(argv[argv.index("bench") + 1 :])
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    commands = {"info": cmd_info, "export": cmd_export, "compare": cmd_compare}
    module = _feature_modules().get(args.command)
    try:
        if module is not None:
            return module.run(args, _open, _progress)
        return commands.get(args.command, cmd_gui)(args)
    except KeyboardInterrupt:
        print("actviz: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one readable line, the traceback on --debug
        if args.debug:
            traceback.print_exc()
        from actviz.io.errors import ActvizError

        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if not isinstance(exc, (ActvizError, ValueError)):
            text = f"{type(exc).__name__}: {text}"
        print(f"actviz: error: {text}", file=sys.stderr)
        return EXIT_ERROR
