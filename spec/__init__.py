"""The properties the vLLM-Omni lifecycle models must keep (`statecore.spec`)."""
