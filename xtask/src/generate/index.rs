//! `generated/index.json`: every other generated file → its SHA-256. JSON
//! cannot carry a comment, so the generator note is the `generated_by` field.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::json::to_python_json;
use super::Output;
use crate::Result;

pub const GENERATED_BY: &str = "cargo xtask generate";

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

pub fn index(outputs: &[Output]) -> Result<Vec<u8>> {
    let mut files = Map::new();
    for output in outputs {
        files.insert(
            output.path.clone(),
            Value::String(sha256_hex(&output.bytes)),
        );
    }
    let mut root = Map::new();
    root.insert("files".to_string(), Value::Object(files));
    root.insert(
        "generated_by".to_string(),
        Value::String(format!(
            "{GENERATED_BY} from templates/; do not edit (check with `cargo xtask generate --check`)"
        )),
    );
    to_python_json(&Value::Object(root))
}
