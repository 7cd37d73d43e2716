//! Why the reviewed loader produced no driver image: [`LoadError`], with the
//! stable reason code (the spec's `loader.reason_codes`) and, for images it found, the rule
//! that refused each one.

use core::fmt;
use std::path::PathBuf;

use rextio_cuda_runtime::MissingSymbol;

use crate::rejection::Rejection;

/// The reason codes a [`LoadError`] carries, generated from the provider spec.
pub use crate::generated::reason_codes;

/// Why no symbol table could be produced. Nothing was loaded unless
/// [`LoadError::driver_loaded`] says so.
///
/// `Debug` prints what `Display` does (the reason code, then the sentence),
/// so `?` in a `main` that returns `Box<dyn Error>` says what happened.
#[derive(Clone, PartialEq, Eq)]
pub enum LoadError {
    /// The driver root is relative; nothing was looked at.
    DriverRootNotAbsolute,
    /// A driver root was given on Windows, where only System32's
    /// `nvcuda.dll` is ever loaded; nothing was looked at.
    DriverRootOnlyOnLinux,
    /// No `libcuda.so.1` exists in any directory the loader searched.
    DriverNotFound {
        /// The directories searched, in order (each for `libcuda.so.1`).
        searched: Vec<PathBuf>,
    },
    /// The driver root does not exist or cannot be resolved; nothing was
    /// looked at. Its code is `LIBCUDA_SO_NOT_FOUND`, like `DriverNotFound`.
    DriverRootNotFound {
        /// The driver root as given.
        driver_root: PathBuf,
    },
    /// Some candidate existed, but none passed review and opened.
    DriverLoadFailed {
        /// Why, for each candidate that existed, in search order.
        refusals: Vec<Refusal>,
    },
    /// `nvcuda.dll` could not be loaded from System32.
    NvcudaNotFound,
    /// This target has no reviewed driver location.
    UnsupportedTarget,
    /// The image opened but lacks a required export.
    SymbolMissing {
        /// The export's name, e.g. `cuCtxCreate_v2`.
        export_name: &'static str,
    },
}

impl LoadError {
    /// The stable reason code of this failure.
    pub fn reason_code(&self) -> &'static str {
        match self {
            Self::DriverRootNotAbsolute => reason_codes::DRIVER_ROOT_NOT_ABSOLUTE,
            Self::DriverNotFound { .. } | Self::DriverRootNotFound { .. } => {
                reason_codes::LIBCUDA_SO_NOT_FOUND
            }
            Self::DriverLoadFailed { .. } => reason_codes::LIBCUDA_SO_LOAD_FAILED,
            Self::NvcudaNotFound => reason_codes::NVCUDA_DLL_NOT_FOUND,
            Self::DriverRootOnlyOnLinux | Self::UnsupportedTarget => {
                reason_codes::UNSUPPORTED_TARGET
            }
            Self::SymbolMissing { .. } => reason_codes::REQUIRED_SYMBOL_MISSING,
        }
    }

    /// Whether a driver image was opened before the failure (its
    /// initializers ran).
    pub fn driver_loaded(&self) -> bool {
        matches!(self, Self::SymbolMissing { .. })
    }

    /// The rule that refused each image the loader found, in search order
    /// (empty unless some image was refused by a rule).
    pub fn refusing_rules(&self) -> Vec<&'static str> {
        let Self::DriverLoadFailed { refusals } = self else {
            return Vec::new();
        };
        refusals
            .iter()
            .filter_map(|refusal| match &refusal.cause {
                RefusalCause::Rule(rejection) => Some(rejection.rule()),
                RefusalCause::NotLoadable { .. } => None,
            })
            .collect()
    }

    /// The dynamic loader's own reason for the first image that passed
    /// review but did not load, paths removed (`invalid ELF header`); None
    /// when no such image was found or the loader gave no path-free reason.
    pub fn loader_reason(&self) -> Option<&str> {
        let Self::DriverLoadFailed { refusals } = self else {
            return None;
        };
        refusals.iter().find_map(|refusal| match &refusal.cause {
            RefusalCause::NotLoadable { reason } if !reason.is_empty() => Some(reason.as_str()),
            _ => None,
        })
    }
}

