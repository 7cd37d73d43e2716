//! The driver symbol list (`templates/driver-symbols.json`), validated into
//! typed records. Every error names the file and the JSON path of the bad
//! value; nothing is written when the list is refused.
//!
//! The C types a symbol may use are those of NVIDIA's `cuda.h`: the scalar
//! types ([`SCALARS`]), the driver's typedefs ([`BUILTIN_TYPES`]), enum types
//! declared in the list's `types` table with their integer width, and
//! pointers to any of these. [`CType`] spells each in Rust and in C from this
//! one table, so the Rust table and the header check never disagree.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

use serde::Deserialize;

use super::inputs::DRIVER_SYMBOLS_PATH;
use crate::Result;

pub const COMPONENT_PROBE_INVENTORY: &str = "probe-inventory";
const COMPONENTS: [&str; 2] = [COMPONENT_PROBE_INVENTORY, "runtime"];

/// A C scalar: its C spelling, its Rust spelling, the range of an integer.
pub type Scalar = (&'static str, &'static str, Option<(i128, i128)>);

#[rustfmt::skip]
pub const SCALARS: [Scalar; 9] = [
    ("void", "c_void", None),
    ("char", "c_char", None),
    ("int", "c_int", Some((i32::MIN as i128, i32::MAX as i128))),
    ("unsigned int", "c_uint", Some((0, u32::MAX as i128))),
    ("long long", "c_longlong", Some((i64::MIN as i128, i64::MAX as i128))),
    ("unsigned long long", "c_ulonglong", Some((0, u64::MAX as i128))),
    ("size_t", "usize", Some((0, u64::MAX as i128))),
    ("float", "f32", None),
    ("double", "f64", None),
];

fn scalar(c_spelling: &str) -> Option<&'static Scalar> {
    SCALARS.iter().find(|entry| entry.0 == c_spelling)
}

/// What a named driver type is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamedKind {
    /// A typedef of an integer scalar, by its C spelling (`CUdevice` is `int`).
    Integer(&'static str),
    /// `struct TAG *`: an opaque handle the host never dereferences.
    Handle(&'static str),
    /// A C enum of this many bits (`CUresult`, `CUdevice_attribute`).
    Enum(u8),
}

use NamedKind::{Handle, Integer};
const ULL: NamedKind = Integer("unsigned long long");

/// The typedefs of `cuda.h` every list may use without declaring them:
/// (name, kind, doc). Handle tags are `cuda.h`'s own.
#[rustfmt::skip]
pub const BUILTIN_TYPES: &[(&str, NamedKind, &str)] = &[
    ("CUresult", NamedKind::Enum(32), "Driver status code; 0 is success."),
    ("CUdevice", Integer("int"), "Device handle returned by cuDeviceGet."),
    ("CUdeviceptr", ULL, "Device address (the _v2 ABI is 64-bit)."),
    ("CUtexObject", ULL, "Texture object handle."),
    ("CUsurfObject", ULL, "Surface object handle."),
    ("CUmemGenericAllocationHandle", ULL, "Generic memory allocation handle."),
    ("CUarray", Handle("CUarray_st"), "Opaque CUDA array handle."),
    ("CUcontext", Handle("CUctx_st"), "Opaque driver context handle."),
    ("CUdevResourceDesc", Handle("CUdevResourceDesc_st"), "Opaque device resource descriptor."),
    ("CUevent", Handle("CUevent_st"), "Opaque event handle."),
    ("CUexternalMemory", Handle("CUextMemory_st"), "Opaque external memory handle."),
    ("CUexternalSemaphore", Handle("CUextSemaphore_st"), "Opaque external semaphore handle."),
    ("CUfunction", Handle("CUfunc_st"), "Opaque kernel function handle."),
    ("CUgraph", Handle("CUgraph_st"), "Opaque graph handle."),
    ("CUgraphExec", Handle("CUgraphExec_st"), "Opaque executable graph handle."),
    ("CUgraphNode", Handle("CUgraphNode_st"), "Opaque graph node handle."),
    ("CUgraphicsResource", Handle("CUgraphicsResource_st"), "Opaque graphics interop resource handle."),
    ("CUgreenCtx", Handle("CUgreenCtx_st"), "Opaque green context handle."),
    ("CUkernel", Handle("CUkern_st"), "Opaque library kernel handle."),
    ("CUlibrary", Handle("CUlib_st"), "Opaque library handle."),
    ("CUlinkState", Handle("CUlinkState_st"), "Opaque linker state handle."),
    ("CUmemoryPool", Handle("CUmemPoolHandle_st"), "Opaque memory pool handle."),
    ("CUmipmappedArray", Handle("CUmipmappedArray_st"), "Opaque mipmapped array handle."),
    ("CUmodule", Handle("CUmod_st"), "Opaque module handle."),
    ("CUstream", Handle("CUstream_st"), "Opaque driver stream handle."),
    ("CUsurfref", Handle("CUsurfref_st"), "Opaque surface reference handle."),
    ("CUtexref", Handle("CUtexref_st"), "Opaque texture reference handle."),
    ("CUuserObject", Handle("CUuserObject_st"), "Opaque user object handle."),
];

/// A named type: what it is, and its doc line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedType {
    pub kind: NamedKind,
    pub doc: String,
}

