//! Device memory allocated in a context.

use core::fmt;
use core::marker::PhantomData;
use std::rc::Rc;

use crate::context::ContextShared;
use crate::current;
use crate::driver_api::CUdeviceptr;
use crate::error::CudaError;
use crate::operation;

/// Device memory from [`Context::allocate`](crate::Context::allocate).
///
/// Holds its context, so the context is destroyed only after this memory is
/// freed. Freed exactly once: by [`DeviceAllocation::close`] (which reports
/// errors) or on drop (which ignores them).
///
/// Deliberately neither `Send` nor `Sync`:
///
/// ```compile_fail,E0277
/// fn require_send<T: Send>() {}
/// require_send::<rextio_cuda_runtime::DeviceAllocation>();
/// ```
///
/// ```compile_fail,E0277
/// fn require_sync<T: Sync>() {}
/// require_sync::<rextio_cuda_runtime::DeviceAllocation>();
/// ```
pub struct DeviceAllocation {
    context: Rc<ContextShared>,
    device_pointer: CUdeviceptr,
    byte_size: usize,
    released: bool,
    _not_send_or_sync: PhantomData<*const ()>,
}

impl DeviceAllocation {
    pub(crate) fn new(
        context: Rc<ContextShared>,
        device_pointer: CUdeviceptr,
        byte_size: usize,
    ) -> Self {
        Self {
            context,
            device_pointer,
            byte_size,
            released: false,
            _not_send_or_sync: PhantomData,
        }
    }

    /// The device address; valid while this allocation lives.
    pub fn device_pointer(&self) -> CUdeviceptr {
        self.device_pointer
    }

    /// The size requested from the driver (never 0).
    pub fn byte_size(&self) -> usize {
        self.byte_size
    }

    /// Frees the memory now (`cuMemFree_v2`).
    ///
    /// Errors: `cuCtxPushCurrent_v2` (the free is then not attempted and the
    /// memory is abandoned), `cuMemFree_v2`, `cuCtxPopCurrent_v2`,
    /// `cuCtxPopCurrent_v2:wrong-context`. Never retried, never by drop.
    pub fn close(mut self) -> Result<(), CudaError> {
        self.release()
    }

    fn release(&mut self) -> Result<(), CudaError> {
        if core::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let device_pointer = self.device_pointer;
        current::run_current(self.context.api(), self.context.handle(), |api| {
            // SAFETY: the symbol has the listed signature and the image lives
            // while the context does; the address is this live allocation,
            // freed only here (the flag above); the context is current.
            let result = unsafe { (api.cuMemFree_v2)(device_pointer) };
            CudaError::check(operation::MEM_FREE, result)
        })
    }
}

impl Drop for DeviceAllocation {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

impl fmt::Debug for DeviceAllocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceAllocation")
            .field(
                "device_pointer",
                &format_args!("{:#x}", self.device_pointer),
            )
            .field("byte_size", &self.byte_size)
            .field("context", &self.context.handle())
            .finish()
    }
}
