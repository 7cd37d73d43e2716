//! JSON text exactly as Python writes `json.dumps(value, indent=2,
//! sort_keys=True) + "\n"`: serde_json's pretty form (two-space indent,
//! `": "` between key and value; its maps are sorted by key) with Python's
//! `ensure_ascii` escapes for everything outside printable ASCII.

use serde_json::Value;

use crate::Result;

pub fn to_python_json(value: &Value) -> Result<Vec<u8>> {
    let pretty = serde_json::to_string_pretty(value).map_err(|error| error.to_string())?;
    let mut out = String::with_capacity(pretty.len() + 1);
    for c in pretty.chars() {
        // serde_json already escapes the control characters as Python does;
        // outside strings the text is ASCII.
        if c == '\u{7f}' || !c.is_ascii() {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out.push('\n');
    Ok(out.into_bytes())
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
