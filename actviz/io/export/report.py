"""An HTML report of a run: one self-contained file anyone can open, without actviz or the model
(the export's PNGs, inline CSS, no script; its Content-Security-Policy forbids requests), and
its page (:class:`Page`): style, sections, tables and the panels of a run."""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import logging
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from actviz.core.records import Capture
from actviz.core.structures import describe
from actviz.io.export.capture_export import ProgressFn, prepare_export, write_sequence_views
from actviz.io.export.reproduce import RunSource, beside_script, reproduce_script
from actviz.io.export.typeset import attribution_images, layer_pictures, safe_name
from actviz.io.files import atomic_write, check_out_file

log = logging.getLogger(__name__)
#: The largest input tensors the report carries for reproduce.py (bytes, before base64).
CARRIED_INPUT_BYTES = 32 * 2**20
__all__ = ["ReportInfo", "png_bytes", "write_report", "write_result_report"]


@dataclass(frozen=True)
class ReportInfo:
    """What :func:`write_report` wrote: ``path``, its size ``nbytes``, and ``panels``, the
    ``(id, title)`` of every embedded picture in page order (``"features:<layer>"``, ...)."""

    path: Path
    nbytes: int
    panels: tuple[tuple[str, str], ...]


def write_report(
    cap: Capture,
    path: str | os.PathLike[str],
    *,
    model_name: str = "",
    model: Any = None,
    input_name: str = "",
    layers: Sequence[str] | None = None,
    source: RunSource | None = None,
    baseline: Capture | None = None,
    comparison: Any = None,
    comparison_label: str = "",
    scan_sheets: Mapping[str, Image.Image | np.ndarray | bytes] | None = None,
    figures: Sequence[tuple[str, Image.Image | np.ndarray | bytes]] = (),
    title: str = "",
    notes: Sequence[str] = (),
    progress: ProgressFn | None = None,
    **display: Any,
) -> ReportInfo:
    """Write one self-contained HTML report of ``cap`` to ``path`` (atomically).

    Parameters
    ----------
    model_name, input_name, layers, source
        As :func:`~actviz.io.export.capture_export.export_capture` takes them.
    model
        An ``nn.Module`` or ``LoadedModel`` for the summary and sequence views.
    baseline
        The unedited capture of the same input (before/after predictions).
    comparison, comparison_label
        A :class:`~actviz.core.compare.Comparison` with another run, and which runs.
    scan_sheets
        ``{layer: contact sheet}`` of a dataset scan.
    figures
        Further ``(title, picture)`` pairs (channel effects, visualisations).
    notes
        Lines shown under the title.
    progress
        Called as ``progress(done, total, what)``.
    display
        ``image``, ``categories``, ``cmap``, ``normalize``, ``gradcam_layer``, ``tokens``,
        ``tokenizer``, ``layout``, ``token_saliency``: as
        :func:`~actviz.io.export.capture_export.prepare_export` takes them."""
    out = Path(path)
    report = progress or (lambda _done, _total, _what: None)
    names = list(layers) if layers is not None else list(cap.names)
    module = getattr(model, "model", model)
    torch_module = module if isinstance(module, torch.nn.Module) else None
    # The input gradient, for saliency, re-taken when missing and reproducible.
    missing = cap.gradients and cap.input_grads is None and cap.inputs is not None
    if torch_module is not None and missing:
        from actviz.core.capture import capture
        from actviz.core.targets import fixed_default

        # A one-row classifier's class is an int target, chosen or auto; else the run's default.
        target = cap.target_index if fixed_default(cap.output) is not None else None
        try:
            again = capture(torch_module, cap.inputs, [], target=target, edits=cap.edits or None)
        except Exception:  # noqa: BLE001 - the report goes on without a saliency
            log.debug("no input gradient for the report's saliency", exc_info=True)
            again = cap  # no input gradient either
        if again.input_grads is not None and again.target_index == cap.target_index:
            cap = dataclasses.replace(cap, input_grads=again.input_grads)
    cap, prepared = prepare_export(cap, names, model=torch_module, **display)
    spec = prepared.spec
    cmap, normalize, image, categories = spec.colormap, spec.normalize, spec.image, spec.categories
    total = len(names) + 2
    page = Page()
    model_summary(page, cap, module, names, model_name)
    for line in notes:
        page.add(f'<p class="warn">{esc(line)}</p>')

    page.section("input", "Input")
    page.add(f"<p>{esc(input_name or '–')}</p>")
    if image is not None:
        page.figure(
            "input", image, f"the input as the model sees it ({image.shape[1]}×{image.shape[0]})"
        )
    page.add(f'<p class="muted">input shapes: {esc(describe(cap.inputs))}</p>')

    prediction_section(page, prepared, cap, baseline, categories)

    report(0, total, "saliency and Grad-CAM")
    pictures, attribution = attribution_images(cap, prepared, image, spec.gradcam_layer)
    if pictures or attribution.get("gradcam_error"):
        page.section("attribution", "Saliency and Grad-CAM")
        captions = {
            "saliency": attribution.get("saliency_of", "saliency |d target / d input|"),
            "gradcam": f"Grad-CAM at {attribution.get('gradcam_layer')}",
            "rollout": "attention rollout",
        }
        for key, (picture, _values) in pictures.items():
            page.figure(key, picture, captions[key])
        if attribution.get("gradcam_error"):
            page.add(f'<p class="warn">Grad-CAM: {esc(attribution["gradcam_error"])}</p>')

    page.section("layers", f"Layers ({len(names)})")
    page.add(
        '<p class="muted">Activations (each tile its own colour scale unless stated) and '
        "|d target / d output| per layer, as <code>actviz export</code> draws them.</p>"
        if names
        else no_layers_text(cap)
    )
    for i, name in enumerate(names):
        report(i + 1, total, name)
        rec = cap[name]
        layer = prepared.layers.get(name)
        anchor = anchor_id("layer", name)
        page.sub(anchor, name or "(model)")
        t = rec.tensor
        shape = shape_text(tuple(t.shape)) if t is not None else "no tensor output"
        meta = f"{rec.module_type} · {shape}"
        page.add(
            f'<details id="{esc(anchor)}" open><summary>{esc(name or "(model)")} '
            f'<span class="meta">{esc(meta)}</span></summary>'
        )
        for kind, what in (("features", "activations"), ("grad", "|gradient|")):
            for suffix, picture in layer_pictures(name, kind, layer, rec.grad, cmap, normalize):
                if not suffix.endswith("_1x"):
                    page.figure(
                        f"{kind}:{name}{suffix}", picture, f"{name or '(model)'} {what}{suffix}"
                    )
        if layer is None or (layer.view is None and rec.grad is None):
            page.add('<p class="muted">Nothing to draw for this output.</p>')
        page.add("</details>")

    sequence_views(page, prepared, names)
    stats_table(page, prepared, names, cap)
    if comparison is not None:
        comparison_section(page, comparison, comparison_label)
    if scan_sheets:
        page.section("scan", "Dataset scan: top-k images")
        for layer_name, sheet in scan_sheets.items():
            page.figure(f"scan:{layer_name}", sheet, f"{layer_name}: top images per channel")
    if figures:
        page.section("figures", "Further views")
        for i, (caption, picture) in enumerate(figures):
            page.figure(f"figure:{i}", picture, caption)

    page.section("edits", "Edits")
    if cap.edits:
        rows = [(esc(k), esc(e.describe())) for k, edits in cap.edits.items() for e in edits]
        page.add(html_table(("layer", "edit"), rows, left=2))
    else:
        page.add('<p class="muted">No edits: the model as it is.</p>')
    page.section("reproduce", "reproduce.py")
    page.add(
        "<p>The script <code>actviz export</code> writes beside its arrays; it rebuilds this run "
        "with actviz's public API.</p>"
    )
    saved = {key: name for key, name, _obj in beside_script(cap, source)}
    files = {name: f"{safe_name(name)}.npz" for name in names}
    page.add(f"<pre>{esc(reproduce_script(cap, source, names, files=files, saved=saved))}</pre>")
    if source is None or source.input is None:  # no file to reopen: the input travels here
        buf = io.BytesIO()
        try:
            torch.save(cap.inputs, buf)
        except Exception:  # noqa: BLE001 - an input torch cannot save: said, not carried
            buf = None
        if buf is None:
            page.add('<p class="warn">The input cannot be saved for reproduce.py.</p>')
        elif buf.tell() > CARRIED_INPUT_BYTES:
            page.add(
                '<p class="muted">The input is too large to carry here '
                f"({buf.tell() / 2**20:.0f} MiB): <code>actviz export</code> writes "
                "<code>reproduce_inputs.pt</code> beside the script.</p>"
            )
        else:
            data = base64.b64encode(buf.getvalue()).decode("ascii")
            page.add(
                '<p>The script reads the input from <a download="reproduce_inputs.pt" '
                f'href="data:application/octet-stream;base64,{data}">reproduce_inputs.pt</a>: '
                "save it beside the script.</p>"
            )

    report(total - 1, total, "writing")
    title = title or f"actviz report: {model_name or 'model'}"
    heads = (input_name, prepared.target_text or cap.target_description, f"{len(names)} layers")
    text = page.html(title, " · ".join(x for x in heads if x))
    check_out_file(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(out, "w", encoding="utf-8") as fh:
        fh.write(text)
    report(total, total, "done")
    return ReportInfo(out, out.stat().st_size, tuple(page.panels))


def write_result_report(result: Any, path: str | os.PathLike[str], **kwargs: Any) -> ReportInfo:
    """:func:`write_report` of a :class:`~actviz.display.prepared.RunResult` as the window shows it,
    ``kwargs`` adding or overriding its arguments; ``ValueError`` for a result without capture."""
    if result.capture is None:
        raise ValueError("this result holds no capture to report")
    spec = result.spec
    names = ("categories", "normalize", "gradcam_layer", "tokens", "tokenizer", "layout")
    args: dict[str, Any] = {k: getattr(spec, k) for k in names} | {"cmap": spec.colormap}
    args |= {k: getattr(result, k) for k in ("image", "baseline", "token_saliency")}
    args["layers"] = [n for n in (result.shown or spec.layers) if n in result.capture]
    return write_report(result.capture, path, **args | kwargs)


_CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1e1e1e;
  background: #f6f6f4; margin: 0; }
header { background: #20303c; color: #fff; padding: 14px 24px; }
header h1 { margin: 0; font-size: 20px; } header p { margin: 4px 0 0; color: #cfd8de; }
.page { display: flex; align-items: flex-start; }
nav { position: sticky; top: 0; max-height: 100vh; overflow-y: auto; width: 230px;
  flex: none; padding: 12px 10px 12px 18px; box-sizing: border-box; font-size: 13px; }
nav ol { padding-left: 18px; margin: 4px 0; } nav a { color: #20557a; text-decoration: none; }
main { flex: 1; min-width: 0; max-width: 1280px; padding: 8px 24px 40px 12px; }
section { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 10px 16px;
  margin: 12px 0; }
h2 { font-size: 17px; margin: 4px 0 10px; }
details { border-top: 1px solid #eee; padding: 6px 0; }
summary { cursor: pointer; font-weight: 600; } summary .meta { font-weight: 400; color: #666; }
figure { margin: 8px 0; display: inline-block; vertical-align: top; max-width: 100%; }
figure img { max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
figcaption { font-size: 12px; color: #666; }
table { border-collapse: collapse; font-size: 12.5px; margin: 6px 0; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 3px 8px; text-align: right; }
th { background: #f0f0ee; position: sticky; top: 0; }
td.l, th.l { text-align: left; } tr.hit td { background: #fff4d6; }
.bar { display: inline-block; height: 10px; background: #4a7fb0; vertical-align: middle; }
pre { background: #f4f4f2; padding: 10px; overflow-x: auto; font-size: 12px; max-height: 420px; }
.warn { color: #9a3a12; } .muted { color: #777; }
@media (max-width: 900px) { .page { display: block; } nav { position: static; width: auto; } }"""
#: Only embedded pictures and the inline style: a browser makes no request for this page.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def png_bytes(picture: Image.Image | np.ndarray) -> bytes:
    """A picture (PIL image or ``(H, W[, 3])`` uint8 array) as lossless PNG bytes."""
    if isinstance(picture, np.ndarray):
        picture = Image.fromarray(np.ascontiguousarray(picture))
    buf = io.BytesIO()
    picture.save(buf, format="PNG")
    return buf.getvalue()


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def num(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return str(int(v))
    try:
        f = float(v)
    except (TypeError, ValueError):
        return esc(v)
    if not math.isfinite(f):
        return str(f)
    return f"{f:.4g}" if abs(f) < 1e5 else f"{f:.3e}"


class Page:
    """The report's body as it is built: sections, the table of contents, the panels."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.toc: list[tuple[str, str, list[tuple[str, str]]]] = []
        self.panels: list[tuple[str, str]] = []

    def section(self, anchor: str, title: str) -> None:
        if self.toc:
            self.parts.append("</section>")
        self.toc.append((anchor, title, []))
        self.parts.append(f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>')

    def sub(self, anchor: str, title: str) -> None:
        self.toc[-1][2].append((anchor, title))

    def add(self, text: str) -> None:
        self.parts.append(text)

    def figure(self, panel: str, picture: Image.Image | np.ndarray | bytes, caption: str) -> None:
        data = picture if isinstance(picture, bytes) else png_bytes(picture)
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        self.panels.append((panel, caption))
        self.parts.append(
            f'<figure><img src="{uri}" alt="{esc(caption)}" data-panel="{esc(panel)}" '
            f"><figcaption>{esc(caption)}</figcaption></figure>"
        )

    def html(self, title: str, subtitle: str) -> str:
        toc = []
        for anchor, name, subs in self.toc:
            links = "".join(f'<li><a href="#{esc(a)}">{esc(n)}</a></li>' for a, n in subs)
            inner = f"<ol>{links}</ol>" if subs else ""
            toc.append(f'<li><a href="#{esc(anchor)}">{esc(name)}</a>{inner}</li>')
        body = "".join(self.parts) + ("</section>" if self.toc else "")
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
            f"<header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header>"
            f'<div class="page"><nav><strong>Contents</strong><ol>{"".join(toc)}</ol></nav>'
            f"<main>{body}</main></div></body></html>\n"
        )


def html_table(
    head: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1, hits: Sequence[bool] = ()
) -> str:
    """An HTML table; the first ``left`` columns left-aligned; cells are HTML already."""

    def cells(tag: str, row: Sequence[str]) -> str:
        aligned = [f'<{tag} class="l">' if i < left else f"<{tag}>" for i in range(len(row))]
        return "".join(f"{start}{c}</{tag}>" for start, c in zip(aligned, row, strict=True))

    body = []
    for r, row in enumerate(rows):
        cls = ' class="hit"' if r < len(hits) and hits[r] else ""
        body.append(f"<tr{cls}>{cells('td', row)}</tr>")
    thead = f"<thead><tr>{cells('th', head)}</tr></thead>" if any(head) else ""  # key/value: none
    return f"<table>{thead}<tbody>{''.join(body)}</tbody></table>"


def anchor_id(kind: str, name: str) -> str:
    return f"{kind}-{safe_name(name)}"


def _bar(width: int) -> str:
    return f'<span class="bar" style="width:{max(width, 1)}px"></span>'


def _layer_link(name: str) -> str:
    return f'<a href="#{esc(anchor_id("layer", name))}">{esc(name or "(model)")}</a>'


def shape_text(t: Any) -> str:
    return "×".join(str(s) for s in t) if t else "–"


def model_summary(
    page: Page, cap: Capture, module: Any, names: Sequence[str], model_name: str
) -> None:
    page.section("model", "Model")
    rows = [
        ("name", esc(model_name or (type(module).__name__ if module is not None else "(unknown)")))
    ]
    if isinstance(module, torch.nn.Module):
        params = list(module.parameters())
        total = sum(p.numel() for p in params)
        trainable = sum(p.numel() for p in params if p.requires_grad)
        dtypes = sorted({str(p.dtype).replace("torch.", "") for p in params})
        rows += [
            ("class", esc(type(module).__name__)),
            ("parameters", f"{total:,} ({trainable:,} trainable)"),
            ("modules", str(sum(1 for _ in module.named_modules()))),
            ("dtypes", esc(", ".join(dtypes) or "–")),
        ]
    rows += [
        ("captured layers", str(len(cap.names))),
        ("mode", esc(cap.mode)),
        ("capture time", f"{cap.elapsed_s * 1000:.1f} ms"),
    ]
    page.add(html_table(("", ""), rows))
    shapes = [
        (_layer_link(n), esc(cap[n].module_type), shape_text(getattr(cap[n].tensor, "shape", ())))
        + (str(len(cap.calls(n))),)
        for n in names
    ]
    if shapes:
        page.add(html_table(("layer", "type", "output", "calls"), shapes, left=2))
    if cap.warnings:
        page.add("".join(f'<p class="warn">{esc(w)}</p>' for w in cap.warnings))


def _class_name(index: int | None, categories: Sequence[str] | None) -> str:
    """``"cat (2)"`` when ``categories`` names class ``index``, else ``"2"``."""
    if index is not None and categories and 0 <= index < len(categories):
        return f"{categories[index]} ({index})"
    return str(index)


def prediction_section(
    page: Page,
    prepared: Any,
    cap: Capture,
    baseline: Capture | None,
    categories: Sequence[str] | None,
) -> None:
    page.section("prediction", "Prediction")
    page.add(
        # The window's sentence: the class or token named ("top-1 logit (class 2): cat").
        f"<p>Target: {esc(prepared.target_text or cap.target_description or '–')}"
        + (f" (value {num(cap.target_value)})" if cap.target_value is not None else "")
        + "</p>"
    )
    if baseline is not None:
        from actviz.display.difference import prediction_change

        change = prediction_change(
            cap.output, baseline.output, categories=categories, target=cap.target_index
        )
        if change.rows:
            page.add("<p>With the edits (after) and without them (before):</p>")
            rows = [
                (esc(r.name), str(r.index), f"{r.p_b:.4f}", f"{r.p_a:.4f}")
                + (f"{r.dp:+.4f}", f"{r.dlogit:+.4g}")
                for r in change.rows
            ]
            head = ("class", "index", "p before", "p after", "Δp", "Δlogit")
            page.add(
                html_table(head, rows, hits=[r.index == cap.target_index for r in change.rows])
            )
            if change.changed:
                before, after = (_class_name(i, categories) for i in (change.top_b, change.top_a))
                page.add(
                    f'<p class="warn">The top class changed: {esc(before)} → {esc(after)}.</p>'
                )
            return
        page.add(f'<p class="muted">{esc(change.message)}</p>')
    if prepared.predictions:
        rows = [
            (esc(label), str(i), f"{p:.4f}", _bar(int(p * 200)))
            for i, label, p in prepared.predictions
        ]
        page.add(html_table(("class", "index", "probability", ""), rows))
    else:
        page.add('<p class="muted">The output is not a classifier\'s: no class probabilities.</p>')


def sequence_views(page: Page, prepared: Any, names: Sequence[str]) -> None:
    """Token maps, attention maps and the logit lens: the pictures export writes (its own
    writer, into a temporary folder), and the lens table as text."""
    with tempfile.TemporaryDirectory(prefix="actviz-report-") as tmp:
        files, _summary = write_sequence_views(prepared, Path(tmp), names)
        pictures = [f for f in files if f.suffix == ".png"]
        lens = next((f for f in files if f.name == "logit_lens.json"), None)
        if not pictures and lens is None:
            return
        page.section("sequence", "Tokens and attention")
        for png in pictures:
            page.figure(f"sequence:{png.stem}", png.read_bytes(), png.stem.replace("_", " "))
        if lens is not None:
            page.add("<details><summary>Logit lens (logit_lens.json)</summary>")
            page.add(f"<pre>{esc(lens.read_text())}</pre></details>")


def no_layers_text(cap: Capture) -> str:
    """Why a report shows no layer: the capture's own reason (TorchScript) when it has one."""
    why = f": {cap.warnings[0]}" if cap.warnings else " (none was ticked or given)"
    return f'<p class="muted">No layer was captured{esc(why)}.</p>'


def stats_table(page: Page, prepared: Any, names: Sequence[str], cap: Capture) -> None:
    page.section("statistics", "Statistics")
    if not names:
        page.add(no_layers_text(cap))
        return
    rows = []
    for name in names:
        if (layer := prepared.layers.get(name)) is None:
            continue
        s = layer.stats
        rows.append(
            (_layer_link(name), esc(layer.module_type), shape_text(s.get("shape")))
            + tuple(num(s.get(k)) for k in ("mean", "std", "min", "max", "zero_frac"))
            + (num(s.get("nan", 0) + s.get("inf", 0) if "nan" in s else None),)
            + (num(s.get("grad_norm")),)
        )
    head = ("layer", "type", "shape", "mean", "std", "min", "max", "zeros", "NaN/Inf", "|grad|")
    page.add(html_table(head, rows, left=2))


def comparison_section(page: Page, comparison: Any, label: str) -> None:
    page.section("comparison", "Comparison")
    page.add(
        f"<p>{esc(label)} Relative L2 distance |a − b| / |b| per layer call "
        f"(tolerance {comparison.tol:g}); the first layer above it is highlighted.</p>"
    )
    diffs = list(comparison.layers) + ([comparison.output] if comparison.output is not None else [])
    finite = [d.rel_l2 for d in diffs if math.isfinite(d.rel_l2)]
    top = max(finite) if finite else 1.0
    first = comparison.first_divergence
    rows, hits = [], []
    for d in diffs:
        width = int(300 * d.rel_l2 / top) if top > 0 and math.isfinite(d.rel_l2) else 0
        name = "output" if d is comparison.output else d.name or "(model)"
        cells = map(num, (d.rel_l2, d.cosine, d.max_abs))
        rows.append((esc(name), str(d.call_index), *cells, _bar(width)))
        hits.append(first is not None and d is first)
    page.add(html_table(("layer", "call", "rel. L2", "cosine", "max |a−b|", ""), rows, hits=hits))
    for name, call, why in comparison.skipped:
        page.add(f'<p class="muted">{esc(name)} (call {call}) not compared: {esc(why)}</p>')
