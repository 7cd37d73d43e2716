//! `generated/index.json`: every other generated file → its SHA-256. JSON
//! cannot carry a comment, so the generator note is the `generated_by` field.
//! serde_json's pretty form of these ASCII paths and digests is also what
//! Python's `json.dumps(indent=2, sort_keys=True)` writes.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::Output;
use crate::Result;

pub const GENERATED_BY: &str = "cargo xtask generate";

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

pub fn index(outputs: &[Output]) -> Result<Vec<u8>> {
    let files = outputs
        .iter()
        .map(|item| (item.path.clone(), sha256_hex(&item.bytes).into()));
    let note = "from templates/; do not edit (check with `cargo xtask generate --check`)";
    let files: Map<String, Value> = files.collect();
    let root = json!({ "files": files, "generated_by": format!("{GENERATED_BY} {note}") });
    let text = serde_json::to_string_pretty(&root).map_err(|error| error.to_string())?;
    Ok((text + "\n").into_bytes())
}
