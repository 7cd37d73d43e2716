//! The one error type: a stable operation name and a numeric CUDA result.

use core::fmt;

use crate::cuda_results::result_name;
use crate::driver_api::{CUresult, CUDA_SUCCESS};

/// A failed driver call or a check the runtime made before or after one.
///
/// Carries only a stable operation name (see [`operation`](crate::operation))
/// and the numeric `CUresult`; never text from the driver, so the message is
/// the same on every machine and safe to record. `Debug` prints what
/// `Display` does, so `?` in a `main` that returns `Box<dyn Error>` shows the
/// operation, the result and its `cuda.h` name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CudaError {
    operation: &'static str,
    result: CUresult,
}

impl CudaError {
    /// The result used when the runtime itself refuses (no driver call
    /// failed). The driver's own codes are never negative, so it cannot be
    /// mistaken for one.
    pub const RUNTIME_REFUSAL: CUresult = -1;

    pub(crate) const fn new(operation: &'static str, result: CUresult) -> Self {
        Self { operation, result }
    }

    pub(crate) const fn refusal(operation: &'static str) -> Self {
        Self::new(operation, Self::RUNTIME_REFUSAL)
    }

    /// Maps a driver result to `Ok` on `CUDA_SUCCESS`, otherwise an error
    /// naming `operation`.
    pub(crate) fn check(operation: &'static str, result: CUresult) -> Result<(), Self> {
        if result == CUDA_SUCCESS {
            Ok(())
        } else {
            Err(Self::new(operation, result))
        }
    }

    /// The stable operation name, e.g. `"cuMemAlloc_v2"` or
    /// `"cuCtxDestroy_v2:children-live"`.
    pub const fn operation(&self) -> &'static str {
        self.operation
    }

    /// The numeric CUDA result; [`CudaError::RUNTIME_REFUSAL`] (-1) when the
    /// runtime refused without a driver failure.
    pub const fn result(&self) -> CUresult {
        self.result
    }

    /// Whether the runtime refused on its own (result -1) rather than the
    /// driver returning an error.
    pub const fn is_runtime_refusal(&self) -> bool {
        self.result == Self::RUNTIME_REFUSAL
    }

    /// The `cuda.h` name of the result (`"CUDA_ERROR_NO_DEVICE"` for 100);
    /// `None` for the runtime's own refusal and for a value the headers do
    /// not define.
    pub const fn result_name(&self) -> Option<&'static str> {
        result_name(self.result)
    }
}

/// `cuInit failed with CUDA result 100 (CUDA_ERROR_NO_DEVICE)`; the runtime's
/// own refusal reads `cuMemAlloc_v2:zero-bytes failed with CUDA result -1
/// (refused by the runtime, no driver call failed)`.
impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed with CUDA result {}",
            self.operation, self.result
        )?;
        match self.result_name() {
            Some(name) => write!(f, " ({name})"),
            None if self.is_runtime_refusal() => {
                f.write_str(" (refused by the runtime, no driver call failed)")
            }
            None => f.write_str(" (a value cuda.h does not define)"),
        }
    }
}

impl fmt::Debug for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for CudaError {}
