//! Simulated CUDA driver for tests (being built).
