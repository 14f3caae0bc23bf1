"""Where `CheckedChunkTransferAdapter` fires each event of its machines: the call-site map.

`FIRED_BY` says, for every event of the three machines the checked adapter
runs, which method fires it, which adapter methods reach that method, and
which vLLM-Omni 0.30.0 code it replaces. `page` renders it, transition by
transition, as ``docs/checked-adapter.md`` (``python -m
statecore.render.docgen``). ``tests/test_checked_sender.py`` holds the map
to the code: every event of every machine is in it, each firing method's
source fires that event, and each adapter method named calls the firing
method.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from statecore import Machine

from .checked_sender import REQUEST_STATE, SENDER_GENERATION, WATERMARKS


class Site(NamedTuple):
    """Where an event is fired, who calls that, and the 0.30.0 code it replaces."""

    fires: str  # ``Class.method`` whose body fires the event
    callers: tuple[str, ...]  # ``CheckedSenderMixin`` methods (or the scheduler) that call it
    replaces: str  # the 0.30.0 code (CTA: chunk_transfer_adapter.py, MIX: the scheduler mixin)


MACHINES: Mapping[str, Machine] = {
    "sender_generation": SENDER_GENERATION,
    "segment_watermark": WATERMARKS.machine,
    "request_state": REQUEST_STATE,
}
"""The machines one external id's sender lifecycle runs, by the name the map uses."""

FIRED_BY: Mapping[tuple[str, str], Site] = {
    ("sender_generation", "save_terminal"): Site(
        "CheckedSenderMixin.save_async",
        (),
        "CTA:465-469 sender_token.terminal_pending = True",
    ),
    ("sender_generation", "begin"): Site(
        "CheckedSenderMixin._send_single_request",
        (),
        "CTA:697-712 the identity fence; in_flight = True",
    ),
    ("sender_generation", "end"): Site(
        "CheckedSenderMixin._send_single_request",
        (),
        "CTA:717-729 the finally; CTA:731-749 _release_terminal_fence",
    ),
    ("sender_generation", "cleanup"): Site(
        "CheckedSenderMixin.cleanup_sender",
        ("finish_requests",),
        "CTA:977-1012 cleanup_sender's flags (also reached from 0.30.0's cleanup(), "
        "which a successful terminal put calls; a graceful finish with the terminal queued "
        "leaves it to the terminal's finally in _send_single_request)",
    ),
    ("segment_watermark", "save"): Site(
        "WatermarkTable.save",
        ("save_async",),
        "CTA:412-430 the late check; CTA:447-486 the token watermark and the segment end",
    ),
    ("segment_watermark", "clear"): Site(
        "Watermarks.clear",
        ("_clear_sender_state_locked",),
        "CTA:1034-1035 pop _segment_generation and requests_num_chunks_sent",
    ),
    ("segment_watermark", "rebuild_prompt"): Site(
        "Watermarks.rebuild_prompt",
        (),
        "MIX:202, MIX:313, AR:903 the scheduler's requests_num_chunks_sent.pop(ext)",
    ),
    ("request_state", "get_or_create"): Site(
        "GenerationPayloads._admits",
        (),
        "the processors' request_payload writes (a plain dict in 0.30.0)",
    ),
    ("request_state", "complete_segment"): Site(
        "GenerationPayloads.complete_segment",
        ("_end_segment",),
        "CTA:902-909 segment-end post-processing (request_payload kept)",
    ),
    ("request_state", "send_failed"): Site(
        "GenerationPayloads.on_failure",
        ("_process_payload", "_send_single_request_for_generation", "_send_single_request"),
        "CTA:801-806 (only logged), CTA:887-900 record_send_failure",
    ),
    ("request_state", "release"): Site(
        "GenerationPayloads.release",
        ("_clear_sender_state_locked",),
        "CTA:1031 request_payload.pop(ext)",
    ),
}
"""(machine, event) -> where it is fired. Callers are `CheckedSenderMixin` methods;
an empty tuple means the firing method is itself the adapter's (or the scheduler's) entry."""


def page() -> str:
    """``docs/checked-adapter.md``: every transition with the adapter method that fires it."""
    lines = [
        "# The checked adapter, call site by call site",
        "",
        "`CheckedChunkTransferAdapter` (`statecore.models.implementations."
        "checked_chunk_transfer`) runs three machines per external id. Each row is one "
        "transition: the event, where the adapter fires it, which adapter methods reach "
        "that place, and the vLLM-Omni 0.30.0 code it replaces (CTA: "
        "`chunk_transfer_adapter.py`, MIX: `omni_scheduler_mixin.py`, AR: "
        "`omni_ar_scheduler.py`). See [vllm-omni.md](vllm-omni.md#the-checked-adapter).",
    ]
    for name, machine in MACHINES.items():
        lines += ["", f"## `{name}`", "", _first_line(machine.doc), ""]
        lines += [
            "| transition | guard | effect | fired in | reached from | replaces |",
            "|---|---|---|---|---|---|",
        ]
        for transition in machine.transitions:
            site = FIRED_BY[(name, transition.event)]
            callers = ", ".join(f"`{c}`" for c in site.callers) or "-"
            lines.append(
                f"| {_label(transition.name)} | {_label(transition.guard_label)} | "
                f"{_label(transition.effect_label)} | `{site.fires}` | {callers} | "
                f"{site.replaces} |"
            )
    return "\n".join(lines) + "\n"


def _label(text: str) -> str:
    """`text` as inline code fit for a table cell (a ``|`` is escaped)."""
    return "`" + text.replace("|", "\\|") + "`" if text else "-"


def _first_line(doc: str) -> str:
    return doc.strip().splitlines()[0] if doc.strip() else ""
