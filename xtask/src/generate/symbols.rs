//! The driver symbol list (`templates/driver-symbols.json`), validated into
//! typed records. Every error names the file and the JSON path of the bad
//! value; nothing is written when the list is refused. A C type is a scalar
//! ([`scalar`]), a type the list declares in `types`, or a pointer to one;
//! the ABI check compiles each type, constant and signature against
//! NVIDIA's headers, so no fact of `cuda.h` here goes unchecked.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

use proc_macro2::TokenStream;
use serde::Deserialize;

use super::inputs::{parse_json, DRIVER_SYMBOLS_PATH};
use crate::Result;

/// The Rust spelling of the C scalar `c_spelling`.
pub fn scalar(c_spelling: &str) -> Option<&'static str> {
    Some(match c_spelling {
        "void" => "c_void",
        "char" => "c_char",
        "unsigned char" => "c_uchar",
        "int" => "c_int",
        "unsigned int" => "c_uint",
        "long long" => "c_longlong",
        "unsigned long long" => "c_ulonglong",
        "size_t" => "usize",
        "float" => "f32",
        "double" => "f64",
        _ => return None,
    })
}

/// The words C spells its scalar types with, and other C keywords of types.
pub const C_WORDS: &[&str] = &[
    "const", "signed", "unsigned", "long", "short", "struct", "enum", "void", "char", "int",
    "size_t", "float", "double",
];

/// ASCII letters, digits and `_`, not starting with a digit.
pub fn is_word(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A word that is an identifier in both Rust and C (syn refuses Rust's keywords).
pub fn is_identifier(text: &str) -> bool {
    is_word(text) && syn::parse_str::<syn::Ident>(text).is_ok() && !C_WORDS.contains(&text)
}

/// A type the list declares (`types`), checked against `cuda.h` by the ABI check.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum NamedType {
    /// `typedef C_TYPE NAME;` (`CUdevice` is `int`).
    Typedef { c_type: CType, doc: String },
    /// `typedef struct TAG *NAME;`: an opaque handle the host never dereferences.
    Handle { tag: String, doc: String },
    /// A C enum of this many bits (`CUresult`, `CUdevice_attribute`).
    Enum { bits: u8, doc: String },
}

/// A C type: `[const] BASE` (a scalar's C spelling or a type name) under
/// `stars` pointer levels; `const` qualifies the innermost pointee.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub struct CType {
    pub base: String,
    pub is_const: bool,
    pub stars: usize,
}

const C_TYPE_HELP: &str =
    "expected a scalar (int, size_t, ...), a type of `types`, or a pointer to one (void *)";

impl From<String> for CType {
    /// `[const] BASE` then any number of `*`, as written.
    fn from(text: String) -> Self {
        let spaced = text.replace('*', " * ");
        let mut words: Vec<&str> = spaced.split_whitespace().collect();
        let stars = words.iter().rev().take_while(|word| **word == "*").count();
        words.truncate(words.len() - stars);
        let is_const = words.first() == Some(&"const");
        let base = words[usize::from(is_const)..].join(" ");
        CType {
            base,
            is_const,
            stars,
        }
    }
}

impl CType {
    /// As `cuda.h` spells it: `const void *`, `void **`, `CUdevice`.
    pub fn c_spelling(&self) -> String {
        let qualifier = if self.is_const { "const " } else { "" };
        let space = if self.stars > 0 { " " } else { "" };
        format!("{qualifier}{}{space}{}", self.base, "*".repeat(self.stars))
    }

    /// As Rust spells it: `*const c_void`, `*mut *mut c_void`, `CUdevice`.
    pub fn rust_spelling(&self) -> String {
        let base = scalar(&self.base).unwrap_or(&self.base);
        let innermost = match (self.stars, self.is_const) {
            (0, _) => "",
            (_, true) => "*const ",
            (_, false) => "*mut ",
        };
        let outer = "*mut ".repeat(self.stars.saturating_sub(1));
        format!("{outer}{innermost}{base}")
    }

    /// [`Self::rust_spelling`] as tokens.
    pub fn rust_type(&self) -> TokenStream {
        // The list's validation admits only identifiers and `*`, which lex.
        self.rust_spelling()
            .parse()
            .expect("a Rust type spelling is valid tokens")
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    pub name: String,
    pub c_type: CType,
}

/// The tables that use a symbol, each with its tier.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Components {
    pub probe_inventory: Option<Tier>,
    pub runtime: Option<Tier>,
}

/// Whether a driver without the symbol fails the load (required first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Required,
    Optional,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Symbol {
    pub export: String,
    pub api: String,
    pub abi_version: u32,
    /// The driver version (cuDriverGetVersion units) that introduced the export.
    pub since: u32,
    pub params: Vec<Param>,
    pub components: Components,
    /// Header set -> why its `cuda.h` does not declare this export.
    #[serde(default)]
    pub undeclared_in: BTreeMap<String, String>,
    /// Why the list still uses an export the headers mark deprecated.
    #[serde(default)]
    pub deprecated: Option<String>,
}

