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
pub const COMPONENT_RUNTIME: &str = "runtime";
const COMPONENTS: [&str; 2] = [COMPONENT_PROBE_INVENTORY, COMPONENT_RUNTIME];
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

/// (C spelling, Rust spelling) of every scalar.
const SCALARS: [(&str, &str, Scalar); 9] = [
    ("void", "c_void", Scalar::Void),
    ("char", "c_char", Scalar::Char),
    ("int", "c_int", Scalar::Int),
    ("unsigned int", "c_uint", Scalar::UnsignedInt),
    ("long long", "c_longlong", Scalar::LongLong),
    (
        "unsigned long long",
        "c_ulonglong",
        Scalar::UnsignedLongLong,
    ),
    ("size_t", "usize", Scalar::SizeT),
    ("float", "f32", Scalar::Float),
    ("double", "f64", Scalar::Double),
];

impl Scalar {
    pub fn c_spelling(self) -> &'static str {
        SCALARS
            .iter()
            .find(|entry| entry.2 == self)
            .map_or("", |entry| entry.0)
    }

    pub fn rust_spelling(self) -> &'static str {
        SCALARS
            .iter()
            .find(|entry| entry.2 == self)
            .map_or("", |entry| entry.1)
    }

    /// The value range of an integer scalar (None: not an integer constant type).
    fn integer_range(self) -> Option<(i128, i128)> {
        match self {
            Scalar::Int => Some((i32::MIN.into(), i32::MAX.into())),
            Scalar::UnsignedInt => Some((0, u32::MAX.into())),
            Scalar::LongLong => Some((i64::MIN.into(), i64::MAX.into())),
            Scalar::UnsignedLongLong | Scalar::SizeT => Some((0, u64::MAX.into())),
            _ => None,
        }
    }
}

/// What a named driver type is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamedKind {
    /// A typedef of an integer scalar (`CUdevice` is `int`).
    Integer(Scalar),
    /// `struct TAG *`: an opaque handle the host never dereferences.
    Handle { tag: String },
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
        match &self.kind {
            NamedKind::Integer(scalar) => Some(scalar.rust_spelling()),
            NamedKind::Enum { bits } => Some(match bits {
                8 => "i8",
                16 => "i16",
                64 => "i64",
                _ => "i32",
            }),
            NamedKind::Handle { .. } => None,
        }
    }

    fn integer_range(&self) -> Option<(i128, i128)> {
        match &self.kind {
            NamedKind::Integer(scalar) => scalar.integer_range(),
            NamedKind::Enum { bits } => {
                let half = 1i128 << (bits - 1);
                Some((-half, half - 1))
            }
            NamedKind::Handle { .. } => None,
        }
    }
}

