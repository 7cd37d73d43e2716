//! Generated Rust from the symbol list: the symbol tables (the runtime's
//! `DriverApi`, the probe's `InventoryApi`) and the test doubles derived from
//! them (a default fake export for every symbol, for the runtime's and the
//! probe's unit tests and for the simulated driver).

use std::collections::{BTreeSet, HashMap};

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};
use syn::punctuated::Punctuated;

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

/// The symbols of a table, in list order: their index in the list, and
/// their tier in this table.
fn selected<'a>(symbols: &'a SymbolList, kind: &TableKind) -> Vec<(usize, &'a Symbol, Tier)> {
    symbols
        .symbols
        .iter()
        .enumerate()
        .filter_map(|(index, symbol)| Some((index, symbol, symbol.tier(kind.component)?)))
        .collect()
}

/// Every symbol's `export(name: T, ...)` (its export name and listed
/// parameters, for the tables) and `export(T, ...)` (the parameter types
/// only, for the test doubles, which ignore their arguments), in list order:
/// what the per-symbol macro lines carry, built once for all the files.
pub struct Signatures {
    named: Vec<TokenStream>,
    typed: Vec<TokenStream>,
}

impl Signatures {
    pub fn new(symbols: &SymbolList) -> Self {
        let mut types: HashMap<&CType, TokenStream> = HashMap::new();
        let mut named = Vec::with_capacity(symbols.symbols.len());
        let mut typed = Vec::with_capacity(symbols.symbols.len());
        for symbol in &symbols.symbols {
            let export = ident(&symbol.export);
            let mut params = Vec::with_capacity(symbol.params.len());
            let mut param_types = Vec::with_capacity(symbol.params.len());
            for param in &symbol.params {
                let name = ident(&param.name);
                let ty = types
                    .entry(&param.c_type)
                    .or_insert_with(|| rust_type(&param.c_type));
                params.push(quote!(#name: #ty));
                param_types.push(ty.clone());
            }
            named.push(quote!(#export(#(#params),*)));
            typed.push(quote!(#export(#(#param_types),*)));
        }
        Self { named, typed }
    }

    fn named(&self, index: usize) -> TokenStream {
        self.named[index].clone()
    }

    fn typed(&self, index: usize) -> TokenStream {
        self.typed[index].clone()
    }
}

/// `name!(tokens);`, built as a node: per-symbol lines are never parsed.
fn invocation(name: &str, tokens: TokenStream) -> syn::Macro {
    syn::Macro {
        path: ident(name).into(),
        bang_token: Default::default(),
        delimiter: syn::MacroDelimiter::Paren(Default::default()),
        tokens,
    }
}

fn literal(lit: impl Into<syn::Lit>) -> syn::Expr {
    syn::Expr::Lit(syn::ExprLit {
        attrs: Vec::new(),
        lit: lit.into(),
    })
}

/// The elements of the array constant `name` of a parsed scaffold.
fn array_mut<'a>(
    file: &'a mut syn::File,
    name: &str,
) -> Result<&'a mut Punctuated<syn::Expr, syn::Token![,]>> {
    file.items
        .iter_mut()
        .find_map(|item| match item {
            syn::Item::Const(constant) if constant.ident == name => match &mut *constant.expr {
                syn::Expr::Array(array) => Some(&mut array.elems),
                _ => None,
            },
            _ => None,
        })
        .ok_or_else(|| format!("internal error: the scaffold lacks the array `{name}`"))
}

/// A symbol table file (`runtime/src/driver_api.rs` or the probe's
/// `inventory_api.rs`): the names, tiers and versions as arrays in list
/// order, the pointers in one private array that `resolve` fills in a loop,
/// and one `required!`/`optional!` line per export that expands to its
/// accessor.
pub fn table(symbols: &SymbolList, signatures: &Signatures, kind: &TableKind) -> Result<Vec<u8>> {
    let selected = selected(symbols, kind);
    if selected.is_empty() {
        return Err(format!(
            "{DRIVER_SYMBOLS_PATH}: no symbol is used by component `{}`",
            kind.component.unwrap_or("any")
        ));
    }
    let struct_name = ident(kind.struct_name);
    let names_const = ident(kind.names_const);
    let required_const = format_ident!("{}", kind.names_const.replace("_NAMES", "_REQUIRED"));
    let count = Literal::usize_unsuffixed(selected.len());
    let optional_count = Literal::usize_unsuffixed(
        selected
            .iter()
            .filter(|(_, _, tier)| *tier == Tier::Optional)
            .count(),
    );
    let types = type_definitions(symbols);
    let struct_doc = format!(
        " The CUDA Driver API functions ({}), resolved from one driver image.",
        kind.description
    );
    let swap_doc = format!(
        " ```compile_fail,E0616\n fn swap(api: &mut {}) {{\n     api.pointers.swap(0, 1);\n }}\n ```",
        kind.public_path
    );
    let tokens = quote! {
        //! CUDA Driver API types and symbol table, from `templates/driver-symbols.json`.
        //!
        //! No link directive: the host loads one reviewed driver image and
        //! passes a resolver for its exports to the `resolve` constructor.
        #![cfg_attr(rustfmt, rustfmt::skip)]
        #![allow(non_camel_case_types, non_snake_case, dead_code, unused_imports, unused_macros)]

        use core::any::Any;
        use core::ffi::{c_char, c_int, c_longlong, c_uint, c_ulonglong, c_void, CStr};
        use core::fmt;
        use core::ptr::NonNull;

        #types

        /// Ordered, NUL-terminated export names, in list order.
        pub const #names_const: [&CStr; #count] = [];

        /// Whether each export of the names above is required (its absence
        /// fails the load) or optional (it loads as absent).
        pub const #required_const: [bool; #count] = [];

        /// The optional exports: (index in the names above, the driver
        /// version, in cuDriverGetVersion units, that introduced it).
        const OPTIONAL: [(usize, u32); #optional_count] = [];

        /// The names above as text, checked to be UTF-8 when this compiles.
        const EXPORT_TEXT: [&str; #count] = {
            let mut text = [""; #count];
            let mut index = 0;
            while index < #count {
                text[index] = match #names_const[index].to_str() {
                    Ok(name) => name,
                    Err(_) => panic!("an export name is not UTF-8"),
                };
                index += 1;
            }
            text
        };

        #[doc = #struct_doc]
        ///
        /// Holds the image, so the image outlives every function pointer taken
        /// from it. The pointers are private: only [`Self::resolve`] (unsafe)
        /// fills them, and each is read through its accessor, so safe code can
        /// never put one export's address in another's place:
        ///
        #[doc = #swap_doc]
        pub struct #struct_name {
            /// The address of each export of the names above (`None`: an
            /// optional export this image lacks).
            pointers: [Option<NonNull<c_void>>; #count],
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

        /// `required!(index, export(params))`: the accessor of the required
        /// export at `index` of the names above, with its listed signature.
        macro_rules! required {
            ($index:literal, $export:ident($($param:ident: $type:ty),*)) => {
                #[doc = concat!("`", stringify!($export), "`, required.")]
                #[inline]
                pub fn $export(&self) -> unsafe extern "system" fn($($param: $type),*) -> CUresult {
                    unsafe { self.get_required($index) }
                }
            };
        }

        /// `optional!(index, since, export(params))`: the accessor of the
        /// optional export at `index`, introduced in driver version `since`;
        /// it returns [`SymbolUnavailable`] naming the export when this
        /// driver lacks it.
        macro_rules! optional {
            ($index:literal, $since:literal, $export:ident($($param:ident: $type:ty),*)) => {
                #[doc = concat!("`", stringify!($export), "`, optional: [`SymbolUnavailable`] when absent.")]
                #[inline]
                pub fn $export(&self) -> Result<unsafe extern "system" fn($($param: $type),*) -> CUresult, SymbolUnavailable> {
                    unsafe { self.get($index) }.ok_or(SymbolUnavailable { export_name: EXPORT_TEXT[$index], since: $since })
                }
            };
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
                let mut pointers = [None; #count];
                for (index, name) in #names_const.into_iter().enumerate() {
                    pointers[index] = resolve(&image, name);
                    if pointers[index].is_none() && #required_const[index] {
                        return Err(MissingSymbol { export_name: EXPORT_TEXT[index] });
                    }
                }
                Ok(Self {
                    pointers,
                    image: Box::new(image),
                })
            }

            /// The driver image this table was resolved from.
            pub fn image(&self) -> &dyn Any {
                &*self.image
            }

            /// Every optional export this driver image lacks, in list order.
            pub fn unavailable(&self) -> Vec<SymbolUnavailable> {
                OPTIONAL
                    .into_iter()
                    .filter(|&(index, _)| self.pointers[index].is_none())
                    .map(|(index, since)| SymbolUnavailable { export_name: EXPORT_TEXT[index], since })
                    .collect()
            }

            /// The export at `index` as the function pointer type `F`
            /// (`None`: an optional export this image lacks).
            ///
            /// # Safety
            ///
            /// `F` must be the listed signature of the export at `index`.
            unsafe fn get<F: Copy>(&self, index: usize) -> Option<F> {
                const {
                    if core::mem::size_of::<F>() != core::mem::size_of::<*mut c_void>() {
                        panic!("an accessor's type is not a function pointer");
                    }
                }
                let address = self.pointers[index]?;
                Some(unsafe { core::mem::transmute_copy::<*mut c_void, F>(&address.as_ptr()) })
            }

            /// The required export at `index` as `F`: `resolve` loaded it.
            ///
            /// # Safety
            ///
            /// As for `get`.
            unsafe fn get_required<F: Copy>(&self, index: usize) -> F {
                match unsafe { self.get(index) } {
                    Some(function) => function,
                    None => unreachable!("`resolve` loads every required export, not `{}`", EXPORT_TEXT[index]),
                }
            }
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
    let mut file = parse_file(tokens, kind.struct_name)?;

    let mut names = Vec::with_capacity(selected.len());
    let mut required = Vec::with_capacity(selected.len());
    let mut optional = Vec::new();
    let mut accessors = Vec::with_capacity(selected.len());
    for (index, (list_index, symbol, tier)) in selected.iter().enumerate() {
        let name = std::ffi::CString::new(symbol.export.as_str())
            .map_err(|_| format!("{DRIVER_SYMBOLS_PATH}: an export name holds NUL"))?;
        names.push(literal(syn::LitCStr::new(&name, Span::call_site())));
        required.push(literal(syn::LitBool::new(
            *tier == Tier::Required,
            Span::call_site(),
        )));
        let index = Literal::usize_unsuffixed(index);
        let signature = signatures.named(*list_index);
        let mac = match tier {
            Tier::Required => invocation("required", quote!(#index, #signature)),
            Tier::Optional => {
                let since = Literal::u32_unsuffixed(symbol.since);
                optional.push(syn::Expr::Tuple(syn::ExprTuple {
                    attrs: Vec::new(),
                    paren_token: Default::default(),
                    elems: [
                        literal(syn::LitInt::from(index.clone())),
                        literal(syn::LitInt::from(since.clone())),
                    ]
                    .into_iter()
                    .collect(),
                }));
                invocation("optional", quote!(#index, #since, #signature))
            }
        };
        accessors.push(syn::ImplItem::Macro(syn::ImplItemMacro {
            attrs: Vec::new(),
            mac,
            semi_token: Some(Default::default()),
        }));
    }
    array_mut(&mut file, kind.names_const)?.extend(names);
    array_mut(&mut file, &required_const.to_string())?.extend(required);
    array_mut(&mut file, "OPTIONAL")?.extend(optional);
    let implementation = file
        .items
        .iter_mut()
        .find_map(|item| match item {
            syn::Item::Impl(implementation) if implementation.trait_.is_none() => {
                Some(implementation)
            }
            _ => None,
        })
        .ok_or("internal error: the table scaffold lacks its impl")?;
    implementation.items.extend(accessors);
    Ok(print_file(DRIVER_SYMBOLS_PATH, &file))
}

/// Default fake exports for a table's unit tests: `default_export::<H>(name)`
/// gives, for every symbol of the table, the address of an
/// `extern "system"` function with its exact signature that calls
/// `H::call(export_name)` (which logs the call and returns the configured
/// result); one `default!(name, export(parameter types));` line per symbol. A test's own fakes take
/// precedence by matching first.
pub fn unit_test_defaults(
    symbols: &SymbolList,
    signatures: &Signatures,
    kind: &TableKind,
    types_path: TokenStream,
) -> Result<Vec<u8>> {
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

        /// `default!(name, export(parameter types))`: when `name` is `export`,
        /// returns the address of its default fake, which has the listed
        /// signature.
        macro_rules! default {
            ($name:ident, $export:ident($($type:ty),*)) => {
                if $name == stringify!($export).as_bytes() {
                    unsafe extern "system" fn $export<H: DefaultCall>($(_: $type),*) -> CUresult {
                        H::call(stringify!($export))
                    }
                    return NonNull::new($export::<H> as *mut c_void);
                }
            };
        }

        /// The default fake of export `name`, or `None` for an unlisted name.
        pub fn default_export<H: DefaultCall>(name: &CStr) -> Option<NonNull<c_void>> {
            let name = name.to_bytes();
            None
        }
    };
    let mut file = parse_file(tokens, "unit test defaults")?;
    let Some(syn::Item::Fn(lookup)) = file.items.last_mut() else {
        return Err("internal error: the defaults scaffold lacks `default_export`".into());
    };
    // The defaults go before the closing `None`.
    let fallback = lookup.block.stmts.pop();
    for (list_index, _, _) in selected(symbols, kind) {
        let signature = signatures.typed(list_index);
        lookup.block.stmts.push(syn::Stmt::Macro(syn::StmtMacro {
            attrs: Vec::new(),
            mac: invocation("default", quote!(name, #signature)),
            semi_token: Some(Default::default()),
        }));
    }
    lookup.block.stmts.extend(fallback);
    Ok(print_file(DRIVER_SYMBOLS_PATH, &file))
}

/// The simulated driver's default exports (`tests/sim-driver/src/defaults.rs`):
/// one `export!` line per symbol that `hand_written` (the exports of the sim
/// driver's `lib.rs`) lacks, each a `#[no_mangle]` export with the listed
/// signature calling `crate::default_call(export_name)`.
pub fn sim_driver_defaults(
    symbols: &SymbolList,
    signatures: &Signatures,
    hand_written: &BTreeSet<String>,
) -> Result<Vec<u8>> {
    let types = type_definitions(symbols);
    let tokens = quote! {
        //! The simulated driver's default exports: every listed symbol that
        //! `lib.rs` does not implement by hand, with its listed signature.
        //! Each logs the call and returns the configured result
        //! (`crate::default_call`).
        //!
        //! # Safety
        //!
        //! Every export here is safe to call with any arguments: none is
        //! dereferenced.
        #![cfg_attr(rustfmt, rustfmt::skip)]
        #![allow(non_camel_case_types, non_snake_case, dead_code, unused_imports, unused_macros)]
        #![allow(clippy::missing_safety_doc)]

        use core::ffi::{c_char, c_int, c_longlong, c_uint, c_ulonglong, c_void};

        #types

        /// The hook every default calls (referenced even when `lib.rs` defines every export).
        const DEFAULT_CALL: fn(&'static str) -> CUresult = crate::default_call;

        /// `export!(export(parameter types))`: the default export with the
        /// listed signature.
        macro_rules! export {
            ($export:ident($($type:ty),*)) => {
                #[no_mangle]
                pub unsafe extern "system" fn $export($(_: $type),*) -> CUresult {
                    crate::default_call(stringify!($export))
                }
            };
        }
    };
    let mut file = parse_file(tokens, "sim driver defaults")?;
    for (index, symbol) in symbols.symbols.iter().enumerate() {
        if hand_written.contains(&symbol.export) {
            continue;
        }
        file.items.push(syn::Item::Macro(syn::ItemMacro {
            attrs: Vec::new(),
            ident: None,
            mac: invocation("export", signatures.typed(index)),
            semi_token: Some(Default::default()),
        }));
    }
    Ok(print_file(DRIVER_SYMBOLS_PATH, &file))
}

/// The exports `lib.rs` of the simulated driver defines by hand: its
/// `#[no_mangle]` functions, with their parameter counts. Only signatures
/// matter here: every function's body is skipped unparsed; other items are
/// parsed whole.
pub fn hand_written_exports(path: &str, source: &[u8]) -> Result<Vec<(String, usize)>> {
    let text = std::str::from_utf8(source).map_err(|_| format!("{path}: not UTF-8"))?;
    let tokens: TokenStream = text
        .parse()
        .map_err(|error| format!("{path}: does not parse: {error}"))?;
    let exports = |input: syn::parse::ParseStream| {
        input.call(syn::Attribute::parse_inner)?;
        let mut found = Vec::new();
        while !input.is_empty() {
            let attrs = input.call(syn::Attribute::parse_outer)?;
            let ahead = input.fork();
            let is_function = ahead.parse::<syn::Visibility>().is_ok()
                && ahead.parse::<syn::Signature>().is_ok()
                && ahead.peek(syn::token::Brace);
            if !is_function {
                input.parse::<syn::Item>()?;
                continue;
            }
            input.parse::<syn::Visibility>()?;
            let signature: syn::Signature = input.parse()?;
            input.parse::<proc_macro2::Group>()?;
            let exported = attrs.iter().any(|attribute| {
                attribute.path().is_ident("no_mangle")
                    || (attribute.path().is_ident("unsafe")
                        && attribute
                            .parse_args::<syn::Path>()
                            .is_ok_and(|inner| inner.is_ident("no_mangle")))
            });
            if exported {
                found.push((signature.ident.to_string(), signature.inputs.len()));
            }
        }
        Ok(found)
    };
    syn::parse::Parser::parse2(exports, tokens)
        .map_err(|error| format!("{path}: does not parse: {error}"))
}
