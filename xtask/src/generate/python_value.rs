//! Python values and their layout, for the generated Python modules: a
//! value is written on one line where that fits in 100 columns, else one
//! item a line (a long string as adjacent literals, a piece a line).
//! [`ToPython`] gives a Rust value's Python annotation and literal;
//! [`PythonRecord`] a record's class.

use std::collections::BTreeMap;

const MAX_LINE: usize = 100;
const INDENT: &str = "    ";

/// A Python expression: a literal, a string, or a sequence (its opening,
/// then each item after its label, then its closing).
#[derive(Clone, Debug, PartialEq)]
pub enum PythonValue {
    Atom(String),
    Str(String),
    Seq {
        open: String,
        close: &'static str,
        items: Vec<(String, PythonValue)>,
    },
}

impl PythonValue {
    /// `name(key=value, ...)`; each argument's label is `key=`.
    pub fn call(name: &str, arguments: Vec<(String, PythonValue)>) -> PythonValue {
        let open = format!("{name}(");
        PythonValue::Seq {
            open,
            close: ")",
            items: arguments,
        }
    }

    pub fn tuple(items: Vec<PythonValue>) -> PythonValue {
        let items = items
            .into_iter()
            .map(|item| (String::new(), item))
            .collect();
        PythonValue::Seq {
            open: "(".to_string(),
            close: ")",
            items,
        }
    }

    pub fn frozenset(items: Vec<PythonValue>) -> PythonValue {
        if items.is_empty() {
            return PythonValue::Atom("frozenset()".to_string());
        }
        let items = items
            .into_iter()
            .map(|item| (String::new(), item))
            .collect();
        PythonValue::Seq {
            open: "frozenset({".to_string(),
            close: "})",
            items,
        }
    }

    pub fn dict(entries: Vec<(String, PythonValue)>) -> PythonValue {
        let label = |(key, value): (String, PythonValue)| (format!("{}: ", literal(&key)), value);
        let items = entries.into_iter().map(label).collect();
        PythonValue::Seq {
            open: "{".to_string(),
            close: "}",
            items,
        }
    }

    /// The one-line form.
    fn flat(&self) -> String {
        match self {
            PythonValue::Atom(text) => text.clone(),
            PythonValue::Str(text) => literal(text),
            PythonValue::Seq { open, close, items } => {
                let items: Vec<String> = items
                    .iter()
                    .map(|(label, item)| format!("{label}{}", item.flat()))
                    .collect();
                // A one-item tuple needs its comma.
                let comma = if open == "(" && items.len() == 1 {
                    ","
                } else {
                    ""
                };
                format!("{open}{}{comma}{close}", items.join(", "))
            }
        }
    }
}

/// A Rust value of the generator's typed model, as Python.
pub trait ToPython {
    /// Its Python annotation (`str`, `tuple[int, ...]`, `ProbeReportSpec`).
    fn annotation() -> String;
    fn to_python(&self) -> PythonValue;
}

impl ToPython for String {
    fn annotation() -> String {
        "str".to_string()
    }

    fn to_python(&self) -> PythonValue {
        PythonValue::Str(self.clone())
    }
}

impl ToPython for u32 {
    fn annotation() -> String {
        "int".to_string()
    }

    fn to_python(&self) -> PythonValue {
        PythonValue::Atom(self.to_string())
    }
}

impl ToPython for f64 {
    fn annotation() -> String {
        "float".to_string()
    }

    /// Debug spells the shortest round-trip form, with a `.0` or an exponent.
    fn to_python(&self) -> PythonValue {
        PythonValue::Atom(format!("{self:?}"))
    }
}

impl ToPython for bool {
    fn annotation() -> String {
        "bool".to_string()
    }

    fn to_python(&self) -> PythonValue {
        let text = if *self { "True" } else { "False" };
        PythonValue::Atom(text.to_string())
    }
}

impl<T: ToPython> ToPython for Option<T> {
    fn annotation() -> String {
        format!("{} | None", T::annotation())
    }

    fn to_python(&self) -> PythonValue {
        match self {
            Some(value) => value.to_python(),
            None => PythonValue::Atom("None".to_string()),
        }
    }
}

impl<T: ToPython> ToPython for Vec<T> {
    fn annotation() -> String {
        format!("tuple[{}, ...]", T::annotation())
    }

    fn to_python(&self) -> PythonValue {
        PythonValue::tuple(self.iter().map(ToPython::to_python).collect())
    }
}

impl<A: ToPython, B: ToPython> ToPython for (A, B) {
    fn annotation() -> String {
        format!("tuple[{}, {}]", A::annotation(), B::annotation())
    }

