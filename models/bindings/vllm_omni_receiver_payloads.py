"""What the ``vllm-omni-receiver`` binding's upstream puts, and what a commit must make of it.

The `receiver_system` model knows a chunk by its kind (data, segment end,
finished) and the incarnation whose upstream produced it. The real
``_commit_received_chunk`` (CTA:546-682, ``CTA`` as in `statecore.models.receiver`)
also reads the payload's shape: ``meta`` may be missing or not a dict, the
flags may be one-element tensors, the codec frames (``codes.audio``) a list, a
1-D or a 2-D tensor or absent, ``codes`` a read-only mapping, and a payload
may ask for a full snapshot (``meta.replace_runtime_additional_information``).
`payload` fixes one shape per (incarnation, kind), varied across the two
incarnations the model reuses an id for, so every shape is put on the wire;
`expected_request` is the contract a generation-mode commit keeps on the
request for those shapes (an AR-mode commit leaves it to the scheduler), from
the chunks the model says were committed. Nothing here imports torch or
vLLM: the caller passes its tensor constructor.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from ..receiver import DATA, FINISHED, SEGMENT_END, Chunk

__all__ = ["MISSING", "RequestView", "expected_request", "freeze", "initial_info", "payload"]

MISSING = "<missing>"
"""The request has no ``additional_information`` attribute (a plain vLLM ``Request``)."""

Tensor = Callable[[Any], Any]


def initial_info(incarnation: int) -> dict[str, Any] | str:
    """The request's ``additional_information`` when it arrives: the first incarnation
    carries one from its prompt; the second has no such attribute (``load_async`` sets
    it to None, CTA:331-332)."""
    return {"prompt_info": {"voice": "base"}} if incarnation % 2 else MISSING


def frame(chunk: Chunk, index: int) -> int:
    """The codec frame value of chunk `index` of `chunk.producer`'s stream."""
    return 10 * chunk.producer + index + 1


def payload(chunk: Chunk, index: int, tensor: Tensor) -> dict[str, Any]:
    """The wire payload of `chunk`, key index `index`, as its upstream put it."""
    v = frame(chunk, index)
    if chunk.producer % 2:
        meta: Any = {"finished": chunk.kind == FINISHED, "is_segment_finished": False}
        if chunk.kind == DATA:  # a list of frames and a sibling field; a top-level value
            return {"meta": meta, "codes": {"audio": [v], "ref": "voice1"}, "speaker": "s1"}
        if chunk.kind == SEGMENT_END:  # a 1-D frame tensor
            meta["is_segment_finished"] = True
            return {"meta": meta, "codes": {"audio": tensor([v])}}
        return {"meta": meta}  # finished, without frames
    if chunk.kind == DATA:  # meta not a dict (read as empty); a 2-D code tensor
        return {"meta": [], "codes": {"audio": tensor([[v]])}}
    if chunk.kind == SEGMENT_END:  # a boundary without frames, as a full snapshot
        meta = {
            "finished": tensor([False]),
            "is_segment_finished": tensor([True]),
            "replace_runtime_additional_information": True,
        }
        return {"meta": meta, "codes": {"audio": []}}
    # finished, tensor flag, frames in a read-only mapping (not merged as a dict)
    return {"meta": {"finished": tensor([True])}, "codes": MappingProxyType({"audio": [v]})}


class RequestView(NamedTuple):
    """The request fields a commit writes, frozen to compare."""

    prompt: tuple[int, ...]
    prompt_tokens: int
    info: Hashable
    buffer: Hashable
    resumable: bool