/// The typedefs of `cuda.h` every list may use without declaring them:
/// (name, kind, doc). Handle tags are `cuda.h`'s own.
pub const BUILTIN_TYPES: &[(&str, BuiltinKind, &str)] = &[
    (
        "CUresult",
        BuiltinKind::Enum32,
        "Driver status code; 0 is success.",
    ),
    (
        "CUdevice",
        BuiltinKind::Integer(Scalar::Int),
        "Device handle returned by cuDeviceGet.",
    ),
    (
        "CUdeviceptr",
        BuiltinKind::Integer(Scalar::UnsignedLongLong),
        "Device address (the _v2 ABI is 64-bit).",
    ),
    (
        "CUtexObject",
        BuiltinKind::Integer(Scalar::UnsignedLongLong),
        "Texture object handle.",
    ),
    (
        "CUsurfObject",
        BuiltinKind::Integer(Scalar::UnsignedLongLong),
        "Surface object handle.",
    ),
    (
        "CUmemGenericAllocationHandle",
        BuiltinKind::Integer(Scalar::UnsignedLongLong),
        "Generic memory allocation handle.",
    ),
    (
        "CUarray",
        BuiltinKind::Handle("CUarray_st"),
        "Opaque CUDA array handle.",
    ),
    (
        "CUcontext",
        BuiltinKind::Handle("CUctx_st"),
        "Opaque driver context handle.",
    ),
    (
        "CUdevResourceDesc",
        BuiltinKind::Handle("CUdevResourceDesc_st"),
        "Opaque device resource descriptor.",
    ),
    (
        "CUevent",
        BuiltinKind::Handle("CUevent_st"),
        "Opaque event handle.",
    ),
    (
        "CUexternalMemory",
        BuiltinKind::Handle("CUextMemory_st"),
        "Opaque external memory handle.",
    ),
    (
        "CUexternalSemaphore",
        BuiltinKind::Handle("CUextSemaphore_st"),
        "Opaque external semaphore handle.",
    ),
    (
        "CUfunction",
        BuiltinKind::Handle("CUfunc_st"),
        "Opaque kernel function handle.",
    ),
    (
        "CUgraph",
        BuiltinKind::Handle("CUgraph_st"),
        "Opaque graph handle.",
    ),
    (
        "CUgraphExec",
        BuiltinKind::Handle("CUgraphExec_st"),
        "Opaque executable graph handle.",
    ),
    (
        "CUgraphNode",
        BuiltinKind::Handle("CUgraphNode_st"),
        "Opaque graph node handle.",
    ),
    (
        "CUgraphicsResource",
        BuiltinKind::Handle("CUgraphicsResource_st"),
        "Opaque graphics interop resource handle.",
    ),
    (
        "CUgreenCtx",
        BuiltinKind::Handle("CUgreenCtx_st"),
        "Opaque green context handle.",
    ),
    (
        "CUkernel",
        BuiltinKind::Handle("CUkern_st"),
        "Opaque library kernel handle.",
    ),
    (
        "CUlibrary",
        BuiltinKind::Handle("CUlib_st"),
        "Opaque library handle.",
    ),
    (
        "CUlinkState",
        BuiltinKind::Handle("CUlinkState_st"),
        "Opaque linker state handle.",
    ),
    (
        "CUmemoryPool",
        BuiltinKind::Handle("CUmemPoolHandle_st"),
        "Opaque memory pool handle.",
    ),
    (
        "CUmipmappedArray",
        BuiltinKind::Handle("CUmipmappedArray_st"),
        "Opaque mipmapped array handle.",
    ),
    (
        "CUmodule",
        BuiltinKind::Handle("CUmod_st"),
        "Opaque module handle.",
    ),
    (
        "CUstream",
        BuiltinKind::Handle("CUstream_st"),
        "Opaque driver stream handle.",
    ),
    (
        "CUsurfref",
        BuiltinKind::Handle("CUsurfref_st"),
        "Opaque surface reference handle.",
    ),
    (
        "CUtexref",
        BuiltinKind::Handle("CUtexref_st"),
        "Opaque texture reference handle.",
    ),
    (
        "CUuserObject",
        BuiltinKind::Handle("CUuserObject_st"),
        "Opaque user object handle.",
    ),
];