    fn to_python(&self) -> PythonValue {
        PythonValue::tuple(vec![self.0.to_python(), self.1.to_python()])
    }
}

impl<T: ToPython> ToPython for BTreeMap<String, T> {
    fn annotation() -> String {
        format!("Mapping[str, {}]", T::annotation())
    }

    fn to_python(&self) -> PythonValue {
        let entries = self
            .iter()
            .map(|(key, value)| (key.clone(), value.to_python()));
        PythonValue::dict(entries.collect())
    }
}

/// A record's Python class: a frozen slotted class built by keyword, on the
/// hand-written base `_spec_record.SpecRecord` (equality, hash, repr,
/// immutability, copy and pickle); the generator writes what differs per
/// record: its slots, its annotated fields and a typed `__init__`.
pub struct PythonClass {
    pub name: &'static str,
    pub doc: &'static str,
    pub fields: Vec<PythonField>,
}

/// A field of a [`PythonClass`]: the doc lines become comments above it.
pub struct PythonField {
    pub name: &'static str,
    pub annotation: String,
    pub doc: Vec<&'static str>,
}

pub trait PythonRecord {
    fn python_class() -> PythonClass;
}

impl PythonClass {
    /// The class definition, after two blank lines.
    pub fn definition(&self) -> String {
        let name = self.name;
        let mut out = format!(
            "\n\nclass {name}(SpecRecord):\n{INDENT}\"\"\"{}\"\"\"\n\n",
            self.doc
        );
        // Sorted, as ruff asks (RUF023); the fields keep the spec's order.
        let mut slots: Vec<String> = self.fields.iter().map(|f| literal(f.name)).collect();
        slots.sort();
        if let [one] = slots.as_mut_slice() {
            one.push(',');
        }
        wrapped(&mut out, &format!("{INDENT}__slots__ = ("), &slots, ")");
        for field in &self.fields {
            for line in &field.doc {
                out.push_str(&format!("{INDENT}# {line}\n"));
            }
            out.push_str(&format!("{INDENT}{}: {}\n", field.name, field.annotation));
        }
        let params = self.fields.iter();
        let params: Vec<String> = params
            .map(|f| format!("{}: {}", f.name, f.annotation))
            .collect();
        let line = format!(
            "\n{INDENT}def __init__(self, *, {}) -> None:\n",
            params.join(", ")
        );
        if width(&line) <= MAX_LINE + 2 {
            out.push_str(&line);
        } else {
            let body = INDENT.repeat(2);
            out.push_str(&format!("\n{INDENT}def __init__(\n{body}self,\n{body}*,\n"));
            for param in &params {
                out.push_str(&format!("{body}{param},\n"));
            }
            out.push_str(&format!("{INDENT}) -> None:\n"));
        }
        out.push_str(&format!("{INDENT}{INDENT}self._set_fields(locals())\n"));
        out
    }
}

/// `open` + `items` joined by ", " + `close` on one line where that fits in
/// 100 columns, else the items filled into lines of at most 100 columns
/// between `open` and `close` on lines of their own.
fn wrapped(out: &mut String, open: &str, items: &[String], close: &str) {
    let line = format!("{open}{}{close}\n", items.join(", "));
    if width(&line) <= MAX_LINE + 1 {
        out.push_str(&line);
        return;
    }
    let indent = " ".repeat(open.len() - open.trim_start().len()) + INDENT;
    out.push_str(open);
    let mut current = String::new();
    for item in items {
        if !current.is_empty() && width(&current) + 1 + width(item) + 1 > MAX_LINE {
            out.push_str(&format!("\n{}", current.trim_end()));
            current.clear();
        }
        if current.is_empty() {
            current.push_str(&indent);
        } else {
            current.push(' ');
        }
        current.push_str(item);
        current.push(',');
    }
    out.push_str(&format!(
        "\n{current}\n{}{close}\n",
        &indent[INDENT.len()..]
    ));
}

fn width(text: &str) -> usize {
    text.chars().count()
}

