//! The driver symbol list (`templates/driver-symbols.json`), validated into
//! typed records. Every error names the file and the JSON path of the bad
//! value; nothing is written when the list is refused.
//!
//! The C types a symbol may use are those of NVIDIA's `cuda.h`: the scalar
//! types, the driver's typedefs ([`BUILTIN_TYPES`]: `CUresult`, `CUdevice`,
//! `CUdeviceptr`, the opaque handles), enum types declared in the list's
//! `types` table with their integer width, and pointers to any of these. One
//! table here maps each to its Rust type and to its C spelling for the
//! header check, so the two never disagree.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::inputs::DRIVER_SYMBOLS_PATH;
use crate::Result;

pub const COMPONENT_PROBE_INVENTORY: &str = "probe-inventory";
const COMPONENTS: [&str; 2] = [COMPONENT_PROBE_INVENTORY, "runtime"];
const SCHEMA_VERSION: u32 = 2;

/// The C scalar types of `cuda.h` signatures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scalar {
    Void,
    Char,
    Int,
    UnsignedInt,
    LongLong,
    UnsignedLongLong,
    SizeT,
    Float,
    Double,
}

/// A scalar's C spelling, Rust spelling, and value range if an integer.
type ScalarEntry = (&'static str, &'static str, Scalar, Option<(i128, i128)>);

const SCALARS: [ScalarEntry; 9] = [
    ("void", "c_void", Scalar::Void, None),
    ("char", "c_char", Scalar::Char, None),
    (
        "int",
        "c_int",
        Scalar::Int,
        Some((i32::MIN as i128, i32::MAX as i128)),
    ),
    (
        "unsigned int",
        "c_uint",
        Scalar::UnsignedInt,
        Some((0, u32::MAX as i128)),
    ),
    (
        "long long",
        "c_longlong",
        Scalar::LongLong,
        Some((i64::MIN as i128, i64::MAX as i128)),
    ),
    (
        "unsigned long long",
        "c_ulonglong",
        Scalar::UnsignedLongLong,
        Some((0, u64::MAX as i128)),
    ),
    (
        "size_t",
        "usize",
        Scalar::SizeT,
        Some((0, u64::MAX as i128)),
    ),
    ("float", "f32", Scalar::Float, None),
    ("double", "f64", Scalar::Double, None),
];

impl Scalar {
    fn entry(self) -> &'static ScalarEntry {
        SCALARS
            .iter()
            .find(|entry| entry.2 == self)
            .unwrap_or(&SCALARS[0])
    }

    pub fn c_spelling(self) -> &'static str {
        self.entry().0
    }

    pub fn rust_spelling(self) -> &'static str {
        self.entry().1
    }
}

