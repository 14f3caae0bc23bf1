"""The checked chunk-transfer adapter against vLLM-Omni 0.30.0's, side by side.

Two measurements (needs the real stack: ``tox -e vllm`` or
``bash scripts/install-vllm-stack.sh``):

* **Hot path** (default): ``save_async`` and the save thread's send of that
  task, on the same non-blocking connector and the same processor, for
  0.30.0's ``OmniChunkTransferAdapter`` and `CheckedChunkTransferAdapter`.
  Three workloads a server has: a streaming request's chunks (one request,
  token counts that never repeat), a segment end followed by the next
  segment's chunk, and whole short requests (a fresh external id each: first
  save, terminal, cleanup and reclaim). CPU µs per cycle, best of
  ``--repeat`` short rounds that alternate between the two, and the ratio checked / 0.30.0.
* **On shared memory** (``--connector shm``): the same, on vLLM-Omni's real
  ``SharedMemoryConnector`` (each put serialises the payload into ``/dev/shm``;
  the segments a round leaves are unlinked after it, outside the timing), for
  the overhead a server on one host sees.
* **Python instructions** (``--instructions``): the bytecode instructions each
  cycle executes, counted by the interpreter's tracer. Unlike CPU time, the
  count does not move with the machine's load, so it tells a change of the
  code from noise; it leaves out time spent in C (``torch.tensor``, locks).
* **Where they run** (``--breakdown``): the same count by place: the adapter's
  own methods (0.30.0's, or the overrides), the watermark's runtime form, the
  checked sender's holders of the machines (`checked_sender`), the runtime's
  fires and instances, and what both share (the workload, vLLM, the stdlib).
* **Soak** (``--soak``): ``statecore fuzz chunk_transfer --adapter
  vllm-omni-checked`` for ``--seeds`` seeds of ``--budget`` seconds each, and
  the findings of each (the binding's one known finding, 0.30.0's connector
  keys, allowed: ``vllm_omni_checked.KNOWN``), with the known properties each
  met (a property violated on a path after the known one, as an overwritten
  terminal that is never delivered, is the engine's known consequence).

Run: ``python benchmarks/checked_adapter.py [--cycles N] [--repeat R] [--connector shm]
[--instructions | --breakdown]``
and ``python benchmarks/checked_adapter.py --soak [--seeds 10] [--budget 60]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from statecore.models.bindings import vllm_omni_harness as harness
from statecore.models.bindings.vllm_omni import real_classes
from statecore.models.bindings.vllm_omni_harness import STAGE_ID, stop_threads
from statecore.models.implementations.checked_chunk_transfer import checked_adapter_class


def connector_class() -> type[Any]:
    """A connector whose put returns at once and keeps nothing (the cost is the adapter's)."""
    import importlib

    base = importlib.import_module(
        "vllm_omni.distributed.omni_connectors.connectors.base"
    ).OmniConnectorBase

    class Instant(base):  # type: ignore[misc, valid-type]
        stage_id = STAGE_ID

        def put(self, from_stage: str, to_stage: str, put_key: str, data: Any) -> Any:
            return True, 1, None

        def get(self, *args: Any, **kwargs: Any) -> Any:
            return None

        def cleanup(self, request_id: str) -> None:
            pass

        def health(self) -> dict[str, Any]:
            return {"status": "ok"}

        def close(self) -> None:
            pass

    return Instant


def shm_connector_class() -> type[Any]:
    """The real ``SharedMemoryConnector``, remembering its keys so a round can unlink them."""
    import importlib

    base = importlib.import_module(
        "vllm_omni.distributed.omni_connectors.connectors.shm_connector"
    ).SharedMemoryConnector

    class Remembering(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__({"stage_id": STAGE_ID})
            self.keys: list[str] = []

        def put(self, from_stage: str, to_stage: str, put_key: str, data: Any) -> Any:
            self.keys.append(put_key)
            return super().put(from_stage, to_stage, put_key, data)

        def unlink_all(self) -> None:
            for key in self.keys:
                self.cleanup(key)
            self.keys.clear()

    return Remembering


CONNECTORS = {"instant": connector_class, "shm": shm_connector_class}


def build(base: type[Any], connector: str = "instant") -> Any:
    """An adapter of class `base` on the `connector`, its threads stopped."""
    from types import SimpleNamespace

    make = CONNECTORS[connector]()

    class OnConnector(base):  # type: ignore[misc, valid-type]
        @classmethod
        def create_connector(cls, model_config: Any) -> Any:
            return make()

    model_config = SimpleNamespace(
        stage_id=STAGE_ID,
        async_chunk=True,
        worker_type="ar",
        max_model_len=4096,
        stage_connector_config={"name": "Instant", "extra": {"role": "sender"}},
        custom_process_next_stage_input_func=None,
    )
    config = SimpleNamespace(
        model_config=model_config, scheduler_config=SimpleNamespace(max_num_seqs=8)
    )
    adapter = OnConnector(config)
    stop_threads(adapter)
    classes = real_classes()

    def processor(transfer_manager: Any, multimodal_output: Any, request: Any, **kw: Any) -> Any:
        transfer_manager.request_payload.setdefault(request.external_req_id, {})
        return classes.payload(request_id=request.request_id, generated_len=1)

    adapter.custom_process_next_stage_input_func = processor
    return adapter


def new_request(request_id: str, ext: str, classes: Any = None) -> Any:
    request = harness.new_request(classes or real_classes(), request_id, ext, "RUNNING")
    request._omni_segment_generation = 0
    return request


def send_all(adapter: Any) -> None:
    queue = adapter._pending_save_reqs
    while queue:
        adapter._send_single_request(queue.popleft())


def streaming_chunks(adapter: Any, cycles: int) -> None:
    """One request saving chunk after chunk, each with a higher token count."""
    request = new_request("r-stream", "stream")
    for i in range(cycles):
        request.num_computed_tokens = i + 1
        adapter.save_async(None, request)
        send_all(adapter)


def segments(adapter: Any, cycles: int) -> None:
    """A segment end, then the next segment's first chunk."""
    request = new_request("r-seg", "seg")
    for i in range(cycles):
        request.num_computed_tokens = 1
        adapter.save_async(None, request, is_segment_finished=True)
        request._omni_segment_generation = i + 1
        adapter.save_async(None, request)
        send_all(adapter)


def whole_requests(adapter: Any, cycles: int) -> None:
    """A fresh external id each: a chunk, the terminal, cleanup and reclaim."""
    classes = real_classes()
    status = classes.status.FINISHED_STOPPED
    for i in range(cycles):
        request = new_request(f"r{i}", f"e{i}", classes)
        request.num_computed_tokens = 1
        adapter.save_async(None, request)
        request.status = status
        request.num_computed_tokens = 2
        adapter.save_async(None, request)
        send_all(adapter)


WORKLOADS: dict[str, tuple[Callable[[Any, int], None], int]] = {
    "streaming chunk": (streaming_chunks, 1),
    "segment end + chunk": (segments, 2),
    "whole request": (whole_requests, 2),
}
"""Workload -> (run, saves per cycle)."""


Run = Callable[[Any, int], None]


def per_cycle(base: type[Any], run: Run, cycles: int, connector: str) -> float:
    """CPU µs per cycle of one round on a fresh adapter of class `base`."""
    adapter = build(base, connector)
    gc.collect()  # each round starts from the same collector state
    start = time.process_time()
    run(adapter, cycles)
    spent = time.process_time() - start
    unlink = getattr(adapter.connector, "unlink_all", None)
    if unlink is not None:
        unlink()
    adapter.shutdown()
    return spent / cycles * 1e6


def hot_path(cycles: int, repeat: int, connector: str) -> None:
    classes = real_classes()
    released, checked = classes.adapter, checked_adapter_class(classes.adapter)
    print(
        f"CPU µs per cycle on the {connector} connector, best of {repeat} rounds of "
        f"{cycles:,} cycles (lower is better)"
    )
    print(f"{'workload':<22}{'0.30.0':>10}{'checked':>10}{'ratio':>8}{'median':>8}")
    ratios = []
    for name, (run, _saves) in WORKLOADS.items():
        # The rounds alternate, so a change in the machine's load hits both alike.
        rounds = [
            tuple(per_cycle(cls, run, cycles, connector) for cls in (released, checked))
            for _ in range(repeat)
        ]
        base_us = min(r[0] for r in rounds)
        checked_us = min(r[1] for r in rounds)
        paired = statistics.median(c / b for b, c in rounds)
        ratios.append(checked_us / base_us)
        print(
            f"{name:<22}{base_us:>10.1f}{checked_us:>10.1f}{checked_us / base_us:>8.2f}"
            f"{paired:>8.2f}"
        )
    print("(ratio: of the best rounds; median: of the ratios of rounds run back to back)")
    print(f"RESULT worst_ratio={max(ratios):.2f}")


def instructions(cycles: int) -> None:
    """Bytecode instructions per cycle, 0.30.0 and checked, per workload."""
    classes = real_classes()
    released, checked = classes.adapter, checked_adapter_class(classes.adapter)
    print(f"Python instructions per cycle, over {cycles:,} cycles (lower is better)")
    print(f"{'workload':<22}{'0.30.0':>10}{'checked':>10}{'ratio':>8}")
    for name, (run, _saves) in WORKLOADS.items():
        base_n, checked_n = (counted(cls, run, cycles) for cls in (released, checked))
        print(f"{name:<22}{base_n:>10.0f}{checked_n:>10.0f}{checked_n / base_n:>8.2f}")


def counted(base: type[Any], run: Callable[[Any, int], None], cycles: int) -> float:
    """Instructions per cycle of `run` on an adapter of class `base` (after a warm-up round)."""
    return sum(by_place(base, run, cycles).values())


PLACES = {
    "statecore/runtime.py": "runtime: fires",
    "statecore/memo.py": "runtime: fires",
    "statecore/semantics.py": "runtime: fires",
    "weakref.py": "runtime: fires",
    "models/segment_watermark_runtime.py": "watermark",
    "models/segment_watermark.py": "watermark",
    "implementations/checked_sender.py": "machine holders",
    "implementations/checked_chunk_transfer.py": "adapter",
    "transfer_adapter/chunk_transfer_adapter.py": "adapter",
}
"""Where an instruction runs, by the end of its file's path (anything else: "shared")."""


def place_of(filename: str) -> str:
    return next((p for end, p in PLACES.items() if filename.endswith(end)), "shared")


def by_place(base: type[Any], run: Callable[[Any, int], None], cycles: int) -> dict[str, float]:
    """Instructions per cycle of `run` on an adapter of class `base`, by `place_of`.

    A warm-up round first fills the memo, as a running server's is.
    """
    run(build(base), cycles)
    adapter = build(base)
    counts: dict[str, int] = {}
    places: dict[str, str] = {}

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            filename = frame.f_code.co_filename
            place = places.get(filename) or places.setdefault(filename, place_of(filename))
            counts[place] = counts.get(place, 0) + 1
        return trace

    sys.settrace(trace)
    try:
        run(adapter, cycles)
    finally:
        sys.settrace(None)
    adapter.shutdown()
    return {place: n / cycles for place, n in counts.items()}


def breakdown(cycles: int) -> None:
    """Where each workload's instructions run, 0.30.0 and checked side by side."""
    classes = real_classes()
    released, checked = classes.adapter, checked_adapter_class(classes.adapter)
    order = ["adapter", "watermark", "machine holders", "runtime: fires", "shared"]
    print(f"Python instructions per cycle by place, over {cycles:,} cycles")
    for name, (run, _saves) in WORKLOADS.items():
        base_n, checked_n = (by_place(cls, run, cycles) for cls in (released, checked))
        print(f"{name}")
        for place in order:
            b, c = base_n.get(place, 0.0), checked_n.get(place, 0.0)
            print(f"  {place:<20}{b:>10.0f}{c:>10.0f}{c - b:>+10.0f}")
        b, c = sum(base_n.values()), sum(checked_n.values())
        print(f"  {'total':<20}{b:>10.0f}{c:>10.0f}{c - b:>+10.0f}")


def soak(seeds: int, budget: float) -> None:
    adapter = "--adapter vllm-omni-checked"
    print(f"statecore fuzz chunk_transfer {adapter}, {budget:g} s per seed")
    print(f"{'seed':>4}{'examples':>10}{'steps':>9}{'seconds':>9}  result")
    found = 0
    for seed in range(seeds):
        command = [
            sys.executable, "-m", "statecore", "fuzz", "chunk_transfer",
            "--adapter", "vllm-omni-checked", "--json",
            "--budget", str(budget), "--seed", str(seed),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        report = json.loads(done.stdout[done.stdout.find("{") :])
        finding = report.get("finding")
        found += finding is not None
        result = "no finding" if finding is None else f"FOUND {finding.get('property')}"
        known = ", ".join(sorted(report.get("known", {}))) or "none"
        print(
            f"{seed:>4}{report['examples']:>10}{report['steps']:>9}"
            f"{report['seconds']:>9.1f}  {result}; known: {known} (exit {done.returncode})"
        )
    print(f"RESULT seeds={seeds} findings={found}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=25)
    parser.add_argument("--connector", choices=sorted(CONNECTORS), default="instant")
    parser.add_argument(
        "--instructions", action="store_true", help="count bytecode instructions per cycle"
    )
    parser.add_argument(
        "--breakdown", action="store_true", help="instructions per cycle by where they run"
    )
    parser.add_argument("--soak", action="store_true", help="fuzz seeds instead of timing")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=float, default=60.0)
    args = parser.parse_args()
    if args.soak:
        soak(args.seeds, args.budget)
    elif args.breakdown:
        breakdown(args.cycles)
    elif args.instructions:
        instructions(args.cycles)
    else:
        hot_path(args.cycles, args.repeat, args.connector)


if __name__ == "__main__":
    main()
