//! The generated Python: `_provider_spec.py` (the spec's record classes and
//! `PROVIDER_SPEC`), `_reason_codes.py`, `_generated.py` and pyproject.toml.
//! Laid out as black would: what fits in 100 columns on one line is one line;
//! otherwise one item a line, or, for scalars only, as many as fit.

use serde_json::Value;

use super::inputs::{Inputs, PROVIDER_SPEC_PATH, PYPROJECT_TEMPLATE_PATH};
use super::spec::{entries, item_type, schema, Class, Field};
use crate::Result;

const MAX_LINE: usize = 100;
const INDENT: &str = "    ";

/// A Python expression: a literal, a string, or a container / keyword call
/// (its opening, then `label` + item each, then its closing).
#[derive(Clone, Debug, PartialEq)]
pub enum Py {
    Atom(String),
    Str(String),
    Seq(String, &'static str, Vec<(String, Py)>),
}

/// A spec value of the annotation `ty` as Python.
pub fn expr(ty: &str, value: &Value) -> Py {
    let ty = ty.trim_end_matches(" | None");
    let atom = |text: &str| Py::Atom(text.into());
    let set = ty.starts_with("frozenset[");
    let class = schema().iter().find(|class| class.0 == ty);
    if let (Some(Class(name, _, fields)), false) = (class, value.is_null()) {
        let field = |(key, ty, ..): &Field| (format!("{key}="), expr(ty, &value[key]));
        return Py::Seq(format!("{name}("), ")", fields.iter().map(field).collect());
    }
    let items = |list: &[Value]| {
        let item = |(index, v)| (String::new(), expr(item_type(ty, index), v));
        list.iter().enumerate().map(item).collect()
    };
    match value {
        Value::Null => atom("None"),
        Value::Bool(value) => atom(if *value { "True" } else { "False" }),
        // Debug spells the shortest round-trip form with a `.0` or an exponent.
        Value::Number(n) if ty == "float" => Py::Atom(format!("{:?}", n.as_f64().unwrap_or(0.0))),
        Value::Number(n) => Py::Atom(n.to_string()),
        Value::String(text) => Py::Str(text.clone()),
        Value::Array(list) if !set => Py::Seq("(".into(), ")", items(list)),
        Value::Array(list) if list.is_empty() => atom("frozenset()"),
        Value::Array(list) => Py::Seq("frozenset({".into(), "})", items(list)),
        Value::Object(map) => {
            let entry = |(k, v): (&String, _)| (literal(k) + ": ", expr(item_type(ty, 0), v));
            Py::Seq("{".into(), "}", map.iter().map(entry).collect())
        }
    }
}

impl Py {
    /// The one-line form.
    fn flat(&self) -> String {
        let (open, close, items) = match self {
            Py::Atom(text) => return text.clone(),
            Py::Str(text) => return literal(text),
            Py::Seq(open, close, items) => (open, close, items),
        };
        let items: Vec<String> = items.iter().map(|(l, v)| l.clone() + &v.flat()).collect();
        let one = open == "(" && items.len() == 1;
        let comma = if one { "," } else { "" };
        format!("{open}{}{comma}{close}", items.join(", "))
    }
}

fn width(text: &str) -> usize {
    text.chars().count()
}

/// Writes `prefix` + `expr` + `suffix` at `depth`: on one line where that
/// fits in 100 columns, else one item a line, scalars (but a dict's) filling
/// their lines, a long string split into adjacent literals.
pub fn write(out: &mut String, depth: usize, prefix: &str, expr: &Py, suffix: &str) {
    let indent = INDENT.repeat(depth);
    let line = format!("{indent}{prefix}{}{suffix}\n", expr.flat());
    match expr {
        _ if width(&line) <= MAX_LINE + 1 => out.push_str(&line),
        Py::Seq(open, close, items) => {
            out.push_str(&format!("{indent}{prefix}{open}\n"));
            let nested = items.iter().any(|(_, item)| matches!(item, Py::Seq(..)));
            let fill = !open.starts_with('{') && !nested;
            // Whether the last line written is a line of scalars with room.
            let mut filling = false;
            for (label, item) in items {
                let text = format!("{label}{},", item.flat());
                let last = out.trim_end_matches('\n').rsplit('\n').next().unwrap_or("");
                if filling && width(last) + 1 + width(&text) <= MAX_LINE {
                    out.insert_str(out.len() - 1, &format!(" {text}"));
                } else if fill && width(&indent) + width(INDENT) + width(&text) <= MAX_LINE {
                    out.push_str(&format!("{indent}{INDENT}{text}\n"));
                    filling = true;
                } else {
                    write(out, depth + 1, label, item, ",");
                    filling = false;
                }
            }
            out.push_str(&format!("{indent}{close}{suffix}\n"));
        }
        // A sequence item: adjacent literals, a piece a line.
        Py::Str(text) if prefix.is_empty() => {
            let max = MAX_LINE.saturating_sub(width(&indent) + width(suffix));
            for piece in split_for_width(text, max) {
                out.push_str(&format!("{indent}{}\n", literal(&piece)));
            }
            out.insert_str(out.len() - 1, suffix);
        }
        Py::Str(_) => {
            out.push_str(&format!("{indent}{prefix}(\n"));
            write(out, depth + 1, "", expr, "");
            out.push_str(&format!("{indent}){suffix}\n"));
        }
        // Scalars are short; an over-long line here is only its key's fault.
        Py::Atom(_) => out.push_str(&line),
    }
}

/// The first line of a generated Python file, naming its inputs, and its docstring.
pub fn header(inputs: &str, doc: &str) -> String {
    let marker = format!("# @generated by `cargo xtask generate` from {inputs}; do not edit.");
    format!("{marker}\n\"\"\"{doc}\"\"\"\n\n")
}

/// `_provider_spec.py`: a record class per schema class, `PROVIDER_SPEC` and
/// the capabilities by id.
pub fn spec_module(spec: &Value) -> Vec<u8> {
    let doc = "The provider spec as frozen records; the schema is xtask/src/generate/spec.rs.";
    let mut out = header(PROVIDER_SPEC_PATH, doc);
    out.push_str(
        "from __future__ import annotations\n\n\
         from collections.abc import Mapping\n\
         from typing import Final\n\n\
         from rextio_device_cuda._record import Record\n",
    );
    for Class(name, doc, fields) in schema() {
        let class = format!("class {name}(Record):\n{INDENT}\"\"\"{doc}\"\"\"");
        out.push_str(&format!("\n\n{class}\n"));
        for (name, ty, _, comment) in fields {
            out.push_str(&format!("{INDENT}{name}: {ty}{comment}\n"));
        }
    }
    out.push_str("\n\n");
    let prefix = "PROVIDER_SPEC: Final[ProviderSpec] = ";
    write(&mut out, 0, prefix, &expr("ProviderSpec", spec), "");
    out.push_str(
        "CAPABILITIES: Final[Mapping[str, CapabilitySpec]] = {\n\
         \x20   capability.id: capability for capability in PROVIDER_SPEC.capabilities\n\
         }\n",
    );
    out.into_bytes()
}

/// `_generated.py`: the packaged runtime tarball's name and digest.
pub fn module(archive_name: &str, archive_sha256: &str) -> Vec<u8> {
    let doc = "The packaged runtime source's file name and SHA-256 (data only).";
    let (name, digest) = (literal(archive_name), literal(archive_sha256));
    let mut out = header("templates/", doc) + "from typing import Final\n\n";
    out.push_str(&format!("RUNTIME_SOURCE_ARCHIVE: Final[str] = {name}\n"));
    out.push_str(&format!("RUNTIME_SOURCE_SHA256: Final = {digest}\n"));
    out.into_bytes()
}

/// `_reason_codes.py`: a name for every reason code the provider's Python
/// spells (all but the framework lanes', which it builds from their prefix).
pub fn reason_codes(spec: &Value) -> Vec<u8> {
    let doc = "The reason codes, one name each (the lanes' codes are built from their prefix).";
    let mut out = header(PROVIDER_SPEC_PATH, doc) + "from typing import Final\n\n";
    let prefixes = entries(&spec["lanes"]).filter_map(|(_, lane)| lane["reason_prefix"].as_str());
    let prefixes: Vec<&str> = prefixes.collect();
    for (code, _) in entries(&spec["reason_codes"]) {
        if !prefixes.iter().any(|prefix| code.starts_with(prefix)) {
            out.push_str(&format!("{code}: Final = {}\n", literal(code)));
        }
    }
    out.into_bytes()
}

/// `python/pyproject.toml`: its template with the spec's distribution facts
/// (as TOML values: JSON's spelling of plain strings and lists is TOML's) in
/// place of each `{{key}}` (`{{entry_point_group}}` for a field of a record).
pub fn pyproject(inputs: &Inputs, spec: &Value) -> Result<Vec<u8>> {
    let path = PYPROJECT_TEMPLATE_PATH;
    let text = std::str::from_utf8(inputs.get(path)?).map_err(|_| format!("{path}: not UTF-8"))?;
    let mut out = header(&format!("{path} and {PROVIDER_SPEC_PATH}"), "");
    out.truncate(out.find('\n').unwrap_or(0) + 1);
    out.push_str(text);
    for (key, value) in entries(&spec["distribution"]) {
        let fields = entries(value).map(|(name, item)| (format!("{key}_{name}"), item));
        for (name, value) in fields.chain([(key.to_string(), value)]) {
            out = out.replace(&format!("{{{{{name}}}}}"), &value.to_string());
        }
    }
    if let Some(start) = out.find("{{") {
        let rest = &out[start..];
        let key = &rest[..rest.find("}}").map_or(rest.len(), |end| end + 2)];
        return Err(format!("{path}: `{key}` is not a distribution fact"));
    }
    Ok(out.into_bytes())
}

/// A Python string literal: double quotes unless the text holds a double
/// quote and no single quote (so no quote needs escaping).
pub fn literal(text: &str) -> String {
    let single = text.contains('"') && !text.contains('\'');
    let quote = if single { '\'' } else { '"' };
    let mut out = String::from(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => out.extend(['\\', c]),
            c if c < ' ' || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Splits `text` after spaces so that each piece's literal fits `max`
/// columns where possible; a single over-long word is cut at a character.
fn split_for_width(text: &str, max: usize) -> Vec<String> {
    let fits = |piece: &str| width(&literal(piece)) <= max;
    let (mut pieces, mut current) = (Vec::new(), String::new());
    for word in text.split_inclusive(' ') {
        if !current.is_empty() && !fits(&format!("{current}{word}")) {
            pieces.push(std::mem::take(&mut current));
        }
        for c in word.chars() {
            // Only a word longer than a line is cut, at a character.
            if !current.is_empty() && !fits(&format!("{current}{c}")) {
                pieces.push(std::mem::take(&mut current));
            }
            current.push(c);
        }
    }
    pieces.push(current);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn atom(text: &str) -> Py {
        Py::Atom(text.into())
    }

    fn seq(open: &str, close: &'static str, items: Vec<Py>) -> Py {
        let items = items.into_iter().map(|item| (String::new(), item));
        Py::Seq(open.into(), close, items.collect())
    }

    #[test]
    fn literals_use_python_spelling() {
        let value = Py::Seq(
            "{".into(),
            "}",
            vec![
                ("\"a\": ".into(), Py::Str("x\"y".into())),
                (
                    "\"b\": ".into(),
                    seq(
                        "(",
                        ")",
                        vec![atom("None"), atom("True"), atom("False"), atom("3")],
                    ),
                ),
            ],
        );
        assert_eq!(value.flat(), r#"{"a": 'x"y', "b": (None, True, False, 3)}"#);
        let set = expr("frozenset[str]", &serde_json::json!(["a"]));
        let call = Py::Seq(
            "Record(".into(),
            ")",
            vec![
                ("one=".into(), seq("(", ")", vec![atom("1")])),
                (
                    "none=".into(),
                    expr("frozenset[str]", &serde_json::json!([])),
                ),
                ("set=".into(), set),
                ("empty=".into(), seq("(", ")", vec![])),
            ],
        );
        assert_eq!(
            call.flat(),
            r#"Record(one=(1,), none=frozenset(), set=frozenset({"a"}), empty=())"#
        );
        assert_eq!(literal("a\\b\n\u{7f}'"), "\"a\\\\b\\n\\x7f'\"");
    }

    #[test]
    fn long_calls_break_one_argument_a_line() {
        let call = Py::Seq(
            "Record(".into(),
            ")",
            vec![
                ("name=".into(), Py::Str("x".repeat(60))),
                (
                    "kinds=".into(),
                    seq("frozenset({", "})", vec![Py::Str("y".repeat(50))]),
                ),
            ],
        );
        let mut out = String::new();
        write(&mut out, 0, "VALUE = ", &call, "");
        let expected = format!(
            "VALUE = Record(\n    name=\"{}\",\n    kinds=frozenset({{\"{}\"}}),\n)\n",
            "x".repeat(60),
            "y".repeat(50)
        );
        assert_eq!(out, expected);
    }

    #[test]
    fn long_scalar_lists_fill_their_lines() {
        let items = (0..30)
            .map(|index| Py::Str(format!("CODE_{index}")))
            .collect();
        let mut out = String::new();
        write(&mut out, 1, "codes=", &seq("(", ")", items), ",");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first(), Some(&"    codes=("));
        assert_eq!(lines.last(), Some(&"    ),"));
        // Each inner line is full: the next item would not fit on it.
        for pair in lines[1..lines.len() - 1].windows(2) {
            let next = pair[1].trim().split(' ').next().unwrap();
            assert!(width(pair[0]) + 1 + width(next) > MAX_LINE, "{pair:?}");
        }
        assert!(lines.iter().all(|line| width(line) <= MAX_LINE));
        let joined: String = lines[1..lines.len() - 1]
            .iter()
            .map(|line| line.trim())
            .collect::<Vec<_>>()
            .join(" ");
        let expected: Vec<String> = (0..30).map(|index| format!("\"CODE_{index}\",")).collect();
        assert_eq!(joined, expected.join(" "));
    }

    #[test]
    fn long_strings_split_without_losing_characters() {
        let text = "word ".repeat(60) + &"x".repeat(150);
        let chunks = split_for_width(&text, 80);
        assert!(chunks.len() > 3);
        assert_eq!(chunks.concat(), text);
        assert!(chunks.iter().all(|chunk| width(&literal(chunk)) <= 80));
    }
}
