//! Generated Rust from the symbol list, one line per export for the
//! hand-written `driver_table!` of `runtime/src/table.rs`: the runtime's
//! `driver_api.rs` (the driver types and constants once, and every export in
//! `with_driver_symbols!`, which builds `DriverApi` and feeds the simulated
//! driver) and the probe's `inventory_api.rs` (its `InventoryApi` lines).

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::quote;

use super::inputs::DRIVER_SYMBOLS_PATH;
use super::rust::{parse_file, print_file};
use super::symbols::{CType, NamedKind, SymbolList, COMPONENT_PROBE_INVENTORY};
use crate::Result;

/// Which table to emit: the runtime's (every symbol) or the probe's.
pub struct TableKind {
    pub struct_name: &'static str,
    pub names_const: &'static str,
    /// `None`: every symbol.
    pub component: Option<&'static str>,
    pub description: &'static str,
    /// How a doctest outside the crate names the struct.
    pub public_path: &'static str,
}

impl TableKind {
    /// `driver_table!`'s header: the struct and the names of its arrays.
    fn header(&self) -> TokenStream {
        let doc = format!(
            " The CUDA Driver API functions ({}), resolved from one driver image.",
            self.description
        );
        let struct_name = ident(self.struct_name);
        let names = ident(self.names_const);
        let required = ident(&self.names_const.replace("_NAMES", "_REQUIRED"));
        let path = self.public_path;
        quote! {
            #[doc = #doc]
            pub struct #struct_name;
            names #names;
            required #required;
            public_path #path;
        }
    }
}

pub const RUNTIME_TABLE: TableKind = TableKind {
    struct_name: "DriverApi",
    names_const: "DRIVER_EXPORT_NAMES",
    component: None,
    description: "every listed symbol",
    public_path: "rextio_cuda_runtime::DriverApi",
};

pub const INVENTORY_TABLE: TableKind = TableKind {
    struct_name: "InventoryApi",
    names_const: "INVENTORY_EXPORT_NAMES",
    component: Some(COMPONENT_PROBE_INVENTORY),
    description: "the `probe-inventory` symbols",
    public_path: "rextio_cuda_probe::generated::inventory_api::InventoryApi",
};

fn ident(name: &str) -> Ident {
    Ident::new(name, Span::call_site())
}

fn rust_type(c_type: &CType) -> TokenStream {
    match c_type {
        CType::Scalar(scalar) => {
            let name = ident(scalar.rust_spelling());
            quote!(#name)
        }
        CType::Named(name) => {
            let name = ident(name);
            quote!(#name)
        }
        CType::Pointer {
            pointee,
            const_pointee,
        } => {
            let pointee = rust_type(pointee);
            if *const_pointee {
                quote!(*const #pointee)
            } else {
                quote!(*mut #pointee)
            }
        }
    }
}

/// The named types and constants, as Rust items.
fn type_definitions(symbols: &SymbolList) -> TokenStream {
    let mut items = TokenStream::new();
    for named in &symbols.types {
        let name = ident(&named.name);
        let doc = format!(" {}", named.doc);
        items.extend(match &named.kind {
            NamedKind::Handle { tag } => {
                let tag = ident(tag);
                let tag_doc = format!(" The driver's opaque `struct {tag}`; never constructed.");
                quote! {
                    #[doc = #tag_doc]
                    #[repr(C)]
                    pub struct #tag {
                        _opaque: [u8; 0],
                    }
                    #[doc = #doc]
                    pub type #name = *mut #tag;
                }
            }
            NamedKind::Integer(_) | NamedKind::Enum { .. } => {
                let integer = ident(named.rust_integer().unwrap_or("i32"));
                quote! {
                    #[doc = #doc]
                    pub type #name = #integer;
                }
            }
        });
    }
    for constant in &symbols.constants {
        let name = ident(&constant.name);
        let ty = rust_type(&constant.c_type);
        let magnitude = Literal::u128_unsuffixed(constant.value.unsigned_abs());
        let value = if constant.value < 0 {
            quote!(-#magnitude)
        } else {
            quote!(#magnitude)
        };
        let doc = format!(" {}", constant.doc);
        items.extend(quote! {
            #[doc = #doc]
            pub const #name: #ty = #value;
        });
    }
    items
}

/// One `driver_table!` line per export of the table, in list order:
/// `tier since export(name: Type, ...);`.
fn lines(symbols: &SymbolList, kind: &TableKind) -> Result<TokenStream> {
    let mut lines = TokenStream::new();
    for symbol in &symbols.symbols {
        let Some(tier) = symbol.tier(kind.component) else {
            continue;
        };
        let tier = ident(tier.name());
        let since = Literal::u32_unsuffixed(symbol.since);
        let export = ident(&symbol.export);
        let params = symbol.params.iter().map(|param| {
            let (name, ty) = (ident(&param.name), rust_type(&param.c_type));
            quote!(#name: #ty)
        });
        lines.extend(quote!(#tier #since #export(#(#params),*);));
    }
    if lines.is_empty() {
        return Err(format!(
            "{DRIVER_SYMBOLS_PATH}: no symbol is used by component `{}`",
            kind.component.unwrap_or("any")
        ));
    }
    Ok(lines)
}

/// `runtime/src/driver_api.rs`: the driver's types and constants, every
/// listed export in `with_driver_symbols!`, and `DriverApi` built from it.
pub fn runtime_table(symbols: &SymbolList) -> Result<Vec<u8>> {
    let types = type_definitions(symbols);
    let lines = lines(symbols, &RUNTIME_TABLE)?;
    let header = RUNTIME_TABLE.header();
    let tokens = quote! {
        //! CUDA Driver API types and constants, and every listed export, from
        //! `templates/driver-symbols.json`.
        #![cfg_attr(rustfmt, rustfmt::skip)]
        #![allow(non_camel_case_types, non_snake_case, unused_imports)]

        use core::ffi::{c_char, c_int, c_longlong, c_uint, c_ulonglong, c_void};

        use crate::driver_table;

        #types

        /// Passes every listed export, one `driver_table!` line each
        /// (`tier since export(params);`), to `callback!` after `prefix`.
        /// The parameter types are resolved where it is invoked.
        #[macro_export]
        macro_rules! with_driver_symbols {
            ($callback:ident ! { $($prefix:tt)* }) => {
                $callback! {
                    $($prefix)*
                    #lines
                }
            };
        }

        with_driver_symbols!(driver_table! { #header });
    };
    Ok(print_file(
        DRIVER_SYMBOLS_PATH,
        &parse_file(tokens, "driver_api.rs")?,
    ))
}

/// `probe/src/generated/inventory_api.rs`: `InventoryApi`, one line per
/// `probe-inventory` export; the types are the runtime's.
pub fn inventory_table(symbols: &SymbolList) -> Result<Vec<u8>> {
    let lines = lines(symbols, &INVENTORY_TABLE)?;
    let header = INVENTORY_TABLE.header();
    let tokens = quote! {
        //! The probe's symbol table, from `templates/driver-symbols.json`.
        #![cfg_attr(rustfmt, rustfmt::skip)]
        #![allow(unused_imports)]

        use core::ffi::{c_char, c_int, c_longlong, c_uint, c_ulonglong, c_void};

        use rextio_cuda_runtime::*;

        driver_table! {
            #header
            #lines
        }
    };
    Ok(print_file(
        DRIVER_SYMBOLS_PATH,
        &parse_file(tokens, "inventory_api.rs")?,
    ))
}
