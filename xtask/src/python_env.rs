//! The project's Python virtual environment (owned by the Python provider work).
