//! The generator's inputs: read once from disk, then validated into typed
//! records. Every error names the input file and the problem.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use super::fs::{read_input, relative_files};
use crate::Result;

pub const DRIVER_SYMBOLS_PATH: &str = "templates/driver-symbols.json";
pub const PROVIDER_SPEC_PATH: &str = "templates/provider-spec.json";
pub const LICENSE_PATH: &str = "LICENSE";
/// Written by the generator, so never read as an input.
pub const DRIVER_API_PATH: &str = "runtime/src/driver_api.rs";

/// The raw bytes of every input, keyed by repository-relative path.
///
/// Rendering is a pure function of this value, so tests and benches can
/// build one in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inputs {
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Inputs {
    /// Reads the templates, the license and the runtime crate's hand-written
    /// sources under `root`.
    pub fn read(root: &Path) -> Result<Self> {
        let mut files = BTreeMap::new();
        for path in [DRIVER_SYMBOLS_PATH, PROVIDER_SPEC_PATH, LICENSE_PATH] {
            files.insert(path.to_string(), read_input(root, path)?);
        }
        for path in ["runtime/Cargo.toml", "runtime/README.md"] {
            files.insert(path.to_string(), read_input(root, path)?);
        }
        for path in relative_files(root, "runtime/src")? {
            if path.ends_with(".rs") && path != DRIVER_API_PATH {
                let bytes = read_input(root, &path)?;
                files.insert(path, bytes);
            }
        }
        Ok(Self { files })
    }

    pub fn get(&self, path: &str) -> Result<&[u8]> {
        self.files
            .get(path)
            .map(Vec::as_slice)
            .ok_or_else(|| format!("{path}: missing input"))
    }

    /// The hand-written runtime files (relative to `runtime/`) to package.
    pub fn runtime_sources(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files.iter().filter_map(|(path, bytes)| {
            let relative = path.strip_prefix("runtime/")?;
            Some((relative, bytes.as_slice()))
        })
    }
}

// ---------------------------------------------------------------- symbols

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSymbolList {
    schema_version: u32,
    calling_convention: String,
    types: BTreeMap<String, RawType>,
    symbols: Vec<RawSymbol>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawType {
    c_type: String,
    rust: String,
    doc: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSymbol {
    export: String,
    api: String,
    abi_version: u32,
    returns: String,
    params: Vec<RawParam>,
    components: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParam {
    name: String,
    c_type: String,
}

/// How a named driver type is spelled in Rust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeRepr {
    /// A plain integer alias such as `i32`.
    Integer(&'static str),
    /// `*mut Tag` where `Tag` is an opaque `#[repr(C)]` struct.
    OpaquePointer { tag: String },
}

#[derive(Clone, Debug)]
pub struct NamedType {
    pub name: String,
    pub repr: TypeRepr,
    pub doc: String,
}

/// A C type of a parameter or return value, resolved against the `types` table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CType {
    Int,
    UnsignedInt,
    SizeT,
    Named(String),
    MutPointer(Box<CType>),
    Char,
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub c_type: CType,
}

#[derive(Clone, Debug)]
pub struct Symbol {
    pub export: String,
    pub api: String,
    pub abi_version: u32,
    pub returns: CType,
    pub params: Vec<Param>,
    pub components: BTreeSet<String>,
}

#[derive(Clone, Debug)]
pub struct SymbolList {
    pub types: Vec<NamedType>,
    pub symbols: Vec<Symbol>,
}

pub const COMPONENT_PROBE_INVENTORY: &str = "probe-inventory";
pub const COMPONENT_RUNTIME: &str = "runtime";
const COMPONENTS: [&str; 2] = [COMPONENT_PROBE_INVENTORY, COMPONENT_RUNTIME];

const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "box", "break", "const", "continue", "crate", "dyn", "else", "enum",
    "extern", "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod",
    "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
    "true", "try", "type", "unsafe", "use", "where", "while", "yield", "abstract", "become", "do",
    "final", "macro", "override", "priv", "typeof", "unsized", "virtual",
];

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && text != "_"
        && !RUST_KEYWORDS.contains(&text)
}

/// Parses JSON, naming the file, line and column on failure.
pub fn parse_json<T: for<'de> Deserialize<'de>>(path: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|error| format!("{path}: {error}"))
}

