//! Generated Rust from the symbol list: the symbol tables (the runtime's
//! `DriverApi`, the probe's `InventoryApi`) and the test doubles derived from
//! them (a default fake export for every symbol, for the runtime's and the
//! probe's unit tests and for the simulated driver).

use std::collections::BTreeSet;

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};

use super::inputs::DRIVER_SYMBOLS_PATH;
use super::rust::{parse_file, print_file};
use super::symbols::{CType, NamedKind, Symbol, SymbolList, Tier, COMPONENT_PROBE_INVENTORY};
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

/// `unsafe extern "system" fn(name: T, ...) -> CUresult`.
fn signature(symbol: &Symbol) -> TokenStream {
    let params = symbol.params.iter().map(|param| {
        let name = ident(&param.name);
        let ty = rust_type(&param.c_type);
        quote!(#name: #ty)
    });
    let returns = rust_type(&symbol.returns);
    quote!(unsafe extern "system" fn(#(#params),*) -> #returns)
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

/// The symbols of a table, in list order, with their tier in it.
fn selected<'a>(symbols: &'a SymbolList, kind: &TableKind) -> Vec<(&'a Symbol, Tier)> {
    symbols
        .symbols
        .iter()
        .filter_map(|symbol| Some((symbol, symbol.tier(kind.component)?)))
        .collect()
}

/// The two exports the swap doctest assigns: the issue's own example when
/// the table has it, otherwise its first two symbols.
fn swap_pair(selected: &[(&Symbol, Tier)]) -> (String, String) {
    let has = |name: &str| selected.iter().any(|(symbol, _)| symbol.export == name);
    if has("cuStreamDestroy_v2") && has("cuStreamSynchronize") {
        return ("cuStreamDestroy_v2".into(), "cuStreamSynchronize".into());
    }
    let first = selected[0].0.export.clone();
    let second = selected
        .get(1)
        .map_or(first.clone(), |(symbol, _)| symbol.export.clone());
    (first, second)
}

/// A symbol table file (`runtime/src/driver_api.rs` or the probe's
/// `inventory_api.rs`).
pub fn table(symbols: &SymbolList, kind: &TableKind) -> Result<Vec<u8>> {
    let selected = selected(symbols, kind);
    if selected.is_empty() {
        return Err(format!(
            "{DRIVER_SYMBOLS_PATH}: no symbol is used by component `{}`",
            kind.component.unwrap_or("any")
        ));
    }
    let struct_name = ident(kind.struct_name);
    let names_const = ident(kind.names_const);
    let count = Literal::usize_unsuffixed(selected.len());
    let types = type_definitions(symbols);
    let struct_doc = format!(
        " The CUDA Driver API functions ({}), resolved from one driver image.",
        kind.description
    );
    let (swapped, swapped_in) = swap_pair(&selected);
    let swap_doc = format!(
        " ```compile_fail,E0616\n fn swap(api: &mut {}) {{\n     api.{swapped} = api.{swapped_in};\n }}\n ```",
        kind.public_path
    );

    let required_const = format_ident!("{}", kind.names_const.replace("_NAMES", "_REQUIRED"));
    let required: Vec<bool> = selected
        .iter()
        .map(|(_, tier)| *tier == Tier::Required)
        .collect();
    let mut absent_checks = Vec::new();
    let mut names = Vec::new();
    let mut fields = Vec::new();
    let mut resolutions = Vec::new();
    let mut accessors = Vec::new();
    for (index, (symbol, tier)) in selected.iter().enumerate() {
        let export = &symbol.export;
        let field = ident(export);
        let c_name = std::ffi::CString::new(export.as_str())
            .map_err(|_| format!("{DRIVER_SYMBOLS_PATH}: an export name holds NUL"))?;
        let c_name = syn::LitCStr::new(&c_name, Span::call_site());
        names.push(quote!(#c_name));
        let index = Literal::usize_unsuffixed(index);
        let signature = signature(symbol);
        let since = Literal::u32_unsuffixed(symbol.since);
        let described = format!(
            " `{export}` (driver API `{}`, ABI version {}, since driver {}, {}).",
            symbol.api,
            symbol.abi_version,
            symbol.since,
            match tier {
                Tier::Required => "required",
                Tier::Optional => "optional",
            }
        );
        match tier {
            Tier::Required => {
                fields.push(quote!(#field: #signature));
                resolutions.push(quote! {
                    #field: lookup(&mut resolve, &image, #names_const[#index], #export)?
                });
                accessors.push(quote! {
                    #[doc = #described]
                    #[inline]
                    pub fn #field(&self) -> #signature {
                        self.#field
                    }
                });
            }
            Tier::Optional => {
                fields.push(quote!(#field: Option<#signature>));
                absent_checks.push(quote! {
                    self.#field
                        .is_none()
                        .then_some(SymbolUnavailable { export_name: #export, since: #since })
                });
                resolutions.push(quote! {
                    #field: lookup_optional(&mut resolve, &image, #names_const[#index])
                });
                accessors.push(quote! {
                    #[doc = #described]
                    ///
                    /// # Errors
                    ///
                    /// [`SymbolUnavailable`] naming the export when this driver lacks it.
                    #[inline]
                    pub fn #field(&self) -> Result<#signature, SymbolUnavailable> {
                        self.#field.ok_or(SymbolUnavailable { export_name: #export, since: #since })
                    }
                });
            }
        }
    }

    let optional_count = Literal::usize_unsuffixed(absent_checks.len());
    let tokens = quote! {
        //! CUDA Driver API types and symbol table, from `templates/driver-symbols.json`.
        //!
        //! No link directive: the host loads one reviewed driver image and
        //! passes a resolver for its exports to the `resolve` constructor.
        #![cfg_attr(rustfmt, rustfmt::skip)]
        #![allow(non_camel_case_types, non_snake_case, dead_code, unused_imports)]

        use core::any::Any;
        use core::ffi::{c_char, c_int, c_longlong, c_uint, c_ulonglong, c_void, CStr};
        use core::fmt;
        use core::ptr::NonNull;

        #types

        /// Ordered, NUL-terminated export names, in list order.
        pub const #names_const: [&CStr; #count] = [#(#names),*];

        /// Whether each export of the names above is required (its absence
        /// fails the load) or optional (it loads as absent).
        pub const #required_const: [bool; #count] = [#(#required),*];

        #[doc = #struct_doc]
        ///
        /// Holds the image, so the image outlives every function pointer taken
        /// from it. The pointers are private: only [`Self::resolve`] (unsafe)
        /// fills them, and each is read through its accessor, so safe code can
        /// never put one export's address in another's place:
        ///
        #[doc = #swap_doc]
        pub struct #struct_name {
            #(#fields,)*
            /// The driver image owner; the last field, so it is dropped last.
            image: Box<dyn Any>,
        }

        /// A required export that the driver image lacks: the table cannot be built.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct MissingSymbol {
            /// The CUDA ABI export name, e.g. `cuCtxCreate_v2`.
            pub export_name: &'static str,
        }

        impl fmt::Display for MissingSymbol {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(formatter, "the CUDA driver image lacks the required export `{}`", self.export_name)
            }
        }

        impl std::error::Error for MissingSymbol {}

        /// An optional export that this driver image lacks: the table loaded,
        /// and only calls of this export fail.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct SymbolUnavailable {
            /// The CUDA ABI export name.
            pub export_name: &'static str,
            /// The driver version (cuDriverGetVersion units) that introduced it.
            pub since: u32,
        }

        impl fmt::Display for SymbolUnavailable {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    formatter,
                    "the CUDA driver image lacks the optional export `{}` (introduced in driver version {})",
                    self.export_name, self.since
                )
            }
        }

        impl std::error::Error for SymbolUnavailable {}

        /// Resolves one export as the function pointer type `F` of its field.
        ///
        /// # Safety
        ///
        /// As for `resolve`: the export must have exactly the signature `F`.
        unsafe fn lookup_optional<I, F: Copy>(
            resolve: &mut impl FnMut(&I, &'static CStr) -> Option<NonNull<c_void>>,
            image: &I,
            name: &'static CStr,
        ) -> Option<F> {
            const {
                if core::mem::size_of::<F>() != core::mem::size_of::<*mut c_void>() {
                    panic!("a symbol field is not a function pointer");
                }
            }
            let address = resolve(image, name)?;
            Some(unsafe { core::mem::transmute_copy::<*mut c_void, F>(&address.as_ptr()) })
        }

        /// Resolves one required export; its absence is a [`MissingSymbol`].
        ///
        /// # Safety
        ///
        /// As for `lookup_optional`.
        unsafe fn lookup<I, F: Copy>(
            resolve: &mut impl FnMut(&I, &'static CStr) -> Option<NonNull<c_void>>,
            image: &I,
            name: &'static CStr,
            export_name: &'static str,
        ) -> Result<F, MissingSymbol> {
            unsafe { lookup_optional(resolve, image, name) }.ok_or(MissingSymbol { export_name })
        }

        impl #struct_name {
            /// Resolves every listed export of `image` through `resolve`, in
            /// list order, and takes ownership of `image`. An optional export
            /// that is absent loads as absent.
            ///
            /// # Errors
            ///
            /// The first required export for which `resolve` returns `None`.
            ///
            /// # Safety
            ///
            /// `resolve(&image, name)` must return the address of the export
            /// `name` of `image` with exactly the listed signature (or `None`),
            /// valid for as long as `image` lives.
            pub unsafe fn resolve<I: 'static>(
                image: I,
                mut resolve: impl FnMut(&I, &'static CStr) -> Option<NonNull<c_void>>,
            ) -> Result<Self, MissingSymbol> {
                Ok(unsafe {
                    Self {
                        #(#resolutions,)*
                        image: Box::new(image),
                    }
                })
            }

            /// The driver image this table was resolved from.
            pub fn image(&self) -> &dyn Any {
                &*self.image
            }

            /// Every optional export this driver image lacks, in list order.
            pub fn unavailable(&self) -> Vec<SymbolUnavailable> {
                let optional: [Option<SymbolUnavailable>; #optional_count] = [#(#absent_checks),*];
                optional.into_iter().flatten().collect()
            }

            #(#accessors)*
        }

        impl fmt::Debug for #struct_name {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter
                    .debug_struct(stringify!(#struct_name))
                    .field("symbols", &#names_const.len())
                    .finish_non_exhaustive()
            }
        }
    };
    let file = parse_file(tokens, kind.struct_name)?;
    Ok(print_file(DRIVER_SYMBOLS_PATH, &file))
}

/// Default fake exports for a table's unit tests: for every symbol of the
/// table, an `extern "system"` function with its exact signature that calls
/// `H::call(export_name)` (which logs the call and returns the configured
/// result), and `default_export::<H>(name)`, the address of that function.
/// A test's own fakes take precedence by matching first.
pub fn unit_test_defaults(
    symbols: &SymbolList,
    kind: &TableKind,
    types_path: TokenStream,
) -> Result<Vec<u8>> {
    let mut functions = Vec::new();
    let mut arms = Vec::new();
    for (symbol, _) in selected(symbols, kind) {
        let name = ident(&symbol.export);
        let export = &symbol.export;
        let params = symbol.params.iter().map(|param| {
            let name = format_ident!("_{}", param.name);
            let ty = rust_type(&param.c_type);
            quote!(#name: #ty)
        });
        let returns = rust_type(&symbol.returns);
        functions.push(quote! {
            unsafe extern "system" fn #name<H: DefaultCall>(#(#params),*) -> #returns {
                H::call(#export)
            }
        });
        let bytes = syn::LitByteStr::new(export.as_bytes(), Span::call_site());
        arms.push(quote!(#bytes => #name::<H> as *const ()));
    }
    let doc = format!(
        " Default fake exports for every symbol of `{}`, for unit tests.",
        kind.struct_name
    );
    let tokens = quote! {
        #![doc = #doc]
        //!
        //! Each calls `H::call(export_name)`: the test's hook logs the call
        //! and returns the result the test configured. A test overrides a
        //! symbol by resolving its own fake first; adding a symbol to the list
        //! adds its default here and breaks no test.
        #![cfg_attr(rustfmt, rustfmt::skip)]
        #![allow(non_snake_case, dead_code, unused_imports)]

        use core::ffi::{c_char, c_int, c_longlong, c_uint, c_ulonglong, c_void, CStr};
        use core::ptr::NonNull;

        use #types_path::*;

        /// What every default export does.
        pub trait DefaultCall {
            /// Logs the call of `export_name` and returns its configured result.
            fn call(export_name: &'static str) -> CUresult;
        }

        #(#functions)*

        /// The default fake of export `name`, or `None` for an unlisted name.
        pub fn default_export<H: DefaultCall>(name: &CStr) -> Option<NonNull<c_void>> {
            let address = match name.to_bytes() {
                #(#arms,)*
                _ => return None,
            };
            NonNull::new(address.cast_mut().cast())
        }
    };
    let file = parse_file(tokens, "unit test defaults")?;
    Ok(print_file(DRIVER_SYMBOLS_PATH, &file))
}

/// The simulated driver's default exports (`tests/sim-driver/src/defaults.rs`):
/// a `#[no_mangle]` export with the listed signature for every symbol that
/// `hand_written` (the exports of the sim driver's `lib.rs`) lacks, each
/// calling `crate::default_call(export_name)`.
pub fn sim_driver_defaults(
    symbols: &SymbolList,
    hand_written: &BTreeSet<String>,
) -> Result<Vec<u8>> {
    let mut exports = Vec::new();
    for symbol in &symbols.symbols {
        if hand_written.contains(&symbol.export) {
            continue;
        }
        let name = ident(&symbol.export);
        let export = &symbol.export;
        let params = symbol.params.iter().map(|param| {
            let name = format_ident!("_{}", param.name);
            let ty = rust_type(&param.c_type);
            quote!(#name: #ty)
        });
        let returns = rust_type(&symbol.returns);
        let doc = format!(" The default `{export}`: logged, returns the configured result.");
        exports.push(quote! {
            #[doc = #doc]
            ///
            /// # Safety
            ///
            /// Never dereferences its arguments.
            #[no_mangle]
            pub unsafe extern "system" fn #name(#(#params),*) -> #returns {
                crate::default_call(#export)
            }
        });
    }
    let types = type_definitions(symbols);
    let tokens = quote! {
        //! The simulated driver's default exports: every listed symbol that
        //! `lib.rs` does not implement by hand, with its listed signature.
        //! Each logs the call and returns the configured result
        //! (`crate::default_call`).
        #![cfg_attr(rustfmt, rustfmt::skip)]
        #![allow(non_camel_case_types, non_snake_case, dead_code, unused_imports)]

        use core::ffi::{c_char, c_int, c_longlong, c_uint, c_ulonglong, c_void};

        #types

        /// The hook every default calls (referenced even when `lib.rs` defines every export).
        const DEFAULT_CALL: fn(&'static str) -> CUresult = crate::default_call;

        #(#exports)*
    };
    let file = parse_file(tokens, "sim driver defaults")?;
    Ok(print_file(DRIVER_SYMBOLS_PATH, &file))
}

/// The exports `lib.rs` of the simulated driver defines by hand: its
/// `#[no_mangle]` functions, with their parameter counts.
pub fn hand_written_exports(path: &str, source: &[u8]) -> Result<Vec<(String, usize)>> {
    let text = std::str::from_utf8(source).map_err(|_| format!("{path}: not UTF-8"))?;
    let file = syn::parse_file(text).map_err(|error| format!("{path}: does not parse: {error}"))?;
    let mut found = Vec::new();
    for item in &file.items {
        let syn::Item::Fn(function) = item else {
            continue;
        };
        let exported = function.attrs.iter().any(|attribute| {
            attribute.path().is_ident("no_mangle")
                || (attribute.path().is_ident("unsafe")
                    && attribute
                        .parse_args::<syn::Path>()
                        .is_ok_and(|inner| inner.is_ident("no_mangle")))
        });
        if exported {
            found.push((function.sig.ident.to_string(), function.sig.inputs.len()));
        }
    }
    Ok(found)
}
