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
* **Soak** (``--soak``): ``statecore fuzz chunk_transfer --adapter
  vllm-omni-checked --no-known`` for ``--seeds`` seeds of ``--budget``
  seconds each, and the findings of each.

Run: ``python benchmarks/checked_adapter.py [--cycles N] [--repeat R]``
and ``python benchmarks/checked_adapter.py --soak [--seeds 10] [--budget 60]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


def build(base: type[Any]) -> Any:
    """An adapter of class `base` on the instant connector, its threads stopped."""
    from types import SimpleNamespace

    class OnInstant(base):  # type: ignore[misc, valid-type]
        @classmethod
        def create_connector(cls, model_config: Any) -> Any:
            return connector_class()()

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
    adapter = OnInstant(config)
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


def per_cycle(base: type[Any], run: Callable[[Any, int], None], cycles: int) -> float:
    """CPU µs per cycle of one round on a fresh adapter of class `base`."""
    adapter = build(base)
    gc.collect()  # each round starts from the same collector state
    start = time.process_time()
    run(adapter, cycles)
    spent = time.process_time() - start
    adapter.shutdown()
    return spent / cycles * 1e6


def hot_path(cycles: int, repeat: int) -> None:
    classes = real_classes()
    released, checked = classes.adapter, checked_adapter_class(classes.adapter)
    print(f"CPU µs per cycle, best of {repeat} rounds of {cycles:,} cycles (lower is better)")
    print(f"{'workload':<22}{'0.30.0':>10}{'checked':>10}{'ratio':>8}")
    ratios = []
    for name, (run, _saves) in WORKLOADS.items():
        # The rounds alternate, so a change in the machine's load hits both alike.
        rounds = [(per_cycle(released, run, cycles), per_cycle(checked, run, cycles))]
        rounds += [(per_cycle(released, run, cycles), per_cycle(checked, run, cycles))
                   for _ in range(repeat - 1)]  # fmt: skip
        base_us = min(r[0] for r in rounds)
        checked_us = min(r[1] for r in rounds)
        ratios.append(checked_us / base_us)
        print(f"{name:<22}{base_us:>10.1f}{checked_us:>10.1f}{checked_us / base_us:>8.2f}")
    print(f"RESULT worst_ratio={max(ratios):.2f}")


def soak(seeds: int, budget: float) -> None:
    adapter = "--adapter vllm-omni-checked --no-known"
    print(f"statecore fuzz chunk_transfer {adapter}, {budget:g} s per seed")
    print(f"{'seed':>4}{'examples':>10}{'steps':>9}{'seconds':>9}  result")
    found = 0
    trace_dir = tempfile.mkdtemp(prefix="statecore-soak-")
    for seed in range(seeds):
        command = [
            sys.executable, "-m", "statecore", "fuzz", "chunk_transfer",
            "--adapter", "vllm-omni-checked", "--no-known", "--json",
            "--budget", str(budget), "--seed", str(seed), "--trace-out", trace_dir,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        report = json.loads(done.stdout[done.stdout.find("{") :])
        finding = report.get("finding")
        found += finding is not None
        result = "no finding" if finding is None else f"FOUND {finding.get('property')}"
        print(
            f"{seed:>4}{report['examples']:>10}{report['steps']:>9}"
            f"{report['seconds']:>9.1f}  {result} (exit {done.returncode})"
        )
    print(f"RESULT seeds={seeds} findings={found}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=25)
    parser.add_argument("--soak", action="store_true", help="fuzz seeds instead of timing")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=float, default=60.0)
    args = parser.parse_args()
    if args.soak:
        soak(args.seeds, args.budget)
    else:
        hot_path(args.cycles, args.repeat)


if __name__ == "__main__":
    main()
