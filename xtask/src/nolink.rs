//! Proof that nothing links to cuda/nvcuda (owned by the generator work).
