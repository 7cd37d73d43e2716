//! `templates/cuda-results.json`: every `CUresult` value NVIDIA's `cuda.h`
//! defines, by name, joined with the `CUresult` constants of the driver
//! symbol list (each value is written once, in one of the two). It becomes
//! `generated/cuda-results-check.c` (compiled against each header set by
//! `cargo xtask test`: every name of the file has its value; the list's
//! constants are checked by `driver-abi-check.c`) and
//! `python/rextio_device_cuda/_cuda_results.py` (the names and the remedies
//! that refusals quote, contract 9.6).

use std::collections::BTreeMap;
use std::fmt::{Display, Write};

use serde::Deserialize;

use super::abi_check::{equals, unless_sets};
use super::spec::Map;
use super::symbols::SymbolList;
use crate::Result;

pub const CUDA_RESULTS_PATH: &str = "templates/cuda-results.json";
pub const RESULTS_CHECK_PATH: &str = "generated/cuda-results-check.c";
pub const PYTHON_RESULTS_PATH: &str = "python/rextio_device_cuda/_cuda_results.py";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResults {
    schema_version: u32,
    #[allow(dead_code)] // for the reader of the file
    doc: String,
    results: Map<i64>,
    /// header set -> the names it does not define.
    undeclared_in: Map<Vec<String>>,
    /// name -> [what it means here, what to do].
    remedies: Map<(String, String)>,
}

/// Every `CUresult` name, by value, and the remedies refusals quote.
pub struct CudaResults {
    /// Every name and its value (the symbol list's constants among them), by value.
    all: Vec<(String, i64)>,
    raw: RawResults,
}

/// `Err` naming the file, the JSON path and the message unless `ok`.
fn ensure(ok: bool, path: impl Display, message: impl Display) -> Result<()> {
    let error = || format!("{CUDA_RESULTS_PATH}: {path}: {message}");
    ok.then_some(()).ok_or_else(error)
}

impl CudaResults {
    /// Parses the list and joins it with the symbol list's `CUresult` constants.
    pub fn parse(bytes: &[u8], symbols: &SymbolList) -> Result<Self> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let raw: RawResults = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|error| format!("{CUDA_RESULTS_PATH}: {}: {}", error.path(), error.inner()))?;
        let version_ok = raw.schema_version == 1;
        ensure(version_ok, "schema_version", "only 1 is supported")?;
        let constants = symbols.constants.iter();
        let constants = constants.filter(|(_, constant)| constant.c_type.base == "CUresult");
        let constants = constants.map(|(name, constant)| (name.clone(), constant.value));
        let mut by_name: BTreeMap<String, i64> = constants.collect();
        for (name, value) in raw.results.iter() {
            let path = format!("results.{name}");
            let message = "a CUresult name starts with CUDA_";
            ensure(name.starts_with("CUDA_"), &path, message)?;
            let valid = (0..=i64::from(i32::MAX)).contains(value);
            ensure(valid, &path, format!("{value} is not a CUresult value"))?;
            let message = "templates/driver-symbols.json holds it as a constant already";
            ensure(
                by_name.insert(name.clone(), *value).is_none(),
                &path,
                message,
            )?;
        }
        for (set, names) in raw.undeclared_in.iter() {
            let path = format!("undeclared_in.{set}");
            let sets = &symbols.header_sets;
            let known = sets.iter().any(|header_set| &header_set.name == set);
            let message = "not a header set of templates/driver-symbols.json";
            ensure(known, &path, message)?;
            for name in names {
                let message = format!("`{name}` is not one of `results`");
                ensure(raw.results.contains_key(name), &path, message)?;
            }
        }
        let mut values = BTreeMap::new();
        for (name, value) in &by_name {
            if let Some(other) = values.insert(*value, name) {
                let message = format!("{value} is also `{other}`");
                return Err(format!("{CUDA_RESULTS_PATH}: results.{name}: {message}"));
            }
        }
        for (name, (meaning, remedy)) in raw.remedies.iter() {
            let path = format!("remedies.{name}");
            let known = by_name.contains_key(name);
            ensure(known, &path, "not a CUresult name of the list")?;
            let given = !meaning.trim().is_empty() && !remedy.trim().is_empty();
            ensure(given, &path, "the meaning and the remedy must not be empty")?;
        }
        let mut all: Vec<(String, i64)> = by_name.into_iter().collect();
        all.sort_by_key(|(_, value)| *value);
        Ok(Self { all, raw })
    }

    /// The C check: each name of the file equals its value in every header
    /// set that defines it (those some set lacks last, under their guard).
    pub fn check_source(&self) -> Vec<u8> {
        let mut by_guard: BTreeMap<String, String> = BTreeMap::new();
        let undeclared = &self.raw.undeclared_in;
        for (name, value) in self
            .all
            .iter()
            .filter(|(name, _)| self.raw.results.contains_key(name))
        {
            let lacking = undeclared.iter().filter(|(_, names)| names.contains(name));
            let lines = by_guard
                .entry(unless_sets(lacking.map(|(set, _)| set)))
                .or_default();
            lines.push_str(&equals(name, *value));
        }
        let mut out = String::from(
            "/* @generated by `cargo xtask generate` from templates/cuda-results.json; do not edit. */\n\
             /* Compiled by `cargo xtask test` against each header set: every CUresult name has its value. */\n\
             #include <cuda.h>\n",
        );
        for (guard, lines) in by_guard {
            let end = if guard.is_empty() { "" } else { "#endif\n" };
            let _ = write!(out, "\n{guard}{lines}{end}");
        }
        out.into_bytes()
    }

    /// The Python module: name -> value, and name -> (meaning, remedy).
    pub fn python_module(&self) -> Vec<u8> {
        let mut out = String::from(
            "# @generated by `cargo xtask generate` from templates/cuda-results.json; do not edit.\n\
             \"\"\"Every CUresult cuda.h 12.x and 13.x define, and the remedies refusals quote (data only).\n\
             \n\
             Imported only to explain a refusal that carries a CUDA result.\n\
             \"\"\"\n\nfrom typing import Final\n\nCUDA_RESULTS: Final[dict[str, int]] = {\n",
        );
        for (name, value) in &self.all {
            let _ = writeln!(out, "    \"{name}\": {value},");
        }
        out.push_str("}\nCUDA_RESULT_REMEDIES: Final[dict[str, tuple[str, str]]] = {\n");
        for (name, (meaning, remedy)) in self.raw.remedies.iter() {
            let _ = writeln!(
                out,
                "    \"{name}\": (\n{}{}    ),",
                python_text(meaning),
                python_text(remedy)
            );
        }
        out.push_str("}\n");
        out.into_bytes()
    }
}

/// `text` as Python string literals (JSON's escapes are Python's), one per
/// line at an indent of 8, broken after a space so that no line passes 100
/// characters, then a comma.
fn python_text(text: &str) -> String {
    let mut pieces: Vec<String> = Vec::new();
    for word in text.split_inclusive(' ') {
        match pieces.last_mut() {
            Some(piece) if piece.len() + word.len() <= 86 => piece.push_str(word),
            _ => pieces.push(word.to_string()),
        }
    }
    let literals: Vec<String> = pieces
        .iter()
        .map(|piece| format!("        {}", serde_json::Value::from(piece.as_str())))
        .collect();
    format!("{},\n", literals.join("\n"))
}
