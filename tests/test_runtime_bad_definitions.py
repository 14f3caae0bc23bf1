"""Every bad definition in tests/bad_inputs/definitions/ gives one `DefinitionError`.

Each module there builds one mistaken machine and names the texts the error
must hold: the machine, the culprit and the fix. None may surface as a raw
``AttributeError`` or ``TypeError`` naming no machine.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from statecore import DefinitionError

CORPUS = Path(__file__).parent / "bad_inputs" / "definitions"
CASES = sorted(CORPUS.glob("*.py"))


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bad_definition_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_corpus_is_there() -> None:
    assert len(CASES) >= 15


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_bad_definition_names_machine_culprit_and_fix(path: Path) -> None:
    case = load(path)
    with pytest.raises(DefinitionError) as caught:
        case.build()
    message = str(caught.value)
    assert "\n" not in message, message
    assert f"machine {case.MACHINE}" in message, message
    assert case.CULPRIT in message, message
    assert case.FIX in message, message
