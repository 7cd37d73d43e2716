//! The reviewed driver loader (being built).
