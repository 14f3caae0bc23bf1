"""Trace files from elsewhere: bad ones end in one line, and none picks code to run.

A trace is data - a CI artifact from someone else's branch, an attachment to a
bug report. Replaying, drawing or reading one imports and calls only what the
command line names; a name read from the file is looked up among the bundled
targets and adapters and nowhere else. Every bad file ends in one
``statecore: error: FILE: ...`` line with the fix. The corpus under
``bad_inputs/traces`` (``cases.toml`` says what each must give) keeps each
kind fixed; the cases that need a large file are generated here.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from statecore import Event, Machine, State, Transition
from statecore.cli import main
from statecore.properties import sometimes
from statecore.registry import (
    TargetError,
    bundled,
    load_path,
    resolve,
)
from statecore.system import Action, ActionLabel, Component, System, Tx
from statecore.traces.itf import TraceFileError, itf_text, read_header, read_itf, write_itf
from statecore.traces.regression import load_system, regression_test_source
from statecore.traces.replay import replay, replay_actions
from statecore.traces.targets import system_for_trace, trace_target

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

CORPUS = Path(__file__).resolve().parent / "bad_inputs" / "traces"
CASES: list[dict[str, Any]] = tomllib.loads((CORPUS / "cases.toml").read_text())["case"]
GOOD = CORPUS / "good.itf.json"
FUZZ = CORPUS / "fuzz.itf.json"
VARIANT = "stream_edge_start_per_message"


@pytest.fixture(autouse=True)
def abort_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were a header still obeyed, ``os:abort`` would end the test run instead of failing it."""

    def abort() -> None:
        raise AssertionError("os.abort() was called: a trace header picked code to run")

    monkeypatch.setattr(os, "abort", abort)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str, trace: Path | str) -> str:
    """The single stderr line, which must name `trace`."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"statecore: error: {trace}: "), err
    return lines[0]


# -- the corpus -------------------------------------------------------------------------------


def test_the_corpus_starts_from_traces_that_still_replay(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """If the models changed, regenerate: ``python tests/bad_inputs/traces/make_corpus.py``."""
    code, out, err = run(capsys, "replay", str(GOOD))
    assert code == 1 and "telemetry_never_advances violated" in out, err
    code, out, err = run(capsys, "replay", str(FUZZ), "--adapter", f"model:{VARIANT}")
    assert code == 1 and "conformance" in out, err


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_trace(case: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    argv = [arg.replace("{dir}", str(CORPUS)) for arg in case["argv"]]
    trace = next(arg for arg in argv if arg.endswith(".itf.json"))
    code, _, err = run(capsys, *argv)
    assert code == 2, err
    line = one_error_line(err, trace)
    for fragment in case["stderr"]:
        assert fragment in line, line


def test_every_corpus_file_has_a_case() -> None:
    named = {Path(arg).name for case in CASES for arg in case["argv"]}
    files = {p.name for p in CORPUS.glob("*.itf.json")}
    assert files - named == set()


# -- a header names code: nothing is imported or called --------------------------------------


def test_a_header_naming_os_abort_exits_2_in_one_line() -> None:
    """In a fresh interpreter, where ``os.abort`` really kills the process (exit 134)."""
    trace = CORPUS / "header_target_os_abort.itf.json"
    for argv in (["replay", str(trace)], ["diagram", VARIANT, "--trace", str(trace)]):
        done = subprocess.run(
            [sys.executable, "-m", "statecore.cli", *argv],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 2, (done.returncode, done.stderr)
        one_error_line(done.stderr, trace)


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A module that leaves a mark when imported, and a good trace whose header names it."""
    mark = tmp_path / "imported"
    (tmp_path / "trace_planted.py").write_text(
        "from pathlib import Path\n"
        "from statecore.registry import resolve\n"
        f"Path({str(mark)!r}).write_text('imported')\n"
        f"SYSTEM = resolve({VARIANT!r})[1]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    obj = json.loads(GOOD.read_text())
    obj["#meta"]["target"] = "trace_planted:SYSTEM"
    trace = tmp_path / "planted.itf.json"
    trace.write_text(itf_text(obj))
    yield trace, mark
    sys.modules.pop("trace_planted", None)


def test_a_module_the_header_names_is_not_imported(
    planted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace, mark = planted
    code, _, err = run(capsys, "replay", str(trace))
    assert code == 2
    line = one_error_line(err, trace)
    assert "'trace_planted:SYSTEM', which is not bundled" in line
    assert "pass --target trace_planted:SYSTEM" in line
    code, _, err = run(capsys, "diagram", "stream_edge", "--trace", str(trace))
    assert code == 2 and "but TARGET is 'stream_edge'" in one_error_line(err, trace)
    with pytest.raises(TargetError, match="not bundled"):
        system_for_trace(trace)
    assert read_header(trace)["target"] == "trace_planted:SYSTEM"
    assert not mark.exists() and "trace_planted" not in sys.modules


def test_the_user_may_name_the_same_module(
    planted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace, mark = planted
    code, out, err = run(capsys, "replay", str(trace), "--target", "trace_planted:SYSTEM")
    assert code == 1 and "telemetry_never_advances violated" in out, err
    assert mark.exists()


def test_a_header_may_name_a_bundled_target_by_its_path(tmp_path: Path) -> None:
    (target,) = (t for t in bundled() if t.name == VARIANT)
    obj = json.loads(GOOD.read_text())
    obj["#meta"]["target"] = target.path
    trace = tmp_path / "by_path.itf.json"
    trace.write_text(itf_text(obj))
    assert system_for_trace(trace)[0] == VARIANT
    assert system_for_trace(trace, VARIANT)[0] == VARIANT


def test_a_callable_that_needs_arguments_is_refused_by_name() -> None:
    """``json:dumps`` named by the user: a one-line refusal, not the callee's TypeError."""
    with pytest.raises(TargetError, match="'json:dumps' is a function that needs arguments"):
        load_path("json:dumps")
    with pytest.raises(TargetError, match="'json:dumps' is a function that needs arguments"):
        load_system("json:dumps")
    with pytest.raises(TargetError, match="must take one argument"):
        load_system("x", "os:getcwd")


# -- the header and the command line must agree ------------------------------------------------


def test_a_fuzz_trace_names_its_adapter() -> None:
    with pytest.raises(TargetError, match=f"pass --adapter model:{VARIANT}"):
        system_for_trace(FUZZ)
    assert trace_target(FUZZ, adapter=f"model:{VARIANT}") == ("stream_edge", f"model:{VARIANT}")
    # Drawing needs no implementation: the adapter's model configuration is drawn.
    assert system_for_trace(FUZZ, "stream_edge", drawing=True)[0] == "stream_edge"


def test_an_adapter_other_than_the_headers_is_refused_with_both() -> None:
    with pytest.raises(TargetError) as caught:
        trace_target(FUZZ, adapter="stream-edge-recorder")
    message = str(caught.value)
    assert f"names adapter 'model:{VARIANT}' but --adapter is 'stream-edge-recorder'" in message
    assert str(FUZZ) in message and "remove 'adapter' from the header" in message


def test_a_variant_trace_is_drawn_on_its_variant(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "diagram", "stream_edge", "--trace", str(GOOD))
    assert code == 0, err
    assert out.startswith(f"# {VARIANT}\n")


# -- values the parser or the decoder cannot take --------------------------------------------


def deep_copy_of_good(tmp_path: Path, name: str, placeholder_at: tuple[str, ...], raw: str) -> Path:
    """The good trace with the JSON text `raw` put at `placeholder_at` (a path of keys)."""
    obj = json.loads(GOOD.read_text())
    holder: Any = obj
    for key in placeholder_at[:-1]:
        holder = holder[int(key)] if isinstance(holder, list) else holder[key]
    holder[placeholder_at[-1]] = "@@PLACEHOLDER@@"
    path = tmp_path / name
    path.write_text(itf_text(obj).replace('"@@PLACEHOLDER@@"', raw))
    return path


@pytest.mark.parametrize(
    ("where", "step"),
    [(("states", "1", "recorded"), "step 1: "), (("#meta", "notes"), "")],
    ids=["value", "header"],
)
def test_nesting_deeper_than_the_parser_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: tuple[str, ...], step: str
) -> None:
    levels = 100_000
    trace = deep_copy_of_good(tmp_path, "deep.itf.json", where, "[" * levels + "]" * levels)
    code, _, err = run(capsys, "replay", str(trace))
    assert code == 2
    line = one_error_line(err, trace)
    assert f"{trace}: {step}values nest too deeply to read" in line


def test_a_lowered_integer_limit_is_reported_too(tmp_path: Path) -> None:
    trace = deep_copy_of_good(
        tmp_path, "digits.itf.json", ("states", "1", "recorded"), '{"#bigint": "' + "1" * 700 + '"}'
    )
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        with pytest.raises(TraceFileError, match=r"step 1: recorded: .*640"):
            read_itf(trace, resolve(VARIANT)[1])
    finally:
        sys.set_int_max_str_digits(before)


# -- a large trace is parsed once and read only up to its first bad step ------------------------


def lamp_system() -> System:
    """A lamp flipped on and off for ever: traces of any length."""
    lamp = Machine(
        "lamp",
        states=[State("off", initial=True), State("on")],
        events=[Event("flip")],
        transitions=[Transition("off", "flip", "on"), Transition("on", "flip", "off")],
    )

    def flip(tx: Tx) -> None:
        tx.require(tx.fire(("lamp", "it"), "flip").accepted)

    def lit(view: Any) -> bool:
        snapshot = view.snapshot("lamp", "it")
        return snapshot is not None and snapshot.state == "on"

    return System(
        "lamp",
        components=[Component("lamp", lamp, ("it",))],
        actions=[Action("flip", "user", flip)],
        init=lambda tx: tx.spawn("lamp", "it"),
        properties=[sometimes("lit", "the lamp is lit", lit)],
    )


STEPS = 4000


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    system = lamp_system()
    result = replay_actions(system, [ActionLabel("flip")] * STEPS, "lit")
    assert len(result.trace) == STEPS
    path = tmp_path_factory.mktemp("long") / "lamp.itf.json"
    return write_itf(result.trace, system, path, meta={"target": "test_trace_input:lamp_system"})


class Spy:
    """Counts the JSON text parsed and the states decoded while a trace is read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import statecore.traces.itf as itf

        self.chars = 0
        self.decoded: list[int] = []
        parse = json.JSONDecoder.raw_decode
        decode = itf._decode_step

        def raw_decode(decoder: json.JSONDecoder, text: str, idx: int = 0) -> tuple[Any, int]:
            value, end = parse(decoder, text, idx)
            self.chars += end - idx
            return value, end

        def decode_step(*args: Any) -> Any:
            self.decoded.append(args[3])
            return decode(*args)

        monkeypatch.setattr(json.JSONDecoder, "raw_decode", raw_decode)
        monkeypatch.setattr(itf, "_decode_step", decode_step)


def test_a_bad_step_early_in_a_large_trace_stops_the_reading(
    long_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    obj = json.loads(long_trace.read_text())
    state = obj["states"][10]["lamp[it]"]["value"]["snapshot"]["value"]
    state["state"] = "off" if state["state"] == "on" else "on"
    bad = tmp_path / "bad.itf.json"
    text = itf_text(obj)
    bad.write_text(text)
    spy = Spy(monkeypatch)
    with pytest.raises(TraceFileError, match="step 10: the model does not allow this step"):
        read_itf(bad, lamp_system())
    assert spy.decoded == list(range(11))
    assert spy.chars < len(text) // 50  # the header and eleven states of four thousand


def test_replaying_a_large_trace_parses_it_once(
    long_trace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = long_trace.read_text()
    spy = Spy(monkeypatch)
    code, _, err = run(
        capsys, "replay", str(long_trace), "--target", "test_trace_input:lamp_system"
    )
    assert code == 0, err
    assert spy.decoded == list(range(STEPS + 1))
    # Once (the header is read again by each check that needs it, never the states).
    assert spy.chars < 1.2 * len(text)


def test_an_unknown_property_is_found_before_the_states_are_read(
    long_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    obj = json.loads(long_trace.read_text())
    obj["#meta"]["property"] = "dark"
    renamed = tmp_path / "renamed.itf.json"
    renamed.write_text(itf_text(obj))
    spy = Spy(monkeypatch)
    with pytest.raises(TraceFileError, match=f"{renamed}: system 'lamp' has no property 'dark'"):
        replay(lamp_system(), renamed)
    assert spy.decoded == []


# -- generated regression tests import only what was named when they were written ---------------


@pytest.mark.parametrize(
    "property_id",
    ['x"""\nimport os\nos.abort()\n"""', "nul\x00byte", "lone \ud800 surrogate", "é²\u2028\\"],
    ids=["triple-quotes", "nul", "surrogate", "unicode"],
)
def test_text_from_a_trace_file_stays_data_in_a_generated_test(
    tmp_path: Path, property_id: str
) -> None:
    obj = json.loads(GOOD.read_text())
    obj["#meta"].update({"property": property_id, "target": "os:abort", "detail": property_id})
    trace_file = tmp_path / "hostile.itf.json"
    trace_file.write_text(json.dumps(obj))  # a lone surrogate travels as an escape
    trace = read_itf(trace_file, resolve(VARIANT)[1])
    source = regression_test_source(trace, VARIANT)
    tree = ast.parse(source)
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported == {
        "statecore.traces.regression",
        "statecore.traces.replay",
        "statecore.system",
    }
    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
        if node.targets[0].id in ("TARGET", "PROPERTY")
    }
    assert values == {"TARGET": VARIANT, "PROPERTY": property_id}
    source.encode("utf-8")  # writable as a file


@pytest.mark.parametrize(
    ("target", "resolver"),
    [
        ("no such target", None),
        ("x:y\nimport os", None),
        ("chunk_transfer_6670", "resolvers:get; import os"),
        ("", "resolvers:get"),
    ],
)
def test_a_generated_test_refuses_names_it_could_not_load(
    target: str, resolver: str | None
) -> None:
    trace = read_itf(GOOD, resolve(VARIANT)[1])
    with pytest.raises(TargetError, match=r"must look like|neither a bundled target"):
        regression_test_source(trace, target, resolver=resolver)


def outcome(path: Path, system: System) -> str:
    """What reading `path` gives: the trace's steps or the error, as text to compare."""
    try:
        header = read_header(path)
        trace = read_itf(path, system)
    except TraceFileError as exc:
        return f"error: {exc}"
    return f"{header}\n{trace.steps}"


def test_reading_in_small_chunks_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window the reader keeps may cut a value, a number or a line anywhere."""
    import statecore.traces.itf_json as itf_json

    system = resolve(VARIANT)[1]
    obj = json.loads(GOOD.read_text())
    obj["#meta"]["detail"] = "caf\u00e9 \u2713 \\u escapes"
    escaped = tmp_path / "escaped.itf.json"
    escaped.write_text(json.dumps(obj))  # ASCII only: \u escapes the window may cut
    garbled = tmp_path / "garbled.itf.json"
    garbled.write_text(itf_text(obj).replace('"deliver"', '"deliver\\q"', 1) + " " * 5000)
    files = [*sorted(CORPUS.glob("*.itf.json")), escaped, garbled]
    whole = [outcome(path, system) for path in files]
    for chunk in (1, 7, 64):
        monkeypatch.setattr(itf_json, "_CHUNK", chunk)
        assert [outcome(path, system) for path in files] == whole, chunk


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_a_file_cut_inside_a_string_is_reported_as_truncated(
    tmp_path: Path,
    chunk: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import statecore.traces.itf_json as itf_json

    text = (CORPUS / "good.itf.json").read_text()
    # Cut each string-opening quote's next character: the file ends inside a string.
    cuts = [i + 2 for i, ch in enumerate(text) if ch == '"'][10:200:37]
    assert cuts
    monkeypatch.setattr(itf_json, "_CHUNK", chunk)
    for cut in cuts:
        path = tmp_path / "cut.itf.json"
        path.write_text(text[:cut])
        assert main(["replay", str(path)]) == 2
        assert "the file ends early: is it truncated?" in capsys.readouterr().err, cut