impl From<MissingSymbol> for LoadError {
    fn from(missing: MissingSymbol) -> Self {
        Self::SymbolMissing {
            export_name: missing.export_name,
        }
    }
}

/// The reason code, then one plain sentence; for `LIBCUDA_SO_LOAD_FAILED`
/// one more line per candidate found, naming the rule that refused it. The
/// text holds paths: it is for a person (stderr), never for a record.
impl fmt::Display for LoadError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: ", self.reason_code())?;
        match self {
            Self::DriverRootNotAbsolute => {
                formatter.write_str("the driver root is not an absolute path")
            }
            Self::DriverRootOnlyOnLinux => formatter.write_str(
                "a driver root is a Linux option; on Windows only System32's nvcuda.dll is loaded",
            ),
            Self::DriverNotFound { searched } => {
                formatter.write_str("no libcuda.so.1 in ")?;
                write_directories(formatter, searched)
            }
            Self::DriverRootNotFound { driver_root } => write!(
                formatter,
                "the driver root {} does not exist or cannot be resolved",
                driver_root.display()
            ),
            Self::DriverLoadFailed { refusals } => {
                formatter.write_str("a libcuda.so.1 exists, but none passed review and loaded")?;
                for refusal in refusals {
                    write!(formatter, "\n{refusal}")?;
                }
                Ok(())
            }
            Self::NvcudaNotFound => {
                formatter.write_str("nvcuda.dll could not be loaded from System32")
            }
            Self::UnsupportedTarget => {
                formatter.write_str("this target has no reviewed driver location")
            }
            Self::SymbolMissing { export_name } => write!(
                formatter,
                "the CUDA driver image lacks the required export `{export_name}`"
            ),
        }
    }
}

/// `a, b and c`, in order; `no directory` for none.
fn write_directories(formatter: &mut fmt::Formatter<'_>, directories: &[PathBuf]) -> fmt::Result {
    let Some((last, first)) = directories.split_last() else {
        return formatter.write_str("no directory");
    };
    for (index, directory) in first.iter().enumerate() {
        let separator = if index == 0 { "" } else { ", " };
        write!(formatter, "{separator}{}", directory.display())?;
    }
    let joint = match first.len() {
        0 => "",
        1 => " or ",
        _ => ", or ",
    };
    write!(formatter, "{joint}{}", last.display())
}

impl fmt::Debug for LoadError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, formatter)
    }
}

impl std::error::Error for LoadError {}

/// One existing candidate that was not loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The candidate path as searched (before any link was followed).
    pub candidate: PathBuf,
    /// Why it was not loaded.
    pub cause: RefusalCause,
}

/// Why an existing candidate was not loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefusalCause {
    /// A review rule refused it; nothing was loaded.
    Rule(Rejection),
    /// It passed review, but the dynamic loader could not load it.
    NotLoadable {
        /// The dynamic loader's own words with every path removed
        /// (`dlerror()`'s parts that hold no path); empty when nothing path-free remained.
        reason: String,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self.candidate.display();
        match &self.cause {
            RefusalCause::Rule(rejection) => write!(
                formatter,
                "refused {shown}: rule `{}`: {}",
                rejection.rule(),
                rejection.explanation()
            ),
            RefusalCause::NotLoadable { reason } if !reason.is_empty() => write!(
                formatter,
                "{shown} passed review, but the dynamic loader could not load it: {reason}"
            ),
            RefusalCause::NotLoadable { .. } => write!(
                formatter,
                "{shown} passed review, but the dynamic loader could not load it"
            ),
        }
    }
}
