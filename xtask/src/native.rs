//! Building the probe, smoke and simulated driver (owned by the probe work).
