//! JSON text exactly as Python writes `json.dumps(value, indent=2,
//! sort_keys=True) + "\n"`, independent of serde_json's map order features.

use serde_json::Value;

use crate::Result;

pub fn to_python_json(value: &Value) -> Result<Vec<u8>> {
    let mut out = String::new();
    write(&mut out, value, 0)?;
    out.push('\n');
    Ok(out.into_bytes())
}

fn write(out: &mut String, value: &Value, depth: usize) -> Result<()> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        Value::Number(number) => {
            // Python and Rust spell some floats differently; the outputs have none.
            if !(number.is_i64() || number.is_u64()) {
                return Err(format!(
                    "internal error: float {number} in a JSON output is not supported"
                ));
            }
            out.push_str(&number.to_string());
        }
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                out.push_str(if index == 0 { "\n" } else { ",\n" });
                push_indent(out, depth + 1);
                write(out, item, depth + 1)?;
            }
            out.push('\n');
            push_indent(out, depth);
            out.push(']');
        }
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                out.push_str(if index == 0 { "\n" } else { ",\n" });
                push_indent(out, depth + 1);
                write_string(out, key);
                out.push_str(": ");
                write(out, &map[key.as_str()], depth + 1)?;
            }
            out.push('\n');
            push_indent(out, depth);
            out.push('}');
        }
    }
    Ok(())
}

fn push_indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// Python's `ensure_ascii=True` escaping: everything outside printable
/// ASCII becomes `\uXXXX` (UTF-16 units), with the short escapes Python uses.
fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            other => {
                let mut units = [0u16; 2];
                for unit in other.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_python_json_dumps() {
        // json.dumps({"b": [], "a": {"y": [1, None], "x": "é\x7f\"𝄞"}, "c": {}},
        //            indent=2, sort_keys=True)
        let value = serde_json::json!({"b": [], "a": {"y": [1, null], "x": "é\u{7f}\"𝄞"}, "c": {}});
        let expected = "{\n  \"a\": {\n    \"x\": \"\\u00e9\\u007f\\\"\\ud834\\udd1e\",\n    \
                        \"y\": [\n      1,\n      null\n    ]\n  },\n  \"b\": [],\n  \"c\": {}\n}\n";
        assert_eq!(
            String::from_utf8(to_python_json(&value).unwrap()).unwrap(),
            expected
        );
    }
}
