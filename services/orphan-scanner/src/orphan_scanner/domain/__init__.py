"""The orphan-scanner domain core: limits, classification, the safety gate, input rules. No I/O."""