impl NamedType {
    /// The Rust type it aliases (`c_int`, `i32`, `*mut CUctx_st`).
    pub fn rust_alias(&self) -> String {
        match self.kind {
            Integer(c_type) => scalar(c_type).map_or("", |entry| entry.1).into(),
            NamedKind::Enum(bits) => format!("i{bits}"),
            Handle(tag) => format!("*mut {tag}"),
        }
    }

    fn integer_range(&self) -> Option<(i128, i128)> {
        let half = |bits: u8| 1i128 << (bits - 1);
        match self.kind {
            Integer(c_type) => scalar(c_type)?.2,
            NamedKind::Enum(bits) => Some((-half(bits), half(bits) - 1)),
            Handle(_) => None,
        }
    }
}

/// A C type: `[const] BASE` (a scalar's C spelling or a type name) under
/// `stars` pointer levels; `const` qualifies the innermost pointee.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct CType {
    pub base: String,
    pub is_const: bool,
    pub stars: usize,
}

const C_TYPE_HELP: &str = "expected a cuda.h type: void *, const void *, void **, \
    const char *, int, unsigned int, long long, unsigned long long, size_t, float, double, \
    a cuda.h typedef (CUresult, CUdevice, CUdeviceptr, CUcontext, CUstream, CUmodule, ...), \
    an enum declared in `types`, or a pointer to any of these";

impl TryFrom<String> for CType {
    type Error = String;

