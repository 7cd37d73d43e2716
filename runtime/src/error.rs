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
    /// What a person called and with which numbers, for a check the runtime
    /// made before any driver call; only `Display` reads it.
    refused: Option<Refused>,
}

/// A method refused before any driver call, as `Display` tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Refused {
    /// `length` bytes at `offset` do not fit the allocation's `size` bytes.
    OutOfRange {
        method: &'static str,
        offset: usize,
        length: usize,
        size: usize,
    },
    /// A copy of no bytes, at `offset` of an allocation of `size` bytes.
    Empty {
        method: &'static str,
        offset: usize,
        size: usize,
    },
    /// The stream and the allocation belong to different contexts.
    OtherContext { method: &'static str },
    /// `allocate(0)`.
    ZeroBytes,
    /// `Context::close` with `children` streams and allocations alive.
    ChildrenLive { children: usize },
}

impl CudaError {
    /// The result used when the runtime itself refuses (no driver call
    /// failed). The driver's own codes are never negative, so it cannot be
    /// mistaken for one.
    pub const RUNTIME_REFUSAL: CUresult = -1;

    pub(crate) const fn new(operation: &'static str, result: CUresult) -> Self {
        Self {
            operation,
            result,
            refused: None,
        }
    }

    pub(crate) const fn refusal(operation: &'static str) -> Self {
        Self::new(operation, Self::RUNTIME_REFUSAL)
    }

    /// The runtime's refusal of a method a person called, before any driver call.
    pub(crate) const fn refused(operation: &'static str, refused: Refused) -> Self {
        Self {
            operation,
            result: Self::RUNTIME_REFUSAL,
            refused: Some(refused),
        }
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

/// `cuInit failed with CUDA result 100 (CUDA_ERROR_NO_DEVICE)`. A method the
/// runtime refused before any driver call is named with its numbers:
/// `copy_to_device refused: 200 bytes at offset 4000 do not fit the 4096-byte
/// allocation; no driver call was made` (the contract's operation string
/// stays in [`CudaError::operation`]). Another refusal of the runtime's own reads
/// `cuCtxPopCurrent_v2:wrong-context failed with CUDA result -1 (refused by
/// the runtime, no driver call failed)`.
impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(refused) = self.refused {
            // The contract's operation string stays in `operation()`; the
            // line a person reads names what they called and fits a terminal.
            write_refused(f, refused)?;
            return f.write_str("; no driver call was made");
        }
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

fn write_refused(f: &mut fmt::Formatter<'_>, refused: Refused) -> fmt::Result {
    match refused {
        Refused::OutOfRange {
            method,
            offset,
            length,
            size,
        } => write!(
            f,
            "{method} refused: {length} bytes at offset {offset} do not fit the \
             {size}-byte allocation"
        ),
        Refused::Empty {
            method,
            offset,
            size,
        } => write!(
            f,
            "{method} refused: 0 bytes at offset {offset} of the {size}-byte allocation \
             (an empty copy)"
        ),
        Refused::OtherContext { method } => write!(
            f,
            "{method} refused: the allocation belongs to another context than the stream"
        ),
        Refused::ZeroBytes => f.write_str("allocate refused: 0 bytes (an empty allocation)"),
        Refused::ChildrenLive { children } => write!(
            f,
            "close refused: {children} streams or allocations of the context are alive \
             (it is destroyed when the last is released)"
        ),
    }
}

impl fmt::Debug for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for CudaError {}