/// What a named driver type is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamedKind {
    /// A typedef of an integer scalar (`CUdevice` is `int`).
    Integer(Scalar),
    /// `struct TAG *`: an opaque handle the host never dereferences.
    Handle { tag: &'static str },
    /// A C enum of this many bits (`CUresult`, `CUdevice_attribute`).
    Enum { bits: u8 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedType {
    pub name: String,
    pub kind: NamedKind,
    pub doc: String,
}

impl NamedType {
    /// The Rust integer of an enum or integer typedef.
    pub fn rust_integer(&self) -> Option<&'static str> {
        match self.kind {
            NamedKind::Integer(scalar) => Some(scalar.rust_spelling()),
            NamedKind::Enum { bits } => {
                Some(["i8", "i16", "i32", "i64"][bits.trailing_zeros() as usize - 3])
            }
            NamedKind::Handle { .. } => None,
        }
    }

    fn integer_range(&self) -> Option<(i128, i128)> {
        match self.kind {
            NamedKind::Integer(scalar) => scalar.entry().3,
            NamedKind::Enum { bits } => Some((-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)),
            NamedKind::Handle { .. } => None,
        }
    }
}

use NamedKind::{Handle, Integer};
const ENUM32: NamedKind = NamedKind::Enum { bits: 32 };
const ULL: NamedKind = Integer(Scalar::UnsignedLongLong);
const fn handle(tag: &'static str) -> NamedKind {
    Handle { tag }
}

/// The typedefs of `cuda.h` every list may use without declaring them:
/// (name, kind, doc). Handle tags are `cuda.h`'s own.
#[rustfmt::skip]
pub const BUILTIN_TYPES: &[(&str, NamedKind, &str)] = &[
    ("CUresult", ENUM32, "Driver status code; 0 is success."),
    ("CUdevice", Integer(Scalar::Int), "Device handle returned by cuDeviceGet."),
    ("CUdeviceptr", ULL, "Device address (the _v2 ABI is 64-bit)."),
    ("CUtexObject", ULL, "Texture object handle."),
    ("CUsurfObject", ULL, "Surface object handle."),
    ("CUmemGenericAllocationHandle", ULL, "Generic memory allocation handle."),
    ("CUarray", handle("CUarray_st"), "Opaque CUDA array handle."),
    ("CUcontext", handle("CUctx_st"), "Opaque driver context handle."),
    ("CUdevResourceDesc", handle("CUdevResourceDesc_st"), "Opaque device resource descriptor."),
    ("CUevent", handle("CUevent_st"), "Opaque event handle."),
    ("CUexternalMemory", handle("CUextMemory_st"), "Opaque external memory handle."),
    ("CUexternalSemaphore", handle("CUextSemaphore_st"), "Opaque external semaphore handle."),
    ("CUfunction", handle("CUfunc_st"), "Opaque kernel function handle."),
    ("CUgraph", handle("CUgraph_st"), "Opaque graph handle."),
    ("CUgraphExec", handle("CUgraphExec_st"), "Opaque executable graph handle."),
    ("CUgraphNode", handle("CUgraphNode_st"), "Opaque graph node handle."),
    ("CUgraphicsResource", handle("CUgraphicsResource_st"), "Opaque graphics interop resource handle."),
    ("CUgreenCtx", handle("CUgreenCtx_st"), "Opaque green context handle."),
    ("CUkernel", handle("CUkern_st"), "Opaque library kernel handle."),
    ("CUlibrary", handle("CUlib_st"), "Opaque library handle."),
    ("CUlinkState", handle("CUlinkState_st"), "Opaque linker state handle."),
    ("CUmemoryPool", handle("CUmemPoolHandle_st"), "Opaque memory pool handle."),
    ("CUmipmappedArray", handle("CUmipmappedArray_st"), "Opaque mipmapped array handle."),
    ("CUmodule", handle("CUmod_st"), "Opaque module handle."),
    ("CUstream", handle("CUstream_st"), "Opaque driver stream handle."),
    ("CUsurfref", handle("CUsurfref_st"), "Opaque surface reference handle."),
    ("CUtexref", handle("CUtexref_st"), "Opaque texture reference handle."),
    ("CUuserObject", handle("CUuserObject_st"), "Opaque user object handle."),
];

/// A C type of a parameter, return value or constant.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CType {
    Scalar(Scalar),
    /// A builtin typedef or a declared enum, by name.
    Named(String),
    Pointer {
        pointee: Box<CType>,
        /// `const T *`: the callee does not write through it.
        const_pointee: bool,
    },
}

impl CType {
    /// The canonical C spelling, as `cuda.h` writes it (`const void *`, `void **`).
    pub fn c_spelling(&self) -> String {
        match self {
            CType::Scalar(scalar) => scalar.c_spelling().to_string(),
            CType::Named(name) => name.clone(),
            CType::Pointer {
                pointee,
                const_pointee,
            } => {
                let inner = pointee.c_spelling();
                let inner = if *const_pointee {
                    format!("const {inner}")
                } else {
                    inner
                };
                let space = if inner.ends_with('*') { "" } else { " " };
                format!("{inner}{space}*")
            }
        }
    }

