//! `templates/cuda-results.json`: every `CUresult` value NVIDIA's `cuda.h`
//! defines, by name, joined with the `CUresult` constants of the driver
//! symbol list (each value is written once, in one of the two). It becomes
//! `generated/cuda-results-check.c` (compiled against each header set by
//! `cargo xtask test`: every name has its listed value) and
//! `python/rextio_device_cuda/_cuda_results.py` (the names and the remedies
//! that refusals quote, contract 9.6).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde::Deserialize;

use super::abi_check::header_set_macro;
use super::python::{write_expr, PyExpr};
use super::spec::Map;
use super::symbols::{CType, SymbolList};
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

/// One `CUresult` name.
pub struct CudaResult {
    pub name: String,
    pub value: i64,
    /// The header sets that do not define it.
    pub undeclared_in: BTreeSet<String>,
}

/// Every `CUresult` name, by value, and the remedies refusals quote.
pub struct CudaResults {
    pub results: Vec<CudaResult>,
    pub remedies: BTreeMap<String, (String, String)>,
}

fn refuse(path: impl std::fmt::Display, message: impl std::fmt::Display) -> String {
    format!("{CUDA_RESULTS_PATH}: {path}: {message}")
}

impl CudaResults {
    /// Parses the list and joins it with the symbol list's `CUresult` constants.
    pub fn parse(bytes: &[u8], symbols: &SymbolList) -> Result<Self> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let raw: RawResults = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|error| refuse(error.path(), error.inner()))?;
        if raw.schema_version != 1 {
            return Err(refuse("schema_version", "only 1 is supported"));
        }
        let mut by_name: BTreeMap<String, (i64, BTreeSet<String>)> = BTreeMap::new();
        for constant in &symbols.constants {
            if matches!(&constant.c_type, CType::Named(name) if name == "CUresult") {
                let value = i64::try_from(constant.value)
                    .map_err(|_| format!("constant {}: not a CUresult value", constant.name))?;
                by_name.insert(constant.name.clone(), (value, BTreeSet::new()));
            }
        }
        for (name, value) in raw.results.iter() {
            let path = format!("results.{name}");
            if !name.starts_with("CUDA_") {
                return Err(refuse(path, "a CUresult name starts with CUDA_"));
            }
            if !(0..=i64::from(i32::MAX)).contains(value) {
                return Err(refuse(path, format!("{value} is not a CUresult value")));
            }
            if by_name.contains_key(name) {
                return Err(refuse(
                    path,
                    "templates/driver-symbols.json holds it as a constant already",
                ));
            }
            by_name.insert(name.clone(), (*value, BTreeSet::new()));
        }
        let header_sets: BTreeSet<&str> = symbols
            .header_sets
            .iter()
            .map(|set| set.name.as_str())
            .collect();
        for (set, names) in raw.undeclared_in.iter() {
            if !header_sets.contains(set.as_str()) {
                return Err(refuse(
                    format!("undeclared_in.{set}"),
                    "not a header set of templates/driver-symbols.json",
                ));
            }
            for name in names {
                if !raw.results.contains_key(name) {
                    return Err(refuse(
                        format!("undeclared_in.{set}"),
                        format!("`{name}` is not one of `results`"),
                    ));
                }
                if let Some((_, sets)) = by_name.get_mut(name) {
                    sets.insert(set.clone());
                }
            }
        }
        let mut values = BTreeMap::new();
        for (name, (value, _)) in &by_name {
            if let Some(other) = values.insert(*value, name) {
                return Err(refuse(
                    format!("results.{name}"),
                    format!("{value} is also `{other}`"),
                ));
            }
        }
        for (name, (meaning, remedy)) in raw.remedies.iter() {
            let path = format!("remedies.{name}");
            if !by_name.contains_key(name) {
                return Err(refuse(path, "not a CUresult name of the list"));
            }
            if meaning.trim().is_empty() || remedy.trim().is_empty() {
                return Err(refuse(path, "the meaning and the remedy must not be empty"));
            }
        }
        let mut results: Vec<CudaResult> = by_name
            .into_iter()
            .map(|(name, (value, undeclared_in))| CudaResult {
                name,
                value,
                undeclared_in,
            })
            .collect();
        results.sort_by_key(|result| result.value);
        Ok(Self {
            results,
            remedies: raw.remedies.0,
        })
    }

    /// The C check: each name equals its value in every header set that defines it.
    pub fn check_source(&self) -> Vec<u8> {
        let mut out = String::from(
            "/* @generated by `cargo xtask generate` from templates/cuda-results.json; do not edit. */\n\
             /* Compiled by `cargo xtask test` against each header set: every CUresult name has its value. */\n\
             #include <cuda.h>\n\n",
        );
        for result in &self.results {
            let (name, value) = (&result.name, result.value);
            let guards: Vec<String> = result
                .undeclared_in
                .iter()
                .map(|set| format!("!defined({})", header_set_macro(set)))
                .collect();
            if !guards.is_empty() {
                let _ = writeln!(out, "#if {}", guards.join(" && "));
            }
            let _ = writeln!(
                out,
                "#line 1 \"result {name}\"\n_Static_assert({name} == {value}, \"{name} is {value}\");"
            );
            if !guards.is_empty() {
                out.push_str("#endif\n");
            }
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
             \"\"\"\n\nfrom typing import Final\n\n",
        );
        let names = PyExpr::Dict(
            self.results
                .iter()
                .map(|result| {
                    (
                        result.name.clone(),
                        PyExpr::Number(result.value.to_string()),
                    )
                })
                .collect(),
        );
        write_expr(
            &mut out,
            0,
            "CUDA_RESULTS: Final[dict[str, int]] = ",
            &names,
            "",
        );
        let remedies = PyExpr::Dict(
            self.remedies
                .iter()
                .map(|(name, (meaning, remedy))| {
                    (
                        name.clone(),
                        PyExpr::Tuple(vec![
                            PyExpr::Str(meaning.clone()),
                            PyExpr::Str(remedy.clone()),
                        ]),
                    )
                })
                .collect(),
        );
        write_expr(
            &mut out,
            0,
            "CUDA_RESULT_REMEDIES: Final[dict[str, tuple[str, str]]] = ",
            &remedies,
            "",
        );
        out.into_bytes()
    }
}
