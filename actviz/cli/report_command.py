"""``actviz report``: one self-contained HTML report, from a session file (its saved capture, else
its model run again) or from a model and input with ``actviz export``'s options."""

from __future__ import annotations

import argparse
from typing import Any

from actviz.cli import command_kit as kit


def add_parser(sub: Any, add_model_args: kit.ModelArgs) -> None:
    """Add the ``report`` sub-command to the ``actviz`` parser."""
    p = sub.add_parser(
        "report",
        help="write one self-contained HTML report (from a session file, or a model and input)",
    )
    add_model_args(p, False)
    p.add_argument(
        "--session",
        "-s",
        help="a session file (.actviz); --model then says where its checkpoint is now",
    )
    kit.add_run_args(
        p,
        "image, tensor file, random:NxCxHxW, or text:WORDS (without --session)",
        "the HTML file to write",
        "class index or class name (as actviz export)",
        required=False,
    )


def run(args: argparse.Namespace, open_model: kit.Opener, progress: kit.Say) -> int:
    """Run ``actviz report``; ``progress`` writes a line to stderr, the result goes to stdout."""
    from actviz.io.errors import ActvizError
    from actviz.io.export.report import write_report
    from actviz.io.files import check_out_file

    check_out_file(args.out)  # before any model runs
    if args.session:
        cap, what = _from_session(args, progress)
    elif args.model and args.input:
        cap, what = kit.capture_run(args, open_model(args), None, progress)
    else:
        raise ActvizError("actviz report needs --session FILE, or --model and --input")
    info = write_report(cap, args.out, progress=kit.page_progress(progress), **what)
    print(f"wrote {info.path} ({info.nbytes / 2**20:.1f} MiB, {len(info.panels)} pictures)")
    return 0


def _from_session(args: argparse.Namespace, progress: kit.Say) -> tuple[Any, dict]:
    import actviz
    from actviz.core.edit_kinds import enabled_edits
    from actviz.io.errors import ActvizError
    from actviz.io.export.reproduce import RunSource
    from actviz.workspace.session_file import load_state, open_model_source, verify_model_source

    state = load_state(args.session)
    asked = kit.layer_names(args.layers or None)
    notes = list(state.warnings)
    cap = state.capture
    edits = enabled_edits(state.edits)
    loaded = None
    # Opened only when the saved capture is not enough: none, or edits needing the unedited run.
    if state.model is not None and (cap is None or edits or asked):
        if (check := verify_model_source(state, args.model)).status == "missing":
            if cap is None:
                raise ActvizError(f"{check.message} (pass --model PATH)")
            notes.append(f"{check.message}; the report shows the saved run only")
        else:
            if check.status == "changed":
                progress(f"warning: {check.message}")
                notes.append(check.message)
            loaded = open_model_source(state, args.model, trust=args.trust, device=args.device)
    if cap is None or (loaded is not None and asked):
        if loaded is None or state.input is None:
            raise ActvizError(
                f"{args.session}: the session holds no saved run, and no model and input to run"
            )
        layers = asked or list(state.ticked) or None
        progress(f"capturing {state.input.description or 'the session input'} ...")
        cap = actviz.capture(
            loaded.model,
            state.input.value,
            layers,
            target=state.target,
            edits=edits or None,
            gradients=not args.no_gradients,
        )
    baseline = None
    if cap.edits and loaded is not None and state.input is not None:
        baseline = actviz.capture(loaded.model, state.input.value, cap.names, target=state.target)
    setup, comparison, label = state.comparison or {}, None, ""
    runs = {"current": cap, **{p.label: p.capture for p in state.pins}}
    if runs.get(setup.get("a")) is not None and runs.get(setup.get("b")) is not None:
        from actviz.core.compare import compare

        comparison = compare(runs[setup["a"]], runs[setup["b"]], tol=float(setup.get("tol", 1e-4)))
        label = f"Run A ({setup['a']}) against run B ({setup['b']})."
    src = state.model
    source = None
    if src is not None:
        source = RunSource(
            model=src.source,
            arch=src.arch,
            weights=src.weights,
            trust=src.trust,  # the script says so; whoever runs it decides
            device=args.device,
            input=None,  # the session's input is embedded: the script loads saved tensors
            list_input=state.input_as_list,
            target=state.target,
            state=state.model_weights,
        )
    names = [n for n in (asked or state.ticked or cap.names) if n in cap]
    inp = state.input
    return cap, dict(
        image=None if inp is None else inp.image,
        categories=state.categories or (None if loaded is None else loaded.categories),
        model_name=src.name or src.source if src is not None else "",
        model=None if loaded is None else loaded.model,
        input_name="" if inp is None else (inp.source or inp.description),
        cmap=args.cmap or state.colormap,
        normalize=args.normalize or state.normalize,
        gradcam_layer=args.gradcam_layer or state.gradcam_layer,
        layers=names,
        source=source,
        baseline=baseline,
        comparison=comparison,
        comparison_label=label,
        tokens=None if inp is None else inp.tokens,
        tokenizer=None if loaded is None else getattr(loaded, "tokenizer", None),
        notes=notes,
        title=f"actviz report: {args.session}",
    )
