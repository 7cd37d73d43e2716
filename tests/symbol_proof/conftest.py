"""The symbol proof builds a copy of the repository (slow): `cargo xtask
symbol-proof` runs this directory on its own, after `cargo xtask setup`."""
