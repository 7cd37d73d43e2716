//! Generated Rust from the symbol list: one line per export for the
//! hand-written `driver_table!` of `runtime/src/table.rs`
//! (`required 2000 cuInit(flags: c_uint);`), PyTorch's X-macro shape. The
//! runtime's `driver_api.rs` holds the types and constants (tokens laid out
//! by prettyplease) and every export (`with_driver_symbols!`); the probe's
//! `inventory_api.rs` its `InventoryApi` entries.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::inputs::DRIVER_SYMBOLS_PATH;
use super::rust::{doc, inner_doc, number, rust_file_ending_in};
use super::symbols::{NamedType, Symbol, SymbolList, Tier};
use crate::Result;

/// The C types the tables' parameters name, from `core::ffi`.
fn ffi() -> TokenStream {
    quote!(
        use core::ffi::{c_char, c_int, c_longlong, c_uchar, c_uint, c_ulonglong, c_void};
    )
}

/// `driver_table!`'s header, a line each: the struct `name` of `what`, the
/// names of its arrays, and how a doctest outside the crate names the struct.
fn header(name: &str, what: &str, names: &str, path: &str) -> Vec<String> {
    vec![
        format!("/// The CUDA Driver API functions ({what}),"),
        "/// resolved from one driver image.".to_owned(),
        format!("pub struct {name};"),
        format!("names {names}_NAMES;"),
        format!("required {names}_REQUIRED;"),
        format!("public_path {path:?};"),
    ]
}

/// One `driver_table!` entry per export that has a tier there, in list
/// order, a line each: `tier since export(name: Type, ...);`.
fn entries(symbols: &SymbolList, tier: impl Fn(&Symbol) -> Option<Tier>) -> Vec<String> {
    symbols
        .symbols
        .iter()
        .filter_map(|symbol| {
            let tier = match tier(symbol)? {
                Tier::Required => "required",
                Tier::Optional => "optional",
            };
            let params: Vec<String> = symbol
                .params
                .iter()
                .map(|param| format!("{}: {}", param.name, param.c_type.rust_spelling()))
                .collect();
            let (since, export) = (symbol.since, &symbol.export);
            Some(format!("{tier} {since} {export}({});", params.join(", ")))
        })
        .collect()
}

/// `lines`, each indented by `indent` spaces and ended.
fn indented(lines: &[String], indent: usize) -> String {
    let margin = " ".repeat(indent);
    lines
        .iter()
        .map(|line| format!("{margin}{line}\n"))
        .collect()
}

/// `runtime/src/driver_api.rs`: the driver's types and constants, every
/// listed export in `with_driver_symbols!`, and `DriverApi` built from it.
pub fn runtime_table(path: &str, symbols: &SymbolList) -> Result<Vec<u8>> {
    let types = symbols.types.iter().map(|(name, named)| {
        let name = format_ident!("{name}");
        match named {
            NamedType::Typedef { c_type, doc: text } => {
                let (doc, alias) = (doc(text), c_type.rust_type());
                quote!(#doc pub type #name = #alias;)
            }
            NamedType::Enum { bits, doc: text } => {
                let (doc, alias) = (doc(text), format_ident!("i{bits}"));
                quote!(#doc pub type #name = #alias;)
            }
            NamedType::Handle { tag, doc: text } => {
                let doc = doc(text);
                let opaque = super::rust::doc(&format!(
                    "The driver's opaque `struct {tag}`; never constructed."
                ));
                let tag = format_ident!("{tag}");
                quote! {
                    #doc
                    pub type #name = *mut #tag;
                    #opaque
                    #[repr(C)]
                    pub struct #tag {
                        _opaque: [u8; 0],
                    }
                }
            }
        }
    });
    let constants = symbols.constants.iter().map(|(name, constant)| {
        let (doc, name) = (doc(&constant.doc), format_ident!("{name}"));
        let (c_type, value) = (constant.c_type.rust_type(), number(constant.value));
        quote!(#doc pub const #name: #c_type = #value;)
    });
    let export_names = symbols.symbols.iter().map(|symbol| {
        let export = &symbol.export;
        let doc = doc(&format!("The export `{export}`."));
        let name = format_ident!("{export}");
        quote!(#doc pub const #name: &str = #export;)
    });
    let entries = entries(symbols, Symbol::tier);
    let path_in_doctests = "rextio_cuda_runtime::DriverApi";
    let header = header(
        "DriverApi",
        "every listed symbol",
        "DRIVER_EXPORT",
        path_in_doctests,
    );
    let file_doc = inner_doc(&format!(
        "CUDA Driver API types and constants, and every listed export, from\n\
         `{DRIVER_SYMBOLS_PATH}`."
    ));
    let ffi = ffi();
    let tokens = quote! {
        #file_doc
        #![allow(non_camel_case_types, non_snake_case, unused_imports)]
        use crate::driver_table;
        #ffi
        #(#types)*
        #(#constants)*
        /// Every listed export's name, one constant each, spelled as the export
        /// (`operation` names a failed call by it).
        #[allow(non_upper_case_globals)]
        pub mod export_name {
            #(#export_names)*
        }
    };
    let lists = format!(
        r#"/// Passes every listed export, one `driver_table!` entry each
/// (`tier since export(params);`), to `callback!` after `prefix`.
/// The parameter types are resolved where it is invoked.
#[macro_export]
macro_rules! with_driver_symbols {{
    ($callback:ident ! {{ $($prefix:tt)* }}) => {{
        $callback! {{
            $($prefix)*
{entries}        }}
    }};
}}
with_driver_symbols! {{
    driver_table! {{
{header}    }}
}}
"#,
        entries = indented(&entries, 12),
        header = indented(&header, 8),
    );
    rust_file_ending_in(path, DRIVER_SYMBOLS_PATH, tokens, &lists)
}

/// `probe/src/generated/inventory_api.rs`: `InventoryApi`, one entry per
/// `probe-inventory` export; the types are the runtime's.
pub fn inventory_table(path: &str, symbols: &SymbolList) -> Result<Vec<u8>> {
    let path_in_doctests = "rextio_cuda_probe::generated::inventory_api::InventoryApi";
    let what = "the `probe-inventory` symbols";
    let header = header("InventoryApi", what, "INVENTORY_EXPORT", path_in_doctests);
    let entries = entries(symbols, |symbol| symbol.components.probe_inventory);
    let file_doc = inner_doc(&format!(
        "The probe's symbol table, from `{DRIVER_SYMBOLS_PATH}`."
    ));
    let ffi = ffi();
    let tokens = quote! {
        #file_doc
        #![allow(unused_imports)]
        #ffi
        use rextio_cuda_runtime::*;
    };
    let lists = format!(
        "driver_table! {{\n{header}{entries}}}\n",
        header = indented(&header, 4),
        entries = indented(&entries, 4),
    );
    rust_file_ending_in(path, DRIVER_SYMBOLS_PATH, tokens, &lists)
}
