"""Building a model from code the user named (``path/file.py:Name``, ``pkg.module:name``)."""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from actviz.io.errors import ModelLoadError
from actviz.io.models.checkpoints import on_sys_path, one_line

_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class CodeRef:
    """A parsed ``target:attr`` reference; ``is_file`` tells a .py path from a module name."""

    target: str
    attr: str
    is_file: bool

    def __str__(self) -> str:
        return f"{self.target}:{self.attr}"


def parse_code_ref(source: str) -> CodeRef | None:
    """Parse ``file.py:Name`` / ``package.module:factory``; else None."""
    target, sep, attr = source.rpartition(":")
    if not sep or not target or not _DOTTED.match(attr):
        return None
    if target.endswith(".py"):
        return CodeRef(target, attr, is_file=True)
    return CodeRef(target, attr, is_file=False) if _DOTTED.match(target) else None


def module_classes_in_file(path: str | os.PathLike[str]) -> list[str]:
    """Top-level class names of a .py file, read with ``ast`` (not run), to suggest one."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef)]


def _import_file(path: Path) -> Any:
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:8]
    stem = re.sub(r"\W", "_", path.stem)
    # A private name (a user's "torch.py" shadows nothing), run afresh to see edits on reload.
    mod_name = f"_actviz_user_{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, resolved)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"{path}: cannot be imported as Python code")
    module = importlib.util.module_from_spec(spec)
    # Registered before exec so dataclasses/pickle can find the module by name.
    sys.modules[mod_name] = module
    # The file's folder goes on sys.path while it runs, so `import sibling` works.
    try:
        with on_sys_path(str(resolved.parent)):
            spec.loader.exec_module(module)
    except Exception as exc:  # the user's code may raise anything
        sys.modules.pop(mod_name, None)
        raise ModelLoadError(
            f"{path}: importing it failed ({type(exc).__name__}: {one_line(exc)})"
        ) from exc
    return module


def _import_module(name: str) -> Any:
    # Retried from the working folder (the CLI's sys.path[0] is its script folder).
    for folders in ((), (os.getcwd(),)):
        try:
            with on_sys_path(*folders):
                return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            top = exc.name == name.split(".")[0] and os.getcwd() not in sys.path
            if folders or not top:
                raise ModelLoadError(f"{name}: cannot import module ({one_line(exc)})") from exc
        except Exception as exc:
            raise ModelLoadError(
                f"{name}: importing it failed ({type(exc).__name__}: {one_line(exc)})"
            ) from exc


def build_from_code(ref: CodeRef) -> nn.Module:
    """The model a code reference names: an ``nn.Module`` subclass or factory (called without
    arguments) or an instance. ``ModelLoadError`` when missing, failing, or not a module."""
    if ref.is_file:
        path = Path(ref.target)
        if not path.is_file():
            raise ModelLoadError(f"{ref.target}: file not found")
        module = _import_file(path)
    else:
        module = _import_module(ref.target)
    obj: Any = module
    for part in ref.attr.split("."):
        if not hasattr(obj, part):
            public = {n: getattr(module, n) for n in dir(module) if not n.startswith("_")}
            candidates = [
                n for n, v in public.items() if isinstance(v, type) and issubclass(v, nn.Module)
            ]
            hint = f"; it defines {', '.join(candidates[:8])}" if candidates else ""
            raise ModelLoadError(f"{ref}: {ref.target} has no attribute {part!r}{hint}")
        obj = getattr(obj, part)
    if isinstance(obj, nn.Module):
        return obj
    if not callable(obj):
        raise ModelLoadError(f"{ref}: is a {type(obj).__name__}, not a model class or factory")
    try:
        model = obj()
    except Exception as exc:  # the user's constructor may raise anything
        raise ModelLoadError(
            f"{ref}: calling {ref.attr}() with no arguments failed "
            f"({type(exc).__name__}: {one_line(exc)}); name a factory function that takes none"
        ) from exc
    if not isinstance(model, nn.Module):
        raise ModelLoadError(
            f"{ref}: {ref.attr}() returned a {type(model).__name__}, not a nn.Module"
        )
    return model
