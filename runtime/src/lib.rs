//! rextio-cuda-runtime (being built).