/// Writes `prefix` + `value` + `suffix` at `depth`: on one line where that
/// fits in 100 columns, else one item a line (a long string as adjacent
/// literals, a piece a line).
pub fn write(out: &mut String, depth: usize, prefix: &str, value: &PythonValue, suffix: &str) {
    let indent = INDENT.repeat(depth);
    let line = format!("{indent}{prefix}{}{suffix}\n", value.flat());
    if width(&line) <= MAX_LINE + 1 {
        out.push_str(&line);
        return;
    }
    match value {
        PythonValue::Seq { open, close, items } => {
            out.push_str(&format!("{indent}{prefix}{open}\n"));
            for (label, item) in items {
                write(out, depth + 1, label, item, ",");
            }
            out.push_str(&format!("{indent}{close}{suffix}\n"));
        }
        // A sequence item: adjacent literals, a piece a line.
        PythonValue::Str(text) if prefix.is_empty() => {
            let room = MAX_LINE.saturating_sub(width(&indent) + width(suffix));
            let pieces = split_for_width(text, room);
            let last = pieces.len() - 1;
            for (index, piece) in pieces.iter().enumerate() {
                let end = if index == last { suffix } else { "" };
                out.push_str(&format!("{indent}{}{end}\n", literal(piece)));
            }
        }
        // After a label: the pieces in parentheses.
        PythonValue::Str(_) => {
            out.push_str(&format!("{indent}{prefix}(\n"));
            write(out, depth + 1, "", value, "");
            out.push_str(&format!("{indent}){suffix}\n"));
        }
        // Scalars are short; an over-long line here is only its label's fault.
        PythonValue::Atom(_) => out.push_str(&line),
    }
}

/// The first line of a generated Python file, naming its inputs, and its docstring.
pub fn header(inputs: &str, doc: &str) -> String {
    let marker = format!("# @generated by `cargo xtask generate` from {inputs}; do not edit.");
    format!("{marker}\n\"\"\"{doc}\"\"\"\n\n")
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
    let mut pieces = Vec::new();
    let mut current = String::new();
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

    fn atom(text: &str) -> PythonValue {
        PythonValue::Atom(text.into())
    }

    #[test]
    fn literals_use_python_spelling() {
        let tuple = PythonValue::tuple(vec![atom("None"), atom("True"), atom("False"), atom("3")]);
        let entries = vec![
            ("a".to_string(), PythonValue::Str("x\"y".into())),
            ("b".into(), tuple),
        ];
        let value = PythonValue::dict(entries);
        assert_eq!(value.flat(), r#"{"a": 'x"y', "b": (None, True, False, 3)}"#);
        let set = ["a".to_string()];
        let call = PythonValue::call(
            "Record",
            vec![
                ("one=".into(), PythonValue::tuple(vec![atom("1")])),
                ("none=".into(), PythonValue::frozenset(Vec::new())),
                (
                    "set=".into(),
                    PythonValue::frozenset(vec![set[0].to_python()]),
                ),
                ("empty=".into(), PythonValue::tuple(Vec::new())),
            ],
        );
        let expected = r#"Record(one=(1,), none=frozenset(), set=frozenset({"a"}), empty=())"#;
        assert_eq!(call.flat(), expected);
        assert_eq!(literal("a\\b\n\u{7f}'"), "\"a\\\\b\\n\\x7f'\"");
        assert_eq!(10.0_f64.to_python(), atom("10.0"));
        assert_eq!(
            <BTreeMap<String, Vec<u32>>>::annotation(),
            "Mapping[str, tuple[int, ...]]"
        );
        assert_eq!(<Option<(u32, u32)>>::annotation(), "tuple[int, int] | None");
    }

    #[test]
    fn what_does_not_fit_is_one_item_a_line() {
        let call = PythonValue::call(
            "Record",
            vec![
                ("name=".into(), PythonValue::Str("x".repeat(60))),
                (
                    "kinds=".into(),
                    PythonValue::frozenset(vec![PythonValue::Str("y".repeat(50))]),
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
        // Short items too: one a line once the whole does not fit.
        let items = (0..30)
            .map(|index| PythonValue::Str(format!("CODE_{index}")))
            .collect();
        let mut out = String::new();
        write(&mut out, 1, "codes=", &PythonValue::tuple(items), ",");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 32);
        assert_eq!(lines[0], "    codes=(");
        assert_eq!(lines[1], "        \"CODE_0\",");
        assert_eq!(lines[31], "    ),");
    }

    #[test]
    fn long_strings_split_without_losing_characters() {
        let text = "word ".repeat(60) + &"x".repeat(150);
        let pieces = split_for_width(&text, 80);
        assert!(pieces.len() > 3);
        assert_eq!(pieces.concat(), text);
        assert!(pieces.iter().all(|piece| width(&literal(piece)) <= 80));
        let mut out = String::new();
        write(&mut out, 1, "", &PythonValue::Str(text.clone()), ",");
        assert!(out.lines().all(|line| width(line) <= MAX_LINE));
        assert!(out.ends_with("\",\n"));
    }
}