    /// `[const] BASE` then any number of `*`. A const value means nothing
    /// to the ABI, and `void` is only a pointee.
    fn try_from(text: String) -> std::result::Result<Self, String> {
        let spaced = text.replace('*', " * ");
        let mut words: Vec<&str> = spaced.split_whitespace().collect();
        let stars = words.iter().rev().take_while(|word| **word == "*").count();
        words.truncate(words.len() - stars);
        let is_const = words.first() == Some(&"const");
        let base = words[usize::from(is_const)..].join(" ");
        let known = scalar(&base).is_some() || is_identifier(&base);
        let c_type = CType {
            base,
            is_const,
            stars,
        };
        let value = stars > 0 || !(is_const || c_type.base == "void");
        let message = || format!("unknown C type `{text}` ({C_TYPE_HELP})");
        (known && value).then_some(c_type).ok_or_else(message)
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
        let base = scalar(&self.base).map_or(self.base.as_str(), |entry| entry.1);
        let innermost = if self.is_const { "*const " } else { "*mut " };
        match self.stars {
            0 => base.to_string(),
            stars => format!("{}{innermost}{base}", "*mut ".repeat(stars - 1)),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    pub name: String,
    pub c_type: CType,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Symbol {
    pub export: String,
    pub api: String,
    pub abi_version: u32,
    /// The driver version (cuDriverGetVersion units) that introduced the export.
    pub since: u32,
    /// Always `CUresult`.
    returns: CType,
    pub params: Vec<Param>,
    /// Component -> tier (`required` or `optional`).
    pub components: BTreeMap<String, String>,
    /// Header set -> why its `cuda.h` does not declare this export.
    #[serde(default)]
    pub undeclared_in: BTreeMap<String, String>,
    /// Why the list still uses an export the headers mark deprecated.
    #[serde(default)]
    pub deprecated: Option<String>,
}

impl Symbol {
    /// Each parameter as `spell` writes it, joined by `, `.
    pub fn params_as(&self, spell: impl Fn(&Param) -> String) -> String {
        let params: Vec<String> = self.params.iter().map(spell).collect();
        params.join(", ")
    }

    /// The tier in a table for `component` (None: every symbol, required
    /// when any component requires it).
    pub fn tier(&self, component: Option<&str>) -> Option<&str> {
        let required = self.components.values().any(|tier| tier == "required");
        match component {
            Some(component) => self.components.get(component).map(String::as_str),
            None => Some(if required { "required" } else { "optional" }),
        }
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
    calling_convention: String,
    #[serde(rename = "header_sets")]
    sets: BTreeMap<String, HeaderSet>,
    #[serde(rename = "types")]
    declared: BTreeMap<String, DeclaredEnum>,
    /// After `parse`: every named type the list uses (and `CUresult`).
    #[serde(skip)]
    pub types: BTreeMap<String, NamedType>,
    pub constants: BTreeMap<String, Constant>,
    /// After `parse`: the header sets, named.
    #[serde(skip)]
    pub header_sets: Vec<HeaderSet>,
    pub symbols: Vec<Symbol>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeclaredEnum {
    kind: String,
    bits: u8,
    doc: String,
}

/// `Err` naming the list, the JSON path and the message unless `ok`.
fn ensure(ok: bool, path: impl Display, message: impl Display) -> Result<()> {
    let error = || format!("{DRIVER_SYMBOLS_PATH}: {path}: {message}");
    ok.then_some(()).ok_or_else(error)
}

const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "box", "break", "const", "continue", "crate", "dyn", "else", "enum",
    "extern", "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod",
    "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
    "true", "try", "type", "unsafe", "use", "where", "while", "yield", "abstract", "become", "do",
    "final", "macro", "override", "priv", "typeof", "unsized", "virtual",
];
/// The words C spells its scalar types with, and other C keywords of types.
pub const C_WORDS: &[&str] = &[
    "const", "signed", "unsigned", "long", "short", "struct", "enum", "void", "char", "int",
    "size_t", "float", "double",
];

/// An identifier valid in both Rust and C (and not a keyword of either that matters here).
pub fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && text != "_"
        && !RUST_KEYWORDS.contains(&text)
        && !C_WORDS.contains(&text)
}

impl SymbolList {
    /// Parses and validates the list file. Bad JSON, and a missing,
    /// unknown or mistyped key, are named by their place in the file.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let mut list: SymbolList =
            serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
                let (path, inner) = (error.path().to_string(), error.inner());
                let place = match path.as_str() {
                    _ if inner.is_syntax() || inner.is_eof() => "not valid JSON",
                    "." => "(top level)",
                    path => path,
                };
                format!("{DRIVER_SYMBOLS_PATH}: {place}: {inner}")
            })?;
        let version = list.schema_version;
        let message = format!("{version} is not supported (expected 2)");
        ensure(version == 2, "schema_version", message)?;
        let convention = &list.calling_convention;
        let message = format!("`{convention}` is not supported (expected `system`)");
        ensure(convention == "system", "calling_convention", message)?;
        list.header_sets = header_sets(std::mem::take(&mut list.sets))?;

        let mut used = BTreeSet::from(["CUresult".to_string()]);
        let mut named = BTreeMap::new();
        for (name, kind, doc) in BUILTIN_TYPES {
            let doc = doc.to_string();
            named.insert(name.to_string(), NamedType { kind: *kind, doc });
        }
        for (name, declared) in std::mem::take(&mut list.declared) {
            let path = format!("types.{name}");
            identifier_and_doc(&name, &declared.doc, &path)?;
            let message = "cuda.h's own typedef; the generator knows it already";
            ensure(!named.contains_key(&name), &path, message)?;
            let kind = &declared.kind;
            let message = format!("`{kind}` is not supported (expected `enum`)");
            ensure(kind == "enum", format!("{path}.kind"), message)?;
            let bits = [8, 16, 32, 64].contains(&declared.bits);
            ensure(bits, format!("{path}.bits"), "expected 8, 16, 32 or 64")?;
            let (kind, doc) = (NamedKind::Enum(declared.bits), declared.doc);
            used.insert(name.clone());
            named.insert(name, NamedType { kind, doc });
        }
        // Every named type the list mentions must be known.
        let mut known = |c_type: &CType, path: String| {
            let found = scalar(&c_type.base).is_some() || named.contains_key(&c_type.base);
            let spelled = c_type.c_spelling();
            let message = format!("unknown C type `{spelled}` ({C_TYPE_HELP})");
            used.insert(c_type.base.clone());
            ensure(found, path, message)
        };

        for (name, constant) in &list.constants {
            let path = format!("constants.{name}");
            identifier_and_doc(name, &constant.doc, &path)?;
            known(&constant.c_type, format!("{path}.c_type"))?;
            let base = &constant.c_type.base;
            let range = match scalar(base) {
                Some(entry) => entry.2,
                None => named.get(base).and_then(NamedType::integer_range),
            };
            let range = range.filter(|_| constant.c_type.stars == 0);
            let message = "a constant needs an integer type";
            ensure(range.is_some(), format!("{path}.c_type"), message)?;
            let (low, high) = range.unwrap_or_default();
            let in_range = (low..=high).contains(&i128::from(constant.value));
            let message = "out of range for its C type";
            ensure(in_range, format!("{path}.value"), message)?;
        }
        let success = list.constants.contains_key("CUDA_SUCCESS");
        ensure(success, "constants", "lacks `CUDA_SUCCESS`")?;

        let any = !list.symbols.is_empty();
        ensure(any, "symbols", "the symbol list is empty")?;
        let mut exports = BTreeSet::new();
        for (index, symbol) in list.symbols.iter().enumerate() {
            let path = |key: &str| format!("symbols[{index}].{key}");
            check_symbol(symbol, &list.header_sets, path)?;
            for (param_index, param) in symbol.params.iter().enumerate() {
                known(
                    &param.c_type,
                    path(&format!("params[{param_index}].c_type")),
                )?;
            }
            let message = format!("duplicate export name `{}`", symbol.export);
            ensure(exports.insert(&symbol.export), path("export"), message)?;
        }
        for name in list.constants.keys() {
            let path = format!("constants.{name}");
            ensure(!exports.contains(name), path, "the name is also an export")?;
        }
        named.retain(|name, _| used.contains(name));
        list.types = named;
        Ok(list)
    }
}

