//! Generated Rust from the symbol list: the symbol tables (the runtime's
//! `DriverApi`, the probe's `InventoryApi`) and the test doubles derived from
//! them (a default fake export for every symbol, for the runtime's and the
//! probe's unit tests and for the simulated driver).

use std::collections::{BTreeSet, HashMap};

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::visit_mut::{self, VisitMut};

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
    let templates = TableTemplates::parse(&names_const)?;
    let mut builder = Builder::default();
    let mut absent_checks = Vec::new();
    let mut names = Vec::new();
    let mut fields = Vec::new();
    let mut resolutions = Vec::new();
    let mut accessors = Vec::new();
    for (index, (symbol, tier)) in selected.iter().enumerate() {
        let export = &symbol.export;
        let c_name = std::ffi::CString::new(export.as_str())
            .map_err(|_| format!("{DRIVER_SYMBOLS_PATH}: an export name holds NUL"))?;
        names.push(syn::Expr::Lit(syn::ExprLit {
            attrs: Vec::new(),
            lit: syn::Lit::CStr(syn::LitCStr::new(&c_name, Span::call_site())),
        }));
        let signature = builder.signature(symbol)?;
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
        let mut substitute = Substitute {
            name: ident(export),
            export,
            doc: &described,
            since: symbol.since,
            index,
            signature: &signature,
        };
        let (field, resolution, accessor) = match tier {
            Tier::Required => (
                &templates.field_required,
                &templates.resolution_required,
                &templates.accessor_required,
            ),
            Tier::Optional => {
                let field = ident(export);
                let since = Literal::u32_unsuffixed(symbol.since);
                absent_checks.push(quote! {
                    self.#field
                        .is_none()
                        .then_some(SymbolUnavailable { export_name: #export, since: #since })
                });
                (
                    &templates.field_optional,
                    &templates.resolution_optional,
                    &templates.accessor_optional,
                )
            }
        };
        let mut field = field.clone();
        substitute.visit_field_mut(&mut field);
        fields.push(field);
        let mut resolution = resolution.clone();
        substitute.visit_field_value_mut(&mut resolution);
        resolutions.push(resolution);
        let mut accessor = accessor.clone();
        substitute.visit_impl_item_fn_mut(&mut accessor);
        accessors.push(accessor);
    }
    let required: Vec<syn::Expr> = required
        .into_iter()
        .map(|value| {
            syn::Expr::Lit(syn::ExprLit {
                attrs: Vec::new(),
                lit: syn::Lit::Bool(syn::LitBool::new(value, Span::call_site())),
            })
        })
        .collect();

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
        pub const #names_const: [&CStr; #count] = [];

        /// Whether each export of the names above is required (its absence
        /// fails the load) or optional (it loads as absent).
        pub const #required_const: [bool; #count] = [];

        #[doc = #struct_doc]
        ///
        /// Holds the image, so the image outlives every function pointer taken
        /// from it. The pointers are private: only [`Self::resolve`] (unsafe)
        /// fills them, and each is read through its accessor, so safe code can
        /// never put one export's address in another's place:
        ///
        #[doc = #swap_doc]
        pub struct #struct_name {
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
    fill_table(
        &mut file,
        kind,
        TablePieces {
            names,
            required,
            fields,
            resolutions,
            accessors,
        },
    )?;
    Ok(print_file(DRIVER_SYMBOLS_PATH, &file))
}

/// The per-symbol parts of a table, put into its parsed scaffold.
struct TablePieces {
    names: Vec<syn::Expr>,
    required: Vec<syn::Expr>,
    fields: Vec<syn::Field>,
    resolutions: Vec<syn::FieldValue>,
    accessors: Vec<syn::ImplItemFn>,
}

/// Puts the arms into the one `match`, before its `_ =>` arm.
struct FillMatch {
    arms: Option<Vec<syn::Arm>>,
}

impl VisitMut for FillMatch {
    fn visit_expr_match_mut(&mut self, expression: &mut syn::ExprMatch) {
        if let Some(new) = self.arms.take() {
            let fallback = expression.arms.pop();
            expression.arms.extend(new);
            expression.arms.extend(fallback);
        }
    }
}

fn fill_table(file: &mut syn::File, kind: &TableKind, pieces: TablePieces) -> Result<()> {
    let required_const = kind.names_const.replace("_NAMES", "_REQUIRED");
    let TablePieces {
        names,
        required,
        fields,
        resolutions,
        accessors,
    } = pieces;
    let (mut names, mut required, mut fields, mut accessors) =
        (Some(names), Some(required), Some(fields), Some(accessors));
    for item in &mut file.items {
        match item {
            syn::Item::Const(constant) => {
                let elements = if constant.ident == kind.names_const {
                    names.take()
                } else if constant.ident == required_const {
                    required.take()
                } else {
                    None
                };
                if let (Some(elements), syn::Expr::Array(array)) = (elements, &mut *constant.expr) {
                    array.elems.extend(elements);
                }
            }
            syn::Item::Struct(structure) if structure.ident == kind.struct_name => {
                if let (Some(new), syn::Fields::Named(named)) =
                    (fields.take(), &mut structure.fields)
                {
                    let owner = named.named.pop().map(syn::punctuated::Pair::into_value);
                    named.named.extend(new);
                    named.named.extend(owner);
                }
            }
            syn::Item::Impl(implementation) => {
                let has_resolve = implementation.items.iter().any(
                    |member| matches!(member, syn::ImplItem::Fn(function) if function.sig.ident == "resolve"),
                );
                if has_resolve {
                    if let Some(new) = accessors.take() {
                        implementation
                            .items
                            .extend(new.into_iter().map(syn::ImplItem::Fn));
                    }
                }
            }
            _ => {}
        }
    }
    let mut fill = FillSelfLiteral {
        fields: Some(resolutions),
    };
    fill.visit_file_mut(file);
    if names.is_some()
        || required.is_some()
        || fields.is_some()
        || accessors.is_some()
        || fill.fields.is_some()
    {
        return Err(format!(
            "internal error: the {} scaffold lost a fill point",
            kind.struct_name
        ));
    }
    Ok(())
}

/// Puts the resolutions into `Self { image: ... }` in `resolve`, before `image`.
struct FillSelfLiteral {
    fields: Option<Vec<syn::FieldValue>>,
}

impl VisitMut for FillSelfLiteral {
    fn visit_expr_struct_mut(&mut self, literal: &mut syn::ExprStruct) {
        if literal.path.is_ident("Self") {
            if let Some(new) = self.fields.take() {
                let owner = literal.fields.pop().map(syn::punctuated::Pair::into_value);
                literal.fields.extend(new);
                literal.fields.extend(owner);
            }
        }
        visit_mut::visit_expr_struct_mut(self, literal);
    }
}

/// The per-symbol items of a table, parsed once with placeholders (`__NAME`,
/// `__SIG`, `"__EXPORT"`, `"__DOC"`, index `999999`, since `888888`) and
/// instantiated per symbol by [`Substitute`]: with thousands of symbols,
/// parsing each item's tokens would dominate the run.
struct TableTemplates {
    field_required: syn::Field,
    field_optional: syn::Field,
    resolution_required: syn::FieldValue,
    resolution_optional: syn::FieldValue,
    accessor_required: syn::ImplItemFn,
    accessor_optional: syn::ImplItemFn,
}

fn parse_template<T: syn::parse::Parse>(tokens: TokenStream) -> Result<T> {
    syn::parse2(tokens).map_err(|error| format!("internal error: template: {error}"))
}

impl TableTemplates {
    fn parse(names_const: &Ident) -> Result<Self> {
        let field = |tokens: TokenStream| {
            syn::Field::parse_named
                .parse2(tokens)
                .map_err(|error| format!("internal error: field template: {error}"))
        };
        Ok(Self {
            field_required: field(quote!(__NAME: __SIG))?,
            field_optional: field(quote!(__NAME: Option<__SIG>))?,
            resolution_required: parse_template(quote! {
                __NAME: lookup(&mut resolve, &image, #names_const[999999], "__EXPORT")?
            })?,
            resolution_optional: parse_template(quote! {
                __NAME: lookup_optional(&mut resolve, &image, #names_const[999999])
            })?,
            accessor_required: parse_template(quote! {
                #[doc = "__DOC"]
                #[inline]
                pub fn __NAME(&self) -> __SIG {
                    self.__NAME
                }
            })?,
            accessor_optional: parse_template(quote! {
                #[doc = "__DOC"]
                ///
                /// # Errors
                ///
                /// [`SymbolUnavailable`] naming the export when this driver lacks it.
                #[inline]
                pub fn __NAME(&self) -> Result<__SIG, SymbolUnavailable> {
                    self.__NAME.ok_or(SymbolUnavailable { export_name: "__EXPORT", since: 888888 })
                }
            })?,
        })
    }
}

/// Replaces a template's placeholders with one symbol's values.
struct Substitute<'a> {
    name: Ident,
    export: &'a str,
    doc: &'a str,
    since: u32,
    index: usize,
    signature: &'a syn::Type,
}

impl VisitMut for Substitute<'_> {
    fn visit_ident_mut(&mut self, ident: &mut Ident) {
        if ident == "__NAME" {
            *ident = self.name.clone();
        }
    }

    fn visit_type_mut(&mut self, ty: &mut syn::Type) {
        if let syn::Type::Path(path) = ty {
            if path.qself.is_none() && path.path.is_ident("__SIG") {
                *ty = self.signature.clone();
                return;
            }
        }
        visit_mut::visit_type_mut(self, ty);
    }

    fn visit_lit_mut(&mut self, lit: &mut syn::Lit) {
        let span = Span::call_site();
        match lit {
            syn::Lit::Str(text) if text.value() == "__EXPORT" => {
                *text = syn::LitStr::new(self.export, span);
            }
            syn::Lit::Str(text) if text.value() == "__DOC" => {
                *text = syn::LitStr::new(self.doc, span);
            }
            syn::Lit::ByteStr(bytes) if bytes.value() == b"__EXPORT" => {
                *bytes = syn::LitByteStr::new(self.export.as_bytes(), span);
            }
            syn::Lit::Int(number) if number.base10_digits() == "999999" => {
                *number = syn::LitInt::new(&self.index.to_string(), span);
            }
            syn::Lit::Int(number) if number.base10_digits() == "888888" => {
                *number = syn::LitInt::new(&self.since.to_string(), span);
            }
            _ => {}
        }
    }
}

/// Rust types of the list's C types, each parsed once.
#[derive(Default)]
struct Builder {
    types: HashMap<CType, syn::Type>,
}

impl Builder {
    fn ty(&mut self, c_type: &CType) -> Result<syn::Type> {
        if let Some(parsed) = self.types.get(c_type) {
            return Ok(parsed.clone());
        }
        let parsed: syn::Type = parse_template(rust_type(c_type))?;
        self.types.insert(c_type.clone(), parsed.clone());
        Ok(parsed)
    }

    /// `unsafe extern "system" fn(name: T, ...) -> CUresult`.
    fn signature(&mut self, symbol: &Symbol) -> Result<syn::Type> {
        let span = Span::call_site();
        let mut inputs = Punctuated::new();
        for param in &symbol.params {
            inputs.push(syn::BareFnArg {
                attrs: Vec::new(),
                name: Some((Ident::new(&param.name, span), Default::default())),
                ty: self.ty(&param.c_type)?,
            });
        }
        Ok(syn::Type::BareFn(syn::TypeBareFn {
            lifetimes: None,
            unsafety: Some(Default::default()),
            abi: Some(syn::Abi {
                extern_token: Default::default(),
                name: Some(syn::LitStr::new("system", span)),
            }),
            fn_token: Default::default(),
            paren_token: Default::default(),
            inputs,
            variadic: None,
            output: syn::ReturnType::Type(Default::default(), Box::new(self.ty(&symbol.returns)?)),
        }))
    }

    /// `_name: T, ...`: a default export's (unused) parameters.
    fn unused_args(&mut self, symbol: &Symbol) -> Result<Punctuated<syn::FnArg, syn::Token![,]>> {
        let mut args = Punctuated::new();
        for param in &symbol.params {
            args.push(syn::FnArg::Typed(syn::PatType {
                attrs: Vec::new(),
                pat: Box::new(syn::Pat::Ident(syn::PatIdent {
                    attrs: Vec::new(),
                    by_ref: None,
                    mutability: None,
                    ident: format_ident!("_{}", param.name),
                    subpat: None,
                })),
                colon_token: Default::default(),
                ty: Box::new(self.ty(&param.c_type)?),
            }));
        }
        Ok(args)
    }
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
    let function: syn::ItemFn = parse_template(quote! {
        unsafe extern "system" fn __NAME<H: DefaultCall>() -> CUresult {
            H::call("__EXPORT")
        }
    })?;
    let arm: syn::Arm = parse_template(quote!(b"__EXPORT" => __NAME::<H> as *const ()))?;
    let mut builder = Builder::default();
    let mut functions = Vec::new();
    let mut arms = Vec::new();
    for (symbol, _) in selected(symbols, kind) {
        let signature = builder.signature(symbol)?;
        let mut substitute = Substitute {
            name: ident(&symbol.export),
            export: &symbol.export,
            doc: "",
            since: symbol.since,
            index: 0,
            signature: &signature,
        };
        let mut item = function.clone();
        substitute.visit_item_fn_mut(&mut item);
        item.sig.inputs = builder.unused_args(symbol)?;
        functions.push(syn::Item::Fn(item));
        let mut item = arm.clone();
        substitute.visit_arm_mut(&mut item);
        arms.push(item);
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

        /// The default fake of export `name`, or `None` for an unlisted name.
        pub fn default_export<H: DefaultCall>(name: &CStr) -> Option<NonNull<c_void>> {
            let address = match name.to_bytes() {
                _ => return None,
            };
            NonNull::new(address.cast_mut().cast())
        }
    };
    let mut file = parse_file(tokens, "unit test defaults")?;
    let mut fill = FillMatch { arms: Some(arms) };
    fill.visit_file_mut(&mut file);
    if fill.arms.is_some() {
        return Err("internal error: the defaults scaffold lost its match".into());
    }
    // The functions go before `default_export`, the last item.
    let last = file.items.pop();
    file.items.extend(functions);
    file.items.extend(last);
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
    let template: syn::ItemFn = parse_template(quote! {
        #[no_mangle]
        pub unsafe extern "system" fn __NAME() -> CUresult {
            crate::default_call("__EXPORT")
        }
    })?;
    let mut builder = Builder::default();
    let mut exports = Vec::new();
    for symbol in &symbols.symbols {
        if hand_written.contains(&symbol.export) {
            continue;
        }
        let signature = builder.signature(symbol)?;
        let mut substitute = Substitute {
            name: ident(&symbol.export),
            export: &symbol.export,
            doc: "",
            since: symbol.since,
            index: 0,
            signature: &signature,
        };
        let mut item = template.clone();
        substitute.visit_item_fn_mut(&mut item);
        item.sig.inputs = builder.unused_args(symbol)?;
        exports.push(syn::Item::Fn(item));
    }
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
        #![allow(non_camel_case_types, non_snake_case, dead_code, unused_imports)]
        #![allow(clippy::missing_safety_doc)]

        use core::ffi::{c_char, c_int, c_longlong, c_uint, c_ulonglong, c_void};

        #types

        /// The hook every default calls (referenced even when `lib.rs` defines every export).
        const DEFAULT_CALL: fn(&'static str) -> CUresult = crate::default_call;
    };
    let mut file = parse_file(tokens, "sim driver defaults")?;
    file.items.extend(exports);
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