/// How a [`BUILTIN_TYPES`] entry is defined.
#[derive(Clone, Copy, Debug)]
pub enum BuiltinKind {
    Integer(Scalar),
    Handle(&'static str),
    Enum32,
}

fn builtin(name: &str) -> Option<NamedType> {
    let (name, kind, doc) = BUILTIN_TYPES.iter().find(|entry| entry.0 == name)?;
    let kind = match kind {
        BuiltinKind::Integer(scalar) => NamedKind::Integer(*scalar),
        BuiltinKind::Handle(tag) => NamedKind::Handle {
            tag: (*tag).to_string(),
        },
        BuiltinKind::Enum32 => NamedKind::Enum { bits: 32 },
    };
    Some(NamedType {
        name: (*name).to_string(),
        kind,
        doc: (*doc).to_string(),
    })
}

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
                if inner.ends_with('*') {
                    format!("{inner}*")
                } else {
                    format!("{inner} *")
                }
            }
        }
    }

    /// Every named type this type mentions.
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderSet {
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
    header_sets: BTreeMap<String, RawHeaderSet>,
    types: BTreeMap<String, RawEnum>,
    constants: BTreeMap<String, RawConstant>,
    symbols: Vec<RawSymbol>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeaderSet {
    package: String,
    version: String,
    wheel_sha256: String,
    include_dir: String,
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
    // `const` qualifies the pointee; a const value parameter means nothing to the ABI.
    if const_base && stars == 0 {
        return None;
    }
    if c_type == CType::Scalar(Scalar::Void) && stars == 0 {
        return None;
    }
    for level in 0..stars {
        c_type = CType::Pointer {
            pointee: Box::new(c_type),
            const_pointee: const_base && level == 0,
        };
    }
    Some(c_type)
}

const C_TYPE_HELP: &str = "expected a cuda.h type: void *, const void *, void **, \
    const char *, int, unsigned int, long long, unsigned long long, size_t, float, double, \
    a cuda.h typedef (CUresult, CUdevice, CUdeviceptr, CUcontext, CUstream, CUmodule, ...), \
    an enum declared in `types`, or a pointer to any of these";

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
        if raw.schema_version != SCHEMA_VERSION {
            return Err(at(
                "schema_version",
                format!(
                    "{} is not supported (expected {SCHEMA_VERSION})",
                    raw.schema_version
                ),
            ));
        }
        if raw.calling_convention != "system" {
            return Err(at(
                "calling_convention",
                format!(
                    "`{}` is not supported (expected `system`)",
                    raw.calling_convention
                ),
            ));
        }
        let header_sets = parse_header_sets(raw.header_sets)?;

        let mut named: BTreeMap<String, NamedType> = BUILTIN_TYPES
            .iter()
            .filter_map(|entry| builtin(entry.0))
            .map(|named| (named.name.clone(), named))
            .collect();
        for (name, raw_enum) in &raw.types {
            let path = format!("types.{name}");
            if !is_identifier(name) {
                return Err(at(&path, "the name is not an identifier"));
            }
            if named.contains_key(name) {
                return Err(at(
                    &path,
                    "cuda.h's own typedef; the generator knows it already",
                ));
            }
            if raw_enum.kind != "enum" {
                return Err(at(
                    &format!("{path}.kind"),
                    format!("`{}` is not supported (expected `enum`)", raw_enum.kind),
                ));
            }
            if ![8, 16, 32, 64].contains(&raw_enum.bits) {
                return Err(at(&format!("{path}.bits"), "expected 8, 16, 32 or 64"));
            }
            if raw_enum.doc.trim().is_empty() {
                return Err(at(&format!("{path}.doc"), "the doc text is empty"));
            }
            named.insert(
                name.clone(),
                NamedType {
                    name: name.clone(),
                    kind: NamedKind::Enum {
                        bits: raw_enum.bits,
                    },
                    doc: raw_enum.doc.clone(),
                },
            );
        }

        let mut constants = Vec::new();
        for (name, raw_constant) in raw.constants {
            let path = format!("constants.{name}");
            if !is_identifier(&name) {
                return Err(at(&path, "the name is not an identifier"));
            }
            let c_type = parse_c_type(&raw_constant.c_type, &named).ok_or_else(|| {
                at(
                    &format!("{path}.c_type"),
                    format!("unknown C type `{}` ({C_TYPE_HELP})", raw_constant.c_type),
                )
            })?;
            let range = match &c_type {
                CType::Scalar(scalar) => scalar.integer_range(),
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
            if value < range.0 || value > range.1 {
                return Err(at(&format!("{path}.value"), "out of range for its C type"));
            }
            if raw_constant.doc.trim().is_empty() {
                return Err(at(&format!("{path}.doc"), "the doc text is empty"));
            }
            constants.push(Constant {
                name: name.clone(),
                c_type,
                value,
                doc: raw_constant.doc,
            });
        }
        if !constants
            .iter()
            .any(|constant| constant.name == "CUDA_SUCCESS")
        {
            return Err(at("constants", "lacks `CUDA_SUCCESS`"));
        }

        if raw.symbols.is_empty() {
            return Err(at("symbols", "the symbol list is empty"));
        }
        let mut exports = BTreeSet::new();
        let mut symbols = Vec::new();
        for (index, raw_symbol) in raw.symbols.into_iter().enumerate() {
            let symbol = parse_symbol(index, raw_symbol, &named, &header_sets)?;
            if !exports.insert(symbol.export.clone()) {
                return Err(at(
                    &format!("symbols[{index}].export"),
                    format!("duplicate export name `{}`", symbol.export),
                ));
            }
            symbols.push(symbol);
        }
        for constant in &constants {
            if exports.contains(&constant.name) {
                return Err(at(
                    &format!("constants.{}", constant.name),
                    "the name is also an export",
                ));
            }
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
        for name in raw.types.keys() {
            used.insert(name);
        }
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

fn parse_header_sets(raw: BTreeMap<String, RawHeaderSet>) -> Result<Vec<HeaderSet>> {
    let mut sets = Vec::new();
    for (name, raw_set) in raw {
        let path = format!("header_sets.{name}");
        if !is_identifier(&name) {
            return Err(at(&path, "the name is not an identifier"));
        }
        let plain = |text: &str| {
            !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
                && !text.split('/').any(|part| part.is_empty() || part == "..")
        };
        if !plain(&raw_set.package) || !plain(&raw_set.version) || !plain(&raw_set.include_dir) {
            return Err(at(
                &path,
                "package, version and include_dir must be plain names",
            ));
        }
        let digest_ok = raw_set.wheel_sha256.len() == 64
            && raw_set
                .wheel_sha256
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if !digest_ok {
            return Err(at(
                &format!("{path}.wheel_sha256"),
                "expected 64 lowercase hex digits",
            ));
        }
        sets.push(HeaderSet {
            name: name.clone(),
            package: raw_set.package,
            version: raw_set.version,
            wheel_sha256: raw_set.wheel_sha256,
            include_dir: raw_set.include_dir,
        });
    }
    if sets.is_empty() {
        return Err(at("header_sets", "no header set to check the list against"));
    }
    Ok(sets)
}

fn parse_symbol(
    index: usize,
    raw: RawSymbol,
    named: &BTreeMap<String, NamedType>,
    header_sets: &[HeaderSet],
) -> Result<Symbol> {
    // Paths are spelled only for an error.
    let path = || format!("symbols[{index}]");
    if !is_identifier(&raw.export) {
        return Err(at(&format!("{}.export", path()), "not an identifier"));
    }
    if !is_identifier(&raw.api) || !raw.export.starts_with(&raw.api) {
        return Err(at(
            &format!("{}.api", path()),
            "not an identifier that starts the export name",
        ));
    }
    if raw.since < raw.abi_version {
        return Err(at(
            &format!("{}.since", path()),
            format!(
                "{} is older than the export's abi_version {}",
                raw.since, raw.abi_version
            ),
        ));
    }
    if !(2000..100_000).contains(&raw.abi_version) {
        return Err(at(
            &format!("{}.abi_version", path()),
            "expected a cuDriverGetVersion value such as 2000 or 3020",
        ));
    }
    let returns = parse_c_type(&raw.returns, named)
        .filter(|returns| matches!(returns, CType::Named(name) if name == "CUresult"))
        .ok_or_else(|| {
            at(
                &format!("{}.returns", path()),
                format!(
                    "`{}`: every Driver API function returns CUresult",
                    raw.returns
                ),
            )
        })?;
    let mut params: Vec<Param> = Vec::with_capacity(raw.params.len());
    for (param_index, param) in raw.params.into_iter().enumerate() {
        let param_path = || format!("{}.params[{param_index}]", path());
        if !is_identifier(&param.name) {
            return Err(at(&format!("{}.name", param_path()), "not an identifier"));
        }
        if params.iter().any(|earlier| earlier.name == param.name) {
            return Err(at(
                &format!("{}.name", param_path()),
                format!("duplicate parameter name `{}`", param.name),
            ));
        }
        let c_type = parse_c_type(&param.c_type, named).ok_or_else(|| {
            at(
                &format!("{}.c_type", param_path()),
                format!(
                    "parameter `{}` has unknown C type `{}` ({C_TYPE_HELP})",
                    param.name, param.c_type
                ),
            )
        })?;
        params.push(Param {
            name: param.name,
            c_type,
        });
    }
    let mut components = BTreeMap::new();
    for (component, tier) in raw.components {
        let component_path = || format!("{}.components.{component}", path());
        if !COMPONENTS.contains(&component.as_str()) {
            return Err(at(
                &component_path(),
                format!(
                    "unknown component (expected one of {})",
                    COMPONENTS.join(", ")
                ),
            ));
        }
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
    if components.is_empty() {
        return Err(at(
            &format!("{}.components", path()),
            "no component uses this symbol",
        ));
    }
    for (set, why) in &raw.undeclared_in {
        if !header_sets.iter().any(|header_set| &header_set.name == set) {
            return Err(at(
                &format!("{}.undeclared_in.{set}", path()),
                "not a header set of `header_sets`",
            ));
        }
        if why.trim().is_empty() {
            return Err(at(&format!("{}.undeclared_in.{set}", path()), "say why"));
        }
    }
    if raw
        .deprecated
        .as_ref()
        .is_some_and(|why| why.trim().is_empty())
    {
        return Err(at(&format!("{}.deprecated", path()), "say why"));
    }
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