    /// The named type this type mentions.
    fn named(&self) -> Option<&str> {
        match self {
            CType::Scalar(_) => None,
            CType::Named(name) => Some(name),
            CType::Pointer { pointee, .. } => pointee.named(),
        }
    }
}

/// Whether a missing symbol fails the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Required,
    Optional,
}

impl Tier {
    /// The tier as the list spells it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Required => "required",
            Tier::Optional => "optional",
        }
    }
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
    /// The driver version (cuDriverGetVersion units) that introduced the export.
    pub since: u32,
    pub returns: CType,
    pub params: Vec<Param>,
    /// Component -> tier.
    pub components: BTreeMap<String, Tier>,
    /// Header set -> why its `cuda.h` does not declare this export.
    pub undeclared_in: BTreeMap<String, String>,
    /// Why the list still uses an export the headers mark deprecated.
    pub deprecated: Option<String>,
}

impl Symbol {
    /// The tier in a table for `component` (None: every symbol, required
    /// when any component requires it).
    pub fn tier(&self, component: Option<&str>) -> Option<Tier> {
        match component {
            Some(component) => self.components.get(component).copied(),
            None => self.components.values().min().copied(),
        }
    }
}

/// A constant the code relies on, checked against the headers.
#[derive(Clone, Debug)]
pub struct Constant {
    pub name: String,
    pub c_type: CType,
    pub value: i128,
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

#[derive(Clone, Debug)]
pub struct SymbolList {
    /// Every named type the list uses (and `CUresult`), sorted by name.
    pub types: Vec<NamedType>,
    pub constants: Vec<Constant>,
    pub header_sets: Vec<HeaderSet>,
    pub symbols: Vec<Symbol>,
}

// ---------------------------------------------------------------- raw JSON

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawList {
    schema_version: u32,
    calling_convention: String,
    header_sets: BTreeMap<String, HeaderSet>,
    types: BTreeMap<String, RawEnum>,
    constants: BTreeMap<String, RawConstant>,
    symbols: Vec<RawSymbol>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnum {
    kind: String,
    bits: u8,
    doc: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConstant {
    c_type: String,
    value: i64,
    doc: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSymbol {
    export: String,
    api: String,
    abi_version: u32,
    since: u32,
    returns: String,
    params: Vec<RawParam>,
    components: BTreeMap<String, String>,
    #[serde(default)]
    undeclared_in: BTreeMap<String, String>,
    #[serde(default)]
    deprecated: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParam {
    name: String,
    c_type: String,
}

/// An error at `json_path` of the list.
fn at(json_path: &str, message: impl std::fmt::Display) -> String {
    format!("{DRIVER_SYMBOLS_PATH}: {json_path}: {message}")
}

/// `Err(at(path, message))` unless `ok`.
fn ensure(ok: bool, path: impl std::fmt::Display, message: impl std::fmt::Display) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(at(&path.to_string(), message))
    }
}

const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "box", "break", "const", "continue", "crate", "dyn", "else", "enum",
    "extern", "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod",
    "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
    "true", "try", "type", "unsafe", "use", "where", "while", "yield", "abstract", "become", "do",
    "final", "macro", "override", "priv", "typeof", "unsized", "virtual",
];

/// An identifier valid in both Rust and C (and not a keyword of either that matters here).
pub fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && text != "_"
        && !RUST_KEYWORDS.contains(&text)
        && SCALARS
            .iter()
            .all(|scalar| !scalar.0.split(' ').any(|word| word == text))
        && ![
            "const", "signed", "unsigned", "long", "short", "struct", "enum",
        ]
        .contains(&text)
}

/// Parses a C type: `[const] BASE` followed by any number of `*`.
fn parse_c_type(text: &str, named: &BTreeMap<String, NamedType>) -> Option<CType> {
    let spaced = text.replace('*', " * ");
    let mut words: Vec<&str> = spaced.split_whitespace().collect();
    let stars = words.iter().rev().take_while(|word| **word == "*").count();
    words.truncate(words.len() - stars);
    let const_base = words.first() == Some(&"const");
    if const_base {
        words.remove(0);
    }
    let base_text = words.join(" ");
    let mut c_type = if let Some(scalar) = SCALARS.iter().find(|entry| entry.0 == base_text) {
        CType::Scalar(scalar.2)
    } else if named.contains_key(&base_text) {
        CType::Named(base_text)
    } else {
        return None;
    };
    // `const` qualifies the pointee; a const value parameter means nothing to
    // the ABI, and `void` is only a pointee.
    if stars == 0 && (const_base || c_type == CType::Scalar(Scalar::Void)) {
        return None;
    }
    for level in 0..stars {
        let const_pointee = const_base && level == 0;
        c_type = CType::Pointer {
            pointee: Box::new(c_type),
            const_pointee,
        };
    }
    Some(c_type)
}

const C_TYPE_HELP: &str = "expected a cuda.h type: void *, const void *, void **, \
    const char *, int, unsigned int, long long, unsigned long long, size_t, float, double, \
    a cuda.h typedef (CUresult, CUdevice, CUdeviceptr, CUcontext, CUstream, CUmodule, ...), \
    an enum declared in `types`, or a pointer to any of these";

fn doc_present(doc: &str, path: &str) -> Result<()> {
    ensure(
        !doc.trim().is_empty(),
        format!("{path}.doc"),
        "the doc text is empty",
    )
}

impl SymbolList {
    /// Parses and validates the list file. Bad JSON, and a missing,
    /// unknown or mistyped key, are named by their place in the file.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        // Tracking the path costs on every key: only a refused list pays it.
        let raw = serde_json::from_slice::<RawList>(bytes).or_else(|error| {
            if error.is_syntax() || error.is_eof() {
                return Err(format!("{DRIVER_SYMBOLS_PATH}: not valid JSON: {error}"));
            }
            let mut deserializer = serde_json::Deserializer::from_slice(bytes);
            serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
                let path = error.path().to_string();
                at(
                    if path == "." { "(top level)" } else { &path },
                    error.inner(),
                )
            })
        })?;
        Self::from_raw(raw)
    }

    fn from_raw(raw: RawList) -> Result<Self> {
        let version = raw.schema_version;
        let message = format!("{version} is not supported (expected {SCHEMA_VERSION})");
        ensure(version == SCHEMA_VERSION, "schema_version", message)?;
        let convention = &raw.calling_convention;
        let message = format!("`{convention}` is not supported (expected `system`)");
        ensure(convention == "system", "calling_convention", message)?;
        let header_sets = parse_header_sets(raw.header_sets)?;

        let mut named: BTreeMap<String, NamedType> = BUILTIN_TYPES
            .iter()
            .map(|(name, kind, doc)| {
                (
                    name.to_string(),
                    NamedType {
                        name: name.to_string(),
                        kind: *kind,
                        doc: doc.to_string(),
                    },
                )
            })
            .collect();
        for (name, raw_enum) in &raw.types {
            let path = format!("types.{name}");
            ensure(is_identifier(name), &path, "the name is not an identifier")?;
            let message = "cuda.h's own typedef; the generator knows it already";
            ensure(!named.contains_key(name), &path, message)?;
            let kind = &raw_enum.kind;
            let message = format!("`{kind}` is not supported (expected `enum`)");
            ensure(kind == "enum", format!("{path}.kind"), message)?;
            ensure(
                [8, 16, 32, 64].contains(&raw_enum.bits),
                format!("{path}.bits"),
                "expected 8, 16, 32 or 64",
            )?;
            doc_present(&raw_enum.doc, &path)?;
            let kind = NamedKind::Enum {
                bits: raw_enum.bits,
            };
            named.insert(
                name.clone(),
                NamedType {
                    name: name.clone(),
                    kind,
                    doc: raw_enum.doc.clone(),
                },
            );
        }

        let mut constants = Vec::new();
        for (name, raw_constant) in raw.constants {
            let path = format!("constants.{name}");
            ensure(is_identifier(&name), &path, "the name is not an identifier")?;
            let c_type = parse_c_type(&raw_constant.c_type, &named).ok_or_else(|| {
                at(
                    &format!("{path}.c_type"),
                    format!("unknown C type `{}` ({C_TYPE_HELP})", raw_constant.c_type),
                )
            })?;
            let range = match &c_type {
                CType::Scalar(scalar) => scalar.entry().3,
                CType::Named(type_name) => named.get(type_name).and_then(NamedType::integer_range),
                CType::Pointer { .. } => None,
            }
            .ok_or_else(|| {
                at(
                    &format!("{path}.c_type"),
                    "a constant needs an integer type",
                )
            })?;
            let value = i128::from(raw_constant.value);
            ensure(
                (range.0..=range.1).contains(&value),
                format!("{path}.value"),
                "out of range for its C type",
            )?;
            doc_present(&raw_constant.doc, &path)?;
            constants.push(Constant {
                name,
                c_type,
                value,
                doc: raw_constant.doc,
            });
        }
        let has_success = constants
            .iter()
            .any(|constant| constant.name == "CUDA_SUCCESS");
        ensure(has_success, "constants", "lacks `CUDA_SUCCESS`")?;

        ensure(
            !raw.symbols.is_empty(),
            "symbols",
            "the symbol list is empty",
        )?;
        let mut exports = BTreeSet::new();
        let mut symbols = Vec::new();
        for (index, raw_symbol) in raw.symbols.into_iter().enumerate() {
            let symbol = parse_symbol(index, raw_symbol, &named, &header_sets)?;
            let export = &symbol.export;
            let (new, message) = (
                exports.insert(export.clone()),
                format!("duplicate export name `{export}`"),
            );
            ensure(new, format!("symbols[{index}].export"), message)?;
            symbols.push(symbol);
        }
        for constant in &constants {
            ensure(
                !exports.contains(&constant.name),
                format!("constants.{}", constant.name),
                "the name is also an export",
            )?;
        }

        let mut used: BTreeSet<&str> = BTreeSet::from(["CUresult"]);
        let mentioned = symbols
            .iter()
            .flat_map(|symbol| {
                symbol
                    .params
                    .iter()
                    .map(|param| &param.c_type)
                    .chain([&symbol.returns])
            })
            .chain(constants.iter().map(|constant| &constant.c_type));
        used.extend(mentioned.filter_map(CType::named));
        used.extend(raw.types.keys().map(String::as_str));
        let types = used
            .into_iter()
            .filter_map(|name| named.get(name).cloned())
            .collect();
        Ok(Self {
            types,
            constants,
            header_sets,
            symbols,
        })
    }
}