fn identifier_and_doc(name: &str, doc: &str, path: &str) -> Result<()> {
    ensure(is_identifier(name), path, "the name is not an identifier")?;
    let message = "the doc text is empty";
    ensure(!doc.trim().is_empty(), format!("{path}.doc"), message)
}

fn header_sets(raw: BTreeMap<String, HeaderSet>) -> Result<Vec<HeaderSet>> {
    let mut sets = Vec::new();
    for (name, mut set) in raw {
        let path = format!("header_sets.{name}");
        ensure(is_identifier(&name), &path, "the name is not an identifier")?;
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-_./".contains(c);
        let plain = |text: &str| {
            let parts_ok = !text.split('/').any(|part| part.is_empty() || part == "..");
            text.chars().all(allowed) && parts_ok
        };
        let plain_names = plain(&set.package) && plain(&set.version) && plain(&set.include_dir);
        let message = "package, version and include_dir must be plain names";
        ensure(plain_names, &path, message)?;
        let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        let digest = set.wheel_sha256.len() == 64 && set.wheel_sha256.chars().all(hex);
        let message = "expected 64 lowercase hex digits";
        ensure(digest, format!("{path}.wheel_sha256"), message)?;
        set.name = name;
        sets.push(set);
    }
    let message = "no header set to check the list against";
    ensure(!sets.is_empty(), "header_sets", message)?;
    Ok(sets)
}

/// Everything of a symbol but whether its types are known.
fn check_symbol(symbol: &Symbol, sets: &[HeaderSet], path: impl Fn(&str) -> String) -> Result<()> {
    let export = &symbol.export;
    ensure(is_identifier(export), path("export"), "not an identifier")?;
    let api_ok = is_identifier(&symbol.api) && export.starts_with(&symbol.api);
    let message = "not an identifier that starts the export name";
    ensure(api_ok, path("api"), message)?;
    let (since, abi) = (symbol.since, symbol.abi_version);
    let message = format!("{since} is older than the export's abi_version {abi}");
    ensure(since >= abi, path("since"), message)?;
    let message = "expected a cuDriverGetVersion value such as 2000 or 3020";
    ensure((2000..100_000).contains(&abi), path("abi_version"), message)?;
    let returns = symbol.returns.c_spelling();
    let message = format!("`{returns}`: every Driver API function returns CUresult");
    ensure(returns == "CUresult", path("returns"), message)?;
    for (index, param) in symbol.params.iter().enumerate() {
        let (name, param_path) = (&param.name, path(&format!("params[{index}].name")));
        ensure(is_identifier(name), &param_path, "not an identifier")?;
        let unique = !symbol.params[..index]
            .iter()
            .any(|earlier| &earlier.name == name);
        let message = format!("duplicate parameter name `{name}`");
        ensure(unique, &param_path, message)?;
    }
    let components = COMPONENTS.join(", ");
    for (component, tier) in &symbol.components {
        let component_path = path(&format!("components.{component}"));
        let known = COMPONENTS.contains(&component.as_str());
        let message = format!("unknown component (expected one of {components})");
        ensure(known, &component_path, message)?;
        let tier_ok = tier == "required" || tier == "optional";
        let message = format!("unknown tier `{tier}` (expected required or optional)");
        ensure(tier_ok, &component_path, message)?;
    }
    let message = "no component uses this symbol";
    ensure(!symbol.components.is_empty(), path("components"), message)?;
    for (set, why) in &symbol.undeclared_in {
        let set_path = path(&format!("undeclared_in.{set}"));
        let known = sets.iter().any(|header_set| &header_set.name == set);
        ensure(known, &set_path, "not a header set of `header_sets`")?;
        ensure(!why.trim().is_empty(), &set_path, "say why")?;
    }
    let blank = |why: &String| why.trim().is_empty();
    let deprecated_ok = !symbol.deprecated.as_ref().is_some_and(blank);
    ensure(deprecated_ok, path("deprecated"), "say why")
}
