//! Unit tests against an in-test fake driver (being written).
