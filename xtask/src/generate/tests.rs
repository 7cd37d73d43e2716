//! Generator tests.
