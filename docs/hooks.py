"""mkdocs hooks (``hooks:`` in mkdocs.yml): the reference pages are generated from the code
before every build (:mod:`gen_ref`), so ``mkdocs build`` and ``mkdocs serve`` never show a
reference older than the code."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

_GEN_REF = Path(__file__).resolve().with_name("gen_ref.py")


def on_pre_build(config: Any, **kwargs: Any) -> None:
    spec = importlib.util.spec_from_file_location("gameday_docs_gen_ref", _GEN_REF)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write()
