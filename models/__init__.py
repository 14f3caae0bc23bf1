"""The vLLM-Omni lifecycle machines and composed systems (`statecore.models`)."""
