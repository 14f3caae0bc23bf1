"""Why the reference chunk-transfer system leaves some transitions untaken and some
single-point mutants undetected: each entry names the transition or mutant and says why.

`UNTAKEN_IN_REFERENCE` is the watermark component's ``untaken`` declaration;
`EQUIVALENT_MUTANTS` is the system's ``equivalent_mutants`` (mutant ids are a
function and its line of code: see `statecore.check.mutation`).
"""

from __future__ import annotations

UNTAKEN_IN_REFERENCE: dict[str, str] = {
    "open--save(late)-->open": "the reference judges a save only against its own "
    "request's watermarks, and within one request generations only grow",
    "open--save(replay)-->open": "token counts only grow within a segment and the "
    "segment end resets the watermark; nothing here re-runs a preempted step",
    "open--stamp-->(same)": "the reference refuses a reused id before save_async "
    "touches the watermarks",
    "open--unstamp-->(same)": "the reference judges a save under the sender lock, so "
    "nothing clears the watermarks between its late check and its admission",
}
"""Watermark transitions only 0.30.0's reuse and the variants take, and why."""

_UNTAKEN = "a transition the reference never takes (UNTAKEN_IN_REFERENCE)"
_RETIRED = "the generation is retired in the same step: its last snapshot is never read"
_GHOST = "a ghost no action reads; only the property it feeds reads it"
_KEYED = (
    "the reference's keys name the sender generation, so a new generation's keys never "
    "meet an old one's whatever chunk number its counter starts at"
)

EQUIVALENT_MUTANTS: dict[str, str] = {
    # The scheduler-side request.
    "drop-effect request.running--terminal-->terminal_saved": "the terminal's count only "
    "sets requests_num_chunks_sent, which no later save of the reference reads: the request "
    "saves nothing after its terminal, and a reused id is refused until the generation and "
    "its watermarks are gone",
    "drop-effect request.parked--next_segment-->running": "the segment end popped "
    "requests_num_chunks_sent, so the next segment's saves are admitted whatever count they "
    "carry, and nothing else reads the count",
    "skip-require next_segment: tx.require(request is not None and "
    'tx.fire(request, "next_segment").accepted)': "the fire is the action's only effect: "
    "where next_segment is rejected the step changes nothing",
    "skip-require abort: tx.require(request is not None and "
    "finish_requests(tx, request, isolate=isolate))": "where abort is not accepted the "
    "request is already aborted: its generation is cancelled, gone or another request's, "
    "and a second cleanup_sender changes nothing",
    # The sender generation.
    "drop-guard sender_generation.open|terminal_pending--begin-->(same)": "one save thread: "
    "a task begins only after the previous task's finally cleared in_flight, so the guard "
    "always holds at begin",
    "drop-guard sender_generation.draining--begin-->(same)": "the pre-put check "
    "(_sender_generation_is_active) vetoes the same chunk, so nothing more is put; its "
    "processor running first is what the reference does when the cancel lands while the "
    "chunk is in the processor",
    "drop-effect sender_generation.draining--end-->reclaimed": _RETIRED,
    "drop-effect sender_generation.retiring--end-->reclaimed": _RETIRED,
    "drop-guard sender_generation.retiring--end-->reclaimed": "a generation retires only "
    "while in flight, and only its running task's finally fires end: the guard always holds",
    # The segment watermarks: only the late and replay branches compare them.
    "drop-emit segment_watermark.open--save(late)-->open": _UNTAKEN,
    "drop-effect segment_watermark.open--save(replay)-->open": _UNTAKEN,
    "drop-emit segment_watermark.open--save(replay)-->open": _UNTAKEN,
    "drop-effect segment_watermark.open--stamp-->(same)": _UNTAKEN,
    "drop-effect segment_watermark.open--unstamp-->(same)": _UNTAKEN,
    "skip-require scheduler_idle: tx.require(tx.g.saving is None)": "the reference's "
    "scheduler is never inside save_async between two steps (it judges a save under the "
    "sender lock, in one step)",
    "drop-effect segment_watermark.open--save(admit)-->open": "the watermarks an admitted "
    "save records are compared only by the late and replay branches, which the reference "
    "never takes (UNTAKEN_IN_REFERENCE)",
    "drop-effect segment_watermark.open--save(segment end, advance)-->open": "the watermarks "
    "a segment end records are compared only by the late and replay branches, which the "
    "reference never takes (UNTAKEN_IN_REFERENCE)",
    # The producer state.
    "drop-effect request_state.open|failed--release-->released": _RETIRED,
    'skip-fire release_request_state: tx.fire(state, "release")': _RETIRED,
    "skip-put release_request_state: tx.put(made=frozenset(m for m in tx.g.made if m.state "
    "!= state))": "a made entry names a state generation: once it is retired no live handle "
    "equals it (read_state and request_state_retained compare generations)",
    'skip-fire record_send_failure: tx.fire(held, "send_failed")': "the reference's request "
    "state keeps its namespaces on send_failed, and open and failed accept the same events",
    'skip-fire put: tx.fire(state, "complete_segment")': "the reference's "
    "request state keeps request-wide state at a segment end: the transition changes nothing",
    # The connector-key counter.
    "drop-effect put_req_chunk.open--clear-->(same)": _KEYED,
    'skip-fire clear_sender_state: tx.fire(("put_req_chunk", ext), "clear")': _KEYED,
    # Ghosts and outputs only the spec reads.
    "skip-put queue_task: tx.put(owed=tx.g.owed | {Owed(request, call.number)})": _GHOST,
    "skip-put put: tx.put(error_markers=tx.g.error_markers | {request})": _GHOST,
    "skip-put record_send_failure: tx.put(failures=tx.g.failures | {request})": _GHOST,
    "skip-put scheduler_saves: tx.put(terminals=tx.g.terminals | {request})": "read "
    "only by terminal_delivered and by the deadline, which the reference never reaches: "
    "each terminal it saves is received or its request released",
    "skip-emit receive: tx.emit(": "the output feeds only the consumer "
    "monitors; no action reads it",
    'skip-emit release: tx.emit(out("released", request=request))': "the "
    "output feeds only the segment_order monitor, where at one save per request no read is "
    "out of order for it to excuse",
    # Steps that become self-loops.
    "skip-put drain_send_failures: tx.put(send_failures=frozenset())": "the "
    "undrained set changes nothing else: every later sweep finds its requests already "
    "failed and finished",
    "skip-put release: tx.put(failed=tx.g.failed - pending)": "every "
    "later release finds its requests already released, and the monitors ignore a second "
    "released",
    "skip-put put: tx.put(in_flight=InFlight(task, FINISHING, RAISED))": "a "
    "raising put becomes a self-loop (the task stays in connector.put): the mutant reaches "
    "no state the reference does not",
    "skip-require drain_send_failures: tx.require(collected)": "with nothing "
    "collected the sweep changes nothing: a self-loop",
    "skip-require release: tx.require(pending)": "with nothing pending the "
    "release changes nothing: a self-loop",
    "skip-require deadline: tx.require(starved)": "with no starved consumer "
    "the deadline changes nothing: a self-loop",
    "negate-require deadline: tx.require(starved)": "the reference never "
    "starves a consumer, so the deadline only runs where nothing is starved, and there it "
    "changes nothing",
}
"""Mutants of the reference that behave like it (``statecore check --adequacy``), and why."""