impl SymbolList {
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let path = DRIVER_SYMBOLS_PATH;
        let raw: RawSymbolList = parse_json(path, bytes)?;
        if raw.schema_version != 1 {
            return Err(format!(
                "{path}: schema_version {} is not supported (expected 1)",
                raw.schema_version
            ));
        }
        if raw.calling_convention != "system" {
            return Err(format!(
                "{path}: calling_convention `{}` is not supported (expected `system`)",
                raw.calling_convention
            ));
        }
        let mut types = Vec::new();
        for (name, raw_type) in &raw.types {
            types.push(parse_named_type(path, name, raw_type)?);
        }
        let type_names: BTreeSet<&str> = types.iter().map(|t| t.name.as_str()).collect();
        if !type_names.contains("CUresult") {
            return Err(format!("{path}: the types table lacks `CUresult`"));
        }
        if raw.symbols.is_empty() {
            return Err(format!("{path}: the symbol list is empty"));
        }
        let mut seen = BTreeSet::new();
        let mut symbols = Vec::new();
        for (index, raw_symbol) in raw.symbols.iter().enumerate() {
            let symbol = parse_symbol(path, index, raw_symbol, &type_names)?;
            if !seen.insert(symbol.export.clone()) {
                return Err(format!(
                    "{path}: symbols[{index}]: duplicate export name `{}`",
                    symbol.export
                ));
            }
            symbols.push(symbol);
        }
        Ok(Self { types, symbols })
    }
}

fn parse_named_type(path: &str, name: &str, raw: &RawType) -> Result<NamedType> {
    let context = format!("{path}: types.{name}");
    if !is_identifier(name) {
        return Err(format!("{context}: the name is not a Rust identifier"));
    }
    let repr = match raw.rust.as_str() {
        "i32" => TypeRepr::Integer("i32"),
        "u32" => TypeRepr::Integer("u32"),
        "i64" => TypeRepr::Integer("i64"),
        "u64" => TypeRepr::Integer("u64"),
        "usize" => TypeRepr::Integer("usize"),
        "opaque-pointer" => {
            let tag = raw
                .c_type
                .strip_prefix("struct ")
                .and_then(|rest| rest.strip_suffix(" *"))
                .filter(|tag| is_identifier(tag))
                .ok_or_else(|| {
                    format!(
                        "{context}: an opaque-pointer type needs c_type `struct TAG *`, found `{}`",
                        raw.c_type
                    )
                })?;
            TypeRepr::OpaquePointer {
                tag: tag.to_string(),
            }
        }
        other => {
            return Err(format!(
                "{context}: unknown rust representation `{other}` \
                 (expected i32, u32, i64, u64, usize or opaque-pointer)"
            ))
        }
    };
    if raw.doc.trim().is_empty() {
        return Err(format!("{context}: the doc text is empty"));
    }
    Ok(NamedType {
        name: name.to_string(),
        repr,
        doc: raw.doc.clone(),
    })
}

fn parse_c_type(text: &str, types: &BTreeSet<&str>) -> Option<CType> {
    if let Some(pointee) = text.strip_suffix(" *") {
        let pointee = match pointee {
            "char" => CType::Char,
            other => parse_c_type(other, types)?,
        };
        if matches!(pointee, CType::MutPointer(_)) {
            return None;
        }
        return Some(CType::MutPointer(Box::new(pointee)));
    }
    match text {
        "int" => Some(CType::Int),
        "unsigned int" => Some(CType::UnsignedInt),
        "size_t" => Some(CType::SizeT),
        name if types.contains(name) => Some(CType::Named(name.to_string())),
        _ => None,
    }
}

fn parse_symbol(
    path: &str,
    index: usize,
    raw: &RawSymbol,
    types: &BTreeSet<&str>,
) -> Result<Symbol> {
    let context = format!("{path}: symbols[{index}] (`{}`)", raw.export);
    if !is_identifier(&raw.export) {
        return Err(format!(
            "{context}: the export name is not a Rust identifier"
        ));
    }
    if !is_identifier(&raw.api) {
        return Err(format!("{context}: the api name is not an identifier"));
    }
    let returns = parse_c_type(&raw.returns, types)
        .ok_or_else(|| format!("{context}: unknown C return type `{}`", raw.returns))?;
    let mut params = Vec::new();
    let mut param_names = BTreeSet::new();
    for param in &raw.params {
        if !is_identifier(&param.name) {
            return Err(format!(
                "{context}: parameter name `{}` is not a Rust identifier",
                param.name
            ));
        }
        if !param_names.insert(param.name.as_str()) {
            return Err(format!(
                "{context}: duplicate parameter name `{}`",
                param.name
            ));
        }
        let c_type = parse_c_type(&param.c_type, types).ok_or_else(|| {
            format!(
                "{context}: parameter `{}` has unknown C type `{}`",
                param.name, param.c_type
            )
        })?;
        params.push(Param {
            name: param.name.clone(),
            c_type,
        });
    }
    let mut components = BTreeSet::new();
    for component in &raw.components {
        if !COMPONENTS.contains(&component.as_str()) {
            return Err(format!(
                "{context}: unknown component `{component}` (expected one of {})",
                COMPONENTS.join(", ")
            ));
        }
        if !components.insert(component.clone()) {
            return Err(format!(
                "{context}: component `{component}` is listed twice"
            ));
        }
    }
    if components.is_empty() {
        return Err(format!("{context}: no component uses this symbol"));
    }
    Ok(Symbol {
        export: raw.export.clone(),
        api: raw.api.clone(),
        abi_version: raw.abi_version,
        returns,
        params,
        components,
    })
}
