"""Bugs vLLM-Omni really had, re-introduced into the real ``OmniChunkTransferAdapter``.

`MUTANTS` is what the mutation check in ``tests/test_vllm_adapter.py`` runs:
each `Mutant` patches the real class (CTA below is
``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``)
and the fuzzer must find it.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Mutant:
    """A bug vLLM-Omni had, as replacement attributes for the real adapter class.

    ``mutant.patches(cls)`` returns ``{attribute: replacement}`` built from
    `cls`'s current attributes; set them (``monkeypatch.setattr``) to run the
    real adapter with the bug back in.
    """

    name: str
    doc: str
    patches: Callable[[type[Any]], dict[str, Any]]


def _pre_6670_cleanup_sender(cls: type[Any]) -> dict[str, Any]:
    # CTA:977-1012 without the terminal_pending branch (before vllm-omni #6670):
    # a queued terminal loses its generation and is discarded as stale.
    def cleanup_sender(self: Any, external_req_id: str) -> None:
        with self._sender_state_lock:
            sender_token = self._sender_tokens.get(external_req_id)
            if sender_token is None:
                self._clear_sender_state_locked(external_req_id)
                return
            sender_token.cancelled = True
            if sender_token.in_flight:
                return
            self._queue_shm_cleanup_locked(external_req_id, sender_token)
            self._sender_tokens.pop(external_req_id, None)
            self._clear_sender_state_locked(external_req_id)

    return {"cleanup_sender": cleanup_sender}


def _false_put_unrecorded(cls: type[Any]) -> dict[str, Any]:
    # CTA:883-900 before vllm-omni #4855 (R1.2): a put returning False is only logged.
    original = cls.record_send_failure

    def record_send_failure(self: Any, request_id: str | None, reason: str) -> None:
        if reason == "connector.put reported failure":
            return
        original(self, request_id, reason)

    return {"record_send_failure": record_send_failure}


def _fence_kept_on_raise(cls: type[Any]) -> dict[str, Any]:
    # CTA:717-722 releases the terminal fence on every exit path; here a raising
    # put skips it, so the deferred cleanup never runs and the state leaks.
    send = cls._send_single_request_for_generation
    release = cls._release_terminal_fence
    raised = threading.local()

    def _send_single_request_for_generation(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return send(self, *args, **kwargs)
        except Exception:
            raised.flag = True
            raise

    def _release_terminal_fence(self: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(raised, "flag", False):
            raised.flag = False
            return
        release(self, *args, **kwargs)

    return {
        "_send_single_request_for_generation": _send_single_request_for_generation,
        "_release_terminal_fence": _release_terminal_fence,
    }


def _identity_dropped(cls: type[Any]) -> dict[str, Any]:
    # The fence keyed by external id instead of generation identity (CTA:698-709
    # compares ``_sender_tokens.get(ext) is sender_token``): a stale queued task
    # of a retired generation runs as the current generation after the id is reused.
    send = cls._send_single_request

    def _send_single_request(self: Any, task: dict[str, Any]) -> Any:
        if "sender_token" in task:
            current = self._sender_tokens.get(task["request"].external_req_id)
            if current is not None:
                task = {**task, "sender_token": current}
        return send(self, task)

    return {"_send_single_request": _send_single_request}


def _cancelled_vetoes_terminal(cls: type[Any]) -> dict[str, Any]:
    # CTA:751-762 without ``is_terminal or``: the pre-put check lets ``cancelled``
    # veto the terminal (seed 000 F1's fence), so cleanup while a terminal is
    # pending loses it.
    def _sender_generation_is_active(
        self: Any, external_req_id: str, sender_token: Any, *, is_terminal: bool = False
    ) -> bool:
        with self._sender_state_lock:
            current = self._sender_tokens.get(external_req_id) is sender_token
            return current and not sender_token.cancelled

    return {"_sender_generation_is_active": _sender_generation_is_active}


def _token_watermark_kept(cls: type[Any]) -> dict[str, Any]:
    # CTA:486 removed: a queued segment end keeps requests_num_chunks_sent at
    # its confirmed count, so the next segment's saves, whose counts restart
    # after the rebuilt prompt, are skipped silently as preemption replays.
    save_async = cls.save_async

    def save_async_keeping_watermark(self: Any, *args: Any, **kwargs: Any) -> Any:
        call = inspect.signature(save_async).bind(self, *args, **kwargs)
        call.apply_defaults()
        request, boundary = call.arguments["request"], call.arguments["is_segment_finished"]
        queued = len(self._pending_save_reqs)
        result = save_async(self, *args, **kwargs)
        if boundary and request is not None and len(self._pending_save_reqs) > queued:
            confirmed = self._confirmed_num_computed_tokens(request)
            self.requests_num_chunks_sent[request.external_req_id] = confirmed
        return result

    return {"save_async": save_async_keeping_watermark}


def _segment_end_pops_payload(cls: type[Any]) -> dict[str, Any]:
    # The segment-end post-processing (CTA:902-909) also pops request_payload:
    # the producer loses its request-wide state at every segment boundary.
    send = cls._send_single_request_for_generation

    def _send_single_request_for_generation(
        self: Any, task: dict[str, Any], *args: Any, **kwargs: Any
    ) -> Any:
        result = send(self, task, *args, **kwargs)
        if task.get("is_segment_finished"):
            with self._sender_state_lock:
                self.request_payload.pop(task["request"].external_req_id, None)
        return result

    return {"_send_single_request_for_generation": _send_single_request_for_generation}


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "cleanup_drops_queued_terminal",
        "cleanup_sender reclaims a generation whose terminal is still queued (#6670)",
        _pre_6670_cleanup_sender,
    ),
    Mutant(
        "false_put_unrecorded",
        "a connector put that returns False is not recorded as a send failure (#4855)",
        _false_put_unrecorded,
    ),
    Mutant(
        "fence_kept_on_raising_put",
        "a raising terminal put does not release the fence: deferred cleanup never runs",
        _fence_kept_on_raise,
    ),
    Mutant(
        "identity_check_dropped",
        "the fence is keyed by external id: a retired generation's queued task runs after reuse",
        _identity_dropped,
    ),
    Mutant(
        "cancelled_vetoes_terminal",
        "cancelled vetoes the terminal before the put (seed 000 F1)",
        _cancelled_vetoes_terminal,
    ),
    Mutant(
        "token_watermark_kept_at_segment_end",
        "a segment end keeps requests_num_chunks_sent (CTA:486 removed)",
        _token_watermark_kept,
    ),
    Mutant(
        "segment_end_pops_request_payload",
        "segment-end post-processing pops request_payload (seed 000: segment completion "
        "must keep request-wide state)",
        _segment_end_pops_payload,
    ),
)
"""Bugs vLLM-Omni had, and regressions of the code that fixed them (the last two need a
segment boundary); the fuzzer must find each against the patched real code."""


def source_mutant(cls: type[Any], function: str, mutant_id: str) -> dict[str, Any]:
    """``{function: its single-point mutant}`` of the real adapter class `cls`.

    `mutant_id` is a `statecore.fuzzing.source_mutants` id of
    ``OmniChunkTransferAdapter.<function>``: the module is compiled with that one
    change (nothing is written to disk) and the mutated function taken from it,
    so setting it on `cls` runs the real adapter with that one point changed.
    """
    from statecore.fuzzing.source_mutants import mutated_code

    module = importlib.import_module(cls.__module__)
    filename = module.__file__
    assert filename is not None
    qualified = f"{cls.__name__}.{function}"
    namespace: dict[str, Any] = {
        "__name__": f"{cls.__module__}__mutant",
        "__package__": module.__package__,
        "__file__": filename,
    }
    exec(mutated_code(filename, [qualified], mutant_id), namespace)
    return {function: namespace[cls.__name__].__dict__[function]}


def source_mutant_id(cls: type[Any], function: str, prefix: str) -> str:
    """The id of the single-point mutant of `cls`.`function` that `prefix` names.

    `prefix` is a `statecore.fuzzing.source_mutants` id with ``{}`` for
    ``<class>.<function>``: the mutant with exactly that id, or else the one
    mutant whose id starts with it (more than one is an error).
    """
    from statecore.fuzzing.source_mutants import source_mutants

    filename = importlib.import_module(cls.__module__).__file__
    assert filename is not None
    qualified = f"{cls.__name__}.{function}"
    wanted = prefix.replace("{}", qualified)
    ids = [m.id for m in source_mutants(filename, [qualified])]
    if wanted in ids:
        return wanted
    (found,) = [i for i in ids if i.startswith(wanted)]
    return found