def freeze(value: Any) -> Hashable:
    """`value` as a hashable, comparable value (tensors by shape and contents)."""
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((str(k), freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(freeze(v) for v in value))
    if hasattr(value, "tolist") and hasattr(value, "shape"):
        return ("tensor", tuple(value.shape), freeze(value.tolist()))
    assert isinstance(value, Hashable)
    return value


def _merge(info: dict[str, Any], data: Mapping[str, Any], tensor_codes: bool) -> None:
    """The payload merged into `info` key by key: nested dicts merged into the previous
    ones, ``meta.finished`` left out, ``codes.audio`` only as a 2-D tensor, and a
    ``codes`` that is not a dict not merged at all (CTA:629-654)."""
    for key, value in data.items():
        if key == "codes":
            if isinstance(value, dict):
                merged = dict(info.get(key) or {})
                merged.update((k, v) for k, v in value.items() if k != "audio" or tensor_codes)
                if merged:
                    info[key] = merged
        elif isinstance(value, dict):
            merged = dict(info.get(key) or {})
            merged.update((k, v) for k, v in value.items() if (key, k) != ("meta", "finished"))
            info[key] = merged
        else:
            info[key] = value


def expected_request(
    incarnation: int,
    registered_once: bool,
    committed: Iterable[tuple[int, Chunk]],
    *,
    generation_mode: bool,
    ships_cached_payloads: bool,
    tensor: Tensor,
) -> tuple[RequestView, Hashable]:
    """The request of `incarnation` once the chunks `committed` ((index, chunk)) were,
    each handed over and scheduled; and the ``additional_information`` last shipped.

    `registered_once`: ``load_async`` has run for it. A generation-mode commit
    makes the frames the prompt (a 2-D tensor as the placeholder ``[0]``, a
    boundary without frames as ``[0]``), merges the payload into
    ``additional_information`` (a full snapshot replaces it and becomes
    ``model_intermediate_buffer`` too) and refreshes ``num_prompt_tokens``; a
    finished chunk makes the request not resumable (CTA:597-675). An AR-mode
    commit leaves the payload (its ``meta`` a dict with
    ``streaming_prompt_recompute`` off) for the scheduler, whose next cycle makes
    it the request's ``additional_information`` (CTA:1230-1250). Where the
    scheduler ships cached payloads, a request scheduled again (every chunk after
    the first) gives its ``additional_information`` to the output (CTA:1504-1515);
    the cycle after the finished chunk clears it (CTA:1394-1396).
    """
    info: Any = initial_info(incarnation)
    if info == MISSING and registered_once:
        info = None
    prompt: list[int] = [1, 2, 3]
    buffer: Any = None
    shipped: Any = None
    resumable = True
    for index, chunk in committed:
        if chunk.kind == FINISHED:
            resumable = False
        data = payload(chunk, index, tensor)
        if not generation_mode:
            meta = data["meta"] if isinstance(data["meta"], dict) else {}
            meta["streaming_prompt_recompute"] = False
            data["meta"] = meta
            info = data
        else:
            info, prompt, buffer = _generation_commit(chunk, data, info, buffer)
        if ships_cached_payloads and index > 0 and info:
            shipped, info = info, None
        if chunk.kind == FINISHED:
            info = None  # the next cycle finds it done receiving (CTA:1394-1396)
    view = RequestView(tuple(prompt), len(prompt), freeze(info), freeze(buffer), resumable)
    return view, freeze(shipped)


def _generation_commit(
    chunk: Chunk, data: dict[str, Any], info: Any, buffer: Any
) -> tuple[Any, list[int], Any]:
    """(``additional_information``, prompt, ``model_intermediate_buffer``) after a
    generation-mode commit of `data` (see `expected_request`)."""
    audio = data.get("codes", {}).get("audio")
    tensor_codes = hasattr(audio, "ndim") and audio.ndim >= 2
    if tensor_codes:
        prompt = [0]
    elif hasattr(audio, "tolist"):
        prompt = list(audio.tolist())
    else:
        prompt = list(audio or [])
    meta = data["meta"] if isinstance(data["meta"], dict) else {}
    data["meta"] = meta
    snapshot = meta.get("replace_runtime_additional_information") is True
    info = {} if snapshot else dict(info) if isinstance(info, dict) else {}
    _merge(info, data, tensor_codes)
    if snapshot:
        buffer = info
    if not prompt and chunk.kind == SEGMENT_END:
        prompt = [0]
    return info, prompt, buffer


def observed_request(request: Any) -> RequestView:
    """The same fields, read off the real request."""
    return RequestView(
        tuple(request.prompt_token_ids),
        request.num_prompt_tokens,
        freeze(getattr(request, "additional_information", MISSING)),
        freeze(request.model_intermediate_buffer),
        bool(request.resumable),
    )