impl Symbol {
    /// The tier in the table of every symbol: required when any component
    /// requires it.
    pub fn tier(&self) -> Option<Tier> {
        let inventory = self.components.probe_inventory;
        let runtime = self.components.runtime;
        inventory.into_iter().chain(runtime).min()
    }
}

/// A constant the code relies on, checked against the headers.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constant {
    pub c_type: CType,
    pub value: i64,
    pub doc: String,
}

/// One NVIDIA header set: a PyPI wheel pinned by version and digest.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderSet {
    /// Its key in `header_sets`.
    #[serde(skip)]
    pub name: String,
    pub package: String,
    pub version: String,
    pub wheel_sha256: String,
    /// The directory in the wheel holding `cuda.h` and `cudaTypedefs.h`.
    pub include_dir: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SymbolList {
    schema_version: u32,
    pub header_sets: BTreeMap<String, HeaderSet>,
    pub types: BTreeMap<String, NamedType>,
    pub constants: BTreeMap<String, Constant>,
    pub symbols: Vec<Symbol>,
}

/// `Err` naming `file`, the JSON path and the message unless `ok`.
pub fn ensure_in(file: &str, ok: bool, path: impl Display, message: impl Display) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(format!("{file}: {path}: {message}"))
    }
}

fn ensure(ok: bool, path: impl Display, message: impl Display) -> Result<()> {
    ensure_in(DRIVER_SYMBOLS_PATH, ok, path, message)
}

impl SymbolList {
    /// Parses and validates the list file.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let mut list: SymbolList = parse_json(DRIVER_SYMBOLS_PATH, bytes)?;
        let version = list.schema_version;
        let message = format!("{version} is not supported (expected 2)");
        ensure(version == 2, "schema_version", message)?;
        for (name, set) in &mut list.header_sets {
            check_header_set(name, set)?;
            set.name = name.clone();
        }
        let message = "no header set to check the list against";
        ensure(!list.header_sets.is_empty(), "header_sets", message)?;
        // A bad type name, tag, width or constant fails the Rust or C
        // compile at its own line; only CUresult's absence would not.
        let message = "lacks `CUresult`, which every export returns";
        ensure(list.types.contains_key("CUresult"), "types", message)?;
        let mut exports = BTreeSet::new();
        for (index, symbol) in list.symbols.iter().enumerate() {
            let path = |key: &str| format!("symbols[{index}].{key}");
            list.check_symbol(symbol, path)?;
            let message = format!("duplicate export name `{}`", symbol.export);
            ensure(exports.insert(&symbol.export), path("export"), message)?;
        }
        Ok(list)
    }

    /// Everything of a symbol but whether its export name is unique.
    fn check_symbol(&self, symbol: &Symbol, path: impl Fn(&str) -> String) -> Result<()> {
        let export = &symbol.export;
        ensure(is_identifier(export), path("export"), "not an identifier")?;
        let since = symbol.since;
        let abi = symbol.abi_version;
        let message = format!("{since} is older than the export's abi_version {abi}");
        ensure(since >= abi, path("since"), message)?;
        for (index, param) in symbol.params.iter().enumerate() {
            let path = |key: &str| path(&format!("params[{index}].{key}"));
            let name_ok = is_identifier(&param.name);
            ensure(name_ok, path("name"), "not an identifier")?;
            // Known, and not a const value or a bare `void` (only a pointee).
            let c_type = &param.c_type;
            let spelled = c_type.c_spelling();
            let known = scalar(&c_type.base).is_some() || self.types.contains_key(&c_type.base);
            let value = c_type.stars > 0 || !(c_type.is_const || c_type.base == "void");
            let message = format!("unknown C type `{spelled}` ({C_TYPE_HELP})");
            ensure(known && value, path("c_type"), message)?;
        }
        let message = "no component uses this symbol";
        ensure(symbol.tier().is_some(), path("components"), message)?;
        for (set, why) in &symbol.undeclared_in {
            let set_path = path(&format!("undeclared_in.{set}"));
            let known = self.header_sets.contains_key(set);
            ensure(known, &set_path, "not a header set of `header_sets`")?;
            ensure(!why.trim().is_empty(), &set_path, "say why")?;
        }
        let deprecated_ok = symbol.deprecated.iter().all(|why| !why.trim().is_empty());
        ensure(deprecated_ok, path("deprecated"), "say why")
    }
}

/// A header set's name (a C macro's), its plain file names, and its digest.
fn check_header_set(name: &str, set: &HeaderSet) -> Result<()> {
    let path = format!("header_sets.{name}");
    ensure(is_identifier(name), &path, "the name is not an identifier")?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let part_ok = |part: &str| !part.is_empty() && part != ".." && part.chars().all(allowed);
    let plain = |text: &str| text.split('/').all(part_ok);
    let plain_names = plain(&set.package) && plain(&set.version) && plain(&set.include_dir);
    let message = "package, version and include_dir must be plain names";
    ensure(plain_names, &path, message)?;
    let digest = &set.wheel_sha256;
    let hex = digest.len() == 64 && digest.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
    let message = "expected 64 lowercase hex digits";
    ensure(hex, format!("{path}.wheel_sha256"), message)
}