fn parse_header_sets(raw: BTreeMap<String, HeaderSet>) -> Result<Vec<HeaderSet>> {
    let mut sets = Vec::new();
    for (name, mut set) in raw {
        let path = format!("header_sets.{name}");
        ensure(is_identifier(&name), &path, "the name is not an identifier")?;
        let plain = |text: &str| {
            !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
                && !text.split('/').any(|part| part.is_empty() || part == "..")
        };
        let plain_names = plain(&set.package) && plain(&set.version) && plain(&set.include_dir);
        ensure(
            plain_names,
            &path,
            "package, version and include_dir must be plain names",
        )?;
        let digest = &set.wheel_sha256;
        let digest_ok = digest.len() == 64
            && digest
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        ensure(
            digest_ok,
            format!("{path}.wheel_sha256"),
            "expected 64 lowercase hex digits",
        )?;
        set.name = name;
        sets.push(set);
    }
    ensure(
        !sets.is_empty(),
        "header_sets",
        "no header set to check the list against",
    )?;
    Ok(sets)
}

fn parse_symbol(
    index: usize,
    raw: RawSymbol,
    named: &BTreeMap<String, NamedType>,
    header_sets: &[HeaderSet],
) -> Result<Symbol> {
    // Paths are spelled only for an error.
    let path = |key: &str| format!("symbols[{index}].{key}");
    ensure(
        is_identifier(&raw.export),
        path("export"),
        "not an identifier",
    )?;
    let api_ok = is_identifier(&raw.api) && raw.export.starts_with(&raw.api);
    ensure(
        api_ok,
        path("api"),
        "not an identifier that starts the export name",
    )?;
    let (since, abi) = (raw.since, raw.abi_version);
    let message = format!("{since} is older than the export's abi_version {abi}");
    ensure(since >= abi, path("since"), message)?;
    let message = "expected a cuDriverGetVersion value such as 2000 or 3020";
    ensure((2000..100_000).contains(&abi), path("abi_version"), message)?;
    let returns = parse_c_type(&raw.returns, named)
        .filter(|returns| matches!(returns, CType::Named(name) if name == "CUresult"))
        .ok_or_else(|| {
            at(
                &path("returns"),
                format!(
                    "`{}`: every Driver API function returns CUresult",
                    raw.returns
                ),
            )
        })?;
    let mut params: Vec<Param> = Vec::with_capacity(raw.params.len());
    for (param_index, param) in raw.params.into_iter().enumerate() {
        let param_path = |key: &str| path(&format!("params[{param_index}].{key}"));
        ensure(
            is_identifier(&param.name),
            param_path("name"),
            "not an identifier",
        )?;
        let unique = !params.iter().any(|earlier| earlier.name == param.name);
        ensure(
            unique,
            param_path("name"),
            format!("duplicate parameter name `{}`", param.name),
        )?;
        let c_type = parse_c_type(&param.c_type, named).ok_or_else(|| {
            let message = format!(
                "parameter `{}` has unknown C type `{}` ({C_TYPE_HELP})",
                param.name, param.c_type
            );
            at(&param_path("c_type"), message)
        })?;
        params.push(Param {
            name: param.name,
            c_type,
        });
    }
    let mut components = BTreeMap::new();
    for (component, tier) in raw.components {
        let component_path = || path(&format!("components.{component}"));
        let known = COMPONENTS.contains(&component.as_str());
        let message = format!(
            "unknown component (expected one of {})",
            COMPONENTS.join(", ")
        );
        ensure(known, component_path(), message)?;
        let tier = match tier.as_str() {
            "required" => Tier::Required,
            "optional" => Tier::Optional,
            other => {
                return Err(at(
                    &component_path(),
                    format!("unknown tier `{other}` (expected required or optional)"),
                ))
            }
        };
        components.insert(component, tier);
    }
    ensure(
        !components.is_empty(),
        path("components"),
        "no component uses this symbol",
    )?;
    for (set, why) in &raw.undeclared_in {
        let set_path = || path(&format!("undeclared_in.{set}"));
        let known = header_sets.iter().any(|header_set| &header_set.name == set);
        ensure(known, set_path(), "not a header set of `header_sets`")?;
        ensure(!why.trim().is_empty(), set_path(), "say why")?;
    }
    let deprecated_ok = !raw
        .deprecated
        .as_ref()
        .is_some_and(|why| why.trim().is_empty());
    ensure(deprecated_ok, path("deprecated"), "say why")?;
    Ok(Symbol {
        deprecated: raw.deprecated,
        export: raw.export,
        api: raw.api,
        abi_version: raw.abi_version,
        since: raw.since,
        returns,
        params,
        components,
        undeclared_in: raw.undeclared_in,
    })
}
