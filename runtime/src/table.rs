//! The symbol-table machinery, written once (PyTorch's `driver_api.h`
//! shape): [`driver_table!`] turns one entry per export into a table of
//! function pointers resolved from one driver image, with one accessor per
//! export. The generated `driver_api.rs` feeds it every listed export; the
//! probe feeds it its inventory exports; the simulated driver reads the same
//! list through [`with_driver_symbols!`](crate::with_driver_symbols).

use core::fmt;

/// A required export that the driver image lacks: the table cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingSymbol {
    /// The CUDA ABI export name, e.g. `cuCtxCreate_v2`.
    pub export_name: &'static str,
}

impl fmt::Display for MissingSymbol {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "the CUDA driver image lacks the required export `{}`",
            self.export_name
        )
    }
}

impl std::error::Error for MissingSymbol {}

/// An optional export that this driver image lacks: the table loaded, and
/// only calls of this export fail.
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

/// A symbol table over the exports listed after its header, one entry each:
/// `required SINCE export(param: Type, ...);` or `optional SINCE export(...);`
/// (`SINCE`: the driver version, in cuDriverGetVersion units, that
/// introduced the export). The parameter types are resolved where the macro
/// is invoked.
///
/// It defines, in the invoking module: the struct, whose pointers are private
/// and filled only by its unsafe `resolve`, in list order; the names and
/// tiers as public arrays; one accessor per export (a required export's
/// returns its function pointer, an optional one's
/// `Result<_, SymbolUnavailable>`); and, in test builds, `defaults`: a default
/// fake export for every listed export.
#[macro_export]
macro_rules! driver_table {
    (
        $(#[doc = $doc:literal])*
        pub struct $name:ident;
        names $names:ident;
        required $required:ident;
        public_path $path:literal;
        $($tier:ident $since:literal $export:ident($($param:ident: $type:ty),* $(,)?);)*
    ) => {
        /// Each export's index in the arrays below: its place in the list.
        #[allow(non_camel_case_types, dead_code)]
        #[derive(Clone, Copy)]
        #[repr(usize)]
        enum Slot {
            $($export),*
        }

        const COUNT: usize = [$(stringify!($export)),*].len();

        /// Ordered, NUL-terminated export names, in list order.
        pub const $names: [&core::ffi::CStr; COUNT] = [$(
            match core::ffi::CStr::from_bytes_with_nul(concat!(stringify!($export), "\0").as_bytes()) {
                Ok(name) => name,
                Err(_) => panic!("an export name holds NUL"),
            }
        ),*];

        /// Whether each export of the names above is required (its absence
        /// fails the load) or optional (it loads as absent).
        pub const $required: [bool; COUNT] = [$($crate::driver_table!(@required $tier)),*];

        /// The names above as text.
        const EXPORT_TEXT: [&str; COUNT] = [$(stringify!($export)),*];

        /// The driver version that introduced each export of the names above.
        const SINCE: [u32; COUNT] = [$($since),*];

        $(#[doc = $doc])*
        ///
        /// Holds the image, so the image outlives every function pointer taken
        /// from it. The pointers are private: only [`Self::resolve`] (unsafe)
        /// fills them, and each is read through its accessor, so safe code can
        /// never put one export's address in another's place:
        ///
        #[doc = concat!(" ```compile_fail,E0616\n fn swap(api: &mut ", $path, ") {\n     api.pointers.swap(0, 1);\n }\n ```")]
        pub struct $name {
            /// The address of each export of the names above (`None`: an
            /// optional export this image lacks).
            pointers: [Option<core::ptr::NonNull<core::ffi::c_void>>; COUNT],
            /// The driver image owner; the last field, so it is dropped last.
            image: Box<dyn core::any::Any>,
        }

        #[allow(non_snake_case, dead_code)]
        impl $name {
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
                mut resolve: impl FnMut(&I, &'static core::ffi::CStr) -> Option<core::ptr::NonNull<core::ffi::c_void>>,
            ) -> Result<Self, $crate::MissingSymbol> {
                let mut pointers = [None; COUNT];
                for (index, name) in $names.into_iter().enumerate() {
                    pointers[index] = resolve(&image, name);
                    if pointers[index].is_none() && $required[index] {
                        return Err($crate::MissingSymbol { export_name: EXPORT_TEXT[index] });
                    }
                }
                Ok(Self { pointers, image: Box::new(image) })
            }

            /// The driver image this table was resolved from.
            pub fn image(&self) -> &dyn core::any::Any {
                &*self.image
            }

            /// Every optional export this driver image lacks, in list order.
            pub fn unavailable(&self) -> Vec<$crate::SymbolUnavailable> {
                (0..COUNT)
                    .filter(|&index| !$required[index] && self.pointers[index].is_none())
                    .map(|index| $crate::SymbolUnavailable { export_name: EXPORT_TEXT[index], since: SINCE[index] })
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
                    if core::mem::size_of::<F>() != core::mem::size_of::<*mut core::ffi::c_void>() {
                        panic!("an accessor's type is not a function pointer");
                    }
                }
                let address = self.pointers[index]?;
                Some(unsafe { core::mem::transmute_copy::<*mut core::ffi::c_void, F>(&address.as_ptr()) })
            }

            $($crate::driver_table!(@accessor $tier $since $export($($param: $type),*));)*
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                formatter
                    .debug_struct(stringify!($name))
                    .field("symbols", &COUNT)
                    .finish_non_exhaustive()
            }
        }

        /// Default fake exports for every export of the table, for unit
        /// tests: each calls `H::call(export_name)`, the test's hook that
        /// logs the call and returns the result the test configured. A test
        /// overrides an export by resolving its own fake first; adding an
        /// export to the list adds its default here and breaks no test.
        #[cfg(test)]
        pub mod defaults {
            #[allow(unused_imports)]
            use super::*;

            /// What every default export does.
            pub trait DefaultCall {
                /// Logs the call of `export_name` and returns its configured result.
                fn call(export_name: &'static str) -> $crate::CUresult;
            }

            /// The default fake of export `name`, or `None` for an unlisted name.
            #[allow(non_snake_case)]
            pub fn default_export<H: DefaultCall>(
                name: &core::ffi::CStr,
            ) -> Option<core::ptr::NonNull<core::ffi::c_void>> {
                $(
                    if name.to_bytes() == stringify!($export).as_bytes() {
                        unsafe extern "system" fn $export<H: DefaultCall>($(_: $type),*) -> $crate::CUresult {
                            H::call(stringify!($export))
                        }
                        return core::ptr::NonNull::new($export::<H> as *mut core::ffi::c_void);
                    }
                )*
                None
            }
        }
    };
    (@required required) => { true };
    (@required optional) => { false };
    (@accessor required $since:literal $export:ident($($param:ident: $type:ty),*)) => {
        #[doc = concat!("`", stringify!($export), "`, required.")]
        #[inline]
        pub fn $export(&self) -> unsafe extern "system" fn($($param: $type),*) -> $crate::CUresult {
            match unsafe { self.get(Slot::$export as usize) } {
                Some(function) => function,
                None => unreachable!("`resolve` loads every required export"),
            }
        }
    };
    (@accessor optional $since:literal $export:ident($($param:ident: $type:ty),*)) => {
        #[doc = concat!("`", stringify!($export), "`, optional: [`SymbolUnavailable`](", stringify!($crate), "::SymbolUnavailable) when absent.")]
        #[inline]
        pub fn $export(
            &self,
        ) -> Result<unsafe extern "system" fn($($param: $type),*) -> $crate::CUresult, $crate::SymbolUnavailable> {
            unsafe { self.get(Slot::$export as usize) }.ok_or($crate::SymbolUnavailable {
                export_name: stringify!($export),
                since: $since,
            })
        }
    };
}
