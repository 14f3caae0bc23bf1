"""The properties vLLM-Omni 0.30.0 is known to violate, with the reason.

The ``vllm-omni`` bindings declare them as known when they fuzz the real
adapter (`statecore.models.bindings.vllm_omni`); ``--no-known`` reports them.
"""

from __future__ import annotations

from collections.abc import Mapping

KNOWN_0_30_0: Mapping[str, str] = {
    "chunk_delivered": (
        "a processor exception on a non-terminal chunk is only logged: nothing is put and no "
        "failure is recorded (CTA:801-806), so the consumer never gets that chunk and the "
        "request goes on as if it had been sent"
    ),
    "processor_failure_visible": (
        "a processor exception on a segment end or terminal is only logged; the boundary "
        "still goes out as an empty marker (CTA:801-809), which the consumer reads as a "
        "normal one and the seed 000 contract forbids"
    ),
    "terminal_delivered": (
        "a terminal that never goes out leaves the consumer to VLLM_OMNI_INPUT_WAIT_TIMEOUT_S: "
        "a failed terminal put (False or raising) is only recorded and "
        "_log_failed_chunk_sends only logs it (omni_scheduler_mixin.py:482-521), and a reused "
        "id's terminal is skipped as late while the old generation drains (CTA:412-430)"
    ),
    "failure_releases_consumer": (
        "recorded send failures are only logged by the scheduler, never turned into a "
        "request failure (omni_scheduler_mixin.py:482-521): the consumer is left to its "
        "input deadline"
    ),
    "no_current_save_dropped": (
        "a request that reuses an external id after a failed terminal is judged against "
        "the old request's watermarks: save_async skips its saves as late or as preemption "
        "replays, silently (CTA:412-463)"
    ),
    "reuse_isolation": (
        "a request that reuses an external id joins the old sender generation, and its "
        "processor reads the old request's request_payload (CTA:447-469)"
    ),
    "segment_order": (
        "a segment end whose put fails is only recorded; the next segment's chunks follow "
        "under the same connector key, so the consumer reads them as the old segment's"
    ),
    "no_sender_leak": (
        "a failed terminal (put False or raising) releases the fence but keeps the sender "
        "state until some finish_requests for the right external id (CTA:717-729, 883-900)"
    ),
    "no_unread_overwrite": (
        "connector keys are '{ext}_{stage}_{chunk}' (CTA:777-778) and the sender state's "
        "clear pops put_req_chunk (CTA:1031): after a successful terminal, a request reusing "
        "the external id puts under key 0 again, over the old request's unread puts"
    ),
}
"""Properties vLLM-Omni 0.30.0 is known to violate, with the reason."""
